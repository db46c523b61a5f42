//! A flow's packet and its flow-level fields, sans IO: every header field of the model with
//! how gapless takes it and the gate that refuses the rest by its path ([`model`]), header
//! patterns as field-engine ops ([`patterns`]), a flow's tunnel as the template's `tunnel`
//! ([`tunnels`]), its size with IMIX ([`size`]), payload, delays, gaps and metrics options
//! ([`flow_level`]), metric tags placed in the frame ([`tags`]), and the totals over a config
//! checked before planning ([`bounds`]). [`crate::config`] plans a config from them.

pub mod bounds;
pub mod flow_level;
pub mod model;
pub mod patterns;
pub mod size;
pub mod tags;
pub mod tunnels;
