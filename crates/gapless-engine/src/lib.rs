//! # gapless-engine
//!
//! The send loop ([`run::run`]), its clock ([`clock::RunClock`], the TSC through quanta),
//! live counters, the environment probe, and result assembly and atomic writing.

pub mod clock;
pub mod cpu;
pub mod live;
pub mod meter;
pub mod report;
pub mod run;

pub use run::{merge_workers, run, RunOptions, RunStats};
