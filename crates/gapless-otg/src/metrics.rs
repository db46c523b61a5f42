//! Run snapshots and results as OTG metrics. A flow's figures come from its run's live
//! snapshot while it runs, and from the stored result once it has ended (so
//! `transmit: stopped` comes with the final receive counts). Every counter is filled (snappi
//! reads a missing one as None); gapless's own figures ride along under `x_gapless`.

pub mod convergence;
pub mod tagged;

use serde_json::{json, Value};

use crate::config::{FlowMetrics, Plan};
use crate::error::OtgError;
use crate::metrics::tagged::{tagged_metrics, TagFilter, Totals};

/// A flow's name, its TX and RX ports, and its figures.
pub type FlowFigures = (String, String, String, Flow);

/// One flow's figures.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Flow {
    pub started: bool,
    /// Started, and paused by `flow_transmit` pause.
    pub paused: bool,
    pub frames_tx: u64,
    pub bytes_tx: u64,
    pub frames_rx: u64,
    pub bytes_rx: u64,
    pub tx_rate: f64,
    pub rx_rate: f64,
    pub latency: Option<Value>,
    pub timestamps: Option<Value>,
    pub extra: Value,
    /// One RX port's entry of a flow metered on several ([`on_port`]): the frames received
    /// over all of them, which loss is counted against.
    pub all_rx: Option<u64>,
    /// A flow with metric tags: its frames by their value (the meter's `TagsRx`), over all
    /// its RX ports.
    pub tags: Option<Value>,
}

impl Flow {
    /// Frames the flow received over all its RX ports.
    pub fn received(&self) -> u64 {
        self.all_rx.unwrap_or(self.frames_rx)
    }
}

/// A flow's figures from its run's live snapshot (`idx`: its stream there).
pub fn from_snapshot(snap: &Value, idx: usize, started: bool) -> Flow {
    let st = &snap["streams"][idx];
    let (tx, rx) = (&st["tx"], &st["rx"]);
    Flow {
        started,
        paused: started && tx["paused"].as_bool().unwrap_or(false),
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
            "loss_episodes": { "count": rx["loss_episodes"], "longest_ns": rx["longest_outage_ns"] },
            "rx_ports": rx["ports"],
        }),
        all_rx: None,
        tags: rx.get("tags").cloned(),
    }
}

/// A flow's figures from its ended run's stored result (or its last checkpoint): run `id`,
/// stream `idx`, the flow `name` as the meter reports it.
pub fn from_result(result: &Value, id: i64, idx: usize, name: &str) -> Flow {
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
        paused: false,
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
            "loss_episodes": rx["loss_episodes"],
            "rx_ports": rx["rx_ports"],
        }),
        all_rx: None,
        tags: rx.get("tags").cloned(),
    }
}

/// The entry of RX port `k` (its index in its meter's ports) of a flow metered on several:
/// what that port received, with the flow's frames over all its ports in `all_rx` (and
/// `x_gapless.all_rx_ports`), which loss is counted against. Its receive rate is the
/// flow's while the port holds the flow's latest frame, else 0 (the traffic moved away).
pub fn on_port(f: &Flow, k: usize) -> Flow {
    let ports = &f.extra["rx_ports"];
    let count = |p: &Value| p.as_u64().or(p["rx_frames"].as_u64()).unwrap_or(0);
    let last = |p: &Value| p["last_rx_ns"].as_u64().unwrap_or(0);
    let all: Vec<Value> = ports.as_array().cloned().unwrap_or_default();
    let mine = all.get(k).cloned().unwrap_or(Value::Null);
    let latest = all
        .iter()
        .enumerate()
        .max_by_key(|(_, p)| (last(p), count(p)))
        .map(|(i, _)| i);
    let mut out = f.clone();
    out.frames_rx = count(&mine);
    out.bytes_rx = match mine["rx_bytes_l2"].as_u64() {
        Some(b) => with_fcs(Some(b), Some(out.frames_rx)),
        // A live count: the flow's bytes in proportion.
        None if f.frames_rx > 0 => f.bytes_rx * out.frames_rx / f.frames_rx,
        None => 0,
    };
    if latest != Some(k) || out.frames_rx == 0 {
        out.rx_rate = 0.0;
    }
    if let Some(t) = out.timestamps.as_mut().filter(|_| mine.is_object()) {
        *t = json!({ "first_timestamp_ns": mine["first_rx_ns"], "last_timestamp_ns": mine["last_rx_ns"] });
    }
    out.all_rx = Some(f.frames_rx);
    // The tags are counted over every port: given once, on the first port's entry.
    if k > 0 {
        out.tags = None;
    }
    out.extra["all_rx_ports"] = json!({ "frames_rx": f.frames_rx, "bytes_rx": f.bytes_rx });
    out
}

/// Received bytes as OTG counts them: with the 4-byte FCS the capture does not see.
fn with_fcs(bytes: Option<u64>, frames: Option<u64>) -> u64 {
    bytes.unwrap_or(0) + 4 * frames.unwrap_or(0)
}

/// A flow's entry of `flow_metrics`, with latency and timestamps where its `metrics` asks
/// for them. gapless stamps a frame just before its send (its first bit is not out yet) and
/// when the receiver has it whole (its last bit is in): `cut_through` (first bit out to first
/// bit in) takes one frame's serialization time off that, `store_forward` (last bit out to
/// first bit in) two, at the RX port's `layer1` speed; without a speed nothing is taken off,
/// and `x_gapless.latency_mode` says so.
pub fn flow_json(name: &str, tx: &str, rx: &str, f: &Flow, m: &FlowMetrics, tf: &TagFilter) -> Value {
    let loss = if f.frames_tx > 0 {
        (f.frames_tx.saturating_sub(f.received())) as f64 * 100.0 / f.frames_tx as f64
    } else {
        0.0
    };
    let mut v = json!({
        "name": name, "port_tx": tx, "port_rx": rx,
        "transmit": match (f.started, f.paused) {
            (true, true) => "paused",
            (true, false) => "started",
            _ => "stopped",
        },
        "frames_tx": f.frames_tx, "frames_rx": f.frames_rx,
        "bytes_tx": f.bytes_tx, "bytes_rx": f.bytes_rx,
        "frames_tx_rate": f.tx_rate, "frames_rx_rate": f.rx_rate,
        "loss": loss,
        "x_gapless": f.extra,
    });
    if let Some(l) = f.latency.as_ref().filter(|_| m.latency) {
        let (lat, note) = latency_in_mode(l, f, m);
        v["latency"] = lat;
        v["x_gapless"]["latency_mode"] = json!(note);
    }
    if let Some(t) = f.timestamps.as_ref().filter(|_| m.timestamps) {
        v["timestamps"] = t.clone();
    }
    if let Some(t) = f.tags.as_ref().filter(|_| tf.include) {
        let totals = Totals {
            frames_rx: f.received(),
            rx_rate: f.rx_rate,
            frames_tx: f.frames_tx,
            tx_rate: f.tx_rate,
            sent: crate::flows::tags::tx_counts(&m.tx_tags, f.frames_tx),
        };
        v["tagged_metrics"] = json!(tagged_metrics(t, &totals, tf));
    }
    if m.loss_duration {
        v["packet_loss_duration"] = json!({ "value": loss_duration_ms(f) });
        let longest = f.extra["loss_episodes"]["longest_ns"].as_f64().unwrap_or(0.0);
        v["x_gapless"]["longest_outage_ms"] = json!(longest / 1e6);
    }
    v
}

/// The model's estimate of the time traffic was lost, in ms: the frames lost (sent less
/// received) at the flow's rate (frames sent per second). The outage the meter measured,
/// to the frame, is `x_gapless.longest_outage_ms` beside it.
fn loss_duration_ms(f: &Flow) -> f64 {
    let lost = f.frames_tx.saturating_sub(f.received()) as f64;
    if f.tx_rate > 0.0 {
        lost / f.tx_rate * 1e3
    } else {
        0.0
    }
}

/// The latency figures in the flow's mode, and what was taken off.
fn latency_in_mode(l: &Value, f: &Flow, m: &FlowMetrics) -> (Value, String) {
    let mode = if m.cut_through { "cut_through" } else { "store_forward" };
    let Some(bps) = m.link_bps.filter(|b| *b > 0.0 && f.frames_rx > 0) else {
        return (
            l.clone(),
            format!("{mode}: the RX port has no layer1 speed, so no serialization time was taken off (first bit out, before the send, to last bit in)"),
        );
    };
    let frame_bits = (f.bytes_rx as f64 / f.frames_rx as f64) * 8.0;
    let off = frame_bits / bps * 1e9 * if m.cut_through { 1.0 } else { 2.0 };
    let less = |k: &str| l[k].as_f64().map(|x| json!((x - off).max(0.0)));
    let mut out = l.clone();
    for k in ["minimum_ns", "maximum_ns", "average_ns"] {
        if let Some(x) = less(k) {
            out[k] = x;
        }
    }
    (
        out,
        format!(
            "{mode}: {off:.1} ns of serialization taken off at {:.0} Mbit/s",
            bps / 1e6
        ),
    )
}

/// Each port's sums over the flows it sends or receives.
/// `flows` holds every flow's figures: (name, tx port, rx port, figures), a flow with
/// several RX ports once per port (its TX counts are taken once).
pub fn port_metrics(plan: &Plan, flows: &[FlowFigures], names: &[String]) -> Result<Vec<Value>, OtgError> {
    if let Some(n) = names.iter().find(|n| !plan.ports.iter().any(|p| &p.name == *n)) {
        return Err(OtgError::invalid(format!("port_names: no port named {n:?}")));
    }
    let out = plan
        .ports
        .iter()
        .filter(|p| names.is_empty() || names.contains(&p.name))
        .map(|p| {
            let sent = flows
                .iter()
                .enumerate()
                .filter(|(i, f)| f.1 == p.name && !flows[..*i].iter().any(|g| g.0 == f.0))
                .map(|(_, f)| f);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            frames_tx: 10,
            frames_rx: 10,
            bytes_rx: 1250 * 10,
            latency: Some(json!({ "minimum_ns": 5000.0, "maximum_ns": 9000.0, "average_ns": 6000.0 })),
            timestamps: Some(json!({ "first_timestamp_ns": 1, "last_timestamp_ns": 2 })),
            extra: json!({}),
            ..Flow::default()
        }
    }

    #[test]
    fn a_port_entry_counts_its_port_and_loss_counts_every_port() {
        let mut f = flow();
        f.frames_tx = 12;
        f.extra = json!({ "rx_ports": [
            { "rx_frames": 6, "rx_bytes_l2": 600, "first_rx_ns": 1, "last_rx_ns": 5 },
            { "rx_frames": 4, "rx_bytes_l2": 400, "first_rx_ns": 8, "last_rx_ns": 9 } ] });
        f.rx_rate = 100.0;
        let (a, b) = (on_port(&f, 0), on_port(&f, 1));
        assert_eq!((a.frames_rx, a.bytes_rx, b.frames_rx, b.bytes_rx), (6, 624, 4, 416));
        assert_eq!(
            (a.rx_rate, b.rx_rate),
            (0.0, 100.0),
            "the rate is the port's that holds the latest frame"
        );
        let m = FlowMetrics {
            timestamps: true,
            ..FlowMetrics::default()
        };
        let v = flow_json("f", "p1", "p3", &b, &m, &TagFilter::default());
        let loss = v["loss"].as_f64().unwrap();
        assert!(
            (loss - 2.0 * 100.0 / 12.0).abs() < 1e-9,
            "loss over both ports: 2 of 12, got {loss}"
        );
        assert_eq!(v["timestamps"]["first_timestamp_ns"], 8);
        assert_eq!(v["x_gapless"]["all_rx_ports"]["frames_rx"], 10);
        // A live snapshot's per-port counts are plain numbers.
        f.extra = json!({ "rx_ports": [7, 3] });
        assert_eq!((on_port(&f, 0).frames_rx, on_port(&f, 1).frames_rx), (7, 3));
    }

    #[test]
    fn latency_and_timestamps_come_where_asked_in_the_asked_mode() {
        let off = FlowMetrics::default();
        let v = flow_json("f", "p1", "p2", &flow(), &off, &TagFilter::default());
        assert!(
            v.get("latency").is_none() && v.get("timestamps").is_none(),
            "expected neither unless asked: {v}"
        );
        // 1250-byte frames at 10 Gbit/s: 1000 ns each to serialize.
        let sf = FlowMetrics {
            latency: true,
            timestamps: true,
            link_bps: Some(10e9),
            ..off.clone()
        };
        let v = flow_json("f", "p1", "p2", &flow(), &sf, &TagFilter::default());
        assert_eq!(
            v["latency"],
            json!({ "minimum_ns": 3000.0, "maximum_ns": 7000.0, "average_ns": 4000.0 }),
            "store_forward: two frame times off"
        );
        assert_eq!(v["timestamps"]["last_timestamp_ns"], 2);
        let ct = FlowMetrics {
            cut_through: true,
            ..sf.clone()
        };
        assert_eq!(
            flow_json("f", "p1", "p2", &flow(), &ct, &TagFilter::default())["latency"]["average_ns"],
            5000.0,
            "cut_through: one frame time off"
        );
        let lossy = Flow {
            frames_tx: 3_000,
            frames_rx: 2_500,
            tx_rate: 10_000.0,
            extra: json!({ "loss_episodes": { "longest_ns": 50_100_000 } }),
            ..flow()
        };
        let d = flow_json(
            "f",
            "p1",
            "p2",
            &lossy,
            &FlowMetrics {
                loss_duration: true,
                ..off.clone()
            },
            &TagFilter::default(),
        );
        assert_eq!(
            (
                d["packet_loss_duration"]["value"].as_f64(),
                d["x_gapless"]["longest_outage_ms"].as_f64()
            ),
            (Some(50.0), Some(50.1))
        );
        let unknown = FlowMetrics { link_bps: None, ..sf };
        let v = flow_json("f", "p1", "p2", &flow(), &unknown, &TagFilter::default());
        assert_eq!(v["latency"]["average_ns"], 6000.0);
        assert!(
            v["x_gapless"]["latency_mode"]
                .as_str()
                .unwrap()
                .contains("no layer1 speed"),
            "{v}"
        );
    }
}
