//! The dashboard's JSON API under `/api`: profiles (list, get, put, delete) with the core's
//! validation. Errors are `{ "error": message, "path", "fix" }` with a 4xx status.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::AppState;

/// Bodies larger than this are refused (413): a profile is a few kB.
pub const BODY_LIMIT: usize = 1 << 20;

type Shared = Arc<AppState>;

/// A 4xx/5xx with a JSON body.
pub struct ApiError(StatusCode, Value);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

fn err(status: StatusCode, msg: impl Into<String>) -> ApiError {
    ApiError(status, json!({ "error": msg.into() }))
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    err(StatusCode::INTERNAL_SERVER_ERROR, format!("database: {e}"))
}

/// The API and its middleware (token, body limit).
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/api/profiles", get(list_profiles))
        .route(
            "/api/profiles/{name}",
            get(get_profile).put(put_profile).delete(delete_profile),
        )
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

async fn require_token(State(s): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(token) = &s.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(token.as_str()) {
            return err(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: send Authorization: Bearer TOKEN",
            )
            .into_response();
        }
    }
    next.run(req).await
}

async fn list_profiles(State(s): State<Shared>) -> Result<Json<Value>, ApiError> {
    let rows =
        s.db.lock()
            .unwrap_or_else(|e| e.into_inner())
            .profiles()
            .map_err(internal)?;
    Ok(Json(json!({ "profiles": rows })))
}

async fn get_profile(State(s): State<Shared>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let row =
        s.db.lock()
            .unwrap_or_else(|e| e.into_inner())
            .profile(&name)
            .map_err(internal)?;
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
async fn put_profile(State(s): State<Shared>, Path(name): Path<String>, body: Bytes) -> Result<Json<Value>, ApiError> {
    check_name(&name)?;
    let text = std::str::from_utf8(&body).map_err(|_| err(StatusCode::BAD_REQUEST, "the profile is not UTF-8 text"))?;
    let spec = gapless_core::ProfileSpec::from_toml(text, &name)
        .map_err(|e| ApiError(StatusCode::UNPROCESSABLE_ENTITY, profile_error(&e)))?;
    let compiled = gapless_engine::ProfileSource {
        spec,
        dir: std::path::PathBuf::new(),
        label: name.clone(),
    }
    .compile(None);
    let problem = compiled.err().map(|e| e.to_string());
    let row =
        s.db.lock()
            .unwrap_or_else(|e| e.into_inner())
            .put_profile(&name, text, problem.as_deref())
            .map_err(internal)?;
    Ok(Json(json!(row)))
}

fn profile_error(e: &gapless_core::ProfileError) -> Value {
    match e {
        gapless_core::ProfileError::Invalid { path, problem, fix } => {
            json!({ "error": e.to_string(), "path": path, "problem": problem, "fix": fix })
        }
        _ => json!({ "error": e.to_string() }),
    }
}

async fn delete_profile(State(s): State<Shared>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let gone =
        s.db.lock()
            .unwrap_or_else(|e| e.into_inner())
            .delete_profile(&name)
            .map_err(internal)?;
    if gone {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(err(StatusCode::NOT_FOUND, format!("no profile named {name:?}")))
    }
}
