//! OTG convergence metrics (`monitor/metrics` with `choice: convergence`), from the loss
//! episodes of each flow's meter and the link and route events the server made.
//!
//! **The detector.** `events.dp_events.rx_rate_threshold` (percent, default 95) is judged on
//! the flow's RX rate over a window of `W` µs (`events.dp_events.x_gapless.window_us`,
//! default [`DEFAULT_WINDOW_US`]). Only frames that never arrived can pull it down: a gap in
//! arrivals without loss (this machine's host stalls of 0.1-10 ms, a sender that fell behind
//! and caught up) is no event. A run of `n` consecutive frames lost at the flow's rate `r`
//! takes the windowed rate below the threshold `T` when `n > (1 - T) · r · W`, so such an
//! episode is an outage. Its crossings are placed on frame stamps: *below* at the last frame
//! that arrived before it, *above* at the first frame after it, so an outage longer than the
//! window is exact to a frame. `data_plane_convergence_us` is the longest outage's span;
//! with `cp_events` enabled, `control_plane_data_plane_convergence_us` runs from the last
//! failure (a link set down, a route withdrawn) before that outage's end (its request's
//! send) to the outage's end. An outage the sender's own stall explains (`sender_stall_ns`
//! of the meter's outage, marked from the send loops' long stalls) keeps its crossings,
//! marked under `x_gapless`, and is not timed as the device's, unless a failure the server
//! made (not undone before the outage began) caused it: then its frames had nowhere to go,
//! whatever the loop did meanwhile, and the outage is timed.

use serde_json::{json, Value};

use crate::error::OtgError;

/// The detector's window when the config gives none: 10 ms.
pub const DEFAULT_WINDOW_US: u64 = 10_000;

/// A link or route event the server made, as the model names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `link_down`, `link_up`, `route_withdraw`, `route_advertise`.
    pub kind: String,
    /// The port (or route range) it acted on.
    pub source: String,
    /// When its request left and when the kernel acknowledged it (ns, the RX stamps' clock).
    pub begin_ns: u64,
    pub end_ns: u64,
}

/// The config's `events`: whether data-plane and control-plane events are asked for, the
/// threshold (fraction of the rate) and the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Detector {
    pub dp: bool,
    pub cp: bool,
    pub threshold: f64,
    pub window_us: u64,
}

/// Reads `events` of a config.
pub fn detector(cfg: &Value) -> Result<Detector, OtgError> {
    let dp = &cfg["events"]["dp_events"];
    let pct = dp["rx_rate_threshold"].as_f64().unwrap_or(95.0);
    if !(pct > 0.0 && pct <= 100.0) {
        return Err(OtgError::invalid(format!(
            "events.dp_events.rx_rate_threshold: {pct} is not a percentage of the rate (above 0, at most 100)"
        )));
    }
    let window_us = dp["x_gapless"]["window_us"].as_u64().unwrap_or(DEFAULT_WINDOW_US);
    if window_us == 0 {
        return Err(OtgError::invalid(
            "events.dp_events.x_gapless.window_us: give the detector's window in µs, above 0",
        ));
    }
    Ok(Detector {
        dp: dp["enable"].as_bool().unwrap_or(false),
        cp: cfg["events"]["cp_events"]["enable"].as_bool().unwrap_or(false),
        threshold: pct / 100.0,
        window_us,
    })
}

/// The flows a convergence request names (all when none are).
pub fn request(req: &Value) -> Vec<String> {
    req["convergence"]["flow_names"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// One flow's convergence metric from its meter's `loss_episodes` (a stored result's RX
/// stream; Null while nothing is known), the flow's rate in frames/s and the events made.
pub fn metric(name: &str, episodes: &Value, rate_pps: f64, d: &Detector, made: &[Recorded]) -> Value {
    let min_frames = (1.0 - d.threshold) * rate_pps * d.window_us as f64 / 1e6;
    // (from, to, the sender's stall time around it)
    let outages: Vec<(u64, u64, u64)> = episodes["outages"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|o| o["frames"].as_f64().unwrap_or(0.0) > min_frames)
                .filter_map(|o| {
                    let stall = o["sender_stall_ns"].as_u64().unwrap_or(0);
                    Some((o["from_ns"].as_u64()?, o["to_ns"].as_u64()?, stall))
                })
                .collect()
        })
        .unwrap_or_default();
    let failure = |e: &&Recorded| matches!(e.kind.as_str(), "link_down" | "route_withdraw");
    // A failure made before the outage ended, and not undone before it began, caused it,
    // whatever the sender's loop did meanwhile: its frames had nowhere to go.
    let undone = |e: &Recorded, from: u64| {
        made.iter().any(|r| {
            matches!(r.kind.as_str(), "link_up" | "route_advertise") && (e.begin_ns..from).contains(&r.begin_ns)
        })
    };
    let made_in = |from: u64, to: u64| {
        made.iter()
            .filter(failure)
            .any(|e| e.begin_ns <= to && !undone(e, from))
    };
    let mut events: Vec<Value> = made
        .iter()
        .map(|e| json!({ "type": e.kind, "source": e.source, "begin_timestamp_ns": e.begin_ns as f64, "end_timestamp_ns": e.end_ns as f64 }))
        .collect();
    for &(from, to, stall) in outages.iter().filter(|_| d.dp) {
        for (kind, at) in [
            ("flow_rx_rate_below_threshold", from),
            ("flow_rx_rate_above_threshold", to),
        ] {
            let mut e =
                json!({ "type": kind, "source": name, "begin_timestamp_ns": at as f64, "end_timestamp_ns": at as f64 });
            if stall > 0 && !made_in(from, to) {
                e["x_gapless"] = json!({ "sender_stall_ns": stall, "cause": "the sender stalled: not the device's" });
            }
            events.push(e);
        }
    }
    events.sort_by(|a, b| {
        a["begin_timestamp_ns"]
            .as_f64()
            .unwrap_or(0.0)
            .total_cmp(&b["begin_timestamp_ns"].as_f64().unwrap_or(0.0))
    });
    let mut m = json!({ "name": name, "events": events });
    // The device's outages only: one the sender's stall explains is marked, not timed.
    let longest = outages
        .iter()
        .filter(|o| o.2 == 0 || made_in(o.0, o.1))
        .max_by_key(|(f, t, _)| t.saturating_sub(*f));
    if let Some(&(from, to, _)) = longest.filter(|_| d.dp) {
        m["data_plane_convergence_us"] = json!(to.saturating_sub(from) as f64 / 1e3);
        // The cause: the last failure (a link down, a route withdrawn) before the recovery.
        let cause = made
            .iter()
            .filter(|e| e.begin_ns <= to)
            .filter(failure)
            .max_by_key(|e| e.begin_ns);
        if let Some(e) = cause.filter(|_| d.cp) {
            m["control_plane_data_plane_convergence_us"] = json!(to.saturating_sub(e.begin_ns) as f64 / 1e3);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_past_the_threshold_are_events_and_short_losses_and_gaps_are_not() {
        let d = detector(
            &json!({ "events": { "dp_events": { "enable": true, "rx_rate_threshold": 95 },
            "cp_events": { "enable": true } } }),
        )
        .unwrap();
        assert_eq!((d.threshold, d.window_us), (0.95, DEFAULT_WINDOW_US));
        // At 10 000 frames/s a 10 ms window holds 100 frames: more than 5 lost is an outage.
        let eps = json!({ "outages": [
            { "from_ns": 1_000_000, "to_ns": 1_300_000, "frames": 2 },
            { "from_ns": 5_000_000_000u64, "to_ns": 5_250_000_000u64, "frames": 2_499 } ] });
        let made = vec![
            Recorded {
                kind: "link_down".into(),
                source: "p2".into(),
                begin_ns: 4_999_990_000,
                end_ns: 5_000_000_100,
            },
            Recorded {
                kind: "link_up".into(),
                source: "p2".into(),
                begin_ns: 5_249_000_000,
                end_ns: 5_249_000_100,
            },
        ];
        let m = metric("f", &eps, 10_000.0, &d, &made);
        assert_eq!(m["data_plane_convergence_us"], 250_000.0);
        assert_eq!(m["control_plane_data_plane_convergence_us"], 250_010.0);
        let kinds: Vec<&str> = m["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "link_down",
                "flow_rx_rate_below_threshold",
                "link_up",
                "flow_rx_rate_above_threshold"
            ]
        );
        let stalled = json!({ "outages": [{ "from_ns": 1_000_000, "to_ns": 40_000_000, "frames": 300, "sender_stall_ns": 20_000_000 }] });
        let m = metric("f", &stalled, 10_000.0, &d, &[]);
        assert!(
            m.get("data_plane_convergence_us").is_none(),
            "expected a stalled sender's outage not timed: {m}"
        );
        assert_eq!(m["events"][0]["x_gapless"]["sender_stall_ns"], 20_000_000, "{m}");
        // The same outage with a link set down at its start: the link's, whatever the loop
        // did while the link was held (its frames had nowhere to go).
        let down = [Recorded {
            kind: "link_down".into(),
            source: "p1".into(),
            begin_ns: 900_000,
            end_ns: 950_000,
        }];
        let m = metric("f", &stalled, 10_000.0, &d, &down);
        assert_eq!(m["data_plane_convergence_us"], 39_000.0, "{m}");
        assert!(m["events"][1].get("x_gapless").is_none(), "not the sender's: {m}");
        let none = metric("f", &json!({ "outages": [] }), 10_000.0, &d, &[]);
        assert!(
            none.get("data_plane_convergence_us").is_none() && none["events"] == json!([]),
            "{none}"
        );
        assert!(detector(&json!({ "events": { "dp_events": { "rx_rate_threshold": 0 } } })).is_err());
    }
}
