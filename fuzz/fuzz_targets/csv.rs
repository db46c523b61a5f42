//! The CSV timestamp reader feeding the meter: any bytes as a CSV file.
#![no_main]
#[allow(dead_code)] // each target uses one body
#[path = "../src/bodies.rs"]
mod bodies;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bodies::csv(data));
