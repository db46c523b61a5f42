//! The pcap backend: a nanosecond pcap whose timestamps are the scheduled departure times
//! (ns since the run's start, so the file starts at the Unix epoch). The same profile and
//! seed give the same file, byte for byte. Written to a temporary file in the same directory
//! and renamed into place by [`TxBackend::finish`].

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapTsResolution, PcapWriter};
use pcap_file::{DataLink, Endianness};

use super::TxBackend;
use crate::error::IoError;
use crate::files::atomic::AtomicFile;

pub struct PcapTx {
    path: PathBuf,
    tmp: Option<AtomicFile>,
    writer: Option<PcapWriter<BufWriter<File>>>,
    bufs: Vec<Vec<u8>>,
    frames: u64,
}

impl PcapTx {
    pub fn create(path: &Path, max_frame: usize, max_batch: usize) -> Result<PcapTx, IoError> {
        let err = |m: String| IoError::Pcap {
            path: path.display().to_string(),
            message: m,
        };
        path.file_name().ok_or_else(|| err("not a file name".into()))?;
        let mut tmp = AtomicFile::create(path).map_err(|e| err(e.to_string()))?;
        let f = tmp.file().try_clone().map_err(|e| err(e.to_string()))?;
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: 65535,
            datalink: DataLink::ETHERNET,
            ts_resolution: PcapTsResolution::NanoSecond,
            endianness: Endianness::Little,
        };
        let writer =
            PcapWriter::with_header(BufWriter::with_capacity(1 << 20, f), header).map_err(|e| err(e.to_string()))?;
        Ok(PcapTx {
            path: path.to_path_buf(),
            tmp: Some(tmp),
            writer: Some(writer),
            bufs: vec![vec![0; max_frame]; max_batch.max(1)],
            frames: 0,
        })
    }
}

impl TxBackend for PcapTx {
    fn name(&self) -> &'static str {
        "pcap"
    }
    fn describe(&self) -> String {
        format!(
            "nanosecond pcap {}, timestamps = scheduled departure times",
            self.path.display()
        )
    }
    fn max_batch(&self) -> usize {
        self.bufs.len()
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn send(&mut self, lens: &[usize], at_ns: &[u64]) -> Result<usize, IoError> {
        let w = self.writer.as_mut().ok_or_else(|| IoError::Pcap {
            path: self.path.display().to_string(),
            message: "already finished".into(),
        })?;
        for (i, (&len, &at)) in lens.iter().zip(at_ns).enumerate() {
            let data = &self.bufs[i][..len];
            let p = PcapPacket::new(Duration::from_nanos(at), len as u32, data).map_err(|e| IoError::Pcap {
                path: self.path.display().to_string(),
                message: e.to_string(),
            })?;
            w.write_packet(&p).map_err(|e| IoError::Pcap {
                path: self.path.display().to_string(),
                message: e.to_string(),
            })?;
        }
        self.frames += lens.len() as u64;
        Ok(lens.len())
    }
    fn finish(&mut self) -> Result<(), IoError> {
        let err = |m: String| IoError::Pcap {
            path: self.path.display().to_string(),
            message: m,
        };
        if let Some(w) = self.writer.take() {
            let buf = w.into_inner();
            buf.into_inner().map_err(|e| err(e.to_string()))?;
            let tmp = self.tmp.take().ok_or_else(|| err("already finished".into()))?;
            tmp.commit().map_err(|e| err(e.to_string()))?;
        }
        Ok(())
    }
    fn errors(&self) -> u64 {
        0
    }
    fn is_live(&self) -> bool {
        false
    }
    fn on_schedule_time(&self) -> bool {
        true
    }
}

impl Drop for PcapTx {
    fn drop(&mut self) {
        if self.writer.is_some() {
            // Not finished: keep what was written under the final name rather than lose it.
            let _ = self.finish();
        }
    }
}
