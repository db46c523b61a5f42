//! The per-loop scheduler, sans IO: the streams of one send loop merged by next departure,
//! the `on_late` policy, throughput mode's coalescing, and the lateness and early accounting.
//!
//! It never reads a clock: the engine passes `now` and the send time in. The engine's loop
//! keeps only the clock, the busy-wait and the backend:
//!
//! ```text
//! while let Some(due) = sched.next_due(|| clock.now()) {
//!     sched.serve(due, &mut frames, &mut bufs, max_batch, |chunk| {
//!         wait until chunk.at (first chunk), send chunk.lens, say when: Sent { .. }
//!     })?;
//! }
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::generator::stream::StreamGen;
use crate::meter::lazy::LazyHist;
use crate::profile::model::Profile;
use crate::spec::OnLate;
use crate::timing::departures::Departure;

pub use crate::generator::stream::Frames;

/// What one stream did.
#[derive(Debug, Clone)]
pub struct StreamStats {
    pub sent: u64,
    /// Frames the backend refused or failed to send (not in `sent`).
    pub failed: u64,
    pub bytes: u64,
    /// How late frames left (ns after their scheduled time), paced runs.
    pub lateness: LazyHist,
    pub late_over_gap: u64,
    /// Throughput mode: how early frames left (ns before their scheduled time), and how many
    /// left more than half a gap early (a burst the batching made).
    pub early: LazyHist,
    pub early_over_half_gap: u64,
    pub late_events: u64,
    pub skipped: u64,
    pub shifted_ns: u64,
    /// First and last departure's send time (ns since start; the scheduled time when the
    /// run is not paced on a live backend) and the frames of the last departure.
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    pub last_frames: u64,
    /// Scheduled times of the first and the last departure sent: the schedule's own span
    /// over the frames that left, for the verdict's rate error.
    pub first_at: Option<u64>,
    pub last_at: u64,
    /// Frames that carried the signature, when not every frame does (a replay): the
    /// meter's loss counts against these.
    pub signed: Option<u64>,
    /// Frames sent during the warm-up (by their TX time): not metered.
    pub warmup_sent: u64,
    /// How far its schedule was moved on while paused.
    pub paused_ns: u64,
    /// Times its rate, and its frame size, were changed while it ran.
    pub rate_changes: u64,
    pub size_changes: u64,
}

impl Default for StreamStats {
    fn default() -> Self {
        StreamStats::new()
    }
}

/// Streams in one send loop above which each stream's lateness is kept to 2 significant
/// digits (1 %, about 16 KB a stream instead of up to 245 KB): 10 000 paced streams must fit.
pub const MANY_STREAMS: usize = 64;

impl StreamStats {
    pub fn new() -> StreamStats {
        StreamStats::with_digits(3)
    }

    /// Stats whose histograms keep `sigfig` significant digits.
    pub fn with_digits(sigfig: u8) -> StreamStats {
        StreamStats {
            sent: 0,
            failed: 0,
            bytes: 0,
            lateness: LazyHist::new(sigfig),
            late_over_gap: 0,
            early: LazyHist::new(sigfig),
            early_over_half_gap: 0,
            late_events: 0,
            skipped: 0,
            shifted_ns: 0,
            first_ns: None,
            last_ns: 0,
            last_frames: 0,
            first_at: None,
            last_at: 0,
            signed: None,
            warmup_sent: 0,
            paused_ns: 0,
            rate_changes: 0,
            size_changes: 0,
        }
    }

    /// The achieved rate against the rate the schedule asked for over the same frames
    /// (sent-time span against scheduled-time span); None with fewer than two departures.
    pub fn rate_error_vs_schedule(&self) -> Option<f64> {
        let (f, fa) = (self.first_ns?, self.first_at?);
        let sent_span = self.last_ns.checked_sub(f).filter(|&s| s > 0)?;
        let sched_span = self.last_at.checked_sub(fa).filter(|&s| s > 0)?;
        Some(sched_span as f64 / sent_span as f64 - 1.0)
    }

    /// Adds another part of the same stream (a lane on another send loop).
    pub fn absorb(&mut self, o: &StreamStats) {
        self.sent += o.sent;
        self.failed += o.failed;
        self.warmup_sent += o.warmup_sent;
        self.paused_ns = self.paused_ns.max(o.paused_ns);
        self.rate_changes = self.rate_changes.max(o.rate_changes);
        self.size_changes = self.size_changes.max(o.size_changes);
        self.bytes += o.bytes;
        self.lateness.add(&o.lateness);
        self.early.add(&o.early);
        self.late_over_gap += o.late_over_gap;
        self.early_over_half_gap += o.early_over_half_gap;
        self.late_events += o.late_events;
        self.skipped += o.skipped;
        self.shifted_ns += o.shifted_ns;
        self.signed = match (self.signed, o.signed) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.first_ns = min_some(self.first_ns, o.first_ns);
        if o.last_ns >= self.last_ns {
            self.last_ns = o.last_ns;
            self.last_frames = o.last_frames;
        }
        self.first_at = min_some(self.first_at, o.first_at);
        self.last_at = self.last_at.max(o.last_at);
    }
}

fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A departure being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The stream (index in the loop's profile).
    pub stream: usize,
    /// Its scheduled time, ns since the run's zero (after a shift).
    pub at: u64,
    left: usize,
    coalesce: Coalesce,
}

/// Whether a departure's chunk takes the stream's next departures too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coalesce {
    No,
    /// Throughput mode: up to the batch, whatever other streams are due (a burst).
    Batch,
    /// An untimed loop: up to the backend's batch, while no other stream is due first, so
    /// the frames' order is the same as one departure per step.
    InOrder,
}

/// One chunk handed to the backend.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// When it was sent (ns since the run's zero); read from the clock when paced or timed.
    pub t_send: u64,
    /// The time to count it at: `t_send`, or the scheduled time for a file on schedule time.
    pub when: u64,
    /// Frames the backend took.
    pub left: usize,
    /// Whether `when` is a real time (paced, stamped, or schedule time): the last send time
    /// is kept only then.
    pub timed: bool,
    /// Of the frames the backend took, those sent during the warm-up.
    pub warmup: usize,
}

/// The streams of one send loop, merged by next departure.
pub struct Scheduler {
    gens: Vec<StreamGen>,
    gaps: Vec<u64>,
    stats: Vec<StreamStats>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    on_late: OnLate,
    paced: bool,
    batch: usize,
    in_order: bool,
}

impl Scheduler {
    /// `paced`: departures wait for their time, so lateness is measured and `on_late`
    /// applies. `batch` above 1: throughput mode.
    pub fn new(profile: &Profile, paced: bool, batch: usize) -> Scheduler {
        Scheduler::with_start_lead(profile, paced, batch, 0)
    }

    /// The same, with every stream's departures `lead_ns` later than its profile says (the
    /// engine's start lead: the loop is waiting when the first departure is due).
    pub fn with_start_lead(profile: &Profile, paced: bool, batch: usize, lead_ns: u64) -> Scheduler {
        let gens: Vec<StreamGen> = profile
            .streams
            .iter()
            .map(|s| {
                let mut c = s.clone();
                c.start_offset_ns += lead_ns;
                StreamGen::new(c)
            })
            .collect();
        let gaps = profile
            .streams
            .iter()
            .map(|s| s.mean_gap_ns().max(1.0) as u64)
            .collect();
        let heap = gens
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.next_departure().map(|d| Reverse((d.at_ns, i))))
            .collect();
        let digits = if gens.len() > MANY_STREAMS { 2 } else { 3 };
        Scheduler {
            stats: gens.iter().map(|_| StreamStats::with_digits(digits)).collect(),
            gens,
            gaps,
            heap,
            on_late: profile.on_late,
            paced,
            batch: batch.max(1),
            in_order: false,
        }
    }

    /// Builds many departures of a stream per step, in the order one per step would send
    /// them (for a loop whose backend neither waits nor stamps: the frames and their order
    /// are the same, the per-departure work is per chunk).
    pub fn chunk_in_order(mut self) -> Scheduler {
        self.in_order = !self.paced;
        self
    }

    /// Whether every stream has ended.
    pub fn is_done(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn stats(&self) -> &[StreamStats] {
        &self.stats
    }

    /// The latest time a timed chunk was counted at (the streams' last send times).
    pub fn end_ns(&self) -> u64 {
        self.stats.iter().map(|s| s.last_ns).max().unwrap_or(0)
    }

    /// Ends the run's accounting: per-stream stats. `end`: the end of an untimed run, taken
    /// as every stream's last send time.
    pub fn into_stats(mut self, untimed_end: Option<u64>) -> Vec<StreamStats> {
        if let Some(end) = untimed_end {
            for st in self.stats.iter_mut().filter(|s| s.first_ns.is_some()) {
                st.last_ns = end;
            }
        }
        for (st, g) in self.stats.iter_mut().zip(&self.gens) {
            st.signed = g.signed_frames();
        }
        self.stats
    }

    /// The next departure to serve, after the `on_late` policy at `now()` (read only when
    /// paced). None: every stream has ended.
    #[inline(always)]
    pub fn next_due(&mut self, mut now: impl FnMut() -> u64) -> Option<Due> {
        loop {
            let &Reverse((mut at, si)) = self.heap.peek()?;
            if self.paced {
                let now = now();
                let gap = self.gaps[si];
                if now > at + gap {
                    self.stats[si].late_events += 1;
                    match self.on_late {
                        OnLate::CatchUp => {}
                        OnLate::Skip => {
                            self.skip_past(si, now);
                            continue;
                        }
                        OnLate::Shift => {
                            let lag = now - at;
                            self.gens[si].shift(lag);
                            self.stats[si].shifted_ns += lag;
                            at += lag;
                        }
                    }
                }
            }
            let dep = self.gens[si]
                .next_departure()
                .expect("streams in the heap have a departure");
            let coalesce = match () {
                _ if dep.frames != 1 => Coalesce::No,
                _ if self.batch > 1 => Coalesce::Batch,
                _ if self.in_order => Coalesce::InOrder,
                _ => Coalesce::No,
            };
            return Some(Due {
                stream: si,
                at,
                left: dep.frames as usize,
                coalesce,
            });
        }
    }

    /// Moves the departures of stream `si` (the one [`Scheduler::next_due`] returned) so the
    /// next is no earlier than `to` (a paused stream): nothing is sent or counted, and the
    /// time is added to its `paused_ns`.
    pub fn postpone(&mut self, si: usize, to: u64) {
        let g = &mut self.gens[si];
        if let Some(d) = g.next_departure().filter(|d| d.at_ns < to) {
            g.shift(to - d.at_ns);
            self.stats[si].paused_ns += to - d.at_ns;
        }
        let next = g.next_departure().map(|d| d.at_ns);
        self.reschedule(si, next);
    }

    /// Multiplies stream `si`'s rate by `k` (> 0) from its next departure on; its gap for
    /// lateness follows.
    pub fn scale_rate(&mut self, si: usize, k: f64) {
        self.gens[si].scale_rate(k);
        self.gaps[si] = ((self.gaps[si] as f64 / k) as u64).max(1);
        self.stats[si].rate_changes += 1;
    }

    /// Stream `si`'s frames from its next departure on come from `variants` (its frame
    /// size changed while it runs).
    pub fn replace_variants(&mut self, si: usize, variants: Vec<crate::packet::variant::Variant>) {
        self.gens[si].replace_variants(variants);
        self.stats[si].size_changes += 1;
    }

    /// Drops every departure of stream `si` already more than a gap in the past at `now`.
    fn skip_past(&mut self, si: usize, now: u64) {
        let gap = self.gaps[si];
        loop {
            let g = &mut self.gens[si];
            self.stats[si].skipped += u64::from(g.skip());
            match g.next_departure() {
                Some(d) if d.at_ns + gap < now => continue,
                next => return self.reschedule(si, next.map(|d| d.at_ns)),
            }
        }
    }

    /// The stream being served stays at the top of the heap; this moves it to its next
    /// departure with one sift (or removes it when it has ended).
    #[inline(always)]
    fn reschedule(&mut self, si: usize, next: Option<u64>) {
        match next {
            Some(at) => *self.heap.peek_mut().expect("the served stream is at the top") = Reverse((at, si)),
            None => {
                self.heap.pop();
            }
        }
    }

    /// Serves a departure: builds its frames into `out` chunk by chunk and hands each chunk
    /// to `send`, which sends it and says when. Throughput mode coalesces the stream's next
    /// single-frame departures (up to the batch) into one chunk at this departure's time;
    /// otherwise the departure's frames go in chunks of at most `max_batch`. Ends with the
    /// stream moved to its next departure, and returns its stats; `send`'s error ends it
    /// where it is.
    #[inline(always)]
    pub fn serve<F: Frames, E>(
        &mut self,
        due: Due,
        out: &mut F,
        bufs: &mut ChunkBufs,
        max_batch: usize,
        mut send: impl FnMut(Chunk<'_, F>) -> Result<Sent, E>,
    ) -> Result<&StreamStats, E> {
        let si = due.stream;
        let bound = match due.coalesce {
            Coalesce::InOrder => next_other(&mut self.heap).map(|(t, i)| (t, i, si)),
            _ => None,
        };
        let (g, st, gap) = (&mut self.gens[si], &mut self.stats[si], self.gaps[si]);
        let mut left = due.left;
        let (mut bytes, mut failed) = (0u64, 0u64);
        let mut first_chunk = true;
        while left > 0 {
            bufs.lens.clear();
            bufs.ats.clear();
            bufs.variants.clear();
            if due.coalesce != Coalesce::No {
                let limit = match due.coalesce {
                    Coalesce::Batch => self.batch.min(max_batch),
                    _ => max_batch,
                };
                bytes += coalesce(g, out, bufs, limit, bound);
                left = 0;
            } else {
                let n = left.min(max_batch);
                for j in 0..n {
                    let len = g.build(out.buf(j), due.at);
                    bufs.lens.push(len);
                    bufs.ats.push(due.at);
                    bufs.variants.push(g.last_variant());
                    bytes += len as u64 + 4;
                }
                left -= n;
            }
            let (lens, ats) = (&bufs.lens[..], &bufs.ats[..]);
            let s = send(Chunk {
                g: &mut *g,
                out: &mut *out,
                lens,
                ats,
                variants: &bufs.variants,
                at: due.at,
                first_chunk,
                first_ns: &st.first_ns,
            })?;
            first_chunk = false;
            failed += failed_bytes(lens, s.left);
            if self.paced {
                record_lateness(st, ats, s.t_send, due.at, gap, due.coalesce == Coalesce::Batch);
            }
            count(st, ats, &s);
        }
        st.bytes += bytes - failed.min(bytes);
        if due.coalesce == Coalesce::No {
            g.advance(bytes);
        }
        let next = g.next_departure().map(|d| d.at_ns);
        self.reschedule(si, next);
        Ok(&self.stats[si])
    }
}

/// Reusable buffers for a chunk's frame lengths and scheduled times.
#[derive(Debug, Default)]
pub struct ChunkBufs {
    lens: Vec<usize>,
    ats: Vec<u64>,
    variants: Vec<u16>,
}

impl ChunkBufs {
    pub fn with_capacity(n: usize) -> ChunkBufs {
        ChunkBufs {
            lens: Vec::with_capacity(n),
            ats: Vec::with_capacity(n),
            variants: Vec::with_capacity(n),
        }
    }
}

/// One chunk, built and ready to send.
pub struct Chunk<'a, F> {
    /// The stream (its template patches the TX stamp).
    pub g: &'a mut StreamGen,
    /// The buffers the frames were built in.
    pub out: &'a mut F,
    pub lens: &'a [usize],
    /// Each frame's scheduled time.
    pub ats: &'a [u64],
    /// Each frame's variant (whose template patches its TX stamp).
    pub variants: &'a [u16],
    /// The departure's scheduled time.
    pub at: u64,
    /// The departure's first chunk: the engine waits for `at` before it.
    pub first_chunk: bool,
    first_ns: &'a Option<u64>,
}

impl<F> Chunk<'_, F> {
    /// Nothing of the stream was sent before: the engine reads the clock for it.
    #[inline(always)]
    pub fn first_send(&self) -> bool {
        self.first_ns.is_none()
    }
}

/// The departure due after the top of the heap's: the first other stream's (its time and
/// index, the heap's order). None: no other stream.
fn next_other(heap: &mut BinaryHeap<Reverse<(u64, usize)>>) -> Option<(u64, usize)> {
    let top = heap.pop()?;
    let next = heap.peek().map(|r| r.0);
    heap.push(top);
    next
}

/// Builds the stream's next single-frame departures, up to `limit` and before `bound` (the
/// next other stream's departure, in the heap's order), into one chunk. The first is always
/// built. `bound` is (time, index) of that departure and this stream's index. Returns their
/// bytes (with FCS).
#[inline]
fn coalesce<F: Frames>(
    g: &mut StreamGen,
    out: &mut F,
    bufs: &mut ChunkBufs,
    limit: usize,
    bound: Option<(u64, usize, usize)>,
) -> u64 {
    let before = |at: u64| bound.is_none_or(|(bt, bi, si)| (at, si) < (bt, bi));
    let fits = |dp: &Departure, n: usize| dp.frames == 1 && n < limit && (n == 0 || before(dp.at_ns));
    // A stream of one frame size and flat ops plans the chunk's departures first and builds
    // its frames as a block: the same frames, with the per-op work in tight loops.
    if let Some(len) = g.block_len() {
        // Before the next other stream's departure: (at, this index) < (its time, its index).
        let stop = bound.map_or(u64::MAX, |(bt, bi, si)| bt.saturating_add(u64::from(si < bi)));
        if !g.plan_block(&mut bufs.ats, limit, stop) {
            while let Some(dp) = g.next_departure().filter(|dp| fits(dp, bufs.ats.len())) {
                g.reserve_one();
                bufs.ats.push(dp.at_ns);
                g.advance(len as u64 + 4);
            }
        }
        let n = bufs.ats.len();
        bufs.lens.resize(n, len);
        bufs.variants.resize(n, 0);
        g.build_block(out, &bufs.ats);
        return n as u64 * (len as u64 + 4);
    }
    let mut bytes = 0;
    while let Some(dp) = g.next_departure().filter(|dp| fits(dp, bufs.lens.len())) {
        let len = g.build(out.buf(bufs.lens.len()), dp.at_ns);
        bufs.lens.push(len);
        bufs.ats.push(dp.at_ns);
        bufs.variants.push(g.last_variant());
        bytes += len as u64 + 4;
        g.advance(len as u64 + 4);
    }
    bytes
}

/// Bytes of the frames the backend failed to send (by the chunk's mean size): they are not
/// counted as sent.
#[inline]
fn failed_bytes(lens: &[usize], left: usize) -> u64 {
    let n = lens.len();
    if left >= n {
        return 0;
    }
    let chunk: u64 = lens.iter().map(|&l| l as u64 + 4).sum();
    chunk * (n - left) as u64 / n as u64
}

/// How late (or, coalesced, how early) the chunk's frames left.
#[inline]
fn record_lateness(st: &mut StreamStats, ats: &[u64], t_send: u64, at: u64, gap: u64, coalesced: bool) {
    if coalesced {
        return record_coalesced(st, ats, t_send, gap);
    }
    let late = t_send.saturating_sub(at);
    st.lateness.record_n(late, ats.len() as u64);
    if late > gap {
        st.late_over_gap += ats.len() as u64;
    }
}

/// Counts a sent chunk.
#[inline]
fn count(st: &mut StreamStats, ats: &[u64], s: &Sent) {
    st.first_ns.get_or_insert(s.when);
    st.first_at.get_or_insert(ats[0]);
    st.last_at = ats[ats.len() - 1];
    if s.timed {
        st.last_ns = s.when;
    }
    st.last_frames = s.left as u64;
    st.sent += s.left as u64;
    st.failed += ats.len().saturating_sub(s.left) as u64;
    st.warmup_sent += s.warmup as u64;
}

/// Throughput mode: frames scheduled after the send left early (the burst batching makes).
fn record_coalesced(st: &mut StreamStats, ats: &[u64], t_send: u64, gap: u64) {
    for &a in ats {
        if t_send >= a {
            let late = t_send - a;
            st.lateness.record(late);
            st.late_over_gap += u64::from(late > gap);
        } else {
            let early = a - t_send;
            st.early.record(early);
            st.early_over_half_gap += u64::from(early > gap / 2);
        }
    }
}

#[cfg(test)]
mod tests;
