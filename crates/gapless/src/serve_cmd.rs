//! `gapless serve`: the dashboard and the OTG API over the engine (crate gapless-serve).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use gapless_serve::tls::{TlsFiles, Transport};

/// The web dashboard (saved profiles, runs with live charts, history, calibrations) and the
/// Open Traffic Generator API for snappi. Both listen on loopback by default; any other
/// address needs --token-file. Requests from other web pages are refused (Host, Origin and
/// content type are checked).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The dashboard's address (the page at /, its JSON API under /api).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The OTG API's address (HTTPS, paths at the root, as snappi expects:
    /// snappi.api(location="https://127.0.0.1:8443", verify=False)).
    #[arg(long, default_value = "127.0.0.1:8443")]
    otg_listen: SocketAddr,
    /// The OTG API's gRPC address (service otg.Openapi, plain HTTP/2:
    /// snappi.api(location="127.0.0.1:40051", transport="grpc")).
    #[arg(long, default_value = "127.0.0.1:40051")]
    otg_grpc_listen: SocketAddr,
    /// gNMI's address (service gnmi.gNMI on the OTG YANG models, read-only; TLS with the OTG
    /// API's certificate, plain with --otg-plain), as ondatra's binding dials it:
    /// gnmi { target: "127.0.0.1:50051" skip_verify: true }.
    #[arg(long, default_value = "127.0.0.1:50051")]
    gnmi_listen: SocketAddr,
    /// Serve no gNMI.
    #[arg(long)]
    no_gnmi: bool,
    /// Serve no OTG API (neither HTTPS nor gRPC, nor gNMI).
    #[arg(long)]
    no_otg: bool,
    /// Serve no OTG gRPC.
    #[arg(long)]
    no_otg_grpc: bool,
    /// Serve the OTG API over plain HTTP instead of HTTPS.
    #[arg(long, conflicts_with_all = ["otg_cert", "otg_key"])]
    otg_plain: bool,
    /// The OTG API's certificate chain (PEM). Without it, a self-signed certificate is made at
    /// first start and kept beside the database (NAME-otg-cert.pem, NAME-otg-key.pem).
    #[arg(long, requires = "otg_key", value_name = "PEM")]
    otg_cert: Option<PathBuf>,
    /// The private key of --otg-cert (PEM).
    #[arg(long, requires = "otg_cert", value_name = "PEM")]
    otg_key: Option<PathBuf>,
    /// The SQLite database (created and migrated if needed).
    #[arg(long, default_value = "gapless.db")]
    db: PathBuf,
    /// A file whose first line is the bearer token every request must carry.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// A host name (NAME, or NAME:PORT) the server answers to besides its address and
    /// localhost, e.g. the name of a reverse proxy in front of it. Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// Requests per second one client address may make (twice that in a burst); past it the
    /// answer is 429.
    #[arg(long, default_value_t = 1000.0, value_name = "N")]
    client_rate: f64,
    /// Event streams (live charts) open at once; past it the answer is 503.
    #[arg(long, default_value_t = 256, value_name = "N")]
    max_event_streams: usize,
    /// For tests on one machine, whose network namespaces share one clock: shift the agent
    /// API's clock readings (/gapless/agent/v1/time) and the start of its shares of runs
    /// across hosts by N ns, as if this host's clock were N ns ahead. Frames' stamps are
    /// not shifted.
    #[arg(long, default_value_t = 0, value_name = "N", allow_hyphen_values = true)]
    test_clock_offset_ns: i64,
    /// A file whose first line is the token of the gapless agents this server drives as the
    /// controller of a run across hosts (ports located HOST:PORT/IFACE). Each agent proves
    /// it holds the same token before it is sent it (see the README's security section).
    #[arg(long, value_name = "F")]
    agent_token_file: Option<PathBuf>,
}

pub fn cmd_serve(a: ServeArgs) -> Result<i32> {
    let cfg = serve_config(a)?;
    raise_fd_limit();
    let rt = tokio::runtime::Runtime::new()?;
    banner(&cfg);
    // The handlers go in before any listener is up: made inside the server's first poll of
    // the future, a SIGTERM that came once gNMI answered but before that poll killed the
    // process by the signal's default action (exit -15, nothing stopped in order).
    let stop = {
        let _rt = rt.enter();
        stop_signal()
    };
    rt.block_on(gapless_serve::serve(cfg, stop))?;
    Ok(0)
}

/// The server's configuration from the command line, its limits and token files checked
/// (serve() checks the listen rule before it opens anything).
fn serve_config(a: ServeArgs) -> Result<gapless_serve::ServeConfig> {
    if !(a.client_rate.is_finite() && a.client_rate >= 1.0) || a.max_event_streams == 0 {
        anyhow::bail!(
            "--client-rate {} --max-event-streams {}: give a rate of at least 1 request a second and at least 1 stream",
            a.client_rate,
            a.max_event_streams
        );
    }
    let token = a.token_file.as_deref().map(gapless_serve::read_token).transpose()?;
    let otg_transport = match (a.otg_plain, a.otg_cert, a.otg_key) {
        (true, ..) => Transport::Plain,
        (false, Some(cert), Some(key)) => Transport::Tls(TlsFiles { cert, key }),
        _ => Transport::SelfSigned,
    };
    Ok(gapless_serve::ServeConfig {
        listen: a.listen,
        db: a.db,
        token,
        otg_listen: (!a.no_otg).then_some(a.otg_listen),
        otg_transport,
        otg_grpc_listen: (!a.no_otg && !a.no_otg_grpc).then_some(a.otg_grpc_listen),
        gnmi_listen: (!a.no_otg && !a.no_gnmi).then_some(a.gnmi_listen),
        allow_hosts: a.allow_host,
        limits: gapless_serve::limits::LimitsConfig {
            client_rate: a.client_rate,
            event_streams: a.max_event_streams,
        },
        clock_offset_ns: a.test_clock_offset_ns,
        agent_token: a
            .agent_token_file
            .as_deref()
            .map(gapless_serve::read_token)
            .transpose()?,
    })
}

/// Where each front door listens, with the line a client gives to reach it.
fn banner(cfg: &gapless_serve::ServeConfig) {
    let scheme = cfg.otg_transport.scheme();
    eprintln!(
        "gapless serve: dashboard http://{}/ (Ctrl-C, SIGTERM or SIGHUP stops)",
        cfg.listen
    );
    if let Some(o) = cfg.otg_listen {
        let verify = if scheme == "https" { ", verify=False" } else { "" };
        eprintln!("gapless serve: OTG API {scheme}://{o} (snappi: snappi.api(location=\"{scheme}://{o}\"{verify}))");
    }
    if let Some(g) = cfg.otg_grpc_listen {
        eprintln!("gapless serve: OTG gRPC {g} (snappi: snappi.api(location=\"{g}\", transport=\"grpc\"))");
    }
    if let Some(g) = cfg.gnmi_listen {
        let tls = if scheme == "https" {
            " skip_verify: true"
        } else {
            " insecure: true"
        };
        eprintln!("gapless serve: gNMI {g} (ondatra's binding: gnmi {{ target: \"{g}\"{tls} }})");
    }
    eprintln!(
        "gapless serve: database {}, reports in {}",
        cfg.db.display(),
        cfg.reports_dir().display()
    );
}

/// Ends at the first SIGINT (Ctrl-C), SIGTERM (systemd, Docker and Kubernetes stop a
/// service with it) or SIGHUP (its terminal closed): each stops the server the same way,
/// its runs ended and written, its daemons stopped. The handlers are installed when this is
/// called (inside a runtime), not when the future is first polled.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let sigs = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    );
    async move {
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = sigs else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
}

/// Each client and event stream is a socket: the soft limit on open files goes up to the
/// hard one, as servers do (the default soft limit is often 1024).
fn raise_fd_limit() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write a valid rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 && r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    }
}
