//! Emulated hosts on the Linux stack: a macvlan on a port's interface, in the port's network
//! namespace, with the host's MAC, MTU and addresses. The kernel answers ARP and Neighbor
//! Solicitation for them and resolves their gateways; gapless reads the neighbour table
//! (`ip -j neigh`). The port's own interface is set to answer ARP only for its own addresses
//! (`arp_ignore` 1), so a host's address is answered with the host's MAC alone. A [`Host`]
//! removes its macvlan when dropped. DESIGN-NOTES 47 says why the kernel's stack and not a
//! responder of our own. A host on a VLAN has its tags pushed and popped on its macvlan by
//! tc programs ([`vlan`], DESIGN-NOTES 52).

pub mod vlan;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::kernel::nic::{enter_netns, ip};
use crate::IoError;

/// What a host is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// The macvlan's name (at most 15 bytes).
    pub ifname: String,
    /// The port's interface it sits on, and the port's namespace.
    pub lower: String,
    pub netns: Option<String>,
    pub mac: String,
    pub mtu: Option<u32>,
    /// VLAN tags, outer first (at most two): (id, TPID 0x8100 or 0x88a8, priority). Every
    /// frame the host sends carries them (its ARP, ND and replies), and it hears only
    /// frames that carry exactly them.
    pub vlans: Vec<(u16, u16, u8)>,
    /// Addresses with their prefix lengths.
    pub addrs: Vec<(IpAddr, u8)>,
}

/// A host that is up; dropped, it is removed.
#[derive(Debug)]
pub struct Host {
    spec: HostSpec,
    /// The VLAN tagger on the macvlan, for a host on a VLAN.
    tagger: Option<vlan::Tagger>,
}

/// `ip` in the host's namespace.
fn ip_in(ns: Option<&str>, args: &[&str]) -> Result<String, IoError> {
    match ns {
        Some(n) => ip(&[&["-n", n], args].concat()),
        None => ip(args),
    }
}

impl Host {
    /// Brings the host up (replacing a leftover macvlan of the same name).
    pub fn create(spec: HostSpec) -> Result<Host, IoError> {
        let mut host = Host { spec, tagger: None };
        let spec = &host.spec;
        let ns = spec.netns.as_deref();
        let name = spec.ifname.as_str();
        let _ = ip_in(ns, &["link", "del", name]);
        ip_in(
            ns,
            &[
                "link",
                "add",
                name,
                "link",
                &spec.lower,
                "address",
                &spec.mac,
                "type",
                "macvlan",
                "mode",
                "bridge",
            ],
        )?;
        if let Some(m) = spec.mtu {
            ip_in(ns, &["link", "set", name, "mtu", &m.to_string()])?;
        }
        for (a, p) in &spec.addrs {
            let cidr = format!("{a}/{p}");
            let mut args = vec!["addr", "add", cidr.as_str(), "dev", name];
            if a.is_ipv6() {
                args.push("nodad");
            }
            ip_in(ns, &args)?;
        }
        if !spec.vlans.is_empty() {
            let (iface, tags) = (name.to_string(), spec.vlans.clone());
            host.tagger = Some(in_netns(ns, move || vlan::Tagger::attach(&iface, &tags))?);
        }
        ip_in(ns, &["link", "set", name, "up"])?;
        in_netns(ns, || {
            for dev in [spec.lower.as_str(), name] {
                let path = format!("/proc/sys/net/ipv4/conf/{dev}/arp_ignore");
                std::fs::write(&path, "1").map_err(|cause| IoError::Os {
                    context: format!("write {path}"),
                    cause,
                })?;
            }
            Ok(())
        })?;
        Ok(host)
    }

    /// The gateway's MAC, asking the kernel to resolve it (ARP or ND) and waiting up to
    /// `within`; the error names the unresolved address.
    pub fn resolve(&self, gateway: IpAddr, within: Duration) -> Result<String, IoError> {
        let t0 = Instant::now();
        let probe = self.prober(gateway)?;
        loop {
            if let Some(mac) = self.neighbor(gateway)? {
                return Ok(mac);
            }
            if t0.elapsed() >= within {
                return Err(IoError::Unresolved {
                    host: self.spec.ifname.clone(),
                    gateway: gateway.to_string(),
                    waited_ms: within.as_millis() as u64,
                });
            }
            // A datagram to the discard port: the kernel resolves the address to send it.
            let _ = probe.send_to(&[0], SocketAddr::new(gateway, 9));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A UDP socket bound to the host, made in its namespace (a socket keeps the namespace
    /// it was made in, so it is sent on from any thread).
    fn prober(&self, to: IpAddr) -> Result<UdpSocket, IoError> {
        let name = self.spec.ifname.clone();
        in_netns(self.spec.netns.as_deref(), move || {
            let any: SocketAddr = if to.is_ipv6() {
                "[::]:0".parse()
            } else {
                "0.0.0.0:0".parse()
            }
            .expect("literal");
            let os = |context: &str, cause| IoError::Os {
                context: context.to_string(),
                cause,
            };
            let s = UdpSocket::bind(any).map_err(|e| os("a UDP socket to resolve a gateway", e))?;
            crate::socket::bind_to_device(&s, &name)?;
            Ok(s)
        })
    }

    /// The neighbour table's MAC for `addr` on this host, when it has a usable one.
    pub fn neighbor(&self, addr: IpAddr) -> Result<Option<String>, IoError> {
        Ok(self
            .neighbors()?
            .into_iter()
            .find(|(a, _)| *a == addr)
            .and_then(|(_, m)| m))
    }

    /// The host's neighbour table: every address with its MAC when resolved.
    pub fn neighbors(&self) -> Result<Vec<(IpAddr, Option<String>)>, IoError> {
        let out = ip_in(
            self.spec.netns.as_deref(),
            &["-j", "neigh", "show", "dev", &self.spec.ifname],
        )?;
        let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap_or_default();
        Ok(rows
            .iter()
            .filter_map(|r| {
                let a: IpAddr = r["dst"].as_str()?.parse().ok()?;
                let usable = !r["state"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|x| x == "FAILED" || x == "INCOMPLETE"));
                let mac = r["lladdr"].as_str().filter(|_| usable).map(str::to_string);
                Some((a, mac))
            })
            .collect())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = ip_in(self.spec.netns.as_deref(), &["link", "del", &self.spec.ifname]);
    }
}

/// Runs `f` on a thread in namespace `ns` (this thread's own when None).
fn in_netns<T: Send>(ns: Option<&str>, f: impl FnOnce() -> Result<T, IoError> + Send) -> Result<T, IoError> {
    let Some(ns) = ns else { return f() };
    std::thread::scope(|sc| {
        sc.spawn(|| {
            enter_netns(ns)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(IoError::Os {
                context: format!("a thread in namespace {ns}"),
                cause: std::io::Error::other("it panicked"),
            })
        })
    })
}
