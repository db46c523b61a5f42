//! The RX side: the loop that drains the ring into the meter, the join of TX and RX
//! results, and the meter's text summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::collections::HashMap;

use gapless_core::meter::plan::PlanMatch;
use gapless_core::meter::reference::{self, GapReference};
use gapless_core::meter::{Meter, MeterReport, StreamTarget};
use gapless_core::result::RunResult;
use gapless_core::spec::OnLate;
use gapless_core::timing::departures::Pattern;
use gapless_core::Profile;
use gapless_core::StreamConfig;
use gapless_io::rx::{RxSource, RxStats};

use crate::live::RxLive;

/// When the meter loop ends.
pub struct RxStop<'a> {
    /// Ctrl-C / SIGTERM.
    pub signal: &'a AtomicBool,
    /// The sender finished: keep metering for `linger`, then stop.
    pub tx_done: Option<&'a AtomicBool>,
    pub linger: Duration,
    /// Stop at this time (`--duration`).
    pub deadline: Option<Instant>,
    /// The run's warm-up, whose start the first send loop publishes.
    pub warmup: Option<&'a crate::run::Warmup>,
}

/// What the loop did.
pub struct RxOutcome {
    pub interrupted: bool,
    pub stats: RxStats,
    pub error: Option<String>,
}

/// Drains the ring into the meter until told to stop, publishing its counts into `live`;
/// each port's capture in `captures` (armed or not) is offered every frame the meter takes
/// from that port.
pub fn meter_loop(
    rx: &mut dyn RxSource,
    meter: &mut Meter,
    stop: &RxStop<'_>,
    live: &RxLive,
    captures: &[Option<&crate::capture::Capture>],
) -> RxOutcome {
    meter.set_ports(captures.len());
    let mut interrupted = false;
    let mut published = Instant::now();
    let mut error = None;
    let mut done_at: Option<Instant> = None;
    loop {
        if stop.signal.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        if stop.deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(td) = stop.tx_done {
            if td.load(Ordering::Acquire) {
                let t = *done_at.get_or_insert(now);
                if now - t >= stop.linger {
                    break;
                }
            }
        }
        let res = rx.poll(20, &mut |f| {
            // The first send loop publishes the warm-up's start before its first frame, so
            // it is known by the time any of the run's frames is here.
            if meter.warmup_pending() {
                if let Some(start) = stop.warmup.and_then(|w| w.start()) {
                    meter.set_warmup_start(start);
                }
            }
            take(meter, captures, &f)
        });
        match res {
            Ok(_) => {
                live.frames.store(meter.frames(), Ordering::Relaxed);
                if published.elapsed() >= PUBLISH_EVERY {
                    publish(meter, live);
                    published = Instant::now();
                }
            }
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    // What is already in the ring belongs to the run.
    let _ = rx.poll(0, &mut |f| take(meter, captures, &f));
    let _ = rx.finish(&mut |f| take(meter, captures, &f));
    live.frames.store(meter.frames(), Ordering::Relaxed);
    publish(meter, live);
    RxOutcome {
        interrupted,
        stats: rx.stats(),
        error,
    }
}

/// A frame the meter takes, offered to the capture first.
#[inline]
fn take(meter: &mut Meter, captures: &[Option<&crate::capture::Capture>], f: &gapless_io::rx::RxFrame<'_>) {
    if let Some(Some(c)) = captures.get(f.port as usize) {
        c.offer(f.ts_ns, f.data, f.wire_len);
    }
    meter.at_port(f.port);
    meter.on_frame(f.ts_ns, f.data, f.wire_len)
}

/// What a report says of the interface and socket it was metered on.
pub fn describe_source(r: &mut MeterReport, spec: &crate::spec::RxSpec, src: &dyn RxSource) {
    r.source = spec.source();
    if spec.ports() > 1 {
        r.rx_ports = spec.port_names();
    }
    r.rx_timestamp_source = src.timestamp_source();
    r.environment.iface = Some(spec.iface.clone());
    r.environment.driver = src.info().driver.clone();
    r.environment.mtu = Some(src.info().mtu);
    r.environment.link_speed_bps = src.info().speed_bps;
    r.environment.netns = spec.netns.clone();
    r.capture.method = src.describe();
    r.capture.stamp = src.stamp().into();
    r.warnings.extend(src.warnings());
}

/// How often the meter publishes its streams' counts.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

fn publish(meter: &mut Meter, live: &RxLive) {
    let changed = std::mem::take(&mut *live.rate_changed.lock().unwrap_or_else(|p| p.into_inner()));
    for id in changed {
        meter.rate_changed(id, RATE_CHANGED);
    }
    live.publish(meter.live());
}

/// Why a stream whose rate changed while it ran has no precision figures.
pub const RATE_CHANGED: &str =
    "the rate or frame size was changed while the stream ran (OTG update_config), so its gaps no longer follow the profile";

/// Fills in the capture counters, warns about capture loss and what else the reader must
/// know, and judges the measurement. `failed`: the meter's own error, which ended it early.
pub fn finish_report(r: &mut MeterReport, stats: Option<RxStats>, failed: Option<&str>) {
    if let Some(e) = failed {
        r.interrupted = true;
        r.warnings.push(format!(
            "the meter stopped early: {e}. The figures cover what arrived until then"
        ));
    }
    r.tool = "gapless".into();
    r.version = crate::VERSION.into();
    let env = crate::report::host_environment();
    r.environment.hostname = env.hostname;
    r.environment.kernel = env.kernel;
    r.environment.cpu_model = env.cpu_model;
    if let Some(s) = stats {
        r.capture.kernel_drops = Some(s.drops);
        r.capture.freeze_count = Some(s.freeze_count);
        if s.user_stamped > 0 && r.capture.stamp == "socket" {
            r.capture.user_stamped = Some(s.user_stamped);
            r.warnings.push(format!(
                "all {} frames were stamped when the meter read them from the AF_XDP ring (the socket stamp, see rx_timestamp_source): latency and inter-arrival times include the meter's wake-up and batching delay. Fix: meter with --rx-backend afpacket for kernel stamps",
                s.user_stamped
            ));
        } else if s.user_stamped > 0 {
            r.capture.user_stamped = Some(s.user_stamped);
            r.warnings.push(format!(
                "{} frames came without the XDP program's kernel stamp and were stamped when the meter read them: their latency and inter-arrival times include the meter's own delay",
                s.user_stamped
            ));
        }
        if s.drops > 0 {
            r.warnings.push(format!(
                "the kernel dropped {} frames because the meter's ring was full: counts and loss below understate what arrived. Fix: give the meter its own core (--rx-core), or lower the rate",
                s.drops
            ));
        }
    }
    let ia = r.streams.iter().filter_map(|s| s.interarrival.as_ref());
    let (back, jumped) = ia.fold((0, 0), |(b, j), i| {
        (b + i.timestamps_backwards, j + i.timestamps_jumped)
    });
    if back > 0 {
        r.warnings.push(format!(
            "{back} frames were stamped earlier than the frame before them (a clock stepped back, or a capture merged out of order): their gaps count as 0"
        ));
    }
    if jumped > 0 {
        r.warnings.push(format!(
            "the timestamps jumped forward by more than an hour {jumped} time(s) (a clock step, or a capture with a bad timestamp): rates and gaps over such a jump mean little"
        ));
    }
    for st in &r.streams {
        let Some(q) = &st.seq else { continue };
        if q.restarts > 0 {
            r.warnings.push(format!(
                "{}: its sequence numbers restarted {} time(s) (a new sender run, or another run's frames): loss and reordering are counted per run and added up",
                st.name, q.restarts
            ));
        }
        if q.wild > 0 {
            r.warnings.push(format!(
                "{}: {} frame(s) had a sequence number far from the stream's (over 2^20 ahead) and were left out of loss and reordering (a corrupted or foreign frame with a valid signature)",
                st.name, q.wild
            ));
        }
    }
    if let Some(c) = &r.capture.cut {
        r.warnings.push(c.warning());
    }
    if let Some(c) = r.calibration.as_ref().filter(|c| !c.valid) {
        let why = c.invalid_reason.as_deref().unwrap_or("it failed its checks");
        r.warnings.push(if c.subtracted {
            format!("the calibration {} is invalid ({why}), and its offset was subtracted because --use-invalid-calibration asked for it", c.path)
        } else {
            format!("the calibration {} is invalid ({why}): its offset was NOT subtracted. Fix: calibrate again on a quiet machine (or pass --use-invalid-calibration)", c.path)
        });
    }
    r.verdict = gapless_core::meter::report::MeterVerdict::of(r, failed);
}

/// Joins TX and RX per stream: the sender's count, and loss including the tail.
pub fn join(run: &mut RunResult, mut rx: MeterReport) {
    for s in &mut rx.streams {
        let Some(id) = s.id else { continue };
        if let Some(tx) = run.streams.iter().find(|t| t.id == id) {
            // A replay signs only the frames that can carry the signature.
            let sent = tx
                .signed_frames
                .unwrap_or(tx.sent_frames)
                .saturating_sub(tx.warmup_frames);
            s.tx_sent = Some(sent);
            let got = s.seq.as_ref().map_or(s.rx_frames, |q| q.unique);
            s.lost_vs_tx = Some(sent as i64 - got as i64);
            // What was lost outside the holes: the tail (or the head), an open episode.
            let holes = s.seq.as_ref().map_or(0, |q| q.lost) as i64;
            if let Some(e) = s.loss_episodes.as_mut() {
                let open = sent as i64 - got as i64 - holes;
                e.open = (open > 0).then_some(gapless_core::meter::episodes::OpenEpisode {
                    from_ns: e.highest_rx_ns,
                    lost_frames: open as u64,
                });
            }
        }
    }
    run.rx = Some(rx);
}

/// A stream's loss episodes in one line: how many, the longest, the tail still missing.
fn episodes_line(name: &str, e: &gapless_core::meter::episodes::LossEpisodes) -> String {
    let mut s = format!(
        "    {name}: {} loss episodes ({} frames), the longest {} frames in {}, {} in all",
        e.count,
        e.lost_frames,
        e.longest_frames,
        ns(e.longest_ns as f64),
        ns(e.total_ns as f64)
    );
    if let Some(o) = &e.open {
        s.push_str(&format!("; {} frames still missing at the end", o.lost_frames));
    }
    if e.reorder_runs > 0 {
        s.push_str(&format!(
            "; {} runs of reordered frames, the longest {}",
            e.reorder_runs, e.reorder_run_max
        ));
    }
    s.push('\n');
    s
}

fn ns(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.3} s", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} ms", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map_or("-".into(), f)
}

/// The meter's summary for a terminal.
pub fn summary_text(r: &MeterReport) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "meter: {} — {} frames in {:.3} s, RX timestamps: {}\n",
        r.source,
        r.capture.frames,
        r.duration_ns as f64 / 1e9,
        r.rx_timestamp_source
    ));
    if let Some(c) = &r.calibration {
        s.push_str(&format!(
            "calibration {}{}: latency offset {} {}; precision floor |err| p50 {} p99 {}, MSE {:.3e} ns²\n",
            c.path,
            if c.valid { "" } else { " (INVALID)" },
            ns(c.latency_offset_ns as f64),
            if c.subtracted {
                "subtracted from the latency columns"
            } else {
                "NOT subtracted"
            },
            ns(c.floor_abs_err_p50_ns as f64),
            ns(c.floor_abs_err_p99_ns as f64),
            c.floor_mse_ns2
        ));
    }
    // Latency columns with a calibration offset subtracted are starred.
    let cal = r
        .streams
        .iter()
        .any(|st| st.latency.as_ref().is_some_and(|l| l.offset_subtracted_ns != 0));
    if cal {
        s.push_str("* latency with the calibration offset subtracted\n");
    }
    s.push_str(&format!(
        "{:<14} {:>9} {:>9} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>7} {:>9}\n",
        "stream",
        "rx",
        "lost",
        "reord",
        "dup",
        if cal { "lat p50*" } else { "lat p50" },
        if cal { "lat p99*" } else { "lat p99" },
        if cal { "p99.9999*" } else { "p99.9999" },
        if cal { "lat max*" } else { "lat max" },
        "rate err",
        "|err| p50",
        "|err| p99",
        "MSE ns²",
        "burst",
        "W100 max"
    ));
    for st in &r.streams {
        let lost = match (st.lost_vs_tx, &st.seq) {
            (Some(l), _) => l.to_string(),
            (None, Some(q)) => q.lost.to_string(),
            _ => "-".into(),
        };
        let lat = st.latency.as_ref();
        let ia = st.interarrival.as_ref();
        s.push_str(&format!(
            "{:<14} {:>9} {:>9} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>7} {:>9}\n",
            st.name,
            st.rx_frames,
            lost,
            opt(st.seq.as_ref(), |q| q.reordered.to_string()),
            opt(st.seq.as_ref(), |q| q.duplicated.to_string()),
            opt(lat, |l| ns(l.percentiles_ns.p50 as f64)),
            opt(lat, |l| ns(l.percentiles_ns.p99 as f64)),
            opt(lat, |l| ns(l.percentiles_ns.p99_9999 as f64)),
            opt(lat, |l| ns(l.max_ns as f64)),
            opt(ia.and_then(|i| i.rate_error_rel), |e| format!("{:+.4}%", e * 100.0)),
            opt(ia.and_then(|i| i.abs_err_p50_ns), |e| ns(e as f64)),
            opt(ia.and_then(|i| i.abs_err_p99_ns), |e| ns(e as f64)),
            opt(ia.and_then(|i| i.mse_ns2), |e| format!("{e:.3e}")),
            opt(ia.and_then(|i| i.burst_fraction), |b| format!("{:.2}%", b * 100.0)),
            opt(st.rate_jitter.first(), |w| format!("{:.1}%", w.max_pct)),
        ));
        if let Some(f) = &st.flow {
            s.push_str(&format!("    ({f})\n"));
        }
        if let Some(e) = st.loss_episodes.as_ref().filter(|e| e.count > 0 || e.open.is_some()) {
            s.push_str(&episodes_line(&st.name, e));
        }
        if let Some(r) = ia
            .map(|i| i.gap_reference.as_str())
            .filter(|r| *r != reference::TARGET_GAP && !r.is_empty())
        {
            let what = match r.strip_prefix(reference::NONE) {
                Some(why) => format!("no |err|, MSE or burst figures: {why}"),
                None => format!("|err|, MSE and burst are each gap against its {r}"),
            };
            s.push_str(&format!("    {}: {what}\n", st.name));
        }
        if let Some(l) = lat.filter(|l| l.negative > 0) {
            s.push_str(&format!(
                "    {}: {} latencies ({:.1} %) are below zero{}; they are kept in the percentiles\n",
                st.name,
                l.negative,
                l.negative_fraction * 100.0,
                if l.offset_subtracted_ns != 0 {
                    " after the calibration offset"
                } else {
                    ""
                }
            ));
        }
    }
    let f = &r.foreign;
    if f.total > 0 {
        s.push_str(&format!(
            "foreign frames (not ours, not metered): {} (ICMP errors {}, not IP {}, no ports {}, malformed {}, unsigned {})\n",
            f.total, f.icmp_error, f.not_ip, f.no_ports, f.malformed, f.unsigned
        ));
    }
    if r.fillers > 0 {
        s.push_str(&format!(
            "filler frames (rate_control = \"filler\"; a device under test should have dropped them): {}\n",
            r.fillers
        ));
    }
    if let Some(d) = r.capture.kernel_drops {
        s.push_str(&format!("capture drops (kernel, ring full): {d}\n"));
    }
    for w in &r.warnings {
        s.push_str(&format!("WARNING: {w}\n"));
    }
    s.push_str(&r.verdict.text());
    s
}

/// The cores this process may run on (its affinity when first asked; see [`crate::cores`]).
pub fn allowed_cores() -> Vec<usize> {
    crate::cores::cpuset().to_vec()
}

/// Stream names and targets from a compiled profile.
/// A stream whose rate changes by design (a replay, a varying or self-similar rate) has no
/// constant target: the meter reports no rate error against one for it. Its gaps are measured
/// against its own schedule where the meter can regenerate it ([`gap_reference`]).
pub fn targets_of(p: &Profile) -> HashMap<u16, StreamTarget> {
    p.streams
        .iter()
        .map(|s| {
            let varies = s.replay.is_some() || s.curve.is_some() || matches!(s.pattern, Pattern::OnOffAggregate(_));
            let t = StreamTarget {
                name: s.name.clone(),
                target_pps: (!varies).then_some(s.target_pps),
                lanes: s.lanes,
                gaps: gap_reference(s, p.on_late),
                tags: s.tags.clone(),
                plan: plan_of(s),
            };
            (s.id, t)
        })
        .collect()
}

/// What an unsigned stream's frames look like, or a signed one's whose headers set by hand
/// hide the signature from a parser, one match per variant (the meter's plan:
/// [`gapless_core::meter::plan`]); empty for any other stream or one the plan cannot read.
pub fn plan_of(s: &StreamConfig) -> Vec<PlanMatch> {
    let by_hand = |v: &gapless_core::packet::variant::Variant| v.template.hand().is_some_and(|h| h.moves_parse());
    if s.replay.is_some() || !s.variants.iter().any(by_hand) && s.variants.iter().any(|v| v.template.sig) {
        return Vec::new();
    }
    s.variants
        .iter()
        .filter_map(|v| PlanMatch::of(&v.template, &v.ops))
        .collect()
}

/// What a stream's gaps are measured against: the target gap for CBR with one frame per
/// departure, the regenerated schedule for any other pattern the meter can follow, else none
/// and why.
pub fn gap_reference(s: &StreamConfig, on_late: OnLate) -> GapReference {
    if s.replay.is_some() {
        return GapReference::Unknown("a replay keeps its capture's timing, which the meter does not read".into());
    }
    let cbr = matches!(s.pattern, Pattern::Cbr) && s.burst == 1 && s.curve.is_none();
    // Phase-split CBR: part j takes departures j, j + k, … of the whole schedule, so the
    // parts interleave into the stream's own CBR, against its (aggregate) target gap.
    let phase_cbr = cbr && s.split == gapless_core::spec::SplitKind::Phase;
    if s.lanes > 1 && !phase_cbr {
        return GapReference::Unknown(format!(
            "the stream was split over {} send loops, each with its own schedule",
            s.lanes
        ));
    }
    if on_late != OnLate::CatchUp {
        return GapReference::Unknown(format!(
            "on_late = \"{}\" changes the schedule when the sender falls behind",
            on_late.as_str()
        ));
    }
    if s.gap_depends_on_size() {
        return GapReference::Unknown("each gap depends on its frame's size (a bit rate over several sizes)".into());
    }
    if cbr {
        return GapReference::TargetGap;
    }
    GapReference::Schedule(Box::new(s.schedule()), s.max_size())
}

pub(crate) fn target_map<'a>(
    streams: impl Iterator<Item = (u16, &'a str, Option<f64>, u32, GapReference)>,
) -> HashMap<u16, StreamTarget> {
    streams
        .map(|(id, name, pps, lanes, gaps)| {
            let t = StreamTarget {
                name: name.to_string(),
                target_pps: pps,
                lanes,
                gaps,
                tags: Vec::new(),
                plan: Vec::new(),
            };
            (id, t)
        })
        .collect()
}
