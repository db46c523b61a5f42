//! The one request guard in front of both listeners. Every request may come from a hostile
//! web page in the user's own browser, or from a hostile network, so before any handler runs:
//!
//! 1. **Host** must name this server: the listen address, `localhost` / `127.0.0.1` /
//!    `[::1]` with the listen port, an IP literal when listening on every address, or a name
//!    given with `--allow-host`. Anything else is a 421: a page whose name was rebound to
//!    127.0.0.1 (DNS rebinding) never reaches the API.
//! 2. **Origin**, when present, must be this server's own (`http(s)://` + the Host); a
//!    browser's `Sec-Fetch-Site` of `cross-site` or `same-site` on an API path is refused
//!    too. Both are 403s; preflights get no `Access-Control-Allow-*` headers, so a
//!    cross-origin fetch never gets past its preflight.
//! 3. **Content type**: every POST, PUT, PATCH and DELETE carries the type its body is
//!    written in (`application/json`, or `application/toml` where the body is TOML), else
//!    415. A page can send `text/plain`, a form or multipart cross-origin without a
//!    preflight; it cannot send these.
//! 4. **Token**: where the server has one, every request but the page and its assets carries
//!    it (`Authorization: Bearer`, or `?token=` where a browser cannot set headers). It is
//!    compared in constant time, and never written to a log or echoed in a reply.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::reply::{err, ApiError};

/// The body type a state-changing request must carry: `application/json` unless the route
/// takes TOML.
pub type BodyTypes = fn(&Method, &str) -> &'static str;

/// What one listener checks.
#[derive(Clone)]
pub struct Guard {
    pub listen: SocketAddr,
    /// Host names allowed besides the listen address and loopback (`--allow-host`).
    pub allow_hosts: Arc<Vec<String>>,
    pub token: Option<Arc<str>>,
    pub body_types: BodyTypes,
    /// Paths anyone may read without the token (the page and its assets).
    pub public: fn(&str) -> bool,
}

/// Every request through the guard, in the order of the module's list.
pub async fn check(State(g): State<Guard>, req: Request, next: Next) -> Response {
    match g.verdict(&req) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

impl Guard {
    fn verdict(&self, req: &Request) -> Result<(), ApiError> {
        let host = self.host(req)?;
        self.origin(req.headers(), &host, req.uri().path())?;
        self.content_type(req)?;
        self.token(req)
    }

    /// The request's Host (or HTTP/2 authority), if it names this server.
    fn host(&self, req: &Request) -> Result<String, ApiError> {
        let given = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .or_else(|| req.uri().authority().map(|a| a.to_string()));
        let Some(host) = given else {
            return Err(err(
                StatusCode::BAD_REQUEST,
                "the request has no Host header. Fix: send Host with the address you connected to",
            ));
        };
        if self.host_allowed(&host) {
            Ok(host)
        } else {
            Err(err(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host {:?} does not name this server ({}): refused, as a page whose name points here (DNS rebinding) would be. Fix: connect by the listen address or localhost, or start the server with --allow-host {}",
                    printable(&host),
                    self.listen,
                    printable(split_host(&host).0)
                ),
            ))
        }
    }

    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        let (name, port) = split_host(host);
        let name = name.to_ascii_lowercase();
        let port_ok = port.unwrap_or(80) == self.listen.port();
        let listen_ip = self.listen.ip();
        let own = ["localhost", "127.0.0.1", "[::1]"].contains(&name.as_str()) || name == bracketed(listen_ip);
        // An IP literal cannot be rebound: on a wildcard listener it names this machine.
        let literal = listen_ip.is_unspecified() && parse_ip(&name).is_some();
        let allowed = self.allow_hosts.iter().any(|a| {
            let a = a.to_ascii_lowercase();
            match split_host(&a) {
                (n, Some(p)) => n == name && Some(p) == port,
                (n, None) => n == name,
            }
        });
        allowed || (port_ok && (own || literal))
    }

    /// A browser's request from another origin: refused whatever its method.
    fn origin(&self, h: &HeaderMap, host: &str, path: &str) -> Result<(), ApiError> {
        if let Some(origin) = h.get(header::ORIGIN) {
            let o = origin.to_str().unwrap_or("null");
            let authority = o.strip_prefix("http://").or_else(|| o.strip_prefix("https://"));
            if authority.is_none_or(|a| !same_authority(a, host)) {
                return Err(err(
                    StatusCode::FORBIDDEN,
                    format!(
                        "a request from the web page at {:?} is refused: only this server's own page may use its API. Fix: open the dashboard at http://{} itself; scripts send no Origin header",
                        printable(o),
                        printable(host)
                    ),
                ));
            }
        }
        let site = h.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        if !(self.public)(path) && matches!(site, Some("cross-site" | "same-site")) {
            return Err(err(
                StatusCode::FORBIDDEN,
                "a request another site's page made from this browser is refused. Fix: use the dashboard served by this server",
            ));
        }
        Ok(())
    }

    fn content_type(&self, req: &Request) -> Result<(), ApiError> {
        let m = req.method();
        if !changes_state(m) {
            return Ok(());
        }
        let want = (self.body_types)(m, req.uri().path());
        let got = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
        if got.as_deref() == Some(want) {
            return Ok(());
        }
        let got = got.map_or("no Content-Type".to_string(), |g| {
            format!("Content-Type {:?}", printable(&g))
        });
        Err(err(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "{m} {} takes a body of type {want}, and this request has {got}. Fix: send the header Content-Type: {want} (curl: -H 'Content-Type: {want}')",
                req.uri().path()
            ),
        ))
    }

    fn token(&self, req: &Request) -> Result<(), ApiError> {
        let Some(token) = &self.token else { return Ok(()) };
        if (self.public)(req.uri().path()) {
            return Ok(());
        }
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let query = req
            .uri()
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
        let good = |t: Option<&str>| t.is_some_and(|t| tokens_equal(t, token));
        // Both are compared, whichever is given, so the time does not say which was tried.
        if good(header) | good(query) {
            Ok(())
        } else {
            Err(err(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: send Authorization: Bearer TOKEN (the token file's first line)",
            ))
        }
    }
}

/// The methods that must carry their body's type: the ones that change state.
pub fn changes_state(m: &Method) -> bool {
    matches!(*m, Method::POST | Method::PUT | Method::PATCH | Method::DELETE)
}

/// Equal tokens, in time that depends only on the lengths.
pub fn tokens_equal(given: &str, token: &str) -> bool {
    given.as_bytes().ct_eq(token.as_bytes()).into()
}

/// `name` and `port` of a Host value (`[v6]:port`, `name:port`, `name`).
fn split_host(h: &str) -> (&str, Option<u16>) {
    let (name, port) = match h.rfind(':') {
        Some(i) if !h[i..].contains(']') => (&h[..i], h[i + 1..].parse().ok()),
        _ => (h, None),
    };
    (name, port)
}

/// Same host and port, the default port filled in.
fn same_authority(a: &str, b: &str) -> bool {
    let (an, ap) = split_host(a);
    let (bn, bp) = split_host(b);
    an.eq_ignore_ascii_case(bn) && ap.unwrap_or(80) == bp.unwrap_or(80)
}

fn bracketed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v) => v.to_string(),
        IpAddr::V6(v) => format!("[{v}]"),
    }
}

fn parse_ip(name: &str) -> Option<IpAddr> {
    name.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// A header value cut to a readable length for a message.
fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(listen: &str, allow: &[&str]) -> Guard {
        Guard {
            listen: listen.parse().unwrap(),
            allow_hosts: Arc::new(allow.iter().map(|s| s.to_string()).collect()),
            token: None,
            body_types: |_, _| "application/json",
            public: |_| false,
        }
    }

    #[test]
    fn hosts() {
        let g = guard("127.0.0.1:8080", &["lab.example", "box:9000"]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "lab.example",
            "lab.example:1",
            "box:9000",
        ] {
            assert!(g.host_allowed(ok), "expected Host {ok} allowed");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1:8081",
            "localhost",
            "box:9001",
            "127.0.0.1.evil:8080",
            "10.0.0.1:8080",
        ] {
            assert!(!g.host_allowed(bad), "expected Host {bad} refused");
        }
        let any = guard("0.0.0.0:80", &[]);
        assert!(any.host_allowed("192.0.2.7") && any.host_allowed("[2001:db8::1]:80"));
        assert!(
            !any.host_allowed("rebind.example"),
            "a name needs --allow-host even on 0.0.0.0"
        );
        let v6 = guard("[::1]:8443", &[]);
        assert!(v6.host_allowed("[::1]:8443") && !v6.host_allowed("[::1]:8080"));
    }

    #[test]
    fn authorities_and_tokens() {
        assert!(same_authority("127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(same_authority("localhost", "localhost:80"));
        assert!(!same_authority("localhost:9999", "localhost:8080"));
        assert!(!same_authority("evil.example:8080", "127.0.0.1:8080"));
        assert!(tokens_equal("s3cret-token-123", "s3cret-token-123"));
        assert!(!tokens_equal("s3cret-token-124", "s3cret-token-123"));
        assert!(!tokens_equal("s3cret", "s3cret-token-123"));
    }
}
