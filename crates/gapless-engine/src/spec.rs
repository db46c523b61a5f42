//! What a run, a meter or a calibration needs, as plain data: no command-line types. Front
//! ends (the CLI, Python, the HTTP server) fill these in and hand them to [`crate::Run`],
//! [`crate::measure`], [`crate::analyze`] or [`crate::calibrate`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gapless_core::meter::{Calibration, CalibrationRef, MeterConfig, StreamTarget};
use gapless_core::spec::files::FileLoader;
use gapless_core::spec::RateControlKind;
use gapless_core::{CompileCtx, Profile, ProfileSpec};
use gapless_io::kernel::nic::{current_netns, enter_netns, return_to_netns};
pub use gapless_io::kernel::timestamping::TxStampKind;
use gapless_io::rx::{AfPacketRx, RxSource, RxTimestamps};
use gapless_io::xdp::program::{XdpAttach, XdpStamp};
use gapless_io::xdp::{AfXdpRx, XdpMode};

use crate::EngineError;

/// A profile and where the files it names (empirical tables, gap lists) are read from.
#[derive(Debug, Clone)]
pub struct ProfileSource {
    pub spec: ProfileSpec,
    /// Files named in the profile are relative to this directory.
    pub dir: PathBuf,
    /// How results name the profile (its path, or "python", …).
    pub label: String,
}

impl ProfileSource {
    /// Reads and parses a profile file.
    pub fn from_file(path: &Path) -> Result<ProfileSource, EngineError> {
        let text = crate::read_text(path, "profile", "check the path (examples/ has profiles to start from)")?;
        Ok(ProfileSource {
            spec: ProfileSpec::from_toml(&text, &path.display().to_string())?,
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            label: path.display().to_string(),
        })
    }

    /// Compiles the profile against a link speed (for `%` rates).
    pub fn compile(&self, link_speed_bps: Option<f64>) -> Result<Profile, EngineError> {
        Ok(self.spec.compile(&CompileCtx {
            link_speed_bps,
            files: &DirLoader(self.dir.clone()),
        })?)
    }
}

/// Reads files named in a profile relative to the profile's directory.
struct DirLoader(PathBuf);
impl FileLoader for DirLoader {
    fn load(&self, path: &str) -> Result<String, String> {
        let p = self.0.join(path);
        std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
    }

    fn capture(
        &self,
        path: &str,
    ) -> Result<
        (
            Arc<dyn gapless_core::spec::files::CaptureSource>,
            gapless_core::spec::files::CaptureStats,
        ),
        String,
    > {
        let (f, st) = gapless_io::files::capture::CaptureFile::scan(&self.0.join(path)).map_err(|e| e.to_string())?;
        Ok((Arc::new(f), st))
    }
}

/// How AF_PACKET hands frames to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxMethod {
    /// One sendmmsg system call per departure.
    Sendmmsg,
    /// PACKET_TX_RING: frames built in the shared ring, one kick per departure.
    Ring,
}

/// The socket that sends on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxSocket {
    AfPacket(TxMethod),
    /// AF_XDP; send loop j binds queue `queue + j`.
    AfXdp {
        mode: XdpMode,
        queue: u32,
    },
}

/// Where the frames go.
#[derive(Debug, Clone, PartialEq)]
pub enum TxTarget {
    /// An interface (in the run's network namespace); `socket: None` takes the profile's
    /// `[output] backend`, else AF_PACKET sendmmsg.
    Iface { name: String, socket: Option<TxSocket> },
    /// A nanosecond pcap file stamped with the scheduled departure times.
    Pcap(PathBuf),
    /// Frames built and dropped: the engine alone.
    Null,
}

/// Software pacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pacing {
    /// On for interfaces, off for pcap and null.
    #[default]
    Auto,
    On,
    Off,
}

/// The meter's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxSocket {
    /// AF_PACKET TPACKET_V3 ring.
    #[default]
    AfPacket,
    /// AF_XDP fed by gapless's XDP program, on one RX queue.
    AfXdp {
        queue: u32,
        attach: XdpAttach,
        stamp: XdpStamp,
    },
}

/// How to meter: what every meter front end asks.
#[derive(Debug, Clone)]
pub struct MeterSetup {
    /// A target rate for streams without one.
    pub target_pps: Option<f64>,
    /// Latency histogram resolution, ns.
    pub latency_unit_ns: u64,
    /// A calibration and the path it was read from.
    pub calibration: Option<(Calibration, String)>,
    /// Subtract the offset of a calibration that failed its own checks.
    pub use_invalid_calibration: bool,
    /// Meter only signed frames; other TCP/UDP frames count as foreign.
    pub signed_only: bool,
    /// Compute latency (the signature's TX time and the RX clock agree).
    pub latency: bool,
    /// Leave out signed frames sent in the first this-many ns (from the first signed frame's
    /// TX time, or a run's start): counted as `warmup_frames`. 0: none. A run takes its
    /// [`RunSpec::warmup`] instead.
    pub warmup_ns: u64,
}

impl Default for MeterSetup {
    fn default() -> Self {
        MeterSetup {
            target_pps: None,
            latency_unit_ns: 10,
            calibration: None,
            use_invalid_calibration: false,
            signed_only: false,
            latency: true,
            warmup_ns: 0,
        }
    }
}

impl MeterSetup {
    /// Checks the numbers.
    pub fn check(&self) -> Result<(), EngineError> {
        if let Some(t) = self.target_pps {
            if !(t.is_finite() && t > 0.0) {
                return Err(EngineError::OutOfRange {
                    what: "target rate",
                    value: t,
                    want: "a positive rate in packets per second",
                });
            }
        }
        if self.latency_unit_ns == 0 || self.latency_unit_ns > 1_000_000 {
            return Err(EngineError::OutOfRange {
                what: "latency unit (ns)",
                value: self.latency_unit_ns as f64,
                want: "a resolution from 1 to 1000000 ns (10 is the default)",
            });
        }
        Ok(())
    }

    /// The meter's configuration for these stream targets, and the calibration's reference
    /// for the report.
    pub fn config(
        &self,
        targets: HashMap<u16, StreamTarget>,
    ) -> Result<(MeterConfig, Option<CalibrationRef>), EngineError> {
        self.check()?;
        let subtract = |c: &Calibration| c.valid || self.use_invalid_calibration;
        let cfg = MeterConfig {
            latency_unit_ns: self.latency_unit_ns,
            targets,
            default_target_pps: self.target_pps,
            latency_offset_ns: self
                .calibration
                .as_ref()
                .filter(|c| subtract(&c.0))
                .map_or(0, |c| c.0.latency_offset_ns),
            unsigned_flows: !self.signed_only,
            latency: self.latency,
            warmup_ns: self.warmup_ns,
            ..Default::default()
        };
        let cal = self.calibration.as_ref().map(|(c, p)| CalibrationRef {
            subtracted: subtract(c),
            ..c.reference(p)
        });
        Ok((cfg, cal))
    }
}

/// The receive side: an interface to meter on.
#[derive(Debug, Clone)]
pub struct RxSpec {
    pub iface: String,
    pub netns: Option<String>,
    pub socket: RxSocket,
    pub timestamps: RxTimestamps,
    pub meter: MeterSetup,
    /// Core for the meter loop (None: the first the send loop does not use).
    pub core: Option<usize>,
    /// How long to keep metering after the last frame left.
    pub linger: Duration,
    /// A capture the meter offers every frame it takes (see [`crate::capture`]).
    pub capture: Option<std::sync::Arc<crate::capture::Capture>>,
    /// More ports the meter reads as one (`gapless_io::rx::ports`): a flow that moves from
    /// one to another, as after a failover, stays one sequence, and each stream's report
    /// counts what each port took (`rx_ports`).
    pub more: Vec<RxPort>,
    /// 1 MiB blocks of each AF_PACKET ring (None: 64). A smaller ring is made faster: an
    /// experiment sizes it by its trial's rate ([`ring_blocks_for`]).
    pub ring_blocks: Option<u32>,
}

/// Ring blocks that hold a quarter second of `pps` frames of `size` bytes (with the ring's
/// per-frame header and alignment), within the ring's bounds.
pub fn ring_blocks_for(pps: f64, size: u32) -> u32 {
    let bytes = pps * f64::from(size + 96) * 0.25;
    ((bytes / f64::from(1u32 << 20)).ceil() as u32).clamp(gapless_io::rx::MIN_BLOCKS, gapless_io::rx::BLOCK_NR)
}

/// Another port a meter reads (see [`RxSpec::more`]).
#[derive(Debug, Clone)]
pub struct RxPort {
    pub iface: String,
    pub netns: Option<String>,
    /// A capture of this port's frames only.
    pub capture: Option<std::sync::Arc<crate::capture::Capture>>,
}

impl RxPort {
    /// `[NETNS/]IFACE`.
    pub fn parse(text: &str) -> RxPort {
        let (netns, iface) = crate::events::netns_iface(text);
        RxPort {
            iface,
            netns,
            capture: None,
        }
    }
}

impl RxSpec {
    /// A software-stamped AF_PACKET meter on `iface`.
    pub fn new(iface: impl Into<String>) -> RxSpec {
        RxSpec {
            iface: iface.into(),
            netns: None,
            socket: RxSocket::AfPacket,
            timestamps: RxTimestamps::Software,
            meter: MeterSetup::default(),
            core: None,
            linger: Duration::from_millis(500),
            capture: None,
            more: Vec::new(),
            ring_blocks: None,
        }
    }

    /// Opens the meter's sockets, each in its namespace, and comes back to the current one:
    /// a socket keeps the namespace it was made in. Several ports are read as one; of
    /// several, those down are read once they come up (a LAG's member taken down, a failover's
    /// backup), but one must be up.
    pub fn open(&self) -> Result<Box<dyn RxSource>, EngineError> {
        if self.more.is_empty() {
            return Ok(self.open_one(&self.iface, self.netns.as_deref(), false)?.0);
        }
        let ports = std::iter::once((&self.iface, &self.netns)).chain(self.more.iter().map(|p| (&p.iface, &p.netns)));
        let mut all = Vec::new();
        let mut any_up = false;
        for (iface, netns) in ports {
            let (rx, up) = self.open_one(iface, netns.as_deref(), true)?;
            all.push(rx);
            any_up |= up;
        }
        if !any_up {
            // Every port down: the first is named (bringing any one up would do).
            return Err(gapless_io::IoError::InterfaceDown(self.iface.clone()).into());
        }
        let realtime = self.timestamps == RxTimestamps::Software;
        Ok(Box::new(gapless_io::rx::ports::RxPorts::new(all, realtime)))
    }

    /// One port's socket, and whether its interface is up.
    fn open_one(
        &self,
        iface: &str,
        netns: Option<&str>,
        even_down: bool,
    ) -> Result<(Box<dyn RxSource>, bool), EngineError> {
        let home = current_netns()?;
        if let Some(ns) = netns {
            enter_netns(ns)?;
        }
        let rx = match self.socket {
            RxSocket::AfPacket => {
                let blocks = self.ring_blocks.unwrap_or(gapless_io::rx::BLOCK_NR);
                AfPacketRx::open_in_state(iface, self.timestamps, blocks, even_down)
                    .map(|r| {
                        let up = r.info.up;
                        (Box::new(r) as Box<dyn RxSource>, up)
                    })
                    .map_err(EngineError::from)
            }
            // AF_XDP opens an interface only while it is up.
            _ => open_rx(iface, self.timestamps, self.socket).map(|r| (r, true)),
        };
        return_to_netns(&home)?;
        rx
    }

    /// How many ports the meter reads.
    pub fn ports(&self) -> usize {
        1 + self.more.len()
    }

    /// How results name where the meter read: each port, in order, for several.
    pub fn port_names(&self) -> Vec<String> {
        let mut names = vec![iface_source(&self.iface, self.netns.as_deref())];
        names.extend(self.more.iter().map(|p| iface_source(&p.iface, p.netns.as_deref())));
        names
    }

    /// Each port's capture, by port index.
    pub fn captures(&self) -> Vec<Option<&crate::capture::Capture>> {
        let mut all = vec![self.capture.as_deref()];
        all.extend(self.more.iter().map(|p| p.capture.as_deref()));
        all
    }

    /// How results name where the meter read.
    pub fn source(&self) -> String {
        self.port_names().join(" + ")
    }
}

/// How results name an interface and its namespace.
pub fn iface_source(iface: &str, netns: Option<&str>) -> String {
    match netns {
        Some(n) => format!("iface {iface} (netns {n})"),
        None => format!("iface {iface}"),
    }
}

/// Opens a meter's socket on `iface` in the current network namespace.
pub fn open_rx(iface: &str, ts: RxTimestamps, socket: RxSocket) -> Result<Box<dyn RxSource>, EngineError> {
    Ok(match socket {
        RxSocket::AfPacket => Box::new(AfPacketRx::open(iface, ts)?),
        RxSocket::AfXdp { .. } if ts == RxTimestamps::Hardware => return Err(EngineError::HardwareStampsNeedAfPacket),
        RxSocket::AfXdp { queue, attach, stamp } => {
            Box::new(AfXdpRx::open(iface, queue, XdpMode::Auto, attach, stamp)?)
        }
    })
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub profile: ProfileSource,
    pub target: TxTarget,
    /// Enter this network namespace (from `ip netns`) before opening the interface.
    pub netns: Option<String>,
    pub pacing: Pacing,
    /// Throughput mode above 1: up to this many single-frame departures per send.
    pub batch: usize,
    /// Send loops on these cores (empty: see `core`).
    pub cores: Vec<usize>,
    /// The one send loop's core (None: the quietest allowed, by a probe, when paced).
    pub core: Option<usize>,
    /// Split CBR streams over the loops, phase-shifted.
    pub split_cbr: bool,
    /// SCHED_FIFO priority for the send loops and the meter.
    pub rt_priority: Option<u32>,
    /// Meter while sending.
    pub rx: Option<RxSpec>,
    /// The rate-control method (None: the profile's `[output] rate_control`, else software).
    pub rate_control: Option<RateControlKind>,
    /// Kernel or NIC TX timestamps, matched to every frame (AF_PACKET).
    pub tx_stamps: Option<TxStampKind>,
    /// Where the NIC limiter's sysfs files are (None: the run namespace's own
    /// `/sys/class/net`; tests point it at a directory of their own).
    pub sysfs_net: Option<PathBuf>,
    /// Frames sent in this first part of the run are sent, counted apart (`warmup_frames`)
    /// and not metered: they are told apart by their TX time.
    pub warmup: Option<Duration>,
    /// The warm-up's start fixed from outside (a run across hosts: every host's send loops
    /// and meters take the controller's T0, so that they agree to the frame on which frames
    /// are warm-up). None: the first send loop publishes it.
    pub warmup_shared: Option<std::sync::Arc<crate::run::Warmup>>,
    /// Start at a wall-clock instant given after the run is ready (a run across hosts):
    /// see [`crate::run::StartGate`].
    pub gate: Option<std::sync::Arc<crate::run::StartGate>>,
    /// Link and route changes made during the run, at their times ([`crate::events`]).
    pub events: Vec<crate::events::EventSpec>,
    /// More interfaces the send loops send on, each in its own namespace: stream `s` of the
    /// profile leaves through port `stream_ports[s]` (0: the target; k: `more_tx[k - 1]`;
    /// streams past the list: the target). Every port's streams share the loops' schedule
    /// ([`gapless_io::tx::ports`]). AF_PACKET sendmmsg with software pacing only.
    pub more_tx: Vec<PortRef>,
    pub stream_ports: Vec<usize>,
    /// TX ports that are LAGs: each frame of such a port leaves on one of its members that
    /// distributes, by the frame's hash ([`gapless_io::tx::lag`]).
    pub lags: Vec<LagTx>,
    /// Probe the cores' load (100 ms) before a paced run, to pick the quietest or warn of a
    /// busy one. Experiments probe before their first trial only: the probe was most of a
    /// trial's set-up (bench/ports.py).
    pub probe_cores: bool,
    /// Close the run's sockets on a thread of their own after the report is made (the next
    /// trial of an experiment need not wait for them). AF_PACKET only.
    pub close_later: bool,
}

/// A TX port that is a LAG.
#[derive(Debug, Clone)]
pub struct LagTx {
    /// The port: 0 the target, k `more_tx[k - 1]`. It is the LAG's member 0.
    pub port: usize,
    /// Members 1 and up (member 0 is the port itself).
    pub more_members: Vec<PortRef>,
    /// Which members distribute, and what each sent; None: every member, always.
    pub live: Option<std::sync::Arc<gapless_io::tx::lag::LagLive>>,
}

/// An interface in a network namespace (None: the run's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRef {
    pub iface: String,
    pub netns: Option<String>,
}

impl PortRef {
    /// How results name it.
    pub fn source(&self) -> String {
        iface_source(&self.iface, self.netns.as_deref())
    }
}

impl RunSpec {
    /// A run of `profile` to `target` with every option at its default.
    pub fn new(profile: ProfileSource, target: TxTarget) -> RunSpec {
        RunSpec {
            profile,
            target,
            netns: None,
            pacing: Pacing::Auto,
            batch: 1,
            cores: Vec::new(),
            core: None,
            split_cbr: false,
            rt_priority: None,
            rx: None,
            rate_control: None,
            tx_stamps: None,
            sysfs_net: None,
            warmup: None,
            warmup_shared: None,
            gate: None,
            events: Vec::new(),
            more_tx: Vec::new(),
            stream_ports: Vec::new(),
            lags: Vec::new(),
            probe_cores: true,
            close_later: false,
        }
    }
}
