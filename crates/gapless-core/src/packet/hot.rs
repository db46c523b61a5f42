//! The field ops in the shape the send loop runs fastest.
//!
//! A [`FieldOp`] is general: any window, any mask, a list of values, a range up to 2^64. Most
//! ops in real profiles are a counter or a random draw written into a whole 2- or 4-byte
//! field (a port, an IPv4 address, a VLAN word). [`HotOp`] holds such an op flat, with its
//! step already reduced into the range, one `match` to run it, and its checksums as masks
//! (no branch per op). Any other op keeps its general path. The values, and the order of
//! random draws, are exactly [`FieldOp::next`]'s (a test compares them frame by frame).
//!
//! A flat op's checksum delta is its value alone: the complement of the template's words
//! it replaces is the same every frame, so the frame's constant sums hold it
//! ([`HotOp::neg`]), and a 4-byte value counts whole (2^16 ≡ 1 modulo 0xffff: the final
//! fold adds its two words).

use rand::Rng;

use crate::packet::fields::{uniform, Fast, FieldOp, Gen};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Inc16,
    Inc32,
    Dec16,
    Dec32,
    Rand16,
    Rand32,
    /// The general path: `FieldOp::apply` of the variant's op at this index.
    General(usize),
}

/// One field op, flat.
#[derive(Debug, Clone, Copy)]
pub struct HotOp {
    kind: Kind,
    at: usize,
    from: u64,
    to: u64,
    /// The range's size minus one, and the step reduced into it.
    span: u64,
    step: u64,
    /// The complement of the template's words in the field (see `FieldOp::neg_old`).
    neg_old: u64,
    /// All ones where the field is part of the IPv4 header / the L4 checksum, else 0.
    pub ip: u64,
    pub l4: u64,
}

impl HotOp {
    /// `op`, the `i`-th of its variant, bound to its template.
    pub fn new(op: &FieldOp, i: usize) -> HotOp {
        let width = |f: Fast, two: Kind, four: Kind| if matches!(f, Fast::U32(_)) { four } else { two };
        let (kind, from, to, step) = match (&op.gen, op.fast) {
            (_, Fast::Window) | (Gen::List(_), _) => (Kind::General(i), 0, 0, 0),
            (Gen::Inc { from, to, step }, f) => (width(f, Kind::Inc16, Kind::Inc32), *from, *to, *step),
            (Gen::Dec { from, to, step }, f) => (width(f, Kind::Dec16, Kind::Dec32), *from, *to, *step),
            (Gen::Random { from, to }, f) => (width(f, Kind::Rand16, Kind::Rand32), *from, *to, 0),
        };
        let at = match op.fast {
            Fast::U16(a) | Fast::U32(a) => a,
            Fast::Window => 0,
        };
        // A 2- or 4-byte field's range is under 2^32: the span never wraps.
        let span = to.wrapping_sub(from);
        let step = if matches!(kind, Kind::General(_)) || step <= span {
            step
        } else {
            step % (span + 1)
        };
        let mask = |b: bool| if b { u64::MAX } else { 0 };
        HotOp {
            kind,
            at,
            from,
            to,
            span,
            step,
            neg_old: op.neg_old,
            ip: mask(op.in_ip),
            l4: mask(op.in_l4),
        }
    }

    /// Writes the next value into `frame` and returns its checksum delta: a flat op's
    /// without the template's words ([`HotOp::neg`]), a general op's as [`FieldOp::apply`]
    /// gives it. `ops` are the variant's ops (for the general path).
    #[inline(always)]
    pub fn apply<R: Rng + ?Sized>(&self, frame: &mut [u8], state: &mut u64, rng: &mut R, ops: &[FieldOp]) -> u64 {
        let x = match self.kind {
            Kind::Inc16 | Kind::Inc32 => self.from + self.count(state),
            Kind::Dec16 | Kind::Dec32 => self.to - self.count(state),
            Kind::Rand16 | Kind::Rand32 => uniform(rng, self.from, self.to),
            Kind::General(i) => return ops[i].apply(frame, state, rng),
        };
        self.write(frame, x);
        self.delta(x)
    }

    /// Whether the op has a flat path (else it takes `FieldOp::apply`).
    pub fn is_flat(&self) -> bool {
        !matches!(self.kind, Kind::General(_))
    }

    /// Whether the op draws from the stream's field generator.
    pub fn is_random(&self) -> bool {
        matches!(self.kind, Kind::Rand16 | Kind::Rand32)
    }

    /// A counter's next values into `out` (a flat op that does not draw): the values up to
    /// the next wrap as one arithmetic run (a loop that vectorises), where runs are long;
    /// value by value where the step wraps within a few values.
    #[inline(always)]
    pub fn fill(&self, out: &mut [u64], state: &mut u64) {
        let down = matches!(self.kind, Kind::Dec16 | Kind::Dec32);
        let value = |off: u64| if down { self.to - off } else { self.from + off };
        if self.step == 0 || self.span / self.step < 16 {
            out.iter_mut().for_each(|x| *x = value(self.count(state)));
            return;
        }
        let mut rest = out;
        while !rest.is_empty() {
            // Offsets off, off + step, ... up to the span, then the counter wraps.
            let off = *state;
            let run = ((self.span - off) / self.step + 1).min(rest.len() as u64);
            let (now, later) = rest.split_at_mut(run as usize);
            // An induction (no multiply: SSE2 has no 64-bit one).
            let (mut v, step) = (value(off), if down { self.step.wrapping_neg() } else { self.step });
            for x in now.iter_mut() {
                *x = v;
                v = v.wrapping_add(step);
            }
            *state = off + (run - 1) * self.step;
            self.count(state);
            rest = later;
        }
    }

    /// What a flat op adds to the frame's constant IPv4 and L4 sums: the complement of the
    /// template's words in its field, which every frame's value replaces (0 for a general
    /// op, whose deltas carry it).
    pub fn neg(&self) -> (u64, u64) {
        match self.kind {
            Kind::General(_) => (0, 0),
            _ => (self.neg_old & self.ip, self.neg_old & self.l4),
        }
    }

    /// The field's offset and width in bytes (a flat op).
    pub fn place(&self) -> (usize, usize) {
        (self.at, if self.two() { 2 } else { 4 })
    }

    /// Whether the field is 2 bytes wide (else 4; a flat op).
    #[inline(always)]
    fn two(&self) -> bool {
        matches!(self.kind, Kind::Inc16 | Kind::Dec16 | Kind::Rand16)
    }

    /// A random op's range, inclusive.
    pub fn range(&self) -> Option<(u64, u64)> {
        self.is_random().then_some((self.from, self.to))
    }

    /// Writes value `x` into the field (a flat op).
    #[inline(always)]
    fn write(&self, frame: &mut [u8], x: u64) {
        let at = self.at;
        if self.two() {
            frame[at..at + 2].copy_from_slice(&(x as u16).to_be_bytes());
        } else {
            frame[at..at + 4].copy_from_slice(&(x as u32).to_be_bytes());
        }
    }

    /// The checksum delta of value `x` in the field (a flat op): the value as written,
    /// without the template's words (see the module's comment).
    #[inline(always)]
    fn delta(&self, x: u64) -> u64 {
        if self.two() {
            x & 0xffff
        } else {
            x & 0xffff_ffff
        }
    }

    /// A counter's offset into its range, moved on by the step.
    #[inline(always)]
    fn count(&self, state: &mut u64) -> u64 {
        let off = *state;
        let sum = off + self.step;
        *state = if sum > self.span { sum - self.span - 1 } else { sum };
        off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fill` gives the values `count` gives one by one, in runs and value by value, across
    /// wraps, for counters up and down, from any offset and in blocks of any length.
    #[test]
    fn fill_matches_counting_one_by_one() {
        for (span, step) in [
            (253, 1),
            (99, 7),
            (4_000_000_000, 7),
            (65_534, 4465),
            (1, 1),
            (0, 0),
            (300, 0),
            (63, 4),
        ] {
            for kind in [Kind::Inc16, Kind::Dec32] {
                let op = HotOp {
                    kind,
                    at: 0,
                    from: 5,
                    to: 5 + span,
                    span,
                    step,
                    neg_old: 0,
                    ip: 0,
                    l4: 0,
                };
                let (mut filled, mut counted) = (span / 3, span / 3);
                for n in [1, 64, 17, 300, 64] {
                    let mut out = vec![0; n];
                    op.fill(&mut out, &mut filled);
                    let one_by_one: Vec<u64> = (0..n)
                        .map(|_| match kind {
                            Kind::Dec32 => op.to - op.count(&mut counted),
                            _ => op.from + op.count(&mut counted),
                        })
                        .collect();
                    assert_eq!(
                        out, one_by_one,
                        "span {span} step {step} {kind:?}: expected count's values"
                    );
                    assert_eq!(
                        filled, counted,
                        "span {span} step {step}: expected count's state after {n}"
                    );
                }
            }
        }
    }
}
