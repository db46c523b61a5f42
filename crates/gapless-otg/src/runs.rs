//! A planned config as engine run requests: one run per TX port, a stream per flow, the
//! flows a `control/state` names picked out.

use gapless_engine::request::RunRequest;
use gapless_engine::{ProfileSource, RunSpec};
use serde_json::{json, Value};

use crate::config::{Group, Plan};
use crate::error::OtgError;

/// A run to start for one TX port: what the run table stores and what the engine runs.
pub struct PortRun {
    /// The label the run is listed under: `otg:PORT`.
    pub profile: String,
    /// The profile as TOML, as the run table keeps it.
    pub toml: String,
    /// Where it sends and meters, for the run table.
    pub target: Value,
    pub spec: RunSpec,
}

/// The group's profile, parsed.
pub fn source(g: &Group) -> Result<ProfileSource, OtgError> {
    let spec: gapless_core::ProfileSpec = serde_path_to_error::deserialize(g.profile.clone()).map_err(|e| {
        OtgError::internal(format!(
            "port {}: the profile made from the config does not parse: {e}",
            g.tx.name
        ))
    })?;
    Ok(ProfileSource {
        spec,
        dir: std::path::PathBuf::new(),
        label: format!("otg:{}", g.tx.name),
    })
}

/// Compiles every port's profile, so a config that cannot run is refused when it is set.
pub fn check(plan: &Plan) -> Result<(), OtgError> {
    for g in &plan.groups {
        compiled(g)?;
    }
    Ok(())
}

/// The group's profile compiled (as [`check`] compiles it).
pub fn compiled(g: &Group) -> Result<gapless_core::Profile, OtgError> {
    source(g)?
        .compile(None)
        .map_err(|e| OtgError::invalid(format!("port {}: {e}", g.tx.name)))
}

/// An error naming the first flow that the config does not have.
pub fn check_flows(plan: &Plan, names: &[String]) -> Result<(), OtgError> {
    match names.iter().find(|n| !plan.flows.iter().any(|f| &f.0 == *n)) {
        Some(n) => Err(OtgError::invalid(format!("flow_names: no flow named {n:?}"))),
        None => Ok(()),
    }
}

/// The group with only the flows named (None if none of its flows are).
pub fn subset(g: &Group, names: &[String]) -> Option<Group> {
    if names.is_empty() {
        return Some(g.clone());
    }
    let keep: Vec<usize> = (0..g.flows.len()).filter(|i| names.contains(&g.flows[*i])).collect();
    if keep.is_empty() {
        return None;
    }
    let mut out = g.clone();
    out.flows = keep.iter().map(|i| g.flows[*i].clone()).collect();
    out.needs = keep.iter().map(|i| g.needs[*i].clone()).collect();
    let streams = g.profile["stream"].as_array().cloned().unwrap_or_default();
    out.profile["stream"] = json!(keep.iter().map(|i| streams[*i].clone()).collect::<Vec<_>>());
    Some(out)
}

/// The run that sends a group's flows from its TX port and meters them on its RX port.
pub fn port_run(g: &Group) -> Result<PortRun, OtgError> {
    let src = source(g)?;
    let toml = toml::to_string(&src.spec).unwrap_or_default();
    let mut req = RunRequest {
        iface: Some(g.tx.iface.clone()),
        netns: g.tx.netns.clone(),
        ..RunRequest::default()
    };
    if let Some((rx, more)) = g.rx.split_first() {
        req.rx = Some(rx.iface.clone());
        req.rx_netns = rx.netns.clone();
        req.rx_also = more
            .iter()
            .map(|p| match &p.netns {
                Some(n) => format!("{n}/{}", p.iface),
                None => p.iface.clone(),
            })
            .collect();
    }
    let mut target = json!({ "otg_port": g.tx.name, "iface": req.iface, "netns": req.netns, "rx": req.rx, "rx_netns": req.rx_netns });
    if !req.rx_also.is_empty() {
        target["rx_also"] = json!(req.rx_also);
    }
    let spec = req
        .spec(src)
        .map_err(|e| OtgError::invalid(format!("port {}: {e}", g.tx.name)))?;
    Ok(PortRun {
        profile: format!("otg:{}", g.tx.name),
        toml,
        target,
        spec,
    })
}
