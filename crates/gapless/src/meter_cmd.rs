//! `gapless measure`, `analyze`, `calibrate`: the meter's front ends, and the options they
//! share with `run --rx`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use gapless_core::config::Profile;
use gapless_core::meter::{Calibration, Meter, MeterConfig, MeterReport, StreamTarget};
use gapless_core::result::RunResult;
use gapless_engine::meter::{finish_report, meter_loop, summary_text, RxStop};
use gapless_engine::report::write_json_atomic;
use gapless_io::afxdp::{AfXdpRx, XdpMode};
use gapless_io::capture::{detect, read_pcap, CaptureFormat, CsvTimestamps};
use gapless_io::nic::{current_netns, enter_netns, return_to_netns};
use gapless_io::rx::{AfPacketRx, RxSource, RxTimestamps};
use gapless_io::xdp_prog::XdpAttach;

use crate::plots;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TsArg {
    /// The kernel's software RX stamp (CLOCK_REALTIME).
    Software,
    /// The NIC's hardware stamp (an error where the NIC has none).
    Hardware,
}

impl TsArg {
    pub fn rx(self) -> RxTimestamps {
        match self {
            TsArg::Software => RxTimestamps::Software,
            TsArg::Hardware => RxTimestamps::Hardware,
        }
    }
}

/// Options every meter front end takes.
#[derive(clap::Args, Clone)]
pub struct MeterOpts {
    /// Target rate for streams without one (enables the precision metrics: MSE, |err|, bursts).
    #[arg(long)]
    pub target_pps: Option<f64>,
    /// Latency histogram resolution, ns.
    #[arg(long, default_value_t = 10)]
    pub latency_unit_ns: u64,
    /// A calibration file from `gapless calibrate`: its latency offset is subtracted and its
    /// precision floor is reported beside the results.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Write CSV exports and plots (PNG and SVG) into this directory.
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// Meter only frames with a gapless signature; count other TCP/UDP frames as foreign.
    #[arg(long)]
    pub signed_only: bool,
    /// Subtract the offset of a calibration that failed its own checks (`valid: false`).
    #[arg(long, requires = "calibration")]
    pub use_invalid_calibration: bool,
}

impl MeterOpts {
    pub fn check(&self) -> Result<()> {
        if let Some(t) = self.target_pps {
            if !(t.is_finite() && t > 0.0) {
                bail!("--target-pps {t}: give a positive rate in packets per second");
            }
        }
        if self.latency_unit_ns == 0 || self.latency_unit_ns > 1_000_000 {
            bail!(
                "--latency-unit-ns {}: give a resolution from 1 to 1000000 ns (10 is the default)",
                self.latency_unit_ns
            );
        }
        Ok(())
    }

    /// The meter configuration, and the calibration's reference for the report.
    pub fn config(
        &self,
        targets: HashMap<u16, StreamTarget>,
    ) -> Result<(MeterConfig, Option<gapless_core::meter::CalibrationRef>)> {
        self.check()?;
        let cal = match &self.calibration {
            Some(p) => Some((load_calibration(p)?, p.display().to_string())),
            None => None,
        };
        let subtract = |c: &Calibration| c.valid || self.use_invalid_calibration;
        let cfg = MeterConfig {
            latency_unit_ns: self.latency_unit_ns,
            targets,
            default_target_pps: self.target_pps,
            latency_offset_ns: cal
                .as_ref()
                .filter(|c| subtract(&c.0))
                .map_or(0, |c| c.0.latency_offset_ns),
            unsigned_flows: !self.signed_only,
            ..Default::default()
        };
        Ok((
            cfg,
            cal.map(|(c, p)| gapless_core::meter::CalibrationRef {
                subtracted: subtract(&c),
                ..c.reference(&p)
            }),
        ))
    }
}

pub fn load_calibration(path: &Path) -> Result<Calibration> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "cannot read calibration {}: {e}. Fix: make one with `gapless calibrate --tx IF --rx IF --out {}`",
            path.display(),
            path.display()
        )
    })?;
    let c: Calibration = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{} is not a gapless calibration file: {e}. Fix: give the file `gapless calibrate` wrote",
            path.display()
        )
    })?;
    if c.kind != Calibration::KIND {
        bail!(
            "{}: kind is {:?}, not {:?}. Fix: give the file `gapless calibrate` wrote",
            path.display(),
            c.kind,
            Calibration::KIND
        );
    }
    Ok(c)
}

fn target_map<'a>(streams: impl Iterator<Item = (u16, &'a str, f64, u32)>) -> HashMap<u16, StreamTarget> {
    streams
        .map(|(id, name, pps, lanes)| {
            (
                id,
                StreamTarget {
                    name: name.to_string(),
                    target_pps: Some(pps),
                    lanes,
                },
            )
        })
        .collect()
}

/// Stream names and targets from a compiled profile.
pub fn targets_from_profile(p: &Profile) -> HashMap<u16, StreamTarget> {
    target_map(p.streams.iter().map(|s| (s.id, s.name.as_str(), s.target_pps, s.lanes)))
}

/// Stream names and targets from a profile (TOML) or a TX result file (JSON).
pub fn targets_from_file(path: &Path) -> Result<HashMap<u16, StreamTarget>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "cannot read {}: {e}. Fix: give the profile or the result file of the run",
            path.display()
        )
    })?;
    if text.trim_start().starts_with('{') {
        let r: RunResult = serde_json::from_str(&text).map_err(|e| {
            anyhow!(
                "{} is not a gapless result file: {e}. Fix: give the file `gapless run --json` wrote, or the profile",
                path.display()
            )
        })?;
        return Ok(target_map(
            r.streams.iter().map(|s| (s.id, s.name.as_str(), s.target_pps, s.lanes)),
        ));
    }
    let spec = crate::load_spec(path)?;
    let p = crate::compile(&spec, path, None)?;
    Ok(targets_from_profile(&p))
}

/// Writes the result, the CSV exports and plots, and prints the summary.
pub fn deliver(report: &MeterReport, json: Option<&Path>, dir: Option<&Path>) -> Result<()> {
    let json_err = json.and_then(|j| {
        write_json_atomic(j, report)
            .with_context(|| format!("writing the result file {}", j.display()))
            .err()
    });
    crate::say(&summary_text(report));
    if let (Some(j), None) = (json, &json_err) {
        crate::say(&format!("result: {}\n", j.display()));
    }
    if let Some(d) = dir {
        let files = plots::write_all(report, d)?;
        crate::say(&format!("report: {} files in {}\n", files, d.display()));
    }
    json_err.map_or(Ok(()), Err)
}

/// The files a meter command reads and writes, checked before it starts.
fn check_files(input: Option<&Path>, profile: Option<&Path>, json: Option<&Path>, meter: &MeterOpts) -> Result<()> {
    let mut inputs: Vec<(&str, &Path)> = Vec::new();
    inputs.extend(input.map(|p| ("capture", p)));
    inputs.extend(profile.map(|p| ("--profile", p)));
    inputs.extend(meter.calibration.as_deref().map(|p| ("--calibration", p)));
    let outs: Vec<(&str, &Path)> = json.map(|j| ("--json", j)).into_iter().collect();
    crate::outputs::check(&inputs, &outs)?;
    if let Some(d) = &meter.report_dir {
        crate::outputs::check_dir("--report-dir", d)?;
    }
    Ok(())
}

/// Which socket the meter reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum RxBackendArg {
    /// AF_PACKET TPACKET_V3 ring: sees every frame, takes none from the host's stack; kernel
    /// software or NIC hardware stamps.
    Afpacket,
    /// AF_XDP socket fed by gapless's XDP program: frames are taken from the stack (ARP
    /// excepted), stamped at the XDP hook.
    Afxdp,
}

/// Where an AF_XDP meter's program runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum XdpAttachArg {
    /// Native where the driver has it, else generic.
    Auto,
    Native,
    Generic,
}

/// The receive path of a meter: the socket, and for AF_XDP its queue and XDP attach mode.
#[derive(clap::Args, Clone, Debug)]
pub struct RxPathArgs {
    /// The meter's socket.
    #[arg(long, value_enum, default_value_t = RxBackendArg::Afpacket)]
    pub rx_backend: RxBackendArg,
    /// The RX queue an AF_XDP meter binds to (--rx-backend afxdp).
    #[arg(long, default_value_t = 0)]
    pub rx_queue: u32,
    /// Where the AF_XDP meter's XDP program runs (--rx-backend afxdp).
    #[arg(long, value_enum, default_value_t = XdpAttachArg::Auto)]
    pub xdp_attach: XdpAttachArg,
}

/// Opens the meter's socket on `iface` in the current network namespace.
pub fn open_rx(iface: &str, ts: TsArg, path: &RxPathArgs) -> Result<Box<dyn RxSource>> {
    Ok(match path.rx_backend {
        RxBackendArg::Afpacket => Box::new(AfPacketRx::open(iface, ts.rx())?),
        RxBackendArg::Afxdp => {
            if ts == TsArg::Hardware {
                bail!("--timestamps hardware needs --rx-backend afpacket: gapless's XDP program stamps frames with the kernel's clock at the XDP hook, and reading the NIC's stamp there (the bpf_xdp_metadata_rx_timestamp kfunc) is driver-specific and not built");
            }
            let attach = match path.xdp_attach {
                XdpAttachArg::Auto => XdpAttach::Auto,
                XdpAttachArg::Native => XdpAttach::Native,
                XdpAttachArg::Generic => XdpAttach::Generic,
            };
            Box::new(AfXdpRx::open(iface, path.rx_queue, XdpMode::Auto, attach)?)
        }
    })
}

#[derive(clap::Args)]
pub struct MeasureArgs {
    /// Meter what arrives on this interface (AF_PACKET TPACKET_V3 ring, or AF_XDP with
    /// --rx-backend afxdp).
    #[arg(long)]
    pub iface: String,
    /// Enter this network namespace first.
    #[arg(long)]
    pub netns: Option<String>,
    /// Stop after this many seconds (default: at Ctrl-C).
    #[arg(long, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Write the result (JSON), atomically, also after Ctrl-C.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The sender's profile (TOML) or result file (JSON): stream names and target rates.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = TsArg::Software)]
    pub timestamps: TsArg,
    /// CPU core for the meter loop.
    #[arg(long)]
    pub core: Option<usize>,
    /// No live line.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub path: RxPathArgs,
    #[command(flatten)]
    pub meter: MeterOpts,
}

pub fn iface_source(iface: &str, netns: Option<&str>) -> String {
    match netns {
        Some(n) => format!("iface {iface} (netns {n})"),
        None => format!("iface {iface}"),
    }
}

pub fn cmd_measure(a: MeasureArgs) -> Result<i32> {
    check_files(None, a.profile.as_deref(), a.json.as_deref(), &a.meter)?;
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration {d}: give a positive number of seconds");
        }
    }
    let targets = match &a.profile {
        Some(p) => targets_from_file(p)?,
        None => HashMap::new(),
    };
    let (cfg, cal) = a.meter.config(targets)?;
    if let Some(ns) = &a.netns {
        enter_netns(ns)?;
    }
    let mut rx = open_rx(&a.iface, a.timestamps, &a.path)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_signals(&stop)?;
    let mut meter = Meter::new(cfg);
    let live = AtomicU64::new(0);
    let started = gapless_engine::clock::RunClock::realtime_now_ns();
    let t0 = Instant::now();
    let deadline = a.duration.map(|d| t0 + Duration::from_secs_f64(d));
    let finished = AtomicBool::new(false);
    let out = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            gapless_engine::meter::pin(a.core, None);
            let stop = RxStop {
                signal: &stop,
                tx_done: None,
                linger: Duration::ZERO,
                deadline,
            };
            let o = meter_loop(rx.as_mut(), &mut meter, &stop, &live);
            finished.store(true, Ordering::Release);
            o
        });
        live_rx_lines(&finished, &live, t0, a.quiet);
        h.join()
    })
    .map_err(|_| anyhow!("the meter loop panicked"))?;
    let mut report = meter.report();
    report.source = iface_source(&a.iface, a.netns.as_deref());
    report.environment.iface = Some(a.iface.clone());
    report.environment.driver = rx.info().driver.clone();
    report.environment.mtu = Some(rx.info().mtu);
    report.environment.link_speed_bps = rx.info().speed_bps;
    report.capture.method = rx.describe();
    report.warnings.extend(rx.warnings());
    report.environment.netns = a.netns.clone();
    report.rx_timestamp_source = rx.timestamp_source();
    report.tx_timestamp_source = "the signature's TX time (the sender's CLOCK_REALTIME just before its send)".into();
    report.started_unix_ns = started;
    report
        .warnings
        .extend(cal.as_ref().and_then(|c| c.mismatch(&report.rx_timestamp_source)));
    report.calibration = cal;
    report.interrupted = out.interrupted;
    if a.profile.is_none() {
        report.warnings.extend(unknown_lanes_warning(&report));
    }
    finish_report(&mut report, Some(out.stats), out.error.as_deref());
    if a.timestamps == TsArg::Hardware {
        report.warnings.push("hardware RX stamps are on the NIC's clock: latency against the sender's CLOCK_REALTIME is meaningful only when the PHC is synchronised (phc2sys)".into());
    }
    deliver(&report, a.json.as_deref(), a.meter.report_dir.as_deref())?;
    if let Some(e) = out.error {
        bail!("the meter failed: {e} (the result has what was measured until then)");
    }
    Ok(if out.interrupted { 130 } else { 0 })
}

/// The live line of a meter: frames and rate, once a second, until `finished`.
pub fn live_rx_lines(finished: &AtomicBool, live: &AtomicU64, t0: Instant, quiet: bool) {
    let tty = std::io::stderr().is_terminal();
    let mut last = Instant::now();
    let mut prev = 0;
    while !finished.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
        if !quiet && last.elapsed() >= Duration::from_secs(1) {
            let dt = last.elapsed().as_secs_f64();
            last = Instant::now();
            let n = live.load(Ordering::Relaxed);
            let line = format!(
                "[{:6.1}s] received {n} ({:.1} kpps)",
                t0.elapsed().as_secs_f64(),
                (n - prev) as f64 / dt / 1e3
            );
            prev = n;
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
        }
    }
    if !quiet && tty {
        eprintln!();
    }
}

#[derive(clap::Args)]
pub struct AnalyzeArgs {
    /// A pcap or pcapng capture (ns timestamps kept), or a CSV of timestamps with a header
    /// row: rx_ns[,stream,seq,tx_ns,len].
    pub file: PathBuf,
    /// The sender's profile (TOML) or result file (JSON): stream names and target rates.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Write the result (JSON), atomically.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Do not compute latency (the signature's TX time and the capture's clock differ).
    #[arg(long)]
    pub no_latency: bool,
    #[command(flatten)]
    pub meter: MeterOpts,
}

/// Without the run's result the meter does not know whether a stream was split over send
/// loops (`--cores`), whose interleaved sequence lanes look like reordering and loss.
fn unknown_lanes_warning(r: &MeterReport) -> Option<String> {
    let odd: Vec<&str> = r
        .streams
        .iter()
        .filter(|s| s.id.is_some() && s.seq.as_ref().is_some_and(|q| q.reordered > 0 || q.lost > 0))
        .map(|s| s.name.as_str())
        .collect();
    (!odd.is_empty()).then(|| {
        format!(
            "{} show(s) loss or reordering, and no --profile was given: if the traffic came from `gapless run --cores`, a stream split over send loops numbers its frames in interleaved lanes, which look like reordering and loss to a meter that does not know them. Fix: give the run's result with --profile RESULT.json",
            odd.join(", ")
        )
    })
}

pub fn cmd_analyze(a: AnalyzeArgs) -> Result<i32> {
    check_files(Some(&a.file), a.profile.as_deref(), a.json.as_deref(), &a.meter)?;
    let targets = match &a.profile {
        Some(p) => targets_from_file(p)?,
        None => HashMap::new(),
    };
    let (mut cfg, cal) = a.meter.config(targets)?;
    cfg.latency = !a.no_latency;
    let fmt = detect(&a.file)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_signals(&stop)?;
    let mut report;
    let mut warnings = Vec::new();
    let ts_source;
    let stopped;
    match fmt {
        CaptureFormat::Pcap | CaptureFormat::PcapNg => {
            let mut meter = Meter::new(cfg);
            let info = read_pcap(&a.file, &stop, &mut |ts, data, len| meter.on_frame(ts, data, len))?;
            if info.frames == 0 {
                match &info.truncated {
                    Some(why) => bail!("{}: no frame could be read: {why}", a.file.display()),
                    None if info.stopped => bail!("{}: stopped before the first frame", a.file.display()),
                    None => bail!(
                        "{}: the capture holds no frames. Fix: check that the capture ran while traffic flowed",
                        a.file.display()
                    ),
                }
            }
            stopped = info.stopped;
            if let Some(t) = info.truncated {
                warnings.push(t);
            }
            if info.step_ns > 1 {
                warnings.push(format!("the capture has {} timestamps: inter-arrival and latency figures are rounded to {}. Fix: capture with `tcpdump --time-stamp-precision=nano`", info.resolution, gapless_engine::report::ns(info.step_ns)));
            }
            if info.untimed > 0 {
                warnings.push(format!("{} frames are in pcapng Simple Packet Blocks, which have no timestamp, and were not metered. Fix: capture to Enhanced Packet Blocks (tcpdump, dumpcap and editcap write them)", info.untimed));
            }
            ts_source = format!("{} timestamps ({})", fmt.name(), info.resolution);
            report = meter.report();
        }
        CaptureFormat::Csv => {
            let mut csv = CsvTimestamps::open(&a.file)?;
            cfg.latency = cfg.latency && csv.has_tx();
            let mut meter = Meter::new(cfg);
            let res = csv.read(&stop, &mut |row| {
                let len = row.len.unwrap_or(0);
                match row.sig {
                    Some(sig) => meter.on_signed(row.rx_ns, len, sig),
                    None => meter.on_flow(row.rx_ns, len, None),
                }
            });
            stopped = res?.stopped;
            ts_source = "CSV rx_ns column".into();
            report = meter.report();
        }
    }
    report.source = format!("{} {}", fmt.name(), a.file.display());
    report.rx_timestamp_source = ts_source;
    report.tx_timestamp_source = if report.latency_enabled {
        "the signature's TX time".into()
    } else {
        "none (latency off)".into()
    };
    report.calibration = cal;
    report.started_unix_ns = report.streams.iter().map(|s| s.first_rx_ns).min().unwrap_or(0);
    report.warnings.extend(warnings);
    if a.profile.is_none() {
        report.warnings.extend(unknown_lanes_warning(&report));
    }
    if stopped {
        report.interrupted = true;
        report.warnings.push(format!(
            "the analysis was stopped by a signal after {} frames: the figures cover those",
            report.capture.frames
        ));
    }
    finish_report(&mut report, None, None);
    deliver(&report, a.json.as_deref(), a.meter.report_dir.as_deref())?;
    Ok(if stopped { 130 } else { 0 })
}

#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Send on this interface.
    #[arg(long)]
    pub tx: String,
    /// Meter on this interface (the other end of a direct link: a veth peer or a cable).
    #[arg(long)]
    pub rx: String,
    #[arg(long)]
    pub tx_netns: Option<String>,
    #[arg(long)]
    pub rx_netns: Option<String>,
    /// CBR rate of the calibration stream (64-byte frames).
    #[arg(long, default_value_t = 10_000.0)]
    pub rate_pps: f64,
    /// Seconds to send.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    #[arg(long, value_enum, default_value_t = TsArg::Software)]
    pub timestamps: TsArg,
    #[command(flatten)]
    pub path: RxPathArgs,
    /// Where to write the calibration.
    #[arg(long, default_value = "calibration.json")]
    pub out: PathBuf,
    /// Also write the calibration run's full meter result here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// CPU core for the calibration's send loop (default: the quietest, by a probe).
    #[arg(long)]
    pub core: Option<usize>,
}

pub fn cmd_calibrate(a: CalibrateArgs) -> Result<i32> {
    if !(a.rate_pps.is_finite() && a.rate_pps > 0.0) {
        bail!("--rate-pps {}: give a positive rate", a.rate_pps);
    }
    if !(a.duration.is_finite() && a.duration >= 0.5) {
        bail!("--duration {}: give at least 0.5 s", a.duration);
    }
    let outs: Vec<(&str, &Path)> = [("--out", Some(a.out.as_path())), ("--json", a.json.as_deref())]
        .into_iter()
        .filter_map(|(f, p)| p.map(|p| (f, p)))
        .collect();
    crate::outputs::check(&[], &outs)?;
    let dir = tempfile_dir()?;
    let profile = dir.join("calibration.toml");
    std::fs::write(
        &profile,
        format!(
            "# written by gapless calibrate\nseed = 1\n[[stream]]\nname = \"calibration\"\nsize = 64\n[stream.timing]\nrate_pps = {}\nduration_s = {}\n",
            a.rate_pps, a.duration
        ),
    )?;
    let json = dir.join("run.json");
    let run = crate::RunArgs::for_calibration(&profile, &a, &json);
    let ran = crate::cmd_run(run).and_then(|code| {
        let r: RunResult = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
        Ok((code, r))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (code, r) = ran?;
    if code != 0 {
        bail!("the calibration run was interrupted; nothing was written");
    }
    let rx =
        r.rx.as_ref()
            .ok_or_else(|| anyhow!("the calibration run metered nothing"))?;
    let st = rx.streams.iter().find(|s| s.id == Some(0)).ok_or_else(|| {
        anyhow!(
            "no calibration frame arrived on {}. Fix: check that {} and {} are the two ends of one link (`gapless testbed up` makes gl-tx0/gl-rx0)",
            a.rx,
            a.tx,
            a.rx
        )
    })?;
    let mut c = Calibration::from_stream(st).map_err(|e| anyhow!("calibration failed: {e}"))?;
    c.judge(r.verdict.held);
    c.version = env!("CARGO_PKG_VERSION").into();
    c.created_unix_ns = r.started_unix_ns;
    c.hostname = r.environment.hostname.clone();
    c.tx_iface = iface_source(&a.tx, a.tx_netns.as_deref());
    c.rx_iface = iface_source(&a.rx, a.rx_netns.as_deref());
    c.rx_timestamp_source = rx.rx_timestamp_source.clone();
    write_json_atomic(&a.out, &c).with_context(|| format!("writing {}", a.out.display()))?;
    if let Some(j) = &a.json {
        write_json_atomic(j, &r).with_context(|| format!("writing {}", j.display()))?;
    }
    println!(
        "calibration: {} frames at {:.0} pps, {} lost; latency offset {} ns (min {} ns, p99 {} ns); precision floor |err| p50 {} ns, p99 {} ns, MSE {:.3e} ns²",
        c.frames,
        c.rate_pps,
        c.lost,
        c.latency_offset_ns,
        c.latency_min_ns,
        c.latency_p99_ns,
        c.floor_abs_err_p50_ns,
        c.floor_abs_err_p99_ns,
        c.floor_mse_ns2
    );
    crate::say(&r.verdict.text());
    match &c.invalid_reason {
        None => println!(
            "written: {} (use it with --calibration {})",
            a.out.display(),
            a.out.display()
        ),
        Some(why) => println!(
            "written: {} marked INVALID ({why}). Runs given it will warn and subtract nothing. Fix: calibrate again with other work stopped, or on a quieter --core",
            a.out.display()
        ),
    }
    Ok(0)
}

fn tempfile_dir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("gapless-cal-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Opens the RX ring in `netns` (if given) and comes back to the current namespace, so the
/// sender can open its socket elsewhere: a socket keeps the namespace it was made in.
pub fn open_rx_in(iface: &str, netns: Option<&str>, ts: TsArg, path: &RxPathArgs) -> Result<Box<dyn RxSource>> {
    let home = current_netns()?;
    if let Some(ns) = netns {
        enter_netns(ns)?;
    }
    let rx = open_rx(iface, ts, path);
    return_to_netns(&home)?;
    rx
}
