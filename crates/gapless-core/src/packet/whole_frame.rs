//! Templates given as a whole frame: `template = { frame = "<hex>" }` in a profile, or the
//! bytes of a Scapy packet from Python. etherparse finds the headers and this module turns
//! them into the [`TemplateSpec`] they describe, so the field engine works on them by name
//! and every frame's lengths and checksums are computed afresh (those in the given frame are
//! ignored). The frame's L4 payload is kept: it starts every frame's payload, zeros follow,
//! and the signature (when on) comes after it.
//!
//! What a template cannot build is an error naming it: IPv4 options, fragments, IPv6
//! extension headers, TCP options, MACsec, ARP (which a template takes by keys: `l4 = "arp"`),
//! and transports other than UDP, TCP and ICMP echo requests.

use std::borrow::Cow;

use etherparse::{
    Icmpv4Type, Icmpv6Type, LinkExtHeader, LinkHeader, NetHeaders, PacketHeaders, PayloadSlice, TcpHeader,
    TransportHeader,
};

use crate::packet::signature::SIG_LEN;
use crate::packet::sizes::FCS_LEN;
use crate::spec::error::ProfileError;
use crate::spec::{L4Kind, PayloadSpec, TemplateSpec, VlanSpec};

/// The template to build from, and the frame size (with FCS) a stream without a `size` gets:
/// the given frame, its signature after it, and at least 64 B. A template without `frame`
/// comes back as it is, with no size.
pub fn resolve<'a>(
    spec: &'a TemplateSpec,
    signature: bool,
    path: &str,
) -> Result<(Cow<'a, TemplateSpec>, Option<u32>), ProfileError> {
    let Some(hex) = &spec.frame else {
        return Ok((Cow::Borrowed(spec), None));
    };
    let at = format!("{path}.frame");
    check_alone(spec, path)?;
    let bytes = parse_hex(hex, &at)?;
    let (t, payload_at) = from_frame(&bytes, &at)?;
    let sig = if signature { SIG_LEN } else { 0 };
    let used = payload_at + t.payload.bytes.as_ref().map_or(0, |h| h.len() / 2);
    let size = (used + sig + FCS_LEN).max(64) as u32;
    Ok((Cow::Owned(t), Some(size)))
}

/// `frame` describes the whole packet: any other key would be ignored, so it is an error.
fn check_alone(spec: &TemplateSpec, path: &str) -> Result<(), ProfileError> {
    let bare = TemplateSpec {
        frame: None,
        ..spec.clone()
    };
    let as_value = |t: &TemplateSpec| toml::Value::try_from(t).ok();
    if as_value(&bare) == as_value(&TemplateSpec::default()) {
        return Ok(());
    }
    Err(ProfileError::invalid(
        format!("{path}.frame"),
        "is given with other template keys, which it would override",
        "give the whole packet in `frame` alone (change its bytes), or drop `frame` and describe the packet by keys",
    ))
}

/// Bytes from hex pairs (whitespace and a leading 0x allowed).
pub fn parse_hex(hex: &str, path: &str) -> Result<Vec<u8>, ProfileError> {
    let h: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
    let h = h.strip_prefix("0x").unwrap_or(&h);
    if h.is_empty() || !h.len().is_multiple_of(2) {
        return Err(ProfileError::invalid(
            path,
            "needs a non-empty, even number of hex digits",
            "write bytes as hex pairs, e.g. \"deadbeef\"",
        ));
    }
    (0..h.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&h[i..i + 2], 16).map_err(|_| {
                ProfileError::invalid(
                    path,
                    format!("{:?} is not a hex byte", &h[i..i + 2]),
                    "use only 0-9 a-f",
                )
            })
        })
        .collect()
}

/// `b` as lower-case hex digits, two a byte.
pub fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unsupported(path: &str, what: impl Into<String>) -> ProfileError {
    ProfileError::invalid(
        path,
        what,
        "give an Ethernet II frame with at most two VLAN tags, IPv4 (no options, not a fragment) or IPv6 (no extension headers), and UDP, TCP without options, or an ICMP echo request; or describe the packet by keys",
    )
}

/// The template spec a frame was built from, and where its L4 payload starts.
pub fn from_frame(bytes: &[u8], path: &str) -> Result<(TemplateSpec, usize), ProfileError> {
    let h = PacketHeaders::from_ethernet_slice(bytes)
        .map_err(|e| unsupported(path, format!("is not a frame gapless can read ({e})")))?;
    let Some(LinkHeader::Ethernet2(eth)) = &h.link else {
        return Err(unsupported(path, "has no Ethernet II header"));
    };
    let mut t = TemplateSpec {
        eth_src: mac(&eth.source),
        eth_dst: mac(&eth.destination),
        vlan: vlans(&h, eth.ether_type.0, path)?,
        ..TemplateSpec::default()
    };
    net(&mut t, &h, path)?;
    transport(&mut t, &h, path)?;
    let payload = match h.payload {
        PayloadSlice::Udp(p) | PayloadSlice::Tcp(p) | PayloadSlice::Icmpv4(p) | PayloadSlice::Icmpv6(p) => p,
        _ => return Err(unsupported(path, "has no UDP, TCP or ICMP payload")),
    };
    let payload_at = payload.as_ptr() as usize - bytes.as_ptr() as usize;
    t.payload = PayloadSpec {
        bytes: (!payload.is_empty()).then(|| hex_of(payload)),
        ..PayloadSpec::default()
    };
    Ok((t, payload_at))
}

fn mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The VLAN tags, outer first, each with the TPID that announced it.
fn vlans(h: &PacketHeaders, first_tpid: u16, path: &str) -> Result<Vec<VlanSpec>, ProfileError> {
    let mut tpid = first_tpid;
    let mut out = Vec::new();
    for ext in &h.link_exts {
        match ext {
            LinkExtHeader::Vlan(v) => {
                out.push(VlanSpec {
                    id: v.vlan_id.value(),
                    pcp: v.pcp.value(),
                    dei: v.drop_eligible_indicator,
                    tpid: Some(tpid),
                });
                tpid = v.ether_type.0;
            }
            LinkExtHeader::Macsec(_) => return Err(unsupported(path, "has a MACsec header")),
        }
    }
    if out.len() > 2 {
        return Err(unsupported(path, format!("has {} VLAN tags", out.len())));
    }
    Ok(out)
}

fn net(t: &mut TemplateSpec, h: &PacketHeaders, path: &str) -> Result<(), ProfileError> {
    match &h.net {
        Some(NetHeaders::Ipv4(ip, exts)) => {
            if !ip.options.is_empty() || !exts.is_empty() {
                return Err(unsupported(path, "has IPv4 options or an authentication header"));
            }
            if ip.more_fragments || ip.fragment_offset.value() != 0 {
                return Err(unsupported(path, "is an IPv4 fragment"));
            }
            t.ip_src = std::net::Ipv4Addr::from(ip.source).to_string();
            t.ip_dst = std::net::Ipv4Addr::from(ip.destination).to_string();
            t.tos = Some(ip.dscp.value() << 2 | ip.ecn.value());
            t.ttl = ip.time_to_live;
            t.ip_id = ip.identification;
            t.dont_fragment = ip.dont_fragment;
        }
        Some(NetHeaders::Ipv6(ip, exts)) => {
            if !exts.is_empty() {
                return Err(unsupported(path, "has IPv6 extension headers"));
            }
            t.ip_src = std::net::Ipv6Addr::from(ip.source).to_string();
            t.ip_dst = std::net::Ipv6Addr::from(ip.destination).to_string();
            t.tos = Some(ip.traffic_class);
            t.ttl = ip.hop_limit;
            t.flow_label = ip.flow_label.value();
        }
        Some(NetHeaders::Arp(_)) => {
            return Err(unsupported(
                path,
                "is an ARP packet; give it by keys instead (l4 = \"arp\", ip_src, ip_dst, arp_op, arp_sha, arp_tha)",
            ))
        }
        None => return Err(unsupported(path, "has no IP header")),
    }
    Ok(())
}

fn transport(t: &mut TemplateSpec, h: &PacketHeaders, path: &str) -> Result<(), ProfileError> {
    match &h.transport {
        Some(TransportHeader::Udp(u)) => {
            t.l4 = L4Kind::Udp;
            (t.src_port, t.dst_port) = (u.source_port, u.destination_port);
        }
        Some(TransportHeader::Tcp(c)) => tcp(t, c, path)?,
        Some(TransportHeader::Icmpv4(i)) => match &i.icmp_type {
            Icmpv4Type::EchoRequest(e) => icmp(t, e.id, e.seq),
            other => {
                return Err(unsupported(
                    path,
                    format!("is ICMP {other:?}; templates send echo requests"),
                ))
            }
        },
        Some(TransportHeader::Icmpv6(i)) => match &i.icmp_type {
            Icmpv6Type::EchoRequest(e) => icmp(t, e.id, e.seq),
            other => {
                return Err(unsupported(
                    path,
                    format!("is ICMPv6 {other:?}; templates send echo requests"),
                ))
            }
        },
        Some(TransportHeader::Igmp(_)) => return Err(unsupported(path, "is IGMP")),
        None => return Err(unsupported(path, "has no UDP, TCP or ICMP header")),
    }
    Ok(())
}

fn icmp(t: &mut TemplateSpec, id: u16, seq: u16) {
    t.l4 = L4Kind::Icmp;
    (t.icmp_id, t.icmp_seq) = (id, seq);
}

fn tcp(t: &mut TemplateSpec, c: &TcpHeader, path: &str) -> Result<(), ProfileError> {
    if !c.options.is_empty() {
        return Err(unsupported(path, "has TCP options"));
    }
    t.l4 = L4Kind::Tcp;
    (t.src_port, t.dst_port) = (c.source_port, c.destination_port);
    let flags = [
        (c.fin, 'F'),
        (c.syn, 'S'),
        (c.rst, 'R'),
        (c.psh, 'P'),
        (c.ack, 'A'),
        (c.urg, 'U'),
        (c.ece, 'E'),
        (c.cwr, 'C'),
    ];
    t.tcp_flags = flags.iter().filter(|(on, _)| *on).map(|(_, l)| *l).collect();
    (t.tcp_seq, t.tcp_ack, t.tcp_window) = (c.sequence_number, c.acknowledgment_number, c.window_size);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn udp_frame(payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .single_vlan(etherparse::VlanId::try_new(7).unwrap())
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 33)
            .udp(5000, 6000);
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    #[test]
    fn a_udp_frame_gives_its_addresses_ports_tag_and_payload() {
        let f = udp_frame(b"hello");
        let (t, at) = from_frame(&f, "stream[0].template.frame").unwrap();
        assert_eq!(
            (t.eth_src.as_str(), t.eth_dst.as_str()),
            ("02:00:00:00:00:01", "02:00:00:00:00:02")
        );
        assert_eq!(
            (t.ip_src.as_str(), t.ip_dst.as_str(), t.ttl),
            ("10.0.0.1", "10.0.0.2", 33)
        );
        assert_eq!((t.src_port, t.dst_port, t.l4), (5000, 6000, L4Kind::Udp));
        assert_eq!(t.vlan.len(), 1);
        assert_eq!((t.vlan[0].id, t.vlan[0].tpid), (7, Some(0x8100)));
        assert_eq!(t.payload.bytes.as_deref(), Some("68656c6c6f"));
        assert_eq!(at, 14 + 4 + 20 + 8);
    }

    #[test]
    fn the_default_size_holds_the_frame_and_the_signature() {
        let spec = TemplateSpec {
            frame: Some(hex_of(&udp_frame(&[1; 40]))),
            ..TemplateSpec::default()
        };
        let (_, size) = resolve(&spec, true, "t").unwrap();
        assert_eq!(size, Some((46 + 40 + 16 + 4) as u32));
        let (_, size) = resolve(&spec, false, "t").unwrap();
        assert_eq!(size, Some(90));
    }

    #[test]
    fn what_a_template_cannot_build_is_named() {
        let mut tcp = Vec::new();
        PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2], 64)
            .tcp(1, 2, 3, 4)
            .options(&[etherparse::TcpOptionElement::MaximumSegmentSize(1400)])
            .unwrap()
            .write(&mut tcp, &[])
            .unwrap();
        let e = from_frame(&tcp, "p.frame").unwrap_err().to_string();
        assert!(e.contains("p.frame") && e.contains("TCP options"), "got {e}");
        let e = from_frame(&[0u8; 10], "p.frame").unwrap_err().to_string();
        assert!(e.contains("not a frame gapless can read"), "got {e}");
        let spec = TemplateSpec {
            frame: Some(hex_of(&udp_frame(b""))),
            ttl: 3,
            ..TemplateSpec::default()
        };
        let e = resolve(&spec, true, "s.template").unwrap_err().to_string();
        assert!(
            e.contains("s.template.frame") && e.contains("other template keys"),
            "got {e}"
        );
    }
}
