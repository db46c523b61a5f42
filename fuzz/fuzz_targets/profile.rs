//! The profile parser and compiler: any text is parsed, and what parses is compiled. Neither
//! may panic; errors are fine.
#![no_main]
#[allow(dead_code)] // each target uses one body
#[path = "../src/bodies.rs"]
mod bodies;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bodies::profile(data));
