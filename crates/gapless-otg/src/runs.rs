//! A planned config as engine run requests: the groups a start takes (each TX port's flows,
//! the flows a `control/state` names picked out) joined into one run, a stream per flow:
//! one send loop over every TX port and one meter over every RX port, so that flows in both
//! directions between two ports, or any mix of flows over any ports, run at once.

pub mod requests;
pub mod shares;

use gapless_core::meter::plan::PlanMatch;
use gapless_engine::request::RunRequest;
use gapless_engine::spec::{LagTx, PortRef};
use gapless_engine::{ProfileSource, RunSpec};
use serde_json::{json, Value};

use crate::config::{Group, Plan, Port};
use crate::error::OtgError;

/// A run to start for one TX port: what the run table stores and what the engine runs.
pub struct PortRun {
    /// The label the run is listed under: `otg:PORT`.
    pub profile: String,
    /// The profile as TOML, as the run table keeps it.
    pub toml: String,
    /// Where it sends and meters, for the run table.
    pub target: Value,
    pub spec: RunSpec,
}

/// The group's profile, parsed.
pub fn source(g: &Group) -> Result<ProfileSource, OtgError> {
    let spec: gapless_core::ProfileSpec = serde_path_to_error::deserialize(g.profile.clone()).map_err(|e| {
        OtgError::internal(format!(
            "port {}: the profile made from the config does not parse: {e}",
            g.tx.name
        ))
    })?;
    Ok(ProfileSource {
        spec,
        dir: std::path::PathBuf::new(),
        label: format!("otg:{}", g.tx.name),
    })
}

/// Compiles every port's profile, so a config that cannot run is refused when it is set,
/// and refuses two flows the meter knows by their headers alone (sent without a signature,
/// or with headers set by hand) on one RX port that it could not tell apart.
pub fn check(plan: &Plan) -> Result<(), OtgError> {
    let mut unsigned = Vec::new();
    for g in &plan.groups {
        for s in &compiled(g)?.streams {
            let matches = gapless_engine::rx::plan_of(s);
            if !matches.is_empty() {
                unsigned.push((s.name.clone(), matches));
            }
        }
    }
    apart(plan, &unsigned)
}

/// The first two unsigned flows sharing an RX port whose frames could match either's plan.
fn apart(plan: &Plan, unsigned: &[(String, Vec<PlanMatch>)]) -> Result<(), OtgError> {
    let rx_of = |n: &str| {
        plan.flows
            .iter()
            .find(|f| f.0 == n)
            .map(|f| f.2.clone())
            .unwrap_or_default()
    };
    for (i, (a, ma)) in unsigned.iter().enumerate() {
        for (b, mb) in &unsigned[i + 1..] {
            let (ra, rb) = (rx_of(a), rx_of(b));
            let Some(port) = ra.iter().find(|p| rb.contains(p)) else {
                continue;
            };
            let Some(m) = ma.iter().find(|m| mb.iter().any(|n| m.overlaps(n))) else {
                continue;
            };
            return Err(OtgError::invalid(format!(
                "flows {a:?} and {b:?}: both go to port {port:?} with frames the meter knows by their headers alone (frames too small for the signature, or lengths, versions or protocols set by hand), and their headers ({}) do not tell them apart, so neither could be counted. Fix: give them different VLAN ids, addresses or ports (not varied by a pattern), frames large enough for the signature, or leave those fields auto",
                m.describe()
            )));
        }
    }
    Ok(())
}

/// The group's profile compiled (as [`check`] compiles it).
pub fn compiled(g: &Group) -> Result<gapless_core::Profile, OtgError> {
    no_speed_for_pct(g)?;
    source(g)?
        .compile(None)
        .map_err(|e| OtgError::invalid(format!("port {}: {e}", g.tx.name)))
}

/// A flow whose rate is a percentage, on a port whose speed neither `layer1` nor its
/// interface gives: refused with the fix.
fn no_speed_for_pct(g: &Group) -> Result<(), OtgError> {
    if g.profile.get("link_speed_bps").is_some() {
        return Ok(());
    }
    let streams = g.profile["stream"].as_array().into_iter().flatten();
    match streams.zip(&g.flows).find(|(s, _)| s["timing"].get("rate_pct").is_some()) {
        Some((_, name)) => Err(OtgError::invalid(format!(
            "flow {name:?}: rate.percentage is a percentage of port {}'s speed, and neither layer1 nor its interface gives one. Fix: name the port in a layer1 entry with a speed, or give the rate in pps or bps",
            g.tx.name
        ))),
        None => Ok(()),
    }
}

/// An error naming the first flow that the config does not have.
pub fn check_flows(plan: &Plan, names: &[String]) -> Result<(), OtgError> {
    match names.iter().find(|n| !plan.flows.iter().any(|f| &f.0 == *n)) {
        Some(n) => Err(OtgError::invalid(format!("flow_names: no flow named {n:?}"))),
        None => Ok(()),
    }
}

/// The group with only the flows named (None if none of its flows are).
pub fn subset(g: &Group, names: &[String]) -> Option<Group> {
    if names.is_empty() {
        return Some(g.clone());
    }
    let keep: Vec<usize> = (0..g.flows.len()).filter(|i| names.contains(&g.flows[*i])).collect();
    if keep.is_empty() {
        return None;
    }
    let mut out = g.clone();
    out.flows = keep.iter().map(|i| g.flows[*i].clone()).collect();
    out.needs = keep.iter().map(|i| g.needs[*i].clone()).collect();
    let streams = g.profile["stream"].as_array().cloned().unwrap_or_default();
    out.profile["stream"] = json!(keep.iter().map(|i| streams[*i].clone()).collect::<Vec<_>>());
    Some(out)
}

/// Groups joined into one run: the first group's TX port is the run's target, every other
/// group's is one of its more TX ports, and the meter reads every group's RX ports.
#[derive(Debug, Clone)]
pub struct Joint {
    /// The joined group: the first TX port, every RX port once (in the order the groups name
    /// them), every flow, and one profile with every stream.
    pub group: Group,
    /// The other groups' TX ports.
    pub more_tx: Vec<Port>,
    /// Each stream's TX port: 0 the group's, k `more_tx[k - 1]`.
    pub stream_ports: Vec<usize>,
}

impl Joint {
    /// One group alone.
    pub fn one(group: Group) -> Joint {
        let n = group.flows.len();
        Joint {
            group,
            more_tx: Vec::new(),
            stream_ports: vec![0; n],
        }
    }

    /// Every TX port's name.
    pub fn tx_names(&self) -> Vec<String> {
        std::iter::once(&self.group.tx)
            .chain(&self.more_tx)
            .map(|p| p.name.clone())
            .collect()
    }
}

/// The groups as one run (None for none). A stream's rate given as a percentage becomes the
/// bit rate of its own port's speed, so ports of different speeds can share the profile; the
/// profile keeps a link speed only when every port has the same.
pub fn join(groups: &[Group]) -> Option<Joint> {
    let (first, rest) = groups.split_first()?;
    let mut group = first.clone();
    let link = |g: &Group| g.profile.get("link_speed_bps").and_then(Value::as_f64);
    let mut streams = Vec::new();
    let mut stream_ports = Vec::new();
    for (k, g) in groups.iter().enumerate() {
        for s in g.profile["stream"].as_array().into_iter().flatten() {
            streams.push(pct_as_bps(s.clone(), link(g)));
            stream_ports.push(k);
        }
        if k == 0 {
            continue;
        }
        for p in &g.rx {
            if !group.rx.iter().any(|q| q.name == p.name) {
                group.rx.push(p.clone());
            }
        }
        group.flows.extend(g.flows.iter().cloned());
        group.needs.extend(g.needs.iter().cloned());
    }
    group.profile["stream"] = json!(streams);
    if rest.iter().any(|g| link(g) != link(first)) {
        if let Some(m) = group.profile.as_object_mut() {
            m.remove("link_speed_bps");
        }
    }
    Some(Joint {
        group,
        more_tx: rest.iter().map(|g| g.tx.clone()).collect(),
        stream_ports,
    })
}

/// The TX ports that are LAGs, each with its members after the first (the server gives each
/// its live state, which its LACP driver keeps).
fn lags(j: &Joint) -> Vec<LagTx> {
    std::iter::once(&j.group.tx)
        .chain(&j.more_tx)
        .enumerate()
        .filter(|(_, p)| !p.members.is_empty())
        .map(|(k, p)| LagTx {
            port: k,
            more_members: p.members[1..]
                .iter()
                .map(|m| PortRef {
                    iface: m.iface.clone(),
                    netns: m.netns.clone(),
                })
                .collect(),
            live: None,
        })
        .collect()
}

/// A stream whose rate is a percentage of its port's `link` speed, at the bit rate (L1, as
/// a percentage counts) that it is; unchanged without a speed (compiling it says so).
fn pct_as_bps(mut stream: Value, link: Option<f64>) -> Value {
    let t = &mut stream["timing"];
    if let (Some(pct), Some(bps)) = (t.get("rate_pct").and_then(Value::as_f64), link) {
        if let Some(m) = t.as_object_mut() {
            m.remove("rate_pct");
            m.insert("rate_bps_l1".into(), json!(bps * pct / 100.0));
        }
    }
    stream
}

/// The run that sends the joined groups' flows, each from its TX port, and meters them on
/// every RX port.
pub fn port_run(j: &Joint) -> Result<PortRun, OtgError> {
    let g = &j.group;
    let src = source(g)?;
    let toml = toml::to_string(&src.spec).unwrap_or_default();
    let mut req = RunRequest {
        iface: Some(g.tx.iface.clone()),
        netns: g.tx.netns.clone(),
        ..RunRequest::default()
    };
    let rx_ports = g.rx_ports();
    if let Some((rx, more)) = rx_ports.split_first() {
        req.rx = Some(rx.iface.clone());
        req.rx_netns = rx.netns.clone();
        req.rx_also = more
            .iter()
            .map(|p| match &p.netns {
                Some(n) => format!("{n}/{}", p.iface),
                None => p.iface.clone(),
            })
            .collect();
    }
    let mut target = json!({ "otg_port": g.tx.name, "iface": req.iface, "netns": req.netns, "rx": req.rx, "rx_netns": req.rx_netns });
    if !req.rx_also.is_empty() {
        target["rx_also"] = json!(req.rx_also);
    }
    let mut spec = req
        .spec(src)
        .map_err(|e| OtgError::invalid(format!("port {}: {e}", g.tx.name)))?;
    if !j.more_tx.is_empty() {
        spec.more_tx = j
            .more_tx
            .iter()
            .map(|p| PortRef {
                iface: p.iface.clone(),
                netns: p.netns.clone(),
            })
            .collect();
        spec.stream_ports = j.stream_ports.clone();
        target["otg_ports"] = json!(j.tx_names());
        target["tx_also"] = json!(j.more_tx.iter().map(|p| p.location.clone()).collect::<Vec<_>>());
    }
    spec.lags = lags(j);
    Ok(PortRun {
        profile: format!("otg:{}", j.tx_names().join("+")),
        toml,
        target,
        spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_ways(layer1: bool) -> Plan {
        let flow = |name: &str, tx: &str, rx: &str, rate: Value| {
            json!({ "name": name, "tx_rx": { "choice": "port", "port": { "tx_name": tx, "rx_names": [rx] } },
                    "rate": rate, "size": { "choice": "fixed", "fixed": 128 },
                    "packet": [{ "choice": "ethernet" }, { "choice": "ipv4" }, { "choice": "udp" }] })
        };
        let mut cfg = json!({
            "ports": [{ "name": "p1", "location": "ns/a" }, { "name": "p2", "location": "ns/z" }],
            "flows": [
                flow("ab", "p1", "p2", json!({ "choice": "percentage", "percentage": 1 })),
                flow("ba", "p2", "p1", json!({ "choice": "pps", "pps": 500 })),
                flow("ab2", "p1", "p2", json!({ "choice": "pps", "pps": 100 }))
            ] });
        if layer1 {
            cfg["layer1"] = json!([{ "name": "l1", "port_names": ["p1"], "speed": "speed_1_gbps" }]);
        }
        crate::config::plan(&cfg).expect("planned")
    }

    #[test]
    fn flows_both_ways_join_in_one_run_each_stream_on_its_port() {
        let mut plan = two_ways(false);
        crate::config::with_port_speeds(&mut plan, |p| (p.name == "p1").then_some(10e9));
        let j = join(&plan.groups).expect("a joint run");
        assert_eq!(j.tx_names(), vec!["p1", "p2"]);
        assert_eq!(j.group.flows, vec!["ab", "ab2", "ba"], "streams in the groups' order");
        assert_eq!(j.stream_ports, vec![0, 0, 1], "each stream leaves through its own port");
        let rx: Vec<&str> = j.group.rx.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(rx, vec!["p2", "p1"], "one meter over every RX port");
        let t = &j.group.profile["stream"][0]["timing"];
        assert_eq!(
            (t.get("rate_pct"), t["rate_bps_l1"].as_f64()),
            (None, Some(1e8)),
            "1 % of p1's 10 Gbit/s (the kernel's) as a bit rate: {t}"
        );
        assert!(
            j.group.profile.get("link_speed_bps").is_none(),
            "p2 has no speed: the joint profile keeps none"
        );
        assert_eq!(
            plan.speeds,
            vec![crate::config::PortSpeed {
                port: "p1".into(),
                bps: 10e9,
                source: "kernel"
            }]
        );
        let run = port_run(&j).expect("a run request");
        assert_eq!(run.spec.more_tx.len(), 1);
        assert_eq!(run.spec.more_tx[0].iface, "z");
        assert_eq!(run.spec.stream_ports, vec![0, 0, 1]);
        let rx = run.spec.rx.expect("metered");
        assert_eq!(
            (rx.iface.as_str(), rx.more.len(), rx.more[0].iface.as_str()),
            ("z", 1, "a")
        );
        compiled(&j.group).expect("the joint profile compiles");
    }

    #[test]
    fn layer1_wins_over_the_kernel_and_a_port_without_a_speed_says_how_to_give_one() {
        let mut plan = two_ways(true);
        crate::config::with_port_speeds(&mut plan, |_| Some(10e9));
        assert_eq!(plan.speeds[0].source, "layer1");
        assert_eq!(plan.groups[0].profile["link_speed_bps"], json!(1e9));
        let j = join(&plan.groups).unwrap();
        assert_eq!(
            j.group.profile["stream"][0]["timing"]["rate_bps_l1"].as_f64(),
            Some(1e7)
        );
        let mut none = two_ways(false);
        crate::config::with_port_speeds(&mut none, |_| None);
        let e = check(&none)
            .expect_err("a percentage of an unknown speed")
            .errors
            .join("; ");
        assert!(
            e.contains("flow \"ab\": rate.percentage") && e.contains("Fix: name the port in a layer1 entry"),
            "got: {e}"
        );
    }
}
