//! Bounds on what clients may ask of the server: the body size ([`BODY_LIMIT`], past it 413),
//! requests per second per client address (a token bucket; past it 429 with `Retry-After`),
//! and open event streams in all (past it 503). Both answer at once with a message; neither makes anything wait, and nothing here
//! runs on the packet path's cores (see `gapless_engine::cores`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::reply::{err, ApiError};

/// Bodies larger than this are refused (413): a profile is a few kB.
pub const BODY_LIMIT: usize = 1 << 20;

/// The bounds (`gapless serve --client-rate`, `--max-event-streams`).
#[derive(Debug, Clone, Copy)]
pub struct LimitsConfig {
    /// Requests per second one client address may make, sustained; twice that in a burst.
    pub client_rate: f64,
    /// Event streams (SSE) open at once, over every run and experiment.
    pub event_streams: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            client_rate: 1000.0,
            event_streams: 256,
        }
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The server's bounds and what is used of them.
pub struct Limits {
    cfg: LimitsConfig,
    clients: Mutex<HashMap<IpAddr, Bucket>>,
    streams: Arc<Semaphore>,
}

/// Client addresses remembered at most; idle ones are forgotten past this.
const CLIENTS_KEPT: usize = 4096;

impl Limits {
    pub fn new(cfg: LimitsConfig) -> Limits {
        Limits {
            cfg,
            clients: Mutex::new(HashMap::new()),
            streams: Arc::new(Semaphore::new(cfg.event_streams)),
        }
    }

    /// Takes one request's token for `ip`; false when its bucket is empty.
    pub(crate) fn take(&self, ip: IpAddr) -> bool {
        let now = Instant::now();
        let (rate, burst) = (self.cfg.client_rate, 2.0 * self.cfg.client_rate);
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.len() >= CLIENTS_KEPT {
            clients.retain(|_, b| now.duration_since(b.at).as_secs_f64() * rate < burst);
        }
        let b = clients.entry(ip).or_insert(Bucket { tokens: burst, at: now });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// A place for one more event stream, held as long as the stream is open; a 503 when
    /// every place is taken.
    pub fn event_stream(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        self.streams.clone().try_acquire_owned().map_err(|_| {
            err(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{} event streams are open, the most this server keeps. Fix: close other dashboard tabs or event readers, poll the run instead, or start the server with a larger --max-event-streams",
                    self.cfg.event_streams
                ),
            )
        })
    }

    /// Event streams open now.
    pub fn open_streams(&self) -> usize {
        self.cfg.event_streams - self.streams.available_permits()
    }
}

/// The address a client's requests are counted under: an unknown one counts as one client.
pub(crate) fn client(ip: Option<IpAddr>) -> IpAddr {
    ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

/// Every request takes a token of its client's bucket first.
pub async fn check(State(l): State<Arc<Limits>>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
        .or_else(|| req.extensions().get::<ConnectInfo<crate::tls::Peer>>().map(|c| c.0 .0));
    let ip = client(peer.map(|a| a.ip()));
    if l.take(ip) {
        return next.run(req).await;
    }
    let msg = format!(
        "too many requests from {ip}: more than {} a second. Fix: poll less often (a run's snapshot changes 5 times a second; its event stream pushes each one), or start the server with a larger --client-rate",
        l.cfg.client_rate
    );
    let mut r = err(StatusCode::TOO_MANY_REQUESTS, msg).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let l = Limits::new(LimitsConfig {
            client_rate: 100.0,
            event_streams: 2,
        });
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let taken = (0..300).filter(|_| l.take(ip)).count();
        assert!(
            (200..=202).contains(&taken),
            "expected a burst of 200 (+ refill); got {taken}"
        );
        assert!(
            l.take("192.0.2.2".parse().unwrap()),
            "another client has its own bucket"
        );
        let a = l.event_stream().expect("a first stream");
        let _b = l.event_stream().expect("a second stream");
        assert_eq!(l.open_streams(), 2);
        let refused = l.event_stream().expect_err("a third is refused");
        assert_eq!(refused.0, StatusCode::SERVICE_UNAVAILABLE);
        drop(a);
        assert!(l.event_stream().is_ok(), "a closed stream frees its place");
    }
}
