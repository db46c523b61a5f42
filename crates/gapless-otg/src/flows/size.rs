//! A flow's `size` as the profile's `size`: `fixed` (default 64 B, FCS included as in
//! gapless), `increment` (a ramp), `random` (uniform) and `weight_pairs` (IMIX): the model's
//! presets or custom pairs, on the core's IMIX in `sequence` order, so every cycle holds the
//! exact proportions (weights scaled to integers, then divided by their greatest common
//! divisor). A size below the Ethernet minimum (the `standard_imix` 58 and 62 B, the
//! `ipv6_imix` 60 B) is padded to 64 B, as a MAC pads a runt, with a warning naming it.
use gapless_core::packet::sizes::MIN_FRAME;
use serde_json::{json, Value};

use crate::error::Invalid;
use crate::flows::patterns::{float, num};

/// The model's presets (otg 1.62.0 `Flow.SizeWeightPairs.predefined`): (size, weight).
const PRESETS: [(&str, &[(u32, f64)]); 5] = [
    ("imix", &[(64, 7.0), (570, 4.0), (1518, 1.0)]),
    ("ipsec_imix", &[(90, 58.67), (92, 2.0), (594, 23.66), (1418, 15.67)]),
    ("ipv6_imix", &[(60, 58.67), (496, 2.0), (594, 23.66), (1518, 15.67)]),
    ("standard_imix", &[(58, 58.67), (62, 2.0), (594, 23.66), (1518, 15.67)]),
    ("tcp_imix", &[(90, 58.67), (92, 2.0), (594, 23.66), (1518, 15.67)]),
];

/// The longest IMIX cycle (frames); larger integer weights are scaled down to it.
const MAX_CYCLE: u64 = 100_000;

/// `size` as the profile's `size`, and a warning when it had to change a size or a weight.
pub fn size(s: &Value, path: &str) -> Result<(Value, Option<String>), Invalid> {
    let choice = s["choice"]
        .as_str()
        .unwrap_or(if s.get("fixed").is_some() { "fixed" } else { "default" });
    let n = |v: &Value, k: &str| {
        num(v)
            .map(|n| json!(n))
            .ok_or_else(|| Invalid(format!("{path}.{k}: give a number of bytes")))
    };
    let plain = |v| Ok((v, None));
    match choice {
        "default" => plain(json!(64)),
        "fixed" => plain(n(&s["fixed"], "fixed")?),
        "increment" => {
            let i = &s["increment"];
            let (a, b) = (n(&i["start"], "increment.start")?, n(&i["end"], "increment.end")?);
            plain(json!({ "ramp": [a, b], "step": num(&i["step"]).unwrap_or(1) }))
        }
        "random" => {
            let r = &s["random"];
            let (a, b) = (n(&r["min"], "random.min")?, n(&r["max"], "random.max")?);
            plain(json!({ "kind": "uniform", "min": a, "max": b }))
        }
        "weight_pairs" => weight_pairs(&s["weight_pairs"], &format!("{path}.weight_pairs")),
        other => Err(Invalid(format!(
            "{path}.choice: {other:?} is not supported (fixed, increment, random or weight_pairs)"
        ))),
    }
}

/// `weight_pairs`: a preset (default `imix`) or `custom` pairs, as an IMIX sequence.
fn weight_pairs(w: &Value, path: &str) -> Result<(Value, Option<String>), Invalid> {
    let pairs = match w["choice"].as_str().unwrap_or("predefined") {
        "predefined" => {
            let name = w["predefined"].as_str().unwrap_or("imix");
            let (_, p) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                Invalid(format!(
                    "{path}.predefined: {name:?} is not a preset (imix, ipsec_imix, ipv6_imix, standard_imix, tcp_imix)"
                ))
            })?;
            p.to_vec()
        }
        "custom" => custom(&w["custom"], &format!("{path}.custom"))?,
        other => return Err(Invalid(format!("{path}.choice: {other:?} is not predefined or custom"))),
    };
    let mut said = Vec::new();
    let padded: Vec<u32> = pairs.iter().map(|p| p.0).filter(|s| *s < MIN_FRAME).collect();
    if !padded.is_empty() {
        said.push(format!(
            "frames of {padded:?} B are sent as {MIN_FRAME} B (the Ethernet minimum, FCS included: a MAC pads a shorter frame so)"
        ));
    }
    let (weights, rounded) = integer_weights(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    if rounded {
        said.push(format!(
            "the weights {:?} are sent as {weights:?} in each cycle of {} frames",
            pairs.iter().map(|p| p.1).collect::<Vec<_>>(),
            weights.iter().sum::<u64>()
        ));
    }
    let imix: Vec<Value> = pairs
        .iter()
        .zip(&weights)
        .map(|((s, _), w)| json!([s.max(&MIN_FRAME), w]))
        .collect();
    let warning = (!said.is_empty()).then(|| format!("{path}: {}", said.join("; ")));
    Ok((json!({ "imix": imix, "order": "sequence" }), warning))
}

/// The smallest frame (FCS included) of a profile `size`.
fn smallest(size: &Value) -> Option<u64> {
    let min2 = |a: &Value| Some(a[0].as_u64()?.min(a[1].as_u64()?));
    match size {
        Value::Number(n) => n.as_u64(),
        v if v.get("ramp").is_some() => min2(&v["ramp"]),
        v if v.get("imix").is_some() => v["imix"].as_array()?.iter().filter_map(|p| p[0].as_u64()).min(),
        v => v["min"].as_u64(),
    }
}

/// The bytes before a template's payload: Ethernet, its tags, the IP header and the layer 4
/// header; `None` for a tunnel or ARP, which are not sent unsigned.
fn header_len(t: &Value) -> Option<u64> {
    if t.get("tunnel").is_some() {
        return None;
    }
    let tags = t["vlan"].as_array().map_or(0, |v| v.len() as u64);
    let v6 = t["ip_src"].as_str().is_some_and(|a| a.contains(':'));
    let l4 = match t["l4"].as_str().unwrap_or("udp") {
        "udp" | "icmp" => 8,
        "tcp" => 20,
        "none" => 0,
        _ => return None,
    };
    Some(14 + 4 * tags + if v6 { 40 } else { 20 } + l4)
}

/// A flow whose smallest frame has no room for the 16-byte signature after its headers is
/// sent without one (`signature = false`): the meter counts it by its headers (its plan),
/// and the warning names what it cannot have. `None` when the signature fits.
pub fn unsigned_if_small(stream: &mut Value) -> Option<String> {
    let hdr = header_len(&stream["template"])?;
    let min = smallest(&stream["size"])?;
    let need = hdr + 16 + 4;
    if min >= need {
        return None;
    }
    stream["signature"] = json!(false);
    Some(format!(
        "its {min} B frames have no room for gapless's 16-byte signature after their {} B of headers (and FCS), which needs {need} B: it is sent without one and counted by its headers (VLAN, addresses, protocol, ports), so it has frame, byte and rate counts but no latency, sequence loss, reordering or duplicates. Fix: frames of at least {need} B give every figure",
        hdr + 4
    ))
}

/// `custom` pairs: each size (12..=65535 in the model) and a positive weight.
fn custom(list: &Value, path: &str) -> Result<Vec<(u32, f64)>, Invalid> {
    let items = list
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| Invalid(format!("{path}: give at least one {{size, weight}} pair")))?;
    items
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let size = num(&p["size"]).unwrap_or(64);
            let weight = if p.get("weight").is_some() {
                float(&p["weight"])
            } else {
                Some(1.0)
            };
            let size = u32::try_from(size)
                .ok()
                .filter(|s| (12..=65535).contains(s))
                .ok_or_else(|| Invalid(format!("{path}[{k}].size: {size} is outside 12..=65535")))?;
            match weight {
                Some(w) if w.is_finite() && w > 0.0 => Ok((size, w)),
                _ => Err(Invalid(format!("{path}[{k}].weight: give a positive number"))),
            }
        })
        .collect()
}

/// The weights as integers in the same proportions: scaled by the least power of ten (up to
/// 10^4) that makes each whole, then divided by their greatest common divisor; a cycle over
/// [`MAX_CYCLE`] frames is scaled down to it. Whether a proportion had to be rounded.
fn integer_weights(w: &[f64]) -> (Vec<u64>, bool) {
    let whole = |scale: f64| w.iter().all(|x| ((x * scale).round() - x * scale).abs() < 1e-6);
    let scale = [1.0, 10.0, 100.0, 1e3, 1e4].into_iter().find(|s| whole(*s));
    let mut rounded = scale.is_none();
    let scale = scale.unwrap_or(1e4);
    let mut ints: Vec<u64> = w.iter().map(|x| ((x * scale).round() as u64).max(1)).collect();
    let g = ints.iter().copied().fold(0, gcd);
    ints.iter_mut().for_each(|x| *x /= g.max(1));
    let total: u64 = ints.iter().sum();
    if total > MAX_CYCLE {
        rounded = true;
        let f = MAX_CYCLE as f64 / total as f64;
        ints.iter_mut()
            .for_each(|x| *x = ((*x as f64 * f).round() as u64).max(1));
    }
    (ints, rounded)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_keep_the_models_proportions_in_each_cycle() {
        let (v, w) = size(&json!({ "choice": "weight_pairs" }), "flows[0].size").expect("imix");
        assert_eq!(
            v,
            json!({ "imix": [[64, 7], [570, 4], [1518, 1]], "order": "sequence" })
        );
        assert_eq!(w, None, "expected no warning for imix");
        let tcp = json!({ "choice": "weight_pairs", "weight_pairs": { "predefined": "tcp_imix" } });
        let (v, w) = size(&tcp, "p").expect("tcp_imix");
        assert_eq!(v["imix"], json!([[90, 5867], [92, 200], [594, 2366], [1518, 1567]]));
        assert_eq!(w, None, "expected 58.67 etc. to scale exactly by 100");
    }

    #[test]
    fn a_runt_preset_size_is_padded_with_a_warning_naming_it() {
        let s = json!({ "choice": "weight_pairs", "weight_pairs": { "predefined": "standard_imix" } });
        let (v, w) = size(&s, "flows[2].size").expect("standard_imix");
        assert_eq!(v["imix"][0], json!([64, 5867]));
        assert_eq!(v["imix"][1], json!([64, 200]));
        let w = w.expect("a warning");
        assert!(
            w.starts_with("flows[2].size.weight_pairs: frames of [58, 62] B are sent as 64 B"),
            "got {w}"
        );
    }

    #[test]
    fn custom_weights_become_the_smallest_integers_in_proportion_or_say_how_rounded() {
        let c =
            |pairs: Value| json!({ "choice": "weight_pairs", "weight_pairs": { "choice": "custom", "custom": pairs } });
        let (v, w) = size(
            &c(json!([{ "size": 128, "weight": 0.5 }, { "size": 256, "weight": 1.5 }])),
            "p",
        )
        .expect("ok");
        assert_eq!((v["imix"].clone(), w), (json!([[128, 1], [256, 3]]), None));
        let (v, w) = size(&c(json!([{ "size": 128, "weight": 1.0 / 3.0 }, { "size": 256 }])), "p").expect("ok");
        assert_eq!(v["imix"], json!([[128, 3333], [256, 10000]]));
        assert!(w.expect("rounded").contains("are sent as [3333, 10000]"));
        for (pairs, want) in [
            (
                json!([{ "size": 128, "weight": 0 }]),
                "p.weight_pairs.custom[0].weight: give a positive number",
            ),
            (
                json!([{ "size": 8 }]),
                "p.weight_pairs.custom[0].size: 8 is outside 12..=65535",
            ),
            (json!([]), "p.weight_pairs.custom: give at least one"),
        ] {
            let e = size(&c(pairs), "p").expect_err("refused");
            assert!(e.0.contains(want), "expected {want:?}; got {}", e.0);
        }
    }
}
