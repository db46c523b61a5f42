//! A capture on the meter's RX path: while armed, every frame the meter takes is also kept,
//! whole as it was on the wire (padded to 60 bytes and with its FCS, which the kernel
//! strips: `dump::on_the_wire`), with its receive time in ns (the meter's own timestamp),
//! cut to the snap length, in a buffer bounded in bytes. A frame that does not fit is counted, never kept silently short:
//! [`CaptureStats::dropped`] says how many, and the reader reports it.
//!
//! The meter loop offers frames ([`Capture::offer`]: one relaxed load when disarmed, a lock
//! the loop shares only with a reader taking the frames); whoever made the capture arms it,
//! disarms it and takes the frames as a pcap or pcapng file ([`Capture::file`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gapless_io::files::dump::{self, Frame};

/// The file format of [`Capture::file`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
}

/// What a capture holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureStats {
    pub frames: u64,
    pub bytes: u64,
    /// Frames offered while armed that the buffer had no room for.
    pub dropped: u64,
    pub armed: bool,
}

/// A bounded capture buffer (see the module's doc).
pub struct Capture {
    snaplen: usize,
    max_bytes: usize,
    armed: AtomicBool,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    frames: Vec<Frame>,
    bytes: usize,
    dropped: u64,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Capture {{ snaplen: {}, max_bytes: {}, {:?} }}",
            self.snaplen,
            self.max_bytes,
            self.stats()
        )
    }
}

/// The largest buffer a capture may ask for, and the default.
pub const MAX_BYTES: usize = 1 << 30;
pub const DEFAULT_BYTES: usize = 64 << 20;

impl Capture {
    /// A disarmed capture keeping at most `snaplen` bytes of each frame (0: all of it) and
    /// `max_bytes` in all (at most [`MAX_BYTES`]).
    pub fn new(snaplen: usize, max_bytes: usize) -> Arc<Capture> {
        Arc::new(Capture {
            snaplen: if snaplen == 0 { 65_535 } else { snaplen },
            max_bytes: max_bytes.min(MAX_BYTES),
            armed: AtomicBool::new(false),
            held: Mutex::new(Held::default()),
        })
    }

    /// Starts keeping frames; `clear` first drops what it holds (OTG's `overwrite`).
    pub fn arm(&self, clear: bool) {
        if clear {
            *self.lock() = Held::default();
        }
        self.armed.store(true, Ordering::Release);
    }

    /// Stops keeping frames; what it holds stays.
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::Release);
    }

    /// The meter loop's offer of a frame it took.
    #[inline]
    pub fn offer(&self, ts_ns: u64, data: &[u8], wire_len: u32) {
        if self.armed.load(Ordering::Relaxed) {
            self.keep(ts_ns, data, wire_len);
        }
    }

    /// Keeps the frame whole, as it was on the wire: padded and with its FCS (the kernel
    /// strips it), then cut to the snap length.
    #[cold]
    fn keep(&self, ts_ns: u64, data: &[u8], wire_len: u32) {
        let (data, wire_len) = dump::on_the_wire(data, wire_len, self.snaplen);
        let mut h = self.lock();
        if h.bytes + data.len() > self.max_bytes {
            h.dropped += 1;
            return;
        }
        h.bytes += data.len();
        h.frames.push(Frame { ts_ns, wire_len, data });
    }

    pub fn stats(&self) -> CaptureStats {
        let h = self.lock();
        CaptureStats {
            frames: h.frames.len() as u64,
            bytes: h.bytes as u64,
            dropped: h.dropped,
            armed: self.armed.load(Ordering::Relaxed),
        }
    }

    /// What it holds as a capture file, with its stats (frames stay held).
    pub fn file(&self, format: CaptureFormat) -> Result<(Vec<u8>, CaptureStats), String> {
        let stats = self.stats();
        let h = self.lock();
        let bytes = match format {
            CaptureFormat::Pcap => dump::pcap(&h.frames, self.snaplen as u32)?,
            CaptureFormat::PcapNg => dump::pcapng(&h.frames, self.snaplen as u32, dump::FCS_LEN)?,
        };
        Ok((bytes, stats))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_armed_frames_are_kept_cut_to_the_snap_length_and_a_full_buffer_counts_its_drops() {
        let c = Capture::new(100, 250);
        c.offer(1, &[1; 200], 200);
        assert_eq!(c.stats().frames, 0, "expected nothing kept while disarmed");
        c.arm(false);
        for k in 0..4 {
            c.offer(10 + k, &[2; 200], 204);
        }
        c.disarm();
        c.offer(99, &[3; 10], 10);
        let s = c.stats();
        assert_eq!(
            (s.frames, s.bytes, s.dropped, s.armed),
            (2, 200, 2, false),
            "expected two 100-byte cuts kept and two dropped for room; got {s:?}"
        );
        let (file, _) = c.file(CaptureFormat::Pcap).unwrap();
        assert_eq!(
            file.len(),
            24 + 2 * (16 + 100),
            "a pcap header and two records of 100 bytes"
        );
        c.arm(true);
        assert_eq!(c.stats().frames, 0, "expected overwrite to start empty");
    }
}
