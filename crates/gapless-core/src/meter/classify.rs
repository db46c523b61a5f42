//! Which stream a received frame belongs to: by the gapless signature, or by its 5-tuple.

use std::net::IpAddr;

use etherparse::{LaxNetSlice, LaxSlicedPacket, NetSlice, SlicedPacket, TransportSlice};
use serde::{Deserialize, Serialize};

use crate::packet::signature::Signature;

/// An unsigned flow's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = match self.proto {
            6 => "tcp",
            17 => "udp",
            _ => "ip",
        };
        match (self.src, self.dst) {
            (IpAddr::V6(_), _) => write!(f, "{p} [{}]:{} > [{}]:{}", self.src, self.sport, self.dst, self.dport),
            _ => write!(f, "{p} {}:{} > {}:{}", self.src, self.sport, self.dst, self.dport),
        }
    }
}

/// Why a frame was not taken as part of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    /// Not IPv4/IPv6 (ARP, LLDP, ...).
    NotIp,
    /// An ICMP error: it quotes someone's frame (maybe ours, signature included), so it is
    /// never taken as ours.
    IcmpError,
    /// IP without TCP/UDP ports and without a signature (fragments, other protocols).
    NoPorts,
    /// Too short for the headers it announces.
    Malformed,
}

/// Counts of frames that were not ours.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ForeignCounts {
    pub total: u64,
    pub not_ip: u64,
    pub icmp_error: u64,
    pub no_ports: u64,
    pub malformed: u64,
    /// Unsigned TCP/UDP frames, when streams are found only by signature.
    pub unsigned: u64,
}

impl ForeignCounts {
    pub fn add(&mut self, f: Foreign) {
        self.total += 1;
        match f {
            Foreign::NotIp => self.not_ip += 1,
            Foreign::IcmpError => self.icmp_error += 1,
            Foreign::NoPorts => self.no_ports += 1,
            Foreign::Malformed => self.malformed += 1,
        }
    }
}

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Signed(Signature),
    Flow(FlowKey),
    Foreign(Foreign),
}

/// Classifies an Ethernet frame (with or without VLAN tags).
#[inline]
pub fn classify(frame: &[u8]) -> Class {
    match signed_udp4(frame) {
        Some(sig) => Class::Signed(sig),
        None => classify_parsed(frame),
    }
}

/// The common frame read without a parser: a signed, unfragmented IPv4/UDP packet without
/// VLAN tags or IP options, whose lengths agree with the frame. `None` whenever anything
/// differs, and then etherparse reads it; where this gives a signature, etherparse gives
/// the same one (the test holds the two side by side on mutated frames).
#[inline]
pub(crate) fn signed_udp4(f: &[u8]) -> Option<Signature> {
    if f.len() < 42 || f[12..14] != [0x08, 0x00] || f[14] != 0x45 || f[23] != 17 {
        return None;
    }
    let be16 = |at: usize| usize::from(u16::from_be_bytes([f[at], f[at + 1]]));
    // More fragments, or an offset: a fragment carries no UDP header to read.
    if be16(20) & 0x3fff != 0 {
        return None;
    }
    let (ip_len, udp_len) = (be16(16), be16(38));
    if ip_len < 28 || ip_len > f.len() - 14 || udp_len < 8 || udp_len > ip_len - 20 {
        return None;
    }
    Signature::from_payload_end(&f[42..34 + udp_len])
}

/// Classifies a frame with etherparse (what [`classify`] does when [`signed_udp4`] finds
/// nothing).
pub(crate) fn classify_parsed(frame: &[u8]) -> Class {
    let Ok(p) = SlicedPacket::from_ethernet(frame) else {
        return Class::Foreign(Foreign::Malformed);
    };
    let (src, dst) = match &p.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            (IpAddr::from(h.source()), IpAddr::from(h.destination()))
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            (IpAddr::from(h.source()), IpAddr::from(h.destination()))
        }
        Some(NetSlice::Arp(_)) => return tunnelled(frame, true).unwrap_or(Class::Foreign(Foreign::NotIp)),
        _ => return tunnelled(frame, is_mpls(frame)).unwrap_or(Class::Foreign(Foreign::NotIp)),
    };
    let (payload, ports) = match &p.transport {
        Some(TransportSlice::Udp(u)) => (u.payload(), Some((17, u.source_port(), u.destination_port()))),
        Some(TransportSlice::Tcp(t)) => (t.payload(), Some((6, t.source_port(), t.destination_port()))),
        Some(TransportSlice::Icmpv4(i)) => match i.type_u8() {
            0 | 8 => (i.payload(), None),
            _ => return Class::Foreign(Foreign::IcmpError),
        },
        Some(TransportSlice::Icmpv6(i)) => match i.type_u8() {
            128 | 129 => (i.payload(), None),
            _ => return Class::Foreign(Foreign::IcmpError),
        },
        // No layer 4 header gapless reads: a template with `l4 = "none"` carries the signature
        // at the end of the IP payload (never a fragment's: the end of a fragmented UDP
        // packet's payload would carry a signature too, and count its last fragment alone).
        _ => (bare_ip_payload(&p.net), None),
    };
    if let Some(sig) = Signature::from_payload_end(payload) {
        return Class::Signed(sig);
    }
    if let Some(sig) = vxlan_with_fcs(payload, ports) {
        return Class::Signed(sig);
    }
    if let Some(c) = tunnelled(frame, is_gre(&p)) {
        return c;
    }
    match ports {
        Some((proto, sport, dport)) => Class::Flow(FlowKey {
            src,
            dst,
            proto,
            sport,
            dport,
        }),
        None => Class::Foreign(Foreign::NoPorts),
    }
}

/// The payload of an unfragmented IP packet whose protocol etherparse does not read as a
/// transport (not TCP, UDP or ICMP); empty otherwise.
fn bare_ip_payload<'a>(net: &Option<NetSlice<'a>>) -> &'a [u8] {
    let p = match net {
        Some(NetSlice::Ipv4(ip)) => ip.payload(),
        Some(NetSlice::Ipv6(ip)) => ip.payload(),
        _ => return &[],
    };
    let l4 = matches!(p.ip_number.0, 6 | 17 | 1 | 58);
    if p.fragmented || l4 {
        return &[];
    }
    p.payload
}

/// A tunnel without an outer UDP header (GRE, MPLS: see [`crate::packet::tunnel`]) carries
/// the inner packet, and so the signature, at the frame's end; so does an ARP template, in the
/// padding after the ARP packet. Only these are read there: any other frame whose last bytes
/// happened to start with the magic would be misread.
fn tunnelled(frame: &[u8], tunnel: bool) -> Option<Class> {
    tunnel
        .then(|| Signature::from_payload_end(frame))
        .flatten()
        .map(Class::Signed)
}

/// The signature of a VXLAN packet whose inner Ethernet frame carries its own FCS (as
/// ixia-c sends it, and gapless's `inner_fcs`): the UDP payload opens with VXLAN's I flag and
/// zero reserved bits, holds an inner Ethernet header, and ends with the signature and then
/// the 4 FCS bytes.
fn vxlan_with_fcs(payload: &[u8], ports: Option<(u8, u16, u16)>) -> Option<Signature> {
    let vxlan = payload.len() >= 8 + 14 + 4
        && matches!(ports, Some((17, _, _)))
        && payload[0] == 0x08
        && payload[1..4] == [0, 0, 0]
        && payload[7] == 0;
    vxlan
        .then(|| Signature::from_payload_end(&payload[..payload.len() - 4]))
        .flatten()
}

/// Whether the Ethernet header (after any VLAN tags) says MPLS unicast or multicast.
fn is_mpls(frame: &[u8]) -> bool {
    let mut at = 12;
    while frame.len() >= at + 2 && matches!(u16::from_be_bytes([frame[at], frame[at + 1]]), 0x8100 | 0x88a8) {
        at += 4;
    }
    frame.len() >= at + 2 && matches!(u16::from_be_bytes([frame[at], frame[at + 1]]), 0x8847 | 0x8848)
}

/// Whether the IP packet carries GRE (protocol 47).
fn is_gre(p: &SlicedPacket<'_>) -> bool {
    match &p.net {
        Some(NetSlice::Ipv4(ip)) => ip.header().protocol() == etherparse::IpNumber::GRE,
        Some(NetSlice::Ipv6(ip)) => ip.payload().ip_number == etherparse::IpNumber::GRE,
        _ => false,
    }
}

/// Classifies a frame captured short of its wire length (a snap length), whose headers
/// announce more than was captured: by the 5-tuple in the headers that are present. The
/// signature sits at the payload's end, so a cut frame never yields one.
pub fn classify_cut(frame: &[u8]) -> Class {
    let Ok(p) = LaxSlicedPacket::from_ethernet(frame) else {
        return Class::Foreign(Foreign::Malformed);
    };
    let (src, dst) = match &p.net {
        Some(LaxNetSlice::Ipv4(ip)) => {
            let h = ip.header();
            (IpAddr::from(h.source()), IpAddr::from(h.destination()))
        }
        Some(LaxNetSlice::Ipv6(ip)) => {
            let h = ip.header();
            (IpAddr::from(h.source()), IpAddr::from(h.destination()))
        }
        Some(LaxNetSlice::Arp(_)) => return Class::Foreign(Foreign::NotIp),
        None if p.stop_err.is_none() => return Class::Foreign(Foreign::NotIp),
        None => return Class::Foreign(Foreign::Malformed),
    };
    match &p.transport {
        Some(TransportSlice::Udp(u)) => Class::Flow(FlowKey {
            src,
            dst,
            proto: 17,
            sport: u.source_port(),
            dport: u.destination_port(),
        }),
        Some(TransportSlice::Tcp(t)) => Class::Flow(FlowKey {
            src,
            dst,
            proto: 6,
            sport: t.source_port(),
            dport: t.destination_port(),
        }),
        Some(TransportSlice::Icmpv4(i)) if !matches!(i.type_u8(), 0 | 8) => Class::Foreign(Foreign::IcmpError),
        Some(TransportSlice::Icmpv6(i)) if !matches!(i.type_u8(), 128 | 129) => Class::Foreign(Foreign::IcmpError),
        Some(_) => Class::Foreign(Foreign::NoPorts),
        None if p.stop_err.is_some() => Class::Foreign(Foreign::Malformed),
        None => Class::Foreign(Foreign::NoPorts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn signed_frame(payload_len: usize) -> Vec<u8> {
        let mut payload = vec![0u8; payload_len];
        let at = payload_len - 16;
        Signature {
            stream: 7,
            seq: 1234,
            tx_ns: 99,
        }
        .write(&mut payload[at..]);
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(1000, 2000)
            .write(&mut f, &payload)
            .unwrap();
        f
    }

    #[test]
    fn the_fast_path_agrees_with_etherparse_on_mutated_frames() {
        let mut fast = 0;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in 0..200_000u32 {
            let mut f = signed_frame(18 + (n % 40) as usize);
            // Padding as a short frame gets on the wire, then one to three mutated bytes.
            if n % 3 == 0 {
                f.extend_from_slice(&[0u8; 6]);
            }
            for _ in 0..=(n % 3) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize >> 8) % f.len().min(48);
                f[at] = x as u8;
            }
            if n % 5 == 0 {
                f.truncate(f.len() - (x as usize >> 20) % 8);
            }
            if let Some(sig) = signed_udp4(&f) {
                fast += 1;
                assert_eq!(
                    classify_parsed(&f),
                    Class::Signed(sig),
                    "frame {f:02x?}: the fast path gave {sig:?}, etherparse differs"
                );
            }
        }
        assert!(fast > 20_000, "expected many frames on the fast path, got {fast}");
        let f = signed_frame(18);
        assert_eq!(classify(&f), classify_parsed(&f));
        assert!(matches!(classify(&f), Class::Signed(s) if s.seq == 1234));
    }
}
