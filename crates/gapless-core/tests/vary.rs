//! Time-varying rates with Poisson departures: a non-homogeneous Poisson process. After the
//! time change u = rate · Λ(t), its gaps are Exp(1) (Kolmogorov–Smirnov at α = 0.001 on 10⁵
//! gaps). And the errors of bad curves.

mod common;
use common::{ks, KS_CRIT};

use gapless_core::spec::files::FileLoader;
use gapless_core::{CompileCtx, ProfileSpec, StreamGen};
use statrs::distribution::{ContinuousCDF, Exp};

struct Files(&'static str);
impl FileLoader for Files {
    fn load(&self, _: &str) -> Result<String, String> {
        Ok(self.0.to_string())
    }
}

fn compile(timing: &str, files: &dyn FileLoader) -> Result<gapless_core::Profile, String> {
    let text = format!("[[stream]]\n[stream.timing]\n{timing}\n");
    ProfileSpec::from_toml(&text, "t")
        .map_err(|e| e.to_string())?
        .compile(&CompileCtx {
            link_speed_bps: None,
            files,
        })
        .map_err(|e| e.to_string())
}

fn time_changed_gaps(timing: &str, files: &dyn FileLoader, lam: impl Fn(f64) -> f64) -> Vec<f64> {
    let p = compile(timing, files).unwrap_or_else(|e| panic!("{e}"));
    let mut g = StreamGen::new(p.streams[0].clone());
    let mut prev = 0.0;
    let mut out = Vec::new();
    while let Some(d) = g.next_departure() {
        let u = 1e5 * lam(d.at_ns as f64 / 1e9);
        out.push(u - prev);
        prev = u;
        g.build(&mut [0u8; 64], d.at_ns);
        g.advance(64);
    }
    out.remove(0);
    out
}

#[test]
fn poisson_under_a_ramp_is_a_non_homogeneous_poisson_process() {
    // Ramp 0.2 -> 1 over 1 s at 100 kpps: Λ(t) = 0.2 t + 0.4 t² until 1 s, then + (t - 1).
    let lam = |t: f64| {
        let r = t.min(1.0);
        0.2 * r + 0.4 * r * r + (t - r)
    };
    let timing = "rate_pps = 1e5\ncount = 100001\npattern = \"poisson\"\nvary = { kind = \"ramp\", from = 0.2, to = 1.0, over_s = 1 }";
    let x = time_changed_gaps(timing, &Files(""), lam);
    let e = Exp::new(1.0).unwrap();
    let d = ks(x, |v| e.cdf(v));
    assert!(d < KS_CRIT, "KS D expected < {KS_CRIT:.5}, got {d:.5}");
}

#[test]
fn poisson_under_a_linear_trace_is_a_non_homogeneous_poisson_process() {
    // Trace 0.5 -> 1.5 over 0.5 s, then held at 1.5.
    let lam = |t: f64| {
        let r = t.min(0.5);
        0.5 * r + r * r + 1.5 * (t - r)
    };
    let trace = Files("time_s,factor\n0, 0.5\n0.5, 1.5\n");
    let timing = "rate_pps = 1e5\ncount = 100001\npattern = \"poisson\"\nvary = { kind = \"trace\", file = \"t.csv\" }";
    let x = time_changed_gaps(timing, &trace, lam);
    let e = Exp::new(1.0).unwrap();
    let d = ks(x, |v| e.cdf(v));
    assert!(d < KS_CRIT, "KS D expected < {KS_CRIT:.5}, got {d:.5}");
}

#[test]
fn bad_curves_name_the_path_and_the_fix() {
    let err = |t: &str, f: &'static str| compile(&format!("rate_pps = 1000\n{t}"), &Files(f)).unwrap_err();
    let e = err("vary = { kind = \"ramp\", from = 1, over_s = 1 }", "");
    assert!(e.starts_with("stream[0].timing.vary.to: this kind needs `to`"), "{e}");
    let e = err("vary = { kind = \"ramp\", from = 1, to = 0, over_s = 1 }", "");
    assert!(e.contains("ends at factor 0"), "{e}");
    let e = err("vary = { kind = \"sine\", amplitude = 2, period_s = 1 }", "");
    assert!(
        e.starts_with("stream[0].timing.vary.amplitude: amplitude 2 is outside [0, 1]"),
        "{e}"
    );
    let e = err("vary = { kind = \"sine\", amplitude = 0.5, period_s = 1, to = 3 }", "");
    assert!(
        e.starts_with("stream[0].timing.vary.to: `to` does not apply to kind = \"sine\""),
        "{e}"
    );
    let e = err("vary = { kind = \"steps\", steps = [[1, 0.5]] }", "");
    assert!(e.contains("the first step is at 1 s"), "{e}");
    let e = err("vary = { kind = \"trace\", file = \"t\" }", "0, 1\n1, x\n");
    assert!(e.contains("line 2: \"1, x\" is not `time_s, factor`"), "{e}");
    let e = err("vary = { kind = \"trace\", file = \"t\" }", "0, 1\n1, -2\n");
    assert!(e.contains("the factor -2 is negative"), "{e}");
    let e = err(
        "pattern = \"bursty\"\nburst_size = 4\nvary = { kind = \"sine\", amplitude = 0.5, period_s = 1 }",
        "",
    );
    assert!(
        e.starts_with("stream[0].timing.vary: vary does not apply to pattern \"bursty\""),
        "{e}"
    );
    let e = err("pattern = \"self_similar\"", "");
    assert!(e.contains("needs `self_similar`"), "{e}");
    let e = err("pattern = \"self_similar\"\nself_similar = { hurst = 1.2 }", "");
    assert!(
        e.starts_with("stream[0].timing.self_similar.hurst: H = 1.2 is outside (0.5, 1)"),
        "{e}"
    );
    let e = err("pattern = \"self_similar\"\nself_similar = { hurst = 0.8, method = \"onoff\", sources = 2, on_rate_pps = 100 }", "");
    assert!(e.contains("cannot make a mean of 1000 pps"), "{e}");
}
