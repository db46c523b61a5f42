//! Which OSPF Link State Update on the wire carries a route range's change (sans IO): the
//! `protocol.route` event's time is that packet's, not the first LS Update after the command
//! (an area border router floods its own router LSA at once, and its summaries only at its
//! next ABR task, 5 s later in FRR).
//!
//! A range is carried by: (OSPFv2) a summary (type 3) or AS-external (type 5) LSA whose link
//! state id is one of its prefixes, by origin; (OSPFv3) an inter-area-prefix (0x2003) or
//! AS-external (0x4005) LSA whose prefix is one of its prefixes; for an intra-area range, the
//! router's own router LSA (v2) or intra-area-prefix LSA (v3).

use std::net::{IpAddr, Ipv4Addr};

use super::{Origin, Range, Router};

/// An LSA in an LS Update: its type, link state id, advertising router and body.
struct Lsa<'a> {
    kind: u16,
    id: [u8; 4],
    adv: [u8; 4],
    body: &'a [u8],
}

/// Whether `frame` (Ethernet) is an LS Update of `r` carrying one of `ranges`.
pub fn lsu_carries(frame: &[u8], r: &Router, ranges: &[&Range]) -> bool {
    let Some((v3, lsas)) = lsu_body(frame) else {
        return false;
    };
    lsas_of(lsas, v3)
        .iter()
        .any(|l| ranges.iter().any(|x| carries(l, x, r, v3)))
}

/// LSAs one way on a router's interface: every LSA an LS Update carried (`lsas`) and every
/// LSA header an LS Acknowledgment carried (`acks`), and the LSAs by type (index: OSPFv2's
/// type, OSPFv3's function code; 12 and up counted in `lsas` only).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub lsas: u64,
    pub acks: u64,
    pub by_type: [u64; 12],
}

impl Tally {
    /// Adds what `frame` (Ethernet) carries, if it is an OSPF LS Update or Acknowledgment.
    pub fn count(&mut self, frame: &[u8]) {
        let Some((v3, kind, body)) = ospf_packet(frame) else {
            return;
        };
        match kind {
            4 => {
                for l in lsas_of(body.get(4..).unwrap_or_default(), v3) {
                    self.lsas += 1;
                    let code = usize::from(if v3 { l.kind & 0x1fff } else { l.kind });
                    if let Some(n) = self.by_type.get_mut(code) {
                        *n += 1;
                    }
                }
            }
            5 => self.acks += (body.len() / 20) as u64,
            _ => {}
        }
    }
}

/// The model's LSA counters of an `ospfv2` (`v3` false) or `ospfv3` metric, from what the
/// router sent and received on the wire (FRR counts packets, not LSAs).
pub fn lsa_counters(sent: &Tally, received: &Tally, v3: bool) -> Vec<(String, u64)> {
    let kinds: &[(&str, &[usize])] = if v3 {
        &[
            ("router_lsa", &[1]),
            ("network_lsa", &[2]),
            ("inter_area_prefix_lsa", &[3]),
            ("inter_area_router_lsa", &[4]),
            ("external_lsa", &[5]),
            ("nssa_lsa", &[7]),
            ("link_lsa", &[8]),
            ("intra_area_prefix_lsa", &[9]),
        ]
    } else {
        &[
            ("router_lsa", &[1]),
            ("network_lsa", &[2]),
            ("summary_lsa", &[3, 4]),
            ("external_lsa", &[5]),
            ("nssa_lsa", &[7]),
            ("opaque_local", &[9]),
            ("opaque_area", &[10]),
            ("opaque_domain", &[11]),
        ]
    };
    let mut out = Vec::new();
    for (dir, t) in [("sent", sent), ("received", received)] {
        out.push((format!("lsa_{dir}"), t.lsas));
        if !v3 {
            out.push((format!("lsa_ack_{dir}"), t.acks));
        }
        for (name, codes) in kinds {
            out.push((format!("{name}_{dir}"), codes.iter().map(|&c| t.by_type[c]).sum()));
        }
    }
    out
}

/// An OSPF packet in an Ethernet frame: (OSPFv3, its type, the bytes after its header).
fn ospf_packet(f: &[u8]) -> Option<(bool, u8, &[u8])> {
    let mut off = 12;
    while matches!(f.get(off..off + 2), Some([0x81, 0x00] | [0x88, 0xa8])) {
        off += 4;
    }
    let ip = f.get(off + 2..)?;
    let ospf = match f.get(off..off + 2)? {
        [0x08, 0x00] if ip.len() >= 20 && ip[9] == 89 => ip.get(usize::from(ip[0] & 0x0f) * 4..)?,
        [0x86, 0xdd] if ip.len() >= 40 && ip[6] == 89 => ip.get(40..)?,
        _ => return None,
    };
    // Header: version, type; 24 bytes in v2, 16 in v3; its length at bytes 2..4.
    let v3 = match ospf.first()? {
        2 => false,
        3 => true,
        _ => return None,
    };
    // Its length, where it is one (Ethernet may pad a short frame past it).
    let len = usize::from(u16::from_be_bytes([*ospf.get(2)?, *ospf.get(3)?]));
    let head = if v3 { 16 } else { 24 };
    let end = if (head..=ospf.len()).contains(&len) {
        len
    } else {
        ospf.len()
    };
    Some((v3, *ospf.get(1)?, ospf.get(head..end)?))
}

/// The OSPF LS Update in an Ethernet frame: (OSPFv3, the bytes after its LSA count).
fn lsu_body(f: &[u8]) -> Option<(bool, &[u8])> {
    match ospf_packet(f)? {
        (v3, 4, body) => Some((v3, body.get(4..)?)),
        _ => None,
    }
}

/// The LSAs of an LS Update's body (each a 20-byte header, then its body to its length).
fn lsas_of(mut b: &[u8], v3: bool) -> Vec<Lsa<'_>> {
    let mut out = Vec::new();
    while b.len() >= 20 {
        let len = usize::from(u16::from_be_bytes([b[18], b[19]]));
        let Some(lsa) = b.get(..len.max(20)) else { break };
        let kind = if v3 {
            u16::from_be_bytes([b[2], b[3]])
        } else {
            u16::from(b[3])
        };
        out.push(Lsa {
            kind,
            id: [b[4], b[5], b[6], b[7]],
            adv: [b[8], b[9], b[10], b[11]],
            body: &lsa[20..],
        });
        b = &b[lsa.len()..];
    }
    out
}

fn carries(l: &Lsa, x: &Range, r: &Router, v3: bool) -> bool {
    let own = l.adv == r.router_id.octets();
    let prefixes = || x.blocks.iter().flat_map(|b| b.prefixes());
    match (v3, x.origin) {
        (false, Origin::IntraArea) => own && l.kind == 1,
        (false, o) => {
            let kind = if o == Origin::InterArea { 3 } else { 5 };
            let id = IpAddr::V4(Ipv4Addr::from(l.id));
            own && l.kind == kind && prefixes().any(|(net, _)| net == id)
        }
        (true, Origin::IntraArea) => own && l.kind == 0x2009,
        (true, o) => {
            let kind = if o == Origin::InterArea { 0x2003 } else { 0x4005 };
            own && l.kind == kind && v3_prefix(l.body).is_some_and(|p| prefixes().any(|q| q == p))
        }
    }
}

/// The prefix of an OSPFv3 inter-area-prefix or AS-external LSA body: after 4 bytes (metric,
/// with flags), its length, options, 2 bytes, then the prefix in whole 32-bit words.
fn v3_prefix(body: &[u8]) -> Option<(IpAddr, u8)> {
    let len = *body.get(4)?;
    let words = usize::from(len).div_ceil(32) * 4;
    let mut a = [0u8; 16];
    a[..words.min(16)].copy_from_slice(body.get(8..8 + words.min(16))?);
    Some((IpAddr::V6(a.into()), len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::Block;

    fn router() -> Router {
        Router {
            name: "o2".into(),
            v6: false,
            device: "d2".into(),
            eth: "d2.eth".into(),
            router_id: Ipv4Addr::new(1, 1, 1, 2),
            interfaces: Vec::new(),
            ranges: Vec::new(),
            retransmit_s: 5,
            refresh_s: None,
        }
    }

    fn range(first: &str, prefix: u8, origin: Origin) -> Range {
        Range {
            name: "r".into(),
            blocks: vec![Block {
                first: first.parse().unwrap(),
                prefix,
                count: 2,
                step: 1,
            }],
            metric: 20,
            origin,
        }
    }

    /// An Ethernet + IPv4 frame of an OSPFv2 LS Update with LSAs (type, id, advertiser).
    fn lsu_v2(lsas: &[(u8, [u8; 4], [u8; 4])]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([
            0x08, 0x00, 0x45, 0xc0, 0, 0, 0, 0, 0, 0, 1, 89, 0, 0, 10, 0, 0, 2, 224, 0, 0, 5,
        ]);
        f.extend([2, 4, 0, 0, 1, 1, 1, 2, 0, 0, 0, 0]);
        f.extend([0u8; 12]);
        f.extend((lsas.len() as u32).to_be_bytes());
        for (kind, id, adv) in lsas {
            f.extend([0x0e, 0x10, 0x22, *kind]);
            f.extend(id);
            f.extend(adv);
            f.extend([0x80, 0, 0, 2, 0, 0, 0, 28]);
            f.extend([255, 255, 255, 0, 0, 0, 0, 20]);
        }
        f
    }

    #[test]
    fn lsas_are_counted_by_type_in_updates_and_acks() {
        let me = [1, 1, 1, 2];
        let mut t = Tally::default();
        t.count(&lsu_v2(&[
            (1, me, me),
            (3, [10, 20, 1, 0], me),
            (5, [10, 29, 0, 0], me),
        ]));
        t.count(&lsu_v2(&[(4, me, me)]));
        // An LS Acknowledgment with two LSA headers: type 5, and the lengths in the headers.
        let mut ack = lsu_v2(&[]);
        ack[14 + 20 + 1] = 5;
        ack.truncate(ack.len() - 4);
        ack.extend([0u8; 40]);
        let n = (ack.len() - 14 - 20) as u16;
        ack[14 + 20 + 2..14 + 20 + 4].copy_from_slice(&n.to_be_bytes());
        t.count(&ack);
        t.count(&[0u8; 60]);
        assert_eq!((t.lsas, t.acks), (4, 2));
        let c = lsa_counters(&t, &Tally::default(), false);
        let get = |k: &str| c.iter().find(|x| x.0 == k).map(|x| x.1);
        assert_eq!(
            (
                get("lsa_sent"),
                get("router_lsa_sent"),
                get("summary_lsa_sent"),
                get("external_lsa_sent")
            ),
            (Some(4), Some(1), Some(2), Some(1)),
            "{c:?}"
        );
        assert_eq!((get("lsa_ack_sent"), get("lsa_received")), (Some(2), Some(0)));
        let v3 = lsa_counters(&t, &t, true);
        assert!(
            v3.iter().all(|x| !x.0.starts_with("lsa_ack")),
            "OSPFv3's metric has no ack counters"
        );
        assert_eq!(v3.len(), 18);
    }

    #[test]
    fn a_summary_of_the_range_is_told_from_the_router_lsa_before_it() {
        let (r, me) = (router(), [1, 1, 1, 2]);
        let inter = range("10.20.0.0", 24, Origin::InterArea);
        assert!(
            !lsu_carries(&lsu_v2(&[(1, me, me)]), &r, &[&inter]),
            "the router LSA first"
        );
        assert!(lsu_carries(
            &lsu_v2(&[(1, me, me), (3, [10, 20, 1, 0], me)]),
            &r,
            &[&inter]
        ));
        assert!(
            !lsu_carries(&lsu_v2(&[(3, [10, 30, 0, 0], me)]), &r, &[&inter]),
            "another prefix"
        );
        assert!(
            !lsu_carries(&lsu_v2(&[(3, [10, 20, 0, 0], [9, 9, 9, 9])]), &r, &[&inter]),
            "another router's"
        );
        let ext = range("10.29.0.0", 24, Origin::External(1));
        assert!(lsu_carries(&lsu_v2(&[(5, [10, 29, 0, 0], me)]), &r, &[&ext]));
        assert!(
            !lsu_carries(&lsu_v2(&[(3, [10, 29, 0, 0], me)]), &r, &[&ext]),
            "a summary is not an external"
        );
        let intra = range("10.21.0.0", 24, Origin::IntraArea);
        assert!(lsu_carries(&lsu_v2(&[(1, me, me)]), &r, &[&intra]));
    }

    #[test]
    fn an_ospfv3_inter_area_prefix_is_matched_by_its_prefix() {
        let mut r = router();
        r.v6 = true;
        let x = range("2001:db8:20::", 64, Origin::InterArea);
        let lsu = |prefix: [u8; 8]| {
            let mut f = vec![0u8; 12];
            f.extend([0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, 89, 1]);
            f.extend([0u8; 32]);
            f.extend([3, 4, 0, 0, 1, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0]);
            f.extend(1u32.to_be_bytes());
            f.extend([
                0x0e, 0x10, 0x20, 0x03, 0, 0, 0, 7, 1, 1, 1, 2, 0x80, 0, 0, 2, 0, 0, 0, 36,
            ]);
            f.extend([0, 0, 0, 20, 64, 0, 0, 0]);
            f.extend(prefix);
            f
        };
        assert!(lsu_carries(&lsu([0x20, 0x01, 0x0d, 0xb8, 0, 0x20, 0, 1]), &r, &[&x]));
        assert!(!lsu_carries(&lsu([0x20, 0x01, 0x0d, 0xb8, 0, 0x30, 0, 0]), &r, &[&x]));
    }
}
