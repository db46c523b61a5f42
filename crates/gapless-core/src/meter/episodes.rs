//! Loss episodes: runs of consecutive sequence numbers still missing, each with the arrival
//! times of the frames around it, and runs of reordered frames.
//!
//! A jump in the numbers opens a hole: the numbers skipped, between the frame that was the
//! highest (the last frame before the hole) and the one that jumped (the first after it). A
//! late frame fills its number: the hole shrinks, or splits in two, and a hole it empties is
//! no episode at all (reordering is not loss). A hole a whole window (the sequence tracker's
//! `seq::WINDOW`) below the highest number can no longer be filled (a later copy counts as
//! beyond the window), so it becomes a final episode: the open holes are bounded by the window, and at most
//! [`MAX_OPEN`] are kept open (past that the oldest is final early). The per-frame cost is
//! one comparison (is the oldest hole final yet?) and two stores; holes are made and filled
//! on the cold path.
//!
//! An episode's span is the arrival gap around it: from the last frame before it to the first
//! frame after it, on the meter's clock. When late frames bound it, the span is taken as it
//! is (never below 0). A stream split over several send loops has a sequence per lane: their
//! episodes are merged by time ([`summarize`]), so that one outage is one episode.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Holes kept open at most per lane.
pub const MAX_OPEN: usize = 4096;
/// Final episodes kept with their times per lane, for merging lanes by time; past this they
/// are counted (`not_merged`) but not kept.
pub const MAX_KEPT: usize = 1 << 16;

/// One episode: frames missing between two arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    /// Arrival of the last frame before it, and of the first frame after it (ns).
    pub from_ns: u64,
    pub to_ns: u64,
    pub frames: u64,
}

impl Episode {
    pub fn span_ns(&self) -> u64 {
        self.to_ns.saturating_sub(self.from_ns)
    }
}

#[derive(Debug, Clone, Copy)]
struct Hole {
    /// The missing numbers, both included (unwrapped).
    start: u64,
    end: u64,
    before_ns: u64,
    after_ns: u64,
}

impl Hole {
    fn episode(&self) -> Episode {
        Episode {
            from_ns: self.before_ns,
            to_ns: self.after_ns,
            frames: self.end - self.start + 1,
        }
    }
}

/// The episodes of one lane (see the module's doc).
#[derive(Debug, Clone, Default)]
pub struct EpisodeTracker {
    open: VecDeque<Hole>,
    done: Vec<Episode>,
    /// Final episodes past [`MAX_KEPT`]: how many, and their frames.
    over: (u64, u64),
    /// The reordered frames in a row just now, the runs of them, and the longest run.
    run: u64,
    runs: u64,
    run_max: u64,
}

impl EpisodeTracker {
    /// Numbers `start..=end` were skipped: the highest before them arrived at `before_ns`,
    /// the number after them at `after_ns`.
    #[cold]
    pub fn hole(&mut self, start: u64, end: u64, before_ns: u64, after_ns: u64) {
        self.open.push_back(Hole {
            start,
            end,
            before_ns,
            after_ns,
        });
        if self.open.len() > MAX_OPEN {
            self.finalize_front();
        }
    }

    /// Numbers up to `floor` can no longer be filled (the highest less the window): holes
    /// below it are final.
    #[inline]
    pub fn slide(&mut self, floor: u64) {
        while self.open.front().is_some_and(|h| h.end <= floor) {
            self.finalize_front();
        }
    }

    #[cold]
    fn finalize_front(&mut self) {
        if let Some(h) = self.open.pop_front() {
            self.keep(h.episode());
        }
    }

    fn keep(&mut self, e: Episode) {
        if self.done.len() < MAX_KEPT {
            self.done.push(e);
        } else {
            self.over.0 += 1;
            self.over.1 += e.frames;
        }
    }

    /// A frame in order (or ahead): a run of reordered frames, if any, ends.
    #[inline]
    pub fn in_order(&mut self) {
        self.run = 0;
    }

    /// A late frame, number `u`, arrived at `t`: it fills its number in the hole holding it,
    /// and counts in the current run of reordered frames.
    #[cold]
    pub fn late(&mut self, u: u64, t: u64) {
        self.runs += u64::from(self.run == 0);
        self.run += 1;
        self.run_max = self.run_max.max(self.run);
        let i = self.open.partition_point(|h| h.end < u);
        let Some(h) = self.open.get_mut(i).filter(|h| h.start <= u) else {
            return;
        };
        match (u == h.start, u == h.end) {
            (true, true) => {
                self.open.remove(i);
            }
            (true, false) => {
                h.start += 1;
                h.before_ns = t;
            }
            (false, true) => {
                h.end -= 1;
                h.after_ns = t;
            }
            (false, false) => {
                let right = Hole {
                    start: u + 1,
                    end: h.end,
                    before_ns: t,
                    after_ns: h.after_ns,
                };
                h.end = u - 1;
                h.after_ns = t;
                self.open.insert(i + 1, right);
                if self.open.len() > MAX_OPEN {
                    self.finalize_front();
                }
            }
        }
    }

    /// The numbers start over (a new epoch): every open hole is final.
    pub fn close_all(&mut self) {
        while !self.open.is_empty() {
            self.finalize_front();
        }
        self.run = 0;
    }

    /// Every episode so far: the final ones and the holes still open (missing now).
    pub fn episodes(&self) -> impl Iterator<Item = Episode> + '_ {
        self.done.iter().copied().chain(self.open.iter().map(Hole::episode))
    }
}

/// Episodes kept with their times in a summary ([`LossEpisodes::outages`]): the longest.
pub const OUTAGES_KEPT: usize = 64;

/// One episode as a summary keeps it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Outage {
    /// Arrival of the last frame before it and of the first frame after it (ns).
    pub from_ns: u64,
    pub to_ns: u64,
    pub frames: u64,
    /// The sender's own stalls around it (joined runs: `result::mark_sender_stalls`), ns:
    /// not 0, the outage may be the sender's (its catch-up burst), not the device's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sender_stall_ns: u64,
}

/// Episodes of one length class: `frames_min..=frames_max` (powers of two).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EpisodeBin {
    pub frames_min: u64,
    pub frames_max: u64,
    pub count: u64,
}

/// Frames sent and never received outside the holes: after the highest number received
/// (still missing when the run ended), or before the first. Joined runs only: it needs the
/// sender's count.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct OpenEpisode {
    /// Arrival of the highest number received: the last frame before the tail (ns).
    pub from_ns: u64,
    pub lost_frames: u64,
}

/// A stream's loss episodes, lanes merged by time (see the module's doc).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LossEpisodes {
    pub count: u64,
    /// Frames in them (the sequence figures' `lost`).
    pub lost_frames: u64,
    /// The episode of the most frames (the longer span on a tie): its frames, its span and
    /// the arrival of the frame before it.
    pub longest_frames: u64,
    pub longest_ns: u64,
    pub longest_from_ns: u64,
    /// The spans added up.
    pub total_ns: u64,
    /// Episodes by length in frames, powers of two (1, 2-3, 4-7, ...); empty classes left out.
    pub histogram: Vec<EpisodeBin>,
    /// Runs of reordered frames (consecutive arrivals each below the highest number), and
    /// the longest run.
    pub reorder_runs: u64,
    pub reorder_run_max: u64,
    /// Arrival of the highest number received (ns), where the tail starts.
    pub highest_rx_ns: u64,
    /// The tail, when frames were still missing at the end (joined runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenEpisode>,
    /// The longest episodes ([`OUTAGES_KEPT`] at most, by frames), in time order: where the
    /// outages were, for convergence figures.
    #[serde(default)]
    pub outages: Vec<Outage>,
    /// Episodes past the per-lane bound ([`MAX_KEPT`]): counted in `count` and
    /// `lost_frames`, not merged by time nor in the histogram.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_merged: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The lanes' episodes merged by time: episodes whose spans overlap are one outage.
/// `highest_rx_ns` is the arrival of the stream's highest number.
pub fn summarize(lanes: &[&EpisodeTracker], highest_rx_ns: u64) -> LossEpisodes {
    let mut all: Vec<Episode> = lanes.iter().flat_map(|l| l.episodes()).collect();
    all.sort_unstable_by_key(|e| (e.from_ns, e.to_ns));
    let mut merged: Vec<Episode> = Vec::with_capacity(all.len());
    for e in all {
        match merged.last_mut() {
            // One lane's episodes touch at the frame between them; only an overlap merges.
            Some(m) if lanes.len() > 1 && e.from_ns < m.to_ns => {
                m.to_ns = m.to_ns.max(e.to_ns);
                m.frames += e.frames;
            }
            _ => merged.push(e),
        }
    }
    let mut s = LossEpisodes {
        highest_rx_ns,
        ..Default::default()
    };
    let mut bins = [0u64; 64];
    for e in &merged {
        s.count += 1;
        s.lost_frames += e.frames;
        s.total_ns += e.span_ns();
        if (e.frames, e.span_ns()) > (s.longest_frames, s.longest_ns) {
            (s.longest_frames, s.longest_ns, s.longest_from_ns) = (e.frames, e.span_ns(), e.from_ns);
        }
        bins[63 - e.frames.leading_zeros() as usize] += 1;
    }
    let mut longest: Vec<&Episode> = merged.iter().collect();
    longest.sort_unstable_by_key(|e| std::cmp::Reverse((e.frames, e.span_ns())));
    longest.truncate(OUTAGES_KEPT);
    longest.sort_unstable_by_key(|e| e.from_ns);
    s.outages = longest
        .iter()
        .map(|e| Outage {
            from_ns: e.from_ns,
            to_ns: e.to_ns,
            frames: e.frames,
            sender_stall_ns: 0,
        })
        .collect();
    s.histogram = (0..64)
        .filter(|&k| bins[k] > 0)
        .map(|k| EpisodeBin {
            frames_min: 1 << k,
            frames_max: (1u64 << k).wrapping_mul(2).wrapping_sub(1),
            count: bins[k],
        })
        .collect();
    for l in lanes {
        s.count += l.over.0;
        s.lost_frames += l.over.1;
        s.not_merged += l.over.0;
        s.reorder_runs += l.runs;
        s.reorder_run_max = s.reorder_run_max.max(l.run_max);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_frame_shrinks_or_splits_its_hole_and_an_emptied_hole_is_no_episode() {
        let mut t = EpisodeTracker::default();
        t.hole(10, 14, 100, 200); // 10..=14 missing
        t.late(12, 300); // splits: 10..=11 and 13..=14
        t.late(10, 310); // 11 left, after 310
        t.late(14, 320); // 13 left
        t.hole(20, 20, 400, 500);
        t.late(20, 600); // emptied
        t.in_order();
        let got: Vec<_> = t.episodes().collect();
        assert_eq!(
            got,
            vec![
                Episode {
                    from_ns: 310,
                    to_ns: 300,
                    frames: 1
                },
                Episode {
                    from_ns: 300,
                    to_ns: 320,
                    frames: 1
                }
            ]
        );
        let s = summarize(&[&t], 0);
        assert_eq!(
            (s.count, s.lost_frames, s.reorder_runs, s.reorder_run_max),
            (2, 2, 1, 4),
            "{s:?}"
        );
    }

    #[test]
    fn holes_a_window_below_are_final_and_lanes_merge_by_time() {
        let mut a = EpisodeTracker::default();
        a.hole(5, 9, 1_000, 11_000);
        a.slide(8);
        assert_eq!(a.open.len(), 1);
        a.slide(9);
        assert_eq!((a.open.len(), a.done.len()), (0, 1));
        // Two lanes lose the same 10 µs outage, interleaved: one episode of both lanes' frames.
        let mut b = EpisodeTracker::default();
        b.hole(3, 7, 1_500, 11_500);
        b.hole(100, 100, 50_000, 52_000);
        let s = summarize(&[&a, &b], 60_000);
        assert_eq!(
            (
                s.count,
                s.lost_frames,
                s.longest_frames,
                s.longest_ns,
                s.longest_from_ns
            ),
            (2, 11, 10, 10_500, 1_000),
            "{s:?}"
        );
        assert_eq!(s.total_ns, 10_500 + 2_000);
        assert_eq!(
            s.outages,
            vec![
                Outage {
                    from_ns: 1_000,
                    to_ns: 11_500,
                    frames: 10,
                    sender_stall_ns: 0
                },
                Outage {
                    from_ns: 50_000,
                    to_ns: 52_000,
                    frames: 1,
                    sender_stall_ns: 0
                }
            ]
        );
        assert_eq!(
            s.histogram,
            vec![
                EpisodeBin {
                    frames_min: 1,
                    frames_max: 1,
                    count: 1
                },
                EpisodeBin {
                    frames_min: 8,
                    frames_max: 15,
                    count: 1
                }
            ]
        );
        // One lane: episodes that touch at the frame between them stay two.
        let mut c = EpisodeTracker::default();
        c.hole(1, 1, 0, 10);
        c.hole(3, 3, 10, 20);
        assert_eq!(summarize(&[&c], 0).count, 2);
    }

    #[test]
    fn the_open_holes_are_bounded() {
        let mut t = EpisodeTracker::default();
        for k in 0..(MAX_OPEN as u64 + 10) {
            t.hole(2 * k, 2 * k, k, k + 1);
        }
        assert_eq!((t.open.len(), t.done.len()), (MAX_OPEN, 10));
        assert_eq!(summarize(&[&t], 0).count, MAX_OPEN as u64 + 10);
    }
}
