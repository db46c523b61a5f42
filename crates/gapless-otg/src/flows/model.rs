//! Every field of the flow headers gapless sends, as OTG model 1.62.0 has them: which gapless
//! applies, and for each it does not, the model's default. [`gate`] refuses a field set away
//! from its default (or from the value gapless writes there anyway) with its path, so no field
//! is taken and dropped in silence (issue 67). The defaults are snappi 1.62.0's `_DEFAULTS`;
//! python/tests/test_otg_model.py checks this table against them.

use serde_json::Value;

use crate::error::Invalid;
use crate::flows::patterns::num;

/// How gapless takes a field of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Applied (every pattern the model offers for it, or refused with its path by the
    /// header's own code).
    Applied,
    /// Applied in the inner packet; in a tunnel's outer header only at its default.
    Inner(Dft),
    /// Not applied: taken only at the model's default, or at the value gapless writes there.
    Default(Dft),
}

/// A field's default in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dft {
    /// `value` (and `values` of only this value).
    Num(u64),
    /// `auto`: gapless computes it.
    Auto,
    /// `generated: good`: a checksum gapless computes.
    Good,
    /// A list or object that gapless does not build: empty or absent.
    Empty,
}

use self::Dft::{Auto, Empty, Good, Num};
use self::Taken::{Applied, Default as Dflt, Inner};

/// (header, field, how gapless takes it). A header's sub-objects are headers of their own
/// (`ipv4.priority`, `icmp.echo`).
pub const FIELDS: &[(&str, &str, Taken)] = &[
    ("ethernet", "dst", Applied),
    ("ethernet", "src", Applied),
    ("ethernet", "ether_type", Inner(Auto)),
    ("ethernet", "pfc_queue", Dflt(Num(0))),
    ("vlan", "priority", Applied),
    ("vlan", "cfi", Applied),
    ("vlan", "id", Applied),
    ("vlan", "tpid", Applied),
    ("ipv4", "version", Inner(Num(4))),
    ("ipv4", "header_length", Inner(Auto)),
    ("ipv4", "priority", Inner(Num(0))),
    ("ipv4", "total_length", Inner(Auto)),
    ("ipv4", "identification", Inner(Num(0))),
    ("ipv4", "reserved", Dflt(Num(0))),
    ("ipv4", "dont_fragment", Inner(Num(0))),
    ("ipv4", "more_fragments", Dflt(Num(0))),
    ("ipv4", "fragment_offset", Dflt(Num(0))),
    ("ipv4", "time_to_live", Applied),
    ("ipv4", "protocol", Inner(Auto)),
    ("ipv4", "header_checksum", Inner(Good)),
    ("ipv4", "src", Applied),
    ("ipv4", "dst", Applied),
    ("ipv4", "options", Inner(Empty)),
    ("ipv4.priority", "choice", Applied),
    ("ipv4.priority", "raw", Applied),
    ("ipv4.priority", "tos", Applied),
    ("ipv4.priority", "dscp", Applied),
    ("ipv4.priority.tos", "precedence", Applied),
    ("ipv4.priority.tos", "delay", Applied),
    ("ipv4.priority.tos", "throughput", Applied),
    ("ipv4.priority.tos", "reliability", Applied),
    ("ipv4.priority.tos", "monetary", Applied),
    ("ipv4.priority.tos", "unused", Applied),
    ("ipv4.priority.dscp", "phb", Applied),
    ("ipv4.priority.dscp", "ecn", Applied),
    ("ipv6", "version", Inner(Num(6))),
    ("ipv6", "traffic_class", Inner(Num(0))),
    ("ipv6", "flow_label", Inner(Num(0))),
    ("ipv6", "payload_length", Inner(Auto)),
    ("ipv6", "next_header", Inner(Auto)),
    ("ipv6", "hop_limit", Applied),
    ("ipv6", "src", Applied),
    ("ipv6", "dst", Applied),
    ("ipv6", "dst_usids", Dflt(Empty)),
    ("udp", "src_port", Applied),
    ("udp", "dst_port", Applied),
    ("udp", "length", Inner(Num(0))),
    ("udp", "checksum", Inner(Good)),
    ("tcp", "src_port", Applied),
    ("tcp", "dst_port", Applied),
    ("tcp", "seq_num", Applied),
    ("tcp", "ack_num", Applied),
    ("tcp", "data_offset", Inner(Num(0))),
    ("tcp", "ecn_ns", Dflt(Num(0))),
    ("tcp", "ecn_cwr", Applied),
    ("tcp", "ecn_echo", Applied),
    ("tcp", "ctl_urg", Applied),
    ("tcp", "ctl_ack", Applied),
    ("tcp", "ctl_psh", Applied),
    ("tcp", "ctl_rst", Applied),
    ("tcp", "ctl_syn", Applied),
    ("tcp", "ctl_fin", Applied),
    ("tcp", "window", Applied),
    ("tcp", "checksum", Inner(Good)),
    ("icmp", "choice", Applied),
    ("icmp", "echo", Applied),
    ("icmp.echo", "type", Applied),
    ("icmp.echo", "code", Applied),
    ("icmp.echo", "checksum", Inner(Good)),
    ("icmp.echo", "identifier", Applied),
    ("icmp.echo", "sequence_number", Applied),
    ("icmpv6", "choice", Applied),
    ("icmpv6", "echo", Applied),
    ("icmpv6.echo", "type", Applied),
    ("icmpv6.echo", "code", Applied),
    ("icmpv6.echo", "identifier", Applied),
    ("icmpv6.echo", "sequence_number", Applied),
    ("icmpv6.echo", "checksum", Inner(Good)),
    ("arp", "hardware_type", Applied),
    ("arp", "protocol_type", Applied),
    ("arp", "hardware_length", Applied),
    ("arp", "protocol_length", Applied),
    ("arp", "operation", Applied),
    ("arp", "sender_hardware_addr", Applied),
    ("arp", "sender_protocol_addr", Applied),
    ("arp", "target_hardware_addr", Applied),
    ("arp", "target_protocol_addr", Applied),
    ("vxlan", "flags", Applied),
    ("vxlan", "reserved0", Dflt(Num(0))),
    ("vxlan", "vni", Applied),
    ("vxlan", "reserved1", Dflt(Num(0))),
    ("gre", "checksum_present", Applied),
    ("gre", "reserved0", Dflt(Num(0))),
    ("gre", "version", Applied),
    ("gre", "protocol", Dflt(Auto)),
    ("gre", "checksum", Dflt(Good)),
    ("gre", "reserved1", Dflt(Num(0))),
    ("mpls", "label", Applied),
    ("mpls", "traffic_class", Applied),
    ("mpls", "bottom_of_stack", Dflt(Auto)),
    ("mpls", "time_to_live", Applied),
    ("gtpv1", "version", Applied),
    ("gtpv1", "protocol_type", Applied),
    ("gtpv1", "reserved", Dflt(Num(0))),
    ("gtpv1", "e_flag", Applied),
    ("gtpv1", "s_flag", Applied),
    ("gtpv1", "pn_flag", Applied),
    ("gtpv1", "message_type", Applied),
    ("gtpv1", "message_length", Dflt(Num(0))),
    ("gtpv1", "teid", Applied),
    ("gtpv1", "squence_number", Dflt(Num(0))),
    ("gtpv1", "n_pdu_number", Dflt(Num(0))),
    ("gtpv1", "next_extension_header_type", Dflt(Num(0))),
    ("gtpv1", "extension_headers", Dflt(Empty)),
];

/// The headers [`FIELDS`] covers (each with its sub-objects).
pub fn headers() -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .enumerate()
        .filter(|&(i, (h, _, _))| FIELDS[..i].iter().all(|(g, _, _)| g != h))
        .map(|(_, &(h, _, _))| h)
}

/// Where a header sits: the inner packet (or a flow without a tunnel), or a tunnel's outer
/// IP or UDP header, of which gapless sends the addresses, TTL and ports only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Inner,
    Outer,
}

/// Gates every header of a flow's `packet` list (at `path`): the headers before a tunnel's
/// own (vxlan, gre, gtpv1) other than Ethernet and VLAN are its outer ones; a header's
/// sub-objects (IPv4's priority, ICMP's echo) are gated as headers of their own.
pub fn gate_packet(list: &[Value], path: &str) -> Result<(), Invalid> {
    let choice = |i: usize| list.get(i).and_then(|h| h["choice"].as_str()).unwrap_or_default();
    let tunnel = (0..list.len()).find(|&i| matches!(choice(i), "vxlan" | "gre" | "gtpv1"));
    for (i, hd) in list.iter().enumerate() {
        let c = choice(i);
        if !headers().any(|h| h == c) {
            continue; // an unknown or missing choice is refused by the header's own code
        }
        // In a tunnel flow gapless writes every EtherType (the outer Ethernet's names the
        // tunnel, VXLAN's inner one the inner packet): Ethernet headers are gated as outer.
        let outer = tunnel.is_some_and(|t| i < t && matches!(c, "ipv4" | "ipv6" | "udp") || c == "ethernet");
        let role = if outer { Role::Outer } else { Role::Inner };
        let at = format!("{path}[{i}].{c}");
        let next = choice(i + 1);
        let writes = |k: &str| derived(c, k, next);
        let mut b = &hd[c];
        let bare;
        if next.is_empty() && role == Role::Inner && matches!(c, "ipv4" | "ipv6") {
            // The IP header ends the packet: its protocol (next header) is applied as set.
            let mut o = b.clone();
            if let Some(m) = o.as_object_mut() {
                m.remove(if c == "ipv4" { "protocol" } else { "next_header" });
            }
            bare = o;
            b = &bare;
        }
        gate(c, b, &at, role, &writes)?;
        for (sub, key) in [
            ("ipv4.priority", "priority"),
            ("icmp.echo", "echo"),
            ("icmpv6.echo", "echo"),
        ] {
            if sub.starts_with(&format!("{c}.")) && role == Role::Inner {
                gate(sub, &b[key], &format!("{at}.{key}"), role, &none)?;
            }
        }
        if c == "ipv4" && role == Role::Inner {
            let p = &b["priority"];
            for part in ["tos", "dscp"] {
                gate(
                    &format!("ipv4.priority.{part}"),
                    &p[part],
                    &format!("{at}.priority.{part}"),
                    role,
                    &none,
                )?;
            }
        }
    }
    Ok(())
}

fn none(_: &str) -> Option<u64> {
    None
}

/// The value gapless writes into field `k` of header `c` when header `next` follows it: the
/// numbers that name the next header, and the versions and lengths it always writes.
pub(crate) fn derived(c: &str, k: &str, next: &str) -> Option<u64> {
    let proto = |v6: bool| match next {
        "udp" => Some(17),
        "tcp" => Some(6),
        "icmp" if !v6 => Some(1),
        "icmpv6" if v6 => Some(58),
        "gre" => Some(47),
        _ => None,
    };
    let ether = || match next {
        "ipv4" => Some(0x0800),
        "ipv6" => Some(0x86dd),
        "arp" => Some(0x0806),
        "mpls" => Some(0x8847),
        _ => None,
    };
    match (c, k) {
        ("ethernet", "ether_type") | ("gre", "protocol") => ether(),
        ("ipv4", "protocol") => proto(false),
        ("ipv6", "next_header") => proto(true),
        ("ipv4", "version") => Some(4),
        ("ipv4", "header_length") => Some(5),
        ("ipv6", "version") => Some(6),
        ("tcp", "data_offset") => Some(5),
        ("mpls", "bottom_of_stack") => Some(u64::from(next != "mpls")),
        _ => None,
    }
}

/// Refuses each field of header `choice`'s object `b` (at path `at`) that gapless would not
/// send as given: a field the model lacks, or a field gapless does not apply set away from
/// its model default and from `writes(field)`, the value gapless writes there anyway (an
/// EtherType, a protocol number, a version).
pub fn gate(
    choice: &str,
    b: &Value,
    at: &str,
    role: Role,
    writes: &dyn Fn(&str) -> Option<u64>,
) -> Result<(), Invalid> {
    let Some(obj) = b.as_object() else { return Ok(()) };
    for (k, v) in obj {
        let path = format!("{at}.{k}");
        let taken = FIELDS
            .iter()
            .find(|(h, f, _)| *h == choice && *f == k)
            .map(|&(_, _, t)| t)
            .ok_or_else(|| Invalid(format!("{path}: the OTG model (1.62.0) has no field {k:?} in {choice}")))?;
        let dflt = match (taken, role) {
            (Applied, _) | (Inner(_), Role::Inner) => continue,
            (Inner(d), Role::Outer) | (Dflt(d), _) => d,
        };
        if at_default(v, dflt) || writes(k).is_some_and(|w| single(v) == Some(w)) {
            continue;
        }
        return Err(Invalid(refusal(&path, v, dflt, writes(k), role)));
    }
    Ok(())
}

/// The message for a field gapless cannot send as given.
fn refusal(path: &str, v: &Value, dflt: Dft, writes: Option<u64>, role: Role) -> String {
    let what = match (dflt, writes) {
        (_, Some(w)) => format!("gapless writes {w} here"),
        (Num(n), None) => format!("gapless sends the model's default, {n}"),
        (Auto, None) => "gapless computes it (auto)".to_string(),
        (Good, None) => "gapless computes a good checksum (generated: good)".to_string(),
        (Empty, None) => "gapless does not build it".to_string(),
    };
    let where_ = match role {
        Role::Outer if path.contains(".ethernet.") => " in a tunnel flow's Ethernet header",
        Role::Outer => " in a tunnel's outer header",
        Role::Inner => "",
    };
    format!("{path}: {what}{where_}, and sending {} instead is not supported yet. Fix: leave it at its default, or remove it", show(v))
}

/// A pattern's choice, ignoring `metric_tags` (which tag what is sent, see crate::flows::tags).
fn choice_of(v: &Value) -> &str {
    v["choice"].as_str().unwrap_or(if v.get("value").is_some() {
        "value"
    } else if v.get("values").is_some() {
        "values"
    } else if v.get("generated").is_some() {
        "generated"
    } else {
        "auto"
    })
}

/// The one value a pattern sends: `value`, or `values` of one; for IPv4's `priority`, the
/// TOS byte it makes.
fn single(v: &Value) -> Option<u64> {
    if ["raw", "tos", "dscp"].iter().any(|k| v.get(k).is_some()) {
        return tos_byte(v);
    }
    match choice_of(v) {
        "value" => num(&v["value"]),
        "values" => match v["values"].as_array().map(Vec::as_slice) {
            Some([x]) => num(x),
            _ => None,
        },
        _ => None,
    }
}

/// IPv4 `priority.tos`'s parts: each one's lowest bit in the TOS byte, and its width.
pub const TOS_PARTS: [(&str, u32, u32); 6] = [
    ("precedence", 5, 3),
    ("delay", 4, 1),
    ("throughput", 3, 1),
    ("reliability", 2, 1),
    ("monetary", 1, 1),
    ("unused", 0, 1),
];

/// The TOS byte an IPv4 `priority` makes, when each of its parts has one value (a part left
/// out is 0, as in the model): `raw`; `dscp` (phb and ecn); or `tos` (precedence, then the
/// delay, throughput, reliability, monetary and unused bits).
pub fn tos_byte(p: &Value) -> Option<u64> {
    let part = |v: &Value| if v.is_null() { Some(0) } else { single(v) };
    match p["choice"].as_str().unwrap_or("dscp") {
        "raw" => part(&p["raw"]),
        "dscp" => Some(part(&p["dscp"]["phb"])? << 2 | part(&p["dscp"]["ecn"])?),
        "tos" => {
            let t = &p["tos"];
            TOS_PARTS
                .iter()
                .try_fold(0, |acc, &(k, at, _)| Some(acc | part(&t[k])? << at))
        }
        _ => None,
    }
}

/// Whether `v` asks for the model's default.
pub fn at_default(v: &Value, d: Dft) -> bool {
    match d {
        Empty => match v {
            Value::Null => true,
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        },
        Good => choice_of(v) == "generated" && v["generated"].as_str().unwrap_or("good") == "good",
        Auto => choice_of(v) == "auto",
        Num(n) => choice_of(v) == "auto" || single(v) == Some(n),
    }
}

/// A short form of what was asked, for the message.
fn show(v: &Value) -> String {
    match choice_of(v) {
        "value" | "values" if single(v).is_some() => single(v).map(|n| n.to_string()).unwrap_or_default(),
        "generated" => format!("generated {}", v["generated"].as_str().unwrap_or("good")),
        "custom" => format!("custom {}", v["custom"]),
        c => {
            let s = v.get(c).unwrap_or(v).to_string();
            if s.len() > 80 {
                format!("{c} {}…", &s[..s.char_indices().nth(77).map_or(s.len(), |(i, _)| i)])
            } else {
                format!("{c} {s}")
            }
        }
    }
}

/// The server guide's table of header fields, made from [`FIELDS`] (a test keeps the
/// guide's copy the same).
pub fn table() -> String {
    let mut t = String::from("| header | field | gapless |\n|---|---|---|\n");
    for &(h, f, taken) in FIELDS {
        let how = match taken {
            Applied => "applied".to_string(),
            Inner(d) => format!("applied; in a tunnel's outer header only {}", default_text(d, h, f)),
            Dflt(d) => format!("only {}", default_text(d, h, f)),
        };
        t.push_str(&format!("| {h} | {f} | {how} |\n"));
    }
    t
}

fn default_text(d: Dft, h: &str, f: &str) -> String {
    let derived = ["udp", "ipv4", "ipv6", "mpls", "icmp"]
        .iter()
        .any(|n| derived(h, f, n).is_some());
    let or = if derived {
        ", or the value gapless writes there"
    } else {
        ""
    };
    match d {
        Num(n) => format!("at the model's default, {n}{or}"),
        Auto => format!("auto{or}"),
        Good => "generated good".to_string(),
        Empty => "empty".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_at_its_default_is_taken_and_any_other_value_refused_with_its_path() {
        let at = "flows[0].packet[1].ipv4";
        for v in [
            json!({ "choice": "value", "value": 0 }),
            json!({ "values": [0] }),
            json!({ "choice": "value", "value": 0, "metric_tags": [{ "name": "m" }] }),
        ] {
            gate("ipv4", &json!({ "more_fragments": v }), at, Role::Inner, &none).unwrap();
        }
        let e = gate(
            "ipv4",
            &json!({ "more_fragments": { "choice": "value", "value": 1 } }),
            at,
            Role::Inner,
            &none,
        )
        .unwrap_err()
        .0;
        assert!(
            e.starts_with("flows[0].packet[1].ipv4.more_fragments: gapless sends the model's default, 0")
                && e.contains("sending 1 instead is not supported"),
            "{e}"
        );
        let e = gate(
            "ipv4",
            &json!({ "header_checksum": { "choice": "generated", "generated": "bad" } }),
            at,
            Role::Outer,
            &none,
        )
        .unwrap_err()
        .0;
        assert!(
            e.contains(
                "header_checksum: gapless computes a good checksum (generated: good) in a tunnel's outer header"
            ) && e.contains("generated bad"),
            "{e}"
        );
        gate(
            "ipv4",
            &json!({ "header_checksum": { "choice": "generated", "generated": "good" } }),
            at,
            Role::Inner,
            &none,
        )
        .unwrap();
        let e = gate("ipv4", &json!({ "nope": 1 }), at, Role::Inner, &none)
            .unwrap_err()
            .0;
        assert!(
            e.contains("ipv4.nope: the OTG model (1.62.0) has no field \"nope\" in ipv4"),
            "{e}"
        );
    }

    #[test]
    fn the_server_guide_lists_every_field_as_the_code_takes_it() {
        let guide =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide/server.md")).unwrap();
        let (a, b) = ("<!-- header-fields:begin -->\n", "<!-- header-fields:end -->");
        let start = guide.find(a).expect("the guide's header-fields markers") + a.len();
        let end = guide[start..].find(b).expect("the end marker") + start;
        assert!(
            guide[start..end] == table(),
            "expected the guide's table to be model::table(); paste this between the markers:\n{}",
            table()
        );
    }

    #[test]
    fn a_derived_field_is_taken_at_the_value_gapless_writes() {
        let writes = |k: &str| (k == "protocol").then_some(17);
        let at = "p[1].ipv4";
        gate(
            "ipv4",
            &json!({ "protocol": { "choice": "value", "value": 17 } }),
            at,
            Role::Inner,
            &writes,
        )
        .unwrap();
        gate(
            "ipv4",
            &json!({ "protocol": { "choice": "auto" } }),
            at,
            Role::Inner,
            &writes,
        )
        .unwrap();
        // In the inner packet a protocol set by hand is sent (crate::config::hand); in a
        // tunnel's outer header only the one gapless writes is taken.
        gate(
            "ipv4",
            &json!({ "protocol": { "choice": "value", "value": 6 } }),
            at,
            Role::Inner,
            &writes,
        )
        .unwrap();
        let e = gate(
            "ipv4",
            &json!({ "protocol": { "choice": "value", "value": 6 } }),
            at,
            Role::Outer,
            &writes,
        )
        .unwrap_err()
        .0;
        assert!(
            e.contains("protocol: gapless writes 17 here in a tunnel's outer header"),
            "{e}"
        );
    }

    #[test]
    fn a_tunnel_s_outer_header_takes_only_its_addresses_ttl_and_ports() {
        let dscp = json!({ "priority": { "choice": "dscp", "dscp": { "phb": { "value": 46 } } } });
        gate("ipv4", &dscp, "p[1].ipv4", Role::Inner, &none).unwrap();
        let e = gate("ipv4", &dscp, "p[1].ipv4", Role::Outer, &none).unwrap_err().0;
        assert!(
            e.contains("p[1].ipv4.priority") && e.contains("in a tunnel's outer header"),
            "{e}"
        );
        let id = json!({ "identification": { "value": 5 } });
        assert!(gate("ipv4", &id, "p[1].ipv4", Role::Outer, &none).is_err());
        gate(
            "ipv4",
            &json!({ "identification": { "value": 0 }, "src": { "value": "1.2.3.4" } }),
            "p",
            Role::Outer,
            &none,
        )
        .unwrap();
    }
}
