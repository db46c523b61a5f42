//! The server's API over a real socket: profile CRUD with the core's validation, the token
//! rule, bad and oversize bodies, and a database reopened after a server that did not end
//! its runs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

use gapless_serve::{check_listen, ServeConfig, ServeError};

/// One HTTP/1.1 request; returns (status, body).
fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8], token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the server");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text[9..12].parse().expect("a status code");
    let body = text.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// A server on a free loopback port in a thread of its own; dropped = shut down.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
}

impl Server {
    fn start(db: &Path, listen: &str, token: Option<&str>) -> Server {
        let probe = std::net::TcpListener::bind(listen).unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let cfg = ServeConfig {
            listen: addr,
            db: db.to_path_buf(),
            token: token.map(str::to_string),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(gapless_serve::serve(cfg, async move {
                let _ = rx.await;
            }))
        });
        for _ in 0..200 {
            if TcpStream::connect(addr).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Server {
            addr,
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

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
