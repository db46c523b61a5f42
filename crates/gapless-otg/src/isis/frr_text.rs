//! isisd's answers read as OTG `isis` metrics and `isis_lsps` states. FRR 8.4's
//! `show isis database json` keeps one LSP per level (../shared/FRR.md), so the database is
//! read from `show isis database detail` as text, its LSP IDs (printed with hostnames) mapped
//! back to system IDs by `show isis hostname`; counters come from `show isis summary json`,
//! adjacencies from `show isis neighbor detail`. Tests feed outputs recorded from Debian's
//! FRR 8.4.4 (`testdata/`).

use serde_json::{json, Map, Value};

/// One LSP of the database, as `show isis database detail` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lsp {
    pub level: u8,
    /// As printed: `rb.00-00` or `0000.0000.0002.00-00`.
    pub printed_id: String,
    /// Marked `*`: the router's own.
    pub own: bool,
    pub pdu_len: u32,
    pub seq: u64,
    pub holdtime: u32,
    /// ATT, P, OL.
    pub flags: [bool; 3],
    /// The TLV lines, trimmed.
    pub tlvs: Vec<String>,
}

/// `show isis hostname`: (dotted system id, hostname) pairs.
pub fn hostnames(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().filter(|w| *w != "*").collect();
            match t.as_slice() {
                [_level, id, name] if is_dotted(id) => Some((id.to_string(), name.to_string())),
                [id, name] if is_dotted(id) => Some((id.to_string(), name.to_string())),
                _ => None,
            }
        })
        .collect()
}

fn is_dotted(s: &str) -> bool {
    s.len() == 14 && s.split('.').count() == 3 && s.bytes().all(|b| b == b'.' || b.is_ascii_hexdigit())
}

/// `show isis database detail`: every LSP at each level.
pub fn database(text: &str) -> Vec<Lsp> {
    let mut out: Vec<Lsp> = Vec::new();
    let mut level = 0u8;
    let mut current: Option<Lsp> = None;
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("IS-IS Level-") {
            out.extend(current.take());
            level = rest.chars().next().and_then(|c| c.to_digit(10)).unwrap_or(0) as u8;
            continue;
        }
        if let Some(lsp) = header(line, level) {
            out.extend(current.replace(lsp));
            continue;
        }
        let t = line.trim();
        match &mut current {
            Some(_) if t.is_empty() || t.ends_with(" LSPs") => out.extend(current.take()),
            Some(c) if line.starts_with(' ') => c.tlvs.push(t.to_string()),
            _ => {}
        }
    }
    out.extend(current);
    out
}

/// An LSP's header line: `rb.00-00  *  121  0x00000002  0x4c09  1177  1/0/0`.
fn header(line: &str, level: u8) -> Option<Lsp> {
    if line.starts_with(' ') || level == 0 {
        return None;
    }
    let t: Vec<&str> = line.split_whitespace().collect();
    let (own, rest) = match t.get(1) {
        Some(&"*") => (true, &t[2..]),
        _ => (false, t.get(1..)?),
    };
    let [len, seq, _sum, hold, flags] = rest else {
        return None;
    };
    let f: Vec<bool> = flags.split('/').map(|x| x == "1").collect();
    Some(Lsp {
        level,
        printed_id: t[0].to_string(),
        own,
        pdu_len: len.parse().ok()?,
        seq: u64::from_str_radix(seq.strip_prefix("0x")?, 16).ok()?,
        holdtime: hold.parse().ok()?,
        flags: [*f.first()?, *f.get(1)?, *f.get(2)?],
        tlvs: Vec::new(),
    })
}

/// A printed id (`rb.00-00`, `rb.01`, `0000.0000.0002.00`) in the model's format
/// (`000000000002-00-00`, or `000000000002-01` without the fragment).
pub fn model_id(printed: &str, names: &[(String, String)]) -> Option<String> {
    let (who, tail) = printed.rsplit_once('.')?;
    let dotted = if is_dotted(who) {
        who.to_string()
    } else {
        names.iter().find(|(_, n)| n == who)?.0.clone()
    };
    Some(format!("{}-{tail}", dotted.replace('.', "")))
}

/// The system id (12 hex digits) of a printed neighbour id (`rb.01`, `0000.0000.0001.00`).
fn neighbor_id(printed: &str, names: &[(String, String)]) -> Option<String> {
    model_id(printed, names).map(|m| m[..12].to_string())
}

/// `isis_lsps` of a router: the LSPs learned from peers (not its own), in the model's form.
pub fn lsps_state(router: &str, db: &[Lsp], names: &[(String, String)]) -> Value {
    let lsps: Vec<Value> = db
        .iter()
        .filter(|l| !l.own)
        .filter_map(|l| lsp_state(l, names))
        .collect();
    json!({ "isis_router_name": router, "lsps": lsps })
}

fn lsp_state(l: &Lsp, names: &[(String, String)]) -> Option<Value> {
    let mut tlvs = Map::new();
    for t in &l.tlvs {
        tlv(t, names, &mut tlvs);
    }
    Some(json!({
        "lsp_id": model_id(&l.printed_id, names)?,
        "pdu_type": if l.level == 1 { "level_1" } else { "level_2" },
        "remaining_lifetime": l.holdtime,
        "sequence_number": l.seq,
        "pdu_length": l.pdu_len,
        "flags": {
            "partition_repair": l.flags[1],
            "attached_default": l.flags[0],
            "overload": l.flags[2],
        },
        "tlvs": tlvs,
    }))
}

/// One TLV line into its list in `tlvs` (one TLV object per kind, holding every item).
fn tlv(line: &str, names: &[(String, String)], tlvs: &mut Map<String, Value>) {
    let Some((kind, rest)) = line.split_once(": ") else {
        return;
    };
    let (key, list, item) = match kind {
        "Hostname" => ("hostname_tlvs", None, json!({ "hostname": rest.trim() })),
        "IS Reachability" | "Extended Reachability" | "MT Reachability" => {
            let Some(id) = rest.split_whitespace().next().and_then(|p| neighbor_id(p, names)) else {
                return;
            };
            let key = if kind == "IS Reachability" {
                "is_reachability_tlvs"
            } else {
                "extended_is_reachability_tlvs"
            };
            (key, Some("neighbors"), json!({ "system_id": id }))
        }
        "IP Reachability"
        | "Extended IP Reachability"
        | "MT IP Reachability"
        | "IPv6 Reachability"
        | "MT IPv6 Reachability" => {
            let Some(p) = prefix(rest, kind.contains("IPv6"), kind == "IP Reachability") else {
                return;
            };
            let key = match kind {
                "IP Reachability" => "ipv4_internal_reachability_tlvs",
                k if k.contains("IPv6") => "ipv6_reachability_tlvs",
                _ => "extended_ipv4_reachability_tlvs",
            };
            (key, Some("prefixes"), p)
        }
        _ => return,
    };
    let entry = tlvs.entry(key).or_insert_with(|| json!([]));
    let arr = entry.as_array_mut().expect("a list");
    match list {
        None => arr.push(item),
        Some(field) => {
            if arr.is_empty() {
                arr.push(json!({ field: [] }));
            }
            arr[0][field].as_array_mut().expect("a list").push(item);
        }
    }
}

/// `10.2.0.0/24 (Metric: 20)`, perhaps with `Down` or `external` after it.
fn prefix(rest: &str, v6: bool, narrow: bool) -> Option<Value> {
    let mut words = rest.split_whitespace();
    let (addr, len) = words.next()?.split_once('/')?;
    let metric: u32 = rest
        .split_once("Metric: ")?
        .1
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let lower = rest.to_ascii_lowercase();
    let down = if lower.contains("down") { "down" } else { "up" };
    let (akey, mkey) = match (v6, narrow) {
        (true, _) => ("ipv6_address", "metric"),
        (false, true) => ("ipv4_address", "default_metric"),
        (false, false) => ("ipv4_address", "metric"),
    };
    let mut p = json!({
        akey: addr,
        "prefix_length": len.parse::<u32>().ok()?,
        mkey: metric,
        "redistribution_type": down,
    });
    if v6 || narrow {
        p["origin_type"] = json!(if lower.contains("external") {
            "external"
        } else {
            "internal"
        });
    }
    Some(p)
}

/// One adjacency of `show isis neighbor detail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjacency {
    /// 1, 2, or 3 for both.
    pub level: u8,
    pub up: bool,
    /// FRR's count: one for each level each time it came up.
    pub flaps: u64,
}

/// `show isis neighbor detail`: each adjacency's level, state and flaps.
pub fn adjacencies(text: &str) -> Vec<Adjacency> {
    let mut out: Vec<Adjacency> = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Interface: ") {
            let field = |k: &str| {
                rest.split(", ")
                    .find_map(|f| f.strip_prefix(k))
                    .map(str::to_string)
                    .unwrap_or_default()
            };
            out.push(Adjacency {
                level: field("Level: ").parse().unwrap_or(0),
                up: field("State: ") == "Up",
                flaps: 0,
            });
        } else if let (Some(rest), Some(a)) = (line.strip_prefix("Adjacency flaps: "), out.last_mut()) {
            a.flaps = rest.split(',').next().and_then(|n| n.trim().parse().ok()).unwrap_or(0);
        }
    }
    out
}

/// How many times adjacencies went down at L1 and at L2, from isisd's log
/// (`log-adjacency-changes`): FRR forgets a p2p adjacency, and its flap count, once it is down.
pub fn downs(log: &str) -> [u64; 2] {
    let mut n = [0u64; 2];
    for l in log
        .lines()
        .filter(|l| l.contains("%ADJCHANGE") && l.contains("changed from Up to Down"))
    {
        let level = l.split(" for level-").nth(1).unwrap_or_default();
        if level.starts_with("1-2") {
            n[0] += 1;
            n[1] += 1;
        } else if level.starts_with('1') {
            n[0] += 1;
        } else if level.starts_with('2') {
            n[1] += 1;
        }
    }
    n
}

/// The `isis` metric of a router running at `levels`: from `show isis summary json`
/// (`summary`), its adjacencies, its adjacencies' downs per level (session flaps, [`downs`])
/// and its database. Only levels it runs at are given; the counters FRR does not keep
/// (graceful restart) are absent, not zero. A p2p hello serves both levels, so it counts at
/// each level the router runs.
pub fn metric(name: &str, levels: u8, summary: &Value, adj: &[Adjacency], flaps: [u64; 2], db: &[Lsp]) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    let area = &summary["areas"][0];
    let (tx, rx) = (&area["tx-pdu-type"], &area["rx-pdu-type"]);
    for l in [1u8, 2] {
        if levels & l == 0 {
            continue;
        }
        let at = |a: &Adjacency| a.level & l != 0;
        let up = adj.iter().filter(|a| at(a) && a.up).count();
        let p = format!("l{l}_");
        m.insert(format!("{p}sessions_up"), json!(up));
        m.insert(format!("{p}session_flap"), json!(flaps[usize::from(l - 1)]));
        m.insert(
            format!("{p}database_size"),
            json!(db.iter().filter(|x| x.level == l).count()),
        );
        let pairs = [
            ("broadcast_hellos", format!("l{l}-iih")),
            ("point_to_point_hellos", "p2p-iih".into()),
            ("psnp", format!("l{l}-psnp")),
            ("csnp", format!("l{l}-csnp")),
            ("lsp", format!("l{l}-lsp")),
        ];
        for (ours, theirs) in pairs {
            for (dir, src) in [("sent", tx), ("received", rx)] {
                if let Some(n) = src[&theirs].as_u64() {
                    m.insert(format!("{p}{ours}_{dir}"), json!(n));
                } else if src.is_object() {
                    m.insert(format!("{p}{ours}_{dir}"), json!(0));
                }
            }
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> String {
        std::fs::read_to_string(format!("{}/src/isis/testdata/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn hostnames_map_printed_ids_back_to_system_ids() {
        let names = hostnames(&data("hostname.txt"));
        assert_eq!(
            names,
            vec![
                ("0000.0000.0002".to_string(), "rb".to_string()),
                ("0000.0000.0001".to_string(), "ra".to_string())
            ]
        );
        assert_eq!(model_id("rb.00-00", &names).as_deref(), Some("000000000002-00-00"));
        assert_eq!(
            model_id("0000.0000.0009.01-00", &names).as_deref(),
            Some("000000000009-01-00")
        );
        assert_eq!(model_id("nobody.00-00", &names), None);
    }

    #[test]
    fn the_database_lists_each_lsp_per_level_with_its_tlvs() {
        let db = database(&data("database-detail.txt"));
        let got: Vec<(u8, &str, bool)> = db.iter().map(|l| (l.level, l.printed_id.as_str(), l.own)).collect();
        assert_eq!(
            got,
            vec![
                (1, "ra.00-00", true),
                (1, "rb.00-00", false),
                (2, "ra.00-00", true),
                (2, "rb.00-00", false)
            ]
        );
        let rb = &db[1];
        assert_eq!((rb.pdu_len, rb.seq, rb.flags), (121, 2, [true, false, false]));
        assert!(rb
            .tlvs
            .contains(&"Extended IP Reachability: 10.2.0.0/24 (Metric: 20)".to_string()));
    }

    #[test]
    fn lsps_state_lists_only_the_peers_lsps_in_the_models_form() {
        let names = hostnames(&data("hostname.txt"));
        let s = lsps_state("ra", &database(&data("database-detail.txt")), &names);
        let lsps = s["lsps"].as_array().unwrap();
        assert_eq!(lsps.len(), 2, "{s}");
        let l1 = &lsps[0];
        assert_eq!(l1["lsp_id"], "000000000002-00-00");
        assert_eq!(l1["pdu_type"], "level_1");
        assert_eq!(l1["sequence_number"], 2);
        assert_eq!(l1["tlvs"]["hostname_tlvs"][0]["hostname"], "rb");
        assert_eq!(
            l1["tlvs"]["extended_is_reachability_tlvs"][0]["neighbors"][0]["system_id"],
            "000000000001"
        );
        let v4 = &l1["tlvs"]["extended_ipv4_reachability_tlvs"][0]["prefixes"];
        assert!(v4.as_array().unwrap().contains(
            &json!({"ipv4_address": "10.2.0.0", "prefix_length": 24, "metric": 20, "redistribution_type": "up"})
        ));
        let v6 = &l1["tlvs"]["ipv6_reachability_tlvs"][0]["prefixes"];
        assert!(v6
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["ipv6_address"] == "2001:db8:2::" && p["metric"] == 20));
    }

    #[test]
    fn narrow_reachability_and_down_bits_are_read() {
        let names = vec![("0000.0000.0001".to_string(), "ra".to_string())];
        let mut m = Map::new();
        tlv("IP Reachability: 10.9.0.0/16 (Metric: 7)", &names, &mut m);
        tlv("IS Reachability: ra.00 (Metric: 10)", &names, &mut m);
        tlv("Extended IP Reachability: 10.8.0.0/16 (Metric: 3) Down", &names, &mut m);
        assert_eq!(
            m["ipv4_internal_reachability_tlvs"][0]["prefixes"][0]["default_metric"],
            7
        );
        assert_eq!(
            m["is_reachability_tlvs"][0]["neighbors"][0]["system_id"],
            "000000000001"
        );
        assert_eq!(
            m["extended_ipv4_reachability_tlvs"][0]["prefixes"][0]["redistribution_type"],
            "down"
        );
    }

    #[test]
    fn metrics_count_sessions_flaps_and_pdus_per_level() {
        let summary: Value = serde_json::from_str(&data("summary.json")).unwrap();
        let adj = adjacencies(&data("neighbor-detail.txt"));
        assert_eq!(
            adj,
            vec![Adjacency {
                level: 3,
                up: true,
                flaps: 2
            }]
        );
        let db = database(&data("database-detail.txt"));
        let m = metric("ra", 3, &summary, &adj, [0, 0], &db);
        assert_eq!(m["l1_sessions_up"], 1);
        assert_eq!(m["l2_sessions_up"], 1);
        assert_eq!(m["l1_session_flap"], 0, "{m}");
        assert_eq!(m["l2_database_size"], 2);
        assert_eq!(m["l1_lsp_sent"], summary["areas"][0]["tx-pdu-type"]["l1-lsp"]);
        assert_eq!(
            m["l2_point_to_point_hellos_received"],
            summary["areas"][0]["rx-pdu-type"]["p2p-iih"]
        );
        assert!(
            m.get("gr_initiated").is_none(),
            "FRR keeps no such counter: absent, not 0"
        );
        let only_l2 = metric("ra", 2, &summary, &adj, [0, 3], &db);
        assert!(only_l2.get("l1_sessions_up").is_none() && only_l2["l2_sessions_up"] == 1);
        assert_eq!(only_l2["l2_session_flap"], 3);
    }

    #[test]
    fn flaps_are_the_downs_isisd_logged_per_level() {
        let log = data("isisd.log");
        assert_eq!(downs(&log), [1, 1], "one L1/L2 adjacency that went down once:\n{log}");
        let l2 = "2026/11/27 05:01:19 ISIS: [Q7SVW-YVKRH] %ADJCHANGE: Adjacency to r (e) for level-2 changed from Up to Down, holding time expired";
        assert_eq!(downs(l2), [0, 1]);
    }
}
