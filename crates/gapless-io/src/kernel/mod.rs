//! Kernel controls a run sets and reads back: interface facts by ioctl ([`nic`]), egress
//! [`qdisc`]s (launch time, the shaper), the NIC's per-queue rate limiter ([`maxrate`]),
//! [`caps`] (capabilities), kernel/NIC TX [`timestamping`], the host's [`clock`] state
//! (read, never set), and link and route changes over rtnetlink stamped at their ACK
//! ([`rtnl`]), and a port's addresses ([`addrs`]).
//!
//! May import `socket` and `error`; nothing here sends or receives traffic.

pub mod addrs;
pub mod caps;
pub mod clock;
pub mod maxrate;
pub mod nic;
pub mod qdisc;
pub mod rtnl;
pub mod timestamping;
