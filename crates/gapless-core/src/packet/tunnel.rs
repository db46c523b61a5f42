//! Tunnels: outer headers between a template's Ethernet header (with its VLAN tags) and the
//! inner IP packet. [`encap`] writes them once; [`Tunnel::finish`] sets what depends on the
//! frame's length (the outer IPv4 total length and checksum, the outer UDP length, GTP-U's
//! length) in O(1) per frame. The inner packet is the template as without a tunnel: the field
//! engine, its checksums and the signature (at the frame's end) are unchanged, only shifted.
//!
//! | kind | after Ethernet | ethertype |
//! |---|---|---|
//! | `vxlan` | IPv4, UDP (to 4789), VXLAN (I flag, VNI), inner Ethernet | 0x0800 |
//! | `gre` | IPv4 (protocol 47), GRE (protocol = the inner ethertype; key when set) | 0x0800 |
//! | `mpls` | the label stack (bottom-of-stack on the last) | 0x8847 |
//! | `gtpv1` | IPv4, UDP (2152), GTP-U (version 1, PT 1, G-PDU, TEID) | 0x0800 |

use std::net::Ipv4Addr;

use crate::packet::checksum::{finish, sum_be};
use crate::spec::error::ProfileError;
use crate::spec::{TunnelKind, TunnelSpec};

/// What a frame's length sets in the outer headers; offsets are into the frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tunnel {
    /// Start of the outer IPv4 header, and its sum without total length and checksum.
    outer_l3: Option<(usize, u64)>,
    /// Start of the outer UDP header.
    udp: Option<usize>,
    /// Start of the GTP-U header.
    gtp: Option<usize>,
}

/// The encapsulation's bytes (to put right after the Ethernet header and its tags, at offset
/// `at`), the ethertype the Ethernet header must carry, and what [`Tunnel::finish`] needs.
/// `inner_type` is the inner packet's ethertype (0x0800 or 0x86DD); `inner_macs` the VXLAN
/// inner Ethernet header's destination and source (parsed by the template).
pub fn encap(
    spec: &TunnelSpec,
    at: usize,
    inner_type: u16,
    inner_macs: ([u8; 6], [u8; 6]),
    path: &str,
) -> Result<(Vec<u8>, u16, Tunnel), ProfileError> {
    let p = format!("{path}.tunnel");
    let mut t = Tunnel {
        outer_l3: None,
        udp: None,
        gtp: None,
    };
    if spec.kind == TunnelKind::Mpls {
        return Ok((labels(spec, &p)?, 0x8847, t));
    }
    let (proto, mut rest) = match spec.kind {
        TunnelKind::Vxlan => (17, vxlan(spec, inner_type, inner_macs, &p)?),
        TunnelKind::Gtpv1 => (17, gtp(spec)),
        TunnelKind::Gre => (47, gre(spec, inner_type)),
        TunnelKind::Mpls => unreachable!("above"),
    };
    let mut out = ipv4(spec, proto, &p)?;
    if proto == 17 {
        let dflt = if spec.kind == TunnelKind::Vxlan {
            (49152, 4789)
        } else {
            (2152, 2152)
        };
        let (sp, dp) = (spec.src_port.unwrap_or(dflt.0), spec.dst_port.unwrap_or(dflt.1));
        t.udp = Some(at + 20);
        if spec.kind == TunnelKind::Gtpv1 {
            t.gtp = Some(at + 28);
        }
        out.extend_from_slice(&sp.to_be_bytes());
        out.extend_from_slice(&dp.to_be_bytes());
        out.extend_from_slice(&[0; 4]); // length (per frame) and checksum 0
    }
    let mut h = [0u8; 20];
    h.copy_from_slice(&out[..20]);
    t.outer_l3 = Some((at, sum_be(&h)));
    out.append(&mut rest);
    Ok((out, 0x0800, t))
}

fn ipv4(spec: &TunnelSpec, proto: u8, p: &str) -> Result<Vec<u8>, ProfileError> {
    let ip = |s: &str, key: &str| {
        s.parse::<Ipv4Addr>().map_err(|_| {
            ProfileError::invalid(
                format!("{p}.{key}"),
                format!("{s:?} is not an IPv4 address"),
                "give the outer header's IPv4 address, e.g. \"192.0.2.1\" (outer IPv6 is not supported)",
            )
        })
    };
    let (src, dst) = (ip(&spec.ip_src, "ip_src")?, ip(&spec.ip_dst, "ip_dst")?);
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, spec.ttl, proto, 0, 0];
    h.extend_from_slice(&src.octets());
    h.extend_from_slice(&dst.octets());
    Ok(h)
}

fn vxlan(spec: &TunnelSpec, inner_type: u16, macs: ([u8; 6], [u8; 6]), p: &str) -> Result<Vec<u8>, ProfileError> {
    if spec.vni >= 1 << 24 {
        return Err(ProfileError::invalid(
            format!("{p}.vni"),
            format!("{} does not fit in 24 bits", spec.vni),
            "give a VNI below 16777216",
        ));
    }
    let mut h = vec![0x08, 0, 0, 0];
    h.extend_from_slice(&(spec.vni << 8).to_be_bytes());
    h.extend_from_slice(&macs.0);
    h.extend_from_slice(&macs.1);
    h.extend_from_slice(&inner_type.to_be_bytes());
    Ok(h)
}

fn gtp(spec: &TunnelSpec) -> Vec<u8> {
    // Version 1, protocol type GTP, no optional fields; message type 255 (G-PDU).
    let mut h = vec![0x30, 0xff, 0, 0];
    h.extend_from_slice(&spec.teid.to_be_bytes());
    h
}

fn gre(spec: &TunnelSpec, inner_type: u16) -> Vec<u8> {
    let flags: u16 = if spec.gre_key.is_some() { 0x2000 } else { 0 };
    let mut h = flags.to_be_bytes().to_vec();
    h.extend_from_slice(&inner_type.to_be_bytes());
    if let Some(k) = spec.gre_key {
        h.extend_from_slice(&k.to_be_bytes());
    }
    h
}

fn labels(spec: &TunnelSpec, p: &str) -> Result<Vec<u8>, ProfileError> {
    if spec.labels.is_empty() {
        return Err(ProfileError::invalid(
            format!("{p}.labels"),
            "an MPLS tunnel without labels",
            "give at least one label, e.g. labels = [{ label = 16 }]",
        ));
    }
    let mut out = Vec::new();
    for (i, l) in spec.labels.iter().enumerate() {
        if l.label >= 1 << 20 || l.tc >= 8 {
            return Err(ProfileError::invalid(
                format!("{p}.labels[{i}]"),
                format!("label {} / tc {} out of range", l.label, l.tc),
                "a label has 20 bits (below 1048576) and a traffic class 3 (below 8)",
            ));
        }
        let bos = u32::from(i + 1 == spec.labels.len());
        let w = l.label << 12 | u32::from(l.tc) << 9 | bos << 8 | u32::from(l.ttl);
        out.extend_from_slice(&w.to_be_bytes());
    }
    Ok(out)
}

impl Tunnel {
    /// Sets the outer length fields and the outer IPv4 checksum for `frame.len()`.
    #[inline]
    pub fn finish(&self, frame: &mut [u8]) {
        let len = frame.len();
        if let Some((at, base)) = self.outer_l3 {
            let tl = (len - at) as u16;
            frame[at + 2..at + 4].copy_from_slice(&tl.to_be_bytes());
            frame[at + 10..at + 12].copy_from_slice(&finish(base + u64::from(tl)).to_be_bytes());
        }
        if let Some(u) = self.udp {
            frame[u + 4..u + 6].copy_from_slice(&((len - u) as u16).to_be_bytes());
        }
        if let Some(g) = self.gtp {
            frame[g + 2..g + 4].copy_from_slice(&((len - g - 8) as u16).to_be_bytes());
        }
    }
}
