//! The dashboard's routes under `/api`: profiles ([`crate::profiles`]), runs
//! ([`crate::runs_api`]), experiments, calibrations and the page ([`crate::web`]), behind
//! the client limits and the request guard. Errors are [`crate::reply`]'s JSON.

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode};
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;

use crate::guard::Guard;
use crate::reply::{err, ApiError};
use crate::{calibrations, experiments, profiles, runs_api, web, Shared};

/// The API behind the client limits ([`crate::limits`]), the request guard
/// ([`crate::guard`]) and the body limit.
pub fn router(state: Shared, guard: Guard) -> Router {
    Router::new()
        .route("/api/profiles", get(profiles::list_profiles))
        .route(
            "/api/profiles/{name}",
            get(profiles::get_profile)
                .put(profiles::put_profile)
                .delete(profiles::delete_profile),
        )
        .route("/api/runs", get(runs_api::list).post(runs_api::start))
        .route("/api/runs/{id}", get(runs_api::get).delete(runs_api::delete))
        .route("/api/runs/{id}/stop", post(runs_api::stop))
        .route("/api/runs/{id}/events", get(runs_api::events))
        .route("/api/runs/{id}/files/{name}", get(runs_api::file))
        .route("/api/calibrations", get(calibrations::list).post(calibrations::create))
        .route("/api/experiments", get(experiments::list).post(experiments::start))
        .route("/api/experiments/{id}", get(experiments::get))
        .route("/api/experiments/{id}/stop", post(experiments::stop))
        .route("/api/experiments/{id}/events", get(experiments::events))
        .route("/api/experiments/{id}/files/{name}", get(experiments::file))
        .route("/api/check", post(profiles::check))
        .route("/api/toml", post(profiles::to_toml))
        .route("/", get(web::index))
        .route("/assets/{name}", get(web::asset))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(crate::limits::BODY_LIMIT))
        .layer(middleware::from_fn_with_state(guard, crate::guard::check))
        .layer(middleware::from_fn_with_state(
            state.limits.clone(),
            crate::limits::check,
        ))
        .with_state(state)
}

/// The page and its assets: public, so the page can ask for the token.
pub fn is_public(path: &str) -> bool {
    path == "/" || path.starts_with("/assets/")
}

/// The type a state-changing request's body is written in: TOML for a profile's text (PUT
/// a profile, check one) and an experiment file; JSON for everything else.
pub fn body_type(m: &Method, path: &str) -> &'static str {
    let toml = (*m == Method::PUT && path.starts_with("/api/profiles/"))
        || path == "/api/check"
        || (*m == Method::POST && path == "/api/experiments");
    if toml {
        "application/toml"
    } else {
        "application/json"
    }
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    err(StatusCode::NOT_FOUND, format!("no such path {}", uri.path()))
}
