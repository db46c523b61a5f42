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
//! Modules, each importing only those before it: [`error`], [`frr_gate`] (the allow-list every request string passes before FRR), [`vty`] (a daemon's commands, each under a name, and its replies read by that name), [`patterns`] (OTG header-field
//! patterns as field-engine ops), [`devices`] (emulated hosts), [`tunnels`] (a flow's tunnel header as the template's
//! `tunnel`), [`bounds`] (totals over a config: routes per protocol, random values), [`size`] (a flow's size: fixed, ramps, uniform, IMIX), [`flow_level`] (payload, delays, gaps, metrics options: applied or refused), [`config`], [`captures`] (a config's captures, the capture request), [`requests`],
//! [`update`] (`update_config`: a flow's rate or size changed), [`bgp`], [`isis`] and [`ospf`] (routing
//! protocols on devices as FRR configurations, FRR's answers as metrics and states), [`lldp`]
//! (LLDPDUs built and decoded), [`lacp`] (LACPDUs and one member's 802.1AX machines),
//! [`lag`] (`lags[]` read and checked: members, protocol, the zero defaults), [`runs`], [`shares`] (a config
//! whose ports are on agents, split into each agent's share), [`metrics`], [`convergence`]
//! (outages and the events that caused them as the model's convergence metrics).
//! The state a server keeps (the config set last, the runs its traffic started) and the
//! run table are the server's: this crate never starts, stops or stores anything.

pub mod bgp;
pub mod bounds;
pub mod captures;
pub mod config;
pub mod convergence;
pub mod devices;
pub mod error;
pub mod flow_level;
#[cfg(test)]
mod frr_dry;
#[cfg(test)]
mod frr_fuzz;
pub mod frr_gate;
pub mod isis;
pub mod lacp;
pub mod lag;
pub mod lldp;
pub mod metrics;
pub mod model;
pub mod ospf;
pub mod patterns;
pub mod requests;
pub mod runs;
pub mod shares;
pub mod size;
pub mod tagged;
pub mod tags;
pub mod tunnels;
pub mod update;
pub mod vty;

pub use error::{Invalid, OtgError};

/// The one OTG models release this implementation speaks: the `otg.proto` it reads every
/// request through (`crates/gapless-serve/proto/otg.fds`, from snappi 1.62.0's wheel by
/// `scripts/otg_descriptor.py`). snappi checks its own version against it.
pub const API_SPEC_VERSION: &str = "1.62.0";
