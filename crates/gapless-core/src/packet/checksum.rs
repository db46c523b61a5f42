//! Internet checksum (RFC 1071) arithmetic.
//!
//! Sums are kept unfolded in a `u64` so that parts can be added in any order; fold once at the end.
//! A part that starts at an odd byte offset inside the checksummed region is byte-swapped
//! (RFC 1071 §2(B), byte-order independence), which [`sum_at`] does.

/// Ones'-complement partial sum of `bytes` read as big-endian 16-bit words starting at an even
/// offset. An odd trailing byte is padded with zero on the right.
#[inline]
pub fn sum_be(bytes: &[u8]) -> u64 {
    // Used on templates and by the tests; the per-frame path (`Template::finish_with`)
    // does not read frames back at all.
    let mut sum = 0u64;
    let mut pairs = bytes.chunks_exact(2);
    for p in &mut pairs {
        sum += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [b] = pairs.remainder() {
        sum += u64::from(*b) << 8;
    }
    sum
}

/// Partial sum of `bytes` that start at an even (`odd == false`) or odd offset of the region.
#[inline]
pub fn sum_at(bytes: &[u8], odd: bool) -> u64 {
    at_offset(sum_be(bytes), odd)
}

/// A part's sum `s` (its words read from an even offset) where the part starts at an even
/// (`odd == false`) or odd offset of the checksummed region: at an odd offset the bytes swap
/// roles (RFC 1071 §2(B)).
#[inline(always)]
pub fn at_offset(s: u64, odd: bool) -> u64 {
    if odd {
        u64::from(fold(s).swap_bytes())
    } else {
        s
    }
}

/// Folds a partial sum to 16 bits (not complemented).
#[inline]
pub fn fold(sum: u64) -> u16 {
    // Ones'-complement additions with the end-around carry: 64 -> 32 -> 16 bits, no loop.
    // After a carry the sum is at most 2^n - 2, so adding the carry back cannot carry again.
    let (s, c) = ((sum >> 32) as u32).overflowing_add(sum as u32);
    let s = s + u32::from(c);
    let (t, c) = ((s >> 16) as u16).overflowing_add(s as u16);
    t + u16::from(c)
}

/// [`fold`] as a chain of shifts, masks and adds (no carry flag), so that a loop of them over
/// many sums vectorises; the same value for every `sum` under 2^48. Four end-around folds
/// of 16 bits take any such sum under 0x10000 (after each: under 2^32 + 2^16, at most
/// 0x20000, at most 0x10001, at most 0xffff), and each keeps the sum modulo 0xffff and
/// keeps a non-zero sum non-zero: the one representative in 1..=0xffff, as `fold` gives.
#[inline(always)]
pub fn fold_wide(sum: u64) -> u64 {
    let s = (sum >> 16) + (sum & 0xffff);
    let s = (s >> 16) + (s & 0xffff);
    let s = (s >> 16) + (s & 0xffff);
    (s >> 16) + (s & 0xffff)
}

/// The checksum field value for a partial sum: the complement of the folded sum.
#[inline]
pub fn finish(sum: u64) -> u16 {
    !fold(sum)
}

/// Overwrites `f[at..at + new.len()]` with `new` and updates the ones'-complement checksum
/// stored at `cs`, whose summed region starts at `from`, incrementally (RFC 1624, eqn. 3): the
/// window's old words out, its new words in. A UDP checksum (`udp`) that comes to 0 is sent
/// as 0xffff.
#[inline(always)]
pub fn replace_in(f: &mut [u8], from: usize, at: usize, new: &[u8], cs: usize, udp: bool) {
    let odd = (at - from) % 2 == 1;
    let window = at..at + new.len();
    let old = fold(sum_at(&f[window.clone()], odd));
    f[window].copy_from_slice(new);
    let hc = u16::from_be_bytes([f[cs], f[cs + 1]]);
    let mut c = finish(u64::from(!hc) + u64::from(!old) + sum_at(new, odd));
    if c == 0 && udp {
        c = 0xffff;
    }
    f[cs..cs + 2].copy_from_slice(&c.to_be_bytes());
}

/// Prefix sums of a byte string: `prefix[k]` is the partial sum of `bytes[..k]`, for k in 0..=len.
/// This makes the checksum of any truncation of the payload an O(1) look-up.
pub fn prefix_sums(bytes: &[u8]) -> Vec<u64> {
    let mut out = Vec::with_capacity(bytes.len() + 1);
    let mut sum = 0u64;
    out.push(0);
    for (i, b) in bytes.iter().enumerate() {
        sum += if i % 2 == 0 { u64::from(*b) << 8 } else { u64::from(*b) };
        out.push(sum);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_be(&b)), 0xddf2);
        assert_eq!(finish(sum_be(&b)), !0xddf2);
    }

    #[test]
    fn split_at_odd_offset_matches_whole() {
        let data: Vec<u8> = (0u8..=200).map(|x| x.wrapping_mul(37)).collect();
        let whole = fold(sum_be(&data));
        for cut in 0..data.len() {
            let parts = sum_at(&data[..cut], false) + sum_at(&data[cut..], cut % 2 == 1);
            assert_eq!(fold(parts), whole, "cut at {cut}");
        }
    }

    #[test]
    fn fold_matches_the_loop_at_the_edges() {
        let looped = |mut s: u64| {
            while s >> 16 != 0 {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        };
        let edges = [
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            0xffff_ffff_ffff_ffff,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut all: Vec<u64> = edges.to_vec();
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            all.extend([x, x >> 20, x >> 40, x & 0x3_ffff]);
        }
        all.extend([0xffff_ffff_ffff, 0xffff_0000_ffff, 0x1_0000_ffff, 0x1_ffff_fffe]);
        for s in all {
            assert_eq!(fold(s), looped(s), "fold({s:#x}): expected the loop's value");
            let w = s & 0xffff_ffff_ffff;
            assert_eq!(
                fold_wide(w),
                u64::from(fold(w)),
                "fold_wide({w:#x}): expected fold's value"
            );
        }
    }

    #[test]
    fn prefix_sums_match_direct() {
        let data: Vec<u8> = (0u8..=99).map(|x| x ^ 0x5a).collect();
        let p = prefix_sums(&data);
        for k in 0..=data.len() {
            assert_eq!(fold(p[k]), fold(sum_be(&data[..k])), "k={k}");
        }
    }
}
