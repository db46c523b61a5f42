//! Files: the [`atomic`] writer (the one way gapless writes a file), and the readers of
//! captures for offline metering: pcap and CSV timestamp tables in [`capture`], pcapng in
//! [`pcapng`] (our own reader: every timestamp resolution the format allows); and [`dump`],
//! captured frames as the bytes of a pcap or pcapng file.
//!
//! May import `error` only.

pub mod atomic;
pub mod capture;
pub mod dump;
pub mod pcapng;
