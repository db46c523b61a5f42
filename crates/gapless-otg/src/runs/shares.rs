//! A config whose ports are on gapless agents (`HOST:PORT/IFACE`), split into each agent's
//! share of the run: the TX ports it sends from, and the RX ports it meters with the flows
//! that end there. The shares are the agent API's messages (`gapless_serve::agent`); every
//! flow gets a signature id of its own across the whole config, so that one meter can tell
//! apart flows sent by different agents.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::config::{Group, Plan, Port};
use crate::error::OtgError;

/// The agent API's version, in every message.
pub const VERSION: u32 = 1;

/// One agent's share of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Share {
    pub version: u32,
    /// The run's id, the controller's.
    pub run: String,
    /// The agent stops the share by itself when the controller has not renewed it for this
    /// long.
    pub lease_ms: u64,
    pub tx: Vec<TxShare>,
    pub rx: Vec<RxShare>,
    /// A warm-up (an experiment's trial): frames sent in its first this-many ns after the
    /// start are sent, counted apart and not metered, on every host alike (the start given
    /// to `start` is its beginning). None: none (an OTG run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_ns: Option<u64>,
}

/// A TX port: its interface on the agent's host and the profile it sends (no meter).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TxShare {
    pub port: String,
    pub iface: String,
    pub netns: Option<String>,
    pub flows: Vec<String>,
    pub profile: Value,
}

/// An RX port: its interface, and the profiles of the flows that end there (their names,
/// signature ids and targets, for the meter).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RxShare {
    pub port: String,
    pub iface: String,
    pub netns: Option<String>,
    pub profiles: Vec<Value>,
}

/// Whether any port of the plan is on an agent.
pub fn spans_hosts(plan: &Plan) -> bool {
    plan.ports.iter().any(|p| p.agent.is_some())
}

/// The plan's shares, one per agent in the order the ports name them; the agents' addresses
/// beside them. A config that mixes this host's ports with agents' ports, or asks for what a
/// run across hosts does not do yet, is refused with the path of the key.
pub fn split(plan: &Plan, cfg: &Value, run: &str, lease_ms: u64) -> Result<Vec<(String, Share)>, OtgError> {
    refuse_what_spans_hosts_lacks(plan, cfg)?;
    let groups = with_ids(plan);
    let mut out: Vec<(String, Share)> = Vec::new();
    for p in &plan.ports {
        if !out.iter().any(|(a, _)| a == agent_of(p)) {
            let s = Share {
                version: VERSION,
                run: run.to_string(),
                lease_ms,
                tx: Vec::new(),
                rx: Vec::new(),
                warmup_ns: None,
            };
            out.push((agent_of(p).to_string(), s));
        }
    }
    let at = |out: &[(String, Share)], p: &Port| out.iter().position(|(a, _)| a == agent_of(p)).unwrap_or(0);
    for g in &groups {
        let i = at(&out, &g.tx);
        out[i].1.tx.push(TxShare {
            port: g.tx.name.clone(),
            iface: g.tx.iface.clone(),
            netns: g.tx.netns.clone(),
            flows: g.flows.clone(),
            profile: g.profile.clone(),
        });
    }
    for p in &plan.ports {
        let ending: Vec<Value> = groups
            .iter()
            .filter(|g| g.rx.iter().any(|r| r.name == p.name))
            .map(|g| g.profile.clone())
            .collect();
        if ending.is_empty() {
            continue;
        }
        let i = at(&out, p);
        out[i].1.rx.push(RxShare {
            port: p.name.clone(),
            iface: p.iface.clone(),
            netns: p.netns.clone(),
            profiles: ending,
        });
    }
    out.retain(|(_, s)| !(s.tx.is_empty() && s.rx.is_empty()));
    Ok(out)
}

fn agent_of(p: &Port) -> &str {
    p.agent.as_deref().unwrap_or("")
}

/// The groups with each flow's stream given its index in the config's flows as its
/// signature id.
fn with_ids(plan: &Plan) -> Vec<Group> {
    let mut groups = plan.groups.clone();
    for g in &mut groups {
        for (j, name) in g.flows.iter().enumerate() {
            let id = plan.flows.iter().position(|f| &f.0 == name).unwrap_or(0);
            g.profile["stream"][j]["id"] = json!(id);
        }
    }
    groups
}

fn refuse_what_spans_hosts_lacks(plan: &Plan, cfg: &Value) -> Result<(), OtgError> {
    if let Some((i, p)) = plan.ports.iter().enumerate().find(|(_, p)| p.agent.is_none()) {
        return Err(OtgError::invalid(format!(
            "ports[{i}].location: {:?} is on this host while other ports are on agents. Fix: give every port of a run across hosts as HOST:PORT/IFACE (this server's own ports through an agent running beside it)",
            p.location
        )));
    }
    let non_empty = |k: &str| cfg[k].as_array().is_some_and(|a| !a.is_empty());
    for (key, what) in [
        ("devices", "devices (ARP/ND hosts)"),
        ("captures", "captures"),
        ("lldp", "LLDP agents"),
    ] {
        if non_empty(key) {
            return Err(OtgError::invalid(format!(
                "{key}: {what} are not supported on ports of agents yet. Fix: leave {key} out of a run across hosts, or run it on one host"
            )));
        }
    }
    if plan.flows.len() > u16::MAX as usize {
        return Err(OtgError::invalid("flows: a run across hosts takes at most 65535 flows"));
    }
    if let Some(i) = plan.flows.iter().position(|f| f.2.len() > 1) {
        return Err(OtgError::invalid(format!(
            "flows[{i}].tx_rx.port.rx_names: a flow with several RX ports is metered by one meter on one host. Fix: give it one RX port in a run across hosts, or put its ports on one host"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    fn cfg() -> Value {
        let flow = |n: &str, tx: &str, rx: &str| {
            json!({ "name": n, "tx_rx": { "choice": "port", "port": { "tx_name": tx, "rx_names": [rx] } },
                    "packet": [{ "choice": "ethernet" }, { "choice": "ipv4" }, { "choice": "udp" }] })
        };
        json!({
            "ports": [
                { "name": "p1", "location": "198.18.100.2:8443/h1/veth-h1" },
                { "name": "p2", "location": "198.18.101.2:8443/h2/veth-h2a" },
                { "name": "p3", "location": "198.18.102.2:8443/veth-h3" },
            ],
            "flows": [flow("a", "p1", "p2"), flow("b", "p3", "p2"), flow("c", "p1", "p2")],
        })
    }

    #[test]
    fn each_agent_gets_its_tx_ports_and_the_flows_ending_at_its_rx_ports_with_ids_unique_across_the_config() {
        let c = cfg();
        let plan = config::plan(&c).unwrap();
        assert!(spans_hosts(&plan));
        let shares = split(&plan, &c, "r1", 3000).unwrap();
        let agents: Vec<&str> = shares.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(agents, ["198.18.100.2:8443", "198.18.101.2:8443", "198.18.102.2:8443"]);
        let (h1, h2, h3) = (&shares[0].1, &shares[1].1, &shares[2].1);
        assert_eq!((h1.tx.len(), h1.rx.len(), h2.tx.len(), h2.rx.len()), (1, 0, 0, 1));
        assert_eq!(h1.tx[0].flows, ["a", "c"]);
        assert_eq!(
            (h1.tx[0].netns.as_deref(), h1.tx[0].iface.as_str()),
            (Some("h1"), "veth-h1")
        );
        assert_eq!((h3.tx[0].netns.as_deref(), h3.tx[0].iface.as_str()), (None, "veth-h3"));
        let ids = |p: &Value| -> Vec<u64> {
            p["stream"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(ids(&h1.tx[0].profile), [0, 2]);
        assert_eq!(ids(&h3.tx[0].profile), [1]);
        let rx_ids: Vec<u64> = h2.rx[0].profiles.iter().flat_map(ids).collect();
        assert_eq!(rx_ids, [0, 2, 1], "the meter knows every flow ending at p2");
        assert_eq!((h2.lease_ms, h2.run.as_str(), h2.version), (3000, "r1", VERSION));
    }

    #[test]
    fn a_mix_of_local_and_agent_ports_and_devices_are_refused_with_their_path() {
        let mut c = cfg();
        c["ports"][2]["location"] = json!("veth-h3");
        let e = split(&config::plan(&c).unwrap(), &c, "r", 1).unwrap_err();
        assert!(e.errors[0].starts_with("ports[2].location"), "got {:?}", e.errors);
        let mut c = cfg();
        c["captures"] = json!([{ "name": "c", "port_names": ["p2"] }]);
        let e = split(&config::plan(&c).unwrap(), &c, "r", 1).unwrap_err();
        assert!(e.errors[0].starts_with("captures:"), "got {:?}", e.errors);
    }

    #[test]
    fn locations_name_an_agent_only_as_host_colon_port() {
        let l = |s: &str| config::location(s);
        assert_eq!(l("eth0"), Some((None, None, "eth0".into())));
        assert_eq!(l("ns/eth0"), Some((None, Some("ns".into()), "eth0".into())));
        assert_eq!(
            l("10.0.0.1:8443/eth0"),
            Some((Some("10.0.0.1:8443".into()), None, "eth0".into()))
        );
        assert_eq!(
            l("agent-1.lab:443/ns/eth0"),
            Some((Some("agent-1.lab:443".into()), Some("ns".into()), "eth0".into()))
        );
        assert_eq!(l("[fd00::2]:8443/eth0").unwrap().0.as_deref(), Some("[fd00::2]:8443"));
        for bad in [
            "",
            "a/b/c",
            "h:0/eth0",
            "h:99999/eth0",
            "ns/",
            "h:1/ns/eth0/x",
            "[zz]:1/e",
        ] {
            assert_eq!(l(bad), None, "{bad:?} was taken");
        }
    }
}
