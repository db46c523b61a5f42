//! Kernel controls a run sets and reads back: interface facts by ioctl ([`nic`]), egress
//! [`qdisc`]s (launch time, the shaper), the NIC's per-queue rate limiter ([`maxrate`]),
//! [`caps`] (capabilities), kernel/NIC TX [`timestamping`], the host's [`clock`] state
//! (read, never set), and link and route changes over rtnetlink stamped at their ACK
//! ([`rtnl`]), a port's addresses ([`addrs`]), a bridge's forwarding database
//! ([`bridge`]), and the socket calls every backend shares ([`socket`]: setsockopt, raw
//! packet sockets, the readable wait, the TAI offset).
//!
//! May import `error`; nothing here sends or receives traffic.

pub mod addrs;
pub mod bridge;
pub mod caps;
pub mod clock;
pub mod maxrate;
pub mod nic;
pub mod qdisc;
pub mod rtnl;
pub mod socket;
pub mod timestamping;
