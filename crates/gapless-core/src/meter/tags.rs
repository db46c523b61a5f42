//! Metric tags: bits of a received frame, at fixed places, that split a stream's count by
//! their value (OTG's `metric_tags`: the DSCP a DUT marked, the VLAN it pushed, the MAC it
//! rewrote). Each stream may name up to [`MAX_TAG_BITS`] bits in all; the meter counts at
//! most [`MAX_TAG_VALUES`] distinct values of them, and frames with further values are
//! counted apart (`untracked_frames`), never dropped.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use crate::spec::TagField;

/// Bits a stream's tags may take in all: their values together are one 64-bit key.
pub const MAX_TAG_BITS: u32 = 64;
/// Distinct values a stream's tags are counted for; frames with others are counted apart.
pub const MAX_TAG_VALUES: usize = 4096;

impl TagField {
    /// The tag's value in `frame`, or none when the frame ends before it.
    #[inline]
    pub fn read(&self, frame: &[u8]) -> Option<u64> {
        let first = (self.bit / 8) as usize;
        let last = ((self.bit + self.bits - 1) / 8) as usize;
        let bytes = frame.get(first..=last)?;
        // At most 9 bytes: the bits, then the spare bits of the last byte dropped.
        let wide = bytes.iter().fold(0u128, |acc, &b| acc << 8 | u128::from(b));
        let spare = (last as u32 + 1) * 8 - (self.bit + self.bits);
        let mask = if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        Some((wide >> spare) as u64 & mask)
    }

    /// `value` as OTG's `value-as-hex`: `0x` and the value zero-padded to the tag's width.
    pub fn hex(&self, value: u64) -> String {
        let digits = self.bits.div_ceil(4) as usize;
        format!("0x{value:0digits$x}")
    }
}

/// What a stream's tags may be: a reason when they can't be metered.
pub fn check(tags: &[TagField]) -> Result<(), String> {
    let total: u32 = tags.iter().map(|t| t.bits).sum();
    if let Some(t) = tags.iter().find(|t| t.bits == 0 || t.bits > 64) {
        return Err(format!("tag {:?} is {} bits wide; give it 1 to 64", t.name, t.bits));
    }
    if total > MAX_TAG_BITS {
        return Err(format!(
            "the tags take {total} bits in all; a stream may tag at most {MAX_TAG_BITS}"
        ));
    }
    let mut names: Vec<&str> = tags.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("two tags are named {:?}; give each its own name", w[0]));
    }
    Ok(())
}

/// The frames of one value of a stream's tags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TagCount {
    pub frames: u64,
    /// Bytes at L2 without FCS, as captured.
    pub bytes: u64,
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
}

/// One value of a stream's tags and its frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaggedRx {
    /// Each tag's value, in the order of [`TagsRx::tags`].
    pub values: Vec<u64>,
    #[serde(flatten)]
    pub count: TagCount,
}

/// A stream's frames by the value of its tags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TagsRx {
    pub tags: Vec<TagField>,
    /// By value, in the order of their keys.
    pub values: Vec<TaggedRx>,
    /// Frames too short to hold the tags, or with a value beyond the first
    /// [`MAX_TAG_VALUES`].
    pub untracked_frames: u64,
}

/// Counts a stream's frames by the value of its tags.
#[derive(Debug, Clone)]
pub struct TagTable {
    tags: Vec<TagField>,
    counts: HashMap<u64, TagCount>,
    untracked: u64,
}

impl TagTable {
    pub fn new(tags: Vec<TagField>) -> TagTable {
        TagTable {
            tags,
            counts: HashMap::new(),
            untracked: 0,
        }
    }

    /// The tags' values in `frame` as one key (the first tag in the highest bits).
    #[inline]
    fn key(&self, frame: &[u8]) -> Option<u64> {
        let mut key = 0u64;
        for t in &self.tags {
            key = key.checked_shl(t.bits).unwrap_or(0) | t.read(frame)?;
        }
        Some(key)
    }

    /// Takes one frame of the stream.
    #[inline]
    pub fn on_frame(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) {
        let Some(key) = self.key(frame) else {
            self.untracked += 1;
            return;
        };
        let full = self.counts.len() >= MAX_TAG_VALUES;
        let c = match self.counts.get_mut(&key) {
            Some(c) => c,
            None if full => {
                self.untracked += 1;
                return;
            }
            None => self.counts.entry(key).or_insert(TagCount {
                first_rx_ns: ts_ns,
                ..TagCount::default()
            }),
        };
        c.frames += 1;
        c.bytes += u64::from(wire_len);
        c.last_rx_ns = c.last_rx_ns.max(ts_ns);
    }

    /// `key` split back into each tag's value.
    fn values(&self, mut key: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .tags
            .iter()
            .rev()
            .map(|t| {
                let mask = if t.bits == 64 { u64::MAX } else { (1u64 << t.bits) - 1 };
                let x = key & mask;
                key = key.checked_shr(t.bits).unwrap_or(0);
                x
            })
            .collect();
        v.reverse();
        v
    }

    /// The counts so far.
    pub fn report(&self) -> TagsRx {
        let mut keys: Vec<&u64> = self.counts.keys().collect();
        keys.sort_unstable();
        TagsRx {
            tags: self.tags.clone(),
            values: keys
                .into_iter()
                .map(|k| TaggedRx {
                    values: self.values(*k),
                    count: self.counts[k],
                })
                .collect(),
            untracked_frames: self.untracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str, bit: u32, bits: u32) -> TagField {
        TagField {
            name: name.into(),
            bit,
            bits,
        }
    }

    #[test]
    fn reads_bits_across_bytes() {
        let frame = [0b1011_0110, 0b0101_1100, 0xff];
        assert_eq!(tag("a", 0, 8).read(&frame), Some(0b1011_0110));
        assert_eq!(tag("a", 0, 6).read(&frame), Some(0b10_1101));
        assert_eq!(tag("a", 6, 2).read(&frame), Some(0b10));
        assert_eq!(tag("a", 4, 8).read(&frame), Some(0b0110_0101));
        assert_eq!(tag("a", 20, 5).read(&frame), None, "beyond the frame's end");
        let long: Vec<u8> = (1..=9).collect();
        assert_eq!(tag("a", 4, 64).read(&long), Some(0x1020_3040_5060_7080));
    }

    #[test]
    fn hex_is_padded_to_the_width() {
        assert_eq!(tag("d", 0, 6).hex(0x2e), "0x2e");
        assert_eq!(tag("d", 0, 6).hex(1), "0x01");
        assert_eq!(tag("e", 0, 2).hex(3), "0x3");
        assert_eq!(tag("m", 0, 12).hex(0xab), "0x0ab");
    }

    #[test]
    fn counts_by_value_of_two_tags() {
        // An IPv4 TOS byte at byte 15 of an untagged frame: DSCP 6 bits, ECN 2.
        let mut t = TagTable::new(vec![tag("dscp", 120, 6), tag("ecn", 126, 2)]);
        let frame = |tos: u8| {
            let mut f = vec![0u8; 64];
            f[15] = tos;
            f
        };
        for (i, tos) in [0xb8u8, 0xb8, 0x28, 0xb9].iter().enumerate() {
            t.on_frame(100 + i as u64, &frame(*tos), 64);
        }
        t.on_frame(200, &[0u8; 10], 10);
        let r = t.report();
        let got: Vec<(Vec<u64>, u64)> = r.values.iter().map(|v| (v.values.clone(), v.count.frames)).collect();
        assert_eq!(got, vec![(vec![10, 0], 1), (vec![46, 0], 2), (vec![46, 1], 1)]);
        assert_eq!(r.values[1].count.first_rx_ns, 100);
        assert_eq!(r.values[1].count.last_rx_ns, 101);
        assert_eq!(r.values[1].count.bytes, 128);
        assert_eq!(r.untracked_frames, 1, "a frame too short for the tags");
    }

    #[test]
    fn values_beyond_the_cap_are_counted_apart() {
        let mut t = TagTable::new(vec![tag("v", 0, 16)]);
        for v in 0..(MAX_TAG_VALUES as u16 + 10) {
            t.on_frame(1, &v.to_be_bytes(), 2);
        }
        let r = t.report();
        assert_eq!((r.values.len(), r.untracked_frames), (MAX_TAG_VALUES, 10));
    }

    #[test]
    fn refuses_what_it_cannot_meter() {
        assert!(check(&[tag("a", 0, 40), tag("b", 40, 24)]).is_ok());
        let e = check(&[tag("a", 0, 40), tag("b", 40, 25)]).unwrap_err();
        assert!(e.contains("65 bits") && e.contains("at most 64"), "{e}");
        assert!(check(&[tag("a", 0, 0)]).unwrap_err().contains("1 to 64"));
        assert!(check(&[tag("a", 0, 3), tag("a", 3, 3)])
            .unwrap_err()
            .contains("two tags"));
    }
}
