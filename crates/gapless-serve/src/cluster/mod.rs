//! The controller of a run across hosts: a config whose ports are on gapless agents
//! (`HOST:PORT/IFACE`) is split into shares ([`gapless_otg::runs::shares`]); the agents are
//! checked when the config is set ([`client`]: reachable, proving the token), and a traffic
//! start prepares every share, fixes one start time T0, and starts every agent at T0 on its
//! own clock. A thread of its own ([`watch`]) then polls the agents (renewing their leases),
//! notices a lost one within [`LOST_AFTER`], and merges what they measured ([`merge`]) into
//! one result in the run table.

pub mod client;
pub mod experiment;
pub mod merge;
mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gapless_core::timing::clocks::{ClockState, Offset};
use gapless_otg::runs::shares::{self, Share};
use gapless_otg::{config::Plan, OtgError};
use serde_json::{json, Value};

use crate::jobs::lock;
use crate::Shared;
use client::Agent;

/// An agent's lease: it stops its share by itself when not polled for this long.
pub const LEASE: Duration = Duration::from_millis(3000);
/// An agent that has not answered for this long is lost: with polls every 200 ms that time
/// out after 500 ms, its ports are marked 1.0 to 1.5 s after it went silent.
pub const LOST_AFTER: Duration = Duration::from_millis(1000);
/// How often the agents are polled.
pub const POLL_EVERY: Duration = Duration::from_millis(200);
/// Clock exchanges per agent at each start.
const EXCHANGES: usize = 16;
/// T0 is at least this far ahead when it is fixed.
const T0_AHEAD: Duration = Duration::from_millis(100);

/// A config across hosts, as set: its agents, connected and verified.
pub struct Cluster {
    pub agents: Vec<Arc<Agent>>,
    /// The run going on, or the last one.
    pub run: Mutex<Option<Arc<ClusterRun>>>,
}

/// One agent in a run: its clock against the controller's, and what it last said.
pub struct Member {
    pub agent: Arc<Agent>,
    pub share: Share,
    pub offset: Offset,
    pub clock: ClockState,
    /// The last poll's answer (its final state once stopped).
    pub last: Mutex<Value>,
    /// Why it was lost, if it was.
    pub lost: Mutex<Option<String>>,
}

impl Member {
    /// What it said last.
    pub fn said(&self) -> std::sync::MutexGuard<'_, Value> {
        lock(&self.last)
    }

    /// Why it was lost, if it was.
    pub fn lost_why(&self) -> Option<String> {
        lock(&self.lost).clone()
    }

    /// Its start on its own clock: T0, moved by its measured offset when `moved`
    /// ([`translated`]).
    pub fn start_ns(&self, t0: i64, moved: bool) -> i64 {
        t0 + if moved { self.offset.offset_ns } else { 0 }
    }

    pub fn set_lost(&self, why: String) {
        *lock(&self.lost) = Some(why);
    }
}

/// A run across hosts going on (or ended).
pub struct ClusterRun {
    pub id: i64,
    pub run: String,
    pub t0_ns: i64,
    pub members: Vec<Member>,
    pub stop: AtomicBool,
    pub ended: AtomicBool,
    /// `finished`, `stopped`, `agent_lost`, once ended.
    pub ending: Mutex<Option<String>>,
    /// When the start was asked, ns on this host's clock: T0 − this is the set-up time.
    pub asked_ns: i64,
    /// Poll rounds made (each a snapshot of every agent).
    pub polls: std::sync::atomic::AtomicU64,
    pub plan: Plan,
}

impl Cluster {
    /// Whether its run is going on.
    pub fn running(&self) -> bool {
        self.current().is_some_and(|r| !r.ended.load(Ordering::Acquire))
    }

    fn current(&self) -> Option<Arc<ClusterRun>> {
        lock(&self.run).clone()
    }

    /// Asks the run going on to stop.
    pub fn stop(&self) {
        if let Some(r) = self.current() {
            r.stop.store(true, Ordering::Release);
        }
    }

    /// The ports of the agents the current run lost, each with why.
    pub fn lost_ports(&self) -> Vec<(String, String)> {
        let Some(r) = self.current() else { return Vec::new() };
        let mut out = Vec::new();
        for m in &r.members {
            let Some(why) = m.lost_why() else {
                continue;
            };
            let ports = m
                .share
                .tx
                .iter()
                .map(|t| &t.port)
                .chain(m.share.rx.iter().map(|x| &x.port));
            out.extend(ports.map(|p| (p.clone(), format!("agent {}: {why}", m.agent.addr))));
        }
        out
    }

    /// Every flow's figures: the run's merged counts, or zeros before any run.
    pub fn figures(&self, plan: &Plan) -> Vec<gapless_otg::metrics::FlowFigures> {
        match self.current() {
            Some(r) => merge::figures(&r),
            None => plan
                .flows
                .iter()
                .map(|(n, t, x)| (n.clone(), t.clone(), x[0].clone(), Default::default()))
                .collect(),
        }
    }
}

/// Checks every agent of a config that spans hosts, or refuses it naming the agent.
pub fn connect(s: &Shared, plan: &Plan, cfg: &Value) -> Result<Cluster, OtgError> {
    let token = s.agent_token.as_deref().ok_or_else(|| {
        OtgError::invalid("ports: the config's ports are on agents (HOST:PORT/IFACE) and this server has no agent token. Fix: start it with --agent-token-file F, F holding the agents' token")
    })?;
    let split = shares::split(plan, cfg, "check", LEASE.as_millis() as u64)?;
    let addrs: Vec<String> = split.into_iter().map(|(a, _)| a).collect();
    let agents = each(&addrs, |a| Agent::connect(a, token));
    let mut out = Vec::new();
    for (addr, a) in addrs.iter().zip(agents) {
        out.push(Arc::new(
            a.map_err(|why| OtgError::invalid(format!("agent {addr}: {why}")))?,
        ));
    }
    Ok(Cluster {
        agents: out,
        run: Mutex::new(None),
    })
}

/// Starts a run across hosts: measures each agent's clock, prepares every share, fixes T0,
/// starts every agent at T0 on its own clock, and hands the run to its watcher. Any agent's
/// refusal stops what was prepared and refuses the start, naming it.
pub fn start(s: &Shared, c: &Cluster, plan: &Plan, cfg: &Value) -> Result<Arc<ClusterRun>, OtgError> {
    if c.running() {
        return Err(OtgError::conflict("traffic is running: stop it first"));
    }
    let asked_ns = gapless_io::kernel::clock::realtime_ns();
    let run = format!("{asked_ns:x}");
    let split = shares::split(plan, cfg, &run, LEASE.as_millis() as u64)?;
    let members = prepare_all(c, split)?;
    let r = match start_all(&members) {
        Ok(t0) => t0,
        Err(e) => {
            stop_members(&members);
            return Err(e);
        }
    };
    let target =
        json!({ "spans_hosts": true, "agents": members.iter().map(|m| m.agent.addr.clone()).collect::<Vec<_>>() });
    let id = lock(&s.db)
        .insert_run(
            "otg:across-hosts",
            &serde_json::to_string_pretty(cfg).unwrap_or_default(),
            &target,
        )
        .map_err(OtgError::internal)?;
    let cr = Arc::new(ClusterRun {
        id,
        run,
        t0_ns: r,
        members,
        stop: AtomicBool::new(false),
        ended: AtomicBool::new(false),
        ending: Mutex::new(None),
        asked_ns,
        polls: 0.into(),
        plan: plan.clone(),
    });
    *lock(&c.run) = Some(cr.clone());
    watch::spawn(s.clone(), cr.clone());
    Ok(cr)
}

/// Each agent's clock measured and its share prepared, all at once.
fn prepare_all(c: &Cluster, split: Vec<(String, Share)>) -> Result<Vec<Member>, OtgError> {
    let results = each(&split, |(addr, share)| {
        let agent = c.agents.iter().find(|a| &a.addr == addr).cloned();
        let agent = agent.ok_or("not connected when the config was set")?;
        let offset = agent.offset(EXCHANGES)?;
        let clock = agent.clock_state()?;
        let body = serde_json::to_value(share).map_err(|e| e.to_string())?;
        let last = agent.post_slow("prepare", &body)?;
        Ok(Member {
            agent,
            share: share.clone(),
            offset,
            clock,
            last: Mutex::new(last),
            lost: Mutex::new(None),
        })
    });
    let mut ok = Vec::new();
    let mut failed = None;
    for ((addr, _), r) in split.iter().zip(results) {
        match r {
            Ok(m) => ok.push(m),
            Err(why) => failed = failed.or(Some(format!("agent {addr}: {why}"))),
        }
    }
    match failed {
        None => Ok(ok),
        Some(why) => {
            stop_members(&ok);
            Err(OtgError::invalid(why))
        }
    }
}

/// Where each agent's start is: T0 itself on every agent's clock when every clock is
/// synchronised (their daemons keep them closer than the controller's exchanges can tell),
/// else T0 moved by each agent's measured offset (the best this controller knows).
pub fn translated(members: &[Member]) -> bool {
    members.iter().any(|m| m.clock.untrusted().is_some())
}

/// Fixes T0 on this host's clock, far enough ahead for the slowest agent's start call, and
/// sends each agent its start on its own clock. Returns T0.
fn start_all(members: &[Member]) -> Result<i64, OtgError> {
    let slowest = members.iter().map(|m| m.offset.rtt_ns).max().unwrap_or(0);
    let t0 = gapless_io::kernel::clock::realtime_ns() + T0_AHEAD.as_nanos() as i64 + 4 * slowest;
    let moved = translated(members);
    let results = each(members, |m| {
        let at = m.start_ns(t0, moved);
        m.agent.post("start", &json!({ "run": m.share.run, "start_ns": at }))
    });
    for (m, r) in members.iter().zip(results) {
        r.map_err(|why| OtgError::conflict(format!("agent {}: {why}", m.agent.addr)))?;
    }
    Ok(t0)
}

/// `f` on every item at once, each on a thread of its own; the answers in order.
pub(crate) fn each<I: Sync, T: Send>(
    items: &[I],
    f: impl Fn(&I) -> Result<T, String> + Sync,
) -> Vec<Result<T, String>> {
    std::thread::scope(|sc| {
        let hs: Vec<_> = items.iter().map(|i| sc.spawn(|| f(i))).collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    })
}

/// Stops every member's share, all at once; each answer becomes its last state, and one
/// that does not answer is lost.
fn stop_members<'a>(members: impl IntoIterator<Item = &'a Member>) {
    std::thread::scope(|sc| {
        for m in members {
            sc.spawn(
                move || match m.agent.post_slow("stop", &json!({ "run": m.share.run })) {
                    Ok(v) => *m.said() = v,
                    Err(why) => m.set_lost(format!("it did not answer the stop: {why}")),
                },
            );
        }
    });
}
