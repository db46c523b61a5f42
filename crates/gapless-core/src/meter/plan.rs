//! A classifier built from the plan: the streams whose frames carry no signature (frames too
//! small for it, or `signature = false`) are known by the headers their templates set: the
//! outer VLAN id, the IP addresses, the protocol and the TCP/UDP ports. A header a field op
//! varies matches any value. Such a stream is counted (frames, bytes, rate, gaps) but has no
//! sequence numbers or TX times: no loss by sequence, reordering or latency.
//!
//! A signed stream whose headers were set by hand so that a parser looks for the signature in
//! the wrong place (a length, a version, a protocol: [`crate::packet::hand`]) is known the
//! same way, and its signature is read at the frame's very end, where the template put it:
//! such a stream keeps every figure.

use crate::packet::fields::FieldOp;
use crate::packet::template::Template;
use crate::spec::L4Kind;

/// The parts of a key, in order.
pub const PARTS: [&str; 6] = ["vlan", "ip_src", "ip_dst", "protocol", "src_port", "dst_port"];

/// A frame's key: outer VLAN id (`NO_TAG` without one), source and destination address
/// (IPv4 as its 32-bit value), protocol (IPv6: next header), and TCP/UDP ports (0 for any
/// other protocol, or a fragment).
pub type Key = [u128; 6];

/// The VLAN part of an untagged frame.
pub const NO_TAG: u128 = 0x1_0000;

/// What a stream's frames look like: each part's value, or `None` where any value matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanMatch {
    pub parts: [Option<u128>; 6],
    /// The frames carry the signature at their very end, where no parser finds it: their
    /// headers were set by hand ([`crate::packet::hand`]) and mislead one.
    pub sig_at_end: bool,
}

impl PlanMatch {
    /// Whether a frame with `key` matches.
    #[inline]
    pub fn matches(&self, key: &Key) -> bool {
        self.parts.iter().zip(key).all(|(p, k)| p.is_none_or(|v| v == *k))
    }

    /// Whether some frame matches both (the meter could not tell the two apart).
    pub fn overlaps(&self, other: &PlanMatch) -> bool {
        self.parts
            .iter()
            .zip(&other.parts)
            .all(|(a, b)| a.is_none() || b.is_none() || a == b)
    }

    /// The match of a template's frames under its field ops; `None` for a tunnel or ARP
    /// template, whose frames the plan does not read.
    pub fn of(t: &Template, ops: &[FieldOp]) -> Option<PlanMatch> {
        let ly = &t.layout;
        if t.has_tunnel() || ly.l4_kind == L4Kind::Arp {
            return None;
        }
        let key = key_of(&t.bytes)?;
        let (src, dst, proto) = match ly.ipv6 {
            true => ((ly.l3 + 8, 16), (ly.l3 + 24, 16), (ly.l3 + 6, 1)),
            false => ((ly.l3 + 12, 4), (ly.l3 + 16, 4), (ly.l3 + 9, 1)),
        };
        let vlan = ly.vlan_tci.first().map_or((0, 0), |&at| (at, 2));
        let ported = matches!(ly.l4_kind, L4Kind::Udp | L4Kind::Tcp);
        let (sport, dport) = if ported {
            ((ly.l4, 2), (ly.l4 + 2, 2))
        } else {
            ((0, 0), (0, 0))
        };
        let varied = |(at, n): (usize, usize)| {
            n > 0
                && ops
                    .iter()
                    .any(|o| o.target.offset < at + n && at < o.target.offset + o.target.nbytes)
        };
        let spans = [vlan, src, dst, proto, sport, dport];
        let mut m = [None; 6];
        for (i, span) in spans.into_iter().enumerate() {
            m[i] = (!varied(span)).then_some(key[i]);
        }
        Some(PlanMatch {
            parts: m,
            sig_at_end: t.sig && t.hand().is_some_and(|h| h.moves_parse()),
        })
    }

    /// The parts it matches on, as `name=value` (`*` for any).
    pub fn describe(&self) -> String {
        PARTS
            .iter()
            .zip(&self.parts)
            .map(|(n, v)| match v {
                None => format!("{n}=*"),
                Some(v) if *n == "vlan" && *v == NO_TAG => format!("{n}=none"),
                Some(v) => format!("{n}={v}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The key of an Ethernet frame carrying IPv4 or IPv6 (after up to two VLAN tags); `None`
/// for anything else or a frame too short for its IP header.
#[inline]
pub fn key_of(f: &[u8]) -> Option<Key> {
    let be16 = |at: usize| -> Option<u16> { Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?])) };
    let mut at = 12;
    let mut et = be16(at)?;
    let mut vlan = NO_TAG;
    while matches!(et, 0x8100 | 0x88a8) {
        if vlan == NO_TAG {
            vlan = u128::from(be16(at + 2)? & 0x0fff);
        }
        at += 4;
        et = be16(at)?;
    }
    let l3 = at + 2;
    let addr = |a: usize, n: usize| -> Option<u128> {
        let b = f.get(a..a + n)?;
        Some(b.iter().fold(0u128, |acc, &x| (acc << 8) | u128::from(x)))
    };
    let (src, dst, proto, l4, whole) = match et {
        0x0800 => {
            let ihl = usize::from(*f.get(l3)? & 0x0f) * 4;
            let frag = be16(l3 + 6)? & 0x3fff != 0;
            (addr(l3 + 12, 4)?, addr(l3 + 16, 4)?, *f.get(l3 + 9)?, l3 + ihl, !frag)
        }
        0x86dd => (addr(l3 + 8, 16)?, addr(l3 + 24, 16)?, *f.get(l3 + 6)?, l3 + 40, true),
        _ => return None,
    };
    let (sport, dport) = match (proto, whole) {
        (6 | 17, true) => (be16(l4).unwrap_or(0), be16(l4 + 2).unwrap_or(0)),
        _ => (0, 0),
    };
    Some([vlan, src, dst, u128::from(proto), u128::from(sport), u128::from(dport)])
}

/// The plan of a meter: each unsigned stream's matches, tried in order.
#[derive(Debug, Clone, Default)]
pub struct Plan(Vec<(PlanMatch, u16)>);

impl Plan {
    pub fn new(entries: Vec<(PlanMatch, u16)>) -> Plan {
        Plan(entries)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The stream id of a frame the plan knows, and whether its signature sits at the
    /// frame's end. An empty plan (every stream signed where parsers find it, the common
    /// case) reads nothing of the frame.
    #[inline]
    pub fn stream_of(&self, frame: &[u8]) -> Option<(u16, bool)> {
        if self.is_empty() {
            return None;
        }
        let key = key_of(frame)?;
        self.0
            .iter()
            .find(|(m, _)| m.matches(&key))
            .map(|(m, id)| (*id, m.sig_at_end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{TemplateSpec, VlanSpec};

    fn template(l4: L4Kind, vlan: Option<u16>, v6: bool) -> Template {
        let mut s = TemplateSpec {
            l4,
            ..TemplateSpec::default()
        };
        if v6 {
            s.ip_src = "2001:2::1".into();
            s.ip_dst = "2001:2::2".into();
        }
        s.vlan = vlan
            .map(|id| VlanSpec {
                id,
                pcp: 0,
                dei: false,
                tpid: None,
            })
            .into_iter()
            .collect();
        Template::build(&s, 60, false, Vec::new(), 1, "t").expect("builds")
    }

    #[test]
    fn a_template_matches_its_own_frames_and_not_another_vlan_s() {
        let t = template(L4Kind::None, Some(10), true);
        let m = PlanMatch::of(&t, &[]).expect("a plan");
        let key = key_of(&t.bytes).expect("a key");
        assert!(m.matches(&key), "expected a match; got {} for {key:?}", m.describe());
        assert_eq!(key[3], 59, "expected next header 59 (none); got {}", key[3]);
        let other = template(L4Kind::None, Some(11), true);
        let km = key_of(&other.bytes).unwrap();
        assert!(
            !m.matches(&km),
            "VLAN 11's frame matched VLAN 10's plan {}",
            m.describe()
        );
        let mo = PlanMatch::of(&other, &[]).unwrap();
        assert!(!m.overlaps(&mo), "expected VLAN 10 and 11 apart; got overlap");
    }

    #[test]
    fn a_udp_template_is_known_by_its_ports_and_an_untagged_frame_by_no_tag() {
        let t = template(L4Kind::Udp, None, false);
        let m = PlanMatch::of(&t, &[]).unwrap();
        let d = m.describe();
        assert!(
            d.contains("vlan=none") && d.contains("src_port=1024") && d.contains("protocol=17"),
            "got {d}"
        );
        let plan = Plan::new(vec![(m, 7)]);
        assert_eq!(plan.stream_of(&t.bytes), Some((7, false)));
        let tagged = template(L4Kind::Udp, Some(1), false);
        assert_eq!(
            plan.stream_of(&tagged.bytes),
            None,
            "a tagged frame matched an untagged plan"
        );
    }

    #[test]
    fn a_field_op_on_a_part_makes_it_match_any_value() {
        use crate::spec::FieldSpec;
        let t = template(L4Kind::None, None, false);
        let spec: FieldSpec =
            toml::from_str("field = \"ip_src\"\nop = \"inc\"\nfrom = \"198.18.0.1\"\nto = \"198.18.0.9\"").unwrap();
        let op = crate::packet::fields::compile(&spec, &t.layout, L4Kind::None, "f")
            .expect("compiles")
            .0;
        let m = PlanMatch::of(&t, &[op]).unwrap();
        assert_eq!(m.parts[1], None, "expected ip_src to match any; got {}", m.describe());
        assert!(m.parts[2].is_some(), "expected ip_dst kept; got {}", m.describe());
    }
}
