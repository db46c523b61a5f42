//! Compiles the timing keys that make a rate vary: `vary` (ramp, steps, sine, trace) and
//! the `self_similar` pattern, and reports what each schedule achieved.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::spec::error::ProfileError;
use crate::spec::files::FileLoader;
use crate::spec::{PatternKind, SelfSimilarSpec, TimingSpec, VaryKind, VarySpec};
use crate::timing::curve::RateCurve;
use crate::timing::departures::{Pattern, Schedule};
use crate::timing::hurst;
use crate::timing::selfsim::{self, OnOffAggregate, OnOffParams};

/// Departures the compiler walks to measure what a self-similar schedule achieved.
const ACHIEVED_DEPARTURES: u64 = 4_000_000;

/// What `vary` or `self_similar` adds to a stream.
#[derive(Debug, Clone, Default)]
pub struct Varying {
    /// Replaces the pattern (the on/off aggregate).
    pub pattern: Option<Pattern>,
    pub curve: Option<Arc<RateCurve>>,
    /// The stream's mean rate over its run, as a factor of the rate given.
    pub mean_factor: f64,
    pub peak_factor: f64,
    /// Every parameter, for `check` and the result file (the achieved figures are added later).
    pub report: Option<Value>,
}

fn bad(path: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) -> ProfileError {
    ProfileError::invalid(path, problem, fix)
}

fn need(v: Option<f64>, path: &str, key: &str, fix: &str) -> Result<f64, ProfileError> {
    v.ok_or_else(|| bad(format!("{path}.{key}"), format!("this kind needs `{key}`"), fix))
}

fn factor(v: f64, path: &str) -> Result<f64, ProfileError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(bad(
            path,
            format!("the factor {v} is negative or not finite"),
            "use factors >= 0 (1.0 = the stream's rate)",
        ))
    }
}

/// The stream's `vary` and `self_similar` keys, checked against its pattern.
pub fn compile(
    t: &TimingSpec,
    tpath: &str,
    rate_pps: f64,
    horizon_ns: Option<f64>,
    seed: u64,
    files: &dyn FileLoader,
) -> Result<Varying, ProfileError> {
    let ss = t.pattern == PatternKind::SelfSimilar;
    match (&t.vary, &t.self_similar, ss) {
        (_, Some(_), false) => Err(bad(
            format!("{tpath}.self_similar"),
            "`self_similar` is set but the pattern is not \"self_similar\"",
            "set pattern = \"self_similar\" or remove it",
        )),
        (_, None, true) => Err(bad(
            format!("{tpath}.self_similar"),
            "pattern \"self_similar\" needs `self_similar`",
            "add self_similar = { hurst = 0.8 }",
        )),
        (Some(_), _, true) => Err(bad(
            format!("{tpath}.vary"),
            "a self-similar rate already varies",
            "remove vary, or use another pattern",
        )),
        (Some(_), _, _) if t.pattern == PatternKind::Bursty => Err(bad(
            format!("{tpath}.vary"),
            "vary does not apply to pattern \"bursty\" (its bursts have their own peak rate)",
            "use vary with cbr, poisson or distribution",
        )),
        (None, None, false) => Ok(Varying {
            mean_factor: 1.0,
            peak_factor: 1.0,
            ..Varying::default()
        }),
        (Some(v), None, false) => compile_vary(v, &format!("{tpath}.vary"), horizon_ns, files),
        (None, Some(s), true) => compile_self_similar(s, &format!("{tpath}.self_similar"), rate_pps, horizon_ns, seed),
    }
}

fn compile_vary(
    v: &VarySpec,
    path: &str,
    horizon_ns: Option<f64>,
    files: &dyn FileLoader,
) -> Result<Varying, ProfileError> {
    check_vary_keys(v, path)?;
    let curve = match v.kind {
        VaryKind::Ramp => {
            let from = factor(
                need(v.from, path, "from", "add from = 0.1 (a factor of the stream's rate)")?,
                &format!("{path}.from"),
            )?;
            let to = factor(need(v.to, path, "to", "add to = 1.0")?, &format!("{path}.to"))?;
            let over = need(v.over_s, path, "over_s", "add over_s = 10")?;
            if !(over.is_finite() && over > 0.0) {
                return Err(bad(
                    format!("{path}.over_s"),
                    format!("{over} is not a positive duration"),
                    "give the ramp's length in seconds",
                ));
            }
            RateCurve::knots(&[(0.0, from), (over * 1e9, to)])
        }
        VaryKind::Steps => {
            let steps = v.steps.as_ref().ok_or_else(|| {
                bad(
                    format!("{path}.steps"),
                    "kind \"steps\" needs `steps`",
                    "add steps = [[0, 0.5], [2, 1.0]] (time_s, factor)",
                )
            })?;
            RateCurve::knots(&step_knots(
                steps.iter().map(|p| (p[0], p[1])),
                &format!("{path}.steps"),
            )?)
        }
        VaryKind::Sine => {
            let a = need(v.amplitude, path, "amplitude", "add amplitude = 0.5")?;
            let p = need(v.period_s, path, "period_s", "add period_s = 1")?;
            if !(0.0..=1.0).contains(&a) {
                return Err(bad(
                    format!("{path}.amplitude"),
                    format!("amplitude {a} is outside [0, 1]"),
                    "use an amplitude in [0, 1]: the rate swings between (1 - a) and (1 + a) times the stream's rate",
                ));
            }
            if !(p.is_finite() && p > 0.0) {
                return Err(bad(
                    format!("{path}.period_s"),
                    format!("{p} is not a positive period"),
                    "give the period in seconds",
                ));
            }
            RateCurve::Sine {
                amplitude: a,
                period_ns: p * 1e9,
            }
        }
        VaryKind::Trace => trace(v, path, files)?,
    };
    if let RateCurve::Knots { f, .. } = &curve {
        if f[f.len() - 1] <= 0.0 {
            return Err(bad(
                path,
                "the curve ends at factor 0, so the stream would never send again",
                "end the curve above 0 (a stream stops by count or duration_s)",
            ));
        }
        if f.iter().all(|x| *x == 0.0) {
            return Err(bad(path, "every factor is 0", "give some factor above 0"));
        }
    }
    let long_run = match &curve {
        RateCurve::Knots { f, .. } => f[f.len() - 1],
        _ => 1.0,
    };
    let mean_factor = horizon_ns.map_or(long_run, |h| curve.mean_over(h));
    let kind = format!("{:?}", v.kind).to_lowercase();
    Ok(Varying {
        pattern: None,
        mean_factor,
        peak_factor: curve.peak(),
        report: Some(json!({ "kind": "vary", "curve": kind, "mean_factor": mean_factor, "peak_factor": curve.peak() })),
        curve: Some(Arc::new(curve)),
    })
}

fn check_vary_keys(v: &VarySpec, path: &str) -> Result<(), ProfileError> {
    let keys: [(&str, bool, &[VaryKind]); 8] = [
        ("from", v.from.is_some(), &[VaryKind::Ramp]),
        ("to", v.to.is_some(), &[VaryKind::Ramp]),
        ("over_s", v.over_s.is_some(), &[VaryKind::Ramp]),
        ("steps", v.steps.is_some(), &[VaryKind::Steps]),
        ("amplitude", v.amplitude.is_some(), &[VaryKind::Sine]),
        ("period_s", v.period_s.is_some(), &[VaryKind::Sine]),
        ("file", v.file.is_some(), &[VaryKind::Trace]),
        ("interpolate", v.interpolate.is_some(), &[VaryKind::Trace]),
    ];
    for (key, set, kinds) in keys {
        if set && !kinds.contains(&v.kind) {
            return Err(bad(
                format!("{path}.{key}"),
                format!(
                    "`{key}` does not apply to kind = \"{}\"",
                    format!("{:?}", v.kind).to_lowercase()
                ),
                format!(
                    "remove it, or use kind = \"{}\"",
                    format!("{:?}", kinds[0]).to_lowercase()
                ),
            ));
        }
    }
    Ok(())
}

/// Knots of a step curve: each factor held until the next point's time.
fn step_knots(points: impl Iterator<Item = (f64, f64)>, path: &str) -> Result<Vec<(f64, f64)>, ProfileError> {
    let mut knots: Vec<(f64, f64)> = Vec::new();
    for (i, (ts, f)) in points.enumerate() {
        let f = factor(f, &format!("{path}[{i}]"))?;
        let t = ts * 1e9;
        match knots.last() {
            None if ts != 0.0 => {
                return Err(bad(
                    format!("{path}[0]"),
                    format!("the first step is at {ts} s"),
                    "start the steps at time 0",
                ))
            }
            Some(&(lt, _)) if !t.is_finite() || t <= lt => {
                return Err(bad(
                    format!("{path}[{i}]"),
                    format!("time {ts} s is not after the step before"),
                    "give times in increasing order",
                ))
            }
            Some(&(_, lf)) => knots.push((t, lf)),
            None => {}
        }
        knots.push((t, f));
    }
    if knots.is_empty() {
        return Err(bad(path, "no steps", "give at least one [time_s, factor]"));
    }
    Ok(knots)
}

/// A trace file of `time_s, factor` lines (commas or spaces; `#` comments).
fn trace(v: &VarySpec, path: &str, files: &dyn FileLoader) -> Result<RateCurve, ProfileError> {
    let file = v.file.as_deref().ok_or_else(|| {
        bad(
            format!("{path}.file"),
            "kind \"trace\" needs `file`",
            "add file = \"rates.csv\" (lines of time_s, factor)",
        )
    })?;
    let text = files.load(file).map_err(|e| {
        bad(
            format!("{path}.file"),
            format!("cannot read {file:?}: {e}"),
            "check the path (relative to the profile)",
        )
    })?;
    let fpath = format!("{path}.file ({file})");
    let mut pts = Vec::new();
    let mut header = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|c| !c.is_empty())
            .collect();
        let nums: Option<Vec<f64>> = cols.iter().map(|c| c.parse().ok()).collect();
        match nums.as_deref() {
            Some([t, f]) => pts.push((*t, *f)),
            _ if pts.is_empty() && !header => header = true, // a header row
            _ => {
                return Err(bad(
                    &fpath,
                    format!("line {}: {line:?} is not `time_s, factor`", i + 1),
                    "write two numbers a line: the time in seconds and the factor",
                ))
            }
        }
    }
    match v.interpolate.as_deref().unwrap_or("linear") {
        "step" => Ok(RateCurve::knots(&step_knots(pts.into_iter(), &fpath)?)),
        "linear" => {
            step_knots(pts.iter().copied(), &fpath)?; // the same checks: from 0, increasing, >= 0
            Ok(RateCurve::knots(
                &pts.iter().map(|(t, f)| (t * 1e9, *f)).collect::<Vec<_>>(),
            ))
        }
        other => Err(bad(
            format!("{path}.interpolate"),
            format!("unknown interpolation {other:?}"),
            "use \"linear\" or \"step\"",
        )),
    }
}

fn compile_self_similar(
    s: &SelfSimilarSpec,
    path: &str,
    rate_pps: f64,
    horizon_ns: Option<f64>,
    seed: u64,
) -> Result<Varying, ProfileError> {
    let h = match (s.hurst, s.alpha) {
        (Some(_), Some(_)) => {
            return Err(bad(
                path,
                "both hurst and alpha are set",
                "keep one: H = (3 - alpha) / 2",
            ))
        }
        (Some(h), None) => h,
        (None, Some(a)) => (3.0 - a) / 2.0,
        (None, None) => {
            return Err(bad(
                format!("{path}.hurst"),
                "no Hurst parameter",
                "add hurst = 0.8 (or alpha = 1.4)",
            ))
        }
    };
    if !(h > 0.5 && h < 1.0) {
        return Err(bad(
            format!("{path}.hurst"),
            format!("H = {h} is outside (0.5, 1) (alpha outside (1, 2))"),
            "use 0.5 < hurst < 1; 0.5 is Poisson-like, 1 is not stationary",
        ));
    }
    match s.method.as_deref().unwrap_or("fgn") {
        "fgn" => fgn(s, path, h, horizon_ns, seed),
        "onoff" => onoff(s, path, h, rate_pps, seed),
        other => Err(bad(
            format!("{path}.method"),
            format!("unknown method {other:?}"),
            "use \"fgn\" or \"onoff\"",
        )),
    }
}

fn fgn(s: &SelfSimilarSpec, path: &str, h: f64, horizon_ns: Option<f64>, seed: u64) -> Result<Varying, ProfileError> {
    if s.sources.is_some() || s.on_rate_pps.is_some() || s.mean_on_ms.is_some() {
        return Err(bad(
            path,
            "sources, on_rate_pps and mean_on_ms are for method = \"onoff\"",
            "remove them, or set method = \"onoff\"",
        ));
    }
    let cv = s.cv.unwrap_or(0.3);
    if !(cv > 0.0 && cv <= 1.0) {
        return Err(bad(
            format!("{path}.cv"),
            format!("cv {cv} is outside (0, 1]"),
            "use 0 < cv <= 1 (above about 0.4 many slots are clipped at rate 0)",
        ));
    }
    let slot_us = s.slot_us.unwrap_or(100.0);
    if !(slot_us.is_finite() && slot_us >= 1.0) {
        return Err(bad(
            format!("{path}.slot_us"),
            format!("slot {slot_us} µs is below 1 µs"),
            "use a slot of at least 1 µs",
        ));
    }
    let slot_ns = slot_us * 1e3;
    let n = selfsim::slots_for(horizon_ns, slot_ns);
    let (curve, clipped) = selfsim::fgn_curve(n, slot_ns, h, cv, crate::timing::seed::derive_seed(seed, 5, 0));
    Ok(Varying {
        pattern: None,
        mean_factor: 1.0,
        peak_factor: curve.peak(),
        report: Some(json!({
            "kind": "self_similar", "method": "fgn", "hurst_asked": h, "alpha": 3.0 - 2.0 * h, "cv": cv,
            "slot_us": slot_us, "slots": n, "repeats_after_s": n as f64 * slot_ns / 1e9, "clipped_share": clipped,
        })),
        curve: Some(curve),
    })
}

fn onoff(s: &SelfSimilarSpec, path: &str, h: f64, rate_pps: f64, seed: u64) -> Result<Varying, ProfileError> {
    if s.cv.is_some() || s.slot_us.is_some() {
        return Err(bad(
            path,
            "cv and slot_us are for method = \"fgn\"",
            "remove them, or set method = \"fgn\"",
        ));
    }
    let n = s.sources.unwrap_or(32);
    if n == 0 || n > 100_000 {
        return Err(bad(
            format!("{path}.sources"),
            format!("{n} sources"),
            "use 1 to 100000 sources",
        ));
    }
    let on_rate = s.on_rate_pps.unwrap_or(4.0 * rate_pps / f64::from(n));
    let p_on = rate_pps / (f64::from(n) * on_rate);
    if !(p_on > 0.0 && p_on < 1.0) {
        return Err(bad(format!("{path}.on_rate_pps"), format!("{n} sources at {on_rate} pps cannot make a mean of {rate_pps} pps (they would be on {:.0} % of the time)", p_on * 100.0), "raise on_rate_pps or sources so that sources x on_rate_pps exceeds the rate"));
    }
    let mean_on_ns = s.mean_on_ms.unwrap_or(10.0) * 1e6;
    if !(mean_on_ns.is_finite() && mean_on_ns > 0.0) {
        return Err(bad(
            format!("{path}.mean_on_ms"),
            "not a positive duration",
            "give the mean on period in ms",
        ));
    }
    let alpha = 3.0 - 2.0 * h;
    let params = OnOffParams {
        sources: n,
        alpha,
        on_gap_ns: 1e9 / on_rate,
        mean_on_ns,
        mean_off_ns: mean_on_ns * (1.0 - p_on) / p_on,
    };
    Ok(Varying {
        pattern: Some(Pattern::OnOffAggregate(Box::new(OnOffAggregate::new(
            params,
            crate::timing::seed::derive_seed(seed, 6, 0),
        )))),
        curve: None,
        mean_factor: 1.0,
        peak_factor: f64::from(n) * on_rate / rate_pps,
        report: Some(json!({
            "kind": "self_similar", "method": "onoff", "hurst_asked": h, "alpha": alpha, "sources": n,
            "on_rate_pps": on_rate, "mean_on_ms": mean_on_ns / 1e6, "mean_off_ms": mean_on_ns * (1.0 - p_on) / p_on / 1e6,
        })),
    })
}

/// Walks the stream's own schedule to its count or duration (at most 4·10⁶ departures) and adds to `report` the mean
/// rate and the Hurst parameter it achieved (aggregated variance and Haar wavelet, on the
/// departures per bin: 1 ms, or 10 mean gaps when that is longer).
pub fn achieved(report: &mut Value, sched: Schedule, end: (Option<u64>, Option<u64>), mean_gap_ns: f64, bytes: u64) {
    let mut s = sched;
    let (count, duration_ns) = end;
    let limit = count.unwrap_or(u64::MAX).min(ACHIEVED_DEPARTURES);
    let end = duration_ns.unwrap_or(u64::MAX);
    let mut times = Vec::new();
    let t0 = s.current().at_ns;
    while (times.len() as u64) < limit && s.current().at_ns - t0 < end {
        times.push(s.current().at_ns - t0);
        s.advance(bytes * u64::from(s.current().frames));
    }
    let bin = (1e6f64).max(10.0 * mean_gap_ns) as u64;
    let counts = hurst::bin_counts(times.iter().copied(), bin);
    let span = times.last().copied().unwrap_or(0) as f64;
    report["achieved"] = json!({
        "departures": times.len(),
        "mean_rate_pps": if span > 0.0 { (times.len() - 1) as f64 * 1e9 / span } else { 0.0 },
        "bin_ms": bin as f64 / 1e6,
        "bins": counts.len(),
        "hurst_aggregated_variance": hurst::aggregated_variance(&counts),
        "hurst_wavelet": hurst::wavelet(&counts),
    });
}
