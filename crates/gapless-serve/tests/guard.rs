//! The request guard on both listeners: what a hostile web page in the user's browser can
//! send (a "simple" cross-origin POST, a foreign Origin, a rebound Host name) is refused,
//! and nothing is created by it: no run, no profile, no OTG config. A same-origin or
//! scripted request still works.

use std::net::SocketAddr;

use gapless_serve::testing::{exchange, http, json, request, Server};

const NULL_RUN: &str = "[[stream]]\nname = \"a\"\nsize = 64\n[stream.timing]\nrate_pps = 1000\ncount = 10\n";

fn run_body() -> String {
    serde_json::json!({ "toml": NULL_RUN, "profile": "p", "options": { "null": true } }).to_string()
}

fn otg_config() -> String {
    serde_json::json!({
        "ports": [{"name": "p1", "location": "a"}, {"name": "p2", "location": "ns/b"}],
        "flows": [{"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
                   "packet": [{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}]}],
    })
    .to_string()
}

/// A request a page might make: method, path, headers, body; the status and a phrase of
/// the refusal expected.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, &'a [u8], u16, &'a str);

/// An OTG request: path, headers, body and the status expected.
type OtgCase<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, u16);

/// The dashboard's state: (runs, profiles) as the API lists them.
fn dashboard_state(addr: SocketAddr) -> (usize, usize) {
    let runs = json(&http(addr, "GET", "/api/runs", b"", None).1)["runs"]
        .as_array()
        .unwrap()
        .len();
    let profiles = json(&http(addr, "GET", "/api/profiles", b"", None).1)["profiles"]
        .as_array()
        .unwrap()
        .len();
    (runs, profiles)
}

fn otg_state(addr: SocketAddr) -> serde_json::Value {
    json(&http(addr, "GET", "/config", b"", None).1)
}

/// A refusal: the status and a message with `says` in it.
fn refused(got: (u16, String), status: u16, says: &str, what: &str) {
    let (st, body) = got;
    let msg = json(&body)["error"].as_str().unwrap_or_default().to_string();
    assert!(
        st == status && msg.contains(says),
        "{what}: expected {status} with {says:?} in the error; got {st}: {body}"
    );
}

#[test]
fn a_hostile_page_cannot_start_a_run_or_save_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let a = srv.addr;
    let evil = [("Origin", "http://evil.example")];
    let body = run_body();
    let cases: Vec<Case> = vec![
        // What any page can send without a preflight: text/plain from another origin.
        (
            "POST",
            "/api/runs",
            vec![evil[0], ("Content-Type", "text/plain")],
            body.as_bytes(),
            403,
            "evil.example",
        ),
        // The same body without an Origin (an old browser, a form from a file): the type.
        (
            "POST",
            "/api/runs",
            vec![("Content-Type", "text/plain")],
            body.as_bytes(),
            415,
            "application/json",
        ),
        (
            "POST",
            "/api/runs",
            vec![("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
            415,
            "Content-Type: application/json",
        ),
        ("POST", "/api/runs", vec![], body.as_bytes(), 415, "no Content-Type"),
        // A foreign Origin with the right type (a preflighted fetch that went on anyway).
        (
            "POST",
            "/api/runs",
            vec![evil[0], ("Content-Type", "application/json")],
            body.as_bytes(),
            403,
            "only this server's own page",
        ),
        (
            "POST",
            "/api/runs",
            vec![("Origin", "null"), ("Content-Type", "application/json")],
            body.as_bytes(),
            403,
            "null",
        ),
        // Another port on the same host is another origin.
        (
            "POST",
            "/api/runs",
            vec![("Origin", "http://127.0.0.1:1"), ("Content-Type", "application/json")],
            body.as_bytes(),
            403,
            "127.0.0.1:1",
        ),
        // DNS rebinding: the page's own name, resolved to 127.0.0.1.
        (
            "POST",
            "/api/runs",
            vec![("Host", "evil.example"), ("Content-Type", "application/json")],
            body.as_bytes(),
            421,
            "--allow-host evil.example",
        ),
        (
            "GET",
            "/api/runs",
            vec![("Host", "evil.example:80")],
            b"",
            421,
            "DNS rebinding",
        ),
        (
            "PUT",
            "/api/profiles/x",
            vec![("Content-Type", "text/plain")],
            NULL_RUN.as_bytes(),
            415,
            "application/toml",
        ),
        (
            "PUT",
            "/api/profiles/x",
            vec![("Content-Type", "application/json")],
            NULL_RUN.as_bytes(),
            415,
            "application/toml",
        ),
        (
            "PUT",
            "/api/profiles/x",
            vec![evil[0], ("Content-Type", "application/toml")],
            NULL_RUN.as_bytes(),
            403,
            "evil.example",
        ),
        (
            "POST",
            "/api/check",
            vec![("Content-Type", "text/plain")],
            NULL_RUN.as_bytes(),
            415,
            "application/toml",
        ),
        (
            "POST",
            "/api/runs/1/stop",
            vec![("Content-Type", "text/plain")],
            b"",
            415,
            "application/json",
        ),
        // A page's image or script tag: Sec-Fetch-Site says where it came from.
        (
            "GET",
            "/api/runs",
            vec![("Sec-Fetch-Site", "cross-site")],
            b"",
            403,
            "another site",
        ),
        (
            "GET",
            "/api/profiles",
            vec![("Sec-Fetch-Site", "same-site")],
            b"",
            403,
            "another site",
        ),
    ];
    for (m, path, headers, b, status, says) in &cases {
        let what = format!("{m} {path} with {headers:?}");
        refused(request(a, m, path, headers, b), *status, says, &what);
    }
    assert_eq!(
        dashboard_state(a),
        (0, 0),
        "expected no run and no profile after the refusals"
    );

    // A preflight gets no CORS grant.
    let pre = exchange(
        a,
        "OPTIONS",
        "/api/runs",
        &[
            evil[0],
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type"),
        ],
        b"",
    );
    assert!(
        !pre.to_ascii_lowercase().contains("access-control-allow"),
        "expected no Access-Control-Allow-* header in the preflight's reply; got {pre}"
    );

    // The dashboard's own requests (same origin) and a script's (no Origin) work.
    let own = format!("http://{a}");
    let same = [
        ("Origin", own.as_str()),
        ("Content-Type", "application/json"),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let (st, b) = request(a, "POST", "/api/runs", &same, body.as_bytes());
    assert_eq!(st, 201, "expected the same-origin run to start (201); got {st}: {b}");
    let toml = [
        ("Origin", own.as_str()),
        ("Content-Type", "application/toml; charset=utf-8"),
    ];
    let (st, b) = request(a, "PUT", "/api/profiles/x", &toml, NULL_RUN.as_bytes());
    assert_eq!(st, 200, "expected the same-origin profile to be saved; got {st}: {b}");
    let local = format!("localhost:{}", a.port());
    let (st, b) = request(a, "GET", "/api/profiles", &[("Host", local.as_str())], b"");
    assert_eq!(st, 200, "expected Host {local} to be served; got {st}: {b}");
    assert_eq!(
        dashboard_state(a),
        (1, 1),
        "expected the run and the profile made by the page itself"
    );
    // The page itself: a link from another site opens it.
    let (st, _) = request(a, "GET", "/", &[("Sec-Fetch-Site", "cross-site")], b"");
    assert_eq!(st, 200, "expected the page to open from a link; got {st}");
}

#[test]
fn a_hostile_page_cannot_set_an_otg_config_or_start_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", None);
    let o = srv.otg;
    let cfg = otg_config();
    let start = r#"{"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}}"#;
    let cases: Vec<OtgCase> = vec![
        (
            "/config",
            vec![("Origin", "http://evil.example"), ("Content-Type", "text/plain")],
            &cfg,
            403,
        ),
        ("/config", vec![("Content-Type", "text/plain")], &cfg, 415),
        (
            "/config",
            vec![("Origin", "http://evil.example"), ("Content-Type", "application/json")],
            &cfg,
            403,
        ),
        (
            "/config",
            vec![("Host", "evil.example"), ("Content-Type", "application/json")],
            &cfg,
            421,
        ),
        ("/control/state", vec![("Content-Type", "text/plain")], start, 415),
        (
            "/monitor/metrics",
            vec![("Host", "rebind.example:8443"), ("Content-Type", "application/json")],
            r#"{"choice": "flow"}"#,
            421,
        ),
    ];
    for (path, headers, b, status) in &cases {
        let (st, body) = request(o, "POST", path, headers, b.as_bytes());
        assert_eq!(
            st, *status,
            "POST {path} with {headers:?}: expected {status}; got {st}: {body}"
        );
    }
    assert_eq!(
        otg_state(o),
        serde_json::json!({}),
        "expected no config after the refusals"
    );
    assert_eq!(dashboard_state(srv.addr).0, 0, "expected no run after the refusals");

    // snappi: JSON, no Origin.
    let (st, b) = request(
        o,
        "POST",
        "/config",
        &[("Content-Type", "application/json")],
        cfg.as_bytes(),
    );
    assert_eq!(st, 200, "expected snappi's request to be taken; got {st}: {b}");
    assert_eq!(otg_state(o)["flows"][0]["name"], "f");
}

#[test]
fn the_token_is_compared_and_never_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cret-token-abcdef";
    let srv = Server::start(&dir.path().join("g.db"), "127.0.0.1:0", Some(secret));
    for (addr, path) in [(srv.addr, "/api/runs"), (srv.otg, "/config")] {
        let wrong = format!("Bearer {secret}x");
        let reply = exchange(addr, "GET", path, &[("Authorization", &wrong)], b"");
        assert!(
            reply.starts_with("HTTP/1.1 401"),
            "expected 401 for a wrong token; got {reply}"
        );
        assert!(!reply.contains(secret), "the reply echoes the token: {reply}");
        let q = format!("{path}?token={secret}");
        assert_eq!(
            request(addr, "GET", &q, &[], b"").0,
            200,
            "expected ?token= to be taken on {path}"
        );
    }
    // The token does not open the door to another origin.
    let bearer = format!("Bearer {secret}");
    let h = [
        ("Authorization", bearer.as_str()),
        ("Origin", "http://evil.example"),
        ("Content-Type", "application/json"),
    ];
    assert_eq!(request(srv.addr, "POST", "/api/runs", &h, run_body().as_bytes()).0, 403);
}
