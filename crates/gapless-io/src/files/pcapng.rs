//! A pcapng reader for analysis: the block framing, interface descriptions and packet blocks
//! of the format (draft-ietf-opsawg-pcapng), with every timestamp resolution it allows.
//!
//! pcap-file 3.0.0-rc.3 refuses interfaces whose `if_tsresol` is finer than 1 ns (decimal
//! 10^-10..10^-19, binary 2^-30..2^-63), so a legal picosecond capture that tshark reads
//! could not be analysed. This reader keeps what the meter needs and no more: each packet's
//! time in ns since the epoch, its captured bytes and its length on the wire. Finer stamps
//! are kept to the ns (truncated), and the resolution is reported.

use std::io::Read;

/// A pcapng packet as the meter sees it.
pub struct Packet<'a> {
    pub ts_ns: u64,
    pub data: &'a [u8],
    pub orig_len: u32,
    /// The interface's link type (1 = Ethernet).
    pub linktype: u16,
    /// Bytes of FCS at the end of each frame (`if_fcslen`; 0 when the interface says none).
    pub fcs_len: u8,
}

/// An interface of the current section.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Iface {
    linktype: u16,
    resol: Resolution,
    offset_s: i64,
    fcs_len: u8,
}

/// `if_tsresol`: units of 10^-n or 2^-n seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolution {
    pub binary: bool,
    pub exp: u8,
}

impl Resolution {
    const MICRO: Resolution = Resolution { binary: false, exp: 6 };

    fn from_u8(v: u8) -> Result<Resolution, String> {
        let r = Resolution {
            binary: v & 0x80 != 0,
            exp: v & 0x7f,
        };
        // A u64 of units finer than 10^-19 or 2^-63 s cannot hold even one second.
        if (!r.binary && r.exp > 19) || (r.binary && r.exp > 63) {
            return Err(format!(
                "if_tsresol {v:#04x} ({}) cannot hold a second in 64 bits",
                r.name()
            ));
        }
        Ok(r)
    }

    /// A timestamp in these units as ns, or None when it does not fit in u64 ns.
    fn to_ns(self, units: u64) -> Option<u64> {
        let ns = if self.binary {
            (u128::from(units) * 1_000_000_000) >> self.exp
        } else if self.exp <= 9 {
            u128::from(units) * 10u128.pow(u32::from(9 - self.exp))
        } else {
            u128::from(units) / 10u128.pow(u32::from(self.exp - 9))
        };
        u64::try_from(ns).ok()
    }

    /// One unit in ns, at least 1 (finer units are kept to the ns).
    pub fn step_ns(self) -> u64 {
        self.to_ns(1).unwrap_or(u64::MAX).max(1)
    }

    /// E.g. "ns", "ps (kept to ns)", "2^-32 s (kept to ns)".
    pub fn name(self) -> String {
        const DEC: [&str; 5] = ["s", "ms", "µs", "ns", "ps"];
        let n = if self.binary {
            format!("2^-{} s", self.exp)
        } else if self.exp.is_multiple_of(3) && self.exp <= 12 {
            DEC[usize::from(self.exp / 3)].to_string()
        } else {
            format!("10^-{} s", self.exp)
        };
        let finer = if self.binary { self.exp > 29 } else { self.exp > 9 };
        if finer {
            format!("{n} (kept to ns)")
        } else {
            n
        }
    }
}

/// The largest block read: a packet block with a 256 KiB snap length is far below it; a
/// larger length is a corrupt file, not a reason to allocate gigabytes.
const MAX_BLOCK: u32 = 16 << 20;

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const OPB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;

/// Reads the packets of a pcapng stream, one at a time.
pub struct Reader<R> {
    src: R,
    big_endian: bool,
    ifaces: Vec<Iface>,
    block: Vec<u8>,
    last_type: u32,
    /// Bytes read so far: where an error is, for its message.
    offset: u64,
    /// Simple Packet Blocks seen: they carry no timestamp and cannot be metered.
    pub simple_packets: u64,
}

impl<R: Read> Reader<R> {
    pub fn new(src: R) -> Reader<R> {
        Reader {
            src,
            big_endian: false,
            ifaces: Vec::new(),
            block: Vec::new(),
            last_type: 0,
            offset: 0,
            simple_packets: 0,
        }
    }

    /// The coarsest unit of the interfaces seen so far, in ns (1 for ns and finer).
    pub fn step_ns(&self) -> u64 {
        self.ifaces.iter().map(|i| i.resol.step_ns()).max().unwrap_or(1)
    }

    /// The resolutions of the interfaces seen so far, e.g. "ns" or "ps (kept to ns), µs".
    pub fn resolutions(&self) -> String {
        let mut v: Vec<String> = self.ifaces.iter().map(|i| i.resol.name()).collect();
        v.dedup();
        v.join(", ")
    }

    fn u16_at(&self, b: &[u8], at: usize) -> u16 {
        let a = [b[at], b[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }

    fn u32_at(&self, b: &[u8], at: usize) -> u32 {
        let a = b[at..at + 4].try_into().expect("4 bytes");
        if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    /// The next packet, None at the end of the file, or what is wrong with the file here.
    pub fn next_packet(&mut self) -> Option<Result<Packet<'_>, String>> {
        loop {
            match self.next_block() {
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
                Ok(Some(t)) if t == EPB || t == OPB => break,
                Ok(Some(t)) => {
                    if let Err(e) = self.state_block(t) {
                        return Some(Err(e));
                    }
                }
            }
        }
        Some(self.packet())
    }

    /// Reads one block into `self.block` (its body), returning its type.
    fn next_block(&mut self) -> Result<Option<u32>, String> {
        let at = self.offset;
        let mut head = [0u8; 8];
        match read_full(&mut self.src, &mut head) {
            Ok(0) => return Ok(None),
            Ok(8) => {}
            Ok(n) => {
                return Err(format!(
                    "the file ends inside a block header at byte {at} ({n} of 8 bytes)"
                ))
            }
            Err(e) => return Err(format!("cannot read at byte {at}: {e}")),
        }
        let raw_type = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes"));
        if raw_type == SHB {
            self.section_order(at)?;
        }
        let t = self.u32_at(&head, 0);
        let len = self.u32_at(&head, 4);
        if len < 12 || !len.is_multiple_of(4) || len > MAX_BLOCK {
            return Err(format!(
                "block at byte {at} (type {t:#x}) has length {len}: a block is 12 bytes to {MAX_BLOCK}, a multiple of 4"
            ));
        }
        // The SHB's byte-order magic was read ahead by section_order.
        let done = if raw_type == SHB { 4 } else { 0 };
        let body = len as usize - 12;
        self.block.resize(body + 4, 0);
        let want = body + 4 - done;
        let n = read_full(&mut self.src, &mut self.block[done..])
            .map_err(|e| format!("cannot read the block at byte {at}: {e}"))?;
        if n < want {
            return Err(format!(
                "the file ends inside the block at byte {at} ({} of {len} bytes)",
                8 + done + n
            ));
        }
        self.offset += u64::from(len);
        let trailer = self.u32_at(&self.block, body);
        if trailer != len {
            return Err(format!(
                "block at byte {at} (type {t:#x}) says length {len} at its start and {trailer} at its end"
            ));
        }
        self.block.truncate(body);
        self.last_type = t;
        Ok(Some(t))
    }

    /// A new section: reads its byte-order magic (the first 4 bytes of its body).
    fn section_order(&mut self, at: u64) -> Result<(), String> {
        let mut magic = [0u8; 4];
        if read_full(&mut self.src, &mut magic).map_err(|e| e.to_string())? < 4 {
            return Err(format!("the file ends inside the section header at byte {at}"));
        }
        self.big_endian = match magic {
            [0x4d, 0x3c, 0x2b, 0x1a] => false,
            [0x1a, 0x2b, 0x3c, 0x4d] => true,
            m => {
                return Err(format!(
                    "section header at byte {at} has byte-order magic {m:02x?}, not 1a2b3c4d"
                ))
            }
        };
        self.block.clear();
        self.block.extend_from_slice(&magic);
        self.ifaces.clear();
        Ok(())
    }

    /// Takes note of a block that is not a timed packet.
    fn state_block(&mut self, t: u32) -> Result<(), String> {
        match t {
            IDB => {
                let iface = self.interface()?;
                self.ifaces.push(iface);
            }
            SPB => self.simple_packets += 1,
            _ => {}
        }
        Ok(())
    }

    /// An Interface Description Block: link type, then options after 8 bytes.
    fn interface(&self) -> Result<Iface, String> {
        let b = &self.block;
        let at = self.offset;
        if b.len() < 8 {
            return Err(format!(
                "interface description ending at byte {at} is {} bytes, under 8",
                b.len()
            ));
        }
        let mut iface = Iface {
            linktype: self.u16_at(b, 0),
            resol: Resolution::MICRO,
            offset_s: 0,
            fcs_len: 0,
        };
        let mut o = 8;
        while o + 4 <= b.len() {
            let (code, len) = (self.u16_at(b, o), usize::from(self.u16_at(b, o + 2)));
            let v = b.get(o + 4..o + 4 + len).ok_or_else(|| {
                format!("interface description ending at byte {at}: option {code} runs past the block")
            })?;
            match (code, len) {
                (0, _) => break,
                (9, 1) => {
                    iface.resol =
                        Resolution::from_u8(v[0]).map_err(|e| format!("interface {}: {e}", self.ifaces.len()))?
                }
                (13, 1) => iface.fcs_len = v[0],
                (14, 8) => {
                    let a = v.try_into().expect("8 bytes");
                    iface.offset_s = if self.big_endian {
                        i64::from_be_bytes(a)
                    } else {
                        i64::from_le_bytes(a)
                    };
                }
                _ => {}
            }
            o += 4 + len.div_ceil(4) * 4;
        }
        Ok(iface)
    }

    /// The packet in an Enhanced (or obsolete) Packet Block.
    fn packet(&self) -> Result<Packet<'_>, String> {
        let b = &self.block;
        let at = self.offset;
        if b.len() < 20 {
            return Err(format!(
                "packet block ending at byte {at} is {} bytes, under 20",
                b.len()
            ));
        }
        // EPB: interface u32; OPB: interface u16, drops u16. Both then: ts high, ts low, caplen, len.
        let id = self.u32_at(b, 0);
        let id = if self.last_type == OPB { id & 0xffff } else { id } as usize;
        let Some(iface) = self.ifaces.get(id).copied() else {
            return Err(format!(
                "packet block ending at byte {at} names interface {id}, but the section describes {}",
                self.ifaces.len()
            ));
        };
        let units = (u64::from(self.u32_at(b, 4)) << 32) | u64::from(self.u32_at(b, 8));
        let (cap, orig) = (self.u32_at(b, 12) as usize, self.u32_at(b, 16));
        let data = b.get(20..20 + cap).ok_or_else(|| {
            format!(
                "packet block ending at byte {at} says {cap} captured bytes but holds {}",
                b.len() - 20
            )
        })?;
        let ts_ns = iface
            .resol
            .to_ns(units)
            .and_then(|t| t.checked_add_signed(iface.offset_s.checked_mul(1_000_000_000)?))
            .ok_or_else(|| {
                format!(
                    "packet block ending at byte {at}: timestamp {units} in {} does not fit in 64-bit ns since 1970",
                    iface.resol.name()
                )
            })?;
        Ok(Packet {
            ts_ns,
            data,
            orig_len: orig,
            linktype: iface.linktype,
            fcs_len: iface.fcs_len,
        })
    }
}

/// Reads until `buf` is full or the end of the file; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds pcapng files block by block, in either byte order.
    struct Ng {
        be: bool,
        out: Vec<u8>,
    }

    impl Ng {
        fn new(be: bool) -> Ng {
            let mut n = Ng { be, out: Vec::new() };
            let mut body = if be {
                vec![0x1a, 0x2b, 0x3c, 0x4d]
            } else {
                vec![0x4d, 0x3c, 0x2b, 0x1a]
            };
            body.extend(n.u16(1));
            body.extend(n.u16(0));
            body.extend([0xff; 8]); // section length: unknown
            n.block(SHB, &body);
            n
        }
        fn u16(&self, v: u16) -> [u8; 2] {
            if self.be {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn u32(&self, v: u32) -> [u8; 4] {
            if self.be {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        }
        fn block(&mut self, t: u32, body: &[u8]) -> &mut Ng {
            let len = 12 + body.len().div_ceil(4) * 4;
            let (t, l) = (self.u32(t), self.u32(len as u32));
            self.out.extend(t);
            self.out.extend(l);
            self.out.extend(body);
            self.out.resize(self.out.len() + (len - 12 - body.len()), 0);
            self.out.extend(l);
            self
        }
        /// An Ethernet interface with `if_tsresol` (None: the µs default) and `if_tsoffset`.
        fn iface(&mut self, resol: Option<u8>, offset: Option<i64>) -> &mut Ng {
            let mut b = Vec::new();
            b.extend(self.u16(1));
            b.extend(self.u16(0));
            b.extend(self.u32(65535));
            if let Some(r) = resol {
                b.extend(self.u16(9));
                b.extend(self.u16(1));
                b.extend([r, 0, 0, 0]);
            }
            if let Some(o) = offset {
                b.extend(self.u16(14));
                b.extend(self.u16(8));
                b.extend(if self.be { o.to_be_bytes() } else { o.to_le_bytes() });
            }
            b.extend([0, 0, 0, 0]);
            self.block(IDB, &b)
        }
        fn packet(&mut self, iface: u32, units: u64, data: &[u8]) -> &mut Ng {
            let mut b = Vec::new();
            b.extend(self.u32(iface));
            b.extend(self.u32((units >> 32) as u32));
            b.extend(self.u32(units as u32));
            b.extend(self.u32(data.len() as u32));
            b.extend(self.u32(data.len() as u32 + 4));
            b.extend(data);
            self.block(EPB, &b)
        }
    }

    /// (ns, bytes, length on the wire) of each packet read.
    type Read = Vec<(u64, Vec<u8>, u32)>;

    /// The packets, the error that ended reading if any, and the resolutions.
    fn read_all(bytes: &[u8]) -> (Read, Option<String>, String) {
        let mut r = Reader::new(bytes);
        let mut v = Vec::new();
        while let Some(p) = r.next_packet() {
            match p {
                Ok(p) => v.push((p.ts_ns, p.data.to_vec(), p.orig_len)),
                Err(e) => return (v, Some(e), r.resolutions()),
            }
        }
        (v, None, r.resolutions())
    }

    #[test]
    fn every_resolution_and_both_byte_orders() {
        // (if_tsresol, units, ns, name)
        let cases: [(Option<u8>, u64, u64, &str); 6] = [
            (None, 1_500_000, 1_500_000_000, "µs"),
            (Some(9), 123_456_789_012, 123_456_789_012, "ns"),
            (
                Some(12),
                1_700_000_000_123_456_789,
                1_700_000_000_123_456,
                "ps (kept to ns)",
            ),
            (Some(0), 2, 2_000_000_000, "s"),
            (Some(0x80 | 32), 3 << 31, 1_500_000_000, "2^-32 s (kept to ns)"),
            (Some(0x80 | 10), 1024 * 7, 7_000_000_000, "2^-10 s"),
        ];
        for be in [false, true] {
            for (resol, units, want, name) in cases {
                let mut ng = Ng::new(be);
                ng.iface(resol, None).packet(0, units, &[1, 2, 3]);
                let (v, err, res) = read_all(&ng.out);
                assert_eq!(err, None, "resol {resol:?} be {be}");
                assert_eq!(
                    v,
                    vec![(want, vec![1, 2, 3], 7)],
                    "resol {resol:?} be {be}: expected {want} ns"
                );
                assert_eq!(res, name);
            }
        }
    }

    #[test]
    fn offsets_interfaces_and_sections() {
        let mut ng = Ng::new(false);
        ng.iface(Some(9), Some(10)).iface(Some(3), None);
        ng.packet(0, 5, &[0xaa]).packet(1, 5, &[0xbb]);
        ng.block(99, &[0; 8]); // an unknown block is skipped
        let more = Ng::new(true).iface(Some(6), None).packet(0, 1, &[0xcc]).out.clone();
        ng.out.extend(more);
        let (v, err, _) = read_all(&ng.out);
        assert_eq!(err, None);
        let ts: Vec<u64> = v.iter().map(|p| p.0).collect();
        assert_eq!(ts, vec![10_000_000_005, 5_000_000, 1_000]);
    }

    #[test]
    fn what_is_wrong_is_said_and_what_came_before_is_kept() {
        let mut ng = Ng::new(false);
        ng.iface(Some(9), None).packet(0, 1, &[1]).packet(3, 2, &[2]);
        let (v, err, _) = read_all(&ng.out);
        assert_eq!(v.len(), 1);
        let err = err.expect("an error for interface 3");
        assert!(
            err.contains("names interface 3, but the section describes 1"),
            "got {err}"
        );

        let mut ng = Ng::new(false);
        ng.iface(Some(9), None).packet(0, 1, &[1]);
        let cut = ng.out.len() - 3;
        let (v, err, _) = read_all(&ng.out[..cut]);
        assert!(v.is_empty());
        assert!(err.unwrap().contains("the file ends inside the block at byte"));

        let mut ng = Ng::new(false);
        ng.iface(Some(20), None);
        let err = read_all(&ng.out).1.unwrap();
        assert!(err.contains("cannot hold a second in 64 bits"), "got {err}");

        let mut ng = Ng::new(false);
        ng.iface(Some(9), None);
        ng.out.extend(6u32.to_le_bytes());
        ng.out.extend(0xffff_fffcu32.to_le_bytes());
        let err = read_all(&ng.out).1.unwrap();
        assert!(err.contains("has length 4294967292"), "got {err}");

        // 2^64-1 µs is past what u64 ns can hold.
        let mut ng = Ng::new(false);
        ng.iface(None, None).packet(0, u64::MAX, &[1]);
        let err = read_all(&ng.out).1.unwrap();
        assert!(err.contains("does not fit in 64-bit ns"), "got {err}");
    }
}
