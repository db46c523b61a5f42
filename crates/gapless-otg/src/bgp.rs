//! OTG BGP (`devices[].bgp`) read and checked, and written as FRR's bgpd configuration: one
//! bgpd per device, in the namespace of the device Ethernet its BGP interfaces are on
//! (DESIGN-NOTES 68). What FRR needs for a tester, each from a trap measured in
//! ../shared/FRR.md: eBGP without a policy, `network` for prefixes not in the kernel, an
//! inbound route-map that keeps what was received out of FRR's own table (it would be
//! advertised back) while soft reconfiguration keeps it listed, an outbound route-map per
//! peer that lets out only that peer's ranges and sets their manual next hops, and
//! `allowas-in` where a range's AS path holds the peer's AS.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use crate::devices::Eth;
use crate::error::Invalid;
use crate::frr::gate::word;

pub mod frr_json;
pub mod vty;
pub mod wire;

/// A device's BGP router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    pub device: String,
    /// The device Ethernet its interfaces are on (its namespace runs the bgpd).
    pub eth: String,
    pub router_id: Ipv4Addr,
    pub peers: Vec<Peer>,
}

/// One BGP peer of the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    /// The device's own address the session runs from.
    pub local: IpAddr,
    pub address: IpAddr,
    pub ebgp: bool,
    /// The emulated router's AS on this session.
    pub asn: u32,
    pub hold_s: u32,
    pub keepalive_s: u32,
    pub passive: bool,
    pub md5: Option<String>,
    pub routes: Vec<Range>,
}

/// A BGP range's origin attribute: one of the model's three values, never a string of the
/// request's (an origin once went into bgpd's file as given, line breaks and all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Igp,
    Egp,
    Incomplete,
}

impl Origin {
    /// `advanced.origin` of the range at `at` (absent: none), or an error with its path.
    fn of(v: &Value, at: &str) -> Result<Option<Origin>, Invalid> {
        match v {
            Value::Null => Ok(None),
            Value::String(s) if s == "igp" => Ok(Some(Origin::Igp)),
            Value::String(s) if s == "egp" => Ok(Some(Origin::Egp)),
            Value::String(s) if s == "incomplete" => Ok(Some(Origin::Incomplete)),
            other => Err(Invalid(format!(
                "{at}.advanced.origin: {other} is not an origin; give \"igp\", \"egp\" or \"incomplete\""
            ))),
        }
    }

    /// The word bgpd's `set origin` takes.
    pub fn frr(self) -> &'static str {
        match self {
            Origin::Igp => "igp",
            Origin::Egp => "egp",
            Origin::Incomplete => "incomplete",
        }
    }
}

/// A route range a peer advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub name: String,
    pub v6: bool,
    pub blocks: Vec<Block>,
    /// A manual next hop (`next_hop_mode: manual`); None: the session's own address.
    pub next_hop: Option<IpAddr>,
    pub med: Option<u32>,
    pub origin: Option<Origin>,
    pub local_pref: Option<u32>,
    /// Communities as FRR writes them (`65000:100`, `no-export`, ...).
    pub communities: Vec<String>,
    /// AS numbers put before the router's own on the path (`as_path.segments`).
    pub as_path: Vec<u32>,
}

/// The most prefix-list entries a router's ranges may need. FRR's load time grows with the
/// square of a prefix list's entries (1 000 took 5.4 s, DESIGN-NOTES 75): a range of step 1
/// needs a few entries (its cover), one of another step an entry a prefix.
pub const MAX_LISTED_PREFIXES: usize = 1_000;

/// Refuses ranges (their blocks, each with its path) whose prefix lists would hold more than
/// [`MAX_LISTED_PREFIXES`] entries in all, naming the limit and the fix.
pub fn check_listed<'a>(blocks: impl IntoIterator<Item = (String, &'a Block)>) -> Result<(), Invalid> {
    let mut total = 0;
    for (at, b) in blocks {
        total += b.cover().len();
        if total > MAX_LISTED_PREFIXES {
            return Err(Invalid(format!(
                "{at}: {} prefixes {} apart would make its router's prefix lists longer than {MAX_LISTED_PREFIXES} entries, which FRR loads in time growing with their square. Fix: a step of 1 (a few entries however many prefixes), or fewer prefixes",
                b.count, b.step
            )));
        }
    }
    Ok(())
}

/// `addresses[]`: `count` prefixes of length `prefix` from `first`, `step` prefixes apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub first: IpAddr,
    pub prefix: u8,
    pub count: u32,
    pub step: u32,
}

impl Block {
    /// What follows cover entry `net/len` in a prefix list: ` ge P le P` when `len` is
    /// shorter than the block's prefixes, so that only they match.
    pub fn exact(&self, len: u8) -> String {
        if len < self.prefix {
            format!(" ge {0} le {0}", self.prefix)
        } else {
            String::new()
        }
    }

    /// Each prefix of the block (network addresses), in order.
    pub fn prefixes(&self) -> Vec<(IpAddr, u8)> {
        let bits = if self.first.is_ipv6() { 128 } else { 32 };
        let unit = 1u128 << (bits - u32::from(self.prefix));
        let base = as_u128(self.first) & !(unit - 1);
        (0..u128::from(self.count))
            .map(|k| {
                (
                    from_u128(base + k * u128::from(self.step) * unit, self.first.is_ipv6()),
                    self.prefix,
                )
            })
            .collect()
    }

    /// The fewest aligned networks whose `prefix`-long subnets are exactly the block's
    /// prefixes, as (network, length): consecutive prefixes (step 1) merge into their
    /// supernets, others stay one each. A prefix list of `network/length ge P le P` entries
    /// then matches a block of 100 000 prefixes in a few entries (FRR's load time grows with
    /// the square of a prefix list's entries, DESIGN-NOTES 75).
    pub fn cover(&self) -> Vec<(IpAddr, u8)> {
        if self.step != 1 || self.prefix == 0 {
            return self.prefixes();
        }
        let v6 = self.first.is_ipv6();
        let bits: u32 = if v6 { 128 } else { 32 };
        let shift = bits - u32::from(self.prefix);
        let mut at = as_u128(self.first) >> shift;
        let end = at + u128::from(self.count);
        let mut out = Vec::new();
        while at < end {
            // The largest aligned run that starts at `at` and ends by `end`.
            let mut k = at.trailing_zeros().min(u32::from(self.prefix)).min(40);
            while at + (1u128 << k) > end {
                k -= 1;
            }
            out.push((from_u128(at << shift, v6), self.prefix - k as u8));
            at += 1u128 << k;
        }
        out
    }
}

fn as_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn from_u128(x: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(x))
    } else {
        IpAddr::V4(Ipv4Addr::from(x as u32))
    }
}

/// Every device's BGP router, checked against the device Ethernets.
pub fn parse(cfg: &Value, eths: &[Eth]) -> Result<Vec<Router>, Invalid> {
    let mut out = Vec::new();
    for (i, d) in cfg["devices"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let b = &d["bgp"];
        if b.is_null() {
            continue;
        }
        let at = format!("devices[{i}].bgp");
        let device = d["name"].as_str().unwrap_or_default().to_string();
        let router_id = b["router_id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Invalid(format!("{at}.router_id: give the router's IPv4 router id")))?;
        let mut peers = Vec::new();
        let mut on: Option<String> = None;
        for (key, name_key, v6) in [
            ("ipv4_interfaces", "ipv4_name", false),
            ("ipv6_interfaces", "ipv6_name", true),
        ] {
            for (j, itf) in b[key].as_array().cloned().unwrap_or_default().iter().enumerate() {
                let ip = format!("{at}.{key}[{j}]");
                let name = itf[name_key].as_str().unwrap_or_default();
                let (eth, addr) = crate::devices::find(eths, name)
                    .filter(|(e, a)| e.device == device && a.ip.is_ipv6() == v6)
                    .ok_or_else(|| {
                        Invalid(format!(
                            "{ip}.{name_key}: no IPv{} address named {name:?} on device {device:?}",
                            if v6 { 6 } else { 4 }
                        ))
                    })?;
                if on.get_or_insert_with(|| eth.name.clone()) != &eth.name {
                    return Err(Invalid(format!(
                        "{ip}.{name_key}: {name:?} is on Ethernet {:?}, and this device's other BGP interfaces on {on:?}: one bgpd serves one Ethernet's namespace. Fix: put the device's BGP interfaces on one Ethernet",
                        eth.name
                    )));
                }
                for (k, p) in itf["peers"].as_array().cloned().unwrap_or_default().iter().enumerate() {
                    peers.push(peer(p, &format!("{ip}.peers[{k}]"), addr.ip)?);
                }
            }
        }
        if let Some(eth) = on {
            out.push(Router {
                device,
                eth,
                router_id,
                peers,
            });
        }
    }
    let mut names: Vec<&str> = out
        .iter()
        .flat_map(|r| r.peers.iter().map(|p| p.name.as_str()))
        .collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Invalid(format!("devices: the BGP peer name {:?} is used twice", w[0])));
    }
    uncross(&mut out);
    Ok(out)
}

/// Where two of the config's own devices peer with each other, the side with the higher
/// address waits for the other's connection (`passive`) instead of opening one too. Their
/// bgpds start together, so both connected at the same moment, and FRR's collision handling
/// then sometimes closed both connections and tried again a second later (4 OPENs sent
/// instead of 1, seen in CI). A session with a peer outside the config is left as written.
fn uncross(routers: &mut [Router]) {
    let sessions: Vec<(IpAddr, IpAddr)> = routers
        .iter()
        .flat_map(|r| r.peers.iter().map(|p| (p.local, p.address)))
        .collect();
    for p in routers.iter_mut().flat_map(|r| r.peers.iter_mut()) {
        if p.local > p.address && sessions.contains(&(p.address, p.local)) {
            p.passive = true;
        }
    }
}

/// Keys of a peer or a range that gapless does not emulate: refused when set.
const PEER_UNSUPPORTED: [&str; 6] = [
    "v4_srte_policies",
    "v6_srte_policies",
    "evpn_ethernet_segments",
    "graceful_restart",
    "replay_updates",
    "segment_routing",
];
const RANGE_UNSUPPORTED: [&str; 4] = ["add_path", "ext_communities", "extended_communities", "mpls_labels"];

fn refuse_unsupported(v: &Value, keys: &[&str], at: &str) -> Result<(), Invalid> {
    match keys
        .iter()
        .find(|k| !matches!(&v[**k], Value::Null) && v[**k] != Value::Array(vec![]))
    {
        Some(k) => Err(Invalid(format!(
            "{at}.{k}: not supported (gapless drives FRR's bgpd for sessions and route ranges). Fix: leave {k} out"
        ))),
        None => Ok(()),
    }
}

fn peer(p: &Value, at: &str, local: IpAddr) -> Result<Peer, Invalid> {
    refuse_unsupported(p, &PEER_UNSUPPORTED, at)?;
    let name = p["name"].as_str().filter(|n| word(n)).ok_or_else(|| {
        Invalid(format!(
            "{at}.name: every peer needs a name of printable characters without spaces"
        ))
    })?;
    let address: IpAddr = p["peer_address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .filter(|a: &IpAddr| a.is_ipv6() == local.is_ipv6())
        .ok_or_else(|| {
            Invalid(format!(
                "{at}.peer_address: give the peer's IPv{} address",
                if local.is_ipv6() { 6 } else { 4 }
            ))
        })?;
    let ebgp = match p["as_type"].as_str() {
        Some("ebgp") => true,
        Some("ibgp") => false,
        _ => return Err(Invalid(format!("{at}.as_type: give ibgp or ebgp"))),
    };
    let max: u64 = if p["as_number_width"].as_str() == Some("two") {
        65_535
    } else {
        u64::from(u32::MAX)
    };
    let asn = p["as_number"]
        .as_u64()
        .filter(|a| (1..=max).contains(a))
        .ok_or_else(|| {
            Invalid(format!(
                "{at}.as_number: {} is not an AS number (1..={max})",
                p["as_number"]
            ))
        })?;
    let adv = &p["advanced"];
    let secs = |k: &str, d: u64| adv[k].as_u64().unwrap_or(d).min(65_535) as u32;
    let mut routes = Vec::new();
    for (key, v6) in [("v4_routes", false), ("v6_routes", true)] {
        for (k, r) in p[key].as_array().cloned().unwrap_or_default().iter().enumerate() {
            routes.push(range(r, &format!("{at}.{key}[{k}]"), v6)?);
        }
    }
    Ok(Peer {
        name: name.to_string(),
        local,
        address,
        ebgp,
        asn: asn as u32,
        hold_s: secs("hold_time_interval", 90),
        keepalive_s: secs("keep_alive_interval", 30),
        passive: adv["passive_mode"].as_bool().unwrap_or(false),
        md5: md5(&adv["md5_key"], at)?,
        routes,
    })
}

fn md5(k: &Value, at: &str) -> Result<Option<String>, Invalid> {
    match k.as_str().filter(|k| !k.is_empty()) {
        None => Ok(None),
        Some(k) if word(k) => Ok(Some(k.to_string())),
        Some(_) => Err(Invalid(format!(
            "{at}.advanced.md5_key: give up to 80 printable characters without spaces"
        ))),
    }
}

fn range(r: &Value, at: &str, v6: bool) -> Result<Range, Invalid> {
    refuse_unsupported(r, &RANGE_UNSUPPORTED, at)?;
    let name = r["name"]
        .as_str()
        .ok_or_else(|| Invalid(format!("{at}.name: every route range needs a name (flows name it)")))?;
    let mut blocks = Vec::new();
    for (k, a) in r["addresses"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        blocks.push(block(a, &format!("{at}.addresses[{k}]"), v6)?);
    }
    if blocks.is_empty() {
        return Err(Invalid(format!("{at}.addresses: give at least one address block")));
    }
    let adv = &r["advanced"];
    let include = |k: &str| adv[k].as_bool().unwrap_or(true);
    Ok(Range {
        name: name.to_string(),
        v6,
        blocks,
        next_hop: next_hop(r, at, v6)?,
        med: adv["multi_exit_discriminator"]
            .as_u64()
            .filter(|_| include("include_multi_exit_discriminator"))
            .map(|m| m as u32),
        origin: Origin::of(&adv["origin"], at)?.filter(|_| include("include_origin")),
        local_pref: adv["local_preference"]
            .as_u64()
            .filter(|_| include("include_local_preference"))
            .map(|m| m as u32),
        communities: communities(&r["communities"], at)?,
        as_path: as_path(&r["as_path"], at)?,
    })
}

pub(crate) fn block(a: &Value, at: &str, v6: bool) -> Result<Block, Invalid> {
    let first: IpAddr = a["address"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .filter(|ip: &IpAddr| ip.is_ipv6() == v6)
        .ok_or_else(|| Invalid(format!("{at}.address: give an IPv{} address", if v6 { 6 } else { 4 })))?;
    let bits: u64 = if v6 { 128 } else { 32 };
    let prefix = a["prefix"].as_u64().unwrap_or(if v6 { 64 } else { 24 });
    if prefix == 0 || prefix > bits {
        return Err(Invalid(format!(
            "{at}.prefix: {prefix} is not a prefix length (1..={bits})"
        )));
    }
    let count = a["count"].as_u64().unwrap_or(1);
    let step = a["step"].as_u64().unwrap_or(1);
    if count == 0 || count > 1_000_000 || step == 0 || step > u64::from(u32::MAX) {
        return Err(Invalid(format!(
            "{at}: count {count} and step {step}: give a count of 1 to 1000000 and a step from 1"
        )));
    }
    // The last prefix must still be in the address space.
    let unit = 1u128 << (bits - prefix);
    let base = as_u128(first) & !(unit - 1);
    let room = if v6 { u128::MAX } else { u128::from(u32::MAX) };
    let span = u128::from(count - 1) * u128::from(step);
    if span
        .checked_mul(unit)
        .and_then(|x| x.checked_add(base))
        .is_none_or(|last| last > room)
    {
        return Err(Invalid(format!(
            "{at}: {count} prefixes of /{prefix} from {first}, {step} apart, run past the end of the address space. Fix: a smaller count or step"
        )));
    }
    Ok(Block {
        first,
        prefix: prefix as u8,
        count: count as u32,
        step: step as u32,
    })
}

fn next_hop(r: &Value, at: &str, v6: bool) -> Result<Option<IpAddr>, Invalid> {
    let mode = Invalid::one_of(
        &r["next_hop_mode"],
        &format!("{at}.next_hop_mode"),
        &["local_ip", "manual"],
        "local_ip",
    )?;
    if mode != "manual" {
        return Ok(None);
    }
    let default = if v6 { "ipv6" } else { "ipv4" };
    let family = Invalid::one_of(
        &r["next_hop_address_type"],
        &format!("{at}.next_hop_address_type"),
        &["ipv4", "ipv6"],
        default,
    )?;
    let key = if family == "ipv6" {
        "next_hop_ipv6_address"
    } else {
        "next_hop_ipv4_address"
    };
    let ip: IpAddr = r[key]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Invalid(format!("{at}.{key}: give the manual next hop")))?;
    if ip.is_ipv6() != v6 {
        return Err(Invalid(format!(
            "{at}.{key}: an IPv{} next hop for IPv{} routes is not sent by FRR. Fix: a next hop of the routes' family",
            if ip.is_ipv6() { 6 } else { 4 },
            if v6 { 6 } else { 4 }
        )));
    }
    Ok(Some(ip))
}

fn communities(c: &Value, at: &str) -> Result<Vec<String>, Invalid> {
    let mut out = Vec::new();
    for (k, x) in c.as_array().cloned().unwrap_or_default().iter().enumerate() {
        out.push(match x["type"].as_str().unwrap_or("manual_as_number") {
            "manual_as_number" => {
                let (a, n) = (
                    x["as_number"].as_u64().unwrap_or(0),
                    x["as_custom"].as_u64().unwrap_or(0),
                );
                if a > 65_535 || n > 65_535 {
                    return Err(Invalid(format!(
                        "{at}.communities[{k}]: as_number and as_custom are 16-bit"
                    )));
                }
                format!("{a}:{n}")
            }
            "no_export" => "no-export".into(),
            "no_advertised" => "no-advertise".into(),
            "no_export_subconfed" => "local-AS".into(),
            "llgr_stale" => "llgr-stale".into(),
            "no_llgr" => "no-llgr".into(),
            other => {
                return Err(Invalid(format!(
                    "{at}.communities[{k}].type: {other:?} is not a community type"
                )))
            }
        });
    }
    Ok(out)
}

fn as_path(p: &Value, at: &str) -> Result<Vec<u32>, Invalid> {
    let mut out = Vec::new();
    for (k, s) in p["segments"].as_array().cloned().unwrap_or_default().iter().enumerate() {
        if s["type"].as_str().unwrap_or("as_seq") != "as_seq" {
            return Err(Invalid(format!(
                "{at}.as_path.segments[{k}].type: only as_seq is sent (FRR prepends sequences)"
            )));
        }
        for n in s["as_numbers"].as_array().cloned().unwrap_or_default() {
            out.push(
                n.as_u64()
                    .filter(|a| (1..=u64::from(u32::MAX)).contains(a))
                    .ok_or_else(|| Invalid(format!("{at}.as_path.segments[{k}]: {n} is not an AS number")))?
                    as u32,
            );
        }
    }
    Ok(out)
}

/// The router's daemons and their configurations, zebra first when it has one: a router with
/// an IPv6 peer runs zebra beside bgpd, because bgpd learns its interfaces from zebra, and
/// without them FRR 8.4's bgpd refuses every IPv6 UPDATE whose next hop carries a link-local
/// address (what BIRD, and routers generally, send on a shared link) with an "Invalid Network
/// Field" NOTIFICATION, found against BIRD. IPv4-only routers run bgpd alone (`-Z`).
pub fn frr_configs(r: &Router) -> Vec<(&'static str, String)> {
    let bgpd = ("bgpd", frr_config(r));
    if r.peers.iter().any(|p| p.local.is_ipv6()) {
        vec![("zebra", "hostname gl-bgp\n!\n".to_string()), bgpd]
    } else {
        vec![bgpd]
    }
}

/// bgpd's configuration for the router.
pub fn frr_config(r: &Router) -> String {
    let asn = r.peers.first().map_or(1, |p| p.asn);
    let mut c = String::from("frr defaults traditional\n!\nroute-map GL-IN deny 10\n!\n");
    for (i, p) in r.peers.iter().enumerate() {
        out_maps(&mut c, i, p);
    }
    let _ = writeln!(c, "router bgp {asn}\n bgp router-id {}", r.router_id);
    c.push_str(" no bgp ebgp-requires-policy\n no bgp network import-check\n no bgp default ipv4-unicast\n");
    for p in &r.peers {
        neighbor(&mut c, p, asn);
    }
    for v6 in [false, true] {
        family(&mut c, r, v6);
    }
    c.push_str("!\n");
    c
}

fn neighbor(c: &mut String, p: &Peer, asn: u32) {
    let a = p.address;
    let _ = writeln!(
        c,
        " neighbor {a} remote-as {}",
        if p.ebgp { "external" } else { "internal" }
    );
    let _ = writeln!(c, " neighbor {a} description {}", p.name);
    let _ = writeln!(c, " neighbor {a} update-source {}", p.local);
    let _ = writeln!(c, " neighbor {a} timers {} {}", p.keepalive_s, p.hold_s);
    let _ = writeln!(c, " neighbor {a} timers connect 1");
    if p.asn != asn {
        let _ = writeln!(c, " neighbor {a} local-as {} no-prepend replace-as", p.asn);
    }
    if p.passive {
        let _ = writeln!(c, " neighbor {a} passive");
    }
    if let Some(k) = &p.md5 {
        let _ = writeln!(c, " neighbor {a} password {k}");
    }
}

/// One address family: every peer activated in it (a session carries both families), the
/// received routes kept out of the table but listed, each peer's own ranges let out.
fn family(c: &mut String, r: &Router, v6: bool) {
    let _ = writeln!(c, " address-family {} unicast", if v6 { "ipv6" } else { "ipv4" });
    for (i, p) in r.peers.iter().enumerate() {
        let a = p.address;
        let _ = writeln!(
            c,
            "  neighbor {a} activate\n  neighbor {a} soft-reconfiguration inbound"
        );
        let _ = writeln!(
            c,
            "  neighbor {a} route-map GL-IN in\n  neighbor {a} route-map GL-OUT-{i}-{} out",
            af(v6)
        );
        if p.routes.iter().any(|x| !x.as_path.is_empty()) {
            let _ = writeln!(c, "  neighbor {a} allowas-in");
        }
    }
    for (i, p) in r.peers.iter().enumerate() {
        for (j, x) in p.routes.iter().enumerate().filter(|(_, x)| x.v6 == v6) {
            for b in &x.blocks {
                for (net, len) in b.prefixes() {
                    let _ = writeln!(c, "  {}", vty::network_line(net, len, i, j));
                }
            }
        }
    }
    c.push_str(" exit-address-family\n");
}

fn af(v6: bool) -> &'static str {
    if v6 {
        "6"
    } else {
        "4"
    }
}

/// Peer `i`'s ranges: the attributes set where each is originated (`GL-RR-i-j`), with a tag
/// of its own, and an outbound map that lets out only the peer's tags, with their manual next
/// hops and communities. A tag, not a prefix list: bgpd's load time grows with the square of a prefix list's
/// entries (1 000 took 5.4 s), and a range may have 100 000 prefixes (DESIGN-NOTES 75).
fn out_maps(c: &mut String, i: usize, p: &Peer) {
    for (j, x) in p.routes.iter().enumerate() {
        let _ = writeln!(c, "route-map GL-RR-{i}-{j} permit 10\n set tag {}", tag(i, j));
        if let Some(m) = x.med {
            let _ = writeln!(c, " set metric {m}");
        }
        if let Some(o) = x.origin {
            let _ = writeln!(c, " set origin {}", o.frr());
        }
        if let Some(l) = x.local_pref {
            let _ = writeln!(c, " set local-preference {l}");
        }
        if !x.as_path.is_empty() {
            let path: Vec<String> = x.as_path.iter().map(u32::to_string).collect();
            let _ = writeln!(c, " set as-path prepend {}", path.join(" "));
        }
    }
    for v6 in [false, true] {
        let map = format!("GL-OUT-{i}-{}", af(v6));
        for (j, x) in p.routes.iter().enumerate().filter(|(_, x)| x.v6 == v6) {
            let _ = writeln!(c, "route-map {map} permit {}\n match tag {}", 10 + j, tag(i, j));
            // Set on the way out, not where the range is originated: bgpd keeps a route
            // that carries NO_EXPORT from its eBGP peers, and a tester sends it to the device
            // it tests (found against BIRD).
            if !x.communities.is_empty() {
                let _ = writeln!(c, " set community {}", x.communities.join(" "));
            }
            match x.next_hop {
                Some(IpAddr::V4(n)) => {
                    let _ = writeln!(c, " set ip next-hop {n}");
                }
                Some(IpAddr::V6(n)) => {
                    let _ = writeln!(c, " set ipv6 next-hop global {n}");
                }
                None => {}
            }
        }
        let _ = writeln!(c, "route-map {map} deny 65535\n!");
    }
}

/// The tag of peer `i`'s range `j`: local to the router, never sent (FRR's tags are 32-bit).
fn tag(i: usize, j: usize) -> u64 {
    ((i as u64) << 16) + j as u64 + 1
}

/// The range a flow end names, with its router: (router, peer, range).
pub fn find_range<'a>(routers: &'a [Router], name: &str) -> Option<(&'a Router, &'a Peer, &'a Range)> {
    routers.iter().find_map(|r| {
        r.peers
            .iter()
            .find_map(|p| p.routes.iter().find(|x| x.name == name).map(|x| (r, p, x)))
    })
}

#[cfg(test)]
mod tests;
