//! The profile as the user writes it (TOML), before validation.
//!
//! Every table denies unknown keys, so a typo is an error that names the key, never a silent
//! default. [`crate::profile::compile`] turns a [`ProfileSpec`] into a validated, compiled configuration.
//!
//! Holds: the spec types (this file), [`error`] (the error every compiler returns) and
//! [`files`] (the loader a front end supplies). Imports nothing else of the crate: every
//! other module builds on it.

pub mod error;
pub mod files;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

use crate::spec::error::ProfileError;

/// A whole profile.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// Seed of every random choice (fields, sizes, schedules). Default 1.
    #[serde(default)]
    pub seed: Option<u64>,
    /// What the pacer does when a departure is already more than one gap late.
    #[serde(default)]
    pub on_late: OnLate,
    /// Where CBR streams start within their gap: spread (default) or aligned.
    #[serde(default)]
    pub phases: Phases,
    /// Link speed in bit/s, used for `rate_pct` and the over-link-speed check. Default: read
    /// from the interface (sysfs), none for pcap/null.
    #[serde(default)]
    pub link_speed_bps: Option<f64>,
    /// Caps every stream's duration, seconds.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Where the run goes, when the command line does not say.
    #[serde(default)]
    pub output: Option<OutputSpec>,
    /// The streams, one `[[stream]]` table each.
    #[serde(rename = "stream", default)]
    pub streams: Vec<StreamSpec>,
}

/// The `[output]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    pub iface: Option<String>,
    pub pcap: Option<String>,
    #[serde(default)]
    pub null: bool,
    /// Network namespace (name under /var/run/netns) to enter before opening the interface.
    pub netns: Option<String>,
    /// The socket for `iface`: AF_PACKET (default) or AF_XDP.
    pub backend: Option<BackendKind>,
    /// How the frames are spaced: `software` (default), `nic`, `filler`, `launch-time` or
    /// `shaper`.
    pub rate_control: Option<RateControlKind>,
    /// `rate_control = "shaper"`: the kernel qdisc and its bucket.
    pub shaper: Option<ShaperSpec>,
    /// `rate_control = "launch-time"`: how far ahead of its time a frame is handed over.
    pub launch_time: Option<LaunchTimeSpec>,
    /// `rate_control = "filler"`: what the filler frames are.
    pub filler: Option<FillerSpec>,
}

/// The rate-control methods of *Mind the Gap*, plus the kernel's shaper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateControlKind {
    /// The send loop waits on the TSC for each departure (busy-wait).
    #[default]
    Software,
    /// The NIC's per-queue hardware limiter (`tx_maxrate`); gapless sends unpaced.
    Nic,
    /// Back to back at line rate, each gap filled with a frame the device under test drops.
    Filler,
    /// Each frame carries its departure time (SO_TXTIME); the qdisc or NIC holds it until then.
    LaunchTime,
    /// The kernel's token bucket (tbf) or HTB on the egress interface; gapless sends unpaced.
    Shaper,
}

impl RateControlKind {
    /// The name profiles and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            RateControlKind::Software => "software",
            RateControlKind::Nic => "nic",
            RateControlKind::Filler => "filler",
            RateControlKind::LaunchTime => "launch-time",
            RateControlKind::Shaper => "shaper",
        }
    }
}

/// `[output.shaper]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShaperSpec {
    /// `tbf` (default) or `htb`.
    pub qdisc: Option<String>,
    /// The bucket, bytes (default: 1 ms of the rate, at least two of the largest frames).
    pub burst_bytes: Option<u64>,
    /// The rate, bit/s of frames without FCS as the kernel counts them (default: the
    /// profile's mean rate).
    pub rate_bps: Option<f64>,
}

/// `[output.launch_time]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchTimeSpec {
    /// Hand each frame to the kernel this long before its time, µs (default 200).
    pub lead_us: Option<f64>,
}

/// `[output.filler]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FillerSpec {
    /// `auto` (default: `bad-fcs` where the driver takes a frame's FCS from user space, else
    /// `link-local`), `bad-fcs` or `link-local`.
    pub kind: Option<String>,
    /// The fillers' destination MAC for `link-local`: an IEEE 802.1 reserved address that
    /// bridges never forward (default 01:80:c2:00:00:0f, one of the unassigned ones).
    pub dst: Option<String>,
}

/// The socket that sends on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Afpacket,
    Afxdp,
}

/// Where CBR streams without a `start_offset_ns` start within their gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phases {
    /// Stream k of n starts k/n of its own gap after the run's start: n streams of one rate
    /// take turns instead of firing together (500 aligned 1 kpps streams leave in bursts of
    /// 500, late by up to their whole burst).
    #[default]
    Spread,
    /// Every stream starts at the run's start (the schedule before the phases were spread).
    Aligned,
}

/// Policy when the schedule has fallen behind (stall or overload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLate {
    /// Send the late packets at once: the mean rate holds, a burst forms.
    #[default]
    CatchUp,
    /// Drop the missed departures: gaps hold, the rate falls.
    Skip,
    /// Move the stream's schedule later by the lag: gaps hold, the run lasts longer.
    Shift,
}

impl OnLate {
    pub fn as_str(self) -> &'static str {
        match self {
            OnLate::CatchUp => "catch-up",
            OnLate::Skip => "skip",
            OnLate::Shift => "shift",
        }
    }
}

/// One `[[stream]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub name: Option<String>,
    /// Signature id of the stream; default: its index.
    pub id: Option<u16>,
    /// The packet (the testbed's addresses when left out). Exclusive with `variant`.
    #[serde(default)]
    pub template: Option<TemplateSpec>,
    /// Frame size in bytes including the 4-byte FCS: a number, or a table (distribution / IMIX
    /// / list / ramp).
    #[serde(default)]
    pub size: Option<SizeSpec>,
    #[serde(rename = "field", default)]
    pub fields: Vec<FieldSpec>,
    /// Several packets the stream cycles through, each with its own template, size and
    /// fields. Exclusive with the stream's own `template`, `size` and `field`.
    #[serde(rename = "variant", default)]
    pub variants: Vec<VariantSpec>,
    /// How the stream picks its next variant: `sequence` (default: each variant `repeat`
    /// times in turn; round robin when every repeat is 1) or `random` (by `weight`).
    #[serde(default)]
    pub variant_order: VariantOrder,
    /// Send a capture's frames at its own timing (or at the timing's rate, when it gives one).
    pub replay: Option<ReplaySpec>,
    pub timing: TimingSpec,
    /// Append the signature trailer (default true).
    #[serde(default = "yes")]
    pub signature: bool,
    /// Run the whole stream on the send loop of this CPU core (`--cores` must list it;
    /// without `--cores`, the streams' cores make the loops).
    pub core: Option<usize>,
    /// How the stream is shared out when there are several send loops.
    #[serde(default)]
    pub split: SplitKind,
    /// Metric tags: bits of each received frame to count the stream's frames by
    /// (`[[stream.tag]] name, bit, bits`; see `meter::tags`).
    #[serde(rename = "tag", default)]
    pub tags: Vec<TagField>,
}

/// One tag: `bits` bits of the frame from bit `bit` (bit 0 is the first byte's top bit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagField {
    pub name: String,
    pub bit: u32,
    pub bits: u32,
}

/// `split`: how a stream is shared out over several send loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitKind {
    /// Poisson streams are split at rate/k (the overlay is still Poisson); others stay whole.
    #[default]
    Auto,
    /// Never split: the whole stream on one loop.
    None,
    /// CBR only, opt in: loop j of k sends departures j, j + k, … of the whole schedule
    /// (rate/k, shifted by j gaps). Exact while every loop is on time; the result reports
    /// how often a loop was late enough to bunch with its neighbour.
    Phase,
}

fn yes() -> bool {
    true
}

/// One `[[stream.variant]]`: a packet of a stream that cycles through several.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: Option<String>,
    #[serde(default)]
    pub template: TemplateSpec,
    #[serde(default)]
    pub size: Option<SizeSpec>,
    #[serde(rename = "field", default)]
    pub fields: Vec<FieldSpec>,
    /// `variant_order = "random"`: the relative weight (default 1).
    pub weight: Option<u32>,
    /// `variant_order = "sequence"`: frames in a row before the next variant (default 1).
    pub repeat: Option<u32>,
}

/// `[stream.replay]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    /// A pcap or pcapng capture of Ethernet frames, relative to the profile.
    pub file: String,
    /// The file's timing divided by this (2 = twice as fast); default 1.
    pub speed: Option<f64>,
    /// Times through the file, timing continuous across loops; 0 = until stopped. Default 1.
    pub loops: Option<u64>,
    /// Overwrite the last 16 bytes of each UDP/TCP payload with the signature (checksum
    /// fixed), so the meter counts the replay's loss and latency. Default false.
    #[serde(default)]
    pub sign: bool,
}

/// `variant_order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VariantOrder {
    #[default]
    Sequence,
    Random,
}

/// `[stream.template]`: the packet every frame of the stream starts from. Missing keys take
/// the defaults of [`TemplateSpec::default`] (the testbed's addresses).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TemplateSpec {
    pub eth_src: String,
    pub eth_dst: String,
    /// Zero, one (802.1Q) or two (QinQ, outer first) tags.
    pub vlan: Vec<VlanSpec>,
    pub ip_src: String,
    pub ip_dst: String,
    /// Whole TOS / traffic-class byte. Exclusive with `dscp`/`ecn`.
    pub tos: Option<u8>,
    pub dscp: Option<u8>,
    pub ecn: Option<u8>,
    pub ttl: u8,
    pub ip_id: u16,
    pub dont_fragment: bool,
    pub flow_label: u32,
    /// IPv4 options as hex, e.g. "94040000" (Router Alert): written after the 20-byte header
    /// and counted by its header length, up to 40 bytes, padded with zeros (end of options)
    /// to whole 32-bit words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_options: Option<String>,
    /// `udp`, `tcp`, `icmp` (echo request; ICMPv6 on IPv6), `arp`, or `none`: the IP header
    /// with the payload right after it.
    pub l4: L4Kind,
    /// The IP protocol (IPv6: next header) of an `l4 = "none"` template: 61 ("any host
    /// internal protocol", OTG's default) on IPv4, 59 ("no next header") on IPv6 unless set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_proto: Option<u8>,
    pub src_port: u16,
    pub dst_port: u16,
    /// TCP flags as letters: F S R P A U E C, e.g. "S" or "PA".
    pub tcp_flags: String,
    pub tcp_seq: u32,
    pub tcp_ack: u32,
    pub tcp_window: u16,
    pub icmp_id: u16,
    pub icmp_seq: u16,
    /// ARP operation (`l4 = "arp"`): 1 request (default), 2 reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arp_op: Option<u16>,
    /// ARP sender hardware address; default `eth_src`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arp_sha: Option<String>,
    /// ARP target hardware address; default 00:00:00:00:00:00.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arp_tha: Option<String>,
    pub payload: PayloadSpec,
    /// A whole Ethernet frame as hex (no FCS), e.g. the bytes of a Scapy packet: its headers
    /// become the template (see [`crate::packet::whole_frame`]). Exclusive with the other keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
    /// An encapsulation between the Ethernet header (and its VLAN tags) and the IP packet the
    /// other keys describe (see [`crate::packet::tunnel`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelSpec>,
    /// Header fields set by hand, as users send them to test a device's error counters
    /// (see [`crate::packet::hand`]): written as given over what gapless computes.
    #[serde(skip_serializing_if = "HandSpec::is_empty")]
    pub hand: HandSpec,
}

/// `[stream.template.hand]`: versions, lengths, protocol numbers and checksums sent as given
/// instead of computed. Every other byte of the frame is built as without them, and a
/// checksum left unset is computed over the frame as sent (the hand values included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandSpec {
    /// The EtherType before the IP header (after any VLAN tags).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ether_type: Option<u16>,
    /// The IP version nibble (4 bits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_version: Option<u8>,
    /// IPv4's header length in 32-bit words (4 bits); the header stays 20 bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_header_length: Option<u8>,
    /// IPv4's total length, or IPv6's payload length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_length: Option<u16>,
    /// IPv4's protocol, or IPv6's next header, over the one the layer 4 header has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_protocol: Option<u8>,
    /// IPv4's header checksum: a number, or `"bad"` (the good one plus one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_checksum: Option<HandChecksum>,
    /// UDP's length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l4_length: Option<u16>,
    /// TCP's data offset in 32-bit words (4 bits); the header stays 20 bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_data_offset: Option<u8>,
    /// The UDP, TCP, ICMP or ICMPv6 checksum: a number, or `"bad"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l4_checksum: Option<HandChecksum>,
}

impl HandSpec {
    pub fn is_empty(&self) -> bool {
        *self == HandSpec::default()
    }
}

/// A checksum set by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum HandChecksum {
    /// Sent as this number on every frame.
    Value(u16),
    /// `"bad"`: the good checksum plus one (ones' complement), on every frame.
    Bad(BadWord),
}

/// The word `"bad"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BadWord {
    Bad,
}

/// `[stream.template.tunnel]`: the outer headers of a tunnelled stream. The template's
/// `eth_src`/`eth_dst` and VLAN tags stay the outermost; its IP and L4 keys are the inner
/// packet's, where the field engine, the checksums and the signature work as without a
/// tunnel. The outer IPv4 header's length and checksum, the outer UDP length and GTP-U's
/// length are set per frame; the outer UDP checksum is 0 (RFC 7348, 3GPP TS 29.281).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelSpec {
    pub kind: TunnelKind,
    /// Outer IPv4 or IPv6 addresses (vxlan, gre, gtpv1), both of one version.
    #[serde(default = "default_outer_src")]
    pub ip_src: String,
    #[serde(default = "default_outer_dst")]
    pub ip_dst: String,
    #[serde(default = "default_ttl")]
    pub ttl: u8,
    /// Outer UDP ports (vxlan: to 4789; gtpv1: both 2152 by default).
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// VXLAN network identifier (24 bits).
    #[serde(default)]
    pub vni: u32,
    /// VXLAN only: the inner Ethernet frame carries its own 4-byte FCS at the frame's end
    /// (a CRC-32 over the inner frame), and the inner lengths leave room for it, as ixia-c and
    /// IxNetwork send it. Off by default: RFC 7348's frames carry none.
    #[serde(default)]
    pub inner_fcs: bool,
    /// The inner Ethernet header a VXLAN frame carries.
    #[serde(default = "default_inner_src")]
    pub inner_eth_src: String,
    #[serde(default = "default_inner_dst")]
    pub inner_eth_dst: String,
    /// GTP-U tunnel endpoint id.
    #[serde(default)]
    pub teid: u32,
    /// GRE key (RFC 2890), when set.
    pub gre_key: Option<u32>,
    /// The MPLS label stack, outer first (the last gets bottom-of-stack).
    #[serde(default)]
    pub labels: Vec<MplsLabel>,
}

/// Which tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TunnelKind {
    /// VXLAN (RFC 7348): outer IPv4, UDP, VXLAN, an inner Ethernet header.
    Vxlan,
    /// GRE (RFC 2784): outer IPv4, GRE.
    Gre,
    /// MPLS labels between Ethernet and IP.
    Mpls,
    /// GTP-U (GTPv1, user plane): outer IPv4, UDP, GTP.
    Gtpv1,
}

/// One MPLS label stack entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MplsLabel {
    /// 20 bits.
    pub label: u32,
    /// Traffic class, 3 bits.
    #[serde(default)]
    pub tc: u8,
    #[serde(default = "default_ttl")]
    pub ttl: u8,
}

fn default_outer_src() -> String {
    "198.18.0.1".into()
}
fn default_outer_dst() -> String {
    "198.18.0.2".into()
}
fn default_inner_src() -> String {
    "02:67:6c:00:01:01".into()
}
fn default_inner_dst() -> String {
    "02:67:6c:00:01:02".into()
}
fn default_ttl() -> u8 {
    64
}

impl Default for TemplateSpec {
    fn default() -> Self {
        TemplateSpec {
            eth_src: "02:67:6c:00:00:01".into(),
            eth_dst: "02:67:6c:00:00:02".into(),
            vlan: Vec::new(),
            ip_src: "198.18.0.1".into(),
            ip_dst: "198.18.0.2".into(),
            tos: None,
            dscp: None,
            ecn: None,
            ttl: 64,
            ip_id: 0,
            dont_fragment: true,
            flow_label: 0,
            l4: L4Kind::Udp,
            ip_proto: None,
            src_port: 1024,
            dst_port: 1024,
            tcp_flags: "S".into(),
            tcp_seq: 0,
            tcp_ack: 0,
            tcp_window: 65535,
            icmp_id: 1,
            icmp_seq: 1,
            arp_op: None,
            arp_sha: None,
            arp_tha: None,
            payload: PayloadSpec::default(),
            frame: None,
            tunnel: None,
            ip_options: None,
            hand: HandSpec::default(),
        }
    }
}

/// Transport of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum L4Kind {
    Udp,
    Tcp,
    Icmp,
    /// An ARP packet in place of IP: `ip_src`/`ip_dst` are its sender and target protocol
    /// addresses (IPv4), `arp_op`, `arp_sha` and `arp_tha` the rest; the payload (with the
    /// signature at its end) is the frame's padding after it.
    Arp,
    /// No layer 4 header: the payload (and the signature at its end) follows the IP header,
    /// whose protocol is `ip_proto`. Frames too small for the signature are sent without it
    /// (`signature = false`) and counted by the meter's plan ([`crate::meter::plan`]).
    None,
}

/// One VLAN tag.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VlanSpec {
    pub id: u16,
    #[serde(default)]
    pub pcp: u8,
    #[serde(default)]
    pub dei: bool,
    /// Tag protocol id; default 0x8100, or 0x88a8 for the outer tag of a QinQ pair.
    pub tpid: Option<u16>,
}

/// Payload filler before the signature.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadSpec {
    /// `zeros` (default), `incrementing` (0,1,2,..) or `random` (seeded).
    #[serde(default)]
    pub pattern: Option<String>,
    /// Bytes as hex, repeated to fill the payload, e.g. "deadbeef". Exclusive with `pattern`.
    #[serde(default)]
    pub hex: Option<String>,
    /// Bytes as hex that start the payload, zeros after (cut at the frame's end). Exclusive
    /// with `pattern` and `hex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// Frame-size specification.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum SizeSpec {
    Fixed(u32),
    Table(Box<SizeTable>),
}

/// `size = { ... }`: a distribution or an IMIX.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SizeTable {
    /// A distribution kind, as in [`DistSpec::kind`].
    pub kind: Option<DistKind>,
    pub mean: Option<f64>,
    pub min: Option<u32>,
    pub max: Option<u32>,
    pub shape: Option<f64>,
    pub sigma: Option<f64>,
    pub cv: Option<f64>,
    pub scale: Option<f64>,
    pub spread: Option<f64>,
    pub file: Option<String>,
    /// A preset name (`simple`: 64/570/1518 at 7:4:1; `ipv6`: 78/570/1518 at 7:4:1;
    /// `tolly`: 64/78/576/1518 at 55:5:17:23) or explicit `[[size, weight], ...]`.
    pub imix: Option<ImixSpec>,
    /// `random` (default: each frame drawn) or `sequence` (a fixed interleaved cycle).
    pub order: Option<String>,
    /// Sizes in this order, over and over, e.g. [64, 128, 256, 512, 1024, 1280, 1518].
    pub list: Option<Vec<u32>>,
    /// Sizes from the first to the second by `step`, over and over, e.g. [64, 1518].
    pub ramp: Option<[u32; 2]>,
    /// The ramp's step in bytes (default 1).
    pub step: Option<u32>,
}

/// IMIX by preset name or by weights.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ImixSpec {
    Preset(String),
    Weights(Vec<(u32, u32)>),
}

/// A distribution. For gaps the mean comes from the rate and the remaining parameters are
/// relative (shape-only); for sizes and burst lengths `mean`, `min`, `max` are absolute.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DistSpec {
    pub kind: DistKind,
    /// pareto alpha (> 1), weibull k, gamma k.
    pub shape: Option<f64>,
    /// lognormal sigma.
    pub sigma: Option<f64>,
    /// normal: standard deviation / mean.
    pub cv: Option<f64>,
    /// cauchy: half-width at half-maximum / median.
    pub scale: Option<f64>,
    /// uniform: half-width / mean, in (0, 1]; default 1 (0 .. 2 x mean).
    pub spread: Option<f64>,
    /// empirical: a file with one value a line (ns for gaps), sampled by inversion.
    pub file: Option<String>,
    /// pdf: the density as a formula in one variable, the gap in µs, e.g. "x^2 * exp(-x/3)".
    pub pdf: Option<String>,
    /// pdf: the interval of gaps the density lives on, µs.
    pub support_us: Option<[f64; 2]>,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// Distribution families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DistKind {
    Constant,
    Uniform,
    Exponential,
    Pareto,
    Weibull,
    Gamma,
    Normal,
    Lognormal,
    Cauchy,
    Empirical,
    /// An analytic density (`pdf`, `support_us`), sampled by inversion of its integral.
    Pdf,
}

/// `[stream.timing]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TimingSpec {
    /// Frames per second. Exactly one of the `rate_*` keys.
    pub rate_pps: Option<f64>,
    /// Bits per second at L1 (frame + 20 B preamble and inter-frame gap).
    pub rate_bps_l1: Option<f64>,
    /// Bits per second at L2 (frame with FCS).
    pub rate_bps_l2: Option<f64>,
    /// Percent of the link speed, at L1.
    pub rate_pct: Option<f64>,
    #[serde(default)]
    pub pattern: PatternKind,
    /// For `pattern = "distribution"`: the inter-departure distribution.
    pub dist: Option<DistSpec>,
    /// Frames sent back to back at each departure (default 1).
    pub burst: Option<u32>,
    /// For `bursty`: frames per burst, a number or a distribution table.
    pub burst_size: Option<NumOrDist>,
    /// For `bursty`: the shape of the idle time between bursts (its mean keeps the rate).
    pub off: Option<DistSpec>,
    /// For `bursty`: frame rate inside a burst; default: the burst leaves back to back.
    pub peak_pps: Option<f64>,
    /// Frames to send.
    pub count: Option<u64>,
    /// Seconds to send, from the stream's start.
    pub duration_s: Option<f64>,
    /// Delay of the stream's first departure after the run's start.
    #[serde(default)]
    pub start_offset_ns: u64,
    /// A rate that changes over time: a factor on the stream's rate (1.0 = the rate given).
    pub vary: Option<VarySpec>,
    /// For `self_similar`: the Hurst parameter and how the rate is modulated.
    pub self_similar: Option<SelfSimilarSpec>,
}

/// `[stream.timing.vary]`: the stream's rate times a factor that follows a curve over the
/// stream's time (from its first departure). After a ramp, steps or a trace, the last factor
/// holds.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VarySpec {
    /// `ramp`, `steps`, `sine` or `trace`.
    pub kind: VaryKind,
    /// ramp: the factor at the start and at the end, and the ramp's length.
    pub from: Option<f64>,
    pub to: Option<f64>,
    pub over_s: Option<f64>,
    /// steps: [[time_s, factor], ...] from time 0, each factor held until the next.
    pub steps: Option<Vec<[f64; 2]>>,
    /// sine: 1 + amplitude · sin(2π t / period_s), amplitude in [0, 1].
    pub amplitude: Option<f64>,
    pub period_s: Option<f64>,
    /// trace: a file of `time_s, factor` lines (with rate_pps = 1 the factors are frames/s).
    pub file: Option<String>,
    /// trace: `linear` (default) or `step` between its points.
    pub interpolate: Option<String>,
}

/// Kinds of rate curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VaryKind {
    Ramp,
    Steps,
    Sine,
    Trace,
}

/// `self_similar = { ... }`: a rate whose fluctuations are long-range dependent.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SelfSimilarSpec {
    /// The Hurst parameter, in (0.5, 1). Or `alpha`: H = (3 - alpha) / 2.
    pub hurst: Option<f64>,
    /// The Pareto shape of the on/off construction's periods, in (1, 2).
    pub alpha: Option<f64>,
    /// `fgn` (default: fractional Gaussian noise, Davies–Harte, modulates the rate per slot)
    /// or `onoff` (the aggregate of `sources` Pareto on/off sources).
    pub method: Option<String>,
    /// fgn: the rate's coefficient of variation per slot (default 0.3).
    pub cv: Option<f64>,
    /// fgn: the slot in µs (default 100).
    pub slot_us: Option<f64>,
    /// onoff: the number of sources (default 32).
    pub sources: Option<u32>,
    /// onoff: the frame rate of a source while on (default: 4 × rate / sources).
    pub on_rate_pps: Option<f64>,
    /// onoff: the mean on period, ms (default 10).
    pub mean_on_ms: Option<f64>,
}

/// Departure-time pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternKind {
    #[default]
    Cbr,
    Poisson,
    Bursty,
    Distribution,
    /// Long-range dependent traffic (`self_similar = { hurst = 0.8 }`).
    #[serde(rename = "self_similar")]
    SelfSimilar,
}

/// A number, or a distribution table.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum NumOrDist {
    Num(f64),
    Dist(DistSpec),
}

/// One `[[stream.field]]`: a field that varies per packet.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// `mac_src`, `mac_dst`, `vlan_id`, `vlan_pcp`, `ip_src`, `ip_dst`, `tos`, `dscp`, `ttl`,
    /// `src_port`, `dst_port`, `payload`; a tunnel's `outer_ip_src`, `outer_ip_dst`,
    /// `outer_ttl`, `outer_src_port`, `outer_dst_port`, `vni`, `teid`, `gre_key`, `mpls_label`.
    pub field: String,
    /// `list`, `inc`, `dec` or `random`.
    pub op: String,
    pub values: Option<Vec<FieldValue>>,
    pub from: Option<FieldValue>,
    pub to: Option<FieldValue>,
    /// Increment per packet for inc/dec (default 1).
    pub step: Option<u64>,
    /// Which VLAN tag for vlan_* (0 = outer, default).
    pub vlan: Option<usize>,
    /// Which MPLS label of a tunnel for mpls_label (0 = outer, default).
    pub label: Option<usize>,
    /// Byte offset into the L4 payload, for `payload`.
    pub offset: Option<usize>,
    /// Width in bytes (1, 2, 4 or 8), for `payload`.
    pub width: Option<usize>,
}

/// A field value: a number, or a string (MAC, IP address, hex "0x..").
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum FieldValue {
    Int(u64),
    Str(String),
}

// --- number-or-table deserializers, so that errors inside a table keep serde's message ---

struct NumOrTableVisitor<T>(std::marker::PhantomData<T>);

trait FromNumOrTable: Sized {
    const EXPECT: &'static str;
    fn from_num(n: f64) -> Result<Self, String>;
    fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl<'de, T: FromNumOrTable> Visitor<'de> for NumOrTableVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECT)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::from_num(v as f64).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::from_num(v as f64).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        T::from_num(v).map_err(E::custom)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}

impl FromNumOrTable for SizeSpec {
    const EXPECT: &'static str = "a frame size in bytes (e.g. 64) or a table (e.g. { imix = \"simple\" })";
    fn from_num(n: f64) -> Result<Self, String> {
        if n.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&n) {
            return Err(format!("frame size {n} is not a whole number of bytes"));
        }
        Ok(SizeSpec::Fixed(n as u32))
    }
    fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        SizeTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| SizeSpec::Table(Box::new(t)))
    }
}

impl FromNumOrTable for NumOrDist {
    const EXPECT: &'static str = "a number or a distribution table (e.g. { kind = \"uniform\", min = 1, max = 64 })";
    fn from_num(n: f64) -> Result<Self, String> {
        Ok(NumOrDist::Num(n))
    }
    fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        DistSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(NumOrDist::Dist)
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumOrTableVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for NumOrDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumOrTableVisitor(std::marker::PhantomData))
    }
}

impl ProfileSpec {
    /// Parses a profile from TOML text. `origin` names it in errors (usually the file path).
    pub fn from_toml(text: &str, origin: &str) -> Result<ProfileSpec, ProfileError> {
        toml::from_str(text).map_err(|e| ProfileError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })
    }
}
