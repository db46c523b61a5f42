//! Packet templates: built once per stream with etherparse, then finished per packet.
//!
//! A template is built at the stream's largest frame. Each packet copies a prefix of it,
//! lets the field engine patch bytes, writes the signature, and calls [`Template::finish_with`],
//! which sets the length fields and both checksums in O(header) time: the payload's
//! checksum contribution comes from a precomputed prefix-sum table, so a 1518-byte frame
//! costs the same as a 64-byte one.

use etherparse::{PacketBuilder, TcpHeader, VlanId};
use std::net::IpAddr;

use crate::packet::checksum::{finish, prefix_sums, sum_be};
use crate::packet::hand::Hand;
use crate::packet::signature::SIG_LEN;
use crate::packet::sizes::FCS_LEN;
use crate::packet::whole_frame::parse_hex;
use crate::spec::error::ProfileError;
use crate::spec::{L4Kind, TemplateSpec};

/// Smallest Ethernet frame without FCS.
pub const MIN_FRAME_NO_FCS: usize = 60;

pub use crate::packet::layout::Layout;

/// A compiled template.
#[derive(Debug, Clone)]
pub struct Template {
    /// The frame at its largest length (no FCS).
    pub bytes: Vec<u8>,
    pub layout: Layout,
    /// Whether a signature trailer ends the payload.
    pub sig: bool,
    /// Prefix sums of the template's payload.
    prefix: Vec<u64>,
    /// Payload regions (offset, width) that the field engine writes.
    regions: Vec<(usize, usize)>,
    /// IPv4 header sum without the total length and checksum words (0 on IPv6).
    ip_base: u64,
    /// L4 checksum sum of the pseudo header (without length) and the L4 header (without the
    /// UDP length and the checksum).
    l4_base: u64,
    /// The outer headers' per-frame fields, for a tunnelled stream.
    tunnel: Option<crate::packet::tunnel::Tunnel>,
    /// Header fields set by hand, written over each finished frame.
    hand: Option<Hand>,
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        m[i] = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}

fn tcp_flags(hdr: &mut TcpHeader, flags: &str, path: &str) -> Result<(), ProfileError> {
    for c in flags.chars() {
        match c.to_ascii_uppercase() {
            'F' => hdr.fin = true,
            'S' => hdr.syn = true,
            'R' => hdr.rst = true,
            'P' => hdr.psh = true,
            'A' => hdr.ack = true,
            'U' => hdr.urg = true,
            'E' => hdr.ece = true,
            'C' => hdr.cwr = true,
            other => {
                return Err(ProfileError::invalid(
                    format!("{path}.tcp_flags"),
                    format!("unknown TCP flag letter {other:?}"),
                    "use the letters F S R P A U E C, e.g. \"S\" or \"PA\"",
                ))
            }
        }
    }
    Ok(())
}

/// The payload filler bytes for a payload of `len` bytes.
fn payload_bytes(spec: &TemplateSpec, len: usize, seed: u64, path: &str) -> Result<Vec<u8>, ProfileError> {
    let p = &spec.payload;
    let given = [p.pattern.is_some(), p.hex.is_some(), p.bytes.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(ProfileError::invalid(
            format!("{path}.payload"),
            "more than one of `pattern`, `hex` and `bytes` is set",
            "keep one of them",
        ));
    }
    if let Some(hex) = &p.hex {
        let bytes = parse_hex(hex, &format!("{path}.payload.hex"))?;
        return Ok(bytes.iter().copied().cycle().take(len).collect());
    }
    if let Some(hex) = &p.bytes {
        let mut bytes = parse_hex(hex, &format!("{path}.payload.bytes"))?;
        bytes.resize(len, 0);
        return Ok(bytes);
    }
    match p.pattern.as_deref().unwrap_or("zeros") {
        "zeros" => Ok(vec![0; len]),
        "incrementing" => Ok((0..len).map(|i| i as u8).collect()),
        "random" => {
            // splitmix64: a fixed, seedable filler (not a statistics source).
            let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
            Ok((0..len)
                .map(|_| {
                    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = x;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    (z ^ (z >> 31)) as u8
                })
                .collect())
        }
        other => Err(ProfileError::invalid(
            format!("{path}.payload.pattern"),
            format!("unknown payload pattern {other:?}"),
            "use \"zeros\", \"incrementing\" or \"random\", or give `hex`",
        )),
    }
}

/// The template's MAC and IP addresses, parsed, of one IP version.
/// The MAC address at `path.key`, or the error naming it.
fn mac_at(s: &str, path: &str, key: &str) -> Result<[u8; 6], ProfileError> {
    parse_mac(s).ok_or_else(|| {
        ProfileError::invalid(
            format!("{path}.{key}"),
            format!("{s:?} is not a MAC address"),
            "write six hex pairs, e.g. \"02:00:00:00:00:01\"",
        )
    })
}

fn parse_addrs(spec: &TemplateSpec, path: &str) -> Result<Addrs, ProfileError> {
    let mac = |s: &str, key: &str| mac_at(s, path, key);
    let ip = |s: &str, key: &str| {
        s.parse::<IpAddr>().map_err(|_| {
            ProfileError::invalid(
                format!("{path}.{key}"),
                format!("{s:?} is not an IP address"),
                "write an IPv4 (198.18.0.1) or IPv6 (2001:2::1) address",
            )
        })
    };
    let src = mac(&spec.eth_src, "eth_src")?;
    let dst = mac(&spec.eth_dst, "eth_dst")?;
    let ip_src = ip(&spec.ip_src, "ip_src")?;
    let ip_dst = ip(&spec.ip_dst, "ip_dst")?;
    if ip_src.is_ipv4() != ip_dst.is_ipv4() {
        return Err(ProfileError::invalid(
            format!("{path}.ip_dst"),
            "ip_src and ip_dst are of different IP versions",
            "use two IPv4 or two IPv6 addresses",
        ));
    }
    Ok((src, dst, ip_src, ip_dst))
}

/// The header fields' ranges; returns the TOS / traffic-class byte.
fn check_fields(spec: &TemplateSpec, path: &str) -> Result<u8, ProfileError> {
    let tos = match (spec.tos, spec.dscp, spec.ecn) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(ProfileError::invalid(
                format!("{path}.tos"),
                "tos is set together with dscp/ecn",
                "set either tos (whole byte) or dscp and ecn",
            ));
        }
        (Some(t), None, None) => t,
        (None, d, e) => {
            let d = d.unwrap_or(0);
            let e = e.unwrap_or(0);
            if d > 63 {
                return Err(ProfileError::invalid(
                    format!("{path}.dscp"),
                    format!("dscp {d} is above 63"),
                    "use 0..=63",
                ));
            }
            if e > 3 {
                return Err(ProfileError::invalid(
                    format!("{path}.ecn"),
                    format!("ecn {e} is above 3"),
                    "use 0..=3",
                ));
            }
            (d << 2) | e
        }
    };
    if spec.vlan.len() > 2 {
        return Err(ProfileError::invalid(
            format!("{path}.vlan"),
            format!("{} VLAN tags given", spec.vlan.len()),
            "give at most two tags (QinQ)",
        ));
    }
    for (i, v) in spec.vlan.iter().enumerate() {
        if v.id > 4095 {
            return Err(ProfileError::invalid(
                format!("{path}.vlan[{i}].id"),
                format!("VLAN id {} is above 4095", v.id),
                "use 0..=4095",
            ));
        }
        if v.pcp > 7 {
            return Err(ProfileError::invalid(
                format!("{path}.vlan[{i}].pcp"),
                format!("pcp {} is above 7", v.pcp),
                "use 0..=7",
            ));
        }
    }
    if spec.ip_proto.is_some() && spec.l4 != L4Kind::None {
        return Err(ProfileError::invalid(
            format!("{path}.ip_proto"),
            format!(
                "ip_proto is set on a {:?} template, whose protocol its l4 names",
                spec.l4
            ),
            "remove ip_proto, or set l4 = \"none\" to send the IP header with the payload right after it",
        ));
    }
    if spec.flow_label > 0xf_ffff {
        return Err(ProfileError::invalid(
            format!("{path}.flow_label"),
            "flow_label is above 20 bits",
            "use 0..=1048575",
        ));
    }

    Ok(tos)
}

/// The headers and `filler` as etherparse writes them (checksums and lengths included).
fn write_headers(
    spec: &TemplateSpec,
    addrs: Addrs,
    filler: &[u8],
    max_len: usize,
    path: &str,
) -> Result<Vec<u8>, ProfileError> {
    let (src, dst, ip_src, ip_dst) = addrs;
    let ipv6 = ip_src.is_ipv6();
    // Structure from etherparse.
    let b = PacketBuilder::ethernet2(src, dst);
    let vid = |i: usize| VlanId::try_new(spec.vlan[i].id).expect("checked above");
    let b = match spec.vlan.len() {
        0 => None,
        1 => Some(b.single_vlan(vid(0))),
        _ => Some(b.double_vlan(vid(0), vid(1))),
    };
    macro_rules! l3 {
        ($b:expr) => {
            match (ip_src, ip_dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => $b.ipv4(s.octets(), d.octets(), spec.ttl),
                (IpAddr::V6(s), IpAddr::V6(d)) => $b.ipv6(s.octets(), d.octets(), spec.ttl),
                _ => unreachable!("versions checked above"),
            }
        };
    }
    let ipb = match b {
        None => l3!(PacketBuilder::ethernet2(src, dst)),
        Some(v) => l3!(v),
    };
    let mut bytes = Vec::with_capacity(max_len);
    let write_err = |e: String| {
        ProfileError::invalid(
            path.to_string(),
            format!("cannot build the template: {e}"),
            "check the template's values",
        )
    };
    match spec.l4 {
        L4Kind::Udp => ipb
            .udp(spec.src_port, spec.dst_port)
            .write(&mut bytes, filler)
            .map_err(|e| write_err(e.to_string()))?,
        L4Kind::Tcp => {
            let mut h = TcpHeader::new(spec.src_port, spec.dst_port, spec.tcp_seq, spec.tcp_window);
            tcp_flags(&mut h, &spec.tcp_flags, path)?;
            h.acknowledgment_number = spec.tcp_ack;
            ipb.tcp_header(h)
                .write(&mut bytes, filler)
                .map_err(|e| write_err(e.to_string()))?
        }
        L4Kind::Icmp if ipv6 => ipb
            .icmpv6_echo_request(spec.icmp_id, spec.icmp_seq)
            .write(&mut bytes, filler)
            .map_err(|e| write_err(e.to_string()))?,
        L4Kind::Icmp => ipb
            .icmpv4_echo_request(spec.icmp_id, spec.icmp_seq)
            .write(&mut bytes, filler)
            .map_err(|e| write_err(e.to_string()))?,
        L4Kind::None => {
            let proto = spec.ip_proto.unwrap_or(if ipv6 { 59 } else { 61 });
            ipb.write(&mut bytes, etherparse::IpNumber(proto), filler)
                .map_err(|e| write_err(e.to_string()))?
        }
        L4Kind::Arp => unreachable!("ARP templates are built by Template::build_arp"),
    }
    debug_assert_eq!(bytes.len(), max_len);

    Ok(bytes)
}

/// What the builder does not set: PCP/DEI/TPID, TOS/TC, flow label, ident, DF. Returns the
/// offsets of the VLAN TCIs.
fn patch_extras(spec: &TemplateSpec, bytes: &mut [u8], l3: usize, ipv6: bool, tos: u8) -> Vec<usize> {
    let vlan_tci = patch_vlans(spec, bytes);
    if ipv6 {
        let w = (6u32 << 28) | (u32::from(tos) << 20) | spec.flow_label;
        bytes[l3..l3 + 4].copy_from_slice(&w.to_be_bytes());
    } else {
        bytes[l3 + 1] = tos;
        bytes[l3 + 4..l3 + 6].copy_from_slice(&spec.ip_id.to_be_bytes());
        let flags: u16 = if spec.dont_fragment { 0x4000 } else { 0 };
        bytes[l3 + 6..l3 + 8].copy_from_slice(&flags.to_be_bytes());
    }
    vlan_tci
}

/// The VLAN tags' TPIDs and TCIs; returns the TCIs' offsets.
fn patch_vlans(spec: &TemplateSpec, bytes: &mut [u8]) -> Vec<usize> {
    let mut vlan_tci = Vec::new();
    for (i, v) in spec.vlan.iter().enumerate() {
        let tpid_at = 12 + 4 * i;
        let default_tpid = if spec.vlan.len() == 2 && i == 0 { 0x88a8 } else { 0x8100 };
        bytes[tpid_at..tpid_at + 2].copy_from_slice(&v.tpid.unwrap_or(default_tpid).to_be_bytes());
        let tci = (u16::from(v.pcp) << 13) | (u16::from(v.dei) << 12) | v.id;
        bytes[tpid_at + 2..tpid_at + 4].copy_from_slice(&tci.to_be_bytes());
        vlan_tci.push(tpid_at + 2);
    }
    vlan_tci
}

/// The tunnel's outer headers, for a template with one: their bytes, the Ethernet header's
/// ethertype, and the per-frame fix-ups.
fn tunnel_of(
    spec: &TemplateSpec,
    eth_end: usize,
    ipv6: bool,
    path: &str,
) -> Result<Option<(Vec<u8>, u16, crate::packet::tunnel::Tunnel)>, ProfileError> {
    let Some(ts) = &spec.tunnel else { return Ok(None) };
    let at = format!("{path}.tunnel");
    let mac = |s: &str, key: &str| mac_at(s, &at, key);
    let macs = (
        mac(&ts.inner_eth_dst, "inner_eth_dst")?,
        mac(&ts.inner_eth_src, "inner_eth_src")?,
    );
    let inner_type = if ipv6 { 0x86dd } else { 0x0800 };
    crate::packet::tunnel::encap(ts, eth_end, inner_type, macs, path).map(Some)
}

/// The IPv4 options' bytes (none on IPv6), padded with zeros to whole 32-bit words.
fn ip_options(spec: &TemplateSpec, ipv6: bool, path: &str) -> Result<Vec<u8>, ProfileError> {
    let Some(hex) = &spec.ip_options else {
        return Ok(Vec::new());
    };
    let at = format!("{path}.ip_options");
    if ipv6 {
        return Err(ProfileError::invalid(
            at,
            "IPv6 has no header options (it has extension headers)",
            "remove ip_options, or send IPv4",
        ));
    }
    let mut b = parse_hex(hex, &at)?;
    if b.len() > 40 {
        return Err(ProfileError::invalid(
            at,
            format!("{} bytes of options; an IPv4 header holds at most 40", b.len()),
            "give at most 40 bytes (80 hex digits)",
        ));
    }
    b.resize(b.len().div_ceil(4) * 4, 0);
    Ok(b)
}

/// The largest frame must hold the headers (up to `payload`), the field engine's payload
/// bytes and the signature.
fn check_room(
    payload: usize,
    max_len: usize,
    sig: bool,
    regions: &[(usize, usize)],
    path: &str,
) -> Result<(), ProfileError> {
    let sig_len = if sig { SIG_LEN } else { 0 };
    let min_payload = regions.iter().map(|(o, w)| o + w).max().unwrap_or(0) + sig_len;
    let need = (payload + min_payload).max(MIN_FRAME_NO_FCS);
    if max_len < need {
        return Err(ProfileError::invalid(
            path.to_string(),
            format!(
                "the largest frame is {} B but the headers, the field-engine payload bytes and the signature need {} B",
                max_len + FCS_LEN,
                need + FCS_LEN
            ),
            format!(
                "raise the frame size to at least {} B, or set signature = false",
                need + FCS_LEN
            ),
        ));
    }
    Ok(())
}

/// The 28 bytes of an Ethernet/IPv4 ARP packet (RFC 826) the template describes.
fn arp_packet(spec: &TemplateSpec, eth_src: [u8; 6], path: &str) -> Result<[u8; 28], ProfileError> {
    let v4 = |s: &str, key: &str| {
        s.parse::<std::net::Ipv4Addr>().map_err(|_| {
            ProfileError::invalid(
                format!("{path}.{key}"),
                format!("{s:?} is not an IPv4 address"),
                "an ARP packet carries IPv4 addresses (IPv6 resolves with ICMPv6 neighbor discovery)",
            )
        })
    };
    let sha = match &spec.arp_sha {
        Some(m) => mac_at(m, path, "arp_sha")?,
        None => eth_src,
    };
    let tha = match &spec.arp_tha {
        Some(m) => mac_at(m, path, "arp_tha")?,
        None => [0; 6],
    };
    let mut a = [0u8; 28];
    a[..8].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 0]);
    a[6..8].copy_from_slice(&spec.arp_op.unwrap_or(1).to_be_bytes());
    a[8..14].copy_from_slice(&sha);
    a[14..18].copy_from_slice(&v4(&spec.ip_src, "ip_src")?.octets());
    a[18..24].copy_from_slice(&tha);
    a[24..28].copy_from_slice(&v4(&spec.ip_dst, "ip_dst")?.octets());
    Ok(a)
}

/// Source and destination MAC, source and destination IP.
type Addrs = ([u8; 6], [u8; 6], IpAddr, IpAddr);

impl Template {
    /// Builds the template for frames up to `max_len` bytes (without FCS).
    /// `regions` are the payload byte ranges the field engine will write.
    pub fn build(
        spec: &TemplateSpec,
        max_len: usize,
        sig: bool,
        regions: Vec<(usize, usize)>,
        seed: u64,
        path: &str,
    ) -> Result<Template, ProfileError> {
        if spec.l4 == L4Kind::Arp {
            return Template::build_arp(spec, max_len, sig, regions, seed, path);
        }
        let addrs = parse_addrs(spec, path)?;
        let ipv6 = addrs.2.is_ipv6();
        let tos = check_fields(spec, path)?;
        let opts = ip_options(spec, ipv6, path)?;
        let eth_end = 14 + 4 * spec.vlan.len();
        let enc = tunnel_of(spec, eth_end, ipv6, path)?;
        let enc_len = enc.as_ref().map_or(0, |e| e.0.len());
        let trailer = enc.as_ref().map_or(0, |e| e.2.trailer());
        let l3 = eth_end + enc_len;
        let l4 = l3 + if ipv6 { 40 } else { 20 + opts.len() };
        let payload = l4
            + match spec.l4 {
                L4Kind::Udp | L4Kind::Icmp | L4Kind::Arp => 8,
                L4Kind::Tcp => 20,
                L4Kind::None => 0,
            };
        check_room(payload + trailer, max_len, sig, &regions, path)?;
        let payload_len = max_len - payload - trailer;
        let filler = payload_bytes(spec, payload_len, seed, path)?;

        let inner_len = max_len - enc_len - trailer - opts.len();
        let mut bytes = write_headers(spec, addrs, &filler, inner_len, path)?;
        let vlan_tci = patch_extras(spec, &mut bytes, eth_end, ipv6, tos);
        if !opts.is_empty() {
            bytes[eth_end] = 0x45 + (opts.len() / 4) as u8;
            bytes.splice(eth_end + 20..eth_end + 20, opts);
        }
        let tunnel = enc.map(|(outer, ethertype, t)| {
            bytes[eth_end - 2..eth_end].copy_from_slice(&ethertype.to_be_bytes());
            bytes.splice(eth_end..eth_end, outer);
            bytes.resize(bytes.len() + t.trailer(), 0);
            t
        });
        let layout = Layout {
            vlan_tci,
            l3,
            ipv6,
            l4,
            l4_kind: spec.l4,
            payload,
            outer: tunnel.clone(),
        };
        let hand = Hand::new(&spec.hand, &layout, path)?;
        Ok(Template::prepared(bytes, layout, sig, regions, tunnel, hand))
    }

    /// The template of these bytes, its sums precomputed.
    fn prepared(
        bytes: Vec<u8>,
        layout: Layout,
        sig: bool,
        regions: Vec<(usize, usize)>,
        tunnel: Option<crate::packet::tunnel::Tunnel>,
        hand: Option<Hand>,
    ) -> Template {
        let mut t = Template {
            bytes,
            layout,
            sig,
            prefix: Vec::new(),
            regions,
            ip_base: 0,
            l4_base: 0,
            tunnel,
            hand,
        };
        t.prepare();
        t
    }

    /// An ARP template: Ethernet (and VLAN tags), the ARP packet, then the payload as the
    /// frame's padding, the signature at its end. No lengths or checksums to keep.
    fn build_arp(
        spec: &TemplateSpec,
        max_len: usize,
        sig: bool,
        regions: Vec<(usize, usize)>,
        seed: u64,
        path: &str,
    ) -> Result<Template, ProfileError> {
        check_fields(spec, path)?;
        if spec.tunnel.is_some() {
            return Err(ProfileError::invalid(
                format!("{path}.tunnel"),
                "an ARP packet does not go through a tunnel here",
                "remove the tunnel, or send IP in it",
            ));
        }
        let (src, dst) = (
            mac_at(&spec.eth_src, path, "eth_src")?,
            mac_at(&spec.eth_dst, path, "eth_dst")?,
        );
        let arp = arp_packet(spec, src, path)?;
        let l3 = 14 + 4 * spec.vlan.len();
        let payload = l3 + 28;
        check_room(payload, max_len, sig, &regions, path)?;
        let mut bytes = Vec::with_capacity(max_len);
        bytes.extend_from_slice(&dst);
        bytes.extend_from_slice(&src);
        bytes.resize(l3 - 2, 0);
        bytes.extend_from_slice(&[0x08, 0x06]);
        bytes.extend_from_slice(&arp);
        bytes.extend_from_slice(&payload_bytes(spec, max_len - payload, seed, path)?);
        let vlan_tci = patch_vlans(spec, &mut bytes);
        let layout = Layout {
            vlan_tci,
            l3,
            ipv6: false,
            l4: payload,
            l4_kind: L4Kind::Arp,
            payload,
            outer: None,
        };
        Hand::new(&spec.hand, &layout, path)?;
        Ok(Template::prepared(bytes, layout, sig, regions, None, None))
    }

    /// Finishes the template's own bytes and precomputes the sums that
    /// [`Template::finish_with`] starts from. Call again after changing `bytes`.
    pub fn prepare(&mut self) {
        if self.layout.l4_kind == L4Kind::Arp {
            self.prefix = prefix_sums(&self.bytes[self.layout.payload..]);
            return;
        }
        let mut b = std::mem::take(&mut self.bytes);
        let ly = self.layout.clone();
        self.finish_reference(&mut b);
        self.prefix = prefix_sums(&b[ly.payload..]);
        self.ip_base = if ly.ipv6 {
            0
        } else {
            // The header with its options: it ends where layer 4 starts.
            let mut h = b[ly.l3..ly.l4].to_vec();
            h[2..4].fill(0);
            h[10..12].fill(0);
            sum_be(&h)
        };
        if !ly.has_l4_csum() {
            self.l4_base = 0;
            self.bytes = b;
            return;
        }
        let mut l4h = b[ly.l4..ly.payload].to_vec();
        let cs = ly.l4_csum() - ly.l4;
        l4h[cs..cs + 2].fill(0);
        if ly.l4_kind == L4Kind::Udp {
            l4h[4..6].fill(0);
        }
        let pseudo = if ly.ipv6 {
            sum_be(&b[ly.l3 + 8..ly.l3 + 40]) + u64::from(b[ly.l3 + 6])
        } else if ly.l4_kind != L4Kind::Icmp {
            sum_be(&b[ly.l3 + 12..ly.l3 + 20]) + u64::from(b[ly.l3 + 9])
        } else {
            0
        };
        self.l4_base = pseudo + sum_be(&l4h);
        self.bytes = b;
    }

    /// Whether outer headers (a tunnel) wrap the frame.
    pub fn has_tunnel(&self) -> bool {
        self.tunnel.is_some()
    }

    /// Bytes after the inner packet (and so after the signature): a tunnel's inner FCS.
    #[inline(always)]
    pub fn trailer(&self) -> usize {
        self.tunnel.as_ref().map_or(0, crate::packet::tunnel::Tunnel::trailer)
    }

    /// The payload's prefix sums (see [`crate::packet::checksum::prefix_sums`]).
    pub(crate) fn payload_sums(&self) -> &[u64] {
        &self.prefix
    }

    /// Writes the length fields of a frame of `frame.len()` bytes cut from this template
    /// (not ARP) and returns the sums every frame of that length shares: the IPv4 header's
    /// (0 on IPv6, which has none) and the L4 checksum's without its payload.
    #[inline(always)]
    pub(crate) fn set_lengths(&self, frame: &mut [u8]) -> (u64, u64) {
        let len = frame.len();
        let ly = &self.layout;
        let l4_len = (len - ly.l4) as u64;
        let mut ip = 0;
        if ly.ipv6 {
            frame[ly.l3 + 4..ly.l3 + 6].copy_from_slice(&((len - ly.l3 - 40) as u16).to_be_bytes());
        } else {
            let tl = (len - ly.l3) as u16;
            frame[ly.l3 + 2..ly.l3 + 4].copy_from_slice(&tl.to_be_bytes());
            ip = self.ip_base + u64::from(tl);
        }
        let mut l4 = self.l4_base;
        if self.has_pseudo() {
            l4 += (l4_len >> 16) + (l4_len & 0xffff);
        }
        if ly.l4_kind == L4Kind::Udp {
            frame[ly.l4 + 4..ly.l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l4 += l4_len;
        }
        (ip, l4)
    }

    /// Whether the L4 checksum covers a pseudo header (all but ICMPv4).
    pub fn has_pseudo(&self) -> bool {
        self.layout.ipv6 || self.layout.l4_kind != L4Kind::Icmp
    }

    /// Sets the length fields and both checksums of a frame cut from this template, without
    /// reading the frame back: from the precomputed sums, the field engine's checksum deltas
    /// (`d_ip` for the IPv4 header, `d_l4` for the L4 checksum; see
    /// [`crate::packet::fields::FieldOp::apply`]) and the signature's values. Reading back bytes that
    /// were just written with small stores stalls on store forwarding; this path has no loads
    /// from the frame at all.
    #[inline]
    pub fn finish_with(
        &self,
        frame: &mut [u8],
        d_ip: u64,
        d_l4: u64,
        sig: Option<&crate::packet::signature::Signature>,
    ) {
        if self.layout.l4_kind == L4Kind::Arp {
            return;
        }
        let inner = frame.len() - self.trailer();
        self.finish_inner(&mut frame[..inner], d_ip, d_l4, sig);
        self.finish_outer(frame);
    }

    /// The hand fields and then the tunnel's outer headers (whose lengths and any GRE
    /// checksum cover the inner packet as sent).
    #[inline(always)]
    fn finish_outer(&self, frame: &mut [u8]) {
        if let Some(h) = &self.hand {
            h.apply(frame, &self.layout);
        }
        if let Some(t) = &self.tunnel {
            t.finish(frame);
        }
    }

    /// [`Template::finish_with`] of the inner packet: its lengths and both checksums.
    #[inline(always)]
    fn finish_inner(&self, frame: &mut [u8], d_ip: u64, d_l4: u64, sig: Option<&crate::packet::signature::Signature>) {
        let len = frame.len();
        let ly = &self.layout;
        let (ip, base) = self.set_lengths(frame);
        if !ly.ipv6 {
            let c = finish(ip + d_ip);
            frame[ly.l3 + 10..ly.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        if !ly.has_l4_csum() {
            return;
        }
        let mut sum = base + d_l4;
        let pl_len = len - ly.payload;
        match sig {
            Some(sg) => {
                let body = pl_len - SIG_LEN;
                sum += self.prefix[body];
                let s = crate::packet::signature::Signature::MAGIC_SUM + sg.word_sum();
                sum += crate::packet::checksum::at_offset(s, body % 2 == 1);
            }
            None => sum += self.prefix[pl_len],
        }
        let mut c = finish(sum);
        if c == 0 && ly.l4_kind == L4Kind::Udp {
            c = 0xffff;
        }
        let cs = ly.l4_csum();
        frame[cs..cs + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// Whether the template has header fields set by hand ([`crate::packet::hand`]).
    pub fn hand(&self) -> Option<&Hand> {
        self.hand.as_ref()
    }

    /// Smallest frame (without FCS) the template can be cut to.
    pub fn min_len(&self) -> usize {
        let sig_len = if self.sig { SIG_LEN } else { 0 };
        let fields = self.regions.iter().map(|(o, w)| o + w).max().unwrap_or(0);
        (self.layout.payload + fields + sig_len + self.trailer()).max(MIN_FRAME_NO_FCS)
    }

    /// Sets the IP/L4 length fields for `frame.len()` and computes the IPv4 header and L4
    /// checksums by reading the frame: the slow reference for [`Template::finish_with`], used
    /// on the template itself. The frame's payload must match the template's up to the
    /// signature, except in the field-engine regions.
    pub fn finish_reference(&self, frame: &mut [u8]) {
        if self.layout.l4_kind == L4Kind::Arp {
            return;
        }
        let inner = frame.len() - self.trailer();
        self.reference_inner(&mut frame[..inner]);
        self.finish_outer(frame);
    }

    /// [`Template::finish_reference`] of the inner packet.
    fn reference_inner(&self, frame: &mut [u8]) {
        let len = frame.len();
        let ly = &self.layout;
        let l4_len = len - ly.l4;
        if ly.ipv6 {
            frame[ly.l3 + 4..ly.l3 + 6].copy_from_slice(&((len - ly.l3 - 40) as u16).to_be_bytes());
        } else {
            frame[ly.l3 + 2..ly.l3 + 4].copy_from_slice(&((len - ly.l3) as u16).to_be_bytes());
            frame[ly.l3 + 10..ly.l3 + 12].copy_from_slice(&[0, 0]);
            let c = finish(sum_be(&frame[ly.l3..ly.l4]));
            frame[ly.l3 + 10..ly.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        if ly.has_l4_csum() {
            if ly.l4_kind == L4Kind::Udp {
                frame[ly.l4 + 4..ly.l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            }
            let cs = ly.l4_csum();
            frame[cs..cs + 2].copy_from_slice(&[0, 0]);
            let proto = u64::from(frame[ly.l3 + if ly.ipv6 { 6 } else { 9 }]);
            let mut c = finish(crate::packet::layout::l4_sum(frame, ly, proto));
            if c == 0 && ly.l4_kind == L4Kind::Udp {
                c = 0xffff;
            }
            frame[cs..cs + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
}

impl Template {
    /// Rewrites the signature's TX timestamp of a finished frame and fixes the L4 checksum
    /// incrementally (RFC 1624, eqn. 3), so the engine can stamp a frame just before it
    /// leaves. No-op without a signature.
    #[inline]
    pub fn patch_tx_ns(&self, frame: &mut [u8], tx_ns: u64) {
        if !self.sig {
            return;
        }
        let inner = frame.len() - self.trailer();
        self.patch_inner(&mut frame[..inner], tx_ns);
        if let Some(t) = &self.tunnel {
            t.refresh_fcs(frame);
        }
    }

    /// [`Template::patch_tx_ns`] of the inner packet.
    #[inline(always)]
    fn patch_inner(&self, frame: &mut [u8], tx_ns: u64) {
        let ly = &self.layout;
        let at = frame.len() - 8;
        if !ly.has_l4_csum() || self.hand.as_ref().is_some_and(Hand::fixed_l4_checksum) {
            frame[at..].copy_from_slice(&tx_ns.to_be_bytes());
            return;
        }
        let udp = ly.l4_kind == L4Kind::Udp;
        crate::packet::checksum::replace_in(frame, ly.payload, at, &tx_ns.to_be_bytes(), ly.l4_csum(), udp);
    }
}
