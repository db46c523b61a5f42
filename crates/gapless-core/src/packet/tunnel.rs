//! Tunnels: outer headers between a template's Ethernet header (with its VLAN tags) and the
//! inner IP packet. [`encap`] writes them once; [`Tunnel::finish`] sets what depends on the
//! frame's length (the outer IPv4 total length and checksum, the outer UDP length, GTP-U's
//! length) in O(1) per frame. The inner packet is the template as without a tunnel: the field
//! engine, its checksums and the signature (at the frame's end) are unchanged, only shifted.
//!
//! | kind | after Ethernet | ethertype |
//! |---|---|---|
//! | `vxlan` | IPv4 or IPv6, UDP (to 4789), VXLAN (I flag, VNI), inner Ethernet | 0x0800 / 0x86DD |
//! | `gre` | IPv4 or IPv6 (protocol 47), GRE (protocol = the inner ethertype; key when set) | 0x0800 / 0x86DD |
//! | `mpls` | the label stack (bottom-of-stack on the last) | 0x8847 |
//! | `gtpv1` | IPv4 or IPv6, UDP (2152), GTP-U (version 1, PT 1, G-PDU, TEID) | 0x0800 / 0x86DD |
//!
//! The outer fields may vary like the inner ones (the field engine's `outer_*`, `vni`,
//! `teid`, `gre_key` and `mpls_label` fields): [`Tunnel::finish`] computes the outer
//! checksums from the frame's bytes, after everything else is written. The outer UDP
//! checksum is 0 over IPv4 (RFC 7348, TS 29.281 allow it) and computed over IPv6.
//!
//! A VXLAN tunnel with [`TunnelSpec::inner_fcs`] ends the frame with the inner Ethernet
//! frame's own FCS (a CRC-32 over it), as ixia-c sends VXLAN: the template treats those 4
//! bytes as a trailer after the inner packet ([`Tunnel::trailer`]), so the inner lengths and
//! the signature end before it; [`Tunnel::finish`] writes it before the outer UDP checksum
//! that covers it, and [`Tunnel::refresh_fcs`] again after the TX stamp.

use std::net::IpAddr;

use crate::packet::checksum::{finish, replace_in, sum_be};
use crate::packet::sizes::FCS_LEN;
use crate::spec::error::ProfileError;
use crate::spec::{TunnelKind, TunnelSpec};

/// What a frame's length sets in the outer headers, and where the outer fields are (the
/// field engine varies them: [`crate::packet::fields`]); offsets are into the frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Tunnel {
    /// Start of the outer IP header, and whether it is IPv6.
    pub outer_l3: Option<(usize, bool)>,
    /// Start of the outer UDP header.
    pub udp: Option<usize>,
    /// Start of the GTP-U header.
    pub gtp: Option<usize>,
    /// The VXLAN VNI's 3 bytes.
    pub vni: Option<usize>,
    /// The GRE key's 4 bytes, when the header has one.
    pub gre_key: Option<usize>,
    /// Each MPLS label's 4-byte word, outer first.
    pub labels: Vec<usize>,
    /// Start of the inner Ethernet header whose own FCS ends the frame
    /// ([`TunnelSpec::inner_fcs`]).
    pub inner_fcs: Option<usize>,
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
    if spec.inner_fcs && spec.kind != TunnelKind::Vxlan {
        return Err(ProfileError::invalid(
            format!("{p}.inner_fcs"),
            "only a VXLAN tunnel carries an inner Ethernet frame with an FCS",
            "remove inner_fcs, or make the tunnel's kind \"vxlan\"",
        ));
    }
    let mut t = Tunnel::default();
    if spec.kind == TunnelKind::Mpls {
        let l = labels(spec, &p)?;
        t.labels = (0..l.len() / 4).map(|k| at + 4 * k).collect();
        return Ok((l, 0x8847, t));
    }
    let (proto, mut rest) = match spec.kind {
        TunnelKind::Vxlan => (17, vxlan(spec, inner_type, inner_macs, &p)?),
        TunnelKind::Gtpv1 => (17, gtp(spec)),
        TunnelKind::Gre => (47, gre(spec, inner_type)),
        TunnelKind::Mpls => unreachable!("above"),
    };
    let (mut out, v6) = outer_ip(spec, proto, &p)?;
    t.outer_l3 = Some((at, v6));
    let next = at + out.len();
    if proto == 17 {
        let dflt = if spec.kind == TunnelKind::Vxlan {
            (49152, 4789)
        } else {
            (2152, 2152)
        };
        let (sp, dp) = (spec.src_port.unwrap_or(dflt.0), spec.dst_port.unwrap_or(dflt.1));
        t.udp = Some(next);
        match spec.kind {
            TunnelKind::Gtpv1 => t.gtp = Some(next + 8),
            _ => t.vni = Some(next + 12),
        }
        t.inner_fcs = spec.inner_fcs.then_some(next + 16);
        out.extend_from_slice(&sp.to_be_bytes());
        out.extend_from_slice(&dp.to_be_bytes());
        out.extend_from_slice(&[0; 4]); // length and checksum: per frame
    } else if spec.gre_key.is_some() {
        t.gre_key = Some(next + 4);
    }
    out.append(&mut rest);
    Ok((out, if v6 { 0x86dd } else { 0x0800 }, t))
}

/// The outer IPv4 or IPv6 header (lengths and the IPv4 checksum per frame), and whether it
/// is IPv6: both addresses are of one version.
fn outer_ip(spec: &TunnelSpec, proto: u8, p: &str) -> Result<(Vec<u8>, bool), ProfileError> {
    let ip = |s: &str, key: &str| {
        s.parse::<IpAddr>().map_err(|_| {
            ProfileError::invalid(
                format!("{p}.{key}"),
                format!("{s:?} is not an IP address"),
                "give the outer header's IPv4 or IPv6 address, e.g. \"192.0.2.1\" or \"2001:db8::1\"",
            )
        })
    };
    match (ip(&spec.ip_src, "ip_src")?, ip(&spec.ip_dst, "ip_dst")?) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, spec.ttl, proto, 0, 0];
            h.extend_from_slice(&src.octets());
            h.extend_from_slice(&dst.octets());
            Ok((h, false))
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let mut h = vec![0x60, 0, 0, 0, 0, 0, proto, spec.ttl];
            h.extend_from_slice(&src.octets());
            h.extend_from_slice(&dst.octets());
            Ok((h, true))
        }
        (s, d) => Err(ProfileError::invalid(
            format!("{p}.ip_dst"),
            format!("the outer source {s} and destination {d} are of two IP versions"),
            "give both outer addresses as IPv4, or both as IPv6",
        )),
    }
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
    /// Sets the outer length fields and checksums for `frame.len()`, from the frame's bytes
    /// (the field engine may have varied the outer fields). Call it last: over an outer IPv6
    /// header, the outer UDP checksum covers the whole inner packet, signature included
    /// (RFC 8200 8.1: a zero UDP checksum over IPv6 is dropped). A later stamp of the
    /// signature's TX time keeps it right: the inner L4 checksum it fixes up makes the inner
    /// segment's sum the same as before.
    #[inline]
    pub fn finish(&self, frame: &mut [u8]) {
        let len = frame.len();
        if let Some(e) = self.inner_fcs {
            let c = crc32fast::hash(&frame[e..len - FCS_LEN]);
            frame[len - FCS_LEN..].copy_from_slice(&c.to_le_bytes());
        }
        let v6 = match self.outer_l3 {
            Some((at, false)) => {
                let tl = (len - at) as u16;
                frame[at + 2..at + 4].copy_from_slice(&tl.to_be_bytes());
                frame[at + 10..at + 12].copy_from_slice(&[0, 0]);
                let c = finish(sum_be(&frame[at..at + 20]));
                frame[at + 10..at + 12].copy_from_slice(&c.to_be_bytes());
                None
            }
            Some((at, true)) => {
                frame[at + 4..at + 6].copy_from_slice(&((len - at - 40) as u16).to_be_bytes());
                Some(at)
            }
            None => None,
        };
        if let Some(g) = self.gtp {
            frame[g + 2..g + 4].copy_from_slice(&((len - g - 8) as u16).to_be_bytes());
        }
        if let Some(u) = self.udp {
            let ul = (len - u) as u16;
            frame[u + 4..u + 6].copy_from_slice(&ul.to_be_bytes());
            if let Some(ip) = v6 {
                frame[u + 6..u + 8].copy_from_slice(&[0, 0]);
                let pseudo = sum_wide(&frame[ip + 8..ip + 40]) + u64::from(ul) + 17;
                let mut c = finish(pseudo + sum_wide(&frame[u..]));
                if c == 0 {
                    c = 0xffff;
                }
                frame[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
            }
        }
    }
}

impl Tunnel {
    /// Bytes after the inner packet: the inner FCS, when the tunnel has one.
    #[inline(always)]
    pub fn trailer(&self) -> usize {
        self.inner_fcs.map_or(0, |_| FCS_LEN)
    }

    /// Writes the inner FCS again after the inner frame changed (a TX stamp) and fixes the
    /// outer UDP checksum over IPv6, which covers it, incrementally (RFC 1624, eqn. 3).
    #[inline]
    pub fn refresh_fcs(&self, frame: &mut [u8]) {
        let Some(e) = self.inner_fcs else { return };
        let at = frame.len() - FCS_LEN;
        let c = crc32fast::hash(&frame[e..at]).to_le_bytes();
        match (self.outer_l3, self.udp) {
            (Some((_, true)), Some(u)) => replace_in(frame, u, at, &c, u + 6, true),
            _ => frame[at..].copy_from_slice(&c),
        }
    }
}

/// The ones'-complement sum of `bytes` (from an even offset), eight bytes a step: two 32-bit
/// words fold to the same 16-bit sum, since 2^16 is 1 modulo 0xffff.
#[inline]
pub fn sum_wide(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut sum = 0u64;
    for c in &mut chunks {
        let w = u64::from_be_bytes(c.try_into().expect("8 bytes"));
        sum += (w >> 32) + (w & 0xffff_ffff);
    }
    sum + sum_be(chunks.remainder())
}
