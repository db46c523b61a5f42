//! Emulated hosts on the Linux stack. Each host is a macvlan on a port's interface, moved
//! into a network namespace of its own (`gapless-dev-<pid>-<k>`), with the host's MAC, MTU,
//! addresses and a default route through its first gateway. In its own namespace, a host is
//! a host: two hosts on ports in one namespace (two veths, as ixia-c users wire them) see
//! each other only over the wire, so they resolve each other with ARP and ND as two
//! machines would, and the port's namespace never answers for a host's address. The kernel
//! answers ARP and Neighbor Solicitation for the host and resolves its gateways; gapless reads
//! the neighbour table (`ip -j neigh`). A [`Host`] removes its namespace, and with it the
//! macvlan, when dropped; [`remove_stale`] removes those a server that died left behind.
//! DESIGN-NOTES 47 says why the kernel's stack and not a responder of our own. A host on a
//! VLAN has its tags pushed and popped on its macvlan by tc programs ([`vlan`],
//! DESIGN-NOTES 52).

pub mod vlan;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime};

use crate::kernel::nic::{in_netns, ip, ip_batch};
use crate::IoError;

/// The prefix of every host's namespace; the rest is `<pid>-<k>`, the server's pid first.
pub const NETNS_PREFIX: &str = super::frr::keeper::NETNS_PREFIX;

/// What a host is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// The macvlan's name (at most 15 bytes), unique in the port's namespace.
    pub ifname: String,
    /// The port's interface it sits on, and the port's namespace.
    pub lower: String,
    pub netns: Option<String>,
    /// The host's own namespace, made for it (a name from [`netns_name`]).
    pub own_netns: String,
    pub mac: String,
    pub mtu: Option<u32>,
    /// VLAN tags, outer first (at most two): (id, TPID 0x8100 or 0x88a8, priority). Every
    /// frame the host sends carries them (its ARP, ND and replies), and it hears only
    /// frames that carry exactly them.
    pub vlans: Vec<(u16, u16, u8)>,
    /// Addresses with their prefix lengths and gateways.
    pub addrs: Vec<(IpAddr, u8, IpAddr)>,
}

/// The namespace of this process's `k`-th host.
pub fn netns_name(k: usize) -> String {
    format!("{NETNS_PREFIX}{}-{k}", std::process::id())
}

/// A host that is up; removed by [`Host::remove`] or when dropped.
#[derive(Debug)]
pub struct Host {
    spec: HostSpec,
    /// The VLAN tagger on the macvlan, for a host on a VLAN.
    tagger: std::sync::Mutex<Option<vlan::Tagger>>,
    /// Whether the host's namespace was made (and so is ours to remove).
    made: bool,
    removed: std::sync::atomic::AtomicBool,
}

/// The `ip -batch` lines that bring the host up, with a default route per family through its
/// first gateway (onlink: a gateway outside the prefix is still asked for on the link, as a
/// host configured so would).
fn up_and_routes(spec: &HostSpec) -> String {
    let name = spec.ifname.as_str();
    let mut lines = format!("link set lo up\nlink set {name} up\n");
    for v6 in [false, true] {
        let first = spec.addrs.iter().find(|a| a.0.is_ipv6() == v6);
        if let Some((_, _, gw)) = first.filter(|a| !a.2.is_unspecified()) {
            // The family is the gateway's (`ip -batch` takes no -4/-6 on a line).
            lines += &format!("route replace default via {gw} dev {name} onlink\n");
        }
    }
    lines
}

/// A macvlan whose MAC another on the same lower interface has is refused when set up
/// ("Address already in use"): the error says so, and how to fix it.
fn mac_taken(e: IoError, spec: &HostSpec) -> IoError {
    match e {
        IoError::Command { stderr, .. } if stderr.contains("Address already in use") => IoError::Host {
            iface: spec.lower.clone(),
            what: format!("another interface on it already has the MAC {}", spec.mac),
            fix: "give each device on a port its own MAC; a device of another server's config on the same port holds it until that server sets another config or stops".into(),
        },
        e => e,
    }
}

/// `ip` in namespace `ns` (this process's own when None).
fn ip_in(ns: Option<&str>, args: &[&str]) -> Result<String, IoError> {
    match ns {
        Some(n) => ip(&[&["-n", n], args].concat()),
        None => ip(args),
    }
}

impl Host {
    /// Brings the host up in its own namespace (replacing a leftover of the same name): three
    /// `ip` commands, the macvlan made straight into the namespace.
    pub fn create(spec: HostSpec) -> Result<Host, IoError> {
        let mut host = Host {
            spec,
            tagger: std::sync::Mutex::new(None),
            made: false,
            removed: std::sync::atomic::AtomicBool::new(false),
        };
        let spec = &host.spec;
        let own = spec.own_netns.as_str();
        fresh_netns(own)?;
        host.made = true;
        let add = [
            "link",
            "add",
            spec.ifname.as_str(),
            "link",
            spec.lower.as_str(),
            "address",
            spec.mac.as_str(),
            "netns",
            own,
            "type",
            "macvlan",
            "mode",
            "bridge",
        ];
        ip_in(spec.netns.as_deref(), &add)?;
        host.configure()?;
        Ok(host)
    }

    /// The host's settings inside its own namespace: MTU and addresses, the VLAN tagger, then
    /// up and routes, each part one `ip -batch`.
    fn configure(&mut self) -> Result<(), IoError> {
        let spec = &self.spec;
        let ns = Some(spec.own_netns.as_str());
        let name = spec.ifname.as_str();
        let mut first = String::new();
        if let Some(m) = spec.mtu {
            first += &format!("link set {name} mtu {m}\n");
        }
        for (a, p, _) in &spec.addrs {
            let nodad = if a.is_ipv6() { " nodad" } else { "" };
            first += &format!("addr add {a}/{p} dev {name}{nodad}\n");
        }
        let up = up_and_routes(spec);
        if spec.vlans.is_empty() {
            return ip_batch(ns, &(first + &up)).map_err(|e| mac_taken(e, spec));
        }
        if !first.is_empty() {
            ip_batch(ns, &first)?;
        }
        let (iface, tags) = (name.to_string(), spec.vlans.clone());
        let tagger = in_netns(ns, move || vlan::Tagger::attach(&iface, &tags))?;
        *self.tagger.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(tagger);
        ip_batch(ns, &up).map_err(|e| mac_taken(e, spec))
    }

    /// The host's own namespace.
    pub fn netns(&self) -> &str {
        &self.spec.own_netns
    }

    /// The host's interface, in its own namespace.
    pub fn ifname(&self) -> &str {
        &self.spec.ifname
    }

    /// Each gateway of the host, once (an unspecified one, `0.0.0.0` or `::`, is none).
    pub fn gateways(&self) -> Vec<IpAddr> {
        let mut g: Vec<IpAddr> = self
            .spec
            .addrs
            .iter()
            .map(|a| a.2)
            .filter(|g| !g.is_unspecified())
            .collect();
        g.sort_unstable();
        g.dedup();
        g
    }

    /// Asks the kernel once to resolve `gateway` (ARP or ND): a datagram to its discard
    /// port, which the kernel must resolve the address to send.
    pub fn probe(&self, gateway: IpAddr) -> Result<(), IoError> {
        let s = self.prober(gateway)?;
        let _ = s.send_to(&[0], SocketAddr::new(gateway, 9));
        Ok(())
    }

    /// The gateway's MAC, asking the kernel to resolve it (ARP or ND) and waiting up to
    /// `within`; the error names the unresolved address.
    pub fn resolve(&self, gateway: IpAddr, within: Duration) -> Result<String, IoError> {
        let t0 = Instant::now();
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
            self.probe(gateway)?;
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A UDP socket bound to the host, made in its namespace (a socket keeps the namespace
    /// it was made in, so it is sent on from any thread).
    fn prober(&self, to: IpAddr) -> Result<UdpSocket, IoError> {
        let name = self.spec.ifname.clone();
        in_netns(Some(&self.spec.own_netns), move || {
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
            crate::kernel::socket::bind_to_device(&s, &name)?;
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
            Some(&self.spec.own_netns),
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

impl Host {
    /// Removes the host now (its namespace, and with it its macvlan), whoever else holds it;
    /// once, whatever the number of calls. A host removed answers nothing more.
    pub fn remove(&self) {
        if self.removed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        *self.tagger.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if self.made {
            remove_netns(&self.spec.own_netns);
        } else {
            let _ = ip_in(self.spec.netns.as_deref(), &["link", "del", &self.spec.ifname]);
        }
    }

    /// Whether [`Host::remove`] ran.
    pub fn is_removed(&self) -> bool {
        self.removed.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Makes namespace `name`, replacing a leftover of that name.
pub(crate) fn fresh_netns(name: &str) -> Result<(), IoError> {
    // The keeper removes it if the server is killed (`kill -9` included).
    super::frr::keeper::watch()?;
    if std::path::Path::new("/run/netns").join(name).exists() {
        let _ = ip(&["netns", "del", name]);
    }
    ip(&["netns", "add", name]).map(|_| ())
}

/// Removes a namespace of ours (a host's, a LAG interface's): its links first (a socket
/// still open in the namespace would keep it, and the macvlan with its MAC, alive), then
/// the namespace.
pub(crate) fn remove_netns(name: &str) {
    if let Ok(out) = ip(&["-n", name, "-j", "link", "show"]) {
        let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap_or_default();
        for r in rows.iter().filter_map(|r| r["ifname"].as_str()).filter(|n| *n != "lo") {
            let _ = ip(&["-n", name, "link", "del", r]);
        }
    }
    let _ = ip(&["netns", "del", name]);
}

/// Removes the host namespaces that servers no longer running left behind (a server killed
/// with SIGKILL whose keeper was killed too); returns their names. A namespace whose server
/// still runs is kept: the process under its PID started before the namespace was made
/// ([`crate::devices::liveness::owner_runs`]; a later one took a freed PID).
pub fn remove_stale() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/var/run/netns") else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(NETNS_PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let made = crate::devices::liveness::made_at(&e.path()).unwrap_or_else(SystemTime::now);
        if crate::devices::liveness::owner_runs(pid as i32, made) {
            continue;
        }
        remove_netns(&name);
        gone.push(name);
    }
    gone
}
