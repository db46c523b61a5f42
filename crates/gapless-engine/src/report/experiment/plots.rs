//! An experiment's plots: RFC 2544 throughput, latency and loss against frame size and
//! load; a sweep's latency percentiles and loss against the swept value, one curve each.

use std::path::Path;

use anyhow::Result;
use gapless_core::experiment::stats::Estimate;
use gapless_core::experiment::{Curve, ExperimentResult, MlrsearchResult, PointResult, SizeResult};
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::plots::{chart, font, pe, SIZE};

/// A line chart: named series of (x, y) points.
struct Lines {
    title: String,
    x: String,
    y: String,
    series: Vec<(String, Vec<(f64, f64)>)>,
    log_x: bool,
}

const COLOURS: [RGBColor; 6] = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, l: &Lines) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(pe)?;
    let pts = l.series.iter().flat_map(|s| s.1.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        (x0, x1, y1) = (x0.min(x), x1.max(x), y1.max(y));
    }
    if x0 >= x1 {
        (x0, x1) = (x0 - 1.0, x0 + 1.0);
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let mut c = chart(root, l.title.clone(), 90);
    if l.log_x && x0 > 0.0 {
        let ch = c
            .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), 0.0..y1)
            .map_err(pe)?;
        series(ch, l)
    } else {
        series(c.build_cartesian_2d(x0..x1, 0.0..y1).map_err(pe)?, l)
    }
}

/// The mesh, the lines and the legend, on either x axis.
fn series<'a, DB, X>(mut ch: ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>, l: &Lines) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    ch.configure_mesh()
        .x_desc(&l.x)
        .y_desc(&l.y)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    for (i, (name, p)) in l.series.iter().enumerate() {
        let col = COLOURS[i % COLOURS.len()];
        ch.draw_series(LineSeries::new(p.clone(), col.stroke_width(2)).point_size(3))
            .map_err(pe)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], col.stroke_width(2)));
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    Ok(())
}

/// Writes `l` as STEM.svg and STEM.png.
fn both(dir: &Path, stem: &str, l: &Lines) -> Result<usize> {
    if l.series.iter().all(|s| s.1.is_empty()) {
        return Ok(0);
    }
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw(&root, l)?;
        root.present().map_err(pe)?;
    }
    let png = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        draw(&root, l)?;
        root.present().map_err(pe)?;
    }
    Ok(2)
}

/// Every plot the result has data for; returns how many files.
pub fn write(r: &ExperimentResult, dir: &Path) -> Result<usize> {
    font();
    let mut n = 0;
    if !r.rfc2544.is_empty() {
        n += both(dir, "rfc2544_throughput", &throughput(&r.rfc2544))?;
        n += both(dir, "rfc2544_latency", &latency_by_size(&r.rfc2544))?;
        n += both(dir, "rfc2544_frame_loss", &loss_by_load(&r.rfc2544))?;
    }
    if let Some(m) = &r.mlrsearch {
        n += both(dir, "mlrsearch_trials", &mlr_trials(m))?;
        match r.directions.is_empty() {
            true => n += both(dir, "mlrsearch_latency", &mlr_latency(m))?,
            // Over several ports each direction has its own latency.
            false => n += both(dir, "mlrsearch_latency_by_direction", &direction_latency(r, m))?,
        }
    }
    if !r.sweep.is_empty() {
        let x = r.sweep[0]
            .points
            .first()
            .and_then(|p| p.settings.last())
            .map_or("value".into(), x_name);
        for (stem, what, f) in [
            (
                "sweep_latency_p50",
                "latency p50",
                p50 as fn(&PointResult) -> Option<&Estimate>,
            ),
            ("sweep_latency_p99", "latency p99", p99),
            ("sweep_latency_p99_9", "latency p99.9", p999),
        ] {
            n += both(
                dir,
                stem,
                &sweep_lines(&r.sweep, what, &x, "µs", |p| f(p).map(|e| e.mean / 1e3)),
            )?;
        }
        n += both(
            dir,
            "sweep_loss",
            &sweep_lines(&r.sweep, "loss", &x, "loss (%)", |p| Some(p.loss_pct.mean)),
        )?;
    }
    Ok(n)
}

/// MLRsearch's trials as load against the search's time (trial seconds so far), one series
/// per goal the trials served (the initial ones apart).
fn mlr_trials(m: &MlrsearchResult) -> Lines {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut t = 0.0;
    for x in &m.trials {
        let name = x.search.goal.clone().unwrap_or_else(|| "initial".into());
        let at = match series.iter().position(|s| s.0 == name) {
            Some(i) => i,
            None => {
                series.push((name, Vec::new()));
                series.len() - 1
            }
        };
        series[at].1.push((t, x.search.load_pps));
        t += x.search.duration_s;
    }
    Lines {
        title: "MLRsearch: each trial's load, by the goal it served".into(),
        x: "trial seconds so far".into(),
        y: "load (frames/s)".into(),
        series,
        log_x: false,
    }
}

/// Latency percentiles at the fractions of the latency goal's throughput.
fn mlr_latency(m: &MlrsearchResult) -> Lines {
    let goal = m.latency.first().map_or(String::new(), |l| l.goal.clone());
    let line = |f: fn(&PointResult) -> Option<&Estimate>| -> Vec<(f64, f64)> {
        m.latency
            .iter()
            .filter_map(|l| f(&l.point).map(|e| (l.fraction * 100.0, e.mean / 1e3)))
            .collect()
    };
    Lines {
        title: format!("latency at fractions of {goal}"),
        x: format!("load (% of {goal})"),
        y: "latency (µs)".into(),
        series: vec![
            ("p50".into(), line(p50)),
            ("p99".into(), line(p99)),
            ("p99.9".into(), line(p999)),
        ],
        log_x: false,
    }
}

/// Each direction's p50 and p99 at the fractions of the latency goal's throughput.
fn direction_latency(r: &ExperimentResult, m: &MlrsearchResult) -> Lines {
    let goal = m.latency.first().map_or(String::new(), |l| l.goal.clone());
    let mut series = Vec::new();
    for d in &r.directions {
        for (what, pick) in [("p50", 0usize), ("p99", 1)] {
            let points = m
                .latency
                .iter()
                .filter_map(|l| {
                    let trial = *l.point.trials.first()?;
                    let lat = d.at.iter().find(|a| a.trial == trial)?.latency.as_ref()?;
                    let ns = [lat.percentiles_ns.p50, lat.percentiles_ns.p99][pick];
                    Some((l.fraction * 100.0, ns as f64 / 1e3))
                })
                .collect();
            series.push((format!("{} {what}", d.name), points));
        }
    }
    Lines {
        title: format!("latency at fractions of {goal}, by direction"),
        x: format!("load (% of {goal})"),
        y: "latency (µs)".into(),
        series,
        log_x: false,
    }
}

fn p50(p: &PointResult) -> Option<&Estimate> {
    p.latency_p50_ns.as_ref()
}
fn p99(p: &PointResult) -> Option<&Estimate> {
    p.latency_p99_ns.as_ref()
}
fn p999(p: &PointResult) -> Option<&Estimate> {
    p.latency_p99_9_ns.as_ref()
}

fn x_name(s: &gapless_core::experiment::Setting) -> String {
    use gapless_core::experiment::Setting::*;
    match s {
        Rate(_) => "offered load (frames/s)",
        Burst(_) => "burst size (frames)",
        Size(_) => "frame size (bytes)",
        Pattern(_) => "pattern (0 CBR, 1 Poisson)",
    }
    .into()
}

fn throughput(z: &[SizeResult]) -> Lines {
    let tols: Vec<f64> = z.first().map_or(Vec::new(), |s| {
        s.throughput.iter().map(|t| t.loss_tolerance_pct).collect()
    });
    Lines {
        title: "RFC 2544 throughput by frame size".into(),
        x: "frame size (bytes)".into(),
        y: "throughput (frames/s)".into(),
        series: tols
            .iter()
            .enumerate()
            .map(|(i, tol)| {
                let pts = z
                    .iter()
                    .filter_map(|s| {
                        s.throughput
                            .get(i)
                            .and_then(|t| t.throughput_pps)
                            .map(|p| (f64::from(s.frame_size), p))
                    })
                    .collect();
                (format!("loss ≤ {tol} %"), pts)
            })
            .collect(),
        log_x: true,
    }
}

fn latency_by_size(z: &[SizeResult]) -> Lines {
    let pick = |f: fn(&PointResult) -> Option<&Estimate>| -> Vec<(f64, f64)> {
        z.iter()
            .filter_map(|s| {
                s.latency
                    .as_ref()
                    .and_then(|p| f(p))
                    .map(|e| (f64::from(s.frame_size), e.mean / 1e3))
            })
            .collect()
    };
    Lines {
        title: "RFC 2544 latency at the throughput rate".into(),
        x: "frame size (bytes)".into(),
        y: "latency (µs)".into(),
        series: vec![
            ("p50".into(), pick(p50)),
            ("p99".into(), pick(p99)),
            ("p99.9".into(), pick(p999)),
        ],
        log_x: true,
    }
}

fn loss_by_load(z: &[SizeResult]) -> Lines {
    Lines {
        title: "RFC 2544 frame loss rate".into(),
        x: "offered load (% of the maximum rate)".into(),
        y: "loss (%)".into(),
        series: z
            .iter()
            .map(|s| {
                (
                    format!("{} B", s.frame_size),
                    s.frame_loss.iter().map(|l| (l.load_pct, l.loss_pct)).collect(),
                )
            })
            .collect(),
        log_x: false,
    }
}

fn sweep_lines(c: &[Curve], what: &str, x: &str, y: &str, f: impl Fn(&PointResult) -> Option<f64>) -> Lines {
    Lines {
        title: format!("{what} against {x}"),
        x: x.into(),
        y: if y == "µs" { format!("{what} (µs)") } else { y.into() },
        series: c
            .iter()
            .map(|k| {
                let pts = k
                    .points
                    .iter()
                    .filter_map(|p| Some((p.settings.last()?.x(), f(p)?)))
                    .collect();
                (k.curve.map_or("all".into(), |s| s.label()), pts)
            })
            .collect(),
        log_x: false,
    }
}
