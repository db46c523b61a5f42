//! Replies every handler shares: a 4xx/5xx with a JSON body (`{ "error": message, "kind"?,
//! "path"?, "fix"? }`), an engine error as one, and a JSON body read or refused with where it
//! is wrong; why a job did not start; an OTG error as a reply. It imports only [`crate::jobs`].

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use gapless_engine::EngineError;
use serde_json::{json, Value};

use crate::jobs::{JobId, StartError};

/// A 4xx/5xx with a JSON body.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub Value);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

pub fn err(status: StatusCode, msg: impl Into<String>) -> ApiError {
    ApiError(status, json!({ "error": msg.into() }))
}

pub fn internal(e: impl std::fmt::Display) -> ApiError {
    err(StatusCode::INTERNAL_SERVER_ERROR, format!("internal: {e}"))
}

/// An engine error as a 4xx: its message and kind.
pub fn engine_error(status: StatusCode, e: &EngineError) -> ApiError {
    let mut body = json!({ "error": e.to_string(), "kind": e.kind() });
    if let EngineError::Profile(gapless_core::ProfileError::Invalid { path, problem, fix }) = e {
        body["path"] = json!(path);
        body["problem"] = json!(problem);
        body["fix"] = json!(fix);
    }
    ApiError(status, body)
}

/// A JSON body as `T`, or a 400 that says what is wrong and where.
pub fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        let msg = if inner.is_syntax() || inner.is_eof() {
            format!("malformed JSON: {inner}")
        } else if at == "." {
            format!("{inner}")
        } else {
            format!("{at}: {inner}")
        };
        err(StatusCode::BAD_REQUEST, msg)
    })
}

/// 201 with the new job's id, or why it did not start.
pub fn started_reply(r: Result<JobId, StartError>) -> Result<Response, ApiError> {
    let id = match r.map_err(start_error)? {
        JobId::Run(id) | JobId::Experiment(id) => id,
        JobId::Calibration(n) | JobId::Share(n) => n as i64,
    };
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

/// Why a job did not start: a busy interface is a 409 naming the job that holds it.
pub fn start_error(e: StartError) -> ApiError {
    match e {
        StartError::Busy { iface, holder } => {
            let mut body = json!({ "error": format!("{iface} is busy with {holder}: one run, experiment or calibration at a time per interface. Fix: stop {holder} or wait for it to end"), "iface": iface, "holder": holder.to_string() });
            match holder {
                JobId::Run(id) => body["run"] = json!(id),
                JobId::Experiment(id) => body["experiment"] = json!(id),
                JobId::Calibration(_) => body["calibration"] = json!(true),
                JobId::Share(_) => body["share"] = json!(true),
            }
            ApiError(StatusCode::CONFLICT, body)
        }
        // Cores other runs hold: the state of the server, not the request, is in the way.
        StartError::Engine(e @ (EngineError::NoCoreLeft { .. } | EngineError::CoreHeld { .. })) => {
            engine_error(StatusCode::CONFLICT, &e)
        }
        StartError::Engine(e) => engine_error(StatusCode::BAD_REQUEST, &e),
        StartError::Db(e) => internal(e),
    }
}

/// An OTG error as an HTTP reply (the OTG and agent APIs' errors: `{code, kind, errors}`).
pub struct Reply(pub gapless_otg::OtgError);

impl From<gapless_otg::OtgError> for Reply {
    fn from(e: gapless_otg::OtgError) -> Reply {
        Reply(e)
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self.0.body())).into_response()
    }
}

/// Runs `f` on the blocking pool: what waits on the kernel (`ip`, ARP), on another host, or
/// writes a large buffer stays off the server's async workers.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, gapless_otg::OtgError> + Send + 'static,
) -> Result<T, gapless_otg::OtgError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(gapless_otg::OtgError::internal)?
}
