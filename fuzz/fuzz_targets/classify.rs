//! The meter's frame classifier and per-stream meter: any bytes as a received frame, with
//! the first 12 bytes of the input as its RX time and wire length.
#![no_main]
use gapless_core::meter::{classify, classify_cut, Meter, MeterConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let ts = u64::from_le_bytes(data[..8].try_into().unwrap());
    let wire = u32::from_le_bytes(data[8..12].try_into().unwrap());
    let frame = &data[12..];
    let _ = classify(frame);
    let _ = classify_cut(frame);
    let mut meter = Meter::new(MeterConfig::default());
    meter.on_frame(ts, frame, wire);
    meter.on_frame(ts.wrapping_add(1000), frame, wire);
    let _ = meter.report();
});
