//! The `gapless` command line: clap arguments mapped to the engine's specs, and the engine's
//! reports printed. The work is in gapless-engine.
// The doc comments of the argument structs are clap's help text, where `[output]` names a
// profile table: they are not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links)]

mod clock_cmd;
mod experiment_cmd;
mod live;
mod meter_cmd;
mod otg_cmd;
mod outputs;
mod run_cmd;
mod serve_cmd;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use clap::{Parser, Subcommand};
use gapless_core::profile::plan::PlanError;
use gapless_engine::{EngineError, ProfileSource};
use gapless_io::testbed::dut::{parse_rate, Dut, DutKind};
use gapless_io::testbed::{Testbed, UpOutcome};
use gapless_io::IoError;

#[derive(Parser)]
#[command(
    name = "gapless",
    version = gapless_engine::VERSION,
    about = "Precise, scriptable packet generator and traffic meter"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send a profile's streams to an interface, a pcap file or nowhere (null).
    Run(run_cmd::RunArgs),
    /// Validate a profile and print what it will send, without sending.
    Check {
        profile: PathBuf,
        /// Link speed to check rates against, bit/s.
        #[arg(long)]
        link_speed_bps: Option<f64>,
    },
    /// Meter what arrives on an interface: loss, reordering, latency, inter-arrival precision.
    Measure(meter_cmd::MeasureArgs),
    /// Meter a capture (pcap/pcapng) or a CSV of timestamps, offline.
    Analyze(meter_cmd::AnalyzeArgs),
    /// Measure this setup's own latency offset and precision floor over a direct link.
    Calibrate(meter_cmd::CalibrateArgs),
    /// Redraw the CSV exports and plots from a result file.
    Report {
        /// A result file from `run --rx`, `measure` or `analyze`.
        result: PathBuf,
        /// Directory for the CSV files and the PNG/SVG plots.
        #[arg(long, default_value = "report")]
        out: PathBuf,
    },
    /// Run an experiment file: RFC 2544, a sweep, or repetitions, trial by trial.
    Experiment(experiment_cmd::ExperimentArgs),
    /// RFC 2544 against a device under test: throughput, latency, frame loss, back-to-back.
    Rfc2544(experiment_cmd::Rfc2544Args),
    /// Vary rate, burst, frame size or pattern, with repetitions: latency and loss per point.
    Sweep(experiment_cmd::SweepArgs),
    /// The web dashboard (saved profiles, runs with live charts, history, calibrations) and
    /// the Open Traffic Generator API for snappi. Both listen on loopback by default; any
    /// other address needs --token-file.
    Serve(serve_cmd::ServeArgs),
    /// Another host's clock against this one's, through its `gapless serve`: offset ± bound
    /// from 4-timestamp exchanges, and both clocks' state (kernel, linuxptp, chrony).
    Clock(clock_cmd::ClockArgs),
    /// The OTG front door without a server: the frames a config's flows would send.
    Otg {
        #[command(subcommand)]
        action: otg_cmd::OtgCmd,
    },
    /// The veth testbed: namespaces NAME-tx and NAME-rx joined by NAME-tx0 <-> NAME-rx0.
    Testbed {
        #[command(subcommand)]
        action: TestbedCmd,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DutArg {
    Bridge,
    Router,
    /// A router with a primary path to NAME-rx0 and a backup path to NAME-rx1.
    RouterFailover,
}

#[derive(Subcommand)]
enum TestbedCmd {
    /// Create the testbed (idempotent).
    Up {
        #[arg(long, default_value = "gl")]
        name: String,
        /// TX and RX queues on each end (1 to 64): one per AF_XDP send loop with --cores.
        /// An AF_XDP meter reads one queue (--rx-queue), so keep 1 when metering with it.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
        /// Put a reference device under test between the ends, in namespace NAME-dut: a Linux
        /// bridge or an IPv4 router.
        #[arg(long, value_enum)]
        dut: Option<DutArg>,
        /// The device's egress capacity in bit/s as its qdisc counts (frames without FCS),
        /// e.g. 24mbit (50 kpps of 64-byte frames).
        #[arg(long, requires = "dut")]
        dut_rate: Option<String>,
        /// The device's queue in frames, behind the rate.
        #[arg(long, default_value_t = 256, requires = "dut_rate", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        dut_queue: u32,
        /// The device's shaper: tbf or htb.
        #[arg(long, default_value = "tbf", value_parser = ["tbf", "htb"], requires = "dut_rate")]
        dut_qdisc: String,
        /// Ends around the device (2 to 16): end k ≥ 2 is netns NAME-pK, iface NAME-pK,
        /// 198.18.0.(K+1). Every port's egress is shaped.
        #[arg(long, default_value_t = 2, requires = "dut", value_parser = clap::value_parser!(u32).range(2..=16))]
        ports: u32,
        /// The bridge's bound on learned MAC addresses (IFLA_BR_FDB_MAX_LEARNED, Linux 6.8+):
        /// gives RFC 2889's address caching test a finite answer.
        #[arg(long, requires = "dut", value_parser = clap::value_parser!(u32).range(1..))]
        fdb_max_learned: Option<u32>,
    },
    /// Remove the testbed (idempotent).
    Down {
        #[arg(long, default_value = "gl")]
        name: String,
    },
}

/// Reads and parses a profile file.
pub(crate) fn profile(path: &Path) -> Result<ProfileSource> {
    ProfileSource::from_file(path).map_err(explain)
}

/// The engine's error with this command line's hints: which flag to change.
pub(crate) fn explain(e: EngineError) -> anyhow::Error {
    let hint = match &e {
        EngineError::Batch(b) => return anyhow!("--batch {b}: give 1 (precise mode) to 256"),
        EngineError::RxWithoutInterface => {
            return anyhow!("--rx meters what an interface sends: give --iface too (not --out or --null)")
        }
        EngineError::PacedPcap => return anyhow!("--pace on with --out: a pcap file is written as fast as possible and stamped with the scheduled times. Fix: drop --pace"),
        EngineError::LoopsWithPcap => return anyhow!("--cores with --out: a pcap file is written by one loop. Fix: drop --cores, or send on --iface"),
        EngineError::NoTarget => return anyhow!("no output: give --iface IF (send on an interface), --out FILE.pcap, or --null; or set [output] in the profile"),
        EngineError::UnboundedPcap => return anyhow!("a pcap output needs every stream to end. Fix: set count or duration_s in each [stream.timing], duration_s at the top, or pass --duration"),
        EngineError::Plan(PlanError::DuplicateCore) => return anyhow!("--cores lists a core twice: two send loops on one core would stall each other. Fix: list each core once"),
        EngineError::Plan(PlanError::StreamCoreNotLooped { core, .. }) => {
            format!("Fix: list core {core} in --cores (or drop --core), or change the stream's core")
        }
        EngineError::Plan(PlanError::PhaseSplitNeedsFixedGap { .. }) => {
            return anyhow!("--split-cbr: {e}. Fix: give it rate_pps, or split = \"none\" in the profile")
        }
        EngineError::HardwareStampsNeedAfPacket => {
            return anyhow!("--timestamps hardware needs --rx-backend afpacket: {e}")
        }
        EngineError::Unreadable {
            what: "calibration",
            path,
            ..
        } => format!("(gapless: `gapless calibrate --tx IF --rx IF --out {path}`)"),
        EngineError::Io(io) => match io_hint(io) {
            Some(h) => format!("(gapless: {h})"),
            None => return anyhow!(e),
        },
        _ => return anyhow!(e),
    };
    anyhow!("{e} {hint}")
}

/// The flags that carry out an IO error's fix.
fn io_hint(e: &IoError) -> Option<&'static str> {
    Some(match e {
        IoError::NoSuchInterface(_) => "--netns gl-tx --iface gl-tx0 for the testbed",
        IoError::NoHwTimestamps { .. } => "--timestamps software, the default",
        IoError::XdpUnsupported(_) => "--backend afpacket; --rx-backend afpacket for a meter",
        IoError::XdpZeroCopyUnsupported { .. } => "--xdp-mode copy, or --xdp-mode auto",
        IoError::XdpQueueBusy { .. } => "--xdp-queue for a sender, --rx-queue for a meter",
        IoError::XdpProgramAttached { .. } | IoError::Xdp { .. } => "--rx-backend afpacket",
        IoError::XdpFrameTooLarge { .. } => "--backend afpacket",
        IoError::XdpNoNative { .. } => "--xdp-attach generic, or --xdp-attach auto",
        _ => return None,
    })
}

/// Ctrl-C, SIGTERM and SIGHUP (a dropped ssh session) raise `stop`: the run ends after the
/// current departure and still writes its result.
pub(crate) fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(())
}

/// Writes to stdout; a closed pipe (`gapless run ... | head`) ends the output quietly.
pub(crate) fn say(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if o.write_all(text.as_bytes()).and_then(|_| o.flush()).is_err() {
        // The reader went away: nothing more to say to it.
    }
}

fn cmd_check(path: &Path, link: Option<f64>) -> Result<i32> {
    let p = profile(path)?.compile(link).map_err(explain)?;
    say(&gapless_engine::report::profile_text(&path.display().to_string(), &p));
    Ok(0)
}

fn cmd_testbed(action: TestbedCmd) -> Result<i32> {
    match action {
        TestbedCmd::Up {
            name,
            queues,
            dut,
            dut_rate,
            dut_queue,
            dut_qdisc,
            ports,
            fdb_max_learned,
        } => {
            let t = Testbed::new(&name).map_err(|e| anyhow!("{e}"))?;
            let outcome = match dut {
                None => t.up_with_queues(queues)?,
                Some(kind) => {
                    if queues != 1 {
                        return Err(anyhow!(
                            "--queues with --dut: the device's ports have one queue each. Fix: drop --queues"
                        ));
                    }
                    let rate_bps = dut_rate
                        .as_deref()
                        .map(parse_rate)
                        .transpose()
                        .map_err(|e| anyhow!("--dut-rate {e}"))?;
                    t.up_with_dut(&Dut {
                        kind: match kind {
                            DutArg::Bridge => DutKind::Bridge,
                            DutArg::Router => DutKind::Router,
                            DutArg::RouterFailover => DutKind::RouterFailover,
                        },
                        rate_bps,
                        queue: dut_queue,
                        qdisc: dut_qdisc,
                        ports: ports as usize,
                        fdb_max_learned,
                    })?
                }
            };
            match outcome {
                UpOutcome::Created => println!("testbed {name} is up"),
                UpOutcome::AlreadyUp => println!("testbed {name} was already up"),
            }
            say(&t.ends_text());
            if let Some(d) = t.dut() {
                say(&dut_text(&t, &d));
            }
        }
        TestbedCmd::Down { name } => {
            let t = Testbed::new(&name).map_err(|e| anyhow!("{e}"))?;
            if t.down()? {
                println!("testbed {name} removed");
            } else {
                println!("testbed {name} was not up");
            }
        }
    }
    Ok(0)
}

/// The device in the middle, and what its rate carries per frame size.
fn dut_text(t: &Testbed, d: &Dut) -> String {
    let (d0, d1) = t.dut_ports();
    let kind = match d.kind {
        DutKind::Bridge => "bridge",
        DutKind::Router => "IPv4 router",
        DutKind::RouterFailover => "IPv4 router, primary and backup paths",
    };
    let mut s = format!(
        "  device:   netns {} ({kind}) ports {d0} (from the sender) and {d1} (to the receiver), forwarding on CPU {}: keep the sender off it (--core)\n",
        t.dut_ns(),
        gapless_io::testbed::dut::dut_cpu()
    );
    if let Some(m) = d.fdb_max_learned {
        s.push_str(&format!(
            "  fdb:      at most {m} learned MAC addresses (fdb_max_learned)\n"
        ));
    }
    for k in 2..d.ports {
        let e = t.end(k);
        s.push_str(&format!(
            "  end {k}:    netns {} iface {} ({}, {}) on {}\n",
            e.netns, e.iface, e.ip4, e.mac, e.dut_port
        ));
    }
    if d.kind == DutKind::RouterFailover {
        let (d2, rx1) = t.backup_ports();
        s.push_str(&format!(
            "  backup:   {d2} to netns {} iface {rx1} ({}, metric {}); the primary through {d1} (metric 0). Meter both: --rx {} --rx-also {}/{rx1}\n",
            t.rx_ns(),
            gapless_io::testbed::dut::RX_BACKUP_MAC,
            gapless_io::testbed::dut::BACKUP_METRIC,
            t.rx_if(),
            t.rx_ns()
        ));
    }
    match d.rate_bps {
        Some(r) => {
            s.push_str(&format!(
                "  capacity: {} {:.3} Mbit/s as it counts (frames without FCS), queue {} frames, on the egress of each of its {} ports (each direction meets it); in frames/s:\n           ",
                d.qdisc,
                r as f64 / 1e6,
                d.queue,
                d.ports
            ));
            for size in gapless_core::experiment::spec::RFC2544_SIZES {
                s.push_str(&format!(" {size} B {:.0}", gapless_io::testbed::dut::pps_at(r, size)));
            }
            s.push('\n');
        }
        None => s.push_str("  capacity: not shaped (as fast as this machine forwards)\n"),
    }
    s
}

fn cmd_report(path: &Path, out: &Path) -> Result<i32> {
    let report = gapless_engine::report::read_meter_report(path).map_err(explain)?;
    say(&gapless_engine::rx::summary_text(&report));
    let n = gapless_engine::report::plots::write_all(&report, out)?;
    say(&format!("report: {n} files in {}\n", out.display()));
    Ok(0)
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => run_cmd::cmd_run(a),
        Cmd::Check {
            profile,
            link_speed_bps,
        } => cmd_check(&profile, link_speed_bps),
        Cmd::Serve(a) => serve_cmd::cmd_serve(a),
        Cmd::Clock(a) => clock_cmd::cmd_clock(a),
        Cmd::Testbed { action } => cmd_testbed(action),
        Cmd::Otg { action } => otg_cmd::cmd_otg(action),
        Cmd::Measure(a) => meter_cmd::cmd_measure(a),
        Cmd::Analyze(a) => meter_cmd::cmd_analyze(a),
        Cmd::Calibrate(a) => meter_cmd::cmd_calibrate(a),
        Cmd::Report { result, out } => cmd_report(&result, &out),
        Cmd::Experiment(a) => experiment_cmd::cmd_experiment(a),
        Cmd::Rfc2544(a) => experiment_cmd::cmd_rfc2544(a),
        Cmd::Sweep(a) => experiment_cmd::cmd_sweep(a),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
