//! `/api/runs`: start (a saved profile or the form's TOML, on interfaces or the testbed),
//! list, get, stop, live events over SSE, and the report files.
//!
//! A run's options are the engine's [`RunRequest`] (the CLI's flags without dashes), with
//! two refusals: no `out` (the server writes only into its report directory) and no
//! `calibration` path (a stored calibration is named by its id).

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::Response;
use axum::Json;
use futures_util::stream::{self, Stream, StreamExt};
use gapless_engine::request::RunRequest;
use gapless_engine::{EngineError, ProfileSource};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::jobs::{lock, JobEvent, JobId};
use crate::reply::{engine_error, err, internal, json_body, started_reply, ApiError};
use crate::runs::NewRun;
use crate::Shared;

/// `POST /api/runs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// A saved profile's name; with `toml`, only the name the run is recorded under.
    profile: Option<String>,
    /// The profile's text (the form's state, saved or not).
    toml: Option<String>,
    /// Send from this testbed's sender and meter on its receiver (brought up if down).
    testbed: Option<String>,
    /// A stored calibration's id: its offset is taken off the latencies.
    calibration: Option<i64>,
    /// The run's options (`RunRequest`'s keys).
    #[serde(default)]
    options: serde_json::Map<String, Value>,
}

pub async fn start(State(s): State<Shared>, body: axum::body::Bytes) -> Result<Response, ApiError> {
    let body: StartBody = json_body(&body)?;
    // Checking the profile, bringing a testbed up and opening the sockets (a 100 ms core
    // probe) block: off the async workers.
    let started = tokio::task::spawn_blocking(move || {
        let new = new_run(&s, body)?;
        Ok::<_, ApiError>(crate::runs::start(&s.jobs, &s.db, &s.reports, new))
    })
    .await
    .map_err(internal)??;
    started_reply(started.map(JobId::Run))
}

/// The profile, the request and the target, checked: everything but starting.
fn new_run(s: &Shared, body: StartBody) -> Result<NewRun, ApiError> {
    let (name, toml) = profile_text(s, body.profile, body.toml)?;
    let spec = gapless_core::ProfileSpec::from_toml(&toml, &name)
        .map_err(|e| engine_error(StatusCode::UNPROCESSABLE_ENTITY, &EngineError::Profile(e)))?;
    crate::profiles::no_files(&spec)?;
    let mut options = body.options;
    for (key, why) in [
        (
            "out",
            "the server writes files only into its report directory; send to an interface, the testbed or null",
        ),
        (
            "calibration",
            "name a stored calibration by its id: {\"calibration\": ID} beside \"options\"",
        ),
    ] {
        if options.contains_key(key) {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("option {key:?} is not taken here: {why}"),
            ));
        }
    }
    if let Some(id) = body.calibration {
        let path = crate::calibrations::path(s, id)?;
        options.insert("calibration".into(), json!(path));
    }
    if let Some(tb) = &body.testbed {
        testbed_options(tb, &mut options)?;
    }
    let target = Value::Object(options.clone());
    let req: RunRequest = serde_path_to_error::deserialize(Value::Object(options))
        .map_err(|e| err(StatusCode::BAD_REQUEST, format!("options.{e}")))?;
    let src = ProfileSource {
        spec,
        dir: s.reports.clone(),
        label: name.clone(),
    };
    let spec = req.spec(src).map_err(|e| engine_error(StatusCode::BAD_REQUEST, &e))?;
    Ok(NewRun {
        profile: name,
        toml,
        target,
        spec,
    })
}

/// The run's profile: the body's text, or the saved one.
fn profile_text(s: &Shared, name: Option<String>, toml: Option<String>) -> Result<(String, String), ApiError> {
    match (name, toml) {
        (name, Some(t)) => Ok((name.unwrap_or_else(|| "unsaved".into()), t)),
        (Some(n), None) => {
            let row = lock(&s.db).profile(&n).map_err(internal)?;
            row.map(|r| (n.clone(), r.toml))
                .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no profile named {n:?}")))
        }
        (None, None) => Err(err(
            StatusCode::BAD_REQUEST,
            "give \"profile\" (a saved profile's name) or \"toml\" (a profile's text)",
        )),
    }
}

/// The testbed's two ends as the run's interfaces; the testbed is brought up if it is down.
fn testbed_options(name: &str, options: &mut serde_json::Map<String, Value>) -> Result<(), ApiError> {
    let tb = gapless_io::testbed::Testbed::new(name).map_err(|m| err(StatusCode::BAD_REQUEST, m))?;
    for key in ["iface", "netns", "rx", "rx_netns", "null"] {
        if options.contains_key(key) {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("option {key:?} and \"testbed\" both say where to send: give one"),
            ));
        }
    }
    if !tb.is_up() {
        tb.up().map_err(|e| {
            err(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("bringing the testbed {name} up: {e}"),
            )
        })?;
    }
    options.insert("iface".into(), json!(tb.tx_if()));
    options.insert("netns".into(), json!(tb.tx_ns()));
    options.insert("rx".into(), json!(tb.rx_if()));
    options.insert("rx_netns".into(), json!(tb.rx_ns()));
    Ok(())
}

/// Each run without its result document, and a few figures from it.
pub async fn list(State(s): State<Shared>) -> Result<Json<Value>, ApiError> {
    let rows = lock(&s.db).runs().map_err(internal)?;
    let runs: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            let brief = r.result.as_ref().map(brief);
            let mut v = json!(r);
            v["result"] = Value::Null;
            v["brief"] = json!(brief);
            v
        })
        .collect();
    Ok(Json(json!({ "runs": runs })))
}

/// The figures a history table shows.
fn brief(result: &Value) -> Value {
    let streams = result["rx"]["streams"].as_array();
    let sum = |key: &str| streams.map(|v| v.iter().filter_map(|s| s[key].as_i64()).sum::<i64>());
    json!({
        "sent": result["sent_frames"],
        "pps": result["achieved_pps"],
        "received": sum("rx_frames"),
        "lost": sum("lost_vs_tx"),
        "schedule": result["verdict"]["schedule"],
        "checkpoint": result.get("checkpoint").is_some(),
    })
}

fn run_id(id: &str) -> Result<i64, ApiError> {
    id.parse()
        .map_err(|_| err(StatusCode::BAD_REQUEST, format!("run id {id:?} is not a number")))
}

/// One run with its result, the summary text and its report files.
pub async fn get(State(s): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id = run_id(&id)?;
    let row = lock(&s.db)
        .run(id)
        .map_err(internal)?
        .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no run {id}")))?;
    let parsed = row
        .result
        .as_ref()
        .and_then(|r| serde_json::from_value::<gapless_core::result::RunResult>(r.clone()).ok());
    let summary = parsed.as_ref().map(crate::profiles::summary);
    let files = crate::files::list(&JobId::Run(id).dir(&s.reports));
    let mut v = json!(row);
    v["summary"] = json!(summary);
    v["files"] = json!(files);
    v["histograms"] = parsed.map_or(Value::Null, |r| histograms(&r));
    Ok(Json(v))
}

/// Each received stream's latency and inter-arrival histograms decoded into buckets
/// (lowest ns, highest ns, count), for the report's plots: the result keeps them compressed.
fn histograms(r: &gapless_core::result::RunResult) -> Value {
    let Some(rx) = &r.rx else { return Value::Null };
    let per: serde_json::Map<String, Value> = rx
        .streams
        .iter()
        .filter_map(|s| {
            let h = gapless_engine::report::plots::histograms(s).ok()?;
            Some((s.name.clone(), json!(h)))
        })
        .collect();
    Value::Object(per)
}

pub async fn stop(State(s): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    stop_job(&s, JobId::Run(run_id(&id)?))
}

pub fn stop_job(s: &Shared, job: JobId) -> Result<Json<Value>, ApiError> {
    if s.jobs.stop(job) {
        Ok(Json(json!({ "stopping": job.to_string() })))
    } else {
        Err(err(StatusCode::CONFLICT, format!("{job} is not going on")))
    }
}

pub async fn delete(State(s): State<Shared>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let id = run_id(&id)?;
    if !lock(&s.db).delete_run(id).map_err(internal)? {
        return Err(err(StatusCode::NOT_FOUND, format!("no ended run {id}")));
    }
    let _ = std::fs::remove_dir_all(JobId::Run(id).dir(&s.reports));
    Ok(StatusCode::NO_CONTENT)
}

/// A report file of a run: only names its report directory lists.
pub async fn file(State(s): State<Shared>, Path((id, name)): Path<(String, String)>) -> Result<Response, ApiError> {
    let id = run_id(&id)?;
    crate::files::serve(&JobId::Run(id).dir(&s.reports), &name)
}

/// `GET /api/runs/{id}/events`: `snapshot` events while the run goes on (the last one
/// first), then one `end` event; a run that has ended sends its `end` at once.
pub async fn events(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let id = run_id(&id)?;
    let row = lock(&s.db).run(id).map_err(internal)?;
    let ended = row
        .map(|r| json!({ "status": r.status, "error": r.error }))
        .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no run {id}")));
    job_events(&s, JobId::Run(id), ended)
}

/// A job's event stream: its last event, then the rest until `end`; for a job that is not
/// going on, `ended` is its end event (from the database) or the 404.
pub fn job_events(
    s: &Shared,
    job: JobId,
    ended: Result<Value, ApiError>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    // Held while the stream is open: a bounded number of streams.
    let place = s.limits.event_stream()?;
    let (first, rx) = match s.jobs.subscribe(job) {
        // It ended after it was looked up: its end event is the last one.
        Some((Some(last), _)) if last.kind == "end" => (Some(last), None),
        Some((last, rx)) => (last, Some(rx)),
        None => (Some(JobEvent::new("end", ended?)), None),
    };
    let head = stream::iter(first.map(event));
    let tail = stream::unfold((rx, place), |(rx, place)| async move {
        let mut rx = rx?;
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    let done = ev.kind == "end";
                    return Some((event(ev), ((!done).then_some(rx), place)));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    });
    Ok(Sse::new(head.chain(tail)).keep_alive(KeepAlive::default()))
}

/// An SSE event from the job's event, serialized once for every subscriber.
fn event(ev: JobEvent) -> Result<Event, Infallible> {
    Ok(Event::default().event(ev.kind).data(&*ev.text))
}
