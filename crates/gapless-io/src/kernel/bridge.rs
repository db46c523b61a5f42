//! A Linux bridge's forwarding database over rtnetlink: its bound on learned entries
//! (`IFLA_BR_FDB_MAX_LEARNED`, Linux 6.8 and later; Debian 12's iproute2 has no keyword for
//! it), how many it has learned (`IFLA_BR_FDB_N_LEARNED`), and a flush of its learned
//! entries (`IFLA_BR_FDB_FLUSH`, as `ip link set BR type bridge fdb_flush`). RFC 2889's
//! address caching and learning tests need a bridge whose table is bounded and emptied
//! between iterations.

use super::rtnl::{attr, attrs, query, request};
use crate::IoError;

const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const IFLA_BR_FDB_FLUSH: u16 = 21;
// enum ifla_br in linux/if_link.h: IFLA_BR_MULTI_BOOLOPT is 46 and IFLA_BR_MCAST_QUERIER_STATE
// 47; Linux 6.18's RTM_GETLINK of a bridge gives these two as u32s after 46.
const IFLA_BR_FDB_N_LEARNED: u16 = 48;
const IFLA_BR_FDB_MAX_LEARNED: u16 = 49;
const NLA_F_NESTED: u16 = 0x8000;

/// The first kernel with `IFLA_BR_FDB_MAX_LEARNED`.
pub const FDB_MAX_LEARNED_SINCE: (u32, u32) = (6, 8);

/// The running kernel's (major, minor).
pub fn kernel_version() -> Option<(u32, u32)> {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = r.trim().split(['.', '-']);
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Refuses a kernel without `IFLA_BR_FDB_MAX_LEARNED`, naming the version needed (an older
/// kernel would ignore the attribute, and the table would stay unbounded).
pub fn check_fdb_max_learned() -> Result<(), IoError> {
    check_version(kernel_version())
}

fn check_version(v: Option<(u32, u32)>) -> Result<(), IoError> {
    let (maj, min) = FDB_MAX_LEARNED_SINCE;
    match v {
        Some(v) if v >= FDB_MAX_LEARNED_SINCE => Ok(()),
        v => Err(IoError::Host {
            iface: "bridge".into(),
            what: format!(
                "a bounded forwarding database (IFLA_BR_FDB_MAX_LEARNED) needs Linux {maj}.{min} or later; this kernel is {}",
                v.map_or("unknown".into(), |(a, b)| format!("{a}.{b}"))
            ),
            fix: format!("run on Linux {maj}.{min} or later, or test a switch whose table has a bound of its own"),
        }),
    }
}

fn link_body(index: u32) -> Vec<u8> {
    // struct ifinfomsg: family, pad, type, index, flags, change.
    let mut b = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
    b.extend_from_slice(&(index as i32).to_ne_bytes());
    b.extend_from_slice(&[0; 8]);
    b
}

/// Sets bridge attributes `data` (already encoded) on `bridge`.
fn set(index: u32, data: &[u8], what: &str) -> Result<(), IoError> {
    let mut info = Vec::new();
    attr(&mut info, IFLA_INFO_KIND, b"bridge\0");
    attr(&mut info, IFLA_INFO_DATA | NLA_F_NESTED, data);
    let mut body = link_body(index);
    attr(&mut body, IFLA_LINKINFO | NLA_F_NESTED, &info);
    request(libc::RTM_NEWLINK, 0, &body, what).map(|_| ())
}

/// Bounds `bridge`'s learned entries at `max` (0: no bound), in namespace `netns`.
pub fn set_fdb_max_learned(netns: Option<&str>, bridge: &str, max: u32) -> Result<(), IoError> {
    check_fdb_max_learned()?;
    let name = bridge.to_string();
    super::nic::in_netns(netns, move || {
        let mut data = Vec::new();
        attr(&mut data, IFLA_BR_FDB_MAX_LEARNED, &max.to_ne_bytes());
        set(
            super::nic::if_index(&name)?,
            &data,
            &format!("set {name}'s fdb_max_learned to {max}"),
        )
    })
}

/// Removes `bridge`'s learned entries (static and local ones stay).
pub fn flush_fdb(netns: Option<&str>, bridge: &str) -> Result<(), IoError> {
    let name = bridge.to_string();
    super::nic::in_netns(netns, move || {
        let mut data = Vec::new();
        attr(&mut data, IFLA_BR_FDB_FLUSH, &[]);
        set(
            super::nic::if_index(&name)?,
            &data,
            &format!("flush {name}'s forwarding database"),
        )
    })
}

/// `bridge`'s learned entries now and their bound (None: the kernel does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbCount {
    pub n_learned: Option<u32>,
    pub max_learned: Option<u32>,
}

/// Reads [`FdbCount`] of `bridge` in namespace `netns`.
pub fn fdb_count(netns: Option<&str>, bridge: &str) -> Result<FdbCount, IoError> {
    let name = bridge.to_string();
    super::nic::in_netns(netns, move || {
        let msg = query(
            libc::RTM_GETLINK,
            &link_body(super::nic::if_index(&name)?),
            &format!("read {name}"),
        )?;
        Ok(parse_count(msg.get(16..).unwrap_or_default()))
    })
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

/// The counts in an RTM_NEWLINK's attributes (after its ifinfomsg).
fn parse_count(link_attrs: &[u8]) -> FdbCount {
    let data = attrs(link_attrs)
        .into_iter()
        .find(|(t, _)| *t == IFLA_LINKINFO)
        .and_then(|(_, info)| attrs(info).into_iter().find(|(t, _)| *t == IFLA_INFO_DATA))
        .map(|(_, d)| attrs(d))
        .unwrap_or_default();
    let get = |ty| data.iter().find(|(t, _)| *t == ty).and_then(|(_, v)| u32_of(v));
    FdbCount {
        n_learned: get(IFLA_BR_FDB_N_LEARNED),
        max_learned: get(IFLA_BR_FDB_MAX_LEARNED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_are_read_from_nested_link_info() {
        let mut data = Vec::new();
        attr(&mut data, 4, &300u32.to_ne_bytes());
        attr(&mut data, IFLA_BR_FDB_N_LEARNED, &3u32.to_ne_bytes());
        attr(&mut data, IFLA_BR_FDB_MAX_LEARNED, &8u32.to_ne_bytes());
        let mut info = Vec::new();
        attr(&mut info, IFLA_INFO_KIND, b"bridge\0");
        attr(&mut info, IFLA_INFO_DATA | NLA_F_NESTED, &data);
        let mut link = Vec::new();
        attr(&mut link, 3, b"br0\0");
        attr(&mut link, IFLA_LINKINFO | NLA_F_NESTED, &info);
        let c = parse_count(&link);
        assert_eq!((c.n_learned, c.max_learned), (Some(3), Some(8)));
        assert_eq!(parse_count(&[]).max_learned, None);
    }

    #[test]
    fn an_older_kernel_is_refused_naming_the_version_needed() {
        let e = check_version(Some((6, 1))).unwrap_err().to_string();
        assert!(e.contains("needs Linux 6.8 or later; this kernel is 6.1"), "{e}");
        assert!(check_version(Some((6, 8))).is_ok() && check_version(Some((7, 0))).is_ok());
        assert!(check_version(None).unwrap_err().to_string().contains("unknown"));
    }
}
