//! What a stream's inter-arrival gaps are measured against. For CBR with one frame per
//! departure, every gap against the target gap. For any other pattern whose departures are
//! known, each gap against its own scheduled gap: the meter regenerates the stream's schedule
//! from the compiled profile (the same pattern, rate and seed as the sender) and looks up the
//! departure of each frame by its sequence number. Where neither is known, no precision
//! figure, and the reason.

use crate::timing::departures::{Departure, Schedule};

/// The reference of one stream's gap errors.
#[derive(Debug, Clone, Default)]
pub enum GapReference {
    /// Every gap against the target gap (1 / target_pps): CBR, one frame per departure.
    #[default]
    TargetGap,
    /// Each gap against the gap between its two frames' scheduled departures: the stream's
    /// schedule and its frames' size with FCS.
    Schedule(Box<Schedule>, u32),
    /// No per-frame reference; why.
    Unknown(String),
}

impl PartialEq for GapReference {
    fn eq(&self, other: &GapReference) -> bool {
        match (self, other) {
            (GapReference::TargetGap, GapReference::TargetGap) => true,
            (GapReference::Schedule(_, a), GapReference::Schedule(_, b)) => a == b,
            (GapReference::Unknown(a), GapReference::Unknown(b)) => a == b,
            _ => false,
        }
    }
}

/// How the report names each reference (`interarrival.gap_reference`): these two, or
/// [`NONE`] followed by the reason.
pub const TARGET_GAP: &str = "target gap";
pub const SCHEDULE: &str = "schedule (regenerated from the profile and its seed)";
pub const NONE: &str = "none: ";

/// A stream's departures looked up by frame number, in increasing order.
#[derive(Debug, Clone)]
pub struct Departures {
    sched: Schedule,
    /// Bytes of one frame with FCS: a bit-rate schedule's gaps depend on them (one size).
    frame_bytes: u64,
    /// The current departure and the number of its first frame.
    cur: Departure,
    first: u64,
}

impl Departures {
    /// `frame_bytes`: every frame's size with FCS (a stream of one size; a bit-rate
    /// schedule needs it).
    pub fn new(sched: Schedule, frame_bytes: u32) -> Departures {
        let cur = sched.current();
        Departures {
            sched,
            frame_bytes: u64::from(frame_bytes),
            cur,
            first: 0,
        }
    }

    /// The scheduled departure (ns from the schedule's origin) of frame `k`, or `None` for a
    /// frame before the current departure (a reordered frame: the schedule only moves on).
    pub fn at(&mut self, k: u64) -> Option<u64> {
        if k < self.first {
            return None;
        }
        while k >= self.first + u64::from(self.cur.frames.max(1)) {
            let frames = u64::from(self.cur.frames.max(1));
            self.first += frames;
            self.sched.advance(frames * self.frame_bytes);
            self.cur = self.sched.current();
        }
        Some(self.cur.at_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::departures::{Pattern, Rate};
    use crate::timing::dist::UnitDist;

    #[test]
    fn frames_map_to_their_departures_in_bursts() {
        let s = Schedule::new(Pattern::Cbr, Rate::Pps(1000.0), 3, 0, 1);
        let mut d = Departures::new(s, 64);
        // Three frames per departure, departures 3 ms apart (3 frames at 1000 pps).
        assert_eq!(d.at(0), Some(0));
        assert_eq!(d.at(2), Some(0));
        assert_eq!(d.at(3), Some(3_000_000));
        assert_eq!(d.at(7), Some(6_000_000));
        assert_eq!(d.at(1), None, "the schedule does not go back");
    }

    #[test]
    fn a_poisson_schedule_is_regenerated_exactly() {
        let make = || {
            Schedule::new(
                Pattern::Random(UnitDist::Exponential(rand_distr::Exp::new(1.0).unwrap())),
                Rate::Pps(1e5),
                1,
                0,
                42,
            )
        };
        let mut gen = make();
        let want: Vec<u64> = (0..1000)
            .map(|_| {
                let t = gen.current().at_ns;
                gen.advance(64);
                t
            })
            .collect();
        let mut d = Departures::new(make(), 64);
        for (k, w) in want.iter().enumerate().step_by(7) {
            assert_eq!(d.at(k as u64), Some(*w), "frame {k}");
        }
    }
}
