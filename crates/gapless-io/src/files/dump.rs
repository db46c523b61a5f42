//! Captured frames as the bytes of a capture file: nanosecond pcap (magic `a1b23c4d`) or
//! pcapng with a nanosecond interface (`if_tsresol` 9), Ethernet link type, written by the
//! pcap-file crate. For the OTG API's `/monitor/capture`, which returns the file itself.

use std::borrow::Cow;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapTsResolution, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption, InterfaceTsResolution,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness};

/// One captured frame: its receive time (ns since the Unix epoch), its length on the wire,
/// and the bytes kept (at most the snap length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub data: Vec<u8>,
}

/// The frames as a nanosecond pcap file with this snap length.
pub fn pcap(frames: &[Frame], snaplen: u32) -> Result<Vec<u8>, String> {
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen,
        datalink: DataLink::ETHERNET,
        ts_resolution: PcapTsResolution::NanoSecond,
        endianness: Endianness::Little,
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).map_err(|e| e.to_string())?;
    for f in frames {
        let p = PcapPacket::new(Duration::from_nanos(f.ts_ns), f.wire_len, &f.data).map_err(|e| e.to_string())?;
        w.write_packet(&p).map_err(|e| e.to_string())?;
    }
    Ok(w.into_inner())
}

/// The frames as a pcapng file: one Ethernet interface with nanosecond timestamps.
pub fn pcapng(frames: &[Frame], snaplen: u32) -> Result<Vec<u8>, String> {
    let mut w = PcapNgWriter::new(Vec::new()).map_err(|e| e.to_string())?;
    let idb = InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen,
        options: vec![InterfaceDescriptionOption::IfTsResol(InterfaceTsResolution::NANO)],
    };
    w.write_pcapng_block(idb).map_err(|e| e.to_string())?;
    for f in frames {
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(f.ts_ns),
            original_len: f.wire_len,
            data: Cow::Borrowed(&f.data),
            options: Vec::new(),
        };
        w.write_pcapng_block(epb).map_err(|e| e.to_string())?;
    }
    Ok(w.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Frame> {
        vec![
            Frame {
                ts_ns: 1_700_000_000_123_456_789,
                wire_len: 64,
                data: vec![0xaa; 64],
            },
            Frame {
                ts_ns: 1_700_000_000_123_457_001,
                wire_len: 1500,
                data: vec![0xbb; 128],
            },
        ]
    }

    #[test]
    fn both_formats_read_back_with_nanosecond_times_and_cut_lengths() {
        let pcap_bytes = pcap(&frames(), 128).unwrap();
        assert_eq!(&pcap_bytes[..4], &[0x4d, 0x3c, 0xb2, 0xa1], "nanosecond pcap magic");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.pcap");
        std::fs::write(&path, &pcap_bytes).unwrap();
        let mut got = Vec::new();
        let stop = std::sync::atomic::AtomicBool::new(false);
        crate::files::capture::read_pcap(&path, &stop, &mut |ts, data, wire| got.push((ts, wire, data.len())))
            .expect("our own pcap reader reads it");
        assert_eq!(
            got,
            vec![
                (1_700_000_000_123_456_789, 64, 64),
                (1_700_000_000_123_457_001, 1500, 128)
            ]
        );
        let ng = pcapng(&frames(), 128).unwrap();
        let mut r = crate::files::pcapng::Reader::new(std::io::Cursor::new(ng));
        let mut seen = Vec::new();
        while let Some(p) = r.next_packet() {
            let p = p.expect("our own pcapng reader reads it");
            seen.push((p.ts_ns, p.orig_len, p.data.len()));
        }
        assert_eq!(
            seen,
            vec![
                (1_700_000_000_123_456_789, 64, 64),
                (1_700_000_000_123_457_001, 1500, 128)
            ]
        );
    }
}
