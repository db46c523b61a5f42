//! Filler frames (*Mind the Gap*'s "corrupted CRC" rate control): the sender keeps the link
//! busy back to back at line rate and fills each gap between two payload frames with frames
//! the device under test drops, sized so that the next payload frame starts on the wire at
//! its scheduled time.
//!
//! Everything here counts in byte times on the wire. A frame of `n` bytes (FCS included)
//! occupies `n + 20` byte times: 7 B preamble, 1 B start-of-frame delimiter, the frame, and
//! the 12 B inter-frame gap. A filler is at least 64 B (84 byte times) and at most the
//! largest frame the link takes. A gap shorter than the shortest filler cannot be filled: the
//! payload frame then starts that much early, and the next gap is that much longer (the
//! rounding carries over, so the schedule never drifts). A payload frame whose time has
//! passed (the link was still busy) starts as soon as the link is free.

/// Preamble, SFD and inter-frame gap: the wire bytes around every frame.
pub const WIRE_OVERHEAD: u64 = 20;
/// The shortest filler frame, FCS included.
pub const MIN_FILLER: u64 = 64;
/// The EtherType of filler frames: IEEE 802 local experimental EtherType 1.
pub const FILLER_ETHERTYPE: u16 = 0x88B5;
/// What a filler frame carries after its EtherType, so a meter tells it from other traffic.
pub const FILLER_MAGIC: &[u8; 8] = b"GLFILLER";
/// The default destination: 01:80:C2:00:00:0F, an IEEE 802.1 reserved group address
/// ("reserved for future standardization") that bridges never forward.
pub const FILLER_DST: [u8; 6] = [0x01, 0x80, 0xC2, 0x00, 0x00, 0x0F];

/// Whether a frame is a gapless filler.
#[inline]
pub fn is_filler(frame: &[u8]) -> bool {
    frame.len() >= 22
        && frame[0] == 0x01
        && frame[1..5] == [0x80, 0xC2, 0x00, 0x00]
        && frame[12..14] == FILLER_ETHERTYPE.to_be_bytes()
        && &frame[14..22] == FILLER_MAGIC
}

/// Writes a filler frame of `len` bytes (as handed to the socket) into `buf`.
pub fn write_filler(buf: &mut [u8], len: usize, dst: [u8; 6], src: [u8; 6]) {
    let b = &mut buf[..len];
    b.fill(0);
    b[..6].copy_from_slice(&dst);
    b[6..12].copy_from_slice(&src);
    b[12..14].copy_from_slice(&FILLER_ETHERTYPE.to_be_bytes());
    b[14..22].copy_from_slice(FILLER_MAGIC);
}

/// Where one payload frame went on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// Its start on the wire (first preamble byte), byte times since the run's start.
    pub start: u64,
    /// Start minus target, byte times (negative: early, from a gap too short to fill).
    pub error: f64,
}

/// What a filler plan did: the fillers, and where the payload frames went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FillerCounts {
    pub fillers: u64,
    pub filler_bytes: u64,
    pub payloads: u64,
    /// Payload frames that started early: their gap was shorter than the shortest filler.
    pub carried: u64,
    /// Payload frames that started late: the link was busy at their time.
    pub late: u64,
    /// The largest |start − target| of a payload frame after a filled gap, byte times.
    pub max_abs_error: f64,
}

impl FillerCounts {
    /// Adds another send loop's counts.
    pub fn add(&mut self, o: &FillerCounts) {
        self.fillers += o.fillers;
        self.filler_bytes += o.filler_bytes;
        self.payloads += o.payloads;
        self.carried += o.carried;
        self.late += o.late;
        self.max_abs_error = self.max_abs_error.max(o.max_abs_error);
    }
}

/// The wire timeline of one link: where the link is free next, and what was filled.
#[derive(Debug, Clone)]
pub struct FillerPlan {
    /// Bytes per ns at the link's speed.
    bytes_per_ns: f64,
    /// Largest filler, FCS included.
    max_filler: u64,
    /// The link is free from this byte time on.
    free_at: u64,
    pub counts: FillerCounts,
}

impl FillerPlan {
    /// A plan for a link of `link_bps` whose largest frame is `max_frame` (FCS included).
    pub fn new(link_bps: f64, max_frame: u64) -> FillerPlan {
        FillerPlan {
            bytes_per_ns: link_bps / 8e9,
            max_filler: max_frame.max(MIN_FILLER * 2),
            free_at: 0,
            counts: FillerCounts::default(),
        }
    }

    /// Byte times to ns.
    pub fn ns(&self, bytes: u64) -> f64 {
        bytes as f64 / self.bytes_per_ns
    }

    /// Places a payload frame of `frame` bytes (FCS included) due at `at_ns`: pushes the
    /// fillers that come before it (their sizes, FCS included) onto `fillers`, and returns
    /// where the payload starts.
    pub fn place(&mut self, at_ns: f64, frame: u64, fillers: &mut Vec<u64>) -> Placed {
        let target = at_ns * self.bytes_per_ns;
        let want = target.round().max(0.0) as u64;
        let gap = want.saturating_sub(self.free_at);
        let min_wire = MIN_FILLER + WIRE_OVERHEAD;
        if gap >= min_wire {
            let max_wire = self.max_filler + WIRE_OVERHEAD;
            let n = gap.div_ceil(max_wire);
            for i in 0..n {
                // n nearly equal pieces, each of at least max_wire / 2 > min_wire.
                let piece = gap / n + u64::from(i < gap % n);
                fillers.push(piece - WIRE_OVERHEAD);
                self.counts.filler_bytes += piece - WIRE_OVERHEAD;
            }
            self.counts.fillers += n;
            self.free_at += gap;
        } else if gap > 0 {
            self.counts.carried += 1;
        } else if want < self.free_at {
            self.counts.late += 1;
        }
        let start = self.free_at;
        self.free_at += frame + WIRE_OVERHEAD;
        self.counts.payloads += 1;
        let error = start as f64 - target;
        if gap >= min_wire || gap == 0 && want == start {
            self.counts.max_abs_error = self.counts.max_abs_error.max(error.abs());
        }
        Placed { start, error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_64b_at_10g_half_load_fills_each_gap_with_one_minimum_frame() {
        // 64 B frames at 7.44 Mpps (half of 14.88 Mpps): each gap is 84 byte times.
        let mut p = FillerPlan::new(10e9, 1518);
        let gap_ns = 2.0 * 84.0 * 0.8;
        let mut f = Vec::new();
        for k in 0..1000 {
            f.clear();
            let pl = p.place(k as f64 * gap_ns, 64, &mut f);
            assert_eq!(pl.start, k * 168);
            assert!(pl.error.abs() < 1e-6);
            if k > 0 {
                assert_eq!(f, vec![64]);
            }
        }
        assert_eq!((p.counts.fillers, p.counts.carried, p.counts.late), (999, 0, 0));
    }

    #[test]
    fn long_gaps_split_into_fillers_no_longer_than_the_largest_frame() {
        let mut p = FillerPlan::new(1e9, 1518);
        let mut f = Vec::new();
        p.place(0.0, 64, &mut f);
        let pl = p.place(100_000.0, 64, &mut f); // 12 500 byte times later
        assert_eq!(pl.start, 12_500);
        assert!(f.iter().all(|&x| (64..=1518).contains(&x)), "{f:?}");
        let wire: u64 = f.iter().map(|x| x + 20).sum();
        assert_eq!(wire, 12_500 - 84);
    }

    #[test]
    fn short_gaps_carry_over_and_the_schedule_does_not_drift() {
        let mut p = FillerPlan::new(10e9, 1518);
        let mut f = Vec::new();
        // 64 B every 100 byte times: 16 spare byte times each, too few for a filler.
        for k in 0..100u64 {
            p.place(k as f64 * 80.0, 64, &mut f);
        }
        assert!(p.counts.carried > 0);
        // Every 16/84 frames, the carried gaps add up to a filler: the mean rate holds.
        let last = p.place(100.0 * 80.0, 64, &mut f);
        assert!(last.error.abs() <= 84.0, "{last:?}");
    }

    #[test]
    fn fillers_are_recognised() {
        let mut b = [0u8; 64];
        write_filler(&mut b, 60, FILLER_DST, [2, 0, 0, 0, 0, 1]);
        assert!(is_filler(&b[..60]));
        b[13] = 0;
        assert!(!is_filler(&b[..60]));
    }
}
