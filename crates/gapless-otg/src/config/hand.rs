//! The fields of a flow's headers that gapless computes unless told otherwise (versions,
//! lengths, protocol numbers, checksums), set by hand as users set them to test a device's
//! error counters: sent as given through the core's `[template.hand]`
//! (gapless_core::packet::hand). A value equal to the one gapless writes anyway, `auto`, and
//! `generated: good` leave the field computed; anything the core cannot send is refused with
//! its path. In a tunnel only the inner packet's fields are set by hand (the outer headers'
//! and every Ethernet header's EtherType stay gated by [`crate::flows::model`]).

use serde_json::{json, Map, Value};

use crate::error::Invalid;
use crate::flows::patterns::{read, Kind};

/// (header, field, key of `[template.hand]`, bits).
const NUMBERS: &[(&str, &str, &str, u32)] = &[
    ("ethernet", "ether_type", "ether_type", 16),
    ("ipv4", "version", "ip_version", 4),
    ("ipv4", "header_length", "ip_header_length", 4),
    ("ipv4", "total_length", "ip_length", 16),
    ("ipv4", "protocol", "ip_protocol", 8),
    ("ipv6", "version", "ip_version", 4),
    ("ipv6", "payload_length", "ip_length", 16),
    ("ipv6", "next_header", "ip_protocol", 8),
    ("udp", "length", "l4_length", 16),
    ("tcp", "data_offset", "tcp_data_offset", 4),
];

/// (header, field, key of `[template.hand]`): checksums (`generated` good or bad, `custom`).
const CHECKSUMS: &[(&str, &str, &str)] = &[
    ("ipv4", "header_checksum", "ip_checksum"),
    ("udp", "checksum", "l4_checksum"),
    ("tcp", "checksum", "l4_checksum"),
    ("icmp", "checksum", "l4_checksum"),
    ("icmpv6", "checksum", "l4_checksum"),
];

/// The hand fields of header `choice` (its object `b`, at path `at`; `after` the header
/// after it, if any) into `hand`. The protocol of an IP header that ends the packet is not
/// one: it is the packet's own (`l4 = "none"`). `tunnel`: the flow has one (its Ethernet
/// headers' EtherTypes are then not set by hand).
pub fn of_header(
    choice: &str,
    b: &Value,
    at: &str,
    after: Option<&Value>,
    tunnel: bool,
    hand: &mut Map<String, Value>,
) -> Result<(), Invalid> {
    let next = after.and_then(|h| h["choice"].as_str()).unwrap_or_default();
    for &(_, field, key, bits) in NUMBERS.iter().filter(|n| n.0 == choice) {
        let last_ip = next.is_empty() && matches!(field, "protocol" | "next_header");
        // A tunnel flow's EtherTypes are gapless's, gated by crate::flows::model.
        if last_ip || tunnel && key == "ether_type" {
            continue;
        }
        let path = format!("{at}.{choice}.{field}");
        if let Some(v) = number(b.get(field), &path, bits, choice, field, next)? {
            if key == "ether_type" {
                ether_type(v, &path, after)?;
                if next == "vlan" {
                    continue;
                }
            }
            hand.insert(key.into(), json!(v));
        }
    }
    let (echo, sub) = match choice {
        "icmp" | "icmpv6" => (&b["echo"], ".echo"),
        _ => (b, ""),
    };
    for &(_, field, key) in CHECKSUMS.iter().filter(|c| c.0 == choice) {
        if let Some(v) = checksum(echo.get(field), &format!("{at}.{choice}{sub}.{field}"))? {
            hand.insert(key.into(), v);
        }
    }
    Ok(())
}

/// The warning for a flow (its template `t`) whose frames the meter cannot read: an
/// EtherType set by hand that is neither IPv4's nor IPv6's.
pub fn unread(name: &str, t: &Map<String, Value>) -> Option<String> {
    let et = t.get("hand")?.get("ether_type")?.as_u64()?;
    (et != 0x0800 && et != 0x86dd).then(|| {
        format!(
            "flow {name:?}: its EtherType {et:#06x} (set by hand) is neither IPv4's nor IPv6's, so the meter cannot read its frames: it will have no RX frames, loss or latency"
        )
    })
}

/// An EtherType set by hand: before a VLAN tag only the tag's TPID (which the tag's `tpid`
/// sets: 0x8100 unless given).
fn ether_type(v: u64, path: &str, after: Option<&Value>) -> Result<(), Invalid> {
    let Some(vlan) = after.filter(|h| h["choice"] == "vlan") else {
        return Ok(());
    };
    let tpid = read(vlan["vlan"].get("tpid"), path, Kind::Int(16), "tpid")?
        .first
        .and_then(|t| t.as_u64())
        .unwrap_or(0x8100);
    match v == tpid {
        true => Ok(()),
        false => Err(Invalid(format!(
            "{path}: a VLAN tag follows, so this EtherType is the tag's TPID ({tpid:#06x}), and sending {v:#06x} instead is not supported. Fix: set the vlan header's tpid"
        ))),
    }
}

/// A number set by hand: `None` when left to gapless (`auto`, or the value it writes anyway;
/// UDP's length at the model's default 0 too).
fn number(
    p: Option<&Value>,
    path: &str,
    bits: u32,
    choice: &str,
    field: &str,
    next: &str,
) -> Result<Option<u64>, Invalid> {
    let pat = read(p, path, Kind::Int(bits), field)?;
    if pat.op.is_some() {
        return Err(Invalid(format!(
            "{path}: a field set by hand takes one value (value, or values of one). Fix: give one value, or leave it auto"
        )));
    }
    let Some(v) = pat.first.and_then(|v| v.as_u64()) else {
        return Ok(None);
    };
    let written = crate::flows::model::derived(choice, field, next);
    Ok((written != Some(v) && !(field == "length" && v == 0)).then_some(v))
}

/// A checksum set by hand: `None` for `generated: good`, `"bad"`, or the `custom` number.
fn checksum(p: Option<&Value>, path: &str) -> Result<Option<Value>, Invalid> {
    let Some(p) = p else { return Ok(None) };
    let choice = p["choice"].as_str().unwrap_or(if p.get("custom").is_some() {
        "custom"
    } else {
        "generated"
    });
    match choice {
        "generated" => match p["generated"].as_str().unwrap_or("good") {
            "good" => Ok(None),
            "bad" => Ok(Some(json!("bad"))),
            other => Err(Invalid(format!("{path}.generated: {other:?} is not good or bad"))),
        },
        "custom" => match p["custom"].as_u64().filter(|n| *n <= 0xffff) {
            Some(n) => Ok(Some(json!(n))),
            None => Err(Invalid(format!(
                "{path}.custom: give the checksum as a number from 0 to 65535; got {}",
                p["custom"]
            ))),
        },
        other => Err(Invalid(format!(
            "{path}.choice: {other:?} is not a checksum choice (generated or custom)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hand_of(choice: &str, b: Value, next: &str) -> Result<Map<String, Value>, Invalid> {
        let mut m = Map::new();
        let after = json!({ "choice": next });
        of_header(
            choice,
            &b,
            "flows[0].packet[1]",
            (!next.is_empty()).then_some(&after),
            false,
            &mut m,
        )?;
        Ok(m)
    }

    #[test]
    fn values_gapless_writes_anyway_stay_computed_and_others_go_by_hand() {
        let v = |n: u64| json!({ "choice": "value", "value": n });
        let m = hand_of(
            "ipv4",
            json!({ "version": v(4), "protocol": v(17), "total_length": { "choice": "auto" } }),
            "udp",
        )
        .unwrap();
        assert!(m.is_empty(), "expected nothing by hand; got {m:?}");
        let m = hand_of(
            "ipv4",
            json!({ "version": v(5), "protocol": v(99), "total_length": v(1000),
                    "header_checksum": { "choice": "generated", "generated": "bad" } }),
            "udp",
        )
        .unwrap();
        let want = json!({ "ip_version": 5, "ip_protocol": 99, "ip_length": 1000, "ip_checksum": "bad" });
        assert_eq!(Value::Object(m), want);
        let m = hand_of(
            "icmpv6",
            json!({ "echo": { "checksum": { "choice": "custom", "custom": 4660 } } }),
            "",
        )
        .unwrap();
        assert_eq!(Value::Object(m), json!({ "l4_checksum": 4660 }));
    }

    #[test]
    fn a_list_or_a_bad_checksum_word_is_refused_with_its_path() {
        let e = hand_of(
            "udp",
            json!({ "length": { "choice": "values", "values": [10, 20] } }),
            "",
        )
        .unwrap_err()
        .0;
        assert!(
            e.starts_with("flows[0].packet[1].udp.length: a field set by hand takes one value"),
            "{e}"
        );
        let e = hand_of(
            "tcp",
            json!({ "checksum": { "choice": "generated", "generated": "ugly" } }),
            "",
        )
        .unwrap_err()
        .0;
        assert!(e.starts_with("flows[0].packet[1].tcp.checksum.generated"), "{e}");
        let mut m = Map::new();
        let (ip, et) = (json!({ "choice": "ipv4" }), json!({ "ether_type": { "value": 4660 } }));
        // In a tunnel flow crate::flows::model gates the EtherType (tests/wire_fields.rs).
        of_header("ethernet", &et, "flows[0].packet[0]", Some(&ip), true, &mut m).unwrap();
        assert!(
            m.is_empty(),
            "expected no EtherType by hand in a tunnel flow; got {m:?}"
        );
        let vlan = json!({ "choice": "vlan", "vlan": { "tpid": { "value": 0x88a8 } } });
        let e = of_header("ethernet", &et, "flows[0].packet[0]", Some(&vlan), false, &mut m)
            .unwrap_err()
            .0;
        assert!(
            e.contains("the tag's TPID (0x88a8)") && e.contains("set the vlan header's tpid"),
            "{e}"
        );
        let same = json!({ "ether_type": { "value": 0x88a8 } });
        of_header("ethernet", &same, "flows[0].packet[0]", Some(&vlan), false, &mut m).unwrap();
        assert!(m.is_empty(), "expected the TPID left to the tag; got {m:?}");
    }
}
