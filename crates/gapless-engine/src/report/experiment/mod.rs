//! An experiment's report: the summary for a terminal, the trial trace as CSV, and its plots.

mod plots;

use std::fmt::Write as _;
use std::path::Path;

use gapless_core::experiment::stats::Estimate;
use gapless_core::experiment::{ExperimentResult, PointResult, Setting, TrialRecord};

/// One trial as its live line prints it.
pub fn trial_line(r: &TrialRecord) -> String {
    let lat = r.run.latency.as_ref().map_or("-".to_string(), |l| {
        format!(
            "p50 {} p99 {}",
            us(l.percentiles_ns.p50 as f64),
            us(l.percentiles_ns.p99 as f64)
        )
    });
    let lat = match (r.run.directions.is_empty(), r.run.flooded) {
        (_, Some(f)) => format!("-  flooded to the monitor port {f}"),
        (true, None) => lat,
        (false, None) => directions_line(r),
    };
    format!(
        "trial {:>3}: {:<52} sent {:>9} received {:>9} loss {:>8.4} %  latency {lat}{}",
        r.index + 1,
        r.plan.purpose,
        r.run.sent,
        r.run.received,
        r.loss_pct,
        if r.valid {
            String::new()
        } else {
            "  INVALID (sender fell behind), run again".into()
        }
    )
}

/// Each direction's loss and p99 latency, for a trial's line.
fn directions_line(r: &TrialRecord) -> String {
    let each: Vec<String> = r
        .run
        .directions
        .iter()
        .map(|d| {
            let p99 = d
                .latency
                .as_ref()
                .map_or("-".into(), |l| us(l.percentiles_ns.p99 as f64));
            format!("{} loss {:.4} % p99 {p99}", d.direction, d.loss_ratio * 100.0)
        })
        .collect();
    format!("by direction: {}", each.join("; "))
}

/// Each direction at the trials the results rest on.
fn directions_text(s: &mut String, r: &ExperimentResult) {
    let _ = writeln!(s, "by direction (the search judged their aggregate):");
    for d in r.directions.iter().filter(|d| !d.at.is_empty()) {
        let _ = writeln!(s, "  {}:", d.name);
        for a in &d.at {
            let l = a.latency.as_ref().map(|l| &l.percentiles_ns);
            let lat = |f: &dyn Fn(&gapless_core::meter::report::Percentiles) -> i64| {
                l.map_or("-".into(), |p| us(f(p) as f64))
            };
            let _ = writeln!(
                s,
                "    {:<36} {:>9.0} frames/s offered, loss ratio {:.6}, latency p50 {}  p99 {}  p99.9 {}",
                format!("{}:", a.what),
                a.offered_pps,
                a.loss_ratio,
                lat(&|p| p.p50),
                lat(&|p| p.p99),
                lat(&|p| p.p99_9)
            );
        }
    }
}

fn us(ns: f64) -> String {
    if ns.abs() >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

fn est(e: &Estimate, f: impl Fn(f64) -> String) -> String {
    match e.half_width {
        Some(h) => format!("{} ± {}", f(e.mean), f(h)),
        None => f(e.mean),
    }
}

fn opt_est(e: &Option<Estimate>, f: impl Fn(f64) -> String) -> String {
    e.as_ref().map_or("-".into(), |e| est(e, f))
}

/// The summary for a terminal.
pub fn summary_text(r: &ExperimentResult, dut: Option<&str>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "experiment {}: {:?}, {} trials ({} run again because the sender fell behind), figures as mean ± {:.0} % CI",
        r.name.as_deref().unwrap_or("-"),
        r.method,
        r.trials.len(),
        r.repeats,
        r.confidence * 100.0
    );
    if let Some(d) = dut {
        let _ = writeln!(s, "device under test: {d}");
    }
    if let Some(m) = &r.mlrsearch {
        mlrsearch_text(&mut s, m);
    }
    for z in &r.rfc2544 {
        rfc2544_text(&mut s, z);
    }
    if let Some(x) = &r.rfc2889 {
        rfc2889_text(&mut s, x);
    }
    if !r.directions.is_empty() {
        directions_text(&mut s, r);
    }
    for c in &r.sweep {
        let _ = writeln!(
            s,
            "sweep{}:",
            c.curve.map_or(String::new(), |c| format!(" {}", c.label()))
        );
        point_header(&mut s);
        for p in &c.points {
            point_row(&mut s, p);
        }
    }
    if let Some(p) = &r.repeat {
        point_header(&mut s);
        point_row(&mut s, p);
    }
    if r.stopped {
        let _ = writeln!(
            s,
            "STOPPED before the end{}: the figures are of the trials that ran",
            r.error.as_ref().map_or(String::new(), |e| format!(" ({e})"))
        );
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

fn rfc2544_text(s: &mut String, z: &gapless_core::experiment::SizeResult) {
    let _ = writeln!(s, "RFC 2544, {} B frames:", z.frame_size);
    for t in &z.throughput {
        let _ = writeln!(
            s,
            "  throughput (loss ≤ {} %): {} ({} trials{}{})",
            t.loss_tolerance_pct,
            t.throughput_pps.map_or("none in range".into(), |p| format!(
                "{p:.0} frames/s, {:.3} Mbit/s on the wire",
                t.throughput_bps_l1.unwrap_or(0.0) / 1e6
            )),
            t.trials.len(),
            if t.search.converged {
                ""
            } else {
                ", NOT converged: more iterations needed"
            },
            match t.final_passed {
                Some(true) => ", final trial passed",
                Some(false) => ", FINAL TRIAL FAILED",
                None => "",
            }
        );
    }
    if let Some(p) = &z.latency {
        let _ = writeln!(
            s,
            "  latency at throughput ({} reps): p50 {}  p99 {}  p99.9 {}  (median of max {})",
            p.trials.len(),
            opt_est(&p.latency_p50_ns, us),
            opt_est(&p.latency_p99_ns, us),
            opt_est(&p.latency_p99_9_ns, us),
            p.latency_max_spread.as_ref().map_or("-".into(), |m| us(m.median))
        );
    }
    if !z.frame_loss.is_empty() {
        let steps: Vec<String> = z
            .frame_loss
            .iter()
            .map(|l| format!("{:.0} %: {:.3} %", l.load_pct, l.loss_pct))
            .collect();
        let _ = writeln!(s, "  frame loss rate by load: {}", steps.join(", "));
    }
    if let Some(b) = &z.back_to_back {
        let _ = writeln!(
            s,
            "  back-to-back at {:.0} frames/s: {} frames (per repetition {:?})",
            b.rate_pps,
            b.burst_frames
                .as_ref()
                .map_or("-".into(), |e| est(e, |v| format!("{v:.0}"))),
            b.bursts
        );
    }
}

/// MLRsearch: each goal's conditional throughput first, then latency at the fractions,
/// then what the search cost.
fn mlrsearch_text(s: &mut String, m: &gapless_core::experiment::MlrsearchResult) {
    let _ = writeln!(s, "MLRsearch (RFC 9971):");
    for g in &m.goals {
        let bounds = match (g.lower_bound_pps, g.upper_bound_pps) {
            (Some(l), Some(u)) => format!("between {l:.0} and {u:.0} frames/s"),
            (Some(l), None) => match m.sender_cap_pps {
                Some(c) => {
                    format!("at least {l:.0} frames/s, the largest load the sender held; it could not hold {c:.0}")
                }
                None => format!("from {l:.0} frames/s, the maximum load"),
            },
            (None, Some(u)) => format!("even the minimum load {u:.0} frames/s lost too much"),
            (None, None) => "no bound found".into(),
        };
        let _ = writeln!(
            s,
            "  {} (loss ratio ≤ {}, exceed ratio {}): {} ({bounds}{})",
            g.goal.name,
            g.goal.loss_ratio,
            g.goal.exceed_ratio,
            g.conditional_throughput_pps
                .map_or("no conditional throughput".into(), |t| format!("{t:.0} frames/s")),
            if g.met { "" } else { "; goal NOT met" }
        );
    }
    if !m.sender.is_empty() {
        let _ = writeln!(s, "  the sender: {}", m.sender);
    }
    // Over several ports each direction's latency is its own (below).
    for l in m.latency.iter().filter(|l| l.point.latency_p50_ns.is_some()) {
        let p = &l.point;
        let _ = writeln!(
            s,
            "  latency at {:.0} % of {} ({:.0} frames/s): p50 {}  p99 {}  p99.9 {}",
            l.fraction * 100.0,
            l.goal,
            l.rate_pps,
            opt_est(&p.latency_p50_ns, us),
            opt_est(&p.latency_p99_ns, us),
            opt_est(&p.latency_p99_9_ns, us)
        );
    }
    let _ = writeln!(
        s,
        "  {} trials, {:.1} trial seconds ({} run again because the sender fell behind: {:.1} s more){}",
        m.trials.len(),
        m.trial_seconds,
        m.retried_trials,
        m.retried_trial_seconds,
        if m.ran_out {
            "; STOPPED at search_duration_max_s"
        } else {
            ""
        }
    );
}

/// RFC 2889: each test's figure, then the procedure it came from.
fn rfc2889_text(s: &mut String, x: &gapless_core::experiment::rfc2889::Rfc2889Result) {
    let _ = writeln!(s, "RFC 2889:");
    if let Some(c) = &x.address_caching {
        let found = match (c.addresses, c.capacity) {
            (Some(n), Some(cap)) => format!(
                "{cap} addresses ({n} test addresses + {} of the test ports' own){}",
                c.own_entries,
                if c.at_max {
                    ", at least: every N tried passed"
                } else {
                    ""
                }
            ),
            _ => "none: even the fewest addresses tried were flooded".into(),
        };
        let _ = writeln!(s, "  address caching capacity: {found}\n    procedure: {}", c.procedure);
    }
    if let Some(l) = &x.address_learning_rate {
        let rate = l
            .rate_pps
            .map_or("none in range".into(), |r| format!("{r:.0} frames/s"));
        let _ = writeln!(
            s,
            "  address learning rate ({} addresses): {rate}\n    procedure: {}",
            l.addresses, l.procedure
        );
    }
    if let Some(m) = &x.fully_meshed {
        let _ = writeln!(
            s,
            "  fully meshed, {} ports: throughput {}; at {:.0} frames/s offered, forwarding rate {} (loss {:.4} %)\n    procedure: {}",
            m.ports,
            m.throughput_pps.map_or("none in range".into(), |t| format!("{t:.0} frames/s")),
            m.offered_pps,
            m.forwarding_rate_pps.map_or("-".into(), |f| format!("{f:.0} frames/s")),
            m.loss_pct,
            m.procedure
        );
    }
    if let Some(c) = &x.congestion_control {
        congestion_text(s, c);
    }
}

/// Congestion control: the two judgements, then the losses they rest on.
fn congestion_text(s: &mut String, c: &gapless_core::experiment::rfc2889::CongestionResult) {
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "not judged",
    };
    let _ = writeln!(
        s,
        "  congestion control: head-of-line blocking {}, back pressure {}; lost to the uncongested port {:.3} %, to the congested port {:.3} % (expected {:.1} % without back pressure), the congested port received {}",
        yes_no(c.head_of_line_blocking),
        yes_no(c.back_pressure),
        c.uncongested_loss_pct,
        c.congested_loss_pct,
        c.expected_congested_loss_pct,
        c.congested_rate_pps.map_or("-".into(), |f| format!("{f:.0} frames/s")),
    );
    if let Some(why) = &c.not_judged {
        let _ = writeln!(s, "    not judged: {why}");
    }
    let _ = writeln!(s, "    procedure: {}", c.procedure);
}

fn point_header(s: &mut String) {
    let _ = writeln!(
        s,
        "  {:<28} {:>22} {:>22} {:>22} {:>22}",
        "point", "loss %", "latency p50", "latency p99", "latency p99.9"
    );
}

fn point_row(s: &mut String, p: &PointResult) {
    let name = p.settings.iter().map(Setting::label).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        s,
        "  {:<28} {:>22} {:>22} {:>22} {:>22}{}",
        if name.is_empty() { "as profiled".into() } else { name },
        est(&p.loss_pct, |v| format!("{v:.4}")),
        opt_est(&p.latency_p50_ns, us),
        opt_est(&p.latency_p99_ns, us),
        opt_est(&p.latency_p99_9_ns, us),
        if p.invalid_used > 0 {
            format!("  ({} invalid used)", p.invalid_used)
        } else {
            String::new()
        }
    );
}

/// The trace of every trial, one CSV row each.
pub fn trials_csv(r: &ExperimentResult) -> String {
    let mut s = String::from("trial,purpose,rate_pps,size,burst,seed,sent,received,loss_pct,warmup_sent,late_share,valid,repeated,latency_p50_ns,latency_p99_ns,latency_p99_9_ns,directions\n");
    for t in &r.trials {
        let l = t.run.latency.as_ref().map(|l| &l.percentiles_ns);
        let _ = writeln!(
            s,
            "{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"",
            t.index + 1,
            t.plan.purpose.replace('"', "'"),
            t.plan.rate_pps.map_or(String::new(), |v| format!("{v:.1}")),
            t.plan.size.map_or(String::new(), |v| v.to_string()),
            t.plan.burst.map_or(String::new(), |v| v.to_string()),
            t.plan.seed,
            t.run.sent,
            t.run.received,
            t.loss_pct,
            t.run.warmup_sent,
            t.late_share,
            t.valid,
            t.repeated,
            l.map_or(String::new(), |l| l.p50.to_string()),
            l.map_or(String::new(), |l| l.p99.to_string()),
            l.map_or(String::new(), |l| l.p99_9.to_string()),
            t.run
                .directions
                .iter()
                .map(|d| format!("{} {}/{}", d.direction, d.received, d.sent))
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    s
}

/// Writes the trace CSV and the plots into `dir`; returns how many files.
pub fn write_all(r: &ExperimentResult, dir: &Path) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir)?;
    gapless_io::files::atomic::write_atomic(&dir.join("trials.csv"), trials_csv(r).as_bytes())?;
    Ok(1 + crate::report::experiment::plots::write(r, dir)?)
}

#[cfg(test)]
mod tests {
    use gapless_core::experiment::rfc2889::{CongestionResult, Rfc2889Result};

    fn congestion(hol: Option<bool>, not_judged: Option<&str>) -> Rfc2889Result {
        Rfc2889Result {
            congestion_control: Some(CongestionResult {
                ports: [0, 1, 2, 3],
                load_pps: 5000.0,
                uncongested_loss_pct: 0.0,
                congested_loss_pct: 33.2,
                expected_congested_loss_pct: 100.0 / 3.0,
                congested_rate_pps: Some(4997.0),
                uncongested_rate_pps: Some(2499.0),
                offered_pps: [5000.0, 5000.0],
                intended_pps: [5000.0, 5000.0],
                head_of_line_blocking: hol,
                back_pressure: hol.map(|_| false),
                not_judged: not_judged.map(str::to_string),
                procedure: "RFC 2889 §5.5: …".into(),
                trials: vec![0],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn congestion_control_leads_with_its_judgements_then_the_losses_and_the_procedure() {
        let mut s = String::new();
        super::rfc2889_text(&mut s, &congestion(Some(false), None));
        let want = "  congestion control: head-of-line blocking no, back pressure no; lost to the uncongested port 0.000 %, to the congested port 33.200 % (expected 33.3 % without back pressure), the congested port received 4997 frames/s\n    procedure: RFC 2889 §5.5: …\n";
        assert!(s.ends_with(want), "expected {want:?}; got {s:?}");
        let mut s = String::new();
        super::rfc2889_text(&mut s, &congestion(None, Some("the sender fell behind")));
        assert!(
            s.contains("head-of-line blocking not judged, back pressure not judged")
                && s.contains("    not judged: the sender fell behind\n"),
            "got {s:?}"
        );
    }
}
