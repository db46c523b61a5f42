//! The config's OSPFv2 routers: per device, FRR's zebra and ospfd in the namespace of the
//! device Ethernet its interface is on, with a stub interface per route range
//! (`gapless_otg::ospf::stubs`, made by `gapless_io::frr::stub_interface`); started and
//! stopped as IS-IS routers are (`daemons::DaemonSet`). ospfd's JSON is read by
//! `gapless_otg::ospf::frr_json`.

use std::sync::{Arc, Mutex};

use gapless_io::hosts::Host;
use gapless_otg::config::Plan;
use gapless_otg::ospf::wire::{lsa_counters, Tally};
use gapless_otg::ospf::{frr_json, Router};
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
    tap: Mutex<Option<gapless_io::frr::wire::OspfTap>>,
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
        let tap = gapless_io::frr::wire::OspfTap::start(&netns, host.1.ifname(), move |f, out| {
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
            gapless_io::frr::stub_interface(&o.netns, &s.name, &s.addrs).map_err(|e| {
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
            for (k, _) in self.router.ranges.iter().enumerate() {
                if gapless_otg::ospf::range_area(&self.router, k)
                    .filter(|_| self.router.v6)
                    .is_none()
                {
                    let stub = gapless_otg::ospf::stub_name(&self.router, k);
                    gapless_io::frr::set_stub(&self.netns, &stub, true)
                        .map_err(|e| OtgError::internal(format!("OSPF router {:?}: {stub}: {e}", self.router.name)))?;
                }
            }
        }
        Ok(())
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
            let stub = gapless_otg::ospf::stub_name(&self.router, k);
            match gapless_otg::ospf::range_area(&self.router, k).filter(|_| self.router.v6) {
                Some(area) => {
                    let no = if advertise { "" } else { "no " };
                    let cmds = [
                        "configure terminal".to_string(),
                        format!("interface {stub}"),
                        format!("{no}ipv6 ospf6 area {area}"),
                        "end".to_string(),
                    ];
                    self.set.vty("ospf6d", &cmds).map_err(failed)?;
                }
                None => gapless_io::frr::set_stub(&self.netns, &stub, advertise).map_err(|e| failed(e.to_string()))?,
            }
            acted.push(x.name.clone());
        }
        Ok(acted)
    }

    /// The daemon, and its command prefix: ospfd's `show ip ospf`, ospf6d's `show ipv6 ospf6`.
    fn daemon(&self) -> (&'static str, &'static str) {
        if self.router.v6 {
            ("ospf6d", "show ipv6 ospf6")
        } else {
            ("ospfd", "show ip ospf")
        }
    }

    /// The router's `ospfv2`/`ospfv3` metric; its sessions down, with a warning, when it
    /// cannot answer.
    fn metric(&self, warnings: &mut Vec<String>) -> Value {
        let (kind, show) = self.daemon();
        let cmds = [
            format!("{show} neighbor json"),
            format!("{show} interface traffic json"),
        ];
        let flaps = frr_json::flaps(&self.set.log(kind));
        let out = self.set.vty(kind, &cmds).unwrap_or_else(|e| {
            warnings.push(e);
            Vec::new()
        });
        let parse = |i: usize| {
            out.get(i)
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Value::Null)
        };
        let read = if self.router.v6 {
            frr_json::metric_v3
        } else {
            frr_json::metric
        };
        let mut m = read(&self.router.name, &parse(0), &parse(1), flaps);
        let (sent, received) = *self.tally.lock().unwrap_or_else(|e| e.into_inner());
        for (k, n) in lsa_counters(&sent, &received, self.router.v6) {
            m[k] = json!(n);
        }
        m
    }

    /// The router's `ospfv2_lsas`/`ospfv3_lsas` state: the LSAs learned from other routers.
    fn lsas(&self) -> Value {
        let (kind, show) = self.daemon();
        let (kinds, tail): (&[&str], &str) = if self.router.v6 {
            (
                &[
                    "router",
                    "network",
                    "inter-prefix",
                    "inter-router",
                    "as-external",
                    "link",
                    "intra-prefix",
                ],
                " detail json",
            )
        } else {
            (&["router", "network", "summary", "asbr-summary", "external"], " json")
        };
        let cmds: Vec<String> = kinds.iter().map(|k| format!("{show} database {k}{tail}")).collect();
        let out = self.set.vty(kind, &cmds).unwrap_or_default();
        let v: Vec<Value> = (0..kinds.len())
            .map(|i| {
                out.get(i)
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let (name, own) = (&self.router.name, self.router.router_id.to_string());
        if self.router.v6 {
            return frr_json::lsas_v3(name, &own, [&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]]);
        }
        frr_json::lsas(name, &own, [&v[0], &v[1], &v[2], &v[3], &v[4]])
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
