//! The config's OSPFv2 routers: per device, FRR's zebra and ospfd in the namespace of the
//! device Ethernet its interface is on, with a stub interface per route range
//! (`gapless_otg::ospf::stubs`, made by `gapless_io::devices::frr::stub_interface`); started and
//! stopped as IS-IS routers are (`daemons::DaemonSet`). Every vty command sent to ospfd
//! or ospf6d, and every reply read, is `gapless_otg::ospf::vty`'s.

use std::sync::{Arc, Mutex};

use gapless_io::devices::hosts::Host;
use gapless_otg::config::Plan;
use gapless_otg::frr::vty::Replies;
use gapless_otg::ospf::wire::{lsa_counters, Tally};
use gapless_otg::ospf::{frr_json, vty, Router};
use gapless_otg::OtgError;
use serde_json::{json, Value};

use super::daemons::DaemonSet;
use super::otg;
use super::routing::{check_names, strings};
use crate::Shared;

/// A device's OSPFv2 router and its daemons.
pub struct Ospfd {
    pub router: Router,
    netns: String,
    set: DaemonSet,
    /// The LSAs it sent and received, counted on the wire ([`gapless_otg::ospf::wire::Tally`]).
    tally: Arc<Mutex<(Tally, Tally)>>,
    tap: Mutex<Option<gapless_io::devices::frr::wire::OspfTap>>,
}

/// The daemons of every OSPFv2 router of the plan, each in its Ethernet's host namespace.
pub fn up(plan: &Plan, hosts: &[(String, Arc<Host>)]) -> Result<Vec<Arc<Ospfd>>, OtgError> {
    let mut out = Vec::new();
    for r in &plan.ospf {
        let host = hosts.iter().find(|h| h.0 == r.eth).ok_or_else(|| {
            OtgError::internal(format!(
                "OSPFv2 router {:?}: its Ethernet {:?} has no host",
                r.name, r.eth
            ))
        })?;
        let configs = gapless_otg::ospf::frr_configs(r, host.1.ifname());
        let netns = host.1.netns().to_string();
        let what = format!("OSPFv{} router {:?}", if r.v6 { 3 } else { 2 }, r.name);
        let tally = Arc::new(Mutex::new((Tally::default(), Tally::default())));
        let counts = tally.clone();
        let tap = gapless_io::devices::frr::wire::OspfTap::start(&netns, host.1.ifname(), move |f, out| {
            let mut t = counts.lock().unwrap_or_else(|e| e.into_inner());
            if out { &mut t.0 } else { &mut t.1 }.count(f);
        })
        .map_err(|e| OtgError::internal(format!("{what}: its LSA counter: {e}")))?;
        let o = Arc::new(Ospfd {
            router: r.clone(),
            netns: netns.clone(),
            set: DaemonSet::new(what, netns, configs),
            tally,
            tap: Mutex::new(Some(tap)),
        });
        for s in gapless_otg::ospf::stubs(r) {
            gapless_io::devices::frr::stub_interface(&o.netns, &s.name, &s.addrs).map_err(|e| {
                OtgError::invalid(format!(
                    "devices: OSPFv2 router {:?}: its ranges' interface: {e}",
                    r.name
                ))
            })?;
        }
        out.push(o);
    }
    super::chunks::start_all(&out, |o| o.start())?;
    Ok(out)
}

impl Ospfd {
    /// Starts the daemons unless both run. Started, the router is as its config says: every
    /// range withdrawn by its stub interface set down is up again (OSPFv3's area ranges come
    /// back with the configuration itself).
    pub fn start(&self) -> Result<(), OtgError> {
        if self.set.start()? {
            for k in (0..self.router.ranges.len()).filter(|k| self.area_of(*k).is_none()) {
                self.set_stub(k, true)
                    .map_err(|e| OtgError::internal(format!("OSPF router {:?}: {e}", self.router.name)))?;
            }
        }
        Ok(())
    }

    /// The area of range `k` when it is withdrawn over the vty (OSPFv3's in an area); none
    /// when by its stub interface's link.
    fn area_of(&self, k: usize) -> Option<std::net::Ipv4Addr> {
        gapless_otg::ospf::range_area(&self.router, k).filter(|_| self.router.v6)
    }

    /// Sets range `k`'s stub interface up (or down).
    fn set_stub(&self, k: usize, up: bool) -> Result<(), String> {
        let stub = gapless_otg::ospf::stub_name(&self.router, k);
        gapless_io::devices::frr::set_stub(&self.netns, &stub, up).map_err(|e| format!("{stub}: {e}"))
    }

    pub fn stop(&self) {
        self.set.stop();
    }

    /// Stops its LSA counter (the router's state goes with it).
    pub fn remove(&self) {
        self.stop();
        self.tap.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    pub fn range_names(&self) -> Vec<String> {
        self.router.ranges.iter().map(|x| x.name.clone()).collect()
    }

    /// Withdraws (or advertises again) the ranges named (all when none are), so that the
    /// daemon flushes (or originates again) the LSAs that carry them; returns the names of
    /// the ranges it acted on. OSPFv2's, and external ranges: the stub interface set down (or
    /// up). OSPFv3's in an area: the stub taken out of its area (or put back) over ospf6d's
    /// vty, because FRR 8.4's ospf6d sometimes sent no LS Update at all for a stub that went
    /// down (4 runs in 10, DESIGN-NOTES 76).
    pub fn routes(&self, advertise: bool, names: &[String]) -> Result<Vec<String>, OtgError> {
        let mut acted = Vec::new();
        for (k, x) in self.router.ranges.iter().enumerate() {
            if !(names.is_empty() || names.contains(&x.name)) {
                continue;
            }
            let failed =
                |e: String| OtgError::internal(format!("OSPF router {:?}: range {:?}: {e}", self.router.name, x.name));
            match self.area_of(k) {
                Some(area) => {
                    let cmds = vty::stub_area(&self.router, k, area, advertise);
                    self.set.vty(vty::daemon(true), &cmds).map_err(failed)?;
                }
                None => self.set_stub(k, advertise).map_err(failed)?,
            }
            acted.push(x.name.clone());
        }
        Ok(acted)
    }

    /// The router's `ospfv2`/`ospfv3` metric; its sessions down, with a warning, when it
    /// cannot answer.
    fn metric(&self, warnings: &mut Vec<String>) -> Value {
        let v6 = self.router.v6;
        let flaps = frr_json::flaps(&self.set.log(vty::daemon(v6)));
        let replies = self.set.ask(&vty::metric(v6)).unwrap_or_else(|e| {
            warnings.push(e);
            Replies::none()
        });
        let mut m = vty::metric_of(&self.router, &replies, flaps);
        let (sent, received) = *self.tally.lock().unwrap_or_else(|e| e.into_inner());
        for (k, n) in lsa_counters(&sent, &received, v6) {
            m[k] = json!(n);
        }
        m
    }

    /// The router's `ospfv2_lsas`/`ospfv3_lsas` state: the LSAs learned from other routers.
    fn lsas(&self) -> Value {
        let replies = self.set.ask(&vty::lsas(self.router.v6)).unwrap_or_default();
        vty::lsas_of(&self.router, &replies)
    }
}

/// The OSPFv3 (`v6`) or OSPFv2 routers of the config, and the key and word that name them.
fn version(s: &Shared, v6: bool) -> (Vec<Arc<Ospfd>>, &'static str, &'static str) {
    let all = otg(s).ospf.clone();
    let mine = all.into_iter().filter(|r| r.router.v6 == v6).collect();
    if v6 {
        (mine, "ospfv3", "OSPFv3 router")
    } else {
        (mine, "ospfv2", "OSPFv2 router")
    }
}

fn chosen<'a>(routers: &'a [Arc<Ospfd>], names: &'a [String]) -> impl Iterator<Item = &'a Arc<Ospfd>> + 'a {
    routers
        .iter()
        .filter(move |r| names.is_empty() || names.contains(&r.router.name))
}

fn names_of(routers: &[Arc<Ospfd>]) -> Vec<String> {
    routers.iter().map(|r| r.router.name.clone()).collect()
}

/// `ospfv2_metrics` or `ospfv3_metrics` of the routers named (all when none are).
pub fn metrics(s: &Shared, v6: bool, names: &[String]) -> Result<Value, OtgError> {
    let (routers, key, what) = version(s, v6);
    check_names(names, &names_of(&routers), &format!("{key}.router_names"), what)?;
    let mut warnings = Vec::new();
    let list: Vec<Value> = chosen(&routers, names).map(|r| r.metric(&mut warnings)).collect();
    let choice = format!("{key}_metrics");
    Ok(json!({ "choice": choice, choice.clone(): list, "warnings": warnings }))
}

/// `ospfv2_lsas` or `ospfv3_lsas` states of the routers named (all when none are).
pub fn lsa_states(s: &Shared, v6: bool, req: &Value) -> Result<Value, OtgError> {
    let (routers, key, what) = version(s, v6);
    let names = strings(&req["router_names"]);
    check_names(&names, &names_of(&routers), &format!("{key}_lsas.router_names"), what)?;
    let list: Vec<Value> = chosen(&routers, &names).map(|r| r.lsas()).collect();
    let choice = format!("{key}_lsas");
    Ok(json!({ "choice": choice, choice.clone(): list }))
}
