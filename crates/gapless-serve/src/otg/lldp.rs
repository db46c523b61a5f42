//! The config's LLDP agents, native: a thread per `lldp[]` entry with an LLDP socket on its
//! port's interface (`gapless_io::devices::lldp`) that sends the agent's LLDPDU every
//! `advertisement_interval` (the first at once), reads its neighbours' (decoded by
//! `gapless_otg::lldp`), forgets a neighbour when its TTL runs out or it says TTL 0, and keeps
//! the counters of `lldp` metrics. Started when the config is set and on `protocol.all
//! start`, stopped (with a last LLDPDU of TTL 0, so neighbours forget it at once) on
//! `protocol.all stop`, a new config and the server's end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gapless_io::devices::group::{GroupSocket, LLDP};
use gapless_otg::config::Plan;
use gapless_otg::lldp::{decode, frame, neighbor_id, neighbor_state, Agent, Neighbor, MAX_NEIGHBORS};
use gapless_otg::OtgError;
use serde_json::{json, Value};

use super::otg;
use super::routing::{check_names, strings};
use crate::Shared;

/// What an agent counted and heard.
#[derive(Default)]
struct Tally {
    frames_tx: u64,
    frames_rx: u64,
    frames_error_rx: u64,
    frames_discard: u64,
    tlvs_unknown: u64,
    /// Each neighbour with when it was first and last heard.
    neighbors: Vec<(Neighbor, Instant, Instant)>,
    /// Why the agent stopped on its own (its interface went away).
    fault: Option<String>,
}

/// One LLDP agent and its thread.
pub struct LldpAgent {
    agent: Agent,
    netns: Option<String>,
    iface: String,
    tally: Arc<Mutex<Tally>>,
    run: Mutex<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>>,
}

/// An agent for every `lldp[]` entry, each started on its port.
pub fn up(plan: &Plan) -> Result<Vec<Arc<LldpAgent>>, OtgError> {
    let mut out = Vec::new();
    for a in &plan.lldp {
        let port = plan.port(&a.port).expect("checked by the plan");
        let agent = Arc::new(LldpAgent {
            agent: a.clone(),
            netns: port.netns.clone(),
            iface: port.iface.clone(),
            tally: Arc::default(),
            run: Mutex::new(None),
        });
        agent.start()?;
        out.push(agent);
    }
    Ok(out)
}

impl LldpAgent {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>> {
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens its socket (an error names the port) and starts its thread, unless it runs.
    pub fn start(&self) -> Result<(), OtgError> {
        let mut run = self.lock();
        if run.as_ref().is_some_and(|r| !r.1.is_finished()) {
            return Ok(());
        }
        let sock = GroupSocket::open(self.netns.as_deref(), &self.iface, LLDP).map_err(|e| {
            OtgError::invalid(format!(
                "lldp: {:?} cannot open LLDP on port {:?}: {e}",
                self.agent.name, self.agent.port
            ))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let (agent, iface, tally, flag) = (self.agent.clone(), self.iface.clone(), self.tally.clone(), stop.clone());
        let t = std::thread::Builder::new()
            .name(crate::thread_name("lldp"))
            .spawn(move || speak(&agent, &iface, &sock, &tally, &flag))
            .map_err(|e| OtgError::internal(format!("an LLDP thread: {e}")))?;
        *run = Some((stop, t));
        Ok(())
    }

    /// Stops its thread, which sends a last LLDPDU of TTL 0.
    pub fn stop(&self) {
        if let Some((stop, t)) = self.lock().take() {
            stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Its `lldp` metric, and a warning if it stopped on its own.
    fn metric(&self, warnings: &mut Vec<String>) -> Value {
        let t = self.tally();
        if let Some(f) = &t.fault {
            warnings.push(format!("LLDP agent {:?} stopped: {f}", self.agent.name));
        }
        json!({
            "name": self.agent.name,
            "frames_tx": t.frames_tx,
            "frames_rx": t.frames_rx,
            "frames_error_rx": t.frames_error_rx,
            "frames_discard": t.frames_discard,
            "tlvs_discard": 0,
            "tlvs_unknown": t.tlvs_unknown,
        })
    }

    /// Its neighbours, those of `ids` only when some are given.
    fn neighbors(&self, ids: &[String]) -> Vec<Value> {
        let now = Instant::now();
        let t = self.tally();
        t.neighbors
            .iter()
            .filter(|(n, ..)| ids.is_empty() || ids.contains(&neighbor_id(n)))
            .map(|(n, first, last)| {
                let (age, since) = ((now - *first).as_secs(), (now - *last).as_secs());
                neighbor_state(&self.agent.name, n, age, since)
            })
            .collect()
    }
}

impl Drop for LldpAgent {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The agent's loop: send on time, read what comes in between, until told to stop.
fn speak(a: &Agent, iface: &str, sock: &GroupSocket, tally: &Mutex<Tally>, stop: &AtomicBool) {
    let lock = || tally.lock().unwrap_or_else(|e| e.into_inner());
    let every = Duration::from_secs(u64::from(a.interval_s));
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= next {
            if let Err(e) = sock.send(&frame(a, sock.mac, iface, a.hold_time_s)) {
                lock().fault = Some(e.to_string());
            } else {
                lock().frames_tx += 1;
            }
            next = now + every;
        }
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        if let Some(f) = sock.recv(wait) {
            heard(&mut lock(), &f);
        }
        lock()
            .neighbors
            .retain(|(n, _, last)| last.elapsed() < Duration::from_secs(u64::from(n.ttl_s)));
    }
    if sock.send(&frame(a, sock.mac, iface, 0)).is_ok() {
        lock().frames_tx += 1;
    }
}

/// One received frame into the tally: a neighbour new, refreshed or forgotten (TTL 0).
fn heard(t: &mut Tally, f: &[u8]) {
    let n = match decode(f) {
        Ok(n) => n,
        Err(_) => {
            t.frames_error_rx += 1;
            t.frames_discard += 1;
            return;
        }
    };
    t.frames_rx += 1;
    t.tlvs_unknown += n.unknown_tlvs;
    let id = neighbor_id(&n);
    let now = Instant::now();
    let old = t.neighbors.iter().position(|(m, ..)| neighbor_id(m) == id);
    match (old, n.ttl_s) {
        (Some(k), 0) => {
            t.neighbors.remove(k);
        }
        (None, 0) => {}
        (Some(k), _) => {
            let first = t.neighbors[k].1;
            t.neighbors[k] = (n, first, now);
        }
        (None, _) if t.neighbors.len() >= MAX_NEIGHBORS => t.frames_discard += 1,
        (None, _) => t.neighbors.push((n, now, now)),
    }
}

fn names_of(agents: &[Arc<LldpAgent>]) -> Vec<String> {
    agents.iter().map(|a| a.agent.name.clone()).collect()
}

/// `lldp_metrics` of the agents named (all when none are).
pub fn metrics(s: &Shared, names: &[String]) -> Result<Value, OtgError> {
    let agents = otg(s).lldp.clone();
    check_names(names, &names_of(&agents), "lldp.lldp_names", "LLDP agent")?;
    let mut warnings = Vec::new();
    let list: Vec<Value> = agents
        .iter()
        .filter(|a| names.is_empty() || names.contains(&a.agent.name))
        .map(|a| a.metric(&mut warnings))
        .collect();
    Ok(json!({ "choice": "lldp_metrics", "lldp_metrics": list, "warnings": warnings }))
}

/// `lldp_neighbors` states of the agents named (all when none are), filtered by neighbour id.
pub fn neighbor_states(s: &Shared, req: &Value) -> Result<Value, OtgError> {
    let agents = otg(s).lldp.clone();
    let names = strings(&req["lldp_names"]);
    check_names(&names, &names_of(&agents), "lldp_neighbors.lldp_names", "LLDP agent")?;
    let ids = strings(&req["neighbor_id_filters"]);
    let list: Vec<Value> = agents
        .iter()
        .filter(|a| names.is_empty() || names.contains(&a.agent.name))
        .flat_map(|a| a.neighbors(&ids))
        .collect();
    Ok(json!({ "choice": "lldp_neighbors", "lldp_neighbors": list }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_keeps_at_most_max_neighbors_and_discards_the_rest() {
        let mut t = Tally::default();
        for k in 0..MAX_NEIGHBORS + 10 {
            let a = Agent {
                name: format!("n{k}"),
                port: "p1".into(),
                chassis: gapless_otg::lldp::Id::Mac(Some([2, 0, 0, 0, (k / 256) as u8, (k % 256) as u8])),
                port_id: gapless_otg::lldp::Id::Mac(None),
                system_name: None,
                hold_time_s: 120,
                interval_s: 30,
                org: Vec::new(),
            };
            heard(&mut t, &frame(&a, [2, 0, 0, 0, 0, 1], "eth0", 120));
        }
        assert_eq!(
            (t.neighbors.len(), t.frames_discard, t.frames_rx),
            (MAX_NEIGHBORS, 10, (MAX_NEIGHBORS + 10) as u64),
            "expected {MAX_NEIGHBORS} neighbours kept and 10 LLDPDUs discarded"
        );
    }
}
