//! A template cut once to one frame length: the send loop's fast path for a variant whose
//! frames all have the same size (most streams).
//!
//! [`crate::packet::template::Template::finish_with`] sets the length fields and adds up
//! their checksum words for every frame. At one length all of that is the same each time,
//! so [`FixedFrame`] holds the frame with its lengths already written and the sums of every
//! word that does not change: per frame there remain the field ops' deltas and the
//! signature's words. The checksums come out the same (tests compare it frame by frame with
//! `finish_with`): ones'-complement sums do not depend on the order of their parts, and a
//! non-zero sum folds to the one representative in 1..=0xffff whatever the order.

use crate::packet::checksum::{at_offset, finish};
use crate::packet::signature::{Signature, SIG_LEN, SIG_MAGIC};
use crate::packet::template::Template;
use crate::spec::L4Kind;

/// A template cut to one length, with everything but the per-frame words precomputed.
#[derive(Debug, Clone)]
pub struct FixedFrame {
    /// The frame (no FCS) with its length fields set and both checksums left to fill.
    pub bytes: Box<[u8]>,
    /// IPv4: the header's sum with the total length (0 on IPv6, `ip_cs` unused).
    ip_sum: u64,
    ip_cs: Option<usize>,
    /// The L4 checksum's sum of every word that does not change from frame to frame.
    l4_sum: u64,
    l4_cs: usize,
    /// What a checksum that comes out 0 is written as: 0xffff for UDP (RFC 768), else 0.
    zero: u16,
    /// Whether the frame ends with the signature, and whether it starts at an odd offset of
    /// the payload (its words then count byte-swapped).
    signed: bool,
    sig_odd: bool,
}

impl FixedFrame {
    /// `t` cut to `len` bytes (no FCS), its signature (if any) carrying stream id `stream`;
    /// None where the fast path does not apply (ARP, a tunnel: their frames take
    /// `finish_with`).
    pub fn new(t: &Template, len: usize, stream: u16) -> Option<FixedFrame> {
        let ly = &t.layout;
        if ly.l4_kind == L4Kind::Arp || t.has_tunnel() || len > t.bytes.len() {
            return None;
        }
        let prefix = t.payload_sums();
        let mut bytes = t.bytes[..len].to_vec();
        let (ip_sum, mut l4_sum) = t.set_lengths(&mut bytes);
        let pl_len = len - ly.payload;
        let (signed, sig_odd) = match t.sig {
            true => {
                let body = pl_len - SIG_LEN;
                let odd = body % 2 == 1;
                l4_sum += prefix[body] + at_offset(Signature::MAGIC_SUM + u64::from(stream), odd);
                bytes[len - SIG_LEN..len - SIG_LEN + 2].copy_from_slice(&SIG_MAGIC);
                bytes[len - SIG_LEN + 2..len - SIG_LEN + 4].copy_from_slice(&stream.to_be_bytes());
                (true, odd)
            }
            false => {
                l4_sum += prefix[pl_len];
                (false, false)
            }
        };
        Some(FixedFrame {
            bytes: bytes.into_boxed_slice(),
            ip_sum,
            ip_cs: (!ly.ipv6).then_some(ly.l3 + 10),
            l4_sum,
            l4_cs: ly.l4_csum(),
            zero: if ly.l4_kind == L4Kind::Udp { 0xffff } else { 0 },
            signed,
            sig_odd,
        })
    }

    /// Adds words that every frame's sums hold to the constant sums (the field ops'
    /// [`crate::packet::hot::HotOp::neg`]).
    pub fn add_to_sums(&mut self, ip: u64, l4: u64) {
        self.ip_sum += ip;
        self.l4_sum += l4;
    }

    /// Writes the IPv4 header checksum into the frame once, for a variant whose field ops
    /// never touch that header: `finish` then leaves it as it is.
    pub fn freeze_ip_checksum(&mut self) {
        if let Some(c) = self.ip_cs.take() {
            self.bytes[c..c + 2].copy_from_slice(&finish(self.ip_sum).to_be_bytes());
        }
    }

    /// The frame's length (no FCS).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the frame is empty (never: a template has headers).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the signature and both checksums of `frame`, a
    /// copy of [`FixedFrame::bytes`] the field ops changed by `d_ip` / `d_l4`. The
    /// signature's magic and stream id are in the copy already (`sig.stream` is the one the
    /// frame was cut with).
    #[inline(always)]
    pub fn finish(&self, frame: &mut [u8], d_ip: u64, d_l4: u64, sig: &Signature) {
        self.finish_at(frame, self.checksums_at(), d_ip, d_l4, sig);
    }

    /// Where [`FixedFrame::finish`] writes the IPv4 (if it does) and L4 checksums: a loop
    /// over many frames checks them against the length once.
    #[inline(always)]
    pub fn checksums_at(&self) -> (Option<usize>, usize) {
        (self.ip_cs, self.l4_cs)
    }

    /// [`FixedFrame::finish`] with [`FixedFrame::checksums_at`] read once, outside the loop.
    #[inline(always)]
    pub fn finish_at(&self, frame: &mut [u8], at: (Option<usize>, usize), d_ip: u64, d_l4: u64, sig: &Signature) {
        let (ip_cs, l4_cs) = at;
        if let Some(c) = ip_cs {
            frame[c..][..2].copy_from_slice(&finish(self.ip_sum + d_ip).to_be_bytes());
        }
        let mut sum = self.l4_sum + d_l4;
        // The signature ends the frame: one length check instead of a range's two.
        if let (true, Some(tail)) = (self.signed, frame.last_chunk_mut::<SIG_LEN>()) {
            sig.write_moving(tail);
            sum += at_offset(sig.moving_sum(), self.sig_odd);
        }
        let c = match finish(sum) {
            0 => self.zero,
            c => c,
        };
        frame[l4_cs..][..2].copy_from_slice(&c.to_be_bytes());
    }
}
