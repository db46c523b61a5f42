//! OTG tunnel headers (`vxlan`, `gre`, `mpls`, `gtpv1`) as a gapless template's `tunnel`.
//! A flow's header list is cut at its tunnel: the headers before it are the outer ones
//! (Ethernet and VLAN tags stay the template's own; the outer IPv4 and UDP go into the
//! tunnel), the headers after it are the inner packet, which the template describes as
//! without a tunnel. Outer and tunnel fields take single values; the inner packet's fields
//! take every pattern.

use serde_json::{json, Map, Value};

use crate::error::Invalid;
use crate::patterns::{read, Kind};

/// The headers the template is built from, with their index in the flow's list, and the
/// tunnel spec when the list has a tunnel.
pub type Split<'a> = (Vec<(usize, &'a Value)>, Option<Value>);

const TUNNELS: [&str; 4] = ["vxlan", "gre", "mpls", "gtpv1"];

fn choice(h: &Value) -> &str {
    h["choice"].as_str().unwrap_or_default()
}

/// Cuts `list` at its tunnel (see the module's doc).
pub fn split<'a>(list: &'a [Value], path: &str) -> Result<Split<'a>, Invalid> {
    let all: Vec<(usize, &Value)> = list.iter().enumerate().collect();
    let Some(k) = list.iter().position(|h| TUNNELS.contains(&choice(h))) else {
        return Ok((all, None));
    };
    let kind = choice(&list[k]);
    let at = |i: usize| format!("{path}[{i}]");
    let outer: Vec<&str> = list[..k].iter().map(choice).filter(|c| *c != "vlan").collect();
    let want: &[&str] = match kind {
        "vxlan" | "gtpv1" => &["ethernet", "ipv4", "udp"],
        "gre" => &["ethernet", "ipv4"],
        _ => &["ethernet"],
    };
    if outer != want {
        return Err(Invalid(format!(
            "{}: {kind} goes after {} (outer IPv6 is not supported); got {}",
            at(k),
            want.join(", "),
            outer.join(", ")
        )));
    }
    let mut t = Map::new();
    t.insert("kind".into(), json!(kind));
    if kind != "mpls" {
        // The outer IPv4 header comes right before GRE, and before the UDP of the others.
        let ip = k - if kind == "gre" { 1 } else { 2 };
        outer_ip(&list[ip], &at(ip), &mut t)?;
    }
    if kind == "vxlan" || kind == "gtpv1" {
        outer_udp(&list[k - 1], &at(k - 1), &mut t)?;
    }
    let mut inner = k + 1;
    match kind {
        "vxlan" => {
            vxlan(&list[k], &at(k), &mut t)?;
            inner_eth(list.get(k + 1), &at(k + 1), &mut t)?;
            inner += 1;
        }
        "gre" => gre(&list[k], &at(k))?,
        "gtpv1" => gtpv1(&list[k], &at(k), &mut t)?,
        _ => {
            let mut labels = Vec::new();
            inner = k;
            while list.get(inner).is_some_and(|h| choice(h) == "mpls") {
                labels.push(mpls(&list[inner], &at(inner))?);
                inner += 1;
            }
            t.insert("labels".into(), json!(labels));
        }
    }
    if !matches!(list.get(inner).map(choice), Some("ipv4" | "ipv6")) {
        return Err(Invalid(format!(
            "{}: {kind} carries an inner ipv4 or ipv6 packet next",
            at(inner)
        )));
    }
    if let Some(j) = list[inner..].iter().position(|h| TUNNELS.contains(&choice(h))) {
        return Err(Invalid(format!("{}: one tunnel per flow is supported", at(inner + j))));
    }
    let mut keep: Vec<(usize, &Value)> = all
        .iter()
        .copied()
        .filter(|(i, h)| *i < k && matches!(choice(h), "ethernet" | "vlan"))
        .collect();
    keep.extend(all[inner..].iter().copied());
    Ok((keep, Some(Value::Object(t))))
}

/// The single value of an outer or tunnel field, if given.
fn single(h: &Value, key: &str, at: &str, kind: Kind) -> Result<Option<Value>, Invalid> {
    let pat = read(h.get(key), &format!("{at}.{key}"), kind, key)?;
    if pat.op.is_some() {
        return Err(Invalid(format!(
            "{at}.{key}: a tunnel's outer headers take a single value (the inner packet's fields may vary)"
        )));
    }
    Ok(pat.first)
}

fn outer_ip(h: &Value, at: &str, t: &mut Map<String, Value>) -> Result<(), Invalid> {
    let b = &h["ipv4"];
    let at = format!("{at}.ipv4");
    for (otg, ours, kind) in [
        ("src", "ip_src", Kind::Ipv4),
        ("dst", "ip_dst", Kind::Ipv4),
        ("time_to_live", "ttl", Kind::Int(8)),
    ] {
        if let Some(v) = single(b, otg, &at, kind)? {
            t.insert(ours.into(), v);
        }
    }
    Ok(())
}

fn outer_udp(h: &Value, at: &str, t: &mut Map<String, Value>) -> Result<(), Invalid> {
    let at = format!("{at}.udp");
    for k in ["src_port", "dst_port"] {
        if let Some(v) = single(&h["udp"], k, &at, Kind::Int(16))? {
            t.insert(k.into(), v);
        }
    }
    Ok(())
}

fn vxlan(h: &Value, at: &str, t: &mut Map<String, Value>) -> Result<(), Invalid> {
    let at = format!("{at}.vxlan");
    if let Some(v) = single(&h["vxlan"], "vni", &at, Kind::Int(24))? {
        t.insert("vni".into(), v);
    }
    fixed(&h["vxlan"], &at, &[("flags", 8, 8)])
}

fn inner_eth(h: Option<&Value>, at: &str, t: &mut Map<String, Value>) -> Result<(), Invalid> {
    let Some(h) = h.filter(|h| choice(h) == "ethernet") else {
        return Err(Invalid(format!("{at}: vxlan carries an inner ethernet header next")));
    };
    let at = format!("{at}.ethernet");
    for (otg, ours) in [("src", "inner_eth_src"), ("dst", "inner_eth_dst")] {
        if let Some(v) = single(&h["ethernet"], otg, &at, Kind::Mac)? {
            t.insert(ours.into(), v);
        }
    }
    Ok(())
}

fn gre(h: &Value, at: &str) -> Result<(), Invalid> {
    let at = format!("{at}.gre");
    fixed(&h["gre"], &at, &[("checksum_present", 1, 0), ("version", 3, 0)])
}

fn gtpv1(h: &Value, at: &str, t: &mut Map<String, Value>) -> Result<(), Invalid> {
    let at = format!("{at}.gtpv1");
    let b = &h["gtpv1"];
    if let Some(v) = single(b, "teid", &at, Kind::Int(32))? {
        t.insert("teid".into(), v);
    }
    fixed(
        b,
        &at,
        &[
            ("version", 3, 1),
            ("protocol_type", 1, 1),
            ("e_flag", 1, 0),
            ("s_flag", 1, 0),
            ("pn_flag", 1, 0),
            ("message_type", 8, 255),
        ],
    )
}

fn mpls(h: &Value, at: &str) -> Result<Value, Invalid> {
    let at = format!("{at}.mpls");
    let b = &h["mpls"];
    let mut l = json!({ "label": single(b, "label", &at, Kind::Int(20))?.unwrap_or(json!(16)) });
    if let Some(v) = single(b, "traffic_class", &at, Kind::Int(3))? {
        l["tc"] = v;
    }
    if let Some(v) = single(b, "time_to_live", &at, Kind::Int(8))? {
        l["ttl"] = v;
    }
    Ok(l)
}

/// Fields gapless writes one way only: (name, bits, the value it writes). Another value is
/// refused with its path.
fn fixed(b: &Value, at: &str, fields: &[(&str, u32, u64)]) -> Result<(), Invalid> {
    for &(k, bits, want) in fields {
        if let Some(v) = single(b, k, at, Kind::Int(bits))? {
            if v.as_u64() != Some(want) {
                return Err(Invalid(format!(
                    "{at}.{k}: gapless sends {want} here; {v} is not supported"
                )));
            }
        }
    }
    Ok(())
}
