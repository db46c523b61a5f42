//! Reports from a meter result: CSV exports and plots (PNG and SVG, drawn with plotters
//! and an embedded DejaVu Sans, so no system fonts are needed).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use gapless_core::meter::report::hist_from_b64;
use gapless_core::meter::{MeterReport, StreamRx};
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
pub(crate) const SIZE: (u32, u32) = (900, 560);

pub(crate) fn font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

pub(crate) fn pe<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// A file-name-safe form of a stream's name.
/// The longest slug of a stream's name in a file name: with the stream's number and the
/// longest suffix a file name stays far under NAME_MAX (255 bytes), whatever the name.
const SLUG_MAX: usize = 64;

/// A stream's name as part of a file name: ASCII letters, digits, `-` and `_`, at most
/// [`SLUG_MAX`] of them (a request's flow name may be any string of any length).
fn slug(s: &str) -> String {
    let v: String = s
        .chars()
        .take(SLUG_MAX)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if v.is_empty() {
        "stream".into()
    } else {
        v
    }
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    gapless_io::files::atomic::write_atomic(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// (lowest, highest value in ns, count) of every recorded bucket: the histogram keeps 3
/// significant digits, so a bucket is a range.
fn buckets(h: &Histogram<u64>, unit: u64) -> Vec<(u64, u64, u64)> {
    h.iter_recorded()
        .map(|v| {
            let x = v.value_iterated_to();
            (
                h.lowest_equivalent(x) * unit,
                h.highest_equivalent(x) * unit,
                v.count_at_value(),
            )
        })
        .collect()
}

/// The latency histogram's buckets in ns, ascending, negative values included: (lowest,
/// highest, count). Values ≥ 0 were recorded as ⌈v / unit⌉, negative ones as ⌊|v| / unit⌋.
fn latency_buckets(l: &gapless_core::meter::report::LatencySummary) -> Result<Vec<(i64, i64, u64)>> {
    let u = l.unit_ns.max(1) as i64;
    let mut out = Vec::new();
    if let Some(n) = &l.negative_histogram_v2_deflate_b64 {
        let h = hist_from_b64(n).map_err(|e| anyhow!("{e}"))?;
        for (lo, hi, c) in buckets(&h, 1).into_iter().rev() {
            out.push((-(hi as i64 * u + u - 1), -(lo as i64 * u), c));
        }
    }
    let h = hist_from_b64(&l.histogram_v2_deflate_b64).map_err(|e| anyhow!("{e}"))?;
    for (lo, hi, c) in buckets(&h, 1) {
        out.push((((lo as i64 - 1) * u + 1).max(0), hi as i64 * u, c));
    }
    Ok(out)
}

/// A stream's histograms as buckets (lowest ns, highest ns, count), ascending: its
/// latency (negative values included) and its inter-arrival times, where measured. Front
/// ends that tabulate results (Python's `to_frame`) read them here.
pub fn histograms(s: &StreamRx) -> std::result::Result<StreamHistograms, crate::EngineError> {
    let bad = |e: anyhow::Error| crate::EngineError::Report(format!("{}: {e:#}", s.name));
    let latency = s.latency.as_ref().map(latency_buckets).transpose().map_err(bad)?;
    let interarrival = s
        .interarrival
        .as_ref()
        .map(interarrival_buckets)
        .transpose()
        .map_err(bad)?;
    Ok(StreamHistograms { latency, interarrival })
}

/// The inter-arrival histogram's buckets in ns, ascending: (lowest, highest, count).
fn interarrival_buckets(ia: &gapless_core::meter::report::InterArrivalSummary) -> Result<Vec<(u64, u64, u64)>> {
    let h = hist_from_b64(&ia.histogram_v2_deflate_b64).map_err(|e| anyhow!("{e}"))?;
    Ok(buckets(&h, ia.histogram_unit_ns.max(1)))
}

/// See [`histograms`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamHistograms {
    pub latency: Option<Vec<(i64, i64, u64)>>,
    pub interarrival: Option<Vec<(u64, u64, u64)>>,
}

/// (midpoint, count) for drawing.
fn mids(b: &[(u64, u64, u64)]) -> Vec<(u64, u64)> {
    b.iter().map(|&(lo, hi, c)| (lo + (hi - lo) / 2, c)).collect()
}

/// A chart with the house layout: title, margins, label areas.
pub(crate) fn chart<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: String,
    y_label_width: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut c = ChartBuilder::on(root);
    c.caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(y_label_width);
    c
}

macro_rules! both {
    ($plot:expr, $stem:expr, $draw:ident, $($arg:expr),*) => {{
        if !$plot {
            0usize
        } else {
        let svg = $stem.with_extension("svg");
        {
            let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
            $draw(&root, $($arg),*)?;
            root.present().map_err(pe)?;
        }
        let png = $stem.with_extension("png");
        {
            let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
            $draw(&root, $($arg),*)?;
            root.present().map_err(pe)?;
        }
        2usize
        }
    }};
}

/// Frames outside the inter-arrival plot's range, shown as labelled end bars.
struct Overflow {
    below: u64,
    min: f64,
    above: u64,
    max: f64,
}

/// The inter-arrival plot's range: centred on the target gap (when there is one), wide
/// enough for p0.1 .. p99.9; everything outside goes to the labelled overflow bars.
fn interarrival_range(b: &[(u64, u64)], target: Option<f64>) -> (f64, f64) {
    let total: u64 = b.iter().map(|x| x.1).sum();
    let q = |p: f64| {
        let mut acc = 0;
        for &(v, c) in b {
            acc += c;
            if acc as f64 >= p * total as f64 {
                return v as f64;
            }
        }
        b.last().map_or(0.0, |x| x.0 as f64)
    };
    let (p_lo, p_hi) = (q(0.001), q(0.999));
    match target {
        Some(t) => {
            let d = (t - p_lo).abs().max((p_hi - t).abs()).max(t * 0.05);
            ((t - d).max(0.0), t + d)
        }
        None => (p_lo, p_hi.max(p_lo + 1.0)),
    }
}

fn draw_interarrival<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    name: &str,
    b: &[(u64, u64)],
    target: Option<f64>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(pe)?;
    let (lo, hi) = interarrival_range(b, target);
    let n = 120;
    let w = (hi - lo) / n as f64;
    let mut bins = vec![0u64; n];
    let mut over = Overflow {
        below: 0,
        min: f64::MAX,
        above: 0,
        max: 0.0,
    };
    for &(v, c) in b {
        let v = v as f64;
        if v < lo {
            over.below += c;
            over.min = over.min.min(v);
        } else if v > hi {
            over.above += c;
            over.max = over.max.max(v);
        } else {
            bins[(((v - lo) / w) as usize).min(n - 1)] += c;
        }
    }
    // Two extra slots at each end hold the overflow bars, apart from the range.
    let (xl, xr) = ((lo - 3.0 * w) / 1e3, (hi + 3.0 * w) / 1e3);
    let ymax = bins
        .iter()
        .chain([&over.below, &over.above])
        .copied()
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut ch = chart(root, format!("{name}: inter-arrival times"), 70)
        .build_cartesian_2d(xl..xr, (0.8..ymax * 12.0).log_scale())
        .map_err(pe)?;
    ch.configure_mesh()
        .x_desc("gap (µs)")
        .y_desc("frames (log)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    ch.draw_series(bins.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, &c)| {
        let x0 = (lo + i as f64 * w) / 1e3;
        Rectangle::new([(x0, 0.8), (x0 + w / 1e3, c as f64)], BLUE.mix(0.6).filled())
    }))
    .map_err(pe)?
    .label("frames per bin")
    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], BLUE.mix(0.6).filled()));
    draw_overflow(&mut ch, &over, lo, hi, w)?;
    if let Some(t) = target {
        ch.draw_series(LineSeries::new(
            [(t / 1e3, 0.8), (t / 1e3, ymax * 12.0)],
            RED.stroke_width(2),
        ))
        .map_err(pe)?
        .label(format!("target gap {:.3} µs", t / 1e3))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED.stroke_width(2)));
    }
    ch.configure_series_labels()
        .position(SeriesLabelPosition::UpperMiddle)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    Ok(())
}

type LogChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::combinators::LogCoord<f64>>,
>;

/// The overflow bars at both ends, each labelled with its range and count.
fn draw_overflow<DB: DrawingBackend>(ch: &mut LogChart<'_, DB>, o: &Overflow, lo: f64, hi: f64, w: f64) -> Result<()>
where
    DB::ErrorType: 'static,
{
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let style = TextStyle::from(("sans-serif", 13).into_font());
    let top = ch.y_range().end / 3.0;
    let bars = [
        (
            o.below,
            (lo - 2.5 * w) / 1e3,
            true,
            format!("< {:.2} µs: {} frames (min {:.2} µs)", lo / 1e3, o.below, o.min / 1e3),
        ),
        (
            o.above,
            (hi + 1.5 * w) / 1e3,
            false,
            format!("> {:.2} µs: {} frames (max {:.2} µs)", hi / 1e3, o.above, o.max / 1e3),
        ),
    ];
    for (count, x0, left, label) in bars {
        if count == 0 {
            continue;
        }
        ch.draw_series([Rectangle::new(
            [(x0, 0.8), (x0 + w / 1e3, count as f64)],
            MAGENTA.mix(0.7).filled(),
        )])
        .map_err(pe)?;
        // In the headroom above the bins, at the plot's edge on the bar's side.
        let (x, h) = if left {
            (x0, HPos::Left)
        } else {
            (x0 + w / 1e3, HPos::Right)
        };
        ch.draw_series([Text::new(label, (x, top), style.clone().pos(Pos::new(h, VPos::Center)))])
            .map_err(pe)?;
    }
    Ok(())
}

/// (latency µs, CDF or CCDF) at each bucket's upper end.
fn cdf_points(b: &[(i64, u64)], ccdf: bool) -> Vec<(f64, f64)> {
    let total: u64 = b.iter().map(|x| x.1).sum::<u64>().max(1);
    let mut acc = 0u64;
    b.iter()
        .map(|&(v, c)| {
            acc += c;
            let cdf = acc as f64 / total as f64;
            (v as f64 / 1e3, if ccdf { 1.0 - cdf } else { cdf })
        })
        .collect()
}

/// Both CDF plots use a log x axis, so that the body and a long tail both show. With values
/// ≤ 0 (a calibration offset subtracted) the axis is shifted to start just below the
/// minimum, and its labels give the real latency.
fn draw_cdf<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, name: &str, b: &[(i64, u64)], ccdf: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(pe)?;
    let total: u64 = b.iter().map(|x| x.1).sum::<u64>().max(1);
    let floor = 0.5 / total as f64;
    let pts = cdf_points(b, ccdf);
    let (xmin, xmax) = (pts.first().map_or(0.0, |p| p.0), pts.last().map_or(1.0, |p| p.0));
    // µs; 10 ns below the minimum when it is not positive.
    let shift = if xmin > 0.0 { 0.0 } else { xmin - 0.01 };
    let pts: Vec<(f64, f64)> = pts
        .into_iter()
        .map(|(x, y)| (x - shift, if ccdf { y.max(floor) } else { y }))
        .collect();
    let mut title = format!("{name}: latency {}", if ccdf { "CCDF" } else { "CDF" });
    if shift != 0.0 {
        title.push_str(" (log axis from the minimum)");
    }
    let x_desc = "latency (µs, log scale)";
    let fmt = move |v: &f64| {
        let r = v + shift;
        if r.abs() >= 10.0 {
            format!("{r:.0}")
        } else {
            format!("{r:.2}")
        }
    };
    let x = ((xmin - shift) * 0.9..(xmax - shift) * 1.1).log_scale();
    if ccdf {
        let mut ch = chart(root, title, 80)
            .build_cartesian_2d(x, (floor..1.0).log_scale())
            .map_err(pe)?;
        ch.configure_mesh()
            .x_desc(x_desc)
            .y_desc("P(latency > x)")
            .x_label_formatter(&fmt)
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(pe)?;
        ch.draw_series(LineSeries::new(pts, BLUE.stroke_width(2))).map_err(pe)?;
    } else {
        let mut ch = chart(root, title, 60).build_cartesian_2d(x, 0.0..1.0).map_err(pe)?;
        ch.configure_mesh()
            .x_desc(x_desc)
            .y_desc("P(latency ≤ x)")
            .x_label_formatter(&fmt)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(pe)?;
        ch.draw_series(LineSeries::new(pts, BLUE.stroke_width(2))).map_err(pe)?;
    }
    Ok(())
}

fn draw_jitter<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, s: &StreamRx) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(pe)?;
    let w = &s.rate_jitter;
    let ymax = w.iter().map(|x| x.max_pct).fold(100.0, f64::max) * 1.05;
    let ymin = w.iter().map(|x| x.min_pct).fold(100.0, f64::min) * 0.95;
    let mut ch = chart(
        root,
        format!("{}: rate jitter (% of the {} rate)", s.name, s.rate_jitter_reference),
        60,
    )
    .build_cartesian_2d((80f64..10_000f64).log_scale(), ymin..ymax)
    .map_err(pe)?;
    ch.configure_mesh()
        .x_desc("window (packets)")
        .y_desc("rate (%)")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    type Pick = fn(&gapless_core::meter::report::WindowRate) -> f64;
    let series: [(&str, RGBColor, Pick); 3] = [
        ("max", RED, |x| x.max_pct),
        ("avg", BLACK, |x| x.avg_pct),
        ("min", BLUE, |x| x.min_pct),
    ];
    for (label, color, f) in series {
        ch.draw_series(LineSeries::new(
            w.iter().map(|x| (x.packets as f64, f(x))),
            color.stroke_width(2),
        ))
        .map_err(pe)?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
        ch.draw_series(
            w.iter()
                .map(|x| Circle::new((x.packets as f64, f(x)), 3, color.filled())),
        )
        .map_err(pe)?;
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    Ok(())
}

fn draw_rate<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, s: &StreamRx) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(pe)?;
    let pts: Vec<(f64, f64)> = s.series.iter().map(|p| (p.t_s as f64, p.rx_frames as f64)).collect();
    let xmax = pts.last().map_or(1.0, |p| p.0 + 1.0);
    let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let mut ch = chart(root, format!("{}: received frames per second", s.name), 80)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(pe)?;
    ch.configure_mesh()
        .x_desc("time (s)")
        .y_desc("frames / s")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(pe)?;
    // A step per second: the count covers [t, t + 1).
    let steps: Vec<(f64, f64)> = pts.iter().flat_map(|&(t, v)| [(t, v), (t + 1.0, v)]).collect();
    ch.draw_series(LineSeries::new(steps, BLUE.stroke_width(2)))
        .map_err(pe)?;
    Ok(())
}

/// Streams that get plots; the rest get their CSV exports only.
pub const PLOTTED_STREAMS: usize = 32;

/// Writes every export (CSV, each file atomically) of `r` into `dir`, and the plots (PNG and
/// SVG) of its first [`PLOTTED_STREAMS`] streams. Returns the number of files.
pub fn write_all(r: &MeterReport, dir: &Path) -> std::result::Result<usize, crate::EngineError> {
    write_all_files(r, dir).map_err(|e| crate::EngineError::Report(format!("{e:#}")))
}

fn write_all_files(r: &MeterReport, dir: &Path) -> Result<usize> {
    font();
    std::fs::create_dir_all(dir).with_context(|| format!("creating the report directory {}", dir.display()))?;
    let mut files = 0;
    let mut seen = std::collections::HashSet::new();
    for (i, s) in r.streams.iter().enumerate() {
        // Plots for the first streams only: a run of 1,000 OTG flows drew 10,000 images and
        // held its end 36 s. Every stream keeps its CSV exports.
        let plot = i < PLOTTED_STREAMS;
        let mut base = slug(&s.name);
        if !seen.insert(base.clone()) {
            // Names that differ only past the cut or in the characters replaced: the
            // stream's index makes each unique.
            base = format!("{base}-{i}");
            seen.insert(base.clone());
        }
        let stem = |what: &str| dir.join(format!("{base}-{what}"));
        // Inter-arrival times.
        if let Some(ia) = &s.interarrival {
            let b = interarrival_buckets(ia).map_err(|e| anyhow!("{}: {e}", s.name))?;
            let mut csv = String::from("gap_lo_ns,gap_hi_ns,count\n");
            for (lo, hi, c) in &b {
                let _ = writeln!(csv, "{lo},{hi},{c}");
            }
            let b = mids(&b);
            write_atomic(&stem("interarrival.csv"), &csv)?;
            files += 1;
            files += both!(
                plot,
                stem("interarrival"),
                draw_interarrival,
                &s.name,
                &b,
                ia.target_gap_ns
            );
        }
        // Latency.
        if let Some(l) = &s.latency {
            let b = latency_buckets(l).map_err(|e| anyhow!("{}: {e}", s.name))?;
            let total: u64 = b.iter().map(|x| x.2).sum::<u64>().max(1);
            let mut csv = String::from("latency_lo_ns,latency_hi_ns,count,cdf,ccdf\n");
            let mut acc = 0;
            for (lo, hi, c) in &b {
                acc += c;
                let cdf = acc as f64 / total as f64;
                let _ = writeln!(csv, "{lo},{hi},{c},{cdf:.9},{:.9e}", 1.0 - cdf);
            }
            // The CDF reaches a bucket's share at its upper end.
            let b: Vec<(i64, u64)> = b.iter().map(|&(_, hi, c)| (hi, c)).collect();
            write_atomic(&stem("latency.csv"), &csv)?;
            files += 1;
            files += both!(plot, stem("latency-cdf"), draw_cdf, &s.name, &b, false);
            files += both!(plot, stem("latency-ccdf"), draw_cdf, &s.name, &b, true);
        }
        // Rate jitter.
        if !s.rate_jitter.is_empty() {
            let mut csv = String::from("window_packets,windows,min_pps,avg_pps,max_pps,min_pct,avg_pct,max_pct\n");
            for w in &s.rate_jitter {
                let _ = writeln!(
                    csv,
                    "{},{},{:.3},{:.3},{:.3},{:.4},{:.4},{:.4}",
                    w.packets, w.windows, w.min_pps, w.avg_pps, w.max_pps, w.min_pct, w.avg_pct, w.max_pct
                );
            }
            write_atomic(&stem("rate-jitter.csv"), &csv)?;
            files += 1;
            files += both!(plot, stem("rate-jitter"), draw_jitter, s);
        }
        // Time series.
        if !s.series.is_empty() {
            let mut csv = String::from("t_s,rx_frames,rx_bytes,lost,latency_p50_ns,latency_p99_ns,latency_max_ns\n");
            let o = |v: Option<i64>| v.map_or(String::new(), |v| v.to_string());
            for p in &s.series {
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{},{},{}",
                    p.t_s,
                    p.rx_frames,
                    p.rx_bytes,
                    p.lost.map_or(String::new(), |v| v.to_string()),
                    o(p.latency_p50_ns),
                    o(p.latency_p99_ns),
                    o(p.latency_max_ns)
                );
            }
            write_atomic(&stem("series.csv"), &csv)?;
            files += 1;
            files += both!(plot, stem("rate"), draw_rate, s);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::{slug, SLUG_MAX};

    #[test]
    fn a_stream_s_slug_is_bounded_and_safe_whatever_its_name() {
        assert_eq!(slug("a b/../c"), "a-b----c");
        assert_eq!(slug(""), "stream");
        for hostile in ["x".repeat(10_000), "\u{0}\n/".repeat(300), "é".repeat(300)] {
            let s = slug(&hostile);
            assert!(
                s.len() <= SLUG_MAX,
                "expected at most {SLUG_MAX} bytes, got {}",
                s.len()
            );
            assert!(
                s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{s}"
            );
        }
    }
}
