//! `update_config` (`PATCH /config`, gRPC `UpdateConfig`): a flow's rate or size changed in
//! the config set last. Sans IO: the patched config, and per flow what a running send loop
//! must do (its rate times a factor) or why it cannot while the flow is sent.

use serde_json::Value;

use crate::config::float;
use crate::error::OtgError;

/// One flow's change.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowChange {
    pub name: String,
    /// Its size changed (a running flow's frames cannot change size).
    pub size: bool,
    /// Its rate changed: the factor from the old rate to the new, or why there is none
    /// (the unit changed between packets, bits and a percentage).
    pub rate: Option<Result<f64, String>>,
}

/// The config with the update applied, and what changed.
#[derive(Debug, Clone)]
pub struct Update {
    pub config: Value,
    pub changes: Vec<FlowChange>,
}

/// Applies a `ConfigUpdate` (`{"choice": "flows", "flows": {"property_names": [...],
/// "flows": [...]}}`) to `raw`, the config set last.
pub fn update(raw: &Value, req: &Value) -> Result<Update, OtgError> {
    let choice = req["choice"].as_str().unwrap_or("flows");
    if choice != "flows" {
        return Err(OtgError::invalid(format!(
            "choice: {choice:?} updates are not supported (flows)"
        )));
    }
    let fu = &req["flows"];
    let props = property_names(&fu["property_names"])?;
    let given = fu["flows"]
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| OtgError::invalid("flows.flows: give the flows to update, each with its name"))?;
    let mut config = raw.clone();
    let mut changes = Vec::new();
    for (k, f) in given.iter().enumerate() {
        let at = format!("flows.flows[{k}]");
        let name = f["name"]
            .as_str()
            .ok_or_else(|| OtgError::invalid(format!("{at}.name: give the flow's name")))?;
        let old = config["flows"]
            .as_array_mut()
            .and_then(|a| a.iter_mut().find(|o| o["name"] == name))
            .ok_or_else(|| OtgError::invalid(format!("{at}.name: the config has no flow {name:?}")))?;
        let mut change = FlowChange {
            name: name.to_string(),
            size: false,
            rate: None,
        };
        if props.0 {
            change.rate = Some(rate_factor(&old["rate"], &f["rate"], &at)?);
            old["rate"] = f["rate"].clone();
        }
        if props.1 {
            change.size = old["size"] != f["size"];
            old["size"] = f["size"].clone();
        }
        changes.push(change);
    }
    Ok(Update { config, changes })
}

/// (rate, size) among `property_names`.
fn property_names(v: &Value) -> Result<(bool, bool), OtgError> {
    let names: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        return Err(OtgError::invalid(
            "flows.property_names: give what to update (rate, size)",
        ));
    }
    if let Some(bad) = names.iter().find(|n| !matches!(**n, "rate" | "size")) {
        return Err(OtgError::invalid(format!(
            "flows.property_names: {bad:?} cannot be updated (rate or size)"
        )));
    }
    Ok((names.contains(&"rate"), names.contains(&"size")))
}

/// A flow rate as (unit kind, value in that kind): packets/s, bits/s, or a percentage.
fn rate_of(r: &Value, at: &str) -> Result<(&'static str, f64), OtgError> {
    let choice = r["choice"]
        .as_str()
        .unwrap_or(if r.get("pps").is_some() { "pps" } else { "default" });
    let val = |k: &str| {
        float(&r[k])
            .filter(|v| *v > 0.0 && v.is_finite())
            .ok_or_else(|| OtgError::invalid(format!("{at}.rate.{k}: give a number above 0")))
    };
    Ok(match choice {
        "default" => ("packets/s", 1000.0),
        "pps" => ("packets/s", val("pps")?),
        "bps" => ("bits/s", val("bps")?),
        "kbps" => ("bits/s", val("kbps")? * 1e3),
        "mbps" => ("bits/s", val("mbps")? * 1e6),
        "gbps" => ("bits/s", val("gbps")? * 1e9),
        "percentage" => ("a percentage", val("percentage")?),
        other => {
            return Err(OtgError::invalid(format!(
                "{at}.rate.choice: {other:?} is not supported"
            )))
        }
    })
}

/// The factor from `old` to `new`, or why a running loop cannot take it.
fn rate_factor(old: &Value, new: &Value, at: &str) -> Result<Result<f64, String>, OtgError> {
    let (ko, vo) = rate_of(old, at)?;
    let (kn, vn) = rate_of(new, at)?;
    Ok(if ko == kn {
        Ok(vn / vo)
    } else {
        Err(format!("its rate changes unit, from {ko} to {kn}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw() -> Value {
        json!({"flows": [
            {"name": "a", "rate": {"choice": "pps", "pps": 1000}, "size": {"choice": "fixed", "fixed": 64}},
            {"name": "b", "rate": {"choice": "mbps", "mbps": 10}}]})
    }

    #[test]
    fn rates_and_sizes_patch_the_config_and_give_each_flow_its_factor() {
        let req = json!({"choice": "flows", "flows": {"property_names": ["rate", "size"], "flows": [
            {"name": "a", "rate": {"choice": "pps", "pps": 2500}, "size": {"choice": "fixed", "fixed": 64}},
            {"name": "b", "rate": {"choice": "kbps", "kbps": 5000}, "size": {"choice": "fixed", "fixed": 128}}]}});
        let u = update(&raw(), &req).unwrap();
        assert_eq!(u.config["flows"][0]["rate"]["pps"], 2500);
        assert_eq!(u.config["flows"][1]["size"]["fixed"], 128);
        assert_eq!(
            u.changes[0],
            FlowChange {
                name: "a".into(),
                size: false,
                rate: Some(Ok(2.5))
            }
        );
        assert_eq!(u.changes[1].rate, Some(Ok(0.5)), "10 Mbit/s to 5000 kbit/s");
        assert!(u.changes[1].size, "b's size changed");
    }

    #[test]
    fn a_unit_change_has_no_factor_and_bad_requests_name_their_path() {
        let req = json!({"flows": {"property_names": ["rate"], "flows": [{"name": "a", "rate": {"choice": "gbps", "gbps": 1}}]}});
        let u = update(&raw(), &req).unwrap();
        assert!(matches!(&u.changes[0].rate, Some(Err(w)) if w.contains("packets/s") && w.contains("bits/s")));
        let cases = [
            (json!({"choice": "ports"}), "\"ports\""),
            (
                json!({"flows": {"property_names": [], "flows": [{"name": "a"}]}}),
                "property_names",
            ),
            (
                json!({"flows": {"property_names": ["tx_rx"], "flows": [{"name": "a"}]}}),
                "\"tx_rx\"",
            ),
            (
                json!({"flows": {"property_names": ["rate"], "flows": []}}),
                "flows.flows",
            ),
            (
                json!({"flows": {"property_names": ["rate"], "flows": [{"name": "zz", "rate": {"pps": 5}}]}}),
                "no flow \"zz\"",
            ),
            (
                json!({"flows": {"property_names": ["rate"], "flows": [{"name": "a", "rate": {"choice": "pps", "pps": 0}}]}}),
                "flows.flows[0].rate.pps",
            ),
        ];
        for (req, want) in cases {
            let e = update(&raw(), &req).unwrap_err();
            assert_eq!(e.code, 400);
            assert!(e.errors[0].contains(want), "expected {want:?} in {:?}", e.errors);
        }
    }
}
