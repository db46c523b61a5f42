//! What each fuzz target does with one input, shared by the cargo-fuzz targets
//! (fuzz/fuzz_targets, nightly, coverage-guided: bench/fuzz.sh) and the stable replay of every
//! committed corpus input in the test suite (crates/gapless-io/tests/fuzz_corpus.rs). None
//! may panic; errors are fine.
use std::sync::atomic::AtomicBool;

use gapless_core::meter::{classify, classify_cut, Meter, MeterConfig};
use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileSpec};
use gapless_io::files::capture::{read_pcap, CsvTimestamps};

/// The profile parser and compiler: any text is parsed, and what parses is compiled.
pub fn profile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(spec) = ProfileSpec::from_toml(text, "fuzz.toml") {
        let _ = spec.compile(&CompileCtx {
            link_speed_bps: Some(10e9),
            files: &NoFiles,
        });
    }
}

/// A file of this process's own in the temporary directory holding `data`; `ext` names the
/// kind. The readers take a path (as `gapless analyze` does).
fn scratch(data: &[u8], ext: &str) -> Option<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("gapless-fuzz-{}.{ext}", std::process::id()));
    std::fs::write(&path, data).ok().map(|_| path)
}

/// The pcap/pcapng reader feeding the meter: any bytes as a capture file.
pub fn capture(data: &[u8]) {
    let Some(path) = scratch(data, "cap") else { return };
    let mut meter = Meter::new(MeterConfig::default());
    let stop = AtomicBool::new(false);
    let _ = read_pcap(&path, &stop, &mut |ts, frame, len| meter.on_frame(ts, frame, len));
    let _ = meter.report();
    let _ = std::fs::remove_file(&path);
}

/// The CSV timestamp reader feeding the meter: any bytes as a CSV file.
pub fn csv(data: &[u8]) {
    let Some(path) = scratch(data, "csv") else { return };
    if let Ok(mut csv) = CsvTimestamps::open(&path) {
        let mut meter = Meter::new(MeterConfig::default());
        let stop = AtomicBool::new(false);
        let _ = csv.read(&stop, &mut |row| match row.sig {
            Some(sig) => meter.on_signed(row.rx_ns, row.len.unwrap_or(0), sig),
            None => meter.on_flow(row.rx_ns, row.len.unwrap_or(0), None),
        });
        let _ = meter.report();
    }
    let _ = std::fs::remove_file(&path);
}

/// The meter's frame classifier and per-stream meter: any bytes as a received frame, with
/// the first 12 bytes of the input as its RX time and wire length.
pub fn classify_frame(data: &[u8]) {
    if data.len() < 12 {
        return;
    }
    let ts = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let wire = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
    let frame = &data[12..];
    let _ = classify(frame);
    let _ = classify_cut(frame);
    let mut meter = Meter::new(MeterConfig::default());
    meter.on_frame(ts, frame, wire);
    meter.on_frame(ts.wrapping_add(1000), frame, wire);
    let _ = meter.report();
}
