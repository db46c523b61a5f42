//! Loss, reordering and duplicates from 32-bit sequence numbers (RFC 4737 terms).
//!
//! Sequence numbers are unwrapped against the highest one seen (a signed 32-bit
//! difference), so a stream may wrap past 2^32 any number of times. A bitmap of the last
//! [`WINDOW`] numbers below the highest tells a late arrival (reordered: it fills a hole)
//! from a copy (duplicated: its bit is already set), however late the copy comes within
//! the window. Older arrivals than the window are counted apart (`beyond_window`).

use serde::{Deserialize, Serialize};

/// Sequence numbers tracked below the highest one seen.
pub const WINDOW: u64 = 1 << 16;
/// A number more than this far ahead of the highest seen is not taken as loss at once: it is
/// wild (one bad frame), or the start of a restart (a new sender run).
pub const JUMP: i64 = 1 << 20;
/// Consecutive numbers after a far jump that make it a restart: a new epoch begins there.
const RESTART_RUN: usize = 3;

/// What one sequence number turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqEvent {
    /// The next expected number, or a jump ahead of it (`gap` numbers skipped, lost so far).
    InOrder { gap: u64 },
    /// Below the highest seen and not seen before: a late arrival that fills a hole.
    Reordered { extent: u64 },
    /// Seen before.
    Duplicate,
    /// So far below the highest seen that the window no longer says whether it is a copy.
    BeyondWindow,
    /// Far ahead of the stream's numbers: a wild number, or the start of a restart.
    Wild,
}

/// The counters of one stream.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SeqSummary {
    /// First and highest sequence number received (as on the wire).
    pub first_seq: u32,
    pub highest_seq: u32,
    /// Distinct numbers between the lowest and the highest received, both included.
    pub expected: u64,
    /// Distinct numbers received.
    pub unique: u64,
    /// expected - unique: missing numbers between the lowest and highest received. Loss after
    /// the last received frame is not visible here; a joined run (`run --rx`) adds it from
    /// the sender's count.
    pub lost: u64,
    /// Frames that arrived after a higher number (RFC 4737 Type-P-Reordered).
    pub reordered: u64,
    /// The largest (highest - late number) of a reordered frame.
    pub reorder_extent_max: u64,
    /// Copies of a number already received.
    pub duplicated: u64,
    /// Arrivals more than the window (65536 numbers) behind the highest; counted as received.
    pub beyond_window: u64,
    /// Times the numbers jumped far and went on from there (a sender restarted, or another
    /// run's frames): each starts a new epoch, and the counts above add up the epochs.
    #[serde(default)]
    pub restarts: u64,
    /// Frames whose number was far from the stream's (over 2^20 ahead) and not followed:
    /// received, but left out of loss and reordering.
    #[serde(default)]
    pub wild: u64,
}

/// The sequence tracker of one stream (or lane): epochs of numbers, with wild numbers and
/// restarts told apart from loss.
#[derive(Debug, Clone, Default)]
pub struct SeqTracker {
    cur: Epoch,
    /// The loss episodes and reordered runs ([`super::episodes`]).
    eps: super::episodes::EpisodeTracker,
    /// Arrival of the highest number (ns).
    max_ns: u64,
    /// The closed epochs, added up.
    prior: Option<SeqSummary>,
    restarts: u64,
    wild: u64,
    /// Far numbers that may start a new epoch: (number, ahead of the highest).
    pending: Vec<(u32, bool)>,
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker::default()
    }

    /// Takes one received sequence number (with no arrival time: episodes span 0 ns).
    #[inline]
    pub fn observe(&mut self, seq: u32) -> SeqEvent {
        self.observe_at(seq, 0)
    }

    /// Takes one received sequence number that arrived at `t` (ns): the counts, and the
    /// loss episodes with their times.
    #[inline]
    pub fn observe_at(&mut self, seq: u32, t: u64) -> SeqEvent {
        let (max, max_ns) = (self.cur.max, self.max_ns);
        let ev = self.observe_counts(seq);
        match ev {
            SeqEvent::InOrder { gap } => {
                if gap > 0 && self.cur.max == max + gap + 1 {
                    self.eps.hole(max + 1, max + gap, max_ns, t);
                }
                self.max_ns = t;
                self.eps.in_order();
                self.eps.slide(self.cur.max.saturating_sub(WINDOW));
            }
            SeqEvent::Reordered { extent } => self.eps.late(self.cur.max - extent, t),
            _ => {}
        }
        ev
    }

    /// The stream's loss episodes so far, this lane alone.
    pub fn episodes(&self) -> &super::episodes::EpisodeTracker {
        &self.eps
    }

    /// Arrival of the highest number (ns).
    pub fn highest_ns(&self) -> u64 {
        self.max_ns
    }

    #[inline]
    fn observe_counts(&mut self, seq: u32) -> SeqEvent {
        if let Some(&(last, ahead)) = self.pending.last() {
            if (1..=64).contains(&(seq.wrapping_sub(last) as i32)) && self.cur.far(seq) == Some(ahead) {
                if self.pending.len() + 1 >= RESTART_RUN {
                    // This one is not counted as far: the restart replays it in the new epoch.
                    self.pending.push((seq, ahead));
                    self.restart_with_last_uncounted();
                    return SeqEvent::InOrder { gap: 0 };
                }
                self.pending.push((seq, ahead));
                return self.count_far(seq, ahead);
            }
            self.pending.clear();
        }
        if let Some(ahead) = self.cur.far(seq) {
            self.pending.push((seq, ahead));
            return self.count_far(seq, ahead);
        }
        self.cur.observe(seq)
    }

    /// A far number, for now: wild when ahead, beyond the window when behind.
    fn count_far(&mut self, seq: u32, ahead: bool) -> SeqEvent {
        if ahead {
            self.wild += 1;
            SeqEvent::Wild
        } else {
            self.cur.observe(seq)
        }
    }

    /// The far numbers went on: close the epoch and start one at them. The last pending
    /// number was not counted yet.
    fn restart_with_last_uncounted(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        let counted = pending.len() - 1;
        for &(_, ahead) in &pending[..counted] {
            if ahead {
                self.wild -= 1;
            } else {
                self.cur.beyond -= 1;
                self.cur.unique -= 1;
            }
        }
        let closed = self.cur.summary();
        self.prior = merge(&[self.prior.take(), closed].into_iter().flatten().collect::<Vec<_>>());
        self.cur = Epoch::default();
        self.eps.close_all();
        self.restarts += 1;
        for (s, _) in pending {
            self.cur.observe(s);
        }
    }

    /// Distinct numbers from the lowest to the highest received, epochs added up.
    pub fn expected(&self) -> u64 {
        self.prior.as_ref().map_or(0, |p| p.expected) + self.cur.expected()
    }

    /// Distinct numbers received, epochs added up.
    pub fn unique(&self) -> u64 {
        self.prior.as_ref().map_or(0, |p| p.unique) + self.cur.unique
    }

    pub fn summary(&self) -> Option<SeqSummary> {
        let parts: Vec<SeqSummary> = [self.prior.clone(), self.cur.summary()].into_iter().flatten().collect();
        let mut m = merge(&parts)?;
        if let Some(c) = self.cur.summary() {
            m.highest_seq = c.highest_seq;
        }
        m.restarts = self.restarts;
        m.wild = self.wild;
        Some(m)
    }
}

/// One epoch: numbers unwrapped against the highest seen, and the window's bitmap.
#[derive(Debug, Clone)]
struct Epoch {
    started: bool,
    first_raw: u32,
    max_raw: u32,
    /// Unwrapped numbers: the first one received is 2^40, so earlier ones stay positive.
    max: u64,
    min: u64,
    bits: Vec<u64>,
    unique: u64,
    reordered: u64,
    extent_max: u64,
    dup: u64,
    beyond: u64,
}

impl Default for Epoch {
    fn default() -> Self {
        Self::new()
    }
}

const ORIGIN: u64 = 1 << 40;

impl Epoch {
    fn new() -> Epoch {
        Epoch {
            started: false,
            first_raw: 0,
            max_raw: 0,
            max: ORIGIN,
            min: ORIGIN,
            // Grown as the numbers need it, up to the window: a stream that sends little
            // costs little.
            bits: Vec::new(),
            unique: 0,
            reordered: 0,
            extent_max: 0,
            dup: 0,
            beyond: 0,
        }
    }

    #[inline]
    fn bit(&self, u: u64) -> bool {
        let i = (u % WINDOW) as usize;
        self.bits.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    #[inline]
    fn set(&mut self, u: u64) {
        let i = (u % WINDOW) as usize;
        if i / 64 >= self.bits.len() {
            self.bits.resize(i / 64 + 1, 0);
        }
        self.bits[i / 64] |= 1 << (i % 64);
    }

    #[inline]
    fn clear(&mut self, u: u64) {
        let i = (u % WINDOW) as usize;
        if let Some(w) = self.bits.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// Whether `seq` is far from this epoch's numbers: Some(true) over [`JUMP`] ahead of the
    /// highest, Some(false) beyond the window behind it.
    #[inline]
    fn far(&self, seq: u32) -> Option<bool> {
        if !self.started {
            return None;
        }
        let d = seq.wrapping_sub(self.max_raw) as i32 as i64;
        if d > JUMP {
            Some(true)
        } else if d <= -(WINDOW as i64) {
            Some(false)
        } else {
            None
        }
    }

    /// Takes one received sequence number.
    #[inline]
    fn observe(&mut self, seq: u32) -> SeqEvent {
        if !self.started {
            self.started = true;
            self.first_raw = seq;
            self.max_raw = seq;
            self.unique = 1;
            self.set(ORIGIN);
            return SeqEvent::InOrder { gap: 0 };
        }
        let d = seq.wrapping_sub(self.max_raw) as i32 as i64;
        let u = (self.max as i64 + d) as u64;
        if d > 0 {
            let gap = d as u64 - 1;
            // Forget the numbers the window slides past.
            if gap == 0 {
                // The next number: its bit is set below, and no other slides out.
            } else if gap + 1 >= WINDOW {
                self.bits.fill(0);
            } else {
                for v in self.max + 1..u {
                    self.clear(v);
                }
                self.clear(u);
            }
            self.set(u);
            self.max = u;
            self.max_raw = seq;
            self.unique += 1;
            return SeqEvent::InOrder { gap };
        }
        if d == 0 {
            self.dup += 1;
            return SeqEvent::Duplicate;
        }
        let extent = (-d) as u64;
        if extent >= WINDOW {
            // Counted apart; it does not stretch the range (that would count every number
            // between as lost).
            self.beyond += 1;
            self.unique += 1;
            return SeqEvent::BeyondWindow;
        }
        if self.bit(u) {
            self.dup += 1;
            return SeqEvent::Duplicate;
        }
        self.set(u);
        self.unique += 1;
        self.reordered += 1;
        self.extent_max = self.extent_max.max(extent);
        self.min = self.min.min(u);
        SeqEvent::Reordered { extent }
    }

    /// Distinct numbers from the lowest to the highest received so far (0 before the first).
    fn expected(&self) -> u64 {
        if self.started {
            self.max - self.min + 1
        } else {
            0
        }
    }

    fn summary(&self) -> Option<SeqSummary> {
        if !self.started {
            return None;
        }
        let expected = self.max - self.min + 1;
        Some(SeqSummary {
            first_seq: self.first_raw,
            highest_seq: self.max_raw,
            expected,
            unique: self.unique,
            lost: expected.saturating_sub(self.unique),
            reordered: self.reordered,
            reorder_extent_max: self.extent_max,
            duplicated: self.dup,
            beyond_window: self.beyond,
            ..Default::default()
        })
    }
}

/// Adds up the lanes of one stream (a stream split over send loops).
pub fn merge(parts: &[SeqSummary]) -> Option<SeqSummary> {
    let mut it = parts.iter();
    let mut m = it.next()?.clone();
    for p in it {
        m.first_seq = m.first_seq.min(p.first_seq);
        m.highest_seq = m.highest_seq.max(p.highest_seq);
        m.expected += p.expected;
        m.unique += p.unique;
        m.lost += p.lost;
        m.reordered += p.reordered;
        m.reorder_extent_max = m.reorder_extent_max.max(p.reorder_extent_max);
        m.duplicated += p.duplicated;
        m.beyond_window += p.beyond_window;
        m.restarts += p.restarts;
        m.wild += p.wild;
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: &[u32]) -> SeqSummary {
        let mut t = SeqTracker::new();
        for &s in seqs {
            t.observe(s);
        }
        t.summary().unwrap()
    }

    #[test]
    fn in_order_has_nothing_to_report() {
        let s = run(&[0, 1, 2, 3, 4]);
        assert_eq!(
            (s.expected, s.unique, s.lost, s.reordered, s.duplicated),
            (5, 5, 0, 0, 0)
        );
    }

    #[test]
    fn loss_reorder_and_duplicates_by_hand() {
        // 0 1 3 2 (reordered, extent 1) 5 (4 lost) 5 (dup) 6 1 (late dup) 9 (7, 8 lost) 7 (reordered, extent 2)
        let s = run(&[0, 1, 3, 2, 5, 5, 6, 1, 9, 7]);
        assert_eq!(s.expected, 10);
        assert_eq!(s.unique, 8);
        assert_eq!(s.lost, 2); // 4 and 8
        assert_eq!(s.reordered, 2);
        assert_eq!(s.reorder_extent_max, 2);
        assert_eq!(s.duplicated, 2);
        assert_eq!(s.highest_seq, 9);
    }

    #[test]
    fn wraps_past_u32_max() {
        let s = run(&[u32::MAX - 2, u32::MAX - 1, 0, u32::MAX, 1, 2, 2]);
        assert_eq!(s.expected, 6);
        assert_eq!(s.unique, 6);
        assert_eq!(s.lost, 0);
        assert_eq!(s.reordered, 1);
        assert_eq!(s.duplicated, 1);
        assert_eq!((s.first_seq, s.highest_seq), (u32::MAX - 2, 2));
    }

    #[test]
    fn a_late_duplicate_far_back_in_the_window_is_still_a_duplicate() {
        let mut seqs: Vec<u32> = (0..50_000).collect();
        seqs.push(17);
        let s = run(&seqs);
        assert_eq!((s.duplicated, s.reordered, s.lost), (1, 0, 0));
    }

    #[test]
    fn a_big_jump_clears_the_window_and_counts_the_hole() {
        let s = run(&[0, 1, 200_000, 200_001, 199_999]);
        assert_eq!(s.lost, 200_000 - 2 - 1);
        assert_eq!(s.reordered, 1);
        assert_eq!(s.duplicated, 0);
        let s = run(&[100_000, 1]);
        assert_eq!(s.beyond_window, 1);
        assert_eq!(s.unique, 2);
    }

    #[test]
    fn a_wild_number_is_not_loss() {
        // One frame numbered 2^31 - 1000 among 0..1000 (the case that reported 2147482633 lost).
        let mut seqs: Vec<u32> = (0..500).collect();
        seqs.push((1 << 31) - 1000);
        seqs.extend(500..1000);
        let s = run(&seqs);
        assert_eq!((s.lost, s.wild, s.restarts, s.unique), (0, 1, 0, 1000), "{s:?}");
    }

    #[test]
    fn a_restart_starts_a_new_epoch() {
        // A meter that spans two sender runs: 0..5000, then 0..3000 again, with 2 lost.
        let mut seqs: Vec<u32> = (0..5000).collect();
        seqs.extend((0..3000).filter(|&s| s != 10 && s != 20));
        let s = run(&seqs);
        assert_eq!(s.restarts, 0, "a restart from 0 after 5000 is within the window: {s:?}");
        // After more than a window, the old numbers are far behind: a restart.
        let mut seqs: Vec<u32> = (0..100_000).collect();
        seqs.extend((0..3000).filter(|&s| s != 10 && s != 20));
        let s = run(&seqs);
        assert_eq!(
            (s.restarts, s.unique, s.lost, s.beyond_window, s.wild),
            (1, 102_998, 2, 0, 0),
            "{s:?}"
        );
        // Forward: a jump of 2^24 that goes on is a restart too.
        let mut seqs: Vec<u32> = (0..100).collect();
        seqs.extend(1 << 24..(1 << 24) + 100);
        let s = run(&seqs);
        assert_eq!((s.restarts, s.unique, s.lost, s.wild), (1, 200, 0, 0), "{s:?}");
    }

    #[test]
    fn a_reordered_first_frame_extends_the_range_down() {
        let s = run(&[5, 6, 4, 7]);
        assert_eq!((s.expected, s.unique, s.lost, s.reordered), (4, 4, 0, 1));
    }
}
