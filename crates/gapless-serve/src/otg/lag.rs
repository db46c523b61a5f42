//! The config's LAGs, native (issue 60): a thread per LAG with a slow-protocols socket on
//! each member's interface (`gapless_io::devices::group`). Every 10 ms it reads each
//! member's link, takes the LACPDUs that came in, runs each member's 802.1AX machines
//! (`gapless_otg::lag::lacp::member`, sans IO) and sends what they say, and publishes which
//! members distribute in the LAG's [`LagLive`], which the runs sending on the LAG read
//! (`gapless_io::tx::lag`). A static LAG's member distributes while its link is up and sends
//! no LACPDU. Fewer members distributing than `min_links`: the LAG is down and none carries
//! frames. A LAG with devices on it (`connection.lag_name`) has an interface for them
//! (`gapless_io::devices::lagif`), forwarded over the members by the same [`LagLive`].
//! Started when the config is set and on `protocol.all start`; stopped, with a last
//! LACPDU out of sync on each member so the partner stops at once, on `protocol.all stop`, a
//! new config and the server's end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gapless_io::devices::group::{GroupSocket, SLOW_PROTOCOLS};
use gapless_io::devices::lagif::{self, LagIface, LagIfaceSpec};
use gapless_io::tx::lag::LagLive;
use gapless_otg::config::Plan;
use gapless_otg::lag::lacp::member::Member;
use gapless_otg::lag::Lag;
use gapless_otg::OtgError;
use serde_json::{json, Value};

const TICK: Duration = Duration::from_millis(10);

/// One member as the thread keeps it.
pub(super) struct MemberState {
    /// Its machines (None: a static LAG's member).
    pub lacp: Option<Member>,
    pub link_up: bool,
    /// `member_ports` up (LACP runs on it; a static member carries frames).
    pub enabled: bool,
    pub distributing: bool,
}

/// What the LAG's thread shares: each member, why it stopped, and its rates.
#[derive(Default)]
pub(super) struct LagStatus {
    pub members: Vec<MemberState>,
    pub fault: Option<String>,
    /// Frames and bytes per second sent over the last second (all members).
    pub rates: (f64, f64),
}

/// One LAG and its thread.
pub struct LagDriver {
    pub lag: Lag,
    /// Each member's interface and namespace.
    at: Vec<(String, Option<String>)>,
    pub live: Arc<LagLive>,
    status: Arc<Mutex<LagStatus>>,
    run: Mutex<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>>,
    /// The LAG's interface for the devices on it (`connection.lag_name`), if any.
    iface: Mutex<Option<LagIface>>,
}

/// A driver for every `lags[]` entry, each started, with its interface if devices are on it.
pub fn up(plan: &Plan) -> Result<Vec<Arc<LagDriver>>, OtgError> {
    let mut out = Vec::new();
    for (k, l) in plan.lags.iter().enumerate() {
        let at: Vec<(String, Option<String>)> = l
            .members
            .iter()
            .map(|m| {
                let p = plan.port(&m.port).expect("checked by the plan");
                (p.iface.clone(), p.netns.clone())
            })
            .collect();
        let live = Arc::new(LagLive::new(l.members.len()));
        let iface = interface(plan, k, &at, &live)?;
        let d = Arc::new(LagDriver {
            lag: l.clone(),
            at,
            live,
            status: Arc::default(),
            run: Mutex::new(None),
            iface: Mutex::new(iface),
        });
        d.start()?;
        out.push(d);
    }
    Ok(out)
}

/// The interface of the `k`-th LAG for the devices on it (None when there are none): a veth
/// pair in a namespace of its own, forwarded over the members by `live`.
fn interface(
    plan: &Plan,
    k: usize,
    members: &[(String, Option<String>)],
    live: &Arc<LagLive>,
) -> Result<Option<LagIface>, OtgError> {
    let lag = &plan.lags[k].name;
    let devs: Vec<&gapless_otg::devices::Eth> = plan.devices.iter().filter(|e| e.on_lag && &e.port == lag).collect();
    if devs.is_empty() {
        return Ok(None);
    }
    let spec = LagIfaceSpec {
        netns: lagif::netns_name(k),
        outer: "gl-lag".into(),
        inner: "gl-dev".into(),
        members: members.to_vec(),
        macs: devs.iter().filter_map(|e| gapless_otg::lag::mac(&e.mac)).collect(),
        mtu: devs.iter().filter_map(|e| e.mtu).max().unwrap_or(1500).max(1500),
    };
    LagIface::create(spec, live.clone())
        .map(Some)
        .map_err(|e| OtgError::invalid(format!("lags: {lag:?} cannot carry its devices: {e}")))
}

impl LagDriver {
    fn lock_run(&self) -> MutexGuard<'_, Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>> {
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn status(&self) -> MutexGuard<'_, LagStatus> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a socket on every member (an error names the LAG and the port) and starts its
    /// thread, unless it runs.
    pub fn start(&self) -> Result<(), OtgError> {
        let mut run = self.lock_run();
        if run.as_ref().is_some_and(|r| !r.1.is_finished()) {
            return Ok(());
        }
        let mut socks = Vec::new();
        for ((iface, ns), m) in self.at.iter().zip(&self.lag.members) {
            socks.push(GroupSocket::open(ns.as_deref(), iface, SLOW_PROTOCOLS).map_err(|e| {
                OtgError::invalid(format!(
                    "lags: {:?} cannot open LACP on port {:?}: {e}",
                    self.lag.name, m.port
                ))
            })?);
        }
        {
            let mut sh = self.status();
            let old: Vec<bool> = sh.members.iter().map(|m| m.enabled).collect();
            sh.members = (0..self.lag.members.len())
                .map(|k| MemberState {
                    lacp: self.lag.lacp(k).map(|c| Member::new(c, 0)),
                    link_up: false,
                    enabled: old.get(k).copied().unwrap_or(true),
                    distributing: false,
                })
                .collect();
            sh.fault = None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (lag, live, status, flag) = (self.lag.clone(), self.live.clone(), self.status.clone(), stop.clone());
        let t = std::thread::Builder::new()
            .name(crate::thread_name("lag"))
            .spawn(move || drive(&lag, &socks, &live, &status, &flag))
            .map_err(|e| OtgError::internal(format!("a LAG thread: {e}")))?;
        *run = Some((stop, t));
        Ok(())
    }

    /// Stops its thread: no member distributes, and each LACP member says so once more.
    pub fn stop(&self) {
        if let Some((stop, t)) = self.lock_run().take() {
            stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }

    /// The interface the devices on the LAG sit on, and its namespace.
    pub fn devices_iface(&self) -> Option<(String, String)> {
        let i = self.iface.lock().unwrap_or_else(|e| e.into_inner());
        i.as_ref().map(|i| (i.inner().0.to_string(), i.inner().1.to_string()))
    }

    /// Stops its thread and removes its interface (the config's end).
    pub fn remove(&self) {
        self.stop();
        self.iface.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// `admin` (the members' Synchronization) or `member_ports` (LACP on the member at all)
    /// up or down, on the members named (their port names; all when none are).
    pub fn control(&self, admin: bool, up: bool, ports: &[String]) {
        let mut sh = self.status();
        for (k, m) in sh.members.iter_mut().enumerate() {
            if !ports.is_empty() && !ports.contains(&self.lag.members[k].port) {
                continue;
            }
            if !admin {
                m.enabled = up;
            } else if let Some(l) = m.lacp.as_mut() {
                l.set_admin(up);
            }
        }
    }
}

impl Drop for LagDriver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The LAG's loop, every [`TICK`], until told to stop.
fn drive(lag: &Lag, socks: &[GroupSocket], live: &LagLive, status: &Mutex<LagStatus>, stop: &AtomicBool) {
    let t0 = Instant::now();
    let mut rate = (Instant::now(), 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let now = t0.elapsed().as_nanos() as u64;
        let mut sh = status.lock().unwrap_or_else(|e| e.into_inner());
        let mut up = Vec::with_capacity(socks.len());
        for (k, sock) in socks.iter().enumerate() {
            let m = &mut sh.members[k];
            if let Err(e) = step(m, sock, lag.members[k].mac, now) {
                sh.fault = Some(format!("member {:?}: {e}", lag.members[k].port));
            }
            up.push(sh.members[k].distributing);
        }
        publish(live, &up, lag.min_links);
        if rate.0.elapsed() >= Duration::from_secs(1) {
            let (f, b) = (0..live.members())
                .map(|k| live.sent(k))
                .fold((0, 0), |a, s| (a.0 + s.0, a.1 + s.1));
            let dt = rate.0.elapsed().as_secs_f64();
            sh.rates = ((f - rate.1) as f64 / dt, (b - rate.2) as f64 / dt);
            rate = (Instant::now(), f, b);
        }
        drop(sh);
        std::thread::sleep(TICK);
    }
    goodbye(lag, socks, live, status, t0.elapsed().as_nanos() as u64);
}

/// One member's tick: its link, what came in, what its machines send, whether it distributes.
fn step(m: &mut MemberState, sock: &GroupSocket, mac: [u8; 6], now: u64) -> Result<(), gapless_io::IoError> {
    let link = sock.link_up();
    let Some(l) = m.lacp.as_mut() else {
        m.link_up = link;
        m.distributing = link && m.enabled;
        return Ok(());
    };
    if link != m.link_up {
        l.set_link(link, now);
        m.link_up = link;
    }
    l.set_enabled(m.enabled, now);
    while let Some(f) = sock.recv(Duration::ZERO) {
        l.on_frame(now, &f);
    }
    m.distributing = l.distributing();
    match l.on_tick(now) {
        Some(p) if link => sock.send(&p.encode(mac)),
        _ => Ok(()),
    }
}

/// Which members carry frames: those distributing, when there are `min_links` of them.
fn publish(live: &LagLive, up: &[bool], min_links: usize) {
    let enough = up.iter().filter(|u| **u).count() >= min_links.max(1);
    for (k, u) in up.iter().enumerate() {
        live.set(k, *u && enough);
    }
}

/// The thread's end: no member carries frames, and each LACP member still up says once more,
/// out of sync, that it is out of the aggregate.
fn goodbye(lag: &Lag, socks: &[GroupSocket], live: &LagLive, status: &Mutex<LagStatus>, now: u64) {
    publish(live, &vec![false; socks.len()], lag.min_links);
    let mut sh = status.lock().unwrap_or_else(|e| e.into_inner());
    for (k, sock) in socks.iter().enumerate() {
        let m = &mut sh.members[k];
        m.distributing = false;
        let Some(l) = m.lacp.as_mut().filter(|_| m.link_up && m.enabled) else {
            continue;
        };
        l.set_admin(false);
        if let Some(p) = l.on_tick(now) {
            let _ = sock.send(&p.encode(lag.members[k].mac));
        }
    }
}

fn mac_str(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The LAGs named (all when none are), or a 400 naming one the config does not have.
fn named(s: &crate::Shared, names: &[String]) -> Result<Vec<Arc<LagDriver>>, OtgError> {
    let all = super::otg(s).lags.clone();
    let known: Vec<String> = all.iter().map(|d| d.lag.name.clone()).collect();
    super::routing::check_names(names, &known, "lag_names", "LAG")?;
    Ok(all
        .into_iter()
        .filter(|d| names.is_empty() || names.contains(&d.lag.name))
        .collect())
}

/// `lag_metrics` of the LAGs named: `rx` gives each LAG's received frames, bytes and rate
/// (its flows' on the LAG).
pub fn metrics(s: &crate::Shared, names: &[String], rx: impl Fn(&str) -> (u64, u64, f64)) -> Result<Value, OtgError> {
    let mut warnings = Vec::new();
    let list: Vec<Value> = named(s, names)?
        .iter()
        .map(|d| {
            let sh = d.status();
            if let Some(f) = &sh.fault {
                warnings.push(format!("LAG {:?}: {f}", d.lag.name));
            }
            let up = sh.members.iter().filter(|m| m.distributing).count();
            let (frames, bytes) = (0..d.live.members())
                .map(|k| d.live.sent(k))
                .fold((0, 0), |a, s| (a.0 + s.0, a.1 + s.1));
            let (frames_rx, bytes_rx, rx_rate) = rx(&d.lag.name);
            json!({
                "name": d.lag.name,
                "oper_status": if up >= d.lag.min_links.max(1) { "up" } else { "down" },
                "member_ports_up": up,
                "frames_tx": frames, "bytes_tx": bytes, "frames_tx_rate": sh.rates.0, "bytes_tx_rate": sh.rates.1,
                "frames_rx": frames_rx, "bytes_rx": bytes_rx, "frames_rx_rate": rx_rate,
            })
        })
        .collect();
    Ok(json!({ "choice": "lag_metrics", "lag_metrics": list, "warnings": warnings }))
}

/// `lacp_metrics` of the LACP members of the LAGs named, of the member ports named.
pub fn lacp_metrics(s: &crate::Shared, names: &[String], ports: &[String]) -> Result<Value, OtgError> {
    let drivers = named(s, names)?;
    let members: Vec<String> = drivers
        .iter()
        .flat_map(|d| d.lag.members.iter().map(|m| m.port.clone()))
        .collect();
    super::routing::check_names(ports, &members, "lag_member_port_names", "LAG member port")?;
    let mut list = Vec::new();
    for d in &drivers {
        let sh = d.status();
        for (k, m) in sh.members.iter().enumerate() {
            let port = &d.lag.members[k].port;
            let Some(l) = m.lacp.as_ref().filter(|_| ports.is_empty() || ports.contains(port)) else {
                continue;
            };
            list.push(lacp_metric(&d.lag, k, l));
        }
    }
    Ok(json!({ "choice": "lacp_metrics", "lacp_metrics": list, "warnings": [] }))
}

/// One member's `lacp_metrics` entry: its actor state bits, and its partner as heard.
fn lacp_metric(lag: &Lag, k: usize, l: &Member) -> Value {
    use gapless_otg::lag::lacp::pdu::state;
    let st = l.actor_state();
    let bit = |b: u8| st & b != 0;
    let cfg = lag.lacp(k).expect("an LACP member");
    let p = l.partner().unwrap_or_default();
    json!({
        "lag_name": lag.name,
        "lag_member_port_name": lag.members[k].port,
        "lacp_packets_rx": l.counters.lacpdus_rx,
        "lacp_packets_tx": l.counters.lacpdus_tx,
        "lacp_rx_errors": l.counters.lacpdus_rx_errors,
        "activity": if bit(state::ACTIVITY) { "active" } else { "passive" },
        "timeout": if bit(state::TIMEOUT) { "short" } else { "long" },
        "synchronization": if bit(state::SYNCHRONIZATION) { "in_sync" } else { "out_sync" },
        "aggregatable": bit(state::AGGREGATION),
        "collecting": bit(state::COLLECTING),
        "distributing": bit(state::DISTRIBUTING),
        "system_id": mac_str(cfg.actor.system),
        "oper_key": cfg.actor.key,
        "partner_id": mac_str(p.system),
        "partner_key": p.key,
        "port_num": cfg.actor.port,
        "partner_port_num": p.port,
    })
}

/// `protocol.lacp` on the members named (their ports; all when none are): a name that is no
/// LACP LAG's member is a 400.
pub fn control(s: &crate::Shared, admin: bool, up: bool, ports: &[String]) -> Result<Value, OtgError> {
    let drivers = super::otg(s).lags.clone();
    let members: Vec<String> = drivers
        .iter()
        .filter(|d| d.lag.lacp(0).is_some())
        .flat_map(|d| d.lag.members.iter().map(|m| m.port.clone()))
        .collect();
    let at = if admin { "admin" } else { "member_ports" };
    super::routing::check_names(
        ports,
        &members,
        &format!("protocol.lacp.{at}.lag_member_names"),
        "LACP LAG member port",
    )?;
    for d in drivers.iter().filter(|d| d.lag.lacp(0).is_some()) {
        d.control(admin, up, ports);
    }
    Ok(gapless_otg::runs::requests::ok(Vec::new()))
}
