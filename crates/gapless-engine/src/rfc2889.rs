//! RFC 2889's address tests on real ports ([`gapless_core::experiment::rfc2889`]): one
//! iteration empties the switch's table (a flush of the reference bridge, or the aging time
//! of a real switch), has the test port's address learned, sends the learning frames from
//! N source addresses, and then N test frames to them, metered on the learning port and
//! the monitor port together: frames on the monitor port were flooded, so their addresses
//! were not learned.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use gapless_core::experiment::rfc2889::LearningPlan;
use gapless_core::experiment::{TrialError, TrialPlan, TrialRun};
use gapless_core::ProfileSpec;
use gapless_io::testbed::dut::DutKind;
use gapless_io::testbed::Testbed;

use crate::experiment_ports::PortsPlan;
use crate::spec::{PortRef, ProfileSource, RunSpec, RxPort, RxSpec, TxTarget};
use crate::trials::wait;
use crate::{Run, RunReport};

/// The first of the N learned source addresses (locally administered).
const BASE_MAC: u64 = 0x02_67_6c_a0_00_00;

/// How a switch's table is emptied before an iteration.
#[derive(Debug, Clone)]
pub enum AgeOut {
    /// The reference bridge: its learned entries flushed.
    Flush(Testbed),
    /// A real switch: its aging time waited, and a second more.
    Wait(f64),
}

/// How the experiment's switch is aged out (None: no test needs it emptied), or why RFC
/// 2889 cannot run on it.
pub fn age_out(spec: &gapless_core::experiment::ExperimentSpec) -> Result<Option<AgeOut>, String> {
    use gapless_core::experiment::rfc2889::Rfc2889Test;
    let r = spec.rfc2889.as_ref().expect("checked");
    let bridge = crate::trials::reference_testbed(spec).filter(|(_, d)| d.kind == DutKind::Bridge);
    if bridge.is_some() && r.tests.contains(&Rfc2889Test::CongestionControl) {
        return Err("rfc2889.tests: congestion_control (§5.5) shows head-of-line blocking in a switch's shared buffer; the reference bridge forwards between veths, which have no shared buffer, so it would pass without meaning anything. Fix: drop it here, and run it against a switch (described in [dut])".into());
    }
    let only_congestion = r.tests.iter().all(|t| *t == Rfc2889Test::CongestionControl);
    match (bridge, r.aging_time_s, &spec.dut) {
        (Some((t, _)), _, _) => Ok(Some(AgeOut::Flush(t))),
        (None, Some(a), Some(_)) => Ok(Some(AgeOut::Wait(a))),
        (None, None, Some(_)) if only_congestion => Ok(None),
        _ => Err("method = \"rfc2889\" needs a bridge: the testbed's reference bridge (gapless testbed up --dut bridge --ports 3, its ports given in `ports`), or a switch described in [dut] with rfc2889.aging_time_s (its table is aged out between iterations; congestion_control alone needs only [dut])".into()),
    }
}

/// Empties the switch's table of learned addresses.
pub(crate) fn empty_table(a: &AgeOut, stop: &AtomicBool) -> Result<(), TrialError> {
    match a {
        AgeOut::Flush(t) => gapless_io::kernel::bridge::flush_fdb(Some(&t.dut_ns()), "br0")
            .map_err(|e| TrialError::Failed(format!("RFC 2889: {e}"))),
        AgeOut::Wait(s) => wait(Duration::from_secs_f64(s + 1.0), stop),
    }
}

/// Has the switch learn the addresses of `ports` (each sends three frames to port `to`), so
/// that frames to them are not flooded: ports that only receive in a trial.
pub(crate) fn announce(
    plan: &PortsPlan,
    ports: &[usize],
    to: usize,
    label: &str,
    stop: &Arc<AtomicBool>,
) -> Result<(), String> {
    for &p in ports {
        let frames = profile(64, &plan.macs[p], &plan.macs[to], 1000.0, 3, None);
        send(label, &plan.all[p], frames, None, stop)?;
    }
    wait(Duration::from_millis(20), stop).map_err(|_| "stopped".to_string())
}

/// What an iteration runs on: the experiment's ports, how its switch is aged out, and how
/// its runs are named.
pub(crate) struct Rig<'a> {
    pub ports: &'a PortsPlan,
    pub age_out: &'a AgeOut,
    pub label: &'a str,
}

/// One iteration of the address tests.
pub(crate) fn iteration(
    x: &Rig<'_>,
    plan: &TrialPlan,
    l: &LearningPlan,
    stop: &Arc<AtomicBool>,
) -> Result<TrialRun, TrialError> {
    let failed = |e: String| TrialError::Failed(format!("{}: {e}", plan.purpose));
    let ports = x.ports;
    let size = plan.size.unwrap_or(64);
    empty_table(x.age_out, stop)?;
    let (lm, tm) = (&ports.macs[l.learning_port], &ports.macs[l.test_port]);
    let tport = &ports.all[l.test_port];
    let lport = &ports.all[l.learning_port];
    send(x.label, tport, profile(size, tm, lm, 1000.0, 3, None), None, stop).map_err(failed)?;
    let learn = profile(
        size,
        &mac_text(BASE_MAC),
        tm,
        l.learning_pps,
        l.addresses,
        Some("mac_src"),
    );
    send(x.label, lport, learn, None, stop).map_err(failed)?;
    wait(Duration::from_millis(50), stop)?;
    let test = profile(size, tm, &mac_text(BASE_MAC), l.test_pps, l.addresses, Some("mac_dst"));
    let mut rx = RxSpec::new(lport.iface.clone());
    rx.netns = lport.netns.clone();
    let mp = &ports.all[l.monitor_port];
    rx.more = vec![RxPort {
        iface: mp.iface.clone(),
        netns: mp.netns.clone(),
        capture: None,
    }];
    rx.linger = Duration::from_millis(300);
    rx.ring_blocks = Some(crate::spec::ring_blocks_for(l.test_pps, size));
    let report = send(x.label, tport, test, Some(rx), stop).map_err(failed)?;
    Ok(tested(&report))
}

/// The test frames' run as the trial: received at the learning port, flooded to the
/// monitor port.
fn tested(r: &RunReport) -> TrialRun {
    let mut run = crate::trials::trial_run(r);
    let s = r
        .result
        .rx
        .as_ref()
        .and_then(|m| m.streams.iter().find(|s| s.id.is_some()));
    let at = |p: usize| s.and_then(|s| s.rx_ports.get(p)).map_or(0, |t| t.rx_frames);
    run.received = at(0).min(run.sent);
    run.flooded = Some(at(1));
    run
}

/// A stream of `count` frames from `src` to `dst`, with `field` stepping through `count`
/// addresses from the one in the template.
fn profile(size: u32, src: &str, dst: &str, pps: f64, count: u32, field: Option<&str>) -> ProfileSpec {
    let mut t = format!(
        "[[stream]]\nname = \"rfc2889\"\nsize = {size}\n[stream.template]\neth_src = \"{src}\"\neth_dst = \"{dst}\"\n[stream.timing]\nrate_pps = {pps}\ncount = {count}\n"
    );
    if let Some(f) = field {
        let last = mac_text(BASE_MAC + u64::from(count.max(1)) - 1);
        t.push_str(&format!(
            "[[stream.field]]\nfield = \"{f}\"\nop = \"inc\"\nfrom = \"{}\"\nto = \"{last}\"\n",
            mac_text(BASE_MAC)
        ));
    }
    ProfileSpec::from_toml(&t, "rfc2889").expect("a well-formed profile")
}

fn mac_text(m: u64) -> String {
    let b = m.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// Sends `profile` from `port` to its end (and meters with `rx`).
fn send(
    label: &str,
    port: &PortRef,
    profile: ProfileSpec,
    rx: Option<RxSpec>,
    stop: &Arc<AtomicBool>,
) -> Result<RunReport, String> {
    let src = ProfileSource {
        spec: profile,
        dir: std::path::PathBuf::new(),
        label: format!("{label} (rfc2889)"),
    };
    let spec = RunSpec {
        netns: port.netns.clone(),
        rx,
        core: crate::trials::sender_core(),
        probe_cores: false,
        close_later: true,
        ..RunSpec::new(
            src,
            TxTarget::Iface {
                name: port.iface.clone(),
                socket: None,
            },
        )
    };
    let r = Run::start_with_stop(spec, stop.clone())
        .and_then(|h| h.wait())
        .map_err(|e| e.to_string())?;
    match r.backend_error.as_ref().or(r.meter_error.as_ref()) {
        Some(e) => Err(e.to_string()),
        None => Ok(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_learning_profile_steps_through_n_addresses() {
        let p = profile(
            64,
            "02:67:6c:00:00:01",
            "02:67:6c:00:00:02",
            1000.0,
            300,
            Some("mac_src"),
        );
        let f = &p.streams[0].fields[0];
        assert_eq!(f.field, "mac_src");
        assert_eq!(
            f.to,
            Some(gapless_core::spec::FieldValue::Str("02:67:6c:a0:01:2b".into()))
        );
        assert_eq!(p.streams[0].timing.count, Some(300));
    }
}
