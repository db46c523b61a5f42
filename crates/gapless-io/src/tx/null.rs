//! The null backend: frames are built and dropped. Measures the engine alone.

use super::TxBackend;
use crate::error::IoError;

pub struct NullTx {
    /// The buffers end to end, `stride` bytes each.
    bufs: Vec<u8>,
    stride: usize,
    /// Frames "sent" and a running XOR of their first bytes, so the optimiser cannot drop
    /// the work of building them.
    pub frames: u64,
    pub checksum: u8,
}

impl NullTx {
    pub fn new(max_frame: usize, max_batch: usize) -> NullTx {
        let stride = max_frame.max(1);
        NullTx {
            bufs: vec![0; stride * max_batch.max(1)],
            stride,
            frames: 0,
            checksum: 0,
        }
    }
}

impl TxBackend for NullTx {
    fn name(&self) -> &'static str {
        "null"
    }
    fn describe(&self) -> String {
        "frames are built and discarded".into()
    }
    fn max_batch(&self) -> usize {
        self.bufs.len() / self.stride
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.stride..][..self.stride]
    }
    fn buf_run(&mut self, first: usize, n: usize) -> Option<(&mut [u8], usize)> {
        Some((&mut self.bufs[first * self.stride..][..n * self.stride], self.stride))
    }
    fn send(&mut self, lens: &[usize], _at_ns: &[u64]) -> Result<usize, IoError> {
        for (b, l) in self.bufs.chunks_exact(self.stride).zip(lens) {
            self.checksum ^= b[l - 1];
        }
        self.frames += lens.len() as u64;
        Ok(lens.len())
    }
    fn finish(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn errors(&self) -> u64 {
        0
    }
    fn is_live(&self) -> bool {
        false
    }
}
