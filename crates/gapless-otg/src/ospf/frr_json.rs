//! ospfd's JSON read as OTG `ospfv2` metrics and `ospfv2_lsas` states; adjacency flaps from
//! its log (`log-adjacency-changes`: FRR deletes a neighbour, and what it knew of it, when it
//! goes down). Tests feed outputs recorded from Debian's FRR 8.4.4 (`testdata/`).

use serde_json::{json, Map, Value};

/// The LSA kinds of each version's database, in the order `frr_json::lsas`/`lsas_v3` take.
pub const KINDS_V2: [&str; 5] = ["router", "network", "summary", "asbr-summary", "external"];
pub const KINDS_V3: [&str; 7] = [
    "router",
    "network",
    "inter-prefix",
    "inter-router",
    "as-external",
    "link",
    "intra-prefix",
];

/// How many times a neighbour left Full, from ospfd's log.
pub fn flaps(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("AdjChg") && l.contains(": Full -> "))
        .count() as u64
}

/// The `ospfv2` metric: neighbours from `show ip ospf neighbor json`, packet counters summed
/// over `show ip ospf interface traffic json`. FRR counts packets, not LSAs by type: the
/// model's LSA counters are absent, not zero.
pub fn metric(name: &str, neighbors: &Value, traffic: &Value, flaps: u64) -> Value {
    let states: Vec<String> = neighbors["neighbors"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .flat_map(|v| v.as_array().cloned().unwrap_or_default())
        .map(|n| {
            n["converged"]
                .as_str()
                .or(n["nbrState"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let keys = [
        ("hellos", "hello"),
        ("dbd", "dbDesc"),
        ("ls_request", "lsReq"),
        ("ls_update", "lsUpd"),
        ("ls_ack", "lsAck"),
    ];
    counted(name, &states, traffic, flaps, &keys, ("Out", "In"))
}

/// The `ospfv3` metric: from `show ipv6 ospf6 neighbor json` (a list) and `show ipv6 ospf6
/// interface traffic json` (`helloRx`, `helloTx`, ...), as [`metric`] reads ospfd's.
pub fn metric_v3(name: &str, neighbors: &Value, traffic: &Value, flaps: u64) -> Value {
    let states: Vec<String> = neighbors["neighbors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| n["state"].as_str().unwrap_or_default().to_string())
        .collect();
    let keys = [
        ("hellos", "hello"),
        ("dbd", "dbDesc"),
        ("ls_request", "lsReq"),
        ("ls_update", "lsUpdate"),
        ("ls_ack", "lsAck"),
    ];
    counted(name, &states, traffic, flaps, &keys, ("Tx", "Rx"))
}

/// The metric both versions give: neighbours Full and Down, flaps, and each packet counter
/// (`keys`: ours, FRR's stem; `dirs`: FRR's sent and received suffixes) summed over the
/// interfaces, absent when FRR gave no traffic table.
fn counted(
    name: &str,
    states: &[String],
    traffic: &Value,
    flaps: u64,
    keys: &[(&str, &str)],
    dirs: (&str, &str),
) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    let count = |p: &str| json!(states.iter().filter(|s| s.starts_with(p)).count());
    m.insert("full_state_count".into(), count("Full"));
    m.insert("down_state_count".into(), count("Down"));
    m.insert("sessions_flap".into(), json!(flaps));
    let sum = |k: String| -> u64 {
        traffic
            .as_object()
            .into_iter()
            .flat_map(|o| o.values())
            .filter_map(|i| i[&k].as_u64())
            .sum()
    };
    if traffic.is_object() {
        for (ours, theirs) in keys {
            m.insert(format!("{ours}_sent"), json!(sum(format!("{theirs}{}", dirs.0))));
            m.insert(format!("{ours}_received"), json!(sum(format!("{theirs}{}", dirs.1))));
        }
    }
    Value::Object(m)
}

/// Whether an LSA of this age is live: one at MaxAge (3600 s) is being flushed, and a
/// router that re-originated it under another id shows both for a while.
fn live(age: &Value) -> bool {
    age.as_u64().is_none_or(|a| a < 3600)
}

/// Every OSPFv3 LSA of a `show ipv6 ospf6 database <type> detail json` reply (area, AS or
/// interface scoped) advertised by another router than `own`.
fn learned_v3<'a>(v: &'a Value, own: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    [
        "areaScopedLinkStateDb",
        "asScopedLinkStateDb",
        "interfaceScopedLinkStateDb",
    ]
    .into_iter()
    .flat_map(move |k| v[k].as_array().into_iter().flatten())
    .flat_map(|scope| scope["lsa"].as_array().into_iter().flatten())
    .filter(move |l| l["advertisingRouter"].as_str() != Some(own) && live(&l["age"]))
}

fn header_v3(l: &Value) -> Value {
    json!({
        "lsa_id": l["linkStateId"],
        "advertising_router_id": l["advertisingRouter"],
        "sequence_number": l["lsSequenceNumber"],
        "age": l["age"],
    })
}

/// A prefix (`2001:db8::/64`) as the model's address and length.
fn prefix_parts(p: &Value) -> (String, u64) {
    let s = p.as_str().unwrap_or_default();
    let (a, l) = s.split_once('/').unwrap_or((s, "0"));
    (a.to_string(), l.parse().unwrap_or(0))
}

/// The `ospfv3_lsas` state of router `name` whose id is `own`, from `show ipv6 ospf6 database
/// router|network|inter-prefix|inter-router|as-external|link|intra-prefix detail json`: the
/// LSAs learned from other routers, by type.
pub fn lsas_v3(name: &str, own: &str, db: [&Value; 7]) -> Value {
    let [router, network, inter_prefix, inter_router, external, link, intra] = db;
    let each = |v: &Value, f: &dyn Fn(&Value) -> Value| -> Vec<Value> { learned_v3(v, own).map(f).collect() };
    let with_prefix = |l: &Value, p: &Value, metric: &Value| {
        let (a, len) = prefix_parts(p);
        json!({ "header": header_v3(l), "address_prefix": a, "prefix_length": len, "metric": metric })
    };
    json!({
        "router_name": name,
        "router_lsas": each(router, &|l| {
            let links: Vec<Value> = l["lsaDescription"].as_array().into_iter().flatten().map(|d| {
                let t = d["type"].as_str().unwrap_or_default();
                let kind = if t.contains("Point") { "point_to_point" } else if t.contains("Transit") { "transit" } else { "virtual" };
                json!({ "type": kind, "metric": d["metric"] })
            }).collect();
            let nbr = l["lsaDescription"][0]["neighborRouterId"].clone();
            json!({ "header": header_v3(l), "neighbor_router_id": nbr, "links": links })
        }),
        "network_lsas": each(network, &|l| {
            let ids: Vec<Value> = l["attachedRouter"].as_array().cloned().unwrap_or_default();
            json!({ "header": header_v3(l), "attached_router_ids": ids })
        }),
        "inter_area_prefix_lsas": each(inter_prefix, &|l| with_prefix(l, &l["prefix"], &l["metric"])),
        "inter_area_router_lsas": each(inter_router, &|l| json!({
            "header": header_v3(l), "metric": l["metric"], "destination_router_id": l["destinationRouterId"] })),
        "external_as_lsas": each(external, &|l| {
            let mut x = with_prefix(l, &l["prefix"], &l["metric"]);
            x["referenced_ls_type"] = l["referenceLsType"].clone();
            x
        }),
        "nssa_lsas": [],
        "link_lsas": each(link, &|l| {
            let (a, len) = prefix_parts(&l["prefix"][0]["prefix"]);
            json!({ "header": header_v3(l), "address_prefix": a, "prefix_length": len, "link_local_address": l["linkLocalAddress"] })
        }),
        "intra_area_prefix_lsas": each(intra, &|l| with_prefix(l, &l["prefix"][0]["prefix"], &l["prefix"][0]["metric"])),
    })
}

/// The option bits of FRR's `options` string (`*|-|-|-|-|-|E|-`: DN O DC L N/P MC E MT,
/// high bit first).
fn option_bits(s: &str) -> u32 {
    s.split('|')
        .enumerate()
        .filter(|(_, f)| *f != "-" && !f.is_empty())
        .map(|(i, _)| 1u32 << (7 - i.min(7)))
        .sum()
}

fn header(l: &Value) -> Value {
    json!({
        "lsa_id": l["linkStateId"],
        "advertising_router_id": l["advertisingRouter"],
        "sequence_number": u32::from_str_radix(l["lsaSeqNumber"].as_str().unwrap_or("0"), 16).unwrap_or(0),
        "age": l["lsaAge"],
        "option_bits": option_bits(l["options"].as_str().unwrap_or_default()),
    })
}

fn mask(len: &Value) -> String {
    let n = len.as_u64().unwrap_or(0).min(32) as u32;
    std::net::Ipv4Addr::from(u32::MAX.checked_shl(32 - n).unwrap_or(0)).to_string()
}

/// Every LSA of `by_area` (`{"areas": {area: [lsa...]}}`, or a list) advertised by another
/// router than `own`.
fn learned<'a>(v: &'a Value, own: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    let lists: Vec<&Value> = match v["areas"].as_object() {
        Some(m) => m.values().collect(),
        None => vec![v],
    };
    lists
        .into_iter()
        .flat_map(|l| l.as_array().into_iter().flatten())
        .filter(move |l| l["advertisingRouter"].as_str() != Some(own) && live(&l["lsaAge"]))
}

fn link(l: &Value) -> Value {
    let t = l["linkType"].as_str().unwrap_or_default();
    let (kind, id, data) = if t.contains("point-to-point") {
        ("point_to_point", &l["neighborRouterId"], &l["routerInterfaceAddress"])
    } else if t.contains("Transit") {
        ("transit", &l["designatedRouterAddress"], &l["routerInterfaceAddress"])
    } else if t.contains("Virtual") {
        ("virtual", &l["neighborRouterId"], &l["routerInterfaceAddress"])
    } else {
        ("stub", &l["networkAddress"], &l["networkMask"])
    };
    json!({ "type": kind, "id": id, "data": data, "metric": l["tos0Metric"] })
}

/// The `ospfv2_lsas` state of router `name` whose id is `own`, from `show ip ospf database
/// router|network|summary|asbr-summary|external json`: the LSAs learned from other routers,
/// by type, each with its header in the model's form.
pub fn lsas(name: &str, own: &str, db: [&Value; 5]) -> Value {
    let [router, network, summary, asbr, external] = db;
    let routers: Vec<Value> = learned(&router["routerLinkStates"], own)
        .map(|l| {
            let links: Vec<Value> = l["routerLinks"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .map(link)
                .collect();
            json!({ "header": header(l), "links": links })
        })
        .collect();
    let networks: Vec<Value> = learned(&network["networkLinkStates"], own)
        .map(|l| {
            let ids: Vec<&String> = l["attchedRouters"]
                .as_object()
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            json!({ "header": header(l), "network_mask": mask(&l["networkMask"]), "neighbor_router_ids": ids })
        })
        .collect();
    let with_metric = |v: &Value, key: &str| -> Vec<Value> {
        learned(&v[key], own)
            .map(|l| json!({ "header": header(l), "network_mask": mask(&l["networkMask"]), "metric": l["tos0Metric"] }))
            .collect()
    };
    let externals: Vec<Value> = learned(&external["asExternalLinkStates"], own)
        .map(|l| {
            let t = if l["metricType"].as_str() == Some("E1") { 1 } else { 2 };
            json!({ "header": header(l), "network_mask": mask(&l["networkMask"]), "metric": l["metric"], "metric_type": t })
        })
        .collect();
    json!({
        "router_name": name,
        "router_lsas": routers,
        "network_lsas": networks,
        "network_summary_lsas": with_metric(summary, "summaryLinkStates"),
        "summary_as_lsas": with_metric(asbr, "asbrSummaryLinkStates"),
        "external_as_lsas": externals,
        "nssa_lsas": [],
        "opaque_lsas": [],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> Value {
        let p = format!("{}/src/ospf/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    #[test]
    fn metrics_count_full_neighbours_and_packets_over_interfaces() {
        let log =
            std::fs::read_to_string(format!("{}/src/ospf/testdata/ospfd.log", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert_eq!(flaps(&log), 1, "one Full -> Deleted in the log");
        let m = metric("o1", &data("neighbor.json"), &data("traffic.json"), 1);
        assert_eq!(
            (m["full_state_count"].as_u64(), m["sessions_flap"].as_u64()),
            (Some(1), Some(1))
        );
        let t = data("traffic.json");
        let hellos: u64 = t
            .as_object()
            .unwrap()
            .values()
            .map(|i| i["helloOut"].as_u64().unwrap())
            .sum();
        assert_eq!(m["hellos_sent"].as_u64(), Some(hellos));
        assert!(m.get("lsa_sent").is_none(), "FRR does not count LSAs: absent, not 0");
        let down = metric("o1", &Value::Null, &Value::Null, 0);
        assert_eq!(down["full_state_count"], 0);
        assert!(down.get("hellos_sent").is_none());
    }

    #[test]
    fn ospfv3_metrics_and_lsas_are_read_from_ospf6ds_json() {
        let v3 = |k: &str| data(&format!("v3/{k}.json"));
        let m = metric_v3("o6", &v3("neighbor"), &v3("traffic"), 0);
        assert_eq!(m["full_state_count"], 1);
        assert!(
            m["hellos_sent"].as_u64().unwrap() > 0 && m["ls_update_received"].as_u64().unwrap() > 0,
            "{m}"
        );
        let db = KINDS_V3.map(v3);
        let v = lsas_v3(
            "o6",
            "1.1.1.1",
            [&db[0], &db[1], &db[2], &db[3], &db[4], &db[5], &db[6]],
        );
        let iap: Vec<(&str, u64, u64)> = v["inter_area_prefix_lsas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["address_prefix"].as_str().unwrap(),
                    x["prefix_length"].as_u64().unwrap(),
                    x["metric"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(iap, vec![("2001:db8:2::", 64, 20)], "{v}");
        assert_eq!(v["external_as_lsas"][0]["address_prefix"], "2001:db8:29::");
        assert_eq!(v["external_as_lsas"][0]["metric"], 33);
        assert_eq!(
            v["router_lsas"][0]["links"][0],
            json!({ "type": "point_to_point", "metric": 10 })
        );
        assert_eq!(v["router_lsas"][0]["neighbor_router_id"], "1.1.1.1");
        assert!(v["link_lsas"][0]["link_local_address"]
            .as_str()
            .unwrap()
            .starts_with("fe80::"));
        assert_eq!(v["intra_area_prefix_lsas"][0]["address_prefix"], "2001:db8::");
        assert!(
            v.to_string().matches("\"advertising_router_id\":\"1.1.1.1\"").count() == 0,
            "only learned LSAs"
        );
    }

    #[test]
    fn lsas_are_the_learned_ones_by_type_in_the_models_form() {
        let (r, n, s, a, e) = (
            data("router.json"),
            data("network.json"),
            data("summary.json"),
            data("asbr-summary.json"),
            data("external.json"),
        );
        let v = lsas("o1", "1.1.1.1", [&r, &n, &s, &a, &e]);
        let routers = v["router_lsas"].as_array().unwrap();
        assert!(
            routers
                .iter()
                .all(|x| x["header"]["advertising_router_id"] == "1.1.1.2"),
            "{v}"
        );
        assert_eq!(
            routers[0]["links"][0],
            json!({ "type": "point_to_point", "id": "1.1.1.1", "data": "198.18.0.2", "metric": 10 })
        );
        let sums: Vec<(&str, &str)> = v["network_summary_lsas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["header"]["lsa_id"].as_str().unwrap(),
                    x["network_mask"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(sums, vec![("10.2.0.0", "255.255.255.0"), ("10.2.1.0", "255.255.255.0")]);
        assert_eq!(
            v["network_summary_lsas"][0]["header"]["sequence_number"],
            0x8000_0001u32
        );
        assert_eq!(v["network_summary_lsas"][0]["header"]["option_bits"], 0x82, "* and E");
        assert_eq!(v["external_as_lsas"][0]["metric_type"], 1);
        assert_eq!(v["external_as_lsas"][0]["metric"], 33);
        assert_eq!(
            v["network_lsas"][0]["neighbor_router_ids"],
            json!(["1.1.1.1", "1.1.1.2"])
        );
    }
}
