//! The rate-control methods besides the send loop's own pacing: the NIC's per-queue limiter,
//! the kernel's shaper and launch time (filler frames are built by the core's filler
//! schedule). Each is checked before the run, set up in the run's network namespace, and
//! undone when the run ends (a drop guard, so Ctrl-C and faults undo it too). What was set
//! and what the system confirmed go into the result.

use std::path::Path;

use gapless_core::result::RateControlSetup;
use gapless_core::spec::{RateControlKind, ShaperSpec};
use gapless_core::Profile;
use gapless_io::kernel::maxrate::{NicLimiter, NIC_BURST_WARN_PPS};
use gapless_io::kernel::qdisc::{Shaper, ShaperParams};
use serde_json::json;

use crate::spec::{RunSpec, TxSocket, TxTarget};
use crate::EngineError;

/// A method set up for a run; dropping it undoes what it changed.
pub struct RateControl {
    pub kind: RateControlKind,
    pub setup: RateControlSetup,
    /// Launch time: how long before its time each frame is handed to the kernel, ns.
    pub lead_ns: u64,
    pub warnings: Vec<String>,
    /// Warnings from undoing it, after the run.
    pub end_warnings: Vec<String>,
    shaper: Option<Shaper>,
    limiter: Option<NicLimiter>,
    /// The namespace's own sysfs, mounted for the limiter (dropped after it: fields drop in
    /// order).
    sysfs: Option<gapless_io::kernel::maxrate::SysfsView>,
}

impl RateControl {
    /// Whether the send loop waits for each departure (the other methods space the frames
    /// themselves; launch time waits for the time minus its lead).
    pub fn paces(&self) -> bool {
        matches!(self.kind, RateControlKind::Software | RateControlKind::LaunchTime)
    }

    /// Lets the shaper send what it still holds before it goes (a stopped run too: those
    /// frames were handed over and count as sent), for as long as its rate needs plus 1 s.
    fn drain_shaper(&mut self, s: &Shaper, stopped: bool) {
        let rate = self.setup.params["rate_bps"].as_f64().unwrap_or(0.0).max(8.0);
        let held = s.backlog().map(|b| b.bytes).unwrap_or(0);
        // A stopped run ends promptly: what the shaper still holds after 200 ms is dropped.
        let secs = if stopped {
            0.2
        } else {
            (held as f64 * 8.0 / rate).min(60.0) + 1.0
        };
        let max = std::time::Duration::from_secs_f64(secs);
        match s.drain(max) {
            Ok(b) => {
                self.setup.confirmed.push(format!(
                    "the shaper sent {} frames and dropped {}{}",
                    b.sent_packets,
                    b.drops,
                    if b.packets > 0 {
                        format!("; {} frames were still queued when it was removed", b.packets)
                    } else {
                        String::new()
                    }
                ));
                if b.drops > 0 || b.packets > 0 {
                    self.end_warnings.push(format!(
                        "the shaper dropped {} frames and {} were left in its queue: fewer frames left than were sent",
                        b.drops, b.packets
                    ));
                }
            }
            Err(e) => self
                .end_warnings
                .push(format!("the shaper's counters could not be read: {e}")),
        }
    }

    /// Undoes the setup now, noting it in the result (else the drop does it). `stopped`: the
    /// run was stopped (Ctrl-C, a fault), so it must end promptly.
    pub fn finish(&mut self, stopped: bool) {
        if let Some(mut s) = self.shaper.take() {
            self.drain_shaper(&s, stopped);
            match s.remove() {
                Ok(()) => self.setup.confirmed.push(format!(
                    "shaper removed; the default root qdisc ({}) is back",
                    s.replaced
                )),
                Err(e) => self.end_warnings.push(format!("the shaper could not be removed: {e}")),
            }
        }
        if let Some(mut l) = self.limiter.take() {
            match l.restore() {
                Ok(()) => self.setup.confirmed.push("tx_maxrate restored on every queue".into()),
                Err(e) => self.end_warnings.push(format!("tx_maxrate could not be restored: {e}")),
            }
        }
    }
}

/// The method a run uses: the run's, else the profile's `[output] rate_control`.
pub fn method_of(spec: &RunSpec) -> RateControlKind {
    spec.rate_control
        .or(spec.profile.spec.output.as_ref().and_then(|o| o.rate_control))
        .unwrap_or_default()
}

/// Refuses combinations that cannot work, before anything is opened.
pub fn check(spec: &RunSpec, kind: RateControlKind, socket: Option<TxSocket>) -> Result<(), EngineError> {
    use RateControlKind as K;
    let why = match (kind, &spec.target) {
        (K::Software, _) => None,
        (K::Filler, _) if spec.cores.len() > 1 => {
            Some("fillers lay out one link's wire time from one send loop, and several loops would book the same wire twice: send from one core")
        }
        (K::Filler, TxTarget::Pcap(_)) => None,
        (_, TxTarget::Pcap(_) | TxTarget::Null) => Some("it acts on an interface: give --iface"),
        (K::Shaper, _) if matches!(socket, Some(TxSocket::AfXdp { .. })) => {
            Some("AF_XDP bypasses the kernel's qdiscs: send with AF_PACKET (--backend afpacket)")
        }
        _ if spec.batch > 1 => Some("throughput mode (--batch) is software pacing's: leave --batch at 1"),

        (K::Nic | K::Shaper | K::Filler, _) if spec.pacing == crate::Pacing::On => {
            Some("the method spaces the frames itself and gapless sends unpaced: drop --pace on")
        }
        _ => None,
    };
    match why {
        Some(w) => Err(EngineError::RateControl {
            method: kind.name(),
            problem: w.to_string(),
        }),
        None => Ok(()),
    }
}

/// The profile's mean rate as the kernel counts it: bit/s of frames without FCS.
fn kernel_bps(p: &Profile) -> f64 {
    p.streams.iter().map(|s| s.target_pps * (s.mean_size - 4.0) * 8.0).sum()
}

/// Sets the method up on `iface` (in the run's namespace). `queues` are the TX queues the
/// send loops use (AF_XDP), or None (AF_PACKET: the kernel picks, so every queue is set).
pub fn setup(
    spec: &RunSpec,
    kind: RateControlKind,
    profile: &Profile,
    iface: &str,
    queues: Option<Vec<u32>>,
) -> Result<RateControl, EngineError> {
    let mut rc = RateControl {
        kind,
        setup: RateControlSetup {
            method: kind.name().into(),
            params: json!({}),
            confirmed: Vec::new(),
        },
        lead_ns: 0,
        warnings: Vec::new(),
        end_warnings: Vec::new(),
        shaper: None,
        limiter: None,
        sysfs: None,
    };
    let out = spec.profile.spec.output.clone().unwrap_or_default();
    match kind {
        RateControlKind::Shaper => shaper(&mut rc, &out.shaper.unwrap_or_default(), profile, iface)?,
        RateControlKind::Nic => {
            let root = match (&spec.sysfs_net, &spec.netns) {
                (Some(p), _) => p.clone(),
                (None, Some(_)) => rc.sysfs.insert(gapless_io::kernel::maxrate::SysfsView::mount()?).net(),
                (None, None) => gapless_io::kernel::maxrate::SYSFS_NET.into(),
            };
            nic(&mut rc, &root, profile, iface, queues)?
        }
        RateControlKind::LaunchTime => {
            let xdp = queues.is_some();
            launch_time(&mut rc, out.launch_time.and_then(|l| l.lead_us), iface, xdp)?
        }
        RateControlKind::Software | RateControlKind::Filler => {}
    }
    Ok(rc)
}

fn shaper(rc: &mut RateControl, s: &ShaperSpec, profile: &Profile, iface: &str) -> Result<(), EngineError> {
    let qdisc = s.qdisc.clone().unwrap_or_else(|| "tbf".into());
    if qdisc != "tbf" && qdisc != "htb" {
        return Err(EngineError::RateControl {
            method: "shaper",
            problem: format!(
                "[output.shaper] qdisc = {qdisc:?} is not a shaper gapless installs: give \"tbf\" or \"htb\""
            ),
        });
    }
    let rate = s.rate_bps.unwrap_or_else(|| kernel_bps(profile));
    if !(rate.is_finite() && rate >= 8.0) {
        return Err(EngineError::RateControl {
            method: "shaper",
            problem: format!("the shaper's rate ({rate} bit/s) must be a positive number of bit/s: give [output.shaper] rate_bps, or streams with a rate"),
        });
    }
    let max = u64::from(profile.max_frame().saturating_sub(4).max(60));
    // Default: 1 ms of the rate (at least two frames). A bucket of two frames loses tokens
    // whenever the qdisc's timer fires late: bench/rate_control.py measured tbf 26 % under
    // its rate at 100 kpps with such a bucket on this VM.
    let burst = s.burst_bytes.unwrap_or((2 * max).max((rate / 8e3).ceil() as u64));
    if burst < max {
        return Err(EngineError::RateControl {
            method: "shaper",
            problem: format!("burst_bytes = {burst} is less than the largest frame ({max} B without FCS), which the shaper would never pass: give at least {max}"),
        });
    }
    let p = ShaperParams {
        qdisc,
        rate_bps: rate.round() as u64,
        burst_bytes: burst,
        limit_bytes: 64 << 20,
        queue_frames: None,
    };
    let sh = Shaper::install(iface, &p)?;
    rc.setup.params = json!({"qdisc": p.qdisc, "rate_bps": p.rate_bps, "burst_bytes": p.burst_bytes, "limit_bytes": p.limit_bytes, "replaced": sh.replaced});
    rc.setup
        .confirmed
        .push(format!("installed on {iface}: {}", sh.confirmed));
    rc.shaper = Some(sh);
    Ok(())
}

fn nic(
    rc: &mut RateControl,
    sysfs: &Path,
    profile: &Profile,
    iface: &str,
    queues: Option<Vec<u32>>,
) -> Result<(), EngineError> {
    let bps = kernel_bps(profile) + profile.streams.iter().map(|s| s.target_pps * 4.0 * 8.0).sum::<f64>();
    let qs = match queues {
        Some(q) => q,
        None => gapless_io::kernel::maxrate::tx_queues(sysfs, iface)?,
    };
    let per_queue = bps / qs.len().max(1) as f64;
    let mbps = ((per_queue / 1e6).ceil() as u64).max(1);
    let lim = NicLimiter::set(sysfs, iface, &qs, mbps)?;
    rc.setup.params = json!({"tx_maxrate_mbps": mbps, "queues": qs, "sysfs": sysfs.display().to_string()});
    for q in &lim.queues {
        rc.setup.confirmed.push(format!(
            "tx-{}: tx_maxrate {} Mbit/s (was {}; read back {})",
            q.queue, q.asked_mbps, q.before_mbps, q.read_back_mbps
        ));
    }
    let pps: f64 = profile.streams.iter().map(|s| s.target_pps).sum::<f64>() / qs.len().max(1) as f64;
    rc.warnings.push(if pps > NIC_BURST_WARN_PPS {
        format!("rate_control = \"nic\" at {:.2} Mpps per queue: Mind the Gap measured hardware limiters releasing bursts at such rates (Intel 82599: pairs at 1-7 Mpps; XL710: 64-128 frames), so the spacing is the NIC's, not CBR; meter it, or use software or filler", pps / 1e6)
    } else {
        "rate_control = \"nic\": the NIC spaces the frames; hardware limiters are made to cap a rate, not to space frames evenly (Mind the Gap), so meter the spacing before trusting it".into()
    });
    rc.limiter = Some(lim);
    Ok(())
}

/// Launch time: a qdisc that holds frames until their time (AF_PACKET), or for AF_XDP, which
/// bypasses qdiscs, an etf with NIC offload (the NIC launches the frame).
fn launch_time(rc: &mut RateControl, lead_us: Option<f64>, iface: &str, xdp: bool) -> Result<(), EngineError> {
    let lead = lead_us.unwrap_or(200.0);
    if !(lead.is_finite() && lead > 0.0 && lead <= 1e6) {
        return Err(EngineError::RateControl {
            method: "launch-time",
            problem: format!(
                "[output.launch_time] lead_us = {lead}: give a lead from 0 to 1000000 µs (200 is the default)"
            ),
        });
    }
    let qdiscs = gapless_io::kernel::qdisc::show(iface)?;
    let usable = |q: &&gapless_io::kernel::qdisc::Qdisc| !xdp || (q.kind == "etf" && q.offload);
    let offered: Vec<_> = qdiscs.iter().filter(usable).cloned().collect();
    let Some(found) = gapless_io::kernel::qdisc::launch_time_qdisc(&offered) else {
        if xdp && gapless_io::kernel::qdisc::launch_time_qdisc(&qdiscs).is_some() {
            return Err(EngineError::RateControl {
                method: "launch-time",
                problem: format!("AF_XDP bypasses the qdiscs, so only a NIC can launch its frames, and {iface}'s etf has no offload. Fix: `tc qdisc replace dev {iface} ... etf clockid CLOCK_TAI delta 200000 offload` on a NIC with launch time (igc, i210), or send with AF_PACKET"),
            });
        }
        let list: Vec<String> = qdiscs.iter().map(|q| format!("{} {}", q.kind, q.handle)).collect();
        return Err(gapless_io::IoError::NoLaunchTimeQdisc {
            iface: iface.to_string(),
            found: if list.is_empty() {
                "no qdisc".into()
            } else {
                list.join(", ")
            },
            kernel: kernel_has_launch_qdiscs(),
        }
        .into());
    };
    rc.lead_ns = (lead * 1e3) as u64;
    rc.setup.params =
        json!({"lead_us": lead, "clock": "CLOCK_TAI", "tai_minus_utc_ns": gapless_io::kernel::socket::tai_offset_ns()});
    rc.setup
        .confirmed
        .push(format!("{iface} launches at SO_TXTIME: {found}"));
    Ok(())
}

/// Whether this kernel could load etf or fq at all (for the refusal's message).
fn kernel_has_launch_qdiscs() -> String {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let rel = rel.trim();
    let has = |m: &str| {
        std::fs::read_to_string(format!("/lib/modules/{rel}/modules.builtin")).is_ok_and(|s| s.contains(m))
            || std::fs::read_to_string(format!("/lib/modules/{rel}/modules.dep")).is_ok_and(|s| s.contains(m))
    };
    if has("sch_etf") || has("sch_fq.") {
        String::new()
    } else {
        format!(" (and this kernel, {rel}, lists neither sch_etf nor sch_fq among its modules)")
    }
}

/// Wraps the backend `open` gives in the filler wrapper: the link's speed from the profile
/// (or the interface), the fillers' kind from `[output.filler]` (auto: a bad FCS where the
/// driver takes SO_NOFCS, else a link-local destination).
pub fn with_fillers(
    rc: &mut RateControl,
    spec: &RunSpec,
    profile: &Profile,
    info: Option<&gapless_io::kernel::nic::IfaceInfo>,
    opts: gapless_io::tx::afpacket::AfPacketOptions,
    open: impl Fn(gapless_io::tx::afpacket::AfPacketOptions) -> Result<Box<dyn gapless_io::tx::TxBackend>, EngineError>,
) -> Result<Box<dyn gapless_io::tx::TxBackend>, EngineError> {
    use gapless_io::tx::filler::{FillerKind, FillerTx};
    let fs = spec
        .profile
        .spec
        .output
        .as_ref()
        .and_then(|o| o.filler.clone())
        .unwrap_or_default();
    let problem = |p: String| EngineError::RateControl {
        method: "filler",
        problem: p,
    };
    let link_bps = profile.link_speed_bps.or(info.and_then(|i| i.speed_bps)).ok_or_else(|| {
        problem("fillers keep the link busy at its line rate, so gapless must know it, and this link reports no speed (veth has none). Fix: give link_speed_bps in the profile (e.g. 10e9)".into())
    })?;
    let dst = match &fs.dst {
        Some(d) => parse_filler_dst(d).map_err(problem)?,
        None => gapless_core::packet::filler::FILLER_DST,
    };
    let asked = fs.kind.as_deref().unwrap_or("auto");
    let live = info.is_some();
    let (be, kind) = match asked {
        "link-local" => (open(opts)?, FillerKind::LinkLocal(dst)),
        "bad-fcs" if live => (
            open(gapless_io::tx::afpacket::AfPacketOptions { nofcs: true, ..opts })?,
            FillerKind::BadFcs,
        ),
        "bad-fcs" => (open(opts)?, FillerKind::BadFcs),
        "auto" if live => match open(gapless_io::tx::afpacket::AfPacketOptions { nofcs: true, ..opts }) {
            Ok(be) => (be, FillerKind::BadFcs),
            Err(EngineError::Io(e @ gapless_io::IoError::NoFcsUnsupported { .. })) => {
                rc.setup.confirmed.push(format!(
                    "bad-FCS fillers refused, so fillers go to a link-local address: {e}"
                ));
                (open(opts)?, FillerKind::LinkLocal(dst))
            }
            Err(e) => return Err(e),
        },
        "auto" => (open(opts)?, FillerKind::LinkLocal(dst)),
        k => {
            return Err(problem(format!(
                "[output.filler] kind = {k:?}: give \"auto\", \"bad-fcs\" or \"link-local\""
            )))
        }
    };
    let max_frame = info.map_or(1518, |i| u64::from(i.mtu) + 18);
    rc.setup.params = json!({
        "link_speed_bps": link_bps,
        "kind": if kind == FillerKind::BadFcs { "bad-fcs" } else { "link-local" },
        "dst": fs.dst.clone().unwrap_or_else(|| "01:80:c2:00:00:0f".into()),
        "min_filler_bytes": gapless_core::packet::filler::MIN_FILLER,
        "max_filler_bytes": max_frame,
    });
    Ok(Box::new(FillerTx::new(be, link_bps, max_frame, kind)))
}

/// An IEEE 802.1 reserved group address, 01:80:c2:00:00:00 to 01:80:c2:00:00:0f.
fn parse_filler_dst(s: &str) -> Result<[u8; 6], String> {
    let b: Vec<u8> = s.split(':').filter_map(|x| u8::from_str_radix(x, 16).ok()).collect();
    match b.as_slice() {
        [0x01, 0x80, 0xc2, 0, 0, x] if *x <= 0x0f && ![0, 1, 2].contains(x) => Ok([1, 0x80, 0xc2, 0, 0, *x]),
        _ => Err(format!("[output.filler] dst = {s:?}: give an IEEE 802.1 reserved group address that bridges never forward, 01:80:c2:00:00:03 to 01:80:c2:00:00:0f (00-02 are STP, pause and slow protocols; the default 0f is unassigned)")),
    }
}

impl RateControl {
    /// Notes the fillers the send loops sent.
    pub fn note_fillers(&mut self, counts: impl Iterator<Item = gapless_core::packet::filler::FillerCounts>) {
        let mut t = gapless_core::packet::filler::FillerCounts::default();
        let mut any = false;
        for c in counts {
            any = true;
            t.add(&c);
        }
        if !any {
            return;
        }
        self.setup.params["fillers"] = json!({
            "frames": t.fillers, "bytes": t.filler_bytes, "payload_frames": t.payloads,
            "early_gap_too_short": t.carried, "late_link_busy": t.late,
            "max_abs_error_byte_times": t.max_abs_error,
        });
        self.setup.confirmed.push(format!(
            "fillers sent: {} ({} B) around {} payload frames; {} payload frames early (gap shorter than a 64 B filler, carried over), {} late (link busy)",
            t.fillers, t.filler_bytes, t.payloads, t.carried, t.late
        ));
    }
}
