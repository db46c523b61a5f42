//! A minimal blocking HTTP client for the server's tests and scripts: one request per
//! connection, and a run's event stream read to its end. It speaks just enough HTTP/1.1 for
//! this server (no TLS, no keep-alive); use a real client elsewhere.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

/// One HTTP/1.1 request as a well-behaved script sends it: `Host` names the address, and a
/// state-changing request carries its body's type (see [`crate::api::body_type`]); returns
/// (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8], token: Option<&str>) -> (u16, String) {
    try_http(addr, method, path, body, token)
        .unwrap_or_else(|e| panic!("expected an answer to {method} {path} from {addr}; got {e}"))
}

/// As [`http`], with the connection's error (refused, reset) returned instead of a panic.
pub fn try_http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut headers = Vec::new();
    let m: axum::http::Method = method.parse().expect("an HTTP method");
    let bare = path.split('?').next().unwrap_or(path);
    if crate::guard::changes_state(&m) {
        headers.push(("Content-Type".to_string(), crate::api::body_type(&m, bare).to_string()));
    }
    if let Some(t) = token {
        headers.push(("Authorization".to_string(), format!("Bearer {t}")));
    }
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    try_exchange(addr, method, path, &h, body).map(|text| split(&text))
}

/// One HTTP/1.1 request with exactly these headers besides `Host` (the address, unless one
/// is given), `Connection` and `Content-Length`; returns (status, body).
pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    split(&exchange(addr, method, path, headers, body))
}

/// (status, body) of a whole response.
fn split(text: &str) -> (u16, String) {
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("expected an HTTP status line; got {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// As [`request`], returning the whole response: status line, headers and body.
pub fn exchange(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> String {
    try_exchange(addr, method, path, headers, body)
        .unwrap_or_else(|e| panic!("expected an answer to {method} {path} from {addr}; got {e}"))
}

fn try_exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    // One write: a server that answers from the head alone (a refusal) and closes must not
    // meet a body arriving after its close, which resets the connection.
    let mut whole = head.into_bytes();
    whole.extend_from_slice(body);
    // A refusal may close before a large body is all sent: its answer is still read.
    let _ = s.write_all(&whole);
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).to_string())
}

/// Reads a run's SSE stream until its `end` event: (snapshot events seen, the end event).
pub fn events_until_end(addr: SocketAddr, id: i64) -> (usize, serde_json::Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let head = format!("GET /api/runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
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

/// A server on a free loopback port in a thread of its own; dropped = shut down.
pub struct Server {
    pub addr: SocketAddr,
    pub otg: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), crate::ServeError>>>,
}

impl Server {
    pub fn start(db: &Path, listen: &str, token: Option<&str>) -> Server {
        let free = || {
            let probe = std::net::TcpListener::bind(listen).unwrap();
            probe.local_addr().unwrap()
        };
        let (addr, otg) = (free(), free());
        let cfg = crate::ServeConfig {
            listen: addr,
            db: db.to_path_buf(),
            token: token.map(str::to_string),
            otg_listen: Some(otg),
            // This module's client speaks plain HTTP; HTTPS has tests of its own.
            otg_transport: crate::tls::Transport::Plain,
            otg_grpc_listen: None,
            gnmi_listen: None,
            allow_hosts: Vec::new(),
            limits: Default::default(),
            clock_offset_ns: 0,
            agent_token: None,
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(crate::serve(cfg, async move {
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
            otg,
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
