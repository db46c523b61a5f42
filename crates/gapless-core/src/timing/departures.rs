//! Departure-time generators.
//!
//! A schedule yields absolute departure times (ns since the run's start) and how many frames
//! leave at each. Time is accumulated with compensated (Kahan) summation from the stream's
//! start, never as "now + gap", so errors do not build up and the mean rate is exact.
//!
//! Every pattern draws each gap as `cost x X`, where `cost` is the time the departure's frames
//! take at the target rate (frames / pps, or bits / bps for the actual frame sizes) and `X` is a
//! unit-mean random variable (1 for CBR). The target mean rate therefore holds for any size
//! mix and any gap distribution.

use std::sync::Arc;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::timing::curve::{Cursor, RateCurve};
use crate::timing::dist::{ScaledDist, UnitDist};
use crate::timing::selfsim::OnOffAggregate;

/// L1 overhead per frame: preamble + SFD (8 B) and inter-frame gap (12 B).
pub const L1_OVERHEAD_BYTES: u64 = 20;

/// The target rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Pps(f64),
    /// Bits per second, counting `overhead_bytes` extra per frame (20 at L1, 0 at L2).
    Bps {
        bps: f64,
        overhead_bytes: u64,
    },
}

impl Rate {
    /// Time in ns that `frames` frames of `bytes` bytes in total (with FCS) take at this rate.
    #[inline]
    pub fn cost_ns(&self, frames: u32, bytes: u64) -> f64 {
        match *self {
            Rate::Pps(pps) => f64::from(frames) * 1e9 / pps,
            Rate::Bps { bps, overhead_bytes } => ((bytes + overhead_bytes * u64::from(frames)) * 8) as f64 * 1e9 / bps,
        }
    }

    /// Frames per second for frames of `mean_size` bytes (with FCS).
    pub fn pps_for(&self, mean_size: f64) -> f64 {
        match *self {
            Rate::Pps(p) => p,
            Rate::Bps { bps, overhead_bytes } => bps / ((mean_size + overhead_bytes as f64) * 8.0),
        }
    }
}

/// The departure pattern, compiled.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// Constant gaps.
    Cbr,
    /// i.i.d. gaps with this unit-mean shape (exponential = Poisson).
    Random(UnitDist),
    /// On/off: bursts of `size` frames, each followed by an idle time of shape `off` whose
    /// mean keeps the rate. Inside a burst frames leave `peak_gap_ns` apart, or all at once.
    OnOff {
        size: ScaledDist,
        off: UnitDist,
        peak_gap_ns: Option<f64>,
    },
    /// The aggregate of Pareto on/off sources (self-similar): its own times, one frame each.
    OnOffAggregate(Box<OnOffAggregate>),
}

/// One departure: an absolute time and the frames that leave at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub at_ns: u64,
    pub frames: u32,
}

/// A running schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    pattern: Pattern,
    rate: Rate,
    burst: u32,
    /// Time of the current departure relative to `origin_ns`, and its Kahan compensation.
    t: f64,
    comp: f64,
    origin_ns: u64,
    rng: Xoshiro256PlusPlus,
    cur: Departure,
    // On/off state.
    burst_left: u32,
    burst_start: f64,
    burst_frames: u32,
    burst_bytes: u64,
    /// A time-varying rate: `t` is operational time, and departures leave at Λ⁻¹(t).
    curve: Option<Arc<RateCurve>>,
    cursor: Cursor,
    /// CBR at a whole number of frames per second: exact integer times instead of `t`.
    exact: Option<Exact>,
}

/// CBR at a whole number of frames per second, its times as integers: departure k leaves at
/// floor(k · frames · 10^9 / pps) ns, the exact value (the Kahan sum can land one ns either
/// side of a whole number), kept with one add and one compare per departure (the quotient
/// and remainder of a departure's time, as Bresenham's line steps).
#[derive(Debug, Clone, Copy)]
struct Exact {
    pps: u64,
    /// A departure of `burst` frames: its time's quotient and remainder by `pps`.
    q: u64,
    r: u64,
    /// The current departure: ns since the origin, and the remainder (in 1/pps ns).
    at: u64,
    rem: u64,
}

impl Exact {
    /// For CBR at `rate` in departures of `burst` frames, when the rate is whole frames per
    /// second (up to 10^12).
    fn new(pattern: &Pattern, rate: Rate, burst: u32) -> Option<Exact> {
        let (Pattern::Cbr, Rate::Pps(p)) = (pattern, rate) else {
            return None;
        };
        if !(1.0..=1e12).contains(&p) || p.fract() != 0.0 {
            return None;
        }
        let pps = p as u64;
        let ns = u64::from(burst) * 1_000_000_000;
        Some(Exact {
            pps,
            q: ns / pps,
            r: ns % pps,
            at: 0,
            rem: 0,
        })
    }

    /// Moves past a departure of `frames` frames (`burst` the usual count).
    #[inline(always)]
    fn step(&mut self, frames: u32, burst: u32) {
        if frames == burst {
            self.at += self.q;
            self.rem += self.r;
        } else {
            let ns = u64::from(frames) * 1_000_000_000;
            self.at += ns / self.pps;
            self.rem += ns % self.pps;
        }
        if self.rem >= self.pps {
            self.rem -= self.pps;
            self.at += 1;
        }
    }

    /// The current time as a float (for a schedule that leaves the integer path).
    fn as_f64(&self) -> f64 {
        self.at as f64 + self.rem as f64 / self.pps as f64
    }
}

impl Schedule {
    /// A schedule that starts at `start_ns`. `burst` is the frames per departure (CBR and
    /// random patterns). The seed fixes every random draw.
    pub fn new(pattern: Pattern, rate: Rate, burst: u32, start_ns: u64, seed: u64) -> Schedule {
        let exact = Exact::new(&pattern, rate, burst.max(1));
        let mut s = Schedule {
            pattern,
            rate,
            burst: burst.max(1),
            t: 0.0,
            comp: 0.0,
            origin_ns: start_ns,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            cur: Departure {
                at_ns: start_ns,
                frames: burst.max(1),
            },
            burst_left: 0,
            burst_start: 0.0,
            burst_frames: 0,
            burst_bytes: 0,
            curve: None,
            cursor: Cursor::default(),
            exact,
        };
        s.start_burst_if_onoff();
        if let Pattern::OnOffAggregate(a) = &mut s.pattern {
            s.t = a.next_time();
            s.cur.frames = 1;
            s.set_at();
        }
        s
    }

    /// The same schedule with its rate times `curve`'s factor over time.
    pub fn with_curve(mut self, curve: Option<Arc<RateCurve>>) -> Schedule {
        if curve.is_some() {
            self.leave_exact();
        }
        self.curve = curve;
        self.set_at();
        self
    }

    fn start_burst_if_onoff(&mut self) {
        if let Pattern::OnOff { size, peak_gap_ns, .. } = &self.pattern {
            let b = size.sample(&mut self.rng).round().max(1.0) as u32;
            self.burst_start = self.t;
            self.burst_frames = b;
            self.burst_bytes = 0;
            if peak_gap_ns.is_some() {
                self.burst_left = b;
                self.cur.frames = 1;
            } else {
                self.burst_left = 1;
                self.cur.frames = b;
            }
        }
    }

    /// The next departure.
    #[inline]
    pub fn current(&self) -> Departure {
        self.cur
    }

    #[inline]
    fn add(&mut self, gap: f64) {
        let y = gap - self.comp;
        let t = self.t + y;
        self.comp = (t - self.t) - y;
        self.t = t;
    }

    #[inline(always)]
    fn set_at(&mut self) {
        if let Some(e) = &self.exact {
            self.cur.at_ns = self.origin_ns + e.at;
            return;
        }
        let t = match &self.curve {
            None => self.t,
            Some(c) => c.inverse(self.t, &mut self.cursor),
        };
        // Through i64: one conversion instruction (a u64 needs a branch for 2^63 and up,
        // which no schedule reaches); a negative time still clamps to 0.
        self.cur.at_ns = self.origin_ns + t.max(0.0) as i64 as u64;
    }

    /// Moves past the current departure, whose frames had `bytes` bytes in total (with FCS).
    #[inline(always)]
    pub fn advance(&mut self, bytes: u64) {
        // CBR at whole frames per second, the common case, in line.
        if let Some(e) = &mut self.exact {
            e.step(self.cur.frames, self.burst);
            self.cur.frames = self.burst;
            return self.set_at();
        }
        self.advance_any(bytes);
    }

    /// Plans up to `ats.len()` departures of one frame each on the integer CBR path, into
    /// `ats`, and moves past them: the first if it is before `end`, each later one while it
    /// is before both `end` and `stop`. Returns how many, or None (nothing planned) when the
    /// schedule is not CBR at whole frames per second with bursts of one.
    #[inline]
    pub fn plan_exact(&mut self, ats: &mut [u64], end: u64, stop: u64) -> Option<usize> {
        if self.burst != 1 || self.cur.frames != 1 {
            return None;
        }
        // A copy in registers, written back once.
        let mut e = self.exact?;
        let (origin, later) = (self.origin_ns, end.min(stop));
        let mut n = 0;
        let mut bound = end;
        for out in ats.iter_mut() {
            let at = origin + e.at;
            if at >= bound {
                break;
            }
            *out = at;
            e.step(1, 1);
            n += 1;
            bound = later;
        }
        self.exact = Some(e);
        self.set_at();
        Some(n)
    }

    /// Goes on from the current departure with the float time `t` (a rate that changes).
    fn leave_exact(&mut self) {
        if let Some(e) = self.exact.take() {
            self.t = e.as_f64();
            self.comp = 0.0;
        }
    }

    fn advance_any(&mut self, bytes: u64) {
        let frames = self.cur.frames;
        if let Pattern::OnOffAggregate(a) = &mut self.pattern {
            self.t = a.next_time();
        }
        match &self.pattern {
            Pattern::Cbr => {
                let g = self.rate.cost_ns(frames, bytes);
                self.add(g);
            }
            Pattern::Random(d) => {
                let x = d.sample(&mut self.rng);
                let g = self.rate.cost_ns(frames, bytes) * x;
                self.add(g);
            }
            Pattern::OnOffAggregate(_) => {}
            Pattern::OnOff { off, peak_gap_ns, .. } => {
                self.burst_bytes += bytes;
                self.burst_left -= 1;
                if self.burst_left > 0 {
                    let g = peak_gap_ns.expect("multi-departure bursts have a peak gap");
                    self.add(g);
                } else {
                    let cycle = self.rate.cost_ns(self.burst_frames, self.burst_bytes) * off.sample(&mut self.rng);
                    let on = peak_gap_ns.map_or(0.0, |g| g * f64::from(self.burst_frames));
                    let next = self.burst_start + cycle.max(on);
                    let elapsed = self.t - self.burst_start;
                    self.add(next - self.burst_start - elapsed);
                    self.start_burst_if_onoff();
                }
            }
        }
        match self.pattern {
            Pattern::OnOff { .. } => {}
            Pattern::OnOffAggregate(_) => self.cur.frames = 1,
            _ => self.cur.frames = self.burst,
        }
        self.set_at();
    }

    /// Multiplies the rate by `k` from the next departure on (a rate changed while the
    /// stream runs); the current departure keeps its time.
    pub fn scale_rate(&mut self, k: f64) {
        self.leave_exact();
        self.rate = match self.rate {
            Rate::Pps(p) => Rate::Pps(p * k),
            Rate::Bps { bps, overhead_bytes } => Rate::Bps {
                bps: bps * k,
                overhead_bytes,
            },
        };
    }

    /// Moves the rest of the schedule later by `ns` (the `shift` late policy).
    pub fn shift(&mut self, ns: u64) {
        self.origin_ns += ns;
        self.set_at();
    }

    /// Caps the frames of the current departure (the last one of a counted stream).
    pub fn cap_frames(&mut self, max: u32) {
        self.cur.frames = self.cur.frames.min(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_times_are_exact_multiples() {
        let mut s = Schedule::new(Pattern::Cbr, Rate::Pps(3.0), 1, 5, 1);
        let mut at = Vec::new();
        for _ in 0..4 {
            at.push(s.current().at_ns);
            s.advance(64);
        }
        assert_eq!(at, [5, 5 + 333_333_333, 5 + 666_666_666, 5 + 1_000_000_000]);
    }

    #[test]
    fn whole_rates_are_exact_where_the_float_sum_may_miss() {
        // floor(k · 10^9 / pps) for every k, including the last frame capped to fewer.
        for (pps, burst) in [
            (3u64, 1u32),
            (7, 1),
            (14_880_952, 1),
            (999_999_937, 1),
            (1_000, 4),
            (3, 5),
        ] {
            let mut s = Schedule::new(Pattern::Cbr, Rate::Pps(pps as f64), burst, 11, 1);
            let mut k = 0u64;
            for _ in 0..10_000 {
                let want = 11 + (u128::from(k) * 1_000_000_000 / u128::from(pps)) as u64;
                assert_eq!(
                    s.current().at_ns,
                    want,
                    "{pps} pps, burst {burst}, frame {k}: expected the exact floor"
                );
                k += u64::from(burst);
                s.advance(64);
            }
            s.cap_frames(2);
            s.advance(64);
            k += u64::from(burst.min(2));
            let want = 11 + (u128::from(k) * 1_000_000_000 / u128::from(pps)) as u64;
            assert_eq!(s.current().at_ns, want, "{pps} pps after a capped departure");
        }
    }

    #[test]
    fn planned_blocks_are_the_departures_one_by_one() {
        for pps in [3u64, 1_000, 14_880_952, 999_999_937] {
            let (mut one, mut planned) = (
                Schedule::new(Pattern::Cbr, Rate::Pps(pps as f64), 1, 5, 1),
                Schedule::new(Pattern::Cbr, Rate::Pps(pps as f64), 1, 5, 1),
            );
            let mut ats = [0u64; 64];
            for k in 0..500usize {
                // Blocks of 1 to 64, a stop inside some and an end inside others.
                let max = 1 + k * 7 % 64;
                let next = one.current().at_ns;
                let stop = if k % 3 == 0 {
                    next + (k as u64 % 5) * 1_000_000_000 / pps
                } else {
                    u64::MAX
                };
                let end = if k % 5 == 1 {
                    next + 1_000_000_000 / pps
                } else {
                    u64::MAX
                };
                let n = planned.plan_exact(&mut ats[..max], end, stop);
                let mut want = Vec::new();
                while want.len() < max {
                    let at = one.current().at_ns;
                    if at >= end || (!want.is_empty() && at >= stop) {
                        break;
                    }
                    want.push(at);
                    one.advance(64);
                }
                assert_eq!(n, Some(want.len()), "{pps} pps, block {k}: expected as many departures");
                assert_eq!(
                    ats[..want.len()],
                    want[..],
                    "{pps} pps, block {k}: expected the same times"
                );
                assert_eq!(
                    planned.current(),
                    one.current(),
                    "{pps} pps, block {k}: the next departure"
                );
            }
        }
        let exp = UnitDist::Exponential(rand_distr::Exp::new(1.0).expect("rate 1"));
        let mut poisson = Schedule::new(Pattern::Random(exp), Rate::Pps(1e3), 1, 0, 1);
        assert_eq!(poisson.plan_exact(&mut [0; 8], u64::MAX, u64::MAX), None, "not CBR");
        let mut bursts = Schedule::new(Pattern::Cbr, Rate::Pps(1e3), 4, 0, 1);
        assert_eq!(bursts.plan_exact(&mut [0; 8], u64::MAX, u64::MAX), None, "bursts of 4");
    }

    #[test]
    fn a_shifted_whole_rate_keeps_its_times_moved() {
        let mut s = Schedule::new(Pattern::Cbr, Rate::Pps(3.0), 1, 0, 1);
        s.advance(64);
        s.shift(1_000);
        assert_eq!(
            s.current().at_ns,
            333_333_333 + 1_000,
            "expected the departure moved by the shift"
        );
        s.advance(64);
        assert_eq!(s.current().at_ns, 666_666_666 + 1_000);
    }

    #[test]
    fn a_scaled_whole_rate_goes_on_from_where_it_was() {
        let mut s = Schedule::new(Pattern::Cbr, Rate::Pps(3.0), 1, 0, 1);
        s.advance(64);
        s.scale_rate(2.0);
        s.advance(64);
        assert_eq!(
            s.current().at_ns,
            500_000_000,
            "expected the new rate's gap from the last departure's exact time"
        );
    }

    #[test]
    fn bps_gap_follows_frame_size() {
        // 1 Gbit/s at L1: a 64 B frame is 84 B on the wire = 672 ns.
        let mut s = Schedule::new(
            Pattern::Cbr,
            Rate::Bps {
                bps: 1e9,
                overhead_bytes: 20,
            },
            1,
            0,
            1,
        );
        s.advance(64);
        assert_eq!(s.current().at_ns, 672);
        s.advance(1518);
        assert_eq!(s.current().at_ns, 672 + 12_304);
    }

    #[test]
    fn burst_spaces_departures_by_burst_cost() {
        let mut s = Schedule::new(Pattern::Cbr, Rate::Pps(1000.0), 4, 0, 1);
        assert_eq!(s.current().frames, 4);
        s.advance(256);
        assert_eq!(
            s.current(),
            Departure {
                at_ns: 4_000_000,
                frames: 4
            }
        );
    }

    #[test]
    fn onoff_back_to_back_constant() {
        let p = Pattern::OnOff {
            size: ScaledDist::constant(8.0),
            off: UnitDist::Constant,
            peak_gap_ns: None,
        };
        let mut s = Schedule::new(p, Rate::Pps(1000.0), 1, 0, 1);
        assert_eq!(s.current(), Departure { at_ns: 0, frames: 8 });
        s.advance(8 * 64);
        assert_eq!(
            s.current(),
            Departure {
                at_ns: 8_000_000,
                frames: 8
            }
        );
    }

    #[test]
    fn onoff_with_peak_rate() {
        let p = Pattern::OnOff {
            size: ScaledDist::constant(3.0),
            off: UnitDist::Constant,
            peak_gap_ns: Some(100.0),
        };
        let mut s = Schedule::new(p, Rate::Pps(1000.0), 1, 0, 1);
        let mut at = Vec::new();
        for _ in 0..6 {
            at.push(s.current().at_ns);
            assert_eq!(s.current().frames, 1);
            s.advance(64);
        }
        assert_eq!(at, [0, 100, 200, 3_000_000, 3_000_100, 3_000_200]);
    }
}
