//! `/api/calibrations`: run one (the engine's calibration between two interfaces or across
//! a testbed), store it, list them. A stored calibration is also written as the file
//! `gapless calibrate` writes, under the report directory, where runs read it by id.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use gapless_engine::request::CalibrateRequest;
use gapless_engine::{Calibrated, CalibrationSpec, EngineError};
use serde_json::{json, Value};

use crate::jobs::{iface_key, lock, JobId, Publisher};
use crate::reply::engine_error;
use crate::reply::start_error;
use crate::reply::{err, internal, json_body, ApiError};
use crate::Shared;

/// Where calibration `id`'s file is; an error if there is no such calibration.
pub fn path(s: &Shared, id: i64) -> Result<PathBuf, ApiError> {
    let p = s.reports.join("calibrations").join(format!("calibration-{id}.json"));
    if p.is_file() {
        Ok(p)
    } else {
        Err(err(StatusCode::NOT_FOUND, format!("no calibration {id}")))
    }
}

/// Numbers the calibrations being made (for the job table).
static MAKING: AtomicU64 = AtomicU64::new(1);

/// Calibrates as a job on the two interfaces, so no run or experiment shares them (a busy
/// one is a 409); waits for it without holding an async worker.
async fn hold_and_calibrate(s: &Shared, spec: CalibrationSpec) -> Result<Result<Calibrated, EngineError>, ApiError> {
    let ifaces = vec![
        iface_key(spec.tx_netns.as_deref(), &spec.tx),
        iface_key(spec.rx.netns.as_deref(), &spec.rx.iface),
    ];
    let (tx, rx) = tokio::sync::oneshot::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let job = JobId::Calibration(MAKING.fetch_add(1, Ordering::Relaxed));
    s.jobs
        .start(ifaces, stop, move || {
            let body = move |_: Publisher| {
                let _ = tx.send(gapless_engine::calibrate(&spec, flag));
            };
            Ok((job, Box::new(body)))
        })
        .map_err(start_error)?;
    rx.await
        .map_err(|_| internal("the calibration's thread ended without a result"))
}

pub async fn list(State(s): State<Shared>) -> Result<Json<Value>, ApiError> {
    let rows = lock(&s.db).calibrations().map_err(internal)?;
    let list: Vec<Value> = rows
        .into_iter()
        .map(|(id, created_ns, c)| json!({ "id": id, "created_ns": created_ns, "calibration": c }))
        .collect();
    Ok(Json(json!({ "calibrations": list })))
}

/// `POST /api/calibrations`: `CalibrateRequest`'s keys, or `{"testbed": NAME, ...}` for
/// its two ends. Returns the stored calibration and its summary text.
pub async fn create(State(s): State<Shared>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let mut body: serde_json::Map<String, Value> = json_body(&body)?;
    if let Some(tb) = body.remove("testbed") {
        let name = tb.as_str().unwrap_or_default();
        let tb = gapless_io::testbed::Testbed::new(name).map_err(|m| err(StatusCode::BAD_REQUEST, m))?;
        for (k, v) in [
            ("tx", tb.tx_if()),
            ("rx", tb.rx_if()),
            ("tx_netns", tb.tx_ns()),
            ("rx_netns", tb.rx_ns()),
        ] {
            body.entry(k).or_insert(json!(v));
        }
    }
    let req: CalibrateRequest = serde_path_to_error::deserialize(Value::Object(body))
        .map_err(|e| err(StatusCode::BAD_REQUEST, format!("{e}")))?;
    let spec = req.spec().map_err(|e| engine_error(StatusCode::BAD_REQUEST, &e))?;
    let done = hold_and_calibrate(&s, spec).await?.map_err(|e| {
        // A bad setting is the request's fault; a calibration that could not be made is not.
        let status = match e {
            EngineError::OutOfRange { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        engine_error(status, &e)
    })?;
    let c = serde_json::to_value(&done.calibration).map_err(internal)?;
    let id = lock(&s.db).insert_calibration(&c).map_err(internal)?;
    let dir = s.reports.join("calibrations");
    std::fs::create_dir_all(&dir).map_err(internal)?;
    gapless_engine::report::write_json_atomic(&dir.join(format!("calibration-{id}.json")), &done.calibration)
        .map_err(internal)?;
    let text = gapless_engine::report::calibration_text(&done.calibration);
    Ok(Json(json!({ "id": id, "calibration": c, "summary": text })))
}
