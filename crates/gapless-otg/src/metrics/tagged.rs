//! A flow's `tagged_metrics`: its received frames by the value of its metric tags (counted by
//! the meter, `gapless_core::meter::tags`), filtered as a `MetricsRequest`'s
//! `flow.tagged_metrics` asks.
//!
//! What is measured: `frames_rx`, `bytes_rx` (with the FCS, as the flow's), the first and last
//! arrival, and `frames_rx_rate` (the flow's receive rate split by the value's share of its
//! frames). A tag on the received frame has no transmitted count, so `frames_tx` and `bytes_tx`
//! are left out rather than written as 0.

use std::collections::HashMap;

use gapless_core::meter::tags::TagField;
use serde_json::{json, Value};

use crate::error::OtgError;

/// The counters a request's `metric_names` may name (the model's list; those of them not
/// measured here are never given).
const NAMES: [&str; 16] = [
    "frames_tx",
    "frames_rx",
    "bytes_tx",
    "bytes_rx",
    "frames_tx_rate",
    "frames_rx_rate",
    "tx_l1_rate_bps",
    "rx_l1_rate_bps",
    "tx_rate_bytes",
    "rx_rate_bytes",
    "tx_rate_bps",
    "rx_rate_bps",
    "tx_rate_kbps",
    "rx_rate_kbps",
    "tx_rate_mbps",
    "rx_rate_mbps",
];

/// `flow.tagged_metrics` of a `MetricsRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    pub include: bool,
    pub include_empty: bool,
    /// The counters to give (all when empty).
    pub names: Vec<String>,
    /// Only values whose tag `name` is one of these (as hex), each tag named.
    pub values: Vec<(String, Vec<u64>)>,
}

impl Default for TagFilter {
    fn default() -> Self {
        TagFilter {
            include: true,
            include_empty: false,
            names: Vec::new(),
            values: Vec::new(),
        }
    }
}

/// A hex value (`0x2e`, `2E`) as a number.
fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    u64::from_str_radix(digits, 16).ok()
}

impl TagFilter {
    /// Reads `req` (`flow.tagged_metrics`, at `flow.tagged_metrics`); absent is the model's
    /// default: included, without empty ones, every counter.
    pub fn read(req: &Value) -> Result<TagFilter, OtgError> {
        let at = "flow.tagged_metrics";
        let mut f = TagFilter::default();
        if req.is_null() {
            return Ok(f);
        }
        f.include = req["include"].as_bool().unwrap_or(true);
        f.include_empty = req["include_empty_metrics"].as_bool().unwrap_or(false);
        for (i, n) in req["metric_names"].as_array().into_iter().flatten().enumerate() {
            let n = n.as_str().unwrap_or_default();
            if !NAMES.contains(&n) {
                return Err(OtgError::invalid(format!(
                    "{at}.metric_names[{i}]: {n:?} is not a tagged metric; give some of {}",
                    NAMES.join(", ")
                )));
            }
            f.names.push(n.to_string());
        }
        for (i, flt) in req["filters"].as_array().into_iter().flatten().enumerate() {
            let name = flt["name"].as_str().unwrap_or_default().to_string();
            let mut vals = Vec::new();
            for (j, v) in flt["values"].as_array().into_iter().flatten().enumerate() {
                let n = v.as_str().and_then(hex).ok_or_else(|| {
                    OtgError::invalid(format!(
                        "{at}.filters[{i}].values[{j}]: {v} is not a hex value; give it as \"0x2e\""
                    ))
                })?;
                vals.push(n);
            }
            f.values.push((name, vals));
        }
        Ok(f)
    }

    fn wants(&self, counter: &str) -> bool {
        self.names.is_empty() || self.names.iter().any(|n| n == counter)
    }
}

/// A flow's counts that its tagged metrics are shares of.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub frames_rx: u64,
    pub rx_rate: f64,
    pub frames_tx: u64,
    pub tx_rate: f64,
    /// The frames sent with each value of the tags, when they are known (tags on the sent
    /// fields, [`crate::flows::tags::tx_counts`]).
    pub sent: Option<HashMap<Vec<u64>, u64>>,
}

/// The `tagged_metrics` of a flow whose meter counted `tags` (its `TagsRx` JSON), filtered as
/// `filter` asks: a value received, or sent (with its `frames_rx` 0 when none of it came).
pub fn tagged_metrics(tags: &Value, t: &Totals, filter: &TagFilter) -> Vec<Value> {
    if !filter.include {
        return Vec::new();
    }
    let fields: Vec<TagField> = serde_json::from_value(tags["tags"].clone()).unwrap_or_default();
    let mut keys: Vec<(Vec<u64>, &Value)> = Vec::new();
    for v in tags["values"].as_array().into_iter().flatten() {
        let values: Vec<u64> = v["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        keys.push((values, v));
    }
    // By hash: up to 4,096 values received against as many sent.
    let received: std::collections::HashSet<&[u64]> = keys.iter().map(|(x, _)| x.as_slice()).collect();
    let mut unseen: Vec<&Vec<u64>> = t
        .sent
        .iter()
        .flat_map(|m| m.keys())
        .filter(|k| !received.contains(k.as_slice()))
        .collect();
    unseen.sort();
    keys.extend(unseen.into_iter().map(|k| (k.clone(), &Value::Null)));
    keys.into_iter()
        .filter(|(values, _)| values.len() == fields.len() && filter.keeps(&fields, values))
        .filter_map(|(values, v)| one(&fields, &values, v, t, filter))
        .collect()
}

impl TagFilter {
    /// Whether the request's `filters` keep a value of the tags.
    fn keeps(&self, fields: &[TagField], values: &[u64]) -> bool {
        self.values.iter().all(|(name, allowed)| {
            fields
                .iter()
                .position(|t| &t.name == name)
                .is_some_and(|k| allowed.is_empty() || values.get(k).is_some_and(|x| allowed.contains(x)))
        })
    }
}

/// One value's entry (`v`: what the meter counted of it, null when none came), or none when
/// it is empty and empty ones are not asked for.
fn one(fields: &[TagField], values: &[u64], v: &Value, t: &Totals, filter: &TagFilter) -> Option<Value> {
    let frames = v["frames"].as_u64().unwrap_or(0);
    let tags: Vec<Value> = fields
        .iter()
        .zip(values)
        .map(|(f, x)| json!({ "name": f.name, "value": { "choice": "hex", "hex": f.hex(*x) } }))
        .collect();
    let share = |n: u64, of: u64| if of > 0 { n as f64 / of as f64 } else { 0.0 };
    let mut counters = vec![
        ("frames_rx", json!(frames)),
        ("bytes_rx", json!(v["bytes"].as_u64().unwrap_or(0) + 4 * frames)),
        ("frames_rx_rate", json!(t.rx_rate * share(frames, t.frames_rx))),
    ];
    if let Some(sent) = &t.sent {
        let n = sent.get(values).copied().unwrap_or(0);
        counters.push(("frames_tx", json!(n)));
        counters.push(("frames_tx_rate", json!(t.tx_rate * share(n, t.frames_tx))));
    }
    let mut m = json!({ "tags": tags });
    let mut any = false;
    for (k, x) in counters.into_iter().filter(|(k, _)| filter.wants(k)) {
        any |= x.as_f64().is_some_and(|n| n > 0.0);
        m[k] = x;
    }
    if v.is_object() {
        m["timestamps"] = json!({ "first_timestamp_ns": v["first_rx_ns"], "last_timestamp_ns": v["last_rx_ns"] });
    }
    (any || filter.include_empty).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx(frames_rx: u64, rx_rate: f64) -> Totals {
        Totals {
            frames_rx,
            rx_rate,
            ..Totals::default()
        }
    }

    #[test]
    fn sent_values_are_counted_and_one_never_received_shows_its_loss() {
        let sent = HashMap::from([(vec![10, 0], 40), (vec![46, 0], 70), (vec![18, 0], 10)]);
        let t = Totals {
            frames_rx: 100,
            rx_rate: 1000.0,
            frames_tx: 120,
            tx_rate: 1200.0,
            sent: Some(sent),
        };
        let got = tagged_metrics(&counted(), &t, &TagFilter::default());
        let by: Vec<(String, u64, u64)> = got
            .iter()
            .map(|m| {
                (
                    m["tags"][0]["value"]["hex"].as_str().unwrap().to_string(),
                    m["frames_tx"].as_u64().unwrap(),
                    m["frames_rx"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            by,
            vec![("0x0a".into(), 40, 30), ("0x2e".into(), 70, 70), ("0x12".into(), 10, 0)]
        );
        assert_eq!(got[1]["frames_tx_rate"].as_f64(), Some(700.0));
    }

    fn counted() -> Value {
        json!({ "tags": [{ "name": "dscp", "bit": 120, "bits": 6 }, { "name": "ecn", "bit": 126, "bits": 2 }],
            "values": [
                { "values": [10, 0], "frames": 30, "bytes": 3000, "first_rx_ns": 5, "last_rx_ns": 9 },
                { "values": [46, 0], "frames": 70, "bytes": 7000, "first_rx_ns": 6, "last_rx_ns": 10 }
            ], "untracked_frames": 0 })
    }

    #[test]
    fn each_value_is_an_entry_with_hex_tags() {
        let got = tagged_metrics(&counted(), &rx(100, 1000.0), &TagFilter::default());
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1]["tags"],
            json!([{ "name": "dscp", "value": { "choice": "hex", "hex": "0x2e" } },
                   { "name": "ecn", "value": { "choice": "hex", "hex": "0x0" } }])
        );
        assert_eq!(
            (got[1]["frames_rx"].as_u64(), got[1]["bytes_rx"].as_u64()),
            (Some(70), Some(7280))
        );
        assert_eq!(got[1]["frames_rx_rate"].as_f64(), Some(700.0));
        assert!(
            got[1].get("frames_tx").is_none(),
            "no transmitted count is measured: {}",
            got[1]
        );
    }

    #[test]
    fn the_request_filters_and_names() {
        let req = json!({ "metric_names": ["frames_rx"], "filters": [{ "name": "dscp", "values": ["0x0A"] }] });
        let f = TagFilter::read(&req).unwrap();
        let got = tagged_metrics(&counted(), &rx(100, 1000.0), &f);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0]["frames_rx"], 30);
        assert!(got[0].get("bytes_rx").is_none(), "only the named counter: {}", got[0]);
        let off = TagFilter::read(&json!({ "include": false })).unwrap();
        assert!(tagged_metrics(&counted(), &rx(100, 1.0), &off).is_empty());
        let tx_only = TagFilter::read(&json!({ "metric_names": ["frames_tx"] })).unwrap();
        assert!(
            tagged_metrics(&counted(), &rx(100, 1.0), &tx_only).is_empty(),
            "empty ones are left out"
        );
        let with_empty = TagFilter {
            include_empty: true,
            ..tx_only
        };
        assert_eq!(tagged_metrics(&counted(), &rx(100, 1.0), &with_empty).len(), 2);
        let bad = TagFilter::read(&json!({ "filters": [{ "name": "dscp", "values": ["zz"] }] })).unwrap_err();
        assert!(bad.errors[0].contains("filters[0].values[0]"), "{bad:?}");
    }
}
