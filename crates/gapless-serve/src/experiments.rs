//! `/api/experiments`: RFC 2544 searches, load sweeps and repeats from the dashboard. An
//! experiment is its TOML file's text with the profile inline (the server reads no files);
//! it runs as a job on its TX and RX ports, publishes each trial as it is judged, checkpoints
//! the trials so far, and at the end stores its result file and writes its report (the
//! trials CSV and plots) beside the runs'.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use gapless_core::experiment::spec::{ExperimentSpec, ProfileRef};
use gapless_engine::Experiment;
use serde_json::{json, Value};

use crate::cluster::experiment::Agents;
use crate::db::{Db, Jobs as Table};
use crate::jobs::{iface_key, lock, JobId, Publisher, StartError};
use crate::reply::engine_error;
use crate::reply::started_reply;
use crate::reply::{err, internal, ApiError};
use crate::runs_api::{job_events, stop_job};
use crate::Shared;

fn dir(s: &Shared, id: i64) -> PathBuf {
    JobId::Experiment(id).dir(&s.reports)
}

fn exp_id(id: &str) -> Result<i64, ApiError> {
    id.parse()
        .map_err(|_| err(StatusCode::BAD_REQUEST, format!("experiment id {id:?} is not a number")))
}

/// Reads and checks an experiment's text; refuses what would read files.
fn read(text: &str) -> Result<ExperimentSpec, ApiError> {
    let unprocessable = |m: String| ApiError(StatusCode::UNPROCESSABLE_ENTITY, json!({ "error": m }));
    let spec = ExperimentSpec::from_toml(text, "experiment").map_err(unprocessable)?;
    match &spec.profile {
        ProfileRef::Path(p) => {
            return Err(unprocessable(format!(
                "experiment: profile = {p:?} names a file; the server reads none. Fix: give the profile inline, as a [profile] table"
            )))
        }
        ProfileRef::Inline(p) => crate::profiles::no_files(p)?,
    }
    if spec.calibration.is_some() {
        return Err(unprocessable(
            "experiment: calibration names a file; the server reads none. Fix: leave it out (calibrated experiments run from the CLI)".into(),
        ));
    }
    Ok(spec)
}

/// `POST /api/experiments` with the experiment's TOML: 201 `{id}`, 409 when a port is busy.
pub async fn start(State(s): State<Shared>, body: Bytes) -> Result<Response, ApiError> {
    let text = std::str::from_utf8(&body)
        .map_err(|_| err(StatusCode::BAD_REQUEST, "the experiment is not UTF-8 text"))?
        .to_string();
    let spec = read(&text)?;
    let name = spec.name.clone().unwrap_or_else(|| "experiment".into());
    // A port on an agent is another host's interface: it is that agent's to hold.
    let ifaces = spec
        .port_list()
        .iter()
        .map(|p| match &p.agent {
            Some(a) => format!("{a}/{}", iface_key(p.netns.as_deref(), &p.iface)),
            None => iface_key(p.netns.as_deref(), &p.iface),
        })
        .collect();
    let x = Experiment::new(spec, &s.reports, name.clone())
        .map_err(|e| engine_error(StatusCode::UNPROCESSABLE_ENTITY, &e))?;
    let agents = match x.spec.on_agents() {
        true => Some(agents_of(&s, x.clone()).await?),
        false => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (db, s2, flag, reports) = (s.db.clone(), s.clone(), stop.clone(), s.reports.clone());
    let started = tokio::task::spawn_blocking(move || {
        s2.jobs.start(ifaces, stop, move || {
            let id = lock(&db).insert_experiment(&name, &text).map_err(StartError::Db)?;
            let out = JobId::Experiment(id).dir(&reports);
            let body = move |p: Publisher| drive(&x, agents, id, &db, out, flag, &p);
            Ok((JobId::Experiment(id), Box::new(body)))
        })
    })
    .await
    .map_err(internal)?;
    started_reply(started)
}

/// The agents of an experiment whose ports are on them, connected with this server's agent
/// token; 422 naming what is missing or the agent that refused.
async fn agents_of(s: &Shared, x: Experiment) -> Result<Agents, ApiError> {
    let token = s.agent_token.clone().ok_or_else(|| {
        err(
            StatusCode::UNPROCESSABLE_ENTITY,
            "ports: they are on agents and this server has no agent token. Fix: start it with --agent-token-file F, F holding the agents' token",
        )
    })?;
    tokio::task::spawn_blocking(move || crate::cluster::experiment::connect(&x, &token))
        .await
        .map_err(internal)?
        .map_err(|e| err(StatusCode::UNPROCESSABLE_ENTITY, e))
}

/// The experiment's thread: every trial published and checkpointed, then the result.
fn drive(
    x: &Experiment,
    agents: Option<Agents>,
    id: i64,
    db: &Mutex<Db>,
    out: PathBuf,
    stop: Arc<AtomicBool>,
    p: &Publisher,
) {
    let mut trials: Vec<Value> = Vec::new();
    let mut heard = |t: &gapless_core::experiment::TrialRecord| {
        let v = serde_json::to_value(t).unwrap_or(Value::Null);
        trials.push(v.clone());
        p.send(("trial", v));
        let _ = lock(db).checkpoint(Table::Experiments, id, &json!({ "trials": trials }));
    };
    let file = match agents {
        Some(a) => crate::cluster::experiment::run(x, a, stop, &mut heard),
        None => x.run(stop, &mut heard),
    };
    let r = &file.result;
    let status = match (&r.error, r.stopped) {
        (Some(_), _) => "failed",
        (None, true) => "stopped",
        _ => "finished",
    };
    let written = std::fs::create_dir_all(&out)
        .map_err(anyhow::Error::from)
        .and_then(|_| {
            gapless_engine::report::write_json_atomic(&out.join("experiment.json"), &file).map_err(Into::into)
        })
        .and_then(|_| gapless_engine::report::experiment::write_all(r, &out));
    let error = match (&r.error, written) {
        (Some(e), _) => Some(e.clone()),
        (None, Err(e)) => Some(format!("the report files were not written: {e:#}")),
        _ => None,
    };
    let doc = serde_json::to_value(&file).unwrap_or(Value::Null);
    let _ = lock(db).end(Table::Experiments, id, status, Some(&doc), error.as_deref());
    p.send(("end", json!({ "status": status, "error": error })));
}

pub async fn list(State(s): State<Shared>) -> Result<Json<Value>, ApiError> {
    let rows = lock(&s.db).experiments().map_err(internal)?;
    let list: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            let trials = r.result.as_ref().map_or(0, |v| {
                v["trials"]
                    .as_array()
                    .or(v["checkpoint"]["trials"].as_array())
                    .map_or(0, Vec::len)
            });
            json!({ "id": r.id, "name": r.name, "status": r.status, "started_ns": r.started_ns,
                    "ended_ns": r.ended_ns, "error": r.error, "trials": trials })
        })
        .collect();
    Ok(Json(json!({ "experiments": list })))
}

/// One experiment: its text, result file, the summary the CLI prints, and its files.
pub async fn get(State(s): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id = exp_id(&id)?;
    let row = lock(&s.db)
        .experiment(id)
        .map_err(internal)?
        .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no experiment {id}")))?;
    let summary = row
        .result
        .as_ref()
        .and_then(|v| serde_json::from_value::<gapless_core::experiment::ExperimentResult>(v.clone()).ok())
        .map(|r| gapless_engine::report::experiment::summary_text(&r, None));
    let mut v = json!(row);
    v["summary"] = json!(summary);
    v["files"] = json!(crate::files::list(&dir(&s, id)));
    Ok(Json(v))
}

pub async fn stop(State(s): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    stop_job(&s, JobId::Experiment(exp_id(&id)?))
}

/// `trial` events as each is judged, then `end`.
pub async fn events(State(s): State<Shared>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = exp_id(&id)?;
    let row = lock(&s.db).experiment(id).map_err(internal)?;
    let ended = row
        .map(|r| json!({ "status": r.status, "error": r.error }))
        .ok_or_else(|| err(StatusCode::NOT_FOUND, format!("no experiment {id}")));
    Ok(job_events(&s, JobId::Experiment(id), ended)?.into_response())
}

pub async fn file(State(s): State<Shared>, Path((id, name)): Path<(String, String)>) -> Result<Response, ApiError> {
    crate::files::serve(&dir(&s, exp_id(&id)?), &name)
}
