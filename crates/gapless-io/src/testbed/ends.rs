//! More ends around the reference device (`gapless testbed up --ports N`): ends 0 and 1
//! are the sender and receiver of the two-port testbed, and end k ≥ 2 is namespace
//! `NAME-pK` with interface `NAME-pK` (MAC 02:67:6c:00:01:K, 198.18.0.(K+1)/24), on the
//! device's port `NAME-dK`.
//!
//! Every end reaches every other by a permanent neighbour entry: the other end's MAC on a
//! bridge; on the router, the MAC of the router's port on its own side (ends 0 and 1 keep
//! the two-port testbed's, so its profiles run unchanged). The router has a host route and
//! a permanent neighbour for each end, and shapes every port's egress.

use crate::error::IoError;
use crate::testbed::{ip, Testbed, RX_IP4, RX_MAC, TX_IP4, TX_MAC};

/// An end of the testbed: where it is and its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub netns: String,
    pub iface: String,
    pub mac: String,
    pub ip4: String,
    /// The device's port it is wired to.
    pub dut_port: String,
    /// The MAC of that port when the device is the router.
    pub router_mac: String,
}

impl Testbed {
    /// End `k` of a testbed with a device.
    pub fn end(&self, k: usize) -> End {
        let (d0, d1) = self.dut_ports();
        match k {
            0 => End {
                netns: self.tx_ns(),
                iface: self.tx_if(),
                mac: TX_MAC.into(),
                ip4: TX_IP4.into(),
                dut_port: d0,
                router_mac: RX_MAC.into(),
            },
            1 => End {
                netns: self.rx_ns(),
                iface: self.rx_if(),
                mac: RX_MAC.into(),
                ip4: RX_IP4.into(),
                dut_port: d1,
                router_mac: TX_MAC.into(),
            },
            _ => End {
                netns: format!("{}-p{k}", self.name),
                iface: format!("{}-p{k}", self.name),
                mac: format!("02:67:6c:00:01:{k:02x}"),
                ip4: format!("198.18.0.{}", k + 1),
                dut_port: format!("{}-d{k}", self.name),
                router_mac: format!("02:67:6c:00:fe:{k:02x}"),
            },
        }
    }

    /// The namespaces of ends 2 and up that exist.
    pub fn extra_end_namespaces(&self) -> Vec<String> {
        let list = ip(&["netns", "list"]).unwrap_or_default();
        let prefix = format!("{}-p", self.name);
        list.lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| {
                n.strip_prefix(&prefix)
                    .is_some_and(|k| k.parse::<usize>().is_ok_and(|k| k >= 2))
            })
            .map(str::to_string)
            .collect()
    }

    /// How many ends the testbed has (2 without extra ends).
    pub fn port_count(&self) -> usize {
        2 + self.extra_end_namespaces().len()
    }

    /// Makes ends 2..n: namespace, veth to the device, addresses.
    pub(crate) fn extra_ends(&self, n: usize) -> Result<(), IoError> {
        let dn = self.dut_ns();
        for k in 2..n {
            let e = self.end(k);
            ip(&["netns", "add", &e.netns])?;
            ip(&["-n", &e.netns, "link", "set", "lo", "up"])?;
            ip(&[
                "link",
                "add",
                &e.iface,
                "netns",
                &e.netns,
                "type",
                "veth",
                "peer",
                "name",
                &e.dut_port,
                "netns",
                &dn,
            ])?;
            ip(&["-n", &e.netns, "link", "set", &e.iface, "address", &e.mac])?;
            ip(&["-n", &e.netns, "link", "set", &e.iface, "addrgenmode", "none"])?;
            ip(&["-n", &e.netns, "addr", "add", &format!("{}/24", e.ip4), "dev", &e.iface])?;
            ip(&["-n", &e.netns, "link", "set", &e.iface, "up"])?;
            ip(&["-n", &dn, "link", "set", &e.dut_port, "addrgenmode", "none"])?;
        }
        Ok(())
    }

    /// Every end's permanent neighbour entries for every other end (ends 0 and 1 have each
    /// other's already): the other end's MAC across a `bridge`, else the router's port's.
    pub(crate) fn neighbours(&self, n: usize, bridge: bool) -> Result<(), IoError> {
        for a in 0..n {
            let ea = self.end(a);
            for b in (0..n).filter(|&b| b != a && (a >= 2 || b >= 2)) {
                let eb = self.end(b);
                let mac = if bridge { &eb.mac } else { &ea.router_mac };
                ip(&[
                    "-n",
                    &ea.netns,
                    "neigh",
                    "replace",
                    &eb.ip4,
                    "lladdr",
                    mac,
                    "dev",
                    &ea.iface,
                    "nud",
                    "permanent",
                ])?;
            }
        }
        Ok(())
    }
}
