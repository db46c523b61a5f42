//! `gapless run`: its options, mapped to a [`RunSpec`], and what it prints.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use gapless_engine::report::{snapshot_text, summary_text, verdict_text, write_json_atomic};
use gapless_engine::request::{BackendName, RunRequest, StampName, TxMethodName, XdpModeName};
use gapless_engine::{RateControlKind, Run, RunHandle, RunReport, RunSpec, TxTarget};

use crate::{meter_cmd, outputs, say};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TxMethod {
    /// One sendmmsg system call per departure (its frames in one call).
    Sendmmsg,
    /// PACKET_TX_RING (TPACKET_V2): frames built in the shared ring, one kick per departure.
    Ring,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// AF_PACKET raw socket (any interface; --tx-method picks sendmmsg or the TX ring).
    Afpacket,
    /// AF_XDP socket with its own UMEM (zero-copy where the driver has it).
    Afxdp,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum XdpModeArg {
    /// Zero-copy where the driver has it, else copy.
    Auto,
    Copy,
    Zerocopy,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RateControlArg {
    /// The send loop busy-waits on the TSC for each departure (default).
    Software,
    /// The NIC's per-queue hardware limiter (tx_maxrate); gapless sends unpaced.
    Nic,
    /// Back to back at line rate, gaps filled with frames the device under test drops.
    Filler,
    /// Each frame carries its time (SO_TXTIME); an etf or fq qdisc (or the NIC) holds it.
    LaunchTime,
    /// The kernel's tbf (or htb) on the interface; gapless sends unpaced through it.
    Shaper,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TxStampsArg {
    /// The kernel's software stamp as the driver takes the frame.
    Kernel,
    /// The NIC's stamp as the frame leaves (needs a NIC with TX hardware timestamps).
    Hardware,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Pace {
    /// On for interfaces, off for pcap and null.
    Auto,
    On,
    Off,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The profile (TOML).
    profile: PathBuf,
    /// Send on this interface (AF_PACKET).
    #[arg(long, conflicts_with_all = ["out", "null"])]
    iface: Option<String>,
    /// Write a nanosecond pcap whose timestamps are the scheduled departure times.
    #[arg(long, conflicts_with = "null")]
    out: Option<PathBuf>,
    /// Build frames and drop them: measures the engine alone.
    #[arg(long)]
    null: bool,
    /// Enter this network namespace (from `ip netns`) before opening the interface.
    #[arg(long)]
    netns: Option<String>,
    /// Write the result file (JSON), atomically, also after Ctrl-C.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Stop every stream after this many seconds.
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Override the profile's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Software pacing.
    #[arg(long, value_enum, default_value_t = Pace::Auto)]
    pace: Pace,
    /// The socket that sends on --iface (default: the profile's [output] backend, else afpacket).
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// How AF_PACKET hands frames to the kernel.
    #[arg(long, value_enum, default_value_t = TxMethod::Sendmmsg)]
    tx_method: TxMethod,
    /// AF_XDP mode (--backend afxdp).
    #[arg(long, value_enum, default_value_t = XdpModeArg::Auto)]
    xdp_mode: XdpModeArg,
    /// AF_XDP queue (--backend afxdp).
    #[arg(long, default_value_t = 0)]
    xdp_queue: u32,
    /// How the frames are spaced (default: the profile's [output] rate_control, else software).
    #[arg(long, value_enum)]
    rate_control: Option<RateControlArg>,
    /// Read the kernel's (or the NIC's) TX timestamp of every frame and report the real
    /// departure error: stamp minus scheduled time (AF_PACKET).
    #[arg(long, value_enum)]
    tx_timestamps: Option<TxStampsArg>,
    /// Throughput mode: send up to N single-frame departures of a stream in one system call
    /// at the first one's time (1: precise mode, one departure per call). The result reports
    /// the bursts this makes.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Send loops on these cores, e.g. 0,1. Poisson streams are split over all of them at
    /// rate/k each; other streams stay whole, one loop each, round robin.
    #[arg(long, value_delimiter = ',', conflicts_with = "core")]
    cores: Option<Vec<usize>>,
    /// Split CBR streams over the --cores loops too, phase-shifted: loop j of k sends
    /// departures j, j + k, … of the whole schedule (as `split = "phase"` in the profile).
    /// The result reports how often a loop ran late enough to bunch with its neighbour.
    #[arg(long)]
    split_cbr: bool,
    /// CPU core for the send loop (default: the quietest allowed core, by a 100 ms
    /// pre-flight probe of each).
    #[arg(long)]
    core: Option<usize>,
    /// Run the send loops (and the meter) under SCHED_FIFO at this priority (1-99). The
    /// kernel's RT throttling still takes 5 % of each second (kernel.sched_rt_runtime_us).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
    rt_priority: Option<u32>,
    /// No live line.
    #[arg(long, short)]
    quiet: bool,
    /// Also meter on this interface while sending (a loopback, or the far side of a device
    /// under test); the result joins TX and RX per stream.
    #[arg(long)]
    rx: Option<String>,
    /// The network namespace of --rx.
    #[arg(long, requires = "rx")]
    rx_netns: Option<String>,
    /// Another port the same meter reads, `[NETNS/]IFACE` (repeat it): a stream that moves
    /// from --rx to it, as after a failover, stays one sequence, and the result counts what
    /// each port took.
    #[arg(long, requires = "rx", value_name = "[NETNS/]IFACE")]
    rx_also: Vec<String>,
    /// CPU core for the meter loop (default: the first one the send loop does not use).
    #[arg(long, requires = "rx")]
    rx_core: Option<usize>,
    /// Seconds to keep metering after the last frame left.
    #[arg(long, default_value_t = 0.5, requires = "rx")]
    rx_linger: f64,
    /// RX timestamps for --rx.
    #[arg(long, value_enum, default_value_t = meter_cmd::TsArg::Software)]
    timestamps: meter_cmd::TsArg,
    /// A link or route change during the run, at its time after the start; the result
    /// stamps it at the kernel's ACK. Repeat it: "1.2s link down NETNS/IFACE",
    /// "1.45s link up NETNS/IFACE", "2s route del NETNS PREFIX", "2.5s route add NETNS
    /// PREFIX via ADDRESS" (NETNS "-": the run's own). A link the run sends on that an
    /// event sets down does not end the run.
    #[arg(long = "event", value_name = "EVENT")]
    events: Vec<String>,
    #[command(flatten)]
    rx_path: meter_cmd::RxPathArgs,
    #[command(flatten)]
    meter: meter_cmd::MeterOpts,
}

impl RunArgs {
    /// The flags as the engine's request: the same mapping as Python's keywords.
    fn request(&self) -> Result<RunRequest> {
        Ok(RunRequest {
            iface: self.iface.clone(),
            out: self.out.clone(),
            null: self.null,
            netns: self.netns.clone(),
            duration: self.duration,
            seed: self.seed,
            pace: match self.pace {
                Pace::Auto => None,
                Pace::On => Some(true),
                Pace::Off => Some(false),
            },
            backend: self.backend.map(|b| match b {
                Backend::Afpacket => BackendName::Afpacket,
                Backend::Afxdp => BackendName::Afxdp,
            }),
            tx_method: match self.tx_method {
                TxMethod::Sendmmsg => TxMethodName::Sendmmsg,
                TxMethod::Ring => TxMethodName::Ring,
            },
            xdp_mode: match self.xdp_mode {
                XdpModeArg::Auto => XdpModeName::Auto,
                XdpModeArg::Copy => XdpModeName::Copy,
                XdpModeArg::Zerocopy => XdpModeName::Zerocopy,
            },
            xdp_queue: self.xdp_queue,
            rate_control: self.rate_control.map(|r| match r {
                RateControlArg::Software => RateControlKind::Software,
                RateControlArg::Nic => RateControlKind::Nic,
                RateControlArg::Filler => RateControlKind::Filler,
                RateControlArg::LaunchTime => RateControlKind::LaunchTime,
                RateControlArg::Shaper => RateControlKind::Shaper,
            }),
            tx_timestamps: self.tx_timestamps.map(|t| match t {
                TxStampsArg::Kernel => StampName::Kernel,
                TxStampsArg::Hardware => StampName::Hardware,
            }),
            batch: Some(self.batch),
            cores: self.cores.clone().unwrap_or_default(),
            core: self.core,
            split_cbr: self.split_cbr,
            rt_priority: self.rt_priority,
            rx: self.rx.clone(),
            rx_netns: self.rx_netns.clone(),
            rx_also: self.rx_also.clone(),
            rx_core: self.rx_core,
            rx_linger: Some(self.rx_linger),
            events: self.events.clone(),
            rx_path: self.rx_path.request(self.timestamps),
            meter: self.meter.request()?,
            unknown: Default::default(),
        })
    }

    /// The run asked for, with every file it reads and writes checked first.
    fn spec(&self) -> Result<RunSpec> {
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                bail!("--duration {d}: give a positive number of seconds");
            }
        }
        if !(self.rx_linger.is_finite() && self.rx_linger >= 0.0) {
            bail!("--rx-linger {}: give a number of seconds, 0 or more", self.rx_linger);
        }
        let src = crate::profile(&self.profile)?;
        let spec = self.request()?.spec(src).map_err(crate::explain)?;
        let pcap = match &spec.target {
            TxTarget::Pcap(p) => Some(p.as_path()),
            _ => None,
        };
        let mut inputs = vec![("profile", self.profile.as_path())];
        inputs.extend(self.meter.calibration.as_deref().map(|c| ("--calibration", c)));
        let outs: Vec<_> = [("--json", self.json.as_deref()), ("--out", pcap)]
            .into_iter()
            .filter_map(|(f, p)| p.map(|p| (f, p)))
            .collect();
        outputs::check(&inputs, &outs)?;
        if let Some(d) = &self.meter.report_dir {
            outputs::check_dir("--report-dir", d)?;
        }
        Ok(spec)
    }
}

pub fn cmd_run(a: RunArgs) -> Result<i32> {
    let spec = a.spec()?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_signals(&stop)?;
    let run: RunHandle = Run::start_with_stop(spec, stop).map_err(crate::explain)?;
    crate::live::live_lines(a.quiet, |d| run.wait_timeout(d), || snapshot_text(&run.snapshot()));
    let report = run.wait().map_err(crate::explain)?;
    print_run(&a, &report)
}

/// Writes the result file, prints the summary, and says what failed.
fn print_run(a: &RunArgs, report: &RunReport) -> Result<i32> {
    let result = &report.result;
    // A result that cannot be written is reported after the summary, which is printed anyway.
    let json_err = a.json.as_ref().and_then(|j| {
        write_json_atomic(j, result)
            .with_context(|| format!("writing the result file {}", j.display()))
            .err()
    });
    say(&summary_text(result));
    if let Some(r) = &result.rx {
        say(&gapless_engine::rx::summary_text(r));
        if let Some(d) = &a.meter.report_dir {
            let n = gapless_engine::report::plots::write_all(r, d)?;
            say(&format!("report: {n} files in {}\n", d.display()));
        }
    }
    if let (Some(j), None) = (&a.json, &json_err) {
        say(&format!("result: {}\n", j.display()));
    }
    if let Some(p) = &report.pcap {
        say(&format!("pcap: {}\n", p.display()));
    }
    say(&verdict_text(result));
    if let Some(e) = json_err {
        return Err(e);
    }
    if let Some(e) = report.failure() {
        return Err(anyhow!(crate::explain(e)));
    }
    Ok(if report.interrupted() { 130 } else { 0 })
}
