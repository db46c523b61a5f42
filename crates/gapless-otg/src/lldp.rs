//! OTG LLDP (`lldp[]`), sans IO: each entry read and checked, its LLDPDU built (IEEE
//! 802.1AB: chassis ID, port ID, TTL, system name, organisation-specific TLVs, end), and a
//! received LLDPDU decoded into the neighbour the model's `lldp_neighbors` state lists. The
//! server sends and receives them on the port's interface (`gapless_io::devices::lldp`); nothing here
//! touches a socket.

use serde_json::{json, Value};

use crate::error::Invalid;

/// LLDP's nearest-bridge group address and EtherType.
pub const DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
pub const ETHERTYPE: u16 = 0x88cc;
/// The most neighbours an agent keeps. A port on a shared segment could otherwise be made to
/// hold one per chassis ID a sender invents; an LLDPDU from a new neighbour beyond this is
/// counted as discarded (`frames_discard`), as 802.1AB's tooManyNeighbors does.
pub const MAX_NEIGHBORS: usize = 64;

/// One `lldp[]` entry: an LLDP agent on a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub name: String,
    pub port: String,
    pub chassis: Id,
    pub port_id: Id,
    /// None: the port's name (`auto`).
    pub system_name: Option<String>,
    pub hold_time_s: u16,
    pub interval_s: u32,
    /// Each `org_infos[]`.
    pub org: Vec<OrgTlv>,
}

/// An organisation-specific TLV: OUI, subtype, information.
pub type OrgTlv = ([u8; 3], u8, Vec<u8>);

/// A chassis or port ID: its subtype and value; a MAC of None is the port's own (`auto`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id {
    Mac(Option<[u8; 6]>),
    /// An interface name; None: the port's interface (`auto`).
    InterfaceName(Option<String>),
    Local(String),
}

/// Every `lldp[]` entry, on ports the config has.
pub fn parse(cfg: &Value, ports: &[String]) -> Result<Vec<Agent>, Invalid> {
    let mut out: Vec<Agent> = Vec::new();
    for (i, l) in cfg["lldp"].as_array().into_iter().flatten().enumerate() {
        let at = format!("lldp[{i}]");
        let name = l["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| Invalid(format!("{at}.name: every LLDP agent needs a name")))?;
        let port = l["connection"]["port_name"].as_str().unwrap_or_default();
        if !ports.iter().any(|p| p == port) {
            return Err(Invalid(format!("{at}.connection.port_name: no port named {port:?}")));
        }
        if out.iter().any(|a| a.port == port || a.name == name) {
            return Err(Invalid(format!(
                "{at}: another LLDP agent has its name or port {port:?}; give each port one agent"
            )));
        }
        let hold = l["hold_time"].as_u64().unwrap_or(120);
        let interval = l["advertisement_interval"].as_u64().unwrap_or(30);
        if !(10..=65_535).contains(&hold) || !(5..=32_768).contains(&interval) {
            return Err(Invalid(format!(
                "{at}: hold_time {hold} and advertisement_interval {interval}: give 10..=65535 and 5..=32768 s"
            )));
        }
        out.push(Agent {
            name: name.to_string(),
            port: port.to_string(),
            chassis: chassis(&l["chassis_id"], &format!("{at}.chassis_id"))?,
            port_id: port_id(&l["port_id"], &format!("{at}.port_id"))?,
            system_name: value_or_auto(&l["system_name"], &format!("{at}.system_name"), 255)?,
            hold_time_s: hold as u16,
            interval_s: interval as u32,
            org: org_infos(&l["org_infos"], &at)?,
        });
    }
    Ok(out)
}

fn mac(s: &str) -> Option<[u8; 6]> {
    let b: Vec<u8> = s.split(':').filter_map(|x| u8::from_str_radix(x, 16).ok()).collect();
    (s.split(':').count() == 6 && b.len() == 6).then(|| b.try_into().expect("six"))
}

/// `{choice: auto | value, value}`: None for auto.
fn value_or_auto(v: &Value, at: &str, max: usize) -> Result<Option<String>, Invalid> {
    if v.is_null() || v["choice"].as_str().unwrap_or("auto") == "auto" {
        return Ok(None);
    }
    match v["value"].as_str() {
        Some(s) if !s.is_empty() && s.len() <= max => Ok(Some(s.to_string())),
        _ => Err(Invalid(format!("{at}.value: give 1 to {max} bytes"))),
    }
}

fn chassis(v: &Value, at: &str) -> Result<Id, Invalid> {
    match v["choice"].as_str().unwrap_or("mac_address_subtype") {
        "mac_address_subtype" => {
            let m = value_or_auto(&v["mac_address_subtype"], &format!("{at}.mac_address_subtype"), 17)?;
            match m {
                None => Ok(Id::Mac(None)),
                Some(s) => mac(&s)
                    .map(|m| Id::Mac(Some(m)))
                    .ok_or_else(|| Invalid(format!("{at}.mac_address_subtype.value: {s:?} is not a MAC address"))),
            }
        }
        "interface_name_subtype" => Ok(Id::InterfaceName(Some(text(v, "interface_name_subtype", at)?))),
        "local_subtype" => Ok(Id::Local(text(v, "local_subtype", at)?)),
        other => Err(Invalid(format!("{at}.choice: {other:?} is not a chassis ID subtype"))),
    }
}

fn port_id(v: &Value, at: &str) -> Result<Id, Invalid> {
    match v["choice"].as_str().unwrap_or("interface_name_subtype") {
        "interface_name_subtype" => Ok(Id::InterfaceName(value_or_auto(
            &v["interface_name_subtype"],
            &format!("{at}.interface_name_subtype"),
            255,
        )?)),
        "mac_address_subtype" => {
            let s = text(v, "mac_address_subtype", at)?;
            mac(&s)
                .map(|m| Id::Mac(Some(m)))
                .ok_or_else(|| Invalid(format!("{at}.mac_address_subtype: {s:?} is not a MAC address")))
        }
        "local_subtype" => Ok(Id::Local(text(v, "local_subtype", at)?)),
        other => Err(Invalid(format!("{at}.choice: {other:?} is not a port ID subtype"))),
    }
}

fn text(v: &Value, key: &str, at: &str) -> Result<String, Invalid> {
    v[key]
        .as_str()
        .filter(|s| !s.is_empty() && s.len() <= 255)
        .map(str::to_string)
        .ok_or_else(|| Invalid(format!("{at}.{key}: give 1 to 255 bytes")))
}

fn org_infos(v: &Value, at: &str) -> Result<Vec<OrgTlv>, Invalid> {
    let mut out = Vec::new();
    for (k, o) in v.as_array().into_iter().flatten().enumerate() {
        let oa = format!("{at}.org_infos[{k}]");
        let oui = o["oui"]
            .as_str()
            .and_then(|s| hex(s).filter(|b| b.len() == 3))
            .ok_or_else(|| Invalid(format!("{oa}.oui: give three bytes in hex (e.g. 0080c2)")))?;
        let sub = o["subtype"].as_u64().unwrap_or(1);
        let info = o["information"]["info"].as_str().unwrap_or_default();
        let bytes = hex(info)
            .filter(|b| b.len() <= 507)
            .ok_or_else(|| Invalid(format!("{oa}.information.info: give up to 507 bytes in hex")))?;
        if sub > 255 {
            return Err(Invalid(format!("{oa}.subtype: {sub} is above 255")));
        }
        out.push(([oui[0], oui[1], oui[2]], sub as u8, bytes));
    }
    Ok(out)
}

fn hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_start_matches("0x");
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Appends one TLV: 7 bits of type, 9 of length, then the value.
fn tlv(f: &mut Vec<u8>, kind: u8, value: &[u8]) {
    let head = (u16::from(kind) << 9) | (value.len() as u16 & 0x1ff);
    f.extend(head.to_be_bytes());
    f.extend_from_slice(value);
}

fn id_value(id: &Id, mac: [u8; 6], ifname: &str, chassis: bool) -> Vec<u8> {
    // Chassis ID subtypes: 4 MAC, 6 interface name, 7 local; port ID: 3 MAC, 5 name, 7 local.
    let (sub, bytes): (u8, Vec<u8>) = match id {
        Id::Mac(m) => (if chassis { 4 } else { 3 }, m.unwrap_or(mac).to_vec()),
        Id::InterfaceName(n) => (
            if chassis { 6 } else { 5 },
            n.as_deref().unwrap_or(ifname).as_bytes().to_vec(),
        ),
        Id::Local(s) => (7, s.as_bytes().to_vec()),
    };
    let mut v = vec![sub];
    v.extend(bytes);
    v
}

/// The agent's LLDP frame from `mac`, the port's MAC, on interface `ifname`; `ttl_s` is its
/// hold time (0 in the shutdown frame that tells neighbours to forget it).
pub fn frame(a: &Agent, mac: [u8; 6], ifname: &str, ttl_s: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend(DST);
    f.extend(mac);
    f.extend(ETHERTYPE.to_be_bytes());
    tlv(&mut f, 1, &id_value(&a.chassis, mac, ifname, true));
    tlv(&mut f, 2, &id_value(&a.port_id, mac, ifname, false));
    tlv(&mut f, 3, &ttl_s.to_be_bytes());
    let name = a.system_name.as_deref().unwrap_or(&a.name);
    tlv(&mut f, 5, name.as_bytes());
    for (oui, sub, info) in &a.org {
        let mut v = oui.to_vec();
        v.push(*sub);
        v.extend(info);
        tlv(&mut f, 127, &v);
    }
    tlv(&mut f, 0, &[]);
    f
}

/// A neighbour as its LLDPDU describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    pub chassis_subtype: u8,
    pub chassis_id: String,
    pub port_subtype: u8,
    pub port_id: String,
    pub ttl_s: u16,
    pub system_name: Option<String>,
    pub system_description: Option<String>,
    pub port_description: Option<String>,
    /// (type, enabled) for each capability bit the neighbour has.
    pub capabilities: Vec<(u8, bool)>,
    pub management_address: Option<String>,
    /// (OUI, subtype, information in hex).
    pub custom: Vec<([u8; 3], u8, String)>,
    /// TLVs of types this decoder does not know.
    pub unknown_tlvs: u64,
}

/// Why a frame is not an LLDPDU to keep (802.1AB 9.2.7.7: the first three TLVs must be
/// chassis ID, port ID and TTL, each well formed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFrame(pub String);

/// Decodes an LLDP frame (Ethernet header included, no VLAN tag).
pub fn decode(f: &[u8]) -> Result<Neighbor, BadFrame> {
    if f.len() < 14 || u16::from_be_bytes([f[12], f[13]]) != ETHERTYPE {
        return Err(BadFrame("not an LLDP frame".into()));
    }
    let tlvs = split(&f[14..])?;
    let want = |k: usize, t: u8, min: usize| match tlvs.get(k) {
        Some((kind, v)) if *kind == t && v.len() >= min => Ok(*v),
        _ => Err(BadFrame(format!(
            "TLV {k} is not a well-formed type {t} (802.1AB's mandatory order)"
        ))),
    };
    let (c, p, ttl) = (want(0, 1, 2)?, want(1, 2, 2)?, want(2, 3, 2)?);
    let mut n = Neighbor {
        chassis_subtype: c[0],
        chassis_id: id_text(c[0], &c[1..], true),
        port_subtype: p[0],
        port_id: id_text(p[0], &p[1..], false),
        ttl_s: u16::from_be_bytes([ttl[0], ttl[1]]),
        system_name: None,
        system_description: None,
        port_description: None,
        capabilities: Vec::new(),
        management_address: None,
        custom: Vec::new(),
        unknown_tlvs: 0,
    };
    for (kind, v) in &tlvs[3..] {
        optional(&mut n, *kind, v);
    }
    Ok(n)
}

fn split(mut b: &[u8]) -> Result<Vec<(u8, &[u8])>, BadFrame> {
    let mut out = Vec::new();
    while b.len() >= 2 {
        let head = u16::from_be_bytes([b[0], b[1]]);
        let (kind, len) = ((head >> 9) as u8, usize::from(head & 0x1ff));
        let v = b
            .get(2..2 + len)
            .ok_or_else(|| BadFrame(format!("a type {kind} TLV of {len} bytes runs past the frame")))?;
        if kind == 0 {
            return Ok(out);
        }
        out.push((kind, v));
        b = &b[2 + len..];
    }
    Err(BadFrame("no End of LLDPDU TLV".into()))
}

fn optional(n: &mut Neighbor, kind: u8, v: &[u8]) {
    let s = || String::from_utf8_lossy(v).into_owned();
    match kind {
        4 => n.port_description = Some(s()),
        5 => n.system_name = Some(s()),
        6 => n.system_description = Some(s()),
        7 if v.len() >= 4 => {
            let (have, on) = (u16::from_be_bytes([v[0], v[1]]), u16::from_be_bytes([v[2], v[3]]));
            n.capabilities = (0..11)
                .filter(|b| have & (1 << b) != 0)
                .map(|b| (b, on & (1 << b) != 0))
                .collect();
        }
        8 if v.len() >= 2 => n.management_address = address(&v[1..1 + usize::from(v[0]).min(v.len() - 1)]),
        127 if v.len() >= 4 => n.custom.push(([v[0], v[1], v[2]], v[3], to_hex(&v[4..]))),
        _ => n.unknown_tlvs += 1,
    }
}

/// A management address (its family byte, then the address).
fn address(a: &[u8]) -> Option<String> {
    match a {
        [1, b @ ..] if b.len() == 4 => Some(std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()),
        [2, b @ ..] if b.len() == 16 => {
            let x: [u8; 16] = b.try_into().ok()?;
            Some(std::net::Ipv6Addr::from(x).to_string())
        }
        _ => None,
    }
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn id_text(sub: u8, v: &[u8], chassis: bool) -> String {
    let is_mac = if chassis { sub == 4 } else { sub == 3 };
    if is_mac && v.len() == 6 {
        return v.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":");
    }
    String::from_utf8_lossy(v).into_owned()
}

const CHASSIS_TYPES: [&str; 8] = [
    "",
    "chassis_component",
    "interface_alias",
    "port_component",
    "mac_address",
    "network_address",
    "interface_name",
    "local",
];
const PORT_TYPES: [&str; 8] = [
    "",
    "interface_alias",
    "port_component",
    "mac_address",
    "network_address",
    "interface_name",
    "agent_circuit_id",
    "local",
];
const CAPABILITIES: [&str; 11] = [
    "other",
    "repeater",
    "mac_bridge",
    "wlan_access_point",
    "router",
    "telephone",
    "docsis_cable_device",
    "station_only",
    "c_vlan",
    "s_vlan",
    "two_port_mac_relay",
];

fn kind(t: &[&'static str; 8], s: u8) -> Option<&'static str> {
    t.get(usize::from(s)).copied().filter(|k| !k.is_empty())
}

/// The id a neighbour is listed by: its chassis and port IDs.
pub fn neighbor_id(n: &Neighbor) -> String {
    format!("{}/{}", n.chassis_id, n.port_id)
}

/// One `lldp_neighbors` entry: `age_s` since the neighbour was first heard, `since_s` since its
/// last LLDPDU.
pub fn neighbor_state(agent: &str, n: &Neighbor, age_s: u64, since_s: u64) -> Value {
    let mut v = json!({
        "lldp_name": agent,
        "chassis_id": n.chassis_id,
        "neighbor_id": neighbor_id(n),
        "age": age_s,
        "last_update": since_s,
        "ttl": n.ttl_s,
        "port_id": n.port_id,
        "capabilities": n.capabilities.iter().map(|(b, on)| json!({
            "capability_name": CAPABILITIES[usize::from(*b)], "capability_enabled": on })).collect::<Vec<_>>(),
        "custom_tlvs": n.custom.iter().map(|(oui, sub, info)| json!({
            "custom_type": 127, "oui": to_hex(oui), "oui_subtype": sub, "information": info })).collect::<Vec<_>>(),
    });
    let mut put = |k: &str, x: Option<&str>| {
        if let Some(x) = x {
            v[k] = json!(x);
        }
    };
    put("chassis_id_type", kind(&CHASSIS_TYPES, n.chassis_subtype));
    put("port_id_type", kind(&PORT_TYPES, n.port_subtype));
    put("system_name", n.system_name.as_deref());
    put("system_description", n.system_description.as_deref());
    put("port_description", n.port_description.as_deref());
    put("management_address", n.management_address.as_deref());
    if let Some(a) = &n.management_address {
        v["management_address_type"] = json!(if a.contains(':') { "ipv6" } else { "ipv4" });
    }
    v
}

#[cfg(test)]
mod tests;
