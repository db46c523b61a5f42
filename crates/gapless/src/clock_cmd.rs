//! `gapless clock URL`: this host's clock against another gapless's, through its agent API
//! (`gapless_serve::agent`): N 4-timestamp exchanges, the one with the shortest round trip
//! giving the offset ± its bound (`gapless_core::timing::clocks::estimate`), and both
//! clocks' state, with what makes a latency across the two untrustworthy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gapless_core::timing::clocks::{estimate, exchange, ClockState, Exchange, Offset};
use gapless_io::kernel::clock;
use serde_json::{json, Value};

/// Measures another host's clock against this one's: its offset ± a bound from 4-timestamp
/// exchanges with its `gapless serve` (the OTG listener's agent API), and both clocks' state
/// (kernel, linuxptp, chrony).
#[derive(clap::Args, Debug)]
pub struct ClockArgs {
    /// The other gapless's OTG listener: https://HOST:PORT, or http://HOST:PORT for one
    /// started with --otg-plain.
    url: String,
    /// A file whose first line is the other server's token (needed off loopback).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The other server's certificate (PEM, e.g. its NAME-otg-cert.pem), trusted alone: the
    /// connection is refused unless the server shows exactly this certificate.
    #[arg(long, value_name = "PEM")]
    agent_cert: Option<PathBuf>,
    /// Exchanges to make (the shortest round trip is used).
    #[arg(short = 'n', long, default_value_t = 32)]
    exchanges: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// An HTTP client for the other server: its certificate pinned when given.
fn client(a: &ClockArgs) -> Result<ureq::Agent> {
    let mut cfg = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false);
    if let Some(p) = &a.agent_cert {
        let pem = std::fs::read(p).with_context(|| format!("--agent-cert {}", p.display()))?;
        let certs: Vec<_> = ureq::tls::parse_pem(&pem)
            .filter_map(|i| match i {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            bail!(
                "--agent-cert {}: no certificate in it. Fix: give the other server's NAME-otg-cert.pem",
                p.display()
            );
        }
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::Specific(Arc::new(certs)))
            .build();
        cfg = cfg.tls_config(tls);
    }
    Ok(cfg.build().into())
}

/// One call's JSON reply, or the server's error (with its fix) as the error.
fn call(agent: &ureq::Agent, a: &ClockArgs, token: Option<&str>, path: &str, post: bool) -> Result<Value> {
    let url = format!("{}{path}", a.url.trim_end_matches('/'));
    let auth = token.map(|t| format!("Bearer {t}"));
    let resp = if post {
        let mut r = agent.post(&url).content_type("application/json");
        if let Some(h) = &auth {
            r = r.header("Authorization", h);
        }
        r.send("{}")
    } else {
        let mut r = agent.get(&url);
        if let Some(h) = &auth {
            r = r.header("Authorization", h);
        }
        r.call()
    };
    let mut resp =
        resp.map_err(|e| anyhow!("{url}: {e}. Fix: check the address, that it runs gapless serve, and --agent-cert"))?;
    let status = resp.status();
    let text = resp
        .body_mut()
        .read_to_string()
        .with_context(|| format!("{url}: the reply"))?;
    if !status.is_success() {
        let fix = match status.as_u16() {
            401 => "Fix: give the other server's token with --token-file",
            404 => "Fix: the other server is not a gapless with the agent API (gapless serve, version 1)",
            _ => "Fix: see the other server's message",
        };
        bail!("{url}: {status}: {text}. {fix}");
    }
    serde_json::from_str(&text).with_context(|| format!("{url}: not a gapless agent's reply: {text}"))
}

/// `n` exchanges with the other server's clock.
fn exchanges(agent: &ureq::Agent, a: &ClockArgs, token: Option<&str>) -> Result<Vec<Exchange>> {
    exchange(a.exchanges, clock::realtime_ns, || {
        let v = call(agent, a, token, "/gapless/agent/v1/time", true)?;
        let t = |k: &str| v[k].as_i64().ok_or_else(|| anyhow!("the time reply has no {k}: {v}"));
        Ok((t("t2")?, t("t3")?))
    })
}

pub fn cmd_clock(a: ClockArgs) -> Result<i32> {
    if a.exchanges == 0 {
        bail!("-n 0: make at least one exchange");
    }
    let token = a.token_file.as_deref().map(gapless_serve::read_token).transpose()?;
    let agent = client(&a)?;
    let theirs = call(&agent, &a, token.as_deref(), "/gapless/agent/v1/clock", false)?;
    let their_state: ClockState =
        serde_json::from_value(theirs["clock"].clone()).map_err(|e| anyhow!("the clock reply: {e}: {theirs}"))?;
    let xs = exchanges(&agent, &a, token.as_deref())?;
    let offset =
        estimate(&xs).ok_or_else(|| anyhow!("no usable exchange (a clock stepped during each). Fix: run it again"))?;
    let ours = clock::state();
    let doubts: Vec<String> = [
        ours.untrusted().map(|w| format!("this host: {w}")),
        their_state.untrusted().map(|w| format!("{}: {w}", a.url)),
    ]
    .into_iter()
    .flatten()
    .collect();
    if a.json {
        let out = json!({ "offset": offset, "local": ours, "remote": their_state, "untrusted": doubts, "test_clock_offset_ns": theirs["test_clock_offset_ns"] });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&a.url, &offset, &ours, &their_state, &doubts);
    }
    Ok(0)
}

fn print_text(url: &str, o: &Offset, ours: &ClockState, theirs: &ClockState, doubts: &[String]) {
    println!(
        "{url}: clock offset {:+} ns ± {} ns (its time minus ours; shortest round trip {} ns of {} exchanges)",
        o.offset_ns, o.bound_ns, o.rtt_ns, o.exchanges
    );
    for (who, s) in [("this host", ours), (url, theirs)] {
        let sync = if s.unsynchronised {
            "NOT synchronised"
        } else {
            "synchronised"
        };
        let ptp = s
            .ptp
            .as_ref()
            .map_or(String::new(), |p| format!(", linuxptp {}", p.port_state));
        let chrony = s.chrony.as_ref().map_or(String::new(), |c| {
            format!(", chrony {} stratum {}", c.reference, c.stratum)
        });
        println!("{who}: kernel {sync} (maxerror {} ns){ptp}{chrony}", s.maxerror_ns);
    }
    for d in doubts {
        println!("untrusted across hosts: {d}");
    }
}
