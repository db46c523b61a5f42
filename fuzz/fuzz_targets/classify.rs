//! The meter's frame classifier and per-stream meter: any bytes as a received frame, with
//! the first 12 bytes of the input as its RX time and wire length.
#![no_main]
#[allow(dead_code)] // each target uses one body
#[path = "../src/bodies.rs"]
mod bodies;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bodies::classify_frame(data));
