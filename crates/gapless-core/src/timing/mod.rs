//! Timing: when frames leave.
//!
//! Holds: [`departures`] (a stream's departure-time generator: CBR, bursts, random gaps,
//! on/off), the gap [`dist`]ributions and analytic [`pdf`] tables, rate [`curve`]s and
//! [`varying`] rates, [`selfsim`]ilar traffic and its [`hurst`] estimate, and the [`seed`]s
//! every random draw starts from, and the [`clocks`] of several hosts (their state, their
//! offset from 4-timestamp exchanges, and when a latency across them can be believed).
//!
//! May import `spec` only. The per-loop scheduler that merges streams is in
//! [`crate::generator`], because it runs compiled streams.

pub mod clocks;
pub mod curve;
pub mod departures;
pub mod dist;
pub mod hurst;
pub mod pdf;
pub mod seed;
pub mod selfsim;
pub mod varying;
