//! Frames: what a stream puts on the wire.
//!
//! Holds: [`template`] (a template built from headers) and [`whole_frame`] (a template given
//! as a whole frame), the [`fields`] engine (flat in [`hot`]) and its [`rewrite`] of replayed frames,
//! [`checksum`] arithmetic, header fields set by [`hand`], where headers sit ([`layout`]), a template cut to one length ([`fixed`]), the [`signature`] every metered frame carries, [`filler`] frames,
//! frame [`sizes`], a stream's [`variant`]s, and which LAG member a frame leaves on ([`spread`]).
//!
//! May import `spec` and `timing` (a size distribution draws like a gap distribution);
//! never `profile`, `generator` or anything that measures.

pub mod checksum;
pub mod fields;
pub mod filler;
pub mod fixed;
pub mod hand;
pub mod hot;
pub mod layout;
pub mod rewrite;
pub mod signature;
pub mod sizes;
pub mod spread;
pub mod template;
pub mod tunnel;
pub mod variant;
pub mod whole_frame;
