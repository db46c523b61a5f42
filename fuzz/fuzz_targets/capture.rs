//! The pcap/pcapng reader feeding the meter: any bytes as a capture file. The reader takes a
//! path (as `gapless analyze` does), so the input is written to a file first.
#![no_main]
use std::sync::atomic::AtomicBool;

use gapless_core::meter::{Meter, MeterConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("gapless-fuzz-{}.cap", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let mut meter = Meter::new(MeterConfig::default());
    let stop = AtomicBool::new(false);
    let _ = gapless_io::files::capture::read_pcap(&path, &stop, &mut |ts, frame, len| meter.on_frame(ts, frame, len));
    let _ = meter.report();
});
