//! IPv4 `options` (OTG 1.62.0 `FlowIpv4Options`) as the template's `ip_options` bytes:
//! `router_alert` (RFC 2113: 0x94 0x04 0x0000), `end_of_options` (0x00) and `custom` (its
//! type byte from the copied flag, class and number, its length as given or `auto`, and its
//! value), in the list's order; the core pads them to whole 32-bit words with zeros. Each
//! custom type part takes a single value, and `timestamp` is refused by its path.

use serde_json::Value;

use crate::error::Invalid;
use crate::flows::patterns::{read, Kind};

/// Most option bytes an IPv4 header holds.
const MAX: usize = 40;

/// The options' bytes as hex, or `None` when the list is absent or empty.
pub fn hex(list: Option<&Value>, at: &str) -> Result<Option<String>, Invalid> {
    let Some(items) = list.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    for (i, o) in items.iter().enumerate() {
        let at = format!("{at}[{i}]");
        match o["choice"].as_str().unwrap_or("router_alert") {
            "router_alert" => bytes.extend_from_slice(&[0x94, 0x04, 0, 0]),
            "end_of_options" => bytes.push(0),
            "custom" => bytes.extend(custom(&o["custom"], &format!("{at}.custom"))?),
            other => {
                return Err(Invalid(format!(
                    "{at}.choice: the {other:?} option is not sent by gapless (router_alert, end_of_options and custom are). Fix: write it as a custom option with its bytes"
                )))
            }
        }
    }
    if bytes.len() > MAX {
        return Err(Invalid(format!(
            "{at}: the options take {} bytes; an IPv4 header holds at most {MAX}. Fix: send fewer or shorter options",
            bytes.len()
        )));
    }
    Ok(Some(gapless_core::packet::whole_frame::hex_of(&bytes)))
}

/// A custom option's bytes: type, length, value.
fn custom(c: &Value, at: &str) -> Result<Vec<u8>, Invalid> {
    let t = &c["type"];
    let part = |k: &str, bits: u32| -> Result<u8, Invalid> {
        let p = read(t.get(k), &format!("{at}.type.{k}"), Kind::Int(bits), k)?;
        if p.op.is_some() {
            return Err(Invalid(format!(
                "{at}.type.{k}: gapless sends one value here, not a list or a counter. Fix: give a single value"
            )));
        }
        Ok(p.first.and_then(|v| v.as_u64()).unwrap_or(0) as u8)
    };
    let kind = part("copied_flag", 1)? << 7 | part("option_class", 2)? << 5 | part("option_number", 5)?;
    let value = value_bytes(c.get("value"), &format!("{at}.value"))?;
    let len = match c["length"]["choice"].as_str().unwrap_or("auto") {
        "value" => c["length"]["value"].as_u64().unwrap_or(0),
        _ => 2 + value.len() as u64,
    };
    let len = u8::try_from(len).map_err(|_| {
        Invalid(format!(
            "{at}.length.value: {len} does not fit the option's length byte (0..=255)"
        ))
    })?;
    Ok([vec![kind, len], value].concat())
}

/// A custom option's `value` (hex; the model's default is "0000").
fn value_bytes(v: Option<&Value>, at: &str) -> Result<Vec<u8>, Invalid> {
    let s = match v {
        None => "0000",
        Some(v) => v
            .as_str()
            .ok_or_else(|| Invalid(format!("{at}: give the option's bytes as a hex string, e.g. \"0000\"")))?,
    };
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() % 2 == 1 || s.len() > 76 {
        return Err(Invalid(format!(
            "{at}: {s:?} is not whole bytes of hex up to 38 bytes. Fix: give an even number of hex digits, at most 76"
        )));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| Invalid(format!("{at}: {s:?} is not hex. Fix: use the digits 0-9 and a-f")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_choice_makes_its_bytes_in_order() {
        let l = json!([
            { "choice": "router_alert" },
            { "choice": "custom", "custom": {
                "type": { "copied_flag": { "value": 1 }, "option_class": { "value": 2 }, "option_number": { "value": 7 } },
                "value": "abcd" } },
            { "choice": "custom", "custom": { "length": { "choice": "value", "value": 9 }, "value": "" } },
            { "choice": "end_of_options" }
        ]);
        let got = hex(Some(&l), "f.ipv4.options").unwrap();
        assert_eq!(
            got.as_deref(),
            Some("94040000c704abcd000900"),
            "expected the options' bytes"
        );
        assert_eq!(hex(Some(&json!([])), "x").unwrap(), None, "an empty list is no options");
    }

    #[test]
    fn what_is_not_sent_is_refused_by_its_path() {
        let cases = [
            (json!([{ "choice": "timestamp" }]), "o[0].choice", "custom option"),
            (
                json!([{ "choice": "custom", "custom": { "type": { "option_number": { "choice": "values", "values": [1, 2] } } } }]),
                "o[0].custom.type.option_number",
                "single value",
            ),
            (
                json!([{ "choice": "custom", "custom": { "value": "abc" } }]),
                "o[0].custom.value",
                "even number",
            ),
            (
                json!([{ "choice": "custom", "custom": { "value": "zz" } }]),
                "o[0].custom.value",
                "not hex",
            ),
            (
                json!([{ "choice": "custom", "custom": { "length": { "choice": "value", "value": 256 } } }]),
                "o[0].custom.length.value",
                "0..=255",
            ),
            (
                json!(vec![json!({ "choice": "router_alert" }); 11]),
                "o: the options take 44",
                "at most 40",
            ),
        ];
        for (l, path, why) in cases {
            let e = hex(Some(&l), "o").expect_err("refused").0;
            assert!(
                e.starts_with(path) && e.contains(why),
                "expected {path:?} refused ({why}); got {e:?}"
            );
        }
    }
}
