//! # gapless-core
//!
//! The sans-IO core of gapless: profile parsing and validation, packet templates and the
//! field engine, departure schedules, the signature, and the result model. No sockets,
//! threads, clocks or files here: time and file contents are arguments.
//!
//! The path of a profile: [`spec::ProfileSpec::from_toml`] -> [`spec::ProfileSpec::compile`]
//! -> [`config::Profile`] -> one [`stream::StreamGen`] per stream, which the engine merges by
//! next departure time.

pub mod checksum;
pub mod config;
pub mod curve;
pub mod dist;
pub mod error;
pub mod experiment;
pub mod fields;
pub mod filler;
pub mod frame_template;
pub mod hurst;
pub mod meter;
pub mod pdf;
pub mod plan;
pub mod replay;
pub mod result;
pub mod rewrite;
pub mod rfc2544;
pub mod sched;
pub mod schedule;
pub mod selfsim;
pub mod signature;
pub mod spec;
pub mod stats;
pub mod stream;
pub mod template;
pub mod txstamp;
pub mod variant;
pub mod varying;
pub mod verdict;

pub use config::{CompileCtx, Profile, StreamConfig};
pub use error::ProfileError;
pub use spec::ProfileSpec;
pub use stream::StreamGen;
