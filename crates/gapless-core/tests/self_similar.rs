//! Self-similar schedules: the Hurst parameter estimated from the departures (counts per
//! 1 ms over 4·10⁶ departures at 50 kpps, 80 000 bins) by two estimators, aggregated variance and the
//! Haar wavelet (Abry–Veitch), is within ±0.05 of the target for H = 0.7, 0.8 and 0.9; the
//! mean rate is within 1 %; a Poisson control reads as 0.5 ± 0.05.

use gapless_core::spec::files::NoFiles;
use gapless_core::timing::hurst::{aggregated_variance, bin_counts, wavelet};
use gapless_core::{CompileCtx, ProfileSpec, StreamConfig, StreamGen};

const DEPARTURES: u64 = 4_000_000;
const RATE: f64 = 50_000.0;

fn compile(timing: &str) -> StreamConfig {
    compile_seeded(1, timing)
}

fn compile_seeded(seed: u64, timing: &str) -> StreamConfig {
    let text =
        format!("seed = {seed}\n[[stream]]\n[stream.timing]\nrate_pps = {RATE}\ncount = {DEPARTURES}\n{timing}\n");
    ProfileSpec::from_toml(&text, "t")
        .unwrap()
        .compile(&CompileCtx {
            link_speed_bps: None,
            files: &NoFiles,
        })
        .unwrap_or_else(|e| panic!("{e}"))
        .streams
        .remove(0)
}

/// Departure times (ns) of the whole stream.
fn departures(cfg: StreamConfig) -> Vec<u64> {
    let mut g = StreamGen::new(cfg);
    let mut out = Vec::with_capacity(DEPARTURES as usize);
    while let Some(d) = g.next_departure() {
        for _ in 0..d.frames {
            out.push(d.at_ns);
        }
        let mut buf = [0u8; 64];
        for _ in 0..d.frames {
            g.build(&mut buf, d.at_ns);
        }
        g.advance(64 * u64::from(d.frames));
    }
    out
}

/// (aggregated variance H, wavelet H, mean rate pps).
fn estimate(times: &[u64]) -> (f64, f64, f64) {
    let counts = bin_counts(times.iter().copied(), 1_000_000);
    let rate = (times.len() - 1) as f64 * 1e9 / (times[times.len() - 1] - times[0]) as f64;
    (aggregated_variance(&counts).unwrap(), wavelet(&counts).unwrap(), rate)
}

fn check(what: &str, timing: &str, h: f64) {
    let cfg = compile(timing);
    let t = departures(cfg);
    assert_eq!(t.len() as u64, DEPARTURES, "{what}: expected every departure");
    let (av, wv, rate) = estimate(&t);
    println!("{what}: H target {h}: aggregated variance {av:.3}, wavelet {wv:.3}, rate {rate:.1}");
    assert!(
        (av - h).abs() <= 0.05,
        "{what}: aggregated-variance H expected {h} ± 0.05, got {av:.3}"
    );
    assert!(
        (wv - h).abs() <= 0.05,
        "{what}: wavelet H expected {h} ± 0.05, got {wv:.3}"
    );
    assert!(
        (rate / RATE - 1.0).abs() < 0.01,
        "{what}: mean rate expected {RATE} ± 1 %, got {rate:.1}"
    );
}

#[test]
fn fgn_h07() {
    check("fgn", "pattern = \"self_similar\"\nself_similar = { hurst = 0.7 }", 0.7);
}

#[test]
fn fgn_h08() {
    check("fgn", "pattern = \"self_similar\"\nself_similar = { hurst = 0.8 }", 0.8);
}

#[test]
fn fgn_h09() {
    check("fgn", "pattern = \"self_similar\"\nself_similar = { alpha = 1.2 }", 0.9);
}

#[test]
fn poisson_control_reads_one_half() {
    check("poisson", "pattern = \"poisson\"", 0.5);
}

#[test]
fn the_compiled_stream_reports_the_h_it_achieved() {
    let cfg = compile("pattern = \"self_similar\"\nself_similar = { hurst = 0.8 }");
    let r = cfg.pattern_report.as_ref().expect("a pattern report");
    assert_eq!(r["hurst_asked"], 0.8);
    let a = &r["achieved"];
    for k in ["hurst_aggregated_variance", "hurst_wavelet"] {
        let v = a[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {a}"));
        assert!((v - 0.8).abs() <= 0.05, "{k}: expected 0.8 ± 0.05, got {v}");
    }
    assert_eq!(a["departures"], DEPARTURES);
}

/// The on/off construction, measured the same way (for DESIGN-NOTES 29): run with
/// `cargo test --release -p gapless-core --test self_similar -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: see DESIGN-NOTES 29"]
fn measure_onoff_against_fgn() {
    for h in [0.7, 0.8, 0.9] {
        for seed in 1..=3 {
            for m in ["fgn", "onoff"] {
                let t = departures(compile_seeded(
                    seed,
                    &format!("pattern = \"self_similar\"\nself_similar = {{ hurst = {h}, method = \"{m}\" }}"),
                ));
                let (av, wv, rate) = estimate(&t);
                println!(
                    "{m:5} H {h} seed {seed}: aggvar {av:.3} wavelet {wv:.3} rate {:+.3} %",
                    (rate / RATE - 1.0) * 100.0
                );
            }
        }
    }
}
