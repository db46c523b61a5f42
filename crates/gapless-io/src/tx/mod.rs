//! TX backends under one trait, [`TxBackend`]: AF_PACKET ([`afpacket`], `sendmmsg`), a pcap
//! file ([`pcap`]), [`null`], the [`filler`] wrapper (`rate_control = "filler"`), and
//! several ports under one send loop ([`ports`]), and a LAG's members as one port, each
//! frame on a member by its hash ([`lag`]).
//! AF_XDP's TX is in [`crate::xdp`], beside its RX.
//!
//! May import `socket`, `kernel` and `files`; never `rx`.

pub mod afpacket;
pub mod filler;
pub mod lag;
pub mod null;
pub mod pcap;
pub mod ports;

use crate::error::IoError;

/// A packet sink. The engine fills buffers in place and sends them in batches.
///
/// Contract: `buf(i)` for `i < max_batch()` is at least `max_frame()` bytes long; `send`
/// transmits buffers `0..lens.len()` with those lengths (no FCS). `Err` means the backend can
/// no longer send (fatal); per-frame failures are counted in [`TxBackend::errors`].
pub trait TxBackend: Send {
    /// Short name for results: "afpacket", "pcap", "null".
    fn name(&self) -> &'static str;
    /// Details for results, e.g. the send method and socket options.
    fn describe(&self) -> String;
    /// Most frames one `send` takes.
    fn max_batch(&self) -> usize;
    /// Buffer for frame `i` of the next batch.
    fn buf(&mut self, i: usize) -> &mut [u8];
    /// Buffers `first..first + n` of the next batch as one region, buffer `first + j` at
    /// `j * stride` (each at least `max_frame()` bytes), where the backend lays them out so:
    /// a block is then built without a call per frame. `None` (the default): use `buf`.
    fn buf_run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        let _ = (first, n);
        None
    }
    /// Sends the batch. `at_ns` are the frames' scheduled times (the pcap backend writes them).
    /// Returns how many frames left (the rest failed and are counted in `errors`).
    fn send(&mut self, lens: &[usize], at_ns: &[u64]) -> Result<usize, IoError>;
    /// Completes pending output (the pcap file is renamed into place here).
    fn finish(&mut self) -> Result<(), IoError>;
    /// Frames that failed to send.
    fn errors(&self) -> u64;
    /// The last per-frame failure, for the result.
    fn last_error(&self) -> Option<String> {
        None
    }
    /// Whether the frames go out in real time (pace them, stamp them with the real clock).
    fn is_live(&self) -> bool;
    /// Whether the output's time axis is the schedule itself (a pcap file), rather than the
    /// wall clock.
    fn on_schedule_time(&self) -> bool {
        false
    }
    /// Whether the backend wants each frame's due time on the wall clock before `send` (TX
    /// timestamps, launch time).
    fn wants_due_times(&self) -> bool {
        false
    }
    /// The frames of the next `send`: frame `j` is due at `due_real_ns[j]` (CLOCK_REALTIME
    /// ns), and the wall clock read just before the send says `read_real_ns`.
    fn due_times(&mut self, _due_real_ns: &[u64], _read_real_ns: u64) {}
    /// The TX timestamps collected, matched to frames (taken once, after the last send).
    fn take_tx_stamps(&mut self) -> Option<gapless_core::result::departure_stamps::TxStampStats> {
        None
    }
    /// Where the TX stamps come from, when the backend's own kind says more than the request
    /// (AF_XDP's metadata stamps).
    fn tx_stamp_source(&self) -> Option<&'static str> {
        None
    }
    /// Whether the loop must name each departure's stream ([`TxBackend::select_stream`]):
    /// several ports under one loop ([`ports::TxPorts`]).
    fn routes_streams(&self) -> bool {
        false
    }
    /// The next frames built and sent are stream `stream`'s (the loop's index).
    fn select_stream(&mut self, _stream: usize) {}
    /// What the filler wrapper did (rate_control = "filler").
    fn filler_stats(&self) -> Option<gapless_core::packet::filler::FillerCounts> {
        None
    }
}

/// Finishes every backend of `all` (several ports, a LAG's members), each even when one
/// before it failed, and gives the first failure.
pub(crate) fn finish_all(all: &mut [Box<dyn TxBackend>]) -> Result<(), IoError> {
    let mut first = Ok(());
    for b in all {
        let r = b.finish();
        if first.is_ok() {
            first = r;
        }
    }
    first
}
