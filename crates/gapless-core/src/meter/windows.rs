//! Rate jitter (Kundel et al., NOMS 2020): the rate over every window of W consecutive
//! arrivals, for seven window sizes, kept as the slowest, the fastest and the mean.
//!
//! Arrivals are kept in a ring and their windows figured [`BATCH`] at a time, window size by
//! window size: each pass reads two runs of the ring in order (the ends of its windows, and
//! their starts W − 1 arrivals before), four arrivals per step in f64 lanes. Figuring
//! each arrival's seven windows as it came read seven scattered places of a 64 KiB ring per
//! frame and was the meter's largest single cost (DESIGN-NOTES 59). A read figures the
//! arrivals not yet batched into a copy, so the figures never wait for a batch to fill.

use super::report::WindowRate;

/// Window sizes for rate jitter, in packets (Kundel et al., NOMS 2020).
pub const RATE_WINDOWS: [usize; 7] = [100, 200, 500, 1000, 2000, 4000, 8000];
/// Arrivals kept: the largest window and a batch fit.
const RING: usize = 8192;
/// Arrivals whose windows are figured together.
const BATCH: u64 = 64;
const _: () = assert!(RATE_WINDOWS[6] + BATCH as usize <= RING);
/// Arrival times after the base are kept exact below this.
const EXACT: u64 = 1 << 52;

/// Per window size: the shortest and longest span (ns, at least 1) and the sum of 1 / span.
/// Spans are whole ns, exact as f64 below 2^53 ns (104 days).
#[derive(Clone, Copy)]
struct Figures {
    min_span: [f64; 7],
    max_span: [f64; 7],
    inv_sum: [f64; 7],
}

pub(crate) struct Windows {
    /// The last RING arrival times, in ns after `base`, grown as frames come (a stream of a
    /// few frames costs a few bytes). Kept as f64, converted once per arrival instead of once
    /// per window: whole ns below 2^52 are exact, and so is their difference.
    ring: Vec<f64>,
    base: u64,
    /// No new base before this many arrivals (see [`Windows::rebase`]).
    calm_until: u64,
    /// Arrivals taken.
    n: u64,
    /// Arrivals whose windows are in `figures`.
    done: u64,
    figures: Figures,
}

/// `a.min(b)` for numbers that are never NaN (spans): one `minpd` lane, without `f64::min`'s
/// NaN handling.
#[inline(always)]
fn least(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

#[inline(always)]
fn most(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// Two lanes of running figures, one per arrival of a pair, folded at the end of a pass.
struct Lanes {
    lo: [f64; L],
    hi: [f64; L],
    inv: [f64; L],
}

/// Lanes of a pass: arrivals taken per step.
const L: usize = 4;

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            lo: [f64::INFINITY; L],
            hi: [0.0; L],
            inv: [0.0; L],
        }
    }

    /// Takes the windows whose ends are `ends` and starts `starts` (equal lengths): [`L`] per
    /// step. A span is `end - start` (exact: both are whole ns below 2^52), with a 1 ns floor.
    #[inline]
    fn add(&mut self, ends: &[f64], starts: &[f64]) {
        let span = |e: f64, s: f64| most(e - s, 1.0);
        let (mut ec, mut sc) = (ends.chunks_exact(L), starts.chunks_exact(L));
        let (mut lo, mut hi, mut inv) = (self.lo, self.hi, self.inv);
        for (e, s) in (&mut ec).zip(&mut sc) {
            let mut sp = [0.0; L];
            for l in 0..L {
                sp[l] = span(e[l], s[l]);
            }
            for l in 0..L {
                lo[l] = least(lo[l], sp[l]);
                hi[l] = most(hi[l], sp[l]);
                inv[l] += 1.0 / sp[l];
            }
        }
        for (&e, &s) in ec.remainder().iter().zip(sc.remainder()) {
            let sp = span(e, s);
            (lo[0], hi[0], inv[0]) = (least(lo[0], sp), most(hi[0], sp), inv[0] + 1.0 / sp);
        }
        (self.lo, self.hi, self.inv) = (lo, hi, inv);
    }

    fn fold(&self) -> (f64, f64, f64) {
        let lo = self.lo.iter().copied().fold(f64::INFINITY, least);
        let hi = self.hi.iter().copied().fold(0.0, most);
        (lo, hi, self.inv.iter().sum())
    }
}

impl Windows {
    pub(crate) fn new() -> Windows {
        Windows {
            ring: Vec::new(),
            base: 0,
            calm_until: 0,
            n: 0,
            done: 0,
            figures: Figures {
                min_span: [f64::INFINITY; 7],
                max_span: [0.0; 7],
                inv_sum: [0.0; 7],
            },
        }
    }

    /// Takes the next arrival time (never earlier than the last: the caller passes the
    /// latest so far).
    #[inline]
    pub(crate) fn push(&mut self, t: u64) {
        if self.n == 0 {
            self.base = t;
        }
        let mut x = t - self.base;
        if x >= EXACT && self.n >= self.calm_until {
            x = self.rebase(t);
        }
        let (i, x) = ((self.n as usize) % RING, x as f64);
        if self.ring.len() < RING {
            self.ring.push(x);
        } else {
            self.ring[i] = x;
        }
        self.n += 1;
        if self.n.is_multiple_of(BATCH) {
            self.flush();
        }
    }

    /// After 2^52 ns (52 days) from the base: the base moves to the oldest arrival kept, and
    /// every kept time by as much, which leaves every span as it was. Only a time that is
    /// still over 2^52 ns past the oldest kept one (a capture whose clock jumped by weeks) is
    /// kept rounded; it is then tried again only after a whole ring, so that such a capture
    /// costs a pass over the ring once per ring of arrivals, not per arrival.
    #[cold]
    fn rebase(&mut self, t: u64) -> u64 {
        let oldest = self.ring.iter().copied().fold(f64::INFINITY, f64::min) as u64;
        for v in &mut self.ring {
            *v -= oldest as f64;
        }
        self.base += oldest;
        self.calm_until = self.n + RING as u64;
        t - self.base
    }

    #[inline(never)]
    fn flush(&mut self) {
        let mut f = self.figures;
        self.figure(&mut f, self.done, self.n);
        (self.figures, self.done) = (f, self.n);
    }

    /// Adds the windows that end at arrivals `from..to` (0-based) into `f`, size by size.
    fn figure(&self, f: &mut Figures, from: u64, to: u64) {
        for (k, &w) in RATE_WINDOWS.iter().enumerate() {
            let back = w as u64 - 1;
            let start = from.max(back);
            if start >= to {
                // Sizes only grow: no later one has a window here either.
                break;
            }
            let (lo, hi, inv) = self.pass(start, to, back);
            f.min_span[k] = least(f.min_span[k], lo);
            f.max_span[k] = most(f.max_span[k], hi);
            f.inv_sum[k] += inv;
        }
    }

    /// The shortest and longest span, and the sum of 1 / span, of the windows that end at
    /// arrivals `start..to` and start `back` arrivals before: over runs of the ring where
    /// neither end wraps, so the reads are two slices in order.
    fn pass(&self, start: u64, to: u64, back: u64) -> (f64, f64, f64) {
        let mut lanes = Lanes::new();
        let mut j = start;
        while j < to {
            let (e, s) = ((j as usize) % RING, ((j - back) as usize) % RING);
            let len = ((to - j) as usize).min(RING - e).min(RING - s);
            lanes.add(&self.ring[e..e + len], &self.ring[s..s + len]);
            j += len as u64;
        }
        lanes.fold()
    }

    /// Windows of `w` packets seen so far: one per arrival from the w-th on.
    fn count(&self, w: usize) -> u64 {
        (self.n + 1).saturating_sub(w as u64)
    }

    /// The figures of every window so far, the last arrivals' (not yet batched) included.
    pub(crate) fn summary(&self, reference_pps: f64) -> Vec<WindowRate> {
        let mut f = self.figures;
        self.figure(&mut f, self.done, self.n);
        RATE_WINDOWS
            .iter()
            .enumerate()
            .filter(|(_, &w)| self.count(w) > 0)
            .map(|(k, &w)| {
                let g = (w - 1) as f64 * 1e9;
                let max_pps = g / f.min_span[k];
                let min_pps = g / f.max_span[k];
                let avg_pps = g * f.inv_sum[k] / self.count(w) as f64;
                let pct = |v: f64| {
                    if reference_pps > 0.0 {
                        100.0 * v / reference_pps
                    } else {
                        0.0
                    }
                };
                WindowRate {
                    packets: w as u64,
                    windows: self.count(w),
                    min_pps,
                    avg_pps,
                    max_pps,
                    min_pct: pct(min_pps),
                    avg_pct: pct(avg_pps),
                    max_pct: pct(max_pps),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every window figured from the whole list of arrivals, one at a time.
    fn by_hand(times: &[u64], w: usize) -> Option<(f64, f64, f64)> {
        let spans: Vec<f64> = (w - 1..times.len())
            .map(|j| ((times[j] - times[j + 1 - w]) as f64).max(1.0))
            .collect();
        let g = (w - 1) as f64 * 1e9;
        let lo = spans.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = spans.iter().copied().fold(0.0, f64::max);
        let inv: f64 = spans.iter().map(|s| 1.0 / s).sum();
        (!spans.is_empty()).then(|| (g / hi, g * inv / spans.len() as f64, g / lo))
    }

    /// Pushes `count` arrivals from `t`, gaps drawn by `gap`, and compares every window
    /// size's figures with [`by_hand`] after each count in `reads`.
    fn check(mut t: u64, count: u64, reads: &[u64], mut gap: impl FnMut(u64, u64) -> u64) {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let (mut times, mut w) = (Vec::new(), Windows::new());
        for n in 1..=count {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += gap(n, x);
            times.push(t);
            w.push(t);
            if !reads.contains(&n) {
                continue;
            }
            let got = w.summary(1e6);
            for &size in &RATE_WINDOWS {
                let want = by_hand(&times, size);
                let row = got.iter().find(|r| r.packets == size as u64);
                match (want, row) {
                    (None, None) => {}
                    (Some((min, avg, max)), Some(r)) => {
                        assert_eq!(r.windows, (n + 1 - size as u64), "{n} arrivals, W {size}: window count");
                        assert_eq!((r.min_pps, r.max_pps), (min, max), "{n} arrivals, W {size}: min, max");
                        let rel = (r.avg_pps - avg).abs() / avg;
                        assert!(
                            rel < 1e-12,
                            "{n} arrivals, W {size}: expected avg {avg}, got {} ({rel:e})",
                            r.avg_pps
                        );
                        assert!((r.avg_pct - 100.0 * r.avg_pps / 1e6).abs() < 1e-9);
                    }
                    (w, r) => panic!("{n} arrivals, W {size}: expected {w:?}, got {r:?}"),
                }
            }
        }
    }

    #[test]
    fn batched_windows_give_every_window_of_the_arrivals() {
        // Read at counts around each window size, each batch edge and the ring's wrap.
        let reads = [
            1, 2, 63, 64, 65, 99, 100, 101, 128, 1999, 2000, 8063, 8064, 8192, 8193, 20_000, 20_001,
        ];
        // Gaps of 0 (the 1 ns floor), a few ns and a few µs; a pause now and then.
        check(1_000_000_000, 20_001, &reads, |_, x| match x % 10 {
            0 => 0,
            1 => 3_000_000,
            _ => 900 + x % 400,
        });
    }

    #[test]
    fn times_stay_exact_past_52_days_and_after_a_jump_of_weeks() {
        let reads = [9_000, 9_001, 17_000, 30_000];
        // From 2^62 ns, 1 µs gaps with a few ns of jitter, and two jumps of over 2^52 ns (52
        // days): the base moves, and every window's figures stay those of the exact times.
        check(1 << 62, 30_000, &reads, |n, x| match n {
            8_500 | 20_000 => (1 << 52) + 12_345,
            _ => 1_000 + x % 7,
        });
    }
}
