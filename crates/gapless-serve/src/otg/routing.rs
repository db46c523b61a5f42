//! The config's BGP routers: one FRR bgpd per device (with a zebra when it has an IPv6
//! peer), a `DaemonSet` as IS-IS and OSPF routers are, in the namespace of the device
//! Ethernet its sessions run from (`gapless_io::devices::frr`), started when the config is set and
//! on `protocol.all start`, stopped on `protocol.all stop`, a new config and the server's
//! end; its configuration is `gapless_otg::bgp::frr_config`, and every vty command it sends
//! and reply it reads is `gapless_otg::bgp::vty`'s. A daemon that exits shows its sessions down, and the
//! metrics say which daemon exited and why (its log's last lines).

use std::sync::Arc;

use gapless_io::devices::hosts::Host;
use gapless_otg::bgp::frr_json::PrefixFilter;
use gapless_otg::bgp::{vty, Peer, Router};
use gapless_otg::config::Plan;
use gapless_otg::frr::vty::Replies;
use gapless_otg::metrics::convergence::Recorded;
use gapless_otg::{runs::requests, OtgError};
use serde_json::Value;

use super::daemons::DaemonSet;
use super::otg;
use crate::Shared;

/// How long a route event waits for its UPDATE on the wire (FRR sends one about 50 ms after
/// the command).
const UPDATE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// How long an OSPF range's LSAs may take to leave: FRR's area border router originates or
/// flushes summaries at its next ABR task, 5 s after the change (OSPF_ABR_TASK_DELAY).
const OSPF_WITHIN: std::time::Duration = std::time::Duration::from_secs(8);

/// A device's BGP router and its daemons (bgpd, and zebra with an IPv6 peer:
/// `gapless_otg::bgp::frr_configs`).
pub struct Bgpd {
    pub router: Router,
    set: DaemonSet,
}

/// A bgpd for every BGP router of the plan, each in its Ethernet's host namespace.
pub fn up(plan: &Plan, hosts: &[(String, Arc<Host>)]) -> Result<Vec<Arc<Bgpd>>, OtgError> {
    let mut out = Vec::new();
    for r in &plan.routers {
        let host = hosts.iter().find(|h| h.0 == r.eth).ok_or_else(|| {
            OtgError::internal(format!("device {:?}: its Ethernet {:?} has no host", r.device, r.eth))
        })?;
        let what = format!("device {:?}", r.device);
        let configs = gapless_otg::bgp::frr_configs(r);
        out.push(Arc::new(Bgpd {
            router: r.clone(),
            set: DaemonSet::new(what, host.1.netns().to_string(), configs),
        }));
    }
    super::chunks::start_all(&out, |b| b.start())?;
    Ok(out)
}

impl Bgpd {
    /// Starts the daemons unless they run.
    pub fn start(&self) -> Result<(), OtgError> {
        self.set.start().map(drop)
    }

    /// Stops the daemons (its sessions go down).
    pub fn stop(&self) {
        self.set.stop();
    }

    /// The metrics of its peers on IPv6 (`v6`) or IPv4 interfaces named (all when none
    /// are), and a warning when the daemon cannot answer.
    pub fn metrics(&self, v6: bool, names: &[String], warnings: &mut Vec<String>) -> Vec<Value> {
        let peers: Vec<&Peer> = self.peers(names).filter(|p| p.local.is_ipv6() == v6).collect();
        if peers.is_empty() {
            return Vec::new();
        }
        let neighbors = (self.set.ask(&vty::neighbors()))
            .unwrap_or_else(|e| {
                warnings.push(e);
                Replies::none()
            })
            .json("neighbors");
        peers
            .iter()
            .map(|p| {
                let got = if neighbors.is_object() {
                    self.received(p)
                } else {
                    Replies::none()
                };
                vty::metric(p, &neighbors, &got)
            })
            .collect()
    }

    /// The routes received from `p` in each family.
    fn received(&self, p: &Peer) -> Replies {
        self.set.ask(&vty::received(p)).unwrap_or_default()
    }

    /// `bgp_prefixes[]` of its peers named (all when none are).
    pub fn prefixes(&self, names: &[String], f: &PrefixFilter) -> Vec<Value> {
        self.peers(names)
            .map(|p| vty::prefixes(p, &self.received(p), f))
            .collect()
    }

    fn peers<'a>(&'a self, names: &'a [String]) -> impl Iterator<Item = &'a Peer> + 'a {
        self.router
            .peers
            .iter()
            .filter(move |p| names.is_empty() || names.contains(&p.name))
    }

    /// Withdraws (or advertises again) the ranges named (all when none are); returns the
    /// names of the ranges it acted on.
    pub fn routes(&self, advertise: bool, names: &[String]) -> Result<Vec<String>, OtgError> {
        let asn = self.router.peers.first().map_or(1, |p| p.asn);
        let mut acted = Vec::new();
        for (i, p) in self.router.peers.iter().enumerate() {
            for (j, x) in p.routes.iter().enumerate() {
                if names.is_empty() || names.contains(&x.name) {
                    let cmds = vty::network(asn, i, j, x, advertise);
                    self.set.vty(vty::DAEMON, &cmds).map_err(OtgError::invalid)?;
                    acted.push(x.name.clone());
                }
            }
        }
        Ok(acted)
    }

    /// Sets the peers named (all when none are) administratively up or down.
    pub fn set_peers(&self, up: bool, names: &[String]) -> Result<usize, OtgError> {
        let asn = self.router.peers.first().map_or(1, |p| p.asn);
        let addresses: Vec<&std::net::IpAddr> = self.peers(names).map(|p| &p.address).collect();
        if !addresses.is_empty() {
            let cmds = vty::shutdown(asn, addresses.iter().copied(), up);
            self.set.vty(vty::DAEMON, &cmds).map_err(OtgError::invalid)?;
        }
        Ok(addresses.len())
    }

    /// The names of its peers, and of its ranges.
    pub fn names(&self) -> (Vec<String>, Vec<String>) {
        let peers = self.router.peers.iter().map(|p| p.name.clone()).collect();
        let ranges = self
            .router
            .peers
            .iter()
            .flat_map(|p| p.routes.iter().map(|x| x.name.clone()))
            .collect();
        (peers, ranges)
    }
}

impl Drop for Bgpd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A request's list of names (none when it has none).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Every name in `names` is one of `known`, or the error names the first that is not.
pub(crate) fn check_names(names: &[String], known: &[String], at: &str, what: &str) -> Result<(), OtgError> {
    match names.iter().find(|n| !known.contains(n)) {
        Some(n) => Err(OtgError::invalid(format!("{at}: no {what} named {n:?}"))),
        None => Ok(()),
    }
}

/// `protocol.route` withdraw or advertise of the BGP, IS-IS and OSPF ranges named (all when
/// none are). Each is recorded for the convergence metrics (`route_withdraw`,
/// `route_advertise`) at the time its UPDATE (BGP), LSP (IS-IS) or LS Update (OSPF) left on
/// the device's interface, as the kernel stamped it.
pub fn route_control(s: &Shared, advertise: bool, names: &[String]) -> Result<Value, OtgError> {
    let (routers, isis, ospf, hosts) = {
        let st = otg(s);
        (st.routers.clone(), st.isis.clone(), st.ospf.clone(), st.hosts.clone())
    };
    let mut known: Vec<String> = routers.iter().flat_map(|r| r.names().1).collect();
    known.extend(isis.iter().flat_map(|r| r.range_names()));
    known.extend(ospf.iter().flat_map(|r| r.range_names()));
    check_names(names, &known, "protocol.route.names", "BGP, IS-IS or OSPF route range")?;
    let kind = if advertise { "route_advertise" } else { "route_withdraw" };
    let watch = |eth: &str| {
        let host = hosts.iter().find(|h| h.0 == eth).map(|h| h.1.clone());
        host.and_then(|h| gapless_io::devices::frr::wire::SentWatch::open(h.netns(), h.ifname()).ok())
    };
    let mut warnings = Vec::new();
    let mut made = Vec::new();
    // Every change made is recorded, even when a later one fails (then named with them).
    let all = |made: &mut Vec<(Vec<String>, u64)>, warnings: &mut Vec<String>| -> Result<(), OtgError> {
        for r in &routers {
            let mine: Vec<&gapless_otg::bgp::Peer> = r
                .router
                .peers
                .iter()
                .filter(|p| p.routes.iter().any(|x| names.is_empty() || names.contains(&x.name)))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let what = format!("device {:?}: no BGP UPDATE", r.router.device);
            let change = || r.routes(advertise, names);
            let seen = |w: &gapless_io::devices::frr::wire::SentWatch| {
                mine.iter()
                    .find_map(|p| w.first_sent(|f| gapless_otg::bgp::wire::is_update_to(f, p.address), UPDATE_WITHIN))
            };
            made.push(on_wire(watch(&r.router.eth), change, seen, &what, warnings)?);
        }
        let mine = |ranges: Vec<String>| ranges.iter().any(|n| names.is_empty() || names.contains(n));
        for r in isis.iter().filter(|r| mine(r.range_names())) {
            let what = format!("IS-IS router {:?}: no LSP", r.router.name);
            let change = || r.routes(advertise, names);
            made.push(on_wire(
                watch(&r.router.eth),
                change,
                |w| w.first_sent(gapless_otg::isis::wire::is_lsp, UPDATE_WITHIN),
                &what,
                warnings,
            )?);
        }
        for r in ospf.iter().filter(|r| mine(r.range_names())) {
            let what = format!("OSPF router {:?}: no LS Update with the range's LSAs", r.router.name);
            let change = || r.routes(advertise, names);
            let ranges: Vec<&gapless_otg::ospf::Range> = (r.router.ranges.iter())
                .filter(|x| names.is_empty() || names.contains(&x.name))
                .collect();
            let carries = |f: &[u8]| gapless_otg::ospf::wire::lsu_carries(f, &r.router, &ranges);
            let seen = |w: &gapless_io::devices::frr::wire::SentWatch| w.first_sent(carries, OSPF_WITHIN);
            made.push(on_wire(watch(&r.router.eth), change, seen, &what, warnings)?);
        }
        Ok(())
    };
    let result = all(&mut made, &mut warnings);
    let done: Vec<String> = made.iter().flat_map(|m| m.0.clone()).collect();
    let mut st = otg(s);
    for (names, at) in made {
        st.made.extend(names.into_iter().map(|name| Recorded {
            kind: kind.into(),
            source: name,
            begin_ns: at,
            end_ns: at,
        }));
    }
    drop(st);
    result.map_err(|mut e| {
        let what = if advertise { "advertised" } else { "withdrawn" };
        let done = if done.is_empty() {
            "none".to_string()
        } else {
            done.join(", ")
        };
        for m in e.errors.iter_mut().take(1) {
            m.push_str(&format!(" (ranges {what} before it, their events recorded: {done})"));
        }
        e
    })?;
    Ok(requests::ok(warnings))
}

/// Makes `change` with `w` watching the device's interface: the ranges it acted on, and the
/// stamp of the first message `seen` takes (else the time of the command, with a warning).
fn on_wire(
    w: Option<gapless_io::devices::frr::wire::SentWatch>,
    change: impl FnOnce() -> Result<Vec<String>, OtgError>,
    seen: impl FnOnce(&gapless_io::devices::frr::wire::SentWatch) -> Option<u64>,
    what: &str,
    warnings: &mut Vec<String>,
) -> Result<(Vec<String>, u64), OtgError> {
    let acted = change()?;
    let asked = gapless_engine::clock::RunClock::realtime_now_ns();
    let wire = w.as_ref().and_then(seen);
    Ok(stamped(acted, wire.ok_or(asked), what, warnings))
}

/// The ranges acted on, with the wire's stamp of the message that carried the change; or
/// (Err), with a warning, the time the daemon took the command.
fn stamped(acted: Vec<String>, wire: Result<u64, u64>, what: &str, warnings: &mut Vec<String>) -> (Vec<String>, u64) {
    let at = wire.unwrap_or_else(|asked| {
        warnings.push(format!(
            "{what} was seen on its interface in time: its time is when the daemon took the command"
        ));
        asked
    });
    (acted, at)
}

/// `protocol.bgp.peers` up or down.
pub fn peer_control(s: &Shared, up: bool, names: &[String]) -> Result<Value, OtgError> {
    let routers = otg(s).routers.clone();
    let known: Vec<String> = routers.iter().flat_map(|r| r.names().0).collect();
    check_names(names, &known, "protocol.bgp.peers.peer_names", "BGP peer")?;
    for r in &routers {
        r.set_peers(up, names)?;
    }
    Ok(requests::ok(Vec::new()))
}

/// `bgpv4_metrics` / `bgpv6_metrics` of the peers named (all when none are).
pub fn metrics(s: &Shared, v6: bool, names: &[String]) -> Result<Value, OtgError> {
    let routers = otg(s).routers.clone();
    let known: Vec<String> = routers.iter().flat_map(|r| r.names().0).collect();
    let key = if v6 { "bgpv6" } else { "bgpv4" };
    check_names(names, &known, &format!("{key}.peer_names"), "BGP peer")?;
    let mut warnings = Vec::new();
    let list: Vec<Value> = routers
        .iter()
        .flat_map(|r| r.metrics(v6, names, &mut warnings))
        .collect();
    let choice = format!("{key}_metrics");
    Ok(serde_json::json!({ "choice": choice, choice.clone(): list, "warnings": warnings }))
}

/// `bgp_prefixes` states of the peers named (all when none are).
pub fn prefix_states(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    let routers = otg(s).routers.clone();
    let names = strings(&req["bgp_peer_names"]);
    let known: Vec<String> = routers.iter().flat_map(|r| r.names().0).collect();
    check_names(&names, &known, "bgp_prefixes.bgp_peer_names", "BGP peer")?;
    let f = PrefixFilter::of(req);
    let list: Vec<Value> = routers.iter().flat_map(|r| r.prefixes(&names, &f)).collect();
    Ok(serde_json::json!({ "choice": "bgp_prefixes", "bgp_prefixes": list }))
}
