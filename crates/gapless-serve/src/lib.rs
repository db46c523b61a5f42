//! # gapless-serve
//!
//! `gapless serve`: one server process over the engine with two front ends:
//!
//! - the **dashboard** and its JSON API under `/api` ([`api`]): saved profiles, runs with
//!   live events over SSE and their stored results and report files, calibrations; the page
//!   and its assets are embedded in the binary ([`web`]);
//! - the **Open Traffic Generator API** ([`otg`]) on a listener of its own, for snappi.
//!
//! Profiles, runs and calibrations live in SQLite ([`db`]); a run's report files live in the
//! report directory beside the database. Every request on either listener passes one guard
//! ([`guard`]): Host, Origin, content type and the token. The server binds to loopback unless
//! it is given a token: on any other address every request must carry
//! `Authorization: Bearer TOKEN`.

pub mod agent;
pub mod api;
mod calibrations;
pub mod cluster;
pub mod db;
mod experiments;
mod files;
pub mod gnmi;
pub mod grpc;
pub mod guard;
mod jobs;
pub mod limits;
mod model;
pub mod otg;
mod profiles;
pub mod reply;
mod runs;
mod runs_api;
pub mod testing;
pub mod tls;
mod web;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use thiserror::Error;

pub use api::router;

/// How the server is started.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub db: PathBuf,
    /// Required when `listen` is not a loopback address.
    pub token: Option<String>,
    /// The OTG API's address (None: no OTG API).
    pub otg_listen: Option<SocketAddr>,
    /// HTTPS (the default, as snappi expects) or plain HTTP on `otg_listen`.
    pub otg_transport: tls::Transport,
    /// The OTG API's gRPC address (service `otg.Openapi`; None: no gRPC).
    pub otg_grpc_listen: Option<SocketAddr>,
    /// gNMI's address (service `gnmi.gNMI` on the OTG models; TLS as the OTG API has it;
    /// None: no gNMI).
    pub gnmi_listen: Option<SocketAddr>,
    /// Host names the listeners answer to besides their address and loopback
    /// (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// Requests per second per client and open event streams.
    pub limits: limits::LimitsConfig,
    /// A test option: the agent API's clock readings, and the start of its shares, are
    /// shifted by this many ns (see [`agent`]); 0 outside tests.
    pub clock_offset_ns: i64,
    /// The token this server, as the controller of a run across hosts, gives its agents
    /// (`--agent-token-file`); None: it drives no agents.
    pub agent_token: Option<String>,
}

impl ServeConfig {
    /// The guard of the listener on `listen`.
    fn guard(&self, listen: SocketAddr, otg: bool) -> guard::Guard {
        let (body_types, public): (guard::BodyTypes, fn(&str) -> bool) = if otg {
            (|_, _| "application/json", |p| p == "/gapless/agent/v1/hello")
        } else {
            (api::body_type, api::is_public)
        };
        guard::Guard {
            listen,
            allow_hosts: Arc::new(self.allow_hosts.clone()),
            token: self.token.as_deref().map(Arc::from),
            body_types,
            public,
        }
    }

    /// The report directory: `NAME-reports` beside the database `NAME.db`.
    pub fn reports_dir(&self) -> PathBuf {
        let stem = self
            .db
            .file_stem()
            .map_or("gapless".into(), |s| s.to_string_lossy().to_string());
        self.db.with_file_name(format!("{stem}-reports"))
    }
}

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("refusing to listen on {addr} without a token: anyone who can reach it could send traffic from this machine. Fix: listen on 127.0.0.1 (the default), or give a token file")]
    NoToken { addr: SocketAddr },
    #[error("the token file {path} is empty. Fix: write a secret of at least 16 characters into it")]
    EmptyToken { path: String },
    #[error("database {path}: {cause}. Fix: check the path and that no other server holds it")]
    Db { path: String, cause: rusqlite::Error },
    #[error("cannot listen on {addr}: {cause}. Fix: pick a free address with --listen")]
    Listen { addr: SocketAddr, cause: std::io::Error },
    #[error(
        "cannot make the report directory {path}: {cause}. Fix: put the database (--db) where the server may write"
    )]
    Reports { path: String, cause: std::io::Error },
    #[error("cannot read the token file {path}: {cause}")]
    TokenFile { path: String, cause: std::io::Error },
    #[error("TLS for the OTG API: {path}: {cause}. Fix: give a PEM certificate chain and its PEM private key (--otg-cert, --otg-key), remove both files to have a self-signed pair made again, or serve plain HTTP with --otg-plain")]
    Tls { path: String, cause: String },
    #[error("the OTG gRPC listener on {addr} failed: {cause}")]
    Grpc { addr: SocketAddr, cause: String },
}

impl ServeError {
    pub(crate) fn db(path: &Path, cause: rusqlite::Error) -> ServeError {
        ServeError::Db {
            path: path.display().to_string(),
            cause,
        }
    }
}

/// The token rule: loopback needs none, any other address needs one.
/// A name for a thread the server starts: its kind and a number unique in the process. Never a
/// string from a request: a name with a NUL byte panics `thread::Builder::spawn` (issue 68),
/// and one longer than 15 bytes is cut by the kernel.
pub fn thread_name(kind: &'static str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("{kind}-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

pub fn check_listen(listen: SocketAddr, token: Option<&str>) -> Result<(), ServeError> {
    if listen.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(ServeError::NoToken { addr: listen })
    }
}

/// Reads a token file: its first line, trimmed.
pub fn read_token(path: &Path) -> Result<String, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|cause| ServeError::TokenFile {
        path: path.display().to_string(),
        cause,
    })?;
    let t = text.lines().next().unwrap_or("").trim().to_string();
    if t.is_empty() {
        return Err(ServeError::EmptyToken {
            path: path.display().to_string(),
        });
    }
    Ok(t)
}

/// The state as handlers take it.
pub type Shared = Arc<AppState>;

/// What every handler shares.
pub struct AppState {
    pub db: Arc<Mutex<db::Db>>,
    pub jobs: jobs::Jobs,
    /// Where runs write their report files and calibrations their files.
    pub reports: PathBuf,
    pub otg: Mutex<otg::OtgState>,
    /// Shared by both listeners.
    pub limits: Arc<limits::Limits>,
    /// The agent API's test shift of its clock readings, ns.
    pub clock_offset_ns: i64,
    /// This server's own token (None on loopback without one).
    pub token: Option<String>,
    /// The OTG listener's certificate (DER) when it serves HTTPS: what an agent proves it
    /// holds the token with ([`agent::trust`]).
    pub otg_cert_der: Option<Vec<u8>>,
    /// What this server runs as an agent.
    pub shares: agent::Shares,
    /// The token this server gives its agents as a controller.
    pub agent_token: Option<String>,
}

/// Serves until `shutdown` resolves, then stops the runs going on and waits for each to
/// store what it measured. Errors before the first request are returned.
pub async fn serve(
    cfg: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    check_listen(cfg.listen, cfg.token.as_deref())?;
    // The packet path's cores are its own: a run that would leave none to this server's
    // threads is refused, and while runs hold cores every other thread keeps off them.
    gapless_engine::cores::init(gapless_engine::cores::Policy::KeepOne);
    for otg in cfg
        .otg_listen
        .iter()
        .chain(&cfg.otg_grpc_listen)
        .chain(&cfg.gnmi_listen)
    {
        check_listen(*otg, cfg.token.as_deref())?;
    }
    // OTG devices' routing daemons and namespaces that a server killed before it could
    // remove them left behind (the daemons first: they keep their namespaces alive).
    for gone in gapless_io::devices::frr::remove_stale() {
        eprintln!("gapless serve: stopped the routing daemons {gone} of a server no longer running");
    }
    for gone in gapless_io::devices::hosts::remove_stale() {
        eprintln!("gapless serve: removed the device namespace {gone} of a server no longer running");
    }
    let db = db::Db::open(&cfg.db)?;
    let reports = cfg.reports_dir();
    std::fs::create_dir_all(&reports).map_err(|cause| ServeError::Reports {
        path: reports.display().to_string(),
        cause,
    })?;
    let otg = match cfg.otg_listen {
        Some(a) => {
            let acceptor = otg_acceptor(&cfg, a)?;
            let l = bind(a).await?;
            let a = local(&l, a);
            Some((l, a, acceptor))
        }
        None => None,
    };
    let otg_cert_der = otg.as_ref().and_then(|o| o.2.as_ref()).map(|t| t.1.clone());
    let state = Arc::new(AppState {
        db: Arc::new(Mutex::new(db)),
        jobs: jobs::Jobs::default(),
        reports,
        otg: Mutex::new(otg::OtgState::default()),
        limits: Arc::new(limits::Limits::new(cfg.limits)),
        clock_offset_ns: cfg.clock_offset_ns,
        token: cfg.token.clone(),
        otg_cert_der,
        shares: agent::Shares::default(),
        agent_token: cfg.agent_token.clone(),
    });
    let listener = bind(cfg.listen).await?;
    // Port 0 asks for a free port: the guard checks Host against the port bound.
    let listen = local(&listener, cfg.listen);
    let grpc = match cfg.otg_grpc_listen {
        Some(a) => {
            let l = bind(a).await?;
            let a = local(&l, a);
            Some((l, a))
        }
        None => None,
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    let ended = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };
    let otg_task = match otg {
        Some((l, addr, acceptor)) => {
            let app = otg_app(state.clone(), cfg.guard(addr, true));
            let stop = ended(rx.clone());
            Some(match acceptor {
                None => tokio::spawn(serve_on::<_, SocketAddr>(l, app, stop, addr)),
                Some((a, _)) => {
                    let l = tls::TlsListener::new(l, a).map_err(|cause| ServeError::Listen { addr, cause })?;
                    tokio::spawn(serve_on::<_, tls::Peer>(l, app, stop, addr))
                }
            })
        }
        None => None,
    };
    let gnmi_task = match cfg.gnmi_listen {
        Some(a) => Some(gnmi_task(&cfg, a, state.clone(), rx.clone()).await?),
        None => None,
    };
    let grpc_task = grpc.map(|(l, addr)| {
        let svc = grpc::Openapi::new(state.clone(), cfg.guard(addr, true));
        let stop = ended(rx.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(l), stop)
                .await
                .map_err(|e| ServeError::Grpc {
                    addr,
                    cause: e.to_string(),
                })
        })
    });
    let s = state.clone();
    tokio::spawn(async move {
        shutdown.await;
        // Runs end first, so their event streams close and the listeners can drain.
        s.jobs.stop_flags();
        let _ = tx.send(true);
    });
    let app = router(state.clone(), cfg.guard(listen, false));
    let served = serve_on::<_, SocketAddr>(listener, app, ended(rx), cfg.listen).await;
    for t in otg_task.into_iter().chain(grpc_task).chain(gnmi_task) {
        let _ = t.await;
    }
    let s = state.clone();
    let _ = tokio::task::spawn_blocking(move || {
        // Agents' shares are jobs too: stopping them stops the shares.
        s.jobs.stop_all();
        // The OTG devices' interfaces go with the server.
        *otg::otg(&s) = otg::OtgState::default();
    })
    .await;
    served
}

/// The gNMI listener, serving until `stop`: TLS with the OTG API's certificate, plain when
/// the OTG API is (`--otg-plain`).
async fn gnmi_task(
    cfg: &ServeConfig,
    addr: SocketAddr,
    state: Shared,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<Result<(), ServeError>>, ServeError> {
    let mut on_stop = stopping.clone();
    let stop = async move {
        let _ = on_stop.wait_for(|v| *v).await;
    };
    let plain = cfg.otg_transport == tls::Transport::Plain;
    let tls = (!plain).then(|| otg_files(cfg, addr)).transpose()?;
    let l = bind(addr).await?;
    let addr = local(&l, addr);
    // Its Subscribe streams end when the server stops: a graceful shutdown waits for every
    // open stream, and a STREAM subscription never ends by itself.
    let svc = gnmi::Gnmi::new(state, cfg.guard(addr, true), stopping);
    let failed = move |e: tonic::transport::Error| ServeError::Grpc {
        addr,
        cause: e.to_string(),
    };
    let server = tonic::transport::Server::builder().add_service(svc);
    Ok(match tls {
        None => tokio::spawn(async move {
            let incoming = tonic::transport::server::TcpIncoming::from(l);
            server
                .serve_with_incoming_shutdown(incoming, stop)
                .await
                .map_err(failed)
        }),
        Some(files) => {
            let (acceptor, _) = tls::acceptor(&files, b"h2")?;
            let l = tls::TlsListener::new(l, acceptor).map_err(|cause| ServeError::Listen { addr, cause })?;
            tokio::spawn(async move {
                server
                    .serve_with_incoming_shutdown(l.incoming(), stop)
                    .await
                    .map_err(failed)
            })
        }
    })
}

/// The OTG listener's app: the OTG API and the agent API behind one guard and the request
/// limits; any other path is the OTG API's 404.
pub fn otg_app(state: Shared, guard: guard::Guard) -> axum::Router {
    otg::routes()
        .merge(agent::routes())
        .fallback(|uri: axum::http::Uri| async move {
            reply::Reply(gapless_otg::OtgError::not_found(format!(
                "{} is not part of the OTG subset gapless serves",
                uri.path()
            )))
        })
        .layer(axum::extract::DefaultBodyLimit::max(limits::BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(guard, guard::check))
        .layer(axum::middleware::from_fn_with_state(
            state.limits.clone(),
            limits::check,
        ))
        .with_state(state)
}

/// Serves `app` on `l` until `stop`; each request knows its client's address as `C` (the
/// request limits read it).
async fn serve_on<L, C>(
    l: L,
    app: axum::Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
    addr: SocketAddr,
) -> Result<(), ServeError>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
    C: for<'a> axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>
        + Clone
        + Send
        + Sync
        + 'static,
{
    axum::serve(l, app.into_make_service_with_connect_info::<C>())
        .with_graceful_shutdown(stop)
        .await
        .map_err(|cause| ServeError::Listen { addr, cause })
}

/// The OTG listener's TLS and its certificate (DER), made before it binds (a bad
/// certificate is an error at start).
fn otg_acceptor(
    cfg: &ServeConfig,
    addr: SocketAddr,
) -> Result<Option<(tokio_rustls::TlsAcceptor, Vec<u8>)>, ServeError> {
    if cfg.otg_transport == tls::Transport::Plain {
        return Ok(None);
    }
    tls::acceptor(&otg_files(cfg, addr)?, b"http/1.1").map(Some)
}

/// The OTG API's certificate and key files (made at first start when none were given).
fn otg_files(cfg: &ServeConfig, addr: SocketAddr) -> Result<tls::TlsFiles, ServeError> {
    Ok(match &cfg.otg_transport {
        tls::Transport::Tls(f) => f.clone(),
        _ => {
            let mut names = cfg.allow_hosts.clone();
            if !addr.ip().is_unspecified() {
                names.push(addr.ip().to_string());
            }
            tls::self_signed(&cfg.db, &names)?
        }
    })
}

fn local(l: &tokio::net::TcpListener, asked: SocketAddr) -> SocketAddr {
    l.local_addr().unwrap_or(asked)
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|cause| ServeError::Listen { addr, cause })
}
