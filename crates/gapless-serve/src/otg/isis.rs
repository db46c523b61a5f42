//! The config's IS-IS routers: per device, FRR's zebra and isisd in the namespace of the
//! device Ethernet its interfaces are on (`gapless_io::devices::frr`), sharing one directory and zebra
//! socket, with each route range as blackhole routes in that namespace's kernel table
//! (`gapless_otg::isis::kernel_routes`), which isisd redistributes; started when the config is set, on `protocol.all start` and on
//! `protocol.isis.routers` up, stopped on `protocol.all stop`, `protocol.isis.routers` down,
//! a new config and the server's end. Their configurations are
//! `gapless_otg::isis::frr_configs`; every vty command sent to isisd, and every reply read, is `gapless_otg::isis::vty`'s.
//! A daemon that exits shows the router's sessions down, and the metrics say which one.

use std::sync::Arc;

use gapless_io::devices::hosts::Host;
use gapless_otg::config::Plan;
use gapless_otg::frr::vty::Replies;
use gapless_otg::isis::{frr_text, vty, Router};
use gapless_otg::{runs::requests, OtgError};
use serde_json::{json, Value};

use super::daemons::DaemonSet;
use super::otg;
use super::routing::{check_names, strings};
use crate::Shared;

/// A device's IS-IS router and its daemons (zebra, isisd).
pub struct Isisd {
    pub router: Router,
    netns: String,
    set: DaemonSet,
}

/// The daemons of every IS-IS router of the plan, each in its Ethernet's host namespace.
pub fn up(plan: &Plan, hosts: &[(String, Arc<Host>)]) -> Result<Vec<Arc<Isisd>>, OtgError> {
    let mut out = Vec::new();
    for r in &plan.isis {
        let host = hosts.iter().find(|h| h.0 == r.eth).ok_or_else(|| {
            OtgError::internal(format!(
                "IS-IS router {:?}: its Ethernet {:?} has no host",
                r.name, r.eth
            ))
        })?;
        let configs = gapless_otg::isis::frr_configs(r, host.1.ifname()).to_vec();
        let what = format!("IS-IS router {:?}", r.name);
        let netns = host.1.netns().to_string();
        let i = Arc::new(Isisd {
            router: r.clone(),
            netns: netns.clone(),
            set: DaemonSet::new(what, netns, configs),
        });
        out.push(i);
    }
    // Each start puts the ranges' routes in its namespace's kernel table.
    super::chunks::start_all(&out, |i| i.start())?;
    Ok(out)
}

impl Isisd {
    /// Starts the daemons unless both run. Started, the router is as its config says: every
    /// range advertised again (its route put back in the kernel table), as BGP's and
    /// OSPF's are by their regenerated configurations.
    pub fn start(&self) -> Result<(), OtgError> {
        if self.set.start()? {
            self.routes(true, &[])?;
        }
        Ok(())
    }

    /// Stops the daemons (the router's adjacencies go down at its peers).
    pub fn stop(&self) {
        self.set.stop();
    }

    /// The adjacencies' downs per level that isisd logged since it started.
    fn downs(&self) -> [u64; 2] {
        frr_text::downs(&self.set.log(vty::DAEMON))
    }

    /// The names of its route ranges.
    pub fn range_names(&self) -> Vec<String> {
        self.router.ranges.iter().map(|x| x.name.clone()).collect()
    }

    /// Withdraws (or advertises again) the ranges named (all when none are): their
    /// blackhole routes deleted from (or put back in) the namespace's kernel table, which
    /// isisd redistributes; returns the names of the ranges it acted on.
    pub fn routes(&self, advertise: bool, names: &[String]) -> Result<Vec<String>, OtgError> {
        self.set_routes(names, advertise)
            .map_err(|e| OtgError::internal(format!("IS-IS router {:?}: its ranges' routes: {e}", self.router.name)))
    }

    fn set_routes(&self, names: &[String], add: bool) -> Result<Vec<String>, gapless_io::IoError> {
        let (lines, acted) = gapless_otg::isis::kernel_routes(&self.router, names, add);
        if !lines.is_empty() {
            gapless_io::kernel::nic::ip_batch(Some(&self.netns), &lines)?;
        }
        Ok(acted)
    }

    /// The router's `isis` metric; its sessions down, with a warning, when it cannot answer.
    pub fn metric(&self, warnings: &mut Vec<String>) -> Value {
        let replies = self.set.ask(&vty::metric()).unwrap_or_else(|e| {
            warnings.push(e);
            Replies::none()
        });
        vty::metric_of(&self.router, &replies, self.downs())
    }

    /// The router's `isis_lsps` state: the LSPs learned from its peers.
    pub fn lsps(&self, warnings: &mut Vec<String>) -> Value {
        let replies = self.set.ask(&vty::lsps()).unwrap_or_else(|e| {
            warnings.push(e);
            Replies::none()
        });
        vty::lsps_of(&self.router, &replies)
    }
}

fn names_of(routers: &[Arc<Isisd>]) -> Vec<String> {
    routers.iter().map(|r| r.router.name.clone()).collect()
}

fn chosen<'a>(routers: &'a [Arc<Isisd>], names: &'a [String]) -> impl Iterator<Item = &'a Arc<Isisd>> + 'a {
    routers
        .iter()
        .filter(move |r| names.is_empty() || names.contains(&r.router.name))
}

/// `protocol.isis.routers` up or down: the routers' daemons started or stopped.
pub fn router_control(s: &Shared, up: bool, names: &[String]) -> Result<Value, OtgError> {
    let routers = otg(s).isis.clone();
    check_names(
        names,
        &names_of(&routers),
        "protocol.isis.routers.router_names",
        "IS-IS router",
    )?;
    for r in chosen(&routers, names) {
        if up {
            r.start()?;
        } else {
            r.stop();
        }
    }
    Ok(requests::ok(Vec::new()))
}

/// `isis_metrics` of the routers named (all when none are).
pub fn metrics(s: &Shared, names: &[String]) -> Result<Value, OtgError> {
    let routers = otg(s).isis.clone();
    check_names(names, &names_of(&routers), "isis.router_names", "IS-IS router")?;
    let mut warnings = Vec::new();
    let list: Vec<Value> = chosen(&routers, names).map(|r| r.metric(&mut warnings)).collect();
    Ok(json!({ "choice": "isis_metrics", "isis_metrics": list, "warnings": warnings }))
}

/// `isis_lsps` states of the routers named (all when none are).
pub fn lsp_states(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    let routers = otg(s).isis.clone();
    let names = strings(&req["isis_router_names"]);
    check_names(
        &names,
        &names_of(&routers),
        "isis_lsps.isis_router_names",
        "IS-IS router",
    )?;
    // The states reply has no warnings: a router that cannot answer lists no LSPs.
    let list: Vec<Value> = chosen(&routers, &names).map(|r| r.lsps(&mut Vec::new())).collect();
    Ok(json!({ "choice": "isis_lsps", "isis_lsps": list }))
}
