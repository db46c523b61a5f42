//! The config's devices as hosts on the Linux stack (`gapless_io::devices::hosts`), each in a
//! network namespace of its own: brought up when a config is set, their gateways resolved
//! right after (and again on `protocol.all start`) with no traffic needed, each device flow's
//! destination MAC taken from its gateway when its traffic starts, their neighbour tables
//! read by `POST /monitor/states`.

use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use gapless_io::devices::hosts::{netns_name, Host, HostSpec};
use gapless_otg::config::{Group, Plan};
use gapless_otg::devices::Eth;
use gapless_otg::OtgError;
use serde_json::{json, Value};

use super::lag::LagDriver;
use super::{otg, OtgResult};
use crate::Shared;

/// How long a flow waits for its gateway's MAC when its traffic starts.
pub const RESOLVE_WITHIN: Duration = Duration::from_secs(3);

/// How long the resolver that a config's set-up starts keeps asking (every 50 ms for the
/// first [`RESOLVE_WITHIN`], then every second) for a gateway that has not answered.
pub const RESOLVE_IN_BACKGROUND: Duration = Duration::from_secs(30);

/// A host per device Ethernet, on its port's interface (or its LAG's, from `lags`), in a
/// namespace of its own. Interface names are `gd<pid>x<k>`: unique per server in the port's
/// namespace, at most 15 bytes.
pub fn up(plan: &Plan, lags: &[Arc<LagDriver>]) -> Result<Vec<(String, Arc<Host>)>, OtgError> {
    let make = |k: &usize| -> Result<(String, Arc<Host>), OtgError> {
        let e = &plan.devices[*k];
        let (lower, netns) = lower(plan, lags, e);
        let spec = HostSpec {
            ifname: format!("gd{}x{k}", std::process::id() % 100_000),
            lower,
            netns,
            own_netns: netns_name(*k),
            mac: e.mac.clone(),
            mtu: e.mtu,
            vlans: e.vlans.iter().map(|v| (v.id, v.tpid, v.priority)).collect(),
            addrs: gapless_otg::devices::distinct(e),
        };
        let host = Host::create(spec).map_err(|err| {
            OtgError::invalid(format!(
                "devices: {:?} on port {:?} cannot come up: {err}",
                e.name, e.port
            ))
        })?;
        Ok((e.name.clone(), Arc::new(host)))
    };
    // The first alone: the first `ip netns add` makes /run/netns a shared mount, which
    // races with another doing the same. The rest a few at a time.
    let ks: Vec<usize> = (0..plan.devices.len()).collect();
    let (first, rest) = ks.split_at(ks.len().min(1));
    let mut hosts = super::chunks::in_chunks(first, make)?;
    hosts.extend(super::chunks::in_chunks(rest, make)?);
    Ok(hosts)
}

/// The interface a device sits on, and its namespace: its port's, or its LAG's.
fn lower(plan: &Plan, lags: &[Arc<LagDriver>], e: &Eth) -> (String, Option<String>) {
    if e.on_lag {
        let (i, ns) = lags
            .iter()
            .find(|l| l.lag.name == e.port)
            .and_then(|l| l.devices_iface())
            .expect("a LAG with devices has their interface");
        return (i, Some(ns));
    }
    let port = plan.port(&e.port).expect("checked by the plan");
    (port.iface.clone(), port.netns.clone())
}

/// Starts asking for every host's gateways on a thread of its own, so that the neighbour
/// tables fill with no traffic, as a script that waits for its neighbours expects. The
/// thread holds the hosts weakly: a new config or the server's end removes them, and it stops.
pub fn resolve_in_background(hosts: &[(String, Arc<Host>)]) {
    let todo: Vec<(Weak<Host>, IpAddr)> = hosts
        .iter()
        .flat_map(|(_, h)| h.gateways().into_iter().map(move |g| (Arc::downgrade(h), g)))
        .collect();
    if todo.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("otg-resolve".into())
        .spawn(move || resolve_loop(todo));
}

fn resolve_loop(mut todo: Vec<(Weak<Host>, IpAddr)>) {
    let t0 = Instant::now();
    while !todo.is_empty() && t0.elapsed() < RESOLVE_IN_BACKGROUND {
        todo.retain(|(w, gw)| {
            let Some(h) = w.upgrade().filter(|h| !h.is_removed()) else {
                return false;
            };
            if matches!(h.neighbor(*gw), Ok(Some(_))) {
                return false;
            }
            let _ = h.probe(*gw);
            true
        });
        let pause = if t0.elapsed() < RESOLVE_WITHIN { 50 } else { 1000 };
        std::thread::sleep(Duration::from_millis(pause));
    }
}

/// Each device flow of the group gets its gateway's MAC as its destination MAC. One whose
/// gateway does not answer within [`RESOLVE_WITHIN`] goes to 00:00:00:00:00:00, as the model
/// says of every `auto` value an implementation cannot generate ("the default value must be
/// used"), and the start's warnings name the flow, the gateway and the fix.
pub fn resolve(s: &Shared, g: &mut Group) -> Result<Vec<String>, OtgError> {
    let mut warnings = Vec::new();
    for (i, need) in g.needs.clone().iter().enumerate() {
        let Some(n) = need else { continue };
        // The host is taken out of the state, so nobody waits on its lock while it resolves.
        let host = otg(s)
            .hosts
            .iter()
            .find(|h| h.0 == n.eth)
            .map(|h| h.1.clone())
            .ok_or_else(|| OtgError::internal(format!("device {:?} has no host", n.eth)))?;
        let mac = match host.resolve(n.gateway, RESOLVE_WITHIN) {
            Ok(mac) => mac,
            Err(e @ gapless_io::IoError::Unresolved { .. }) => {
                warnings.push(format!(
                    "flow {:?}: device {:?} could not resolve its gateway {} ({e}); its frames go to 00:00:00:00:00:00, the model's default for a destination left to auto",
                    g.flows[i], n.eth, n.gateway
                ));
                "00:00:00:00:00:00".to_string()
            }
            Err(e) => {
                return Err(OtgError::invalid(format!(
                    "flow {:?}: device {:?} could not resolve its gateway {}: {e}",
                    g.flows[i], n.eth, n.gateway
                )))
            }
        };
        g.profile["stream"][i]["template"]["eth_dst"] = json!(mac);
    }
    Ok(warnings)
}

/// `POST /monitor/states`: `ipv4_neighbors` and `ipv6_neighbors` of the device Ethernets
/// named (all when none are).
pub async fn states_handler(State(s): State<Shared>, b: Bytes) -> OtgResult {
    Ok(Json(states(s, super::body("StatesRequest", &b)?).await?))
}

/// A states request of either transport (the tables are read on the blocking pool).
/// Each IPv6 address of the answer is written as the config wrote it, where it gave it.
pub(crate) async fn states(s: Shared, req: Value) -> Result<Value, OtgError> {
    super::blocking(move || {
        let mut answer = states_now(&s, &req)?;
        let spelled = otg(&s)
            .raw
            .as_ref()
            .map(gapless_otg::runs::requests::spellings)
            .unwrap_or_default();
        gapless_otg::runs::requests::as_written(&spelled, &mut answer);
        Ok(answer)
    })
    .await
}

pub(crate) fn states_now(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    let choice = req["choice"].as_str().unwrap_or("ipv4_neighbors");
    let v6 = match choice {
        "ipv4_neighbors" => false,
        "ipv6_neighbors" => true,
        "bgp_prefixes" => return super::routing::prefix_states(s, &req[choice]),
        "isis_lsps" => return super::isis::lsp_states(s, &req[choice]),
        "lldp_neighbors" => return super::lldp::neighbor_states(s, &req[choice]),
        "ospfv2_lsas" | "ospfv3_lsas" => return super::ospf::lsa_states(s, choice == "ospfv3_lsas", &req[choice]),
        other => {
            return Err(OtgError::invalid(format!(
                "choice: {other:?} states are not served (ipv4_neighbors, ipv6_neighbors, bgp_prefixes, isis_lsps, lldp_neighbors, ospfv2_lsas or ospfv3_lsas)"
            )))
        }
    };
    let names: Vec<&str> = req[choice]["ethernet_names"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Read without the state's lock held: each host's table is an `ip` command.
    let hosts: Vec<(String, Arc<Host>)> = otg(s)
        .hosts
        .iter()
        .filter(|h| names.is_empty() || names.contains(&h.0.as_str()))
        .cloned()
        .collect();
    let mut out = Vec::new();
    for (name, host) in &hosts {
        let table = host.neighbors().map_err(OtgError::internal)?;
        for (addr, mac) in table
            .into_iter()
            .filter(|(a, _)| a.is_ipv6() == v6 && !is_link_local(a))
        {
            let key = if v6 { "ipv6_address" } else { "ipv4_address" };
            let mut row = json!({ "ethernet_name": name, key: addr.to_string() });
            if let Some(m) = mac {
                row["link_layer_address"] = json!(m);
            }
            out.push(row);
        }
    }
    Ok(json!({ "choice": choice, choice: out }))
}

fn is_link_local(a: &IpAddr) -> bool {
    matches!(a, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80)
}
