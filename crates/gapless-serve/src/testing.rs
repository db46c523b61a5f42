//! A minimal blocking HTTP client for the server's tests and scripts: one request per
//! connection, and a run's event stream read to its end. It speaks just enough HTTP/1.1 for
//! this server (no TLS, no keep-alive); use a real client elsewhere.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// One HTTP/1.1 request; returns (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8], token: Option<&str>) -> (u16, String) {
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

/// Reads a run's SSE stream until its `end` event: (snapshot events seen, the end event).
pub fn events_until_end(addr: SocketAddr, id: i64) -> (usize, serde_json::Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let head = format!("GET /api/runs/{id}/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    // The stream ends after its end event; each event comes in a chunk of its own.
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .expect("the event stream ends after its end event");
    let text = String::from_utf8_lossy(&raw).to_string();
    assert!(text.contains("event: end\ndata: "), "expected an end event; got {text}");
    let snapshots = text.matches("event: snapshot").count();
    let end = text.split("event: end\ndata: ").nth(1).unwrap().lines().next().unwrap();
    (snapshots, json(end))
}

/// A body as JSON; panics with the body when it is not.
pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("expected JSON, got {body:?}: {e}"))
}
