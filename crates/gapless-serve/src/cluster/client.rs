//! The controller's side of the agent API: one HTTPS client per agent, blocking (it runs on
//! the controller's own threads, never on the server's async workers). The agent's
//! certificate is taken from a first handshake, the agent proves it holds the agent token
//! for exactly that certificate ([`crate::agent::trust`]), and from then on the client
//! trusts that certificate alone and sends the token.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gapless_core::timing::clocks::{estimate, exchange, ClockState, Offset};
use ring::rand::SecureRandom;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::Value;

use crate::agent::trust;

/// How long one call may take: an agent that does not answer within it counts as silent.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a call that sets up or tears down a share may take.
pub const SLOW_CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// A connected, verified agent.
pub struct Agent {
    /// `HOST:PORT`, as the config's locations name it.
    pub addr: String,
    http: ureq::Agent,
    token: String,
}

/// A handshake verifier that accepts any certificate and keeps it: only for the first
/// handshake, whose certificate the agent must then prove it holds the token for.
#[derive(Debug)]
struct Keep(Mutex<Option<Vec<u8>>>, Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Keep {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.1.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.1.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.1.signature_verification_algorithms.supported_schemes()
    }
}

/// The certificate the agent's listener shows.
fn certificate(addr: &str) -> Result<Vec<u8>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let keep = Arc::new(Keep(Mutex::new(None), provider.clone()));
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(keep.clone())
        .with_no_client_auth();
    let host = addr.rsplit_once(':').map_or(addr, |h| h.0).trim_matches(['[', ']']);
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve it ({e})"))?
        .next()
        .ok_or("it resolves to no address")?;
    let mut tcp = TcpStream::connect_timeout(&sock, CALL_TIMEOUT).map_err(|e| format!("unreachable ({e})"))?;
    tcp.set_read_timeout(Some(CALL_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), name).map_err(|e| e.to_string())?;
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    // An empty write drives the handshake to its end.
    tls.write_all(b"")
        .and_then(|()| tls.flush())
        .map_err(|e| format!("no TLS handshake ({e}): is it a gapless serve without --otg-plain?"))?;
    let _ = tls.read(&mut [0u8; 0]);
    let cert = keep.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    cert.ok_or_else(|| "it showed no certificate".into())
}

impl Agent {
    /// Connects to the agent at `addr`: takes its certificate, checks its proof of the token,
    /// and pins the certificate. The error says what failed, for the config's refusal.
    pub fn connect(addr: &str, token: &str) -> Result<Agent, String> {
        let cert = certificate(addr)?;
        let pinned = ureq::tls::Certificate::from_der(&cert).to_owned();
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::Specific(Arc::new(vec![pinned])))
            .build();
        let http: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(CALL_TIMEOUT))
            .http_status_as_error(false)
            .tls_config(tls)
            .build()
            .into();
        let a = Agent {
            addr: addr.to_string(),
            http,
            token: token.to_string(),
        };
        let mut nonce = [0u8; 16];
        ring::rand::SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| "no random nonce".to_string())?;
        let hello = a.send(&format!("/gapless/agent/v1/hello?nonce={}", trust::hex(&nonce)), None)?;
        let proof = hello["proof"].as_str().unwrap_or("");
        if !trust::verify(token, &nonce, &cert, proof) {
            return Err("it does not prove it holds the agent token (a wrong token, or something between this server and the agent). Fix: give every agent's --token-file the token in the controller's --agent-token-file".into());
        }
        Ok(a)
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// A GET (no body) or a POST of `body`; the token is sent once the agent is verified
    /// (every call but the hello).
    fn send(&self, path: &str, body: Option<&Value>) -> Result<Value, String> {
        self.send_within(path, body, CALL_TIMEOUT)
    }

    fn send_within(&self, path: &str, body: Option<&Value>, timeout: Duration) -> Result<Value, String> {
        let hello = path.starts_with("/gapless/agent/v1/hello");
        let auth = format!("Bearer {}", self.token);
        let resp = match body {
            None => {
                let r = self
                    .http
                    .get(&self.url(path))
                    .config()
                    .timeout_global(Some(timeout))
                    .build();
                match hello {
                    true => r.call(),
                    false => r.header("Authorization", &auth).call(),
                }
            }
            Some(b) => self
                .http
                .post(&self.url(path))
                .config()
                .timeout_global(Some(timeout))
                .build()
                .header("Authorization", &auth)
                .content_type("application/json")
                .send(b.to_string()),
        };
        let mut resp = resp.map_err(|e| format!("unreachable ({e})"))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("its reply: {e}"))?;
        if !status.is_success() {
            let why = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["errors"][0].as_str().map(str::to_string))
                .unwrap_or(text);
            return Err(match status.as_u16() {
                401 => format!("it refused the agent token (401: {why}). Fix: give every agent's --token-file the token in the controller's --agent-token-file"),
                404 if why.contains("not part of the OTG subset") => "it has no agent API (404). Fix: run the same gapless on every host".into(),
                code => format!("{code}: {why}"),
            });
        }
        serde_json::from_str(&text).map_err(|e| format!("not an agent's reply ({e}): {text}"))
    }

    /// POSTs `body` to the agent API's `path` (`prepare`, `start`, `poll`, `stop`).
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.send(&format!("/gapless/agent/v1/{path}"), Some(body))
    }

    /// [`Agent::post`] for the calls that set up or tear down a share.
    pub fn post_slow(&self, path: &str, body: &Value) -> Result<Value, String> {
        self.send_within(&format!("/gapless/agent/v1/{path}"), Some(body), SLOW_CALL_TIMEOUT)
    }

    /// The agent's clock state.
    pub fn clock_state(&self) -> Result<ClockState, String> {
        let v = self.send("/gapless/agent/v1/clock", None)?;
        serde_json::from_value(v["clock"].clone()).map_err(|e| format!("its clock state: {e}"))
    }

    /// The agent's clock offset (its clock minus this host's) from `n` exchanges.
    pub fn offset(&self, n: usize) -> Result<Offset, String> {
        let xs = exchange(n, gapless_io::kernel::clock::realtime_ns, || {
            let v = self.post("time", &serde_json::json!({}))?;
            let t = |k: &str| v[k].as_i64().ok_or_else(|| format!("its time reply has no {k}"));
            Ok::<_, String>((t("t2")?, t("t3")?))
        })?;
        estimate(&xs).ok_or_else(|| "no usable clock exchange (a clock stepped during each)".into())
    }
}
