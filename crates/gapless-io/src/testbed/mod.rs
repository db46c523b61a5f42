//! The veth testbed: two network namespaces, `NAME-tx` and `NAME-rx`, joined by a veth pair
//! `NAME-tx0` <-> `NAME-rx0`, with the RFC 2544 benchmarking addresses 198.18.0.1/24 and
//! 198.18.0.2/24, fixed MACs, static neighbours, and no IPv6 link-local chatter
//! (addrgenmode none), so the only frames on the link are the ones a test sends.
//!
//! The sender is reached from the root namespace with `gapless run --netns NAME-tx`, or with
//! `ip netns exec NAME-tx gapless run ...`.
//!
//! Holds the testbed (this file), the reference device under test ([`dut`]) and the ends
//! beyond two around it ([`ends`]). May import
//! `kernel` and `error`.

pub mod dut;
pub mod ends;

use crate::error::IoError;
use crate::kernel::nic::is_root;

pub const TX_MAC: &str = "02:67:6c:00:00:01";
pub const RX_MAC: &str = "02:67:6c:00:00:02";
pub const TX_IP4: &str = "198.18.0.1";
pub const RX_IP4: &str = "198.18.0.2";

/// A testbed by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Testbed {
    pub name: String,
}

/// What `up` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpOutcome {
    Created,
    AlreadyUp,
}

pub(crate) use crate::kernel::nic::ip;

/// One end of the link: its MAC, its address, no IPv6 chatter, and the permanent
/// neighbour entry of the other end.
pub(crate) fn end(ns: &str, dev: &str, mac: &str, addr: &str, peer: &str, peer_mac: &str) -> Result<(), IoError> {
    ip(&["-n", ns, "link", "set", dev, "address", mac])?;
    ip(&["-n", ns, "link", "set", dev, "addrgenmode", "none"])?;
    ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
    ip(&["-n", ns, "link", "set", dev, "up"])?;
    ip(&[
        "-n",
        ns,
        "neigh",
        "replace",
        peer,
        "lladdr",
        peer_mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])?;
    Ok(())
}

impl Testbed {
    /// A testbed name: 1 to 10 characters of a-z, 0-9 (interface names are at most 15).
    pub fn new(name: &str) -> Result<Testbed, String> {
        if name.is_empty() || name.len() > 10 || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            return Err(format!(
                "testbed name {name:?} must be 1 to 10 characters of a-z and 0-9"
            ));
        }
        Ok(Testbed { name: name.to_string() })
    }
    pub fn tx_ns(&self) -> String {
        format!("{}-tx", self.name)
    }
    pub fn rx_ns(&self) -> String {
        format!("{}-rx", self.name)
    }
    pub fn tx_if(&self) -> String {
        format!("{}-tx0", self.name)
    }
    pub fn rx_if(&self) -> String {
        format!("{}-rx0", self.name)
    }

    /// Its two ends, their addresses, and how to send from the first, one line each.
    pub fn ends_text(&self) -> String {
        let (tx_ns, tx_if) = (self.tx_ns(), self.tx_if());
        format!(
            "  sender:   netns {tx_ns} iface {tx_if} (198.18.0.1, 02:67:6c:00:00:01): gapless run --netns {tx_ns} --iface {tx_if} ...\n  receiver: netns {} iface {} (198.18.0.2, 02:67:6c:00:00:02)\n",
            self.rx_ns(),
            self.rx_if()
        )
    }

    /// Whether both ends exist.
    pub fn is_up(&self) -> bool {
        ip(&["-n", &self.tx_ns(), "link", "show", &self.tx_if()]).is_ok()
            && ip(&["-n", &self.rx_ns(), "link", "show", &self.rx_if()]).is_ok()
    }

    /// TX queues of the sender's interface (veth makes as many RX queues on its peer).
    pub fn queues(&self) -> Option<u32> {
        let out = ip(&["-n", &self.tx_ns(), "-d", "link", "show", &self.tx_if()]).ok()?;
        let mut words = out.split_whitespace();
        words.find(|w| *w == "numtxqueues")?;
        words.next()?.parse().ok()
    }

    /// Creates the testbed with one queue each way; a complete one is left as it is, a
    /// partial one is rebuilt.
    pub fn up(&self) -> Result<UpOutcome, IoError> {
        self.up_with_queues(1)
    }

    /// As [`Testbed::up`], with `queues` TX and RX queues on both ends: one AF_XDP send loop
    /// per queue (`--cores` with `--backend afxdp`). A testbed with another queue count is
    /// rebuilt.
    pub fn up_with_queues(&self, queues: u32) -> Result<UpOutcome, IoError> {
        if !is_root() {
            return Err(IoError::NotRoot("gapless testbed up"));
        }
        if self.is_up() && self.queues() == Some(queues) && !self.has_dut() {
            return Ok(UpOutcome::AlreadyUp);
        }
        self.down()?;
        let (txn, rxn, txi, rxi) = (self.tx_ns(), self.rx_ns(), self.tx_if(), self.rx_if());
        let res = (|| {
            ip(&["netns", "add", &txn])?;
            ip(&["netns", "add", &rxn])?;
            let q = queues.to_string();
            ip(&[
                "link",
                "add",
                &txi,
                "netns",
                &txn,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                &rxi,
                "netns",
                &rxn,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
            ])?;
            for (ns, dev, mac, addr, peer, peer_mac) in [
                (&txn, &txi, TX_MAC, TX_IP4, RX_IP4, RX_MAC),
                (&rxn, &rxi, RX_MAC, RX_IP4, TX_IP4, TX_MAC),
            ] {
                ip(&["-n", ns, "link", "set", "lo", "up"])?;
                end(ns, dev, mac, addr, peer, peer_mac)?;
            }
            Ok(())
        })();
        if let Err(e) = res {
            let _ = self.down();
            return Err(e);
        }
        Ok(UpOutcome::Created)
    }

    /// Removes the testbed. Returns whether there was anything to remove.
    pub fn down(&self) -> Result<bool, IoError> {
        if !is_root() {
            return Err(IoError::NotRoot("gapless testbed down"));
        }
        let list = ip(&["netns", "list"])?;
        let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
        let mut removed = false;
        let mut all = vec![self.tx_ns(), self.rx_ns(), self.dut_ns()];
        all.extend(self.extra_end_namespaces());
        for ns in all {
            if names.contains(&ns.as_str()) {
                ip(&["netns", "del", &ns])?;
                removed = true;
            }
        }
        Ok(removed)
    }
}
