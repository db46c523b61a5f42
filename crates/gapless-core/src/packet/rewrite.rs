//! The field engine on replayed frames. A capture's frames have layouts of their own, so
//! each op is compiled for each layout met (and cached), reads the frame's bytes before it
//! writes (`rmw`), and its checksum delta fixes the frame's IPv4 header and L4 checksums
//! incrementally (RFC 1624). Frames that are not IPv4/IPv6 with UDP, TCP or ICMP leave as
//! captured and are counted; an op that does not fit a frame (a port on ICMP, a VLAN op on
//! an untagged frame) skips it, and the other ops still apply.

use std::collections::HashMap;

use rand::Rng;

use crate::packet::checksum::{fold, sum_at};
use crate::packet::fields::{self, FieldOp};
use crate::packet::signature::{Signature, SIG_LEN};
use crate::packet::template::Layout;
use crate::spec::{FieldSpec, L4Kind};

/// The stream's ops, as written, and their compilations per layout.
#[derive(Debug, Clone, Default)]
pub struct Rewriter {
    specs: Vec<FieldSpec>,
    /// The ops that fit each layout, with their index in `specs`.
    by_layout: HashMap<Layout, Vec<(usize, FieldOp)>>,
    state: Vec<u64>,
    /// Frames left as captured (not IP, or an op did not fit).
    pub untouched: u64,
}

/// The layout of an Ethernet frame with up to two VLAN tags, IPv4 (options allowed) or IPv6
/// (no extension headers), and UDP, TCP or ICMP.
pub fn layout_of(f: &[u8]) -> Option<Layout> {
    let mut at = 12;
    let mut vlan_tci = Vec::new();
    let mut et = u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]);
    while (et == 0x8100 || et == 0x88a8) && vlan_tci.len() < 2 {
        vlan_tci.push(at + 2);
        at += 4;
        et = u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]);
    }
    let l3 = at + 2;
    let (ipv6, proto, l4) = match et {
        0x0800 => (false, *f.get(l3 + 9)?, l3 + usize::from(f.get(l3)? & 0x0f) * 4),
        0x86dd => (true, *f.get(l3 + 6)?, l3 + 40),
        _ => return None,
    };
    let (l4_kind, hdr) = match (proto, ipv6) {
        (17, _) => (L4Kind::Udp, 8),
        (6, _) => (L4Kind::Tcp, usize::from(f.get(l4 + 12)? >> 4) * 4),
        (1, false) | (58, true) => (L4Kind::Icmp, 8),
        _ => return None,
    };
    (l4 + hdr <= f.len()).then_some(Layout {
        vlan_tci,
        l3,
        ipv6,
        l4,
        l4_kind,
        payload: l4 + hdr,
        outer: None,
    })
}

/// Compiles the `specs` that fit `ly`, every op reading the frame first.
fn compile_for(specs: &[FieldSpec], ly: &Layout) -> Vec<(usize, FieldOp)> {
    let mut ops = Vec::with_capacity(specs.len());
    for (i, s) in specs.iter().enumerate() {
        let Ok((mut op, _)) = fields::compile(s, ly, ly.l4_kind, "") else {
            continue;
        };
        let end = op.target.offset + op.target.nbytes;
        op.rmw = true;
        op.in_ip = !ly.ipv6 && op.target.offset >= ly.l3 && end <= ly.l3 + 20;
        let (p0, p1) = if ly.ipv6 {
            (ly.l3 + 8, ly.l3 + 40)
        } else {
            (ly.l3 + 12, ly.l3 + 20)
        };
        let pseudo = ly.ipv6 || ly.l4_kind != L4Kind::Icmp;
        op.in_l4 = (pseudo && op.target.offset >= p0 && end <= p1) || op.target.offset >= ly.l4;
        ops.push((i, op));
    }
    ops
}

/// Adds `delta` (a ones'-complement sum of new minus old bytes) to the checksum at `at`.
fn fix(f: &mut [u8], at: usize, delta: u64, udp: bool, v4: bool) {
    let old = u16::from_be_bytes([f[at], f[at + 1]]);
    if udp && v4 && old == 0 {
        return; // an IPv4 UDP datagram without a checksum keeps none
    }
    let mut c = !fold(u64::from(!old) + delta);
    if c == 0 && udp {
        c = 0xffff;
    }
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

impl Rewriter {
    /// A rewriter for `specs`, each checked against an IPv4/UDP layout (so a misspelt field
    /// fails when the profile compiles).
    pub fn new(specs: &[FieldSpec], path: &str) -> Result<Rewriter, crate::spec::error::ProfileError> {
        let probe = Layout {
            vlan_tci: vec![],
            l3: 14,
            ipv6: false,
            l4: 34,
            l4_kind: L4Kind::Udp,
            payload: 42,
            outer: None,
        };
        for (j, s) in specs.iter().enumerate() {
            fields::compile(s, &probe, L4Kind::Udp, &format!("{path}.field[{j}]"))?;
        }
        Ok(Rewriter {
            specs: specs.to_vec(),
            state: vec![0; specs.len()],
            ..Rewriter::default()
        })
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The number of ops.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Applies the ops to `f` and fixes its checksums.
    pub fn apply<R: Rng + ?Sized>(&mut self, f: &mut [u8], rng: &mut R) {
        let Some(ly) = layout_of(f) else {
            self.untouched += 1;
            return;
        };
        let specs = &self.specs;
        let ops = self
            .by_layout
            .entry(ly.clone())
            .or_insert_with(|| compile_for(specs, &ly));
        let (mut d_ip, mut d_l4) = (0u64, 0u64);
        for (i, op) in ops.iter() {
            if op.target.offset + op.target.nbytes > f.len() {
                continue;
            }
            let d = op.apply(f, &mut self.state[*i], rng);
            d_ip += if op.in_ip { d } else { 0 };
            d_l4 += if op.in_l4 { d } else { 0 };
        }
        if d_ip != 0 {
            fix(f, ly.l3 + 10, d_ip, false, true);
        }
        if d_l4 != 0 && ly.l4_csum() + 2 <= f.len() {
            fix(f, ly.l4_csum(), d_l4, ly.l4_kind == L4Kind::Udp, !ly.ipv6);
        }
    }
}

/// Where a replayed frame's signature goes: the last 16 bytes of its UDP or TCP payload, by
/// the IP length (Ethernet padding after it is not payload). `None` for ICMP and payloads
/// shorter than the signature.
fn sig_at(f: &[u8], ly: &Layout) -> Option<usize> {
    if ly.l4_kind == L4Kind::Icmp {
        return None;
    }
    let be = |i: usize| Some(usize::from(u16::from_be_bytes([*f.get(i)?, *f.get(i + 1)?])));
    let end = if ly.ipv6 {
        ly.l3 + 40 + be(ly.l3 + 4)?
    } else {
        ly.l3 + be(ly.l3 + 2)?
    };
    (end <= f.len() && end >= ly.payload + SIG_LEN).then(|| end - SIG_LEN)
}

/// Rewrites `f[at..at + n]` with `write` and fixes the L4 checksum by the window's delta.
fn patch_window(f: &mut [u8], ly: &Layout, at: usize, n: usize, write: impl FnOnce(&mut [u8])) {
    let odd = (at - ly.l4) % 2 == 1;
    let old = fold(sum_at(&f[at..at + n], odd));
    write(&mut f[at..at + n]);
    let delta = sum_at(&f[at..at + n], odd) + u64::from(!old);
    fix(f, ly.l4_csum(), delta, ly.l4_kind == L4Kind::Udp, !ly.ipv6);
}

/// Overwrites the tail of a replayed UDP or TCP frame's payload with the signature and fixes
/// its checksum. Returns false (the frame untouched) when the frame cannot carry one.
pub fn sign(f: &mut [u8], sig: &Signature) -> bool {
    let Some(ly) = layout_of(f) else { return false };
    let Some(at) = sig_at(f, &ly) else { return false };
    patch_window(f, &ly, at, SIG_LEN, |w| sig.write(w));
    true
}

/// Rewrites the TX stamp of a signed replayed frame just before it leaves (no-op on a frame
/// without a signature).
pub fn patch_tx_ns(f: &mut [u8], tx_ns: u64) {
    let Some(ly) = layout_of(f) else { return };
    let Some(at) = sig_at(f, &ly) else { return };
    if Signature::from_payload_end(&f[ly.payload..at + SIG_LEN]).is_none() {
        return;
    }
    patch_window(f, &ly, at + 8, 8, |w| w.copy_from_slice(&tx_ns.to_be_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/UDP frame with a valid checksum: 64 B of payload.
    fn udp_frame() -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(1000, 2000);
        let payload = [0xabu8; 64];
        let mut out = Vec::new();
        b.write(&mut out, &payload).unwrap();
        out.extend_from_slice(&[0; 6]); // Ethernet padding past the IP length
        out
    }

    fn udp_ok(f: &[u8]) -> bool {
        let p = etherparse::SlicedPacket::from_ethernet(f).unwrap();
        let (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Udp(u))) = (p.net, p.transport)
        else {
            return false;
        };
        u.to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), u.payload())
            .ok()
            == Some(u.checksum())
    }

    #[test]
    fn a_replayed_frame_is_signed_and_restamped_with_its_checksum_right() {
        let mut f = udp_frame();
        assert!(udp_ok(&f));
        let sig = Signature {
            stream: 9,
            seq: 41,
            tx_ns: 5,
        };
        assert!(sign(&mut f, &sig));
        assert!(udp_ok(&f), "checksum after signing");
        let ly = layout_of(&f).unwrap();
        let end = f.len() - 6;
        assert_eq!(
            Signature::from_payload_end(&f[ly.payload..end]),
            Some(sig),
            "the signature ends the payload, before the padding"
        );
        patch_tx_ns(&mut f, 0x1122_3344_5566_7788);
        assert!(udp_ok(&f), "checksum after the stamp");
        assert_eq!(
            Signature::from_payload_end(&f[ly.payload..end]).unwrap().tx_ns,
            0x1122_3344_5566_7788
        );
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!sign(&mut arp.clone(), &sig), "a non-IP frame cannot be signed");
    }
}
