//! The config's OSPFv2 routers: per device, FRR's zebra and ospfd in the namespace of the
//! device Ethernet its interface is on, with a stub interface per route range
//! (`gapless_otg::ospf::stubs`, made by `gapless_io::frr::stub_interface`); started and
//! stopped as IS-IS routers are (`daemons::DaemonSet`). ospfd's JSON is read by
//! `gapless_otg::ospf::frr_json`.

use std::sync::Arc;

use gapless_io::hosts::Host;
use gapless_otg::config::Plan;
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
        let what = format!("OSPFv2 router {:?}", r.name);
        let o = Arc::new(Ospfd {
            router: r.clone(),
            netns: netns.clone(),
            set: DaemonSet::new(what, netns, configs),
        });
        for s in gapless_otg::ospf::stubs(r) {
            gapless_io::frr::stub_interface(&o.netns, &s.name, &s.addrs).map_err(|e| {
                OtgError::invalid(format!(
                    "devices: OSPFv2 router {:?}: its ranges' interface: {e}",
                    r.name
                ))
            })?;
        }
        o.set.start()?;
        out.push(o);
    }
    Ok(out)
}

impl Ospfd {
    pub fn start(&self) -> Result<(), OtgError> {
        self.set.start()
    }

    pub fn stop(&self) {
        self.set.stop();
    }

    /// The router's `ospfv2` metric; its sessions down, with a warning, when it cannot answer.
    fn metric(&self, warnings: &mut Vec<String>) -> Value {
        let cmds = ["show ip ospf neighbor json", "show ip ospf interface traffic json"].map(String::from);
        let flaps = frr_json::flaps(&self.set.log("ospfd"));
        match self.set.vty("ospfd", &cmds) {
            Ok(out) => {
                let parse = |s: &str| serde_json::from_str(s).unwrap_or(Value::Null);
                frr_json::metric(&self.router.name, &parse(&out[0]), &parse(&out[1]), flaps)
            }
            Err(e) => {
                warnings.push(e);
                frr_json::metric(&self.router.name, &Value::Null, &Value::Null, flaps)
            }
        }
    }

    /// The router's `ospfv2_lsas` state: the LSAs learned from other routers.
    fn lsas(&self) -> Value {
        let kinds = ["router", "network", "summary", "asbr-summary", "external"];
        let cmds: Vec<String> = kinds
            .iter()
            .map(|k| format!("show ip ospf database {k} json"))
            .collect();
        let out = self.set.vty("ospfd", &cmds).unwrap_or_default();
        let v: Vec<Value> = (0..kinds.len())
            .map(|i| {
                out.get(i)
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let own = self.router.router_id.to_string();
        frr_json::lsas(&self.router.name, &own, [&v[0], &v[1], &v[2], &v[3], &v[4]])
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

/// `ospfv2_metrics` of the routers named (all when none are).
pub fn metrics(s: &Shared, names: &[String]) -> Result<Value, OtgError> {
    let routers = otg(s).ospf.clone();
    check_names(names, &names_of(&routers), "ospfv2.router_names", "OSPFv2 router")?;
    let mut warnings = Vec::new();
    let list: Vec<Value> = chosen(&routers, names).map(|r| r.metric(&mut warnings)).collect();
    Ok(json!({ "choice": "ospfv2_metrics", "ospfv2_metrics": list, "warnings": warnings }))
}

/// `ospfv2_lsas` states of the routers named (all when none are).
pub fn lsa_states(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    let routers = otg(s).ospf.clone();
    let names = strings(&req["router_names"]);
    check_names(&names, &names_of(&routers), "ospfv2_lsas.router_names", "OSPFv2 router")?;
    let list: Vec<Value> = chosen(&routers, &names).map(|r| r.lsas()).collect();
    Ok(json!({ "choice": "ospfv2_lsas", "ospfv2_lsas": list }))
}
