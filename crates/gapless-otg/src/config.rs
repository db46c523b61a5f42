//! An OTG config (the JSON snappi sends) as gapless profiles: one profile per TX port, a
//! stream per flow, the schema's defaults filled where snappi left a key out. What gapless
//! cannot send is refused with the path of the key.

use serde_json::{json, Map, Value};

pub mod captures;
#[cfg(test)]
mod fuzz;
pub mod hand;
mod ipv4_options;
pub mod preview;
pub mod update;

use crate::error::Invalid;
pub(crate) use crate::flows::patterns::float;
use crate::flows::patterns::{num, read, Kind};

/// An OTG port: its name and where it is (`IFACE`, `NETNS/IFACE`, or on an agent:
/// `HOST:PORT/IFACE`, `HOST:PORT/NETNS/IFACE`).
#[derive(Debug, Clone)]
pub struct Port {
    pub name: String,
    pub location: String,
    pub iface: String,
    pub netns: Option<String>,
    /// The gapless agent whose OTG listener is at this `HOST:PORT`; None: this host.
    pub agent: Option<String>,
    /// A LAG's members (its `iface` and `netns` are the first's); empty for a port.
    pub members: Vec<Port>,
}

/// A location's parts: the agent (`HOST:PORT`), the namespace and the interface; None when
/// it is none of the four forms, or a name in it is not one the kernel takes.
pub fn location(loc: &str) -> Option<(Option<String>, Option<String>, String)> {
    let parts: Vec<&str> = loc.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let agent = is_agent(parts[0]).then(|| parts[0].to_string());
    if agent.is_none() && parts[0].contains(':') {
        return None;
    }
    let rest = &parts[agent.is_some() as usize..];
    match rest {
        [iface] if iface_name(iface) => Some((agent, None, iface.to_string())),
        [ns, iface] if netns_name(ns) && iface_name(iface) => Some((agent, Some(ns.to_string()), iface.to_string())),
        _ => None,
    }
}

/// A name the kernel takes for an interface (its `dev_valid_name`): 1 to 15 bytes (IFNAMSIZ
/// less the NUL), not `.` or `..`, without `/`, `:`, white space or control characters.
fn iface_name(s: &str) -> bool {
    (1..16).contains(&s.len())
        && s != "."
        && s != ".."
        && !s
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
}

/// A network namespace's name, a file in /run/netns: 1 to 255 bytes (NAME_MAX), not `.` or
/// `..` (which would name a directory outside it), without control characters.
fn netns_name(s: &str) -> bool {
    (1..=255).contains(&s.len()) && s != "." && s != ".." && !s.chars().any(|c| c == '/' || c.is_control())
}

/// `HOST:PORT` (a name, an IPv4 address or a bracketed IPv6 one, and a port from 1).
fn is_agent(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
    };
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// What a TX port sends: the profile (as a TOML-shaped value), its flows in stream order,
/// and the ports the flows are metered on: every RX port of its flows, read by one meter
/// (a flow that moves from one to another after a failover stays one sequence).
#[derive(Debug, Clone)]
pub struct Group {
    pub tx: Port,
    pub rx: Vec<Port>,
    pub flows: Vec<String>,
    pub profile: Value,
    /// For each flow: the gateway whose MAC its frames go to, when it is a device flow
    /// without a destination MAC of its own (resolved when its traffic starts).
    pub needs: Vec<Option<Need>>,
}

impl Group {
    /// The ports the meter reads: every RX port, a LAG's members in its place.
    pub fn rx_ports(&self) -> Vec<Port> {
        self.rx
            .iter()
            .flat_map(|p| {
                if p.members.is_empty() {
                    vec![p.clone()]
                } else {
                    p.members.clone()
                }
            })
            .collect()
    }
}

/// A destination MAC to resolve: the gateway of a device Ethernet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The device Ethernet that resolves it.
    pub eth: String,
    pub gateway: std::net::IpAddr,
}

/// The config as gapless runs it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub ports: Vec<Port>,
    /// The emulated hosts (`devices[].ethernets[]`).
    pub devices: Vec<crate::devices::Eth>,
    /// The devices' BGP routers (`devices[].bgp`), each run by a bgpd of its own.
    pub routers: Vec<crate::bgp::Router>,
    /// The devices' IS-IS routers (`devices[].isis`), each run by an isisd of its own.
    pub isis: Vec<crate::isis::Router>,
    /// The devices' OSPFv2 routers (`devices[].ospfv2`), each run by an ospfd of its own.
    pub ospf: Vec<crate::ospf::Router>,
    /// The LLDP agents (`lldp[]`), one per port at most.
    pub lldp: Vec<crate::lldp::Agent>,
    /// The LAGs (`lags[]`), each member a port of `ports`.
    pub lags: Vec<crate::lag::Lag>,
    /// What the config asks that is accepted but done otherwise, for `set_config`'s reply.
    pub warnings: Vec<String>,
    pub groups: Vec<Group>,
    /// Every flow: (name, tx port, rx ports).
    pub flows: Vec<(String, String, Vec<String>)>,
    /// Every flow's `metrics` settings, in the order of `flows`.
    pub metrics: Vec<FlowMetrics>,
    /// Each port's line rate as far as it is known: `layer1`'s, else the kernel's
    /// ([`with_port_speeds`]).
    pub speeds: Vec<PortSpeed>,
}

impl Plan {
    /// The config's port named `name` (its LAGs are not ports here).
    pub fn port(&self, name: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.name == name)
    }
}

/// A port's line rate, and where it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSpeed {
    pub port: String,
    pub bps: f64,
    /// `layer1` (the config's) or `kernel` (the interface's, through ethtool).
    pub source: &'static str,
}

/// The speed of every port that `layer1` leaves without one, from `kernel` (the interface's
/// own, as ethtool reports it; None where it reports none, and for ports on agents): a
/// rate given as a percentage is of that speed, as the model says ("the current speed of
/// underlying test interface shall be assumed"), and latency modes take it off as a
/// `layer1` speed. What `layer1` gives wins.
pub fn with_port_speeds(plan: &mut Plan, kernel: impl Fn(&Port) -> Option<f64>) {
    for p in plan.ports.iter().filter(|p| p.agent.is_none()) {
        if plan.speeds.iter().any(|s| s.port == p.name) {
            continue;
        }
        if let Some(bps) = kernel(p).filter(|b| b.is_finite() && *b > 0.0) {
            plan.speeds.push(PortSpeed {
                port: p.name.clone(),
                bps,
                source: "kernel",
            });
        }
    }
    let speed = |port: &str| plan.speeds.iter().find(|s| s.port == port).map(|s| s.bps);
    for g in &mut plan.groups {
        if g.profile.get("link_speed_bps").is_none() {
            if let Some(bps) = speed(&g.tx.name) {
                g.profile["link_speed_bps"] = json!(bps);
            }
        }
    }
    for (m, f) in plan.metrics.iter_mut().zip(&plan.flows) {
        if m.link_bps.is_none() {
            m.link_bps = f.2.first().and_then(|rx| speed(rx));
        }
    }
}

/// What a flow's `metrics` asks to report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowMetrics {
    /// `metrics.latency.enable`.
    pub latency: bool,
    /// `metrics.latency.mode` is `cut_through` (else `store_forward`).
    pub cut_through: bool,
    /// `metrics.timestamps`.
    pub timestamps: bool,
    /// The RX port's `layer1` speed, bit/s, for the serialization time the modes differ by.
    pub link_bps: Option<f64>,
    /// `options.flow_options.packet_loss_duration`: the flow metric of that name.
    pub loss_duration: bool,
    /// Each metric tag's values over the flow's cycle, for its transmitted counts
    /// ([`crate::flows::tags::tx_cycles`]).
    pub tx_tags: Vec<crate::flows::tags::TxCycle>,
}

fn flow_metrics(f: &Value, cfg: &Value, rx_port: &str) -> FlowMetrics {
    let m = &f["metrics"];
    FlowMetrics {
        latency: m["latency"]["enable"].as_bool().unwrap_or(false),
        cut_through: m["latency"]["mode"].as_str() == Some("cut_through"),
        timestamps: m["timestamps"].as_bool().unwrap_or(false),
        link_bps: link_speed(cfg, rx_port),
        loss_duration: cfg["options"]["flow_options"]["packet_loss_duration"]
            .as_bool()
            .unwrap_or(false),
        tx_tags: crate::flows::tags::tx_cycles(f),
    }
}

fn ports(cfg: &Value) -> Result<Vec<Port>, Invalid> {
    let list = cfg["ports"].as_array().cloned().unwrap_or_default();
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            let name = p["name"]
                .as_str()
                .ok_or_else(|| Invalid(format!("ports[{i}].name: every port needs a name")))?;
            let location = p["location"].as_str().unwrap_or(name);
            let (agent, netns, iface) = self::location(location).ok_or_else(|| {
                Invalid(format!(
                    "ports[{i}].location: {location:?} is not IFACE, NETNS/IFACE, HOST:PORT/IFACE or HOST:PORT/NETNS/IFACE (an interface name is 1 to 15 bytes without '/', ':', spaces or control characters, and a namespace's 1 to 255 bytes; neither is . or ..)"
                ))
            })?;
            Ok(Port {
                name: name.to_string(),
                location: location.to_string(),
                iface,
                netns,
                agent,
                members: Vec::new(),
            })
        })
        .collect()
}

/// A LAG as a port flows may name: its first member's interface, and every member.
pub fn lag_port(lag: &crate::lag::Lag, ports: &[Port]) -> Port {
    let members: Vec<Port> = lag
        .members
        .iter()
        .map(|m| {
            ports
                .iter()
                .find(|p| p.name == m.port)
                .cloned()
                .expect("checked by lag::parse")
        })
        .collect();
    let at: Vec<&str> = members.iter().map(|p| p.location.as_str()).collect();
    Port {
        name: lag.name.clone(),
        location: format!("lag:{}", at.join("+")),
        iface: members[0].iface.clone(),
        netns: members[0].netns.clone(),
        agent: None,
        members,
    }
}

/// Each device is on a port of the config, or on one of its LAGs; not on a LAG's member.
fn device_ports(devices: &[crate::devices::Eth], ports: &[Port], lags: &[crate::lag::Lag]) -> Result<(), Invalid> {
    for e in devices {
        if e.on_lag {
            if !lags.iter().any(|l| l.name == e.port) {
                return Err(Invalid(format!(
                    "devices: {:?} is on LAG {:?} (connection.lag_name), which the config does not have (lags[].name)",
                    e.name, e.port
                )));
            }
        } else if !ports.iter().any(|p| p.name == e.port) {
            return Err(Invalid(format!(
                "devices: {:?} is on port {:?}, which the config does not have",
                e.name, e.port
            )));
        } else if let Some(l) = lags.iter().find(|l| l.members.iter().any(|m| m.port == e.port)) {
            return Err(Invalid(format!(
                "devices: {:?} is on port {:?}, a member of LAG {:?}; its frames would bypass the LAG. Fix: put it on the LAG (connection.lag_name {:?})",
                e.name, e.port, l.name, l.name
            )));
        }
    }
    Ok(())
}

/// The line rate the config's `layer1` gives a port (`speed_10_gbps` ...), in bit/s.
fn link_speed(cfg: &Value, port: &str) -> Option<f64> {
    let l1 = cfg["layer1"].as_array()?;
    let s = l1
        .iter()
        .find(|l| l["port_names"].as_array().is_some_and(|n| n.iter().any(|n| n == port)))?;
    let speed = s["speed"].as_str()?;
    let mut parts = speed.trim_start_matches("speed_").split('_');
    let n: f64 = parts.next()?.parse().ok()?;
    let unit = match parts.next()? {
        "mbps" => 1e6,
        "gbps" => 1e9,
        _ => return None,
    };
    Some(n * unit)
}

/// Reads and checks a config; refuses what gapless cannot send.
pub fn plan(cfg: &Value) -> Result<Plan, Invalid> {
    if !cfg.is_object() {
        return Err(Invalid("the config must be a JSON object".into()));
    }
    crate::flows::bounds::check(cfg)?;
    let ports = ports(cfg)?;
    let named: Vec<crate::lag::PortName> = ports
        .iter()
        .map(|p| crate::lag::PortName {
            name: &p.name,
            agent: p.agent.as_deref(),
        })
        .collect();
    let lags = crate::lag::parse(cfg, &named)?;
    let names: Vec<String> = ports.iter().map(|p| p.name.clone()).collect();
    let speeds = names
        .iter()
        .filter_map(|n| {
            link_speed(cfg, n).map(|bps| PortSpeed {
                port: n.clone(),
                bps,
                source: "layer1",
            })
        })
        .collect();
    let lldp = crate::lldp::parse(cfg, &names)?;
    let devices = crate::devices::parse(cfg)?;
    let twice = crate::devices::twice(cfg, &devices)?;
    let routers = crate::bgp::parse(cfg, &devices)?;
    let (isis, mut warnings) = crate::isis::parse(cfg, &devices)?;
    warnings.extend(twice);
    let ospf = crate::ospf::parse(cfg, &devices)?;
    device_ports(&devices, &ports, &lags)?;
    let find = |name: &str, path: String| {
        ports
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .or_else(|| lags.iter().find(|l| l.name == name).map(|l| lag_port(l, &ports)))
            .ok_or_else(|| Invalid(format!("{path}: no port or LAG named {name:?}")))
    };
    let mut groups: Vec<Group> = Vec::new();
    let mut flows = Vec::new();
    let mut metrics = Vec::new();
    for (i, f) in cfg["flows"].as_array().cloned().unwrap_or_default().iter().enumerate() {
        let path = format!("flows[{i}]");
        let name = f["name"]
            .as_str()
            .ok_or_else(|| Invalid(format!("{path}.name: every flow needs a name")))?
            .to_string();
        let (tx_name, rx_names, dev) = tx_rx(f, &path, (&devices, &routers, &isis, &ospf))?;
        let tx = find(&tx_name, format!("{path}.tx_rx.port.tx_name"))?;
        let rx = rx_names
            .iter()
            .enumerate()
            .map(|(k, n)| find(n, format!("{path}.tx_rx.port.rx_names[{k}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let (stream, need, said) = stream(f, &path, &name, dev.as_ref())?;
        warnings.extend(said.map(|w| format!("flow {name:?}: {w}")));
        flows.push((name.clone(), tx.name.clone(), rx_names.clone()));
        metrics.push(flow_metrics(f, cfg, &rx_names[0]));
        match groups.iter_mut().find(|g| g.tx.name == tx.name) {
            Some(g) => {
                for p in rx {
                    if !g.rx.iter().any(|q| q.name == p.name) {
                        g.rx.push(p);
                    }
                }
                g.flows.push(name);
                g.needs.push(need);
                push_stream(&mut g.profile, stream);
            }
            None => {
                let mut profile = json!({ "seed": 1, "stream": [stream] });
                if let Some(bps) = link_speed(cfg, &tx.name) {
                    profile["link_speed_bps"] = json!(bps);
                }
                groups.push(Group {
                    tx,
                    rx,
                    flows: vec![name],
                    profile,
                    needs: vec![need],
                });
            }
        }
    }
    Ok(Plan {
        ports,
        devices,
        routers,
        isis,
        ospf,
        lldp,
        lags,
        warnings,
        groups,
        flows,
        metrics,
        speeds,
    })
}

fn push_stream(profile: &mut Value, stream: Value) {
    if let Some(a) = profile["stream"].as_array_mut() {
        a.push(stream);
    }
}

/// A device flow's ends: the sending device Ethernet's MAC and gateway, and both addresses.
pub struct DeviceFlow {
    pub eth: String,
    pub mac: String,
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    pub gateway: std::net::IpAddr,
    /// The sending device Ethernet's VLAN tags, outer first.
    pub vlans: Vec<crate::devices::Vlan>,
}

/// The flow's TX and RX port names, and its device ends for a device flow.
fn tx_rx(f: &Value, path: &str, devices: Ends<'_>) -> Result<(String, Vec<String>, Option<DeviceFlow>), Invalid> {
    let t = &f["tx_rx"];
    let choice = t["choice"].as_str().unwrap_or("port");
    if choice == "device" {
        return device_ends(&t["device"], &format!("{path}.tx_rx.device"), devices);
    }
    if choice != "port" {
        return Err(Invalid(format!(
            "{path}.tx_rx.choice: {choice:?} is not supported (port or device)"
        )));
    }
    let p = &t["port"];
    let tx = p["tx_name"]
        .as_str()
        .ok_or_else(|| Invalid(format!("{path}.tx_rx.port.tx_name: give the sending port")))?;
    Ok((tx.to_string(), rx_names(p, path)?, None))
}

/// `tx_rx.port.rx_names` (or the deprecated `rx_name`): one or more distinct port names.
fn rx_names(p: &Value, path: &str) -> Result<Vec<String>, Invalid> {
    let at = format!("{path}.tx_rx.port.rx_names");
    let list: Vec<String> = match (p["rx_names"].as_array(), p["rx_name"].as_str()) {
        (Some(a), _) if !a.is_empty() => a
            .iter()
            .enumerate()
            .map(|(k, v)| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| Invalid(format!("{at}[{k}]: give a port name")))
            })
            .collect::<Result<_, _>>()?,
        (_, Some(one)) => vec![one.to_string()],
        _ => return Err(Invalid(format!("{at}: give one or more receiving ports"))),
    };
    if let Some((k, n)) = list.iter().enumerate().find(|(k, n)| list[..*k].contains(n)) {
        return Err(Invalid(format!("{at}[{k}]: port {n:?} is named twice")));
    }
    if list.len() > 16 {
        return Err(Invalid(format!(
            "{at}: {} ports; one meter reads at most 16",
            list.len()
        )));
    }
    Ok(list)
}

/// `tx_rx.device`: one sending and one receiving address, by name.
/// What a device flow's ends may name: device addresses, BGP, IS-IS, OSPFv2 and OSPFv3
/// route ranges.
type Ends<'a> = (
    &'a [crate::devices::Eth],
    &'a [crate::bgp::Router],
    &'a [crate::isis::Router],
    &'a [crate::ospf::Router],
);

/// A device address, or a route range as an address: its first address, on the Ethernet of
/// its router, through the gateway of the address its session runs from (an IS-IS or OSPF
/// range: the Ethernet's first address of the range's family, IPv6 for OSPFv3).
fn end_named(ends: Ends<'_>, name: &str) -> Option<(crate::devices::Eth, crate::devices::Addr)> {
    if let Some((e, a)) = crate::devices::find(ends.0, name) {
        return Some((e.clone(), a.clone()));
    }
    let igp = crate::isis::find_range(ends.2, name)
        .map(|(r, x)| (r.eth.as_str(), x.v6, crate::isis::first_address(x)))
        .or_else(|| {
            let (r, x) = crate::ospf::find_range(ends.3, name)?;
            Some((r.eth.as_str(), r.v6, x.blocks.first().map(|b| (b.first, b.prefix))))
        });
    if let Some((eth, v6, first)) = igp {
        let eth = ends.0.iter().find(|e| e.name == eth)?;
        let via = eth.addrs.iter().find(|a| a.ip.is_ipv6() == v6)?;
        let (ip, prefix) = first?;
        let addr = crate::devices::Addr {
            name: name.to_string(),
            ip,
            prefix,
            gateway: via.gateway,
        };
        return Some((eth.clone(), addr));
    }
    let (r, peer, range) = crate::bgp::find_range(ends.1, name)?;
    let eth = ends.0.iter().find(|e| e.name == r.eth)?;
    let via = eth.addrs.iter().find(|a| a.ip == peer.local)?;
    let first = range.blocks.first()?;
    let addr = crate::devices::Addr {
        name: name.to_string(),
        ip: first.first,
        prefix: first.prefix,
        gateway: via.gateway,
    };
    Some((eth.clone(), addr))
}

fn device_ends(d: &Value, at: &str, devices: Ends<'_>) -> Result<(String, Vec<String>, Option<DeviceFlow>), Invalid> {
    let one = |k: &str| -> Result<(crate::devices::Eth, crate::devices::Addr), Invalid> {
        let list = d[k].as_array().filter(|a| a.len() == 1).ok_or_else(|| {
            Invalid(format!(
                "{at}.{k}: give exactly one device address or route range name (one meter per sending port)"
            ))
        })?;
        let name = list[0].as_str().unwrap_or_default();
        end_named(devices, name).ok_or_else(|| {
            Invalid(format!(
                "{at}.{k}: no device address or BGP, IS-IS, OSPFv2 or OSPFv3 route range named {name:?}"
            ))
        })
    };
    let ((te, ta), (re, ra)) = (one("tx_names")?, one("rx_names")?);
    if ta.ip.is_ipv6() != ra.ip.is_ipv6() {
        return Err(Invalid(format!(
            "{at}: {:?} and {:?} are of different IP versions",
            ta.name, ra.name
        )));
    }
    let flow = DeviceFlow {
        eth: te.name.clone(),
        mac: te.mac.clone(),
        src: ta.ip,
        dst: ra.ip,
        gateway: ta.gateway,
        vlans: te.vlans.clone(),
    };
    Ok((te.port.clone(), vec![re.port.clone()], Some(flow)))
}

/// One flow as a `[[stream]]`, and the MAC it needs resolved. A device flow's frames go
/// from its device's MAC and address to the other device's address, through the sending
/// device's gateway, unless its headers say otherwise (`auto` and unset fields take these).
/// A warning comes with it when its sizes had to change (`weight_pairs`: [`crate::flows::size`]).
fn stream(
    f: &Value,
    path: &str,
    name: &str,
    dev: Option<&DeviceFlow>,
) -> Result<(Value, Option<Need>, Option<String>), Invalid> {
    let Hdr {
        t: mut template,
        fields,
        v6,
        ..
    } = headers(&f["packet"], &format!("{path}.packet"))?;
    let mut need = None;
    if let Some(d) = dev {
        template.entry("eth_src").or_insert(json!(d.mac));
        template.entry("ip_src").or_insert(json!(d.src.to_string()));
        template.entry("ip_dst").or_insert(json!(d.dst.to_string()));
        // A flow from a device on a VLAN is tagged as the device is, unless its own
        // headers give tags.
        if !d.vlans.is_empty() {
            let tags: Vec<Value> = d
                .vlans
                .iter()
                .map(|v| json!({ "id": v.id, "tpid": v.tpid, "pcp": v.priority }))
                .collect();
            template.entry("vlan").or_insert(json!(tags));
        }
        if !template.contains_key("eth_dst") {
            need = Some(Need {
                eth: d.eth.clone(),
                gateway: d.gateway,
            });
        }
    }
    let testbed = testbed_addresses(&template, v6);
    if v6 {
        // An IPv6 header stays IPv6: addresses left out take the testbed's IPv6 pair
        // (RFC 5180's benchmarking range), as IPv4 ones take 198.18.0.1 and .2.
        template.entry("ip_src").or_insert(json!("2001:2::1"));
        template.entry("ip_dst").or_insert(json!("2001:2::2"));
    }
    if let Some(payload) = crate::flows::flow_level::check(f, path)? {
        template.insert("payload".into(), payload);
    }
    let (size, size_warning) = crate::flows::size::size(&f["size"], &format!("{path}.size"))?;
    let mut stream = json!({
        "name": name,
        "template": template,
        "field": fields,
        "size": size,
        "timing": timing(f, path)?,
    });
    let tags = crate::flows::tags::of_flow(f, path)?;
    if !tags.is_empty() {
        stream["tag"] = json!(tags);
    }
    let unsigned = crate::flows::size::unsigned_if_small(&mut stream);
    let unread = stream["template"].as_object().and_then(|t| hand::unread(name, t));
    let said: Vec<String> = size_warning
        .into_iter()
        .chain(unsigned)
        .chain(unread)
        .chain(testbed)
        .collect();
    Ok((stream, need, (!said.is_empty()).then(|| said.join("; "))))
}

/// The warning for a flow whose IP addresses are left at the model's default (0.0.0.0, `::`):
/// gapless sends its testbed's pair instead, a documented departure (server guide).
fn testbed_addresses(template: &Map<String, Value>, v6: bool) -> Option<String> {
    let left: Vec<&str> = [("ip_src", "source"), ("ip_dst", "destination")]
        .into_iter()
        .filter(|(k, _)| !template.contains_key(*k))
        .map(|(_, w)| w)
        .collect();
    if left.is_empty() {
        return None;
    }
    let (model, src, dst) = if v6 {
        ("::", "2001:2::1", "2001:2::2")
    } else {
        ("0.0.0.0", "198.18.0.1", "198.18.0.2")
    };
    let (was, go, fix) = if left.len() == 2 {
        ("were", "go", "set them")
    } else {
        ("was", "goes", "set it")
    };
    Some(format!(
        "its {} {was} left at the model's default ({model}) and {go} out as gapless's testbed address ({src} from, {dst} to). Fix: {fix} to send another",
        left.join(" and ")
    ))
}

/// The template being built and its field ops.
#[derive(Default)]
struct Hdr {
    t: Map<String, Value>,
    fields: Vec<Value>,
    /// The (inner) IP header is IPv6.
    v6: bool,
    /// Fields set by hand (`[template.hand]`: [`hand`]).
    hand: Map<String, Value>,
}

impl Hdr {
    /// Reads a pattern into template key `key`; a varying one needs a field op name.
    fn put(
        &mut self,
        key: &str,
        p: Option<&Value>,
        at: String,
        kind: Kind,
        field: Option<&str>,
    ) -> Result<(), Invalid> {
        let pat = read(p, &at, kind, field.unwrap_or(key))?;
        if let Some(op) = pat.op {
            if field.is_none() {
                return Err(Invalid(format!("{at}: only a single value is supported here")));
            }
            self.fields.push(Value::Object(op));
        }
        if let Some(v) = pat.first {
            self.t.insert(key.into(), v);
        }
        Ok(())
    }
}

impl Hdr {
    /// The IP header ends the packet: it leaves so, no layer 4 header after it, its protocol
    /// (next header) the one set, else the model's `auto`: 61 on IPv4, 59 on IPv6.
    fn bare_ip(&mut self, proto: Option<&Value>, at: String) -> Result<(), Invalid> {
        self.t.insert("l4".into(), json!("none"));
        self.put("ip_proto", proto, at, Kind::Int(8), None)
    }
}

/// The packet's headers as the template and its field ops.
fn headers(packet: &Value, path: &str) -> Result<Hdr, Invalid> {
    let mut h = Hdr::default();
    let mut vlans = Vec::new();
    let empty = Vec::new();
    let list = packet.as_array().unwrap_or(&empty);
    if list.is_empty() {
        return Err(Invalid(format!("{path}: give at least an ethernet header")));
    }
    crate::flows::model::gate_packet(list, path)?;
    let (keep, tunnel, outer_ops) = crate::flows::tunnels::split(list, path)?;
    h.fields = outer_ops;
    for (n, &(i, hd)) in keep.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let choice = hd["choice"].as_str().unwrap_or_default();
        let b = &hd[choice];
        let f = |k: &str| b.get(k);
        let p = |k: &str| format!("{at}.{choice}.{k}");
        let after = keep.get(n + 1).map(|k| k.1);
        hand::of_header(choice, b, &at, after, tunnel.is_some(), &mut h.hand)?;
        match choice {
            "ethernet" => {
                h.put("eth_src", f("src"), p("src"), Kind::Mac, Some("mac_src"))?;
                h.put("eth_dst", f("dst"), p("dst"), Kind::Mac, Some("mac_dst"))?;
            }
            "vlan" => vlans.push(vlan(b, &at, vlans.len(), &mut h.fields)?),
            "ipv4" => {
                h.put("ip_src", f("src"), p("src"), Kind::Ipv4, Some("ip_src"))?;
                h.put("ip_dst", f("dst"), p("dst"), Kind::Ipv4, Some("ip_dst"))?;
                h.put("ttl", f("time_to_live"), p("time_to_live"), Kind::Int(8), Some("ttl"))?;
                h.put("ip_id", f("identification"), p("identification"), Kind::Int(16), Some("ip_id"))?;
                dont_fragment(&mut h, f("dont_fragment"), &p("dont_fragment"))?;
                if let Some(o) = ipv4_options::hex(f("options"), &p("options"))? {
                    h.t.insert("ip_options".into(), json!(o));
                }
                priority(&mut h, &b["priority"], &format!("{at}.ipv4.priority"))?;
                h.v6 = false;
                if n + 1 == keep.len() {
                    h.bare_ip(f("protocol"), p("protocol"))?;
                }
            }
            "ipv6" => {
                h.put("ip_src", f("src"), p("src"), Kind::Ipv6, Some("ip_src"))?;
                h.put("ip_dst", f("dst"), p("dst"), Kind::Ipv6, Some("ip_dst"))?;
                h.put("ttl", f("hop_limit"), p("hop_limit"), Kind::Int(8), Some("ttl"))?;
                h.put("flow_label", f("flow_label"), p("flow_label"), Kind::Int(20), Some("flow_label"))?;
                h.put("tos", f("traffic_class"), p("traffic_class"), Kind::Int(8), Some("tos"))?;
                h.v6 = true;
                if n + 1 == keep.len() {
                    h.bare_ip(f("next_header"), p("next_header"))?;
                }
            }
            "udp" | "tcp" => {
                h.t.insert("l4".into(), json!(choice));
                h.put(
                    "src_port",
                    f("src_port"),
                    p("src_port"),
                    Kind::Int(16),
                    Some("src_port"),
                )?;
                h.put(
                    "dst_port",
                    f("dst_port"),
                    p("dst_port"),
                    Kind::Int(16),
                    Some("dst_port"),
                )?;
                if choice == "tcp" {
                    tcp(&mut h, b, &at)?;
                }
            }
            "icmp" | "icmpv6" => icmp_echo(&mut h, b, &at, choice, n.checked_sub(1).map(|m| keep[m].1))?,
            "arp" => {
                let next = keep.get(n + 1).map(|k| k.1);
                arp(&mut h, b, &at, n.checked_sub(1).map(|m| keep[m].1), next)?
            }
            "" => return Err(Invalid(format!("{at}.choice: say which header this is"))),
            other => {
                return Err(Invalid(format!(
                    "{at}.choice: the {other:?} header is not supported (ethernet, vlan, ipv4, ipv6, udp, tcp, icmp, icmpv6, arp, and the tunnels vxlan, gre, mpls, gtpv1)"
                )))
            }
        }
    }
    if !keep
        .iter()
        .any(|k| matches!(k.1["choice"].as_str(), Some("ipv4" | "ipv6" | "arp")))
    {
        return Err(Invalid(format!(
            "{path}: a flow of Ethernet and VLAN headers alone is not sent: gapless builds IPv4, IPv6 or ARP packets, and would otherwise invent an IP header. Fix: add an ipv4, ipv6 or arp header"
        )));
    }
    if !vlans.is_empty() {
        h.t.insert("vlan".into(), json!(vlans));
    }
    if !h.hand.is_empty() {
        h.t.insert("hand".into(), Value::Object(std::mem::take(&mut h.hand)));
    }
    if let Some(t) = tunnel {
        h.t.insert("tunnel".into(), t);
    }
    Ok(h)
}

/// IPv4's don't-fragment bit: the model's default is 0 (gapless's own profiles default to 1).
fn dont_fragment(h: &mut Hdr, p: Option<&Value>, at: &str) -> Result<(), Invalid> {
    let df = read(p, at, Kind::Int(1), "df")?;
    let first = df.first.and_then(|v| v.as_u64()).unwrap_or(0);
    h.t.insert("dont_fragment".into(), json!(first == 1));
    if let Some(op) = df.op {
        h.fields.push(Value::Object(op));
    }
    Ok(())
}

/// IPv4's `priority` (the model's default choice is dscp): `raw` as the TOS byte; `dscp` as
/// its PHB and ECN; `tos` as the byte its parts make. Each may vary but a TOS part: vary the
/// whole byte with `raw` instead.
fn priority(h: &mut Hdr, p: &Value, at: &str) -> Result<(), Invalid> {
    if p.is_null() {
        return Ok(());
    }
    match p["choice"].as_str().unwrap_or("dscp") {
        "raw" => h.put("tos", p.get("raw"), format!("{at}.raw"), Kind::Int(8), Some("tos")),
        "dscp" => {
            let d = &p["dscp"];
            h.put(
                "dscp",
                d.get("phb"),
                format!("{at}.dscp.phb"),
                Kind::Int(6),
                Some("dscp"),
            )?;
            h.put("ecn", d.get("ecn"), format!("{at}.dscp.ecn"), Kind::Int(2), Some("ecn"))
        }
        "tos" => {
            let t = &p["tos"];
            for (k, _, bits) in crate::flows::model::TOS_PARTS {
                let path = format!("{at}.tos.{k}");
                if read(t.get(k), &path, Kind::Int(bits), k)?.op.is_some() {
                    return Err(Invalid(format!(
                        "{path}: a TOS part takes one value. Fix: give priority.raw values to vary the whole TOS byte"
                    )));
                }
            }
            let byte = crate::flows::model::tos_byte(p).unwrap_or(0);
            h.t.insert("tos".into(), json!(byte));
            Ok(())
        }
        other => Err(Invalid(format!(
            "{at}.choice: {other:?} is not a priority (raw, tos or dscp)"
        ))),
    }
}

/// An ICMP (after ipv4) or ICMPv6 (after ipv6) echo request: its identifier and sequence
/// number may vary; type and code are the echo request's, and the checksum is computed.
fn icmp_echo(h: &mut Hdr, b: &Value, at: &str, choice: &str, before: Option<&Value>) -> Result<(), Invalid> {
    let (ip, echo_type) = if choice == "icmp" { ("ipv4", 8) } else { ("ipv6", 128) };
    if before.and_then(|v| v["choice"].as_str()) != Some(ip) {
        return Err(Invalid(format!("{at}: {choice} goes right after an {ip} header")));
    }
    let which = b["choice"].as_str().unwrap_or("echo");
    if which != "echo" {
        return Err(Invalid(format!(
            "{at}.{choice}.choice: {which:?} is not supported (echo: an echo request)"
        )));
    }
    let e = &b["echo"];
    let p = |k: &str| format!("{at}.{choice}.echo.{k}");
    for (k, want) in [("type", echo_type), ("code", 0)] {
        let got = read(e.get(k), &p(k), Kind::Int(8), k)?;
        if got.op.is_some() || got.first.as_ref().is_some_and(|v| v.as_u64() != Some(want)) {
            return Err(Invalid(format!(
                "{}: gapless sends echo requests ({k} {want}); other ICMP messages are not supported",
                p(k)
            )));
        }
    }
    h.t.insert("l4".into(), json!("icmp"));
    h.put(
        "icmp_id",
        e.get("identifier"),
        p("identifier"),
        Kind::Int(16),
        Some("icmp_id"),
    )?;
    h.put(
        "icmp_seq",
        e.get("sequence_number"),
        p("sequence_number"),
        Kind::Int(16),
        Some("icmp_seq"),
    )
}

/// An ARP packet (Ethernet/IPv4, RFC 826) right after the Ethernet header and its VLAN tags,
/// and last: operation, sender and target addresses may vary; the hardware and protocol
/// types and lengths are Ethernet's and IPv4's.
fn arp(h: &mut Hdr, b: &Value, at: &str, before: Option<&Value>, next: Option<&Value>) -> Result<(), Invalid> {
    let kind = |v: Option<&Value>| v.and_then(|v| v["choice"].as_str()).unwrap_or_default().to_string();
    if !matches!(kind(before).as_str(), "ethernet" | "vlan") || next.is_some() {
        return Err(Invalid(format!(
            "{at}: arp goes right after the ethernet header (and its vlan tags), as the last header"
        )));
    }
    let p = |k: &str| format!("{at}.arp.{k}");
    for (k, want) in [
        ("hardware_type", 1),
        ("protocol_type", 0x0800),
        ("hardware_length", 6),
        ("protocol_length", 4),
    ] {
        let got = read(b.get(k), &p(k), Kind::Int(16), k)?;
        if got.op.is_some() || got.first.as_ref().is_some_and(|v| v.as_u64() != Some(want)) {
            return Err(Invalid(format!(
                "{}: gapless sends Ethernet/IPv4 ARP ({k} {want:#x}); give that value or leave it auto",
                p(k)
            )));
        }
    }
    h.t.insert("l4".into(), json!("arp"));
    h.put(
        "arp_op",
        b.get("operation"),
        p("operation"),
        Kind::Int(16),
        Some("arp_op"),
    )?;
    let sha = b.get("sender_hardware_addr");
    h.put("arp_sha", sha, p("sender_hardware_addr"), Kind::Mac, Some("arp_sha"))?;
    let spa = b.get("sender_protocol_addr");
    h.put("ip_src", spa, p("sender_protocol_addr"), Kind::Ipv4, Some("ip_src"))?;
    let tha = b.get("target_hardware_addr");
    h.put("arp_tha", tha, p("target_hardware_addr"), Kind::Mac, Some("arp_tha"))?;
    let tpa = b.get("target_protocol_addr");
    h.put("ip_dst", tpa, p("target_protocol_addr"), Kind::Ipv4, Some("ip_dst"))
}

/// A VLAN tag (the `k`-th), its id and priority possibly varying.
fn vlan(b: &Value, at: &str, k: usize, fields: &mut Vec<Value>) -> Result<Value, Invalid> {
    let p = |key: &str| format!("{at}.vlan.{key}");
    let id = read(b.get("id"), &p("id"), Kind::Int(12), "vlan_id")?;
    let pcp = read(b.get("priority"), &p("priority"), Kind::Int(3), "vlan_pcp")?;
    let dei = read(b.get("cfi"), &p("cfi"), Kind::Int(1), "dei")?;
    let tpid = read(b.get("tpid"), &p("tpid"), Kind::Int(16), "tpid")?;
    for (key, f) in [("cfi", &dei), ("tpid", &tpid)] {
        if f.op.is_some() {
            return Err(Invalid(format!(
                "{}: takes a single value (a tag's {key} is the same in every frame); give `value`",
                p(key)
            )));
        }
    }
    let mut tag = json!({ "id": id.first.unwrap_or(json!(1)) });
    if let Some(v) = pcp.first {
        tag["pcp"] = v;
    }
    if let Some(v) = dei.first {
        tag["dei"] = json!(v.as_u64() == Some(1));
    }
    if let Some(v) = tpid.first {
        tag["tpid"] = v;
    }
    for mut op in [id.op, pcp.op].into_iter().flatten() {
        op.insert("vlan".into(), json!(k));
        fields.push(Value::Object(op));
    }
    Ok(tag)
}

fn tcp(h: &mut Hdr, b: &Value, at: &str) -> Result<(), Invalid> {
    h.put(
        "tcp_seq",
        b.get("seq_num"),
        format!("{at}.tcp.seq_num"),
        Kind::Int(32),
        None,
    )?;
    h.put(
        "tcp_ack",
        b.get("ack_num"),
        format!("{at}.tcp.ack_num"),
        Kind::Int(32),
        None,
    )?;
    h.put(
        "tcp_window",
        b.get("window"),
        format!("{at}.tcp.window"),
        Kind::Int(16),
        None,
    )?;
    let mut flags = String::new();
    for (key, letter, field) in [
        ("ctl_fin", 'F', "tcp_fin"),
        ("ctl_syn", 'S', "tcp_syn"),
        ("ctl_rst", 'R', "tcp_rst"),
        ("ctl_psh", 'P', "tcp_psh"),
        ("ctl_ack", 'A', "tcp_ack"),
        ("ctl_urg", 'U', "tcp_urg"),
        ("ecn_echo", 'E', "tcp_ece"),
        ("ecn_cwr", 'C', "tcp_cwr"),
    ] {
        let bit = read(b.get(key), &format!("{at}.tcp.{key}"), Kind::Int(1), field)?;
        if bit.first.and_then(|v| v.as_u64()) == Some(1) {
            flags.push(letter);
        }
        if let Some(op) = bit.op {
            h.fields.push(Value::Object(op));
        }
    }
    h.t.insert("tcp_flags".into(), json!(flags));
    Ok(())
}

/// `rate` (default 1000 pps) and `duration` (default continuous) as `[stream.timing]`.
fn timing(f: &Value, path: &str) -> Result<Value, Invalid> {
    let r = &f["rate"];
    let choice = r["choice"]
        .as_str()
        .unwrap_or(if r.get("pps").is_some() { "pps" } else { "default" });
    let val = |k: &str| float(&r[k]).ok_or_else(|| Invalid(format!("{path}.rate.{k}: give a number")));
    let mut t = match choice {
        "default" => json!({ "rate_pps": 1000 }),
        "pps" => json!({ "rate_pps": val("pps")? }),
        "bps" => json!({ "rate_bps_l2": val("bps")? }),
        "kbps" => json!({ "rate_bps_l2": val("kbps")? * 1e3 }),
        "mbps" => json!({ "rate_bps_l2": val("mbps")? * 1e6 }),
        "gbps" => json!({ "rate_bps_l2": val("gbps")? * 1e9 }),
        "percentage" => json!({ "rate_pct": val("percentage")? }),
        other => return Err(Invalid(format!("{path}.rate.choice: {other:?} is not supported"))),
    };
    let d = &f["duration"];
    let choice = d["choice"].as_str().unwrap_or("continuous");
    let p = &d[choice];
    match choice {
        "continuous" => {}
        "fixed_packets" => t["count"] = json!(num(&p["packets"]).unwrap_or(1)),
        "fixed_seconds" => t["duration_s"] = json!(float(&p["seconds"]).unwrap_or(1.0)),
        other => {
            return Err(Invalid(format!(
                "{path}.duration.choice: {other:?} is not supported (continuous, fixed_packets or fixed_seconds)"
            )))
        }
    }
    let delay = crate::flows::flow_level::delay_ns(&p["delay"], &format!("{path}.duration.{choice}.delay"))?;
    if delay > 0 {
        t["start_offset_ns"] = json!(delay);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-flow config across two ports with these headers.
    fn with(packet: Value) -> Result<Plan, Invalid> {
        plan(&json!({
            "ports": [{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }],
            "flows": [{ "name": "f", "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": ["p2"] } },
                        "packet": packet }],
        }))
    }

    #[test]
    fn a_delay_in_microseconds_starts_the_stream_late_and_a_payload_pattern_fills_it() {
        let p = plan(&json!({
            "ports": [{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }],
            "flows": [{ "name": "f", "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": ["p2"] } },
                        "packet": [{ "choice": "ethernet" }, { "choice": "ipv4" }, { "choice": "udp" }],
                        "duration": { "choice": "fixed_packets", "fixed_packets": { "packets": 5,
                            "delay": { "choice": "microseconds", "microseconds": 1.5 } } },
                        "payload": { "choice": "fixed", "fixed": { "pattern": "abcd" } } }],
        }))
        .expect("taken");
        let s = &p.groups[0].profile["stream"][0];
        assert_eq!(
            s["timing"]["start_offset_ns"],
            json!(1500),
            "expected 1.5 us as 1500 ns; got {s}"
        );
        assert_eq!(s["template"]["payload"], json!({ "hex": "abcd" }));
    }

    #[test]
    fn a_location_names_only_an_interface_and_a_namespace_the_kernel_takes() {
        assert_eq!(
            location("ns1/veth-a"),
            Some((None, Some("ns1".into()), "veth-a".into()))
        );
        assert_eq!(location("h:7/eth0").map(|l| l.2), Some("eth0".into()));
        for bad in [
            "../veth-a",
            "./veth-a",
            "ns/..",
            "ns/a234567890123456",
            "ns/a b",
            "ns/a:b",
            "a\u{0}b",
            "ns/\u{1b}x",
        ] {
            assert_eq!(location(bad), None, "expected {bad:?} refused");
        }
        let long = format!("{}/eth0", "n".repeat(256));
        assert_eq!(location(&long), None, "expected a namespace name over NAME_MAX refused");
        assert!(location(&format!("{}/eth0", "n".repeat(255))).is_some());
        assert!(location("ns/a23456789012345").is_some(), "15 bytes is the longest name");
    }

    fn eth() -> Value {
        json!({ "choice": "ethernet", "ethernet": {} })
    }

    #[test]
    fn a_flow_of_ethernet_alone_is_refused_not_sent_with_an_invented_ip_header() {
        let cfg = json!({ "ports": [{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }],
                          "flows": [{ "name": "f", "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": ["p2"] } },
                                      "packet": [eth(), { "choice": "vlan", "vlan": {} }] }] });
        let e = plan(&cfg).map(|_| ()).expect_err("refused").0;
        assert!(
            e.starts_with("flows[0].packet: a flow of Ethernet and VLAN headers alone is not sent"),
            "{e}"
        );
    }

    #[test]
    fn a_port_flow_whose_addresses_are_left_out_is_warned_of_the_testbed_pair_it_leaves_with() {
        let flow = |n: &str, ip: Value| {
            json!({ "name": n, "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": ["p2"] } },
                    "size": { "choice": "fixed", "fixed": 128 }, "packet": [eth(), ip, { "choice": "udp", "udp": {} }] })
        };
        let v = |a: &str| json!({ "choice": "value", "value": a });
        let flows = json!([
            flow("bare4", json!({ "choice": "ipv4", "ipv4": {} })),
            flow("src6", json!({ "choice": "ipv6", "ipv6": { "src": v("2001:db8::1") } })),
            flow(
                "both",
                json!({ "choice": "ipv4", "ipv4": { "src": v("10.0.0.1"), "dst": v("10.0.0.2") } })
            ),
        ]);
        let ports = json!([{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }]);
        let w = plan(&json!({ "ports": ports, "flows": flows }))
            .expect("planned")
            .warnings;
        assert_eq!(
            w.len(),
            2,
            "expected one warning per flow with an address left out; got {w:?}"
        );
        assert!(
            w[0].contains("flow \"bare4\": its source and destination were left at the model's default (0.0.0.0)")
                && w[0].contains("198.18.0.1 from, 198.18.0.2 to"),
            "{w:?}"
        );
        assert!(
            w[1].contains("flow \"src6\": its destination was left at the model's default (::)"),
            "{w:?}"
        );
    }

    #[test]
    fn a_flow_to_several_rx_ports_is_metered_on_all_of_them_by_one_meter() {
        let flow = |n: &str, rx: Value| {
            json!({ "name": n, "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": rx } },
                    "packet": [eth(), { "choice": "ipv4", "ipv4": {} }] })
        };
        let ports = json!([{ "name": "p1", "location": "a" }, { "name": "p2", "location": "ns/b" },
                           { "name": "p3", "location": "ns/c" }]);
        let p = plan(&json!({ "ports": ports, "flows": [flow("f", json!(["p2", "p3"])), flow("g", json!(["p3"]))] }))
            .expect("several RX ports are taken");
        let g = &p.groups[0];
        let names: Vec<&str> = g.rx.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            (names, &p.flows[0].2),
            (vec!["p2", "p3"], &vec!["p2".to_string(), "p3".to_string()])
        );
        let run = crate::runs::port_run(&crate::runs::Joint::one(g.clone())).expect("the run is made");
        let rx = run.spec.rx.expect("metered");
        assert_eq!(rx.iface, "b", "the first RX port is the meter's first");
        assert_eq!(
            (rx.more.len(), rx.more[0].iface.as_str(), rx.more[0].netns.as_deref()),
            (1, "c", Some("ns"))
        );
        for (bad, want) in [
            (json!(["p2", "p2"]), "rx_names[1]: port \"p2\" is named twice"),
            (json!(["p2", "p9"]), "rx_names[1]: no port or LAG named \"p9\""),
            (json!([]), "rx_names: give one or more receiving ports"),
        ] {
            let e = plan(&json!({ "ports": ports, "flows": [flow("f", bad)] }))
                .unwrap_err()
                .0;
            assert!(e.contains(want), "expected {want:?}, got {e}");
        }
    }

    #[test]
    fn lldp_agents_are_read_on_the_configs_ports() {
        let cfg = json!({ "ports": [{ "name": "p1", "location": "a" }],
            "lldp": [{ "name": "l1", "connection": { "choice": "port_name", "port_name": "p1" } }] });
        assert_eq!(plan(&cfg).unwrap().lldp[0].port, "p1");
        let bad = json!({ "ports": [{ "name": "p1", "location": "a" }],
            "lldp": [{ "name": "l1", "connection": { "choice": "port_name", "port_name": "p2" } }] });
        let e = plan(&bad).unwrap_err().0;
        assert!(
            e.starts_with("lldp[0].connection.port_name: no port named \"p2\""),
            "{e}"
        );
    }

    #[test]
    fn arp_maps_to_an_arp_template_with_varying_addresses_and_a_misplaced_arp_is_refused() {
        let arp = json!({ "choice": "arp", "arp": {
            "operation": { "choice": "value", "value": 2 },
            "sender_protocol_addr": { "choice": "increment", "increment": { "start": "192.0.2.1", "step": "0.0.0.1", "count": 5 } },
            "target_protocol_addr": { "choice": "value", "value": "192.0.2.200" },
            "hardware_type": { "choice": "value", "value": 1 } } });
        let p = with(json!([eth(), arp.clone()])).unwrap();
        let s = &p.groups[0].profile["stream"][0];
        let t = &s["template"];
        assert_eq!(
            (t["l4"].as_str(), t["arp_op"].as_u64(), t["ip_dst"].as_str()),
            (Some("arp"), Some(2), Some("192.0.2.200")),
            "template: {t}"
        );
        assert!(
            s["field"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["field"] == "ip_src" && f["op"] == "inc"),
            "fields: {}",
            s["field"]
        );
        let e = with(json!([eth(), { "choice": "ipv4", "ipv4": {} }, arp.clone()]))
            .unwrap_err()
            .0;
        assert!(
            e.contains("flows[0].packet[2]: arp goes right after the ethernet header"),
            "{e}"
        );
        let mut bad = arp;
        bad["arp"]["hardware_type"]["value"] = json!(6);
        let e = with(json!([eth(), bad])).unwrap_err().0;
        assert!(e.contains("flows[0].packet[1].arp.hardware_type"), "{e}");
    }

    #[test]
    fn a_flow_from_a_device_on_a_vlan_is_tagged_as_the_device_unless_it_gives_tags() {
        let dev = |k: u32, vlans: Value| {
            json!({ "name": format!("d{k}"), "ethernets": [{ "name": format!("d{k}.eth"), "mac": format!("02:00:00:00:00:0{k}"),
                "connection": { "port_name": format!("p{k}") }, "vlans": vlans,
                "ipv4_addresses": [{ "name": format!("d{k}.ip"), "address": format!("192.0.2.{k}"), "gateway": "192.0.2.9" }] }] })
        };
        let cfg = |packet: Value| {
            json!({
                "ports": [{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }],
                "devices": [dev(1, json!([{ "name": "v", "id": 100, "priority": 3 }])), dev(2, json!([{ "name": "v", "id": 100 }]))],
                "flows": [{ "name": "f", "tx_rx": { "choice": "device", "device": { "tx_names": ["d1.ip"], "rx_names": ["d2.ip"] } },
                            "packet": packet }],
            })
        };
        let p = plan(&cfg(
            json!([eth(), { "choice": "ipv4", "ipv4": {} }, { "choice": "udp", "udp": {} }]),
        ))
        .unwrap();
        let t = &p.groups[0].profile["stream"][0]["template"];
        assert_eq!(
            t["vlan"],
            json!([{ "id": 100, "tpid": 0x8100, "pcp": 3 }]),
            "template: {t}"
        );
        assert_eq!(
            (t["ip_src"].as_str(), t["eth_src"].as_str()),
            (Some("192.0.2.1"), Some("02:00:00:00:00:01"))
        );
        let own = json!([eth(), { "choice": "vlan", "vlan": { "id": { "choice": "value", "value": 7 } } },
                         { "choice": "ipv4", "ipv4": {} }, { "choice": "udp", "udp": {} }]);
        let p = plan(&cfg(own)).unwrap();
        assert_eq!(p.groups[0].profile["stream"][0]["template"]["vlan"][0]["id"], json!(7));
    }

    #[test]
    fn icmp_echo_maps_to_an_icmp_template_and_other_messages_are_refused_with_their_path() {
        let ok = with(json!([eth(), { "choice": "ipv4", "ipv4": {} },
            { "choice": "icmp", "icmp": { "choice": "echo", "echo": {
                "identifier": { "choice": "value", "value": 9 },
                "sequence_number": { "choice": "increment", "increment": { "start": 1, "step": 1, "count": 4 } } } } }]));
        let toml = format!("{:?}", ok.expect("an ICMP echo flow is served").groups[0]);
        assert!(
            toml.contains("icmp") && toml.contains("icmp_seq"),
            "expected l4 icmp and an icmp_seq op; got {toml}"
        );
        let e = with(json!([eth(), { "choice": "ipv4", "ipv4": {} },
            { "choice": "icmp", "icmp": { "choice": "echo", "echo": { "type": { "choice": "value", "value": 0 } } } }]))
        .err()
        .unwrap()
        .0;
        assert!(
            e.contains("flows[0].packet[2].icmp.echo.type") && e.contains("echo requests"),
            "{e}"
        );
        let e = with(json!([eth(), { "choice": "ipv4", "ipv4": {} }, { "choice": "icmpv6", "icmpv6": {} }]))
            .err()
            .unwrap()
            .0;
        assert!(
            e.contains("flows[0].packet[2]: icmpv6 goes right after an ipv6 header"),
            "{e}"
        );
    }

    fn v(x: u64) -> Value {
        json!({ "choice": "value", "value": x })
    }

    #[test]
    fn tunnels_become_the_templates_tunnel_and_outer_fields_take_every_pattern() {
        let ip = |src: &str| json!({ "choice": "ipv4", "ipv4": { "src": { "choice": "value", "value": src } } });
        let udp = json!({ "choice": "udp", "udp": {} });
        let vx = with(
            json!([eth(), ip("192.0.2.1"), udp, { "choice": "vxlan", "vxlan": { "vni": v(4660) } },
            eth(), ip("10.0.0.1"), { "choice": "udp", "udp": { "src_port": { "choice": "increment", "increment": { "start": 5, "count": 3 } } } }]),
        );
        let text = format!("{:?}", vx.expect("a VXLAN flow is served").groups[0]);
        for want in ["vxlan", "4660", "192.0.2.1", "10.0.0.1", "src_port"] {
            assert!(text.contains(want), "expected {want} in the plan; got {text}");
        }
        let mpls = with(
            json!([eth(), { "choice": "mpls", "mpls": { "label": v(100) } }, { "choice": "mpls", "mpls": { "label": v(200) } }, ip("10.0.0.1"), udp]),
        );
        let text = format!("{:?}", mpls.expect("an MPLS flow is served").groups[0]);
        assert!(
            text.contains("100") && text.contains("200") && text.contains("mpls"),
            "{text}"
        );
        let e = with(json!([eth(), ip("192.0.2.1"), { "choice": "gre", "gre": { "checksum_present": v(1) } }, ip("10.0.0.1"), udp])).err().unwrap().0;
        assert!(
            e.contains("flows[0].packet[2].gre.checksum_present") && e.contains("not supported"),
            "{e}"
        );
        // Every pattern on outer fields, over IPv6 too: the first value in the tunnel, the
        // rest as field ops on the outer fields.
        let ip6 = json!({ "choice": "ipv6", "ipv6": { "src": { "choice": "increment", "increment": { "start": "2001:db8::1", "step": "::1", "count": 4 } },
            "dst": { "choice": "value", "value": "2001:db8::2" } } });
        let oudp = json!({ "choice": "udp", "udp": { "src_port": { "choice": "increment", "increment": { "start": 49152, "count": 8 } } } });
        let vni = json!({ "choice": "vxlan", "vxlan": { "vni": { "choice": "values", "values": [100, 200, 300] } } });
        let p = with(json!([eth(), ip6, oudp, vni, eth(), ip("10.0.0.1"), udp]))
            .expect("VXLAN over IPv6 with varying outer fields");
        let s = &p.groups[0].profile["stream"][0];
        let t = &s["template"]["tunnel"];
        assert_eq!(
            (
                t["ip_src"].as_str(),
                t["ip_dst"].as_str(),
                t["src_port"].as_u64(),
                t["vni"].as_u64()
            ),
            (Some("2001:db8::1"), Some("2001:db8::2"), Some(49152), Some(100)),
            "{t}"
        );
        let fields: Vec<&str> = s["field"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, ["outer_ip_src", "outer_src_port", "vni"], "{s}");
        assert_eq!(s["field"][2]["values"], json!([100, 200, 300]));
        let labels = json!([eth(), { "choice": "mpls", "mpls": { "label": v(100) } },
            { "choice": "mpls", "mpls": { "label": { "choice": "decrement", "decrement": { "start": 300, "step": 10, "count": 3 } } } }, ip("10.0.0.1"), udp]);
        let p = with(labels).expect("an MPLS flow with a varying inner label");
        let f = &p.groups[0].profile["stream"][0]["field"][0];
        assert_eq!(
            (f["field"].as_str(), f["label"].as_u64(), f["op"].as_str()),
            (Some("mpls_label"), Some(1), Some("dec")),
            "{f}"
        );
        let e = with(json!([eth(), ip("192.0.2.1"), { "choice": "mpls", "mpls": {} }, ip("10.0.0.1"), udp]))
            .err()
            .unwrap()
            .0;
        assert!(e.contains("mpls goes after ethernet"), "{e}");
        let e = with(json!([eth(), ip("192.0.2.1"), { "choice": "vxlan", "vxlan": {} }, eth(), ip("10.0.0.1"), udp]))
            .err()
            .unwrap()
            .0;
        assert!(
            e.contains("flows[0].packet[2]: vxlan goes after ethernet, ipv4, udp"),
            "{e}"
        );
    }

    #[test]
    fn a_flow_runs_between_ospfv3_ranges_as_between_ospfv2_ranges() {
        let mut cfg = json!({ "devices": [{ "name": "d1", "ospfv3": { "router_id": { "choice": "auto" }, "instances": [{ "name": "o6",
            "interfaces": [{ "name": "i6", "ipv6_name": "a6", "network_type": { "choice": "point_to_point" } }],
            "v6_routes": [{ "name": "r6", "metric": 20, "addresses": [{ "address": "2001:db8:10::", "prefix": 64, "count": 2 }] }] }] } }] });
        cfg["ports"] = json!([{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }]);
        cfg["devices"][0]["ethernets"] = json!([{ "name": "e1", "connection": { "port_name": "p1" }, "mac": "02:00:00:00:00:01",
            "ipv6_addresses": [{ "name": "a6", "address": "2001:db8::1:2", "gateway": "2001:db8::2", "prefix": 64 }] }]);
        let mut d2 = cfg["devices"][0].clone();
        d2["name"] = json!("d2");
        d2["ethernets"] = json!([{ "name": "e2", "connection": { "port_name": "p2" }, "mac": "02:00:00:00:00:02",
            "ipv6_addresses": [{ "name": "b6", "address": "2001:db8::2", "gateway": "2001:db8::1:2", "prefix": 64 }] }]);
        d2["ospfv3"]["instances"][0]["name"] = json!("o6b");
        d2["ospfv3"]["instances"][0]["interfaces"][0]["ipv6_name"] = json!("b6");
        d2["ospfv3"]["instances"][0]["v6_routes"] =
            json!([{ "name": "s6", "addresses": [{ "address": "2001:db8:20::", "prefix": 64 }] }]);
        cfg["devices"].as_array_mut().unwrap().push(d2);
        cfg["flows"] = json!([
            { "name": "f", "tx_rx": { "choice": "device", "device": { "tx_names": ["r6"], "rx_names": ["s6"] } },
              "packet": [{ "choice": "ethernet" }, { "choice": "ipv6" }] },
            { "name": "back", "tx_rx": { "choice": "device", "device": { "tx_names": ["s6"], "rx_names": ["r6"] } },
              "packet": [{ "choice": "ethernet" }, { "choice": "ipv6" }] }
        ]);
        let plan = plan(&cfg).expect("flows between OSPFv3 ranges are planned");
        let ends: Vec<(String, String)> = plan
            .groups
            .iter()
            .map(|g| {
                let t = &g.profile["stream"][0]["template"];
                (t["ip_src"].to_string(), t["ip_dst"].to_string())
            })
            .collect();
        assert_eq!(
            ends,
            vec![
                ("\"2001:db8:10::\"".into(), "\"2001:db8:20::\"".into()),
                ("\"2001:db8:20::\"".into(), "\"2001:db8:10::\"".into())
            ],
            "each range's first address at each end, one group per TX port"
        );
    }

    #[test]
    fn a_device_on_a_lag_sends_its_flows_on_the_lag_and_one_on_a_member_is_refused() {
        let member = |p: &str, m: &str| json!({ "port_name": p, "ethernet": { "name": format!("{p}.eth"), "mac": m } });
        let dev = |name: &str, conn: Value, ip: &str, gw: &str| {
            json!({ "name": name, "ethernets": [{ "name": format!("{name}.eth"), "connection": conn, "mac": "02:00:00:00:00:0d",
                "ipv4_addresses": [{ "name": format!("{name}.ip"), "address": ip, "gateway": gw, "prefix": 24 }] }] })
        };
        let mut cfg = json!({
            "ports": [{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }, { "name": "p3", "location": "c" }],
            "lags": [{ "name": "l1", "ports": [member("p1", "02:00:00:00:01:01"), member("p2", "02:00:00:00:01:02")] }],
            "devices": [dev("d1", json!({ "choice": "lag_name", "lag_name": "l1" }), "10.0.0.1", "10.0.0.2"),
                        dev("d2", json!({ "port_name": "p3" }), "10.0.0.2", "10.0.0.1")],
            "flows": [{ "name": "f", "tx_rx": { "choice": "device", "device": { "tx_names": ["d1.ip"], "rx_names": ["d2.ip"] } },
                        "packet": [{ "choice": "ethernet" }, { "choice": "ipv4" }] },
                      { "name": "g", "tx_rx": { "choice": "device", "device": { "tx_names": ["d2.ip"], "rx_names": ["d1.ip"] } },
                        "packet": [{ "choice": "ethernet" }, { "choice": "ipv4" }] }]
        });
        let p = plan(&cfg).expect("a device on a LAG is planned");
        assert!(
            p.devices[0].on_lag && p.devices[0].port == "l1" && !p.devices[1].on_lag,
            "{:?}",
            p.devices
        );
        let g = &p.groups[0];
        assert_eq!(
            (g.tx.name.as_str(), g.tx.members.len()),
            ("l1", 2),
            "expected d1's flow sent on the LAG's two members"
        );
        assert_eq!(
            p.groups[1].rx[0].name, "l1",
            "expected d2's flow to d1 metered on the LAG"
        );
        cfg["devices"][0]["ethernets"][0]["connection"] = json!({ "lag_name": "l9" });
        let e = plan(&cfg).unwrap_err().0;
        assert!(
            e.contains("\"d1.eth\" is on LAG \"l9\" (connection.lag_name), which the config does not have"),
            "{e}"
        );
        cfg["devices"][0]["ethernets"][0]["connection"] = json!({ "port_name": "p2" });
        let e = plan(&cfg).unwrap_err().0;
        assert!(
            e.contains("\"d1.eth\" is on port \"p2\", a member of LAG \"l1\"")
                && e.contains("connection.lag_name \"l1\""),
            "{e}"
        );
        cfg["devices"][0]["ethernets"][0]["connection"] = json!({ "port_name": "p3", "lag_name": "l1" });
        let e = plan(&cfg).unwrap_err().0;
        assert!(
            e.contains("devices[0].ethernets[0].connection: give port_name or lag_name, not both"),
            "{e}"
        );
        cfg["devices"][0]["ethernets"][0]["connection"] =
            json!({ "choice": "lag_name", "port_name": "p3", "lag_name": "l1" });
        assert!(plan(&cfg).is_ok(), "expected connection.choice to say which one counts");
    }
}
