//! The Open Traffic Generator API, the subset a normal snappi script uses, on its own
//! listener (`--otg-listen`, paths at the root as snappi expects):
//!
//! - `GET /capabilities/version`: `api_spec_version` is a semver range (`^1.58.0`), which
//!   snappi matches its own version against;
//! - `POST /config` / `GET /config`: the config is read into one gapless profile per TX
//!   port ([`config`]), with the schema's defaults for what snappi left out;
//! - `POST /control/state`: traffic start and stop start and stop those runs through the
//!   same run table as the dashboard (a busy interface is a 409); port and protocol actions
//!   are no-ops with a warning;
//! - `POST /monitor/metrics`: port and flow metrics ([`metrics`]), with gapless's own figures
//!   under `x_gapless`.
//!
//! Successes are JSON with a `warnings` list; errors are `{code, kind, errors}`.

pub mod config;
mod metrics;
mod patterns;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use gapless_engine::request::RunRequest;
use gapless_engine::ProfileSource;
use serde_json::{json, Value};

use crate::jobs::{JobId, StartError};
use crate::runs::NewRun;
use crate::Shared;

/// The OTG model version range this server speaks.
pub const API_SPEC_VERSION: &str = "^1.58.0";

/// The config set last, and the runs its traffic started.
#[derive(Default)]
pub struct OtgState {
    pub raw: Option<Value>,
    pub plan: Option<config::Plan>,
    /// For each flow: the run that sends it and its stream index there.
    pub runs: Vec<(String, i64, usize)>,
}

/// An OTG error reply.
pub struct OtgError(StatusCode, &'static str, Vec<String>);

impl IntoResponse for OtgError {
    fn into_response(self) -> Response {
        let body = json!({ "code": self.0.as_u16(), "kind": self.1, "errors": self.2 });
        (self.0, Json(body)).into_response()
    }
}

fn invalid(msg: impl Into<String>) -> OtgError {
    OtgError(StatusCode::BAD_REQUEST, "validation", vec![msg.into()])
}

fn internal(msg: impl std::fmt::Display) -> OtgError {
    OtgError(StatusCode::INTERNAL_SERVER_ERROR, "internal", vec![msg.to_string()])
}

fn ok(warnings: Vec<String>) -> Json<Value> {
    Json(json!({ "warnings": warnings }))
}

pub fn router(state: Shared, guard: crate::guard::Guard) -> Router {
    Router::new()
        .route("/capabilities/version", get(version))
        .route("/config", get(get_config).post(set_config))
        .route("/control/state", post(control))
        .route("/monitor/metrics", post(metrics::handler))
        .fallback(|uri: axum::http::Uri| async move {
            OtgError(
                StatusCode::NOT_FOUND,
                "validation",
                vec![format!("{} is not part of the OTG subset gapless serves", uri.path())],
            )
        })
        .layer(DefaultBodyLimit::max(crate::api::BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(guard, crate::guard::check))
        .layer(axum::middleware::from_fn_with_state(
            state.limits.clone(),
            crate::limits::check,
        ))
        .with_state(state)
}

pub(crate) fn otg(s: &Shared) -> std::sync::MutexGuard<'_, OtgState> {
    s.otg.lock().unwrap_or_else(|e| e.into_inner())
}

/// A JSON body, or a validation error that says what is wrong.
fn body(b: &[u8]) -> Result<Value, OtgError> {
    serde_json::from_slice(b).map_err(|e| invalid(format!("malformed JSON: {e}")))
}

async fn version() -> Json<Value> {
    Json(json!({
        "api_spec_version": API_SPEC_VERSION,
        "sdk_version": "",
        "app_version": gapless_engine::VERSION,
        "warnings": [],
    }))
}

async fn get_config(State(s): State<Shared>) -> Json<Value> {
    Json(otg(&s).raw.clone().unwrap_or_else(|| json!({})))
}

/// Reads and checks a config (every profile compiled) without starting anything. A config
/// cannot be replaced while its traffic runs.
async fn set_config(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, OtgError> {
    let cfg = body(&b)?;
    let plan = config::plan(&cfg).map_err(|e| invalid(e.0))?;
    for g in &plan.groups {
        source(g)?
            .compile(None)
            .map_err(|e| invalid(format!("port {}: {e}", g.tx.name)))?;
    }
    let mut st = otg(&s);
    if running(&s, &st) {
        return Err(OtgError(
            StatusCode::CONFLICT,
            "validation",
            vec!["traffic is running: stop it before setting a new config".into()],
        ));
    }
    *st = OtgState {
        raw: Some(cfg),
        plan: Some(plan),
        runs: Vec::new(),
    };
    Ok(ok(Vec::new()))
}

fn source(g: &config::Group) -> Result<ProfileSource, OtgError> {
    let spec: gapless_core::ProfileSpec = serde_path_to_error::deserialize(g.profile.clone()).map_err(|e| {
        internal(format!(
            "port {}: the profile made from the config does not parse: {e}",
            g.tx.name
        ))
    })?;
    Ok(ProfileSource {
        spec,
        dir: std::path::PathBuf::new(),
        label: format!("otg:{}", g.tx.name),
    })
}

fn running(s: &Shared, st: &OtgState) -> bool {
    let active: Vec<JobId> = s.jobs.running().into_iter().map(|r| r.0).collect();
    st.runs.iter().any(|(_, id, _)| active.contains(&JobId::Run(*id)))
}

/// `POST /control/state`: traffic start/stop/pause/resume; port and protocol choices are
/// no-ops with a warning.
async fn control(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, OtgError> {
    let req = body(&b)?;
    let choice = req["choice"].as_str().unwrap_or_default();
    if choice != "traffic" {
        return Ok(ok(vec![format!(
            "control {choice:?} does nothing in gapless: it has no emulated protocols, links or captures"
        )]));
    }
    let t = &req["traffic"];
    if t["choice"].as_str().unwrap_or("flow_transmit") != "flow_transmit" {
        return Err(invalid("traffic.choice: only flow_transmit is supported"));
    }
    let ft = &t["flow_transmit"];
    let names: Vec<String> = ft["flow_names"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    match ft["state"].as_str().unwrap_or_default() {
        "start" => tokio::task::spawn_blocking(move || start(&s, &names))
            .await
            .map_err(internal)?,
        "stop" => {
            let st = otg(&s);
            for (name, id, _) in &st.runs {
                if names.is_empty() || names.contains(name) {
                    s.jobs.stop(JobId::Run(*id));
                }
            }
            Ok(ok(Vec::new()))
        }
        other => Err(invalid(format!(
            "traffic.flow_transmit.state: {other:?} is not supported (start or stop)"
        ))),
    }
}

/// Starts the flows named (all when none are) as one run per TX port.
fn start(s: &Shared, names: &[String]) -> Result<Json<Value>, OtgError> {
    let plan = otg(s).plan.clone().ok_or_else(|| invalid("no config: set one first"))?;
    for n in names {
        if !plan.flows.iter().any(|f| &f.0 == n) {
            return Err(invalid(format!("flow_names: no flow named {n:?}")));
        }
    }
    let mut started = Vec::new();
    for g in &plan.groups {
        let group = subset(g, names);
        let Some(group) = group else { continue };
        match start_group(s, &group) {
            Ok(id) => started.extend(group.flows.iter().enumerate().map(|(i, f)| (f.clone(), id, i))),
            Err(e) => {
                for (_, id, _) in &started {
                    s.jobs.stop(JobId::Run(*id));
                }
                return Err(e);
            }
        }
    }
    let mut st = otg(s);
    st.runs.retain(|(f, _, _)| !started.iter().any(|n| &n.0 == f));
    st.runs.extend(started);
    Ok(ok(Vec::new()))
}

/// The group with only the flows named (None if none of its flows are).
fn subset(g: &config::Group, names: &[String]) -> Option<config::Group> {
    if names.is_empty() {
        return Some(g.clone());
    }
    let keep: Vec<usize> = (0..g.flows.len()).filter(|i| names.contains(&g.flows[*i])).collect();
    if keep.is_empty() {
        return None;
    }
    let mut out = g.clone();
    out.flows = keep.iter().map(|i| g.flows[*i].clone()).collect();
    let streams = g.profile["stream"].as_array().cloned().unwrap_or_default();
    out.profile["stream"] = json!(keep.iter().map(|i| streams[*i].clone()).collect::<Vec<_>>());
    Some(out)
}

fn start_group(s: &Shared, g: &config::Group) -> Result<i64, OtgError> {
    let src = source(g)?;
    let toml = toml::to_string(&src.spec).unwrap_or_default();
    let mut req = RunRequest {
        iface: Some(g.tx.iface.clone()),
        netns: g.tx.netns.clone(),
        ..RunRequest::default()
    };
    if let Some(rx) = &g.rx {
        req.rx = Some(rx.iface.clone());
        req.rx_netns = rx.netns.clone();
    }
    let target = json!({ "otg_port": g.tx.name, "iface": req.iface, "netns": req.netns, "rx": req.rx, "rx_netns": req.rx_netns });
    let spec = req.spec(src).map_err(|e| invalid(format!("port {}: {e}", g.tx.name)))?;
    let new = NewRun {
        profile: format!("otg:{}", g.tx.name),
        toml,
        target,
        spec,
    };
    crate::runs::start(&s.jobs, &s.db, &s.reports, new).map_err(|e| match e {
        StartError::Busy { iface, holder } => OtgError(
            StatusCode::CONFLICT,
            "validation",
            vec![format!("port {}: {iface} is busy with {holder}", g.tx.name)],
        ),
        StartError::Engine(e) => invalid(format!("port {}: {e}", g.tx.name)),
        StartError::Db(e) => internal(e),
    })
}
