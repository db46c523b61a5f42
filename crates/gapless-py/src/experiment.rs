//! Experiments (RFC 2544, sweeps, repetitions) from a file or a dict.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use gapless_core::experiment::spec::ExperimentSpec;
use gapless_engine::Experiment;
use pyo3::prelude::*;

use crate::convert::{from_py, to_py};
use crate::errors::{make, raise, result_or_failure};
use crate::wait::interruptible;

/// Runs an experiment: `spec` is a path (str) or a dict in the file's schema, whose files
/// are read from `dir`. `on_trial` (optional) is called with each trial's record as it is
/// judged. Returns the experiment's result file as a dict; `report_dir` gets its CSV and
/// plots. A trial that could not run raises RunError, with the file so far as `result`.
#[pyfunction]
#[pyo3(signature = (spec, dir, label, on_trial=None, report_dir=None))]
pub fn experiment<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyAny>,
    dir: &str,
    label: &str,
    on_trial: Option<Py<PyAny>>,
    report_dir: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let x = match spec.extract::<String>() {
        Ok(path) => Experiment::from_file(Path::new(&path)),
        Err(_) => {
            let s: ExperimentSpec = from_py(spec).map_err(|m| {
                let msg = format!("experiment {label}: {}", m.text());
                make(
                    py,
                    "ConfigError",
                    &msg,
                    "Parse",
                    serde_json::json!({"path": m.path, "problem": m.message}),
                )
            })?;
            Experiment::new(s, Path::new(dir), label.to_string())
        }
    }
    .map_err(|e| raise(py, &e))?;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let file = interruptible(py, &stop, || {
        let mut hear = |t: &gapless_core::experiment::TrialRecord| {
            if let Some(cb) = &on_trial {
                Python::attach(|py| {
                    let called = to_py(py, t).and_then(|d| cb.call1(py, (d,)));
                    if let Err(e) = called {
                        e.print(py);
                    }
                });
            }
        };
        x.run(stop.clone(), &mut hear)
    });
    if let Some(d) = report_dir {
        gapless_engine::report::experiment::write_all(&file.result, Path::new(d)).map_err(|e| {
            make(
                py,
                "FileError",
                &format!("{d}: {e:#}"),
                "Report",
                serde_json::json!({"path": d}),
            )
        })?;
    }
    // A trial that could not run (not a judgement: the sender or meter failed) ends the
    // experiment; the trials before it ride on the exception, as the CLI keeps them in its file.
    let failure = file
        .result
        .error
        .as_ref()
        .map(|e| (format!("{label}: {e}"), "ExperimentFailed"));
    result_or_failure(py, to_py(py, &file)?, failure)
}
