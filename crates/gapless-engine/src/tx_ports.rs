//! A run that sends on several ports from one loop ([`RunSpec::more_tx`]) or on a LAG's
//! members ([`RunSpec::lags`]): the checks, and each loop's backend made a [`TxPorts`] over
//! one AF_PACKET socket per port, each opened in its port's namespace, a LAG's port a
//! [`LagTx`] over a socket per member.

use gapless_core::profile::plan::Plan;
use gapless_core::spec::RateControlKind;
use gapless_io::kernel::nic::{iface_info, in_netns};
use gapless_io::tx::afpacket::{AfPacketOptions, AfPacketTx};
use gapless_io::tx::lag::{LagLive, LagTx};
use gapless_io::tx::ports::TxPorts;
use gapless_io::tx::TxBackend;

use crate::spec::{PortRef, RunSpec, TxMethod, TxSocket, TxTarget};
use crate::EngineError;

/// Refuses what several ports on one loop cannot do, before anything is opened.
pub(crate) fn check(spec: &RunSpec) -> Result<(), EngineError> {
    if spec.more_tx.is_empty() && spec.lags.is_empty() {
        return Ok(());
    }
    if let Some(l) = spec
        .lags
        .iter()
        .find(|l| l.port > spec.more_tx.len() || l.more_members.len() >= 64)
    {
        return Err(EngineError::TxPorts(format!(
            "a LAG on port {} of {} with {} members: a LAG is one of the run's ports, of at most 64 members",
            l.port,
            spec.more_tx.len() + 1,
            l.more_members.len() + 1
        )));
    }
    match &spec.target {
        TxTarget::Iface {
            socket: None | Some(TxSocket::AfPacket(TxMethod::Sendmmsg)),
            ..
        } => {}
        _ => {
            return Err(EngineError::TxPorts(
                "need an interface target with AF_PACKET sendmmsg (the default socket)".into(),
            ))
        }
    }
    if spec.tx_stamps.is_some() {
        return Err(EngineError::TxPorts(
            "do not take TX timestamps: ask them of a run with one port".into(),
        ));
    }
    if let Some(&p) = spec.stream_ports.iter().find(|&&p| p > spec.more_tx.len()) {
        return Err(EngineError::TxPorts(format!(
            "stream_ports names port {p}, and there are {} (0 is the target)",
            spec.more_tx.len() + 1
        )));
    }
    Ok(())
}

/// The rate control several ports take: the send loop's own pacing.
pub(crate) fn check_method(spec: &RunSpec, method: RateControlKind) -> Result<(), EngineError> {
    if (spec.more_tx.is_empty() && spec.lags.is_empty()) || method == RateControlKind::Software {
        return Ok(());
    }
    Err(EngineError::TxPorts(format!(
        "are paced by the send loop (rate_control = \"software\"); {method:?} acts on one interface"
    )))
}

/// Loop `w`'s backend: `first` (the target's socket) alone, or with a socket on every
/// other port, each stream of the loop routed to its own.
pub(crate) fn with_more_ports(
    spec: &RunSpec,
    plan: &Plan,
    w: usize,
    first: Box<dyn TxBackend>,
    (max_frame, batch): (usize, usize),
    opts: AfPacketOptions,
) -> Result<Box<dyn TxBackend>, EngineError> {
    let first = as_lag(spec, 0, first, plan, (max_frame, batch), opts)?;
    if spec.more_tx.is_empty() {
        return Ok(first);
    }
    let TxTarget::Iface { name, .. } = &spec.target else {
        unreachable!("checked: several ports need an interface target")
    };
    let mut names = vec![PortRef {
        iface: name.clone(),
        netns: spec.netns.clone(),
    }
    .source()];
    let mut ports = vec![first];
    for (k, p) in spec.more_tx.iter().enumerate() {
        let tx = open(p, plan, (max_frame, batch), opts)?;
        ports.push(as_lag(spec, k + 1, Box::new(tx), plan, (max_frame, batch), opts)?);
        names.push(p.source());
    }
    let of_stream = plan.loops[w]
        .map
        .iter()
        .map(|&s| spec.stream_ports.get(s).copied().unwrap_or(0))
        .collect();
    Ok(Box::new(TxPorts::new(ports, names, of_stream)))
}

/// An AF_PACKET socket on `p`, in its namespace, once every frame is checked against it.
fn open(
    p: &PortRef,
    plan: &Plan,
    (max_frame, batch): (usize, usize),
    opts: AfPacketOptions,
) -> Result<AfPacketTx, EngineError> {
    let profile = &plan.profile;
    let iface = p.iface.clone();
    Ok(in_netns(p.netns.as_deref(), move || {
        let info = iface_info(&iface)?;
        crate::frame_check::check_frames(profile, &info, TxSocket::AfPacket(TxMethod::Sendmmsg))?;
        AfPacketTx::open(&iface, max_frame, batch, opts)
    })?)
}

/// Port `port`'s backend, `first`, as its LAG's member 0 under a [`LagTx`] with a socket on
/// every other member; `first` alone when the port is no LAG.
fn as_lag(
    spec: &RunSpec,
    port: usize,
    first: Box<dyn TxBackend>,
    plan: &Plan,
    sizes: (usize, usize),
    opts: AfPacketOptions,
) -> Result<Box<dyn TxBackend>, EngineError> {
    let Some(lag) = spec.lags.iter().find(|l| l.port == port) else {
        return Ok(first);
    };
    let mut members = vec![first];
    for p in &lag.more_members {
        members.push(Box::new(open(p, plan, sizes, opts)?));
    }
    let live = lag
        .live
        .clone()
        .unwrap_or_else(|| std::sync::Arc::new(LagLive::all(members.len())));
    if live.members() != members.len() {
        return Err(EngineError::TxPorts(format!(
            "a LAG of {} members whose live state counts {}",
            members.len(),
            live.members()
        )));
    }
    Ok(Box::new(LagTx::new(members, live, sizes.0, sizes.1)))
}
