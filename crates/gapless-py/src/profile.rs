//! Profiles: TOML text and dicts, both ways, and `check`'s text.

use std::path::PathBuf;

use gapless_core::ProfileSpec;
use gapless_engine::ProfileSource;
use pyo3::prelude::*;

use crate::convert::{from_py, to_py};
use crate::errors::{profile_mismatch, raise};

/// A profile dict as the engine's profile source; files it names are read from `dir`.
pub fn source(py: Python<'_>, spec: &Bound<'_, PyAny>, dir: &str, label: &str) -> PyResult<ProfileSource> {
    let spec: ProfileSpec = from_py(spec).map_err(|m| profile_mismatch(py, label, &m))?;
    Ok(ProfileSource {
        spec,
        dir: PathBuf::from(dir),
        label: label.to_string(),
    })
}

/// Parses profile TOML; returns the profile as a dict with every default filled in.
#[pyfunction]
pub fn profile_from_toml<'py>(py: Python<'py>, text: &str, label: &str) -> PyResult<Bound<'py, PyAny>> {
    let spec = ProfileSpec::from_toml(text, label).map_err(|e| raise(py, &e.into()))?;
    to_py(py, &spec)
}

/// Checks a profile dict's keys and types; returns it with every default filled in.
#[pyfunction]
pub fn profile_normalize<'py>(py: Python<'py>, spec: &Bound<'py, PyAny>, label: &str) -> PyResult<Bound<'py, PyAny>> {
    let s = source(py, spec, ".", label)?;
    to_py(py, &s.spec)
}

/// A profile dict as TOML text (the same profile for `gapless run`).
#[pyfunction]
pub fn profile_to_toml(py: Python<'_>, spec: &Bound<'_, PyAny>, label: &str) -> PyResult<String> {
    let s = source(py, spec, ".", label)?;
    toml::to_string(&s.spec).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("profile {label}: {e}")))
}

/// Compiles a profile as `gapless check` does and returns its text.
#[pyfunction]
#[pyo3(signature = (spec, dir, label, link_speed_bps=None))]
pub fn profile_check(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    dir: &str,
    label: &str,
    link_speed_bps: Option<f64>,
) -> PyResult<String> {
    let s = source(py, spec, dir, label)?;
    let p = s.compile(link_speed_bps).map_err(|e| raise(py, &e))?;
    Ok(gapless_engine::report::profile_text(label, &p))
}
