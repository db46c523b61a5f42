//! The null backend: frames are built and dropped. Measures the engine alone.

use super::TxBackend;
use crate::error::IoError;

pub struct NullTx {
    bufs: Vec<Vec<u8>>,
    /// Frames "sent" and a running XOR of their first bytes, so the optimiser cannot drop
    /// the work of building them.
    pub frames: u64,
    pub checksum: u8,
}

impl NullTx {
    pub fn new(max_frame: usize, max_batch: usize) -> NullTx {
        NullTx {
            bufs: vec![vec![0; max_frame]; max_batch.max(1)],
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
        self.bufs.len()
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn send(&mut self, lens: &[usize], _at_ns: &[u64]) -> Result<usize, IoError> {
        for (i, l) in lens.iter().enumerate() {
            self.checksum ^= self.bufs[i][l - 1];
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
