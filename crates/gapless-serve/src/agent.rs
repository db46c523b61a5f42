//! The agent API, version 1, on the OTG listener (issue 28's first part): what another
//! gapless needs to believe a latency measured across this host and its own.
//!
//! - `GET /gapless/agent/v1/clock`: this host's clock state (kernel adjtimex, linuxptp's
//!   `pmc`, `chronyc`), as [`gapless_core::timing::clocks::ClockState`].
//! - `POST /gapless/agent/v1/time` (body `{}`): `t2` when the request was taken and `t3`
//!   when the answer leaves, ns on this host's wall clock, for a 4-timestamp exchange
//!   ([`gapless_core::timing::clocks::estimate`]).
//!
//! The OTG listener's guard applies (Host, Origin, JSON content type, the token off
//! loopback). `gapless serve --test-clock-offset-ns N` shifts the readings here by N ns, so
//! that tests on one machine (whose namespaces share one clock) can give an agent a clock
//! of its own; it changes nothing else.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::Shared;

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

/// `POST /gapless/agent/v1/time`.
pub async fn time(State(s): State<Shared>) -> Json<Value> {
    let t2 = gapless_io::kernel::clock::realtime_ns() + s.clock_offset_ns;
    let t3 = gapless_io::kernel::clock::realtime_ns() + s.clock_offset_ns;
    Json(json!({ "version": 1, "t2": t2, "t3": t3 }))
}
