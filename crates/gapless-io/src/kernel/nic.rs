//! Interface facts by ioctl (SIOCGIFINDEX/FLAGS/MTU, ETHTOOL_GSET/GDRVINFO). Unlike sysfs,
//! these answer for the caller's current network namespace.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::IoError;

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: [u8; 24],
}

impl IfReq {
    fn new(iface: &str) -> Result<IfReq, IoError> {
        let b = iface.as_bytes();
        if b.is_empty() || b.len() > 15 || b.contains(&0) {
            return Err(IoError::NoSuchInterface(iface.to_string()));
        }
        let mut r = IfReq {
            name: [0; 16],
            data: [0; 24],
        };
        r.name[..b.len()].copy_from_slice(b);
        Ok(r)
    }
}

/// What the engine needs to know about an interface.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceInfo {
    pub name: String,
    pub index: u32,
    pub up: bool,
    pub running: bool,
    pub mtu: u32,
    pub speed_bps: Option<f64>,
    pub driver: Option<String>,
}

fn dgram() -> Result<OwnedFd, IoError> {
    // SAFETY: plain socket(2); the fd is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(IoError::last_os("socket(AF_INET, SOCK_DGRAM)"));
    }
    // SAFETY: fd is a fresh, valid descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong, r: &mut IfReq) -> std::io::Result<()> {
    // SAFETY: r is a properly sized ifreq that outlives the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, r as *mut IfReq) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Looks an interface up in the current network namespace.
/// Whether a link can carry frames now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Up,
    /// Administratively down (`ip link set IF down`).
    Down,
    /// Up, but no carrier (a veth whose peer is down or gone, an unplugged cable).
    NoCarrier,
    /// No such interface any more (removed, or its namespace deleted).
    Gone,
}

/// The link state of `iface` in the calling thread's network namespace.
pub fn link_state(iface: &str) -> LinkState {
    let Ok(fd) = dgram() else { return LinkState::Gone };
    link_state_by(&fd, iface)
}

/// The link state of `iface` in the network namespace of socket `fd` (an interface ioctl
/// on a socket looks names up in the socket's namespace, whichever the thread is in).
pub fn link_state_by(fd: &OwnedFd, iface: &str) -> LinkState {
    let Ok(mut r) = IfReq::new(iface) else {
        return LinkState::Gone;
    };
    if ioctl(fd, libc::SIOCGIFFLAGS, &mut r).is_err() {
        return LinkState::Gone;
    }
    let flags = i16::from_ne_bytes([r.data[0], r.data[1]]) as i32;
    if flags & libc::IFF_UP == 0 {
        LinkState::Down
    } else if carrier(fd, iface) == Some(false) || flags & libc::IFF_RUNNING == 0 {
        LinkState::NoCarrier
    } else {
        LinkState::Up
    }
}

/// The carrier now (ETHTOOL_GLINK), or None when the driver does not say. IFF_RUNNING
/// follows the carrier only after the kernel's link-watch work has run, which on a busy
/// machine was seen to lag a veth peer going down by about a second; the carrier bit does not.
fn carrier(fd: &OwnedFd, iface: &str) -> Option<bool> {
    // struct ethtool_value { u32 cmd; u32 data; }, ETHTOOL_GLINK = 0x0a.
    let mut v = [0u8; 8];
    v[0..4].copy_from_slice(&0x0au32.to_ne_bytes());
    ethtool(fd, iface, &mut v).ok()?;
    Some(u32::from_ne_bytes(v[4..8].try_into().expect("4 bytes")) != 0)
}

/// Turns off TX checksum offload, TSO and GSO on `iface` (this thread's namespace), as
/// `ethtool -K IFACE tx off tso off gso off` does (ETHTOOL_STXCSUM, STSO, SGSO): what the
/// stack sends through it is then whole frames with their checksums, as a socket that reads
/// them off the other end of a veth needs.
pub fn offloads_off(iface: &str) -> Result<(), IoError> {
    let fd = dgram()?;
    for (cmd, what) in [(0x17u32, "STXCSUM"), (0x1f, "STSO"), (0x24, "SGSO")] {
        let mut v = [0u8; 8];
        v[0..4].copy_from_slice(&cmd.to_ne_bytes());
        ethtool(&fd, iface, &mut v).map_err(|e| IoError::Os {
            context: format!("ETHTOOL_{what} off on {iface}"),
            cause: e,
        })?;
    }
    Ok(())
}

/// Why `iface` cannot send now, or None when it can. A link being removed is set down
/// first: a fault is looked at again 20 ms later, so that it is named by how it ended.
pub fn link_fault(iface: &str) -> Option<IoError> {
    match dgram() {
        Ok(fd) => link_fault_by(&fd, iface),
        Err(_) => LinkState::Gone.fault(iface),
    }
}

/// As [`link_fault`], in the network namespace of socket `fd`.
pub fn link_fault_by(fd: &OwnedFd, iface: &str) -> Option<IoError> {
    let first = link_state_by(fd, iface);
    if first == LinkState::Up {
        return None;
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    match link_state_by(fd, iface) {
        LinkState::Up => first.fault(iface),
        later => later.fault(iface),
    }
}

impl LinkState {
    /// Why `iface` cannot send, or None when it can.
    pub fn fault(self, iface: &str) -> Option<IoError> {
        match self {
            LinkState::Up => None,
            LinkState::Down => Some(IoError::LinkLost {
                iface: iface.into(),
                what: "was set down".into(),
            }),
            LinkState::NoCarrier => Some(IoError::LinkLost {
                iface: iface.into(),
                what: "lost its carrier (its peer or cable went down)".into(),
            }),
            LinkState::Gone => Some(IoError::LinkLost {
                iface: iface.into(),
                what: "went away (removed, or its network namespace was deleted)".into(),
            }),
        }
    }
}

/// `iface`'s index in the current network namespace.
pub fn if_index(iface: &str) -> Result<u32, IoError> {
    let cname = CString::new(iface).map_err(|_| IoError::NoSuchInterface(iface.to_string()))?;
    // SAFETY: cname is a valid C string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(IoError::NoSuchInterface(iface.to_string()));
    }
    Ok(index)
}

/// Runs `f` on a thread in namespace `ns` (this thread's own when None).
pub fn in_netns<T: Send>(ns: Option<&str>, f: impl FnOnce() -> Result<T, IoError> + Send) -> Result<T, IoError> {
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

pub fn iface_info(iface: &str) -> Result<IfaceInfo, IoError> {
    let index = if_index(iface)?;
    let fd = dgram()?;
    let mut r = IfReq::new(iface)?;
    ioctl(&fd, libc::SIOCGIFFLAGS, &mut r).map_err(|e| IoError::Os {
        context: format!("SIOCGIFFLAGS {iface}"),
        cause: e,
    })?;
    let flags = i16::from_ne_bytes([r.data[0], r.data[1]]) as i32;
    let mut r = IfReq::new(iface)?;
    ioctl(&fd, libc::SIOCGIFMTU, &mut r).map_err(|e| IoError::Os {
        context: format!("SIOCGIFMTU {iface}"),
        cause: e,
    })?;
    let mtu = i32::from_ne_bytes(r.data[0..4].try_into().expect("4 bytes")) as u32;

    // ethtool_cmd (ETHTOOL_GSET): speed at bytes 12..14, speed_hi at 28..30.
    let mut cmd = [0u8; 44];
    cmd[0..4].copy_from_slice(&1u32.to_ne_bytes());
    let speed_bps = ethtool(&fd, iface, &mut cmd).ok().and_then(|_| {
        let lo = u32::from(u16::from_ne_bytes([cmd[12], cmd[13]]));
        let hi = u32::from(u16::from_ne_bytes([cmd[28], cmd[29]]));
        let mbps = (hi << 16) | lo;
        (mbps != 0 && mbps != u32::MAX && mbps != 0xffff).then(|| f64::from(mbps) * 1e6)
    });
    // ethtool_drvinfo (ETHTOOL_GDRVINFO): driver name at bytes 4..36.
    let mut drv = [0u8; 196];
    drv[0..4].copy_from_slice(&3u32.to_ne_bytes());
    let driver = ethtool(&fd, iface, &mut drv).ok().map(|_| {
        let s = &drv[4..36];
        String::from_utf8_lossy(&s[..s.iter().position(|b| *b == 0).unwrap_or(32)]).into_owned()
    });
    Ok(IfaceInfo {
        name: iface.to_string(),
        index,
        up: flags & libc::IFF_UP != 0,
        running: flags & libc::IFF_RUNNING != 0,
        mtu,
        speed_bps,
        driver,
    })
}

fn ethtool(fd: &OwnedFd, iface: &str, buf: &mut [u8]) -> std::io::Result<()> {
    let mut r = IfReq::new(iface).map_err(|_| std::io::Error::from_raw_os_error(libc::ENODEV))?;
    r.data[..8].copy_from_slice(&(buf.as_mut_ptr() as usize as u64).to_ne_bytes());
    ioctl(fd, libc::SIOCETHTOOL, &mut r)
}

/// Moves the calling thread into the network namespace `name` (as `ip netns exec` does).
/// Threads spawned afterwards inherit it. Sockets opened before keep their namespace.
pub fn enter_netns(name: &str) -> Result<(), IoError> {
    if name.is_empty() || name.contains('/') {
        return Err(IoError::NoSuchNetns(name.to_string()));
    }
    let path = format!("/var/run/netns/{name}");
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => IoError::NoSuchNetns(name.to_string()),
        std::io::ErrorKind::PermissionDenied => IoError::NotRoot("entering a network namespace"),
        _ => IoError::Os {
            context: format!("open {path}"),
            cause: e,
        },
    })?;
    // SAFETY: setns on a valid fd of a network namespace file.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EPERM) {
            return Err(IoError::NotRoot("entering a network namespace"));
        }
        return Err(IoError::Os {
            context: format!("setns({path})"),
            cause: e,
        });
    }
    Ok(())
}

/// The effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What an interface can timestamp (ETHTOOL_GET_TS_INFO, as `ethtool -T` shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsInfo {
    /// SOF_TIMESTAMPING_* capability bits.
    pub so_timestamping: u32,
    /// The PTP hardware clock, if any.
    pub phc_index: Option<u32>,
    /// Bit i set: HWTSTAMP_TX type i supported.
    pub tx_types: u32,
    /// Bit i set: HWTSTAMP_FILTER i supported.
    pub rx_filters: u32,
}

impl TsInfo {
    /// The NIC stamps received frames in hardware and reports the raw stamp.
    pub fn hw_rx(&self) -> bool {
        let need = libc::SOF_TIMESTAMPING_RX_HARDWARE | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
        self.so_timestamping & need == need && self.rx_filters & (1 << libc::HWTSTAMP_FILTER_ALL) != 0
    }

    /// The capabilities in `ethtool -T` words.
    pub fn describe(&self) -> String {
        const NAMES: [(u32, &str); 7] = [
            (libc::SOF_TIMESTAMPING_TX_HARDWARE, "hardware-transmit"),
            (libc::SOF_TIMESTAMPING_TX_SOFTWARE, "software-transmit"),
            (libc::SOF_TIMESTAMPING_RX_HARDWARE, "hardware-receive"),
            (libc::SOF_TIMESTAMPING_RX_SOFTWARE, "software-receive"),
            (libc::SOF_TIMESTAMPING_SOFTWARE, "software-system-clock"),
            (libc::SOF_TIMESTAMPING_RAW_HARDWARE, "hardware-raw-clock"),
            (libc::SOF_TIMESTAMPING_SYS_HARDWARE, "hardware-system-clock"),
        ];
        let v: Vec<&str> = NAMES
            .iter()
            .filter(|(b, _)| self.so_timestamping & b != 0)
            .map(|(_, n)| *n)
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
}

/// Asks the driver what it can timestamp (ETHTOOL_GET_TS_INFO).
pub fn ts_info(iface: &str) -> Result<TsInfo, IoError> {
    iface_info(iface)?;
    let fd = dgram()?;
    // struct ethtool_ts_info: cmd, so_timestamping, phc_index, tx_types, tx_reserved[3],
    // rx_filters, rx_reserved[3]: eleven 32-bit words.
    let mut b = [0u32; 11];
    b[0] = 0x41; // ETHTOOL_GET_TS_INFO
                 // SAFETY: the words are plain data; the view has the same length in bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, 44) };
    ethtool(&fd, iface, bytes).map_err(|e| IoError::Os {
        context: format!("ETHTOOL_GET_TS_INFO on {iface}"),
        cause: e,
    })?;
    Ok(TsInfo {
        so_timestamping: b[1],
        phc_index: (b[2] as i32 >= 0).then_some(b[2]),
        tx_types: b[3],
        rx_filters: b[7],
    })
}

/// RX queues of an interface (ETHTOOL_GCHANNELS: rx + combined channels), where the driver
/// reports them.
pub fn rx_queues(iface: &str) -> Option<u32> {
    let fd = dgram().ok()?;
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx_count,
    // tx_count, other_count, combined_count: nine 32-bit words.
    let mut b = [0u32; 9];
    b[0] = 0x3c; // ETHTOOL_GCHANNELS
                 // SAFETY: the words are plain data; the view has the same length in bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, 36) };
    ethtool(&fd, iface, bytes).ok()?;
    Some(b[5] + b[8]).filter(|&n| n > 0)
}

/// Turns on hardware timestamping of every received frame (SIOCSHWTSTAMP, rx_filter ALL;
/// TX stamping on when `tx`). Needs CAP_NET_ADMIN; affects every user of the interface.
pub fn enable_hw_timestamps(iface: &str, tx: bool) -> Result<(), IoError> {
    let fd = dgram()?;
    let mut cfg = libc::hwtstamp_config {
        flags: 0,
        tx_type: i32::from(tx), // HWTSTAMP_TX_OFF / HWTSTAMP_TX_ON
        rx_filter: libc::HWTSTAMP_FILTER_ALL as i32,
    };
    let mut r = IfReq::new(iface)?;
    r.data[..8].copy_from_slice(&(&mut cfg as *mut libc::hwtstamp_config as usize as u64).to_ne_bytes());
    ioctl(&fd, libc::SIOCSHWTSTAMP, &mut r).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => IoError::NotRoot("enabling hardware timestamps (SIOCSHWTSTAMP)"),
        Some(libc::EOPNOTSUPP) | Some(libc::ERANGE) | Some(libc::EINVAL) => IoError::NoHwTimestamps {
            iface: iface.to_string(),
            caps: format!("the driver refused SIOCSHWTSTAMP rx_filter=ALL: {e}"),
        },
        _ => IoError::Os {
            context: format!("SIOCSHWTSTAMP on {iface}"),
            cause: e,
        },
    })
}

/// The calling thread's current network namespace, to come back to after [`enter_netns`].
pub fn current_netns() -> Result<std::fs::File, IoError> {
    std::fs::File::open("/proc/thread-self/ns/net").map_err(|e| IoError::Os {
        context: "open /proc/thread-self/ns/net".into(),
        cause: e,
    })
}

/// Moves the calling thread back into a namespace from [`current_netns`].
pub fn return_to_netns(ns: &std::fs::File) -> Result<(), IoError> {
    // SAFETY: setns on a valid namespace fd.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        return Err(IoError::last_os("setns back to the original network namespace"));
    }
    Ok(())
}

/// Runs `ip ARGS` (iproute2); its stdout, or the command and its stderr.
pub fn ip(args: &[&str]) -> Result<String, IoError> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| IoError::Command {
            cmd: format!("ip {}", args.join(" ")),
            stderr: format!("cannot run ip: {e}"),
        })?;
    if !out.status.success() {
        return Err(IoError::Command {
            cmd: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip [-n NS] -batch -` with `lines` on its standard input: many changes for the cost of
/// one `ip` (a device's set-up took nine, 7 ms each from the server). The error has the
/// failing line's message, as `ip` prints it.
pub fn ip_batch(ns: Option<&str>, lines: &str) -> Result<(), IoError> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new("ip");
    if let Some(n) = ns {
        cmd.args(["-n", n]);
    }
    // Named by its size, not echoed: a batch may hold 100 000 routes. `ip` names the failing
    // line's number in its message ("Command failed -:N").
    let shown = format!(
        "ip{} -batch - ({} lines)",
        ns.map(|n| format!(" -n {n}")).unwrap_or_default(),
        lines.lines().count()
    );
    let failed = |e: std::io::Error| IoError::Command {
        cmd: shown.clone(),
        stderr: format!("cannot run ip: {e}"),
    };
    let mut child = cmd
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(failed)?;
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(lines.as_bytes());
    }
    let out = child.wait_with_output().map_err(failed)?;
    if !out.status.success() {
        return Err(IoError::Command {
            cmd: shown,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn ip(args: &[&str]) {
        let o = Command::new("ip").args(args).output().expect("run ip");
        assert!(
            o.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Two namespaces joined by a veth pair, removed on drop.
    struct Pair(String, String);

    impl Drop for Pair {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
            let _ = Command::new("ip").args(["netns", "del", &self.1]).status();
        }
    }

    #[test]
    fn a_peer_set_down_reads_as_no_carrier_at_once() {
        assert!(is_root(), "this test makes network namespaces: run it as root");
        let id = std::process::id();
        let p = Pair(format!("gl{id}a"), format!("gl{id}b"));
        ip(&["netns", "add", &p.0]);
        ip(&["netns", "add", &p.1]);
        ip(&[
            "link", "add", "lsa", "netns", &p.0, "type", "veth", "peer", "lsb", "netns", &p.1,
        ]);
        ip(&["-n", &p.0, "link", "set", "lsa", "up"]);
        ip(&["-n", &p.1, "link", "set", "lsb", "up"]);
        let a = p.0.clone();
        let b = p.1.clone();
        let (before, after) = std::thread::spawn(move || {
            enter_netns(&a).expect("enter the namespace");
            let t = std::time::Instant::now();
            while link_state("lsa") != LinkState::Up && t.elapsed().as_secs() < 5 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let before = link_state("lsa");
            ip(&["-n", &b, "link", "set", "lsb", "down"]);
            // No wait: the carrier bit is cleared before `ip` returns.
            (before, link_state("lsa"))
        })
        .join()
        .unwrap();
        assert_eq!(before, LinkState::Up, "expected the pair up before the fault");
        assert_eq!(
            after,
            LinkState::NoCarrier,
            "expected no carrier at once after the peer went down"
        );
    }
}
