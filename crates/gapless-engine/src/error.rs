//! The engine's errors: what went wrong, with the data a front end needs to match on it and
//! to add its own hints (a CLI flag, a form field). Messages describe the fault and the
//! system's fix; they never name a front end's options.

use gapless_core::profile::plan::PlanError;
use gapless_core::ProfileError;
use gapless_io::IoError;
use thiserror::Error;

/// "profile " for "profile", nothing for "".
fn named(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what} ")
    }
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The profile does not compile (the TOML path and the fix are in the error).
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The streams cannot be shared out over the send loops asked for.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A socket, interface, namespace or file refused (the system fix is in the error).
    #[error(transparent)]
    Io(#[from] IoError),
    /// An event for the run cannot be made as written (before any frame is sent).
    #[error("event {event:?}: {why}")]
    BadEvent { event: String, why: String },
    /// Metering while sending needs the frames on a wire.
    #[error(
        "metering while sending needs an interface target (a pcap file or the null backend puts nothing on a wire)"
    )]
    RxWithoutInterface,
    /// Several TX ports asked of a run that cannot serve them from one loop.
    #[error("several TX ports (more_tx) {0}")]
    TxPorts(String),
    /// A pcap target with a stream that never ends.
    #[error(
        "a pcap target needs every stream to end. Fix: give each stream a count or a duration, or the run a duration"
    )]
    UnboundedPcap,
    /// Pacing asked of a pcap target, which is written on schedule time.
    #[error("pacing does not apply to a pcap target: it is written as fast as possible and stamped with the scheduled times")]
    PacedPcap,
    /// Several send loops asked of a pcap target.
    #[error("a pcap file is written by one send loop; several were asked for")]
    LoopsWithPcap,
    /// A batch size out of range.
    #[error("batch {0}: give 1 (precise mode) to 256")]
    Batch(usize),
    /// A core this process may not run on.
    #[error("core {core} is not one this process may run on (allowed: {allowed:?}). Fix: pick cores from that list")]
    CoreNotAllowed { core: usize, allowed: Vec<usize> },
    /// A core another run's packet path holds.
    #[error("core {core} is held by another run's send loop or meter (held now: {held:?}): two send loops on one core spoil both schedules. Fix: pick another core, or wait for that run to end")]
    CoreHeld { core: usize, held: Vec<usize> },
    /// A run that would leave the server no core to answer on.
    #[error("this run's packet path would take cores {asked:?}, and with the cores other runs hold ({held:?}) that is every core this server may use ({cpuset:?}): the server keeps one core for its own threads, off the packet path. Fix: stop another run, give this one fewer cores, or start the server on more cores")]
    NoCoreLeft {
        asked: Vec<usize>,
        held: Vec<usize>,
        cpuset: Vec<usize>,
    },
    /// A number out of range (`what` names it, `want` says what is accepted).
    #[error("{what} {value}: give {want}")]
    OutOfRange {
        what: &'static str,
        value: f64,
        want: &'static str,
    },
    /// A file the engine reads (a profile, a calibration, a result) that cannot be read.
    #[error("cannot read {}{path}: {cause}. Fix: {fix}", named(.what))]
    Unreadable {
        what: &'static str,
        path: String,
        cause: std::io::Error,
        fix: &'static str,
    },
    /// A file the engine reads (a calibration, a result) that is not what it should be.
    #[error("{path}: {problem}. Fix: {fix}")]
    BadFile { path: String, problem: String, fix: String },
    /// The profile an experiment names is wrong (its own error says what and how to fix it).
    #[error("{experiment}: its profile: {inner}")]
    ExperimentProfile {
        experiment: String,
        inner: Box<EngineError>,
    },
    /// Hardware RX stamps asked of an AF_XDP meter.
    #[error("gapless's XDP program stamps frames with the kernel's clock at the XDP hook, and reading the NIC's stamp there (the bpf_xdp_metadata_rx_timestamp kfunc) is driver-specific and not built. Fix: meter hardware stamps with the AF_PACKET socket")]
    HardwareStampsNeedAfPacket,
    /// A capture with no frame in it.
    #[error("{path}: {why}")]
    EmptyCapture { path: String, why: String },
    /// The calibration saw none of its frames.
    #[error("no calibration frame arrived on {rx}. Fix: check that {tx} and {rx} are the two ends of one link (`gapless testbed up` makes gl-tx0/gl-rx0)")]
    CalibrationNoFrames { tx: String, rx: String },
    /// The calibration's figures could not be made.
    #[error("calibration failed: {0}")]
    CalibrationFailed(String),
    /// Stopped (Ctrl-C, a stop call) before there was anything to keep.
    #[error("{0} was interrupted; nothing was written")]
    Interrupted(&'static str),
    /// The meter failed during the run; the report has what it measured until then.
    #[error("the meter failed during the run: {0} (the result has what was measured until then)")]
    MeterFailed(String),
    /// The backend failed for good during the run.
    #[error("the backend failed during the run: {0} (the result has what was sent until then)")]
    BackendFailed(String),
    /// Frames that failed to send (counted, not as sent).
    #[error("{frames} frames failed to send (last error: {last}); the counts are what left. Fix: check the link (`ip link show`) and the rate")]
    SendFailed { frames: u64, last: String },
    /// The pcap file could not be finished: nothing was written.
    #[error("{0} (no pcap was written)")]
    PcapNotWritten(IoError),
    /// A report's exports or plots could not be written.
    #[error("TX timestamps (--tx-timestamps): {0}")]
    TxStamps(&'static str),

    #[error("rate_control = {method:?}: {problem}")]
    RateControl { method: &'static str, problem: String },

    #[error("{0}")]
    Report(String),
    /// A request (from a front end that takes keywords) with a key no option has.
    #[error("{what}: unknown option {key:?}. Fix: check its spelling; the options are: {known}")]
    UnknownOption {
        what: &'static str,
        key: String,
        known: String,
    },
    /// A run asked to send to more than one target.
    #[error("a run sends to one target: an interface, a pcap file or the null backend; more than one was given. Fix: keep one")]
    TargetConflict,
    /// A run with nowhere to send.
    #[error("no output: name an interface to send on, a pcap file to write, or the null backend; or set [output] in the profile")]
    NoTarget,
    /// A further RX port that is no port, or the RX interface again.
    #[error("further RX port {0:?}: give another interface than the RX one, as [NETNS/]IFACE")]
    BadRxPort(String),
    /// A meter option without a meter.
    #[error("an RX namespace, core or further RX port was given without an RX interface to meter on. Fix: name the RX interface too, or drop them")]
    RxOptionWithoutRx,
    /// A thread of the engine panicked (a bug: please report it).
    #[error("{0} panicked")]
    Panicked(&'static str),
}

impl EngineError {
    /// The fault's name for matching in other languages: the variant's, e.g. `OutOfRange`,
    /// or the I/O error's, e.g. `NoSuchInterface` (Python's `Error.kind`, HTTP's `kind`).
    pub fn kind(&self) -> String {
        let name = |d: String| d.split(['(', ' ', '{']).next().unwrap_or_default().to_string();
        match self {
            EngineError::Io(io) | EngineError::PcapNotWritten(io) => name(format!("{io:?}")),
            EngineError::ExperimentProfile { inner, .. } => inner.kind(),
            _ => name(format!("{self:?}")),
        }
    }
}
