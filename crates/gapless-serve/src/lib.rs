//! # gapless-serve
//!
//! `gapless serve`: one HTTP server over the engine for the dashboard's API (saved profiles,
//! runs and calibrations in SQLite). Work in progress (issue 16): this is the server's
//! foundation (the listen rule, the database with its migrations and crash recovery, the
//! profile API with the core's validation, bearer tokens, body limits). Runs, live events,
//! the page and the OTG API come next.
//!
//! The server binds to loopback unless it is given a token: on any other address every
//! request must carry `Authorization: Bearer TOKEN`.

mod api;
pub mod db;

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
    #[error("cannot read the token file {path}: {cause}")]
    TokenFile { path: String, cause: std::io::Error },
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

/// What every handler shares.
pub struct AppState {
    pub db: Mutex<db::Db>,
    pub token: Option<String>,
}

/// Serves until `shutdown` resolves. Errors before the first request are returned.
pub async fn serve(
    cfg: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    check_listen(cfg.listen, cfg.token.as_deref())?;
    let db = db::Db::open(&cfg.db)?;
    let state = Arc::new(AppState {
        db: Mutex::new(db),
        token: cfg.token.clone(),
    });
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|cause| ServeError::Listen {
            addr: cfg.listen,
            cause,
        })?;
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|cause| ServeError::Listen {
            addr: cfg.listen,
            cause,
        })
}
