//! The OTG YANG models' state trees for gNMI (issue 59), sans IO: the schema every path is
//! checked against ([`schema`], from the models at one pinned commit), gNMI paths with their
//! keys and wildcards ([`path`]), and the leaves of the trees with values typed as their YANG
//! leaves are ([`state`]), made from the same `monitor/metrics` JSON the OTG API answers, so
//! the two can never disagree. The server that speaks gNMI is not here.

pub mod path;
pub mod schema;
pub mod state;
