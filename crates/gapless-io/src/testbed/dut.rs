//! The reference device under test: a third namespace `NAME-dut` between the testbed's two
//! ends, a Linux bridge or an IPv4 router, whose egress towards the receiver carries a tbf
//! (or htb) at a set rate with a queue of a set number of frames. It gives experiments a
//! device with a real capacity and a real queue.
//!
//! ```text
//!  NAME-tx: NAME-tx0 ── NAME-d0 [NAME-dut: bridge | router] NAME-d1 ── NAME-rx0 :NAME-rx
//!                                           egress shaper ───┘
//! ```
//!
//! The router keeps the endpoints' view of the link: its port towards the sender answers to
//! the receiver's MAC and its port towards the receiver to the sender's, so profiles written
//! for the direct testbed run unchanged through either device. It routes by static host
//! routes and permanent neighbours, and decrements the TTL as any router does.
//!
//! The failover router adds a backup path to a second receiving end, `NAME-rx1` in the
//! receiver's namespace (MAC 02:67:6c:00:00:03, no address: it only meters):
//!
//! ```text
//!  NAME-tx0 ── NAME-d0 [NAME-dut: router] NAME-d1 ── NAME-rx0   primary, metric 0
//!                                          NAME-d2 ── NAME-rx1   backup, metric 100
//! ```
//!
//! The receiver's host route goes through `NAME-d1`, and through `NAME-d2` at a worse
//! metric (primary/backup, not ECMP, whose hash could keep a flow on either path). An
//! admin down of `NAME-d1` removes its route, so the backup carries the traffic at once;
//! a carrier loss (`NAME-rx0` down) keeps the route but marks it `linkdown`, which the
//! router skips because `ignore_routes_with_linkdown` is on (DESIGN-NOTES 67).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::IoError;
use crate::kernel::qdisc::tc;
use crate::testbed::ends::End;
use crate::testbed::{end, ip, Testbed, RX_IP4, RX_MAC, TX_IP4, TX_MAC};

/// What forwards between the ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DutKind {
    Bridge,
    Router,
    /// A router with a primary and a backup path to the receiver.
    RouterFailover,
}

/// The backup receiving end's MAC.
pub const RX_BACKUP_MAC: &str = "02:67:6c:00:00:03";
/// The backup route's metric (the primary's is 0).
pub const BACKUP_METRIC: u32 = 100;

/// The device: its kind, and its egress capacity and queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dut {
    pub kind: DutKind,
    /// bit/s as the qdisc counts (frames without FCS); None: no shaper.
    pub rate_bps: Option<u64>,
    /// Queue limit in frames (with a rate).
    pub queue: u32,
    /// "tbf" or "htb".
    pub qdisc: String,
    /// Ends around the device (2: the sender and the receiver; more: [`super::ends`]).
    pub ports: usize,
    /// The bridge's bound on learned addresses (`IFLA_BR_FDB_MAX_LEARNED`; None: none).
    pub fdb_max_learned: Option<u32>,
}

/// Most ends a testbed has around its device.
pub const MAX_PORTS: usize = 16;

/// The router's own addresses on its two ports (host routes only: the ends keep their /24).
const DUT_IP_TX_SIDE: &str = "198.18.0.253";
const DUT_IP_RX_SIDE: &str = "198.18.0.254";
const DUT_IP_BACKUP: &str = "198.18.0.252";

/// Parses a rate as tc writes it: a number of bit/s, or with `kbit`, `mbit`, `gbit` (powers
/// of 1000).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n.to_string(), *m)))
        .unwrap_or((t.clone(), 1.0));
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * mult >= 8_000.0 && v * mult <= 400e9 => Ok((v * mult).round() as u64),
        _ => Err(format!(
            "rate {s:?}: give bit/s from 8kbit to 400gbit, as a number or with kbit, mbit or gbit (e.g. 24mbit). tc's kbps/mbps are bytes and are not taken"
        )),
    }
}

/// Frames per second a rate carries at a frame size with FCS (the qdisc counts `size − 4`).
pub fn pps_at(rate_bps: u64, frame_size: u32) -> f64 {
    rate_bps as f64 / (8.0 * f64::from(frame_size.saturating_sub(4)))
}

impl Testbed {
    pub fn dut_ns(&self) -> String {
        format!("{}-dut", self.name)
    }
    /// The device's port towards the sender, and towards the receiver (where it shapes).
    pub fn dut_ports(&self) -> (String, String) {
        (format!("{}-d0", self.name), format!("{}-d1", self.name))
    }

    /// The failover router's port towards the backup end, and that end (in the
    /// receiver's namespace).
    pub fn backup_ports(&self) -> (String, String) {
        (format!("{}-d2", self.name), format!("{}-rx1", self.name))
    }

    /// Whether a device is in the middle.
    pub fn has_dut(&self) -> bool {
        ip(&["-n", &self.dut_ns(), "link", "show", &self.dut_ports().1]).is_ok()
    }

    /// The device that is up now, read back from the kernel.
    pub fn dut(&self) -> Option<Dut> {
        if !self.has_dut() {
            return None;
        }
        let ns = self.dut_ns();
        let kind = if ip(&["-n", &ns, "link", "show", "br0"]).is_ok() {
            DutKind::Bridge
        } else if ip(&["-n", &self.rx_ns(), "link", "show", &self.backup_ports().1]).is_ok() {
            DutKind::RouterFailover
        } else {
            DutKind::Router
        };
        let (rate_bps, queue, qdisc) = read_shaper(&ns, &self.dut_ports().1);
        Some(Dut {
            kind,
            rate_bps,
            queue,
            qdisc,
            ports: self.port_count(),
            fdb_max_learned: match kind {
                DutKind::Bridge => crate::kernel::bridge::fdb_count(Some(&ns), "br0")
                    .ok()
                    .and_then(|c| c.max_learned)
                    .filter(|&m| m > 0),
                _ => None,
            },
        })
    }

    /// Makes the testbed with `dut` in the middle; one that is up as asked is left alone,
    /// anything else (the direct testbed too) is rebuilt.
    pub fn up_with_dut(&self, dut: &Dut) -> Result<crate::testbed::UpOutcome, IoError> {
        if !crate::kernel::nic::is_root() {
            return Err(IoError::NotRoot("gapless testbed up --dut"));
        }
        if !(2..=MAX_PORTS).contains(&dut.ports) {
            return Err(IoError::Host {
                iface: self.dut_ns(),
                what: format!("--ports {}: the testbed takes 2 to {MAX_PORTS} ends", dut.ports),
                fix: format!("give --ports from 2 to {MAX_PORTS}"),
            });
        }
        if dut.ports > 2 && dut.kind == DutKind::RouterFailover {
            return Err(IoError::Host {
                iface: self.dut_ns(),
                what: "--ports above 2 with --dut router-failover: the failover router has one sender and a primary and a backup receiver".into(),
                fix: "use --dut router or bridge for more ends".into(),
            });
        }
        if dut.fdb_max_learned.is_some() && dut.kind != DutKind::Bridge {
            return Err(IoError::Host {
                iface: self.dut_ns(),
                what: "--fdb-max-learned bounds a bridge's forwarding database; a router has none".into(),
                fix: "use --dut bridge".into(),
            });
        }
        if dut.fdb_max_learned.is_some() {
            crate::kernel::bridge::check_fdb_max_learned()?;
        }
        let same = |d: Dut| {
            d.kind == dut.kind
                && d.ports == dut.ports
                && d.fdb_max_learned == dut.fdb_max_learned
                && d.rate_bps == dut.rate_bps
                && (dut.rate_bps.is_none() || d.queue == dut.queue && d.qdisc == dut.qdisc)
        };
        if self.is_up() && self.dut().is_some_and(same) {
            return Ok(crate::testbed::UpOutcome::AlreadyUp);
        }
        self.down()?;
        if let Err(e) = self.build_dut(dut) {
            let _ = self.down();
            return Err(e);
        }
        Ok(crate::testbed::UpOutcome::Created)
    }

    fn build_dut(&self, dut: &Dut) -> Result<(), IoError> {
        let (txn, rxn, dn) = (self.tx_ns(), self.rx_ns(), self.dut_ns());
        let (d0, d1) = self.dut_ports();
        for ns in [&txn, &rxn, &dn] {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        ip(&[
            "link",
            "add",
            &self.tx_if(),
            "netns",
            &txn,
            "type",
            "veth",
            "peer",
            "name",
            &d0,
            "netns",
            &dn,
        ])?;
        ip(&[
            "link",
            "add",
            &d1,
            "netns",
            &dn,
            "type",
            "veth",
            "peer",
            "name",
            &self.rx_if(),
            "netns",
            &rxn,
        ])?;
        end(&txn, &self.tx_if(), TX_MAC, TX_IP4, RX_IP4, RX_MAC)?;
        end(&rxn, &self.rx_if(), RX_MAC, RX_IP4, TX_IP4, TX_MAC)?;
        for p in [&d0, &d1] {
            ip(&["-n", &dn, "link", "set", p, "addrgenmode", "none"])?;
        }
        self.extra_ends(dut.ports)?;
        let ports: Vec<String> = (0..dut.ports).map(|k| self.end(k).dut_port).collect();
        match dut.kind {
            DutKind::Bridge => {
                bridge(&dn, &ports)?;
                if let Some(m) = dut.fdb_max_learned {
                    crate::kernel::bridge::set_fdb_max_learned(Some(&dn), "br0", m)?;
                }
            }
            DutKind::Router => {
                router(&dn, &d0, &d1)?;
                for k in 2..dut.ports {
                    router_port(&dn, &self.end(k), k)?;
                }
            }
            DutKind::RouterFailover => {
                router(&dn, &d0, &d1)?;
                self.backup_path()?;
            }
        }
        self.neighbours(dut.ports, dut.kind == DutKind::Bridge)?;
        let mut egress = ports.clone();
        if dut.kind == DutKind::RouterFailover {
            egress.push(self.backup_ports().0);
        }
        // Every port's egress is shaped: each direction meets the same capacity.
        for p in &egress {
            if let Some(rate) = dut.rate_bps {
                shape(&dn, p, rate, dut.queue, &dut.qdisc)?;
            }
            steer(&dn, p, dut_cpu())?;
        }
        Ok(())
    }

    /// The failover router's backup: a veth to `NAME-rx1`, the receiver's host route
    /// through it at [`BACKUP_METRIC`], and routes whose link is down left out of lookups.
    fn backup_path(&self) -> Result<(), IoError> {
        let (dn, rxn) = (self.dut_ns(), self.rx_ns());
        let (d2, rx1) = self.backup_ports();
        ip(&[
            "link", "add", &d2, "netns", &dn, "type", "veth", "peer", "name", &rx1, "netns", &rxn,
        ])?;
        ip(&["-n", &rxn, "link", "set", &rx1, "address", RX_BACKUP_MAC])?;
        ip(&["-n", &rxn, "link", "set", &rx1, "addrgenmode", "none"])?;
        ip(&["-n", &rxn, "link", "set", &rx1, "up"])?;
        ip(&["-n", &dn, "link", "set", &d2, "addrgenmode", "none"])?;
        ip(&["-n", &dn, "link", "set", &d2, "address", TX_MAC])?;
        ip(&["-n", &dn, "addr", "add", &format!("{DUT_IP_BACKUP}/32"), "dev", &d2])?;
        ip(&["-n", &dn, "link", "set", &d2, "up"])?;
        let metric = BACKUP_METRIC.to_string();
        let host = format!("{RX_IP4}/32");
        ip(&["-n", &dn, "route", "add", &host, "dev", &d2, "metric", &metric])?;
        let neigh = [
            "neigh",
            "replace",
            RX_IP4,
            "lladdr",
            RX_BACKUP_MAC,
            "dev",
            &d2,
            "nud",
            "permanent",
        ];
        ip(&[&["-n", dn.as_str()][..], &neigh[..]].concat())?;
        let (_, d1) = self.dut_ports();
        for dev in ["all", "default", d1.as_str(), d2.as_str()] {
            sysctl(&dn, &format!("net.ipv4.conf.{dev}.ignore_routes_with_linkdown=1"))?;
        }
        sysctl(&dn, &format!("net.ipv4.conf.{d2}.rp_filter=0"))
    }
}

/// A bridge of the ports, STP off, waited for until every port forwards.
fn bridge(ns: &str, ports: &[String]) -> Result<(), IoError> {
    ip(&[
        "-n",
        ns,
        "link",
        "add",
        "br0",
        "type",
        "bridge",
        "stp_state",
        "0",
        "forward_delay",
        "0",
    ])?;
    ip(&["-n", ns, "link", "set", "br0", "addrgenmode", "none"])?;
    for p in ports {
        ip(&["-n", ns, "link", "set", p, "master", "br0"])?;
        ip(&["-n", ns, "link", "set", p, "up"])?;
    }
    ip(&["-n", ns, "link", "set", "br0", "up"])?;
    let t0 = Instant::now();
    loop {
        let out = Command::new("bridge").args(["-n", ns, "link", "show"]).output();
        let text = out
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if text.matches("state forwarding").count() >= ports.len() {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(IoError::Command {
                cmd: format!("bridge -n {ns} link show"),
                stderr: format!("the bridge ports did not reach state forwarding within 10 s: {text}"),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Forwarding on, host routes and permanent neighbours to both ends; each port answers to
/// the MAC the end on its side already sends to.
fn router(ns: &str, d0: &str, d1: &str) -> Result<(), IoError> {
    for (p, mac, addr, end, end_mac) in [
        (d0, RX_MAC, DUT_IP_TX_SIDE, TX_IP4, TX_MAC),
        (d1, TX_MAC, DUT_IP_RX_SIDE, RX_IP4, RX_MAC),
    ] {
        ip(&["-n", ns, "link", "set", p, "address", mac])?;
        ip(&["-n", ns, "addr", "add", &format!("{addr}/32"), "dev", p])?;
        ip(&["-n", ns, "link", "set", p, "up"])?;
        ip(&["-n", ns, "route", "replace", &format!("{end}/32"), "dev", p])?;
        ip(&[
            "-n",
            ns,
            "neigh",
            "replace",
            end,
            "lladdr",
            end_mac,
            "dev",
            p,
            "nud",
            "permanent",
        ])?;
    }
    for key in [
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv4.conf.all.send_redirects=0",
    ] {
        sysctl(ns, key)?;
    }
    for p in [d0, d1] {
        sysctl(ns, &format!("net.ipv4.conf.{p}.rp_filter=0"))?;
    }
    Ok(())
}

/// The router's port to end `k` ≥ 2: its MAC, an address, the end's host route and
/// permanent neighbour.
fn router_port(ns: &str, end: &End, k: usize) -> Result<(), IoError> {
    let p = end.dut_port.as_str();
    ip(&["-n", ns, "link", "set", p, "address", &end.router_mac])?;
    ip(&["-n", ns, "addr", "add", &format!("198.18.0.{}/32", 250 - k), "dev", p])?;
    ip(&["-n", ns, "link", "set", p, "up"])?;
    ip(&["-n", ns, "route", "replace", &format!("{}/32", end.ip4), "dev", p])?;
    ip(&[
        "-n",
        ns,
        "neigh",
        "replace",
        &end.ip4,
        "lladdr",
        &end.mac,
        "dev",
        p,
        "nud",
        "permanent",
    ])?;
    sysctl(ns, &format!("net.ipv4.conf.{p}.rp_filter=0"))
}

/// The CPU the device forwards on: the last one. Frames from the sender are handed to it
/// (RPS on the sender-side port), so the device works beside the sender as a real one does.
/// Without this the forwarding and the shaper run inside the sender's own system calls on
/// veth, and the shaper slows the sender (at 60 kpps into a 50 kpps tbf: 60,000 frames
/// took 1.2 s and none was dropped) instead of dropping what it cannot carry.
pub fn dut_cpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
}

fn steer(ns: &str, dev: &str, cpu: usize) -> Result<(), IoError> {
    let mask = format!("{:x}", 1u128 << cpu.min(127));
    let path = format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus");
    ip(&["netns", "exec", ns, "sh", "-c", &format!("echo {mask} > {path}")]).map(|_| ())
}

fn sysctl(ns: &str, kv: &str) -> Result<(), IoError> {
    ip(&["netns", "exec", ns, "sysctl", "-q", "-w", kv]).map(|_| ())
}

/// The egress shaper: tbf (or htb) at `rate`, a bucket of 1 ms of the rate (at least two
/// full frames), and a pfifo of `queue` frames under it.
fn shape(ns: &str, dev: &str, rate: u64, queue: u32, qdisc: &str) -> Result<(), IoError> {
    let burst = (rate / 8 / 1000).max(2 * 1514);
    let p = crate::kernel::qdisc::ShaperParams {
        qdisc: qdisc.to_string(),
        rate_bps: rate,
        burst_bytes: burst,
        limit_bytes: burst + 1514,
        queue_frames: Some(queue),
    };
    for c in p.commands(dev) {
        let mut args = vec!["-n", ns];
        args.extend(c.iter().map(String::as_str));
        tc(&args)?;
    }
    Ok(())
}

/// The shaper on `dev`: its rate, the pfifo's limit, the root's kind.
fn read_shaper(ns: &str, dev: &str) -> (Option<u64>, u32, String) {
    let qs = tc(&["-n", ns, "-j", "qdisc", "show", "dev", dev])
        .ok()
        .and_then(|j| crate::kernel::qdisc::parse(&j).ok())
        .unwrap_or_default();
    let root = qs.iter().find(|q| q.root);
    let kind = root.map(|q| q.kind.clone()).unwrap_or_default();
    let rate = match kind.as_str() {
        "tbf" => root.and_then(|q| q.options["rate"].as_u64()).map(|r| r * 8),
        "htb" => htb_rate(ns, dev),
        _ => None,
    };
    let queue = qs
        .iter()
        .find(|q| q.kind == "pfifo")
        .and_then(|q| q.options["limit"].as_u64())
        .unwrap_or(0) as u32;
    (rate, queue, kind)
}

/// The htb class's rate. `tc -j class show` prints htb classes as text on this iproute2,
/// so the rate is read from the text (`... rate 24Mbit ceil ...`).
fn htb_rate(ns: &str, dev: &str) -> Option<u64> {
    let out = tc(&["-n", ns, "class", "show", "dev", dev]).ok()?;
    let mut words = out.split_whitespace();
    words.find(|w| *w == "rate")?;
    parse_rate(words.next()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_tc_writes_them() {
        assert_eq!(parse_rate("24mbit"), Ok(24_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("800kbit"), Ok(800_000));
        assert_eq!(parse_rate("10000000"), Ok(10_000_000));
        for bad in ["24mbps", "fast", "-1mbit", "1bit"] {
            let e = parse_rate(bad).expect_err(bad);
            assert!(e.contains("24mbit"), "{bad}: {e}");
        }
        assert!((pps_at(24_000_000, 64) - 50_000.0).abs() < 1e-9);
        // As tc prints an htb class's rate.
        assert_eq!(parse_rate("24Mbit"), Ok(24_000_000));
    }
}
