//! The field engine on replayed frames. A capture's frames have layouts of their own, so
//! each op is compiled for each layout met (and cached), reads the frame's bytes before it
//! writes (`rmw`), and its checksum delta fixes the frame's IPv4 header and L4 checksums
//! incrementally (RFC 1624). Frames that are not IPv4/IPv6 with UDP, TCP or ICMP leave as
//! captured and are counted; an op that does not fit a frame (a port on ICMP, a VLAN op on
//! an untagged frame) skips it, and the other ops still apply.

use std::collections::HashMap;

use rand::Rng;

use crate::checksum::fold;
use crate::fields::{self, FieldOp};
use crate::spec::{FieldSpec, L4Kind};
use crate::template::Layout;

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
    pub fn new(specs: &[FieldSpec], path: &str) -> Result<Rewriter, crate::error::ProfileError> {
        let probe = Layout {
            vlan_tci: vec![],
            l3: 14,
            ipv6: false,
            l4: 34,
            l4_kind: L4Kind::Udp,
            payload: 42,
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
