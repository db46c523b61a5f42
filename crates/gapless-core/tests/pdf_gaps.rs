//! Inter-departure times from an analytic density: 10^5 gaps of a compiled profile against
//! the normalised analytic CDF (Kolmogorov–Smirnov at α = 0.001), for three formulas, one
//! of them bimodal; and the rate a pdf sets by its own mean, or takes from the profile.

mod common;
use common::{ks, KS_CRIT};

use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileSpec, StreamGen};
use statrs::distribution::{ContinuousCDF, Gamma, Normal};

const N: usize = 100_000;

fn stream(timing: &str) -> StreamGen {
    let text = format!("[[stream]]\n[stream.timing]\ncount = 200000\n{timing}\n");
    let p = ProfileSpec::from_toml(&text, "t")
        .unwrap()
        .compile(&CompileCtx {
            link_speed_bps: None,
            files: &NoFiles,
        })
        .unwrap_or_else(|e| panic!("{e}"));
    StreamGen::new(p.streams[0].clone())
}

/// `n` gaps of the stream, µs.
fn gaps_us(g: &mut StreamGen, n: usize) -> Vec<f64> {
    let mut prev = g.next_departure().unwrap().at_ns;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        g.advance(64);
        let at = g.next_departure().unwrap().at_ns;
        out.push((at - prev) as f64 / 1e3);
        prev = at;
    }
    out
}

/// `cdf` truncated to [a, b] and renormalised.
fn on(a: f64, b: f64, cdf: impl Fn(f64) -> f64) -> impl Fn(f64) -> f64 {
    move |x| ((cdf(x.clamp(a, b)) - cdf(a)) / (cdf(b) - cdf(a))).clamp(0.0, 1.0)
}

fn check(name: &str, pdf: &str, support: [f64; 2], cdf: impl Fn(f64) -> f64) {
    let timing = format!(
        "pattern = \"distribution\"\ndist = {{ kind = \"pdf\", pdf = \"{pdf}\", support_us = [{}, {}] }}",
        support[0], support[1]
    );
    let x = gaps_us(&mut stream(&timing), N);
    let d = ks(x, on(support[0], support[1], cdf));
    println!("{name}: D = {d:.5} (critical {KS_CRIT:.5})");
    assert!(d < KS_CRIT, "{name}: KS D expected < {KS_CRIT:.5}, got {d:.5}");
}

#[test]
fn ks_gamma_shaped_formula() {
    // x² e^(-x/3) is a Gamma(3, scale 3) density up to its constant.
    let g = Gamma::new(3.0, 1.0 / 3.0).unwrap();
    check("x^2 exp(-x/3)", "x^2 * exp(-x/3)", [0.0, 60.0], |x| g.cdf(x));
}

#[test]
fn ks_bimodal_formula() {
    // Two normal bumps of equal mass: N(10, 1) and N(30, 2).
    let (a, b) = (Normal::new(10.0, 1.0).unwrap(), Normal::new(30.0, 2.0).unwrap());
    check(
        "bimodal",
        "exp(-((x-10)^2)/2) + 0.5*exp(-((x-30)^2)/8)",
        [0.0, 50.0],
        |x| (a.cdf(x) + b.cdf(x)) / 2.0,
    );
}

#[test]
fn ks_log_uniform_formula() {
    check("1/x", "1/x", [1.0, 100.0], |x| x.ln() / 100f64.ln());
}

#[test]
fn a_pdf_without_rate_sets_the_rate_by_its_mean_and_with_one_keeps_the_rate() {
    // Uniform on [10, 30] µs: mean 20 µs, 50 kpps.
    let t = "pattern = \"distribution\"\ndist = { kind = \"pdf\", pdf = \"1\", support_us = [10, 30] }";
    let mut g = stream(t);
    assert!(
        (g.cfg.target_pps - 50_000.0).abs() < 1e-3,
        "expected 50000 pps, got {}",
        g.cfg.target_pps
    );
    let x = gaps_us(&mut g, N);
    let (lo, hi) = x.iter().fold((f64::MAX, 0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    assert!(
        lo >= 10.0 - 1e-3 && hi <= 30.0 + 1e-3,
        "gaps expected in [10, 30] µs, got [{lo}, {hi}]"
    );
    let g2 = stream(&format!("rate_pps = 1000\n{t}"));
    assert_eq!(
        g2.cfg.target_pps, 1000.0,
        "an explicit rate wins: the pdf gives the shape"
    );
}

#[test]
fn pdf_errors_name_the_path() {
    let bad = |dist: &str| {
        let text = format!("[[stream]]\n[stream.timing]\npattern = \"distribution\"\ndist = {dist}\n");
        ProfileSpec::from_toml(&text, "t")
            .unwrap()
            .compile(&CompileCtx {
                link_speed_bps: None,
                files: &NoFiles,
            })
            .unwrap_err()
            .to_string()
    };
    let e = bad("{ kind = \"pdf\", pdf = \"exp(-x\", support_us = [0, 9] }");
    assert!(
        e.starts_with("stream[0].timing.dist.pdf: the formula \"exp(-x\" does not parse"),
        "{e}"
    );
    let e = bad("{ kind = \"pdf\", pdf = \"sin(x)\", support_us = [0, 9] }");
    assert!(
        e.contains("the density is -") && e.contains("Fix: make the formula finite and non-negative"),
        "{e}"
    );
    let e = bad("{ kind = \"pdf\", pdf = \"x\" }");
    assert!(e.starts_with("stream[0].timing.dist.support_us:"), "{e}");
}
