//! The meter offline (`analyze`), the calibration, and reports of results.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use gapless_core::meter::MeterReport;
use gapless_core::result::RunResult;
use gapless_engine::report::write_json_atomic;
use gapless_engine::request::{AnalyzeRequest, CalibrateRequest, MeasureRequest};
use pyo3::prelude::*;

use crate::convert::{from_py, to_py};
use crate::errors::{make, option_mismatch, raise, result_or_failure};
use crate::wait::interruptible;

/// Meters a capture or a CSV of timestamps; returns the meter's report as a dict.
#[pyfunction]
pub fn analyze<'py>(py: Python<'py>, options: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let req: AnalyzeRequest = from_py(options).map_err(|m| option_mismatch(py, "an analysis", &m))?;
    let spec = req.spec().map_err(|e| raise(py, &e))?;
    let stop = AtomicBool::new(false);
    let report = interruptible(py, &stop, || gapless_engine::analyze(&spec, &stop)).map_err(|e| raise(py, &e))?;
    to_py(py, &report)
}

/// Meters an interface live until `duration` or Ctrl-C; returns the meter's report.
#[pyfunction]
pub fn measure<'py>(py: Python<'py>, options: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let req: MeasureRequest = from_py(options).map_err(|m| option_mismatch(py, "a meter", &m))?;
    let spec = req.spec().map_err(|e| raise(py, &e))?;
    let stop = AtomicBool::new(false);
    let live = gapless_engine::live::RxLive::default();
    let out = interruptible(py, &stop, || gapless_engine::measure(&spec, &stop, &live)).map_err(|e| raise(py, &e))?;
    let failure = out.error.map(|e| {
        let msg = format!("the meter failed: {e} (the result has what was measured until then)");
        (msg, "MeterFailed")
    });
    result_or_failure(py, to_py(py, &out.report)?, failure)
}

/// Calibrates a direct link; returns the calibration as a dict and writes it to `out`
/// (atomically) when given.
#[pyfunction]
#[pyo3(signature = (options, out=None))]
pub fn calibrate<'py>(py: Python<'py>, options: &Bound<'py, PyAny>, out: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    let req: CalibrateRequest = from_py(options).map_err(|m| option_mismatch(py, "a calibration", &m))?;
    let spec = req.spec().map_err(|e| raise(py, &e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let done =
        interruptible(py, &stop, || gapless_engine::calibrate(&spec, stop.clone())).map_err(|e| raise(py, &e))?;
    if let Some(path) = out {
        write_json_atomic(Path::new(path), &done.calibration).map_err(|e| {
            make(
                py,
                "FileError",
                &format!("writing {path}: {e}"),
                "Write",
                serde_json::json!({"path": path}),
            )
        })?;
    }
    let cal = to_py(py, &done.calibration)?;
    cal.set_item("run", to_py(py, &done.run)?)?;
    Ok(cal)
}

/// The meter's report in a result: a run's `rx`, or a meter's report itself.
fn meter_report(py: Python<'_>, result: &Bound<'_, PyAny>) -> PyResult<MeterReport> {
    let bad = |m: crate::convert::Mismatch| {
        let msg = format!("not a result of gapless: {}", m.text());
        make(py, "FileError", &msg, "BadResult", serde_json::json!({"path": m.path}))
    };
    if result.get_item("rx").is_ok() {
        let run: RunResult = from_py(result).map_err(bad)?;
        return run.rx.ok_or_else(|| {
            make(py, "ConfigError", "the run was not metered (no `rx`): a report needs a meter's figures. Fix: run with rx=... or analyze a capture", "NotMetered", serde_json::json!({}))
        });
    }
    from_py(result).map_err(bad)
}

/// Writes the CSV exports and plots of a result into `dir`; returns how many files.
#[pyfunction]
pub fn report(py: Python<'_>, result: &Bound<'_, PyAny>, dir: &str) -> PyResult<usize> {
    let r = meter_report(py, result)?;
    py.detach(|| gapless_engine::report::plots::write_all(&r, Path::new(dir)))
        .map_err(|e| raise(py, &e))
}

/// The summary the CLI prints for a result (a run's, a meter's, or an experiment's).
#[pyfunction]
pub fn summary(py: Python<'_>, result: &Bound<'_, PyAny>) -> PyResult<String> {
    if result.get_item("method").is_ok() && result.get_item("trials").is_ok() {
        // The figures alone: the file's spec (its inline profile) is TOML, which has no null.
        let r: gapless_core::experiment::ExperimentResult =
            from_py(result).map_err(|m| option_mismatch(py, "an experiment's result", &m))?;
        let dut = result
            .get_item("dut")
            .ok()
            .and_then(|d| from_py::<gapless_core::experiment::spec::DutInfo>(&d).ok());
        let text = dut.as_ref().map(gapless_core::experiment::spec::DutInfo::text);
        return Ok(gapless_engine::report::experiment::summary_text(&r, text.as_deref()));
    }
    if result.get_item("sent_frames").is_ok() {
        let run: RunResult = from_py(result).map_err(|m| option_mismatch(py, "a run's result", &m))?;
        let mut s = gapless_engine::report::summary_text(&run);
        if let Some(rx) = &run.rx {
            s.push_str(&gapless_engine::rx::summary_text(rx));
        }
        s.push_str(&gapless_engine::report::verdict_text(&run));
        return Ok(s);
    }
    Ok(gapless_engine::rx::summary_text(&meter_report(py, result)?))
}

/// Each stream's histograms in a result, as buckets `(lowest_ns, highest_ns, count)`:
/// `[{"name", "latency", "interarrival"}, ...]`.
#[pyfunction]
pub fn histograms<'py>(py: Python<'py>, result: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let r = meter_report(py, result)?;
    let mut out = Vec::new();
    for s in &r.streams {
        let h = gapless_engine::report::plots::histograms(s).map_err(|e| raise(py, &e))?;
        out.push(serde_json::json!({"name": s.name, "latency": h.latency, "interarrival": h.interarrival}));
    }
    to_py(py, &out)
}
