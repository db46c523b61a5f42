//! A profile compiled: spec -> [`compile`] -> [`model`] -> [`plan`].
//!
//! Holds: the compiler ([`compile`], with replay streams in [`compile::replay`]), the
//! compiled [`model`] it produces (Profile, StreamConfig, Replay) and the [`plan`] that shares
//! a profile's streams out over send loops.
//!
//! May import `spec`, `timing` and `packet`. The model never imports the compiler: run-time
//! code (the [`crate::generator`]) takes a [`model::Profile`] and nothing else.

pub mod compile;
pub mod model;
pub mod plan;
