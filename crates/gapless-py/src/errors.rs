//! Engine errors as the `gapless.errors` exception classes, with the message and the
//! fields a script matches on (`kind`, and per kind `path`, `fix`, `iface`, ...).

use gapless_core::ProfileError;
use gapless_engine::EngineError;
use gapless_io::IoError;
use pyo3::prelude::*;
use serde_json::{json, Value};

use crate::convert::Mismatch;

/// An exception of class `class` (in `gapless.errors`) with `message` and `fields` set as
/// attributes, and `kind` naming what failed.
pub fn make(py: Python<'_>, class: &str, message: &str, kind: &str, fields: Value) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("gapless.errors")?.getattr(class)?;
        let exc = cls.call1((message,))?;
        exc.setattr("kind", kind)?;
        if let Value::Object(map) = fields {
            for (k, v) in map {
                exc.setattr(k.as_str(), pythonize::pythonize(py, &v)?)?;
            }
        }
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// `result` as it stands, or, when the work failed on the way (`failure`: what and its
/// kind), a RunError that carries it as its `result` attribute: nothing measured is lost.
pub fn result_or_failure<'py>(
    py: Python<'py>,
    result: Bound<'py, PyAny>,
    failure: Option<(String, &str)>,
) -> PyResult<Bound<'py, PyAny>> {
    let Some((message, kind)) = failure else {
        return Ok(result);
    };
    Err(carrying(py, make(py, "RunError", &message, kind, json!({})), &result))
}

/// `err` with what was measured until it happened as its `result` attribute.
pub fn carrying(py: Python<'_>, err: PyErr, result: &Bound<'_, PyAny>) -> PyErr {
    // Setting an attribute on an exception instance does not fail; if it ever did, the
    // error itself still goes up.
    let _ = err.value(py).setattr("result", result);
    err
}

/// A dict that does not fit a profile: a ProfileError naming the key path.
pub fn profile_mismatch(py: Python<'_>, label: &str, m: &Mismatch) -> PyErr {
    let msg = format!("profile {label}: {}", m.text());
    make(
        py,
        "ProfileError",
        &msg,
        "Parse",
        json!({"path": m.path, "problem": m.message}),
    )
}

/// Options that do not fit what a call takes: a ConfigError naming the option.
pub fn option_mismatch(py: Python<'_>, what: &str, m: &Mismatch) -> PyErr {
    let msg = format!("{what}: {}", m.text());
    make(
        py,
        "ConfigError",
        &msg,
        "Option",
        json!({"path": m.path, "problem": m.message}),
    )
}

/// The engine's error as its exception class.
pub fn raise(py: Python<'_>, e: &EngineError) -> PyErr {
    let (class, fields) = classify(e);
    make(py, class, &e.to_string(), &e.kind(), fields)
}

fn profile_fields(p: &ProfileError) -> Value {
    match p {
        ProfileError::Invalid { path, problem, fix } => json!({"path": path, "problem": problem, "fix": fix}),
        ProfileError::Parse { origin, message } => json!({"origin": origin, "problem": message}),
        _ => json!({}),
    }
}

fn classify(e: &EngineError) -> (&'static str, Value) {
    use EngineError as E;
    match e {
        E::Profile(p) => ("ProfileError", profile_fields(p)),
        E::Plan(_) => ("ProfileError", json!({})),
        E::ExperimentProfile { experiment, inner } => {
            let (_, mut f) = classify(inner);
            f["experiment"] = json!(experiment);
            ("ProfileError", f)
        }
        E::Io(io) => classify_io(io),
        E::OutOfRange { what, value, want } => ("ConfigError", json!({"what": what, "value": value, "want": want})),
        E::CoreNotAllowed { core, allowed } => ("ConfigError", json!({"core": core, "allowed": allowed})),
        E::CoreHeld { core, held } => ("ConfigError", json!({"core": core, "held": held})),
        E::UnknownOption { key, known, .. } => ("ConfigError", json!({"key": key, "known": known})),
        E::Unreadable { path, fix, .. } => ("FileError", json!({"path": path, "fix": fix})),
        E::BadFile { path, problem, fix } => ("FileError", json!({"path": path, "problem": problem, "fix": fix})),
        E::EmptyCapture { path, why } => ("FileError", json!({"path": path, "problem": why})),
        E::PcapNotWritten(_) => ("FileError", json!({})),
        E::Interrupted(what) => ("Interrupted", json!({"what": what})),
        E::MeterFailed(_) | E::BackendFailed(_) | E::SendFailed { .. } | E::Panicked(_) | E::Report(_) => {
            ("RunError", json!({}))
        }
        E::CalibrationNoFrames { .. } | E::CalibrationFailed(_) => ("RunError", json!({})),
        _ => ("ConfigError", json!({})),
    }
}

fn classify_io(io: &IoError) -> (&'static str, Value) {
    use IoError as I;
    match io {
        I::MissingCapabilities { missing, fix, .. } => ("PermissionDenied", json!({"missing": missing, "fix": fix})),
        I::NoPermission | I::NotRoot(_) => ("PermissionDenied", json!({})),
        I::NoSuchInterface(i) | I::InterfaceDown(i) | I::XdpUnsupported(i) => ("InterfaceError", json!({"iface": i})),
        I::NoSuchNetns(n) => ("InterfaceError", json!({"netns": n})),
        I::LinkLost { iface, .. }
        | I::XdpZeroCopyUnsupported { iface }
        | I::XdpQueueBusy { iface, .. }
        | I::XdpProgramAttached { iface }
        | I::XdpNoNative { iface, .. }
        | I::NoHwTimestamps { iface, .. }
        | I::QdiscInUse { iface, .. }
        | I::TxStamps { iface, .. }
        | I::FrameTooLarge { iface, .. }
        | I::NoLaunchTimeQdisc { iface, .. }
        | I::NicLimiterRefused { iface, .. } => ("InterfaceError", json!({"iface": iface})),
        I::Input { path, fix, .. } => ("FileError", json!({"path": path, "fix": fix})),
        I::Pcap { path, .. } => ("FileError", json!({"path": path})),
        I::Os { .. } | I::Command { .. } | I::Sysfs { .. } => ("SystemCallError", json!({})),
        _ => ("InterfaceError", json!({})),
    }
}
