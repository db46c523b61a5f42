//! # gapless-core
//!
//! The sans-IO core of gapless: profile parsing and validation, packet templates and the
//! field engine, departure schedules, the signature, the meter and the result model. No
//! sockets, threads, clocks or files here: time and file contents are arguments.
//!
//! The path of a profile: [`spec::ProfileSpec::from_toml`] -> [`spec::ProfileSpec::compile`]
//! -> [`profile::model::Profile`] -> one [`generator::stream::StreamGen`] per stream, which
//! a [`generator::scheduler::Scheduler`] merges by next departure.
//!
//! The modules, each importing only those above it in this table:
//!
//! | module | holds |
//! |---|---|
//! | [`spec`] | the profile as written, its error type, the file loader |
//! | [`timing`] | departure generators, distributions, curves, self-similar traffic, seeds |
//! | [`packet`] | templates, the field engine, checksums, the signature, sizes, variants |
//! | [`profile`] | compilation, the compiled model, the plan per send loop |
//! | [`host`] | where a run happened |
//! | [`meter`] | the RX meter and its report |
//! | [`generator`] | a send loop's streams and scheduler |
//! | [`result`] | the result model, the verdict, TX-stamp departure errors |
//! | [`experiment`] | RFC 2544 searches, MLRsearch, RFC 2889, sweeps, several ports' directions, statistics across repetitions |

pub mod experiment;
pub mod generator;
pub mod host;
pub mod meter;
pub mod packet;
pub mod profile;
pub mod result;
pub mod spec;
pub mod timing;

pub use generator::stream::StreamGen;
pub use profile::compile::CompileCtx;
pub use profile::model::{Profile, StreamConfig};
pub use spec::error::ProfileError;
pub use spec::ProfileSpec;
