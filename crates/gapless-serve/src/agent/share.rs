//! An agent's share of a run across hosts ([`gapless_otg::runs::shares::Share`]), as it runs here:
//! its meters start when it is prepared, its send loops get ready and wait at one
//! [`StartGate`] for the controller's start time, and the whole share stops by itself when
//! the controller stops renewing its lease.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::jobs::lock;
use gapless_engine::live::RxLive;
use gapless_engine::request::MeasureRequest;
use gapless_engine::run::{StartGate, Warmup};
use gapless_engine::{MeasureSpec, Metered, Run, RunHandle};
use gapless_otg::config::{Group, Port};
use gapless_otg::runs::shares::{RxShare, Share, TxShare};
use gapless_otg::{runs, OtgError};
use serde_json::{json, Value};

/// How long a prepared share may take to have every meter open and every send loop ready.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// The start must be at least this far ahead of the agent's clock when it arrives: the send
/// loops' own lead before their first departure, and a margin.
pub const START_MARGIN_NS: u64 = gapless_engine::run::START_LEAD_NS + 2_000_000;

/// A TX port's run.
struct TxPort {
    port: String,
    flows: Vec<String>,
    handle: Mutex<Option<RunHandle>>,
    /// The run's result, once it ended (or its error).
    result: Mutex<Option<Value>>,
}

/// An RX port's meter.
struct RxPort {
    port: String,
    stop: Arc<AtomicBool>,
    live: Arc<RxLive>,
    thread: Mutex<Option<JoinHandle<Result<Metered, gapless_engine::EngineError>>>>,
    report: Mutex<Option<Value>>,
}

/// A share going on.
pub struct Running {
    pub run: String,
    gate: Arc<StartGate>,
    tx: Vec<TxPort>,
    rx: Vec<RxPort>,
    /// When the lease runs out; renewed by every poll.
    lease_until: Mutex<Instant>,
    lease: Duration,
    /// The start, on this agent's clock (0: not yet).
    start_ns: std::sync::atomic::AtomicU64,
    /// Why it stopped by itself (the lease ran out), if it did.
    pub expired: AtomicBool,
    /// The test shift of this agent's clock, ns.
    shift_ns: i64,
    /// The warm-up every send loop and meter of the share counts from (its start is the
    /// start given).
    warmup: Option<Arc<Warmup>>,
    /// Stopped and joined.
    pub ended: AtomicBool,
}

/// Prepares a share: its meters open and metering, its send loops ready at the gate. On any
/// failure what was started is stopped and the error names the port.
pub fn prepare(share: &Share, shift_ns: i64) -> Result<Arc<Running>, OtgError> {
    if share.version != gapless_otg::runs::shares::VERSION {
        return Err(OtgError::invalid(format!(
            "version: this agent speaks agent API version {}, the controller sent {}. Fix: run the same gapless on every host",
            gapless_otg::runs::shares::VERSION,
            share.version
        )));
    }
    let gate = Arc::new(StartGate::new(shift_ns));
    let warmup = share.warmup_ns.filter(|&w| w > 0).map(|w| Arc::new(Warmup::new(w)));
    let mut r = Running {
        run: share.run.clone(),
        gate: gate.clone(),
        tx: Vec::new(),
        rx: Vec::new(),
        lease_until: Mutex::new(Instant::now() + Duration::from_millis(share.lease_ms)),
        lease: Duration::from_millis(share.lease_ms.max(1)),
        start_ns: 0.into(),
        expired: AtomicBool::new(false),
        shift_ns,
        ended: AtomicBool::new(false),
        warmup: warmup.clone(),
    };
    let started = (|| {
        for s in &share.rx {
            r.rx.push(start_meter(s, &warmup)?);
        }
        for s in &share.tx {
            r.tx.push(start_sender(s, &gate, &warmup)?);
        }
        wait_ready(&r)
    })();
    if let Err(e) = started {
        r.stop_all();
        return Err(e);
    }
    Ok(Arc::new(r))
}

/// The interfaces a share sends and meters on, as the job table names them.
pub fn interfaces(share: &Share) -> Vec<String> {
    let tx = share.tx.iter().map(|t| (&t.netns, &t.iface));
    let rx = share.rx.iter().map(|r| (&r.netns, &r.iface));
    let mut v: Vec<String> = tx
        .chain(rx)
        .map(|(ns, i)| crate::jobs::iface_key(ns.as_deref(), i))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn start_meter(s: &RxShare, warmup: &Option<Arc<Warmup>>) -> Result<RxPort, OtgError> {
    let at = |e: String| OtgError::invalid(format!("port {}: {e}", s.port));
    let req: MeasureRequest =
        serde_json::from_value(json!({ "iface": s.iface, "netns": s.netns })).map_err(|e| at(e.to_string()))?;
    let mut spec: MeasureSpec = req.spec().map_err(|e| at(e.to_string()))?;
    let mut targets = std::collections::HashMap::new();
    for p in &s.profiles {
        let compiled = runs::compiled(&group(&s.port, &s.iface, &s.netns, p, Vec::new()))?;
        targets.extend(gapless_engine::rx::targets_of(&compiled));
    }
    spec.targets = Some(targets);
    if let Some(w) = warmup {
        spec.rx.meter.warmup_ns = w.ns;
        spec.warmup = Some(w.clone());
    }
    let (stop, live) = (Arc::new(AtomicBool::new(false)), Arc::new(RxLive::default()));
    let (flag, l) = (stop.clone(), live.clone());
    let thread = std::thread::Builder::new()
        .name(crate::thread_name("agent-rx"))
        .spawn(move || gapless_engine::measure(&spec, &flag, &l))
        .map_err(|e| at(format!("starting the meter's thread: {e}")))?;
    Ok(RxPort {
        port: s.port.clone(),
        stop,
        live,
        thread: Mutex::new(Some(thread)),
        report: Mutex::new(None),
    })
}

/// A share's port as the group the OTG runs are made from.
fn group(port: &str, iface: &str, netns: &Option<String>, profile: &Value, flows: Vec<String>) -> Group {
    let needs = vec![None; flows.len()];
    Group {
        tx: Port {
            name: port.to_string(),
            location: iface.to_string(),
            iface: iface.to_string(),
            netns: netns.clone(),
            agent: None,
            members: Vec::new(),
        },
        rx: Vec::new(),
        flows,
        profile: profile.clone(),
        needs,
    }
}

fn start_sender(s: &TxShare, gate: &Arc<StartGate>, warmup: &Option<Arc<Warmup>>) -> Result<TxPort, OtgError> {
    let g = group(&s.port, &s.iface, &s.netns, &s.profile, s.flows.clone());
    let mut run = runs::port_run(&runs::Joint::one(g))?;
    run.spec.gate = Some(gate.clone());
    if let Some(w) = warmup {
        run.spec.warmup = Some(Duration::from_nanos(w.ns));
        run.spec.warmup_shared = Some(w.clone());
    }
    let handle = Run::start(run.spec).map_err(|e| OtgError::invalid(format!("port {}: {e}", s.port)))?;
    Ok(TxPort {
        port: s.port.clone(),
        flows: s.flows.clone(),
        handle: Mutex::new(Some(handle)),
        result: Mutex::new(None),
    })
}

/// Waits until every meter has published (its socket is open) and every send loop waits at
/// the gate; an error names the port whose meter or run ended instead.
fn wait_ready(r: &Running) -> Result<(), OtgError> {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        for m in &r.rx {
            if lock(&m.thread).as_ref().is_some_and(|t| t.is_finished()) {
                let why = m.finish().err().unwrap_or_else(|| "it ended before the start".into());
                return Err(OtgError::invalid(format!("port {}: the meter: {why}", m.port)));
            }
        }
        for t in &r.tx {
            if lock(&t.handle).as_ref().is_some_and(|h| h.is_finished()) {
                let why = t.finish().err().unwrap_or_else(|| "it ended before the start".into());
                return Err(OtgError::invalid(format!("port {}: {why}", t.port)));
            }
        }
        let meters = r.rx.iter().all(|m| m.live.published().0.is_some());
        if meters && r.gate.ready() >= r.tx.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(OtgError::internal(format!(
                "the share was not ready within {} s",
                READY_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

impl TxPort {
    /// Joins the ended run into `result`; its error, if it failed.
    fn finish(&self) -> Result<(), String> {
        let Some(h) = lock(&self.handle).take() else {
            return Ok(());
        };
        let (v, err) = match h.wait() {
            Ok(rep) => {
                let err = rep.failure().map(|e| e.to_string());
                (serde_json::to_value(&rep.result).unwrap_or(Value::Null), err)
            }
            Err(e) => (json!({ "error": e.to_string() }), Some(e.to_string())),
        };
        *lock(&self.result) = Some(v);
        err.map_or(Ok(()), Err)
    }
}

impl RxPort {
    /// Joins the ended meter into `report`; its error, if it failed.
    fn finish(&self) -> Result<(), String> {
        let Some(t) = lock(&self.thread).take() else {
            return Ok(());
        };
        let (v, err) = match t.join() {
            Ok(Ok(m)) => (serde_json::to_value(&m.report).unwrap_or(Value::Null), m.error),
            Ok(Err(e)) => (json!({ "error": e.to_string() }), Some(e.to_string())),
            Err(_) => (
                json!({ "error": "the meter panicked" }),
                Some("the meter panicked".into()),
            ),
        };
        *lock(&self.report) = Some(v);
        err.map_or(Ok(()), Err)
    }
}

impl Running {
    /// Sets the start (ns on this agent's clock), or says why it cannot be made.
    pub fn start(&self, at_ns: u64) -> Result<(), OtgError> {
        let now = self.gate.now_ns();
        if at_ns < now + START_MARGIN_NS {
            return Err(OtgError::conflict(format!(
                "cannot make the start: it is {:.3} ms ahead of this agent's clock, and the send loops need {:.3} ms. Fix: check the clocks (gapless clock), or the controller's link to this agent",
                (at_ns as f64 - now as f64) / 1e6,
                START_MARGIN_NS as f64 / 1e6
            )));
        }
        if let Some(w) = &self.warmup {
            // The send loops' TX stamps are the host's own clock, without the test shift.
            w.publish((at_ns as i64 - self.shift_ns) as u64);
        }
        if !self.gate.open(at_ns) {
            return Err(OtgError::conflict("this share has started already"));
        }
        self.start_ns.store(at_ns, Ordering::Release);
        Ok(())
    }

    /// The warm-up it counts, ns (None: none).
    pub fn warmup_ns(&self) -> Option<u64> {
        self.warmup.as_ref().map(|w| w.ns)
    }

    /// Renews the lease.
    pub fn renew(&self) {
        *lock(&self.lease_until) = Instant::now() + self.lease;
    }

    /// Whether the lease ran out.
    pub fn lease_out(&self) -> bool {
        Instant::now() > *lock(&self.lease_until)
    }

    /// Stops the send loops (they end their runs), keeps the meters going.
    pub fn stop_tx(&self) {
        for t in &self.tx {
            if let Some(h) = lock(&t.handle).as_ref() {
                h.stop();
            }
        }
    }

    /// Stops everything, and joins it.
    pub fn stop_all(&self) {
        self.stop_tx();
        for m in &self.rx {
            m.stop.store(true, Ordering::Relaxed);
        }
        for t in &self.tx {
            let _ = t.finish();
        }
        for m in &self.rx {
            let _ = m.finish();
        }
        self.ended.store(true, Ordering::Release);
    }

    /// The share's state: each TX port's live counts or its result, each RX port's live
    /// counts or its report, and the start skew once the first departure left.
    pub fn poll(&self) -> Value {
        let start = self.start_ns.load(Ordering::Acquire);
        let tx: Vec<Value> = self.tx.iter().map(|t| self.tx_state(t, start)).collect();
        let rx: Vec<Value> = self.rx.iter().map(rx_state).collect();
        let tx_done = tx.iter().all(|t| t["done"] == true);
        json!({
            "version": gapless_otg::runs::shares::VERSION,
            "run": self.run,
            "start_ns": (start > 0).then_some(start),
            "tx_done": tx_done,
            "expired": self.expired.load(Ordering::Relaxed),
            "tx": tx,
            "rx": rx,
        })
    }

    fn tx_state(&self, t: &TxPort, start: u64) -> Value {
        let ended = lock(&t.handle).as_ref().is_none_or(|h| h.is_finished());
        if ended {
            let _ = t.finish();
            let result = lock(&t.result).clone().unwrap_or(Value::Null);
            // The first departure on this agent's clock, against the start.
            let first = result["first_departure_unix_ns"].as_i64().map(|f| f + self.shift_ns);
            let skew = first.filter(|_| start > 0).map(|f| f - start as i64);
            return json!({ "port": t.port, "flows": t.flows, "done": true, "result": result, "start_skew_ns": skew });
        }
        let snap = lock(&t.handle)
            .as_ref()
            .map(|h| serde_json::to_value(h.snapshot()).unwrap_or(Value::Null));
        json!({ "port": t.port, "flows": t.flows, "done": false, "snapshot": snap })
    }
}

fn rx_state(m: &RxPort) -> Value {
    if let Some(r) = lock(&m.report).clone() {
        return json!({ "port": m.port, "done": true, "report": r });
    }
    let (_, streams) = m.live.published();
    let live: Vec<Value> = streams
        .iter()
        .map(|s| {
            json!({ "name": s.name, "id": s.id, "received": s.received, "bytes": s.bytes, "lost": s.lost,
                    "reordered": s.reordered, "duplicated": s.duplicated, "latency_p50_ns": s.latency_p50_ns,
                    "latency_p99_ns": s.latency_p99_ns, "latency_p99_9_ns": s.latency_p99_9_ns })
        })
        .collect();
    json!({ "port": m.port, "done": false, "live": live })
}
