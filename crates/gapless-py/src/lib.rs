//! `gapless._gapless`: the engine for Python. This module is the thin layer under the
//! `gapless` package (python/gapless): dicts in, dicts out, through serde, so a dict and a
//! TOML file are the same profile and a result is the JSON the CLI writes. The package adds
//! the keyword arguments, the docstrings and the exception classes.
//!
//! Every call that waits releases the GIL and checks for signals between waits: Ctrl-C
//! stops the engine's work and the call still returns what it measured, marked interrupted.

mod convert;
mod errors;
mod experiment;
mod meter;
mod profile;
mod session;
mod wait;

use pyo3::prelude::*;

#[pymodule]
fn _gapless(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(profile::profile_from_toml, m)?)?;
    m.add_function(wrap_pyfunction!(profile::profile_normalize, m)?)?;
    m.add_function(wrap_pyfunction!(profile::profile_to_toml, m)?)?;
    m.add_function(wrap_pyfunction!(profile::profile_check, m)?)?;
    m.add_function(wrap_pyfunction!(session::start, m)?)?;
    m.add_function(wrap_pyfunction!(meter::analyze, m)?)?;
    m.add_function(wrap_pyfunction!(meter::measure, m)?)?;
    m.add_function(wrap_pyfunction!(meter::calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(meter::report, m)?)?;
    m.add_function(wrap_pyfunction!(meter::summary, m)?)?;
    m.add_function(wrap_pyfunction!(meter::histograms, m)?)?;
    m.add_function(wrap_pyfunction!(experiment::experiment, m)?)?;
    m.add_class::<session::RunHandle>()?;
    Ok(())
}
