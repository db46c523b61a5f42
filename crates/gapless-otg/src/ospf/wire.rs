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

/// The OSPF LS Update in an Ethernet frame: (OSPFv3, the bytes after its LSA count).
fn lsu_body(f: &[u8]) -> Option<(bool, &[u8])> {
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
    // Header: version, type (4: LS Update); 24 bytes in v2, 16 in v3; then the LSA count.
    let v3 = match ospf.get(..2)? {
        [2, 4] => false,
        [3, 4] => true,
        _ => return None,
    };
    ospf.get(if v3 { 20 } else { 28 }..).map(|b| (v3, b))
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
