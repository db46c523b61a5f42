//! HTTPS for the OTG listener, as snappi expects it (`https://localhost:8443`): a
//! certificate, either the user's (`--otg-cert`/`--otg-key`) or one made at first start and
//! kept beside the database; rustls (ring) for the protocol; and a listener for
//! `axum::serve` that hands over connections whose handshake has finished.
//!
//! Each handshake runs in a task of its own with a deadline, and at most
//! [`HANDSHAKES`] at once: a client that connects and sends nothing holds neither the accept
//! loop nor anyone else's handshake.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::ServeError;

/// How the OTG listener speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Plain HTTP (`--otg-plain`).
    Plain,
    /// HTTPS with the certificate made at first start (see [`self_signed`]): the default.
    SelfSigned,
    /// HTTPS with this certificate chain and key (PEM files).
    Tls(TlsFiles),
}

impl Transport {
    /// The URL scheme clients use.
    pub fn scheme(&self) -> &'static str {
        match self {
            Transport::Plain => "http",
            _ => "https",
        }
    }
}

/// A certificate chain and its private key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Handshakes in progress at most; past it new connections wait in the kernel's backlog.
pub const HANDSHAKES: usize = 256;
/// A handshake not finished by then is dropped.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// The certificate made at first start: `NAME-otg-cert.pem` and `NAME-otg-key.pem` beside the
/// database `NAME.db`. Made when either is missing, for `names` (host names and addresses)
/// besides localhost, 127.0.0.1 and ::1; kept as it is otherwise, so clients that pinned it
/// keep working. The key is written with mode 0600.
pub fn self_signed(db: &Path, names: &[String]) -> Result<TlsFiles, ServeError> {
    let stem = db
        .file_stem()
        .map_or("gapless".into(), |s| s.to_string_lossy().to_string());
    let files = TlsFiles {
        cert: db.with_file_name(format!("{stem}-otg-cert.pem")),
        key: db.with_file_name(format!("{stem}-otg-key.pem")),
    };
    if files.cert.exists() && files.key.exists() {
        return Ok(files);
    }
    let mut sans = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    sans.extend(names.iter().filter(|n| !sans.contains(n)).cloned().collect::<Vec<_>>());
    let made = rcgen::generate_simple_self_signed(sans).map_err(|e| tls_err(&files.cert, e.to_string()))?;
    write_private(&files.key, made.signing_key.serialize_pem().as_bytes())?;
    gapless_io::files::atomic::write_atomic(&files.cert, made.cert.pem().as_bytes())
        .map_err(|e| tls_err(&files.cert, e.to_string()))?;
    Ok(files)
}

/// Writes the key atomically, readable by its owner only (from the first byte).
fn write_private(path: &Path, pem: &[u8]) -> Result<(), ServeError> {
    use std::io::Write;
    let mut f = gapless_io::files::atomic::AtomicFile::create(path)
        .map_err(|e| tls_err(path, e.to_string()))?
        .with_mode(0o600);
    f.file()
        .write_all(pem)
        .and_then(|()| f.commit())
        .map_err(|e| tls_err(path, e.to_string()))
}

fn tls_err(path: &Path, cause: String) -> ServeError {
    ServeError::Tls {
        path: path.display().to_string(),
        cause,
    }
}

/// The server side of TLS for these files: TLS 1.2 and 1.3 with ring's ciphers, and the
/// application protocol `alpn` (`http/1.1` for the OTG API, `h2` for gNMI's gRPC, which gRPC
/// clients ask for by ALPN).
pub fn acceptor(files: &TlsFiles, alpn: &[u8]) -> Result<(TlsAcceptor, Vec<u8>), ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|it| it.collect())
        .map_err(|e| tls_err(&files.cert, format!("no PEM certificate read ({e})")))?;
    if certs.is_empty() {
        return Err(tls_err(&files.cert, "the file holds no certificate".into()));
    }
    let leaf = certs[0].to_vec();
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| tls_err(&files.key, format!("no PEM private key read ({e})")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(&files.cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| tls_err(&files.key, format!("the key does not fit the certificate ({e})")))?;
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Ok((TlsAcceptor::from(Arc::new(cfg)), leaf))
}

/// A TCP listener whose connections come out of their TLS handshake.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(tcp, acceptor, tx));
        Ok(TlsListener {
            ready,
            local,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept_loop(tcp: TcpListener, acceptor: TlsAcceptor, tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>) {
    let slots = Arc::new(Semaphore::new(HANDSHAKES));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (sock, peer) = match tcp.accept().await {
            Ok(c) => c,
            // Out of file descriptors and the like: wait, as axum's own listener does.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, tx) = (acceptor.clone(), tx.clone());
        tokio::spawn(async move {
            let shake = tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(sock)).await;
            drop(slot);
            if let Ok(Ok(stream)) = shake {
                let _ = tx.send((stream, peer)).await;
            }
        });
    }
}

/// A TLS client's address, as [`axum::extract::ConnectInfo`] gives it to the request limits
/// (axum gives `SocketAddr` itself only for its own TCP listener).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

impl TlsListener {
    /// Its connections as tonic's server takes them (the gNMI listener).
    pub fn incoming(self) -> impl futures_util::Stream<Item = io::Result<GrpcConn>> {
        futures_util::stream::unfold(self, |mut l| async move {
            let (io, peer) = l.ready.recv().await?;
            Some((Ok(GrpcConn { io, peer }), l))
        })
    }
}

/// A TLS client's address, as the gRPC listeners' request limits read it.
#[derive(Debug, Clone, Copy)]
pub struct GrpcPeer(pub SocketAddr);

/// A TLS connection served by tonic, its client's address known as [`GrpcPeer`].
pub struct GrpcConn {
    io: TlsStream<TcpStream>,
    peer: SocketAddr,
}

impl tonic::transport::server::Connected for GrpcConn {
    type ConnectInfo = GrpcPeer;

    fn connect_info(&self) -> GrpcPeer {
        GrpcPeer(self.peer)
    }
}

impl tokio::io::AsyncRead for GrpcConn {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for GrpcConn {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop ended (it does not, but while the listener lives): no more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
