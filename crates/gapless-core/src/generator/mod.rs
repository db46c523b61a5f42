//! What a send loop runs, sans IO: one [`stream::StreamGen`] per compiled stream (its
//! departures, fields and frames), a [`replay`] reader for replayed captures, and the loop's
//! [`scheduler`] that merges its streams by next departure and keeps the lateness books.
//!
//! May import `profile::model`, `timing`, `packet` and `meter::lazy` (the lateness
//! histograms). The engine's send loop is its only caller.

pub mod replay;
pub mod scheduler;
pub mod stream;
