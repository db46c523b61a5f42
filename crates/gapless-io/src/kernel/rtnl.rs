//! Link and route changes over rtnetlink, each stamped right after the kernel acknowledged
//! it: an interface's admin state (RTM_NEWLINK with IFF_UP changed) and a route deleted or
//! added (RTM_DELROUTE, RTM_NEWROUTE in the main table). The request carries NLM_F_ACK, and
//! the stamp is read when the ACK (an NLMSG_ERROR of 0) arrives: the change took effect
//! between the request's send and that stamp, which [`Change`] gives both of. A namespace
//! other than the caller's is entered on a thread of its own.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::IoError;

/// When a change was sent and when its ACK arrived, CLOCK_REALTIME ns (the clock of the
/// kernel's RX stamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub sent_ns: u64,
    pub acked_ns: u64,
}

fn os(context: &str) -> IoError {
    IoError::Os {
        context: context.to_string(),
        cause: std::io::Error::last_os_error(),
    }
}

/// Sets `iface` administratively up or down, in namespace `netns` (None: this one's).
pub fn set_link(netns: Option<&str>, iface: &str, up: bool) -> Result<Change, IoError> {
    let name = iface.to_string();
    super::nic::in_netns(netns, move || {
        let index = super::nic::if_index(&name)?;
        // struct ifinfomsg: family, pad, type, index, flags, change.
        let mut body = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
        body.extend_from_slice(&(index as i32).to_ne_bytes());
        let flags = if up { libc::IFF_UP as u32 } else { 0 };
        body.extend_from_slice(&flags.to_ne_bytes());
        body.extend_from_slice(&(libc::IFF_UP as u32).to_ne_bytes());
        request(
            libc::RTM_NEWLINK,
            0,
            &body,
            &format!("set {name} {}", if up { "up" } else { "down" }),
        )
    })
}

/// Deletes (`add` false) or adds the route to `prefix` (e.g. "198.18.1.0/24") in the main
/// table of namespace `netns`; an added route goes through `via`, or out of `dev`.
pub fn route(
    netns: Option<&str>,
    add: bool,
    prefix: &str,
    via: Option<IpAddr>,
    dev: Option<&str>,
) -> Result<Change, IoError> {
    let (dst, len) = parse_prefix(prefix).map_err(|why| IoError::Host {
        iface: prefix.to_string(),
        what: why,
        fix: "give a route prefix as ADDRESS/LENGTH, e.g. 198.18.1.0/24 or 2001:db8::/64".into(),
    })?;
    let what = format!("{} the route to {prefix}", if add { "add" } else { "delete" });
    let dev = dev.map(str::to_string);
    super::nic::in_netns(netns, move || {
        let v6 = dst.is_ipv6();
        // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
        let family = if v6 { libc::AF_INET6 } else { libc::AF_INET } as u8;
        let (proto, scope, kind) = if add {
            (libc::RTPROT_STATIC, libc::RT_SCOPE_UNIVERSE, libc::RTN_UNICAST)
        } else {
            (0, libc::RT_SCOPE_NOWHERE, 0)
        };
        let mut body = vec![family, len, 0, 0, libc::RT_TABLE_MAIN, proto, scope, kind];
        body.extend_from_slice(&0u32.to_ne_bytes());
        attr(&mut body, libc::RTA_DST, &ip_bytes(dst));
        if let Some(gw) = via {
            attr(&mut body, libc::RTA_GATEWAY, &ip_bytes(gw));
        }
        if let Some(d) = &dev {
            attr(&mut body, libc::RTA_OIF, &super::nic::if_index(d)?.to_ne_bytes());
        }
        // A route out of a device with no gateway reaches its hosts directly (scope link).
        if add && via.is_none() && dev.is_some() {
            body[6] = libc::RT_SCOPE_LINK;
        }
        let (ty, flags) = if add {
            (libc::RTM_NEWROUTE, (libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16)
        } else {
            (libc::RTM_DELROUTE, 0)
        };
        request(ty, flags, &body, &what)
    })
}

fn ip_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

/// "ADDRESS/LENGTH" (a bare address is a host route).
pub fn parse_prefix(p: &str) -> Result<(IpAddr, u8), String> {
    let (a, l) = p.split_once('/').unwrap_or((p, ""));
    let addr: IpAddr = a.parse().map_err(|_| format!("{a:?} is not an IP address"))?;
    let max = if addr.is_ipv6() { 128 } else { 32 };
    let len = match l {
        "" => max,
        l => l
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("{l:?} is not a prefix length (0..={max})"))?,
    };
    Ok((addr, len))
}

/// Appends a route attribute (rtattr: length, type, value, padded to 4 bytes).
pub(crate) fn attr(buf: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = 4 + value.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(value);
    buf.resize(buf.len() + (4 - len % 4) % 4, 0);
}

/// Opens an rtnetlink socket and sends one message of type `ty` with `flags` (besides
/// NLM_F_REQUEST) and `body`; returns the socket to read the answer from, and when the
/// message was sent (CLOCK_REALTIME ns, read just before the send).
fn send(ty: u16, flags: u16, body: &[u8], what: &str) -> Result<(OwnedFd, u64), IoError> {
    // SAFETY: a plain socket(2); the fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(os("socket(AF_NETLINK)"));
    }
    // SAFETY: fd is a new, valid descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = 16 + body.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | flags).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    msg.extend_from_slice(body);
    let sent_ns = super::clock::realtime_ns() as u64;
    // SAFETY: msg is a valid buffer of msg.len() bytes; the kernel is the default destination.
    let rc = unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if rc < 0 {
        return Err(os(&format!("rtnetlink: {what}")));
    }
    Ok((sock, sent_ns))
}

/// The error an NLMSG_ERROR carries (`err` is the kernel's negative errno).
fn nl_error(err: i32, what: &str) -> IoError {
    IoError::Os {
        context: format!("rtnetlink: {what}"),
        cause: std::io::Error::from_raw_os_error(-err),
    }
}

/// Sends one rtnetlink request with NLM_F_ACK and waits for its ACK; stamps both ends.
pub(crate) fn request(ty: u16, flags: u16, body: &[u8], what: &str) -> Result<Change, IoError> {
    let (sock, sent_ns) = send(ty, libc::NLM_F_ACK as u16 | flags, body, what)?;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: buf is writable for its whole length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let acked_ns = super::clock::realtime_ns() as u64;
        if n < 0 {
            return Err(os(&format!("rtnetlink: {what} (waiting for the ACK)")));
        }
        let n = n as usize;
        if n < 20 || u16::from_ne_bytes([buf[4], buf[5]]) != libc::NLMSG_ERROR as u16 {
            continue;
        }
        return match i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]) {
            0 => Ok(Change { sent_ns, acked_ns }),
            err => Err(nl_error(err, what)),
        };
    }
}

/// Sends one rtnetlink GET request and returns the body of the kernel's answer (after its
/// 16-byte header), or the error it answered with.
pub(crate) fn query(ty: u16, body: &[u8], what: &str) -> Result<Vec<u8>, IoError> {
    let (sock, _) = send(ty, 0, body, what)?;
    let mut buf = vec![0u8; 65536];
    // SAFETY: buf is writable for its whole length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 20 {
        return Err(os(&format!("rtnetlink: {what} (waiting for the answer)")));
    }
    let total = (u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize).min(n as usize);
    if u16::from_ne_bytes([buf[4], buf[5]]) == libc::NLMSG_ERROR as u16 {
        return Err(nl_error(i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]), what));
    }
    Ok(buf[16..total].to_vec())
}

/// The attributes in `buf` (rtattrs), as (type without its flags, value).
pub(crate) fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((ty, &buf[4..len]));
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_with_their_lengths_and_bad_ones_say_why() {
        assert_eq!(parse_prefix("198.18.1.0/24"), Ok(("198.18.1.0".parse().unwrap(), 24)));
        assert_eq!(parse_prefix("2001:db8::1"), Ok(("2001:db8::1".parse().unwrap(), 128)));
        assert!(parse_prefix("198.18.1.0/33").unwrap_err().contains("0..=32"));
        assert!(parse_prefix("nope/8").unwrap_err().contains("not an IP address"));
        let mut b = Vec::new();
        attr(&mut b, 1, &[1, 2, 3, 4, 5]);
        assert_eq!(b.len(), 12, "an attribute is padded to 4 bytes");
    }
}
