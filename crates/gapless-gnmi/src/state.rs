//! The leaves of the OTG state trees, each with its value typed as its YANG leaf is, made from
//! the `monitor/metrics` JSON the OTG API answers (one source for both APIs).
//!
//! Types (as ../shared/GNMI.md notes ygnmi decodes them; not yet checked through ondatra): counters and other unsigned
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
    /// A subtree in RFC 7951 JSON, holding a keyless list ([`super::keyless`]).
    Json(Value),
    /// A leaf-list of strings or enumerations (an LSP's flags, its hostnames).
    Strs(Vec<String>),
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

impl Entry<'_> {
    /// The leaf-list at `rel` below the entry, when it has values.
    fn leaf_list(&mut self, rel: &str, v: Vec<String>) {
        let mut path = self.base.clone();
        path.0.extend(rel.split('/').map(Elem::new));
        let names: Vec<&str> = path.0.iter().map(|e| e.name.as_str()).collect();
        let node = Schema::get().node(&names).filter(|n| n.kind == Kind::LeafList);
        debug_assert!(node.is_some(), "{path} is not a leaf-list of the OTG models");
        if node.is_some() && !v.is_empty() {
            self.out.push(Leaf {
                path,
                value: Scalar::Strs(v),
            });
        }
    }

    /// Whether the model has a node at `rel` below the entry.
    fn has(&self, rel: &str) -> bool {
        let mut names: Vec<&str> = self.base.0.iter().map(|e| e.name.as_str()).collect();
        names.extend(rel.split('/'));
        Schema::get().node(&names).is_some()
    }

    /// The leaf at `rel` when the model has one there for this entry (a field some types of
    /// LSA have and others do not) and `v` is a value.
    fn maybe(&mut self, rel: &str, v: &Value) {
        if !v.is_null() && self.has(rel) {
            self.leaf(rel, v);
        }
    }

    /// The leaf-list at `rel` when the model has one there.
    fn leaf_list_if(&mut self, rel: &str, v: Vec<String>) {
        if self.has(rel) {
            self.leaf_list(rel, v);
        }
    }

    /// The entry below, at `rel` (`tlvs/hostnames`) and the list element `list[key=value]`.
    fn below(&mut self, rel: &str, list: &str, key: &str, value: &str) -> Entry<'_> {
        let mut base = self.base.clone();
        base.0.extend(rel.split('/').filter(|s| !s.is_empty()).map(Elem::new));
        base.0.push(Elem::new(list).key(key, value));
        Entry { base, out: self.out }
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

/// The leaves of `root/list[name]` for each named entry of `metrics`: its `state/name`, then
/// what `fill` adds below it.
fn named(metrics: &[Value], root: &str, list: &str, fill: impl FnMut(&mut Entry, &Value)) -> Vec<Leaf> {
    named_at(metrics, &[root], list, "name", fill)
}

/// As [`named`], the list below the containers `root`, each entry named by its `by`.
fn named_at(
    metrics: &[Value],
    root: &[&str],
    list: &str,
    by: &str,
    mut fill: impl FnMut(&mut Entry, &Value),
) -> Vec<Leaf> {
    let mut out = Vec::new();
    for m in metrics {
        let Some(name) = m[by].as_str() else { continue };
        let mut base = Path(root.iter().map(|r| Elem::new(r)).collect());
        base.0.push(Elem::new(list).key("name", name));
        let mut e = Entry { base, out: &mut out };
        e.leaf("state/name", &m[by]);
        fill(&mut e, m);
    }
    out
}

/// `flows/flow[name]`: one entry per flow. A flow with several RX ports has an entry of
/// `flow_metrics` per port; here it is one flow, its received counts over all of them.
pub fn flows(flow_metrics: &[Value]) -> Vec<Leaf> {
    let mut out = Vec::new();
    // Each flow's entries, in the order flows first appear (by name, in one pass).
    let mut names: Vec<&str> = Vec::new();
    let mut by_name: std::collections::HashMap<&str, Vec<&Value>> = std::collections::HashMap::new();
    for m in flow_metrics {
        let Some(n) = m["name"].as_str() else { continue };
        let entries = by_name.entry(n).or_default();
        if entries.is_empty() {
            names.push(n);
        }
        entries.push(m);
    }
    for name in names {
        let mine = &by_name[name];
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
        let base = e.base.clone();
        for t in mine
            .iter()
            .flat_map(|x| x["tagged_metrics"].as_array().into_iter().flatten())
        {
            tagged_metric(&base, t, &mut out);
        }
    }
    out
}

/// `tagged-metrics/tagged-metric[name-value-pairs]` of the flow at `flow`: keyed by its tags
/// as `name=0x..&name2=0x..` (sorted by name, hex in lower case), its received counters,
/// and its tags, a keyless list, as one JSON leaf at the entry ([`super::keyless`]).
fn tagged_metric(flow: &Path, t: &Value, out: &mut Vec<Leaf>) {
    let mut pairs: Vec<(&str, String)> = t["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| Some((x["name"].as_str()?, x["value"]["hex"].as_str()?.to_ascii_lowercase())))
        .collect();
    pairs.sort();
    let key: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let key = key.join("&");
    let mut base = flow.clone();
    base.0.push(Elem::new("tagged-metrics"));
    base.0.push(Elem::new("tagged-metric").key("name-value-pairs", &key));
    let mut e = Entry { base, out };
    e.leaf("state/name-value-pairs", &Value::String(key.clone()));
    e.leaf("state/counters/in-pkts", &t["frames_rx"]);
    e.leaf("state/counters/in-octets", &t["bytes_rx"]);
    if !t["frames_tx"].is_null() {
        e.leaf("state/counters/out-pkts", &t["frames_tx"]);
    }
    let tags: Vec<Value> = t["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| {
            serde_json::json!({ "tag-name": x["name"],
                "tag-value": { "value-type": "HEX", "value-as-hex": x["value"]["hex"] } })
        })
        .collect();
    let path = e.base.clone();
    e.out.push(Leaf {
        path,
        value: Scalar::Json(serde_json::json!({ "state": { "tags": tags } })),
    });
}

/// `ports/port[name]`: link, counters and rates (bits per second, as the model's units say).
pub fn ports(port_metrics: &[Value]) -> Vec<Leaf> {
    named(port_metrics, "ports", "port", |e, m| {
        let bps = |k: &str| Value::from(m[k].as_f64().unwrap_or(0.0) * 8.0);
        e.leaf("state/link", &m["link"]);
        e.leaf("state/out-rate", &bps("bytes_tx_rate"));
        e.leaf("state/in-rate", &bps("bytes_rx_rate"));
        e.leaf("state/counters/out-frames", &m["frames_tx"]);
        e.leaf("state/counters/in-frames", &m["frames_rx"]);
        e.leaf("state/counters/out-octets", &m["bytes_tx"]);
        e.leaf("state/counters/in-octets", &m["bytes_rx"]);
    })
}

/// `lags/lag[name]`: the LAG's status, members up, counters and rates, from `lag_metrics`.
pub fn lags(lag_metrics: &[Value]) -> Vec<Leaf> {
    named(lag_metrics, "lags", "lag", |e, m| {
        let bps = |k: &str| m[k].as_f64().map(|x| Value::from(x * 8.0)).unwrap_or(Value::Null);
        e.leaf("state/oper-status", &m["oper_status"]);
        e.leaf("state/out-rate", &bps("bytes_tx_rate"));
        e.leaf("state/in-rate", &bps("bytes_rx_rate"));
        e.leaf("state/counters/member-ports-up", &m["member_ports_up"]);
        e.leaf("state/counters/out-frames", &m["frames_tx"]);
        e.leaf("state/counters/in-frames", &m["frames_rx"]);
        e.leaf("state/counters/out-octets", &m["bytes_tx"]);
        e.leaf("state/counters/in-octets", &m["bytes_rx"]);
    })
}

/// `lacp/lag-members/lag-member[name]`: each LACP member by its port, from `lacp_metrics`.
pub fn lacp(lacp_metrics: &[Value]) -> Vec<Leaf> {
    const STATE: [(&str, &str); 12] = [
        ("activity", "activity"),
        ("timeout", "timeout"),
        ("synchronization", "synchronization"),
        ("aggregatable", "aggregatable"),
        ("collecting", "collecting"),
        ("distributing", "distributing"),
        ("system-id", "system_id"),
        ("oper-key", "oper_key"),
        ("partner-id", "partner_id"),
        ("partner-key", "partner_key"),
        ("port-num", "port_num"),
        ("partner-port-num", "partner_port_num"),
    ];
    const COUNTERS: [(&str, &str); 3] = [
        ("lacp-in-pkts", "lacp_packets_rx"),
        ("lacp-out-pkts", "lacp_packets_tx"),
        ("lacp-rx-errors", "lacp_rx_errors"),
    ];
    named_at(
        lacp_metrics,
        &["lacp", "lag-members"],
        "lag-member",
        "lag_member_port_name",
        |e, m| {
            for (yang, otg) in STATE {
                e.leaf(&format!("state/{yang}"), &m[otg]);
            }
            for (yang, otg) in COUNTERS {
                e.leaf(&format!("state/counters/{yang}"), &m[otg]);
            }
        },
    )
}

/// `bgp-peers/bgp-peer[name]`: the session's state in the YANG's spelling and its counters,
/// from `bgpv4_metrics`/`bgpv6_metrics` entries.
pub fn bgp_peers(bgp_metrics: &[Value]) -> Vec<Leaf> {
    const COUNTERS: [(&str, &str); 14] = [
        ("flaps", "session_flap_count"),
        ("in-routes", "routes_received"),
        ("out-routes", "routes_advertised"),
        ("in-route-withdraw", "route_withdraws_received"),
        ("out-route-withdraw", "route_withdraws_sent"),
        ("in-updates", "updates_received"),
        ("out-updates", "updates_sent"),
        ("in-opens", "opens_received"),
        ("out-opens", "opens_sent"),
        ("in-keepalives", "keepalives_received"),
        ("out-keepalives", "keepalives_sent"),
        ("in-notifications", "notifications_received"),
        ("out-notifications", "notifications_sent"),
        ("in-end-of-rib", "end_of_rib_received"),
    ];
    named(bgp_metrics, "bgp-peers", "bgp-peer", |e, m| {
        // The model's fsm_state (`opensent`) as the YANG spells it (`OPEN_SENT`).
        let fsm = m["fsm_state"].as_str().unwrap_or("idle").replace("open", "open_");
        e.leaf("state/session-state", &Value::from(fsm));
        for (yang, otg) in COUNTERS {
            e.leaf(&format!("state/counters/{yang}"), &m[otg]);
        }
    })
}

/// `isis-routers/isis-router[name]`: each level's counters, from `isis_metrics` entries (a
/// level the router does not run has none).
pub fn isis_routers(isis_metrics: &[Value]) -> Vec<Leaf> {
    const COUNTERS: [(&str, &str); 13] = [
        ("sessions-up", "sessions_up"),
        ("sessions-flap", "session_flap"),
        ("database-size", "database_size"),
        ("out-bcast-hellos", "broadcast_hellos_sent"),
        ("in-bcast-hellos", "broadcast_hellos_received"),
        ("out-p2p-hellos", "point_to_point_hellos_sent"),
        ("in-p2p-hellos", "point_to_point_hellos_received"),
        ("out-psnp", "psnp_sent"),
        ("in-psnp", "psnp_received"),
        ("out-csnp", "csnp_sent"),
        ("in-csnp", "csnp_received"),
        ("out-lsp", "lsp_sent"),
        ("in-lsp", "lsp_received"),
    ];
    named(isis_metrics, "isis-routers", "isis-router", |e, m| {
        for l in [1, 2] {
            for (yang, otg) in COUNTERS {
                e.leaf(&format!("state/counters/level{l}/{yang}"), &m[format!("l{l}_{otg}")]);
            }
        }
    })
}

/// `ospfv2-routers/ospfv2-router[name]`: sessions and the packets and LSAs of each kind, sent
/// (`out-`) and received (`in-`), from `ospfv2_metrics` entries.
pub fn ospfv2_routers(ospf_metrics: &[Value]) -> Vec<Leaf> {
    ospf_routers(ospf_metrics, "ospfv2", &["lsa-acks", "summary-lsas"])
}

/// `ospfv3-routers/ospfv3-router[name]`, the same from `ospfv3_metrics` entries, with
/// OSPFv3's kinds of LSA.
pub fn ospfv3_routers(ospf_metrics: &[Value]) -> Vec<Leaf> {
    let v3 = [
        "network-lsas",
        "inter-area-prefix-lsas",
        "inter-area-router-lsas",
        "link-lsas",
        "intra-area-prefix-lsas",
    ];
    ospf_routers(ospf_metrics, "ospfv3", &v3)
}

/// Either version's routers: the counters both have, and `own` (in the YANG's spelling,
/// whose model name is the same in snake case, singular: `summary-lsas` is `summary_lsa`).
fn ospf_routers(metrics: &[Value], version: &str, own: &[&str]) -> Vec<Leaf> {
    const SESSIONS: [(&str, &str); 3] = [
        ("sessions-up", "full_state_count"),
        ("sessions-down", "down_state_count"),
        ("sessions-flap", "sessions_flap"),
    ];
    // The YANG's counter (after `out-`/`in-`) and the model's (before `_sent`/`_received`).
    const BOTH: [(&str, &str); 9] = [
        ("hellos", "hellos"),
        ("dbds", "dbd"),
        ("ls-requests", "ls_request"),
        ("ls-updates", "ls_update"),
        ("ls-acks", "ls_ack"),
        ("lsas", "lsa"),
        ("router-lsas", "router_lsa"),
        ("external-lsas", "external_lsa"),
        ("nssa-lsas", "nssa_lsa"),
    ];
    let own: Vec<(String, String)> = own
        .iter()
        .map(|y| (y.to_string(), y.trim_end_matches('s').replace('-', "_")))
        .collect();
    let both = BOTH.iter().map(|(y, o)| (y.to_string(), o.to_string())).chain(own);
    let both: Vec<(String, String)> = both.collect();
    let (root, list) = (format!("{version}-routers"), format!("{version}-router"));
    named(metrics, &root, &list, |e, m| {
        for (yang, otg) in SESSIONS {
            e.leaf(&format!("state/counters/{yang}"), &m[otg]);
        }
        for (yang, otg) in &both {
            e.leaf(&format!("state/counters/out-{yang}"), &m[format!("{otg}_sent")]);
            e.leaf(&format!("state/counters/in-{yang}"), &m[format!("{otg}_received")]);
        }
    })
}

/// `lldps/lldp-interface[name]`: an agent's counters from `lldp_metrics`, and its neighbours
/// from the `lldp_neighbors` states, keyed by their neighbour id.
pub fn lldps(lldp_metrics: &[Value], neighbors: &[Value]) -> Vec<Leaf> {
    const COUNTERS: [(&str, &str); 6] = [
        ("frame-in", "frames_rx"),
        ("frame-out", "frames_tx"),
        ("frame-error-in", "frames_error_rx"),
        ("frame-discard", "frames_discard"),
        ("tlv-discard", "tlvs_discard"),
        ("tlv-unknown", "tlvs_unknown"),
    ];
    const NEIGHBOR: [&str; 12] = [
        "system_name",
        "system_description",
        "chassis_id",
        "chassis_id_type",
        "neighbor_id",
        "age",
        "last_update",
        "ttl",
        "port_id",
        "port_id_type",
        "port_description",
        "management_address",
    ];
    let mut out = named(lldp_metrics, "lldps", "lldp-interface", |e, m| {
        for (yang, otg) in COUNTERS {
            e.leaf(&format!("state/counters/{yang}"), &m[otg]);
        }
    });
    for n in neighbors {
        let (Some(agent), Some(id)) = (n["lldp_name"].as_str(), n["neighbor_id"].as_str()) else {
            continue;
        };
        let base = Path(vec![
            Elem::new("lldps"),
            Elem::new("lldp-interface").key("name", agent),
            Elem::new("state"),
            Elem::new("lldp-neighbor-database"),
            Elem::new("lldp-neighbors"),
            Elem::new("lldp-neighbor").key("neighbor_id", id),
        ]);
        let mut e = Entry { base, out: &mut out };
        for k in NEIGHBOR {
            // The YANG spells most of them with dashes, `neighbor_id`, `last_update` as the model.
            let yang = if matches!(k, "neighbor_id" | "last_update") {
                k.to_string()
            } else {
                k.replace('_', "-")
            };
            e.leaf(&format!("state/{yang}"), &n[k]);
        }
        e.leaf("state/management-address-type", &n["management_address_type"]);
    }
    out
}

/// `bgp-peers/bgp-peer[name]/unicast-ipv4-prefixes` and the v6 twin: each prefix a peer
/// learned, keyed by address, length, origin and path id (0 without add-path), from the
/// `bgp_prefixes` states. Its AS path and communities are keyless lists, not served yet.
pub fn bgp_prefixes(states: &[Value]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for peer in states {
        let Some(name) = peer["bgp_peer_name"].as_str() else {
            continue;
        };
        for (fam, addr_key) in [("ipv4", "ipv4_address"), ("ipv6", "ipv6_address")] {
            for p in peer[format!("{fam}_unicast_prefixes")].as_array().into_iter().flatten() {
                let (Some(addr), Some(len)) = (p[addr_key].as_str(), p["prefix_length"].as_u64()) else {
                    continue;
                };
                let origin = p["origin"].as_str().unwrap_or("incomplete").to_ascii_uppercase();
                let path_id = p["path_id"].as_u64().unwrap_or(0);
                let list = format!("unicast-{fam}-prefix");
                let base = Path(vec![
                    Elem::new("bgp-peers"),
                    Elem::new("bgp-peer").key("name", name),
                    Elem::new(&format!("{list}es")),
                    Elem::new(&list)
                        .key("address", addr)
                        .key("prefix-length", &len.to_string())
                        .key("origin", &origin)
                        .key("path-id", &path_id.to_string()),
                ]);
                let mut e = Entry { base, out: &mut out };
                e.leaf("state/address", &p[addr_key]);
                e.leaf("state/prefix-length", &p["prefix_length"]);
                e.leaf("state/origin", &Value::from(origin));
                e.leaf("state/path-id", &Value::from(path_id));
                e.leaf("state/next-hop-ipv4-address", &p["ipv4_next_hop"]);
                e.leaf("state/next-hop-ipv6-address", &p["ipv6_next_hop"]);
                e.leaf("state/local-preference", &p["local_preference"]);
                e.leaf("state/multi-exit-discriminator", &p["multi_exit_discriminator"]);
                if let Some(j) = as_path(&p["as_path"]) {
                    let path = e.base.clone();
                    e.out.push(Leaf {
                        path,
                        value: Scalar::Json(j),
                    });
                }
            }
        }
    }
    out
}

/// `isis-routers/isis-router[name]/state/link-state-database/lsp-states/lsps[lsp-id][pdu-type]`:
/// each LSP a router learned (the `isis_lsps` states), with its flags, hostnames, neighbours
/// and reachable prefixes keyed as the model keys them.
pub fn isis_lsps(states: &[Value]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for r in states {
        let Some(name) = r["isis_router_name"].as_str() else {
            continue;
        };
        for l in r["lsps"].as_array().into_iter().flatten() {
            let (Some(id), Some(pdu)) = (l["lsp_id"].as_str(), l["pdu_type"].as_str()) else {
                continue;
            };
            let pdu = pdu.to_ascii_uppercase();
            let base = Path(vec![
                Elem::new("isis-routers"),
                Elem::new("isis-router").key("name", name),
                Elem::new("state"),
                Elem::new("link-state-database"),
                Elem::new("lsp-states"),
                Elem::new("lsps").key("lsp-id", id).key("pdu-type", &pdu),
            ]);
            let mut e = Entry { base, out: &mut out };
            lsp(&mut e, l, &pdu);
        }
    }
    out
}

/// One LSP's leaves below its entry.
fn lsp(e: &mut Entry, l: &Value, pdu: &str) {
    e.leaf("state/lsp-id", &l["lsp_id"]);
    e.leaf("state/pdu-type", &Value::from(pdu));
    for k in ["remaining-lifetime", "sequence-number", "pdu-length", "is-type"] {
        e.leaf(&format!("state/{k}"), &l[k.replace('-', "_")]);
    }
    let flags = l["flags"].as_object().into_iter().flatten();
    e.leaf_list(
        "state/flags",
        flags
            .filter(|(_, on)| on.as_bool() == Some(true))
            .map(|(k, _)| k.to_ascii_uppercase())
            .collect(),
    );
    let t = &l["tlvs"];
    let items = |k: &str, list: &str| -> Vec<Value> {
        let tlvs = t[k].as_array().into_iter().flatten();
        tlvs.flat_map(|x| x[list].as_array().cloned().unwrap_or_else(|| vec![x.clone()]))
            .collect()
    };
    let hosts = items("hostname_tlvs", "hostname")
        .iter()
        .filter_map(|h| h["hostname"].as_str().map(String::from))
        .collect();
    e.leaf_list("tlvs/hostnames/state/hostname", hosts);
    for (k, node) in [
        ("is_reachability_tlvs", "is-reachability"),
        ("extended_is_reachability_tlvs", "extended-is-reachability"),
    ] {
        for n in items(k, "neighbors") {
            let Some(id) = n["system_id"].as_str() else { continue };
            e.below(&format!("tlvs/{node}/neighbors"), "neighbor", "system-id", id)
                .leaf("state/system-id", &n["system_id"]);
        }
    }
    for (k, node, addr) in [
        (
            "ipv4_internal_reachability_tlvs",
            "ipv4-internal-reachability",
            "ipv4_address",
        ),
        (
            "ipv4_external_reachability_tlvs",
            "ipv4-external-reachability",
            "ipv4_address",
        ),
        (
            "extended_ipv4_reachability_tlvs",
            "extended-ipv4-reachability",
            "ipv4_address",
        ),
        ("ipv6_reachability_tlvs", "ipv6-reachability", "ipv6_address"),
    ] {
        for p in items(k, "prefixes") {
            let Some(a) = p[addr].as_str() else { continue };
            let mut pe = e.below(&format!("tlvs/{node}/prefixes"), "prefix", "prefix", a);
            pe.leaf("state/prefix", &p[addr]);
            for f in [
                "prefix-length",
                "metric",
                "default-metric",
                "redistribution-type",
                "origin-type",
            ] {
                if !p[f.replace('-', "_")].is_null() {
                    pe.leaf(&format!("state/{f}"), &p[f.replace('-', "_")]);
                }
            }
        }
    }
}

/// `ospfv2-routers` (or, `v3`, `ospfv3-routers`) `/…-router[name]/state/link-state-database/
/// lsa-states/<type>-lsa[link-state-id]`: each LSA a router learned (the `ospfv2_lsas` or
/// `ospfv3_lsas` states), its header and body. An OSPFv2 router LSA's links are keyed by id;
/// an OSPFv3 one's are a keyless list, sent as JSON at the LSA ([`super::keyless`]).
pub fn ospf_lsas(states: &[Value], v3: bool) -> Vec<Leaf> {
    let (root, list) = if v3 {
        ("ospfv3-routers", "ospfv3-router")
    } else {
        ("ospfv2-routers", "ospfv2-router")
    };
    let mut out = Vec::new();
    for r in states {
        let Some(name) = r["router_name"].as_str() else {
            continue;
        };
        for (kind, lsas) in r
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.ends_with("_lsas"))
        {
            let node = kind.trim_end_matches('s').replace('_', "-");
            for l in lsas.as_array().into_iter().flatten() {
                let Some(id) = l["header"]["lsa_id"].as_str() else {
                    continue;
                };
                let base = Path(vec![
                    Elem::new(root),
                    Elem::new(list).key("name", name),
                    Elem::new("state"),
                    Elem::new("link-state-database"),
                    Elem::new("lsa-states"),
                    Elem::new(&node).key("link-state-id", id),
                ]);
                lsa(&mut Entry { base, out: &mut out }, l);
            }
        }
    }
    out
}

/// One LSA's leaves: its header's, then each body field the model has for its type.
fn lsa(e: &mut Entry, l: &Value) {
    let h = &l["header"];
    e.leaf("state/link-state-id", &h["lsa_id"]);
    e.leaf("state/advertising-router", &h["advertising_router_id"]);
    for (k, v) in [
        ("sequence-number", &h["sequence_number"]),
        ("age", &h["age"]),
        ("option-bits", &h["option_bits"]),
    ] {
        e.maybe(&format!("state/{k}"), v);
    }
    const BODY: [(&str, &str); 10] = [
        ("network_mask", "network-mask"),
        ("metric", "metric"),
        ("metric_type", "metric-type"),
        ("address_prefix", "address-prefix"),
        ("prefix_length", "prefix-length"),
        ("referenced_ls_type", "referenced-ls-type"),
        ("link_local_address", "link-local-address"),
        ("destination_router_id", "destination_router"),
        ("neighbor_router_id", "neighbor-router"),
        ("forwarding_address", "forwarding-address"),
    ];
    for (otg, yang) in BODY {
        e.maybe(&format!("state/{yang}"), &l[otg]);
    }
    let attached = l["neighbor_router_ids"]
        .as_array()
        .or(l["attached_router_ids"].as_array());
    let ids: Vec<String> = attached
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(String::from))
        .collect();
    e.leaf_list_if("state/attached-router", ids);
    let links = l["links"].as_array().into_iter().flatten();
    let keyed = e.has("state/link/id");
    let mut keyless = Vec::new();
    for k in links {
        let ty = k["type"].as_str().unwrap_or_default().to_ascii_uppercase();
        match (keyed, k["id"].as_str()) {
            (true, Some(id)) => {
                let mut le = e.below("state", "link", "id", id);
                le.leaf("state/type", &Value::from(ty));
                for f in ["id", "data", "metric"] {
                    le.leaf(&format!("state/{f}"), &k[f]);
                }
            }
            _ => keyless.push(serde_json::json!({ "type": ty, "metric": k["metric"] })),
        }
    }
    if !keyless.is_empty() {
        let path = e.base.clone();
        let value = Scalar::Json(serde_json::json!({ "state": { "link": keyless } }));
        e.out.push(Leaf { path, value });
    }
}

/// A prefix's AS path, a keyless list, as the JSON of its entry ([`super::keyless`]):
/// `{"state": {"as-path": [{"segment-type": "AS_SEQUENCE", "as_numbers": [...]}]}}`; none
/// for an empty path.
fn as_path(p: &Value) -> Option<Value> {
    let segs: Vec<Value> = p["segments"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            let ty = match s["type"].as_str()? {
                "as_seq" => "AS_SEQUENCE",
                "as_set" => "AS_SET",
                "as_confed_seq" => "AS_CONFED_SEQUENCE",
                "as_confed_set" => "AS_CONFED_SET",
                _ => return None,
            };
            Some(serde_json::json!({ "segment-type": ty, "as_numbers": s["as_numbers"] }))
        })
        .collect();
    (!segs.is_empty()).then(|| serde_json::json!({ "state": { "as-path": segs } }))
}

/// `interfaces/interface[name]/ipv4-neighbors` and `ipv6-neighbors`, keyed by the Ethernet's
/// name (what `otgutils.WaitForARP` passes), from the `ipv4_neighbors`/`ipv6_neighbors` states.
/// A neighbour not resolved yet has no link-layer address, and no leaf for it.
pub fn neighbors(v4: &[Value], v6: &[Value]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for (states, fam, key) in [
        (v4, "ipv4-neighbor", "ipv4_address"),
        (v6, "ipv6-neighbor", "ipv6_address"),
    ] {
        let addr = key.replace('_', "-");
        for n in states {
            let (Some(eth), Some(ip)) = (n["ethernet_name"].as_str(), n[key].as_str()) else {
                continue;
            };
            if !n["link_layer_address"].is_string() {
                continue;
            }
            let base = Path(vec![
                Elem::new("interfaces"),
                Elem::new("interface").key("name", eth),
                Elem::new(&format!("{fam}s")),
                Elem::new(fam).key(&addr, ip),
            ]);
            let mut e = Entry { base, out: &mut out };
            e.leaf(&format!("state/{addr}"), &n[key]);
            e.leaf("state/link-layer-address", &n["link_layer_address"]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Asserts every leaf is a path of the schema.
    fn in_schema(leaves: &[Leaf]) {
        for leaf in leaves {
            assert_eq!(
                Schema::get().check(&leaf.path),
                Ok(()),
                "expected {} in the schema",
                leaf.path
            );
        }
    }

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
        in_schema(&l);
    }

    #[test]
    fn tagged_metrics_are_keyed_by_their_tags_and_carry_them_as_json() {
        let m = json!({ "name": "f1", "frames_rx": 30, "tagged_metrics": [{ "frames_rx": 30, "bytes_rx": 3840,
            "tags": [{ "name": "ecn", "value": { "choice": "hex", "hex": "0x0" } },
                     { "name": "dscp", "value": { "choice": "hex", "hex": "0x2E" } }] }] });
        let l = flows(&[m]);
        let at = "flows/flow[name=f1]/tagged-metrics/tagged-metric[name-value-pairs=dscp=0x2e&ecn=0x0]";
        assert_eq!(
            value(&l, &format!("{at}/state/counters/in-pkts")),
            Some(Scalar::Uint(30))
        );
        assert_eq!(
            value(&l, &format!("{at}/state/name-value-pairs")),
            Some(Scalar::Str("dscp=0x2e&ecn=0x0".into()))
        );
        let Some(Scalar::Json(j)) = value(&l, at) else {
            panic!("expected the tags as JSON at {at}: {l:?}")
        };
        assert_eq!(
            j["state"]["tags"][1]["tag-value"],
            json!({ "value-type": "HEX", "value-as-hex": "0x2E" })
        );
        in_schema(&l);
        // JSON_IETF of the flow holds the entry once, its tags merged beside its counters.
        let q = Path::parse("flows/flow[name=f1]/tagged-metrics").unwrap();
        let v = super::super::json::Json { ietf: true }.values(&q, &l);
        let entry = &v[0].1["tagged-metric"][0];
        assert_eq!(entry["state"]["counters"]["in-pkts"], "30", "{entry}");
        assert_eq!(entry["state"]["tags"][0]["tag-name"], "ecn", "{entry}");
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
        in_schema(&l);
    }
    #[test]
    fn a_bgp_peer_has_its_fsm_state_as_the_yang_spells_it_and_its_counters() {
        let l = bgp_peers(&[
            json!({ "name": "d1.peer", "session_state": "down", "fsm_state": "opensent",
            "updates_sent": 3, "routes_received": 7, "session_flap_count": 1 }),
        ]);
        assert_eq!(
            value(&l, "bgp-peers/bgp-peer[name=d1.peer]/state/session-state"),
            Some(Scalar::Str("OPEN_SENT".into()))
        );
        assert_eq!(
            value(&l, "bgp-peers/bgp-peer[name=d1.peer]/state/counters/in-routes"),
            Some(Scalar::Uint(7))
        );
        assert_eq!(
            value(&l, "bgp-peers/bgp-peer[name=d1.peer]/state/counters/flaps"),
            Some(Scalar::Uint(1))
        );
        let up = bgp_peers(&[json!({ "name": "p", "fsm_state": "established" })]);
        assert_eq!(
            value(&up, "bgp-peers/bgp-peer[name=p]/state/session-state"),
            Some(Scalar::Str("ESTABLISHED".into()))
        );
        in_schema(&l);
        in_schema(&up);
    }

    #[test]
    fn a_resolved_neighbour_is_under_its_ethernets_name_and_an_unresolved_one_is_absent() {
        let v4 = [
            json!({ "ethernet_name": "e1", "ipv4_address": "1.1.1.2", "link_layer_address": "02:00:00:00:00:02" }),
            json!({ "ethernet_name": "e1", "ipv4_address": "1.1.1.3" }),
        ];
        let v6 = [
            json!({ "ethernet_name": "e1", "ipv6_address": "2001:db8::2", "link_layer_address": "02:00:00:00:00:02" }),
        ];
        let l = neighbors(&v4, &v6);
        let mac = Some(Scalar::Str("02:00:00:00:00:02".into()));
        assert_eq!(value(&l, "interfaces/interface[name=e1]/ipv4-neighbors/ipv4-neighbor[ipv4-address=1.1.1.2]/state/link-layer-address"), mac);
        assert_eq!(value(&l, "interfaces/interface[name=e1]/ipv6-neighbors/ipv6-neighbor[ipv6-address=2001:db8::2]/state/link-layer-address"), mac);
        assert_eq!(l.len(), 4, "expected no leaf for the unresolved 1.1.1.3; got {l:?}");
        in_schema(&l);
    }
    #[test]
    fn an_isis_router_has_the_counters_of_the_levels_it_runs() {
        let l = isis_routers(&[
            json!({ "name": "r1", "l2_sessions_up": 1, "l2_lsp_sent": 4, "l2_point_to_point_hellos_received": 9 }),
        ]);
        assert_eq!(
            value(
                &l,
                "isis-routers/isis-router[name=r1]/state/counters/level2/sessions-up"
            ),
            Some(Scalar::Uint(1))
        );
        assert_eq!(
            value(&l, "isis-routers/isis-router[name=r1]/state/counters/level2/out-lsp"),
            Some(Scalar::Uint(4))
        );
        assert_eq!(
            value(
                &l,
                "isis-routers/isis-router[name=r1]/state/counters/level2/in-p2p-hellos"
            ),
            Some(Scalar::Uint(9))
        );
        assert_eq!(
            l.len(),
            4,
            "expected the name and the three level-2 counters given, nothing of level 1; got {l:?}"
        );
        in_schema(&l);
    }
    #[test]
    fn an_ospfv2_router_has_its_sessions_and_each_kind_of_packet_and_lsa_both_ways() {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!("o1"));
        m.insert("full_state_count".into(), json!(1));
        for (k, otg) in [
            "hellos",
            "dbd",
            "ls_request",
            "ls_update",
            "ls_ack",
            "lsa",
            "lsa_ack",
            "router_lsa",
            "summary_lsa",
            "external_lsa",
            "nssa_lsa",
        ]
        .iter()
        .enumerate()
        {
            m.insert(format!("{otg}_sent"), json!(k));
            m.insert(format!("{otg}_received"), json!(k + 100));
        }
        let l = ospfv2_routers(&[Value::Object(m)]);
        let at = |c: &str| value(&l, &format!("ospfv2-routers/ospfv2-router[name=o1]/state/counters/{c}"));
        assert_eq!(at("sessions-up"), Some(Scalar::Uint(1)));
        assert_eq!(
            (at("out-dbds"), at("in-dbds")),
            (Some(Scalar::Uint(1)), Some(Scalar::Uint(101)))
        );
        assert_eq!(at("in-nssa-lsas"), Some(Scalar::Uint(110)));
        assert_eq!(
            l.len(),
            1 + 1 + 22,
            "expected the name, sessions-up and 22 counters; got {l:?}"
        );
        in_schema(&l);
    }

    #[test]
    fn an_ospfv3_router_has_v3s_kinds_of_lsa() {
        let m = json!({ "name": "o3", "full_state_count": 1, "link_lsa_sent": 2, "link_lsa_received": 3,
            "intra_area_prefix_lsa_received": 4, "inter_area_router_lsa_sent": 5 });
        let l = ospfv3_routers(&[m]);
        let at = |c: &str| value(&l, &format!("ospfv3-routers/ospfv3-router[name=o3]/state/counters/{c}"));
        assert_eq!(
            (at("out-link-lsas"), at("in-link-lsas")),
            (Some(Scalar::Uint(2)), Some(Scalar::Uint(3)))
        );
        assert_eq!(at("in-intra-area-prefix-lsas"), Some(Scalar::Uint(4)));
        assert_eq!(at("out-inter-area-router-lsas"), Some(Scalar::Uint(5)));
        in_schema(&l);
    }

    #[test]
    fn a_lag_and_its_lacp_members_have_their_status_counters_and_partners() {
        let l = json!({ "name": "l1", "oper_status": "up", "member_ports_up": 2, "frames_tx": 10, "bytes_tx": 1280,
            "frames_rx": 9, "bytes_rx": 1152, "bytes_tx_rate": 100.0, "frames_tx_rate": 1.0 });
        let got = lags(&[l]);
        in_schema(&got);
        let at = |p: &str| value(&got, p);
        assert_eq!(
            at("lags/lag[name=l1]/state/oper-status"),
            Some(Scalar::Str("UP".into()))
        );
        assert_eq!(
            at("lags/lag[name=l1]/state/counters/member-ports-up"),
            Some(Scalar::Uint(2))
        );
        assert_eq!(at("lags/lag[name=l1]/state/out-rate"), Some(Scalar::Float32(800.0)));
        assert_eq!(
            at("lags/lag[name=l1]/state/in-rate"),
            None,
            "no received byte rate: no leaf"
        );
        let m = json!({ "lag_name": "l1", "lag_member_port_name": "p1", "activity": "active", "timeout": "short",
            "synchronization": "in_sync", "aggregatable": true, "collecting": true, "distributing": false,
            "system_id": "02:aa:00:00:00:01", "oper_key": 7, "partner_id": "02:bb:00:00:00:01", "partner_key": 9,
            "port_num": 11, "partner_port_num": 3, "lacp_packets_rx": 5, "lacp_packets_tx": 6, "lacp_rx_errors": 0 });
        let got = lacp(&[m]);
        in_schema(&got);
        let at = |p: &str| value(&got, p);
        let base = "lacp/lag-members/lag-member[name=p1]/state";
        assert_eq!(at(&format!("{base}/name")), Some(Scalar::Str("p1".into())));
        assert_eq!(
            at(&format!("{base}/synchronization")),
            Some(Scalar::Str("IN_SYNC".into()))
        );
        assert_eq!(at(&format!("{base}/distributing")), Some(Scalar::Bool(false)));
        assert_eq!(
            at(&format!("{base}/partner-id")),
            Some(Scalar::Str("02:bb:00:00:00:01".into()))
        );
        assert_eq!(at(&format!("{base}/partner-port-num")), Some(Scalar::Uint(3)));
        assert_eq!(at(&format!("{base}/counters/lacp-out-pkts")), Some(Scalar::Uint(6)));
        assert_eq!(got.len(), 16, "name, 12 state leaves and 3 counters");
    }

    #[test]
    fn an_lldp_agent_has_its_counters_and_its_neighbours_by_id() {
        let m = json!({ "name": "l1", "frames_rx": 3, "frames_tx": 4, "tlvs_unknown": 1 });
        let n = json!({ "lldp_name": "l1", "neighbor_id": "n-1", "system_name": "sw1", "chassis_id": "00:11:22:33:44:55",
            "chassis_id_type": "mac_address", "port_id": "eth7", "port_id_type": "interface_name", "ttl": 120, "age": 3 });
        let l = lldps(&[m], &[n]);
        let base = "lldps/lldp-interface[name=l1]/state";
        assert_eq!(value(&l, &format!("{base}/counters/frame-in")), Some(Scalar::Uint(3)));
        let nb = format!("{base}/lldp-neighbor-database/lldp-neighbors/lldp-neighbor[neighbor_id=n-1]/state");
        assert_eq!(value(&l, &format!("{nb}/system-name")), Some(Scalar::Str("sw1".into())));
        assert_eq!(
            value(&l, &format!("{nb}/chassis-id-type")),
            Some(Scalar::Str("MAC_ADDRESS".into()))
        );
        assert_eq!(value(&l, &format!("{nb}/ttl")), Some(Scalar::Uint(120)));
        in_schema(&l);
    }

    #[test]
    fn an_lsp_is_keyed_by_id_and_level_with_its_flags_hostnames_and_prefixes() {
        let st = json!({ "isis_router_name": "d1.isis", "lsps": [{ "lsp_id": "640000000002-00-00", "pdu_type": "level_2",
            "remaining_lifetime": 1190, "sequence_number": 3, "pdu_length": 120,
            "flags": { "partition_repair": false, "attached_default": false, "overload": true },
            "tlvs": { "hostname_tlvs": [{ "hostname": "d2" }],
                "extended_is_reachability_tlvs": [{ "neighbors": [{ "system_id": "640000000001" }] }],
                "extended_ipv4_reachability_tlvs": [{ "prefixes": [{ "ipv4_address": "10.30.0.0", "prefix_length": 24,
                    "metric": 10, "redistribution_type": "up" }] }],
                "ipv6_reachability_tlvs": [{ "prefixes": [{ "ipv6_address": "2001:db8:30::", "prefix_length": 64,
                    "metric": 10, "redistribution_type": "up", "origin_type": "internal" }] }] } }] });
        let l = isis_lsps(&[st]);
        in_schema(&l);
        let at = "isis-routers/isis-router[name=d1.isis]/state/link-state-database/lsp-states/lsps[lsp-id=640000000002-00-00][pdu-type=LEVEL_2]";
        assert_eq!(value(&l, &format!("{at}/state/sequence-number")), Some(Scalar::Uint(3)));
        assert_eq!(
            value(&l, &format!("{at}/state/flags")),
            Some(Scalar::Strs(vec!["OVERLOAD".into()]))
        );
        assert_eq!(
            value(&l, &format!("{at}/tlvs/hostnames/state/hostname")),
            Some(Scalar::Strs(vec!["d2".into()]))
        );
        let v4 = format!("{at}/tlvs/extended-ipv4-reachability/prefixes/prefix[prefix=10.30.0.0]/state");
        assert_eq!(value(&l, &format!("{v4}/metric")), Some(Scalar::Uint(10)));
        assert_eq!(
            value(&l, &format!("{v4}/redistribution-type")),
            Some(Scalar::Str("UP".into()))
        );
        let v6 = format!("{at}/tlvs/ipv6-reachability/prefixes/prefix[prefix=2001:db8:30::]/state/origin-type");
        assert_eq!(value(&l, &v6), Some(Scalar::Str("INTERNAL".into())));
        let nb =
            format!("{at}/tlvs/extended-is-reachability/neighbors/neighbor[system-id=640000000001]/state/system-id");
        assert_eq!(value(&l, &nb), Some(Scalar::Str("640000000001".into())));
    }

    fn ospf_data(rel: &str) -> Value {
        let p = format!(
            "{}/../gapless-otg/src/ospf/testdata/{rel}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    #[test]
    fn learned_lsas_are_keyed_by_type_and_id_with_their_links() {
        use gapless_otg::ospf::frr_json::{lsas, lsas_v3, KINDS_V3};
        let db = ["router", "network", "summary", "asbr-summary", "external"].map(ospf_data);
        let v2 = lsas("o1", "1.1.1.1", [&db[0], &db[1], &db[2], &db[3], &db[4]]);
        let l = ospf_lsas(std::slice::from_ref(&v2), false);
        in_schema(&l);
        let r = &v2["router_lsas"][0];
        let id = r["header"]["lsa_id"].as_str().unwrap();
        let at = format!(
            "ospfv2-routers/ospfv2-router[name=o1]/state/link-state-database/lsa-states/router-lsa[link-state-id={id}]"
        );
        assert_eq!(
            value(&l, &format!("{at}/state/advertising-router")),
            Some(Scalar::Str("1.1.1.2".into()))
        );
        let link = &r["links"][0];
        let lp = format!("{at}/state/link[id={}]/state/type", link["id"].as_str().unwrap());
        let want = link["type"].as_str().unwrap().to_ascii_uppercase();
        assert_eq!(value(&l, &lp), Some(Scalar::Str(want)));
        let d6 = KINDS_V3.map(|k| ospf_data(&format!("v3/{k}")));
        let v3 = lsas_v3(
            "o6",
            "1.1.1.1",
            [&d6[0], &d6[1], &d6[2], &d6[3], &d6[4], &d6[5], &d6[6]],
        );
        let l = ospf_lsas(std::slice::from_ref(&v3), true);
        in_schema(&l);
        let id = v3["router_lsas"][0]["header"]["lsa_id"].as_str().unwrap();
        let at = format!(
            "ospfv3-routers/ospfv3-router[name=o6]/state/link-state-database/lsa-states/router-lsa[link-state-id={id}]"
        );
        assert_eq!(
            value(&l, &at),
            Some(Scalar::Json(
                json!({ "state": { "link": [{ "type": "POINT_TO_POINT", "metric": 10 }] } })
            )),
            "an OSPFv3 router LSA's links, a keyless list, as JSON at the LSA"
        );
        let iap = v3["inter_area_prefix_lsas"][0]["header"]["lsa_id"].as_str().unwrap();
        let p = format!("ospfv3-routers/ospfv3-router[name=o6]/state/link-state-database/lsa-states/inter-area-prefix-lsa[link-state-id={iap}]/state/address-prefix");
        assert_eq!(value(&l, &p), Some(Scalar::Str("2001:db8:2::".into())));
    }

    #[test]
    fn a_learned_prefix_is_keyed_by_address_length_origin_and_path_id() {
        let st = json!({ "bgp_peer_name": "p1",
            "ipv4_unicast_prefixes": [{ "ipv4_address": "10.20.0.0", "prefix_length": 24, "origin": "igp",
                "ipv4_next_hop": "1.1.1.2", "multi_exit_discriminator": 7,
                "as_path": { "segments": [{ "type": "as_seq", "as_numbers": [65002, 65100] }, { "type": "as_set", "as_numbers": [7] }] } }],
            "ipv6_unicast_prefixes": [{ "ipv6_address": "2001:db8:20::", "prefix_length": 64, "origin": "incomplete",
                "path_id": 3, "ipv6_next_hop": "2001:db8::2" }] });
        let l = bgp_prefixes(&[st]);
        let v4 = "bgp-peers/bgp-peer[name=p1]/unicast-ipv4-prefixes/unicast-ipv4-prefix[address=10.20.0.0][origin=IGP][path-id=0][prefix-length=24]/state";
        assert_eq!(
            value(&l, &format!("{v4}/next-hop-ipv4-address")),
            Some(Scalar::Str("1.1.1.2".into()))
        );
        assert_eq!(value(&l, &format!("{v4}/origin")), Some(Scalar::Str("IGP".into())));
        assert_eq!(
            value(&l, &format!("{v4}/multi-exit-discriminator")),
            Some(Scalar::Uint(7))
        );
        let entry = v4.trim_end_matches("/state");
        assert_eq!(
            value(&l, entry),
            Some(Scalar::Json(json!({ "state": { "as-path": [
                { "segment-type": "AS_SEQUENCE", "as_numbers": [65002, 65100] },
                { "segment-type": "AS_SET", "as_numbers": [7] }] } }))),
            "the AS path, a keyless list, as JSON at its entry"
        );
        let v6 = "bgp-peers/bgp-peer[name=p1]/unicast-ipv6-prefixes/unicast-ipv6-prefix[address=2001:db8:20::][origin=INCOMPLETE][path-id=3][prefix-length=64]/state";
        assert_eq!(value(&l, &format!("{v6}/path-id")), Some(Scalar::Uint(3)));
        in_schema(&l);
    }
}
