//! The run API: [`Run::start`] opens everything a [`RunSpec`] asks for and starts the send
//! loops (and the meter); the [`RunHandle`] it returns gives live [`Snapshot`]s, stops the
//! run, and [`RunHandle::wait`]s for the [`RunReport`].
//!
//! The run lives on a thread of its own, which enters the run's network namespace: the
//! caller's thread stays where it is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use gapless_core::host::CoreLoad;
use gapless_core::meter::{Meter, MeterReport};
use gapless_core::profile::plan::{self, Plan};
use gapless_core::result::RunResult;
use gapless_core::spec::BackendKind;
use gapless_core::timing::departures::Pattern;
use gapless_core::Profile;
use gapless_io::kernel::nic::{enter_netns, iface_info, IfaceInfo};
use gapless_io::rx::RxSource;
use gapless_io::tx::afpacket::{AfPacketRingTx, AfPacketTx};
use gapless_io::tx::null::NullTx;
use gapless_io::tx::pcap::PcapTx;
use gapless_io::tx::TxBackend;
use gapless_io::xdp::{AfXdpTx, XdpMode};
use gapless_io::IoError;

use crate::live::{Live, RxLive};
use crate::report::{build_result, RunMeta};
use crate::rx::{finish_report, join, meter_loop, RxOutcome, RxStop};
use crate::snapshot::{Board, Snapshot};
use crate::spec::{Pacing, RunSpec, TxMethod, TxSocket, TxTarget};
use crate::{EngineError, RunOptions, RunStats};

/// Starts runs.
pub struct Run;

impl Run {
    /// Opens the run's sockets and files and starts it. Errors here mean nothing was sent.
    pub fn start(spec: RunSpec) -> Result<RunHandle, EngineError> {
        Run::start_with_stop(spec, Arc::new(AtomicBool::new(false)))
    }

    /// As [`Run::start`], stopped also when `stop` is raised (e.g. by a signal handler).
    pub fn start_with_stop(spec: RunSpec, stop: Arc<AtomicBool>) -> Result<RunHandle, EngineError> {
        let (tx, rx) = mpsc::channel();
        let flag = stop.clone();
        let done = Arc::new(Done::default());
        let done_here = done.clone();
        let thread = std::thread::Builder::new()
            .name("gapless-run".into())
            .spawn(move || {
                let prepared = match prepare(spec) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return None;
                    }
                };
                let _ = tx.send(Ok(prepared.board.clone()));
                let report = execute(prepared, &flag);
                done_here.set();
                Some(report)
            })
            .map_err(|e| IoError::Os {
                context: "starting the run's thread".into(),
                cause: e,
            })?;
        match rx.recv() {
            Ok(Ok(board)) => Ok(RunHandle {
                stop,
                board,
                thread,
                done,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(EngineError::Panicked("the run's thread")),
        }
    }
}

/// A run going on.
pub struct RunHandle {
    stop: Arc<AtomicBool>,
    board: Arc<Board>,
    thread: JoinHandle<Option<Result<RunReport, EngineError>>>,
    done: Arc<Done>,
}

/// Raised when the run has ended, for waits with a timeout.
#[derive(Default)]
struct Done {
    ended: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Done {
    fn set(&self) {
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    fn wait(&self, d: Duration) -> bool {
        let g = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .cv
            .wait_timeout_while(g, d, |ended| !*ended)
            .unwrap_or_else(|e| e.into_inner());
        *g
    }
}

impl RunHandle {
    /// The run as it stands. Cheap: atomic loads, and the meter's last published counts.
    pub fn snapshot(&self) -> Snapshot {
        self.board.snapshot()
    }

    /// Pauses (`on`) or resumes stream `stream` (its index in the profile): while paused the
    /// send loops send none of its frames and move its schedule on. False: no such stream.
    pub fn pause(&self, stream: usize, on: bool) -> bool {
        self.board.pause(stream, on)
    }

    /// A handle that pauses and resumes the run's streams from another thread (a server's
    /// request handler), while the run's owner waits on it.
    pub fn pauser(&self) -> Pauser {
        Pauser(self.board.clone())
    }

    /// Asks the run to end after the current departure; it still reports what it did.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether the run has ended ([`RunHandle::wait`] will not block).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Blocks until the run ends or `d` has passed; true if it ended. A front end that
    /// prints once a second waits here instead of polling: no wakeups near the send loops.
    pub fn wait_timeout(&self, d: Duration) -> bool {
        self.done.wait(d) || self.thread.is_finished()
    }

    /// Waits for the end and returns the joined TX and RX result.
    pub fn wait(self) -> Result<RunReport, EngineError> {
        match self.thread.join() {
            Ok(Some(r)) => r,
            _ => Err(EngineError::Panicked("the run")),
        }
    }
}

/// Pauses and resumes a run's streams ([`RunHandle::pauser`]); does nothing once it ended.
#[derive(Clone)]
pub struct Pauser(Arc<Board>);

impl Pauser {
    /// See [`RunHandle::pause`].
    pub fn pause(&self, stream: usize, on: bool) -> bool {
        self.0.pause(stream, on)
    }

    /// A front end is about to set a link down: the run takes its link's faults as the
    /// user's, not as an end; on its own link (`own`) its loops stop trying, and the frames
    /// due count as sent and lost (`link_held_drops`).
    pub fn hold_link(&self, own: bool) {
        self.0.link.hold(own);
    }

    /// The link was set up again: the run sends once `iface` (in `netns`) reads up.
    pub fn release_link(&self, netns: Option<String>, iface: String) {
        self.0.link.release(netns, iface);
    }

    /// Multiplies stream `stream`'s rate (its index in the profile) by `k` (> 0) from its
    /// next departure on. The meter's precision figures for it give way to the reason (its
    /// gaps no longer follow the profile), and the result counts the change. False: no such
    /// stream, or `k` is not a positive number.
    pub fn scale_rate(&self, stream: usize, k: f64) -> bool {
        k.is_finite() && k > 0.0 && self.0.scale_rate(stream, k)
    }

    /// Stream `stream`'s frames come from `variants` (the stream recompiled with other
    /// frame sizes) from its next departure on. The caller keeps every frame within the
    /// largest the run started with (the backend's buffers were made for it); a loop whose
    /// buffers are smaller keeps the old frames. The meter gives its precision figures up,
    /// as for a rate change. False: no such stream.
    pub fn replace_variants(&self, stream: usize, variants: &[gapless_core::packet::variant::Variant]) -> bool {
        self.0.replace_variants(stream, variants)
    }
}

/// What a run did: the result (TX joined with RX), and what went wrong on the way.
#[derive(Debug)]
pub struct RunReport {
    pub result: RunResult,
    /// The pcap target, when one was written whole.
    pub pcap: Option<std::path::PathBuf>,
    /// The pcap target could not be finished: it was not written.
    pub pcap_error: Option<IoError>,
    /// The meter's error, which ended it early.
    pub meter_error: Option<String>,
    /// The backend's error (or the link's fault), which ended the run early.
    pub backend_error: Option<String>,
}

impl RunReport {
    /// Stopped before its end (a stop call, a signal, a fault).
    pub fn interrupted(&self) -> bool {
        self.result.interrupted
    }

    /// The first thing that went wrong, in the order a user must hear of it: the pcap not
    /// written, the meter failed, the backend failed, frames not sent.
    pub fn failure(&self) -> Option<EngineError> {
        if let Some(e) = &self.pcap_error {
            return Some(EngineError::PcapNotWritten(IoError::Pcap {
                path: self.pcap.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                message: e.to_string(),
            }));
        }
        if let Some(e) = &self.meter_error {
            return Some(EngineError::MeterFailed(e.clone()));
        }
        if let Some(e) = &self.backend_error {
            return Some(EngineError::BackendFailed(e.clone()));
        }
        (self.result.send_errors > 0).then(|| EngineError::SendFailed {
            frames: self.result.send_errors,
            last: self.result.last_send_error.clone().unwrap_or_else(|| "unknown".into()),
        })
    }
}

/// A run with everything open, ready to start.
struct Prepared {
    spec: RunSpec,
    plan: Plan,
    pace: bool,
    iface: Option<String>,
    info: Option<IfaceInfo>,
    backends: Vec<Box<dyn TxBackend>>,
    rx: Option<(Box<dyn RxSource>, Meter, Option<gapless_core::meter::CalibrationRef>)>,
    warnings: Vec<String>,
    core_probe: Vec<CoreLoad>,
    board: Arc<Board>,
    /// The rate-control method, set up (undone when dropped).
    ratectl: Option<crate::ratectl::RateControl>,
    /// The packet path's cores, held until the run ends (released when dropped).
    _cores: crate::cores::Hold,
}

fn check_spec(spec: &RunSpec) -> Result<(), EngineError> {
    if spec.rx.is_some() && !matches!(spec.target, TxTarget::Iface { .. }) {
        return Err(EngineError::RxWithoutInterface);
    }
    if let Some(r) = &spec.rx {
        r.meter.check()?;
    }
    if spec.batch == 0 || spec.batch > 256 {
        return Err(EngineError::Batch(spec.batch));
    }
    crate::tx_ports::check(spec)?;
    match (&spec.target, spec.pacing) {
        (TxTarget::Pcap(_), Pacing::On) => Err(EngineError::PacedPcap),
        _ => Ok(()),
    }
}

/// The capabilities the run needs, checked before anything starts.
fn check_caps(spec: &RunSpec) -> Result<(), IoError> {
    use gapless_io::kernel::caps::{require, Cap};
    let mut need = Vec::new();
    if matches!(spec.target, TxTarget::Iface { .. }) || spec.rx.is_some() {
        need.push(Cap::NetRaw);
    }
    if spec.rx.is_some() {
        need.push(Cap::NetAdmin);
    }
    let rx_ns = spec.rx.as_ref().is_some_and(|r| r.netns.is_some());
    let lag_ns = spec
        .lags
        .iter()
        .flat_map(|l| &l.more_members)
        .any(|p| p.netns.is_some());
    if spec.netns.is_some() || rx_ns || lag_ns || spec.more_tx.iter().any(|p| p.netns.is_some()) {
        need.push(Cap::SysAdmin);
    }
    if spec.rt_priority.is_some() {
        need.push(Cap::SysNice);
    }
    require("this run", &need, gapless_io::kernel::caps::effective())
}

fn prepare(spec: RunSpec) -> Result<Prepared, EngineError> {
    check_spec(&spec)?;
    check_caps(&spec)?;
    let rx = spec.rx.as_ref().map(|r| r.open()).transpose()?;
    if let Some(ns) = &spec.netns {
        enter_netns(ns)?;
    }
    let iface = match &spec.target {
        TxTarget::Iface { name, .. } => Some(name.clone()),
        _ => None,
    };
    let info = iface.as_deref().map(iface_info).transpose()?;
    let profile = spec.profile.compile(info.as_ref().and_then(|i| i.speed_bps))?;
    if matches!(spec.target, TxTarget::Pcap(_)) && !profile.is_bounded() {
        return Err(EngineError::UnboundedPcap);
    }
    let method = crate::ratectl::method_of(&spec);
    let socket = iface.as_ref().map(|_| socket_of(&spec, &profile));
    crate::ratectl::check(&spec, method, socket)?;
    crate::tx_ports::check_method(&spec, method)?;
    check_tx_stamps(&spec, socket)?;
    let pace = match spec.pacing {
        Pacing::Auto => iface.is_some(),
        p => p == Pacing::On,
    };
    // The events, before any frame: the run's own namespace is this thread's now.
    crate::events::check(&spec.events, None, crate::events::planned_ns(&profile))?;
    let (plan, mut warnings, core_probe) = plan_loops(&spec, profile, pace)?;
    let cores = hold_cores(&spec, &plan, &mut warnings)?;
    if let Some(inf) = &info {
        crate::frame_check::check_frames(&plan.profile, inf, socket_of(&spec, &plan.profile))?;
    }
    let mut ratectl = match &iface {
        Some(name) => {
            let queues = xdp_queues(socket, plan.loops.len());
            Some(crate::ratectl::setup(&spec, method, &plan.profile, name, queues)?)
        }
        None if method == gapless_core::spec::RateControlKind::Filler => {
            Some(crate::ratectl::setup(&spec, method, &plan.profile, "", None)?)
        }
        None => None,
    };
    let pace = pace && ratectl.as_ref().is_none_or(|r| r.paces());
    warnings.extend(ratectl.iter().flat_map(|r| r.warnings.iter().cloned()));
    let opts = afpacket_options(&spec, method);
    let mut backends = Vec::new();
    for w in 0..plan.loops.len() {
        let filler = method == gapless_core::spec::RateControlKind::Filler;
        let open = |o| open_backend(&spec, &plan.profile, w, o, filler);
        let first = match ratectl
            .as_mut()
            .filter(|r| r.kind == gapless_core::spec::RateControlKind::Filler)
        {
            Some(rc) => crate::ratectl::with_fillers(rc, &spec, &plan.profile, info.as_ref(), opts, open)?,
            None => open(opts)?,
        };
        let sizes = (plan.profile.max_frame() as usize, buffers_of(&spec, &plan.profile));
        backends.push(crate::tx_ports::with_more_ports(&spec, &plan, w, first, sizes, opts)?);
    }
    let rx = match (rx, &spec.rx) {
        (Some(src), Some(r)) => {
            let (mut cfg, cal) = r.meter.config(crate::rx::targets_of(&plan.profile))?;
            cfg.warmup_ns = spec.warmup.map_or(0, |d| d.as_nanos() as u64);
            Some((src, Meter::new(cfg), cal))
        }
        _ => None,
    };
    let board = board_of(&plan, rx.is_some());
    Ok(Prepared {
        spec,
        plan,
        pace,
        iface,
        info,
        backends,
        rx,
        warnings,
        core_probe,
        board,
        ratectl,
        _cores: cores,
    })
}

/// The AF_XDP queues the send loops bind (None for AF_PACKET: the kernel picks).
fn xdp_queues(socket: Option<TxSocket>, loops: usize) -> Option<Vec<u32>> {
    match socket {
        Some(TxSocket::AfXdp { queue, .. }) => Some((0..loops as u32).map(|w| queue + w).collect()),
        _ => None,
    }
}

/// TX stamps come from an AF_PACKET socket's error queue, or AF_XDP's TX metadata.
fn check_tx_stamps(spec: &RunSpec, socket: Option<TxSocket>) -> Result<(), EngineError> {
    use crate::TxStampKind::Hardware;
    match (spec.tx_stamps, socket) {
        (None, _) | (Some(_), Some(TxSocket::AfPacket(_))) => Ok(()),
        (Some(_), None) => Err(EngineError::TxStamps("they are taken as frames leave an interface: give --iface")),
        (Some(Hardware), Some(TxSocket::AfXdp { mode, .. })) if mode != XdpMode::ZeroCopy => Err(EngineError::TxStamps(
            "AF_XDP's TX metadata stamp is the NIC's only in zero-copy mode (in copy mode it is the kernel's software clock): add --xdp-mode zerocopy on a NIC that has it, or ask --tx-timestamps kernel",
        )),
        (Some(_), Some(TxSocket::AfXdp { .. })) => Ok(()),
    }
}

/// What the AF_PACKET socket does besides sending, by method.
fn afpacket_options(
    spec: &RunSpec,
    method: gapless_core::spec::RateControlKind,
) -> gapless_io::tx::afpacket::AfPacketOptions {
    use gapless_core::spec::RateControlKind as K;
    gapless_io::tx::afpacket::AfPacketOptions {
        bypass_qdisc: !matches!(method, K::Shaper | K::LaunchTime),
        tx_stamps: spec.tx_stamps,
        txtime: method == K::LaunchTime,
        nofcs: false,
        // A LAG's members open whatever their links: one down is out of the LAG until up.
        even_down: !spec.lags.is_empty(),
    }
}

fn board_of(plan: &Plan, rx: bool) -> Arc<Board> {
    let p = &plan.profile;
    Arc::new(Board::new(
        p.streams.iter().map(|s| s.name.clone()).collect(),
        p.streams.iter().map(|s| s.id).collect(),
        plan.loops
            .iter()
            .map(|l| (Arc::new(Live::new(l.profile.streams.len())), l.map.clone()))
            .collect(),
        rx.then(|| Arc::new(RxLive::default())),
    ))
}

/// The send loops: the plan over the cores asked for (or the quietest one).
fn plan_loops(
    spec: &RunSpec,
    mut profile: Profile,
    pace: bool,
) -> Result<(Plan, Vec<String>, Vec<CoreLoad>), EngineError> {
    let cores = plan::loop_cores(&profile, &spec.cores, spec.core);
    if spec.split_cbr {
        plan::split_all_cbr(&mut profile)?;
    }
    let allowed = crate::rx::allowed_cores();
    if let Some(&c) = cores.iter().flatten().find(|c| !allowed.contains(c)) {
        return Err(EngineError::CoreNotAllowed { core: c, allowed });
    }
    if cores.len() > 1 && matches!(spec.target, TxTarget::Pcap(_)) {
        return Err(EngineError::LoopsWithPcap);
    }
    plan::check_cores(&profile, &cores)?;
    // A loop goes on a core no other run holds.
    let free = crate::cores::available();
    let (cores, warnings, probe) = crate::cpu::choose_cores(cores, &free, pace && spec.probe_cores);
    let cores = resolve_cores(cores, &free);
    Ok((plan::plan(profile, &cores)?, warnings, probe))
}

/// Loops without a core get the last free core not already taken (as a send loop pins
/// itself), so the run knows every core it holds before it starts.
fn resolve_cores(cores: Vec<Option<usize>>, free: &[usize]) -> Vec<Option<usize>> {
    let mut taken: Vec<usize> = cores.iter().flatten().copied().collect();
    cores
        .into_iter()
        .map(|c| {
            c.or_else(|| {
                let pick = free.iter().rev().find(|f| !taken.contains(f)).copied();
                taken.extend(pick);
                pick
            })
        })
        .collect()
}

/// Holds the run's packet-path cores: its send loops', and its meter's if one was given.
fn hold_cores(spec: &RunSpec, plan: &Plan, warnings: &mut Vec<String>) -> Result<crate::cores::Hold, EngineError> {
    let mut cores: Vec<usize> = plan.loops.iter().filter_map(|l| l.core).collect();
    cores.extend(spec.rx.as_ref().and_then(|r| r.core));
    cores.sort_unstable();
    cores.dedup();
    let (hold, w) = crate::cores::hold(&cores)?;
    warnings.extend(w);
    Ok(hold)
}

fn socket_of(spec: &RunSpec, profile: &Profile) -> TxSocket {
    let from_profile = profile.spec.output.as_ref().and_then(|o| o.backend);
    match &spec.target {
        TxTarget::Iface { socket: Some(s), .. } => *s,
        _ if from_profile == Some(BackendKind::Afxdp) => TxSocket::AfXdp {
            mode: XdpMode::Auto,
            queue: 0,
        },
        _ => TxSocket::AfPacket(TxMethod::Sendmmsg),
    }
}

/// Buffers a backend opens: the most frames of one departure, or the batch asked.
fn buffers_of(spec: &RunSpec, profile: &Profile) -> usize {
    max_departure_frames(profile).max(spec.batch)
}

/// Frames one departure may carry: the backend's batch size.
fn max_departure_frames(p: &Profile) -> usize {
    p.streams
        .iter()
        .map(|s| match &s.pattern {
            Pattern::OnOff {
                size,
                peak_gap_ns: None,
                ..
            } => size.max() as usize,
            Pattern::OnOff { .. } => 1,
            _ => s.burst as usize,
        })
        .max()
        .unwrap_or(1)
        .clamp(1, 256)
}

fn open_backend(
    spec: &RunSpec,
    profile: &Profile,
    w: usize,
    opts: gapless_io::tx::afpacket::AfPacketOptions,
    filler: bool,
) -> Result<Box<dyn TxBackend>, EngineError> {
    let mut batch = buffers_of(spec, profile);
    let mut max_frame = profile.max_frame() as usize;
    if filler {
        // Fillers up to the largest frame the link takes (a jumbo MTU included), several
        // per departure.
        max_frame = max_frame.max(FILLER_BUF);
        batch = batch.max(64);
    }
    Ok(match &spec.target {
        TxTarget::Iface { name, .. } => match socket_of(spec, profile) {
            TxSocket::AfPacket(TxMethod::Sendmmsg) => Box::new(AfPacketTx::open(name, max_frame, batch, opts)?),
            TxSocket::AfPacket(TxMethod::Ring) => Box::new(AfPacketRingTx::open(name, max_frame, batch, opts)?),
            TxSocket::AfXdp { mode, queue } => {
                let meta = gapless_io::xdp::XdpTxMeta {
                    timestamps: opts.tx_stamps.is_some(),
                    launch_time: opts.txtime,
                };
                Box::new(AfXdpTx::open(name, queue + w as u32, mode, max_frame, batch, meta)?)
            }
        },
        TxTarget::Pcap(p) => Box::new(PcapTx::create(p, max_frame, batch)?),
        // The null loop builds frames in chunks of this many (Scheduler::chunk_in_order).
        TxTarget::Null => Box::new(NullTx::new(max_frame, batch.max(NULL_CHUNK))),
    })
}

/// Frames per chunk of an untimed null loop: a block of the block builder
/// (`generator::stream::block`), enough to spread each chunk's work (the scheduler's step,
/// the clock, the backend's call) thinly, and 4 KiB of 64 B frames (in L1).
const NULL_CHUNK: usize = 64;

/// A filler buffer: room for the largest frame of a 9000 B jumbo MTU.
const FILLER_BUF: usize = 9000 + 18;

/// What the threads of a run hand back.
struct Ran {
    stats: RunStats,
    rx: Option<RxOutcome>,
    /// The events made, and the frames the run's own link refused while held down.
    events: Vec<crate::events::EventRecord>,
    held_drops: u64,
}

fn execute(mut p: Prepared, stop: &Arc<AtomicBool>) -> Result<RunReport, EngineError> {
    let ran = run_threads(&mut p, stop);
    if let Some(rc) = &mut p.ratectl {
        rc.finish(stop.load(Ordering::Relaxed) || ran.as_ref().map_or(true, |r| r.stats.backend_error.is_some()));
    }
    let ran = ran?;
    let mut pcap_error = None;
    let mut stamps: Option<gapless_core::result::departure_stamps::TxStampStats> = None;
    if let Some(rc) = &mut p.ratectl {
        rc.note_fillers(p.backends.iter().filter_map(|b| b.filler_stats()));
    }
    for be in p.backends.iter_mut() {
        if let Some(s) = be.take_tx_stamps() {
            stamps.get_or_insert_with(Default::default).absorb(&s);
        }
        if let Err(e) = be.finish() {
            pcap_error.get_or_insert(e);
        }
    }
    let meta = run_meta(&p);
    let mut result = build_result(&p.plan.profile, &ran.stats, &meta);
    result.events = ran.events;
    result.link_held_drops = ran.held_drops;
    result
        .warnings
        .extend(p.ratectl.iter().flat_map(|r| r.end_warnings.iter().cloned()));
    let source = p.backends.first().and_then(|b| b.tx_stamp_source());
    result.tx_timestamps = stamps
        .zip(p.spec.tx_stamps)
        .map(|(s, k)| s.report(source.unwrap_or(k.source())));
    if let Some(r) = &result.tx_timestamps {
        if r.missing > 0 || r.unmatched > 0 {
            result.warnings.push(format!(
                "TX timestamps: {} of {} frames have no stamp and {} stamps matched no frame; the departure error covers the {} matched",
                r.missing, r.frames_sent, r.unmatched, r.matched
            ));
        }
    }
    let meter_error = ran.rx.as_ref().and_then(|o| o.error.clone());
    let mut sockets: Vec<Box<dyn Send>> = Vec::new();
    if let (Some(out), Some((src, meter, cal))) = (ran.rx, p.rx.take()) {
        let rep = rx_report(&p, &result, src.as_ref(), &meter, cal, out, ran.stats.interrupted);
        join(&mut result, rep);
        gapless_core::result::mark_sender_stalls(&mut result);
        sockets.push(Box::new(src));
    }
    if p.spec.close_later {
        // Closing an AF_PACKET socket waits for an RCU grace period (synchronize_net): 8-40
        // ms each on this VM, most of a short trial's turnaround. Nothing waits on them.
        sockets.push(Box::new(std::mem::take(&mut p.backends)));
        std::thread::spawn(move || drop(sockets));
    }
    let pcap = match &p.spec.target {
        TxTarget::Pcap(path) if pcap_error.is_none() => Some(path.clone()),
        _ => None,
    };
    Ok(RunReport {
        result,
        pcap,
        pcap_error,
        meter_error,
        backend_error: ran.stats.backend_error,
    })
}

fn run_meta(p: &Prepared) -> RunMeta {
    let k = p.backends.len();
    let backend = &p.backends[0];
    let tx_cores: Vec<usize> = p.plan.loops.iter().filter_map(|l| l.core).collect();
    RunMeta {
        stream_cores: p.plan.stream_cores.clone(),
        profile_path: p.spec.profile.label.clone(),
        backend: backend.name().into(),
        backend_detail: if k > 1 {
            let each: Vec<String> = p
                .backends
                .iter()
                .enumerate()
                .map(|(w, b)| format!("[{w}] {}", b.describe()))
                .collect();
            format!("{k} send loops on cores {tx_cores:?}: {}", each.join("; "))
        } else {
            backend.describe()
        },
        pace: p.pace,
        live_backend: backend.is_live(),
        iface: p.iface.clone(),
        driver: p.info.as_ref().and_then(|i| i.driver.clone()),
        mtu: p.info.as_ref().map(|i| i.mtu),
        netns: p.spec.netns.clone(),
        batch: p.spec.batch,
        warnings: p.warnings.clone(),
        core_probe: p.core_probe.clone(),
        rate_control: p.ratectl.as_ref().map(|r| r.setup.clone()).unwrap_or_else(|| {
            gapless_core::result::RateControlSetup {
                method: "software".into(),
                params: serde_json::json!({}),
                confirmed: Vec::new(),
            }
        }),
    }
}

fn rx_report(
    p: &Prepared,
    result: &RunResult,
    src: &dyn RxSource,
    meter: &Meter,
    cal: Option<gapless_core::meter::CalibrationRef>,
    out: RxOutcome,
    tx_interrupted: bool,
) -> MeterReport {
    let spec = p.spec.rx.as_ref().expect("a meter was opened");
    let mut rep = meter.report();
    crate::rx::describe_source(&mut rep, spec, src);
    rep.tx_timestamp_source = result.tx_timestamp_source.clone();
    rep.started_unix_ns = result.started_unix_ns;
    rep.warnings
        .extend(cal.as_ref().and_then(|c| c.mismatch(&rep.rx_timestamp_source)));
    rep.calibration = cal;
    rep.interrupted = out.interrupted || tx_interrupted;
    finish_report(&mut rep, Some(out.stats), out.error.as_deref());
    rep
}

/// Starts the send loops and the meter, watches the link, and joins them.
fn run_threads(p: &mut Prepared, stop: &Arc<AtomicBool>) -> Result<Ran, EngineError> {
    let k = p.plan.loops.len();
    let sync = (k > 1).then(|| Arc::new(crate::run::SyncStart::new(k)));
    let warmup = p.spec.warmup_shared.clone().or_else(|| {
        p.spec
            .warmup
            .map(|d| Arc::new(crate::run::Warmup::new(d.as_nanos() as u64)))
    });
    // A live run's link may be held down by a user (its events, or a front end's link
    // control through the Pauser).
    let link = p.board.link.clone();
    let made = std::sync::Mutex::new(Vec::new());
    let held = p.iface.is_some().then(|| link.clone());
    let opts: Vec<RunOptions> = (0..k)
        .map(|w| RunOptions {
            sync: sync.clone(),
            pace: p.pace,
            core: p.plan.loops[w].core,
            stop: stop.clone(),
            live: p.board.loops[w].0.clone(),
            batch: p.spec.batch,
            rt_priority: p.spec.rt_priority,
            lead_ns: p.ratectl.as_ref().map_or(0, |r| r.lead_ns),
            warmup: warmup.clone(),
            gate: p.spec.gate.clone(),
            held: held.clone(),
        })
        .collect();
    let tx_done = AtomicBool::new(false);
    let avoid = p.plan.loops.first().and_then(|l| l.core);
    // A LAG's target is its first member: one member going down is the LAG's business (its
    // frames move to the others), not the run's end.
    let watched = p.iface.clone().filter(|_| !p.spec.lags.iter().any(|l| l.port == 0));
    let (rt, iface) = (p.spec.rt_priority, p.iface.clone());
    let rx_spec = p.spec.rx.clone();
    let rx_live = p.board.rx.clone();
    let mut link_fault = None;
    let (parts, rx_out) = std::thread::scope(|sc| {
        let rx_h = match (p.rx.as_mut(), &rx_spec, &rx_live) {
            (Some((src, meter, _)), Some(r), Some(live)) => {
                let s = RxStop {
                    signal: stop,
                    tx_done: Some(&tx_done),
                    linger: r.linger,
                    deadline: None,
                    warmup: warmup.as_deref(),
                };
                let core = r.core;
                let captures = r.captures();
                Some(sc.spawn(move || {
                    crate::cpu::pin(core, avoid, false);
                    if let Some(prio) = rt {
                        let _ = crate::cpu::set_rt_priority(prio);
                    }
                    meter_loop(src.as_mut(), meter, &s, live, &captures)
                }))
            }
            _ => None,
        };
        let t0 = std::time::Instant::now();
        let ev_h = (!p.spec.events.is_empty()).then(|| {
            let (list, tx, made, link) = (p.spec.events.clone(), iface.as_deref().unwrap_or(""), &made, &link);
            let (ends, run_ns) = ([&**stop, &tx_done], p.spec.netns.as_deref());
            sc.spawn(move || crate::events::run(list, t0, ends, (run_ns, tx), link, made))
        });
        let hs: Vec<_> = p
            .backends
            .iter_mut()
            .zip(&p.plan.loops)
            .zip(&opts)
            .map(|((be, lp), o)| {
                let be = &mut **be;
                sc.spawn(move || crate::run(&lp.profile, be, o))
            })
            .collect();
        while !hs.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            // A link that goes down ends the run within a tick: no spin, no backlog burst.
            // A user's event that holds it down does not.
            if let (Some(i), None, false) = (&watched, &link_fault, link.down()) {
                if let Some(e) = gapless_io::kernel::nic::link_fault(i).filter(|_| !link.down()) {
                    link_fault = Some(e.to_string());
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
        let parts: Vec<_> = hs.into_iter().map(|h| h.join()).collect();
        tx_done.store(true, Ordering::Release);
        let rx = rx_h.map(|h| h.join());
        // Events not yet due when the sending ended are not made (tx_done ends their wait).
        if let Some(h) = ev_h {
            let _ = h.join();
        }
        (parts, rx)
    });
    let parts = parts
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| EngineError::Panicked("a send loop"))?;
    let rx = rx_out
        .transpose()
        .map_err(|_| EngineError::Panicked("the meter loop"))?;
    let mut stats = crate::merge_workers(parts, &p.plan.maps(), p.plan.profile.streams.len());
    if stats.backend_error.is_none() {
        stats.backend_error = link_fault;
    }
    let held_drops = link.dropped.load(Ordering::Relaxed);
    let events = made.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Ran {
        stats,
        rx,
        events,
        held_drops,
    })
}
