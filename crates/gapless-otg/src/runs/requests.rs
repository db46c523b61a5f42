//! The OTG requests gapless reads, as data: a JSON body, `control/state` and
//! `monitor/metrics`, and the replies that carry only warnings.

use std::collections::HashMap;
use std::net::Ipv6Addr;

use serde_json::{json, Value};

use crate::error::{Invalid, OtgError};

/// A JSON body, or a validation error that says what is wrong.
pub fn body(b: &[u8]) -> Result<Value, OtgError> {
    serde_json::from_slice(b).map_err(|e| OtgError::invalid(format!("malformed JSON: {e}")))
}

/// A success with its warnings.
pub fn ok(warnings: Vec<String>) -> Value {
    json!({ "warnings": warnings })
}

/// `GET /capabilities/version`.
pub fn version() -> Value {
    json!({
        "api_spec_version": crate::API_SPEC_VERSION,
        "sdk_version": "",
        "app_version": gapless_engine::VERSION,
        "warnings": [],
    })
}

/// What a `control/state` request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Start the flows named (all when none are).
    Start(Vec<String>),
    /// Stop the flows named (all when none are).
    Stop(Vec<String>),
    /// Pause (true) or resume the flows named (all when none are).
    Pause(Vec<String>, bool),
    /// Start (true) or stop the captures of the ports named (all when none are).
    Capture(bool, Vec<String>),
    /// `protocol.all` start (true) or stop: the devices ask for their gateways again on a
    /// start; they stay up (their neighbour tables are the kernel's) on a stop.
    Protocols(bool),
    /// `port.link` up (true) or down for the ports named (all when none are): the ports'
    /// interfaces set administratively up or down.
    Link(bool, Vec<String>),
    /// `protocol.route` advertise (true) or withdraw of the route ranges named (all when
    /// none are).
    Routes(bool, Vec<String>),
    /// `protocol.bgp.peers` up (true) or down for the peers named (all when none are).
    BgpPeers(bool, Vec<String>),
    /// `protocol.isis.routers` up (true) or down for the IS-IS routers named (all when none
    /// are).
    IsisRouters(bool, Vec<String>),
    /// `protocol.lacp`: `admin` (true: Synchronization in the LACPDUs) or `member_ports`
    /// (false: LACP on the member at all), up (true) or down, on the LAG members named by
    /// their ports (all when none are).
    Lacp {
        admin: bool,
        up: bool,
        members: Vec<String>,
    },
    /// A choice gapless takes as a no-op, with the warning to send.
    NoOp(String),
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Reads a `control/state` request: traffic start/stop, port capture start/stop; link and
/// protocol choices are no-ops.
pub fn control(req: &Value) -> Result<Control, OtgError> {
    let choice = req["choice"].as_str().unwrap_or_default();
    if choice == "port" && req["port"]["choice"].as_str() == Some("capture") {
        let c = &req["port"]["capture"];
        return match c["state"].as_str().unwrap_or_default() {
            s @ ("start" | "stop") => Ok(Control::Capture(s == "start", names(&c["port_names"]))),
            other => Err(OtgError::invalid(format!(
                "port.capture.state: {other:?} is not supported (start or stop)"
            ))),
        };
    }
    if choice == "port" && req["port"]["choice"].as_str() == Some("link") {
        let l = &req["port"]["link"];
        return match l["state"].as_str().unwrap_or_default() {
            s @ ("up" | "down") => Ok(Control::Link(s == "up", names(&l["port_names"]))),
            other => Err(OtgError::invalid(format!(
                "port.link.state: {other:?} is not a link state (up or down)"
            ))),
        };
    }
    if choice == "protocol" && req["protocol"]["choice"].as_str() == Some("all") {
        return match req["protocol"]["all"]["state"].as_str().unwrap_or_default() {
            s @ ("start" | "stop") => Ok(Control::Protocols(s == "start")),
            other => Err(OtgError::invalid(format!(
                "protocol.all.state: {other:?} is not a state (start or stop)"
            ))),
        };
    }
    if choice == "protocol" {
        return protocol(&req["protocol"]);
    }
    if choice != "traffic" {
        return Ok(Control::NoOp(format!(
            "control {choice:?} does nothing in gapless: it has no emulated protocols or link control"
        )));
    }
    let t = &req["traffic"];
    if t["choice"].as_str().unwrap_or("flow_transmit") != "flow_transmit" {
        return Err(OtgError::invalid("traffic.choice: only flow_transmit is supported"));
    }
    let ft = &t["flow_transmit"];
    let names = names(&ft["flow_names"]);
    match ft["state"].as_str().unwrap_or_default() {
        "start" => Ok(Control::Start(names)),
        "stop" => Ok(Control::Stop(names)),
        "pause" => Ok(Control::Pause(names, true)),
        "resume" => Ok(Control::Pause(names, false)),
        other => Err(OtgError::invalid(format!(
            "traffic.flow_transmit.state: {other:?} is not supported (start, stop, pause or resume)"
        ))),
    }
}

/// `protocol.route`, `protocol.bgp.peers` and `protocol.isis.routers`.
fn protocol(p: &Value) -> Result<Control, OtgError> {
    let which = p["choice"].as_str().unwrap_or_default();
    let (at, state, list) = match which {
        "route" => ("protocol.route.state", &p["route"]["state"], &p["route"]["names"]),
        "bgp" => ("protocol.bgp.peers.state", &p["bgp"]["peers"]["state"], &p["bgp"]["peers"]["peer_names"]),
        "isis" => (
            "protocol.isis.routers.state",
            &p["isis"]["routers"]["state"],
            &p["isis"]["routers"]["router_names"],
        ),
        "lacp" => {
            let l = &p["lacp"];
            let c = Invalid::one_of(&l["choice"], "protocol.lacp.choice", &["admin", "member_ports"], "admin")
                .map_err(|e| OtgError::invalid(e.0))?;
            let at = format!("protocol.lacp.{c}.state");
            let up = match l[c]["state"].as_str().unwrap_or_default() {
                "up" => true,
                "down" => false,
                other => return Err(OtgError::invalid(format!("{at}: {other:?} is not a state of it (up or down)"))),
            };
            return Ok(Control::Lacp {
                admin: c == "admin",
                up,
                members: names(&l[c]["lag_member_names"]),
            });
        }
        other => {
            return Ok(Control::NoOp(format!(
                "control protocol {other:?} does nothing in gapless: it drives BGP and IS-IS through FRR and LACP itself (protocol all, route, bgp, isis and lacp)"
            )))
        }
    };
    match (which, state.as_str().unwrap_or_default()) {
        ("route", s @ ("advertise" | "withdraw")) => Ok(Control::Routes(s == "advertise", names(list))),
        ("bgp", s @ ("up" | "down")) => Ok(Control::BgpPeers(s == "up", names(list))),
        ("isis", s @ ("up" | "down")) => Ok(Control::IsisRouters(s == "up", names(list))),
        (_, other) => Err(OtgError::invalid(format!("{at}: {other:?} is not a state of it"))),
    }
}

/// What a `monitor/metrics` request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metrics {
    /// Flow metrics of the flows named (all when none are), with their tagged metrics as
    /// asked.
    Flow(Vec<String>, crate::metrics::tagged::TagFilter),
    /// Port metrics of the ports named (all when none are).
    Port(Vec<String>),
    /// Convergence metrics of the flows named (all when none are).
    Convergence(Vec<String>),
    /// BGP metrics of the peers named (all when none are): of the peers on IPv6
    /// interfaces (true, `bgpv6`) or IPv4 ones.
    Bgp(bool, Vec<String>),
    /// IS-IS metrics of the routers named (all when none are).
    Isis(Vec<String>),
    /// LLDP metrics of the agents named (all when none are).
    Lldp(Vec<String>),
    /// OSPFv2 (false) or OSPFv3 (true) metrics of the routers named (all when none are).
    Ospf(bool, Vec<String>),
    /// LAG metrics of the LAGs named (all when none are).
    Lag(Vec<String>),
    /// LACP metrics of the members of the LAGs named, of the member ports named (all when
    /// none are).
    Lacp(Vec<String>, Vec<String>),
}

/// Reads a `monitor/metrics` request (port metrics when no choice is given).
pub fn metrics(req: &Value) -> Result<Metrics, OtgError> {
    let choice = req["choice"].as_str().unwrap_or("port");
    match choice {
        "flow" => Ok(Metrics::Flow(
            names(&req[choice]["flow_names"]),
            crate::metrics::tagged::TagFilter::read(&req[choice]["tagged_metrics"])?,
        )),
        "port" => Ok(Metrics::Port(names(&req[choice]["port_names"]))),
        "convergence" => Ok(Metrics::Convergence(crate::metrics::convergence::request(req))),
        "bgpv4" | "bgpv6" => Ok(Metrics::Bgp(choice == "bgpv6", names(&req[choice]["peer_names"]))),
        "isis" => Ok(Metrics::Isis(names(&req[choice]["router_names"]))),
        "lldp" => Ok(Metrics::Lldp(names(&req[choice]["lldp_names"]))),
        "ospfv2" | "ospfv3" => Ok(Metrics::Ospf(choice == "ospfv3", names(&req[choice]["router_names"]))),
        "lag" => Ok(Metrics::Lag(names(&req[choice]["lag_names"]))),
        "lacp" => Ok(Metrics::Lacp(
            names(&req[choice]["lag_names"]),
            names(&req[choice]["lag_member_port_names"]),
        )),
        other => Err(OtgError::invalid(format!(
            "choice: {other:?} metrics are not supported (port, flow, convergence, bgpv4, bgpv6, isis, lldp, ospfv2, ospfv3, lag or lacp)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_reads_start_stop_and_no_ops() {
        let start =
            json!({"choice": "traffic", "traffic": {"flow_transmit": {"state": "start", "flow_names": ["f1"]}}});
        assert_eq!(control(&start), Ok(Control::Start(vec!["f1".into()])));
        let stop =
            json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "stop"}}});
        assert_eq!(control(&stop), Ok(Control::Stop(vec![])));
        let cap = json!({"choice": "port", "port": {"choice": "capture", "capture": {"port_names": ["p2"], "state": "start"}}});
        assert_eq!(control(&cap), Ok(Control::Capture(true, vec!["p2".into()])));
        let all = json!({"choice": "protocol", "protocol": {"choice": "all", "all": {"state": "start"}}});
        assert_eq!(control(&all), Ok(Control::Protocols(true)));
        let bad = json!({"choice": "protocol", "protocol": {"choice": "all", "all": {"state": "up"}}});
        assert!(control(&bad).unwrap_err().errors[0].contains("protocol.all.state: \"up\""));
        let link =
            json!({"choice": "port", "port": {"choice": "link", "link": {"port_names": ["p2"], "state": "down"}}});
        assert_eq!(control(&link), Ok(Control::Link(false, vec!["p2".into()])));
        let pause =
            json!({"choice": "traffic", "traffic": {"flow_transmit": {"state": "pause", "flow_names": ["f2"]}}});
        assert_eq!(control(&pause), Ok(Control::Pause(vec!["f2".into()], true)));
        let resume = json!({"choice": "traffic", "traffic": {"flow_transmit": {"state": "resume"}}});
        assert_eq!(control(&resume), Ok(Control::Pause(vec![], false)));
        let odd = json!({"choice": "traffic", "traffic": {"flow_transmit": {"state": "hold"}}});
        let e = control(&odd).unwrap_err();
        assert_eq!((e.code, e.kind), (400, "validation"));
        assert!(
            e.errors[0].contains("\"hold\"") && e.errors[0].contains("pause"),
            "got {:?}",
            e.errors
        );
    }

    #[test]
    fn metrics_defaults_to_ports_and_refuses_other_choices() {
        assert_eq!(metrics(&json!({})), Ok(Metrics::Port(vec![])));
        let flow = json!({"choice": "flow", "flow": {"flow_names": ["a", "b"]}});
        assert_eq!(
            metrics(&flow),
            Ok(Metrics::Flow(vec!["a".into(), "b".into()], Default::default()))
        );
        let bgp = json!({"choice": "bgpv6", "bgpv6": {"peer_names": ["p"]}});
        assert_eq!(metrics(&bgp), Ok(Metrics::Bgp(true, vec!["p".into()])));
        let isis = json!({"choice": "isis", "isis": {"router_names": ["r"]}});
        assert_eq!(metrics(&isis), Ok(Metrics::Isis(vec!["r".into()])));
        let lldp = json!({"choice": "lldp", "lldp": {"lldp_names": ["l"]}});
        assert_eq!(metrics(&lldp), Ok(Metrics::Lldp(vec!["l".into()])));
        let lacp = json!({"choice": "lacp", "lacp": {"lag_names": ["l"], "lag_member_port_names": ["p1"]}});
        assert_eq!(metrics(&lacp), Ok(Metrics::Lacp(vec!["l".into()], vec!["p1".into()])));
        let down = json!({"choice": "protocol", "protocol": {"choice": "lacp", "lacp": {"choice": "member_ports",
            "member_ports": {"lag_member_names": ["p2"], "state": "down"}}}});
        assert_eq!(
            control(&down),
            Ok(Control::Lacp {
                admin: false,
                up: false,
                members: vec!["p2".into()]
            })
        );
        let odd = json!({"choice": "protocol", "protocol": {"choice": "lacp", "lacp": {"choice": "admin", "admin": {"state": "off"}}}});
        assert!(control(&odd).unwrap_err().errors[0].contains("protocol.lacp.admin.state: \"off\""));
        let e = metrics(&json!({"choice": "macsec"})).unwrap_err();
        assert_eq!(
            e.body(),
            json!({"code": 400, "kind": "validation", "errors": [e.errors[0].clone()]})
        );
        let route = json!({"choice": "protocol", "protocol": {"choice": "route", "route": {"names": ["r"], "state": "withdraw"}}});
        assert_eq!(control(&route), Ok(Control::Routes(false, vec!["r".into()])));
        let peers =
            json!({"choice": "protocol", "protocol": {"choice": "bgp", "bgp": {"peers": {"state": "sideways"}}}});
        assert!(control(&peers).unwrap_err().errors[0].contains("protocol.bgp.peers.state: \"sideways\""));
        let routers = json!({"choice": "protocol", "protocol": {"choice": "isis", "isis": {"routers": {"state": "down", "router_names": ["r"]}}}});
        assert_eq!(control(&routers), Ok(Control::IsisRouters(false, vec!["r".into()])));
    }

    #[test]
    fn a_malformed_body_says_so() {
        let e = body(b"{not json").unwrap_err();
        assert!(e.errors[0].starts_with("malformed JSON"), "got {:?}", e.errors);
    }
}

/// The IPv6 addresses a config spells otherwise than RFC 5952 writes them
/// (`6:6:6:0:0:0:0:0` for `6:6:6::`), each by its value: the first spelling the config gives.
pub fn spellings(cfg: &Value) -> HashMap<Ipv6Addr, String> {
    let mut out = HashMap::new();
    walk(cfg, &mut |s: &str| {
        if let Ok(a) = s.parse::<Ipv6Addr>() {
            if a.to_string() != s {
                out.entry(a).or_insert_with(|| s.to_string());
            }
        }
    });
    out
}

fn walk(v: &Value, f: &mut dyn FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        Value::Object(o) => o.values().for_each(|x| walk(x, f)),
        _ => {}
    }
}

/// Writes each IPv6 address of a state answer as the config spelled it, where the config gave
/// it (the conformance suite's OSPFv3 test compares an LSA's prefix with the string it
/// configured); every other address stays as RFC 5952 writes it.
pub fn as_written(sp: &HashMap<Ipv6Addr, String>, answer: &mut Value) {
    if sp.is_empty() {
        return;
    }
    match answer {
        Value::String(s) => {
            if let Some(w) = s.parse::<Ipv6Addr>().ok().and_then(|a| sp.get(&a)) {
                *s = w.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| as_written(sp, x)),
        Value::Object(o) => o.values_mut().for_each(|x| as_written(sp, x)),
        _ => {}
    }
}

#[cfg(test)]
mod spelling_tests {
    use super::*;

    #[test]
    fn an_address_in_an_answer_is_written_as_the_config_wrote_it() {
        let cfg = json!({ "devices": [{ "ospfv3": { "v6_routes": [{ "addresses": [
            { "address": "6:6:6:0:0:0:0:0", "prefix": 64 }, { "address": "2001:db8::1" }] }] } }] });
        let sp = spellings(&cfg);
        let mut answer = json!({ "ospfv3_lsas": [{ "inter_area_prefix_lsas": [
            { "address_prefix": "6:6:6::", "prefix_length": 64 }, { "address_prefix": "7:7:7::" },
            { "address_prefix": "2001:db8::1" }, { "router": "1.1.1.1" }] }] });
        as_written(&sp, &mut answer);
        let got: Vec<&Value> = (0..4)
            .map(|i| &answer["ospfv3_lsas"][0]["inter_area_prefix_lsas"][i]["address_prefix"])
            .collect();
        assert_eq!(
            got,
            [
                &json!("6:6:6:0:0:0:0:0"),
                &json!("7:7:7::"),
                &json!("2001:db8::1"),
                &Value::Null
            ],
            "expected the config's spelling where it gave the address, RFC 5952 elsewhere"
        );
    }
}
