//! The agent API, version 1, on the OTG listener: what a controller (another `gapless
//! serve` given a config whose ports are `HOST:PORT/IFACE`) needs to run its share of a run
//! across hosts here, and to believe a latency measured across this host and its own.
//!
//! - `GET /gapless/agent/v1/hello?nonce=HEX`: the proof that this server holds the token,
//!   bound to its certificate ([`trust`]); the one path that needs no token.
//! - `GET /gapless/agent/v1/clock`: this host's clock state (kernel adjtimex, linuxptp's
//!   `pmc`, `chronyc`), as [`gapless_core::timing::clocks::ClockState`].
//! - `POST /gapless/agent/v1/time` (body `{}`): `t2` when the request was taken and `t3`
//!   when the answer leaves, ns on this host's wall clock, for a 4-timestamp exchange
//!   ([`gapless_core::timing::clocks::estimate`]).
//!
//! - `POST /gapless/agent/v1/prepare` (a [`gapless_otg::runs::shares::Share`]): meters open,
//!   send loops ready and waiting ([`share`]); the lease starts.
//! - `POST /gapless/agent/v1/start` (`{run, start_ns}`): the first departure at `start_ns`
//!   on this host's clock; refused when it is too close to make.
//! - `POST /gapless/agent/v1/poll` (`{run}`): renews the lease; each port's live counts,
//!   then its result or meter report once it ended, and the start skew.
//! - `POST /gapless/agent/v1/stop` (`{run}`): stops and joins everything, answers the
//!   final state, and forgets the share.
//!
//! A share whose lease is not renewed in time (the controller died or was cut off) stops by
//! itself; its poll then says `expired`.
//!
//! The OTG listener's guard applies (Host, Origin, JSON content type, the token off
//! loopback). `gapless serve --test-clock-offset-ns N` shifts the readings here, and the
//! clock a share's start is waited for on, by N ns, so that tests on one machine (whose
//! namespaces share one clock) can give an agent a clock of its own; frames' stamps are the
//! kernel's and are not shifted.

pub mod share;
pub mod trust;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use gapless_otg::{runs::requests, OtgError};
use serde_json::{json, Value};

use crate::reply::{blocking, Reply};
use crate::Shared;

/// The agent API's routes, on the OTG listener.
pub fn routes() -> axum::Router<Shared> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/gapless/agent/v1/clock", get(clock))
        .route("/gapless/agent/v1/time", post(time))
        .route("/gapless/agent/v1/hello", get(hello))
        .route("/gapless/agent/v1/prepare", post(prepare))
        .route("/gapless/agent/v1/start", post(start))
        .route("/gapless/agent/v1/poll", post(poll))
        .route("/gapless/agent/v1/stop", post(stop))
}

/// The shares this agent runs (one at a time).
#[derive(Default)]
pub struct Shares(std::sync::Mutex<Vec<Arc<share::Running>>>);

impl Shares {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<share::Running>>> {
        crate::jobs::lock(&self.0)
    }

    fn find(&self, run: &str) -> Result<Arc<share::Running>, OtgError> {
        self.lock()
            .iter()
            .find(|r| r.run == run)
            .cloned()
            .ok_or_else(|| OtgError::not_found(format!("run {run:?}: this agent has no share of it (never prepared, stopped, or its lease ran out and it was stopped)")))
    }
}

/// `GET /gapless/agent/v1/clock`.
pub async fn clock(State(s): State<Shared>) -> Result<Json<Value>, (StatusCode, Json<Value>)> {
    // pmc and chronyc are processes: off the async workers. A reading that failed is an
    // error, never a default state (which would read as a synchronised clock).
    let state = tokio::task::spawn_blocking(gapless_io::kernel::clock::state)
        .await
        .map_err(|e| {
            let err = gapless_otg::OtgError::internal(format!("reading the clock's state: {e}"));
            (StatusCode::INTERNAL_SERVER_ERROR, Json(err.body()))
        })?;
    Ok(Json(json!({
        "version": 1,
        "clock": state,
        "test_clock_offset_ns": s.clock_offset_ns,
        "untrusted": state.untrusted(),
    })))
}

/// `POST /gapless/agent/v1/time`. The body (`{}`) is read before `t2`: a reply sent before
/// the body has arrived would make the server close the connection (it cannot be reused with
/// unread bytes in it), and the client's next exchange on it would fail.
pub async fn time(State(s): State<Shared>, _body: Bytes) -> Json<Value> {
    let t2 = gapless_io::kernel::clock::realtime_ns() + s.clock_offset_ns;
    let t3 = gapless_io::kernel::clock::realtime_ns() + s.clock_offset_ns;
    Json(json!({ "version": 1, "t2": t2, "t3": t3 }))
}

#[derive(serde::Deserialize)]
pub struct Hello {
    nonce: String,
}

/// `GET /gapless/agent/v1/hello?nonce=HEX`.
pub async fn hello(State(s): State<Shared>, Query(h): Query<Hello>) -> Result<Json<Value>, Reply> {
    let nonce = trust::unhex(&h.nonce)
        .filter(|n| n.len() >= 16)
        .ok_or_else(|| OtgError::invalid("nonce: give at least 16 random bytes as hex"))?;
    let (Some(token), Some(cert)) = (s.token.as_deref(), s.otg_cert_der.as_deref()) else {
        return Err(OtgError::conflict(
            "this server cannot act as an agent: it needs --token-file and HTTPS on its OTG listener (no --otg-plain)",
        )
        .into());
    };
    Ok(Json(
        json!({ "version": 1, "proof": trust::proof(token, &nonce, cert) }),
    ))
}

fn run_of(v: &Value) -> Result<String, OtgError> {
    v["run"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| OtgError::invalid("run: the run's id is missing"))
}

/// `POST /gapless/agent/v1/prepare`.
pub async fn prepare(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, Reply> {
    let v = requests::body(&b)?;
    let share: gapless_otg::runs::shares::Share =
        serde_json::from_value(v).map_err(|e| OtgError::invalid(format!("the share does not parse: {e}")))?;
    let s2 = s.clone();
    let r = blocking(move || {
        // A share whose lease ran out has stopped: it holds nothing any more.
        s2.shares.lock().retain(|x| !x.lease_out());
        if let Some(busy) = s2.shares.lock().first() {
            return Err(OtgError::conflict(format!(
                "this agent is running run {:?}. Fix: stop it first",
                busy.run
            )));
        }
        let t = std::time::Instant::now();
        let cell = claim(&s2, &share)?;
        let r = share::prepare(&share, s2.clock_offset_ns);
        let _ = cell.set(r.as_ref().ok().cloned());
        let r = r?;
        s2.shares.lock().push(r.clone());
        Ok((r, t.elapsed()))
    })
    .await?;
    watch_lease(s, r.0.clone());
    // The warm-up it counts, echoed: a controller can tell an agent that ignores it (an
    // older gapless) from one that counts it.
    Ok(Json(
        json!({ "version": 1, "run": r.0.run, "ready": true, "setup_ns": r.1.as_nanos() as u64, "warmup_ns": r.0.warmup_ns() }),
    ))
}

/// What the job holding a share's interfaces waits for: the share once prepared (None when
/// it failed).
type ShareCell = Arc<std::sync::OnceLock<Option<Arc<share::Running>>>>;

/// Claims the share's interfaces in the job table, so a local run cannot take them (and the
/// share cannot take a local run's); the job lasts as long as the share.
fn claim(s: &Shared, share: &gapless_otg::runs::shares::Share) -> Result<ShareCell, OtgError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let cell: ShareCell = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (c, flag) = (cell.clone(), stop.clone());
    let id = crate::jobs::JobId::Share(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let body: crate::jobs::Body = Box::new(move |_| hold(&c, &flag));
    s.jobs
        .start(share::interfaces(share), stop, move || Ok((id, body)))
        .map(|_| cell)
        .map_err(|e| match e {
            crate::jobs::StartError::Busy { iface, holder } => OtgError::conflict(format!(
                "{iface} is busy with {holder} on this agent. Fix: stop it, or wait for it to end"
            )),
            other => OtgError::internal(format!("{other:?}")),
        })
}

/// The job's thread: until the share ends, or the job is stopped (the server is going
/// down), which stops the share.
fn hold(cell: &ShareCell, stop: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering::{Acquire, Relaxed};
    let r = loop {
        match cell.get() {
            Some(r) => break r.clone(),
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let Some(r) = r else { return };
    while !r.ended.load(Acquire) {
        if stop.load(Relaxed) {
            r.stop_all();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the share by itself when its lease runs out; ends when the share is forgotten.
fn watch_lease(s: Shared, r: Arc<share::Running>) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(50));
        if !s.shares.lock().iter().any(|x| Arc::ptr_eq(x, &r)) {
            return;
        }
        if r.lease_out() {
            r.expired.store(true, std::sync::atomic::Ordering::Relaxed);
            r.stop_all();
            return;
        }
    });
}

/// `POST /gapless/agent/v1/start`.
pub async fn start(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, Reply> {
    let v = requests::body(&b)?;
    let r = s.shares.find(&run_of(&v)?)?;
    let at = v["start_ns"]
        .as_u64()
        .ok_or_else(|| OtgError::invalid("start_ns: the start, ns since the Unix epoch on this agent's clock"))?;
    r.renew();
    r.start(at)?;
    Ok(Json(json!({ "version": 1, "run": r.run, "start_ns": at })))
}

/// `POST /gapless/agent/v1/poll`.
pub async fn poll(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, Reply> {
    let r = s.shares.find(&run_of(&requests::body(&b)?)?)?;
    if !r.expired.load(std::sync::atomic::Ordering::Relaxed) {
        r.renew();
    }
    Ok(Json(blocking(move || Ok(r.poll())).await?))
}

/// `POST /gapless/agent/v1/stop`.
pub async fn stop(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, Reply> {
    let run = run_of(&requests::body(&b)?)?;
    let r = s.shares.find(&run)?;
    let v = blocking(move || {
        r.stop_all();
        let v = r.poll();
        s.shares.lock().retain(|x| !Arc::ptr_eq(x, &r));
        Ok(v)
    })
    .await?;
    Ok(Json(v))
}
