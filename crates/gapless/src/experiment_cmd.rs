//! `gapless experiment FILE`, and the `rfc2544` and `sweep` shortcuts that build the same
//! experiment from flags.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use gapless_core::experiment::spec::{Axis, Param, Port, ProfileRef, Rfc2544Spec, SweepSpec, TrialSpec};
use gapless_core::experiment::{ExperimentSpec, Method, Rfc2544Test};
use gapless_core::ProfileSpec;
use gapless_engine::experiment::ExperimentFile;
use gapless_engine::report::experiment::{summary_text, trial_line, write_all};
use gapless_engine::Experiment;

use crate::{explain, say, stop_on_signals};

#[derive(clap::Args)]
pub struct ExperimentArgs {
    /// An experiment file (TOML): see examples/rfc2544_dut.toml.
    pub file: PathBuf,
    /// The agents' token (a file holding it): needed when the experiment's ports are on
    /// agents (`agent = "HOST:PORT"`), other hosts' `gapless serve`s.
    #[arg(long)]
    pub agent_token_file: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutArgs,
}

/// Where the result goes.
#[derive(clap::Args)]
pub struct OutArgs {
    /// Write the result (every trial, the figures, the machine and device) as JSON, atomically.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the trial trace (CSV) and the plots (PNG and SVG) into this directory.
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// No line per trial.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The ports and trial settings both shortcuts take.
#[derive(clap::Args)]
pub struct Common {
    /// The profile whose streams are sent (rate and size set per trial); default one UDP
    /// stream on the testbed's addresses.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// The testbed whose ends to use (NAME-tx0 in NAME-tx, NAME-rx0 in NAME-rx).
    #[arg(long, default_value = "gl")]
    pub testbed: String,
    /// Seconds metered per trial.
    #[arg(long, default_value_t = 2.0)]
    pub duration: f64,
    /// Seconds sent before each trial's measurement and not metered.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Idle seconds between trials.
    #[arg(long, default_value_t = 0.5)]
    pub settle: f64,
    /// Trials per point, each with its own seed.
    #[arg(long, default_value_t = 1)]
    pub repetitions: u32,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Times a trial whose sender fell behind is run again.
    #[arg(long, default_value_t = 3)]
    pub max_retries: u32,
    /// A calibration file whose latency offset is subtracted.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutArgs,
}

#[derive(clap::Args)]
pub struct Rfc2544Args {
    #[command(flatten)]
    pub common: Common,
    /// Frame sizes in bytes (with FCS).
    #[arg(long, value_delimiter = ',', default_values_t = gapless_core::experiment::spec::RFC2544_SIZES)]
    pub sizes: Vec<u32>,
    /// Tests: throughput, latency, frame-loss, back-to-back.
    #[arg(long, value_delimiter = ',', default_value = "throughput")]
    pub tests: Vec<String>,
    /// Highest rate tried, frames/s: the search's start and the "line rate".
    #[arg(long, required_unless_present = "max_rate_bps")]
    pub max_rate: Option<f64>,
    /// Or the line rate in bit/s on the wire (with preamble and gap): each size its own
    /// maximum in frames/s.
    #[arg(long, conflicts_with = "max_rate")]
    pub max_rate_bps: Option<f64>,
    /// Lowest rate tried, frames/s (default 1 % of the maximum).
    #[arg(long)]
    pub min_rate: Option<f64>,
    /// Loss tolerances in percent; one throughput each.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub tolerance: Vec<f64>,
    /// Search resolution, percent of the rate (default 0.5).
    #[arg(long)]
    pub resolution_pct: Option<f64>,
    /// Search resolution, frames/s.
    #[arg(long, conflicts_with = "resolution_pct")]
    pub resolution_pps: Option<f64>,
    #[arg(long, default_value_t = 16)]
    pub max_iterations: u32,
    /// Seconds of the confirming trial at the rate found (none by default).
    #[arg(long)]
    pub final_duration: Option<f64>,
    /// Back-to-back: the longest burst tried.
    #[arg(long, default_value_t = 10_000)]
    pub max_burst: u32,
}

#[derive(clap::Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub common: Common,
    /// What to vary: rate, burst, size or pattern.
    #[arg(long, value_parser = ["rate", "burst", "size", "pattern"])]
    pub param: String,
    /// Its values (cbr/poisson for pattern).
    #[arg(long, value_delimiter = ',', required = true)]
    pub values: Vec<String>,
    /// One curve per value of another parameter: PARAM=V1,V2,... (e.g. burst=1,4,16,64).
    #[arg(long)]
    pub curves: Option<String>,
}

pub fn cmd_experiment(a: ExperimentArgs) -> Result<i32> {
    let x = Experiment::from_file(&a.file).map_err(explain)?;
    let token = match (x.spec.on_agents(), &a.agent_token_file) {
        (true, Some(f)) => Some(gapless_serve::read_token(f).map_err(|e| anyhow!("--agent-token-file: {e}"))?),
        (true, None) => bail!(
            "{}: its ports are on agents: give --agent-token-file F, F holding the agents' token",
            a.file.display()
        ),
        (false, Some(_)) => bail!(
            "--agent-token-file: {}'s ports are on this host; drop the flag",
            a.file.display()
        ),
        (false, None) => None,
    };
    run(&x, &a.out, token.as_deref())
}

pub fn cmd_rfc2544(a: Rfc2544Args) -> Result<i32> {
    let tests = a
        .tests
        .iter()
        .map(|t| {
            toml::Value::String(t.clone())
                .try_into::<Rfc2544Test>()
                .map_err(|_| anyhow!("--tests {t}: give throughput, latency, frame-loss or back-to-back"))
        })
        .collect::<Result<Vec<_>>>()?;
    let spec = ExperimentSpec {
        rfc2544: Some(Rfc2544Spec {
            tests,
            frame_sizes: a.sizes,
            loss_tolerance_pct: a.tolerance,
            min_rate_pps: a.min_rate,
            max_rate_pps: a.max_rate,
            max_rate_bps: a.max_rate_bps,
            resolution_pps: a.resolution_pps,
            resolution_pct: a.resolution_pct,
            max_iterations: a.max_iterations,
            max_burst: a.max_burst,
        }),
        ..base(&a.common, Method::Rfc2544, a.final_duration)?
    };
    shortcut(spec, &a.common)
}

pub fn cmd_sweep(a: SweepArgs) -> Result<i32> {
    let axis = |param: &str, values: &[String]| -> Result<Axis> {
        let p: Param = toml::Value::String(param.into())
            .try_into()
            .map_err(|_| anyhow!("{param}: give rate, burst, size or pattern"))?;
        let vals = values
            .iter()
            .map(|v| match v.trim().parse::<f64>() {
                Ok(n) => toml::Value::Float(n),
                Err(_) => toml::Value::String(v.trim().into()),
            })
            .collect();
        Ok(Axis {
            parameter: p,
            values: Some(vals),
            from: None,
            to: None,
            steps: None,
        })
    };
    let curves = match &a.curves {
        Some(c) => {
            let (p, v) = c
                .split_once('=')
                .ok_or_else(|| anyhow!("--curves {c}: give PARAM=V1,V2 (e.g. burst=1,4,16,64)"))?;
            Some(axis(p, &v.split(',').map(String::from).collect::<Vec<_>>())?)
        }
        None => None,
    };
    let spec = ExperimentSpec {
        sweep: Some(SweepSpec {
            x: axis(&a.param, &a.values)?,
            curves,
        }),
        ..base(&a.common, Method::Sweep, None)?
    };
    shortcut(spec, &a.common)
}

/// The experiment the shortcut flags describe.
fn base(c: &Common, method: Method, final_duration_s: Option<f64>) -> Result<ExperimentSpec> {
    let t = gapless_io::testbed::Testbed::new(&c.testbed).map_err(|e| anyhow!("--testbed {e}"))?;
    let profile = match &c.profile {
        Some(p) => ProfileRef::Path(std::path::absolute(p)?.display().to_string()),
        None => ProfileRef::Inline(Box::new(ProfileSpec::from_toml(
            "[[stream]]\nname = \"rfc2544\"\nsize = 64\n[stream.timing]\nrate_pps = 1000\n",
            "built-in profile",
        )?)),
    };
    Ok(ExperimentSpec {
        name: Some(format!("{method:?}").to_lowercase()),
        method,
        profile,
        tx: Some(Port::new(t.tx_if(), Some(t.tx_ns()))),
        rx: Some(Port::new(t.rx_if(), Some(t.rx_ns()))),
        ports: Vec::new(),
        pairs: None,
        pair: Vec::new(),
        dut: None,
        trial: TrialSpec {
            duration_s: c.duration,
            final_duration_s,
            warmup_s: c.warmup,
            settle_s: c.settle,
            repetitions: c.repetitions,
            confidence: c.confidence,
            max_retries: c.max_retries,
            ..TrialSpec::default()
        },
        calibration: c
            .calibration
            .as_ref()
            .map(|p| std::path::absolute(p).map(|p| p.display().to_string()))
            .transpose()?,
        rfc2544: None,
        sweep: None,
        mlrsearch: None,
        rfc2889: None,
    })
}

fn shortcut(spec: ExperimentSpec, c: &Common) -> Result<i32> {
    let label = format!("gapless {}", spec.name.clone().unwrap_or_default());
    let x = Experiment::new(spec, Path::new("."), label).map_err(explain)?;
    run(&x, &c.out, None)
}

/// Runs the experiment with a line per trial, then writes and prints the report.
fn run(x: &Experiment, out: &OutArgs, agent_token: Option<&str>) -> Result<i32> {
    if let Some(j) = &out.json {
        gapless_io::files::atomic::probe_writable(j).map_err(|e| anyhow!("--json {}: {e}", j.display()))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(&stop)?;
    let quiet = out.quiet;
    let mut line = |rec: &gapless_core::experiment::TrialRecord| {
        if !quiet {
            eprintln!("{}", trial_line(rec));
        }
    };
    let file = match agent_token {
        Some(t) => {
            let agents = gapless_serve::cluster::experiment::connect(x, t).map_err(|e| anyhow!("{e}"))?;
            gapless_serve::cluster::experiment::run(x, agents, stop, &mut line)
        }
        None => x.run(stop, &mut line),
    };
    deliver(&file, out)?;
    Ok(if file.result.stopped {
        if file.result.error.is_some() {
            2
        } else {
            130
        }
    } else {
        0
    })
}

fn deliver(f: &ExperimentFile, out: &OutArgs) -> Result<()> {
    let mut err = None;
    if let Some(j) = &out.json {
        if let Err(e) = gapless_engine::report::write_json_atomic(j, f) {
            err = Some(anyhow!("--json {}: {e}", j.display()));
        }
    }
    say(&summary_text(&f.result, f.dut_text().as_deref()));
    if let Some(d) = &out.report_dir {
        let n = write_all(&f.result, d)?;
        say(&format!("report: {n} files in {}\n", d.display()));
    }
    if let Some(j) = out.json.as_ref().filter(|_| err.is_none()) {
        say(&format!("result: {}\n", j.display()));
    }
    err.map_or(Ok(()), Err)
}
