//! The `gapless` command line.

mod meter_cmd;
mod outputs;
mod plots;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use gapless_core::config::Profile;
use gapless_core::dist::FileLoader;
use gapless_core::schedule::Pattern;
use gapless_core::spec::{BackendKind, SplitKind};
use gapless_core::{CompileCtx, ProfileSpec};
use gapless_engine::live::Live;
use gapless_engine::report::{build_result, summary_text, write_json_atomic, RunMeta};
use gapless_engine::RunOptions;
use gapless_io::afpacket::{AfPacketRingTx, AfPacketTx};
use gapless_io::afxdp::{AfXdpTx, XdpMode, UMEM_FRAME};
use gapless_io::nic::{enter_netns, iface_info, IfaceInfo};
use gapless_io::null::NullTx;
use gapless_io::pcap::PcapTx;
use gapless_io::testbed::{Testbed, UpOutcome};
use gapless_io::{IoError, TxBackend};

#[derive(Parser)]
#[command(
    name = "gapless",
    version,
    about = "Precise, scriptable packet generator and traffic meter"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send a profile's streams to an interface, a pcap file or nowhere (null).
    Run(RunArgs),
    /// Validate a profile and print what it will send, without sending.
    Check {
        profile: PathBuf,
        /// Link speed to check rates against, bit/s.
        #[arg(long)]
        link_speed_bps: Option<f64>,
    },
    /// Meter what arrives on an interface: loss, reordering, latency, inter-arrival precision.
    Measure(meter_cmd::MeasureArgs),
    /// Meter a capture (pcap/pcapng) or a CSV of timestamps, offline.
    Analyze(meter_cmd::AnalyzeArgs),
    /// Measure this setup's own latency offset and precision floor over a direct link.
    Calibrate(meter_cmd::CalibrateArgs),
    /// Redraw the CSV exports and plots from a result file.
    Report {
        /// A result file from `run --rx`, `measure` or `analyze`.
        result: PathBuf,
        /// Directory for the CSV files and the PNG/SVG plots.
        #[arg(long, default_value = "report")]
        out: PathBuf,
    },
    /// The veth testbed: namespaces NAME-tx and NAME-rx joined by NAME-tx0 <-> NAME-rx0.
    Testbed {
        #[command(subcommand)]
        action: TestbedCmd,
    },
}

#[derive(Subcommand)]
enum TestbedCmd {
    /// Create the testbed (idempotent).
    Up {
        #[arg(long, default_value = "gl")]
        name: String,
        /// TX and RX queues on each end (1 to 64): one per AF_XDP send loop with --cores.
        /// An AF_XDP meter reads one queue (--rx-queue), so keep 1 when metering with it.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
    },
    /// Remove the testbed (idempotent).
    Down {
        #[arg(long, default_value = "gl")]
        name: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TxMethod {
    /// One sendmmsg system call per departure (its frames in one call).
    Sendmmsg,
    /// PACKET_TX_RING (TPACKET_V2): frames built in the shared ring, one kick per departure.
    Ring,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// AF_PACKET raw socket (any interface; --tx-method picks sendmmsg or the TX ring).
    Afpacket,
    /// AF_XDP socket with its own UMEM (zero-copy where the driver has it).
    Afxdp,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum XdpModeArg {
    /// Zero-copy where the driver has it, else copy.
    Auto,
    Copy,
    Zerocopy,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Pace {
    /// On for interfaces, off for pcap and null.
    Auto,
    On,
    Off,
}

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The profile (TOML).
    profile: PathBuf,
    /// Send on this interface (AF_PACKET).
    #[arg(long, conflicts_with_all = ["out", "null"])]
    iface: Option<String>,
    /// Write a nanosecond pcap whose timestamps are the scheduled departure times.
    #[arg(long, conflicts_with = "null")]
    out: Option<PathBuf>,
    /// Build frames and drop them: measures the engine alone.
    #[arg(long)]
    null: bool,
    /// Enter this network namespace (from `ip netns`) before opening the interface.
    #[arg(long)]
    netns: Option<String>,
    /// Write the result file (JSON), atomically, also after Ctrl-C.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Stop every stream after this many seconds.
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Override the profile's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Software pacing.
    #[arg(long, value_enum, default_value_t = Pace::Auto)]
    pace: Pace,
    /// The socket that sends on --iface (default: the profile's [output] backend, else afpacket).
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// How AF_PACKET hands frames to the kernel.
    #[arg(long, value_enum, default_value_t = TxMethod::Sendmmsg)]
    tx_method: TxMethod,
    /// AF_XDP mode (--backend afxdp).
    #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
    xdp_mode: XdpModeArg,
    /// AF_XDP queue (--backend afxdp).
    #[arg(long, default_value_t = 0)]
    xdp_queue: u32,
    /// Throughput mode: send up to N single-frame departures of a stream in one system call
    /// at the first one's time (1: precise mode, one departure per call). The result reports
    /// the bursts this makes.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Send loops on these cores, e.g. 0,1. Poisson streams are split over all of them at
    /// rate/k each; other streams stay whole, one loop each, round robin.
    #[arg(long, value_delimiter = ',', conflicts_with = "core")]
    cores: Option<Vec<usize>>,
    /// Split CBR streams over the --cores loops too, phase-shifted: loop j of k sends
    /// departures j, j + k, … of the whole schedule (as `split = "phase"` in the profile).
    /// The result reports how often a loop ran late enough to bunch with its neighbour.
    #[arg(long)]
    split_cbr: bool,
    /// CPU core for the send loop (default: the quietest allowed core, by a 100 ms
    /// pre-flight probe of each).
    #[arg(long)]
    core: Option<usize>,
    /// Run the send loops (and the meter) under SCHED_FIFO at this priority (1-99). The
    /// kernel's RT throttling still takes 5 % of each second (kernel.sched_rt_runtime_us).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
    rt_priority: Option<u32>,
    /// No live line.
    #[arg(long, short)]
    quiet: bool,
    /// Also meter on this interface while sending (a loopback, or the far side of a device
    /// under test); the result joins TX and RX per stream.
    #[arg(long)]
    rx: Option<String>,
    /// The network namespace of --rx.
    #[arg(long, requires = "rx")]
    rx_netns: Option<String>,
    /// CPU core for the meter loop (default: the first one the send loop does not use).
    #[arg(long, requires = "rx")]
    rx_core: Option<usize>,
    /// Seconds to keep metering after the last frame left.
    #[arg(long, default_value_t = 0.5, requires = "rx")]
    rx_linger: f64,
    /// RX timestamps for --rx.
    #[arg(long, value_enum, default_value_t = meter_cmd::TsArg::Software)]
    timestamps: meter_cmd::TsArg,
    #[command(flatten)]
    rx_path: meter_cmd::RxPathArgs,
    #[command(flatten)]
    meter: meter_cmd::MeterOpts,
    /// No summary on stdout (runs made by other commands).
    #[arg(skip)]
    no_summary: bool,
}

impl RunArgs {
    /// The run `gapless calibrate` makes: one CBR stream from `tx` to `rx`, metered.
    pub(crate) fn for_calibration(profile: &Path, a: &meter_cmd::CalibrateArgs, json: &Path) -> RunArgs {
        RunArgs {
            profile: profile.to_path_buf(),
            iface: Some(a.tx.clone()),
            out: None,
            null: false,
            netns: a.tx_netns.clone(),
            json: Some(json.to_path_buf()),
            duration: None,
            seed: None,
            pace: Pace::On,
            batch: 1,
            cores: None,
            split_cbr: false,
            backend: None,
            tx_method: TxMethod::Sendmmsg,
            xdp_mode: XdpModeArg::Auto,
            xdp_queue: 0,
            core: a.core,
            rt_priority: None,
            quiet: true,
            rx: Some(a.rx.clone()),
            rx_netns: a.rx_netns.clone(),
            rx_core: None,
            rx_linger: 0.5,
            timestamps: a.timestamps,
            rx_path: a.path.clone(),
            meter: meter_cmd::MeterOpts {
                target_pps: None,
                latency_unit_ns: 1,
                calibration: None,
                report_dir: None,
                signed_only: true,
                use_invalid_calibration: false,
            },
            no_summary: true,
        }
    }
}

/// Reads files named in a profile relative to the profile's directory.
struct DirLoader(PathBuf);
impl FileLoader for DirLoader {
    fn load(&self, path: &str) -> std::result::Result<String, String> {
        let p = self.0.join(path);
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    }
}

pub(crate) fn load_spec(path: &Path) -> Result<ProfileSpec> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "cannot read profile {}: {e}. Fix: check the path (examples/ has profiles to start from)",
            path.display()
        )
    })?;
    Ok(ProfileSpec::from_toml(&text, &path.display().to_string())?)
}

pub(crate) fn compile(spec: &ProfileSpec, path: &Path, link: Option<f64>) -> Result<Profile> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(spec.compile(&CompileCtx {
        link_speed_bps: link,
        files: &DirLoader(dir),
    })?)
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

fn check_mtu(p: &Profile, info: &IfaceInfo) -> Result<(), IoError> {
    for s in &p.streams {
        let vlan_extra = if s.template.layout.vlan_tci.is_empty() { 0 } else { 4 };
        let max = info.mtu as usize + 14 + vlan_extra + 4;
        let frame = s.sizes.max() as usize;
        if frame > max {
            return Err(IoError::FrameTooLarge {
                stream: s.name.clone(),
                iface: info.name.clone(),
                frame,
                mtu: info.mtu,
                max,
                need: frame - 14 - vlan_extra - 4,
            });
        }
    }
    Ok(())
}

fn live_line(live: &Live, elapsed: f64, prev: &mut Vec<(u64, u64, u64)>, dt: f64) -> String {
    let snap = live.snapshot();
    let mut parts = Vec::new();
    let (mut tot, mut tot_rate) = (0u64, 0.0);
    for (i, (sent, _bytes, lag)) in snap.iter().enumerate() {
        let before = prev.get(i).map_or(0, |p| p.0);
        let rate = (sent - before) as f64 / dt;
        tot += sent;
        tot_rate += rate;
        parts.push(format!(
            "{} {} ({}, lag {})",
            live.names[i],
            sent,
            gapless_engine::report::si(rate, "pps"),
            gapless_engine::report::ns(*lag)
        ));
    }
    *prev = snap;
    format!(
        "[{elapsed:6.1}s] {} | total {tot} {}",
        parts.join(" | "),
        gapless_engine::report::si(tot_rate, "pps")
    )
}

pub(crate) fn cmd_run(a: RunArgs) -> Result<i32> {
    let mut spec = load_spec(&a.profile)?;
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration {d}: give a positive number of seconds");
        }
        spec.duration_s = Some(d);
    }
    if let Some(s) = a.seed {
        spec.seed = Some(s);
    }
    let out = spec.output.clone();
    let iface = a.iface.clone().or_else(|| {
        if a.out.is_none() && !a.null {
            out.as_ref().and_then(|o| o.iface.clone())
        } else {
            None
        }
    });
    let pcap = a.out.clone().or_else(|| {
        if a.iface.is_none() && !a.null {
            out.as_ref().and_then(|o| o.pcap.clone().map(PathBuf::from))
        } else {
            None
        }
    });
    let null = a.null || (iface.is_none() && pcap.is_none() && out.as_ref().is_some_and(|o| o.null));
    let netns = a.netns.clone().or_else(|| out.as_ref().and_then(|o| o.netns.clone()));
    if iface.is_none() && pcap.is_none() && !null {
        bail!("no output: give --iface IF (send on an interface), --out FILE.pcap, or --null; or set [output] in the profile");
    }
    if a.rx.is_some() && iface.is_none() {
        bail!("--rx meters what an interface sends: give --iface too (not --out or --null)");
    }
    if !(a.rx_linger.is_finite() && a.rx_linger >= 0.0) {
        bail!("--rx-linger {}: give a number of seconds, 0 or more", a.rx_linger);
    }
    a.meter.check()?;
    let mut inputs = vec![("profile", a.profile.as_path())];
    inputs.extend(a.meter.calibration.as_deref().map(|c| ("--calibration", c)));
    let outs: Vec<(&str, &Path)> = [("--json", a.json.as_deref()), ("--out", pcap.as_deref())]
        .into_iter()
        .filter_map(|(f, p)| p.map(|p| (f, p)))
        .collect();
    outputs::check(&inputs, &outs)?;
    if let Some(d) = &a.meter.report_dir {
        outputs::check_dir("--report-dir", d)?;
    }
    check_caps(&a, iface.is_some(), netns.is_some())?;
    let mut rx = match &a.rx {
        Some(r) => Some(meter_cmd::open_rx_in(
            r,
            a.rx_netns.as_deref(),
            a.timestamps,
            &a.rx_path,
        )?),
        None => None,
    };
    if let Some(ns) = &netns {
        enter_netns(ns)?;
    }
    let info = match &iface {
        Some(i) => Some(iface_info(i)?),
        None => None,
    };
    let profile = compile(&spec, &a.profile, info.as_ref().and_then(|i| i.speed_bps))?;
    if pcap.is_some() && !profile.is_bounded() {
        bail!("a pcap output needs every stream to end. Fix: set count or duration_s in each [stream.timing], duration_s at the top, or pass --duration");
    }
    let pace = match a.pace {
        Pace::Auto => iface.is_some(),
        Pace::On if pcap.is_some() => bail!("--pace on with --out: a pcap file is written as fast as possible and stamped with the scheduled times. Fix: drop --pace"),
        Pace::On => true,
        Pace::Off => false,
    };
    if a.batch == 0 || a.batch > 256 {
        bail!("--batch {}: give 1 (precise mode) to 256", a.batch);
    }
    let batch = max_departure_frames(&profile).max(a.batch);
    let max_frame = profile.max_frame() as usize;
    // Send loops: one per --cores entry, else one per core the profile places streams on,
    // else one. Poisson streams are split over all of them at rate/k (the overlay is still
    // Poisson), CBR streams only when asked (split = "phase" or --split-cbr); any other
    // stream stays whole on its `core`'s loop, or round robin: interleaved CBR senders would
    // collide and make bursts.
    let mut profile = profile;
    let placed: std::collections::BTreeSet<usize> = profile.streams.iter().filter_map(|s| s.core).collect();
    let cores: Vec<Option<usize>> = match &a.cores {
        Some(c) if !c.is_empty() => c.iter().map(|&c| Some(c)).collect(),
        _ if a.core.is_none() && !placed.is_empty() => placed.iter().map(|&c| Some(c)).collect(),
        _ => vec![a.core],
    };
    let k = cores.len();
    if let Some(s) = profile
        .streams
        .iter()
        .find(|s| s.core.is_some_and(|c| !cores.contains(&Some(c))))
    {
        let loops: Vec<usize> = cores.iter().flatten().copied().collect();
        bail!(
            "stream {:?} is placed on core {} (its `core` key), but the send loops run on {}. Fix: list core {} in --cores (or drop --core), or change the stream's core",
            s.name,
            s.core.unwrap_or_default(),
            if loops.is_empty() { "one unpinned loop".to_string() } else { format!("cores {loops:?}") },
            s.core.unwrap_or_default()
        );
    }
    if a.split_cbr {
        for s in profile.streams.iter_mut() {
            if matches!(s.pattern, Pattern::Cbr) && s.core.is_none() && s.split == SplitKind::Auto {
                if s.gap_depends_on_size() {
                    bail!("--split-cbr: stream {:?} has a bit rate and frames of several sizes, so its gaps depend on each frame and cannot be phase-shifted. Fix: give it rate_pps, or split = \"none\" in the profile", s.name);
                }
                s.split = SplitKind::Phase;
            }
        }
    }
    let allowed = gapless_engine::meter::allowed_cores();
    if let Some(c) = cores.iter().flatten().find(|c| !allowed.contains(c)) {
        bail!("core {c} is not one this process may run on (allowed: {allowed:?}). Fix: pick cores from that list");
    }
    if k > 1 && cores.iter().flatten().collect::<std::collections::HashSet<_>>().len() < k {
        bail!(
            "--cores lists a core twice: two send loops on one core would stall each other. Fix: list each core once"
        );
    }
    if k > 1 && pcap.is_some() {
        bail!("--cores with --out: a pcap file is written by one loop. Fix: drop --cores, or send on --iface");
    }
    let (cores, pre_warnings, core_probe) = choose_cores(cores, &allowed, pace);
    let mut plan: Vec<(Vec<gapless_core::StreamConfig>, Vec<usize>)> = vec![(Vec::new(), Vec::new()); k];
    let mut stream_cores: Vec<Vec<usize>> = Vec::new();
    let mut whole = 0;
    for (i, s) in profile.streams.iter_mut().enumerate() {
        let on: Vec<usize> = if s.splits_over(k) {
            s.lanes = k as u32;
            for (w, part) in s.split(k as u32).into_iter().enumerate() {
                plan[w].0.push(part);
                plan[w].1.push(i);
            }
            (0..k).collect()
        } else {
            let w = match s.core {
                Some(c) => cores.iter().position(|&x| x == Some(c)).expect("checked above"),
                None => {
                    whole += 1;
                    (whole - 1) % k
                }
            };
            plan[w].0.push(s.clone());
            plan[w].1.push(i);
            vec![w]
        };
        stream_cores.push(on.iter().filter_map(|&w| cores[w]).collect());
    }
    let workers: Vec<(Profile, Vec<usize>)> = plan
        .into_iter()
        .map(|(streams, map)| {
            let mut p = profile.clone();
            p.streams = streams;
            (p, map)
        })
        .collect();
    let backend_kind = a.backend.unwrap_or(match out.as_ref().and_then(|o| o.backend) {
        Some(BackendKind::Afxdp) => Backend::Afxdp,
        _ => Backend::Afpacket,
    });
    let open_backend = |w: usize| -> Result<Box<dyn TxBackend>> {
        Ok(if let Some(i) = &iface {
            match (backend_kind, a.tx_method) {
                (Backend::Afpacket, TxMethod::Sendmmsg) => Box::new(AfPacketTx::open(i, max_frame, batch)?),
                (Backend::Afpacket, TxMethod::Ring) => Box::new(AfPacketRingTx::open(i, max_frame, batch)?),
                (Backend::Afxdp, _) => {
                    let mode = match a.xdp_mode {
                        XdpModeArg::Auto => XdpMode::Auto,
                        XdpModeArg::Copy => XdpMode::Copy,
                        XdpModeArg::Zerocopy => XdpMode::ZeroCopy,
                    };
                    Box::new(AfXdpTx::open(i, a.xdp_queue + w as u32, mode, max_frame, batch)?)
                }
            }
        } else if let Some(p) = &pcap {
            Box::new(PcapTx::create(p, max_frame, batch)?)
        } else {
            Box::new(NullTx::new(max_frame, batch))
        })
    };
    if let Some(inf) = &info {
        check_mtu(&profile, inf)?;
        if backend_kind == Backend::Afxdp {
            if let Some(s) = profile.streams.iter().find(|s| s.sizes.max() as usize - 4 > UMEM_FRAME) {
                return Err(IoError::XdpFrameTooLarge {
                    stream: s.name.clone(),
                    frame: s.sizes.max() as usize,
                    max: UMEM_FRAME + 4,
                }
                .into());
            }
        }
    }
    let mut backends = (0..k).map(open_backend).collect::<Result<Vec<_>>>()?;

    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(&stop)?;
    let live = Arc::new(Live::new(profile.streams.iter().map(|s| s.name.clone()).collect()));
    let worker_live: Vec<Arc<Live>> = workers
        .iter()
        .map(|(p, _)| Arc::new(Live::new(p.streams.iter().map(|s| s.name.clone()).collect())))
        .collect();
    let sync = (k > 1).then(|| Arc::new(gapless_engine::run::SyncStart::new(k)));
    let opts: Vec<RunOptions> = (0..k)
        .map(|w| RunOptions {
            sync: sync.clone(),
            pace,
            core: cores[w],
            stop: stop.clone(),
            live: worker_live[w].clone(),
            batch: a.batch,
            rt_priority: a.rt_priority,
        })
        .collect();
    let show_live = !a.quiet;
    let (meter_cfg, cal) = a.meter.config(meter_cmd::targets_from_profile(&profile))?;
    let mut meter = gapless_core::meter::Meter::new(meter_cfg);
    let rx_live = AtomicU64::new(0);
    let tx_done = AtomicBool::new(false);
    let tx_cores: Vec<usize> = cores.iter().flatten().copied().collect();
    let mut link_fault: Option<String> = None;
    let (parts, rx_out) = std::thread::scope(|sc| {
        let rx_h = rx.as_mut().map(|rx| {
            let (meter, rx_live, tx_done, stop) = (&mut meter, &rx_live, &tx_done, &stop);
            let (rx_core, linger) = (a.rx_core, a.rx_linger);
            let avoid = tx_cores.first().copied();
            let rt = a.rt_priority;
            sc.spawn(move || {
                gapless_engine::meter::pin(rx_core, avoid);
                if let Some(p) = rt {
                    let _ = gapless_engine::cpu::set_rt_priority(p);
                }
                let s = gapless_engine::meter::RxStop {
                    signal: stop,
                    tx_done: Some(tx_done),
                    linger: Duration::from_secs_f64(linger),
                    deadline: None,
                };
                gapless_engine::meter::meter_loop(rx.as_mut(), meter, &s, rx_live)
            })
        });
        let hs: Vec<_> = backends
            .iter_mut()
            .zip(&workers)
            .zip(&opts)
            .map(|((be, (wp, _)), o)| {
                let be = &mut **be;
                sc.spawn(move || gapless_engine::run(wp, be, o))
            })
            .collect();
        let t0 = Instant::now();
        let mut prev = Vec::new();
        let mut last = Instant::now();
        let tty = std::io::stderr().is_terminal();
        while !hs.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            // A link that goes down ends the run within a tick: no spin, no backlog burst.
            if let (Some(i), None) = (&iface, &link_fault) {
                if let Some(e) = gapless_io::nic::link_fault(i) {
                    link_fault = Some(e.to_string());
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if show_live && last.elapsed() >= Duration::from_secs(1) {
                let dt = last.elapsed().as_secs_f64();
                last = Instant::now();
                // Sum the loops' counters per original stream.
                let mut sums = vec![(0u64, 0u64, 0u64); live.names.len()];
                for (wl, (_, map)) in worker_live.iter().zip(&workers) {
                    for (i, (sent, bytes, lag)) in wl.snapshot().into_iter().enumerate() {
                        let t = &mut sums[map[i]];
                        t.0 += sent;
                        t.1 += bytes;
                        t.2 = t.2.max(lag);
                    }
                }
                for (st, (sent, bytes, lag)) in live.streams.iter().zip(sums) {
                    st.sent.store(sent, Ordering::Relaxed);
                    st.bytes.store(bytes, Ordering::Relaxed);
                    st.lag_ns.store(lag, Ordering::Relaxed);
                }
                let mut line = live_line(&live, t0.elapsed().as_secs_f64(), &mut prev, dt);
                if rx_h.is_some() {
                    line.push_str(&format!(" | rx {}", rx_live.load(Ordering::Relaxed)));
                }
                if tty {
                    eprint!("\r\x1b[2K{line}");
                } else {
                    eprintln!("{line}");
                }
            }
        }
        if show_live && tty {
            eprintln!();
        }
        let parts: Vec<_> = hs.into_iter().map(|h| h.join()).collect();
        tx_done.store(true, Ordering::Release);
        let rx_out = rx_h.map(|h| h.join());
        (parts, rx_out)
    });
    let parts = parts
        .into_iter()
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| anyhow!("a send loop panicked"))?;
    let rx_out = rx_out.transpose().map_err(|_| anyhow!("the meter loop panicked"))?;
    let maps: Vec<Vec<usize>> = workers.iter().map(|(_, m)| m.clone()).collect();
    let mut stats = gapless_engine::merge_workers(parts, &maps, profile.streams.len());
    if stats.backend_error.is_none() {
        stats.backend_error = link_fault;
    }

    let mut finish_err = None;
    for be in backends.iter_mut() {
        if let Err(e) = be.finish() {
            finish_err.get_or_insert(e);
        }
    }
    let backend = &backends[0];
    let meta = RunMeta {
        stream_cores,
        profile_path: a.profile.display().to_string(),
        backend: backend.name().into(),
        backend_detail: if k > 1 {
            format!(
                "{} send loops on cores {:?}: {}",
                k,
                tx_cores,
                backends
                    .iter()
                    .enumerate()
                    .map(|(w, b)| format!("[{w}] {}", b.describe()))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        } else {
            backend.describe()
        },
        pace,
        live_backend: backend.is_live(),
        iface: iface.clone(),
        driver: info.as_ref().and_then(|i| i.driver.clone()),
        mtu: info.as_ref().map(|i| i.mtu),
        netns,
        batch: a.batch,
        warnings: pre_warnings,
        core_probe,
    };
    let mut result = build_result(&profile, &stats, &meta);
    if let (Some(out), Some(rx)) = (&rx_out, &rx) {
        let mut rep = meter.report();
        rep.source = meter_cmd::iface_source(a.rx.as_deref().unwrap_or(""), a.rx_netns.as_deref());
        rep.rx_timestamp_source = rx.timestamp_source();
        rep.environment.iface = a.rx.clone();
        rep.environment.driver = rx.info().driver.clone();
        rep.environment.mtu = Some(rx.info().mtu);
        rep.capture.method = rx.describe();
        rep.warnings.extend(rx.warnings());
        rep.environment.netns = a.rx_netns.clone();
        rep.tx_timestamp_source = result.tx_timestamp_source.clone();
        rep.started_unix_ns = result.started_unix_ns;
        rep.warnings
            .extend(cal.as_ref().and_then(|c| c.mismatch(&rep.rx_timestamp_source)));
        rep.calibration = cal;
        rep.interrupted = out.interrupted || stats.interrupted;
        gapless_engine::meter::finish_report(&mut rep, Some(out.stats), out.error.as_deref());
        gapless_engine::meter::join(&mut result, rep);
    }
    // A result that cannot be written is reported after the summary, which is printed anyway.
    let json_err = a.json.as_ref().and_then(|j| {
        write_json_atomic(j, &result)
            .with_context(|| format!("writing the result file {}", j.display()))
            .err()
    });
    if !a.no_summary {
        say(&summary_text(&result));
        if let Some(r) = &result.rx {
            say(&gapless_engine::meter::summary_text(r));
            if let Some(d) = &a.meter.report_dir {
                let n = plots::write_all(r, d)?;
                say(&format!("report: {n} files in {}\n", d.display()));
            }
        }
        if let (Some(j), None) = (&a.json, &json_err) {
            say(&format!("result: {}\n", j.display()));
        }
        if let (Some(p), None) = (&pcap, &finish_err) {
            say(&format!("pcap: {}\n", p.display()));
        }
        say(&gapless_engine::report::verdict_text(&result));
    }
    if let Some(e) = json_err {
        return Err(e);
    }
    if let Some(e) = finish_err {
        return Err(anyhow!("{e} (no pcap was written)"));
    }
    if let Some(e) = rx_out.as_ref().and_then(|o| o.error.as_ref()) {
        bail!("the meter failed during the run: {e} (the result file has what was measured until then)");
    }
    if let Some(e) = &stats.backend_error {
        bail!("the backend failed during the run: {e} (the result file has what was sent until then)");
    }
    if stats.send_errors > 0 {
        bail!(
            "{} frames failed to send (last error: {}); the counts above are what left. Fix: check the link (`ip link show`) and the rate",
            stats.send_errors,
            stats.last_send_error.as_deref().unwrap_or("unknown")
        );
    }
    Ok(if stats.interrupted { 130 } else { 0 })
}

/// Ctrl-C, SIGTERM and SIGHUP (a dropped ssh session) raise `stop`: the run ends after the
/// current departure and still writes its result.
pub(crate) fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(())
}

/// The capabilities `run` needs for what it was asked, checked before anything starts.
fn check_caps(a: &RunArgs, iface: bool, netns: bool) -> Result<(), IoError> {
    use gapless_io::caps::{require, Cap};
    let mut need = Vec::new();
    if iface || a.rx.is_some() {
        need.push(Cap::NetRaw);
    }
    if a.rx.is_some() {
        need.push(Cap::NetAdmin);
    }
    if netns || a.rx_netns.is_some() {
        need.push(Cap::SysAdmin);
    }
    if a.rt_priority.is_some() {
        need.push(Cap::SysNice);
    }
    require("this run", &need, gapless_io::caps::effective())
}

/// Writes to stdout; a closed pipe (`gapless run ... | head`) ends the output quietly.
pub(crate) fn say(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if o.write_all(text.as_bytes()).and_then(|_| o.flush()).is_err() {
        // The reader went away: nothing more to say to it.
    }
}

/// The send loops' cores: the ones asked for, else the quietest allowed core by a 100 ms
/// pre-flight probe (paced runs on an interface only). Every chosen core that the probe
/// found busy gets a warning.
fn choose_cores(
    cores: Vec<Option<usize>>,
    allowed: &[usize],
    probe: bool,
) -> (Vec<Option<usize>>, Vec<String>, Vec<gapless_core::result::CoreLoad>) {
    if !probe || allowed.is_empty() {
        return (cores, Vec::new(), Vec::new());
    }
    let probes = gapless_engine::cpu::probe_cores(allowed, Duration::from_millis(100));
    let loads = probes
        .iter()
        .map(|p| gapless_core::result::CoreLoad {
            core: p.core,
            lost_fraction: p.lost_fraction,
            longest_gap_ns: p.longest_gap_ns,
        })
        .collect();
    if cores.iter().all(Option::is_none) && cores.len() == 1 {
        let (c, w) = gapless_engine::cpu::quietest(&probes, 1);
        return (c.first().map(|&c| vec![Some(c)]).unwrap_or(cores), w, loads);
    }
    let mine: Vec<_> = probes.into_iter().filter(|p| cores.contains(&Some(p.core))).collect();
    let (_, w) = gapless_engine::cpu::quietest(&mine, mine.len());
    (cores, w, loads)
}

fn cmd_check(path: &Path, link: Option<f64>) -> Result<i32> {
    let spec = load_spec(path)?;
    let p = compile(&spec, path, link)?;
    println!(
        "{}: {} stream(s), seed {}, on_late = {}",
        path.display(),
        p.streams.len(),
        p.seed,
        p.on_late.as_str()
    );
    for s in &p.streams {
        let end = match (s.count, s.duration_ns) {
            (Some(c), Some(d)) => format!("{c} frames or {:.3} s", d as f64 / 1e9),
            (Some(c), None) => format!("{c} frames"),
            (None, Some(d)) => format!("{:.3} s", d as f64 / 1e9),
            (None, None) => "until stopped".into(),
        };
        println!(
            "  {} (id {}): {}, {} L1, frames {}..{} B (mean {:.1}), {} field op(s), until {end}",
            s.name,
            s.id,
            gapless_engine::report::si(s.target_pps, "pps"),
            gapless_engine::report::si(s.target_bps_l1, "bit/s"),
            s.sizes.min(),
            s.sizes.max(),
            s.mean_size,
            s.ops.len()
        );
    }
    Ok(0)
}

fn cmd_testbed(action: TestbedCmd) -> Result<i32> {
    match action {
        TestbedCmd::Up { name, queues } => {
            let t = Testbed::new(&name).map_err(|e| anyhow!("{e}"))?;
            match t.up_with_queues(queues)? {
                UpOutcome::Created => println!("testbed {name} is up"),
                UpOutcome::AlreadyUp => println!("testbed {name} was already up"),
            }
            println!(
                "  sender:   netns {} iface {} (198.18.0.1, 02:67:6c:00:00:01): gapless run --netns {} --iface {} ...",
                t.tx_ns(),
                t.tx_if(),
                t.tx_ns(),
                t.tx_if()
            );
            println!(
                "  receiver: netns {} iface {} (198.18.0.2, 02:67:6c:00:00:02)",
                t.rx_ns(),
                t.rx_if()
            );
        }
        TestbedCmd::Down { name } => {
            let t = Testbed::new(&name).map_err(|e| anyhow!("{e}"))?;
            if t.down()? {
                println!("testbed {name} removed");
            } else {
                println!("testbed {name} was not up");
            }
        }
    }
    Ok(0)
}

fn cmd_report(path: &Path, out: &Path) -> Result<i32> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "cannot read {}: {e}. Fix: give a result file from `run --rx`, `measure` or `analyze` (--json)",
            path.display()
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{} is not JSON: {e}. Fix: give a result file that gapless wrote",
            path.display()
        )
    })?;
    let report: gapless_core::meter::MeterReport = if v.get("sent_frames").is_some() {
        let r: gapless_core::result::RunResult =
            serde_json::from_value(v).map_err(|e| anyhow!("{}: not a gapless run result: {e}", path.display()))?;
        r.rx.ok_or_else(|| {
            anyhow!(
                "{} is a send-only result: it has no meter data to draw. Fix: run with --rx IFACE, or use `gapless measure`",
                path.display()
            )
        })?
    } else {
        serde_json::from_value(v).map_err(|e| {
            anyhow!(
                "{}: not a gapless meter result: {e}. Fix: give a file written by --json",
                path.display()
            )
        })?
    };
    print!("{}", gapless_engine::meter::summary_text(&report));
    let n = plots::write_all(&report, out)?;
    println!("report: {n} files in {}", out.display());
    Ok(0)
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Check {
            profile,
            link_speed_bps,
        } => cmd_check(&profile, link_speed_bps),
        Cmd::Testbed { action } => cmd_testbed(action),
        Cmd::Measure(a) => meter_cmd::cmd_measure(a),
        Cmd::Analyze(a) => meter_cmd::cmd_analyze(a),
        Cmd::Calibrate(a) => meter_cmd::cmd_calibrate(a),
        Cmd::Report { result, out } => cmd_report(&result, &out),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
