//! Reading captures for offline analysis: pcap and pcapng (any timestamp resolution; ns
//! kept when the file has it), and CSV tables of timestamps (e.g. from a P4 timestamper).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use gapless_core::packet::signature::Signature;
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;

use crate::error::IoError;

/// The kinds of file `gapless analyze` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
    Csv,
}

impl CaptureFormat {
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::PcapNg => "pcapng",
            CaptureFormat::Csv => "csv",
        }
    }
}

/// What reading found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadInfo {
    pub frames: u64,
    /// The timestamp resolution the file declares, e.g. "ns" or "µs".
    pub resolution: String,
    /// Its coarsest unit in ns: 1 for ns and finer, 1000 for µs.
    pub step_ns: u64,
    /// Set when the file ends early or breaks off: what was read before is kept.
    pub truncated: Option<String>,
    /// The reading was stopped (Ctrl-C): what was read before is kept.
    pub stopped: bool,
    /// pcapng Simple Packet Blocks: frames without a timestamp, which cannot be metered.
    pub untimed: u64,
    /// Frames that ended with their FCS (the file said so, or the last 4 bytes were the
    /// CRC-32 of the rest), taken off before metering.
    pub fcs_frames: u64,
}

fn input(path: &Path, message: impl Into<String>, fix: impl Into<String>) -> IoError {
    IoError::Input {
        path: path.display().to_string(),
        message: message.into(),
        fix: fix.into(),
    }
}

fn open(path: &Path) -> Result<File, IoError> {
    File::open(path).map_err(|e| input(path, format!("cannot open: {e}"), "check the path"))
}

/// Tells the format from the file's first bytes.
pub fn detect(path: &Path) -> Result<CaptureFormat, IoError> {
    let mut head = [0u8; 4];
    let mut f = open(path)?;
    let n = f
        .read(&mut head)
        .map_err(|e| input(path, format!("cannot read: {e}"), "check the file"))?;
    if n < 4 {
        return Err(input(
            path,
            format!("only {n} bytes: not a capture"),
            "give a pcap or pcapng capture (e.g. `tcpdump -j adapter_unsynced --time-stamp-precision=nano -w FILE`) or a CSV with an rx_ns column",
        ));
    }
    Ok(match head {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0xc3, 0xd4] | [0x4d, 0x3c, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] => {
            CaptureFormat::Pcap
        }
        [0x0a, 0x0d, 0x0d, 0x0a] => CaptureFormat::PcapNg,
        _ if head.iter().all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()) => CaptureFormat::Csv,
        _ => return Err(input(
            path,
            format!("unknown file type (first bytes {:02x?})", head),
            "give a pcap or pcapng capture, or a CSV of timestamps with a header row (rx_ns[,stream,seq,tx_ns,len])",
        )),
    })
}

fn ns(d: std::time::Duration) -> u64 {
    d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos())
}

fn not_ethernet(path: &Path, dl: DataLink) -> IoError {
    input(
        path,
        format!("link type {dl:?}: only Ethernet captures are read"),
        "capture on the interface itself (`tcpdump -i IFACE`, not `-i any`), or convert with `editcap -T ether`",
    )
}

/// A pcap header's link-layer field: the link type (its low 16 bits) and the bytes of FCS
/// each frame ends with (bit 28 says the FCS length in bits 29-31 is given, in 16-bit words).
pub fn pcap_link(raw: u32) -> (u32, u8) {
    let fcs = if raw & 0x1000_0000 != 0 {
        (raw >> 29) as u8 * 2
    } else {
        0
    };
    (raw & 0xffff, fcs)
}

/// A frame as the meter reads it, from the destination MAC to the end of the payload, and
/// whether an FCS was taken off. A frame ends with an FCS when the capture says so (`fcs`
/// bytes: pcapng's `if_fcslen`, a pcap header's FCS bits), or when its last 4 bytes are the
/// CRC-32 of the rest: ixia-c's captures, and gapless's own pcap files, carry the FCS under
/// the plain Ethernet link type, which is what Scapy reads (it decodes a link type with the
/// FCS bits as raw bytes). A false match takes a chance of 2^-32 per frame.
fn without_fcs(data: &[u8], orig: u32, fcs: u8) -> (&[u8], u32, bool) {
    let n = data.len();
    let found = fcs == 0 && n == orig as usize && n >= 64 && crate::files::dump::fcs(&data[..n - 4]) == data[n - 4..];
    let cut = if found { 4 } else { fcs };
    let (data, len) = cut_fcs(data, orig, cut);
    (data, len, cut > 0)
}

/// A frame of `orig` bytes on the wire with its last `fcs` bytes (its FCS) taken off.
fn cut_fcs(data: &[u8], orig: u32, fcs: u8) -> (&[u8], u32) {
    let len = orig.saturating_sub(u32::from(fcs));
    (&data[..data.len().min(len as usize)], len)
}

/// Reads a pcap or pcapng file, handing each frame (RX ns, data, length on the wire without
/// its FCS) to `f`. A frame that carries its FCS is handed over without it, as a kernel hands
/// frames to the live meter.
/// Stops early, keeping what was read, when `stop` is raised.
pub fn read_pcap(path: &Path, stop: &AtomicBool, f: &mut dyn FnMut(u64, &[u8], u32)) -> Result<ReadInfo, IoError> {
    let fmt = detect(path)?;
    let file = BufReader::with_capacity(1 << 20, open(path)?);
    let mut info = ReadInfo::default();
    let broke = |frames: u64, e: &dyn std::fmt::Display| {
        format!("the capture breaks off after {frames} frames ({e}); the frames before it were analysed")
    };
    match fmt {
        CaptureFormat::Pcap => {
            let mut r = PcapReader::new(file).map_err(|e| {
                input(
                    path,
                    format!("not a readable pcap header: {e}"),
                    "check that the file is a complete capture",
                )
            })?;
            let (link, fcs) = pcap_link(u32::from(r.header().datalink));
            if link != 1 {
                return Err(not_ethernet(path, DataLink::from(link)));
            }
            let h = r.header();
            (info.resolution, info.step_ns) = match h.ts_resolution {
                pcap_file::pcap::PcapTsResolution::MicroSecond => ("µs".into(), 1000),
                pcap_file::pcap::PcapTsResolution::NanoSecond => ("ns".into(), 1),
            };
            while let Some(p) = r.next_packet() {
                if stop.load(Ordering::Relaxed) {
                    info.stopped = true;
                    break;
                }
                match p {
                    Ok(p) => {
                        let (data, len, cut) = without_fcs(p.data(), p.orig_len(), fcs);
                        info.fcs_frames += u64::from(cut);
                        f(ns(p.timestamp()), data, len);
                        info.frames += 1;
                    }
                    Err(e) => {
                        info.truncated = Some(broke(info.frames, &e));
                        break;
                    }
                }
            }
        }
        CaptureFormat::PcapNg => {
            let mut r = crate::files::pcapng::Reader::new(file);
            while let Some(p) = r.next_packet() {
                if stop.load(Ordering::Relaxed) {
                    info.stopped = true;
                    break;
                }
                match p {
                    Ok(p) if p.linktype != 1 => return Err(not_ethernet(path, DataLink::from(u32::from(p.linktype)))),
                    Ok(p) => {
                        let (data, len, cut) = without_fcs(p.data, p.orig_len, p.fcs_len);
                        info.fcs_frames += u64::from(cut);
                        f(p.ts_ns, data, len);
                        info.frames += 1;
                    }
                    Err(e) => {
                        info.truncated = Some(e);
                        break;
                    }
                }
            }
            info.resolution = r.resolutions();
            info.step_ns = r.step_ns();
            if let Some(e) = info.truncated.take() {
                if info.frames == 0 && info.resolution.is_empty() {
                    return Err(input(path, e, "check that the file is a complete pcapng capture"));
                }
                info.truncated = Some(broke(info.frames, &e));
            }
            if r.simple_packets > 0 {
                info.untimed = r.simple_packets;
            }
        }
        CaptureFormat::Csv => {
            return Err(input(
                path,
                "this is a text file, not a capture",
                "read it as a CSV of timestamps (`gapless analyze` does so by itself)",
            ))
        }
    }
    Ok(info)
}

/// One row of a timestamp table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvRow {
    pub rx_ns: u64,
    pub len: Option<u32>,
    /// When the table has stream and seq columns (tx_ns 0 without a tx_ns column).
    pub sig: Option<Signature>,
}

/// A CSV table of timestamps: a header row naming `rx_ns` (or `timestamp_ns`), and
/// optionally `stream`, `seq`, `tx_ns` and `len`. Other columns are ignored.
pub struct CsvTimestamps {
    path: std::path::PathBuf,
    rdr: csv::Reader<BufReader<File>>,
    rx: usize,
    stream: Option<usize>,
    seq: Option<usize>,
    tx: Option<usize>,
    len: Option<usize>,
}

const CSV_FIX: &str = "the table needs a header row with rx_ns (integer ns), and optionally stream, seq, tx_ns, len; e.g. `rx_ns,stream,seq,tx_ns`";

impl CsvTimestamps {
    pub fn open(path: &Path) -> Result<CsvTimestamps, IoError> {
        let mut rdr = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(BufReader::new(open(path)?));
        let headers = rdr
            .headers()
            .map_err(|e| input(path, format!("cannot read the header row: {e}"), CSV_FIX))?
            .clone();
        let col = |names: &[&str]| {
            headers
                .iter()
                .position(|h| names.iter().any(|n| h.eq_ignore_ascii_case(n)))
        };
        let Some(rx) = col(&["rx_ns", "timestamp_ns", "ts_ns"]) else {
            return Err(input(
                path,
                format!(
                    "no rx_ns column in the header row ({})",
                    headers.iter().collect::<Vec<_>>().join(",")
                ),
                CSV_FIX,
            ));
        };
        let stream = col(&["stream"]);
        let seq = col(&["seq"]);
        if stream.is_some() != seq.is_some() {
            return Err(input(
                path,
                "the table has one of stream and seq but not the other",
                "give both columns (sequence numbers count per stream) or neither",
            ));
        }
        Ok(CsvTimestamps {
            path: path.to_path_buf(),
            rdr,
            rx,
            stream,
            seq,
            tx: col(&["tx_ns"]),
            len: col(&["len", "length", "wire_len"]),
        })
    }

    /// The table has sequence numbers (and so streams).
    pub fn has_seq(&self) -> bool {
        self.seq.is_some()
    }

    /// The table has TX times (and so latency).
    pub fn has_tx(&self) -> bool {
        self.tx.is_some() && self.seq.is_some()
    }

    /// Hands each row to `f`. A bad row is an error naming its line; rows before it are kept
    /// by the caller.
    pub fn read(&mut self, stop: &AtomicBool, f: &mut dyn FnMut(CsvRow)) -> Result<ReadInfo, IoError> {
        let mut info = ReadInfo {
            resolution: "ns".into(),
            ..Default::default()
        };
        let mut rec = csv::StringRecord::new();
        loop {
            if stop.load(Ordering::Relaxed) {
                info.stopped = true;
                break;
            }
            match self.rdr.read_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    return Err(input(&self.path, format!("line {line}: {e}"), CSV_FIX));
                }
            }
            let line = rec.position().map_or(0, |p| p.line());
            let path = &self.path;
            let get = |i: usize, name: &str| -> Result<u64, IoError> {
                let v = rec.get(i).unwrap_or("");
                v.parse::<u64>().map_err(|_| {
                    input(
                        path,
                        format!("line {line}: column {name}: {v:?} is not an unsigned integer"),
                        format!("correct or delete line {line}; {CSV_FIX}"),
                    )
                })
            };
            let rx_ns = get(self.rx, "rx_ns")?;
            let len = match self.len {
                Some(i) => Some(get(i, "len")?.min(u64::from(u32::MAX)) as u32),
                None => None,
            };
            let sig = match (self.stream, self.seq) {
                (Some(s), Some(q)) => {
                    let stream = get(s, "stream")?;
                    let seq = get(q, "seq")?;
                    if stream > u64::from(u16::MAX) || seq > u64::from(u32::MAX) {
                        return Err(input(
                            &self.path,
                            format!(
                                "line {line}: stream {stream} or seq {seq} out of range (stream < 65536, seq < 2^32)"
                            ),
                            format!("correct line {line}"),
                        ));
                    }
                    let tx_ns = match self.tx {
                        Some(i) => get(i, "tx_ns")?,
                        None => 0,
                    };
                    Some(Signature {
                        stream: stream as u16,
                        seq: seq as u32,
                        tx_ns,
                    })
                }
                _ => None,
            };
            f(CsvRow { rx_ns, len, sig });
            info.frames += 1;
        }
        if info.frames == 0 {
            return Err(input(&self.path, "no rows after the header", CSV_FIX));
        }
        Ok(info)
    }
}

/// A capture to replay: scanned once, then read frame by frame as often as the replay loops,
/// in constant memory.
pub struct CaptureFile {
    path: std::path::PathBuf,
    format: CaptureFormat,
    /// Bytes of FCS every frame ends with (4 when the scan found one on every frame, else
    /// 0): taken off as the replay reads them, with no CRC per frame in the send loop.
    fcs: u8,
}

/// A streaming reader of a capture file.
enum FileFrames {
    Pcap(PcapReader<BufReader<File>>, u8),
    PcapNg(crate::files::pcapng::Reader<BufReader<File>>, u8),
}

impl CaptureFile {
    /// Scans the whole capture with the reader the meter uses (its errors: not a capture, not
    /// Ethernet, broken off) and returns it with what the scan found.
    pub fn scan(path: &Path) -> Result<(CaptureFile, gapless_core::spec::files::CaptureStats), IoError> {
        let format = detect(path)?;
        let mut st = gapless_core::spec::files::CaptureStats {
            min_len: u32::MAX,
            ..Default::default()
        };
        let mut prev = 0u64;
        let info = read_pcap(path, &AtomicBool::new(false), &mut |ts, d, orig| {
            if st.frames == 0 {
                st.first_ns = ts;
            } else if ts < prev {
                st.backwards += 1;
            }
            prev = ts;
            st.last_ns = st.last_ns.max(ts);
            st.frames += 1;
            st.min_len = st.min_len.min(d.len() as u32);
            st.max_len = st.max_len.max(d.len() as u32);
            st.bytes += d.len() as u64;
            st.cut += u64::from((d.len() as u32) < orig);
        })?;
        if let Some(t) = info.truncated {
            return Err(input(
                path,
                t,
                "replay a complete capture (`editcap` can cut the broken tail off)",
            ));
        }
        if info.untimed > 0 {
            return Err(input(
                path,
                format!(
                    "{} frames have no timestamp (pcapng Simple Packet Blocks)",
                    info.untimed
                ),
                "replay a capture with timestamps",
            ));
        }
        st.min_len = st.min_len.min(st.max_len);
        st.resolution = info.resolution;
        Ok((
            CaptureFile {
                path: path.to_path_buf(),
                format,
                fcs: if info.frames > 0 && info.fcs_frames == info.frames {
                    4
                } else {
                    0
                },
            },
            st,
        ))
    }
}

impl gapless_core::spec::files::CaptureSource for CaptureFile {
    fn open(&self) -> Result<Box<dyn gapless_core::spec::files::CaptureFrames>, String> {
        let file = BufReader::with_capacity(1 << 20, open(&self.path).map_err(|e| e.to_string())?);
        Ok(Box::new(match self.format {
            CaptureFormat::PcapNg => FileFrames::PcapNg(crate::files::pcapng::Reader::new(file), self.fcs),
            _ => FileFrames::Pcap(PcapReader::new(file).map_err(|e| e.to_string())?, self.fcs),
        }))
    }
}

impl gapless_core::spec::files::CaptureFrames for FileFrames {
    fn next_frame(&mut self, buf: &mut Vec<u8>) -> Option<u64> {
        buf.clear();
        match self {
            // A frame that carries its FCS is sent without it: the NIC appends its own.
            FileFrames::Pcap(r, fcs) => {
                let p = r.next_packet()?.ok()?;
                buf.extend_from_slice(cut_fcs(p.data(), p.orig_len(), *fcs).0);
                Some(ns(p.timestamp()))
            }
            FileFrames::PcapNg(r, fcs) => {
                let p = r.next_packet()?.ok()?;
                buf.extend_from_slice(cut_fcs(p.data, p.orig_len, *fcs).0);
                Some(p.ts_ns)
            }
        }
    }
}
