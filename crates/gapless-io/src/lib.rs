//! # gapless-io
//!
//! Thin Linux IO: the TX backends under one trait ([`tx::TxBackend`]), the RX sources under
//! another ([`rx::RxSource`]), AF_XDP for both, the kernel controls a run sets and reads
//! back, the files gapless reads and writes, and the veth testbed.
//!
//! | module | holds | may import |
//! |---|---|---|
//! | [`error`] | [`IoError`]: what is wrong and how to fix it | nothing |
//! | [`socket`] | setsockopt, raw packet sockets, the readable wait, the TAI offset | `error` |
//! | [`kernel`] | interface facts, qdiscs, the NIC rate limiter, capabilities, TX timestamping, a port's addresses, a bridge's forwarding database | `socket` |
//! | [`files`] | the atomic writer, pcap/pcapng/CSV readers | `error` |
//! | [`tx`] | AF_PACKET, pcap-file and null backends, the filler wrapper, several ports on one loop | `socket`, `kernel`, `files` |
//! | [`rx`] | the RX trait and the TPACKET_V3 ring | `socket`, `kernel` |
//! | [`xdp`] | AF_XDP TX and RX, and its XDP program | `socket`, `kernel`, `tx`, `rx` |
//! | [`testbed`] | the veth testbed, the reference DUT and the ends around it | `kernel` |
//! | [`hosts`] | emulated hosts (OTG devices): a macvlan each, on the kernel's stack | `socket`, `kernel` |
//! | [`lldp`] | a port's LLDP socket (AF_PACKET, EtherType 0x88cc) | `socket`, `kernel` |

pub mod error;
pub mod files;
pub mod frr;
pub mod hosts;
pub mod kernel;
pub mod lldp;
pub mod rx;
pub mod rx_ports;
pub mod socket;
pub mod testbed;
pub mod tx;
pub mod xdp;

pub use error::IoError;
