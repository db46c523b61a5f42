//! The Open Traffic Generator API over HTTP, the subset a normal snappi script uses, on its
//! own listener (`--otg-listen`, paths at the root as snappi expects). What a request means
//! is in the `gapless-otg` crate; this module is the transport and the server's state:
//!
//! - every request body is read through `otg.proto`'s message for it, as gRPC's are
//!   ([`crate::model::through_model`]): an unknown key, a wrong type, an enum value or an
//!   integer outside the model is a 400 naming its path before anything acts;
//! - `GET /capabilities/version`: `api_spec_version` is the models release pinned
//!   (`1.62.0`), which snappi matches its own version against;
//! - `POST /config` / `GET /config`: the config is read into one gapless profile per TX
//!   port, with the schema's defaults for what snappi left out;
//! - `POST /control/state`: traffic start and stop start and stop those runs through the
//!   same run table as the dashboard (a busy interface is a 409); port and protocol actions
//!   are no-ops with a warning;
//! - `POST /monitor/metrics`: port and flow metrics ([`metrics`]), with gapless's own figures
//!   under `x_gapless`.
//!
//! Successes are JSON with a `warnings` list; errors are `{code, kind, errors}`.

mod chunks;
mod daemons;
pub(crate) mod devices;
mod isis;
mod lag;
mod lldp;
mod ospf;
mod routing;
pub(crate) use devices::states;
pub(crate) mod metrics;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::Arc;

use gapless_core::packet::sizes::FCS_LEN;
use gapless_core::packet::variant::Variant;
use gapless_engine::capture::{Capture, CaptureFormat};
use gapless_otg::config::captures::{self, CaptureCfg};
use gapless_otg::config::update::FlowChange;
use gapless_otg::config::{self, Plan};
use gapless_otg::runs::requests::{self, Control};
use gapless_otg::{runs, OtgError};
use serde_json::{json, Value};

use crate::jobs::{JobId, StartError};
pub use crate::reply::{blocking, Reply};
use crate::runs::NewRun;
use crate::Shared;

/// The config set last, and the runs its traffic started.
#[derive(Default)]
pub struct OtgState {
    pub raw: Option<Value>,
    pub plan: Option<Plan>,
    /// For each flow: the run that sends it and its stream index there.
    pub runs: Vec<(String, i64, usize)>,
    /// Each run's handle that pauses, resumes and changes its streams.
    pub pausers: Vec<RunCtl>,
    /// The config's captures, one per captured port, each with its buffer.
    pub captures: Vec<PortCapture>,
    /// The config's devices, up as hosts on their ports: (device Ethernet name, host).
    pub hosts: Vec<(String, Arc<gapless_io::devices::hosts::Host>)>,
    /// The devices' BGP routers, each a bgpd in its host's namespace.
    pub routers: Vec<Arc<routing::Bgpd>>,
    /// The devices' IS-IS routers, each a zebra and isisd in its host's namespace.
    pub isis: Vec<Arc<isis::Isisd>>,
    /// The devices' OSPFv2 routers, each a zebra and ospfd in its host's namespace.
    pub ospf: Vec<Arc<ospf::Ospfd>>,
    /// The LLDP agents, a thread each on its port.
    pub lldp: Vec<Arc<lldp::LldpAgent>>,
    /// The LAGs, a thread each over its members.
    pub lags: Vec<Arc<lag::LagDriver>>,
    /// A config whose ports are on agents: the agents, and its run ([`crate::cluster`]).
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    /// The link events `control/state` made (for convergence metrics), and the ports set down.
    pub made: Vec<gapless_otg::metrics::convergence::Recorded>,
    pub links_down: Vec<String>,
    /// A `set_config` is bringing this config's devices and daemons up (outside the lock):
    /// another `set_config` or a control request is a 409 until it answers.
    pub configuring: bool,
}

/// A config's devices go with it: removed when the state is replaced or the server ends,
/// even while another thread (the resolver, a start) still holds one.
impl Drop for OtgState {
    fn drop(&mut self) {
        // The daemons first: a process in a namespace keeps it alive.
        for r in &self.routers {
            r.stop();
        }
        for r in &self.isis {
            r.stop();
        }
        for r in &self.ospf {
            r.remove();
        }
        for a in &self.lldp {
            a.stop();
        }
        for (_, h) in &self.hosts {
            h.remove();
        }
        // Then the LAGs' interfaces the hosts sat on.
        for l in &self.lags {
            l.remove();
        }
    }
}

/// A run's controls: its id, the handle that pauses, resumes and changes its streams, the
/// largest frame (without FCS) its buffers were made for, and its ports.
pub struct RunCtl {
    pub id: i64,
    pub pauser: gapless_engine::Pauser,
    pub room: usize,
    /// The ports it sends from.
    pub tx: Vec<String>,
    /// The ports its meter reads, in the meter's order.
    pub rx: Vec<String>,
}

/// One flow's change for a running loop: a rate factor and/or new variants.
type LiveChange = (gapless_engine::Pauser, usize, Option<f64>, Option<Vec<Variant>>);

/// A captured port: what the config asks, and the buffer its meter fills.
pub struct PortCapture {
    pub cfg: CaptureCfg,
    pub buf: Arc<Capture>,
}

type OtgResult = Result<Json<Value>, Reply>;

/// A request body read through `otg.proto`'s message `name` ([`crate::model::through_model`]).
pub(crate) fn body(name: &str, b: &Bytes) -> Result<Value, OtgError> {
    crate::model::through_model(name, requests::body(b)?)
}

/// The OTG API's routes; [`crate::otg_app`] adds the agent API's and the guard.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/capabilities/version", get(|| async { Json(requests::version()) }))
        .route("/config", get(get_config).post(set_config).patch(update_config))
        .route("/control/state", post(control))
        .route("/monitor/metrics", post(metrics::handler))
        .route("/monitor/capture", post(capture))
        .route("/monitor/states", post(devices::states_handler))
}

pub(crate) fn otg(s: &Shared) -> std::sync::MutexGuard<'_, OtgState> {
    s.otg.lock().unwrap_or_else(|e| e.into_inner())
}

/// The plan of the config set last, or the error that says to set one.
fn plan_of(s: &Shared) -> Result<Plan, OtgError> {
    let st = otg(s);
    match (&st.plan, st.configuring) {
        (Some(p), _) => Ok(p.clone()),
        (None, true) => Err(being_set()),
        (None, false) => Err(OtgError::invalid("no config: set one first")),
    }
}

async fn get_config(State(s): State<Shared>) -> Json<Value> {
    Json(config_now(&s))
}

/// The config set last (`{}` before any).
pub(crate) fn config_now(s: &Shared) -> Value {
    otg(s).raw.clone().unwrap_or_else(|| json!({}))
}

async fn set_config(State(s): State<Shared>, b: Bytes) -> OtgResult {
    Ok(Json(set_config_to(s, body("Config", &b)?).await?))
}

async fn update_config(State(s): State<Shared>, b: Bytes) -> OtgResult {
    Ok(Json(update_config_to(s, body("ConfigUpdate", &b)?).await?))
}

/// `update_config`: flows' rates and sizes changed in the config set last. A running flow
/// takes them at its next departure; the update is refused, and nothing changes, when a
/// running flow's rate unit would change or its frames would outgrow its run's buffers.
pub(crate) async fn update_config_to(s: Shared, req: Value) -> Result<Value, OtgError> {
    blocking(move || update_config_now(&s, &req)).await
}

fn update_config_now(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    let mut st = otg(s);
    if st.configuring {
        return Err(being_set());
    }
    let raw = st
        .raw
        .as_ref()
        .ok_or_else(|| OtgError::invalid("no config: set one first"))?;
    if st.cluster.as_ref().is_some_and(|c| c.running()) {
        return Err(OtgError::conflict(
            "a run across hosts is going on: its flows cannot change while it runs. Fix: stop its traffic, update, and start it again",
        ));
    }
    let u = gapless_otg::config::update::update(raw, req)?;
    let plan = planned(&u.config)?;
    runs::check(&plan)?;
    let active = active(s);
    let mut todo = Vec::new();
    for c in &u.changes {
        if let Some((ctl, i)) = sending(&st, &active, &c.name) {
            todo.push(live_change(&plan, c, ctl, i)?);
        }
    }
    for (p, i, k, variants) in todo {
        if let Some(v) = variants {
            p.replace_variants(i, &v);
        }
        if let Some(k) = k {
            p.scale_rate(i, k);
        }
    }
    st.raw = Some(u.config);
    st.plan = Some(plan);
    Ok(requests::ok(Vec::new()))
}

/// What flow change `c` asks of the running loop that sends it (stream `i` of run `ctl`),
/// or why it cannot take it.
fn live_change(plan: &Plan, c: &FlowChange, ctl: &RunCtl, i: usize) -> Result<LiveChange, OtgError> {
    let refuse = |why: &str| {
        OtgError::conflict(format!(
            "flow {:?} is being sent and {why}. Fix: stop its traffic, update, and start it again",
            c.name
        ))
    };
    let variants = match c.size {
        true => Some(live_variants(plan, &c.name, ctl.room).map_err(|w| refuse(&w))?),
        false => None,
    };
    let k = match &c.rate {
        Some(Ok(k)) if *k != 1.0 => Some(*k),
        Some(Err(why)) => return Err(refuse(why)),
        _ => None,
    };
    Ok((ctl.pauser.clone(), i, k, variants))
}

/// Flow `name` compiled from the updated `plan`: its variants, if every frame fits `room`
/// bytes (the largest frame its run's buffers were made for); else why not.
fn live_variants(plan: &Plan, name: &str, room: usize) -> Result<Vec<Variant>, String> {
    let (g, j) = plan
        .groups
        .iter()
        .find_map(|g| g.flows.iter().position(|f| f == name).map(|j| (g, j)))
        .ok_or_else(|| "it is in no port's plan".to_string())?;
    let profile = runs::compiled(g).map_err(|e| e.errors.join("; "))?;
    let v = profile.streams[j].variants.clone();
    match v.iter().map(|x| x.sizes.max() as usize).max() {
        Some(m) if m - FCS_LEN <= room => Ok(v),
        Some(m) => Err(format!(
            "its new frames ({m} B) are larger than the largest this run was started with ({} B)",
            room + FCS_LEN
        )),
        None => Err("it has no frames".into()),
    }
}

/// Reads and checks a config (every profile compiled) without starting anything, and brings
/// up its devices. A config cannot be replaced while its traffic runs.
pub(crate) async fn set_config_to(s: Shared, cfg: Value) -> Result<Value, OtgError> {
    blocking(move || set_config_now(&s, cfg)).await
}

/// A config read into its plan, each local port's speed read from its interface where
/// `layer1` gives none ([`config::with_port_speeds`]).
fn planned(cfg: &Value) -> Result<Plan, OtgError> {
    let mut plan = config::plan(cfg).map_err(OtgError::from)?;
    config::with_port_speeds(&mut plan, |p| {
        let iface = p.iface.clone();
        gapless_io::kernel::nic::in_netns(p.netns.as_deref(), move || gapless_io::kernel::nic::iface_info(&iface))
            .ok()
            .and_then(|i| i.speed_bps)
    });
    Ok(plan)
}

/// Sets `cfg`. The state lock is held only to take the old config out and to put the new
/// one in: the old devices and daemons go, and the new ones come up, outside it, so that
/// `GET /config` (the config being set), metrics and the dashboard answer meanwhile.
fn set_config_now(s: &Shared, cfg: Value) -> Result<Value, OtgError> {
    let plan = planned(&cfg)?;
    runs::check(&plan)?;
    if gapless_otg::runs::shares::spans_hosts(&plan) {
        return set_cluster_config(s, cfg, plan);
    }
    let captures = captures::captures(&cfg, &plan.ports)?
        .into_iter()
        .map(|c| PortCapture {
            buf: Capture::new(c.snaplen, gapless_engine::capture::DEFAULT_BYTES),
            cfg: c,
        })
        .collect();
    let old = {
        let mut st = otg(s);
        idle(s, &st)?;
        let old = std::mem::take(&mut *st);
        (st.configuring, st.raw) = (true, Some(cfg.clone()));
        old
    };
    // Declared before any lock below, so it runs after them on every exit.
    let mut unfinished = Undo(Some(|| *otg(s) = OtgState::default()));
    // The old config's hosts go first: the new ones may take their names.
    drop(old);
    let made = bring_up(&plan);
    let mut st = otg(s);
    let (hosts, routers, isis, ospf, lldp, lags) = match made {
        Ok(m) => m,
        Err(e) => {
            *st = OtgState::default();
            return Err(e);
        }
    };
    let warnings = plan.warnings.clone();
    *st = OtgState {
        raw: Some(cfg),
        plan: Some(plan),
        captures,
        hosts,
        routers,
        isis,
        ospf,
        lldp,
        lags,
        runs: Vec::new(),
        pausers: Vec::new(),
        cluster: None,
        made: Vec::new(),
        links_down: Vec::new(),
        configuring: false,
    };
    unfinished.disarm();
    Ok(requests::ok(warnings))
}

/// Runs its closure when dropped, unless disarmed. `set_config` holds one between taking the
/// old config out and putting the new one in: on every exit that does not disarm it (an error,
/// or a panic the server turns into a 500) the state goes back to no config, so `configuring`
/// never stays set and the next `set_config` is taken (issue 68).
struct Undo<F: FnMut()>(Option<F>);

impl<F: FnMut()> Undo<F> {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl<F: FnMut()> Drop for Undo<F> {
    fn drop(&mut self) {
        if let Some(f) = &mut self.0 {
            f();
        }
    }
}

/// A 409 while traffic runs or another `set_config` is bringing its config up.
fn idle(s: &Shared, st: &OtgState) -> Result<(), OtgError> {
    if running(s, st) {
        return Err(OtgError::conflict(
            "traffic is running: stop it before setting a new config",
        ));
    }
    if st.configuring {
        return Err(being_set());
    }
    Ok(())
}

fn being_set() -> OtgError {
    OtgError::conflict("a config is being set (its set_config has not answered yet): send this after it answers")
}

type Up = (
    Vec<(String, Arc<gapless_io::devices::hosts::Host>)>,
    Vec<Arc<routing::Bgpd>>,
    Vec<Arc<isis::Isisd>>,
    Vec<Arc<ospf::Ospfd>>,
    Vec<Arc<lldp::LldpAgent>>,
    Vec<Arc<lag::LagDriver>>,
);

/// `plan`'s LAGs (the interfaces devices on a LAG sit on), its devices as hosts, then their
/// routers and LLDP agents; on a failure, what came up goes again.
fn bring_up(plan: &Plan) -> Result<Up, OtgError> {
    let lags = lag::up(plan)?;
    let undo_lags = || lags.iter().for_each(|l| l.remove());
    let hosts = devices::up(plan, &lags).inspect_err(|_| undo_lags())?;
    test_fault("bring_up");
    devices::resolve_in_background(&hosts);
    let undo_hosts = || {
        hosts.iter().for_each(|h| h.1.remove());
        undo_lags();
    };
    let routers = routing::up(plan, &hosts).inspect_err(|_| undo_hosts())?;
    let isis = isis::up(plan, &hosts).inspect_err(|_| {
        routers.iter().for_each(|r| r.stop());
        undo_hosts();
    })?;
    let ospf = ospf::up(plan, &hosts).inspect_err(|_| {
        routers.iter().for_each(|r| r.stop());
        isis.iter().for_each(|r| r.stop());
        undo_hosts();
    })?;
    let lldp = lldp::up(plan).inspect_err(|_| {
        routers.iter().for_each(|r| r.stop());
        isis.iter().for_each(|r| r.stop());
        ospf.iter().for_each(|r| r.stop());
        undo_hosts();
    })?;
    Ok((hosts, routers, isis, ospf, lldp, lags))
}

/// A test-only fault: with `GAPLESS_TEST_FAULT=<point>` in the server's environment, the
/// first pass through `point` after start panics (python/tests/test_otg_hostile.py shows that
/// the next `set_config` is taken, and the devices up at the panic are gone). The
/// environment is read once at the first pass; no request can arm it.
fn test_fault(point: &str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static FIRED: AtomicBool = AtomicBool::new(false);
    static ARMED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("GAPLESS_TEST_FAULT").ok());
    if armed.as_deref() == Some(point) && !FIRED.swap(true, Ordering::Relaxed) {
        panic!("GAPLESS_TEST_FAULT={point}: the test-only fault fired");
    }
}

/// A config whose ports are on agents: every agent reached and verified, or the config is
/// refused naming the agent.
fn set_cluster_config(s: &Shared, cfg: Value, plan: Plan) -> Result<Value, OtgError> {
    idle(s, &otg(s))?;
    let cluster = crate::cluster::connect(s, &plan, &cfg)?;
    let mut st = otg(s);
    *st = OtgState::default();
    st.raw = Some(cfg);
    st.plan = Some(plan);
    st.cluster = Some(Arc::new(cluster));
    Ok(requests::ok(Vec::new()))
}

fn running(s: &Shared, st: &OtgState) -> bool {
    let active = active(s);
    let cluster = st.cluster.as_ref().is_some_and(|c| c.running());
    cluster || st.runs.iter().any(|(_, id, _)| active.contains(&JobId::Run(*id)))
}

/// The jobs going on.
fn active(s: &Shared) -> Vec<JobId> {
    s.jobs.running().into_iter().map(|r| r.0).collect()
}

/// The controls of the run that is sending flow `name` (among the `active` jobs), and the
/// flow's stream index there; None if the flow is not being sent.
fn sending<'a>(st: &'a OtgState, active: &[JobId], name: &str) -> Option<(&'a RunCtl, usize)> {
    let (_, id, i) = st
        .runs
        .iter()
        .find(|(f, id, _)| f == name && active.contains(&JobId::Run(*id)))?;
    st.pausers.iter().find(|r| r.id == *id).map(|r| (r, *i))
}

/// `POST /control/state`: traffic start/stop; port and protocol choices are no-ops with a
/// warning.
async fn control(State(s): State<Shared>, b: Bytes) -> OtgResult {
    Ok(Json(control_with(s, body("ControlState", &b)?).await?))
}

/// A control request of either transport.
pub(crate) async fn control_with(s: Shared, req: Value) -> Result<Value, OtgError> {
    let (cluster, configuring) = {
        let st = otg(&s);
        (st.cluster.clone(), st.configuring)
    };
    if configuring {
        return Err(being_set());
    }
    if let Some(c) = cluster {
        return cluster_control(s, c, requests::control(&req)?).await;
    }
    match requests::control(&req)? {
        Control::NoOp(warning) => Ok(requests::ok(vec![warning])),
        Control::Protocols(true) => {
            devices::resolve_in_background(&otg(&s).hosts);
            let (routers, isis, ospf, lldp, lags) = {
                let st = otg(&s);
                (
                    st.routers.clone(),
                    st.isis.clone(),
                    st.ospf.clone(),
                    st.lldp.clone(),
                    st.lags.clone(),
                )
            };
            blocking(move || {
                routers.iter().try_for_each(|r| r.start())?;
                isis.iter().try_for_each(|r| r.start())?;
                ospf.iter().try_for_each(|r| r.start())?;
                lldp.iter().try_for_each(|a| a.start())?;
                lags.iter().try_for_each(|l| l.start())?;
                Ok(requests::ok(Vec::new()))
            })
            .await
        }
        Control::Protocols(false) => {
            let (routers, isis, ospf, lldp, lags) = {
                let st = otg(&s);
                (
                    st.routers.clone(),
                    st.isis.clone(),
                    st.ospf.clone(),
                    st.lldp.clone(),
                    st.lags.clone(),
                )
            };
            blocking(move || {
                routers.iter().for_each(|r| r.stop());
                isis.iter().for_each(|r| r.stop());
                ospf.iter().for_each(|r| r.stop());
                lldp.iter().for_each(|a| a.stop());
                lags.iter().for_each(|l| l.stop());
                Ok(requests::ok(Vec::new()))
            })
            .await
        }
        Control::IsisRouters(up, names) => blocking(move || isis::router_control(&s, up, &names)).await,
        Control::Lacp { admin, up, members } => lag::control(&s, admin, up, &members),
        Control::Routes(advertise, names) => blocking(move || routing::route_control(&s, advertise, &names)).await,
        Control::BgpPeers(up, names) => blocking(move || routing::peer_control(&s, up, &names)).await,
        Control::Link(up, ports) => blocking(move || link_control(&s, up, &ports)).await,
        Control::Capture(start, ports) => capture_control(&s, start, &ports),
        Control::Start(names) => blocking(move || start(&s, &names)).await,
        Control::Pause(names, on) => pause(&s, &names, on),
        Control::Stop(names) => blocking(move || stop(&s, &names)).await,
    }
}

/// How long a stop waits for its runs to end and publish their last counts.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Stops the runs sending the flows named (all when none are) and answers once each has
/// ended: its counts are final, `transmit` reads `stopped` and a `set_config` is taken. A
/// run is one send loop for every flow started with it, so naming some of its flows is
/// refused, naming the others (pause stops some and leaves the rest).
fn stop(s: &Shared, names: &[String]) -> Result<Value, OtgError> {
    let ids = {
        let st = otg(s);
        check_known(&st, names)?;
        let active = active(s);
        let named = |f: &String| names.is_empty() || names.contains(f);
        let ids: Vec<i64> = st
            .runs
            .iter()
            .filter(|(f, id, _)| named(f) && active.contains(&JobId::Run(*id)))
            .map(|r| r.1)
            .collect();
        let others: Vec<&str> = st
            .runs
            .iter()
            .filter(|(f, id, _)| ids.contains(id) && !named(f))
            .map(|r| r.0.as_str())
            .collect();
        if !others.is_empty() {
            return Err(OtgError::invalid(format!(
                "traffic.flow_transmit.flow_names: flows {others:?} were started with these in one run and would stop too. Fix: name them as well (or no flow), or pause these (flow_transmit state pause)"
            )));
        }
        ids
    };
    for id in &ids {
        s.jobs.stop(JobId::Run(*id));
    }
    let ended = || !ids.iter().any(|id| active(s).contains(&JobId::Run(*id)));
    if !wait_until(STOP_WAIT, ended) {
        return Err(OtgError::internal(format!(
            "the runs of these flows did not end within {} s of the stop",
            STOP_WAIT.as_secs()
        )));
    }
    Ok(requests::ok(Vec::new()))
}

/// An error naming the first of `names` that is not a flow of the config.
fn check_known(st: &OtgState, names: &[String]) -> Result<(), OtgError> {
    let Some(plan) = &st.plan else { return Ok(()) };
    match names.iter().find(|n| !plan.flows.iter().any(|f| &f.0 == *n)) {
        Some(n) => Err(OtgError::invalid(format!(
            "traffic.flow_transmit.flow_names: no flow named {n:?} in the config. Fix: name a flow of config.flows"
        ))),
        None => Ok(()),
    }
}

/// A control request for a config across hosts: start and stop all its flows.
async fn cluster_control(s: Shared, c: Arc<crate::cluster::Cluster>, ctl: Control) -> Result<Value, OtgError> {
    let not_yet = |what: &str| {
        OtgError::invalid(format!(
            "{what} is not supported in a run across hosts yet. Fix: start and stop all its flows"
        ))
    };
    match ctl {
        Control::NoOp(warning) => Ok(requests::ok(vec![warning])),
        Control::Protocols(_) => Ok(requests::ok(Vec::new())),
        Control::Link(..) => Err(not_yet("link control")),
        Control::Routes(..) | Control::BgpPeers(..) | Control::IsisRouters(..) => Err(not_yet("routing control")),
        Control::Lacp { .. } => Err(not_yet("LACP control")),
        Control::Start(names) if names.is_empty() => {
            let (plan, raw) = {
                let st = otg(&s);
                (st.plan.clone(), st.raw.clone())
            };
            let (plan, raw) = plan
                .zip(raw)
                .ok_or_else(|| OtgError::invalid("no config: set one first"))?;
            blocking(move || crate::cluster::start(&s, &c, &plan, &raw).map(|_| requests::ok(Vec::new()))).await
        }
        Control::Start(_) => Err(not_yet("starting some of the flows")),
        Control::Stop(_) => {
            c.stop();
            Ok(requests::ok(Vec::new()))
        }
        Control::Pause(..) => Err(not_yet("pause and resume")),
        Control::Capture(..) => Err(not_yet("capture")),
    }
}

/// Pauses (`on`) or resumes the flows named (all when none are) that are being sent. A flow
/// that is not being sent is an error that names it.
fn pause(s: &Shared, names: &[String], on: bool) -> Result<Value, OtgError> {
    let st = otg(s);
    let active = active(s);
    for n in names {
        if sending(&st, &active, n).is_none() {
            return Err(OtgError::invalid(format!(
                "traffic.flow_transmit.flow_names: flow {n:?} is not being sent. Fix: start it first (flow_transmit state start)"
            )));
        }
    }
    for (_, id, i) in st.runs.iter().filter(|(f, _, _)| names.is_empty() || names.contains(f)) {
        if let Some(r) = st.pausers.iter().find(|r| r.id == *id) {
            r.pauser.pause(*i, on);
        }
    }
    Ok(requests::ok(Vec::new()))
}

/// `control/state` port link up or down for the ports named (all when none are): each
/// port's interface set administratively up or down over rtnetlink, stamped at the kernel's
/// ACK (a `link_down`/`link_up` event for convergence metrics). Runs going on take the fault
/// as the user's and go on: the run on the port itself stops trying to send until the link
/// is up again (its frames count as sent and lost), the others ride out a lost carrier.
fn link_control(s: &Shared, up: bool, names: &[String]) -> Result<Value, OtgError> {
    let plan = plan_of(s)?;
    if let Some(n) = names.iter().find(|n| !plan.ports.iter().any(|p| &p.name == *n)) {
        return Err(OtgError::invalid(format!("port.link.port_names: no port named {n:?}")));
    }
    let ports: Vec<_> = plan
        .ports
        .iter()
        .filter(|p| names.is_empty() || names.contains(&p.name))
        .collect();
    if let Some(p) = ports.iter().find(|p| p.agent.is_some()) {
        return Err(OtgError::invalid(format!(
            "port.link.port_names: port {:?} is on an agent; link control acts on this host's ports. Fix: name local ports",
            p.name
        )));
    }
    // Each running run with its TX ports.
    let runs: Vec<(gapless_engine::Pauser, Vec<String>)> = {
        let st = otg(s);
        let active = active(s);
        st.pausers
            .iter()
            .filter(|c| active.contains(&JobId::Run(c.id)))
            .map(|c| (c.pauser.clone(), c.tx.clone()))
            .collect()
    };
    for p in ports {
        // The change starts here: the run on the port stops sending before the request.
        let begin_ns = gapless_engine::clock::RunClock::realtime_now_ns();
        if !up {
            runs.iter().for_each(|(r, tx)| r.hold_link(tx.contains(&p.name)));
        }
        let c = gapless_io::kernel::rtnl::set_link(p.netns.as_deref(), &p.iface, up).map_err(|e| {
            OtgError::invalid(format!(
                "port {:?}: the link could not be set {}: {e}",
                p.name,
                if up { "up" } else { "down" }
            ))
        })?;
        if up {
            runs.iter()
                .for_each(|(r, _)| r.release_link(p.netns.clone(), p.iface.clone()));
        }
        let mut st = otg(s);
        st.links_down.retain(|n| n != &p.name);
        if !up {
            st.links_down.push(p.name.clone());
        }
        st.made.push(gapless_otg::metrics::convergence::Recorded {
            kind: if up { "link_up" } else { "link_down" }.into(),
            source: p.name.clone(),
            begin_ns: begin_ns.min(c.sent_ns),
            end_ns: c.acked_ns,
        });
    }
    Ok(requests::ok(Vec::new()))
}

/// Starts the flows named (all when none are) as one run: one send loop over every TX port
/// of theirs and one meter over every RX port ([`runs::join`]), so flows both ways between
/// two ports, and flows that share a port, run at once and are metered apart by their
/// signatures.
fn start(s: &Shared, names: &[String]) -> Result<Value, OtgError> {
    let plan = plan_of(s)?;
    runs::check_flows(&plan, names)?;
    let (mut groups, mut warnings) = (Vec::new(), Vec::new());
    for g in &plan.groups {
        if let Some(mut group) = runs::subset(g, names) {
            warnings.extend(devices::resolve(s, &mut group)?);
            groups.push(group);
        }
    }
    let Some(joint) = runs::join(&groups) else {
        return Ok(requests::ok(warnings));
    };
    let (id, pauser, room) = start_joint(s, &joint)?;
    let started: Vec<(String, i64, usize)> = joint
        .group
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| (f.clone(), id, i))
        .collect();
    let mut st = otg(s);
    st.runs.retain(|(f, _, _)| !started.iter().any(|n| &n.0 == f));
    st.runs.extend(started);
    let OtgState {
        runs, pausers: held, ..
    } = &mut *st;
    held.retain(|c| runs.iter().any(|r| r.1 == c.id));
    held.extend(pauser.map(|pauser| RunCtl {
        id,
        pauser,
        room,
        tx: joint.tx_names(),
        rx: joint.group.rx_ports().iter().map(|p| p.name.clone()).collect(),
    }));
    Ok(requests::ok(warnings))
}

/// How long a start waits for an ended run to let go of its ports: a run whose flows
/// reported `stopped` (it sent its end) still writes its report and plots, and holds its
/// interfaces until then; a script that starts again as soon as it saw them stopped must not
/// meet a busy port.
const ENDED_RUN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `holder`, which holds a port, has ended (it sent its end), once it let go of the
/// port (waiting up to [`ENDED_RUN_WAIT`]).
fn ended_and_gone(s: &Shared, holder: JobId) -> bool {
    if active(s).contains(&holder) {
        return false;
    }
    wait_until(ENDED_RUN_WAIT, || !s.jobs.holds(holder))
}

/// Whether `done` holds within `limit`, asked every 5 ms.
fn wait_until(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while !done() {
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}

fn start_joint(s: &Shared, j: &runs::Joint) -> Result<(i64, Option<gapless_engine::Pauser>, usize), OtgError> {
    let g = &j.group;
    let room = runs::compiled(g)?.max_frame() as usize - FCS_LEN;
    let mut run = runs::port_run(j)?;
    let (tx_names, drivers) = (j.tx_names(), otg(s).lags.clone());
    for l in &mut run.spec.lags {
        let name = &tx_names[l.port];
        l.live = drivers.iter().find(|d| &d.lag.name == name).map(|d| d.live.clone());
    }
    // Each RX port's capture, if the config has one: its meter offers it the port's frames.
    if let Some(rx) = run.spec.rx.as_mut() {
        let st = otg(s);
        let of = |port: &gapless_otg::config::Port| {
            st.captures
                .iter()
                .find(|c| c.cfg.port == port.name)
                .map(|c| c.buf.clone())
        };
        let rx_ports = g.rx_ports();
        rx.capture = rx_ports.first().and_then(of);
        for (more, port) in rx.more.iter_mut().zip(rx_ports.iter().skip(1)) {
            more.capture = of(port);
        }
    }
    let new = NewRun {
        profile: run.profile,
        toml: run.toml,
        target: run.target,
        spec: run.spec,
    };
    let mut started = crate::runs::start_pausable(&s.jobs, &s.db, &s.reports, new.clone());
    if let Err(StartError::Busy { holder, .. }) = &started {
        if ended_and_gone(s, *holder) {
            started = crate::runs::start_pausable(&s.jobs, &s.db, &s.reports, new);
        }
    }
    let ports = j.tx_names().join(", ");
    let (id, p) = started.map_err(|e| match e {
        StartError::Busy { iface, holder } => OtgError::conflict(format!(
            "ports {ports}: {iface} is busy with {holder}. Fix: stop the traffic that holds it, or start these flows with it in one flow_transmit start"
        )),
        StartError::Engine(e) => OtgError::invalid(format!("ports {ports}: {e}")),
        StartError::Db(e) => OtgError::internal(e),
    })?;
    Ok((id, p, room))
}

/// `control/state` port capture start or stop, for the ports named (all captured ports when
/// none are). A stop warns when the buffer was full and frames were not kept.
fn capture_control(s: &Shared, start: bool, ports: &[String]) -> Result<Value, OtgError> {
    let st = otg(s);
    for p in ports {
        capture_of(&st, p, "port.capture.port_names")?;
    }
    let mut warnings = Vec::new();
    for c in st
        .captures
        .iter()
        .filter(|c| ports.is_empty() || ports.contains(&c.cfg.port))
    {
        if start {
            c.buf.arm(c.cfg.overwrite);
            continue;
        }
        c.buf.disarm();
        let n = c.buf.stats().dropped;
        if n > 0 {
            warnings.push(format!(
                "capture on port {}: the buffer ({} MiB) was full and {n} frames were not kept. Fix: a smaller packet_size, or a shorter capture",
                c.cfg.port,
                gapless_engine::capture::DEFAULT_BYTES >> 20
            ));
        }
    }
    Ok(requests::ok(warnings))
}

/// A port's capture as a file (pcap or pcapng, as the config asks) and what it holds,
/// written on the blocking pool without the state's lock held.
pub(crate) async fn capture_file(
    s: &Shared,
    req: &Value,
) -> Result<(Vec<u8>, gapless_engine::capture::CaptureStats), OtgError> {
    let port = captures::request(req)?;
    let (buf, format) = {
        let st = otg(s);
        let c = capture_of(&st, &port, "port_name")?;
        let format = if c.cfg.pcapng {
            CaptureFormat::PcapNg
        } else {
            CaptureFormat::Pcap
        };
        (c.buf.clone(), format)
    };
    blocking(move || buf.file(format).map_err(OtgError::internal)).await
}

/// The capture of `port`, or the error (at request path `at`) that says the config has none.
fn capture_of<'a>(st: &'a OtgState, port: &str, at: &str) -> Result<&'a PortCapture, OtgError> {
    st.captures.iter().find(|c| c.cfg.port == port).ok_or_else(|| {
        OtgError::invalid(format!(
            "{at}: port {port:?} has no capture in the config. Fix: add it to a captures[] entry's port_names"
        ))
    })
}

/// `POST /monitor/capture`: the file's bytes; what the capture held and dropped in headers.
async fn capture(State(s): State<Shared>, b: Bytes) -> Result<Response, Reply> {
    let (bytes, stats) = capture_file(&s, &body("CaptureRequest", &b)?).await?;
    let headers = [
        (axum::http::header::CONTENT_TYPE, "application/octet-stream".to_string()),
        (
            axum::http::HeaderName::from_static("x-gapless-capture-frames"),
            stats.frames.to_string(),
        ),
        (
            axum::http::HeaderName::from_static("x-gapless-capture-dropped"),
            stats.dropped.to_string(),
        ),
    ];
    Ok((headers, bytes).into_response())
}

#[cfg(test)]
mod undo_tests {
    use super::Undo;
    use std::sync::Mutex;

    #[test]
    fn an_unfinished_set_config_is_undone_on_a_panic_an_error_and_not_once_done() {
        let configuring = Mutex::new(true);
        let reset = || *configuring.lock().unwrap_or_else(|e| e.into_inner()) = false;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _u = Undo(Some(reset));
            panic!("a bring-up step panicked");
        }));
        assert!(r.is_err(), "expected the panic to reach catch_unwind");
        assert!(
            !*configuring.lock().unwrap(),
            "expected the flag cleared by the unwinding guard"
        );
        // An early return clears it too; a disarmed guard leaves the new state alone.
        *configuring.lock().unwrap() = true;
        let early = || -> Result<(), ()> {
            let _u = Undo(Some(reset));
            Err(())
        };
        assert!(early().is_err());
        assert!(!*configuring.lock().unwrap());
        *configuring.lock().unwrap() = true;
        let mut u = Undo(Some(reset));
        u.disarm();
        drop(u);
        assert!(
            *configuring.lock().unwrap(),
            "expected a finished set_config's state kept"
        );
    }
}
