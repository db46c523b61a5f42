//! # gapless-io
//!
//! Thin Linux IO: the TX backends under one trait ([`tx::TxBackend`]), the RX sources under
//! another ([`rx::RxSource`]), AF_XDP for both, the kernel controls a run sets and reads
//! back, the files gapless reads and writes, and the veth testbed.
//!
//! | module | holds | may import |
//! |---|---|---|
//! | [`error`] | [`IoError`]: what is wrong and how to fix it | nothing |
//! | [`kernel`] | setsockopt and raw packet sockets ([`kernel::socket`]), interface facts, qdiscs, the NIC rate limiter, capabilities, TX timestamping, a port's addresses, a bridge's forwarding database, rtnetlink | `error` |
//! | [`files`] | the atomic writer, pcap/pcapng/CSV readers | `error` |
//! | [`tx`] | AF_PACKET, pcap-file and null backends, the filler wrapper, several ports on one loop | `kernel`, `files` |
//! | [`rx`] | the RX trait, the TPACKET_V3 ring, and several ports read by one meter ([`rx::ports`]) | `kernel` |
//! | [`xdp`] | AF_XDP TX and RX, and its XDP program | `kernel`, `tx`, `rx` |
//! | [`testbed`] | the veth testbed, the reference DUT and the ends around it | `kernel` |
//! | [`devices`] | what OTG devices run: emulated hosts, their FRR daemons (and the keeper that outlives none of them), the frames those send as seen on the wire, a port's LLDP socket | `kernel` |

pub mod devices;
pub mod error;
pub mod files;
pub mod kernel;
pub mod rx;
pub mod testbed;
pub mod tx;
pub mod xdp;

pub use error::IoError;
