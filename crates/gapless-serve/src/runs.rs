//! Runs the server starts: a job ([`crate::jobs`]) whose thread drives the engine's
//! [`RunHandle`](gapless_engine::RunHandle), publishes a snapshot five times a second,
//! checkpoints into the database every second, and at the end stores the result and writes
//! the report files.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use gapless_engine::{Pauser, Run, RunSpec, TxTarget};
use serde_json::{json, Value};

use crate::db::{Db, Jobs as Table};
use crate::jobs::{iface_key, lock, JobId, Jobs, Publisher, StartError};

/// How often a running run publishes a snapshot, and how often it is checkpointed.
const TICK: Duration = Duration::from_millis(200);
const CHECKPOINT: Duration = Duration::from_secs(1);

/// What a run is, for the database.
#[derive(Clone)]
pub struct NewRun {
    pub profile: String,
    pub toml: String,
    pub target: Value,
    pub spec: RunSpec,
}

/// The interfaces a run sends and meters on.
pub fn interfaces(spec: &RunSpec) -> Vec<String> {
    let mut v = Vec::new();
    if let TxTarget::Iface { name, .. } = &spec.target {
        v.push(iface_key(spec.netns.as_deref(), name));
    }
    v.extend(spec.more_tx.iter().map(|p| iface_key(p.netns.as_deref(), &p.iface)));
    if let Some(rx) = &spec.rx {
        v.push(iface_key(rx.netns.as_deref(), &rx.iface));
        v.extend(rx.more.iter().map(|p| iface_key(p.netns.as_deref(), &p.iface)));
    }
    v
}

/// Starts a run, or says which job holds one of its interfaces. Returns the run's id.
pub fn start(jobs: &Jobs, db: &Arc<Mutex<Db>>, reports: &Path, new: NewRun) -> Result<i64, StartError> {
    start_pausable(jobs, db, reports, new).map(|(id, _)| id)
}

/// [`start`], with a handle that pauses and resumes the run's streams.
pub fn start_pausable(
    jobs: &Jobs,
    db: &Arc<Mutex<Db>>,
    reports: &Path,
    new: NewRun,
) -> Result<(i64, Option<Pauser>), StartError> {
    let stop = Arc::new(AtomicBool::new(false));
    let ifaces = interfaces(&new.spec);
    let (db, reports, flag) = (db.clone(), reports.to_path_buf(), stop.clone());
    let pauser = Arc::new(OnceLock::new());
    let cell = pauser.clone();
    let id = jobs.start(ifaces, stop, move || {
        let handle = Run::start_with_stop(new.spec, flag).map_err(StartError::Engine)?;
        let _ = cell.set(handle.pauser());
        let id = lock(&db)
            .insert_run(&new.profile, &new.toml, &new.target)
            .map_err(StartError::Db)?;
        let driver = Driver {
            id,
            db,
            dir: JobId::Run(id).dir(&reports),
        };
        Ok((JobId::Run(id), Box::new(move |p: Publisher| driver.drive(handle, &p))))
    })?;
    let pauser = pauser.get().cloned();
    match id {
        JobId::Run(id) | JobId::Experiment(id) => Ok((id, pauser)),
        JobId::Calibration(n) | JobId::Share(n) => Ok((n as i64, pauser)),
    }
}

/// The thread that drives one run.
struct Driver {
    id: i64,
    db: Arc<Mutex<Db>>,
    dir: PathBuf,
}

impl Driver {
    fn drive(self, handle: gapless_engine::RunHandle, p: &Publisher) {
        let mut saved = Instant::now();
        while !handle.wait_timeout(TICK) {
            let snap = publish(&handle, p);
            if saved.elapsed() >= CHECKPOINT {
                saved = Instant::now();
                let _ = lock(&self.db).checkpoint(Table::Runs, self.id, &snap);
            }
        }
        let last = publish(&handle, p);
        let end = match handle.wait() {
            Ok(report) => self.finish(&report),
            Err(e) => {
                let msg = e.to_string();
                let _ = lock(&self.db).checkpoint(Table::Runs, self.id, &last);
                let _ = lock(&self.db).end(Table::Runs, self.id, "failed", None, Some(&msg));
                json!({ "status": "failed", "error": msg })
            }
        };
        p.send(("end", end));
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
        let stored = lock(&self.db).end(Table::Runs, self.id, status, Some(&result), error.as_deref());
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
        Some(rx) => gapless_engine::report::plots::write_all(rx, dir)
            .map(|n| n + 1)
            .map_err(|e| e.to_string()),
        None => Ok(1),
    }
}

fn publish(handle: &gapless_engine::RunHandle, p: &Publisher) -> Value {
    let snap = serde_json::to_value(handle.snapshot()).unwrap_or(Value::Null);
    p.send(("snapshot", snap.clone()));
    snap
}
