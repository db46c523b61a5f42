//! The server's API over a real socket: profile CRUD with the core's validation, the token
//! rule, bad and oversize bodies, and a database reopened after a server that did not end
//! its runs.

use gapless_serve::check_listen;
use gapless_serve::testing::{events_until_end, http, json, Server};

const GOOD: &str = "[[stream]]\nname = \"a\"\nsize = 64\n[stream.timing]\nrate_pps = 1000\ncount = 10\n";

#[test]
fn profiles_are_saved_listed_replaced_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let (st, body) = http(srv.addr, "PUT", "/api/profiles/cbr", GOOD.as_bytes(), None);
    assert_eq!(st, 200, "expected 200 for a good profile; got {st}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["name"].as_str(), v["valid"].as_bool()),
        (Some("cbr"), Some(true)),
        "{v}"
    );
    // Compiles badly: saved as an invalid draft with the core's path and fix.
    let bad = GOOD.replace("rate_pps = 1000", "rate_pps = -1");
    let (st, body) = http(srv.addr, "PUT", "/api/profiles/draft", bad.as_bytes(), None);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(st, 200, "{body}");
    assert_eq!(v["valid"], false);
    assert!(
        v["error"].as_str().unwrap().contains("stream[0].timing.rate_pps"),
        "{v}"
    );
    // Does not parse: refused with the TOML error.
    let (st, body) = http(srv.addr, "PUT", "/api/profiles/x", b"[[stream]]\nnme = 1\n", None);
    assert_eq!(st, 422, "expected 422 for an unknown key; got {st}: {body}");
    assert!(body.contains("unknown field"), "{body}");
    let (st, body) = http(srv.addr, "GET", "/api/profiles", b"", None);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<_> = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!((st, names), (200, vec!["cbr".to_string(), "draft".to_string()]));
    let created = http(srv.addr, "GET", "/api/profiles/cbr", b"", None).1;
    let created: serde_json::Value = serde_json::from_str(&created).unwrap();
    let (_, body) = http(
        srv.addr,
        "PUT",
        "/api/profiles/cbr",
        GOOD.replace("1000", "2000").as_bytes(),
        None,
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["created_ns"], created["created_ns"],
        "replacing keeps the creation time"
    );
    assert!(v["toml"].as_str().unwrap().contains("2000"));
    assert_eq!(http(srv.addr, "DELETE", "/api/profiles/cbr", b"", None).0, 204);
    assert_eq!(http(srv.addr, "DELETE", "/api/profiles/cbr", b"", None).0, 404);
    assert_eq!(http(srv.addr, "GET", "/api/profiles/cbr", b"", None).0, 404);
}

#[test]
fn bad_names_bodies_and_sizes_are_4xx_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    assert_eq!(
        http(srv.addr, "PUT", "/api/profiles/..%2Fetc", GOOD.as_bytes(), None).0,
        400
    );
    assert_eq!(http(srv.addr, "PUT", "/api/profiles/a", &[0xff, 0xfe], None).0, 400);
    let big = vec![b'#'; 2 << 20];
    assert_eq!(http(srv.addr, "PUT", "/api/profiles/big", &big, None).0, 413);
    assert_eq!(
        http(srv.addr, "GET", "/api/profiles", b"", None).0,
        200,
        "the server is still up"
    );
}

#[test]
fn a_token_is_required_off_loopback_and_checked_when_given() {
    let e = check_listen("0.0.0.0:8080".parse().unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("without a token") && e.contains("Fix"), "{e}");
    assert!(check_listen("127.0.0.1:8080".parse().unwrap(), None).is_ok());
    assert!(check_listen("[::1]:8080".parse().unwrap(), None).is_ok());
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", Some("s3cret-token-123456"));
    assert_eq!(http(srv.addr, "GET", "/api/profiles", b"", None).0, 401);
    assert_eq!(http(srv.addr, "GET", "/api/profiles", b"", Some("wrong")).0, 401);
    assert_eq!(
        http(srv.addr, "GET", "/api/profiles", b"", Some("s3cret-token-123456")).0,
        200
    );
}

#[test]
fn a_run_left_running_by_a_dead_server_is_interrupted_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.db");
    drop(gapless_serve::db::Db::open(&path).unwrap());
    // What a killed server leaves: a run row still 'running' with its last checkpoint.
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "INSERT INTO runs (profile, toml, target, started_ns, status, result) VALUES ('p', 't', '{}', 1, 'running', '{\"sent\": 5}')",
        [],
    )
    .unwrap();
    drop(c);
    drop(gapless_serve::db::Db::open(&path).unwrap());
    let c = rusqlite::Connection::open(&path).unwrap();
    let (status, ended, result): (String, Option<i64>, String) = c
        .query_row("SELECT status, ended_ns, result FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!(status, "interrupted");
    assert!(ended.is_some(), "an end time is set");
    assert_eq!(result, "{\"sent\": 5}", "the checkpoint is kept");
}

const NULL_RUN: &str = "[[stream]]\nname = \"a\"\nsize = 64\n[stream.timing]\nrate_pps = 20000\ncount = 30000\n";

#[test]
fn a_run_on_null_streams_snapshots_over_sse_and_stores_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    // Paced on null (1.5 s), so the stream has time to push snapshots.
    let body = serde_json::json!({ "toml": NULL_RUN, "profile": "cbr", "options": { "null": true, "pace": true } });
    let (st, b) = http(srv.addr, "POST", "/api/runs", body.to_string().as_bytes(), None);
    assert_eq!(st, 201, "expected 201 Created; got {st}: {b}");
    let id = json(&b)["id"].as_i64().unwrap();
    let (snapshots, end) = events_until_end(srv.addr, id);
    assert!(
        snapshots >= 3,
        "expected several snapshot events during a 1.5 s run; got {snapshots}"
    );
    assert_eq!(end["status"], "finished", "{end}");
    let (st, b) = http(srv.addr, "GET", &format!("/api/runs/{id}"), b"", None);
    let run = json(&b);
    assert_eq!(st, 200);
    assert_eq!(run["status"], "finished");
    assert_eq!(
        run["result"]["sent_frames"], 30000,
        "the stored result: {}",
        run["result"]
    );
    assert!(
        run["summary"].as_str().unwrap().contains("30000 frames"),
        "{}",
        run["summary"]
    );
    assert!(
        run["files"].as_array().unwrap().iter().any(|f| f == "result.json"),
        "{}",
        run["files"]
    );
    let (st, b) = http(srv.addr, "GET", &format!("/api/runs/{id}/files/result.json"), b"", None);
    assert_eq!((st, json(&b)["sent_frames"].as_u64()), (200, Some(30000)));
    // An ended run's event stream sends its end at once.
    let (snapshots, end) = events_until_end(srv.addr, id);
    assert_eq!((snapshots, end["status"].as_str()), (0, Some("finished")));
    // The list has its figures.
    let list = json(&http(srv.addr, "GET", "/api/runs", b"", None).1);
    assert_eq!(list["runs"][0]["brief"]["sent"], 30000, "{list}");
}

#[test]
fn bad_run_requests_are_4xx_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let post = |body: &str| http(srv.addr, "POST", "/api/runs", body.as_bytes(), None);
    let cases: Vec<(String, u16, &str)> = vec![
        ("{\"toml\": ".into(), 400, "malformed JSON"),
        ("{\"tmol\": \"x\"}".into(), 400, "unknown field `tmol`"),
        (serde_json::json!({"toml": NULL_RUN, "options": {"null": true, "bogus": 1}}).to_string(), 400, "bogus"),
        (serde_json::json!({"toml": NULL_RUN, "options": {"out": "/tmp/x.pcap"}}).to_string(), 400, "report directory"),
        (serde_json::json!({"toml": NULL_RUN, "options": {"null": true, "calibration": "/etc/passwd"}}).to_string(), 400, "by its id"),
        (serde_json::json!({"toml": NULL_RUN, "options": {"null": true}, "calibration": 7}).to_string(), 404, "no calibration 7"),
        (serde_json::json!({"toml": NULL_RUN, "options": {"null": true, "duration": -1}}).to_string(), 400, "duration"),
        (serde_json::json!({"toml": "[[stream]]\nreplay = { file = \"/etc/passwd\" }\n[stream.timing]\nrate_pps = 1\n", "options": {"null": true}}).to_string(), 422, "stream[0].replay.file"),
        (serde_json::json!({"profile": "nosuch", "options": {"null": true}}).to_string(), 404, "no profile named"),
        (serde_json::json!({"toml": NULL_RUN, "options": {"iface": "nosuch0"}}).to_string(), 400, "nosuch0"),
    ];
    for (body, want, says) in cases {
        let (st, b) = post(&body);
        assert_eq!(st, want, "expected {want} for {body}; got {st}: {b}");
        assert!(
            b.contains(says),
            "expected the reply to {body} to say {says:?}; got {b}"
        );
    }
    let (st, b) = http(srv.addr, "GET", "/api/runs/1/files/..%2F..%2Fg.db", b"", None);
    assert_eq!(st, 404, "a path outside the report directory: {b}");
    let (st, b) = http(srv.addr, "GET", "/nowhere", b"", None);
    assert_eq!((st, b.contains("no such path")), (404, true), "{b}");
    assert_eq!(
        http(srv.addr, "GET", "/api/runs", b"", None).0,
        200,
        "the server is still up"
    );
}

#[test]
fn a_profile_that_names_a_file_is_a_draft_that_never_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let t = "[[stream]]\nsize = { kind = \"empirical\", file = \"/etc/passwd\" }\n[stream.timing]\nrate_pps = 1\n";
    let (st, b) = http(srv.addr, "PUT", "/api/profiles/f", t.as_bytes(), None);
    let v = json(&b);
    assert_eq!((st, v["valid"].as_bool()), (200, Some(false)), "{b}");
    assert!(v["error"].as_str().unwrap().contains("stream[0].size.file"), "{b}");
}

#[test]
fn the_page_and_its_assets_are_served_from_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", Some("s3cret-token-123456"));
    let (st, b) = http(srv.addr, "GET", "/", b"", None);
    assert_eq!(st, 200, "the page needs no token (it asks for it)");
    assert!(b.contains("/assets/app.js"), "{b}");
    let (st, b) = http(srv.addr, "GET", "/assets/uPlot.iife.min.js", b"", None);
    assert_eq!((st, b.len() > 40_000), (200, true));
    assert_eq!(http(srv.addr, "GET", "/assets/nope.js", b"", None).0, 404);
    // The API still needs it; a query token serves EventSource and download links.
    assert_eq!(http(srv.addr, "GET", "/api/runs", b"", None).0, 401);
    assert_eq!(
        http(srv.addr, "GET", "/api/runs?token=s3cret-token-123456", b"", None).0,
        200
    );
}

#[test]
fn otg_refuses_what_it_cannot_send_with_code_kind_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let (st, b) = http(srv.otg, "GET", "/capabilities/version", b"", None);
    assert_eq!(
        (st, json(&b)["api_spec_version"].as_str()),
        (200, Some("1.62.0")),
        "{b}"
    );
    let flow = |packet: serde_json::Value| {
        serde_json::json!({
            "ports": [{"name": "p1", "location": "a"}, {"name": "p2", "location": "ns/b"}],
            "flows": [{"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}}, "packet": packet}],
        })
        .to_string()
    };
    let cases = [
        ("{".to_string(), "malformed JSON"),
        (
            flow(serde_json::json!([{"choice": "ethernet"}, {"choice": "ppp", "ppp": {}}])),
            "flows[0].packet[1].choice: the \"ppp\" header is not supported",
        ),
        (
            flow(serde_json::json!([{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "gre", "gre": {}}])),
            "flows[0].packet[3]: gre carries an inner ipv4 or ipv6 packet next",
        ),
        (
            flow(
                serde_json::json!([{"choice": "ethernet"}, {"choice": "ipv4", "ipv4": {"src": {"choice": "value", "value": "1.2.3"}}}]),
            ),
            "flows[0].packet[1].ipv4.src.value",
        ),
        (
            flow(
                serde_json::json!([{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp", "udp": {"src_port": {"choice": "increment", "increment": {"start": 65530, "step": 1, "count": 10}}}}]),
            ),
            "leave the field's range",
        ),
        (
            flow(
                serde_json::json!([{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp", "udp": {"src_port": {"choice": "metric_tags", "metric_tags": []}}}]),
            ),
            "flows[0].packet[2].udp.src_port.choice",
        ),
    ];
    for (body, says) in cases {
        let (st, b) = http(srv.otg, "POST", "/config", body.as_bytes(), None);
        let v = json(&b);
        assert_eq!(
            (st, v["code"].as_u64(), v["kind"].as_str()),
            (400, Some(400), Some("validation")),
            "for {body}: {b}"
        );
        let errors = v["errors"].as_array().unwrap();
        assert!(errors[0].as_str().unwrap().contains(says), "expected {says:?} in {b}");
    }
    // 64-bit numbers as strings, as snappi sends them.
    let mut cfg: serde_json::Value = json(&flow(
        serde_json::json!([{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp", "udp": {"src_port": {"choice": "increment", "increment": {"start": "100", "step": "2", "count": "5"}}}}]),
    ));
    cfg["flows"][0]["rate"] = serde_json::json!({"choice": "pps", "pps": "2500"});
    cfg["flows"][0]["duration"] = serde_json::json!({"choice": "fixed_packets", "fixed_packets": {"packets": "40"}});
    let (st, b) = http(srv.otg, "POST", "/config", cfg.to_string().as_bytes(), None);
    assert_eq!(st, 200, "expected 64-bit numbers as strings to be taken; got {st}: {b}");
    let plan = gapless_otg::config::plan(&cfg).map_err(|e| e.0).unwrap();
    let stream = &plan.groups[0].profile["stream"][0];
    assert_eq!(
        stream["timing"],
        serde_json::json!({"rate_pps": 2500.0, "count": 40}),
        "{stream}"
    );
    assert_eq!(
        stream["field"][0],
        serde_json::json!({"field": "src_port", "op": "inc", "from": 100, "to": 109, "step": 2}),
        "{stream}"
    );
    // Defaults filled: a bare flow is 64 B at 1000 pps, continuous, from the testbed's
    // addresses (said in one warning).
    let (st, b) = http(
        srv.otg,
        "POST",
        "/config",
        flow(serde_json::json!([{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}])).as_bytes(),
        None,
    );
    let said = json(&b)["warnings"].clone();
    assert_eq!(
        (st, said.as_array().map(Vec::len)),
        (200, Some(1)),
        "expected one warning, of the testbed's addresses; got {b}"
    );
    assert!(
        said[0]
            .as_str()
            .unwrap_or_default()
            .contains("go out as gapless's testbed address (198.18.0.1 from, 198.18.0.2 to)"),
        "{said}"
    );
    let (st, b) = http(srv.otg, "POST", "/monitor/metrics", br#"{"choice": "macsec"}"#, None);
    assert_eq!(st, 400, "{b}");
    let (st, b) = http(
        srv.otg,
        "POST",
        "/control/state",
        br#"{"choice": "protocol", "protocol": {}}"#,
        None,
    );
    assert_eq!(st, 200, "{b}");
    assert!(
        json(&b)["warnings"][0].as_str().unwrap().contains("does nothing"),
        "{b}"
    );
}

/// Every OTG request body is read through otg.proto's message for it, as gRPC's are: an
/// unknown key, an enum value, a wrong type or an integer wider than its field is a 400
/// naming its path, and nothing is set (the config before stays).
#[test]
fn otg_request_bodies_are_read_through_the_model_and_refused_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let ports = serde_json::json!([{"name": "p1", "location": "a"}]);
    let peer = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut p = serde_json::json!({"name": "bgp", "peer_address": "1.1.1.2", "as_type": "ebgp", "as_number": 65001,
            "v4_routes": [{"name": "r", "addresses": [{"address": "10.0.0.0", "prefix": 24}], "advanced": {"origin": "igp"}}]});
        f(&mut p);
        serde_json::json!({"ports": ports, "devices": [{"name": "d", "ethernets": [{"name": "e", "mac": "02:00:00:00:00:01",
            "connection": {"choice": "port_name", "port_name": "p1"},
            "ipv4_addresses": [{"name": "ip", "address": "1.1.1.1", "gateway": "1.1.1.2", "prefix": 24}]}],
            "bgp": {"router_id": "1.1.1.1", "ipv4_interfaces": [{"ipv4_name": "ip", "peers": [p]}]}}]})
        .to_string()
    };
    let at = "devices[0].bgp.ipv4_interfaces[0].peers[0]";
    let cases: Vec<(String, String)> = vec![
        (
            peer(&|p| p["v4_routes"][0]["advanced"]["origin"] = "igp\nexit\nlog file /tmp/gl-pwned".into()),
            format!("{at}.v4_routes[0].advanced.origin"),
        ),
        // An unknown key is named in the message of its object's path.
        (peer(&|p| p["no_such_key"] = 1.into()), at.to_string()),
        (
            peer(&|p| p["as_number"] = (1u64 << 33).into()),
            format!("{at}.as_number"),
        ),
        (
            peer(&|p| p["as_type"] = serde_json::json!(["ebgp"])),
            format!("{at}.as_type"),
        ),
    ];
    for (body, path) in cases {
        let (st, b) = http(srv.otg, "POST", "/config", body.as_bytes(), None);
        let v = json(&b);
        let said = v["errors"][0].as_str().unwrap_or_default();
        assert_eq!(st, 400, "expected 400 for {path}; got {st}: {b}");
        assert!(
            said.starts_with(&format!("{path}: ")) && said.contains("OTG model 1.62.0"),
            "expected the error to start with {path:?} and name the model; got {said}"
        );
    }
    let (_, b) = http(srv.otg, "GET", "/config", b"", None);
    assert_eq!(json(&b), serde_json::json!({}), "expected nothing set; got {b}");
    for (path, body) in [
        (
            "/control/state",
            r#"{"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "go"}}}"#,
        ),
        ("/monitor/metrics", r#"{"choice": "flow", "flow": {"flow_names": "f"}}"#),
    ] {
        let (st, b) = http(srv.otg, "POST", path, body.as_bytes(), None);
        assert_eq!(st, 400, "expected {path} refused by the model; got {st}: {b}");
    }
}
