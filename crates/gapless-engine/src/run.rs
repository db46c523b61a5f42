//! The send loop: streams merged by next departure time, one absolute schedule each, a busy
//! wait on the TSC, one backend send per departure (batch 1 unless the profile asks for
//! bursts), and the lateness of every frame recorded against its scheduled time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gapless_core::config::Profile;
use gapless_core::spec::OnLate;
use gapless_core::StreamGen;
use gapless_io::TxBackend;
use hdrhistogram::Histogram;

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

/// What one stream did.
pub struct StreamStats {
    pub sent: u64,
    pub bytes: u64,
    pub lateness: Histogram<u64>,
    pub late_over_gap: u64,
    /// Throughput mode: how early frames left (ns before their scheduled time), and how many
    /// left more than half a gap early (a burst the batching made).
    pub early: Histogram<u64>,
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
}

impl StreamStats {
    /// The achieved rate against the rate the schedule asked for over the same frames
    /// (sent-time span against scheduled-time span); None with fewer than two departures.
    pub fn rate_error_vs_schedule(&self) -> Option<f64> {
        let (f, fa) = (self.first_ns?, self.first_at?);
        let sent_span = self.last_ns.checked_sub(f).filter(|&s| s > 0)?;
        let sched_span = self.last_at.checked_sub(fa).filter(|&s| s > 0)?;
        Some(sched_span as f64 / sent_span as f64 - 1.0)
    }
}

impl StreamStats {
    pub fn new() -> StreamStats {
        StreamStats {
            sent: 0,
            bytes: 0,
            lateness: Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("valid bounds"),
            late_over_gap: 0,
            early: Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("valid bounds"),
            early_over_half_gap: 0,
            late_events: 0,
            skipped: 0,
            shifted_ns: 0,
            first_ns: None,
            last_ns: 0,
            last_frames: 0,
            first_at: None,
            last_at: 0,
        }
    }

    /// Adds another part of the same stream (a lane on another send loop).
    pub fn absorb(&mut self, o: &StreamStats) {
        self.sent += o.sent;
        self.bytes += o.bytes;
        let _ = self.lateness.add(&o.lateness);
        let _ = self.early.add(&o.early);
        self.late_over_gap += o.late_over_gap;
        self.early_over_half_gap += o.early_over_half_gap;
        self.late_events += o.late_events;
        self.skipped += o.skipped;
        self.shifted_ns += o.shifted_ns;
        self.first_ns = match (self.first_ns, o.first_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if o.last_ns >= self.last_ns {
            self.last_ns = o.last_ns;
            self.last_frames = o.last_frames;
        }
        self.first_at = match (self.first_at, o.first_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_at = self.last_at.max(o.last_at);
    }
}

impl Default for StreamStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Merges the stats of several send loops into one per original stream: `parts[w]` ran the
/// streams `map[w][i]` (indices into the original profile) of `n` in all.
pub fn merge_workers(parts: Vec<RunStats>, map: &[Vec<usize>], n: usize) -> RunStats {
    let mut streams: Vec<StreamStats> = (0..n).map(|_| StreamStats::new()).collect();
    let mut out: Option<RunStats> = None;
    for (w, p) in parts.into_iter().enumerate() {
        for (i, st) in p.streams.iter().enumerate() {
            streams[map[w][i]].absorb(st);
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
            raw_hz: p.raw_hz,
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
    o.streams = streams;
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
    pub raw_hz: f64,
    /// What each send loop measured about its core.
    pub loops: Vec<gapless_core::verdict::LoopHealth>,
    /// What the loops could not do as asked (e.g. a refused real-time priority).
    pub warnings: Vec<String>,
}

/// Rewrites the frames' TX stamps with CLOCK_REALTIME read now (live backends), then hands
/// the frames to the backend: the stamp is as close to the system call as it can be.
#[inline]
fn stamp_and_send(
    g: &mut StreamGen,
    backend: &mut dyn TxBackend,
    lens: &[usize],
    ats: &[u64],
    stamp_real: bool,
) -> Result<usize, gapless_io::IoError> {
    if stamp_real {
        let ts = RunClock::realtime_now_ns();
        for (j, &len) in lens.iter().enumerate() {
            g.cfg.template.patch_tx_ns(&mut backend.buf(j)[..len], ts);
        }
    }
    backend.send(lens, ats)
}

fn pin(core: Option<usize>) -> Option<usize> {
    let ids = core_affinity::get_core_ids()?;
    let id = match core {
        Some(c) => ids.into_iter().find(|i| i.id == c)?,
        None => ids.into_iter().last()?,
    };
    core_affinity::set_for_current(id).then_some(id.id)
}

/// Runs the profile to its end (or until `stop`). Per-frame send failures are counted;
/// a backend that fails for good ends the run, and what was sent until then is reported.
pub fn run(profile: &Profile, backend: &mut dyn TxBackend, opts: &RunOptions) -> RunStats {
    let tx_core = pin(opts.core);
    let mut warnings = Vec::new();
    if let Some(p) = opts.rt_priority {
        if let Err(e) = crate::cpu::set_rt_priority(p) {
            warnings.push(format!(
                "--rt-priority {p}: SCHED_FIFO refused ({e}); the send loop ran at normal priority. Fix: run as root (CAP_SYS_NICE)"
            ));
        }
    }
    let mut clock = RunClock::new();
    let raw_hz = clock.raw_hz(20);
    // A pcap file is written on schedule time: waiting for it would only slow the writing.
    let pace = opts.pace && !backend.on_schedule_time();
    let stamp_real = backend.is_live();
    let sched_time = backend.on_schedule_time();
    // Whether every departure reads the wall clock (paced, or stamped for the wire).
    let timed = pace || stamp_real;

    let mut gens: Vec<StreamGen> = profile.streams.iter().cloned().map(StreamGen::new).collect();
    let gaps: Vec<u64> = profile
        .streams
        .iter()
        .map(|s| s.mean_gap_ns().max(1.0) as u64)
        .collect();
    let mut stats: Vec<StreamStats> = gens.iter().map(|_| StreamStats::new()).collect();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    for (i, g) in gens.iter().enumerate() {
        if let Some(d) = g.next_departure() {
            heap.push(Reverse((d.at_ns, i)));
        }
    }
    let max_batch = backend.max_batch().max(1);
    let mut lens: Vec<usize> = Vec::with_capacity(max_batch);
    let mut ats: Vec<u64> = Vec::with_capacity(max_batch);
    let stop = &*opts.stop;
    let mut interrupted = false;
    let mut backend_error = None;
    let mut end_ns = 0;

    match &opts.sync {
        Some(s) => clock.restart_at(s.start(&clock)),
        None => clock.restart(),
    }
    let watch = crate::cpu::CoreWatch::start(tx_core, opts.rt_priority.filter(|_| warnings.is_empty()));
    // The stream being served stays at the top of the heap; `reschedule` moves it to its next
    // departure with one sift (or removes it when it has ended).
    fn reschedule(heap: &mut BinaryHeap<Reverse<(u64, usize)>>, si: usize, next: Option<u64>) {
        match next {
            Some(at) => *heap.peek_mut().expect("the served stream is at the top") = Reverse((at, si)),
            None => {
                heap.pop();
            }
        }
    }
    'outer: while let Some(&Reverse((mut at, si))) = heap.peek() {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let g = &mut gens[si];
        let st = &mut stats[si];
        if pace {
            let now = clock.now_ns();
            if now > at + gaps[si] {
                st.late_events += 1;
                match profile.on_late {
                    OnLate::CatchUp => {}
                    OnLate::Skip => {
                        // Drop every departure already in the past; resume with the next.
                        loop {
                            st.skipped += u64::from(g.skip());
                            match g.next_departure() {
                                Some(d) if d.at_ns + gaps[si] < now => continue,
                                next => {
                                    reschedule(&mut heap, si, next.map(|d| d.at_ns));
                                    continue 'outer;
                                }
                            }
                        }
                    }
                    OnLate::Shift => {
                        let lag = now - at;
                        g.shift(lag);
                        st.shifted_ns += lag;
                        at += lag;
                    }
                }
            }
        }
        let dep = g.next_departure().expect("streams in the heap have a departure");
        // Throughput mode coalesces this departure with the stream's next single-frame ones
        // into one send at this departure's time; otherwise the departure's own frames go out,
        // in chunks of at most the backend's batch.
        let coalesce = opts.batch > 1 && dep.frames == 1;
        let mut left = dep.frames as usize;
        let mut bytes_dep = 0u64;
        let mut failed_bytes = 0u64;
        let mut first_chunk = true;
        while left > 0 {
            lens.clear();
            ats.clear();
            if coalesce {
                let limit = opts.batch.min(max_batch);
                let mut d = Some(dep);
                while let Some(dp) = d.filter(|dp| dp.frames == 1 && lens.len() < limit) {
                    let len = g.build(backend.buf(lens.len()), dp.at_ns);
                    lens.push(len);
                    ats.push(dp.at_ns);
                    bytes_dep += len as u64 + 4;
                    g.advance(len as u64 + 4);
                    d = g.next_departure();
                }
                left = 0;
            } else {
                let n = left.min(max_batch);
                for j in 0..n {
                    let len = g.build(backend.buf(j), at);
                    lens.push(len);
                    ats.push(at);
                    bytes_dep += len as u64 + 4;
                }
                left -= n;
            }
            let n = lens.len();
            // Unpaced runs off the wire (null) need no clock per departure: their rate comes
            // from the first departure's time and the end of the run.
            let t_send = if pace && first_chunk {
                clock.wait_until(at, stop)
            } else if timed || st.first_ns.is_none() {
                clock.now_ns()
            } else {
                0
            };
            let left = match stamp_and_send(g, backend, &lens, &ats, stamp_real) {
                Ok(left) => left.min(n),
                Err(e) => {
                    backend_error = Some(e.to_string());
                    break 'outer;
                }
            };
            // Frames the backend failed to send are not counted as sent (their bytes by the
            // chunk's mean size).
            if left < n {
                let chunk: u64 = lens.iter().map(|&l| l as u64 + 4).sum();
                failed_bytes += chunk * (n - left) as u64 / n as u64;
            }
            let when = if sched_time { at } else { t_send };
            if pace {
                if coalesce {
                    // Frames scheduled after the send left early: the burst batching makes.
                    for &a in &ats {
                        if t_send >= a {
                            let late = t_send - a;
                            st.lateness.saturating_record(late);
                            st.late_over_gap += u64::from(late > gaps[si]);
                        } else {
                            let early = a - t_send;
                            st.early.saturating_record(early);
                            st.early_over_half_gap += u64::from(early > gaps[si] / 2);
                        }
                    }
                } else {
                    let late = t_send.saturating_sub(at);
                    st.lateness.saturating_record_n(late, n as u64);
                    if late > gaps[si] {
                        st.late_over_gap += n as u64;
                    }
                }
                opts.live.streams[si]
                    .lag_ns
                    .store(t_send.saturating_sub(at), Ordering::Relaxed);
            }
            st.first_ns.get_or_insert(when);
            st.first_at.get_or_insert(ats[0]);
            st.last_at = ats[n - 1];
            if timed || sched_time {
                st.last_ns = when;
            }
            st.last_frames = left as u64;
            st.sent += left as u64;
            end_ns = end_ns.max(when);
            first_chunk = false;
        }
        st.bytes += bytes_dep - failed_bytes.min(bytes_dep);
        if !coalesce {
            g.advance(bytes_dep);
        }
        let live = &opts.live.streams[si];
        live.sent.store(st.sent, Ordering::Relaxed);
        live.bytes.store(st.bytes, Ordering::Relaxed);
        reschedule(&mut heap, si, g.next_departure().map(|d| d.at_ns));
    }
    if !interrupted && stop.load(Ordering::Relaxed) && !heap.is_empty() {
        interrupted = true;
    }
    if !(timed || sched_time) {
        let end = clock.now_ns();
        for st in stats.iter_mut().filter(|s| s.first_ns.is_some()) {
            st.last_ns = end;
        }
    }
    let send_errors = backend.errors();
    let wall_ns = clock.now_ns();
    let duration_ns = if sched_time { end_ns } else { wall_ns };
    let loops = vec![watch.finish(wall_ns, clock.wait_stats())];
    RunStats {
        loops,
        warnings,
        streams: stats,
        interrupted,
        duration_ns,
        send_errors,
        last_send_error: backend.last_error(),
        backend_error,
        tx_core,
        realtime0_ns: clock.realtime0_ns,
        raw_hz,
    }
}
