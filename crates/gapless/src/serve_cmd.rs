//! `gapless serve`: the dashboard and the OTG API over the engine (crate gapless-serve).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;

/// The web dashboard (saved profiles, runs with live charts, history, calibrations) and the
/// Open Traffic Generator API for snappi. Both listen on loopback by default; any other
/// address needs --token-file. Requests from other web pages are refused (Host, Origin and
/// content type are checked).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The dashboard's address (the page at /, its JSON API under /api).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The OTG API's address (plain HTTP; paths at the root as snappi expects).
    #[arg(long, default_value = "127.0.0.1:8443")]
    otg_listen: SocketAddr,
    /// Serve no OTG API.
    #[arg(long)]
    no_otg: bool,
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
}

pub fn cmd_serve(a: ServeArgs) -> Result<i32> {
    if !(a.client_rate.is_finite() && a.client_rate >= 1.0) || a.max_event_streams == 0 {
        anyhow::bail!(
            "--client-rate {} --max-event-streams {}: give a rate of at least 1 request a second and at least 1 stream",
            a.client_rate,
            a.max_event_streams
        );
    }
    // serve() checks the listen rule before it opens anything.
    let token = a.token_file.as_deref().map(gapless_serve::read_token).transpose()?;
    let otg_listen = (!a.no_otg).then_some(a.otg_listen);
    let cfg = gapless_serve::ServeConfig {
        listen: a.listen,
        db: a.db,
        token,
        otg_listen,
        allow_hosts: a.allow_host,
        limits: gapless_serve::limits::LimitsConfig {
            client_rate: a.client_rate,
            event_streams: a.max_event_streams,
        },
    };
    raise_fd_limit();
    let rt = tokio::runtime::Runtime::new()?;
    eprintln!("gapless serve: dashboard http://{}/ (Ctrl-C stops)", a.listen);
    if let Some(o) = otg_listen {
        eprintln!("gapless serve: OTG API http://{o} (snappi: snappi.api(location=\"http://{o}\"))");
    }
    eprintln!(
        "gapless serve: database {}, reports in {}",
        cfg.db.display(),
        cfg.reports_dir().display()
    );
    rt.block_on(gapless_serve::serve(cfg, async {
        let _ = tokio::signal::ctrl_c().await;
    }))?;
    Ok(0)
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
