//! The send loop: streams merged by next departure time, one absolute schedule each, a busy
//! wait on the TSC, one backend send per departure (batch 1 unless the profile asks for
//! bursts), and the lateness of every frame recorded against its scheduled time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use gapless_core::generator::scheduler::StreamStats;
use gapless_core::generator::scheduler::{ChunkBufs, Due, Frames, Scheduler, Sent};
use gapless_core::profile::model::Profile;
use gapless_core::StreamGen;
use gapless_io::tx::TxBackend;

use crate::clock::RunClock;
use crate::live::Live;

/// How to run.
pub struct RunOptions {
    /// Wait for each departure time (software pacing). Off: as fast as the backend takes.
    pub pace: bool,
    /// Core to pin the send loop to.
    pub core: Option<usize>,
    /// Raised by Ctrl-C / SIGTERM: the loop stops after the current departure.
    pub stop: Arc<AtomicBool>,
    /// Counters for the live line.
    pub live: Arc<Live>,
    /// Throughput mode when above 1: up to this many single-frame departures of a stream go
    /// out in one send at the first one's time (the later ones leave early: bursts, which the
    /// result reports). 1: precise mode, one departure per send.
    pub batch: usize,
    /// Several send loops: they start on one shared zero, so that their schedules (a
    /// phase-shifted split above all) line up.
    pub sync: Option<Arc<SyncStart>>,
    /// Run the loop under SCHED_FIFO at this priority.
    pub rt_priority: Option<u32>,
    /// Launch time: hand each departure to the kernel this long before its time (ns); the
    /// qdisc or NIC holds it until then.
    pub lead_ns: u64,
    /// A warm-up: frames sent in its first ns are counted apart (the meter leaves them out).
    pub warmup: Option<Arc<Warmup>>,
    /// Wait, set-up done, for a start instant on the wall clock.
    pub gate: Option<Arc<StartGate>>,
    /// The run's own link while a user's event holds it down: sends it refuses then are
    /// counted, not fatal (`crate::events`).
    pub held: Option<Arc<crate::events::Expected>>,
}

/// A warm-up shared by the send loops and the meter: its length, and its start on the
/// signature's clock (CLOCK_REALTIME), published by the first loop to start.
#[derive(Debug, Default)]
pub struct Warmup {
    pub ns: u64,
    start_rt: std::sync::atomic::AtomicU64,
}

impl Warmup {
    pub fn new(ns: u64) -> Warmup {
        Warmup {
            ns,
            start_rt: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The start every loop and the meter agree on: the first proposal wins (a run across
    /// hosts proposes the controller's T0 before any loop starts).
    pub fn publish(&self, realtime0_ns: u64) -> u64 {
        match self
            .start_rt
            .compare_exchange(0, realtime0_ns, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => realtime0_ns,
            Err(v) => v,
        }
    }

    /// The start on CLOCK_REALTIME, once a send loop has started.
    pub fn start(&self) -> Option<u64> {
        Some(self.start_rt.load(Ordering::Acquire)).filter(|&v| v != 0)
    }
}

/// Where the warm-up ends, on the clock of the frames' TX stamps.
#[derive(Clone, Copy)]
struct WarmEnd {
    /// CLOCK_REALTIME (live backends stamp the wall clock).
    real_ns: u64,
    /// Schedule time (files and null stamp the scheduled time).
    at_ns: u64,
}

impl WarmEnd {
    /// Frames of a chunk sent in the warm-up: by the wall-clock stamp `ts` when stamped, else
    /// by each frame's scheduled time.
    #[inline]
    fn count(w: Option<WarmEnd>, stamped: bool, ts: u64, ats: &[u64]) -> usize {
        match w {
            None => 0,
            Some(w) if stamped && ts < w.real_ns => ats.len(),
            Some(_) if stamped => 0,
            Some(w) => ats.iter().filter(|&&a| a < w.at_ns).count(),
        }
    }
}

/// One start for several send loops: each waits at the barrier when ready; the first one
/// through publishes the raw clock instant that every loop then takes as its zero.
pub struct SyncStart {
    barrier: std::sync::Barrier,
    t0_raw: std::sync::atomic::AtomicU64,
}

impl SyncStart {
    pub fn new(loops: usize) -> SyncStart {
        SyncStart {
            barrier: std::sync::Barrier::new(loops),
            t0_raw: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Waits for every loop, then returns the shared zero.
    fn start(&self, clock: &RunClock) -> u64 {
        if self.barrier.wait().is_leader() {
            self.t0_raw.store(clock.raw().max(1), Ordering::Release);
        }
        loop {
            let t = self.t0_raw.load(Ordering::Acquire);
            if t != 0 {
                return t;
            }
            std::hint::spin_loop();
        }
    }
}

/// A start at an instant on the wall clock, given once the run is ready: what a run across
/// hosts needs to start every host's traffic together. Each send loop, its set-up done (the
/// socket open, the core chosen, the first frames built), says it is ready and waits for
/// [`StartGate::open`]; its first departure is then due at that instant, on this host's
/// `CLOCK_REALTIME` shifted by `shift_ns` (a test's stand-in for a clock of its own).
#[derive(Debug, Default)]
pub struct StartGate {
    at: std::sync::atomic::AtomicU64,
    ready: std::sync::atomic::AtomicUsize,
    shift_ns: i64,
}

impl StartGate {
    pub fn new(shift_ns: i64) -> StartGate {
        StartGate {
            shift_ns,
            ..StartGate::default()
        }
    }

    /// How many send loops are waiting for the start.
    pub fn ready(&self) -> usize {
        self.ready.load(Ordering::Acquire)
    }

    /// Sets the start: the first departure at `at_unix_ns` on this host's (shifted) clock.
    /// False when it was set already.
    pub fn open(&self, at_unix_ns: u64) -> bool {
        self.at
            .compare_exchange(0, at_unix_ns.max(1), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// This host's clock as the gate reads it, ns since the Unix epoch.
    pub fn now_ns(&self) -> u64 {
        (RunClock::realtime_now_ns() as i64 + self.shift_ns) as u64
    }

    /// Says ready, waits for the start to be set and for its instant less `lead` (the loop's
    /// zero); false when `stop` came first.
    fn wait(&self, lead: u64, stop: &AtomicBool) -> bool {
        self.ready.fetch_add(1, Ordering::AcqRel);
        let at = loop {
            match self.at.load(Ordering::Acquire) {
                0 if stop.load(Ordering::Relaxed) => return false,
                0 => std::thread::sleep(std::time::Duration::from_millis(1)),
                at => break at.saturating_sub(lead),
            }
        };
        loop {
            let now = self.now_ns();
            if now >= at {
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let left = at - now;
            if left > 2_000_000 {
                std::thread::sleep(std::time::Duration::from_nanos(left - 1_000_000));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Merges the stats of several send loops into one per original stream: `parts[w]` ran the
/// streams `map[w][i]` (indices into the original profile) of `n` in all.
pub fn merge_workers(parts: Vec<RunStats>, map: &[Vec<usize>], n: usize) -> RunStats {
    // A stream sent whole by one loop keeps its stats as they are (no copy of its
    // histograms); the lanes of a split stream are added into the first lane's.
    let mut streams: Vec<Option<StreamStats>> = (0..n).map(|_| None).collect();
    let mut out: Option<RunStats> = None;
    for (w, mut p) in parts.into_iter().enumerate() {
        for (i, st) in std::mem::take(&mut p.streams).into_iter().enumerate() {
            match &mut streams[map[w][i]] {
                Some(into) => into.absorb(&st),
                slot => *slot = Some(st),
            }
        }
        let o = out.get_or_insert(RunStats {
            streams: Vec::new(),
            interrupted: false,
            duration_ns: 0,
            send_errors: 0,
            last_send_error: None,
            backend_error: None,
            tx_core: p.tx_core,
            realtime0_ns: p.realtime0_ns,
            clock: p.clock,
            loops: Vec::new(),
            warnings: Vec::new(),
        });
        o.loops.extend(p.loops);
        o.warnings.extend(p.warnings);
        o.interrupted |= p.interrupted;
        o.duration_ns = o.duration_ns.max(p.duration_ns);
        o.send_errors += p.send_errors;
        o.last_send_error = o.last_send_error.take().or(p.last_send_error);
        o.backend_error = o.backend_error.take().or(p.backend_error);
        o.realtime0_ns = o.realtime0_ns.min(p.realtime0_ns);
    }
    let mut o = out.expect("at least one send loop");
    o.streams = streams.into_iter().map(Option::unwrap_or_default).collect();
    o
}

/// What the run did.
pub struct RunStats {
    pub streams: Vec<StreamStats>,
    pub interrupted: bool,
    pub duration_ns: u64,
    pub send_errors: u64,
    pub last_send_error: Option<String>,
    pub backend_error: Option<String>,
    pub tx_core: Option<usize>,
    pub realtime0_ns: u64,
    /// The pacer's clock as its discipline measured it (the first loop's).
    pub clock: crate::clock::ClockReport,
    /// What each send loop measured about its core.
    pub loops: Vec<gapless_core::result::verdict::LoopHealth>,
    /// What the loops could not do as asked (e.g. a refused real-time priority).
    pub warnings: Vec<String>,
}

/// The backend's buffers, where the scheduler builds frames.
struct BackendFrames<'a>(&'a mut dyn TxBackend);
impl Frames for BackendFrames<'_> {
    #[inline(always)]
    fn buf(&mut self, j: usize) -> &mut [u8] {
        self.0.buf(j)
    }
    #[inline(always)]
    fn run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        self.0.buf_run(first, n)
    }
}

/// Rewrites the frames' TX stamps with CLOCK_REALTIME read now (live backends), then hands
/// the frames to the backend: the stamp is as close to the system call as it can be.
#[inline]
fn stamp_and_send(
    g: &mut StreamGen,
    backend: &mut dyn TxBackend,
    lens: &[usize],
    ats: &[u64],
    variants: &[u16],
    stamp_real: bool,
    t_send: u64,
) -> Result<(usize, u64), gapless_io::IoError> {
    let mut ts = 0;
    if stamp_real {
        ts = RunClock::realtime_now_ns();
        for (j, (&len, &v)) in lens.iter().zip(variants).enumerate() {
            g.patch_tx_ns(v, &mut backend.buf(j)[..len], ts);
        }
        if backend.wants_due_times() {
            tell_due_times(backend, ats, ts, t_send);
        }
    }
    Ok((backend.send(lens, ats)?, ts))
}

/// A send that the run's own link refused while a user's link event holds it down: the
/// frames count as sent (the meter finds them lost) and in `Expected::dropped`; any other
/// fault ends the loop as before.
#[cold]
fn held_drop(opts: &RunOptions, e: gapless_io::IoError, n: usize) -> Result<(usize, u64), gapless_io::IoError> {
    match &opts.held {
        Some(h) if h.down() && matches!(e, gapless_io::IoError::LinkLost { .. }) => Ok(skip_held(h, n)),
        _ => Err(e),
    }
}

/// `n` frames not sent while a user's event holds the run's link down: counted as sent (and
/// lost) in `Expected::dropped`, and the loops stop trying until the link is back.
#[cold]
fn skip_held(h: &crate::events::Expected, n: usize) -> (usize, u64) {
    h.refused(n);
    (n, RunClock::realtime_now_ns())
}

/// Each frame's due time on the wall clock, anchored at this send (the wall clock `ts` read
/// at run-clock time `t_send`), so the TSC's drift against CLOCK_REALTIME never adds up.
#[cold]
fn tell_due_times(backend: &mut dyn TxBackend, ats: &[u64], ts: u64, t_send: u64) {
    let due: Vec<u64> = ats.iter().map(|&a| (ts + a).saturating_sub(t_send)).collect();
    backend.due_times(&due, ts);
}

/// How the loop reads the clock.
#[derive(Clone, Copy)]
struct Timing {
    /// Wait for each departure's time.
    pace: bool,
    /// Stamp each frame with the wall clock before the send (live backends).
    stamp_real: bool,
    /// The backend is on schedule time (a pcap file): sends count at their scheduled time.
    sched_time: bool,
}

impl Timing {
    /// Whether every departure reads the wall clock (paced, or stamped for the wire).
    fn timed(self) -> bool {
        self.pace || self.stamp_real
    }
}

/// Runs the profile to its end (or until `stop`). Per-frame send failures are counted;
/// a backend that fails for good ends the run, and what was sent until then is reported.
pub fn run(profile: &Profile, backend: &mut dyn TxBackend, opts: &RunOptions) -> RunStats {
    let tx_core = crate::cpu::pin(opts.core, None, true);
    let mut warnings = Vec::new();
    if let Some(p) = opts.rt_priority {
        if let Err(e) = crate::cpu::set_rt_priority(p) {
            warnings.push(format!(
                "--rt-priority {p}: SCHED_FIFO refused ({e}); the send loop ran at normal priority. Fix: run as root (CAP_SYS_NICE)"
            ));
        }
    }
    let mut clock = RunClock::new();
    // A pcap file is written on schedule time: waiting for it would only slow the writing.
    let t = Timing {
        pace: opts.pace && !backend.on_schedule_time(),
        stamp_real: backend.is_live(),
        sched_time: backend.on_schedule_time(),
    };
    let lead = if t.pace { START_LEAD_NS } else { 0 };
    let mut sched = Scheduler::with_start_lead(profile, t.pace, opts.batch, lead);
    if !t.timed() && !t.sched_time {
        // Nothing waits or stamps (the null backend): many departures per step, same order.
        sched = sched.chunk_in_order();
    }
    // Everything that reads /proc comes before the zero: the first departure is due at once,
    // and any time spent between the zero and the loop makes it late (and shortens the span
    // a receiver measures the rate over).
    let watch = crate::cpu::CoreWatch::start(tx_core, opts.rt_priority.filter(|_| warnings.is_empty()));
    let opened = opts.gate.as_ref().is_none_or(|g| g.wait(lead, &opts.stop));
    match &opts.sync {
        Some(s) => clock.restart_at(s.start(&clock)),
        None => clock.restart(),
    }
    // The warm-up counts from the first departures, after the start lead.
    let warm = opts.warmup.as_ref().map(|w| WarmEnd {
        real_ns: w.publish(clock.realtime0_ns + lead) + w.ns,
        at_ns: lead + w.ns,
    });
    let (interrupted, backend_error) = match opened {
        true => send_loop(&mut sched, backend, &clock, opts, t, warm),
        false => (true, None),
    };
    let interrupted = interrupted || (opts.stop.load(Ordering::Relaxed) && !sched.is_done());
    let end_ns = sched.end_ns();
    let untimed_end = (!(t.timed() || t.sched_time)).then(|| clock.now_ns());
    let send_errors = backend.errors();
    let wall_ns = clock.now_ns();
    RunStats {
        loops: vec![watch.finish(wall_ns, clock.wait_stats(), clock.long_stalls())],
        warnings,
        streams: sched.into_stats(untimed_end),
        interrupted,
        duration_ns: if t.sched_time { end_ns } else { wall_ns },
        send_errors,
        last_send_error: backend.last_error(),
        backend_error,
        tx_core,
        realtime0_ns: clock.realtime0_ns,
        clock: clock.report(),
    }
}

/// A paced run's departures start this long after its zero, so the loop is already waiting
/// when the first one is due: building the first frames and entering the loop are not
/// charged to the first departure. Without it the first frame left ~20 µs late, which a
/// receiver measuring the rate from the first to the last arrival reads as +4 ppm over 5 s.
pub const START_LEAD_NS: u64 = 200_000;

/// How often a paused stream's loop looks at its flag: a resumed stream's next departure is
/// at most this far away.
pub const PAUSE_POLL_NS: u64 = 1_000_000;

/// A paused stream: waits (asleep, at most a poll) for its departure, then moves its
/// schedule a poll past now.
#[cold]
fn hold(sched: &mut Scheduler, due: Due, clock: &RunClock) {
    let now = clock.now_ns();
    if due.at > now {
        std::thread::sleep(std::time::Duration::from_nanos((due.at - now).min(PAUSE_POLL_NS)));
    }
    sched.postpone(due.stream, clock.now_ns() + PAUSE_POLL_NS);
}

/// A stream recompiled with other frame sizes: its frames from here on, if they fit the
/// backend's buffers (`room` bytes).
#[cold]
fn take_variants(sched: &mut Scheduler, si: usize, live: &crate::live::StreamLive, room: usize) {
    live.variants_pending.store(false, Ordering::Relaxed);
    let v = live.variants.lock().unwrap_or_else(|p| p.into_inner()).take();
    let fits = |v: &Vec<gapless_core::packet::variant::Variant>| {
        v.iter()
            .all(|x| x.sizes.max() as usize - gapless_core::packet::sizes::FCS_LEN <= room)
    };
    if let Some(v) = v.filter(fits) {
        sched.replace_variants(si, v);
    }
}

/// The hot loop: the next departure, a busy-wait to its time, its frames built and sent.
/// Returns whether `stop` ended it, and the backend's fatal error.
fn send_loop(
    sched: &mut Scheduler,
    backend: &mut dyn TxBackend,
    clock: &RunClock,
    opts: &RunOptions,
    t: Timing,
    warm: Option<WarmEnd>,
) -> (bool, Option<String>) {
    let max_batch = backend.max_batch().max(1);
    let mut bufs = ChunkBufs::with_capacity(max_batch);
    let stop = &*opts.stop;
    let ports = backend.routes_streams();
    loop {
        if stop.load(Ordering::Relaxed) {
            return (true, None);
        }
        let Some(due) = sched.next_due(|| clock.now_ns()) else {
            return (false, None);
        };
        let live = &opts.live.streams[due.stream];
        if live.rate_scale.load(Ordering::Relaxed) != 0 {
            let k = f64::from_bits(live.rate_scale.swap(0, Ordering::Relaxed));
            sched.scale_rate(due.stream, k);
        }
        if live.variants_pending.load(Ordering::Relaxed) {
            take_variants(sched, due.stream, live, backend.buf(0).len());
        }
        if live.paused.load(Ordering::Relaxed) {
            hold(sched, due, clock);
            continue;
        }
        if ports {
            backend.select_stream(due.stream);
        }
        let served = sched.serve(
            due,
            &mut BackendFrames(&mut *backend),
            &mut bufs,
            max_batch,
            |c| -> Result<Sent, gapless_io::IoError> {
                // Unpaced runs off the wire (null) need no clock per departure: their rate comes
                // from the first departure's time and the end of the run.
                let t_send = if t.pace && c.first_chunk {
                    clock.wait_until(c.at.saturating_sub(opts.lead_ns), stop)
                } else if t.timed() || c.first_send() {
                    clock.now_ns()
                } else {
                    0
                };
                let (left, ts) = match opts.held.as_deref().filter(|h| h.held()) {
                    Some(h) => skip_held(h, c.lens.len()),
                    None => match stamp_and_send(c.g, c.out.0, c.lens, c.ats, c.variants, t.stamp_real, t_send) {
                        Ok(v) => v,
                        Err(e) => held_drop(opts, e, c.lens.len())?,
                    },
                };
                let left = left.min(c.lens.len());
                if t.pace {
                    live.lag_ns.store(t_send.saturating_sub(c.at), Ordering::Relaxed);
                }
                Ok(Sent {
                    t_send,
                    when: if t.sched_time { c.at } else { t_send },
                    left,
                    timed: t.timed() || t.sched_time,
                    warmup: WarmEnd::count(warm, t.stamp_real, ts, &c.ats[..left]),
                })
            },
        );
        match served {
            Ok(st) => {
                live.sent.store(st.sent, Ordering::Relaxed);
                live.bytes.store(st.bytes, Ordering::Relaxed);
                if t.pace {
                    live.late_over_gap.store(st.late_over_gap, Ordering::Relaxed);
                }
            }
            Err(e) => return (false, Some(e.to_string())),
        }
    }
}
