//! Python objects to and from serde types.

use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Where a dict went wrong: the key path (`stream[0].timing`) and serde's message.
pub struct Mismatch {
    pub path: String,
    pub message: String,
}

impl Mismatch {
    /// `"stream[0].timing: unknown field ..."` (the path left out at the top).
    pub fn text(&self) -> String {
        match self.path.as_str() {
            "" | "." => self.message.clone(),
            p => format!("{p}: {}", self.message),
        }
    }
}

/// A Python object (dicts, lists, numbers, strings) as `T`, naming the path of what is wrong.
/// It goes through JSON values first, so types are as strict as in a TOML file (`"yes"` is
/// not a bool, `1.5` not a count).
pub fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>) -> Result<T, Mismatch> {
    let mut de = pythonize::Depythonizer::from_object(obj);
    let json: serde_json::Value = serde_path_to_error::deserialize(&mut de).map_err(|e| Mismatch {
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })?;
    serde_path_to_error::deserialize(json).map_err(|e| Mismatch {
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

/// `v` as the Python value of its JSON: exactly what the CLI writes to a result file.
pub fn to_py<'py, T: Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(v).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    pythonize::pythonize(py, &json).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}
