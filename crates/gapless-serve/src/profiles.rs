//! Saved profiles (list, get, put, delete) with the core's validation, `/api/check` and
//! `/api/toml` for the form, and the rule that the server reads no file a profile names.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use gapless_engine::EngineError;

use crate::jobs::lock;
use crate::reply::{engine_error, err, internal, json_body, ApiError};
use crate::Shared;

pub async fn list_profiles(State(s): State<Shared>) -> Result<Json<Value>, ApiError> {
    let rows = lock(&s.db).profiles().map_err(internal)?;
    Ok(Json(json!({ "profiles": rows })))
}

pub async fn get_profile(State(s): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let row = lock(&s.db).profile(&name).map_err(internal)?;
    row.map(|r| Json(json!(r)))
        .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no profile named {name:?}")))
}

/// Names are what a user types: letters, digits, `-`, `_`, `.`, up to 100.
fn check_name(name: &str) -> Result<(), ApiError> {
    let ok =
        !name.is_empty() && name.len() <= 100 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(err(
            StatusCode::BAD_REQUEST,
            format!("profile name {name:?}: use 1 to 100 letters, digits, '-', '_' or '.'"),
        ))
    }
}

/// Saves the body (TOML) under `name`. A profile that does not parse is refused (422) with
/// the core's message; one that parses but does not compile is saved, marked invalid with
/// its path and fix (a draft the form keeps editing).
pub async fn put_profile(
    State(s): State<Shared>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    check_name(&name)?;
    let text = std::str::from_utf8(&body).map_err(|_| err(StatusCode::BAD_REQUEST, "the profile is not UTF-8 text"))?;
    let spec = gapless_core::ProfileSpec::from_toml(text, &name)
        .map_err(|e| engine_error(StatusCode::UNPROCESSABLE_ENTITY, &EngineError::Profile(e)))?;
    let problem = compile(spec, &name)
        .err()
        .map(|e| e["error"].as_str().unwrap_or_default().to_string());
    let row = lock(&s.db)
        .put_profile(&name, text, problem.as_deref())
        .map_err(internal)?;
    Ok(Json(json!(row)))
}

pub async fn delete_profile(State(s): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let gone = lock(&s.db).delete_profile(&name).map_err(internal)?;
    if gone {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(err(StatusCode::NOT_FOUND, format!("no profile named {name:?}")))
    }
}

/// The server reads no files a profile names (replays, size or gap files, rate traces, a
/// pcap output): a path in a request must not reach the file system.
pub fn no_files(spec: &gapless_core::ProfileSpec) -> Result<(), ApiError> {
    fn walk(v: &Value, at: &str) -> Option<String> {
        match v {
            Value::Object(m) => m.iter().find_map(|(k, v)| {
                let here = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                if (k == "file" || k == "pcap") && v.is_string() {
                    Some(here)
                } else {
                    walk(v, &here)
                }
            }),
            Value::Array(a) => a.iter().enumerate().find_map(|(i, v)| walk(v, &format!("{at}[{i}]"))),
            _ => None,
        }
    }
    let v = serde_json::to_value(spec).map_err(internal)?;
    match walk(&v, "") {
        None => Ok(()),
        Some(path) => Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({ "error": format!("{path}: the server does not read or write files a profile names. Fix: run this profile with the CLI or Python, or give the values inline"), "path": path }),
        )),
    }
}

/// Compiles a profile as the server may: no files named (see [`no_files`]), none read.
/// The error is the JSON body a reply carries (message, path, problem, fix).
fn compile(spec: gapless_core::ProfileSpec, label: &str) -> Result<gapless_core::profile::model::Profile, Value> {
    no_files(&spec).map_err(|e| e.1)?;
    gapless_engine::ProfileSource {
        spec,
        dir: std::path::PathBuf::new(),
        label: label.into(),
    }
    .compile(None)
    .map_err(|e| engine_error(StatusCode::OK, &e).1)
}

/// The text the CLI prints for a run's result: summary, meter, verdict.
pub fn summary(r: &gapless_core::result::RunResult) -> String {
    let mut s = gapless_engine::report::summary_text(r);
    if let Some(rx) = &r.rx {
        s.push_str(&gapless_engine::rx::summary_text(rx));
    }
    s.push_str(&gapless_engine::report::verdict_text(r));
    s
}

/// `POST /api/check`: a profile's TOML checked by the core, as the form validates. Returns
/// `ok` with `gapless check`'s text, or the error with its path and fix; and the TOML as
/// written (a plain JSON value, for the form), when it parses as TOML at all.
pub async fn check(body: Bytes) -> Result<Json<Value>, ApiError> {
    let text = std::str::from_utf8(&body).map_err(|_| err(StatusCode::BAD_REQUEST, "the profile is not UTF-8 text"))?;
    let plain = toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok());
    let compiled = gapless_core::ProfileSpec::from_toml(text, "profile")
        .map_err(|e| engine_error(StatusCode::OK, &EngineError::Profile(e)).1)
        .and_then(|spec| compile(spec, "profile"));
    let verdict = match compiled {
        Ok(p) => json!({ "ok": true, "text": gapless_engine::report::profile_text("profile", &p) }),
        Err(e) => json!({ "ok": false, "error": e }),
    };
    let mut v = verdict;
    v["profile"] = plain.unwrap_or(Value::Null);
    Ok(Json(v))
}

/// `POST /api/toml`: `{"profile": {...}}` (the form's state) as TOML text.
pub async fn to_toml(body: Bytes) -> Result<Json<Value>, ApiError> {
    let v: Value = json_body(&body)?;
    let profile = v.get("profile").cloned().unwrap_or(Value::Null);
    let t: toml::Value = serde_json::from_value(drop_nulls(profile))
        .map_err(|e| err(StatusCode::BAD_REQUEST, format!("profile: {e}")))?;
    let text = toml::to_string(&t).map_err(|e| err(StatusCode::BAD_REQUEST, format!("profile: {e}")))?;
    Ok(Json(json!({ "toml": text })))
}

/// TOML has no null: a key set to null is a key not given.
fn drop_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, drop_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(drop_nulls).collect()),
        v => v,
    }
}
