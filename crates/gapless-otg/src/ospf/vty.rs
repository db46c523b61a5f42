//! ospfd's and ospf6d's vty: every command a server sends them, and their replies read by
//! name.

use serde_json::Value;

use crate::frr::vty::{configure, Ask, Replies};
use crate::ospf::frr_json::{self, KINDS_V2, KINDS_V3};
use crate::ospf::Router;

/// The daemon of an OSPFv3 (`v6`) or OSPFv2 router.
pub fn daemon(v6: bool) -> &'static str {
    if v6 {
        "ospf6d"
    } else {
        "ospfd"
    }
}

/// The daemon's `show` prefix.
fn show(v6: bool) -> &'static str {
    if v6 {
        "show ipv6 ospf6"
    } else {
        "show ip ospf"
    }
}

/// The neighbours and the interfaces' packet counters (`neighbors`, `traffic`).
pub fn metric(v6: bool) -> Ask {
    let show = show(v6);
    Ask::new(daemon(v6))
        .with("neighbors", format!("{show} neighbor json"))
        .with("traffic", format!("{show} interface traffic json"))
}

/// The router's `ospfv2_metrics`/`ospfv3_metrics` entry from the replies to [`metric`] and
/// the adjacency flaps its log shows.
pub fn metric_of(r: &Router, replies: &Replies, flaps: u64) -> Value {
    let read = if r.v6 { frr_json::metric_v3 } else { frr_json::metric };
    read(&r.name, &replies.json("neighbors"), &replies.json("traffic"), flaps)
}

/// The link-state database, one command per LSA kind, each named by its kind.
pub fn lsas(v6: bool) -> Ask {
    let (kinds, tail): (&[&'static str], &str) = if v6 {
        (&KINDS_V3, " detail json")
    } else {
        (&KINDS_V2, " json")
    };
    let show = show(v6);
    (kinds.iter()).fold(Ask::new(daemon(v6)), |a, k| {
        a.with(k, format!("{show} database {k}{tail}"))
    })
}

/// The router's `ospfv2_lsas`/`ospfv3_lsas` state from the replies to [`lsas`].
pub fn lsas_of(r: &Router, replies: &Replies) -> Value {
    let own = r.router_id.to_string();
    if r.v6 {
        let db = KINDS_V3.map(|k| replies.json(k));
        return frr_json::lsas_v3(&r.name, &own, db.each_ref());
    }
    let db = KINDS_V2.map(|k| replies.json(k));
    frr_json::lsas(&r.name, &own, db.each_ref())
}

/// Takes router `r`'s range `k`'s stub interface (an OSPFv3 one, named by gapless) out of
/// `area` (or puts it back): how an area range is withdrawn (FRR 8.4's ospf6d sometimes sent
/// no LS Update for a stub that went down: DESIGN-NOTES 76).
pub fn stub_area(r: &Router, k: usize, area: std::net::Ipv4Addr, advertise: bool) -> Vec<String> {
    let no = if advertise { "" } else { "no " };
    let stub = crate::ospf::stub_name(r, k);
    configure([format!("interface {stub}"), format!("{no}ipv6 ospf6 area {area}")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_database_reply_is_read_by_its_lsa_kind() {
        let a = lsas(true);
        assert_eq!(a.daemon, "ospf6d");
        assert_eq!(a.commands()[2], "show ipv6 ospf6 database inter-prefix detail json");
        let v2 = lsas(false);
        assert_eq!(
            v2.commands(),
            KINDS_V2.map(|k| format!("show ip ospf database {k} json"))
        );
        let r = a.replies((0..7).map(|i| format!("{{\"n\": {i}}}")).collect());
        assert_eq!(r.json("intra-prefix")["n"], 6);
    }

    #[test]
    fn an_area_range_is_withdrawn_by_taking_its_stub_out_of_the_area() {
        let r = crate::ospf::tests::router_v6();
        let area = std::net::Ipv4Addr::new(0, 0, 0, 1);
        assert_eq!(
            stub_area(&r, 0, area, false),
            [
                "configure terminal",
                "interface gl6r0",
                "no ipv6 ospf6 area 0.0.0.1",
                "end"
            ]
        );
        assert_eq!(stub_area(&r, 0, area, true)[2], "ipv6 ospf6 area 0.0.0.1");
    }
}
