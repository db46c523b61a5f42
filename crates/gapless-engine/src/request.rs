//! Requests as plain data, for front ends that take keywords or JSON (Python, HTTP): a
//! [`RunRequest`], an [`AnalyzeRequest`], a [`MeasureRequest`], a [`CalibrateRequest`].
//! Each is serde with unknown keys refused, names its options as the CLI's flags without
//! the dashes, and maps to the engine's spec with the checks the CLI makes. The CLI maps its
//! clap types (they carry its help text) into these too, so every front end ends in one
//! mapping to the engine's specs.

use std::path::PathBuf;
use std::time::Duration;

use gapless_core::spec::RateControlKind;
use gapless_io::rx::RxTimestamps;
use gapless_io::xdp::program::{XdpAttach, XdpStamp};
use gapless_io::xdp::XdpMode;
use serde::{Deserialize, Serialize};

use crate::metering::{load_calibration, targets_from_file};
use crate::spec::{
    MeterSetup, Pacing, ProfileSource, RunSpec, RxPort, RxSocket, RxSpec, TxMethod, TxSocket, TxStampKind, TxTarget,
};
use crate::{AnalyzeSpec, CalibrationSpec, EngineError, MeasureSpec};

/// The socket that sends on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendName {
    Afpacket,
    Afxdp,
}

/// How AF_PACKET hands frames to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TxMethodName {
    #[default]
    Sendmmsg,
    Ring,
}

/// AF_XDP's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpModeName {
    #[default]
    Auto,
    Copy,
    Zerocopy,
}

/// Which clock stamps a frame: the kernel's (software) or the NIC's (hardware).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StampName {
    #[default]
    Software,
    Kernel,
    Hardware,
}

/// How the XDP program is attached for an AF_XDP meter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpAttachName {
    #[default]
    Auto,
    Native,
    Generic,
}

/// Where an AF_XDP meter's RX stamps come from (see [`XdpStamp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpStampName {
    #[default]
    Auto,
    Metadata,
    Prefix,
    Socket,
}

/// Keys a request did not know: serde's `deny_unknown_fields` does not work across
/// `flatten`, so each request collects them here and [`Unknown::check`] refuses them.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Unknown(std::collections::BTreeMap<String, serde::de::IgnoredAny>);

impl Unknown {
    /// An error naming the first unknown key and the keys request type `R` takes. They are
    /// read from `R`'s serialized default (flattened parts included), so the list cannot
    /// drift from its fields.
    pub fn check<R: Serialize + Default>(&self, what: &'static str) -> Result<(), EngineError> {
        let Some(key) = self.0.keys().next() else {
            return Ok(());
        };
        let known = match serde_json::to_value(R::default()) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect::<Vec<_>>().join(", "),
            _ => String::new(),
        };
        Err(EngineError::UnknownOption {
            what,
            key: key.clone(),
            known,
        })
    }
}

/// A duration option, if given, must be a positive number of seconds.
fn check_duration(d: Option<f64>) -> Result<(), EngineError> {
    match d {
        Some(d) if !(d.is_finite() && d > 0.0) => Err(out_of_range("duration (s)", d, "a positive number of seconds")),
        _ => Ok(()),
    }
}

/// The meter's socket and how it is stamped.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct RxPath {
    /// `afpacket` (default) or `afxdp`.
    pub rx_backend: Option<BackendName>,
    pub rx_queue: u32,
    pub xdp_attach: XdpAttachName,
    /// `auto` (default: the first of the others this kernel's verifier takes), `metadata`,
    /// `prefix` or `socket`.
    pub xdp_stamp: XdpStampName,
    /// `software` (default) or `hardware`.
    pub timestamps: StampName,
}

impl RxPath {
    fn socket(&self) -> RxSocket {
        match self.rx_backend {
            Some(BackendName::Afxdp) => RxSocket::AfXdp {
                queue: self.rx_queue,
                attach: match self.xdp_attach {
                    XdpAttachName::Auto => XdpAttach::Auto,
                    XdpAttachName::Native => XdpAttach::Native,
                    XdpAttachName::Generic => XdpAttach::Generic,
                },
                stamp: match self.xdp_stamp {
                    XdpStampName::Auto => XdpStamp::Auto,
                    XdpStampName::Metadata => XdpStamp::Metadata,
                    XdpStampName::Prefix => XdpStamp::Prefix,
                    XdpStampName::Socket => XdpStamp::Socket,
                },
            },
            _ => RxSocket::AfPacket,
        }
    }

    fn stamps(&self) -> RxTimestamps {
        match self.timestamps {
            StampName::Hardware => RxTimestamps::Hardware,
            _ => RxTimestamps::Software,
        }
    }

    fn rx_spec(&self, iface: &str, netns: Option<String>, meter: MeterSetup) -> RxSpec {
        RxSpec {
            netns,
            socket: self.socket(),
            timestamps: self.stamps(),
            meter,
            ..RxSpec::new(iface)
        }
    }
}

/// What every meter takes.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct MeterRequest {
    pub target_pps: Option<f64>,
    pub latency_unit_ns: u64,
    /// A calibration file from a calibration run.
    pub calibration: Option<PathBuf>,
    pub use_invalid_calibration: bool,
    pub signed_only: bool,
    /// Seconds at the start not metered (counted as warm-up).
    pub warmup: f64,
}

impl Default for MeterRequest {
    fn default() -> Self {
        MeterRequest {
            target_pps: None,
            latency_unit_ns: 10,
            calibration: None,
            use_invalid_calibration: false,
            signed_only: false,
            warmup: 0.0,
        }
    }
}

fn out_of_range(what: &'static str, value: f64, want: &'static str) -> EngineError {
    EngineError::OutOfRange { what, value, want }
}

impl MeterRequest {
    /// The meter's setup, the calibration read and checked.
    pub fn setup(&self) -> Result<MeterSetup, EngineError> {
        if !(self.warmup.is_finite() && (0.0..=86_400.0).contains(&self.warmup)) {
            return Err(out_of_range("warm-up (s)", self.warmup, "0 to 86400 seconds"));
        }
        let calibration = match &self.calibration {
            Some(p) => Some((load_calibration(p)?, p.display().to_string())),
            None => None,
        };
        let s = MeterSetup {
            target_pps: self.target_pps,
            latency_unit_ns: self.latency_unit_ns,
            calibration,
            use_invalid_calibration: self.use_invalid_calibration,
            signed_only: self.signed_only,
            latency: true,
            warmup_ns: (self.warmup * 1e9).round() as u64,
        };
        s.check()?;
        Ok(s)
    }
}

/// A run, as keywords: where it sends, how, and what meters it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct RunRequest {
    /// Send on this interface.
    pub iface: Option<String>,
    /// Write a nanosecond pcap of the scheduled departures.
    pub out: Option<PathBuf>,
    /// Build frames and drop them.
    pub null: bool,
    pub netns: Option<String>,
    /// Stop every stream after this many seconds.
    pub duration: Option<f64>,
    pub seed: Option<u64>,
    /// Software pacing: None = on for interfaces, off for files.
    pub pace: Option<bool>,
    pub backend: Option<BackendName>,
    pub tx_method: TxMethodName,
    pub xdp_mode: XdpModeName,
    pub xdp_queue: u32,
    pub rate_control: Option<RateControlKind>,
    /// TX timestamps: `kernel` or `hardware`.
    pub tx_timestamps: Option<StampName>,
    pub batch: Option<usize>,
    pub cores: Vec<usize>,
    pub core: Option<usize>,
    pub split_cbr: bool,
    pub rt_priority: Option<u32>,
    /// Meter on this interface while sending.
    pub rx: Option<String>,
    pub rx_netns: Option<String>,
    /// More ports the meter reads as one, each `[NETNS/]IFACE` (a failover's backup).
    pub rx_also: Vec<String>,
    pub rx_core: Option<usize>,
    /// Seconds to keep metering after the last frame (default 0.5).
    pub rx_linger: Option<f64>,
    /// Link and route changes during the run, in their text form (`crate::events`), e.g.
    /// "1.2s link down gl-dut/gl-dut1".
    pub events: Vec<String>,
    #[serde(flatten)]
    pub rx_path: RxPath,
    #[serde(flatten)]
    pub meter: MeterRequest,
    /// Keys no part took (an error).
    #[serde(flatten, skip_serializing)]
    pub unknown: Unknown,
}

impl RunRequest {
    /// The engine's spec for `profile`, checked as the CLI checks its flags.
    pub fn spec(&self, mut profile: ProfileSource) -> Result<RunSpec, EngineError> {
        self.unknown.check::<RunRequest>("a run")?;
        check_duration(self.duration)?;
        if let Some(d) = self.duration {
            profile.spec.duration_s = Some(d);
        }
        profile.spec.seed = self.seed.or(profile.spec.seed);
        if let Some(p) = self.rt_priority {
            if !(1..=99).contains(&p) {
                return Err(out_of_range("real-time priority", p as f64, "1 to 99"));
            }
        }
        let target = self.target(&profile)?;
        let netns = self
            .netns
            .clone()
            .or(profile.spec.output.as_ref().and_then(|o| o.netns.clone()));
        Ok(RunSpec {
            netns,
            pacing: match self.pace {
                None => Pacing::Auto,
                Some(true) => Pacing::On,
                Some(false) => Pacing::Off,
            },
            batch: self.batch.unwrap_or(1),
            cores: self.cores.clone(),
            core: self.core,
            split_cbr: self.split_cbr,
            rt_priority: self.rt_priority,
            rx: self.rx_spec()?,
            rate_control: self.rate_control,
            tx_stamps: self.tx_timestamps.map(|t| match t {
                StampName::Hardware => TxStampKind::Hardware,
                _ => TxStampKind::Kernel,
            }),
            warmup: (self.meter.warmup > 0.0).then(|| Duration::from_secs_f64(self.meter.warmup)),
            events: self
                .events
                .iter()
                .map(|e| crate::events::EventSpec::parse(e))
                .collect::<Result<_, _>>()?,
            ..RunSpec::new(profile, target)
        })
    }

    /// The target: the request first, then the profile's `[output]`.
    fn target(&self, src: &ProfileSource) -> Result<TxTarget, EngineError> {
        let out = src.spec.output.clone().unwrap_or_default();
        let asked = self.iface.is_some() || self.out.is_some() || self.null;
        if [self.iface.is_some(), self.out.is_some(), self.null]
            .iter()
            .filter(|x| **x)
            .count()
            > 1
        {
            return Err(EngineError::TargetConflict);
        }
        let iface = self.iface.clone().or(if asked { None } else { out.iface });
        let pcap = self
            .out
            .clone()
            .or(if asked { None } else { out.pcap.map(PathBuf::from) });
        Ok(match (iface, pcap) {
            (Some(name), _) => TxTarget::Iface {
                name,
                socket: Some(self.socket(out.backend)),
            },
            (None, Some(p)) => TxTarget::Pcap(p),
            _ if self.null || out.null => TxTarget::Null,
            _ => return Err(EngineError::NoTarget),
        })
    }

    fn socket(&self, profile: Option<gapless_core::spec::BackendKind>) -> TxSocket {
        let xdp = TxSocket::AfXdp {
            mode: match self.xdp_mode {
                XdpModeName::Auto => XdpMode::Auto,
                XdpModeName::Copy => XdpMode::Copy,
                XdpModeName::Zerocopy => XdpMode::ZeroCopy,
            },
            queue: self.xdp_queue,
        };
        match (self.backend, profile) {
            (Some(BackendName::Afxdp), _) | (None, Some(gapless_core::spec::BackendKind::Afxdp)) => xdp,
            _ => TxSocket::AfPacket(match self.tx_method {
                TxMethodName::Sendmmsg => TxMethod::Sendmmsg,
                TxMethodName::Ring => TxMethod::Ring,
            }),
        }
    }

    fn rx_spec(&self) -> Result<Option<RxSpec>, EngineError> {
        let Some(iface) = &self.rx else {
            if self.rx_netns.is_some() || self.rx_core.is_some() || !self.rx_also.is_empty() {
                return Err(EngineError::RxOptionWithoutRx);
            }
            return Ok(None);
        };
        let linger = self.rx_linger.unwrap_or(0.5);
        if !(linger.is_finite() && linger >= 0.0) {
            return Err(out_of_range("RX linger (s)", linger, "a number of seconds, 0 or more"));
        }
        let more: Vec<RxPort> = self.rx_also.iter().map(|p| RxPort::parse(p)).collect();
        let same = |a: &str, n: Option<&String>| a == iface && n == self.rx_netns.as_ref();
        if let Some(p) = more
            .iter()
            .find(|p| p.iface.is_empty() || same(&p.iface, p.netns.as_ref()))
        {
            return Err(EngineError::BadRxPort(p.iface.clone()));
        }
        if self.rx_also.len() >= gapless_io::rx::ports::RxPorts::MAX {
            return Err(out_of_range(
                "number of RX ports",
                self.rx_also.len() as f64 + 1.0,
                "1 to 255",
            ));
        }
        Ok(Some(RxSpec {
            core: self.rx_core,
            linger: Duration::from_secs_f64(linger),
            more,
            ..self.rx_path.rx_spec(iface, self.rx_netns.clone(), self.meter.setup()?)
        }))
    }
}

/// An offline meter over a capture or a CSV of timestamps.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct AnalyzeRequest {
    pub file: PathBuf,
    /// A profile or a run's result file: names and targets of the streams.
    pub profile: Option<PathBuf>,
    /// Latency from the signatures' TX times (default on).
    pub latency: Option<bool>,
    #[serde(flatten)]
    pub meter: MeterRequest,
    /// Keys no part took (an error).
    #[serde(flatten, skip_serializing)]
    pub unknown: Unknown,
}

impl AnalyzeRequest {
    pub fn spec(&self) -> Result<AnalyzeSpec, EngineError> {
        self.unknown.check::<AnalyzeRequest>("an analysis")?;
        let mut meter = self.meter.setup()?;
        meter.latency = self.latency.unwrap_or(true);
        Ok(AnalyzeSpec {
            file: self.file.clone(),
            targets: self.profile.as_deref().map(targets_from_file).transpose()?,
            meter,
        })
    }
}

/// A live meter on an interface.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct MeasureRequest {
    pub iface: String,
    pub netns: Option<String>,
    /// Stop after this many seconds (None: when stopped).
    pub duration: Option<f64>,
    /// A profile or a run's result file: names and targets of the streams.
    pub profile: Option<PathBuf>,
    /// Core for the meter loop.
    pub core: Option<usize>,
    #[serde(flatten)]
    pub rx_path: RxPath,
    #[serde(flatten)]
    pub meter: MeterRequest,
    /// Keys no part took (an error).
    #[serde(flatten, skip_serializing)]
    pub unknown: Unknown,
}

impl MeasureRequest {
    pub fn spec(&self) -> Result<MeasureSpec, EngineError> {
        self.unknown.check::<MeasureRequest>("a meter")?;
        check_duration(self.duration)?;
        Ok(MeasureSpec {
            rx: RxSpec {
                core: self.core,
                ..self
                    .rx_path
                    .rx_spec(&self.iface, self.netns.clone(), self.meter.setup()?)
            },
            targets: self.profile.as_deref().map(targets_from_file).transpose()?,
            duration: self.duration.map(Duration::from_secs_f64),
            warmup: None,
        })
    }
}

/// A calibration over a direct link.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct CalibrateRequest {
    pub tx: String,
    pub rx: String,
    pub tx_netns: Option<String>,
    pub rx_netns: Option<String>,
    pub rate_pps: f64,
    pub duration: f64,
    pub core: Option<usize>,
    #[serde(flatten)]
    pub rx_path: RxPath,
    /// Keys no part took (an error).
    #[serde(flatten, skip_serializing)]
    pub unknown: Unknown,
}

impl Default for CalibrateRequest {
    fn default() -> Self {
        CalibrateRequest {
            tx: String::new(),
            rx: String::new(),
            tx_netns: None,
            rx_netns: None,
            rate_pps: 10_000.0,
            duration: 5.0,
            core: None,
            rx_path: RxPath::default(),
            unknown: Unknown::default(),
        }
    }
}

impl CalibrateRequest {
    pub fn spec(&self) -> Result<CalibrationSpec, EngineError> {
        self.unknown.check::<CalibrateRequest>("a calibration")?;
        Ok(CalibrationSpec {
            tx: self.tx.clone(),
            tx_netns: self.tx_netns.clone(),
            rx: self
                .rx_path
                .rx_spec(&self.rx, self.rx_netns.clone(), MeterSetup::default()),
            rate_pps: self.rate_pps,
            duration_s: self.duration,
            core: self.core,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(json: &str) -> RunRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn every_part_takes_its_keys_and_only_unknown_ones_are_left() {
        let r = run(r#"{"iface": "a", "target_pps": 5, "timestamps": "hardware", "rx_queue": 2, "nope": 1}"#);
        assert_eq!(r.iface.as_deref(), Some("a"));
        assert_eq!((r.meter.target_pps, r.rx_path.rx_queue), (Some(5.0), 2));
        assert_eq!(r.rx_path.timestamps, StampName::Hardware);
        let keys: Vec<_> = r.unknown.0.keys().cloned().collect();
        assert_eq!(keys, ["nope"]);
        let e = r.unknown.check::<RunRequest>("a run").unwrap_err().to_string();
        assert!(
            e.contains("unknown option \"nope\"") && e.contains("target_pps"),
            "got {e}"
        );
        // The list is every field, the flattened parts' included, and nothing else.
        for k in [
            "iface",
            "rx_linger",
            "xdp_attach",
            "timestamps",
            "warmup",
            "calibration",
        ] {
            assert!(
                e.contains(&format!(" {k},")) || e.ends_with(&format!(" {k}")),
                "{k} missing from {e}"
            );
        }
        assert!(!e.contains("unknown,"), "got {e}");
        assert!(run(r#"{"null": true, "warmup": 1.5}"#).unknown.0.is_empty());
    }

    #[test]
    fn targets_are_one_of_iface_pcap_and_null() {
        let src = || ProfileSource {
            spec: gapless_core::ProfileSpec::from_toml("[[stream]]\n[stream.timing]\nrate_pps = 1\ncount = 1\n", "t")
                .unwrap(),
            dir: ".".into(),
            label: "t".into(),
        };
        let e = run(r#"{"null": true, "out": "x.pcap"}"#).spec(src()).unwrap_err();
        assert!(matches!(e, EngineError::TargetConflict), "got {e}");
        assert!(matches!(run("{}").spec(src()).unwrap_err(), EngineError::NoTarget));
        let e = run(r#"{"null": true, "rx_netns": "x"}"#).spec(src()).unwrap_err();
        assert!(matches!(e, EngineError::RxOptionWithoutRx), "got {e}");
        let s = run(r#"{"null": true, "duration": 2, "seed": 9}"#).spec(src()).unwrap();
        assert_eq!((s.target, s.profile.spec.seed), (TxTarget::Null, Some(9)));
    }
}
