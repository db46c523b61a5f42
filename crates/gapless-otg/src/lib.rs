//! # gapless-otg
//!
//! The Open Traffic Generator mapping, sans IO: what every OTG transport of gapless calls.
//! HTTP and HTTPS (`gapless serve --otg-listen`), gRPC and the agent API differ only in how
//! a request arrives and a reply leaves; the meaning of a request is here, once.
//!
//! ```text
//! OTG config (JSON)
//!   -> config::plan          one gapless profile per TX port, a stream per flow
//!   -> runs::check           every profile compiles, or the config is refused
//!   -> runs::port_run        a run request per TX port (RunSpec + what the run table keeps)
//! run snapshot / result (JSON)
//!   -> metrics::from_snapshot / metrics::from_result -> metrics::flow_json, port_metrics
//! any fault
//!   -> error::OtgError       {code, kind, errors}; each transport sends it its own way
//! ```
//!
//! Twelve modules, by concern, each importing only those before it:
//! - [`error`]: every fault as `{code, kind, errors}`.
//! - [`frr`]: what the routing protocols share on FRR's side: the allow-list every request
//!   string passes ([`frr::gate`]), vty commands built under a name and replies read by it
//!   ([`frr::vty`]).
//! - [`devices`]: device Ethernets and addresses as emulated hosts.
//! - [`flows`]: a flow's packet and flow-level fields: the model's fields and their gate
//!   ([`flows::model`]), header patterns ([`flows::patterns`]), tunnels, size and IMIX,
//!   payload and gaps, metric tags, and the totals over a config ([`flows::bounds`]).
//! - [`bgp`], [`isis`], [`ospf`]: routing on devices as FRR configurations, FRR's answers as
//!   metrics and states; [`lldp`]: LLDPDUs built and decoded; [`lag`]: `lags[]` read and
//!   checked, and LACP's PDUs and 802.1AX machines ([`lag::lacp`]).
//! - [`config`]: an OTG config planned ([`config::plan`]) from all of the above, with its
//!   captures, hand-set fields, `update_config` and the frame preview.
//! - [`metrics`]: snapshots and results as OTG metrics, convergence, tagged metrics.
//! - [`runs`]: a plan as run requests, request bodies ([`runs::requests`]) and a config split
//!   over agents ([`runs::shares`]).
//!
//! The state a server keeps (the config set last, the runs its traffic started) and the
//! run table are the server's: this crate never starts, stops or stores anything.

pub mod bgp;
pub mod config;
pub mod devices;
pub mod error;
pub mod flows;
pub mod frr;
pub mod isis;
pub mod lag;
pub mod lldp;
pub mod metrics;
pub mod ospf;
pub mod runs;

pub use error::{Invalid, OtgError};

/// The one OTG models release this implementation speaks: the `otg.proto` it reads every
/// request through (`crates/gapless-serve/proto/otg.fds`, from snappi 1.62.0's wheel by
/// `scripts/otg_descriptor.py`). snappi checks its own version against it.
pub const API_SPEC_VERSION: &str = "1.62.0";
