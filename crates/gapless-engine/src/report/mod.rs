//! Result assembly, the environment probe, the atomic result writer and the text summary.
//!
//! Holds the run's report (this file), its CSV exports and [`plots`], and the [`experiment`]
//! report with its plots. Imports the engine's run types; front ends import it.

pub mod experiment;
pub mod plots;

use std::borrow::Cow;
use std::path::Path;

use gapless_core::host::{ClockDiscipline, Environment};
use gapless_core::meter::lazy::LazyHist;
use gapless_core::profile::model::Profile;
use gapless_core::result::{EarlySummary, LateActions, LatenessSummary, RunResult, SplitSummary, StreamTx};
use gapless_core::spec::SplitKind;
use gapless_core::timing::departures::L1_OVERHEAD_BYTES;
use hdrhistogram::Histogram;

use crate::run::RunStats;

/// What every result says of the host: name, kernel, CPU.
pub fn host_environment() -> Environment {
    Environment {
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        cpu_model: cpu_model(),
        ..Default::default()
    }
}

/// Facts about the run that the engine does not know by itself.
pub struct RunMeta {
    pub profile_path: String,
    pub backend: String,
    pub backend_detail: String,
    pub pace: bool,
    pub live_backend: bool,
    pub iface: Option<String>,
    pub driver: Option<String>,
    pub mtu: Option<u32>,
    pub netns: Option<String>,
    /// Throughput mode's batch (1: precise mode).
    pub batch: usize,
    /// Per stream of the profile: the cores of the send loops it ran on (empty: one loop,
    /// not pinned by the user).
    pub stream_cores: Vec<Vec<usize>>,
    /// Warnings from before the run (the core probe, the calibration).
    pub warnings: Vec<String>,
    /// The pre-flight probe of the allowed cores.
    pub core_probe: Vec<gapless_core::host::CoreLoad>,
    /// The rate-control method as set up.
    pub rate_control: gapless_core::result::RateControlSetup,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default()
}

fn achieved(sent: u64, last_frames: u64, first: Option<u64>, last: u64) -> f64 {
    match first {
        Some(f) if last > f && sent > last_frames => (sent - last_frames) as f64 * 1e9 / (last - f) as f64,
        _ => 0.0,
    }
}

fn l1_bps(pps: f64, sent: u64, bytes: u64) -> f64 {
    if sent == 0 {
        return 0.0;
    }
    pps * (bytes as f64 / sent as f64 + L1_OVERHEAD_BYTES as f64) * 8.0
}

fn split_summary(cfg: &gapless_core::StreamConfig, lateness: &Histogram<u64>) -> SplitSummary {
    let gap = if cfg.split == SplitKind::Phase {
        cfg.phase_gap_ns()
    } else {
        1e9 / cfg.target_pps
    };
    let half = (gap / 2.0) as u64;
    let over = if lateness.is_empty() || lateness.max() <= half {
        0
    } else {
        lateness.count_between(half + 1, lateness.max())
    };
    SplitSummary {
        kind: if cfg.split == SplitKind::Phase {
            "phase"
        } else {
            "poisson"
        }
        .into(),
        parts: cfg.lanes,
        gap_ns: gap,
        late_over_half_gap: over,
        late_over_half_gap_fraction: if lateness.is_empty() {
            0.0
        } else {
            over as f64 / lateness.len() as f64
        },
    }
}

/// The histogram of `h`, or `empty` when it holds nothing.
fn view_or<'a>(h: &'a LazyHist, empty: &'a Histogram<u64>) -> Cow<'a, Histogram<u64>> {
    if h.is_empty() {
        Cow::Borrowed(empty)
    } else {
        h.view()
    }
}

/// Builds the result file from the run's counters.
/// How the result names a method other than software pacing.
fn rate_control_text(r: &gapless_core::result::RateControlSetup) -> String {
    match r.method.as_str() {
        "shaper" => format!(
            "shaper: the kernel's {} at {} bit/s (frames without FCS), burst {} B; gapless sent unpaced through the qdisc",
            r.params["qdisc"].as_str().unwrap_or("?"),
            r.params["rate_bps"],
            r.params["burst_bytes"]
        ),
        "nic" => format!(
            "nic: the NIC's per-queue limiter (tx_maxrate {} Mbit/s on queues {}); gapless sent unpaced",
            r.params["tx_maxrate_mbps"], r.params["queues"]
        ),
        "launch-time" => format!(
            "launch-time: each frame carried its time (SO_TXTIME, CLOCK_TAI), handed over {} µs ahead by the software pacer",
            r.params["lead_us"]
        ),
        "filler" => format!(
            "filler: back to back at {} bit/s, each gap filled with {} frames the device under test drops; gapless sent unpaced",
            r.params["link_speed_bps"],
            r.params["kind"].as_str().unwrap_or("?")
        ),
        m => m.to_string(),
    }
}

pub fn build_result(profile: &Profile, stats: &RunStats, meta: &RunMeta) -> RunResult {
    let mut total_h: Histogram<u64> = Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("valid bounds");
    // Streams that recorded nothing (unpaced runs) share one empty histogram: 10 000 streams
    // must not build 10 000 of them.
    let empty = total_h.clone();
    let view = |h| view_or(h, &empty);
    // Its summary once: quantiles of an empty full-size histogram walk all its buckets.
    let empty_summary = LatenessSummary::from_histogram(&empty, 0);
    let mut late_total = LateActions {
        policy: profile.on_late.as_str().into(),
        ..Default::default()
    };
    let mut streams = Vec::new();
    let mut over_gap = 0;
    for (cfg, st) in profile.streams.iter().zip(&stats.streams) {
        let lateness = view(&st.lateness);
        if !st.lateness.is_empty() {
            let _ = total_h.add(&*lateness);
        }
        over_gap += st.late_over_gap;
        late_total.events += st.late_events;
        late_total.skipped_frames += st.skipped;
        late_total.shifted_ns += st.shifted_ns;
        let pps = achieved(st.sent, st.last_frames, st.first_ns, st.last_ns);
        streams.push(StreamTx {
            name: cfg.name.clone(),
            id: cfg.id,
            sent_frames: st.sent,
            sent_bytes_l2: st.bytes,
            target_pps: cfg.target_pps,
            target_bps_l1: cfg.target_bps_l1,
            achieved_pps: pps,
            achieved_bps_l1: l1_bps(pps, st.sent, st.bytes),
            rate_error_rel: if pps > 0.0 { pps / cfg.target_pps - 1.0 } else { 0.0 },
            lateness: if st.lateness.is_empty() {
                LatenessSummary {
                    late_over_one_gap: st.late_over_gap,
                    ..empty_summary.clone()
                }
            } else {
                LatenessSummary::from_histogram(&lateness, st.late_over_gap)
            },
            late: LateActions {
                policy: profile.on_late.as_str().into(),
                events: st.late_events,
                skipped_frames: st.skipped,
                shifted_ns: st.shifted_ns,
            },
            lanes: cfg.lanes,
            early: (meta.batch > 1 && meta.pace).then(|| {
                EarlySummary::from_histogram(&view(&st.early), meta.batch as u64, st.early_over_half_gap, st.sent)
            }),
            cores: meta.stream_cores.get(cfg.index).cloned().unwrap_or_default(),
            split: (cfg.lanes > 1).then(|| split_summary(cfg, &lateness)),
            pattern: cfg.pattern_report.clone(),
            signed_frames: st.signed,
            warmup_frames: st.warmup_sent,
            send_errors: st.failed,
            paused_ns: st.paused_ns,
            rate_changes: st.rate_changes,
            size_changes: st.size_changes,
        });
    }
    let sent: u64 = streams.iter().map(|s| s.sent_frames).sum();
    let bytes: u64 = streams.iter().map(|s| s.sent_bytes_l2).sum();
    let verdict = judge_run(stats, meta);
    let mut warnings = meta.warnings.clone();
    warnings.extend(stats.warnings.iter().cloned());
    if verdict.held == Some(false) {
        warnings.push(format!(
            "the schedule was NOT held: {:.4} % of frames left more than one gap late, rate error {:+.4} % against the schedule",
            verdict.late_fraction * 100.0,
            verdict.rate_error_rel * 100.0
        ));
        warnings.extend(verdict.causes.iter().cloned());
    }
    let pps = if stats.duration_ns > 0 {
        sent as f64 * 1e9 / stats.duration_ns as f64
    } else {
        0.0
    };
    let c = &stats.clock;
    let is_tsc = (c.hz - 1e9).abs() / 1e9 > 0.01;
    RunResult {
        tool: "gapless".into(),
        version: crate::VERSION.into(),
        started_unix_ns: stats.realtime0_ns,
        first_departure_unix_ns: stats
            .streams
            .iter()
            .filter_map(|s| s.first_ns)
            .min()
            .map(|f| stats.realtime0_ns + f),
        profile_path: meta.profile_path.clone(),
        profile: serde_json::to_value(&*profile.spec).unwrap_or(serde_json::Value::Null),
        seed: profile.seed,
        environment: Environment {
            clock: if is_tsc {
                "TSC, disciplined to CLOCK_MONOTONIC".into()
            } else {
                "CLOCK_MONOTONIC via quanta (no usable TSC)".into()
            },
            tsc_hz: is_tsc.then_some(c.hz),
            tsc_hz_uncertainty_ppm: c.uncertainty_ppm.filter(|_| is_tsc),
            clock_discipline: Some(ClockDiscipline {
                samples: c.samples,
                last_offset_ns: c.last_offset_ns,
                max_offset_ns: c.max_offset_ns,
            }),
            tx_core: stats.tx_core,
            iface: meta.iface.clone(),
            driver: meta.driver.clone(),
            mtu: meta.mtu,
            link_speed_bps: profile.link_speed_bps,
            netns: meta.netns.clone(),
            core_probe: meta.core_probe.clone(),
            ..host_environment()
        },
        backend: meta.backend.clone(),
        backend_detail: meta.backend_detail.clone(),
        rate_control: if meta.rate_control.method != "software" {
            rate_control_text(&meta.rate_control)
        } else if meta.pace && meta.batch > 1 {
            format!(
                "software-pacing, throughput mode: up to {} departures per send at the first one's time (the rest leave early; see each stream's `early`)",
                meta.batch
            )
        } else if meta.pace {
            "software-pacing (busy-wait on the TSC, absolute schedule)".into()
        } else {
            "unpaced".into()
        },
        rate_control_setup: meta.rate_control.clone(),
        tx_timestamps: None,
        tx_timestamp_source: if meta.live_backend {
            "engine: CLOCK_REALTIME read just before the send system call".into()
        } else {
            "scheduled departure time (ns since the run's start)".into()
        },
        // A fault (link lost, backend failed) ends the run early too.
        interrupted: stats.interrupted || stats.backend_error.is_some(),
        stop_reason: if let Some(e) = &stats.backend_error {
            format!("backend failed: {e}")
        } else if stats.interrupted {
            "interrupted (signal)".into()
        } else {
            "completed".into()
        },
        duration_ns: stats.duration_ns,
        sent_frames: sent,
        sent_bytes_l2: bytes,
        send_errors: stats.send_errors,
        last_send_error: stats.last_send_error.clone(),
        achieved_pps: pps,
        achieved_bps_l1: l1_bps(pps, sent, bytes),
        lateness: LatenessSummary::from_histogram(&total_h, over_gap),
        late: late_total,
        streams,
        verdict,
        warnings,
        rx: None,
        events: Vec::new(),
        link_held_drops: 0,
    }
}

/// The verdict on the run's schedule, from the loops' own measurements.
fn judge_run(stats: &RunStats, meta: &RunMeta) -> gapless_core::result::verdict::Verdict {
    use gapless_core::result::verdict::{judge, RunFacts, StreamFacts};
    let facts: Vec<StreamFacts> = stats
        .streams
        .iter()
        .map(|st| StreamFacts {
            sent: st.sent,
            late_over_one_gap: st.late_over_gap,
            rate_error_vs_schedule: st.rate_error_vs_schedule(),
        })
        .collect();
    judge(
        &facts,
        stats.loops.clone(),
        &RunFacts {
            paced: meta.pace,
            send_errors: stats.send_errors,
            backend_error: stats.backend_error.clone(),
        },
    )
}

/// Writes `value` as JSON to `path` atomically (see [`gapless_io::files::atomic`]: a temporary file
/// with a random name beside it, fsync, the old file's mode, rename).
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    text.push(b'\n');
    gapless_io::files::atomic::write_atomic(path, &text)
}

pub fn si(v: f64, unit: &str) -> String {
    let (d, p) = if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.3} {p}{unit}", v / d)
}

/// A duration in ns, auto-scaled: ns, µs, ms or s.
pub fn ns(v: u64) -> String {
    if v >= 1_000_000_000 {
        return format!("{:.3} s", v as f64 / 1e9);
    }
    if v >= 1_000_000 {
        format!("{:.2} ms", v as f64 / 1e6)
    } else if v >= 1_000 {
        format!("{:.2} µs", v as f64 / 1e3)
    } else {
        format!("{v} ns")
    }
}

/// A snapshot as one line (the CLI's live line): per stream and in total, sent, rate, lag.
pub fn snapshot_text(s: &crate::Snapshot) -> String {
    let parts: Vec<String> = s
        .streams
        .iter()
        .map(|st| {
            format!(
                "{} {} ({}, lag {})",
                st.name,
                st.tx.sent,
                si(st.tx.rate_pps, "pps"),
                ns(st.tx.lag_ns)
            )
        })
        .collect();
    let mut line = format!(
        "[{:6.1}s] {} | total {} {}",
        s.elapsed_s,
        parts.join(" | "),
        s.total.tx.sent,
        si(s.total.tx.rate_pps, "pps")
    );
    if let Some(n) = s.rx_frames {
        line.push_str(&format!(" | rx {n}"));
    }
    line
}

/// The end-of-run summary for a terminal.
/// What the rate-control method confirmed, and the TX stamps, for the summary.
fn rate_control_lines(r: &RunResult) -> String {
    let mut s = String::new();
    for c in &r.rate_control_setup.confirmed {
        s.push_str(&format!("{}: {c}\n", r.rate_control_setup.method));
    }
    if let Some(t) = &r.tx_timestamps {
        let (d, p) = (&t.departure_error, &t.send_path);
        s.push_str(&format!(
            "TX stamps ({}): {} of {} frames matched; departure error (stamp - schedule) p50 {} ns, p99 {} ns, max {} ns; send path (stamp - clock before the send) p50 {} ns, p99 {} ns\n",
            t.source, t.matched, t.frames_sent, d.p50_ns, d.p99_ns, d.max_ns, p.p50_ns, p.p99_ns
        ));
    }
    s
}

pub fn summary_text(r: &RunResult) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "gapless {} — {} ({}), {}\n",
        r.version, r.backend, r.backend_detail, r.rate_control
    ));
    s.push_str(&format!(
        "{}: {} frames, {} in {:.3} s, {} / {} at L1, {} send errors\n",
        r.stop_reason,
        r.sent_frames,
        si(r.sent_bytes_l2 as f64, "B"),
        r.duration_ns as f64 / 1e9,
        si(r.achieved_pps, "pps"),
        si(r.achieved_bps_l1, "bit/s"),
        r.send_errors
    ));
    s.push_str(&format!(
        "{:<16} {:>10} {:>14} {:>14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9}\n",
        "stream", "sent", "target", "achieved", "rate err", "late p50", "late p99", "late p99.9", "late max", ">1 gap"
    ));
    for st in &r.streams {
        // Unpaced runs have no rate to hold: their rate is the backend's speed.
        let rate_err = if r.verdict.held.is_some() {
            format!("{:+.4}%", st.rate_error_rel * 100.0)
        } else {
            "-".to_string()
        };
        s.push_str(&format!(
            "{:<16} {:>10} {:>14} {:>14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9}\n",
            st.name,
            st.sent_frames,
            si(st.target_pps, "pps"),
            si(st.achieved_pps, "pps"),
            rate_err,
            ns(st.lateness.p50_ns),
            ns(st.lateness.p99_ns),
            ns(st.lateness.p99_9_ns),
            ns(st.lateness.max_ns),
            st.lateness.late_over_one_gap
        ));
    }
    if r.send_errors > 0 {
        s.push_str(&format!(
            "WARNING: {} frames failed to send ({} left; last error: {}). Check the link: `ip link show {}`\n",
            r.send_errors,
            r.sent_frames,
            r.last_send_error.as_deref().unwrap_or("unknown"),
            r.environment.iface.as_deref().unwrap_or("IFACE")
        ));
    }
    for st in &r.streams {
        if let Some(e) = &st.early {
            s.push_str(&format!(
                "{}: throughput mode, batch {}: {} frames left early (p50 {}, p99 {}, max {}); {} ({:.1}%) more than half a gap early, i.e. in bursts\n",
                st.name,
                e.batch,
                e.count,
                ns(e.p50_ns),
                ns(e.p99_ns),
                ns(e.max_ns),
                e.over_half_gap,
                e.burst_fraction * 100.0
            ));
        }
        if let Some(sp) = &st.split {
            s.push_str(&format!(
                "{}: split ({}) over {} send loops{}: {} frames ({:.3}%) left more than half a gap ({}) late, where parts bunch\n",
                st.name,
                sp.kind,
                sp.parts,
                if st.cores.is_empty() { String::new() } else { format!(" on cores {:?}", st.cores) },
                sp.late_over_half_gap,
                sp.late_over_half_gap_fraction * 100.0,
                ns(sp.gap_ns as u64 / 2)
            ));
        }
    }
    s.push_str(&rate_control_lines(r));
    if r.late.events > 0 {
        s.push_str(&format!(
            "on_late = {}: acted {} times (skipped {} frames, shifted {})\n",
            r.late.policy,
            r.late.events,
            r.late.skipped_frames,
            ns(r.late.shifted_ns)
        ));
    }
    for w in r
        .warnings
        .iter()
        .filter(|w| !r.verdict.causes.contains(w) && !w.starts_with("the schedule was NOT held"))
    {
        s.push_str(&format!("WARNING: {w}\n"));
    }
    s
}

/// The summary's last lines: the schedule's verdict (print it after the meter's summary,
/// which ends with the meter's own).
pub fn verdict_text(r: &RunResult) -> String {
    r.verdict.text()
}

/// What `check` prints of a compiled profile: a line for it and one per stream.
pub fn profile_text(label: &str, p: &Profile) -> String {
    let mut t = format!(
        "{label}: {} stream(s), seed {}, on_late = {}\n",
        p.streams.len(),
        p.seed,
        p.on_late.as_str()
    );
    for s in &p.streams {
        let end = match (s.count, s.duration_ns) {
            (Some(c), Some(d)) => format!("{c} frames or {:.3} s", d as f64 / 1e9),
            (Some(c), None) => format!("{c} frames"),
            (None, Some(d)) => format!("{:.3} s", d as f64 / 1e9),
            (None, None) => "stopped".into(),
        };
        t.push_str(&format!(
            "  {} (id {}): {}, {} L1, frames {}..{} B (mean {:.1}), {} field op(s), until {end}\n",
            s.name,
            s.id,
            si(s.target_pps, "pps"),
            si(s.target_bps_l1, "bit/s"),
            s.min_size(),
            s.max_size(),
            s.mean_size,
            s.variants.iter().map(|v| v.ops.len()).sum::<usize>() + s.replay.as_ref().map_or(0, |r| r.rewrite.len())
        ));
        t.push_str(&pattern_lines(s));
    }
    t
}

/// What `check` says of a stream's variants and varying or self-similar pattern.
fn pattern_lines(s: &gapless_core::StreamConfig) -> String {
    let mut t = String::new();
    if s.variants.len() > 1 {
        let shares = s.pick.shares(s.variants.len());
        let parts: Vec<String> = s
            .variants
            .iter()
            .zip(shares)
            .map(|(v, w)| format!("{} {:.1} %", v.name, w * 100.0))
            .collect();
        t.push_str(&format!("    variants ({}): {}\n", s.pick.describe(), parts.join(", ")));
    }
    if let gapless_core::timing::departures::Pattern::Random(gapless_core::timing::dist::UnitDist::Pdf(p)) = &s.pattern
    {
        t.push_str(&format!(
            "    gaps from the pdf {:?} on [{:.3}, {:.3}] µs, mean {:.3} µs (scaled to the rate when one is given)\n",
            p.formula,
            p.quantile(0.0) / 1e3,
            p.quantile(1.0) / 1e3,
            p.mean() / 1e3
        ));
    }
    let Some(r) = &s.pattern_report else { return t };
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let a = &r["achieved"];
    let af = |k: &str| a[k].as_f64().map_or("-".to_string(), |v| format!("{v:.3}"));
    match (r["kind"].as_str(), r["method"].as_str()) {
        (Some("replay"), _) => t.push_str(&format!(
            "    replay {}: {} frames ({} stamps) over {:.6} s, mean {}; {} timing, speed {}, loops {}{}\n",
            r["file"],
            r["frames"],
            r["resolution"].as_str().unwrap_or("?"),
            f("duration_s"),
            si(f("mean_pps"), "pps"),
            r["timing"].as_str().unwrap_or("?"),
            f("speed"),
            r["loops"].as_u64().map_or("until stopped".into(), |l| l.to_string()),
            match (r["backwards"].as_u64(), r["cut"].as_u64()) {
                (Some(b), _) if b > 0 =>
                    format!("; {b} frames stamped before the one before them leave right after it"),
                (_, Some(c)) if c > 0 => format!("; {c} frames cut by the snap length are sent as captured"),
                _ => String::new(),
            }
        )),
        (Some("vary"), _) => t.push_str(&format!(
            "    rate varies ({}): mean x{:.3}, peak x{:.3} of the rate given\n",
            r["curve"].as_str().unwrap_or("?"),
            f("mean_factor"),
            f("peak_factor")
        )),
        (Some("self_similar"), Some(m)) => {
            let how = if m == "fgn" {
                format!("fGn, cv {}, slot {} µs, {} slots", f("cv"), f("slot_us"), f("slots"))
            } else {
                format!(
                    "{} on/off sources at {} pps while on",
                    f("sources"),
                    si(f("on_rate_pps"), "pps")
                )
            };
            t.push_str(&format!(
                "    self-similar: H {} (alpha {:.2}), {how}, mean {}\n    achieved over {} departures: H {} (aggregated variance), {} (wavelet), mean {}\n",
                f("hurst_asked"),
                f("alpha"),
                si(s.target_pps, "pps"),
                a["departures"],
                af("hurst_aggregated_variance"),
                af("hurst_wavelet"),
                si(a["mean_rate_pps"].as_f64().unwrap_or(0.0), "pps"),
            ));
        }
        _ => {}
    }
    t
}

/// The line `calibrate` prints of its result.
pub fn calibration_text(c: &gapless_core::meter::Calibration) -> String {
    format!(
        "calibration: {} frames at {:.0} pps, {} lost; latency offset {} ns (min {} ns, p99 {} ns); precision floor |err| p50 {} ns, p99 {} ns, MSE {:.3e} ns²\n",
        c.frames,
        c.rate_pps,
        c.lost,
        c.latency_offset_ns,
        c.latency_min_ns,
        c.latency_p99_ns,
        c.floor_abs_err_p50_ns,
        c.floor_abs_err_p99_ns,
        c.floor_mse_ns2
    )
}

/// The meter report in a result file: a meter's (`measure`, `analyze`) or the RX side of a
/// run with a meter.
pub fn read_meter_report(path: &Path) -> Result<gapless_core::meter::MeterReport, crate::EngineError> {
    let bad = |problem: String, fix: &str| crate::EngineError::BadFile {
        path: path.display().to_string(),
        problem,
        fix: fix.into(),
    };
    let text = crate::read_text(
        path,
        "",
        "give a result file from `run --rx`, `measure` or `analyze` (--json)",
    )?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("not JSON: {e}"), "give a result file that gapless wrote"))?;
    if v.get("sent_frames").is_none() {
        return serde_json::from_value(v).map_err(|e| {
            bad(
                format!("not a gapless meter result: {e}"),
                "give a file written by --json",
            )
        });
    }
    let r: RunResult = serde_json::from_value(v).map_err(|e| {
        bad(
            format!("not a gapless run result: {e}"),
            "give a file written by --json",
        )
    })?;
    r.rx.ok_or_else(|| {
        bad(
            "a send-only result: it has no meter data to draw".into(),
            "run with --rx IFACE, or use `gapless measure`",
        )
    })
}
