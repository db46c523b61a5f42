//! OTG metric tags as the meter's tag fields (`gapless_core::meter::tags`): where in the
//! received frame each tagged field's bits sit.
//!
//! A flow's `egress_packet` is the header stack of its frames as they arrive (after a DUT
//! rewrote them); only its fields' `metric_tags` count. Tags on the fields of its `packet`
//! are read at the same place in the received frame, which holds while the DUT keeps the
//! headers the flow lists. Each header's fields are at fixed bits (IPv4 without options, a
//! GRE header without its optional words); a tag's `offset` and `length` are bits within its
//! field.

use serde_json::{json, Value};

use crate::error::Invalid;
use crate::flows::patterns::Kind;

/// One field a tag may sit in: its path under the header, first bit and width.
type FieldAt = (&'static str, u32, u32);

/// A header's fields where tags may sit, and its length in bits.
fn layout(choice: &str) -> Option<(&'static [FieldAt], u32)> {
    const ETHERNET: &[FieldAt] = &[("dst", 0, 48), ("src", 48, 48), ("ether_type", 96, 16)];
    const VLAN: &[FieldAt] = &[("priority", 0, 3), ("cfi", 3, 1), ("id", 4, 12), ("tpid", 16, 16)];
    const IPV4: &[FieldAt] = &[
        ("version", 0, 4),
        ("header_length", 4, 4),
        ("priority.raw", 8, 8),
        ("priority.dscp.phb", 8, 6),
        ("priority.dscp.ecn", 14, 2),
        ("priority.tos.precedence", 8, 3),
        ("priority.tos.delay", 11, 1),
        ("priority.tos.throughput", 12, 1),
        ("priority.tos.reliability", 13, 1),
        ("priority.tos.monetary", 14, 1),
        ("priority.tos.unused", 15, 1),
        ("total_length", 16, 16),
        ("identification", 32, 16),
        ("reserved", 48, 1),
        ("dont_fragment", 49, 1),
        ("more_fragments", 50, 1),
        ("fragment_offset", 51, 13),
        ("time_to_live", 64, 8),
        ("protocol", 72, 8),
        ("header_checksum", 80, 16),
        ("src", 96, 32),
        ("dst", 128, 32),
    ];
    const IPV6: &[FieldAt] = &[
        ("version", 0, 4),
        ("traffic_class", 4, 8),
        ("flow_label", 12, 20),
        ("payload_length", 32, 16),
        ("next_header", 48, 8),
        ("hop_limit", 56, 8),
        ("src", 64, 128),
        ("dst", 192, 128),
    ];
    const UDP: &[FieldAt] = &[
        ("src_port", 0, 16),
        ("dst_port", 16, 16),
        ("length", 32, 16),
        ("checksum", 48, 16),
    ];
    const TCP: &[FieldAt] = &[
        ("src_port", 0, 16),
        ("dst_port", 16, 16),
        ("seq_num", 32, 32),
        ("ack_num", 64, 32),
        ("data_offset", 96, 4),
        ("ecn_ns", 103, 1),
        ("ecn_cwr", 104, 1),
        ("ecn_echo", 105, 1),
        ("ctl_urg", 106, 1),
        ("ctl_ack", 107, 1),
        ("ctl_psh", 108, 1),
        ("ctl_rst", 109, 1),
        ("ctl_syn", 110, 1),
        ("ctl_fin", 111, 1),
        ("window", 112, 16),
        ("checksum", 128, 16),
    ];
    const MPLS: &[FieldAt] = &[
        ("label", 0, 20),
        ("traffic_class", 20, 3),
        ("bottom_of_stack", 23, 1),
        ("time_to_live", 24, 8),
    ];
    const VXLAN: &[FieldAt] = &[
        ("flags", 0, 8),
        ("reserved0", 8, 24),
        ("vni", 32, 24),
        ("reserved1", 56, 8),
    ];
    const GRE: &[FieldAt] = &[
        ("checksum_present", 0, 1),
        ("reserved0", 1, 12),
        ("version", 13, 3),
        ("protocol", 16, 16),
    ];
    Some(match choice {
        "ethernet" => (ETHERNET, 112),
        "vlan" => (VLAN, 32),
        "ipv4" => (IPV4, 160),
        "ipv6" => (IPV6, 320),
        "udp" => (UDP, 64),
        "tcp" => (TCP, 160),
        "mpls" => (MPLS, 32),
        "vxlan" => (VXLAN, 64),
        "gre" => (GRE, 32),
        _ => return None,
    })
}

/// The value at a dotted path (`priority.dscp.phb`) below `v`.
fn at<'a>(v: &'a Value, dotted: &str) -> &'a Value {
    dotted.split('.').fold(v, |v, k| &v[k])
}

/// A tag's value in each frame of a cycle the flow repeats: what its transmitted counts are
/// worked out from. None for a tag on the received frame, or on a field whose values are not
/// known ahead (`auto`, `random`, a cycle over [`MAX_CYCLE`]).
pub type TxCycle = Option<Vec<u64>>;

/// The longest cycle of a tagged field's values worked through for its transmitted counts.
pub const MAX_CYCLE: u64 = 65_536;

/// The field's values, frame by frame over one cycle, as its pattern `p` gives them.
fn field_cycle(p: &Value, kind: Kind, width: u32) -> Option<Vec<u128>> {
    let at = |v: &Value| kind.parse(v, "").ok();
    let wrap = |x: u128| if width >= 128 { x } else { x & ((1u128 << width) - 1) };
    let choice = p["choice"]
        .as_str()
        .unwrap_or(if p.get("value").is_some() { "value" } else { "auto" });
    match choice {
        "value" => Some(vec![at(&p["value"])?]),
        "values" => p["values"].as_array()?.iter().map(at).collect(),
        "increment" | "decrement" => {
            let s = &p[choice];
            let (start, step) = (at(&s["start"])?, at(&s["step"]).unwrap_or(1));
            let count = crate::flows::patterns::num(&s["count"]).unwrap_or(1).max(1);
            (count <= MAX_CYCLE).then(|| {
                (0..count as u128)
                    .map(|k| {
                        if choice == "increment" {
                            start.wrapping_add(k * step)
                        } else {
                            start.wrapping_sub(k * step)
                        }
                    })
                    .map(wrap)
                    .collect()
            })
        }
        _ => None,
    }
}

/// The tag `made` (at frame bit `field_bit`, in a field `width` bits wide with pattern `p`)
/// as its value in each frame of the field's cycle.
fn tx_cycle(p: &Value, kind: Kind, width: u32, made: &Value, field_bit: u32) -> TxCycle {
    let first = made["bit"].as_u64()? as u32 - field_bit;
    let bits = made["bits"].as_u64()? as u32;
    let shift = width - first - bits;
    let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let values = field_cycle(p, kind, width)?;
    Some(values.into_iter().map(|x| (x >> shift) as u64 & mask).collect())
}

/// The pattern kind of a field `width` bits wide at `field` of header `choice`.
fn kind_of(choice: &str, field: &str, width: u32) -> Kind {
    match (choice, field, width) {
        (_, _, 48) => Kind::Mac,
        ("ipv4", "src" | "dst", _) => Kind::Ipv4,
        ("ipv6", "src" | "dst", _) => Kind::Ipv6,
        _ => Kind::Int(width),
    }
}

/// The tags on the fields of one header list (`packet` or `egress_packet`, at `path`), each
/// as the stream's `tag` table (`name`, `bit`, `bits`); with `cycles`, each tag's
/// [`TxCycle`] too.
fn of_headers(
    list: &[Value],
    path: &str,
    out: &mut Vec<Value>,
    mut cycles: Option<&mut Vec<TxCycle>>,
) -> Result<(), Invalid> {
    let mut start = 0u32;
    for (i, h) in list.iter().enumerate() {
        let choice = h["choice"].as_str().unwrap_or_default();
        let hp = format!("{path}[{i}].{choice}");
        let Some((fields, len)) = layout(choice) else {
            if has_tags(&h[choice]) {
                return Err(Invalid(format!(
                    "{hp}: metric tags in a {choice} header are not supported (ethernet, vlan, ipv4, ipv6, udp, tcp, mpls, vxlan, gre)"
                )));
            }
            // The headers after one of unknown length can't be placed.
            if list[i + 1..]
                .iter()
                .any(|n| has_tags(&n[n["choice"].as_str().unwrap_or_default()]))
            {
                return Err(Invalid(format!(
                    "{hp}: metric tags after a {choice} header are not supported; tag a header before it"
                )));
            }
            return Ok(());
        };
        for &(field, bit, width) in fields {
            let fp = format!("{hp}.{field}.metric_tags");
            let pattern = at(&h[choice], field);
            for (k, t) in pattern["metric_tags"].as_array().into_iter().flatten().enumerate() {
                let made = tag(t, &format!("{fp}[{k}]"), start + bit, width)?;
                if let Some(c) = cycles.as_deref_mut() {
                    c.push(tx_cycle(
                        pattern,
                        kind_of(choice, field, width),
                        width,
                        &made,
                        start + bit,
                    ));
                }
                out.push(made);
            }
        }
        start += if choice == "gre" && gre_checksum(&h[choice]) {
            len + 32
        } else {
            len
        };
    }
    Ok(())
}

/// A GRE header with its checksum word (`checksum_present` 1).
fn gre_checksum(g: &Value) -> bool {
    crate::flows::patterns::num(&g["checksum_present"]["value"]) == Some(1)
}

/// Whether any field of a header has metric tags.
fn has_tags(h: &Value) -> bool {
    match h {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| (k == "metric_tags" && v.as_array().is_some_and(|a| !a.is_empty())) || has_tags(v)),
        _ => false,
    }
}

/// One tag on a field of `width` bits starting at frame bit `field_bit`.
fn tag(t: &Value, at: &str, field_bit: u32, width: u32) -> Result<Value, Invalid> {
    let Some(name) = t["name"].as_str().filter(|n| !n.is_empty()) else {
        return Err(Invalid(format!("{at}.name: name the tag")));
    };
    let offset = crate::flows::patterns::num(&t["offset"]).unwrap_or(0);
    let length = crate::flows::patterns::num(&t["length"]).unwrap_or(u64::from(width));
    if length == 0 || offset + length > u64::from(width) {
        return Err(Invalid(format!(
            "{at}: offset {offset} and length {length} leave the field's {width} bits; give offset + length of at most {width}, length at least 1"
        )));
    }
    if length > 64 {
        return Err(Invalid(format!(
            "{at}.length: a tag takes at most 64 bits; got {length}"
        )));
    }
    Ok(json!({ "name": name, "bit": u64::from(field_bit) + offset, "bits": length }))
}

/// A flow's metric tags (`flows[i]` at `path`) as its stream's `tag` table: those of its
/// `packet`, then those of its `egress_packet`.
pub fn of_flow(f: &Value, path: &str) -> Result<Vec<Value>, Invalid> {
    let mut out = Vec::new();
    let none = Vec::new();
    of_headers(
        f["packet"].as_array().unwrap_or(&none),
        &format!("{path}.packet"),
        &mut out,
        None,
    )?;
    let egress = f["egress_packet"].as_array().unwrap_or(&none);
    of_headers(egress, &format!("{path}.egress_packet"), &mut out, None)?;
    let fields: Vec<gapless_core::meter::tags::TagField> = out
        .iter()
        .filter_map(|t| serde_json::from_value(t.clone()).ok())
        .collect();
    gapless_core::meter::tags::check(&fields).map_err(|e| Invalid(format!("{path}: {e}")))?;
    Ok(out)
}

/// Each of a flow's tags' [`TxCycle`], in the order of [`of_flow`]: those of its `packet`
/// from their fields' patterns, then none for each of its `egress_packet`. Empty for a flow
/// without tags, or with tags that can't be placed (the config is refused then).
pub fn tx_cycles(f: &Value) -> Vec<TxCycle> {
    let (mut out, mut cycles) = (Vec::new(), Vec::new());
    let none = Vec::new();
    if of_headers(f["packet"].as_array().unwrap_or(&none), "", &mut out, Some(&mut cycles)).is_err() {
        return Vec::new();
    }
    let mut egress = Vec::new();
    if of_headers(f["egress_packet"].as_array().unwrap_or(&none), "", &mut egress, None).is_err() {
        return Vec::new();
    }
    cycles.extend(egress.iter().map(|_| None));
    cycles
}

/// The frames sent with each value of a flow's tags, over its first `sent` frames, when every
/// tag has a [`TxCycle`]: the cycles run side by side, frame `i` taking each one's
/// `i mod length`th value. None when a tag has no cycle, or their common period is over
/// [`MAX_CYCLE`].
pub fn tx_counts(cycles: &[TxCycle], sent: u64) -> Option<std::collections::HashMap<Vec<u64>, u64>> {
    if cycles.is_empty() {
        return None;
    }
    let lists: Vec<&Vec<u64>> = cycles.iter().map(Option::as_ref).collect::<Option<_>>()?;
    let gcd = |mut a: u64, mut b: u64| {
        while b > 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let period = lists.iter().try_fold(1u64, |p, l| {
        let n = l.len().max(1) as u64;
        let lcm = p / gcd(p, n) * n;
        (lcm <= MAX_CYCLE).then_some(lcm)
    })?;
    let (full, rest) = (sent / period, sent % period);
    let mut out = std::collections::HashMap::new();
    for i in 0..period.min(sent) {
        let key: Vec<u64> = lists.iter().map(|l| l[(i % l.len() as u64) as usize]).collect();
        *out.entry(key).or_insert(0) += full + u64::from(i < rest);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(f: &Value) -> Vec<(String, u64, u64)> {
        of_flow(f, "flows[0]")
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    t["bit"].as_u64().unwrap(),
                    t["bits"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn places_egress_tags_in_the_frame() {
        let f = json!({"packet": [{"choice": "ethernet"}, {"choice": "ipv4"}], "egress_packet": [
            {"choice": "ethernet", "ethernet": {"dst": {"metric_tags": [{"name": "mac", "offset": 36, "length": 12}]}}},
            {"choice": "vlan", "vlan": {"id": {"metric_tags": [{"name": "vid"}]}}},
            {"choice": "ipv4", "ipv4": {"priority": {"raw": {"metric_tags": [
                {"name": "dscp", "offset": 0, "length": 6}, {"name": "ecn", "offset": 6, "length": 2}]}},
                "dst": {"metric_tags": [{"name": "dst", "offset": 27, "length": 5}]}}},
            {"choice": "udp", "udp": {"dst_port": {"metric_tags": [{"name": "port", "length": 4}]}}}
        ]});
        assert_eq!(
            bits(&f),
            vec![
                ("mac".into(), 36, 12),
                ("vid".into(), 116, 12),
                ("dscp".into(), 152, 6),
                ("ecn".into(), 158, 2),
                ("dst".into(), 144 + 128 + 27, 5),
                ("port".into(), 144 + 160 + 16, 4),
            ]
        );
    }

    #[test]
    fn places_tx_tags_and_ipv6_tcp() {
        let f = json!({"packet": [{"choice": "ethernet"}, {"choice": "ipv6", "ipv6": {"traffic_class":
            {"choice": "value", "value": 184, "metric_tags": [{"name": "tc"}]}}},
            {"choice": "tcp", "tcp": {"ctl_syn": {"metric_tags": [{"name": "syn"}]}}}]});
        assert_eq!(
            bits(&f),
            vec![("tc".into(), 116, 8), ("syn".into(), 112 + 320 + 110, 1)]
        );
    }

    #[test]
    fn sent_counts_follow_the_fields_cycles() {
        let f = json!({"packet": [{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": {
            "priority": {"dscp": {"phb": {"choice": "values", "values": [10, 46, 0],
                "metric_tags": [{"name": "dscp"}]}}},
            "src": {"choice": "increment", "increment": {"start": "10.0.0.1", "step": "0.0.0.1", "count": 2},
                "metric_tags": [{"name": "lo", "offset": 31, "length": 1}]}}}],
            "egress_packet": []});
        let c = tx_cycles(&f);
        assert_eq!(c, vec![Some(vec![10, 46, 0]), Some(vec![1, 0])]);
        // 3 and 2 side by side: a period of 6, each pair once; 13 frames are two periods and one.
        let n = tx_counts(&c, 13).unwrap();
        assert_eq!((n[&vec![10, 1]], n[&vec![46, 0]], n.values().sum::<u64>()), (3, 2, 13));
        let egress =
            json!({"egress_packet": [{"choice": "ethernet", "ethernet": {"dst": {"metric_tags": [{"name": "d"}]}}}]});
        assert_eq!(tx_cycles(&egress), vec![None]);
        assert!(
            tx_counts(&tx_cycles(&egress), 10).is_none(),
            "a received tag has no sent count"
        );
    }

    #[test]
    fn refuses_tags_it_cannot_place() {
        let cases = [
            (
                json!({"egress_packet": [{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": {"priority": {"raw": {"metric_tags": [{"name": "x", "offset": 4, "length": 6}]}}}}]}),
                "flows[0].egress_packet[1].ipv4.priority.raw.metric_tags[0]: offset 4 and length 6 leave the field's 8 bits",
            ),
            (
                json!({"egress_packet": [{"choice": "ethernet", "ethernet": {"src": {"metric_tags": [{"offset": 1}]}}}]}),
                "flows[0].egress_packet[0].ethernet.src.metric_tags[0].name: name the tag",
            ),
            (
                json!({"egress_packet": [{"choice": "ethernet"}, {"choice": "arp"}, {"choice": "ipv4", "ipv4": {"src": {"metric_tags": [{"name": "s"}]}}}]}),
                "flows[0].egress_packet[1].arp: metric tags after a arp header are not supported",
            ),
            (
                json!({"egress_packet": [{"choice": "ethernet"}, {"choice": "ipv6", "ipv6": {"src": {"metric_tags": [{"name": "s"}]}}}]}),
                "flows[0].egress_packet[1].ipv6.src.metric_tags[0].length: a tag takes at most 64 bits; got 128",
            ),
            (
                json!({"egress_packet": [{"choice": "ethernet", "ethernet": {"src": {"metric_tags": [{"name": "a"}]}, "dst": {"metric_tags": [{"name": "b", "length": 17}]}}}]}),
                "flows[0]: the tags take 65 bits in all",
            ),
        ];
        for (f, want) in cases {
            let got = of_flow(&f, "flows[0]").unwrap_err().0;
            assert!(got.contains(want), "expected {want:?}, got {got:?}");
        }
    }
}
