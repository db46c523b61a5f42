//! Captured frames as the bytes of a capture file: nanosecond pcap (magic `a1b23c4d`) or
//! pcapng with a nanosecond interface (`if_tsresol` 9), Ethernet link type, written by the
//! pcap-file crate. For the OTG API's `/monitor/capture`, which returns the file itself.
//!
//! Frames are whole, as on the wire: [`on_the_wire`] pads a frame the kernel handed over to
//! Ethernet's 60-byte minimum and appends its FCS (the CRC-32 the kernel strips). pcapng
//! says so (`if_fcslen` 4). A pcap file keeps the plain Ethernet link type, as ixia-c's do:
//! the FCS bits of its link-layer field (bit 28, and the length in bits 29-31) are what the
//! format offers, but Scapy (2.8) then reads every frame as raw bytes, and scripts written
//! for ixia-c read captures with Scapy. gapless's reader finds such an FCS by its CRC.

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

/// Bytes of FCS at the end of a frame made by [`on_the_wire`].
pub const FCS_LEN: u8 = 4;

/// Ethernet's shortest frame before its FCS.
const MIN_FRAME: usize = 60;

/// Ethernet's frame check sequence of `frame` (the CRC-32 of IEEE 802.3 over every byte from
/// the destination MAC to the end of the padding), in the order it goes on the wire.
pub fn fcs(frame: &[u8]) -> [u8; 4] {
    crc32fast::hash(frame).to_le_bytes()
}

/// A frame as the kernel handed it over (`data`, of `len` bytes on the wire without FCS)
/// made whole as it was on the wire: padded to 60 bytes and its FCS appended, then cut to
/// `snaplen` bytes. Returns the bytes kept and the frame's length on the wire. A frame the
/// kernel already cut (fewer bytes than `len`) cannot have its FCS computed: it keeps the
/// bytes it has, and its length on the wire counts the FCS.
pub fn on_the_wire(data: &[u8], len: u32, snaplen: usize) -> (Vec<u8>, u32) {
    let wire = (len as usize).max(MIN_FRAME) + usize::from(FCS_LEN);
    if data.len() < len as usize {
        return (data[..data.len().min(snaplen)].to_vec(), wire as u32);
    }
    let mut out = Vec::with_capacity(wire.min(snaplen));
    out.extend_from_slice(data);
    out.resize(out.len().max(MIN_FRAME), 0);
    let f = fcs(&out);
    out.extend_from_slice(&f);
    out.truncate(snaplen);
    (out, wire as u32)
}

/// The frames as a nanosecond pcap file with this snap length, link type Ethernet (whether
/// the frames end with an FCS or not: see the module's doc).
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

/// The frames, each ending with `fcs_len` bytes of FCS, as a pcapng file: one Ethernet
/// interface with nanosecond timestamps (and `if_fcslen` when the frames carry an FCS).
pub fn pcapng(frames: &[Frame], snaplen: u32, fcs_len: u8) -> Result<Vec<u8>, String> {
    let mut w = PcapNgWriter::new(Vec::new()).map_err(|e| e.to_string())?;
    let mut options = vec![InterfaceDescriptionOption::IfTsResol(InterfaceTsResolution::NANO)];
    if fcs_len > 0 {
        options.push(InterfaceDescriptionOption::IfFcsLen(fcs_len));
    }
    let idb = InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen,
        options,
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
        let ng = pcapng(&frames(), 128, 0).unwrap();
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

    #[test]
    fn whole_frames_carry_their_fcs_and_both_formats_say_so_and_read_back_without_it() {
        // The FCS of a known frame: Scapy/zlib agree that crc32(b"123456789") is 0xcbf43926.
        assert_eq!(fcs(b"123456789"), [0x26, 0x39, 0xf4, 0xcb]);
        let data: Vec<u8> = (0..124u8).collect();
        let (whole, wire) = on_the_wire(&data, 124, 65_535);
        assert_eq!((whole.len(), wire), (128, 128));
        assert_eq!(&whole[124..], &fcs(&data));
        // A short frame is padded to 60 bytes first; a cut one keeps what it has.
        let (short, wire) = on_the_wire(&[0xab; 42], 42, 65_535);
        assert_eq!((short.len(), wire, &short[42..60]), (64, 64, &[0u8; 18][..]));
        assert_eq!(&short[60..], &fcs(&short[..60]));
        let (cut, wire) = on_the_wire(&data[..100], 124, 65_535);
        assert_eq!((cut.len(), wire), (100, 128));
        assert_eq!(on_the_wire(&data, 124, 64).0.len(), 64);
        assert_eq!(crate::files::capture::pcap_link(0x5000_0001), (1, 4));
        assert_eq!(crate::files::capture::pcap_link(1), (1, 0));
        let frames = vec![Frame {
            ts_ns: 1_700_000_000_000_000_000,
            wire_len: wire,
            data: whole.clone(),
        }];
        let dir = tempfile::tempdir().unwrap();
        // pcap: the FCS found by its CRC; pcapng: by if_fcslen, and by its CRC without it.
        for (name, bytes) in [
            ("c.pcap", pcap(&frames, 65_535).unwrap()),
            ("c.pcapng", pcapng(&frames, 65_535, 4).unwrap()),
            ("plain.pcapng", pcapng(&frames, 65_535, 0).unwrap()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).unwrap();
            let mut got = Vec::new();
            let stop = std::sync::atomic::AtomicBool::new(false);
            let info = crate::files::capture::read_pcap(&path, &stop, &mut |_, d, len| got.push((d.to_vec(), len)))
                .expect("our reader reads it");
            assert_eq!(
                info.fcs_frames, 1,
                "{name}: expected the frame's FCS found and taken off"
            );
            assert_eq!(
                got,
                vec![(data.clone(), 124)],
                "{name}: expected the frame back without its FCS"
            );
            // A replay sends it without its FCS too (the NIC appends its own).
            use gapless_core::spec::files::CaptureSource;
            let (file, _) = crate::files::capture::CaptureFile::scan(&path).expect("a replayable capture");
            let mut frames = file.open().unwrap();
            let mut buf = Vec::new();
            assert!(frames.next_frame(&mut buf).is_some());
            assert_eq!(buf, data, "{name}: expected the replay's frame without its FCS");
        }
        let plain = vec![Frame {
            ts_ns: 1,
            wire_len: 124,
            data: data.clone(),
        }];
        let path = dir.path().join("plain.pcap");
        std::fs::write(&path, pcap(&plain, 65_535).unwrap()).unwrap();
        let mut got = Vec::new();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let info = crate::files::capture::read_pcap(&path, &stop, &mut |_, d, len| got.push((d.len(), len))).unwrap();
        assert_eq!(
            (info.fcs_frames, got),
            (0, vec![(124, 124)]),
            "a frame without an FCS is read whole"
        );
    }
}
