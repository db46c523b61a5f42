//! A port's addresses as the kernel has them (`ip -j addr` and `ip -j neigh`): its MAC,
//! its first IPv4 address, and the MAC its neighbour entry gives for another address.
//! Experiments over several ports address each direction's frames with these.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::kernel::nic::ip;
use crate::IoError;

/// An interface's MAC and first IPv4 address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAddrs {
    pub mac: String,
    pub ipv4: Option<Ipv4Addr>,
}

fn with_ns<'a>(netns: Option<&'a str>, args: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["-j"];
    if let Some(ns) = netns {
        a.extend(["-n", ns]);
    }
    a.extend_from_slice(args);
    a
}

/// `iface`'s addresses in namespace `netns` (None: this one).
pub fn port_addrs(netns: Option<&str>, iface: &str) -> Result<PortAddrs, IoError> {
    if let Some(ns) = netns.filter(|ns| ns.contains('/') || !std::path::Path::new("/var/run/netns").join(ns).exists()) {
        return Err(IoError::NoSuchNetns(ns.to_string()));
    }
    let out = ip(&with_ns(netns, &["addr", "show", "dev", iface])).map_err(|_| match netns {
        Some(ns) => IoError::Host {
            iface: iface.to_string(),
            what: format!("no interface {iface} in network namespace {ns}"),
            fix: format!("list them with `ip -n {ns} link`"),
        },
        None => IoError::NoSuchInterface(iface.to_string()),
    })?;
    parse_addrs(&out).ok_or_else(|| IoError::Host {
        iface: iface.to_string(),
        what: format!("`ip -j addr show dev {iface}` gave no MAC: {}", out.trim()),
        fix: "give the port's `mac` (and `ip`) in the experiment".into(),
    })
}

/// The MAC the neighbour table of `netns` gives `addr` on `iface` (None: no entry).
pub fn neighbour_mac(netns: Option<&str>, iface: &str, addr: &str) -> Option<String> {
    let out = ip(&with_ns(netns, &["neigh", "show", "to", addr, "dev", iface])).ok()?;
    let v: Value = serde_json::from_str(&out).ok()?;
    v.as_array()?
        .iter()
        .find_map(|n| n["lladdr"].as_str().map(str::to_string))
}

fn parse_addrs(json: &str) -> Option<PortAddrs> {
    let v: Value = serde_json::from_str(json).ok()?;
    let link = v.as_array()?.first()?;
    let mac = link["address"].as_str()?.to_string();
    let ipv4 = link["addr_info"].as_array().and_then(|a| {
        a.iter()
            .filter(|x| x["family"] == "inet")
            .find_map(|x| x["local"].as_str()?.parse().ok())
    });
    Some(PortAddrs { mac, ipv4 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_from_ip_json() {
        // As Debian 12's iproute2 prints `ip -j addr show dev gl-tx0`.
        let out = r#"[{"ifindex":5,"ifname":"gl-tx0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"qdisc":"noqueue","operstate":"UP","group":"default","txqlen":1000,"link_type":"ether","address":"02:67:6c:00:00:01","broadcast":"ff:ff:ff:ff:ff:ff","link_netnsid":0,"addr_info":[{"family":"inet6","local":"2001:db8::1","prefixlen":64},{"family":"inet","local":"198.18.0.1","prefixlen":24,"broadcast":"198.18.0.255","scope":"global","label":"gl-tx0","valid_life_time":4294967295,"preferred_life_time":4294967295}]}]"#;
        let a = parse_addrs(out).unwrap();
        assert_eq!(a.mac, "02:67:6c:00:00:01");
        assert_eq!(a.ipv4, Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(parse_addrs("[]"), None);
    }
}
