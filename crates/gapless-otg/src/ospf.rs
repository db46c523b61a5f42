//! OTG OSPFv2 (`devices[].ospfv2`) and OSPFv3 (`devices[].ospfv3`, one instance) read and
//! checked, and written as zebra's and ospfd's (ospf6d's) configurations, in the namespace of the device Ethernet its interfaces are on
//! (DESIGN-NOTES 71). A route range is a stub interface (a veth pair inside the namespace)
//! holding one address in each of its prefixes, because that is how FRR originates what OTG
//! asks (../shared/FRR.md): `inter_area` (OTG's default) has the stub in a second area, which
//! makes the router an ABR (`abr-type standard`) that sends each prefix as a summary (type-3)
//! LSA; `intra_area` has it in the interface's area, as stub links of the router LSA;
//! `external_type_1`/`_2` keeps it out of OSPF and redistributes its connected prefixes with
//! the range's metric and type (type-5 LSAs). The range's metric is the stub's cost.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;

use crate::bgp::Block;
use crate::devices::Eth;
use crate::error::Invalid;

pub mod frr_json;
pub mod vty;
pub mod wire;

/// A device's OSPFv2 or OSPFv3 router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    pub name: String,
    /// OSPFv3 (ospf6d, IPv6 ranges).
    pub v6: bool,
    pub device: String,
    /// The device Ethernet its interfaces are on (its namespace runs the daemons).
    pub eth: String,
    pub router_id: Ipv4Addr,
    pub interfaces: Vec<Interface>,
    pub ranges: Vec<Range>,
    pub retransmit_s: u32,
    pub refresh_s: Option<u32>,
}

/// One OSPF interface (on the router's Ethernet, which has one interface in its namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub area: Ipv4Addr,
    pub p2p: bool,
    pub hello_s: u32,
    pub dead_s: u32,
    pub cost: u32,
    pub priority: u32,
    pub mtu_check: bool,
}

/// How a range is originated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    IntraArea,
    InterArea,
    External(u8),
}

/// A route range the router announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub name: String,
    pub blocks: Vec<Block>,
    pub metric: u32,
    pub origin: Origin,
}

/// A stub interface the router's namespace needs: its name and addresses (one per prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stub {
    pub name: String,
    pub addrs: Vec<(IpAddr, u8)>,
}

/// Keys gapless does not emulate: refused when set.
const UNSUPPORTED: [&str; 1] = ["graceful_restart"];
const ITF_UNSUPPORTED: [&str; 4] = [
    "authentication",
    "traffic_engineering",
    "link_protection",
    "srlg_values",
];

/// Every device's OSPFv2 and OSPFv3 router, checked against the device Ethernets.
pub fn parse(cfg: &Value, eths: &[Eth]) -> Result<Vec<Router>, Invalid> {
    let mut out: Vec<Router> = Vec::new();
    for (i, d) in cfg["devices"].as_array().into_iter().flatten().enumerate() {
        let mut found = Vec::new();
        if !d["ospfv2"].is_null() {
            found.push(router(&d["ospfv2"], &format!("devices[{i}].ospfv2"), d, eths, false)?);
        }
        if !d["ospfv3"].is_null() {
            found.push(v3_router(&d["ospfv3"], &format!("devices[{i}].ospfv3"), d, eths)?);
        }
        for r in found {
            if out.iter().any(|o| o.name == r.name) {
                return Err(Invalid(format!(
                    "devices[{i}]: the OSPF router name {:?} is another router's",
                    r.name
                )));
            }
            out.push(r);
        }
    }
    Ok(out)
}

/// `devices[].ospfv3`: its router id, and its one instance as a router.
fn v3_router(x: &Value, at: &str, d: &Value, eths: &[Eth]) -> Result<Router, Invalid> {
    let inst = match x["instances"].as_array().map(Vec::as_slice) {
        Some([one]) => one,
        _ => {
            return Err(Invalid(format!(
                "{at}.instances: give one instance (FRR's ospf6d runs one per namespace)"
            )))
        }
    };
    let mut r = router(inst, &format!("{at}.instances[0]"), d, eths, true)?;
    if x["router_id"]["choice"].as_str() == Some("custom") {
        r.router_id = x["router_id"]["custom"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Invalid(format!("{at}.router_id.custom: give an IPv4 router id")))?;
    }
    Ok(r)
}

fn router(x: &Value, at: &str, d: &Value, eths: &[Eth], v6: bool) -> Result<Router, Invalid> {
    if let Some(k) = UNSUPPORTED.iter().find(|k| !x[**k].is_null()) {
        return Err(Invalid(format!(
            "{at}.{k}: not supported (gapless drives FRR's ospfd). Fix: leave {k} out"
        )));
    }
    let device = d["name"].as_str().unwrap_or_default().to_string();
    let name = x["name"]
        .as_str()
        .filter(|n| crate::frr::gate::word(n))
        .ok_or_else(|| Invalid(format!("{at}.name: give the OSPFv2 router a name without spaces")))?;
    let mut interfaces = Vec::new();
    let mut on: Option<(&Eth, Ipv4Addr)> = None;
    for (j, itf) in x["interfaces"].as_array().into_iter().flatten().enumerate() {
        let ia = format!("{at}.interfaces[{j}]");
        let (eth, ip) = interface_eth(itf, &ia, &device, eths, v6)?;
        if let Some((o, _)) = on.filter(|(o, _)| o.name != eth.name) {
            return Err(Invalid(format!(
                "{ia}.ipv4_name: the router's interfaces are on Ethernets {:?} and {:?}; one ospfd serves one Ethernet's namespace. Fix: one Ethernet per OSPFv2 router",
                o.name, eth.name
            )));
        }
        if !interfaces.is_empty() {
            return Err(Invalid(format!(
                "{ia}: an Ethernet has one interface in its namespace; give the router one OSPFv2 interface"
            )));
        }
        on.get_or_insert((eth, ip));
        interfaces.push(interface(itf, &ia, v6)?);
    }
    let (eth, first_ip) = on.ok_or_else(|| Invalid(format!("{at}.interfaces: give one interface")))?;
    let router_id = match x["router_id"]["choice"].as_str().unwrap_or("interface_ip") {
        "custom" => x["router_id"]["custom"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Invalid(format!("{at}.router_id.custom: give an IPv4 router id")))?,
        _ => first_ip,
    };
    Ok(Router {
        name: name.to_string(),
        v6,
        device,
        eth: eth.name.clone(),
        router_id,
        ranges: ranges(x, at, v6)?,
        interfaces,
        retransmit_s: x["lsa_retransmit_time"].as_u64().unwrap_or(5).clamp(1, 65_535) as u32,
        refresh_s: x["lsa_refresh_time"].as_u64().map(|v| v.clamp(10, 1800) as u32),
    })
}

/// The interface's Ethernet, and a router id from its address: the IPv4 address itself, or
/// an IPv6 address's last 32 bits (OSPFv3's `auto`; FRR needs one and an IPv6-only
/// namespace has none to give).
fn interface_eth<'a>(
    itf: &Value,
    at: &str,
    device: &str,
    eths: &'a [Eth],
    v6: bool,
) -> Result<(&'a Eth, Ipv4Addr), Invalid> {
    let (key, v) = if v6 { ("ipv6_name", 6) } else { ("ipv4_name", 4) };
    let name = itf[key].as_str().unwrap_or_default();
    match crate::devices::find(eths, name) {
        Some((e, a)) if e.device == device && a.ip.is_ipv6() == v6 => match a.ip {
            IpAddr::V4(ip) => Ok((e, ip)),
            IpAddr::V6(ip) => Ok((e, Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32))),
        },
        _ => Err(Invalid(format!(
            "{at}.{key}: no IPv{v} address named {name:?} on device {device:?}"
        ))),
    }
}

fn interface(itf: &Value, at: &str, v6: bool) -> Result<Interface, Invalid> {
    if let Some(k) = ITF_UNSUPPORTED
        .iter()
        .find(|k| !itf[**k].is_null() && itf[**k] != Value::Array(vec![]))
    {
        return Err(Invalid(format!(
            "{at}.{k}: not supported (gapless drives FRR's ospfd). Fix: leave {k} out"
        )));
    }
    let name = itf["name"]
        .as_str()
        .ok_or_else(|| Invalid(format!("{at}.name: every OSPFv2 interface needs a name")))?;
    let area = match itf["area"]["choice"].as_str().unwrap_or("id") {
        "ip" => itf["area"]["ip"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Invalid(format!("{at}.area.ip: give the area as an IPv4 address")))?,
        _ => Ipv4Addr::from(itf["area"]["id"].as_u64().unwrap_or(0).min(u64::from(u32::MAX)) as u32),
    };
    let p2p = match itf["network_type"]["choice"].as_str().unwrap_or("broadcast") {
        "broadcast" => false,
        "point_to_point" => true,
        other => {
            return Err(Invalid(format!(
                "{at}.network_type.choice: {other:?} is not supported (broadcast or point_to_point)"
            )))
        }
    };
    let adv = &itf["advanced"];
    let hello = adv["hello_interval"].as_u64().unwrap_or(10).clamp(1, 65_535);
    let dead = adv["dead_interval"].as_u64().unwrap_or(40);
    if dead <= hello || dead > 65_535 {
        return Err(Invalid(format!(
            "{at}.advanced.dead_interval: {dead} s for a hello_interval of {hello} s; give more than the hello interval"
        )));
    }
    Ok(Interface {
        name: name.to_string(),
        area,
        p2p,
        hello_s: hello as u32,
        dead_s: dead as u32,
        cost: adv[if v6 { "link_metric" } else { "routing_metric" }]
            .as_u64()
            .unwrap_or(10)
            .clamp(1, 65_535) as u32,
        priority: adv["priority"].as_u64().unwrap_or(0).min(255) as u32,
        mtu_check: adv["validate_received_mtu"].as_bool().unwrap_or(true),
    })
}

fn ranges(x: &Value, at: &str, v6: bool) -> Result<Vec<Range>, Invalid> {
    let mut out = Vec::new();
    let mut listed = Vec::new();
    let key = if v6 { "v6_routes" } else { "v4_routes" };
    for (k, r) in x[key].as_array().into_iter().flatten().enumerate() {
        let ra = format!("{at}.{key}[{k}]");
        let name = r["name"]
            .as_str()
            .ok_or_else(|| Invalid(format!("{ra}.name: every route range needs a name (flows name it)")))?;
        let mut blocks = Vec::new();
        for (b, a) in r["addresses"].as_array().into_iter().flatten().enumerate() {
            let block = crate::bgp::block(a, &format!("{ra}.addresses[{b}]"), v6)?;
            if block.count > 4096 {
                return Err(Invalid(format!(
                    "{ra}.addresses[{b}].count: {} prefixes; a range is a stub interface with an address in each, at most 4096",
                    block.count
                )));
            }
            blocks.push(block);
        }
        if blocks.is_empty() {
            return Err(Invalid(format!("{ra}.addresses: give at least one address block")));
        }
        let origin = match r["route_origin"]["choice"].as_str().unwrap_or("inter_area") {
            "intra_area" => Origin::IntraArea,
            "inter_area" => Origin::InterArea,
            "external_type_1" => Origin::External(1),
            "external_type_2" => Origin::External(2),
            other => {
                return Err(Invalid(format!(
                    "{ra}.route_origin.choice: {other:?} is not supported (intra_area, inter_area, external_type_1 or external_type_2; no NSSA)"
                )))
            }
        };
        let metric = r["metric"].as_u64().unwrap_or(0);
        if metric > 65_535 {
            return Err(Invalid(format!("{ra}.metric: {metric} is above 65535")));
        }
        if let Origin::External(_) = origin {
            listed.extend(
                blocks
                    .iter()
                    .enumerate()
                    .map(|(b, x)| (format!("{ra}.addresses[{b}]"), x.clone())),
            );
        }
        out.push(Range {
            name: name.to_string(),
            blocks,
            metric: metric as u32,
            origin,
        });
    }
    crate::bgp::check_listed(listed.iter().map(|(at, b)| (at.clone(), b)))?;
    Ok(out)
}

/// The range a flow end names, with its router.
pub fn find_range<'a>(routers: &'a [Router], name: &str) -> Option<(&'a Router, &'a Range)> {
    routers
        .iter()
        .find_map(|r| r.ranges.iter().find(|x| x.name == name).map(|x| (r, x)))
}

/// The area an inter-area range's stub is in: one the router's interface is not in, so
/// that the router is an ABR between the backbone and it.
pub fn stub_area(interface_area: Ipv4Addr) -> Ipv4Addr {
    if interface_area == Ipv4Addr::UNSPECIFIED {
        Ipv4Addr::new(0, 0, 0, 1)
    } else {
        Ipv4Addr::UNSPECIFIED
    }
}

/// The area of the stub interface of the router's range `k`: the interface's for an
/// intra-area range, [`stub_area`] for an inter-area one, none for an external one (its stub
/// is in no area; it is redistributed).
pub fn range_area(r: &Router, k: usize) -> Option<Ipv4Addr> {
    let itf_area = r.interfaces.first()?.area;
    match r.ranges.get(k)?.origin {
        Origin::IntraArea => Some(itf_area),
        Origin::InterArea => Some(stub_area(itf_area)),
        Origin::External(_) => None,
    }
}

/// The stub interface of the router's range `k`.
pub fn stub_name(r: &Router, k: usize) -> String {
    // OSPFv2's and OSPFv3's apart: one device may run both, each with its own ranges.
    if r.v6 {
        format!("gl6r{k}")
    } else {
        format!("glr{k}")
    }
}

/// The stub interfaces the router's ranges need, one per range (`glr<k>`, OSPFv3's `gl6r<k>`): an address in
/// each prefix (its first host address; the prefix itself for a /31 or /32).
pub fn stubs(r: &Router) -> Vec<Stub> {
    r.ranges
        .iter()
        .enumerate()
        .map(|(k, x)| Stub {
            name: stub_name(r, k),
            addrs: x
                .blocks
                .iter()
                .flat_map(Block::prefixes)
                .map(|(net, len)| match net {
                    IpAddr::V4(a) if len < 31 => (IpAddr::V4(Ipv4Addr::from(u32::from(a) + 1)), len),
                    IpAddr::V6(a) if len < 127 => (IpAddr::V6(std::net::Ipv6Addr::from(u128::from(a) + 1)), len),
                    other => (other, len),
                })
                .collect(),
        })
        .collect()
}

/// The configurations of zebra and ospfd, in the order they start; `ifname` is the router's
/// Ethernet's interface in its namespace.
pub fn frr_configs(r: &Router, ifname: &str) -> Vec<(&'static str, String)> {
    let zebra = format!("hostname {}\n!\n", r.name);
    if r.v6 {
        return vec![("zebra", zebra), ("ospf6d", ospf6d(r, ifname))];
    }
    vec![("zebra", zebra), ("ospfd", ospfd(r, ifname))]
}

/// ospf6d's configuration: as ospfd's, in its own words (`ipv6 ospf6 …`; no priority, no
/// `abr-type`, no LSA origination throttle in FRR 8.4).
fn ospf6d(r: &Router, ifname: &str) -> String {
    let mut c = format!("hostname {}\n!\n", r.name);
    let itf = &r.interfaces[0];
    let _ = writeln!(c, "interface {ifname}\n ipv6 ospf6 area {}", itf.area);
    if itf.p2p {
        c.push_str(" ipv6 ospf6 network point-to-point\n");
    }
    let _ = writeln!(
        c,
        " ipv6 ospf6 hello-interval {}\n ipv6 ospf6 dead-interval {}\n ipv6 ospf6 cost {}\n ipv6 ospf6 retransmit-interval {}",
        itf.hello_s, itf.dead_s, itf.cost, r.retransmit_s
    );
    if !itf.mtu_check {
        c.push_str(" ipv6 ospf6 mtu-ignore\n");
    }
    c.push_str("!\n");
    let external = stub_lines(&mut c, r, |area, k, cost| {
        format!(
            "interface {}\n ipv6 ospf6 area {area}\n ipv6 ospf6 passive\n ipv6 ospf6 cost {cost}\n!",
            stub_name(r, k)
        )
    });
    let _ = writeln!(c, "router ospf6\n ospf6 router-id {}", r.router_id);
    c.push_str(" log-adjacency-changes\n timers lsa min-arrival 0\n");
    if external {
        c.push_str(" redistribute connected route-map GL-OSPF-EXT\n");
    }
    c.push_str("!\n");
    c
}

/// Each range's lines: its stub interface's (`stub(area, k, cost)`), or for an external one
/// its prefix-list and route-map entry; whether any range is external.
fn stub_lines(c: &mut String, r: &Router, stub: impl Fn(Ipv4Addr, usize, u32) -> String) -> bool {
    let itf = &r.interfaces[0];
    let kw = if r.v6 { "ipv6" } else { "ip" };
    let mut maps = String::new();
    for (k, x) in r.ranges.iter().enumerate() {
        let area = match x.origin {
            Origin::IntraArea | Origin::InterArea => range_area(r, k).unwrap_or(itf.area),
            Origin::External(t) => {
                for b in &x.blocks {
                    for (net, len) in b.cover() {
                        let _ = writeln!(c, "{kw} prefix-list GL-OSPF-PL-{k} permit {net}/{len}{}", b.exact(len));
                    }
                }
                let _ = writeln!(
                    maps,
                    "route-map GL-OSPF-EXT permit {}\n match {kw} address prefix-list GL-OSPF-PL-{k}\n set metric {}\n set metric-type type-{t}",
                    10 + k,
                    x.metric
                );
                continue;
            }
        };
        let _ = writeln!(c, "{}", stub(area, k, x.metric.max(1)));
    }
    c.push_str(&maps);
    !maps.is_empty()
}

fn ospfd(r: &Router, ifname: &str) -> String {
    let mut c = format!("hostname {}\n!\n", r.name);
    let itf = &r.interfaces[0];
    let _ = writeln!(c, "interface {ifname}\n ip ospf area {}", itf.area);
    if itf.p2p {
        c.push_str(" ip ospf network point-to-point\n");
    }
    let _ = writeln!(
        c,
        " ip ospf hello-interval {}\n ip ospf dead-interval {}\n ip ospf cost {}\n ip ospf priority {}\n ip ospf retransmit-interval {}",
        itf.hello_s, itf.dead_s, itf.cost, itf.priority, r.retransmit_s
    );
    if !itf.mtu_check {
        c.push_str(" ip ospf mtu-ignore\n");
    }
    c.push_str("!\n");
    let external = stub_lines(&mut c, r, |area, k, cost| {
        format!(
            "interface {}\n ip ospf area {area}\n ip ospf passive\n ip ospf cost {cost}\n!",
            stub_name(r, k)
        )
    });
    let _ = writeln!(
        c,
        "router ospf\n ospf router-id {}\n ospf abr-type standard",
        r.router_id
    );
    // LSAs may be originated again after 100 ms rather than RFC 2328's 5 s MinLSInterval, and
    // taken at any rate rather than one per 1 s (MinLSArrival): with FRR's defaults the peer's
    // router LSA with its p2p link came 10 s after Full here; with these, 1.4 s after the config.
    c.push_str(" log-adjacency-changes\n timers throttle lsa all 100\n timers lsa min-arrival 0\n");
    if let Some(s) = r.refresh_s {
        let _ = writeln!(c, " refresh timer {s}");
    }
    if external {
        c.push_str(" redistribute connected route-map GL-OSPF-EXT\n");
    }
    c.push_str("!\n");
    c
}

#[cfg(test)]
pub(crate) mod tests;
