//! The dashboard page and its assets, embedded in the binary at build time (no Node build,
//! nothing read from disk at run time). uPlot 1.6.32 (MIT) is vendored in `web/`.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use crate::reply::err;

/// `(name, bytes)` of every asset under `/assets/`.
const ASSETS: &[(&str, &[u8])] = &[
    ("app.js", include_bytes!("../web/app.js")),
    ("app.css", include_bytes!("../web/app.css")),
    ("uPlot.iife.min.js", include_bytes!("../web/uPlot.iife.min.js")),
    ("uPlot.min.css", include_bytes!("../web/uPlot.min.css")),
    ("uPlot.LICENSE", include_bytes!("../web/uPlot.LICENSE")),
];

pub async fn index() -> Html<&'static str> {
    Html(include_str!("../web/index.html"))
}

pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _)| *n == name) {
        Some((n, bytes)) => (
            [
                (header::CONTENT_TYPE, crate::files::mime(n)),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *bytes,
        )
            .into_response(),
        None => err(StatusCode::NOT_FOUND, format!("no asset {name:?}")).into_response(),
    }
}
