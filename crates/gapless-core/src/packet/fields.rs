//! The field engine: header fields and payload bytes that vary per packet.
//!
//! Each op writes a value into a big-endian window of the frame through a mask, so a 12-bit
//! VLAN id, a 6-bit DSCP and a 48-bit MAC are the same operation. Checksums and lengths are
//! fixed afterwards by [`crate::packet::template::Template::finish_with`].

use rand::Rng;
use std::net::IpAddr;

use crate::packet::template::{parse_mac, Layout};
use crate::spec::error::ProfileError;
use crate::spec::{FieldSpec, FieldValue, L4Kind};

/// Where a field lives in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldTarget {
    pub offset: usize,
    /// Bytes read and written (1..=8).
    pub nbytes: usize,
    /// Bits of the window the field owns.
    pub mask: u64,
    /// Left shift of the value inside the window.
    pub shift: u32,
}

impl FieldTarget {
    fn whole(offset: usize, nbytes: usize) -> FieldTarget {
        let mask = if nbytes == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * nbytes)) - 1
        };
        FieldTarget {
            offset,
            nbytes,
            mask,
            shift: 0,
        }
    }

    /// Largest value the field holds.
    pub fn max_value(&self) -> u64 {
        self.mask >> self.shift
    }

    /// The window `window` with the field set to `value` and the other bits kept.
    #[inline(always)]
    pub fn merge(&self, window: u64, value: u64) -> u64 {
        (window & !self.mask) | ((value << self.shift) & self.mask)
    }

    /// Stores the whole window (no read).
    #[inline(always)]
    pub fn write_window(&self, frame: &mut [u8], x: u64) {
        let at = self.offset;
        match self.nbytes {
            1 => frame[at] = x as u8,
            2 => frame[at..at + 2].copy_from_slice(&(x as u16).to_be_bytes()),
            4 => frame[at..at + 4].copy_from_slice(&(x as u32).to_be_bytes()),
            8 => frame[at..at + 8].copy_from_slice(&x.to_be_bytes()),
            n => frame[at..at + n].copy_from_slice(&x.to_be_bytes()[8 - n..]),
        }
    }

    #[inline(always)]
    pub fn read_window(&self, frame: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        b[8 - self.nbytes..].copy_from_slice(&frame[self.offset..self.offset + self.nbytes]);
        u64::from_be_bytes(b)
    }
}

/// How the value changes from packet to packet.
#[derive(Debug, Clone, PartialEq)]
pub enum Gen {
    /// Cycles through the values.
    List(Vec<u64>),
    /// from, from+step, ... wrapping inside [from, to].
    Inc { from: u64, to: u64, step: u64 },
    /// to, to-step, ... wrapping inside [from, to].
    Dec { from: u64, to: u64, step: u64 },
    /// Uniform in [from, to].
    Random { from: u64, to: u64 },
}

/// One compiled op.
#[derive(Debug, Clone)]
pub struct FieldOp {
    pub name: String,
    pub target: FieldTarget,
    pub gen: Gen,
    /// Set by [`FieldOp::bind`]: the template's bytes in the op's window, and the complement
    /// of their checksum contribution.
    pub tmpl_window: u64,
    pub neg_old: u64,
    /// Which checksums the op's window is part of.
    pub in_ip: bool,
    pub in_l4: bool,
    /// Another op writes the same bytes earlier: read the frame instead of the template.
    pub rmw: bool,
    /// Set by [`FieldOp::bind`]: a straight-line write for the common shapes.
    pub fast: Fast,
}

/// How [`FieldOp::apply`] writes the value: a whole 2- or 4-byte field at an even offset
/// that no earlier op touches (ports, IPv4 addresses, VLAN TCI words, ...) needs neither the
/// template's window nor a mask, and its checksum contribution is the value's own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    U16(usize),
    U32(usize),
    /// Any other field: the masked window.
    Window,
}

/// Checksum contribution of a window's `n` bytes (big endian in `x`) that start at an even
/// (`odd == false`) or odd offset of the checksummed region. Registers only.
#[inline(always)]
pub fn window_sum(x: u64, n: usize, odd: bool) -> u64 {
    // Words of the n-byte big-endian value at an even offset (an odd n is padded on the right).
    let even = match n {
        1 => x << 8,
        2 => x & 0xffff,
        4 => (x >> 16 & 0xffff) + (x & 0xffff),
        8 => (x >> 48) + (x >> 32 & 0xffff) + (x >> 16 & 0xffff) + (x & 0xffff),
        _ => {
            let y = x << (8 * (8 - n)); // left-aligned: the first byte is the top byte
            (y >> 48) + (y >> 32 & 0xffff) + (y >> 16 & 0xffff) + (y & 0xffff)
        }
    };
    crate::packet::checksum::at_offset(even, odd)
}

/// Uniform in [from, to], unbiased, without a division per draw (Lemire's multiply-shift
/// with rejection: the division happens only for the rare low product that may be biased).
#[inline(always)]
pub fn uniform<R: Rng + ?Sized>(rng: &mut R, from: u64, to: u64) -> u64 {
    let n = (to - from).wrapping_add(1);
    if n == 0 {
        return rng.next_u64();
    }
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(n);
        let lo = m as u64;
        if lo < n && lo < n.wrapping_neg() % n {
            continue;
        }
        return from + (m >> 64) as u64;
    }
}

impl FieldOp {
    /// An op not yet bound to a template (see [`FieldOp::bind`]).
    pub fn new(name: &str, target: FieldTarget, gen: Gen) -> FieldOp {
        FieldOp {
            name: name.to_string(),
            target,
            gen,
            tmpl_window: 0,
            neg_old: 0,
            in_ip: false,
            in_l4: false,
            rmw: false,
            fast: Fast::Window,
        }
    }

    /// The value for the stream's `k`-th packet (k from 0). Random ops draw from `rng`.
    /// Stateless (a division per call); the send loop uses [`FieldOp::next`] instead.
    #[inline]
    pub fn value<R: Rng + ?Sized>(&self, k: u64, rng: &mut R) -> u64 {
        match &self.gen {
            Gen::List(v) => v[(k % v.len() as u64) as usize],
            Gen::Inc { from, to, step } => {
                let n = u128::from(to - from) + 1;
                from + ((u128::from(k) * u128::from(*step)) % n) as u64
            }
            Gen::Dec { from, to, step } => {
                let n = u128::from(to - from) + 1;
                to - ((u128::from(k) * u128::from(*step)) % n) as u64
            }
            Gen::Random { from, to } => uniform(rng, *from, *to),
        }
    }

    /// The value for the next packet, given `state` (start it at 0): the same sequence as
    /// [`FieldOp::value`] for k = 0, 1, 2, ..., without a division per packet.
    #[inline(always)]
    pub fn next<R: Rng + ?Sized>(&self, state: &mut u64, rng: &mut R) -> u64 {
        match &self.gen {
            Gen::List(v) => {
                let x = v[*state as usize];
                *state += 1;
                if *state as usize == v.len() {
                    *state = 0;
                }
                x
            }
            Gen::Inc { from, to, step } | Gen::Dec { from, to, step } => {
                // `state` is the offset into the range [from, to], which holds n = to - from + 1.
                let off = *state;
                let span = to - from; // n - 1
                                      // A step inside the range needs no division (the usual case).
                let s = if span == u64::MAX || *step <= span {
                    *step
                } else {
                    step % (span + 1)
                };
                // off + s wraps modulo n: both are < n, so one subtraction suffices.
                let (sum, carry) = off.overflowing_add(s);
                *state = if span == u64::MAX {
                    sum
                } else if carry || sum > span {
                    sum.wrapping_sub(span + 1)
                } else {
                    sum
                };
                if matches!(self.gen, Gen::Inc { .. }) {
                    from + off
                } else {
                    to - off
                }
            }
            Gen::Random { from, to } => uniform(rng, *from, *to),
        }
    }

    /// Binds the op to its template: records the template's bytes in the window, which
    /// checksums cover it, and whether an earlier op writes the same bytes (`earlier`).
    pub fn bind(&mut self, t: &crate::packet::template::Template, earlier: &[FieldOp]) {
        let tg = self.target;
        self.tmpl_window = tg.read_window(&t.bytes);
        let odd = tg.offset % 2 == 1;
        self.neg_old = u64::from(!crate::packet::checksum::fold(window_sum(
            self.tmpl_window,
            tg.nbytes,
            odd,
        )));
        let ly = &t.layout;
        let end = tg.offset + tg.nbytes;
        self.in_ip = !ly.ipv6 && tg.offset >= ly.l3 && end <= ly.l4;
        let (p0, p1) = if ly.ipv6 {
            (ly.l3 + 8, ly.l3 + 40)
        } else {
            (ly.l3 + 12, ly.l3 + 20)
        };
        let in_pseudo = t.has_pseudo() && tg.offset >= p0 && end <= p1;
        self.in_l4 = in_pseudo || tg.offset >= ly.l4;
        self.rmw = earlier
            .iter()
            .any(|o| o.target.offset < end && tg.offset < o.target.offset + o.target.nbytes);
        let whole = tg.shift == 0 && tg.mask == FieldTarget::whole(tg.offset, tg.nbytes).mask;
        self.fast = match tg.nbytes {
            2 if whole && !odd && !self.rmw => Fast::U16(tg.offset),
            4 if whole && !odd && !self.rmw => Fast::U32(tg.offset),
            _ => Fast::Window,
        };
    }

    /// Writes the next value into `frame` and returns its checksum delta (add it to the
    /// checksums that `in_ip` / `in_l4` say the window is part of).
    #[inline(always)]
    pub fn apply<R: Rng + ?Sized>(&self, frame: &mut [u8], state: &mut u64, rng: &mut R) -> u64 {
        let v = self.next(state, rng);
        match self.fast {
            Fast::U16(at) => {
                let x = v as u16;
                frame[at..at + 2].copy_from_slice(&x.to_be_bytes());
                return u64::from(x) + self.neg_old;
            }
            Fast::U32(at) => {
                let x = v as u32;
                frame[at..at + 4].copy_from_slice(&x.to_be_bytes());
                return u64::from(x >> 16) + u64::from(x & 0xffff) + self.neg_old;
            }
            Fast::Window => {}
        }
        let tg = &self.target;
        let odd = tg.offset % 2 == 1;
        if self.rmw {
            let old = tg.read_window(frame);
            let x = tg.merge(old, v);
            tg.write_window(frame, x);
            return window_sum(x, tg.nbytes, odd)
                + u64::from(!crate::packet::checksum::fold(window_sum(old, tg.nbytes, odd)));
        }
        let x = tg.merge(self.tmpl_window, v);
        tg.write_window(frame, x);
        window_sum(x, tg.nbytes, odd) + self.neg_old
    }
}

enum Kind {
    Mac,
    Ip { v6: bool },
    Num,
}

fn parse_value(v: &FieldValue, kind: &Kind, path: &str) -> Result<u64, ProfileError> {
    let s = match v {
        FieldValue::Int(i) => return Ok(*i),
        FieldValue::Str(s) => s.trim(),
    };
    let fail = |what: &str, fix: &str| ProfileError::invalid(path, format!("{s:?} is not {what}"), fix);
    match kind {
        Kind::Mac => parse_mac(s)
            .map(|m| m.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b)))
            .ok_or_else(|| fail("a MAC address", "write six hex pairs, e.g. \"02:00:00:00:00:01\"")),
        Kind::Ip { v6 } => match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) if !v6 => Ok(u64::from(u32::from(a))),
            // The engine varies the low 64 bits of an IPv6 address (the interface id).
            Ok(IpAddr::V6(a)) if *v6 => Ok(u128::from(a) as u64),
            _ => Err(fail(
                if *v6 { "an IPv6 address" } else { "an IPv4 address" },
                "use the template's IP version",
            )),
        },
        Kind::Num => {
            let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                u64::from_str_radix(h, 16)
            } else {
                s.parse::<u64>()
            };
            r.map_err(|_| fail("a number", "write a decimal or 0x-hex number"))
        }
    }
}

/// Compiles one `[[stream.field]]`. `payload_room` is the smallest payload before the
/// signature, which payload ops must fit into. Returns the op and, for IPv6 address ops, the
/// high 64 bits to set in the template.
pub fn compile(
    spec: &FieldSpec,
    layout: &Layout,
    l4: L4Kind,
    path: &str,
) -> Result<(FieldOp, Option<u64>), ProfileError> {
    let (target, kind) = field_target(spec, layout, l4, path)?;
    let gen = field_gen(spec, &kind, target.max_value(), path)?;
    let high = ipv6_high(spec, layout.ipv6);
    Ok((FieldOp::new(&spec.field, target, gen), high))
}

/// Where in the frame the field is, and how its values are written.
fn field_target(
    spec: &FieldSpec,
    layout: &Layout,
    l4: L4Kind,
    path: &str,
) -> Result<(FieldTarget, Kind), ProfileError> {
    let v6 = layout.ipv6;
    let vlan_tci = |spec: &FieldSpec| -> Result<usize, ProfileError> {
        let i = spec.vlan.unwrap_or(0);
        layout.vlan_tci.get(i).copied().ok_or_else(|| {
            ProfileError::invalid(
                format!("{path}.vlan"),
                format!("the template has no VLAN tag {i}"),
                "add a [[stream.template.vlan]] tag, or pick an existing one (0 = outer)",
            )
        })
    };
    let arp = l4 == L4Kind::Arp;
    if let Some(t) = outer_target(spec, layout, path) {
        return t;
    }
    if let Some(t) = bit_target(&spec.field, layout, l4, path) {
        return t;
    }
    let (target, kind) = match spec.field.as_str() {
        // An ARP template (RFC 826 offsets from the ARP header).
        "ip_src" if arp => (FieldTarget::whole(layout.l3 + 14, 4), Kind::Ip { v6: false }),
        "ip_dst" if arp => (FieldTarget::whole(layout.l3 + 24, 4), Kind::Ip { v6: false }),
        "arp_op" if arp => (FieldTarget::whole(layout.l3 + 6, 2), Kind::Num),
        "arp_sha" if arp => (FieldTarget::whole(layout.l3 + 8, 6), Kind::Mac),
        "arp_tha" if arp => (FieldTarget::whole(layout.l3 + 18, 6), Kind::Mac),
        "arp_op" | "arp_sha" | "arp_tha" => {
            return Err(ProfileError::invalid(
                format!("{path}.field"),
                format!("{} on a {l4:?} template", spec.field),
                "use an ARP template (l4 = \"arp\") for ARP's fields",
            ));
        }
        "tos" | "dscp" | "ttl" | "src_port" | "dst_port" | "icmp_id" | "icmp_seq" if arp => {
            return Err(ProfileError::invalid(
                format!("{path}.field"),
                format!("{} on an ARP template", spec.field),
                "an ARP packet has mac_src, mac_dst, vlan_id, vlan_pcp, ip_src, ip_dst, arp_op, arp_sha, arp_tha and payload fields",
            ));
        }
        "mac_dst" => (FieldTarget::whole(0, 6), Kind::Mac),
        "mac_src" => (FieldTarget::whole(6, 6), Kind::Mac),
        "vlan_id" => (
            FieldTarget {
                offset: vlan_tci(spec)?,
                nbytes: 2,
                mask: 0x0fff,
                shift: 0,
            },
            Kind::Num,
        ),
        "vlan_pcp" => (
            FieldTarget {
                offset: vlan_tci(spec)?,
                nbytes: 2,
                mask: 0xe000,
                shift: 13,
            },
            Kind::Num,
        ),
        "ip_src" if v6 => (FieldTarget::whole(layout.l3 + 16, 8), Kind::Ip { v6 }),
        "ip_dst" if v6 => (FieldTarget::whole(layout.l3 + 32, 8), Kind::Ip { v6 }),
        "ip_src" => (FieldTarget::whole(layout.l3 + 12, 4), Kind::Ip { v6 }),
        "ip_dst" => (FieldTarget::whole(layout.l3 + 16, 4), Kind::Ip { v6 }),
        "tos" if v6 => (
            FieldTarget {
                offset: layout.l3,
                nbytes: 4,
                mask: 0x0ff0_0000,
                shift: 20,
            },
            Kind::Num,
        ),
        "dscp" if v6 => (
            FieldTarget {
                offset: layout.l3,
                nbytes: 4,
                mask: 0x0fc0_0000,
                shift: 22,
            },
            Kind::Num,
        ),
        "tos" => (FieldTarget::whole(layout.l3 + 1, 1), Kind::Num),
        "dscp" => (
            FieldTarget {
                offset: layout.l3 + 1,
                nbytes: 1,
                mask: 0xfc,
                shift: 2,
            },
            Kind::Num,
        ),
        "ttl" if v6 => (FieldTarget::whole(layout.l3 + 7, 1), Kind::Num),
        "ttl" => (FieldTarget::whole(layout.l3 + 8, 1), Kind::Num),
        "src_port" | "dst_port" if l4 == L4Kind::None => {
            return Err(ProfileError::invalid(
                format!("{path}.field"),
                format!("{} on a template without a layer 4 header (l4 = \"none\")", spec.field),
                "use a udp or tcp template for ports",
            ));
        }
        "src_port" | "dst_port" if l4 == L4Kind::Icmp => {
            return Err(ProfileError::invalid(
                format!("{path}.field"),
                format!("{} on an ICMP template", spec.field),
                "use a udp or tcp template for ports",
            ));
        }
        "src_port" => (FieldTarget::whole(layout.l4, 2), Kind::Num),
        "dst_port" => (FieldTarget::whole(layout.l4 + 2, 2), Kind::Num),
        "icmp_id" | "icmp_seq" if l4 != L4Kind::Icmp => {
            return Err(ProfileError::invalid(
                format!("{path}.field"),
                format!("{} on a {l4:?} template", spec.field),
                "use an icmp template (l4 = \"icmp\") for the echo's identifier and sequence number",
            ));
        }
        "icmp_id" => (FieldTarget::whole(layout.l4 + 4, 2), Kind::Num),
        "icmp_seq" => (FieldTarget::whole(layout.l4 + 6, 2), Kind::Num),
        "payload" => {
            let off = spec.offset.ok_or_else(|| {
                ProfileError::invalid(
                    format!("{path}.offset"),
                    "a payload field needs `offset`",
                    "add offset = N (bytes into the L4 payload)",
                )
            })?;
            let w = spec.width.unwrap_or(1);
            if ![1, 2, 4, 8].contains(&w) {
                return Err(ProfileError::invalid(
                    format!("{path}.width"),
                    format!("width {w} is not 1, 2, 4 or 8"),
                    "use width = 1, 2, 4 or 8",
                ));
            }
            (FieldTarget::whole(layout.payload + off, w), Kind::Num)
        }
        other => return Err(ProfileError::invalid(
            format!("{path}.field"),
            format!("unknown field {other:?}"),
            "use mac_src, mac_dst, vlan_id, vlan_pcp, ip_src, ip_dst, tos, dscp, ecn, ttl, ip_id, df, flow_label, src_port, dst_port, tcp_fin, tcp_syn, tcp_rst, tcp_psh, tcp_ack, tcp_urg, tcp_ece, tcp_cwr, icmp_id, icmp_seq, arp_op, arp_sha, arp_tha or payload (or a tunnel's outer_ip_src, outer_ip_dst, outer_ttl, outer_src_port, outer_dst_port, vni, teid, gre_key, mpls_label)",
        )),
    };
    if spec.field != "payload" && (spec.offset.is_some() || spec.width.is_some()) {
        return Err(ProfileError::invalid(
            format!("{path}.offset"),
            "offset/width apply to payload fields only",
            "remove offset and width",
        ));
    }
    Ok((target, kind))
}

/// The TCP flag fields and their bit in the flags byte (offset 13 of the TCP header).
const TCP_FLAGS: [(&str, u64); 8] = [
    ("tcp_fin", 0x01),
    ("tcp_syn", 0x02),
    ("tcp_rst", 0x04),
    ("tcp_psh", 0x08),
    ("tcp_ack", 0x10),
    ("tcp_urg", 0x20),
    ("tcp_ece", 0x40),
    ("tcp_cwr", 0x80),
];

/// Where a field of part of an IP or TCP header is (None: `name` is none of these): ECN,
/// IPv4's identification and don't-fragment bit, IPv6's flow label, and each TCP flag.
/// Each is a masked window, so the checksums follow as for any other field.
fn bit_target(
    name: &str,
    layout: &Layout,
    l4: L4Kind,
    path: &str,
) -> Option<Result<(FieldTarget, Kind), ProfileError>> {
    let (l3, v6) = (layout.l3, layout.ipv6);
    let masked = |offset, nbytes, mask, shift| {
        Ok((
            FieldTarget {
                offset,
                nbytes,
                mask,
                shift,
            },
            Kind::Num,
        ))
    };
    let refuse = |what: &str, fix: &str| {
        Err(ProfileError::invalid(
            format!("{path}.field"),
            format!("{name} on {what}"),
            fix.to_string(),
        ))
    };
    let ip_field = matches!(name, "ecn" | "ip_id" | "df" | "flow_label");
    let tcp_bit = TCP_FLAGS.iter().find(|(n, _)| *n == name).map(|&(_, bit)| bit);
    if !ip_field && tcp_bit.is_none() {
        return None;
    }
    Some(match name {
        _ if l4 == L4Kind::Arp => refuse("an ARP template", "use a udp, tcp or icmp template for IP fields"),
        "ecn" if v6 => masked(l3, 4, 0x0030_0000, 20),
        "ecn" => masked(l3 + 1, 1, 0x03, 0),
        "ip_id" | "df" if v6 => refuse(
            "an IPv6 template",
            "IPv6 has no identification or fragment flags; use an IPv4 template",
        ),
        "ip_id" => Ok((FieldTarget::whole(l3 + 4, 2), Kind::Num)),
        "df" => masked(l3 + 6, 2, 0x4000, 14),
        "flow_label" if !v6 => refuse("an IPv4 template", "the flow label is IPv6's; use an IPv6 template"),
        "flow_label" => masked(l3, 4, 0x000f_ffff, 0),
        _ if l4 != L4Kind::Tcp => refuse(
            &format!("a {l4:?} template"),
            "use a tcp template (l4 = \"tcp\") for TCP's flags",
        ),
        _ => masked(
            layout.l4 + 13,
            1,
            tcp_bit.unwrap_or(0),
            tcp_bit.unwrap_or(1).trailing_zeros(),
        ),
    })
}

/// The names of a tunnel's outer fields.
const OUTER: [&str; 9] = [
    "outer_ip_src",
    "outer_ip_dst",
    "outer_ttl",
    "outer_src_port",
    "outer_dst_port",
    "vni",
    "teid",
    "gre_key",
    "mpls_label",
];

/// Where a tunnel's outer field is (None: `spec` names no outer field). The outer headers
/// lie outside the inner packet's checksums; [`crate::packet::tunnel::Tunnel::finish`]
/// computes the outer ones from the frame.
fn outer_target(spec: &FieldSpec, layout: &Layout, path: &str) -> Option<Result<(FieldTarget, Kind), ProfileError>> {
    let name = spec.field.as_str();
    if !OUTER.contains(&name) {
        return None;
    }
    let missing = |what: &str| {
        ProfileError::invalid(
            format!("{path}.field"),
            format!("{name} needs {what}, which this stream's template has not"),
            "give the template a tunnel with that header ([stream.template.tunnel]), or vary another field",
        )
    };
    let Some(t) = &layout.outer else {
        return Some(Err(missing("a tunnel")));
    };
    let ip = t.outer_l3;
    let label = spec.label.unwrap_or(0);
    let got = match name {
        "outer_ip_src" | "outer_ip_dst" => ip.map(|(at, v6)| {
            let dst = name == "outer_ip_dst";
            let t = match v6 {
                true => FieldTarget::whole(at + if dst { 32 } else { 16 }, 8),
                false => FieldTarget::whole(at + if dst { 16 } else { 12 }, 4),
            };
            (t, Kind::Ip { v6 })
        }),
        "outer_ttl" => ip.map(|(at, v6)| (FieldTarget::whole(at + if v6 { 7 } else { 8 }, 1), Kind::Num)),
        "outer_src_port" => t.udp.map(|u| (FieldTarget::whole(u, 2), Kind::Num)),
        "outer_dst_port" => t.udp.map(|u| (FieldTarget::whole(u + 2, 2), Kind::Num)),
        "vni" => t.vni.map(|at| (FieldTarget::whole(at, 3), Kind::Num)),
        "teid" => t.gtp.map(|g| (FieldTarget::whole(g + 4, 4), Kind::Num)),
        "gre_key" => t.gre_key.map(|at| (FieldTarget::whole(at, 4), Kind::Num)),
        _ => t.labels.get(label).map(|&at| {
            let w = FieldTarget {
                offset: at,
                nbytes: 4,
                mask: 0xffff_f000,
                shift: 12,
            };
            (w, Kind::Num)
        }),
    };
    Some(got.ok_or_else(|| {
        missing(match name {
            "mpls_label" => "that MPLS label",
            "outer_src_port" | "outer_dst_port" => "an outer UDP header (vxlan, gtpv1)",
            "gre_key" => "a GRE key",
            "vni" => "a VXLAN header",
            "teid" => "a GTP-U header",
            _ => "an outer IP header",
        })
    }))
}

/// The op's values (list, inc, dec, random), each checked against the field's width.
fn field_gen(spec: &FieldSpec, kind: &Kind, maxv: u64, path: &str) -> Result<Gen, ProfileError> {
    let val = |v: &FieldValue, key: &str| -> Result<u64, ProfileError> {
        let x = parse_value(v, kind, &format!("{path}.{key}"))?;
        if x > maxv {
            return Err(ProfileError::invalid(
                format!("{path}.{key}"),
                format!("{x} does not fit the {} field (max {maxv})", spec.field),
                format!("use a value <= {maxv}"),
            ));
        }
        Ok(x)
    };
    let range = || -> Result<(u64, u64), ProfileError> {
        let from = spec.from.as_ref().ok_or_else(|| {
            ProfileError::invalid(
                format!("{path}.from"),
                format!("op {:?} needs `from`", spec.op),
                "add from = ... and to = ...",
            )
        })?;
        let to = spec.to.as_ref().ok_or_else(|| {
            ProfileError::invalid(
                format!("{path}.to"),
                format!("op {:?} needs `to`", spec.op),
                "add from = ... and to = ...",
            )
        })?;
        let (a, b) = (val(from, "from")?, val(to, "to")?);
        if a > b {
            return Err(ProfileError::invalid(
                format!("{path}.to"),
                format!("`to` ({b}) is below `from` ({a})"),
                "give from <= to (dec counts down from `to`)",
            ));
        }
        Ok((a, b))
    };
    let step = spec.step.unwrap_or(1);
    let gen = match spec.op.as_str() {
        "list" => {
            let vals = spec.values.as_ref().filter(|v| !v.is_empty()).ok_or_else(|| {
                ProfileError::invalid(
                    format!("{path}.values"),
                    "a list op needs a non-empty `values`",
                    "add values = [...]",
                )
            })?;
            Gen::List(vals.iter().map(|v| val(v, "values")).collect::<Result<_, _>>()?)
        }
        "inc" | "dec" => {
            let (from, to) = range()?;
            if step == 0 {
                return Err(ProfileError::invalid(
                    format!("{path}.step"),
                    "step is 0",
                    "use step >= 1",
                ));
            }
            if spec.op == "inc" {
                Gen::Inc { from, to, step }
            } else {
                Gen::Dec { from, to, step }
            }
        }
        "random" => {
            let (from, to) = range()?;
            Gen::Random { from, to }
        }
        other => {
            return Err(ProfileError::invalid(
                format!("{path}.op"),
                format!("unknown op {other:?}"),
                "use list, inc, dec or random",
            ))
        }
    };
    Ok(gen)
}

/// IPv6 ops vary the low 64 bits; the high 64 come from the first value.
fn ipv6_high(spec: &FieldSpec, v6: bool) -> Option<u64> {
    if v6 && spec.field.starts_with("ip_") {
        let first = spec.values.as_ref().and_then(|v| v.first()).or(spec.from.as_ref());
        match first {
            Some(FieldValue::Str(s)) => s
                .parse::<std::net::Ipv6Addr>()
                .ok()
                .map(|a| (u128::from(a) >> 64) as u64),
            _ => None,
        }
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn masked_write_keeps_neighbour_bits() {
        let mut f = [0xffu8, 0xff];
        let t = FieldTarget {
            offset: 0,
            nbytes: 2,
            mask: 0x0fff,
            shift: 0,
        };
        let w = t.merge(t.read_window(&f), 0x123);
        t.write_window(&mut f, w);
        assert_eq!(f, [0xf1, 0x23]);
        let p = FieldTarget {
            offset: 0,
            nbytes: 2,
            mask: 0xe000,
            shift: 13,
        };
        let w = p.merge(p.read_window(&f), 5);
        p.write_window(&mut f, w);
        assert_eq!(f, [0xb1, 0x23]);
        let mac = FieldTarget::whole(1, 6);
        let mut m = [0u8; 8];
        mac.write_window(&mut m, mac.merge(0, 0x0211_2233_4455));
        assert_eq!(m, [0, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0]);
        assert_eq!(mac.read_window(&m), 0x0211_2233_4455);
    }

    #[test]
    fn inc_dec_list_sequences() {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(1);
        let op = |gen| FieldOp::new("x", FieldTarget::whole(0, 2), gen);
        let inc = op(Gen::Inc {
            from: 10,
            to: 14,
            step: 2,
        });
        let v: Vec<u64> = (0..6).map(|k| inc.value(k, &mut r)).collect();
        assert_eq!(v, [10, 12, 14, 11, 13, 10]);
        let dec = op(Gen::Dec {
            from: 1,
            to: 3,
            step: 1,
        });
        let v: Vec<u64> = (0..5).map(|k| dec.value(k, &mut r)).collect();
        assert_eq!(v, [3, 2, 1, 3, 2]);
        let list = op(Gen::List(vec![7, 9]));
        let v: Vec<u64> = (0..3).map(|k| list.value(k, &mut r)).collect();
        assert_eq!(v, [7, 9, 7]);
        let full = op(Gen::Inc {
            from: 0,
            to: u64::MAX,
            step: 1,
        });
        assert_eq!(full.value(u64::MAX, &mut r), u64::MAX);
    }

    #[test]
    fn window_sum_matches_the_byte_sum() {
        use crate::packet::checksum::{fold, sum_at};
        let x = 0x0123_4567_89ab_cdefu64;
        for n in 1..=8usize {
            let v = if n == 8 { x } else { x & ((1u64 << (8 * n)) - 1) };
            let bytes = &v.to_be_bytes()[8 - n..];
            for odd in [false, true] {
                assert_eq!(fold(window_sum(v, n, odd)), fold(sum_at(bytes, odd)), "n={n} odd={odd}");
            }
        }
    }

    #[test]
    fn stateful_next_matches_stateless_value() {
        let gens = [
            Gen::Inc {
                from: 10,
                to: 14,
                step: 2,
            },
            Gen::Inc {
                from: 0,
                to: 6,
                step: 13,
            },
            Gen::Dec {
                from: 3,
                to: 9,
                step: 4,
            },
            Gen::Inc {
                from: u64::MAX - 3,
                to: u64::MAX,
                step: 3,
            },
            Gen::Dec {
                from: 0,
                to: u64::MAX,
                step: u64::MAX,
            },
            Gen::Inc {
                from: 0,
                to: u64::MAX,
                step: 5,
            },
            Gen::Inc {
                from: 1,
                to: u64::MAX,
                step: u64::MAX - 1,
            },
            Gen::List(vec![4, 5, 6]),
        ];
        let mut r = Xoshiro256PlusPlus::seed_from_u64(1);
        for gen in gens {
            let op = FieldOp::new("x", FieldTarget::whole(0, 8), gen.clone());
            let mut st = 0;
            for k in 0..50 {
                assert_eq!(op.next(&mut st, &mut r), op.value(k, &mut r), "{gen:?} k={k}");
            }
        }
    }

    #[test]
    fn random_stays_in_range_and_covers_it() {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(7);
        let op = FieldOp::new("x", FieldTarget::whole(0, 2), Gen::Random { from: 100, to: 107 });
        let mut seen = [false; 8];
        for k in 0..10_000 {
            let v = op.value(k, &mut r);
            assert!((100..=107).contains(&v), "{v}");
            seen[(v - 100) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn uniform_is_even_over_odd_ranges_and_takes_the_whole_u64_range() {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(11);
        assert_eq!(uniform(&mut r, 5, 5), 5, "a one-value range");
        let full: Vec<u64> = (0..4).map(|_| uniform(&mut r, 0, u64::MAX)).collect();
        assert!(
            full.iter().any(|&v| v > u64::MAX / 2),
            "expected the top half reached: {full:?}"
        );
        // A range of 2^63 + 1 values rejects almost half the draws: still in range and even.
        let (from, to) = (3u64, 3 + (1u64 << 63));
        let mut hi = 0;
        for _ in 0..20_000 {
            let v = uniform(&mut r, from, to);
            assert!((from..=to).contains(&v), "{v} outside [{from}, {to}]");
            hi += u32::from(v - from >= 1 << 62);
        }
        assert!(
            (9_500..10_500).contains(&hi),
            "expected ~half of 20000 in the top half, got {hi}"
        );
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[uniform(&mut r, 7, 9) as usize - 7] += 1;
        }
        for c in counts {
            assert!(
                (9_500..10_500).contains(&c),
                "expected ~10000 of each of 3 values, got {counts:?}"
            );
        }
    }
}
