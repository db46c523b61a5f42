//! Bad profiles: each error names the field and the fix.

use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileError, ProfileSpec};

fn compile_err(toml: &str, link: Option<f64>) -> String {
    let spec = match ProfileSpec::from_toml(toml, "p.toml") {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    match spec.compile(&CompileCtx {
        link_speed_bps: link,
        files: &NoFiles,
    }) {
        Ok(_) => panic!("profile accepted:\n{toml}"),
        Err(e) => e.to_string(),
    }
}

const GOOD: &str = "[[stream]]\n[stream.timing]\nrate_pps = 1000\n";

#[test]
fn good_profile_compiles() {
    let spec = ProfileSpec::from_toml(GOOD, "p.toml").unwrap();
    let p = spec
        .compile(&CompileCtx {
            link_speed_bps: Some(10e9),
            files: &NoFiles,
        })
        .unwrap();
    assert_eq!(p.streams.len(), 1);
    assert_eq!(p.streams[0].target_pps, 1000.0);
}

#[test]
fn malformed_toml_names_the_line() {
    let e = ProfileSpec::from_toml("[[stream]\nrate = ", "p.toml").unwrap_err();
    assert!(matches!(e, ProfileError::Parse { .. }));
    let m = e.to_string();
    assert!(m.starts_with("profile p.toml:"), "{m}");
    assert!(m.contains("line 1"), "{m}");
}

#[test]
fn unknown_key_is_named() {
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pps = 1\nrate_ppps = 2\n", None);
    assert!(m.contains("unknown field `rate_ppps`"), "{m}");
    assert!(m.contains("rate_pps"), "expected the valid keys to be listed: {m}");
    let m = compile_err("sed = 1\n[[stream]]\n[stream.timing]\nrate_pps = 1\n", None);
    assert!(m.contains("unknown field `sed`"), "{m}");
}

#[test]
fn zero_and_negative_rates() {
    for r in ["0", "-5", "0.0"] {
        let m = compile_err(&format!("[[stream]]\n[stream.timing]\nrate_pps = {r}\n"), None);
        assert!(m.starts_with("stream[0].timing.rate_pps:"), "{m}");
        assert!(
            m.contains("not a positive number") && m.contains("Fix: give a rate above 0"),
            "{m}"
        );
    }
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_bps_l1 = -1e9\n", None);
    assert!(m.starts_with("stream[0].timing.rate_bps_l1:"), "{m}");
}

#[test]
fn missing_and_double_rate() {
    let m = compile_err("[[stream]]\n[stream.timing]\ncount = 5\n", None);
    assert!(
        m.contains("no rate is given") && m.contains("Fix: add one of rate_pps"),
        "{m}"
    );
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pps = 5\nrate_bps_l2 = 1e6\n", None);
    assert!(m.contains("several rates are given (rate_pps, rate_bps_l2)"), "{m}");
}

#[test]
fn rate_above_link_speed() {
    // 64 B at 15 Mpps is 10.08 Gbit/s at L1, above a 10 Gbit/s link.
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pps = 15e6\n", Some(10e9));
    assert!(m.contains("above the link speed of 10.0000 Gbit/s"), "{m}");
    assert!(m.contains("Fix: lower the rate"), "{m}");
    // Two streams that fit alone but not together.
    let two = "[[stream]]\n[stream.timing]\nrate_pct = 60\n[[stream]]\n[stream.timing]\nrate_pct = 60\n";
    let m = compile_err(two, Some(10e9));
    assert!(m.contains("the streams together ask for 12.0000 Gbit/s"), "{m}");
    // The profile's link speed wins over the interface's.
    let m = compile_err(
        &format!("link_speed_bps = 1e9\n{GOOD}\n[stream.size]\nimix = \"simple\"\n")
            .replace("rate_pps = 1000", "rate_pps = 1e6"),
        Some(100e9),
    );
    assert!(m.contains("above the link speed of 1.0000 Gbit/s"), "{m}");
}

#[test]
fn rate_pct_needs_a_link_speed() {
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pct = 10\n", None);
    assert!(
        m.contains("link speed is unknown") && m.contains("link_speed_bps"),
        "{m}"
    );
}

#[test]
fn template_and_field_errors() {
    let m = compile_err(
        "[[stream]]\n[stream.template]\neth_dst = \"zz:00\"\n[stream.timing]\nrate_pps = 1\n",
        None,
    );
    assert!(m.starts_with("stream[0].template.eth_dst:"), "{m}");
    let m = compile_err(
        "[[stream]]\n[stream.template]\nip_src = \"2001:2::1\"\n[stream.timing]\nrate_pps = 1\n",
        None,
    );
    assert!(m.contains("different IP versions"), "{m}");
    let m = compile_err("[[stream]]\nsize = 63\n[stream.timing]\nrate_pps = 1\n", None);
    assert!(m.contains("frame size 63 B is outside 64..=16384"), "{m}");
    let m = compile_err("[[stream]]\n[[stream.field]]\nfield = \"vlan_id\"\nop = \"inc\"\nfrom = 1\nto = 2\n[stream.timing]\nrate_pps = 1\n", None);
    assert!(
        m.contains("stream[0].field[0].vlan") && m.contains("no VLAN tag 0"),
        "{m}"
    );
    let m = compile_err("[[stream]]\n[[stream.field]]\nfield = \"dscp\"\nop = \"inc\"\nfrom = 1\nto = 64\n[stream.timing]\nrate_pps = 1\n", None);
    assert!(m.contains("64 does not fit the dscp field (max 63)"), "{m}");
    let m = compile_err("[[stream]]\n[[stream.field]]\nfield = \"ttl\"\nop = \"inc\"\nfrom = 9\nto = 3\n[stream.timing]\nrate_pps = 1\n", None);
    assert!(m.contains("`to` (3) is below `from` (9)"), "{m}");
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pps = 1\npattern = \"distribution\"\ndist = { kind = \"pareto\", shape = 0.9 }\n", None);
    assert!(
        m.contains("stream[0].timing.dist.shape") && m.contains("must be > 1"),
        "{m}"
    );
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pps = 1\ncount = 0\n", None);
    assert!(m.contains("count is 0"), "{m}");
    let m = compile_err("", None);
    assert!(m.contains("no streams"), "{m}");
}

#[test]
fn rates_above_any_link_are_refused_with_the_ceiling() {
    let m = compile_err("[[stream]]\n[stream.timing]\nrate_pps = 1e12\ncount = 1\n", None);
    assert!(
        m.contains("stream[0].timing") && m.contains("595 Mpps") && m.contains("at most 600000000 pps"),
        "{m}"
    );
}

#[test]
fn distributions_whose_mean_cannot_converge_are_refused() {
    for (dist, key) in [
        ("kind = \"pareto\", shape = 1.0000001", "dist"),
        ("kind = \"gamma\", shape = 1e-300", "dist"),
        ("kind = \"weibull\", shape = 0.06", "dist"),
        ("kind = \"lognormal\", sigma = 5.0", "dist"),
    ] {
        let p = format!("[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 100000\npattern = \"distribution\"\ndist = {{ {dist} }}\n");
        let m = compile_err(&p, None);
        assert!(
            m.contains(&format!("stream[0].timing.{key}"))
                && (m.contains("too heavy for its mean to converge")
                    || m.contains("vary too much for their mean to hold"))
                && m.contains("Fix:"),
            "{dist}: {m}"
        );
    }
    // An off-time distribution of a bursty stream is checked the same way.
    let m = compile_err(
        "[[stream]]\n[stream.timing]\nrate_pps = 1000\nduration_s = 10\npattern = \"bursty\"\nburst_size = 8\noff = { kind = \"pareto\", shape = 1.000001 }\n",
        None,
    );
    assert!(m.contains("stream[0].timing.off") && m.contains("converge"), "{m}");
    // The examples' heavy tails, over any of 50 seeds, compile.
    for seed in 0..50 {
        for dist in [
            "kind = \"pareto\", shape = 1.5",
            "kind = \"weibull\", shape = 0.7",
            "kind = \"lognormal\", sigma = 0.8",
        ] {
            let p = format!("seed = {seed}\n[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 2000\npattern = \"distribution\"\ndist = {{ {dist} }}\n");
            let spec = ProfileSpec::from_toml(&p, "p.toml").unwrap();
            let r = spec.compile(&CompileCtx {
                link_speed_bps: None,
                files: &NoFiles,
            });
            assert!(r.is_ok(), "seed {seed}, {dist}: {:?}", r.err());
        }
    }
    // Heavy but convergent tails still compile.
    for dist in [
        "kind = \"pareto\", shape = 1.5",
        "kind = \"weibull\", shape = 0.5",
        "kind = \"lognormal\", sigma = 1.0",
    ] {
        let p = format!("[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 100000\npattern = \"distribution\"\ndist = {{ {dist} }}\n");
        let spec = ProfileSpec::from_toml(&p, "p.toml").unwrap();
        assert!(
            spec.compile(&CompileCtx {
                link_speed_bps: None,
                files: &NoFiles
            })
            .is_ok(),
            "{dist} should compile"
        );
    }
}

#[test]
fn variant_and_size_sequence_errors() {
    let t = "[stream.timing]\nrate_pps = 1\n";
    let m = compile_err(
        &format!("[[stream]]\nsize = 64\n{t}[[stream.variant]]\nsize = 64\n"),
        None,
    );
    assert!(
        m.starts_with("stream[0]: the stream has [[stream.variant]] tables and its own"),
        "{m}"
    );
    let m = compile_err(&format!("[[stream]]\n{t}[[stream.variant]]\nweight = 2\n"), None);
    assert!(
        m.starts_with("stream[0].variant[0].weight: `weight` does not apply to variant_order = \"sequence\""),
        "{m}"
    );
    let m = compile_err(
        &format!("[[stream]]\nvariant_order = \"random\"\n{t}[[stream.variant]]\nweight = 0\n"),
        None,
    );
    assert!(m.starts_with("stream[0].variant[0].weight: weight is 0"), "{m}");
    let m = compile_err(
        &format!("[[stream]]\n{t}[[stream.variant]]\n[[stream.variant]]\nsize = 9000000\n"),
        None,
    );
    assert!(m.starts_with("stream[0].variant[1].size"), "{m}");
    let m = compile_err(&format!("[[stream]]\nsize = {{ list = [64, 20] }}\n{t}"), None);
    assert!(m.contains("frame size 20 B is outside 64..=16384"), "{m}");
    let m = compile_err(
        &format!("[[stream]]\nsize = {{ list = [64], imix = \"simple\" }}\n{t}"),
        None,
    );
    assert!(m.contains("more than one of list, ramp, imix and kind"), "{m}");
    let m = compile_err(
        &format!("[[stream]]\nsize = {{ ramp = [64, 128], step = 0 }}\n{t}"),
        None,
    );
    assert!(m.starts_with("stream[0].size.step: step is 0"), "{m}");
}
