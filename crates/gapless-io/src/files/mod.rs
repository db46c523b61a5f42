//! Files: the [`atomic`] writer (the one way gapless writes a file), and the readers of
//! captures for offline metering: pcap and CSV timestamp tables in [`capture`], pcapng in
//! [`pcapng`] (our own reader: every timestamp resolution the format allows).
//!
//! May import `error` only.

pub mod atomic;
pub mod capture;
pub mod pcapng;
