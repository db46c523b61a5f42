//! The leaves of the OTG state trees, each with its value typed as its YANG leaf is, made from
//! the `monitor/metrics` JSON the OTG API answers (one source for both APIs).
//!
//! Types (../shared/GNMI.md, checked against ygnmi's decoding): counters and other unsigned
//! integers as `uint_val`; `ieeefloat32` as 4 big-endian bytes (`bytes_val`); decimal64 as a
//! double; strings and enumerations as `string_val`, an enumeration in the YANG's spelling
//! (`UP`, `ESTABLISHED`); booleans as `bool_val`.

use serde_json::Value;

use super::path::{Elem, Path};
use super::schema::{Kind, Schema};

/// A leaf's value, as gNMI's `TypedValue` carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Uint(u64),
    /// An `ieeefloat32`: sent as its 4 big-endian bytes.
    Float32(f32),
    /// A decimal64: sent as a double.
    Double(f64),
    Str(String),
    Bool(bool),
}

/// One leaf of a tree and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    pub path: Path,
    pub value: Scalar,
}

/// Builds the leaves under one list entry, typing each value by the schema.
struct Entry<'a> {
    base: Path,
    out: &'a mut Vec<Leaf>,
}

impl Entry<'_> {
    /// The leaf at `rel` (`state/counters/in-pkts`) below the entry, when `v` is a value its
    /// type takes. A path the schema does not have is a fault of this module: it panics in
    /// tests (every leaf made is checked there) and is left out otherwise.
    fn leaf(&mut self, rel: &str, v: &Value) {
        let mut path = self.base.clone();
        path.0.extend(rel.split('/').map(Elem::new));
        let names: Vec<&str> = path.0.iter().map(|e| e.name.as_str()).collect();
        let node = Schema::get().node(&names).filter(|n| n.kind == Kind::Leaf);
        debug_assert!(node.is_some(), "{path} is not a leaf of the OTG models");
        if let Some(value) = node.and_then(|n| typed(&n.ty, &n.base, &n.enums, v)) {
            self.out.push(Leaf { path, value });
        }
    }
}

/// `v` as a value of a leaf of type `ty` (resolving to `base`), or none when it is not one.
fn typed(ty: &str, base: &str, enums: &[String], v: &Value) -> Option<Scalar> {
    match (ty, base) {
        ("ieeefloat32", _) => v.as_f64().map(|x| Scalar::Float32(x as f32)),
        (_, "decimal64") => v.as_f64().map(Scalar::Double),
        (_, "uint8" | "uint16" | "uint32" | "uint64") => v
            .as_u64()
            .or_else(|| v.as_f64().map(|x| x.max(0.0).round() as u64))
            .map(Scalar::Uint),
        (_, "boolean") => v.as_bool().map(Scalar::Bool),
        (_, "enumeration") => v
            .as_str()
            .map(str::to_ascii_uppercase)
            .filter(|s| enums.contains(s))
            .map(Scalar::Str),
        _ => v.as_str().map(|s| Scalar::Str(s.into())),
    }
}

/// `flows/flow[name]`: one entry per flow. A flow with several RX ports has an entry of
/// `flow_metrics` per port; here it is one flow, its received counts over all of them.
pub fn flows(flow_metrics: &[Value]) -> Vec<Leaf> {
    let mut out = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for n in flow_metrics.iter().filter_map(|m| m["name"].as_str()) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for name in names {
        let mine: Vec<&Value> = flow_metrics.iter().filter(|m| m["name"] == name).collect();
        let m = mine[0];
        let all = &m["x_gapless"]["all_rx_ports"];
        let rx = |k: &str| if all.is_object() { all[k].clone() } else { m[k].clone() };
        let sum = |k: &str| mine.iter().filter_map(|x| x[k].as_f64()).sum::<f64>();
        let ts = |k: &str, first: bool| {
            let v = mine.iter().filter_map(|x| x["timestamps"][k].as_f64());
            if first {
                v.reduce(f64::min)
            } else {
                v.reduce(f64::max)
            }
        };
        let mut e = Entry {
            base: Path(vec![Elem::new("flows"), Elem::new("flow").key("name", name)]),
            out: &mut out,
        };
        e.leaf("state/name", &m["name"]);
        e.leaf("state/transmit", &Value::Bool(m["transmit"] == "started"));
        e.leaf("state/loss-pct", &m["loss"]);
        e.leaf("state/out-frame-rate", &m["frames_tx_rate"]);
        e.leaf("state/in-frame-rate", &sum("frames_rx_rate").into());
        e.leaf("state/counters/out-pkts", &m["frames_tx"]);
        e.leaf("state/counters/out-octets", &m["bytes_tx"]);
        e.leaf("state/counters/in-pkts", &rx("frames_rx"));
        e.leaf("state/counters/in-octets", &rx("bytes_rx"));
        for (k, otg) in [
            ("minimum-latency", "minimum_ns"),
            ("maximum-latency", "maximum_ns"),
            ("average-latency", "average_ns"),
        ] {
            e.leaf(&format!("state/{k}"), &m["latency"][otg]);
        }
        if let (Some(a), Some(b)) = (ts("first_timestamp_ns", true), ts("last_timestamp_ns", false)) {
            e.leaf("state/first-timestamp", &a.into());
            e.leaf("state/last-timestamp", &b.into());
        }
    }
    out
}

/// `ports/port[name]`: link, counters and rates (bits per second, as the model's units say).
pub fn ports(port_metrics: &[Value]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for m in port_metrics {
        let Some(name) = m["name"].as_str() else { continue };
        let mut e = Entry {
            base: Path(vec![Elem::new("ports"), Elem::new("port").key("name", name)]),
            out: &mut out,
        };
        let bps = |k: &str| Value::from(m[k].as_f64().unwrap_or(0.0) * 8.0);
        e.leaf("state/name", &m["name"]);
        e.leaf("state/link", &m["link"]);
        e.leaf("state/out-rate", &bps("bytes_tx_rate"));
        e.leaf("state/in-rate", &bps("bytes_rx_rate"));
        e.leaf("state/counters/out-frames", &m["frames_tx"]);
        e.leaf("state/counters/in-frames", &m["frames_rx"]);
        e.leaf("state/counters/out-octets", &m["bytes_tx"]);
        e.leaf("state/counters/in-octets", &m["bytes_rx"]);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(leaves: &[Leaf], path: &str) -> Option<Scalar> {
        let p = Path::parse(path).unwrap();
        leaves.iter().find(|l| l.path == p).map(|l| l.value.clone())
    }

    #[test]
    fn a_flow_on_two_rx_ports_is_one_entry_with_its_counts_over_both() {
        let entry = |port: &str, rx: u64, rate: f64, first: u64| {
            json!({ "name": "f1", "port_tx": "p1", "port_rx": port, "transmit": "started", "frames_tx": 1000,
                "frames_rx": rx, "bytes_tx": 64000, "bytes_rx": rx * 64, "frames_tx_rate": 100.0, "frames_rx_rate": rate,
                "loss": 10.0, "latency": { "minimum_ns": 1000.0, "maximum_ns": 5000.0, "average_ns": 2500.0 },
                "timestamps": { "first_timestamp_ns": first, "last_timestamp_ns": first + 10 },
                "x_gapless": { "all_rx_ports": { "frames_rx": 900, "bytes_rx": 57600 } } })
        };
        let l = flows(&[entry("p2", 600, 0.0, 50), entry("p3", 300, 90.0, 20)]);
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/counters/in-pkts"),
            Some(Scalar::Uint(900))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/counters/out-pkts"),
            Some(Scalar::Uint(1000))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/in-frame-rate"),
            Some(Scalar::Float32(90.0))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/loss-pct"),
            Some(Scalar::Float32(10.0))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/transmit"),
            Some(Scalar::Bool(true))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/average-latency"),
            Some(Scalar::Uint(2500))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/first-timestamp"),
            Some(Scalar::Double(20.0))
        );
        assert_eq!(
            value(&l, "flows/flow[name=f1]/state/last-timestamp"),
            Some(Scalar::Double(60.0))
        );
        assert_eq!(l.len(), 14, "expected 14 leaves, each once; got {l:?}");
        for leaf in &l {
            assert_eq!(
                Schema::get().check(&leaf.path),
                Ok(()),
                "expected every leaf in the schema"
            );
        }
    }

    #[test]
    fn a_port_has_its_link_as_the_yang_spells_it_and_rates_in_bits() {
        let l = ports(&[
            json!({ "name": "p1", "link": "down", "frames_tx": 5, "frames_rx": 7, "bytes_tx": 320,
            "bytes_rx": 448, "bytes_tx_rate": 1000.0, "bytes_rx_rate": 0.0 }),
        ]);
        assert_eq!(
            value(&l, "ports/port[name=p1]/state/link"),
            Some(Scalar::Str("DOWN".into()))
        );
        assert_eq!(
            value(&l, "ports/port[name=p1]/state/out-rate"),
            Some(Scalar::Float32(8000.0))
        );
        assert_eq!(
            value(&l, "ports/port[name=p1]/state/counters/in-frames"),
            Some(Scalar::Uint(7))
        );
        for leaf in &l {
            assert_eq!(
                Schema::get().check(&leaf.path),
                Ok(()),
                "expected every leaf in the schema"
            );
        }
    }
}
