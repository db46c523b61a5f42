//! The gapless signature: a 16-byte trailer at the end of the L4 payload.
//!
//! ```text
//! offset 0  2      magic "gL" (0x67 0x4c)
//! offset 2  2      stream id (big endian)
//! offset 4  4      sequence number (big endian, wraps at 2^32)
//! offset 8  8      TX timestamp, ns (big endian; CLOCK_REALTIME on interfaces, the
//!                  scheduled departure time on the pcap backend)
//! ```
//! It sits at the end of the L4 payload (found from the IP length, so Ethernet padding does
//! not hide it) and fits a 64-byte Ethernet/IPv4/UDP frame (42 B headers + 16 B < 60 B).

/// Length of the trailer in bytes.
pub const SIG_LEN: usize = 16;
/// The two magic bytes that open the trailer.
pub const SIG_MAGIC: [u8; 2] = [0x67, 0x4c];

/// One decoded signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub stream: u16,
    pub seq: u32,
    pub tx_ns: u64,
}

impl Signature {
    /// Writes the trailer into `out[..SIG_LEN]`.
    #[inline]
    pub fn write(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&SIG_MAGIC);
        out[2..4].copy_from_slice(&self.stream.to_be_bytes());
        self.write_moving(out);
    }

    /// Writes the parts that change from frame to frame, the sequence number and the TX
    /// stamp, into `out[..SIG_LEN]`, a trailer whose magic and stream id are written.
    #[inline(always)]
    pub fn write_moving(&self, out: &mut [u8]) {
        out[4..8].copy_from_slice(&self.seq.to_be_bytes());
        out[8..16].copy_from_slice(&self.tx_ns.to_be_bytes());
    }

    /// The checksum contribution of the trailer's words after the magic, read from an even
    /// offset. A 32-bit part counts whole: it is congruent to its two words' sum modulo
    /// 0xffff, which is all a ones'-complement sum keeps (`checksum::fold` folds through 32
    /// bits).
    #[inline(always)]
    pub fn word_sum(&self) -> u64 {
        u64::from(self.stream) + self.moving_sum()
    }

    /// [`Signature::word_sum`] of the sequence number and the TX stamp alone.
    #[inline(always)]
    pub fn moving_sum(&self) -> u64 {
        let t = self.tx_ns;
        u64::from(self.seq) + (t >> 32) + (t & 0xffff_ffff)
    }

    /// The magic's checksum contribution, read from an even offset.
    pub const MAGIC_SUM: u64 = u16::from_be_bytes(SIG_MAGIC) as u64;

    /// Reads the trailer at the end of an L4 payload, if the payload ends with one.
    #[inline]
    pub fn from_payload_end(l4_payload: &[u8]) -> Option<Signature> {
        if l4_payload.len() < SIG_LEN {
            return None;
        }
        let t = &l4_payload[l4_payload.len() - SIG_LEN..];
        if t[0..2] != SIG_MAGIC {
            return None;
        }
        Some(Signature {
            stream: u16::from_be_bytes([t[2], t[3]]),
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
            tx_ns: u64::from_be_bytes(t[8..16].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let s = Signature {
            stream: 0x0102,
            seq: 0xdead_beef,
            tx_ns: 0x1122_3344_5566_7788,
        };
        let mut payload = vec![0xaa; 30];
        let n = payload.len();
        s.write(&mut payload[n - SIG_LEN..]);
        assert_eq!(
            &payload[n - SIG_LEN..],
            &[0x67, 0x4c, 1, 2, 0xde, 0xad, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(Signature::from_payload_end(&payload), Some(s));
        payload[n - SIG_LEN] = 0;
        assert_eq!(Signature::from_payload_end(&payload), None);
        assert_eq!(Signature::from_payload_end(&payload[..10]), None);
    }
}
