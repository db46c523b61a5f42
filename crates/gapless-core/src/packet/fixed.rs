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

use crate::packet::checksum::{at_offset, finish, fold_wide};
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
    /// None where the fast path does not apply (ARP, a bare IP packet, a tunnel, fields set by
    /// hand: their frames take `finish_with`).
    pub fn new(t: &Template, len: usize, stream: u16) -> Option<FixedFrame> {
        let ly = &t.layout;
        if !ly.has_l4_csum() || t.has_tunnel() || t.hand().is_some() || len > t.bytes.len() {
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
        if let Some(c) = self.ip_cs {
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
        frame[self.l4_cs..][..2].copy_from_slice(&c.to_be_bytes());
    }

    /// Where [`FixedFrame::store_at`] writes the IPv4 and the L4 checksum, for a loop over
    /// many frames to check against the length once. A frame without an IPv4 checksum to
    /// write (IPv6, or one frozen in the template) gets the L4 offset twice: the IPv4 store
    /// comes first, and the L4 checksum overwrites it (no branch per frame).
    #[inline(always)]
    pub fn checksums_at(&self) -> (usize, usize) {
        (self.ip_cs.unwrap_or(self.l4_cs), self.l4_cs)
    }

    /// The checksum fields of a block of frames, in columns (loops of shifts, masks and adds
    /// that vectorise), for [`FixedFrame::store_at`]: frame `j`, changed by the field ops
    /// by `d_ip[j]` / `d_l4[j]` and signed `sig` with its sequence number moved on by
    /// `j * lanes` and its TX stamp `ats[j]`, gets `d_ip[j]` / `d_l4[j]` replaced by its
    /// IPv4 / L4 checksum field: the values [`FixedFrame::finish`] writes. (`d_ip` is left
    /// as it is where there is no IPv4 checksum to write.)
    #[inline(always)]
    pub fn block_checksums(&self, d_ip: &mut [u64], d_l4: &mut [u64], ats: &[u64], sig: Signature, lanes: u32) {
        if self.ip_cs.is_some() {
            let k = self.ip_sum;
            d_ip.iter_mut().for_each(|d| *d = 0xffff - fold_wide(k + *d));
        }
        // A sum that folds to 0xffff (a zero checksum) is written as `zero`: UDP's 0xffff
        // takes `f mod 0xffff` (0 for 0xffff), the others `f`.
        let (k, udp) = (self.l4_sum, u64::from(self.zero == 0xffff));
        let field = |sum: u64| {
            let f = fold_wide(k + sum);
            0xffff - ((f + (((f + 1) >> 16) & udp)) & 0xffff)
        };
        if !self.signed {
            d_l4.iter_mut().for_each(|d| *d = field(*d));
            return;
        }
        let (seq0, lanes) = (u64::from(sig.seq), u64::from(lanes));
        let moving = |j: usize, t: u64| ((seq0 + j as u64 * lanes) & 0xffff_ffff) + (t >> 32) + (t & 0xffff_ffff);
        let frames = d_l4.iter_mut().zip(ats).enumerate();
        match self.sig_odd {
            false => frames.for_each(|(j, (d, &t))| *d = field(*d + moving(j, t))),
            // At an odd offset the trailer's folded sum counts byte-swapped (`at_offset`).
            true => frames.for_each(|(j, (d, &t))| {
                let f = fold_wide(moving(j, t));
                *d = field(*d + (((f & 0xff) << 8) | (f >> 8)));
            }),
        }
    }

    /// Writes the signature's moving words (the sequence number and TX stamp) and the two
    /// checksum fields of a frame of a block ([`FixedFrame::block_checksums`]) at `at`
    /// ([`FixedFrame::checksums_at`]), into a copy of [`FixedFrame::bytes`] with its field
    /// values stored.
    #[inline(always)]
    pub fn store_at(&self, frame: &mut [u8], at: (usize, usize), ip: u64, l4: u64, sig: &Signature) {
        frame[at.0..][..2].copy_from_slice(&(ip as u16).to_be_bytes());
        if let (true, Some(tail)) = (self.signed, frame.last_chunk_mut::<SIG_LEN>()) {
            sig.write_moving(tail);
        }
        frame[at.1..][..2].copy_from_slice(&(l4 as u16).to_be_bytes());
    }
}
