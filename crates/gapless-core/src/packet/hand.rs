//! Header fields set by hand ([`HandSpec`]): versions, lengths, protocol numbers and
//! checksums written as given over what gapless computes, as users send them to test a
//! device's error counters.
//!
//! A template with any of them takes the general path for every frame
//! ([`crate::packet::template::Template::finish_with`], never a precomputed
//! [`crate::packet::fixed::FixedFrame`]): the frame is finished as without them, then
//! [`Hand::apply`] writes the fields and sets both checksums from the bytes as sent: the good
//! one (over the hand values too), that plus one where `"bad"` was asked, or the number
//! given. The pseudo header of the layer 4 checksum keeps the transport's own protocol and
//! the bytes' real length, as Scapy computes it.
//!
//! What such a frame does to a parser: a hand length, version, protocol or EtherType moves
//! where a parser looks for the signature; [`Hand::moves_parse`] says so, and the meter then
//! knows the stream's frames by their headers and reads the signature at the frame's end
//! ([`crate::meter::plan`]).

use crate::packet::checksum::{finish, fold, sum_be};
use crate::packet::layout::{l4_sum, Layout};
use crate::spec::error::ProfileError;
use crate::spec::{HandChecksum, HandSpec, L4Kind};

/// The hand fields of a template, checked against its layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hand(HandSpec);

impl Hand {
    /// The hand fields of a template with `layout`, refused with their path (`path.hand.KEY`)
    /// where its headers have no such field; `None` when there are none.
    pub fn new(spec: &HandSpec, ly: &Layout, path: &str) -> Result<Option<Hand>, ProfileError> {
        if spec.is_empty() {
            return Ok(None);
        }
        let bad = |key: &str, what: &str, fix: &str| {
            let key = if key.is_empty() {
                String::new()
            } else {
                format!(".{key}")
            };
            Err(ProfileError::invalid(
                format!("{path}.hand{key}"),
                what.to_string(),
                fix.to_string(),
            ))
        };
        let nibbles = [
            ("ip_version", spec.ip_version),
            ("ip_header_length", spec.ip_header_length),
            ("tcp_data_offset", spec.tcp_data_offset),
        ];
        if let Some((k, v)) = nibbles.iter().find_map(|(k, v)| v.filter(|v| *v > 15).map(|v| (k, v))) {
            return bad(k, &format!("{v} does not fit the field's 4 bits"), "give 0 to 15");
        }
        if ly.l4_kind == L4Kind::Arp {
            return bad(
                "",
                "an ARP template has none of these fields",
                "remove [hand], or send IP",
            );
        }
        if spec.ether_type.is_some() && ly.outer.is_some() {
            return bad(
                "ether_type",
                "in a tunnel the EtherType names the inner packet's",
                "remove it, or send without a tunnel",
            );
        }
        if ly.ipv6 && spec.ip_header_length.is_some() {
            return bad("ip_header_length", "IPv6 has no header length", "remove it");
        }
        if ly.ipv6 && spec.ip_checksum.is_some() {
            return bad("ip_checksum", "IPv6 has no header checksum", "remove it");
        }
        if spec.l4_length.is_some() && ly.l4_kind != L4Kind::Udp {
            return bad(
                "l4_length",
                "only UDP has a length field",
                "remove it, or set l4 = \"udp\"",
            );
        }
        if spec.tcp_data_offset.is_some() && ly.l4_kind != L4Kind::Tcp {
            return bad(
                "tcp_data_offset",
                "the template has no TCP header",
                "remove it, or set l4 = \"tcp\"",
            );
        }
        if spec.l4_checksum.is_some() && !ly.has_l4_csum() {
            return bad("l4_checksum", "the template has no layer 4 checksum", "remove it");
        }
        Ok(Some(Hand(spec.clone())))
    }

    /// Whether a parser reading the frame by its headers would look for the signature in the
    /// wrong place, or not read the frame as IP at all (any hand field but the checksums).
    pub fn moves_parse(&self) -> bool {
        let h = &self.0;
        h.ether_type.is_some()
            || h.ip_version.is_some()
            || h.ip_header_length.is_some()
            || h.ip_length.is_some()
            || h.ip_protocol.is_some()
            || h.l4_length.is_some()
            || h.tcp_data_offset.is_some()
    }

    /// Whether the layer 4 checksum is a fixed number (a TX stamp written later must leave
    /// it as it is).
    pub fn fixed_l4_checksum(&self) -> bool {
        matches!(self.0.l4_checksum, Some(HandChecksum::Value(_)))
    }

    /// Writes the hand fields into a finished frame (its inner packet, in a tunnel) and sets
    /// its checksums as asked.
    pub fn apply(&self, f: &mut [u8], ly: &Layout) {
        let h = &self.0;
        let l3 = ly.l3;
        let put16 = |f: &mut [u8], at: usize, v: u16| f[at..at + 2].copy_from_slice(&v.to_be_bytes());
        if let Some(v) = h.ether_type {
            put16(f, l3 - 2, v);
        }
        if let Some(v) = h.ip_version {
            f[l3] = (f[l3] & 0x0f) | (v << 4);
        }
        if let Some(v) = h.ip_header_length {
            f[l3] = (f[l3] & 0xf0) | v;
        }
        if let Some(v) = h.ip_length {
            put16(f, l3 + if ly.ipv6 { 4 } else { 2 }, v);
        }
        if let Some(v) = h.ip_protocol {
            f[l3 + if ly.ipv6 { 6 } else { 9 }] = v;
        }
        if let Some(v) = h.l4_length {
            put16(f, ly.l4 + 4, v);
        }
        if let Some(v) = h.tcp_data_offset {
            f[ly.l4 + 12] = (f[ly.l4 + 12] & 0x0f) | (v << 4);
        }
        if !ly.ipv6 {
            f[l3 + 10..l3 + 12].fill(0);
            let good = finish(sum_be(&f[l3..ly.l4]));
            put16(f, l3 + 10, asked(h.ip_checksum, good));
        }
        if ly.has_l4_csum() {
            let cs = ly.l4_csum();
            f[cs..cs + 2].fill(0);
            let mut good = finish(l4_sum(f, ly, transport_number(ly)));
            if good == 0 && ly.l4_kind == L4Kind::Udp {
                good = 0xffff;
            }
            put16(f, cs, asked(h.l4_checksum, good));
        }
    }
}

/// The checksum to send: the good one, that plus one (`"bad"`: never 0, which UDP reads as
/// "no checksum"), or the number given.
fn asked(c: Option<HandChecksum>, good: u16) -> u16 {
    match c {
        None => good,
        Some(HandChecksum::Value(v)) => v,
        Some(HandChecksum::Bad(_)) => fold(u64::from(good) + 1),
    }
}

/// The protocol number of the template's transport (its pseudo header's), whatever the IP
/// header says.
fn transport_number(ly: &Layout) -> u64 {
    match ly.l4_kind {
        L4Kind::Udp => 17,
        L4Kind::Tcp => 6,
        L4Kind::Icmp if ly.ipv6 => 58,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::signature::Signature;
    use crate::packet::template::Template;
    use crate::spec::{BadWord, TemplateSpec};

    fn template(l4: L4Kind, v6: bool, hand: HandSpec) -> Result<Template, ProfileError> {
        let mut s = TemplateSpec {
            l4,
            hand,
            ..TemplateSpec::default()
        };
        if v6 {
            s.ip_src = "2001:2::1".into();
            s.ip_dst = "2001:2::2".into();
        }
        Template::build(&s, 128, true, Vec::new(), 1, "stream[0].template")
    }

    /// A frame of `len` bytes cut from `t`, signed with `seq`, finished as the generator does.
    fn frame(t: &Template, len: usize, seq: u32) -> Vec<u8> {
        let mut f = t.bytes[..len].to_vec();
        let sig = Signature {
            stream: 7,
            seq,
            tx_ns: 11,
        };
        sig.write(&mut f[len - 16..]);
        t.finish_with(&mut f, 0, 0, Some(&sig));
        f
    }

    fn be16(f: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([f[at], f[at + 1]])
    }

    /// Whether the IPv4 header at `l3` verifies (its words sum to 0xffff).
    fn ip_good(f: &[u8], l3: usize) -> bool {
        fold(sum_be(&f[l3..l3 + 20])) == 0xffff
    }

    #[test]
    fn hand_fields_go_out_as_given_and_checksums_cover_them() {
        let hand = HandSpec {
            ip_version: Some(5),
            ip_length: Some(1000),
            ip_protocol: Some(99),
            l4_length: Some(9),
            ..HandSpec::default()
        };
        let t = template(L4Kind::Udp, false, hand).expect("builds");
        let f = frame(&t, 100, 1);
        let (l3, l4) = (14, 34);
        let got = (f[l3] >> 4, be16(&f, l3 + 2), f[l3 + 9], be16(&f, l4 + 4));
        assert_eq!(
            got,
            (5, 1000, 99, 9),
            "expected version 5, length 1000, protocol 99, UDP length 9; got {got:?}"
        );
        assert!(
            ip_good(&f, l3),
            "expected a good IPv4 checksum over the hand fields; got {:#06x}",
            be16(&f, l3 + 10)
        );
        let ly = &t.layout;
        assert_eq!(
            fold(l4_sum(&f, ly, 17)),
            0xffff,
            "expected a good UDP checksum (pseudo header: protocol 17, 66 bytes)"
        );
    }

    #[test]
    fn a_bad_checksum_stays_bad_and_a_number_stays_itself_through_the_tx_stamp() {
        let bad = HandSpec {
            ip_checksum: Some(HandChecksum::Bad(BadWord::Bad)),
            l4_checksum: Some(HandChecksum::Bad(BadWord::Bad)),
            ..HandSpec::default()
        };
        let t = template(L4Kind::Tcp, false, bad).expect("builds");
        let mut f = frame(&t, 90, 2);
        for stamp in [0u64, 1, 0xffff_ffff_ffff_ffff, 0x1234_5678_9abc_def0] {
            t.patch_tx_ns(&mut f, stamp);
            let l4 = fold(l4_sum(&f, &t.layout, 6));
            assert_eq!(
                l4, 1,
                "expected the TCP checksum one off good after stamp {stamp:#x}; its sum folds to {l4:#06x}"
            );
        }
        assert!(!ip_good(&f, 14), "expected a bad IPv4 checksum");
        let fixed = HandSpec {
            l4_checksum: Some(HandChecksum::Value(0x1234)),
            ..HandSpec::default()
        };
        let t = template(L4Kind::Icmp, true, fixed).expect("builds");
        let mut f = frame(&t, 100, 3);
        t.patch_tx_ns(&mut f, 99);
        let cs = t.layout.l4_csum();
        assert_eq!(
            be16(&f, cs),
            0x1234,
            "expected the ICMPv6 checksum 0x1234 after the stamp; got {:#06x}",
            be16(&f, cs)
        );
        assert_eq!(&f[f.len() - 8..], &99u64.to_be_bytes(), "expected the stamp written");
    }

    #[test]
    fn a_field_the_headers_lack_is_refused_with_its_path() {
        let cases = [
            (
                L4Kind::Tcp,
                false,
                HandSpec {
                    l4_length: Some(8),
                    ..HandSpec::default()
                },
                "hand.l4_length",
            ),
            (
                L4Kind::Udp,
                true,
                HandSpec {
                    ip_checksum: Some(HandChecksum::Value(1)),
                    ..HandSpec::default()
                },
                "hand.ip_checksum",
            ),
            (
                L4Kind::Udp,
                true,
                HandSpec {
                    ip_header_length: Some(6),
                    ..HandSpec::default()
                },
                "hand.ip_header_length",
            ),
            (
                L4Kind::Udp,
                false,
                HandSpec {
                    ip_version: Some(16),
                    ..HandSpec::default()
                },
                "hand.ip_version",
            ),
            (
                L4Kind::None,
                false,
                HandSpec {
                    l4_checksum: Some(HandChecksum::Value(1)),
                    ..HandSpec::default()
                },
                "hand.l4_checksum",
            ),
            (
                L4Kind::Arp,
                false,
                HandSpec {
                    ip_length: Some(1),
                    ..HandSpec::default()
                },
                "hand:",
            ),
        ];
        for (l4, v6, hand, path) in cases {
            let e = template(l4, v6, hand).expect_err("refused").to_string();
            assert!(
                e.contains(&format!("stream[0].template.{path}")),
                "expected the path {path}; got {e}"
            );
        }
    }
}

#[cfg(test)]
mod toml_tests {
    #[test]
    fn a_profile_names_hand_fields_and_a_checksum_as_a_number_or_bad() {
        let toml = "[[stream]]\nsize = 128\n[stream.template.hand]\nip_length = 1000\nip_checksum = \"bad\"\nl4_checksum = 0x1234\n[stream.timing]\nrate_pps = 10\n";
        let spec = crate::ProfileSpec::from_toml(toml, "p.toml").expect("parses");
        let h = &spec.streams[0].template.as_ref().expect("a template").hand;
        assert_eq!(h.ip_length, Some(1000));
        assert_eq!(
            h.ip_checksum,
            Some(crate::spec::HandChecksum::Bad(crate::spec::BadWord::Bad))
        );
        assert_eq!(h.l4_checksum, Some(crate::spec::HandChecksum::Value(0x1234)));
        let e = crate::ProfileSpec::from_toml(&toml.replace("\"bad\"", "\"ugly\""), "p.toml").expect_err("refused");
        assert!(e.to_string().contains("ip_checksum"), "expected the key named; got {e}");
    }
}
