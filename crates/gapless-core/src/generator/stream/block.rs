//! Frames built a block at a time: a stream of one variant, one frame size and flat field ops
//! (every op a [`crate::packet::hot::HotOp`] of its own), the usual shape of a stream that
//! runs unpaced or in throughput mode.
//!
//! The scheduler first plans the chunk's departures ([`StreamGen::plan_block`], or
//! [`StreamGen::reserve_one`] for each), then [`StreamGen::build_block`] builds them, column
//! by column where it can, in loops that vectorise:
//! - each counter fills its values for the whole block as arithmetic runs between its wraps;
//! - the random ops draw in the same order as frame by frame (frame by frame, op by op, from
//!   the one field generator);
//! - each frame's checksum deltas are the sums of the columns of the ops in that checksum;
//! - both checksum fields of every frame are folded from them, the signature's moving words
//!   added ([`FixedFrame::block_checksums`]).
//!
//! Then each frame is the fixed frame copied and the values, the signature's moving words
//! and the checksums stored. That frame loop is compiled for the counts of ops on 2- and
//! 4-byte fields, up to two of each ([`Part::write`]): their offsets stay in registers and
//! are checked against the frame's length once per block. All of it is compiled twice, for
//! any x86-64 CPU and for x86-64-v3 (AVX2, MOVBE), and the CPU picks
//! ([`StreamGen::build_block`]). The frames are the same bytes as [`StreamGen::build`]'s,
//! one by one (a test compares them, both builds).

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{Frames, Hot, Region, StreamGen};
use crate::packet::fields::uniform;
use crate::packet::fixed::FixedFrame;
use crate::packet::signature::Signature;

/// Frames per block: the op values of a block stay in L1.
pub(super) const BLOCK: usize = 64;

impl StreamGen {
    /// The frame length (no FCS) when the stream's next frames can be built as a block.
    #[inline]
    pub fn block_len(&self) -> Option<usize> {
        match (&self.replay, &self.hot[..]) {
            (None, [h]) if h.ops.iter().all(|o| o.is_flat()) => h.fixed.as_ref().map(|f| f.len()),
            _ => None,
        }
    }

    /// Counts the next frame as taken (its departure planned) before the block that builds
    /// it: `count` caps the schedule as [`StreamGen::build`] would.
    #[inline(always)]
    pub fn reserve_one(&mut self) {
        if let Some(r) = &mut self.remaining {
            *r -= 1;
        }
    }

    /// Builds the frames reserved for departures at `ats` into `out`'s buffers 0, 1, ...
    /// (after [`StreamGen::block_len`] said the stream can). On an x86-64 CPU with AVX2,
    /// BMI2 and MOVBE (x86-64-v3, most since 2015) the code is compiled for them: 4 lanes
    /// in the column loops, byte-swapping stores.
    pub fn build_block<F: Frames + ?Sized>(&mut self, out: &mut F, ats: &[u64]) {
        #[cfg(target_arch = "x86_64")]
        if v3() {
            // SAFETY: the CPU has the features `build_block_v3` is compiled for (`v3`).
            return unsafe { self.build_block_v3(out, ats) };
        }
        self.build_block_any(out, ats)
    }

    /// [`StreamGen::build_block_any`] compiled for x86-64-v3's features.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,movbe,popcnt")]
    fn build_block_v3<F: Frames + ?Sized>(&mut self, out: &mut F, ats: &[u64]) {
        self.build_block_any(out, ats)
    }

    /// [`StreamGen::build_block`] for any CPU: everything it calls is inlined, so that
    /// [`StreamGen::build_block_v3`] compiles it all for its features.
    #[inline(always)]
    fn build_block_any<F: Frames + ?Sized>(&mut self, out: &mut F, ats: &[u64]) {
        for (b, part) in ats.chunks(BLOCK).enumerate() {
            self.build_part(out, b * BLOCK, part);
        }
        self.vbuilt[0] += ats.len() as u64;
        self.last = 0;
    }

    #[inline(always)]
    fn build_part<F: Frames + ?Sized>(&mut self, out: &mut F, first: usize, ats: &[u64]) {
        let ats = &ats[..ats.len().min(BLOCK)];
        let n = ats.len();
        self.values(n);
        let sig = self.signature(0);
        let hot = &self.hot[0];
        let fx = hot.fixed.as_ref().expect("a block has a fixed frame");
        let (cols, sums) = self.cols.split_at_mut(hot.ops.len());
        let [d_ip, d_l4] = sums else {
            unreachable!("two sum columns")
        };
        fx.block_checksums(&mut d_ip[..n], &mut d_l4[..n], ats, sig, self.cfg.lanes);
        let p = Part {
            fx,
            cols,
            at16: &hot.at16,
            at32: &hot.at32,
            cs: (d_ip, d_l4),
            lanes: self.cfg.lanes,
        };
        // The backend's buffers as one region where it has them so (no call per frame).
        match out.run(first, n) {
            Some((run, stride)) => p.write_shape(&mut Region(run, stride), 0, ats, sig),
            None => p.write_shape(out, first, ats, sig),
        }
        self.built += n as u64;
    }

    /// Each op's values for the next `n` frames into its column of `cols`, and each frame's
    /// checksum deltas into the two columns after them (IPv4, L4).
    #[inline(always)]
    fn values(&mut self, n: usize) {
        let hot = &self.hot[0];
        let ops = hot.ops.len();
        self.cols.resize(ops + 2, [0; BLOCK]);
        let state = &mut self.op_state[0];
        for ((op, &c), st) in hot.ops.iter().zip(&hot.col).zip(state.iter_mut()) {
            if !op.is_random() {
                op.fill(&mut self.cols[c][..n], st);
            }
        }
        if !hot.random.is_empty() {
            draw(hot, &mut self.cols, n, &mut self.field_rng);
        }
        let (vals, sums) = self.cols.split_at_mut(ops);
        sum_cols(&mut sums[0][..n], vals, &hot.sum_cols.0);
        sum_cols(&mut sums[1][..n], vals, &hot.sum_cols.1);
    }
}

/// What a block's frames are made of: the fixed frame, the ops' value columns (2-byte
/// fields first) and offsets, each frame's IPv4 and L4 checksum fields.
struct Part<'a> {
    fx: &'a FixedFrame,
    cols: &'a [[u64; BLOCK]],
    at16: &'a [usize],
    at32: &'a [usize],
    cs: (&'a [u64; BLOCK], &'a [u64; BLOCK]),
    lanes: u32,
}

impl Part<'_> {
    /// [`Part::write`] for the block's shape.
    #[inline(always)]
    fn write_shape<F: Frames + ?Sized>(&self, out: &mut F, first: usize, ats: &[u64], sig: Signature) {
        // Up to two ops of each width with their counts fixed: offsets in registers, checked
        // once. More (rare) take loops over their columns.
        match (self.at16.len(), self.at32.len()) {
            (0, 0) => self.write::<0, 0, false, F>(out, first, ats, sig),
            (1, 0) => self.write::<1, 0, false, F>(out, first, ats, sig),
            (2, 0) => self.write::<2, 0, false, F>(out, first, ats, sig),
            (0, 1) => self.write::<0, 1, false, F>(out, first, ats, sig),
            (1, 1) => self.write::<1, 1, false, F>(out, first, ats, sig),
            (2, 1) => self.write::<2, 1, false, F>(out, first, ats, sig),
            (0, 2) => self.write::<0, 2, false, F>(out, first, ats, sig),
            (1, 2) => self.write::<1, 2, false, F>(out, first, ats, sig),
            (2, 2) => self.write::<2, 2, false, F>(out, first, ats, sig),
            _ => self.write::<0, 0, true, F>(out, first, ats, sig),
        }
    }

    /// Builds frames `first..` of `out` for departures `ats` (at most [`BLOCK`]), the first
    /// signed `sig`, the first `A` ops on 2-byte fields and the first `B` on 4-byte ones with
    /// their bounds checked once for the block, not in each frame; with `MORE`, the others
    /// in loops over their columns (without, there are none).
    #[inline(always)]
    fn write<const A: usize, const B: usize, const MORE: bool, F: Frames + ?Sized>(
        &self,
        out: &mut F,
        first: usize,
        ats: &[u64],
        mut sig: Signature,
    ) {
        let len = self.fx.len();
        let (c16, c32) = self.cols.split_at(self.at16.len());
        let ((c16, more16), (at16, at_more16)) = (c16.split_at(A), self.at16.split_at(A));
        let ((c32, more32), (at32, at_more32)) = (c32.split_at(B), self.at32.split_at(B));
        let (c16, c32): (&[[u64; BLOCK]; A], &[[u64; BLOCK]; B]) = (c16.try_into().unwrap(), c32.try_into().unwrap());
        let (at16, at32): ([usize; A], [usize; B]) = (at16.try_into().unwrap(), at32.try_into().unwrap());
        let fits = |w: usize| move |&a: &usize| a <= len && len - a >= w;
        let cs = self.fx.checksums_at();
        assert!(
            at16.iter().all(fits(2)) && at32.iter().all(fits(4)),
            "a field op outside the frame"
        );
        assert!(fits(2)(&cs.0) && fits(2)(&cs.1), "a checksum outside the frame");
        for (j, &at) in ats.iter().enumerate().take(BLOCK) {
            let frame = &mut out.buf(first + j)[..len];
            copy_frame(frame, &self.fx.bytes);
            for k in 0..A {
                put16(frame, at16[k], c16[k][j]);
            }
            for k in 0..B {
                put32(frame, at32[k], c32[k][j]);
            }
            if MORE {
                more16.iter().zip(at_more16).for_each(|(c, &at)| put16(frame, at, c[j]));
                more32.iter().zip(at_more32).for_each(|(c, &at)| put32(frame, at, c[j]));
            }
            sig.tx_ns = at;
            self.fx.store_at(frame, cs, self.cs.0[j], self.cs.1[j], &sig);
            sig.seq = sig.seq.wrapping_add(self.lanes);
        }
    }
}

/// The random ops' values for a block of `n` frames, each into its column of `cols`. The
/// generator's draws go straight into the columns, in the order frame-by-frame building
/// takes them (each frame, each random op), then each column is mapped into its op's range
/// as [`uniform`] does, in a loop that vectorises. A draw that `uniform` might reject (a low
/// product under the range's size: odds below 2^-32 for a 2- or 4-byte field) sends the
/// block back to `uniform` draw by draw, from the same generator state: the values are
/// `uniform`'s either way.
// Frame `j` of each column: `cols[c][j]`, across the columns (not an iteration of `cols`).
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn draw(hot: &Hot, cols: &mut [[u64; BLOCK]], n: usize, rng: &mut Xoshiro256PlusPlus) {
    let n = n.min(BLOCK);
    let start = rng.clone();
    let col = |i: usize| hot.col[i];
    match hot.random[..] {
        [(a, ..)] => cols[col(a)][..n].iter_mut().for_each(|x| *x = rng.next_u64()),
        [(a, ..), (b, ..)] => {
            let (a, b) = (col(a), col(b));
            for j in 0..n {
                cols[a][j] = rng.next_u64();
                cols[b][j] = rng.next_u64();
            }
        }
        ref ops => {
            for j in 0..n {
                ops.iter().for_each(|&(i, ..)| cols[col(i)][j] = rng.next_u64());
            }
        }
    }
    let mut doubt = false;
    for &(i, from, to) in &hot.random {
        doubt |= map_draws(&mut cols[col(i)][..n], from, to - from + 1);
    }
    if doubt {
        *rng = start;
        // Frame by frame, op by op: the draws' order, across the columns.
        for j in 0..n {
            for &(i, from, to) in &hot.random {
                cols[col(i)][j] = uniform(rng, from, to);
            }
        }
    }
}

/// Maps raw draws into `from..from + size` as [`uniform`] does (the high word of the draw
/// times the size), and returns whether `uniform` might have rejected one (the low word
/// under the size). A size under 2^32 (a 2- or 4-byte field's but the whole 4-byte range)
/// takes the product in 32-bit halves, which vectorises: `x·size = hi·size·2^32 + lo·size`.
#[inline(always)]
fn map_draws(col: &mut [u64], from: u64, size: u64) -> bool {
    let mut doubt = 0u64;
    if size <= u64::from(u32::MAX) {
        // 32-bit operands, widened: one 32 × 32 → 64 multiply each (`vpmuludq`). The size
        // goes through `black_box`, or LLVM folds the widening back into the 64-bit size
        // (known under 2^32 here) and multiplies it as 64 bits.
        let size32 = std::hint::black_box(size as u32);
        for x in col.iter_mut() {
            let a = u64::from(*x as u32) * u64::from(size32);
            let t = u64::from((*x >> 32) as u32) * u64::from(size32) + (a >> 32);
            doubt |= u64::from(((t << 32) | (a & 0xffff_ffff)) < size);
            *x = from + (t >> 32);
        }
    } else {
        for x in col.iter_mut() {
            let m = u128::from(*x) * u128::from(size);
            doubt |= u64::from((m as u64) < size);
            *x = from + (m >> 64) as u64;
        }
    }
    doubt != 0
}

/// Each frame's sum of the columns `which` into `d` (`d.len()` frames): a flat op's checksum
/// delta is its value as it is (a flat op's values fit its field: the profile's ranges are
/// checked against the field when it compiles). Two columns a pass, in loops of adds that
/// vectorise.
#[inline(always)]
fn sum_cols(d: &mut [u64], cols: &[[u64; BLOCK]], which: &[usize]) {
    let n = d.len();
    let mut pairs = which
        .chunks(2)
        .map(|p| (&cols[p[0]][..n], p.get(1).map(|&c| &cols[c][..n])));
    match pairs.next() {
        None => d.fill(0),
        Some((a, None)) => d.copy_from_slice(a),
        Some((a, Some(b))) => d.iter_mut().zip(a).zip(b).for_each(|((d, a), b)| *d = a + b),
    }
    for pair in pairs {
        match pair {
            (a, None) => d.iter_mut().zip(a).for_each(|(d, a)| *d += a),
            (a, Some(b)) => d.iter_mut().zip(a).zip(b).for_each(|((d, a), b)| *d += a + b),
        }
    }
}

/// Whether the CPU has the features of [`StreamGen::build_block_v3`] (a cached look-up).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn v3() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx2") && has!("bmi1") && has!("bmi2") && has!("lzcnt") && has!("movbe") && has!("popcnt")
}

/// Stores `x` as the 2-byte big-endian field at `at`.
#[inline(always)]
fn put16(frame: &mut [u8], at: usize, x: u64) {
    frame[at..][..2].copy_from_slice(&(x as u16).to_be_bytes());
}

/// Stores `x` as the 4-byte big-endian field at `at`.
#[inline(always)]
fn put32(frame: &mut [u8], at: usize, x: u64) {
    frame[at..][..4].copy_from_slice(&(x as u32).to_be_bytes());
}

/// `dst.copy_from_slice(src)`; a frame of 32 to 64 bytes (the usual smallest) as two
/// overlapping 32-byte moves instead of a call to `memcpy`.
#[inline(always)]
fn copy_frame(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if (32..=64).contains(&n) && dst.len() == n {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use crate::generator::stream::{Region, StreamGen};
    use crate::packet::sizes::SizeGen;
    use crate::spec::files::NoFiles;
    use crate::{CompileCtx, ProfileSpec, StreamConfig};

    fn stream(toml: &str) -> StreamConfig {
        let spec = ProfileSpec::from_toml(toml, "test").unwrap_or_else(|e| panic!("{e}"));
        let ctx = CompileCtx {
            link_speed_bps: None,
            files: &NoFiles,
        };
        spec.compile(&ctx).unwrap_or_else(|e| panic!("{e}")).streams[0].clone()
    }

    /// The same stream five ways: the general path (`finish_with`, its size given as a
    /// one-size cycle), the fixed frame frame by frame, and blocks of uneven lengths into
    /// buffers one by one, into one region (as the null backend hands them out), and into
    /// one region compiled for any CPU (`build_block` takes the x86-64-v3 build where the
    /// CPU has it). Returns whether it could be built as blocks.
    fn same_frames(toml: &str) -> bool {
        let cfg = stream(toml);
        let SizeGen::Fixed(size) = cfg.variants[0].sizes else {
            panic!("a fixed size")
        };
        let mut general = cfg.clone();
        general.variants[0].sizes = SizeGen::Cycle(vec![size]);
        let (mut a, mut b, mut c, mut d, mut e) = (
            StreamGen::new(general),
            StreamGen::new(cfg.clone()),
            StreamGen::new(cfg.clone()),
            StreamGen::new(cfg.clone()),
            StreamGen::new(cfg),
        );
        let blocks = c.block_len().is_some();
        let mut out = vec![vec![0u8; 2048]; 200];
        let mut region = vec![0u8; 2048 * 200];
        let mut any_cpu = vec![0u8; 2048 * 200];
        let (mut fa, mut fb) = (vec![0u8; 2048], vec![0u8; 2048]);
        let mut k = 0u64;
        for n in [1usize, 7, 64, 65, 200, 3, 130] {
            // Stamps that use every 16-bit word, odd and even.
            let ats: Vec<u64> = (0..n as u64)
                .map(|j| 0xfedc_ba98_7654_3210 ^ ((k + j) * 0x9e37_79b9))
                .collect();
            if blocks {
                ats.iter().for_each(|_| c.reserve_one());
                c.build_block(&mut out, &ats);
                ats.iter().for_each(|_| d.reserve_one());
                d.build_block(&mut Region(&mut region, 2048), &ats);
                ats.iter().for_each(|_| e.reserve_one());
                e.build_block_any(&mut Region(&mut any_cpu, 2048), &ats);
            }
            for (j, &at) in ats.iter().enumerate() {
                let (la, lb) = (a.build(&mut fa, at), b.build(&mut fb, at));
                assert_eq!(la, lb, "frame {k}: expected the general path's length");
                assert_eq!(
                    fa[..la],
                    fb[..lb],
                    "frame {k}: the fixed frame differs from the general path's"
                );
                if blocks {
                    assert_eq!(
                        fa[..la],
                        out[j][..la],
                        "frame {k}: the block's frame differs from the general path's"
                    );
                    assert_eq!(
                        fa[..la],
                        region[j * 2048..][..la],
                        "frame {k}: the block's frame in one region differs from the general path's"
                    );
                    assert_eq!(
                        fa[..la],
                        any_cpu[j * 2048..][..la],
                        "frame {k}: the block's frame built for any CPU differs from the general path's"
                    );
                }
                k += 1;
            }
        }
        blocks
    }

    fn profile(l4: &str, ips: (&str, &str), size: u32, sig: bool, fields: &str) -> String {
        format!(
            "[[stream]]\nsignature = {sig}\nsize = {size}\n{fields}\n[stream.template]\nl4 = \"{l4}\"\nip_src = \"{}\"\nip_dst = \"{}\"\n[stream.timing]\nrate_pps = 1000\n",
            ips.0, ips.1
        )
    }

    const FOUR: &str = r#"
[[stream.field]]
field = "ip_src"
op = "inc"
from = "198.18.0.1"
to = "198.18.0.254"
[[stream.field]]
field = "ip_dst"
op = "random"
from = "198.18.1.1"
to = "198.18.1.254"
[[stream.field]]
field = "src_port"
op = "random"
from = 1024
to = 65535
[[stream.field]]
field = "dst_port"
op = "dec"
from = 1
to = 100
step = 7
"#;

    #[test]
    fn blocks_build_the_same_frames_as_one_by_one() {
        let v4 = ("198.18.0.1", "198.18.0.2");
        let mut blocked = 0;
        for (l4, small) in [("udp", 64), ("tcp", 78)] {
            for size in [small, small + 1, 101, 1518] {
                for sig in [true, false] {
                    blocked += usize::from(same_frames(&profile(l4, v4, size, sig, FOUR)));
                }
            }
        }
        assert_eq!(blocked, 16, "expected every 4-op IPv4 stream to be built as blocks");
    }

    #[test]
    fn other_shapes_build_the_same_frames_whichever_path_they_take() {
        let ports = "[[stream.field]]\nfield = \"src_port\"\nop = \"inc\"\nfrom = 1\nto = 65535\nstep = 70000\n";
        let list = "[[stream.field]]\nfield = \"dst_port\"\nop = \"list\"\nvalues = [7, 9, 11]\n";
        let ip = "[[stream.field]]\nfield = \"ip_src\"\nop = \"random\"\nfrom = \"198.18.0.1\"\nto = \"198.18.0.9\"\n";
        let v6 = ("2001:2::1", "2001:2::2");
        let v4 = ("198.18.0.1", "198.18.0.2");
        assert!(
            same_frames(&profile("udp", v6, 99, true, ports)),
            "expected IPv6 port ops as blocks"
        );
        assert!(
            same_frames(&profile("icmp", v4, 77, true, ip)),
            "expected an ICMP stream as blocks"
        );
        assert!(
            same_frames(&profile("udp", v4, 64, true, "")),
            "expected a stream without ops as blocks"
        );
        assert!(
            !same_frames(&profile("udp", v4, 64, true, list)),
            "a list op takes the general path"
        );
        let payload = "[[stream.field]]\nfield = \"payload\"\noffset = 200\nwidth = 4\nop = \"inc\"\nfrom = 1\nto = 4000000000\nstep = 7\n";
        assert!(
            same_frames(&profile("udp", v4, 300, true, payload)),
            "expected a 4-byte payload op deep in the frame as blocks"
        );
        // Three ops of each width: more than the shapes with their counts fixed.
        let more = format!(
            "{FOUR}{}",
            "[[stream.field]]\nfield = \"payload\"\noffset = 2\nwidth = 2\nop = \"dec\"\nfrom = 9\nto = 60000\n\
             [[stream.field]]\nfield = \"payload\"\noffset = 4\nwidth = 4\nop = \"random\"\nfrom = 0\nto = 4294967295\n"
        );
        assert!(
            same_frames(&profile("udp", v4, 90, true, &more)),
            "expected 3 + 3 ops as blocks"
        );
    }
}
