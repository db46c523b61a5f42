//! `gapless measure`, `analyze`, `calibrate`: the meter's front ends, and the options they
//! share with `run --rx`. Each maps its options to the engine's spec and prints the report.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use gapless_core::meter::MeterReport;
use gapless_engine::live::RxLive;
use gapless_engine::report::write_json_atomic;
use gapless_engine::request::{
    AnalyzeRequest, BackendName, CalibrateRequest, MeasureRequest, MeterRequest, RxPath, StampName, XdpAttachName,
    XdpStampName,
};
use gapless_engine::rx::summary_text;

use crate::{explain, say};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TsArg {
    /// The kernel's software RX stamp (CLOCK_REALTIME).
    Software,
    /// The NIC's hardware stamp (an error where the NIC has none).
    Hardware,
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
    /// Warm-up, seconds: signed frames sent this long after the start (a run's start, else
    /// the first signed frame's TX time) are counted apart and not metered.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
}

impl MeterOpts {
    /// The meter's options as the engine's request, checked with the flags' names.
    pub fn request(&self) -> Result<MeterRequest> {
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
        if !(self.warmup.is_finite() && (0.0..=86_400.0).contains(&self.warmup)) {
            bail!("--warmup {}: give 0 to 86400 seconds", self.warmup);
        }
        Ok(MeterRequest {
            target_pps: self.target_pps,
            latency_unit_ns: self.latency_unit_ns,
            calibration: self.calibration.clone(),
            use_invalid_calibration: self.use_invalid_calibration,
            signed_only: self.signed_only,
            warmup: self.warmup,
        })
    }
}

/// Writes the result, the CSV exports and plots, and prints the summary.
pub fn deliver(report: &MeterReport, json: Option<&Path>, dir: Option<&Path>) -> Result<()> {
    let json_err = json.and_then(|j| {
        write_json_atomic(j, report)
            .with_context(|| format!("writing the result file {}", j.display()))
            .err()
    });
    say(&summary_text(report));
    if let (Some(j), None) = (json, &json_err) {
        say(&format!("result: {}\n", j.display()));
    }
    if let Some(d) = dir {
        let files = gapless_engine::report::plots::write_all(report, d)?;
        say(&format!("report: {} files in {}\n", files, d.display()));
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

/// Where an AF_XDP meter's RX stamps come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum XdpStampArg {
    /// The first of metadata, prefix and socket whose XDP program this kernel's verifier takes.
    Auto,
    /// The kernel's TAI stamp at the XDP hook, in XDP metadata (bpf_xdp_adjust_meta).
    Metadata,
    /// The same stamp in 16 bytes before the frame that the meter cuts off (bpf_xdp_adjust_head).
    Prefix,
    /// No kernel stamp: the meter stamps each frame as it reads it (includes its own delay).
    Socket,
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
    /// Where the AF_XDP meter's RX stamps come from (--rx-backend afxdp).
    #[arg(long, value_enum, default_value_t = XdpStampArg::Auto)]
    pub xdp_stamp: XdpStampArg,
}

impl RxPathArgs {
    /// The meter's socket as the engine's request, stamped as `ts` says.
    pub fn request(&self, ts: TsArg) -> RxPath {
        RxPath {
            rx_backend: Some(match self.rx_backend {
                RxBackendArg::Afpacket => BackendName::Afpacket,
                RxBackendArg::Afxdp => BackendName::Afxdp,
            }),
            rx_queue: self.rx_queue,
            xdp_attach: match self.xdp_attach {
                XdpAttachArg::Auto => XdpAttachName::Auto,
                XdpAttachArg::Native => XdpAttachName::Native,
                XdpAttachArg::Generic => XdpAttachName::Generic,
            },
            xdp_stamp: match self.xdp_stamp {
                XdpStampArg::Auto => XdpStampName::Auto,
                XdpStampArg::Metadata => XdpStampName::Metadata,
                XdpStampArg::Prefix => XdpStampName::Prefix,
                XdpStampArg::Socket => XdpStampName::Socket,
            },
            timestamps: match ts {
                TsArg::Software => StampName::Software,
                TsArg::Hardware => StampName::Hardware,
            },
        }
    }
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

pub fn cmd_measure(a: MeasureArgs) -> Result<i32> {
    check_files(None, a.profile.as_deref(), a.json.as_deref(), &a.meter)?;
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration {d}: give a positive number of seconds");
        }
    }
    let spec = MeasureRequest {
        iface: a.iface.clone(),
        netns: a.netns.clone(),
        duration: a.duration,
        profile: a.profile.clone(),
        core: a.core,
        rx_path: a.path.request(a.timestamps),
        meter: a.meter.request()?,
        unknown: Default::default(),
    }
    .spec()
    .map_err(explain)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_signals(&stop)?;
    let live = RxLive::default();
    let t0 = std::time::Instant::now();
    let (ended, end) = std::sync::mpsc::channel::<()>();
    let out = std::thread::scope(|sc| {
        let (spec, stop, live) = (&spec, &stop, &live);
        let h = sc.spawn(move || {
            let r = gapless_engine::measure(spec, stop, live);
            let _ = ended.send(());
            r
        });
        let prev = std::sync::Mutex::new((std::time::Instant::now(), 0u64));
        let wait = |d| !matches!(end.recv_timeout(d), Err(std::sync::mpsc::RecvTimeoutError::Timeout));
        crate::live::live_lines(a.quiet, wait, || rx_line(live, t0, &prev));
        h.join()
    })
    .map_err(|_| anyhow::anyhow!("the meter panicked"))?
    .map_err(explain)?;
    deliver(&out.report, a.json.as_deref(), a.meter.report_dir.as_deref())?;
    if let Some(e) = out.error {
        bail!("the meter failed: {e} (the result has what was measured until then)");
    }
    Ok(if out.report.interrupted { 130 } else { 0 })
}

/// A meter's live line: frames and rate since the line before.
fn rx_line(live: &RxLive, t0: std::time::Instant, prev: &std::sync::Mutex<(std::time::Instant, u64)>) -> String {
    let n = live.frames.load(std::sync::atomic::Ordering::Relaxed);
    let mut p = prev.lock().unwrap_or_else(|e| e.into_inner());
    let dt = p.0.elapsed().as_secs_f64().max(1e-9);
    let rate = n.saturating_sub(p.1) as f64 / dt / 1e3;
    *p = (std::time::Instant::now(), n);
    format!("[{:6.1}s] received {n} ({rate:.1} kpps)", t0.elapsed().as_secs_f64())
}

pub fn cmd_analyze(a: AnalyzeArgs) -> Result<i32> {
    check_files(Some(&a.file), a.profile.as_deref(), a.json.as_deref(), &a.meter)?;
    let spec = AnalyzeRequest {
        file: a.file.clone(),
        profile: a.profile.clone(),
        latency: Some(!a.no_latency),
        meter: a.meter.request()?,
        unknown: Default::default(),
    }
    .spec()
    .map_err(explain)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_signals(&stop)?;
    let report = gapless_engine::analyze(&spec, &stop).map_err(explain)?;
    deliver(&report, a.json.as_deref(), a.meter.report_dir.as_deref())?;
    Ok(if report.interrupted { 130 } else { 0 })
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
    let spec = CalibrateRequest {
        tx: a.tx.clone(),
        rx: a.rx.clone(),
        tx_netns: a.tx_netns.clone(),
        rx_netns: a.rx_netns.clone(),
        rate_pps: a.rate_pps,
        duration: a.duration,
        core: a.core,
        rx_path: a.path.request(a.timestamps),
        unknown: Default::default(),
    }
    .spec()
    .map_err(explain)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_signals(&stop)?;
    let done = gapless_engine::calibrate(&spec, stop).map_err(explain)?;
    let c = &done.calibration;
    write_json_atomic(&a.out, c).with_context(|| format!("writing {}", a.out.display()))?;
    if let Some(j) = &a.json {
        write_json_atomic(j, &done.run).with_context(|| format!("writing {}", j.display()))?;
    }
    say(&gapless_engine::report::calibration_text(c));
    say(&done.run.verdict.text());
    let how = match &c.invalid_reason {
        None => format!("(use it with --calibration {})", a.out.display()),
        Some(why) => format!("marked INVALID ({why}). Runs given it will warn and subtract nothing. Fix: calibrate again with other work stopped, or on a quieter --core"),
    };
    println!("written: {} {how}", a.out.display());
    Ok(0)
}
