//! The `gapless` command line.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use gapless_core::config::Profile;
use gapless_core::dist::FileLoader;
use gapless_core::schedule::Pattern;
use gapless_core::{CompileCtx, ProfileSpec};
use gapless_engine::live::Live;
use gapless_engine::report::{build_result, summary_text, write_json_atomic, RunMeta};
use gapless_engine::RunOptions;
use gapless_io::afpacket::{AfPacketRingTx, AfPacketTx};
use gapless_io::nic::{enter_netns, iface_info, IfaceInfo};
use gapless_io::null::NullTx;
use gapless_io::pcap::PcapTx;
use gapless_io::testbed::{Testbed, UpOutcome};
use gapless_io::{IoError, TxBackend};

#[derive(Parser)]
#[command(
    name = "gapless",
    version,
    about = "Precise, scriptable packet generator and traffic meter"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send a profile's streams to an interface, a pcap file or nowhere (null).
    Run(RunArgs),
    /// Validate a profile and print what it will send, without sending.
    Check {
        profile: PathBuf,
        /// Link speed to check rates against, bit/s.
        #[arg(long)]
        link_speed_bps: Option<f64>,
    },
    /// The veth testbed: namespaces NAME-tx and NAME-rx joined by NAME-tx0 <-> NAME-rx0.
    Testbed {
        #[command(subcommand)]
        action: TestbedCmd,
    },
}

#[derive(Subcommand)]
enum TestbedCmd {
    /// Create the testbed (idempotent).
    Up {
        #[arg(long, default_value = "gl")]
        name: String,
    },
    /// Remove the testbed (idempotent).
    Down {
        #[arg(long, default_value = "gl")]
        name: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TxMethod {
    /// One sendmmsg system call per departure (its frames in one call).
    Sendmmsg,
    /// PACKET_TX_RING (TPACKET_V2): frames built in the shared ring, one kick per departure.
    Ring,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Pace {
    /// On for interfaces, off for pcap and null.
    Auto,
    On,
    Off,
}

#[derive(clap::Args)]
struct RunArgs {
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
    /// How AF_PACKET hands frames to the kernel.
    #[arg(long, value_enum, default_value_t = TxMethod::Sendmmsg)]
    tx_method: TxMethod,
    /// CPU core for the send loop (default: the last one allowed).
    #[arg(long)]
    core: Option<usize>,
    /// No live line.
    #[arg(long, short)]
    quiet: bool,
}

/// Reads files named in a profile relative to the profile's directory.
struct DirLoader(PathBuf);
impl FileLoader for DirLoader {
    fn load(&self, path: &str) -> std::result::Result<String, String> {
        let p = self.0.join(path);
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    }
}

fn load_spec(path: &Path) -> Result<ProfileSpec> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "cannot read profile {}: {e}. Fix: check the path (examples/ has profiles to start from)",
            path.display()
        )
    })?;
    Ok(ProfileSpec::from_toml(&text, &path.display().to_string())?)
}

fn compile(spec: &ProfileSpec, path: &Path, link: Option<f64>) -> Result<Profile> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(spec.compile(&CompileCtx {
        link_speed_bps: link,
        files: &DirLoader(dir),
    })?)
}

/// Frames one departure may carry: the backend's batch size.
fn max_departure_frames(p: &Profile) -> usize {
    p.streams
        .iter()
        .map(|s| match &s.pattern {
            Pattern::OnOff {
                size,
                peak_gap_ns: None,
                ..
            } => size.max() as usize,
            Pattern::OnOff { .. } => 1,
            _ => s.burst as usize,
        })
        .max()
        .unwrap_or(1)
        .clamp(1, 256)
}

fn check_mtu(p: &Profile, info: &IfaceInfo) -> Result<(), IoError> {
    for s in &p.streams {
        let vlan_extra = if s.template.layout.vlan_tci.is_empty() { 0 } else { 4 };
        let max = info.mtu as usize + 14 + vlan_extra + 4;
        let frame = s.sizes.max() as usize;
        if frame > max {
            return Err(IoError::FrameTooLarge {
                stream: s.name.clone(),
                iface: info.name.clone(),
                frame,
                mtu: info.mtu,
                max,
                need: frame - 14 - vlan_extra - 4,
            });
        }
    }
    Ok(())
}

fn live_line(live: &Live, elapsed: f64, prev: &mut Vec<(u64, u64, u64)>, dt: f64) -> String {
    let snap = live.snapshot();
    let mut parts = Vec::new();
    let (mut tot, mut tot_rate) = (0u64, 0.0);
    for (i, (sent, _bytes, lag)) in snap.iter().enumerate() {
        let before = prev.get(i).map_or(0, |p| p.0);
        let rate = (sent - before) as f64 / dt;
        tot += sent;
        tot_rate += rate;
        parts.push(format!(
            "{} {} ({:.1} kpps, lag {:.1} µs)",
            live.names[i],
            sent,
            rate / 1e3,
            *lag as f64 / 1e3
        ));
    }
    *prev = snap;
    format!(
        "[{elapsed:6.1}s] {} | total {tot} {:.1} kpps",
        parts.join(" | "),
        tot_rate / 1e3
    )
}

fn cmd_run(a: RunArgs) -> Result<i32> {
    let mut spec = load_spec(&a.profile)?;
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration {d}: give a positive number of seconds");
        }
        spec.duration_s = Some(d);
    }
    if let Some(s) = a.seed {
        spec.seed = Some(s);
    }
    let out = spec.output.clone();
    let iface = a.iface.clone().or_else(|| {
        if a.out.is_none() && !a.null {
            out.as_ref().and_then(|o| o.iface.clone())
        } else {
            None
        }
    });
    let pcap = a.out.clone().or_else(|| {
        if a.iface.is_none() && !a.null {
            out.as_ref().and_then(|o| o.pcap.clone().map(PathBuf::from))
        } else {
            None
        }
    });
    let null = a.null || (iface.is_none() && pcap.is_none() && out.as_ref().is_some_and(|o| o.null));
    let netns = a.netns.clone().or_else(|| out.as_ref().and_then(|o| o.netns.clone()));
    if iface.is_none() && pcap.is_none() && !null {
        bail!("no output: give --iface IF (send on an interface), --out FILE.pcap, or --null; or set [output] in the profile");
    }
    if let Some(ns) = &netns {
        enter_netns(ns)?;
    }
    let info = match &iface {
        Some(i) => Some(iface_info(i)?),
        None => None,
    };
    let profile = compile(&spec, &a.profile, info.as_ref().and_then(|i| i.speed_bps))?;
    if pcap.is_some() && !profile.is_bounded() {
        bail!("a pcap output needs every stream to end. Fix: set count or duration_s in each [stream.timing], duration_s at the top, or pass --duration");
    }
    let pace = match a.pace {
        Pace::Auto => iface.is_some(),
        Pace::On if pcap.is_some() => bail!("--pace on with --out: a pcap file is written as fast as possible and stamped with the scheduled times. Fix: drop --pace"),
        Pace::On => true,
        Pace::Off => false,
    };
    let batch = max_departure_frames(&profile);
    let max_frame = profile.max_frame() as usize;
    let mut backend: Box<dyn TxBackend> = if let Some(i) = &iface {
        check_mtu(&profile, info.as_ref().expect("looked up above"))?;
        match a.tx_method {
            TxMethod::Sendmmsg => Box::new(AfPacketTx::open(i, max_frame, batch)?),
            TxMethod::Ring => Box::new(AfPacketRingTx::open(i, max_frame, batch)?),
        }
    } else if let Some(p) = &pcap {
        Box::new(PcapTx::create(p, max_frame, batch)?)
    } else {
        Box::new(NullTx::new(max_frame, batch))
    };

    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
    let live = Arc::new(Live::new(profile.streams.iter().map(|s| s.name.clone()).collect()));
    let opts = RunOptions {
        pace,
        core: a.core,
        stop: stop.clone(),
        live: live.clone(),
    };
    let show_live = !a.quiet;
    let stats = std::thread::scope(|sc| {
        let be = &mut *backend;
        let h = sc.spawn(|| gapless_engine::run(&profile, be, &opts));
        let t0 = Instant::now();
        let mut prev = Vec::new();
        let mut last = Instant::now();
        let tty = std::io::stderr().is_terminal();
        while !h.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            if show_live && last.elapsed() >= Duration::from_secs(1) {
                let dt = last.elapsed().as_secs_f64();
                last = Instant::now();
                let line = live_line(&live, t0.elapsed().as_secs_f64(), &mut prev, dt);
                if tty {
                    eprint!("\r\x1b[2K{line}");
                } else {
                    eprintln!("{line}");
                }
            }
        }
        if show_live && tty {
            eprintln!();
        }
        h.join()
    })
    .map_err(|_| anyhow!("the send loop panicked"))?;

    let finish_err = backend.finish().err();
    let meta = RunMeta {
        profile_path: a.profile.display().to_string(),
        backend: backend.name().into(),
        backend_detail: backend.describe(),
        pace,
        live_backend: backend.is_live(),
        iface: iface.clone(),
        driver: info.as_ref().and_then(|i| i.driver.clone()),
        mtu: info.as_ref().map(|i| i.mtu),
        netns,
    };
    let result = build_result(&profile, &stats, &meta);
    if let Some(j) = &a.json {
        write_json_atomic(j, &result).with_context(|| format!("writing the result file {}", j.display()))?;
    }
    print!("{}", summary_text(&result));
    if let Some(j) = &a.json {
        println!("result: {}", j.display());
    }
    if let Some(p) = &pcap {
        println!("pcap: {}", p.display());
    }
    if let Some(e) = finish_err {
        return Err(e.into());
    }
    if let Some(e) = &stats.backend_error {
        bail!("the backend failed during the run: {e} (the result file has what was sent until then)");
    }
    Ok(if stats.interrupted { 130 } else { 0 })
}

fn cmd_check(path: &Path, link: Option<f64>) -> Result<i32> {
    let spec = load_spec(path)?;
    let p = compile(&spec, path, link)?;
    println!(
        "{}: {} stream(s), seed {}, on_late = {}",
        path.display(),
        p.streams.len(),
        p.seed,
        p.on_late.as_str()
    );
    for s in &p.streams {
        let end = match (s.count, s.duration_ns) {
            (Some(c), Some(d)) => format!("{c} frames or {:.3} s", d as f64 / 1e9),
            (Some(c), None) => format!("{c} frames"),
            (None, Some(d)) => format!("{:.3} s", d as f64 / 1e9),
            (None, None) => "until stopped".into(),
        };
        println!(
            "  {} (id {}): {:.1} pps, {:.4} Gbit/s L1, frames {}..{} B (mean {:.1}), {} field op(s), until {end}",
            s.name,
            s.id,
            s.target_pps,
            s.target_bps_l1 / 1e9,
            s.sizes.min(),
            s.sizes.max(),
            s.mean_size,
            s.ops.len()
        );
    }
    Ok(0)
}

fn cmd_testbed(action: TestbedCmd) -> Result<i32> {
    match action {
        TestbedCmd::Up { name } => {
            let t = Testbed::new(&name).map_err(|e| anyhow!("{e}"))?;
            match t.up()? {
                UpOutcome::Created => println!("testbed {name} is up"),
                UpOutcome::AlreadyUp => println!("testbed {name} was already up"),
            }
            println!(
                "  sender:   netns {} iface {} (198.18.0.1, 02:67:6c:00:00:01): gapless run --netns {} --iface {} ...",
                t.tx_ns(),
                t.tx_if(),
                t.tx_ns(),
                t.tx_if()
            );
            println!(
                "  receiver: netns {} iface {} (198.18.0.2, 02:67:6c:00:00:02)",
                t.rx_ns(),
                t.rx_if()
            );
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

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Check {
            profile,
            link_speed_bps,
        } => cmd_check(&profile, link_speed_bps),
        Cmd::Testbed { action } => cmd_testbed(action),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
