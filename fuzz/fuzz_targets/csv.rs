//! The CSV timestamp reader feeding the meter: any bytes as a CSV file.
#![no_main]
use std::sync::atomic::AtomicBool;

use gapless_core::meter::{Meter, MeterConfig};
use gapless_io::files::capture::CsvTimestamps;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("gapless-fuzz-{}.csv", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(mut csv) = CsvTimestamps::open(&path) else { return };
    let mut meter = Meter::new(MeterConfig::default());
    let stop = AtomicBool::new(false);
    let _ = csv.read(&stop, &mut |row| match row.sig {
        Some(sig) => meter.on_signed(row.rx_ns, row.len.unwrap_or(0), sig),
        None => meter.on_flow(row.rx_ns, row.len.unwrap_or(0), None),
    });
    let _ = meter.report();
});
