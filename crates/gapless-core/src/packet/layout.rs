//! Where a frame's headers sit ([`Layout`]), and the layer 4 checksum summed from a frame's
//! bytes by it ([`l4_sum`]): what a template, the fields set by hand and the rewrite of
//! replayed frames read.

use crate::packet::checksum::sum_be;
use crate::spec::L4Kind;

/// Offsets of the headers inside the frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Offset of each VLAN tag's TCI (outer first).
    pub vlan_tci: Vec<usize>,
    /// Start of the IP header.
    pub l3: usize,
    pub ipv6: bool,
    /// Start of the L4 header.
    pub l4: usize,
    pub l4_kind: L4Kind,
    /// Start of the L4 payload.
    pub payload: usize,
    /// A tunnel's outer headers, where the frame has them.
    pub outer: Option<crate::packet::tunnel::Tunnel>,
}

impl Layout {
    /// Offset of the L4 checksum field.
    pub fn l4_csum(&self) -> usize {
        match self.l4_kind {
            L4Kind::Udp => self.l4 + 6,
            L4Kind::Tcp => self.l4 + 16,
            L4Kind::Icmp => self.l4 + 2,
            // ARP and a bare IP packet have none: nothing reads or writes this.
            L4Kind::Arp | L4Kind::None => self.l4,
        }
    }

    /// Whether the frame has a layer 4 checksum to keep (not ARP, not a bare IP packet).
    pub fn has_l4_csum(&self) -> bool {
        !matches!(self.l4_kind, L4Kind::Arp | L4Kind::None)
    }
}

/// The partial sum of the layer 4 checksum over the frame's bytes (its checksum field read
/// as it is): the pseudo header with protocol `proto` and the real length (none for ICMPv4),
/// then the layer 4 header and payload.
pub(crate) fn l4_sum(f: &[u8], ly: &Layout, proto: u64) -> u64 {
    let l3 = ly.l3;
    let l4_len = (f.len() - ly.l4) as u64;
    let pseudo = if ly.ipv6 {
        sum_be(&f[l3 + 8..l3 + 40]) + (l4_len >> 16) + (l4_len & 0xffff) + proto
    } else if ly.l4_kind != L4Kind::Icmp {
        sum_be(&f[l3 + 12..l3 + 20]) + l4_len + proto
    } else {
        0
    };
    pseudo + sum_be(&f[ly.l4..])
}
