//! What the agents of a run across hosts said, merged: per flow, the TX agent's counts and
//! the RX agent's receive counts, loss, reordering and latency (with the bound the two
//! clocks allow, [`gapless_core::timing::clocks::cross_bound`]); per port, the flows' HDR
//! histograms added exactly; per agent, its clock and its start skew (first departure − T0,
//! on its own clock).

use gapless_core::meter::report::{hist_b64, hist_from_b64, Percentiles};
use gapless_core::timing::clocks::{cross_bound, cross_host_doubt};
use gapless_otg::metrics::{Flow, FlowFigures};
use serde_json::{json, Value};

use super::{ClusterRun, Member};

/// Where a port's share is: the member and its index in the share's TX or RX list.
fn tx_of<'a>(r: &'a ClusterRun, port: &str) -> Option<(&'a Member, usize)> {
    r.members
        .iter()
        .find_map(|m| m.share.tx.iter().position(|t| t.port == port).map(|k| (m, k)))
}

fn rx_of<'a>(r: &'a ClusterRun, port: &str) -> Option<(&'a Member, usize)> {
    r.members
        .iter()
        .find_map(|m| m.share.rx.iter().position(|t| t.port == port).map(|k| (m, k)))
}

/// One flow, merged: (its JSON for the result, its OTG figures).
fn flow(r: &ClusterRun, name: &str, tx_port: &str, rx_port: &str, running: bool) -> (Value, Flow) {
    let tx = tx_of(r, tx_port).map(|(m, k)| {
        let j = m.share.tx[k].flows.iter().position(|f| f == name).unwrap_or(0);
        (m, m.said()["tx"][k].clone(), j)
    });
    let rx = rx_of(r, rx_port).map(|(m, k)| (m, m.said()["rx"][k].clone()));
    let mut f = Flow {
        started: running,
        ..Flow::default()
    };
    if let Some((_, t, j)) = &tx {
        match t["done"] == true {
            true => {
                let st = &t["result"]["streams"][*j];
                f.frames_tx = st["sent_frames"].as_u64().unwrap_or(0);
                f.bytes_tx = st["sent_bytes_l2"].as_u64().unwrap_or(0);
                f.tx_rate = st["achieved_pps"].as_f64().unwrap_or(0.0);
            }
            false => {
                let st = &t["snapshot"]["streams"][*j]["tx"];
                f.frames_tx = st["sent"].as_u64().unwrap_or(0);
                f.bytes_tx = st["bytes"].as_u64().unwrap_or(0);
                f.tx_rate = st["rate_pps"].as_f64().unwrap_or(0.0);
            }
        }
    }
    let (mut seq, mut latency) = (json!({}), Value::Null);
    if let Some((_, x)) = &rx {
        let find = |list: &Value| {
            list.as_array()
                .and_then(|a| a.iter().find(|s| s["name"] == name))
                .cloned()
        };
        if x["done"] == true {
            let st = find(&x["report"]["streams"]).unwrap_or(Value::Null);
            f.frames_rx = st["rx_frames"].as_u64().unwrap_or(0);
            f.bytes_rx = st["rx_bytes_l2"].as_u64().unwrap_or(0) + 4 * f.frames_rx;
            f.rx_rate = st["interarrival"]["rate_pps"].as_f64().unwrap_or(0.0);
            seq = json!({ "lost": st["seq"]["lost"], "reordered": st["seq"]["reordered"], "duplicated": st["seq"]["duplicated"] });
            latency = st["latency"].clone();
            f.timestamps = st
                .is_object()
                .then(|| json!({ "first_timestamp_ns": st["first_rx_ns"], "last_timestamp_ns": st["last_rx_ns"] }));
        } else if let Some(st) = find(&x["live"]) {
            f.frames_rx = st["received"].as_u64().unwrap_or(0);
            f.bytes_rx = st["bytes"].as_u64().unwrap_or(0) + 4 * f.frames_rx;
            seq = json!({ "lost": st["lost"], "reordered": st["reordered"], "duplicated": st["duplicated"] });
        }
    }
    let bound = match (&tx, &rx) {
        (Some((a, ..)), Some((b, _))) => Some(latency_bound(a, b, &latency)),
        _ => None,
    };
    if latency.is_object() {
        f.latency = Some(
            json!({ "minimum_ns": latency["min_ns"], "maximum_ns": latency["max_ns"], "average_ns": latency["mean_ns"] }),
        );
    }
    let agents =
        json!({ "tx": tx.as_ref().map(|t| t.0.agent.addr.clone()), "rx": rx.as_ref().map(|x| x.0.agent.addr.clone()) });
    let lost_agents: Vec<String> = [tx.as_ref().map(|t| t.0), rx.as_ref().map(|x| x.0)]
        .into_iter()
        .flatten()
        .filter_map(|m| m.lost_why().map(|w| format!("{}: {w}", m.agent.addr)))
        .collect();
    f.extra = json!({ "lost": seq["lost"], "reordered": seq["reordered"], "duplicated": seq["duplicated"],
                      "agents": agents, "latency_bound": bound, "agent_lost": lost_agents,
                      "latency_percentiles_ns": latency["percentiles_ns"] });
    // A lost agent's counts are the last it reported: the sender may have sent more, the
    // meter may have received more.
    let fin = |side: Option<&Member>, done: bool| side.is_some_and(|m| m.lost_why().is_none()) && done;
    let tx_final = fin(
        tx.as_ref().map(|t| t.0),
        tx.as_ref().is_some_and(|t| t.1["done"] == true),
    );
    let rx_final = fin(
        rx.as_ref().map(|x| x.0),
        rx.as_ref().is_some_and(|x| x.1["done"] == true),
    );
    f.extra["tx_final"] = json!(tx_final);
    f.extra["rx_final"] = json!(rx_final);
    let v = json!({
        "name": name, "tx_port": tx_port, "rx_port": rx_port, "agents": agents,
        "tx_final": tx_final, "rx_final": rx_final,
        "frames_tx": f.frames_tx, "bytes_tx": f.bytes_tx, "frames_rx": f.frames_rx, "bytes_rx": f.bytes_rx,
        "seq": seq, "latency": latency, "latency_bound": bound, "agent_lost": lost_agents,
    });
    (v, f)
}

/// The bound on a latency stamped on `a`'s clock and received on `b`'s, and whether it can
/// be believed at the flow's median.
fn latency_bound(a: &Member, b: &Member, latency: &Value) -> Value {
    if std::ptr::eq(a, b) {
        return json!({ "bound_ns": 0, "from": "one host's clock", "trusted": true, "doubt": null });
    }
    let cb = cross_bound(&a.offset, &b.offset, &a.clock, &b.clock);
    let median = latency["percentiles_ns"]["p50"].as_i64();
    let doubt = match median {
        Some(med) => cb
            .contradiction
            .clone()
            .or_else(|| cross_host_doubt(&a.clock, &b.clock, cb.bound_ns, med)),
        None => Some("no latency measured yet".to_string()),
    };
    json!({ "bound_ns": cb.bound_ns, "from": cb.from, "measured_offset_ns": cb.measured_ns,
            "measured_bound_ns": cb.measured_bound_ns, "state_bound_ns": cb.state_bound_ns,
            "trusted": doubt.is_none(), "doubt": doubt })
}

/// Every flow of the run: its OTG figures.
pub fn figures(r: &ClusterRun) -> Vec<FlowFigures> {
    let running = !r.ended.load(std::sync::atomic::Ordering::Acquire);
    r.plan
        .flows
        .iter()
        .map(|(n, tx, rx)| {
            let (_, f) = flow(r, n, tx, &rx[0], running);
            (n.clone(), tx.clone(), rx[0].clone(), f)
        })
        .collect()
}

/// The run's result: agents, flows, ports and the verdict.
pub fn result(r: &ClusterRun, ending: &str) -> Value {
    let flows: Vec<Value> = r
        .plan
        .flows
        .iter()
        .map(|(n, tx, rx)| flow(r, n, tx, &rx[0], ending == "running").0)
        .collect();
    let agents: Vec<Value> = r.members.iter().map(|m| agent(r, m)).collect();
    let ports: Vec<Value> = r.plan.ports.iter().map(|p| port(&p.name, &flows)).collect();
    let doubts: Vec<Value> = flows
        .iter()
        .filter(|f| f["latency_bound"]["trusted"] == false)
        .map(|f| json!({ "flow": f["name"], "why": f["latency_bound"]["doubt"] }))
        .collect();
    let skews: Vec<i64> = agents
        .iter()
        .flat_map(|a| a["start_skew_ns"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["skew_ns"].as_i64())
        .collect();
    json!({
        "spans_hosts": true,
        "run": r.run,
        "t0_unix_ns": r.t0_ns,
        "setup_to_t0_ns": r.t0_ns - r.asked_ns,
        "polls": r.polls.load(std::sync::atomic::Ordering::Relaxed),
        "ending": ending,
        "agents": agents,
        "flows": flows,
        "ports": ports,
        "verdict": {
            "ending": ending,
            "latency": if doubts.is_empty() { json!("trusted") } else { json!("NOT trusted") },
            "latency_doubts": doubts,
            "max_start_skew_ns": skews.iter().map(|s| s.abs()).max(),
            "agents_lost": r.members.iter().filter_map(|m| m.lost_why().map(|w| json!({ "agent": m.agent.addr, "why": w }))).collect::<Vec<_>>(),
        },
    })
}

fn agent(r: &ClusterRun, m: &Member) -> Value {
    let moved = super::translated(&r.members);
    let skews: Vec<Value> = m.said()["tx"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| json!({ "port": t["port"], "skew_ns": t["start_skew_ns"] }))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "agent": m.agent.addr,
        "tx_ports": m.share.tx.iter().map(|t| t.port.clone()).collect::<Vec<_>>(),
        "rx_ports": m.share.rx.iter().map(|t| t.port.clone()).collect::<Vec<_>>(),
        "clock": m.clock,
        "clock_untrusted": m.clock.untrusted(),
        "offset": m.offset,
        "start_ns": m.start_ns(r.t0_ns, moved),
        "start_from": if moved {
            "T0 moved by its measured offset (a clock is not synchronised)"
        } else {
            "T0 on its own synchronised clock"
        },
        "start_skew_ns": skews,
        "lost": m.lost_why(),
    })
}

/// A port's totals, and its received flows' latency histograms added exactly.
fn port(name: &str, flows: &[Value]) -> Value {
    let sum = |key: &str, side: &str| -> u64 {
        flows
            .iter()
            .filter(|f| f[side] == name)
            .map(|f| f[key].as_u64().unwrap_or(0))
            .sum()
    };
    let mut hist: Option<hdrhistogram::Histogram<u64>> = None;
    let mut unit = None;
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    for f in flows.iter().filter(|f| f["rx_port"] == name) {
        let l = &f["latency"];
        let Some(h) = l["histogram_v2_deflate_b64"]
            .as_str()
            .and_then(|b| hist_from_b64(b).ok())
        else {
            continue;
        };
        if unit.is_some_and(|u| Some(u) != l["unit_ns"].as_u64()) || l["negative"].as_u64().unwrap_or(0) > 0 {
            // Histograms in other units, or with negative latencies, do not add exactly.
            hist = None;
            break;
        }
        unit = l["unit_ns"].as_u64();
        min = min.min(l["min_ns"].as_i64().unwrap_or(i64::MAX));
        max = max.max(l["max_ns"].as_i64().unwrap_or(i64::MIN));
        match hist.as_mut() {
            Some(t) => {
                let _ = t.add(&h);
            }
            None => hist = Some(h),
        }
    }
    let latency = hist.filter(|h| !h.is_empty()).map(|h| {
        let u = unit.unwrap_or(1);
        json!({ "count": h.len(), "unit_ns": u, "min_ns": min, "max_ns": max,
                "percentiles_ns": Percentiles::of(&h, u, max.max(0) as u64), "histogram_v2_deflate_b64": hist_b64(&h) })
    });
    json!({ "name": name, "frames_tx": sum("frames_tx", "tx_port"), "frames_rx": sum("frames_rx", "rx_port"), "latency": latency })
}

/// The lost agents, for the run's error.
pub fn lost_text(r: &ClusterRun) -> String {
    let lost: Vec<String> = r
        .members
        .iter()
        .filter_map(|m| m.lost_why().map(|w| format!("agent {}: {w}", m.agent.addr)))
        .collect();
    format!(
        "{}. Every count received before is kept. Fix: check the agent and its management link, then start again",
        lost.join("; ")
    )
}
