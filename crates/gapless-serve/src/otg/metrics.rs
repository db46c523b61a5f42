//! `POST /monitor/metrics`: each flow's figures gathered from the run table (a live
//! snapshot while its run runs, the stored result after), mapped by `gapless_otg::metrics`.

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use gapless_otg::metrics::{flow_json, from_result, from_snapshot, port_metrics, Flow, FlowFigures};
use gapless_otg::runs::requests::{self, Metrics};
use gapless_otg::{metrics::convergence, runs, OtgError};
use serde_json::{json, Value};

use super::{otg, plan_of, OtgResult};
use crate::jobs::{lock, JobId};
use crate::Shared;

/// Off the async workers: BGP, IS-IS and OSPF metrics ask their daemons over vty.
pub async fn handler(State(s): State<Shared>, b: Bytes) -> OtgResult {
    let req = super::body("MetricsRequest", &b)?;
    Ok(Json(super::blocking(move || metrics_for(&s, &req)).await?))
}

/// A metrics request of either transport.
pub(crate) fn metrics_for(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    match requests::metrics(req)? {
        Metrics::Flow(names, tags) => {
            let plan = plan_of(s)?;
            // By name, once: 1,000 flows looked up one by one were a million comparisons.
            let at: std::collections::HashMap<&str, usize> =
                plan.flows.iter().enumerate().map(|(i, f)| (f.0.as_str(), i)).collect();
            let setting = |n: &str| {
                at.get(n)
                    .and_then(|i| plan.metrics.get(*i).cloned())
                    .unwrap_or_default()
            };
            let list: Vec<Value> = figures(s, &names)?
                .iter()
                .map(|(n, tx, rx, f)| flow_json(n, tx, rx, f, &setting(n), &tags))
                .collect();
            Ok(json!({ "choice": "flow_metrics", "flow_metrics": list, "warnings": [] }))
        }
        Metrics::Port(names) => {
            let plan = plan_of(s)?;
            // Each LAG member's entry counts its share of what the LAG received.
            let mut ports = port_metrics(&plan, &figures_by(s, &[], true)?, &names)?;
            with_speeds(&plan, &mut ports);
            with_lag_members(s, &mut ports);
            with_captures(s, &mut ports);
            with_lost_agents(s, &mut ports);
            let down = otg(s).links_down.clone();
            for p in ports
                .iter_mut()
                .filter(|p| down.iter().any(|d| p["name"] == d.as_str()))
            {
                p["link"] = json!("down");
            }
            Ok(json!({ "choice": "port_metrics", "port_metrics": ports, "warnings": [] }))
        }
        Metrics::Bgp(v6, names) => super::routing::metrics(s, v6, &names),
        Metrics::Isis(names) => super::isis::metrics(s, &names),
        Metrics::Lldp(names) => super::lldp::metrics(s, &names),
        Metrics::Ospf(v6, names) => super::ospf::metrics(s, v6, &names),
        Metrics::Lacp(lags, ports) => super::lag::lacp_metrics(s, &lags, &ports),
        Metrics::Lag(names) => {
            let all = figures(s, &[])?;
            let rx = |lag: &str| {
                let on = all.iter().filter(|f| f.2 == lag);
                let frames = on.clone().map(|f| f.3.frames_rx).sum();
                (
                    frames,
                    on.clone().map(|f| f.3.bytes_rx).sum(),
                    on.map(|f| f.3.rx_rate).sum::<f64>(),
                )
            };
            super::lag::metrics(s, &names, rx)
        }
        Metrics::Convergence(names) => {
            let d = convergence::detector(otg(s).raw.as_ref().unwrap_or(&Value::Null))?;
            let made = otg(s).made.clone();
            let all = figures(s, &names)?;
            // A flow with several RX ports is one sequence: its outages are the flow's.
            let list: Vec<Value> = all
                .iter()
                .enumerate()
                .filter(|(i, f)| !all[..*i].iter().any(|g| g.0 == f.0))
                .map(|(_, (n, _, _, f))| convergence::metric(n, &f.extra["loss_episodes"], f.tx_rate, &d, &made))
                .collect();
            Ok(json!({ "choice": "convergence_metrics", "convergence_metrics": list, "warnings": [] }))
        }
    }
}

/// Every flow named (all when none are), a flow with several RX ports once per port.
fn figures(s: &Shared, names: &[String]) -> Result<Vec<FlowFigures>, OtgError> {
    figures_by(s, names, false)
}

/// As [`figures`]; `members`: a flow received on a LAG once per member, with its share.
fn figures_by(s: &Shared, names: &[String], members: bool) -> Result<Vec<FlowFigures>, OtgError> {
    let plan = plan_of(s)?;
    let cluster = otg(s).cluster.clone();
    if let Some(c) = cluster {
        runs::check_flows(&plan, names)?;
        let mut all = c.figures(&plan);
        all.retain(|f| names.is_empty() || names.contains(&f.0));
        return Ok(all);
    }
    let (runs, meters) = {
        let st = otg(s);
        let meters: Vec<(i64, Vec<String>)> = st.pausers.iter().map(|c| (c.id, c.rx.clone())).collect();
        (st.runs.clone(), meters)
    };
    runs::check_flows(&plan, names)?;
    let live = s.jobs.running();
    // Each ended run's result is read from the table once, not once per flow: with 1,000
    // flows in one run, reading it per flow took over a minute.
    let mut stored: std::collections::HashMap<i64, Option<Value>> = std::collections::HashMap::new();
    let mut out = Vec::new();
    let run_of: std::collections::HashMap<&str, &(String, i64, usize)> =
        runs.iter().map(|r| (r.0.as_str(), r)).collect();
    for (name, tx, rx) in plan.flows.iter().filter(|f| names.is_empty() || names.contains(&f.0)) {
        let run = run_of.get(name.as_str()).copied();
        let f = match run {
            None => Flow::default(),
            Some((_, id, idx)) => match live.iter().find(|l| l.0 == JobId::Run(*id)) {
                Some((_, snap)) => from_snapshot(snap.as_deref().unwrap_or(&Value::Null), *idx, true),
                None => match stored.entry(*id).or_insert_with(|| ended(s, *id)) {
                    Some(result) => from_result(result, *id, *idx, name),
                    None => Flow::default(),
                },
            },
        };
        let meter = run
            .and_then(|r| meters.iter().find(|m| m.0 == r.1))
            .map_or(&[][..], |m| &m.1[..]);
        let rx: Vec<String> = match members {
            true => rx.iter().flat_map(|r| lag_members(&plan, r)).collect(),
            false => rx.clone(),
        };
        out.extend(per_port(meter, name, tx, &rx, f));
    }
    Ok(out)
}

/// A flow's entries: one per RX port when its run's meter reads several (`meter`: those
/// ports, in the meter's order), each with what that port received
/// ([`gapless_otg::metrics::on_port`]).
fn per_port(meter: &[String], name: &str, tx: &str, rx: &[String], f: Flow) -> Vec<FlowFigures> {
    if meter.len() < 2 {
        return rx
            .iter()
            .map(|r| (name.into(), tx.into(), r.clone(), f.clone()))
            .collect();
    }
    // A LAG is not one of the meter's ports (its members are): its entry is the flow's.
    rx.iter()
        .map(|r| {
            let f = match meter.iter().position(|p| p == r) {
                Some(k) => gapless_otg::metrics::on_port(&f, k),
                None => f.clone(),
            };
            (name.into(), tx.into(), r.clone(), f)
        })
        .collect()
}

/// A LAG's member ports, or the port itself.
fn lag_members(plan: &gapless_otg::config::Plan, port: &str) -> Vec<String> {
    match plan.lags.iter().find(|l| l.name == port) {
        Some(l) => l.members.iter().map(|m| m.port.clone()).collect(),
        None => vec![port.to_string()],
    }
}

/// An ended run's result, from the run table.
fn ended(s: &Shared, id: i64) -> Option<Value> {
    lock(&s.db).run(id).ok().flatten().and_then(|r| r.result)
}

/// Adds `x`'s keys to the port entry's `x_gapless`.
fn merge_x(p: &mut Value, x: Value) {
    if !p["x_gapless"].is_object() {
        p["x_gapless"] = json!({});
    }
    if let (Some(m), Value::Object(x)) = (p["x_gapless"].as_object_mut(), x) {
        m.extend(x);
    }
}

/// A LAG member's frames and bytes sent: its share of the flows on the LAG, as the LAG's
/// send path counted them (the flows themselves count against the LAG).
fn with_lag_members(s: &Shared, ports: &mut [Value]) {
    for d in otg(s).lags.iter() {
        for (k, m) in d.lag.members.iter().enumerate() {
            if let Some(p) = ports.iter_mut().find(|p| p["name"] == m.port.as_str()) {
                let (frames, bytes) = d.live.sent(k);
                p["frames_tx"] = json!(frames);
                p["bytes_tx"] = json!(bytes);
            }
        }
    }
}

/// Each port's line rate and where it was read (`layer1` or `kernel`): what a rate given
/// as a percentage is of.
fn with_speeds(plan: &gapless_otg::config::Plan, ports: &mut [Value]) {
    for sp in &plan.speeds {
        if let Some(p) = ports.iter_mut().find(|p| p["name"] == sp.port.as_str()) {
            merge_x(p, json!({ "link_speed_bps": sp.bps, "link_speed_source": sp.source }));
        }
    }
}

/// A run across hosts: the ports of a lost agent are down, with why (`x_gapless`).
fn with_lost_agents(s: &Shared, ports: &mut [Value]) {
    let Some(c) = otg(s).cluster.clone() else { return };
    for (port, why) in c.lost_ports() {
        if let Some(p) = ports.iter_mut().find(|p| p["name"] == port.as_str()) {
            p["link"] = json!("down");
            merge_x(p, json!({ "agent_lost": why }));
        }
    }
}

/// Each captured port's capture state, and what its capture holds and dropped, and that its
/// frames carry an FCS gapless computed (`x_gapless`).
fn with_captures(s: &Shared, ports: &mut [Value]) {
    let st = otg(s);
    for p in ports {
        let Some(c) = st.captures.iter().find(|c| p["name"] == c.cfg.port.as_str()) else {
            continue;
        };
        let k = c.buf.stats();
        p["capture"] = json!(if k.armed { "started" } else { "stopped" });
        // Frames are captured whole: the FCS the kernel strips is computed and appended.
        let x = json!({ "capture_frames": k.frames, "capture_bytes": k.bytes, "capture_dropped": k.dropped,
            "capture_fcs": "computed" });
        merge_x(p, x);
    }
}
