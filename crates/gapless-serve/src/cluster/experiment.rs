//! An experiment whose ports are on gapless agents (`agent = "HOST:PORT"` on each port):
//! the core's driver decides the trials as for local ports, and each trial here is one
//! share per agent ([`gapless_otg::runs::shares::Share`] with a warm-up), prepared on every
//! agent, started at one T0, polled until every sender is done, then stopped; the agents'
//! results become the trial's figures ([`gapless_engine::experiment_ports::HostsTrial`]).
//!
//! Every host counts the warm-up from T0 itself (not moved by clock offsets), so that a
//! sender and a meter on different hosts agree to the frame on which frames are metered.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gapless_core::experiment::{TrialError, TrialPlan, TrialRecord, TrialRun, Trials};
use gapless_core::timing::clocks::Offset;
use gapless_engine::experiment::{Experiment, ExperimentFile};
use gapless_engine::experiment_ports::{HostsTrial, PortsPlan};
use gapless_otg::runs::shares::{RxShare, Share, TxShare, VERSION};
use serde_json::{json, Value};

use super::client::Agent;
use super::{each, LEASE};

/// How often a trial's agents are polled until their senders are done.
const POLL_EVERY: Duration = Duration::from_millis(100);
/// T0 is at least this far ahead when it is fixed (plus four of the slowest round trips).
const T0_AHEAD: Duration = Duration::from_millis(100);

/// The agents an experiment's ports name, each connected (its token proved) and its clock
/// measured.
pub struct Agents(Vec<(Agent, Offset)>);

/// Connects every agent `x`'s ports name with the agents' `token`: one that cannot be
/// reached or does not prove the token is refused, naming it, before any trial.
pub fn connect(x: &Experiment, token: &str) -> Result<Agents, String> {
    x.ports.as_ref().ok_or("an experiment on agents names ports")?;
    connect_all(x, token).map(Agents)
}

/// Runs `x` (its ports on `agents`); `on_trial` hears of each trial as it is judged.
pub fn run(
    x: &Experiment,
    agents: Agents,
    stop: Arc<AtomicBool>,
    on_trial: &mut dyn FnMut(&TrialRecord),
) -> ExperimentFile {
    let plan = x.ports.as_ref().expect("checked by connect");
    let mut t = AgentTrials {
        x,
        plan,
        agents: agents.0,
        stop,
        on_trial,
        last_end: None,
    };
    let r = gapless_core::experiment::run(&x.spec, x.seed(), &mut t);
    let mut file = x.file(r, None);
    for (a, o) in &t.agents {
        file.result.warnings.push(format!(
            "agent {}: its clock is {:+.3} ms ± {:.3} ms from this host's; each direction's latency is read across the two hosts' clocks",
            a.addr,
            o.offset_ns as f64 / 1e6,
            o.bound_ns as f64 / 1e6
        ));
    }
    file
}

fn connect_all(x: &Experiment, token: &str) -> Result<Vec<(Agent, Offset)>, String> {
    let mut addrs: Vec<String> = Vec::new();
    for p in x.spec.port_list() {
        let a = p.agent.clone().unwrap_or_default();
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    let connected = each(&addrs, |a| {
        let agent = Agent::connect(a, token)?;
        let offset = agent.offset(8)?;
        Ok((agent, offset))
    });
    connected
        .into_iter()
        .zip(&addrs)
        .map(|(r, a)| r.map_err(|why| format!("agent {a}: {why}")))
        .collect()
}

struct AgentTrials<'a> {
    x: &'a Experiment,
    plan: &'a PortsPlan,
    agents: Vec<(Agent, Offset)>,
    stop: Arc<AtomicBool>,
    on_trial: &'a mut dyn FnMut(&TrialRecord),
    last_end: Option<Instant>,
}

impl Trials for AgentTrials<'_> {
    fn run(&mut self, index: usize, plan: &TrialPlan) -> Result<TrialRun, TrialError> {
        self.settle()?;
        let trial = self.shares(index, plan);
        let failed = |why: String| TrialError::Failed(format!("trial {}: {why}", index + 1));
        let prepared = self.prepare(&trial.shares).map_err(failed)?;
        let out = self.start_and_wait(&prepared, &trial);
        let finals = self.stop_all(&prepared);
        drop(prepared);
        self.last_end = Some(Instant::now());
        if self.stop.load(Ordering::Relaxed) {
            return Err(TrialError::Stopped);
        }
        out.map_err(failed)?;
        let finals = finals.map_err(failed)?;
        self.figures(&trial, &finals).map_err(failed)
    }

    fn judged(&mut self, rec: &TrialRecord) {
        (self.on_trial)(rec);
    }
}

/// A trial's shares, one per agent (in the agents' order), and what each port sends.
struct Trial {
    kept: Vec<usize>,
    shares: Vec<Share>,
    /// Per sending port (index into the experiment's ports): the trial's streams it sends.
    sends: Vec<(usize, Vec<usize>)>,
}

impl AgentTrials<'_> {
    fn settle(&self) -> Result<(), TrialError> {
        gapless_engine::experiment::settle(self.last_end, self.x.spec.trial.settle_s, &self.stop)
    }

    /// The trial's profile split into shares: each sending port its streams, each
    /// receiving port the profile of the streams that end there.
    fn shares(&self, index: usize, plan: &TrialPlan) -> Trial {
        let p = self.plan;
        let pairs = p.stream_pairs();
        let (profile, kept) = plan.apply_loads(&self.x.profile.spec, &pairs);
        let ports = self.x.spec.port_list();
        let subset = |js: &[usize]| {
            let mut q = profile.clone();
            q.streams = js.iter().map(|&j| profile.streams[j].clone()).collect();
            serde_json::to_value(&q).unwrap_or(Value::Null)
        };
        let by = |side: fn((usize, usize)) -> usize, port: usize| -> Vec<usize> {
            (0..kept.len()).filter(|&j| side(pairs[kept[j]]) == port).collect()
        };
        let run = format!("x{:x}-{index}", gapless_io::kernel::clock::realtime_ns());
        let mut sends = Vec::new();
        let mut shares: Vec<Share> = self
            .agents
            .iter()
            .map(|_| Share {
                version: VERSION,
                run: run.clone(),
                lease_ms: LEASE.as_millis() as u64,
                tx: Vec::new(),
                rx: Vec::new(),
                warmup_ns: Some((plan.warmup_s * 1e9).round() as u64),
            })
            .collect();
        for (i, port) in ports.iter().enumerate() {
            let Some(a) = self
                .agents
                .iter()
                .position(|(a, _)| port.agent.as_deref() == Some(&a.addr))
            else {
                continue;
            };
            let (tx, rx) = (by(|d| d.0, i), by(|d| d.1, i));
            let name = format!("ports[{i}]");
            if !tx.is_empty() {
                shares[a].tx.push(TxShare {
                    port: name.clone(),
                    iface: port.iface.clone(),
                    netns: port.netns.clone(),
                    flows: tx
                        .iter()
                        .map(|&j| profile.streams[j].name.clone().unwrap_or_default())
                        .collect(),
                    profile: subset(&tx),
                });
                sends.push((i, tx));
            }
            if !rx.is_empty() {
                shares[a].rx.push(RxShare {
                    port: name,
                    iface: port.iface.clone(),
                    netns: port.netns.clone(),
                    profiles: vec![subset(&rx)],
                });
            }
        }
        Trial { kept, shares, sends }
    }

    /// Prepares every agent's share at once; on any refusal the others are stopped.
    fn prepare<'s>(&self, shares: &'s [Share]) -> Result<Vec<(&Agent, &'s Share)>, String> {
        let each: Vec<(&Agent, &Share)> = self
            .agents
            .iter()
            .zip(shares)
            .filter(|(_, s)| !(s.tx.is_empty() && s.rx.is_empty()))
            .map(|((a, _), s)| (a, s))
            .collect();
        let results = all(&each, |a, s| {
            let body = serde_json::to_value(s).map_err(|e| e.to_string())?;
            let v = a.post_slow("prepare", &body)?;
            match v["warmup_ns"].as_u64() == s.warmup_ns.filter(|&w| w > 0) {
                true => Ok(v),
                false => Err(
                    "it does not count a warm-up (an older gapless). Fix: run the same gapless on every host".into(),
                ),
            }
        });
        let failed: Vec<String> = each
            .iter()
            .zip(&results)
            .filter_map(|((a, _), r)| r.as_ref().err().map(|why| format!("agent {}: {why}", a.addr)))
            .collect();
        if failed.is_empty() {
            return Ok(each);
        }
        let ready: Vec<_> = each
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(e, _)| *e)
            .collect();
        let _ = self.stop_all(&ready);
        Err(failed.join("; "))
    }

    /// Starts every share at one T0 and polls until every sender is done, then lets the
    /// meters linger for what the device still holds.
    fn start_and_wait(&self, each: &[(&Agent, &Share)], t: &Trial) -> Result<(), String> {
        let slowest = self.agents.iter().map(|(_, o)| o.rtt_ns).max().unwrap_or(0);
        let t0 = gapless_io::kernel::clock::realtime_ns() + T0_AHEAD.as_nanos() as i64 + 4 * slowest;
        let run = t.shares.first().map(|s| s.run.clone()).unwrap_or_default();
        let started = all(each, |a, _| a.post("start", &json!({ "run": run, "start_ns": t0 })));
        for ((a, _), r) in each.iter().zip(started) {
            r.map_err(|why| format!("agent {}: the start: {why}", a.addr))?;
        }
        let deadline = Instant::now() + Duration::from_secs_f64(self.x.spec.trial.duration_s * 3.0 + 30.0);
        loop {
            std::thread::sleep(POLL_EVERY);
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let polls = all(each, |a, _| a.post("poll", &json!({ "run": run })));
            let mut done = true;
            for ((a, _), r) in each.iter().zip(polls) {
                let v = r.map_err(|why| format!("agent {}: lost during the trial: {why}", a.addr))?;
                done &= v["tx_done"] == true;
            }
            if done {
                break;
            }
            if Instant::now() > deadline {
                return Err("the senders did not end within three times the trial's duration and 30 s".into());
            }
        }
        std::thread::sleep(Duration::from_secs_f64(self.x.spec.trial.settle_s.max(0.3)));
        Ok(())
    }

    /// Stops every share; each agent's final state.
    fn stop_all(&self, each: &[(&Agent, &Share)]) -> Result<Vec<Value>, String> {
        let finals = all(each, |a, s| a.post_slow("stop", &json!({ "run": s.run })));
        each.iter()
            .zip(finals)
            .map(|((a, _), r)| r.map_err(|why| format!("agent {}: the stop: {why}", a.addr)))
            .collect()
    }

    /// The trial's figures from every agent's final state.
    fn figures(&self, t: &Trial, finals: &[Value]) -> Result<TrialRun, String> {
        let port_of = |name: &str| -> Option<usize> { name.strip_prefix("ports[")?.strip_suffix(']')?.parse().ok() };
        let mut sent = Vec::new();
        let mut metered = Vec::new();
        for f in finals {
            for tx in f["tx"].as_array().into_iter().flatten() {
                let port = port_of(tx["port"].as_str().unwrap_or("")).ok_or("an agent's reply names no port")?;
                let r: gapless_core::result::RunResult = serde_json::from_value(tx["result"].clone())
                    .map_err(|e| format!("ports[{port}]: its result: {e} ({})", tx["result"]["error"]))?;
                let js = t
                    .sends
                    .iter()
                    .find(|s| s.0 == port)
                    .map(|s| s.1.clone())
                    .unwrap_or_default();
                sent.push((js, r));
            }
            for rx in f["rx"].as_array().into_iter().flatten() {
                let port = port_of(rx["port"].as_str().unwrap_or("")).ok_or("an agent's reply names no port")?;
                let m: gapless_core::meter::report::MeterReport = serde_json::from_value(rx["report"].clone())
                    .map_err(|e| format!("ports[{port}]: its meter: {e} ({})", rx["report"]["error"]))?;
                let r = self
                    .plan
                    .rx_index(port)
                    .ok_or_else(|| format!("ports[{port}] receives nothing"))?;
                metered.push((r, m));
            }
        }
        Ok(self.plan.trial_across_hosts(&HostsTrial {
            kept: &t.kept,
            sent,
            metered,
        }))
    }
}

/// `f` on every (agent, share) at once, the answers in order.
fn all<T: Send>(
    pairs: &[(&Agent, &Share)],
    f: impl Fn(&Agent, &Share) -> Result<T, String> + Sync,
) -> Vec<Result<T, String>> {
    each(pairs, |(a, s)| f(a, s))
}
