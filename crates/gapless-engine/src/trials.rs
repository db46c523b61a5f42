//! A trial's figures from its run ([`trial_run`]), the sender's core, and the testbed an
//! experiment's ports belong to: what the experiment driver and RFC 2889's iterations share.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gapless_core::experiment::spec::ExperimentSpec;
use gapless_core::experiment::{TrialError, TrialRun};
use gapless_core::meter::report::MeterReport;

use crate::RunReport;

/// The testbed the first port's namespace belongs to (`NAME-tx`), and its device.
pub(crate) fn reference_testbed(
    spec: &ExperimentSpec,
) -> Option<(gapless_io::testbed::Testbed, gapless_io::testbed::dut::Dut)> {
    let name = spec.port_list().first()?.netns.clone()?;
    let t = gapless_io::testbed::Testbed::new(name.strip_suffix("-tx")?).ok()?;
    let d = t.dut()?;
    Some((t, d))
}

/// Waits `d`, or until `stop` is raised (then [`TrialError::Stopped`]).
pub(crate) fn wait(d: Duration, stop: &AtomicBool) -> Result<(), TrialError> {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return Err(TrialError::Stopped);
        }
        std::thread::sleep(Duration::from_millis(10).min(until.saturating_duration_since(Instant::now())));
    }
    Ok(())
}

/// The send loop's core: off the reference device's forwarding CPU when there is another.
pub(crate) fn sender_core() -> Option<usize> {
    let dut = gapless_io::testbed::dut::dut_cpu();
    crate::rx::allowed_cores().into_iter().find(|&c| c != dut)
}

/// A trial's counts from the joined run: after the warm-up, by stream, added up.
pub(crate) fn trial_run(r: &RunReport) -> TrialRun {
    let res = &r.result;
    let warmup_sent: u64 = res.streams.iter().map(|s| s.warmup_frames).sum();
    let rx = res.rx.as_ref();
    let signed = |f: &dyn Fn(&gapless_core::meter::report::StreamRx) -> u64| -> u64 {
        rx.map_or(0, |m| m.streams.iter().filter(|s| s.id.is_some()).map(f).sum())
    };
    let received = signed(&|s| s.seq.as_ref().map_or(s.rx_frames, |q| q.unique));
    let sent_total = res.sent_frames;
    TrialRun {
        // Frames the device refused at its door (the send failed) were offered and lost.
        sent: sent_total.saturating_sub(warmup_sent) + res.send_errors,
        sent_total,
        received,
        warmup_sent,
        warmup_received: rx.map_or(0, |m| m.warmup_frames),
        late_over_gap: res.lateness.late_over_one_gap,
        late_max_ns: res.lateness.max_ns,
        stall_ns: stalls_ns(&res.verdict),
        schedule: schedule_text(&res.verdict),
        held: res.verdict.held.unwrap_or(true),
        rx_pps: rx.and_then(rx_rate),
        latency: rx.and_then(|m| {
            m.streams
                .iter()
                .find(|s| s.id.is_some())
                .and_then(|s| s.latency.clone())
        }),
        warnings: res.warnings.clone(),
        directions: Vec::new(),
        flooded: None,
    }
}

/// The time a run's send loops were stalled in all (the busy-wait's stalls of more than
/// 20 µs): the frames due meanwhile were held back and sent late, in bursts.
pub(crate) fn stalls_ns(v: &gapless_core::result::verdict::Verdict) -> u64 {
    v.loops.iter().map(|l| l.stall_ns).sum()
}

pub(crate) fn schedule_text(v: &gapless_core::result::verdict::Verdict) -> String {
    match v.causes.first() {
        Some(c) if v.held == Some(false) => format!("{}: {c}", v.schedule),
        _ => v.schedule.clone(),
    }
}

/// Received frames per second between the first and last metered arrival.
fn rx_rate(m: &MeterReport) -> Option<f64> {
    rx_rate_of(&m.streams.iter().collect::<Vec<_>>())
}

/// The same over some of the meter's streams.
pub(crate) fn rx_rate_of(streams: &[&gapless_core::meter::report::StreamRx]) -> Option<f64> {
    let s: Vec<_> = streams.iter().filter(|s| s.id.is_some() && s.rx_frames > 1).collect();
    let first = s.iter().map(|s| s.first_rx_ns).min()?;
    let last = s.iter().map(|s| s.last_rx_ns).max()?;
    let n: u64 = s.iter().map(|s| s.rx_frames).sum();
    (last > first).then(|| (n - 1) as f64 * 1e9 / (last - first) as f64)
}
