//! The meter's entry points: [`measure`] (live, on an interface), [`analyze`] (a capture or a
//! CSV of timestamps) and [`calibrate`] (a run over a direct link that measures the setup's
//! own offset and floor). Each returns a finished report; none prints.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gapless_core::meter::reference::GapReference;
use gapless_core::meter::{Calibration, Meter, MeterReport, StreamTarget};
use gapless_core::result::RunResult;
use gapless_core::ProfileSpec;
use gapless_io::files::capture::{detect, read_pcap, CaptureFormat, CsvTimestamps};
use gapless_io::rx::RxTimestamps;

use crate::live::RxLive;
use crate::rx::{finish_report, meter_loop, target_map, targets_of, RxStop};
use crate::spec::{MeterSetup, Pacing, ProfileSource, RunSpec, RxSpec, TxTarget};
use crate::{EngineError, Run};

/// Stream names and targets from a profile (TOML) or a run's result file (JSON).
pub fn targets_from_file(path: &Path) -> Result<HashMap<u16, StreamTarget>, EngineError> {
    let text = crate::read_text(path, "", "give the profile or the result file of the run")?;
    if text.trim_start().starts_with('{') {
        let r: RunResult = serde_json::from_str(&text).map_err(|e| EngineError::BadFile {
            path: path.display().to_string(),
            problem: format!("not a gapless result file: {e}"),
            fix: "give the result file of the run, or the profile".into(),
        })?;
        // The profile the run sent, as the result keeps it: compiled again, it gives every
        // stream's schedule. A result whose profile does not compile here (a replay whose
        // capture is gone) keeps the targets it lists, without a per-frame reference.
        let why = match compiled_profile_of(&r, path) {
            Ok(p) => return Ok(targets_of(&p)),
            Err(e) => format!("the result's profile does not compile here ({e})"),
        };
        let s = r.streams.iter().map(|s| {
            (
                s.id,
                s.name.as_str(),
                s.pattern.is_none().then_some(s.target_pps),
                s.lanes,
                GapReference::Unknown(why.clone()),
            )
        });
        return Ok(target_map(s));
    }
    let p = ProfileSource::from_file(path)?.compile(None)?;
    Ok(targets_of(&p))
}

/// The profile a result file records, compiled (files it names are read beside the result).
fn compiled_profile_of(r: &RunResult, path: &Path) -> Result<gapless_core::Profile, EngineError> {
    let spec: ProfileSpec = serde_json::from_value(r.profile.clone()).map_err(|e| EngineError::BadFile {
        path: path.display().to_string(),
        problem: format!("its profile does not parse: {e}"),
        fix: "give the profile the run used".into(),
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    ProfileSource {
        spec,
        dir,
        label: path.display().to_string(),
    }
    .compile(None)
}

/// Reads a calibration file that `calibrate` wrote.
pub fn load_calibration(path: &Path) -> Result<Calibration, EngineError> {
    let bad = |problem: String| EngineError::BadFile {
        path: path.display().to_string(),
        problem,
        fix: "give the file `gapless calibrate` wrote".into(),
    };
    let text = crate::read_text(
        path,
        "calibration",
        "check the path, or make one with `gapless calibrate`",
    )?;
    let c: Calibration =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a gapless calibration file: {e}")))?;
    if c.kind != Calibration::KIND {
        return Err(bad(format!("kind is {:?}, not {:?}", c.kind, Calibration::KIND)));
    }
    Ok(c)
}

/// Without the run's result the meter does not know whether a stream was split over send
/// loops, whose interleaved sequence lanes look like reordering and loss.
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

/// A live meter on an interface.
pub struct MeasureSpec {
    pub rx: RxSpec,
    /// Stream names and targets (None: not known; streams are named by id).
    pub targets: Option<HashMap<u16, StreamTarget>>,
    /// Stop after this long (None: when stopped).
    pub duration: Option<Duration>,
    /// The warm-up's start, when fixed from outside (a run across hosts; its length is
    /// `rx.meter.warmup_ns`). None: the first signed frame's TX time.
    pub warmup: Option<std::sync::Arc<crate::run::Warmup>>,
}

/// A meter's report, and its own error if one ended it early.
#[derive(Debug)]
pub struct Metered {
    pub report: MeterReport,
    pub error: Option<String>,
}

/// Meters `spec.rx.iface` until `stop` or the duration; `live` gets the running counts.
pub fn measure(spec: &MeasureSpec, stop: &AtomicBool, live: &RxLive) -> Result<Metered, EngineError> {
    let r = &spec.rx;
    let (cfg, cal) = r.meter.config(spec.targets.clone().unwrap_or_default())?;
    let mut rx = r.open()?;
    let mut meter = Meter::new(cfg);
    let started = crate::clock::RunClock::realtime_now_ns();
    let deadline = spec.duration.map(|d| Instant::now() + d);
    let out = std::thread::scope(|sc| {
        sc.spawn(|| {
            crate::cpu::pin(r.core, None, false);
            let s = RxStop {
                signal: stop,
                tx_done: None,
                linger: Duration::ZERO,
                deadline,
                warmup: spec.warmup.as_deref(),
            };
            meter_loop(rx.as_mut(), &mut meter, &s, live, &r.captures())
        })
        .join()
    })
    .map_err(|_| EngineError::Panicked("the meter loop"))?;
    let mut report = meter.report();
    crate::rx::describe_source(&mut report, r, rx.as_ref());
    report.tx_timestamp_source = "the signature's TX time (the sender's CLOCK_REALTIME just before its send)".into();
    report.started_unix_ns = started;
    report
        .warnings
        .extend(cal.as_ref().and_then(|c| c.mismatch(&report.rx_timestamp_source)));
    report.calibration = cal;
    report.interrupted = out.interrupted;
    if spec.targets.is_none() {
        report.warnings.extend(unknown_lanes_warning(&report));
    }
    finish_report(&mut report, Some(out.stats), out.error.as_deref());
    if r.timestamps == RxTimestamps::Hardware {
        report.warnings.push("hardware RX stamps are on the NIC's clock: latency against the sender's CLOCK_REALTIME is meaningful only when the PHC is synchronised (phc2sys)".into());
    }
    Ok(Metered {
        report,
        error: out.error,
    })
}

/// An offline meter over a file.
pub struct AnalyzeSpec {
    /// A pcap or pcapng capture, or a CSV of timestamps.
    pub file: PathBuf,
    pub targets: Option<HashMap<u16, StreamTarget>>,
    pub meter: MeterSetup,
}

/// What reading a file gave the meter.
struct Read {
    report: MeterReport,
    stopped: bool,
    ts_source: String,
    warnings: Vec<String>,
}

fn read_capture(
    file: &Path,
    fmt: CaptureFormat,
    cfg: gapless_core::meter::MeterConfig,
    stop: &AtomicBool,
) -> Result<Read, EngineError> {
    let mut meter = Meter::new(cfg);
    let info = read_pcap(file, stop, &mut |ts, data, len| meter.on_frame(ts, data, len))?;
    if info.frames == 0 {
        let why = match &info.truncated {
            Some(why) => format!("no frame could be read: {why}"),
            None if info.stopped => "stopped before the first frame".into(),
            None => "the capture holds no frames. Fix: check that the capture ran while traffic flowed".into(),
        };
        let path = file.display().to_string();
        return Err(EngineError::EmptyCapture { path, why });
    }
    let mut warnings: Vec<String> = info.truncated.into_iter().collect();
    if info.step_ns > 1 {
        warnings.push(format!("the capture has {} timestamps: inter-arrival and latency figures are rounded to {}. Fix: capture with `tcpdump --time-stamp-precision=nano`", info.resolution, crate::report::ns(info.step_ns)));
    }
    if info.untimed > 0 {
        warnings.push(format!("{} frames are in pcapng Simple Packet Blocks, which have no timestamp, and were not metered. Fix: capture to Enhanced Packet Blocks (tcpdump, dumpcap and editcap write them)", info.untimed));
    }
    Ok(Read {
        report: meter.report(),
        stopped: info.stopped,
        ts_source: format!("{} timestamps ({})", fmt.name(), info.resolution),
        warnings,
    })
}

fn read_csv(file: &Path, mut cfg: gapless_core::meter::MeterConfig, stop: &AtomicBool) -> Result<Read, EngineError> {
    let mut csv = CsvTimestamps::open(file)?;
    cfg.latency = cfg.latency && csv.has_tx();
    let mut meter = Meter::new(cfg);
    let res = csv.read(stop, &mut |row| {
        let len = row.len.unwrap_or(0);
        match row.sig {
            Some(sig) => meter.on_signed(row.rx_ns, len, sig),
            None => meter.on_flow(row.rx_ns, len, None),
        }
    })?;
    Ok(Read {
        report: meter.report(),
        stopped: res.stopped,
        ts_source: "CSV rx_ns column".into(),
        warnings: Vec::new(),
    })
}

/// Meters a file until its end or `stop`. The report says if it was stopped.
pub fn analyze(spec: &AnalyzeSpec, stop: &AtomicBool) -> Result<MeterReport, EngineError> {
    let (cfg, cal) = spec.meter.config(spec.targets.clone().unwrap_or_default())?;
    let fmt = detect(&spec.file)?;
    let read = match fmt {
        CaptureFormat::Pcap | CaptureFormat::PcapNg => read_capture(&spec.file, fmt, cfg, stop)?,
        CaptureFormat::Csv => read_csv(&spec.file, cfg, stop)?,
    };
    let mut report = read.report;
    report.source = format!("{} {}", fmt.name(), spec.file.display());
    report.rx_timestamp_source = read.ts_source;
    report.tx_timestamp_source = if report.latency_enabled {
        "the signature's TX time".into()
    } else {
        "none (latency off)".into()
    };
    report.calibration = cal;
    report.started_unix_ns = report.streams.iter().map(|s| s.first_rx_ns).min().unwrap_or(0);
    report.warnings.extend(read.warnings);
    if spec.targets.is_none() {
        report.warnings.extend(unknown_lanes_warning(&report));
    }
    if read.stopped {
        report.interrupted = true;
        report.warnings.push(format!(
            "the analysis was stopped by a signal after {} frames: the figures cover those",
            report.capture.frames
        ));
    }
    finish_report(&mut report, None, None);
    Ok(report)
}

/// A calibration: one CBR stream of 64-byte frames over a direct link, metered.
pub struct CalibrationSpec {
    /// The sending interface and its namespace.
    pub tx: String,
    pub tx_netns: Option<String>,
    /// The meter (the other end of the link).
    pub rx: RxSpec,
    pub rate_pps: f64,
    pub duration_s: f64,
    /// The send loop's core (None: the quietest, by a probe).
    pub core: Option<usize>,
}

/// A calibration and the run it came from.
#[derive(Debug)]
pub struct Calibrated {
    pub calibration: Calibration,
    pub run: RunResult,
}

impl CalibrationSpec {
    /// The run that calibrates: built in memory, nothing written.
    fn run_spec(&self) -> Result<RunSpec, EngineError> {
        let toml = format!(
            "seed = 1\n[[stream]]\nname = \"calibration\"\nsize = 64\n[stream.timing]\nrate_pps = {}\nduration_s = {}\n",
            self.rate_pps, self.duration_s
        );
        let profile = ProfileSource {
            spec: ProfileSpec::from_toml(&toml, "calibration")?,
            dir: PathBuf::new(),
            label: "calibration (built in)".into(),
        };
        let target = TxTarget::Iface {
            name: self.tx.clone(),
            socket: None,
        };
        let mut rx = self.rx.clone();
        rx.meter.latency_unit_ns = 1;
        rx.meter.signed_only = true;
        rx.meter.calibration = None;
        Ok(RunSpec {
            netns: self.tx_netns.clone(),
            pacing: Pacing::On,
            core: self.core,
            rx: Some(rx),
            ..RunSpec::new(profile, target)
        })
    }
}

/// Runs the calibration and judges it. `stop` ends it early, which writes nothing.
pub fn calibrate(spec: &CalibrationSpec, stop: Arc<AtomicBool>) -> Result<Calibrated, EngineError> {
    let bad = |what, value, want| Err(EngineError::OutOfRange { what, value, want });
    if !(spec.rate_pps.is_finite() && spec.rate_pps > 0.0) {
        return bad("calibration rate (pps)", spec.rate_pps, "a positive rate");
    }
    if !(spec.duration_s.is_finite() && spec.duration_s >= 0.5) {
        return bad("calibration duration (s)", spec.duration_s, "at least 0.5 s");
    }
    let report = Run::start_with_stop(spec.run_spec()?, stop)?.wait()?;
    if let Some(e) = report.failure() {
        return Err(e);
    }
    if report.interrupted() {
        return Err(EngineError::Interrupted("the calibration run"));
    }
    let r = report.result;
    let rx =
        r.rx.as_ref()
            .ok_or(EngineError::MeterFailed("the calibration run metered nothing".into()))?;
    let st = rx
        .streams
        .iter()
        .find(|s| s.id == Some(0))
        .ok_or_else(|| EngineError::CalibrationNoFrames {
            tx: spec.tx.clone(),
            rx: spec.rx.iface.clone(),
        })?;
    let mut c = Calibration::from_stream(st).map_err(|e| EngineError::CalibrationFailed(e.to_string()))?;
    c.judge(r.verdict.held);
    c.version = crate::VERSION.into();
    c.created_unix_ns = r.started_unix_ns;
    c.hostname = r.environment.hostname.clone();
    c.tx_iface = crate::spec::iface_source(&spec.tx, spec.tx_netns.as_deref());
    c.rx_iface = spec.rx.source();
    c.rx_timestamp_source = rx.rx_timestamp_source.clone();
    Ok(Calibrated { calibration: c, run: r })
}
