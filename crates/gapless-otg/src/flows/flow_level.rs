//! A flow's fields outside its headers, size and rate, each applied or refused by its path
//! (issue 67): `payload` (fixed bytes, repeated or once, or incrementing bytes), the
//! `duration`'s start `delay` (nanoseconds or microseconds; bytes only at 0) and its
//! inter-frame `gap` (only the model's 12 B: gapless paces by the rate, and the gap follows
//! from it), `metrics.rx_tx_ratio` (only 1), `metrics.predefined_metric_tags` (not yet) and
//! `tx_rx.device.bidirectional` (not yet). `egress_packet` is the tagged metrics' (`tags`).
use serde_json::{json, Value};

use crate::error::Invalid;
use crate::flows::patterns::float;

/// Refuses what the flow sets that gapless does not do; `payload` as the template's.
pub fn check(f: &Value, path: &str) -> Result<Option<Value>, Invalid> {
    if f["tx_rx"]["device"]["bidirectional"].as_bool() == Some(true) {
        return Err(Invalid(format!(
            "{path}.tx_rx.device.bidirectional: not supported yet. Fix: write the return flow as a flow of its own"
        )));
    }
    let m = &f["metrics"];
    if m["predefined_metric_tags"]["rx_name"].as_bool() == Some(true) {
        return Err(Invalid(format!(
            "{path}.metrics.predefined_metric_tags.rx_name: not supported yet. Fix: give each RX port a flow of its own"
        )));
    }
    let r = &m["rx_tx_ratio"];
    let ratio_one = match r["choice"].as_str().unwrap_or("value") {
        "value" => float(&r["value"]).is_none_or(|v| v == 1.0),
        _ => false,
    };
    if !ratio_one {
        return Err(Invalid(format!(
            "{path}.metrics.rx_tx_ratio: only a value of 1 is supported (each frame sent is expected once). Fix: leave rx_tx_ratio out"
        )));
    }
    let d = &f["duration"];
    let choice = d["choice"].as_str().unwrap_or("continuous");
    if let Some(gap) = float(&d[choice]["gap"]).filter(|g| *g != 12.0) {
        return Err(Invalid(format!(
            "{path}.duration.{choice}.gap: {gap} B is not supported (gapless sends at the flow's rate, the gap follows from it). Fix: leave gap at 12, and set the rate"
        )));
    }
    payload(&f["payload"], &format!("{path}.payload"))
}

/// A flow's start delay in ns (`duration.<choice>.delay`), 0 when none is set.
pub fn delay_ns(d: &Value, path: &str) -> Result<u64, Invalid> {
    let ns = match d["choice"].as_str().unwrap_or("bytes") {
        "nanoseconds" => float(&d["nanoseconds"]).unwrap_or(0.0),
        "microseconds" => float(&d["microseconds"]).unwrap_or(0.0) * 1e3,
        "bytes" if float(&d["bytes"]).is_none_or(|b| b == 0.0) => 0.0,
        "bytes" => {
            return Err(Invalid(format!(
                "{path}.bytes: a delay in bytes is not supported (it depends on the line rate). Fix: give it in nanoseconds or microseconds"
            )))
        }
        other => return Err(Invalid(format!("{path}.choice: {other:?} is not bytes, nanoseconds or microseconds"))),
    };
    if !(ns.is_finite() && ns >= 0.0) {
        return Err(Invalid(format!("{path}: give a delay of 0 or more")));
    }
    Ok(ns as u64)
}

/// `payload` as the template's, None at the model's default (zeros, which gapless sends).
fn payload(p: &Value, path: &str) -> Result<Option<Value>, Invalid> {
    if p.is_null() {
        return Ok(None);
    }
    match p["choice"].as_str().unwrap_or("fixed") {
        "fixed" => {
            let pattern = p["fixed"]["pattern"].as_str().unwrap_or("00");
            let hex = pattern.strip_prefix("0x").unwrap_or(pattern);
            if hex.is_empty() || hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Invalid(format!(
                    "{path}.fixed.pattern: {pattern:?} is not whole bytes of hex. Fix: give e.g. \"deadbeef\""
                )));
            }
            let repeat = p["fixed"]["repeat"].as_bool().unwrap_or(true);
            Ok(match (repeat, hex.bytes().all(|b| b == b'0')) {
                (true, true) => None,
                (true, false) => Some(json!({ "hex": hex })),
                (false, _) => Some(json!({ "bytes": hex })),
            })
        }
        "increment_byte" => Ok(Some(json!({ "pattern": "incrementing" }))),
        other => Err(Invalid(format!(
            "{path}.choice: {other:?} is not supported yet (fixed or increment_byte)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(f: Value) -> String {
        check(&f, "flows[0]").expect_err("refused").0
    }

    #[test]
    fn defaults_are_taken_and_each_other_value_applied_or_refused_by_its_path() {
        let dflt = json!({ "duration": { "choice": "continuous", "continuous": { "gap": 12 } },
            "metrics": { "rx_tx_ratio": { "choice": "value", "value": 1.0 }, "predefined_metric_tags": { "rx_name": false } },
            "payload": { "choice": "fixed", "fixed": { "pattern": "00", "repeat": true } } });
        assert_eq!(check(&dflt, "flows[0]").expect("defaults taken"), None);
        let p = |v: Value| check(&json!({ "payload": v }), "f").expect("payload");
        assert_eq!(
            p(json!({ "fixed": { "pattern": "DEADbeef" } })),
            Some(json!({ "hex": "DEADbeef" }))
        );
        assert_eq!(
            p(json!({ "fixed": { "pattern": "aa", "repeat": false } })),
            Some(json!({ "bytes": "aa" }))
        );
        assert_eq!(
            p(json!({ "choice": "increment_byte" })),
            Some(json!({ "pattern": "incrementing" }))
        );
        for (f, want) in [
            (
                json!({ "tx_rx": { "device": { "bidirectional": true } } }),
                "flows[0].tx_rx.device.bidirectional",
            ),
            (
                json!({ "metrics": { "rx_tx_ratio": { "value": 2.0 } } }),
                "flows[0].metrics.rx_tx_ratio",
            ),
            (
                json!({ "metrics": { "rx_tx_ratio": { "choice": "rx_count" } } }),
                "flows[0].metrics.rx_tx_ratio",
            ),
            (
                json!({ "metrics": { "predefined_metric_tags": { "rx_name": true } } }),
                "predefined_metric_tags.rx_name",
            ),
            (
                json!({ "duration": { "choice": "fixed_packets", "fixed_packets": { "gap": 20 } } }),
                "flows[0].duration.fixed_packets.gap: 20 B",
            ),
            (
                json!({ "payload": { "choice": "decrement_word" } }),
                "flows[0].payload.choice: \"decrement_word\"",
            ),
            (
                json!({ "payload": { "fixed": { "pattern": "abc" } } }),
                "flows[0].payload.fixed.pattern",
            ),
        ] {
            let got = err(f);
            assert!(got.contains(want), "expected {want:?}; got {got}");
        }
    }

    #[test]
    fn delays_in_time_units_are_applied_and_bytes_only_at_zero() {
        let d = |v: Value| delay_ns(&v, "d");
        assert_eq!(
            d(json!({ "choice": "microseconds", "microseconds": 2.5 })).expect("us"),
            2500
        );
        assert_eq!(
            d(json!({ "choice": "nanoseconds", "nanoseconds": 700 })).expect("ns"),
            700
        );
        assert_eq!(d(json!({ "choice": "bytes", "bytes": 0 })).expect("0 B"), 0);
        assert_eq!(d(Value::Null).expect("none"), 0);
        assert!(d(json!({ "choice": "bytes", "bytes": 100 }))
            .expect_err("bytes")
            .0
            .contains("d.bytes: a delay in bytes"));
    }
}
