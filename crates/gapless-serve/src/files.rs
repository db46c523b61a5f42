//! Report files: listed from a run's report directory and served by name. A name is taken
//! only if the directory lists it, so no request reaches another path.

use std::path::Path;

use axum::http::StatusCode;

use crate::reply::{err, ApiError};

/// The file names in `dir`, sorted (none if it does not exist).
pub fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// A listed file's bytes and its content type.
pub fn read(dir: &Path, name: &str) -> Result<(Vec<u8>, &'static str), ApiError> {
    if !list(dir).iter().any(|n| n == name) {
        return Err(err(StatusCode::NOT_FOUND, format!("no report file {name:?}")));
    }
    let bytes = std::fs::read(dir.join(name))
        .map_err(|e| err(StatusCode::INTERNAL_SERVER_ERROR, format!("reading {name}: {e}")))?;
    Ok((bytes, mime(name)))
}

/// A listed file as a response with its content type.
pub fn serve(dir: &Path, name: &str) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let (bytes, mime) = read(dir, name)?;
    Ok(([(axum::http::header::CONTENT_TYPE, mime)], bytes).into_response())
}

pub fn mime(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("json") => "application/json",
        Some("csv") => "text/csv; charset=utf-8",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
