//! IO errors. Each message says what is wrong and how to fix it.

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IoError {
    /// No interface of that name in the current network namespace.
    #[error("interface {0:?} does not exist in this network namespace. Fix: check the name with `ip link`; for the testbed, `gapless testbed up` makes gl-tx0 in the namespace gl-tx")]
    NoSuchInterface(String),
    /// The interface is administratively down or has no carrier.
    #[error("interface {0} is down. Fix: `ip link set {0} up` (and check that its peer or cable is up)")]
    InterfaceDown(String),
    /// The process lacks capabilities the command needs.
    #[error("{what} needs {missing}, which this process does not have. Fix: {fix}")]
    MissingCapabilities { what: String, missing: String, fix: String },
    /// The link went down, lost its carrier or went away during a run.
    #[error("{iface} {what} during the run; the run ended there. Fix: check the link with `ip link show {iface}` (and its peer), then run again")]
    LinkLost { iface: String, what: String },
    /// The process may not open raw sockets.
    #[error("opening an AF_PACKET socket needs CAP_NET_RAW. Fix: run as root (sudo), or `setcap cap_net_raw,cap_net_admin,cap_sys_admin+ep` on the gapless binary (cap_sys_admin to enter a network namespace)")]
    NoPermission,
    /// A frame exceeds what the interface's MTU allows.
    #[error("stream {stream:?} has frames of up to {frame} B (with FCS) but {iface}'s MTU of {mtu} B allows at most {max} B. Fix: lower the frame size to {max} B, or raise the MTU: `ip link set {iface} mtu {need}`")]
    FrameTooLarge {
        stream: String,
        iface: String,
        frame: usize,
        mtu: u32,
        max: usize,
        need: usize,
    },
    /// An emulated host could not resolve its gateway.
    #[error("host {host}: its gateway {gateway} did not answer ARP/ND within {waited_ms} ms. Fix: check that the gateway address is right and up on the other side of the port (the DUT's address, or the other device's)")]
    Unresolved {
        host: String,
        gateway: String,
        waited_ms: u64,
    },
    /// The named network namespace does not exist.
    #[error("network namespace {0:?} not found (no /var/run/netns/{0}). Fix: `gapless testbed up`, or `ip netns add {0}`; list them with `ip netns list`")]
    NoSuchNetns(String),
    /// Needs root.
    #[error("{0} needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN). Fix: run it with sudo")]
    NotRoot(&'static str),
    /// Hardware timestamps asked of an interface without them.
    #[error("{iface} cannot timestamp received frames in hardware ({caps}). Fix: use the kernel's software timestamps; `ethtool -T {iface}` lists what the driver can do")]
    NoHwTimestamps { iface: String, caps: String },
    /// A capture or timestamp file that cannot be read.
    #[error("{path}: {message}. Fix: {fix}")]
    Input { path: String, message: String, fix: String },
    /// The kernel has no AF_XDP.
    #[error("this kernel has no AF_XDP sockets (socket(AF_XDP) failed: {0}). Fix: use an AF_PACKET socket, or a kernel built with CONFIG_XDP_SOCKETS=y (Linux 4.18+)")]
    XdpUnsupported(String),
    /// Zero-copy asked of a driver without it.
    #[error("{iface} refuses AF_XDP zero-copy (EOPNOTSUPP): its driver has no zero-copy support (veth never has). Fix: bind in copy mode, or in auto mode to take the best the driver offers")]
    XdpZeroCopyUnsupported { iface: String },
    /// Another AF_XDP socket already owns the queue.
    #[error("queue {queue} of {iface} is busy: another AF_XDP socket (another gapless, DPDK's af_xdp, an xdp-tools program) is bound to it. Fix: stop that program, or pick a free queue")]
    XdpQueueBusy { iface: String, queue: u32 },
    /// An XDP program is already on the interface.
    #[error("{iface} already has an XDP program attached, and an interface runs one at a time. Fix: `ip -d link show dev {iface}` shows it; remove it with `ip link set dev {iface} xdp off` (or `xdpgeneric off`) if it is not needed, or meter with an AF_PACKET socket, which works beside it")]
    XdpProgramAttached { iface: String },
    /// The driver has no native XDP, and native was asked for.
    #[error("attaching XDP natively to {iface}: the driver has no native XDP ({detail}). Fix: attach in generic mode (or auto, which falls back to it)")]
    XdpNoNative { iface: String, detail: String },
    /// Loading or attaching a BPF program (the XDP receiver, or a host's VLAN tagger) failed.
    #[error("{what}: {detail}. Fix: {fix}")]
    Xdp { what: String, detail: String, fix: String },
    /// A frame does not fit a UMEM frame.
    #[error("stream {stream:?} has frames of up to {frame} B but an AF_XDP UMEM frame holds {max} B. Fix: lower the frame size to {max} B, or send with an AF_PACKET socket")]
    XdpFrameTooLarge { stream: String, frame: usize, max: usize },
    /// A system call failed.
    /// (`cause`, not `source`: the message already holds it, and a `source` would be printed
    /// twice in an error chain.)
    #[error("{context}: {cause}")]
    Os { context: String, cause: std::io::Error },
    /// A command the testbed runs failed.
    #[error("`{cmd}` failed: {stderr}. Fix: {}", command_fix(.stderr))]
    Command { cmd: String, stderr: String },
    /// The interface has a root qdisc of its own, which a shaper would replace.
    #[error("{iface} has a root qdisc of its own ({kind}); rate_control = \"shaper\" would replace it and could not put it back. Fix: remove it (`tc qdisc del dev {iface} root`) if it is not needed, or pick another rate control (software)")]
    QdiscInUse { iface: String, kind: String },
    /// Launch time asked of an interface whose qdiscs cannot hold frames until their time.
    #[error("rate_control = \"launch-time\" needs a qdisc on {iface} that sends each frame at its SO_TXTIME: etf or fq (or a NIC with launch-time offload under etf), but {iface} has {found}{kernel}. Fix: `tc qdisc replace dev {iface} root etf clockid CLOCK_TAI delta 200000` (add `offload` on a NIC with launch time, e.g. igc, i210), or `tc qdisc replace dev {iface} root fq`; or use rate_control = \"software\"")]
    NoLaunchTimeQdisc {
        iface: String,
        found: String,
        kernel: String,
    },
    /// The driver has no per-queue rate limiter.
    #[error("{iface} refused tx_maxrate on queue {queue} ({cause}): its driver ({driver}) has no per-queue hardware rate limiter (veth never has one; Intel ixgbe, i40e, ice and mlx5 do). Fix: use rate_control = \"software\", or a NIC whose driver implements ndo_set_tx_maxrate")]
    NicLimiterRefused {
        iface: String,
        queue: u32,
        driver: String,
        cause: String,
    },
    /// The driver does not let user space supply the FCS.
    #[error("{iface} does not let user space supply the FCS (SO_NOFCS: {cause}); its driver ({driver}) lacks IFF_SUPP_NOFCS (veth never has it; e1000e and igb do). Fix: use fillers to a link-local address ([output.filler] kind = \"link-local\", or \"auto\")")]
    NoFcsUnsupported {
        iface: String,
        driver: String,
        cause: String,
    },
    /// A sysfs file of the NIC limiter could not be read or written.
    #[error("{path}: {cause}. Fix: check that the interface exists in this network namespace and that you are root")]
    Sysfs { path: String, cause: String },
    /// An emulated host's interface could not come up on its port.
    #[error("{iface}: {what}. Fix: {fix}")]
    Host { iface: String, what: String, fix: String },
    /// Kernel TX timestamps could not be turned on.
    #[error("{iface}: {what}. Fix: {fix}")]
    TxStamps { iface: String, what: String, fix: String },
    /// The pcap file could not be written.
    #[error(
        "pcap {path}: {message}. Fix: check that the directory exists and is writable, and that the disk has space"
    )]
    Pcap { path: String, message: String },
}

impl IoError {
    pub(crate) fn last_os(context: impl Into<String>) -> IoError {
        IoError::Os {
            context: context.into(),
            cause: std::io::Error::last_os_error(),
        }
    }
}

/// The fix for a failed command: installing iproute2 only when it could not be run; a
/// refusal by the kernel ("Address already assigned", "File exists") is about what was asked.
fn command_fix(stderr: &str) -> &'static str {
    if stderr.starts_with("cannot run") {
        "install iproute2 (`apt-get install iproute2`) and run as root"
    } else if stderr.contains("Operation not permitted") {
        "run as root (or with CAP_NET_ADMIN)"
    } else {
        "the kernel refused what was asked: change the value named before it (an address or name already in use, or out of range)"
    }
}
