//! Runs the server started: each on a thread of its own that drives the engine's
//! [`RunHandle`](gapless_engine::RunHandle), publishes a snapshot five times a second to the
//! run's subscribers (the SSE streams), checkpoints into the database every second, and at
//! the end stores the result and writes the report files. One run at a time per interface.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gapless_engine::{Run, RunSpec, TxTarget};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::db::Db;

/// How often a running run publishes a snapshot, and how often it is checkpointed.
const TICK: Duration = Duration::from_millis(200);
const CHECKPOINT: Duration = Duration::from_secs(1);

/// An event of a run: `("snapshot", snapshot)` while it runs, then `("end", {status, ...})`.
pub type RunEvent = (&'static str, Value);

/// A run going on.
struct Active {
    stop: Arc<AtomicBool>,
    events: broadcast::Sender<RunEvent>,
    /// The last event, for a subscriber that joins late. Set and sent under its lock, so a
    /// subscriber either sees the end here or receives it.
    last: Arc<Mutex<Option<RunEvent>>>,
    ifaces: Vec<String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Every run going on, and the interfaces they hold.
#[derive(Default)]
pub struct Runs {
    active: Mutex<HashMap<i64, Active>>,
}

/// Why a run cannot start now.
#[derive(Debug)]
pub enum StartError {
    /// An interface is busy with another run (its id).
    Busy {
        iface: String,
        run: i64,
    },
    Engine(gapless_engine::EngineError),
    Db(rusqlite::Error),
}

/// What a run is, for the database.
pub struct NewRun {
    pub profile: String,
    pub toml: String,
    pub target: Value,
    pub spec: RunSpec,
}

/// The interfaces a run sends and meters on, as `netns/iface` (or `iface`).
pub fn interfaces(spec: &RunSpec) -> Vec<String> {
    let key = |ns: &Option<String>, i: &str| ns.as_ref().map_or(i.to_string(), |n| format!("{n}/{i}"));
    let mut v = Vec::new();
    if let TxTarget::Iface { name, .. } = &spec.target {
        v.push(key(&spec.netns, name));
    }
    if let Some(rx) = &spec.rx {
        v.push(key(&rx.netns, &rx.iface));
    }
    v
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Active>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a run, or says which run holds one of its interfaces.
    pub fn start(&self, db: &Arc<Mutex<Db>>, reports: &Path, new: NewRun) -> Result<i64, StartError> {
        let ifaces = interfaces(&new.spec);
        let mut active = self.lock();
        let held: HashMap<&String, i64> = active
            .iter()
            .flat_map(|(id, a)| a.ifaces.iter().map(move |i| (i, *id)))
            .collect();
        // The first of the new run's interfaces that another run holds (TX before RX).
        if let Some((iface, run)) = ifaces.iter().find_map(|i| held.get(i).map(|r| (i, *r))) {
            return Err(StartError::Busy {
                iface: iface.clone(),
                run,
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handle = Run::start_with_stop(new.spec, stop.clone()).map_err(StartError::Engine)?;
        let id = lock(db)
            .insert_run(&new.profile, &new.toml, &new.target)
            .map_err(StartError::Db)?;
        let (events, _) = broadcast::channel(64);
        let last = Arc::new(Mutex::new(None));
        let driver = Driver {
            id,
            db: db.clone(),
            dir: reports.join(format!("run-{id}")),
            events: events.clone(),
            last: last.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("serve-run-{id}"))
            .spawn(move || driver.drive(handle))
            .map_err(|e| {
                StartError::Engine(gapless_engine::EngineError::Report(format!(
                    "spawning the run's thread: {e}"
                )))
            })?;
        active.insert(
            id,
            Active {
                stop,
                events,
                last,
                ifaces,
                thread: Some(thread),
            },
        );
        Ok(id)
    }

    /// Asks a run to stop; false if it is not running.
    pub fn stop(&self, id: i64) -> bool {
        let going = self.running().iter().any(|r| r.0 == id);
        if let (true, Some(a)) = (going, self.lock().get(&id)) {
            a.stop.store(true, Ordering::Relaxed);
        }
        going
    }

    /// A running run's last event and its events from now on; None if it is not running.
    pub fn subscribe(&self, id: i64) -> Option<(Option<RunEvent>, broadcast::Receiver<RunEvent>)> {
        let active = self.lock();
        let a = active.get(&id)?;
        let last = a.last.lock().unwrap_or_else(|e| e.into_inner());
        Some((last.clone(), a.events.subscribe()))
    }

    /// The runs going on, with their last snapshot (a run that has sent its end event is
    /// no longer going on: its result is in the database).
    pub fn running(&self) -> Vec<(i64, Option<Value>)> {
        self.reap();
        let active = self.lock();
        active
            .iter()
            .filter_map(|(id, a)| {
                let last = a.last.lock().unwrap_or_else(|e| e.into_inner());
                match &*last {
                    Some(("end", _)) => None,
                    other => Some((*id, other.as_ref().map(|e| e.1.clone()))),
                }
            })
            .collect()
    }

    /// Forgets the runs whose thread has ended.
    pub fn reap(&self) {
        let mut active = self.lock();
        let ended: Vec<i64> = active
            .iter()
            .filter(|(_, a)| a.thread.as_ref().is_none_or(|t| t.is_finished()))
            .map(|(id, _)| *id)
            .collect();
        for id in ended {
            if let Some(mut a) = active.remove(&id) {
                if let Some(t) = a.thread.take() {
                    let _ = t.join();
                }
            }
        }
    }

    /// Asks every run to stop.
    pub fn stop_flags(&self) {
        for a in self.lock().values() {
            a.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Stops every run and waits for each to store what it measured.
    pub fn stop_all(&self) {
        let threads: Vec<_> = {
            let mut active = self.lock();
            active
                .values_mut()
                .filter_map(|a| {
                    a.stop.store(true, Ordering::Relaxed);
                    a.thread.take()
                })
                .collect()
        };
        for t in threads {
            let _ = t.join();
        }
        self.lock().clear();
    }
}

pub(crate) fn lock(db: &Mutex<Db>) -> std::sync::MutexGuard<'_, Db> {
    db.lock().unwrap_or_else(|e| e.into_inner())
}

/// The thread that drives one run.
struct Driver {
    id: i64,
    db: Arc<Mutex<Db>>,
    dir: PathBuf,
    events: broadcast::Sender<RunEvent>,
    last: Arc<Mutex<Option<RunEvent>>>,
}

impl Driver {
    fn drive(self, handle: gapless_engine::RunHandle) {
        let mut saved = Instant::now();
        while !handle.wait_timeout(TICK) {
            let snap = self.publish(&handle);
            if saved.elapsed() >= CHECKPOINT {
                saved = Instant::now();
                let _ = lock(&self.db).checkpoint(self.id, &snap);
            }
        }
        let last = self.publish(&handle);
        let end = match handle.wait() {
            Ok(report) => self.finish(&report),
            Err(e) => {
                let msg = e.to_string();
                let _ = lock(&self.db).checkpoint(self.id, &last);
                let _ = lock(&self.db).end_run(self.id, "failed", None, Some(&msg));
                json!({ "status": "failed", "error": msg })
            }
        };
        self.send(("end", end));
    }

    fn publish(&self, handle: &gapless_engine::RunHandle) -> Value {
        let snap = serde_json::to_value(handle.snapshot()).unwrap_or(Value::Null);
        self.send(("snapshot", snap.clone()));
        snap
    }

    fn send(&self, ev: RunEvent) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        *last = Some(ev.clone());
        let _ = self.events.send(ev);
    }

    /// Stores the result and writes the report files; returns the end event.
    fn finish(&self, report: &gapless_engine::RunReport) -> Value {
        let result = serde_json::to_value(&report.result).unwrap_or(Value::Null);
        let failure = report.failure().map(|e| e.to_string());
        let status = if failure.is_some() {
            "failed"
        } else if report.result.interrupted {
            "stopped"
        } else {
            "finished"
        };
        let files = write_report(&self.dir, report);
        let error = match (&failure, &files) {
            (Some(f), _) => Some(f.clone()),
            (None, Err(e)) => Some(format!("the report files were not written: {e}")),
            _ => None,
        };
        let stored = lock(&self.db).end_run(self.id, status, Some(&result), error.as_deref());
        let error = match stored {
            Ok(()) => error,
            Err(e) => Some(format!("the result was not stored: {e}")),
        };
        json!({ "status": status, "error": error })
    }
}

/// The result JSON and, for a metered run, the CSV exports and plots.
fn write_report(dir: &Path, report: &gapless_engine::RunReport) -> Result<usize, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    gapless_engine::report::write_json_atomic(&dir.join("result.json"), &report.result)
        .map_err(|e| format!("result.json: {e}"))?;
    match &report.result.rx {
        Some(rx) => gapless_engine::plots::write_all(rx, dir)
            .map(|n| n + 1)
            .map_err(|e| e.to_string()),
        None => Ok(1),
    }
}
