//! What OTG devices run, on the kernel's stack: emulated [`hosts`] (a macvlan each, in a
//! namespace of its own), their routing daemons ([`frr`]: started, asked over the vty,
//! killed with the server by a keeper; [`frr::wire`]: when a daemon's message left on the
//! wire), a port's socket for a link-local protocol ([`group`]: LLDP, LACP), and a LAG's
//! interface for the devices on it ([`lagif`]). What the frames and daemons say is the protocol
//! crate's (`gapless_otg`); this module only opens, starts, sends and reads.
//!
//! May import `kernel` and `error`, and `tx::lag` ([`lagif`] forwards by a LAG's live set).

pub mod frr;
pub mod group;
pub mod hosts;
pub mod lagif;
pub mod liveness;
