//! The OTG API's transports. HTTPS, as snappi's default location (`https://localhost:8443`)
//! expects: a self-signed certificate made at first start and kept beside the database, the
//! user's own certificate, plain HTTP on request, and a bad certificate refused at start with
//! its fix. gRPC (`otg.Openapi`): a call answered, and the checks before any call. The client
//! is curl, which verifies the certificate against the file the server wrote and speaks
//! HTTP/2; snappi drives both transports in python/tests/test_otg.py.

mod common;

use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `gapless serve` with the OTG API on a free port and `extra` flags: the process and the port.
fn serve_otg(db: &Path, extra: &[&str]) -> (KillOnDrop, u16) {
    let (dash, otg) = (local_port(), local_port());
    let child = Command::new(bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{dash}")])
        .args(["--otg-listen", &format!("127.0.0.1:{otg}"), "--db"])
        .arg(db)
        .args(extra)
        // gRPC only where asked for (its default port is one for all).
        .args((!extra.contains(&"--otg-grpc-listen")).then_some("--no-otg-grpc"))
        .args((!extra.contains(&"--gnmi-listen")).then_some("--no-gnmi"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gapless serve");
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", otg)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "gapless serve did not listen on port {otg} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (KillOnDrop(Some(child)), otg)
}

/// curl's (exit code, body) for `url`, with `args` (e.g. `--cacert F`).
fn curl(url: &str, args: &[&str]) -> (i32, String) {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl (scripts/setup.sh --test installs it)");
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    (o.status.code().unwrap_or(-1), format!("{out}{err}"))
}

#[test]
fn the_otg_api_speaks_https_with_a_certificate_made_at_first_start_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let (cert, key) = (dir.path().join("g-otg-cert.pem"), dir.path().join("g-otg-key.pem"));
    let (srv, port) = serve_otg(&db, &[]);
    let mode = std::fs::metadata(&key)
        .expect("the key beside the database")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "expected the key to be readable by its owner only; got {mode:o}"
    );
    // A client that connects and never says hello holds no one else up.
    let silent = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let url = format!("https://localhost:{port}/capabilities/version");
    let (rc, body) = curl(&url, &["--cacert", cert.to_str().unwrap()]);
    assert_eq!(
        rc,
        0,
        "expected curl to verify the server against {}; got {body}",
        cert.display()
    );
    assert!(
        body.contains("\"api_spec_version\""),
        "expected the version; got {body}"
    );
    // 127.0.0.1 is in the certificate too, and plain HTTP gets no answer.
    let (rc, body) = curl(
        &format!("https://127.0.0.1:{port}/capabilities/version"),
        &["--cacert", cert.to_str().unwrap()],
    );
    assert_eq!(
        rc, 0,
        "expected 127.0.0.1 to be one of the certificate's names; got {body}"
    );
    let (rc, body) = curl(&format!("http://127.0.0.1:{port}/capabilities/version"), &[]);
    assert_ne!(rc, 0, "expected plain HTTP to fail on the HTTPS listener; got {body}");
    // The guard is the same: a hostile page's Origin is refused over HTTPS too.
    let (rc, body) = curl(
        &url,
        &[
            "--cacert",
            cert.to_str().unwrap(),
            "-H",
            "Origin: http://evil.example",
            "-w",
            " %{http_code}",
        ],
    );
    assert!(
        rc == 0 && body.ends_with(" 403"),
        "expected 403 for another page's Origin; got {rc}: {body}"
    );
    drop(silent);
    drop(srv);
    // A second start keeps the certificate clients may have pinned.
    let before = std::fs::read(&cert).unwrap();
    let (_srv, port) = serve_otg(&db, &[]);
    assert_eq!(
        std::fs::read(&cert).unwrap(),
        before,
        "expected the certificate to be kept"
    );
    let (rc, body) = curl(
        &format!("https://localhost:{port}/capabilities/version"),
        &["--cacert", cert.to_str().unwrap()],
    );
    assert_eq!(rc, 0, "expected the kept certificate to serve again; got {body}");
}

#[test]
fn the_users_certificate_is_served_and_a_bad_one_is_refused_with_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    // A pair made by another server stands in for the user's own.
    let (made, _) = serve_otg(&dir.path().join("other.db"), &[]);
    drop(made);
    let (cert, key) = (
        dir.path().join("other-otg-cert.pem"),
        dir.path().join("other-otg-key.pem"),
    );
    let db = dir.path().join("g.db");
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let (_srv, port) = serve_otg(&db, &["--otg-cert", c, "--otg-key", k]);
    let (rc, body) = curl(
        &format!("https://localhost:{port}/capabilities/version"),
        &["--cacert", c],
    );
    assert_eq!(rc, 0, "expected the given certificate to be served; got {body}");
    assert!(
        !dir.path().join("g-otg-cert.pem").exists(),
        "expected no certificate made when one is given"
    );
    // Garbage for a certificate, and a key that is not the certificate's.
    let bad = dir.path().join("bad.pem");
    std::fs::File::create(&bad)
        .unwrap()
        .write_all(b"not a certificate\n")
        .unwrap();
    let o = serve_with(&db, &bad, &key);
    expect_error(
        &o,
        &[
            "TLS for the OTG API",
            "bad.pem",
            "holds no certificate",
            "Fix: give a PEM certificate",
        ],
    );
    let (other, _) = serve_otg(&dir.path().join("third.db"), &[]);
    drop(other);
    let o = serve_with(&db, &cert, &dir.path().join("third-otg-key.pem"));
    expect_error(&o, &["the key does not fit the certificate", "Fix"]);
}

/// `gapless serve` with this certificate and key, to its end (a refusal).
fn serve_with(db: &Path, cert: &Path, key: &Path) -> std::process::Output {
    let db = db.to_str().unwrap();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    gapless(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--otg-listen",
        "127.0.0.1:0",
        "--no-otg-grpc",
        "--no-gnmi",
        "--db",
        db,
        "--otg-cert",
        cert,
        "--otg-key",
        key,
    ])
}

#[test]
fn otg_plain_serves_http_and_makes_no_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port) = serve_otg(&dir.path().join("g.db"), &["--otg-plain"]);
    let (rc, body) = curl(&format!("http://127.0.0.1:{port}/capabilities/version"), &[]);
    assert_eq!(rc, 0, "expected plain HTTP with --otg-plain; got {body}");
    assert!(body.contains("\"api_spec_version\""), "{body}");
    assert!(
        !dir.path().join("g-otg-cert.pem").exists(),
        "expected no certificate with --otg-plain"
    );
}

/// `gapless serve` with OTG gRPC on a free port (and `extra` flags): the process and the port.
fn serve_grpc(db: &Path, extra: &[&str]) -> (KillOnDrop, u16) {
    let port = local_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["--otg-plain", "--otg-grpc-listen", listen.as_str()];
    args.extend_from_slice(extra);
    let (srv, _) = serve_otg(db, &args);
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no gRPC listener on {port} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (srv, port)
}

/// A unary gRPC call of `otg.Openapi/GetVersion` (an empty message) made by curl over HTTP/2
/// with `headers`: the grpc-status it ends with, and the whole response.
fn grpc_version(port: u16, headers: &[&str], dir: &Path) -> (Option<u32>, String) {
    grpc_call(port, "GetVersion", headers, dir)
}

/// A call of `otg.Openapi/METHOD` with one empty message (unary, or a stream of one).
fn grpc_call(port: u16, method: &str, headers: &[&str], dir: &Path) -> (Option<u32>, String) {
    let body = dir.join("empty.grpc");
    std::fs::write(&body, [0u8, 0, 0, 0, 0]).unwrap(); // not compressed, 0 bytes
    let mut args = vec!["--http2-prior-knowledge", "-D", "-", "--data-binary"];
    let at = format!("@{}", body.display());
    args.push(&at);
    let mut hs: Vec<String> = vec!["content-type: application/grpc".into(), "te: trailers".into()];
    hs.retain(|h| !headers.iter().any(|x| x.split(':').next() == h.split(':').next()));
    hs.extend(headers.iter().map(|h| h.to_string()));
    for h in &hs {
        args.extend(["-H", h.as_str()]);
    }
    let (rc, out) = curl(&format!("http://127.0.0.1:{port}/otg.Openapi/{method}"), &args);
    assert_eq!(rc, 0, "expected curl to reach the gRPC listener; got {out}");
    // In the headers (an error at once) or the trailers, which curl prints after the body.
    let status = out.split("grpc-status: ").nth(1).and_then(|v| {
        let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    (status, out)
}

#[test]
fn the_grpc_listener_answers_otg_calls_and_checks_authority_origin_type_and_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "a-secret-of-sixteen-chars\n").unwrap();
    let (_srv, port) = serve_grpc(&dir.path().join("g.db"), &["--token-file", token.to_str().unwrap()]);
    let bearer = "authorization: Bearer a-secret-of-sixteen-chars";
    let (st, out) = grpc_version(port, &[bearer], dir.path());
    // The reply is otg.GetVersionResponse: its api_spec_version is in the bytes.
    assert!(
        st == Some(0) && out.contains("1.62.0"),
        "expected GetVersion to succeed; got {st:?}: {out}"
    );
    let cases: [(&[&str], u32, &str); 5] = [
        (&[], 16, "without the token: UNAUTHENTICATED"),
        (
            &["authorization: Bearer wrong-secret-of-the-same"],
            16,
            "a wrong token: UNAUTHENTICATED",
        ),
        (
            &[bearer, "origin: http://evil.example"],
            7,
            "a web page's Origin: PERMISSION_DENIED",
        ),
        (
            &[bearer, "host: evil.example"],
            7,
            "another name (DNS rebinding): PERMISSION_DENIED",
        ),
        (&[bearer, "content-type: text/plain"], 3, "not gRPC: INVALID_ARGUMENT"),
    ];
    let (st, out) = grpc_call(port, "streamGetConfig", &[bearer], dir.path());
    assert_eq!(
        st,
        Some(0),
        "expected the streaming twin streamGetConfig to succeed; got {out}"
    );
    // The streaming twins pass the same checks: a client stream, a server stream.
    for (method, (headers, want, what)) in ["GetVersion", "streamSetConfig", "streamGetConfig"]
        .into_iter()
        .flat_map(|m| cases.iter().map(move |c| (m, c)))
    {
        let (st, out) = grpc_call(port, method, headers, dir.path());
        let want = *want;
        assert_eq!(
            st,
            Some(want),
            "expected grpc-status {want} for {what} on {method}; got {st:?}: {out}"
        );
        assert!(
            out.contains("Fix"),
            "expected the refusal to say how to fix it ({what}); got {out}"
        );
    }
}
