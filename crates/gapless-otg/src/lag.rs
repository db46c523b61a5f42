//! OTG's `lags[]`, read and checked (issue 60): each LAG's protocol (`static` with its
//! `lag_id`, or `lacp` with the actor's system id, priority and key) and its members, each a
//! config port with its own LACP settings. The 802.1AX machines are [`crate::lag::lacp`]; the
//! driver that runs them on the members' interfaces, and spreads a flow over the members
//! that distribute, is the server's.
//!
//! What the zero defaults send (snappi leaves every number at 0):
//! - `actor_system_id` 00:00:00:00:00:00: the first member's `ethernet.mac`, as a bond takes
//!   its first member's address;
//! - `actor_key` 0: the LAG's place in `lags[]` plus 1;
//! - `actor_port_number` 0: the member's place in `ports[]` plus 1;
//! - `lacpdu_timeout` 0 (auto): 3 s, short; `lacpdu_periodic_time_interval` 0 (auto): by
//!   the partner's timeout bit ([`crate::lag::lacp::member::Config`]).

pub mod lacp;

use serde_json::Value;

use crate::error::Invalid;
use crate::lag::lacp::member::Config;
use crate::lag::lacp::pdu::Info;

/// Most members a LAG takes (the model's bound).
pub const MAX_MEMBERS: usize = 32;

/// How a LAG's members agree to carry frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// No LACPDUs: a member distributes while its link is up.
    Static { lag_id: u32 },
    Lacp {
        system: [u8; 6],
        system_priority: u16,
        key: u16,
    },
}

/// One member: a config port and its LACP settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub port: String,
    /// `ethernet.name`: how results name the member's Ethernet.
    pub eth_name: String,
    /// `ethernet.mac`: the LACPDUs' source address.
    pub mac: [u8; 6],
    pub port_number: u16,
    pub port_priority: u16,
    pub active: bool,
    pub timeout_s: u16,
    pub periodic_s: u16,
}

/// One LAG as gapless runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    pub name: String,
    pub min_links: usize,
    pub protocol: Protocol,
    pub members: Vec<Member>,
}

impl Lag {
    /// Member `k`'s 802.1AX configuration (None for a static LAG).
    pub fn lacp(&self, k: usize) -> Option<Config> {
        let Protocol::Lacp {
            system,
            system_priority,
            key,
        } = self.protocol
        else {
            return None;
        };
        let m = &self.members[k];
        Some(Config {
            actor: Info {
                system_priority,
                system,
                key,
                port_priority: m.port_priority,
                port: m.port_number,
                state: 0,
            },
            active: m.active,
            timeout_s: m.timeout_s,
            periodic_s: m.periodic_s,
        })
    }
}

/// A MAC address `aa:bb:cc:dd:ee:ff`.
pub fn mac(s: &str) -> Option<[u8; 6]> {
    let b: Vec<u8> = s.split(':').filter_map(|x| u8::from_str_radix(x, 16).ok()).collect();
    (s.split(':').count() == 6 && b.len() == 6).then(|| b.try_into().expect("six"))
}

/// An integer at `at` in `0..=max`, `default` when absent.
fn int(v: &Value, at: &str, max: u64, default: u64) -> Result<u64, Invalid> {
    match v {
        Value::Null => Ok(default),
        v => v
            .as_u64()
            .filter(|n| *n <= max)
            .ok_or_else(|| Invalid(format!("{at}: {v} is not an integer in 0..={max}"))),
    }
}

/// A config port as a LAG sees it: its name, and the agent it is on (None: this host).
pub struct PortName<'a> {
    pub name: &'a str,
    pub agent: Option<&'a str>,
}

/// Every `lags[]` entry, checked against the config's ports and flows.
pub fn parse(cfg: &Value, ports: &[PortName]) -> Result<Vec<Lag>, Invalid> {
    let mut out: Vec<Lag> = Vec::new();
    for (i, l) in cfg["lags"].as_array().into_iter().flatten().enumerate() {
        let at = format!("lags[{i}]");
        let lag = one(l, &at, i, ports)?;
        if out.iter().any(|o| o.name == lag.name) || ports.iter().any(|p| p.name == lag.name) {
            return Err(Invalid(format!(
                "{at}.name: {:?} is already a port's or a LAG's name; flows name either, so give each its own",
                lag.name
            )));
        }
        for (k, m) in lag.members.iter().enumerate() {
            if let Some(o) = out.iter().find(|o| o.members.iter().any(|n| n.port == m.port)) {
                return Err(Invalid(format!(
                    "{at}.ports[{k}].port_name: port {:?} is already a member of LAG {:?}; a port is in one LAG at most",
                    m.port, o.name
                )));
            }
        }
        if let Protocol::Lacp { system, key, .. } = lag.protocol {
            if let Some(o) = out
                .iter()
                .find(|o| matches!(o.protocol, Protocol::Lacp { system: s, key: k, .. } if s == system && k == key))
            {
                return Err(Invalid(format!(
                    "{at}.protocol.lacp: LAG {:?} has the same actor_system_id and actor_key; a partner would take both for one aggregate. Fix: give each LAG its own actor_key",
                    o.name
                )));
            }
        }
        out.push(lag);
    }
    check_flows(cfg, &out)?;
    Ok(out)
}

/// One LAG, its members checked against the config's ports.
fn one(l: &Value, at: &str, i: usize, ports: &[PortName]) -> Result<Lag, Invalid> {
    let name = l["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Invalid(format!("{at}.name: every LAG needs a name")))?
        .to_string();
    let list = l["ports"].as_array().cloned().unwrap_or_default();
    if list.is_empty() || list.len() > MAX_MEMBERS {
        return Err(Invalid(format!(
            "{at}.ports: a LAG has 1 to {MAX_MEMBERS} members; got {}",
            list.len()
        )));
    }
    let members = list
        .iter()
        .enumerate()
        .map(|(k, m)| member(m, &format!("{at}.ports[{k}]"), k, ports))
        .collect::<Result<Vec<_>, _>>()?;
    let min_links = int(&l["min_links"], &format!("{at}.min_links"), 32, 1)? as usize;
    if min_links > members.len() {
        return Err(Invalid(format!(
            "{at}.min_links: {min_links} is more than the LAG's {} members; the LAG could never be up",
            members.len()
        )));
    }
    let protocol = protocol(&l["protocol"], at, i, &members)?;
    Ok(Lag {
        name,
        min_links,
        protocol,
        members,
    })
}

fn protocol(p: &Value, at: &str, i: usize, members: &[Member]) -> Result<Protocol, Invalid> {
    let at = format!("{at}.protocol");
    match Invalid::one_of(&p["choice"], &format!("{at}.choice"), &["lacp", "static"], "lacp")? {
        "static" => Ok(Protocol::Static {
            lag_id: int(
                &p["static"]["lag_id"],
                &format!("{at}.static.lag_id"),
                u32::MAX.into(),
                0,
            )? as u32,
        }),
        _ => {
            let l = &p["lacp"];
            let id = l["actor_system_id"].as_str().unwrap_or("00:00:00:00:00:00");
            let system = mac(id).ok_or_else(|| {
                Invalid(format!(
                    "{at}.lacp.actor_system_id: {id:?} is not a MAC address (aa:bb:cc:dd:ee:ff)"
                ))
            })?;
            let system = if system == [0; 6] { members[0].mac } else { system };
            let key = int(&l["actor_key"], &format!("{at}.lacp.actor_key"), 65_535, 0)? as u16;
            Ok(Protocol::Lacp {
                system,
                system_priority: int(
                    &l["actor_system_priority"],
                    &format!("{at}.lacp.actor_system_priority"),
                    65_535,
                    0,
                )? as u16,
                key: if key == 0 { i as u16 + 1 } else { key },
            })
        }
    }
}

/// One member: its port (here, on this host), its Ethernet and its LACP settings.
fn member(m: &Value, at: &str, k: usize, ports: &[PortName]) -> Result<Member, Invalid> {
    if !m["macsec"].is_null() {
        return Err(Invalid(format!(
            "{at}.macsec: MACsec on a LAG member is not supported. Fix: leave macsec out"
        )));
    }
    let name = m["port_name"].as_str().unwrap_or_default();
    let port = ports
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Invalid(format!("{at}.port_name: no port named {name:?}")))?;
    if let Some(a) = port.agent {
        return Err(Invalid(format!(
            "{at}.port_name: port {name:?} is on agent {a}; a LAG's members must be on this host, where one driver runs their LACP and spreads their frames"
        )));
    }
    let e = &m["ethernet"];
    let mac_s = e["mac"].as_str().unwrap_or_default();
    let mac = mac(mac_s).ok_or_else(|| {
        Invalid(format!(
            "{at}.ethernet.mac: give the member's MAC address (aa:bb:cc:dd:ee:ff), which its LACPDUs come from; got {mac_s:?}"
        ))
    })?;
    if e["vlans"].as_array().is_some_and(|v| !v.is_empty()) {
        return Err(Invalid(format!(
            "{at}.ethernet.vlans: VLANs on a LAG member are not supported; the LAG's frames carry the flows' own VLAN headers. Fix: leave vlans out"
        )));
    }
    let l = &m["lacp"];
    let n = |key: &str, max: u64, default: u64| int(&l[key], &format!("{at}.lacp.{key}"), max, default);
    let number = n("actor_port_number", 65_535, 0)? as u16;
    let activity = Invalid::one_of(
        &l["actor_activity"],
        &format!("{at}.lacp.actor_activity"),
        &["active", "passive"],
        "active",
    )?;
    Ok(Member {
        port: name.to_string(),
        eth_name: e["name"].as_str().unwrap_or(name).to_string(),
        mac,
        port_number: if number == 0 { k as u16 + 1 } else { number },
        port_priority: n("actor_port_priority", 65_535, 1)? as u16,
        active: activity == "active",
        timeout_s: n("lacpdu_timeout", 65_535, 0)? as u16,
        periodic_s: n("lacpdu_periodic_time_interval", 65_535, 0)? as u16,
    })
}

/// A member port that a flow names as its own port: its frames would bypass the LAG.
fn check_flows(cfg: &Value, lags: &[Lag]) -> Result<(), Invalid> {
    for (i, f) in cfg["flows"].as_array().into_iter().flatten().enumerate() {
        let p = &f["tx_rx"]["port"];
        let named = std::iter::once(("tx_name".to_string(), &p["tx_name"])).chain(
            p["rx_names"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(k, v)| (format!("rx_names[{k}]"), v)),
        );
        for (key, v) in named {
            let Some(n) = v.as_str() else { continue };
            if let Some(l) = lags.iter().find(|l| l.members.iter().any(|m| m.port == n)) {
                return Err(Invalid(format!(
                    "flows[{i}].tx_rx.port.{key}: port {n:?} is a member of LAG {:?}; a flow goes on the LAG. Fix: name {:?}",
                    l.name, l.name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
