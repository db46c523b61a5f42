//! OTG devices: emulated hosts on ports. Each `devices[].ethernets[]` entry is a host on its
//! port (`connection.port_name`), or on a LAG (`connection.lag_name`), with its MAC, MTU and IPv4/IPv6 addresses, each with a
//! prefix and a gateway. The server brings them up on the Linux stack (see
//! `gapless_io::devices::hosts`), which answers ARP and Neighbor Solicitation for them and resolves
//! their gateways; a flow between two device addresses (`tx_rx.device`) sends from the one
//! to the other, with its destination MAC resolved when its traffic starts.

use std::net::IpAddr;

use serde_json::Value;

use crate::error::Invalid;

/// One device Ethernet: a host on a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eth {
    pub device: String,
    pub name: String,
    /// The port, or the LAG when `on_lag` (`connection.lag_name`).
    pub port: String,
    pub on_lag: bool,
    pub mac: String,
    pub mtu: Option<u32>,
    /// VLAN tags, outer first (at most two: 802.1Q, or QinQ with an 802.1ad outer tag).
    pub vlans: Vec<Vlan>,
    pub addrs: Vec<Addr>,
}

/// One of a device Ethernet's VLAN tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vlan {
    pub id: u16,
    pub tpid: u16,
    pub priority: u8,
}

/// One address of a device Ethernet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    pub name: String,
    pub ip: IpAddr,
    pub prefix: u8,
    pub gateway: IpAddr,
}

/// The config's device Ethernets (VLANs on them are refused with their path).
pub fn parse(cfg: &Value) -> Result<Vec<Eth>, Invalid> {
    let mut out: Vec<Eth> = Vec::new();
    for (i, d) in cfg["devices"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let device = d["name"].as_str().unwrap_or_default().to_string();
        for (j, e) in d["ethernets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let at = format!("devices[{i}].ethernets[{j}]");
            out.push(eth(e, &at, &device)?);
        }
        for key in ["rsvp", "vxlan", "ipv4_loopbacks", "ipv6_loopbacks"] {
            if d.get(key).is_some_and(|v| !v.is_null() && v != &Value::Array(vec![])) {
                return Err(Invalid(format!(
                    "devices[{i}].{key}: not supported yet: gapless drives FRR for devices[].bgp, isis, ospfv2 and ospfv3; RSVP, VXLAN and loopbacks are not emulated. Fix: leave {key} out"
                )));
            }
        }
    }
    let mut names: Vec<&str> = out
        .iter()
        .flat_map(|e| e.addrs.iter().map(|a| a.name.as_str()))
        .collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Invalid(format!("devices: the address name {:?} is used twice", w[0])));
    }
    Ok(out)
}

fn eth(e: &Value, at: &str, device: &str) -> Result<Eth, Invalid> {
    let c = &e["connection"];
    let (by_port, by_lag) = (
        c["port_name"].as_str().or(e["port_name"].as_str()),
        c["lag_name"].as_str(),
    );
    let named = match c["choice"].as_str() {
        Some("port_name") => (by_port, None),
        Some("lag_name") => (None, by_lag),
        _ => (by_port, by_lag),
    };
    let (port, on_lag) = match named {
        (Some(p), None) => (p, false),
        (None, Some(l)) => (l, true),
        (Some(_), Some(_)) => {
            return Err(Invalid(format!(
                "{at}.connection: give port_name or lag_name, not both (or connection.choice to say which)"
            )))
        }
        (None, None) => {
            return Err(Invalid(format!(
                "{at}.connection.port_name: name the port (or lag_name: the LAG) this device is on"
            )))
        }
    };
    let mac = e["mac"]
        .as_str()
        .filter(|m| m.split(':').count() == 6 && m.split(':').all(|b| u8::from_str_radix(b, 16).is_ok()))
        .ok_or_else(|| Invalid(format!("{at}.mac: give the device's MAC address (aa:bb:cc:dd:ee:ff)")))?;
    let mut addrs = Vec::new();
    for (key, v6) in [("ipv4_addresses", false), ("ipv6_addresses", true)] {
        for (k, a) in e[key].as_array().cloned().unwrap_or_default().iter().enumerate() {
            addrs.push(addr(a, &format!("{at}.{key}[{k}]"), v6)?);
        }
    }
    Ok(Eth {
        device: device.to_string(),
        name: e["name"].as_str().unwrap_or_default().to_string(),
        port: port.to_string(),
        on_lag,
        mac: mac.to_ascii_lowercase(),
        mtu: e["mtu"].as_u64().map(|m| m as u32),
        vlans: vlans(e, at)?,
        addrs,
    })
}

/// `vlans[]`: id (1..4094, default 1), tpid (x8100 or x88A8, the two the kernel's VLAN
/// devices speak) and priority (0..7), outer first.
fn vlans(e: &Value, at: &str) -> Result<Vec<Vlan>, Invalid> {
    let list = e["vlans"].as_array().cloned().unwrap_or_default();
    if list.len() > 2 {
        return Err(Invalid(format!(
            "{at}.vlans: {} tags given; a device takes one tag or two (QinQ)",
            list.len()
        )));
    }
    let mut out = Vec::new();
    for (k, v) in list.iter().enumerate() {
        let p = format!("{at}.vlans[{k}]");
        let id = v["id"].as_u64().unwrap_or(1);
        if !(1..=4094).contains(&id) {
            return Err(Invalid(format!("{p}.id: {id} is not a VLAN id (1..=4094)")));
        }
        let tpid = match v["tpid"].as_str().unwrap_or("x8100") {
            "x8100" => 0x8100,
            "x88A8" | "x88a8" => 0x88a8,
            other => {
                return Err(Invalid(format!(
                    "{p}.tpid: {other:?} is not supported on devices (x8100 or x88A8: the kernel's VLAN devices speak 802.1Q and 802.1ad)"
                )))
            }
        };
        let priority = v["priority"].as_u64().unwrap_or(0);
        if priority > 7 {
            return Err(Invalid(format!("{p}.priority: {priority} is not a priority (0..=7)")));
        }
        out.push(Vlan {
            id: id as u16,
            tpid,
            priority: priority as u8,
        });
    }
    Ok(out)
}

fn addr(a: &Value, at: &str, v6: bool) -> Result<Addr, Invalid> {
    let ip = |k: &str| -> Result<IpAddr, Invalid> {
        a[k].as_str()
            .and_then(|s| s.parse::<IpAddr>().ok())
            .filter(|ip| ip.is_ipv6() == v6)
            .ok_or_else(|| Invalid(format!("{at}.{k}: give an IPv{} address", if v6 { 6 } else { 4 })))
    };
    let max = if v6 { 128 } else { 32 };
    let prefix = a["prefix"].as_u64().unwrap_or(if v6 { 64 } else { 24 });
    if prefix == 0 || prefix > max {
        return Err(Invalid(format!(
            "{at}.prefix: {prefix} is not a prefix length (1..={max})"
        )));
    }
    let name = a["name"]
        .as_str()
        .ok_or_else(|| Invalid(format!("{at}.name: every address needs a name (flows name it)")))?;
    Ok(Addr {
        name: name.to_string(),
        ip: ip("address")?,
        prefix: prefix as u8,
        gateway: ip("gateway")?,
    })
}

/// An address given twice to one device Ethernet (featureprofiles' link_state_b2b test gives
/// port 1's Ethernet port 3's address, which is the same): the same address, prefix and
/// gateway is set once, with a warning naming both paths, and both names stay flow
/// endpoints; the same address with another prefix or gateway is refused naming both.
pub fn twice(cfg: &Value, eths: &[Eth]) -> Result<Vec<String>, Invalid> {
    let mut said = Vec::new();
    let mut k = 0;
    for (i, d) in cfg["devices"].as_array().into_iter().flatten().enumerate() {
        for j in 0..d["ethernets"].as_array().map_or(0, |a| a.len()) {
            let e = &eths[k];
            k += 1;
            let path = |n: usize| {
                let a = &e.addrs[n];
                let key = if a.ip.is_ipv6() {
                    "ipv6_addresses"
                } else {
                    "ipv4_addresses"
                };
                let m = e.addrs[..n].iter().filter(|b| b.ip.is_ipv6() == a.ip.is_ipv6()).count();
                format!("devices[{i}].ethernets[{j}].{key}[{m}]")
            };
            for (n, a) in e.addrs.iter().enumerate() {
                let Some(m) = e.addrs[..n].iter().position(|b| b.ip == a.ip) else {
                    continue;
                };
                let b = &e.addrs[m];
                if (b.prefix, b.gateway) != (a.prefix, a.gateway) {
                    return Err(Invalid(format!(
                        "{}: {} is already {} at {} with prefix {} and gateway {}; one Ethernet holds an address once. Fix: give {} another address, or the same prefix and gateway",
                        path(n), a.ip, b.name, path(m), b.prefix, b.gateway, a.name
                    )));
                }
                said.push(format!(
                    "{}: {} ({:?}) is {}'s address, prefix and gateway ({}) again: it is set once, and both names are flow endpoints",
                    path(n), a.ip, a.name, b.name, path(m)
                ));
            }
        }
    }
    Ok(said)
}

/// Each address of a device Ethernet once: (address, prefix, gateway), as the host takes
/// them ([`twice`] refused the same address with another prefix or gateway).
pub fn distinct(e: &Eth) -> Vec<(IpAddr, u8, IpAddr)> {
    let mut out: Vec<(IpAddr, u8, IpAddr)> = Vec::new();
    for a in &e.addrs {
        if !out.iter().any(|b| b.0 == a.ip) {
            out.push((a.ip, a.prefix, a.gateway));
        }
    }
    out
}

/// The device Ethernet and address an address name refers to.
pub fn find<'a>(eths: &'a [Eth], name: &str) -> Option<(&'a Eth, &'a Addr)> {
    eths.iter()
        .find_map(|e| e.addrs.iter().find(|a| a.name == name).map(|a| (e, a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_address_given_twice_to_one_ethernet_is_set_once_or_refused_naming_both_paths() {
        let a = |n: &str, ip: &str, gw: &str| json!({ "name": n, "address": ip, "gateway": gw, "prefix": 24 });
        let cfg = |second: Value| {
            json!({ "devices": [{ "name": "d1", "ethernets": [{ "name": "e", "mac": "00:00:01:01:01:01",
                "connection": { "port_name": "p1" },
                "ipv4_addresses": [a("one", "192.0.2.2", "192.0.2.1"), second] }] }] })
        };
        let same = cfg(a("three", "192.0.2.2", "192.0.2.1"));
        let eths = parse(&same).expect("parses");
        let said = twice(&same, &eths).expect("taken");
        assert!(
            said.len() == 1
                && said[0].starts_with("devices[0].ethernets[0].ipv4_addresses[1]: 192.0.2.2 (\"three\") is one's"),
            "expected one warning naming both paths; got {said:?}"
        );
        assert_eq!(distinct(&eths[0]).len(), 1, "expected the address set once");
        assert!(
            find(&eths, "three").is_some() && find(&eths, "one").is_some(),
            "both names stay endpoints"
        );
        let other = cfg(a("three", "192.0.2.2", "192.0.2.254"));
        let e = twice(&other, &parse(&other).unwrap()).expect_err("refused");
        assert!(
            e.0.starts_with("devices[0].ethernets[0].ipv4_addresses[1]: 192.0.2.2 is already one at devices[0].ethernets[0].ipv4_addresses[0]"),
            "expected both paths named; got {}",
            e.0
        );
    }

    #[test]
    fn devices_are_read_with_their_addresses_and_what_is_not_a_host_is_refused() {
        let cfg = json!({ "devices": [{ "name": "d1", "ethernets": [{ "name": "d1.eth", "mac": "00:00:01:01:01:01",
            "connection": { "choice": "port_name", "port_name": "p1" },
            "ipv4_addresses": [{ "name": "d1.v4", "address": "192.0.2.1", "prefix": 24, "gateway": "192.0.2.2" }],
            "ipv6_addresses": [{ "name": "d1.v6", "address": "2001:db8::1", "gateway": "2001:db8::2" }] }] }] });
        let e = parse(&cfg).unwrap();
        assert_eq!(
            (e[0].port.as_str(), e[0].addrs.len(), e[0].addrs[1].prefix),
            ("p1", 2, 64)
        );
        let (eth, a) = find(&e, "d1.v4").unwrap();
        assert_eq!(
            (eth.name.as_str(), a.gateway.to_string()),
            ("d1.eth", "192.0.2.2".to_string())
        );
        let bad = json!({ "devices": [{ "name": "d", "ethernets": [{ "name": "e", "mac": "00:00:01:01:01:01", "connection": { "port_name": "p1" },
            "ipv4_addresses": [{ "name": "a", "address": "192.0.2.1", "gateway": "2001:db8::1" }] }] }] });
        assert!(parse(&bad)
            .unwrap_err()
            .0
            .contains("devices[0].ethernets[0].ipv4_addresses[0].gateway"));
        let rsvp = json!({ "devices": [{ "name": "d", "ethernets": [], "rsvp": { "name": "o" } }] });
        assert!(parse(&rsvp)
            .unwrap_err()
            .0
            .contains("devices[0].rsvp: not supported yet"));
    }

    #[test]
    fn vlans_are_read_outer_first_and_what_the_kernel_cannot_tag_is_refused() {
        let with = |vlans: serde_json::Value| {
            parse(
                &json!({ "devices": [{ "name": "d", "ethernets": [{ "name": "e", "mac": "00:00:01:01:01:01",
                "connection": { "port_name": "p1" }, "vlans": vlans,
                "ipv4_addresses": [{ "name": "a", "address": "192.0.2.1", "gateway": "192.0.2.2" }] }] }] }),
            )
        };
        let e = with(json!([{ "name": "o", "tpid": "x88A8", "id": 300 }, { "name": "i", "id": 100, "priority": 5 }]))
            .unwrap();
        assert_eq!(
            e[0].vlans,
            vec![
                Vlan {
                    id: 300,
                    tpid: 0x88a8,
                    priority: 0
                },
                Vlan {
                    id: 100,
                    tpid: 0x8100,
                    priority: 5
                }
            ]
        );
        assert_eq!(
            with(json!([{ "name": "v" }])).unwrap()[0].vlans[0].id,
            1,
            "OTG's default id is 1"
        );
        for (bad, want) in [
            (json!([{ "id": 4095 }]), "vlans[0].id: 4095"),
            (json!([{ "id": 5, "tpid": "x9100" }]), "vlans[0].tpid: \"x9100\""),
            (json!([{ "id": 5, "priority": 8 }]), "vlans[0].priority: 8"),
            (json!([{}, {}, {}]), "vlans: 3 tags"),
        ] {
            let err = with(bad).unwrap_err().0;
            assert!(err.contains(want), "expected {want:?} in the error; got {err}");
        }
    }
}
