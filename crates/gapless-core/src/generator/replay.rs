//! A replay at run time: the capture read frame by frame, with the next frame held ahead so
//! its departure time is known before it is built.

use std::fmt;

use crate::profile::model::Replay;
use crate::spec::files::CaptureFrames;

/// A replay being read: the next frame is held ahead, so its time is known before it is
/// built.
pub struct ReplayState {
    replay: Replay,
    reader: Box<dyn CaptureFrames>,
    next: Vec<u8>,
    next_ts: Option<u64>,
    /// Loops finished so far.
    loop_idx: u64,
    /// Departure time of the last frame, relative to the stream's start (file timing kept
    /// monotonic).
    last_rel: u64,
    rewrite: crate::packet::rewrite::Rewriter,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
}

impl fmt::Debug for ReplayState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayState")
            .field("replay", &self.replay)
            .field("loop_idx", &self.loop_idx)
            .finish()
    }
}

impl ReplayState {
    /// Opens the capture at its first frame. A capture that cannot be opened again (it was
    /// read at compile time) replays nothing.
    pub fn new(replay: Replay) -> ReplayState {
        let reader = replay
            .source
            .open()
            .unwrap_or_else(|_| Box::new(Empty) as Box<dyn CaptureFrames>);
        let rng = <rand_xoshiro::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(replay.seed);
        let mut s = ReplayState {
            rewrite: replay.rewrite.clone(),
            rng,
            replay,
            reader,
            next: Vec::with_capacity(2048),
            next_ts: None,
            loop_idx: 0,
            last_rel: 0,
        };
        s.read_ahead();
        s
    }

    fn read_ahead(&mut self) {
        self.next_ts = self.reader.next_frame(&mut self.next);
        if self.next_ts.is_none() {
            self.loop_idx += 1;
            if self.replay.loops.is_none_or(|l| self.loop_idx < l) && self.replay.stats.frames > 0 {
                if let Ok(r) = self.replay.source.open() {
                    self.reader = r;
                    self.next_ts = self.reader.next_frame(&mut self.next);
                }
            }
        }
    }

    /// Whether a frame is left.
    #[inline]
    pub fn has_next(&self) -> bool {
        self.next_ts.is_some()
    }

    /// The next frame's departure time relative to the stream's start, by the file's timing
    /// (never before the frame before it).
    #[inline]
    pub fn next_rel_ns(&self) -> Option<u64> {
        let ts = self.next_ts?;
        let r = &self.replay;
        let in_file = ts.saturating_sub(r.stats.first_ns) as f64 + self.loop_idx as f64 * r.loop_period_ns();
        Some(((in_file / r.speed) as u64).max(self.last_rel))
    }

    /// Copies the next frame into `buf`, reads ahead, and returns its length.
    #[inline]
    pub fn take(&mut self, buf: &mut [u8]) -> usize {
        if let Some(t) = self.next_rel_ns() {
            self.last_rel = t;
        }
        let len = self.next.len().min(buf.len());
        buf[..len].copy_from_slice(&self.next[..len]);
        if !self.rewrite.is_empty() && len > 0 {
            self.rewrite.apply(&mut buf[..len], &mut self.rng);
        }
        self.read_ahead();
        len
    }

    /// The length of the next frame (0 at the end).
    pub fn next_len(&self) -> usize {
        if self.has_next() {
            self.next.len()
        } else {
            0
        }
    }
}

struct Empty;
impl CaptureFrames for Empty {
    fn next_frame(&mut self, _: &mut Vec<u8>) -> Option<u64> {
        None
    }
}
