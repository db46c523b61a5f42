//! `POST /monitor/metrics`: flow and port metrics. A flow's figures come from its run's
//! live snapshot while it runs, and from the stored result once it has ended (so
//! `transmit: stopped` comes with the final receive counts). Every counter is filled (snappi
//! reads a missing one as None); gapless's own figures ride along under `x_gapless`.

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::{body, invalid, otg, OtgError};
use crate::jobs::{lock, JobId};
use crate::Shared;

/// One flow's figures.
#[derive(Default)]
struct Flow {
    started: bool,
    frames_tx: u64,
    bytes_tx: u64,
    frames_rx: u64,
    bytes_rx: u64,
    tx_rate: f64,
    rx_rate: f64,
    latency: Option<Value>,
    timestamps: Option<Value>,
    extra: Value,
}

pub async fn handler(State(s): State<Shared>, b: Bytes) -> Result<Json<Value>, OtgError> {
    let req = body(&b)?;
    let choice = req["choice"].as_str().unwrap_or("port");
    let names = |k: &str| -> Vec<String> {
        req[choice][k]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    match choice {
        "flow" => {
            let names = names("flow_names");
            let flows = figures(&s, &names)?;
            let list: Vec<Value> = flows.iter().map(|(n, tx, rx, f)| flow_json(n, tx, rx, f)).collect();
            Ok(Json(
                json!({ "choice": "flow_metrics", "flow_metrics": list, "warnings": [] }),
            ))
        }
        "port" => {
            let names = names("port_names");
            Ok(Json(
                json!({ "choice": "port_metrics", "port_metrics": ports(&s, &names)?, "warnings": [] }),
            ))
        }
        other => Err(invalid(format!(
            "choice: {other:?} metrics are not supported (port or flow)"
        ))),
    }
}

/// Every flow named (all when none are): (name, tx port, rx port, figures).
fn figures(s: &Shared, names: &[String]) -> Result<Vec<(String, String, String, Flow)>, OtgError> {
    let (plan, runs) = {
        let st = otg(s);
        (st.plan.clone(), st.runs.clone())
    };
    let plan = plan.ok_or_else(|| invalid("no config: set one first"))?;
    for n in names {
        if !plan.flows.iter().any(|f| &f.0 == n) {
            return Err(invalid(format!("flow_names: no flow named {n:?}")));
        }
    }
    let live = s.jobs.running();
    let mut out = Vec::new();
    for (name, tx, rx) in plan.flows.iter().filter(|f| names.is_empty() || names.contains(&f.0)) {
        let f = match runs.iter().find(|r| &r.0 == name) {
            None => Flow::default(),
            Some((_, id, idx)) => match live.iter().find(|l| l.0 == JobId::Run(*id)) {
                Some((_, snap)) => from_snapshot(snap.as_deref().unwrap_or(&Value::Null), *idx, true),
                None => ended(s, *id, *idx, name),
            },
        };
        out.push((name.clone(), tx.clone(), rx.clone(), f));
    }
    Ok(out)
}

fn from_snapshot(snap: &Value, idx: usize, started: bool) -> Flow {
    let st = &snap["streams"][idx];
    let (tx, rx) = (&st["tx"], &st["rx"]);
    Flow {
        started,
        frames_tx: tx["sent"].as_u64().unwrap_or(0),
        bytes_tx: tx["bytes"].as_u64().unwrap_or(0),
        frames_rx: rx["received"].as_u64().unwrap_or(0),
        bytes_rx: with_fcs(rx["bytes"].as_u64(), rx["received"].as_u64()),
        tx_rate: tx["rate_pps"].as_f64().unwrap_or(0.0),
        rx_rate: rx["rate_pps"].as_f64().unwrap_or(0.0),
        latency: None,
        timestamps: None,
        extra: json!({
            "lost": rx["lost"], "reordered": rx["reordered"], "duplicated": rx["duplicated"],
            "latency_p50_ns": rx["latency_p50_ns"], "latency_p99_ns": rx["latency_p99_ns"],
            "latency_p99_9_ns": rx["latency_p99_9_ns"], "lateness_last_ns": tx["lag_ns"],
        }),
    }
}

/// An ended run's stored result (or its last checkpoint).
fn ended(s: &Shared, id: i64, idx: usize, name: &str) -> Flow {
    let row = lock(&s.db).run(id).ok().flatten();
    let Some(result) = row.and_then(|r| r.result) else {
        return Flow::default();
    };
    if let Some(snap) = result.get("checkpoint") {
        return from_snapshot(snap, idx, false);
    }
    let tx = &result["streams"][idx];
    let rx = result["rx"]["streams"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == name))
        .cloned()
        .unwrap_or(Value::Null);
    let lat = &rx["latency"];
    let ia = &rx["interarrival"];
    Flow {
        started: false,
        frames_tx: tx["sent_frames"].as_u64().unwrap_or(0),
        bytes_tx: tx["sent_bytes_l2"].as_u64().unwrap_or(0),
        frames_rx: rx["rx_frames"].as_u64().unwrap_or(0),
        bytes_rx: with_fcs(rx["rx_bytes_l2"].as_u64(), rx["rx_frames"].as_u64()),
        tx_rate: tx["achieved_pps"].as_f64().unwrap_or(0.0),
        rx_rate: ia["rate_pps"].as_f64().unwrap_or(0.0),
        latency: lat
            .is_object()
            .then(|| json!({ "minimum_ns": lat["min_ns"], "maximum_ns": lat["max_ns"], "average_ns": lat["mean_ns"] })),
        timestamps: rx
            .is_object()
            .then(|| json!({ "first_timestamp_ns": rx["first_rx_ns"], "last_timestamp_ns": rx["last_rx_ns"] })),
        extra: json!({
            "lost": rx["seq"]["lost"], "reordered": rx["seq"]["reordered"], "duplicated": rx["seq"]["duplicated"],
            "lost_vs_tx": rx["lost_vs_tx"],
            "latency_percentiles_ns": lat["percentiles_ns"],
            "interarrival": { "mean_ns": ia["mean_ns"], "p99_ns": ia["p99_ns"], "mse_ns2": ia["mse_ns2"] },
            "lateness": tx["lateness"],
            "schedule": result["verdict"]["schedule"],
            "run": id,
        }),
    }
}

/// Received bytes as OTG counts them: with the 4-byte FCS the capture does not see.
fn with_fcs(bytes: Option<u64>, frames: Option<u64>) -> u64 {
    bytes.unwrap_or(0) + 4 * frames.unwrap_or(0)
}

fn flow_json(name: &str, tx: &str, rx: &str, f: &Flow) -> Value {
    let loss = if f.frames_tx > 0 {
        (f.frames_tx.saturating_sub(f.frames_rx)) as f64 * 100.0 / f.frames_tx as f64
    } else {
        0.0
    };
    let mut v = json!({
        "name": name, "port_tx": tx, "port_rx": rx,
        "transmit": if f.started { "started" } else { "stopped" },
        "frames_tx": f.frames_tx, "frames_rx": f.frames_rx,
        "bytes_tx": f.bytes_tx, "bytes_rx": f.bytes_rx,
        "frames_tx_rate": f.tx_rate, "frames_rx_rate": f.rx_rate,
        "loss": loss,
        "x_gapless": f.extra,
    });
    if let Some(l) = &f.latency {
        v["latency"] = l.clone();
    }
    if let Some(t) = &f.timestamps {
        v["timestamps"] = t.clone();
    }
    v
}

/// Each port's sums over the flows it sends or receives.
fn ports(s: &Shared, names: &[String]) -> Result<Vec<Value>, OtgError> {
    let plan = otg(s).plan.clone().ok_or_else(|| invalid("no config: set one first"))?;
    for n in names {
        if !plan.ports.iter().any(|p| &p.name == n) {
            return Err(invalid(format!("port_names: no port named {n:?}")));
        }
    }
    let flows = figures(s, &[])?;
    let out = plan
        .ports
        .iter()
        .filter(|p| names.is_empty() || names.contains(&p.name))
        .map(|p| {
            let sent = flows.iter().filter(|f| f.1 == p.name);
            let got = flows.iter().filter(|f| f.2 == p.name);
            json!({
                "name": p.name, "location": p.location, "link": "up", "capture": "stopped",
                "transmit": if sent.clone().any(|f| f.3.started) { "started" } else { "stopped" },
                "frames_tx": sent.clone().map(|f| f.3.frames_tx).sum::<u64>(),
                "bytes_tx": sent.clone().map(|f| f.3.bytes_tx).sum::<u64>(),
                "frames_tx_rate": sent.map(|f| f.3.tx_rate).sum::<f64>() + 0.0,
                "frames_rx": got.clone().map(|f| f.3.frames_rx).sum::<u64>(),
                "bytes_rx": got.clone().map(|f| f.3.bytes_rx).sum::<u64>(),
                "frames_rx_rate": got.map(|f| f.3.rx_rate).sum::<f64>() + 0.0,
            })
        })
        .collect();
    Ok(out)
}
