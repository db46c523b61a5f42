//! OTG IS-IS (`devices[].isis`) read and checked, and written as the configurations of the
//! FRR daemons that run it: zebra (isisd learns its interfaces from it) and isisd, in the
//! namespace of the device Ethernet its interfaces are on (DESIGN-NOTES 69); each route range
//! is a set of blackhole routes in that namespace's kernel table ([`kernel_routes`]), which
//! zebra reads and isisd redistributes (DESIGN-NOTES 77). What a tester needs from isisd, each
//! measured in ../shared/FRR.md or here: LSPs regenerated 1 s after a change rather than 30
//! (`lsp-gen-interval 1`), each range's metric set by a route-map on redistribution, the
//! levels a range is announced at those the router runs.

use std::fmt::Write;
use std::net::IpAddr;

use serde_json::Value;

use crate::bgp::Block;
use crate::devices::Eth;
use crate::error::Invalid;

pub mod auth;
pub mod frr_text;
pub mod vty;
pub mod wire;

/// The one IS-IS instance's area tag in each isisd.
pub const AREA_TAG: &str = "gl";

/// A device's IS-IS router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    /// `isis.name`: what metrics, states and control name it by.
    pub name: String,
    pub device: String,
    /// The device Ethernet its interfaces are on (its namespace runs the daemons).
    pub eth: String,
    /// Twelve hex digits.
    pub system_id: String,
    pub hostname: String,
    /// Area addresses as FRR writes them (`49.0001`).
    pub areas: Vec<String>,
    pub wide: bool,
    pub interfaces: Vec<Interface>,
    pub ranges: Vec<Range>,
    pub lsp_refresh_s: Option<u32>,
    pub lsp_lifetime_s: Option<u32>,
    pub attached: bool,
    /// `router_auth`: the area (L1) and domain (L2) keys.
    pub auth: auth::RouterAuth,
}

/// One IS-IS interface: on the router's Ethernet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub metric: u32,
    pub p2p: bool,
    /// 1, 2, or 3 for both.
    pub levels: u8,
    /// Per level (L1, L2): hello interval and multiplier (dead / hello), priority.
    pub hello: [(u32, u32, u32); 2],
    pub padding: bool,
    pub v4: bool,
    pub v6: bool,
    /// `authentication`: the key of its hellos.
    pub auth: Option<auth::Auth>,
}

/// A route range the router announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub name: String,
    pub v6: bool,
    pub blocks: Vec<Block>,
    pub metric: u32,
}

impl Router {
    /// The levels the router runs at: those of its interfaces (1, 2 or 3 for both).
    pub fn levels(&self) -> u8 {
        self.interfaces.iter().fold(0, |l, i| l | i.levels)
    }

    /// Its system id as FRR prints it: `6400.0000.0001`.
    pub fn dotted_id(&self) -> String {
        dotted(&self.system_id)
    }
}

/// Twelve hex digits as FRR prints a system id.
pub fn dotted(id: &str) -> String {
    format!("{}.{}.{}", &id[0..4], &id[4..8], &id[8..12])
}

/// Keys gapless does not emulate: refused when set.
const UNSUPPORTED: [&str; 3] = ["segment_routing", "graceful_restart", "instance"];
const ITF_UNSUPPORTED: [&str; 5] = [
    "traffic_engineering",
    "link_protection",
    "adjacency_sids",
    "srv6_adjacency_sids",
    "multi_topology_ids",
];

/// Every device's IS-IS router, checked against the device Ethernets; and warnings for
/// what is accepted but announced otherwise.
pub fn parse(cfg: &Value, eths: &[Eth]) -> Result<(Vec<Router>, Vec<String>), Invalid> {
    let mut out: Vec<Router> = Vec::new();
    let mut warnings = Vec::new();
    for (i, d) in cfg["devices"].as_array().into_iter().flatten().enumerate() {
        let x = &d["isis"];
        if x.is_null() {
            continue;
        }
        let r = router(x, &format!("devices[{i}].isis"), d, eths, &mut warnings)?;
        if let Some(o) = out.iter().find(|o| o.name == r.name || o.system_id == r.system_id) {
            return Err(Invalid(format!(
                "devices[{i}].isis: its name or system_id is also router {:?}'s. Fix: give each IS-IS router its own",
                o.name
            )));
        }
        out.push(r);
    }
    Ok((out, warnings))
}

fn router(x: &Value, at: &str, d: &Value, eths: &[Eth], warnings: &mut Vec<String>) -> Result<Router, Invalid> {
    refuse(x, &UNSUPPORTED, at)?;
    let device = d["name"].as_str().unwrap_or_default().to_string();
    let name = x["name"]
        .as_str()
        .filter(|n| crate::frr::gate::word(n))
        .ok_or_else(|| Invalid(format!("{at}.name: give the IS-IS router a name without spaces")))?;
    let system_id = x["system_id"]
        .as_str()
        .map(|s| s.replace(['.', ':', '-'], "").to_ascii_lowercase())
        .filter(|s| s.len() == 12 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| Invalid(format!("{at}.system_id: give 12 hex digits (e.g. 640000000001)")))?;
    let mut interfaces = Vec::new();
    let mut on: Option<&Eth> = None;
    for (j, itf) in x["interfaces"].as_array().into_iter().flatten().enumerate() {
        let ia = format!("{at}.interfaces[{j}]");
        let eth = interface_eth(itf, &ia, &device, eths)?;
        if on.is_some_and(|o| o.name != eth.name) {
            return Err(Invalid(format!(
                "{ia}.eth_name: the router's interfaces are on Ethernets {:?} and {:?}; one isisd serves one Ethernet's namespace. Fix: one Ethernet per IS-IS router",
                on.map(|o| o.name.as_str()).unwrap_or_default(),
                eth.name
            )));
        }
        on = Some(eth);
        interfaces.push(interface(itf, &ia, eth)?);
    }
    let eth = on.ok_or_else(|| Invalid(format!("{at}.interfaces: give at least one interface")))?;
    let basic = &x["basic"];
    let adv = &x["advanced"];
    let hostname = basic["hostname"].as_str().unwrap_or(&device).to_string();
    if !crate::frr::gate::word(&hostname) {
        return Err(Invalid(format!("{at}.basic.hostname: give a hostname without spaces")));
    }
    let wide = basic["enable_wide_metric"].as_bool().unwrap_or(true);
    let ranges = ranges(x, at, wide, warnings)?;
    let refresh = adv["lsp_refresh_rate"].as_u64().unwrap_or(900);
    let lifetime = adv["lsp_lifetime"].as_u64().unwrap_or(1200);
    if refresh + 300 > lifetime {
        return Err(Invalid(format!(
            "{at}.advanced.lsp_refresh_rate: {refresh} s with an lsp_lifetime of {lifetime} s; FRR needs the refresh at least 300 s shorter"
        )));
    }
    Ok(Router {
        name: name.to_string(),
        device,
        eth: eth.name.clone(),
        system_id,
        hostname,
        areas: areas(&adv["area_addresses"], at)?,
        wide,
        interfaces,
        ranges,
        lsp_refresh_s: adv["lsp_refresh_rate"].as_u64().map(|v| v.clamp(1, 65_235) as u32),
        lsp_lifetime_s: adv["lsp_lifetime"].as_u64().map(|v| v.clamp(350, 65_535) as u32),
        attached: adv["enable_attached_bit"].as_bool().unwrap_or(false),
        auth: auth::router(&x["router_auth"], &format!("{at}.router_auth"), warnings)?,
    })
}

fn refuse(v: &Value, keys: &[&str], at: &str) -> Result<(), Invalid> {
    let set = |k: &&&str| !matches!(&v[**k], Value::Null) && v[**k] != Value::Array(vec![]);
    match keys.iter().find(set) {
        Some(k) => Err(Invalid(format!(
            "{at}.{k}: not supported (gapless drives FRR's isisd for adjacencies and route ranges). Fix: leave {k} out"
        ))),
        None => Ok(()),
    }
}

fn interface_eth<'a>(itf: &Value, at: &str, device: &str, eths: &'a [Eth]) -> Result<&'a Eth, Invalid> {
    let name = itf["eth_name"].as_str().unwrap_or_default();
    eths.iter()
        .find(|e| e.name == name && e.device == device)
        .ok_or_else(|| {
            Invalid(format!(
                "{at}.eth_name: device {device:?} has no Ethernet named {name:?}"
            ))
        })
}

fn interface(itf: &Value, at: &str, eth: &Eth) -> Result<Interface, Invalid> {
    refuse(itf, &ITF_UNSUPPORTED, at)?;
    let name = itf["name"]
        .as_str()
        .ok_or_else(|| Invalid(format!("{at}.name: every IS-IS interface needs a name")))?;
    let p2p = match itf["network_type"].as_str().unwrap_or("broadcast") {
        "broadcast" => false,
        "point_to_point" => true,
        other => {
            return Err(Invalid(format!(
                "{at}.network_type: {other:?} (broadcast or point_to_point)"
            )))
        }
    };
    let levels = match itf["level_type"].as_str().unwrap_or("level_2") {
        "level_1" => 1,
        "level_2" => 2,
        "level_1_2" => 3,
        other => {
            return Err(Invalid(format!(
                "{at}.level_type: {other:?} (level_1, level_2 or level_1_2)"
            )))
        }
    };
    let metric = itf["metric"].as_u64().unwrap_or(10);
    if metric > 16_777_215 {
        return Err(Invalid(format!("{at}.metric: {metric} is above 16777215")));
    }
    let level = |k: &str| -> Result<(u32, u32, u32), Invalid> {
        let l = &itf[k];
        let hello = l["hello_interval"].as_u64().unwrap_or(10).clamp(1, 600);
        let dead = l["dead_interval"].as_u64().unwrap_or(30);
        if dead < hello * 2 || dead / hello > 100 {
            return Err(Invalid(format!(
                "{at}.{k}: dead_interval {dead} for hello_interval {hello}: give 2 to 100 hellos' time"
            )));
        }
        let prio = l["priority"].as_u64().unwrap_or(0).min(127);
        Ok((hello as u32, (dead / hello) as u32, prio as u32))
    };
    Ok(Interface {
        name: name.to_string(),
        metric: metric as u32,
        p2p,
        levels,
        hello: [level("l1_settings")?, level("l2_settings")?],
        padding: itf["advanced"]["enable_hello_padding"].as_bool().unwrap_or(true),
        v4: eth.addrs.iter().any(|a| a.ip.is_ipv4()),
        v6: eth.addrs.iter().any(|a| a.ip.is_ipv6()),
        auth: auth::read(&itf["authentication"], &format!("{at}.authentication"))?,
    })
}

/// `advanced.area_addresses` (hex, `490001`) as FRR writes them (`49.0001`); 49.0001 when
/// none are given.
fn areas(v: &Value, at: &str) -> Result<Vec<String>, Invalid> {
    let mut out = Vec::new();
    for (k, a) in v.as_array().into_iter().flatten().enumerate() {
        let hex = a.as_str().unwrap_or_default().replace('.', "");
        if hex.len() < 2 || hex.len() > 26 || hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Invalid(format!(
                "{at}.advanced.area_addresses[{k}]: {a} is not an area address (1 to 13 bytes in hex, e.g. 490001)"
            )));
        }
        let mut s = hex[..2].to_string();
        for c in hex.as_bytes()[2..].chunks(4) {
            s.push('.');
            s.push_str(std::str::from_utf8(c).unwrap_or_default());
        }
        out.push(s);
    }
    if out.is_empty() {
        out.push("49.0001".into());
    }
    Ok(out)
}

fn ranges(x: &Value, at: &str, wide: bool, warnings: &mut Vec<String>) -> Result<Vec<Range>, Invalid> {
    let mut out = Vec::new();
    let mut listed = Vec::new();
    for (key, v6) in [("v4_routes", false), ("v6_routes", true)] {
        for (k, r) in x[key].as_array().into_iter().flatten().enumerate() {
            let ra = format!("{at}.{key}[{k}]");
            refuse(r, &["prefix_sids"], &ra)?;
            let name = r["name"]
                .as_str()
                .ok_or_else(|| Invalid(format!("{ra}.name: every route range needs a name (flows name it)")))?;
            let mut blocks = Vec::new();
            for (b, a) in r["addresses"].as_array().into_iter().flatten().enumerate() {
                blocks.push(crate::bgp::block(a, &format!("{ra}.addresses[{b}]"), v6)?);
            }
            if blocks.is_empty() {
                return Err(Invalid(format!("{ra}.addresses: give at least one address block")));
            }
            listed.extend(
                blocks
                    .iter()
                    .enumerate()
                    .map(|(b, x)| (format!("{ra}.addresses[{b}]"), x.clone())),
            );
            let metric = r["link_metric"].as_u64().unwrap_or(0);
            let max = if wide { 16_777_215 } else { 63 };
            if metric > max {
                return Err(Invalid(format!("{ra}.link_metric: {metric} is above {max}")));
            }
            for (k2, not) in [("origin_type", "internal"), ("redistribution_type", "up")] {
                if r[k2].as_str().is_some_and(|v| v != not) {
                    warnings.push(format!(
                        "{ra}.{k2}: FRR's isisd announces redistributed ranges as {not}; {name:?} is announced so"
                    ));
                }
            }
            out.push(Range {
                name: name.to_string(),
                v6,
                blocks,
                metric: metric as u32,
            });
        }
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

/// The configurations of zebra and isisd, in the order they start; `ifname` is the router's
/// Ethernet's interface in its namespace.
pub fn frr_configs(r: &Router, ifname: &str) -> [(&'static str, String); 2] {
    let zebra = format!("hostname {}\n!\n", r.hostname);
    [("zebra", zebra), ("isisd", isisd(r, ifname))]
}

/// The `ip -batch` lines that add (`replace`: again is no error) or delete the blackhole
/// routes of the ranges named (all when none are), and the names of those ranges. Kernel
/// routes, not staticd's: staticd's load time grows with the square of its routes (1 000 took
/// 8.6 s), `ip -batch` puts 100 000 in the kernel in about a second.
pub fn kernel_routes(r: &Router, names: &[String], add: bool) -> (String, Vec<String>) {
    let verb = if add { "replace" } else { "del" };
    let mut lines = String::new();
    let mut acted = Vec::new();
    for x in r.ranges.iter().filter(|x| names.is_empty() || names.contains(&x.name)) {
        for b in &x.blocks {
            for (net, len) in b.prefixes() {
                let _ = writeln!(lines, "route {verb} blackhole {net}/{len}");
            }
        }
        acted.push(x.name.clone());
    }
    (lines, acted)
}

fn isisd(r: &Router, ifname: &str) -> String {
    let mut c = format!("hostname {}\n!\n", r.hostname);
    for i in &r.interfaces {
        interface_lines(&mut c, i, ifname);
    }
    range_maps(&mut c, r);
    let _ = writeln!(c, "router isis {AREA_TAG}");
    // The keys before `net`: set after it, isisd's first LSPs left unsigned (FRR 8.4).
    auth::router_lines(&mut c, &r.auth);
    // The level first: set after `net`, a level-2-only router's first LSPs went without
    // its IP reachability for 30 s (FRR 8.4; with it first, 1 s).
    let _ = writeln!(c, " is-type {}", is_type(r.levels()));
    for a in &r.areas {
        let _ = writeln!(c, " net {a}.{}.00", r.dotted_id());
    }
    let _ = writeln!(c, " metric-style {}", if r.wide { "wide" } else { "narrow" });
    c.push_str(" lsp-gen-interval 1\n spf-interval 1\n log-adjacency-changes\n");
    if let Some(s) = r.lsp_refresh_s {
        let _ = writeln!(c, " lsp-refresh-interval {s}");
    }
    if let Some(s) = r.lsp_lifetime_s {
        let _ = writeln!(c, " max-lsp-lifetime {s}");
    }
    if r.attached {
        c.push_str(" attached-bit send\n");
    }
    for (v6, af) in [(false, "ipv4"), (true, "ipv6")] {
        if r.ranges.iter().any(|x| x.v6 == v6) {
            for level in levels_of(r.levels()) {
                let _ = writeln!(c, " redistribute {af} kernel level-{level} route-map GL-ISIS-{af}");
            }
        }
    }
    c.push_str("!\n");
    c
}

fn is_type(levels: u8) -> &'static str {
    match levels {
        1 => "level-1",
        2 => "level-2-only",
        _ => "level-1-2",
    }
}

fn levels_of(levels: u8) -> impl Iterator<Item = u8> {
    [1u8, 2].into_iter().filter(move |l| levels & l != 0)
}

fn interface_lines(c: &mut String, i: &Interface, ifname: &str) {
    let _ = writeln!(c, "interface {ifname}");
    if i.v4 {
        let _ = writeln!(c, " ip router isis {AREA_TAG}");
    }
    if i.v6 {
        let _ = writeln!(c, " ipv6 router isis {AREA_TAG}");
    }
    let _ = writeln!(c, " isis circuit-type {}", is_type(i.levels));
    if i.p2p {
        c.push_str(" isis network point-to-point\n");
    }
    let _ = writeln!(c, " isis metric {}", i.metric);
    auth::interface_line(c, i.auth.as_ref());
    for (k, (hello, mult, prio)) in i.hello.iter().enumerate() {
        let l = k + 1;
        // FRR 8.4 takes the level first for these two, last for the priority.
        let _ = writeln!(c, " isis hello-interval level-{l} {hello}");
        let _ = writeln!(c, " isis hello-multiplier level-{l} {mult}");
        let _ = writeln!(c, " isis priority {prio} level-{l}");
    }
    if !i.padding {
        c.push_str(" no isis hello padding\n");
    }
    c.push_str("!\n");
}

/// A route-map per family that sets each range's metric, matched by a prefix-list per range
/// that holds its blocks' covers ([`Block::cover`]: a few entries for a long range).
fn range_maps(c: &mut String, r: &Router) {
    for (v6, af, kw) in [(false, "ipv4", "ip"), (true, "ipv6", "ipv6")] {
        let mine: Vec<(usize, &Range)> = r.ranges.iter().enumerate().filter(|(_, x)| x.v6 == v6).collect();
        for (j, x) in &mine {
            for b in &x.blocks {
                for (net, len) in b.cover() {
                    let _ = writeln!(c, "{kw} prefix-list GL-ISIS-PL-{j} permit {net}/{len}{}", b.exact(len));
                }
            }
        }
        for (j, x) in &mine {
            let _ = writeln!(
                c,
                "route-map GL-ISIS-{af} permit {}\n match {kw} address prefix-list GL-ISIS-PL-{j}\n set metric {}",
                10 + j,
                x.metric
            );
        }
        if !mine.is_empty() {
            c.push_str("!\n");
        }
    }
}

/// The first address of a range: where a flow to it goes by default.
pub fn first_address(x: &Range) -> Option<(IpAddr, u8)> {
    x.blocks.first().map(|b| (b.first, b.prefix))
}

#[cfg(test)]
mod tests;
