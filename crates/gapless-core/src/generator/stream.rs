//! A stream at run time: its schedule, its field engine and its frame builder.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::packet::fields::FieldOp;
use crate::packet::fixed::FixedFrame;
use crate::packet::hot::HotOp;
use crate::packet::signature::{Signature, SIG_LEN};
use crate::packet::sizes::{SizeGen, FCS_LEN};
use crate::packet::variant::Variant;
use crate::profile::model::StreamConfig;
use crate::timing::departures::{Departure, Schedule};
use crate::timing::seed::derive_seed;

mod block;

/// Where frames are built: the backend's buffers.
pub trait Frames {
    /// The buffer for frame `j` of the next send.
    fn buf(&mut self, j: usize) -> &mut [u8];
    /// Buffers `first..first + n` as one region, buffer `first + j` at `j * stride`, where
    /// they are laid out so (a block then takes no call per frame); else `None`.
    fn run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        let _ = (first, n);
        None
    }
}

/// Buffers end to end in one region, `.1` bytes apart (a [`Frames::run`]).
pub struct Region<'a>(pub &'a mut [u8], pub usize);

impl Frames for Region<'_> {
    #[inline(always)]
    fn buf(&mut self, j: usize) -> &mut [u8] {
        &mut self.0[j * self.1..][..self.1]
    }
    #[inline(always)]
    fn run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        Some((&mut self.0[first * self.1..][..n * self.1], self.1))
    }
}

/// Buffers in memory (tests, benchmarks).
impl Frames for Vec<Vec<u8>> {
    fn buf(&mut self, j: usize) -> &mut [u8] {
        &mut self[j]
    }
}

/// The run-time state of one stream. Pure: the caller supplies buffers and timestamps.
#[derive(Debug)]
pub struct StreamGen {
    pub cfg: StreamConfig,
    sched: Schedule,
    field_rng: Xoshiro256PlusPlus,
    size_rng: Xoshiro256PlusPlus,
    pick_rng: Xoshiro256PlusPlus,
    /// Frames built so far (the signature's sequence and the variant pick's index).
    built: u64,
    /// Per variant: frames built (its size sequence's index) and each field op's position.
    vbuilt: Vec<u64>,
    op_state: Vec<Vec<u64>>,
    /// Per variant: its ops flat, and its frame cut once when its size is fixed.
    hot: Vec<Hot>,
    /// A block's op values, a column per op, then its frames' IPv4 and L4 checksum sums
    /// (two columns; see `block`).
    cols: Vec<[u64; block::BLOCK]>,
    /// The variant of the frame built last.
    last: u16,
    /// A replayed capture being read, and the time its file timing counts from.
    replay: Option<crate::generator::replay::ReplayState>,
    replay_origin: u64,
    /// Frames still allowed by `count`.
    remaining: Option<u64>,
    /// Departures at or after this time (ns since the run's start) are not made.
    end_ns: Option<u64>,
}

impl StreamGen {
    pub fn new(cfg: StreamConfig) -> StreamGen {
        let sched = cfg.schedule();
        let end_ns = cfg.duration_ns.map(|d| cfg.start_offset_ns + d);
        let mut g = StreamGen {
            field_rng: Xoshiro256PlusPlus::seed_from_u64(derive_seed(cfg.seed, 1, 0)),
            size_rng: Xoshiro256PlusPlus::seed_from_u64(derive_seed(cfg.seed, 2, 0)),
            pick_rng: Xoshiro256PlusPlus::seed_from_u64(derive_seed(cfg.seed, 4, 0)),
            remaining: cfg.count,
            end_ns,
            vbuilt: vec![0; cfg.variants.len()],
            op_state: cfg.variants.iter().map(|v| vec![0; v.ops.len()]).collect(),
            hot: cfg.variants.iter().map(|v| Hot::new(v, cfg.id)).collect(),
            cols: Vec::new(),
            last: 0,
            replay: cfg.replay.clone().map(crate::generator::replay::ReplayState::new),
            replay_origin: cfg.start_offset_ns,
            cfg,
            sched,
            built: 0,
        };
        g.cap();
        g
    }

    #[inline(always)]
    fn cap(&mut self) {
        if let Some(r) = self.remaining {
            self.sched.cap_frames(r.min(u64::from(u32::MAX)) as u32);
        }
    }

    /// The next departure, or `None` when the stream has ended.
    #[inline]
    pub fn next_departure(&self) -> Option<Departure> {
        let d = match &self.replay {
            None => self.sched.current(),
            Some(r) if !r.has_next() => return None,
            Some(r) if self.cfg.replay.as_ref().is_some_and(|c| c.fixed_rate) => self.sched.current(),
            Some(r) => Departure {
                at_ns: self.replay_origin + r.next_rel_ns()?,
                frames: 1,
            },
        };
        if self.remaining == Some(0) || self.end_ns.is_some_and(|e| d.at_ns >= e) {
            return None;
        }
        Some(d)
    }

    /// Builds the stream's next frame into `buf` with TX timestamp `tx_ns` and returns its
    /// length (without FCS). `buf` must hold the stream's largest frame.
    #[inline]
    pub fn build(&mut self, buf: &mut [u8], tx_ns: u64) -> usize {
        if let Some(r) = &mut self.replay {
            let len = r.take(buf);
            if self.cfg.replay.as_ref().is_some_and(|c| c.sign) {
                let sig = Signature {
                    stream: self.cfg.id,
                    seq: self.vbuilt[0] as u32,
                    tx_ns,
                };
                // Signed frames number 0, 1, 2, ...: the meter's sequence has no gaps
                // for the frames that cannot carry one.
                self.vbuilt[0] += u64::from(crate::packet::rewrite::sign(&mut buf[..len], &sig));
            }
            self.built += 1;
            if let Some(r) = &mut self.remaining {
                *r -= 1;
            }
            return len;
        }
        let k = self.built;
        let vi = self.cfg.pick.pick(k, &mut self.pick_rng);
        if self.hot[vi].fixed.is_some() {
            return self.build_fixed(vi, buf, tx_ns);
        }
        let v = &self.cfg.variants[vi];
        let len = v.sizes.next(self.vbuilt[vi], &mut self.size_rng) as usize - FCS_LEN;
        let t = &v.template;
        let frame = &mut buf[..len];
        frame.copy_from_slice(&t.bytes[..len]);
        let hot = &self.hot[vi];
        let (d_ip, d_l4) = hot.apply(&v.ops, &mut self.op_state[vi], &mut self.field_rng, frame);
        let (d_ip, d_l4) = (d_ip + hot.neg.0, d_l4 + hot.neg.1);
        let sig = self.signature(tx_ns);
        if t.sig {
            let end = len - t.trailer();
            sig.write(&mut frame[end - SIG_LEN..end]);
        }
        t.finish_with(frame, d_ip, d_l4, t.sig.then_some(&sig));
        self.count_built(vi);
        len
    }

    /// [`StreamGen::build`] for a variant of one frame size: its frame copied whole, the
    /// flat ops, the precomputed sums (the same frame, with less work).
    #[inline(always)]
    fn build_fixed(&mut self, vi: usize, buf: &mut [u8], tx_ns: u64) -> usize {
        let hot = &self.hot[vi];
        let fx = hot.fixed.as_ref().expect("a fixed frame");
        let len = fx.len();
        let frame = &mut buf[..len];
        frame.copy_from_slice(&fx.bytes);
        let ops = &self.cfg.variants[vi].ops;
        let (d_ip, d_l4) = hot.apply(ops, &mut self.op_state[vi], &mut self.field_rng, frame);
        fx.finish(frame, d_ip, d_l4, &self.signature(tx_ns));
        self.count_built(vi);
        len
    }

    /// The signature of the frame being built.
    #[inline(always)]
    fn signature(&self, tx_ns: u64) -> Signature {
        Signature {
            stream: self.cfg.id,
            seq: (self.built as u32)
                .wrapping_mul(self.cfg.lanes)
                .wrapping_add(self.cfg.lane),
            tx_ns,
        }
    }

    #[inline(always)]
    fn count_built(&mut self, vi: usize) {
        self.built += 1;
        self.vbuilt[vi] += 1;
        self.last = vi as u16;
        self.reserve_one();
    }

    /// Frames built with the signature, when not every frame gets one (a replay).
    pub fn signed_frames(&self) -> Option<u64> {
        let r = self.cfg.replay.as_ref()?;
        Some(if r.sign { self.vbuilt[0] } else { 0 })
    }

    /// The variant of the frame built last.
    #[inline(always)]
    pub fn last_variant(&self) -> u16 {
        self.last
    }

    /// The template of variant `v`.
    #[inline(always)]
    pub fn template(&self, v: u16) -> &crate::packet::template::Template {
        &self.cfg.variants[usize::from(v)].template
    }

    /// Rewrites the TX stamp of a built frame of variant `v` (a signed replayed frame by its
    /// own headers, others by their template).
    #[inline]
    pub fn patch_tx_ns(&self, v: u16, frame: &mut [u8], tx_ns: u64) {
        match &self.cfg.replay {
            Some(r) if r.sign => crate::packet::rewrite::patch_tx_ns(frame, tx_ns),
            Some(_) => {}
            None => self.template(v).patch_tx_ns(frame, tx_ns),
        }
    }

    /// Ends the current departure, whose frames had `bytes` bytes (with FCS) in total.
    #[inline(always)]
    pub fn advance(&mut self, bytes: u64) {
        self.sched.advance(bytes);
        self.cap();
    }

    /// Plans the next departures of a block on the integer CBR path (see
    /// [`Schedule::plan_exact`]) into `ats`, as many as fit (at most `limit`): the first if
    /// the stream has not ended, each later one also before `stop`. They count as taken, as
    /// [`StreamGen::reserve_one`] counts them. False, with nothing planned, when the
    /// schedule is of another kind: the caller plans departure by departure.
    #[inline]
    pub fn plan_block(&mut self, ats: &mut Vec<u64>, limit: usize, stop: u64) -> bool {
        let limit = self
            .remaining
            .map_or(limit, |r| limit.min(usize::try_from(r).unwrap_or(usize::MAX)));
        ats.resize(limit, 0);
        let end = self.end_ns.unwrap_or(u64::MAX);
        let Some(n) = self.sched.plan_exact(ats, end, stop) else {
            ats.clear();
            return false;
        };
        ats.truncate(n);
        if let Some(r) = &mut self.remaining {
            *r -= n as u64;
        }
        self.cap();
        true
    }

    /// Drops the current departure without building it (the `skip` policy). Sizes are drawn
    /// so that a bit-rate schedule keeps its pace.
    pub fn skip(&mut self) -> u32 {
        if let Some(r) = &mut self.replay {
            let len = r.next_len() as u64 + 4;
            r.take(&mut [0u8; 0]);
            self.sched.advance(len);
            return 1;
        }
        let d = self.sched.current();
        let mut bytes = 0;
        for _ in 0..d.frames {
            let vi = self.cfg.pick.pick(self.built, &mut self.pick_rng);
            let v = &self.cfg.variants[vi];
            bytes += u64::from(v.sizes.next(self.vbuilt[vi], &mut self.size_rng));
        }
        self.sched.advance(bytes);
        d.frames
    }

    /// Frames from here on are built from `variants` (the same stream recompiled with other
    /// sizes): the field ops keep their positions where the variant keeps its ops.
    pub fn replace_variants(&mut self, variants: Vec<crate::packet::variant::Variant>) {
        let same = variants.len() == self.cfg.variants.len()
            && variants
                .iter()
                .zip(&self.cfg.variants)
                .all(|(a, b)| a.ops.len() == b.ops.len());
        if !same {
            self.vbuilt = vec![0; variants.len()];
            self.op_state = variants.iter().map(|v| vec![0; v.ops.len()]).collect();
        }
        self.hot = variants.iter().map(|v| Hot::new(v, self.cfg.id)).collect();
        self.cfg.variants = variants;
    }

    /// Multiplies the stream's rate by `k` from its next departure on.
    pub fn scale_rate(&mut self, k: f64) {
        self.sched.scale_rate(k);
    }

    /// Moves the rest of the schedule later (the `shift` policy).
    pub fn shift(&mut self, ns: u64) {
        self.sched.shift(ns);
        self.replay_origin += ns;
        if let Some(e) = &mut self.end_ns {
            *e += ns;
        }
    }
}

/// A variant in the send loop's shape: its ops flat and, when all its frames have one size,
/// its frame cut once.
#[derive(Debug)]
struct Hot {
    ops: Vec<HotOp>,
    /// The random ops: index and range (a block draws them in a tight loop).
    random: Vec<(usize, u64, u64)>,
    /// Each op's column in a block's values: the ops on 2-byte fields first, then those on
    /// 4-byte fields, each in the order of `at16` / `at32`, then any other.
    col: Vec<usize>,
    /// The offsets of the flat ops' fields by width, in column order (a block writes them
    /// without a match or a lookup).
    at16: Vec<usize>,
    at32: Vec<usize>,
    /// The columns of the flat ops whose fields are part of the IPv4 header, and of the L4
    /// checksum: a block's checksum deltas are their sums.
    sum_cols: (Vec<usize>, Vec<usize>),
    /// The flat ops' [`HotOp::neg`] summed: the IPv4 and L4 words that the fixed frame's
    /// sums hold, and that the general path adds to its deltas.
    neg: (u64, u64),
    fixed: Option<FixedFrame>,
}

impl Hot {
    /// The variant's field ops (`ops`, at positions `state`) on `frame`: their checksum
    /// deltas for the IPv4 header and the L4 checksum (without [`Hot::neg`]).
    #[inline(always)]
    fn apply(&self, ops: &[FieldOp], state: &mut [u64], rng: &mut Xoshiro256PlusPlus, frame: &mut [u8]) -> (u64, u64) {
        let (mut d_ip, mut d_l4) = (0u64, 0u64);
        for (op, st) in self.ops.iter().zip(state) {
            let d = op.apply(frame, st, rng, ops);
            d_ip += d & op.ip;
            d_l4 += d & op.l4;
        }
        (d_ip, d_l4)
    }

    /// Variant `v` of stream `stream`.
    fn new(v: &Variant, stream: u16) -> Hot {
        let ops: Vec<HotOp> = v.ops.iter().enumerate().map(|(i, op)| HotOp::new(op, i)).collect();
        let neg = ops.iter().map(HotOp::neg).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let mut fixed = match v.sizes {
            SizeGen::Fixed(s) => FixedFrame::new(&v.template, s as usize - FCS_LEN, stream),
            _ => None,
        };
        if let Some(f) = fixed.as_mut() {
            f.add_to_sums(neg.0, neg.1);
            if ops.iter().all(|o| o.ip == 0) {
                f.freeze_ip_checksum();
            }
        }
        let random = ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.range().map(|(a, b)| (i, a, b)))
            .collect();
        let width = |i: usize| if ops[i].is_flat() { ops[i].place().1 } else { usize::MAX };
        let mut order: Vec<usize> = (0..ops.len()).collect();
        order.sort_by_key(|&i| width(i));
        let mut col = vec![0; ops.len()];
        for (c, &i) in order.iter().enumerate() {
            col[i] = c;
        }
        let at = |w: usize| {
            order
                .iter()
                .filter(|&&i| width(i) == w)
                .map(|&i| ops[i].place().0)
                .collect()
        };
        let in_sum = |part: fn(&HotOp) -> u64| {
            (0..ops.len())
                .filter(|&i| ops[i].is_flat() && part(&ops[i]) != 0)
                .map(|i| col[i])
                .collect()
        };
        Hot {
            sum_cols: (in_sum(|o| o.ip), in_sum(|o| o.l4)),
            random,
            col,
            at16: at(2),
            at32: at(4),
            neg,
            ops,
            fixed,
        }
    }
}
