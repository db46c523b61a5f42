//! OTG tunnel headers (`vxlan`, `gre`, `mpls`, `gtpv1`) as a gapless template's `tunnel`.
//! A flow's header list is cut at its tunnel: the headers before it are the outer ones
//! (Ethernet and VLAN tags stay the template's own; the outer IPv4 or IPv6 header and UDP go
//! into the tunnel), the headers after it are the inner packet, which the template describes
//! as without a tunnel. Outer and tunnel fields take every pattern, as the inner ones do: the
//! first value goes into the tunnel, a varying one becomes a field op on the outer field
//! (`outer_ip_src`, `outer_src_port`, `vni`, `teid`, `mpls_label`, ...). A VXLAN flow's inner
//! Ethernet frame carries its own FCS, as ixia-c and IxNetwork send it (ixia-c issue #112):
//! the flow's size counts it, and the inner lengths leave room for it.

use serde_json::{json, Map, Value};

use crate::error::Invalid;
use crate::flows::patterns::{read, Kind};

/// The headers the template is built from, with their index in the flow's list, the tunnel
/// spec when the list has a tunnel, and the field ops on its outer fields.
pub type Split<'a> = (Vec<(usize, &'a Value)>, Option<Value>, Vec<Value>);

/// A tunnel spec being built, and the field ops of its varying outer fields.
#[derive(Default)]
struct Outer {
    t: Map<String, Value>,
    ops: Vec<Value>,
}

impl Outer {
    /// Reads the pattern of `h[key]` (at `at`): its first value into the spec's `ours` (when
    /// given), its op, if it varies, onto field `field` (when the field can vary).
    fn put(
        &mut self,
        h: &Value,
        key: &str,
        at: &str,
        kind: Kind,
        ours: Option<&str>,
        field: Option<&str>,
    ) -> Result<Option<Value>, Invalid> {
        let path = format!("{at}.{key}");
        let pat = read(h.get(key), &path, kind, field.unwrap_or(key))?;
        if let Some(op) = pat.op {
            if field.is_none() {
                return Err(Invalid(format!("{path}: gapless takes a single value here")));
            }
            self.ops.push(Value::Object(op));
        }
        if let (Some(k), Some(v)) = (ours, &pat.first) {
            self.t.insert(k.into(), v.clone());
        }
        Ok(pat.first)
    }
}

const TUNNELS: [&str; 4] = ["vxlan", "gre", "mpls", "gtpv1"];

fn choice(h: &Value) -> &str {
    h["choice"].as_str().unwrap_or_default()
}

/// Cuts `list` at its tunnel (see the module's doc).
pub fn split<'a>(list: &'a [Value], path: &str) -> Result<Split<'a>, Invalid> {
    let all: Vec<(usize, &Value)> = list.iter().enumerate().collect();
    let Some(k) = list.iter().position(|h| TUNNELS.contains(&choice(h))) else {
        return Ok((all, None, Vec::new()));
    };
    let kind = choice(&list[k]);
    let at = |i: usize| format!("{path}[{i}]");
    let outer: Vec<&str> = list[..k].iter().map(choice).filter(|c| *c != "vlan").collect();
    let ip = outer
        .get(1)
        .copied()
        .filter(|c| matches!(*c, "ipv4" | "ipv6"))
        .unwrap_or("ipv4");
    let want: Vec<&str> = match kind {
        "vxlan" | "gtpv1" => vec!["ethernet", ip, "udp"],
        "gre" => vec!["ethernet", ip],
        _ => vec!["ethernet"],
    };
    if outer != want {
        return Err(Invalid(format!(
            "{}: {kind} goes after {} (the outer IP header may be ipv4 or ipv6); got {}",
            at(k),
            want.join(", "),
            outer.join(", ")
        )));
    }
    let mut o = Outer::default();
    o.t.insert("kind".into(), json!(kind));
    if kind != "mpls" {
        // The outer IP header comes right before GRE, and before the UDP of the others.
        let i = k - if kind == "gre" { 1 } else { 2 };
        outer_ip(&list[i], &at(i), &mut o)?;
    }
    if kind == "vxlan" || kind == "gtpv1" {
        outer_udp(&list[k - 1], &at(k - 1), &mut o)?;
    }
    let mut inner = k + 1;
    match kind {
        "vxlan" => {
            vxlan(&list[k], &at(k), &mut o)?;
            inner_eth(list.get(k + 1), &at(k + 1), &mut o.t)?;
            // As ixia-c sends it (its issue #112): the inner frame carries its own FCS.
            o.t.insert("inner_fcs".into(), json!(true));
            inner += 1;
        }
        "gre" => gre(&list[k], &at(k), &mut o)?,
        "gtpv1" => gtpv1(&list[k], &at(k), &mut o)?,
        _ => {
            let mut labels = Vec::new();
            inner = k;
            while list.get(inner).is_some_and(|h| choice(h) == "mpls") {
                labels.push(mpls(&list[inner], &at(inner), labels.len(), &mut o)?);
                inner += 1;
            }
            o.t.insert("labels".into(), json!(labels));
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
    Ok((keep, Some(Value::Object(o.t)), o.ops))
}

/// The single value of a tunnel field gapless does not vary, if given.
fn single(h: &Value, key: &str, at: &str, kind: Kind) -> Result<Option<Value>, Invalid> {
    Outer::default().put(h, key, at, kind, None, None)
}

fn outer_ip(h: &Value, at: &str, o: &mut Outer) -> Result<(), Invalid> {
    let (v, kind, ttl) = match choice(h) {
        "ipv6" => ("ipv6", Kind::Ipv6, "hop_limit"),
        _ => ("ipv4", Kind::Ipv4, "time_to_live"),
    };
    let at = format!("{at}.{v}");
    let b = &h[v];
    o.put(b, "src", &at, kind, Some("ip_src"), Some("outer_ip_src"))?;
    o.put(b, "dst", &at, kind, Some("ip_dst"), Some("outer_ip_dst"))?;
    o.put(b, ttl, &at, Kind::Int(8), Some("ttl"), Some("outer_ttl"))?;
    Ok(())
}

fn outer_udp(h: &Value, at: &str, o: &mut Outer) -> Result<(), Invalid> {
    let at = format!("{at}.udp");
    for k in ["src_port", "dst_port"] {
        o.put(&h["udp"], k, &at, Kind::Int(16), Some(k), Some(&format!("outer_{k}")))?;
    }
    Ok(())
}

fn vxlan(h: &Value, at: &str, o: &mut Outer) -> Result<(), Invalid> {
    let at = format!("{at}.vxlan");
    o.put(&h["vxlan"], "vni", &at, Kind::Int(24), Some("vni"), Some("vni"))?;
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

fn gre(h: &Value, at: &str, _o: &mut Outer) -> Result<(), Invalid> {
    let at = format!("{at}.gre");
    fixed(&h["gre"], &at, &[("checksum_present", 1, 0), ("version", 3, 0)])
}

fn gtpv1(h: &Value, at: &str, o: &mut Outer) -> Result<(), Invalid> {
    let at = format!("{at}.gtpv1");
    let b = &h["gtpv1"];
    o.put(b, "teid", &at, Kind::Int(32), Some("teid"), Some("teid"))?;
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

/// The `k`-th MPLS label (outer first): its label may vary (`mpls_label`, that label).
fn mpls(h: &Value, at: &str, k: usize, o: &mut Outer) -> Result<Value, Invalid> {
    let at = format!("{at}.mpls");
    let b = &h["mpls"];
    let before = o.ops.len();
    let label = o.put(b, "label", &at, Kind::Int(20), None, Some("mpls_label"))?;
    for op in &mut o.ops[before..] {
        op["label"] = json!(k);
    }
    let mut l = json!({ "label": label.unwrap_or(json!(16)) });
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
