//! The pcap/pcapng reader feeding the meter: any bytes as a capture file. The reader takes a
//! path (as `gapless analyze` does), so the input is written to a file first.
#![no_main]
#[allow(dead_code)] // each target uses one body
#[path = "../src/bodies.rs"]
mod bodies;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bodies::capture(data));
