//! Jobs the server runs on threads of their own (runs and experiments), the interfaces
//! they hold, and their events. One job at a time per interface: a second is refused with
//! the job that holds it. A job publishes events (`snapshot` or `trial` while it goes on,
//! then one `end`) to its subscribers (the SSE streams); the last event is kept for a
//! subscriber that joins late.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::broadcast;

/// An event of a job: `snapshot` or `trial` while it goes on, then `end` (`{status, error}`).
/// Serialized once when sent: every subscriber and poller shares the value and its text.
#[derive(Clone)]
pub struct JobEvent {
    pub kind: &'static str,
    pub value: Arc<Value>,
    pub text: Arc<str>,
}

impl JobEvent {
    pub fn new(kind: &'static str, value: Value) -> JobEvent {
        JobEvent {
            kind,
            text: value.to_string().into(),
            value: Arc::new(value),
        }
    }
}

/// A job: a run or an experiment, by its id in the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobId {
    Run(i64),
    Experiment(i64),
    /// A calibration being made (numbered from 1 per server; stored once made).
    Calibration(u64),
    /// This agent's share of a run across hosts (numbered from 1 per server).
    Share(u64),
}

impl JobId {
    /// Where the job's report files go under the report directory.
    pub fn dir(&self, reports: &std::path::Path) -> std::path::PathBuf {
        reports.join(match self {
            JobId::Run(id) => format!("run-{id}"),
            JobId::Experiment(id) => format!("experiment-{id}"),
            JobId::Calibration(_) => "calibrations".into(),
            JobId::Share(n) => format!("share-{n}"),
        })
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobId::Run(id) => write!(f, "run {id}"),
            JobId::Experiment(id) => write!(f, "experiment {id}"),
            JobId::Calibration(_) => write!(f, "a calibration"),
            JobId::Share(_) => write!(f, "a share of a run across hosts"),
        }
    }
}

/// How a job's thread tells its subscribers.
#[derive(Clone)]
pub struct Publisher {
    events: broadcast::Sender<JobEvent>,
    /// Set and sent under its lock, so a subscriber either sees the end here or receives it.
    last: Arc<Mutex<Option<JobEvent>>>,
}

impl Publisher {
    /// Sends `(kind, value)` to every subscriber, serialized once.
    pub fn send(&self, (kind, value): (&'static str, Value)) {
        let ev = JobEvent::new(kind, value);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        *last = Some(ev.clone());
        let _ = self.events.send(ev);
    }
}

/// A job going on.
struct Active {
    stop: Arc<AtomicBool>,
    publisher: Publisher,
    ifaces: Vec<String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Every job going on.
#[derive(Default)]
pub struct Jobs {
    active: Mutex<HashMap<JobId, Active>>,
}

/// Why a job cannot start now.
#[derive(Debug)]
pub enum StartError {
    /// An interface is busy with another job.
    Busy {
        iface: String,
        holder: JobId,
    },
    Engine(gapless_engine::EngineError),
    Db(rusqlite::Error),
}

/// What a job's thread runs, given its publisher.
pub type Body = Box<dyn FnOnce(Publisher) + Send>;

/// `netns/iface` (or `iface`): how jobs name the interfaces they hold.
pub fn iface_key(netns: Option<&str>, iface: &str) -> String {
    netns.map_or(iface.to_string(), |n| format!("{n}/{iface}"))
}

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Active>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a job on `ifaces`, or says which job holds one of them. `begin` (called with
    /// the interfaces claimed, so two starts cannot both pass) starts the work and records
    /// it, and returns its id and the body its thread runs.
    pub fn start(
        &self,
        ifaces: Vec<String>,
        stop: Arc<AtomicBool>,
        begin: impl FnOnce() -> Result<(JobId, Body), StartError>,
    ) -> Result<JobId, StartError> {
        self.reap();
        let mut active = self.lock();
        let held: HashMap<&String, JobId> = active
            .iter()
            .flat_map(|(id, a)| a.ifaces.iter().map(move |i| (i, *id)))
            .collect();
        // The first of the new job's interfaces that another job holds (TX before RX).
        if let Some((iface, holder)) = ifaces.iter().find_map(|i| held.get(i).map(|r| (i, *r))) {
            return Err(StartError::Busy {
                iface: iface.clone(),
                holder,
            });
        }
        let (id, body) = begin()?;
        let (events, _) = broadcast::channel(64);
        let publisher = Publisher {
            events,
            last: Arc::new(Mutex::new(None)),
        };
        let p = publisher.clone();
        let thread = std::thread::Builder::new()
            .name(format!("serve-{id}"))
            .spawn(move || body(p))
            .map_err(|e| {
                StartError::Engine(gapless_engine::EngineError::Report(format!(
                    "spawning {id}'s thread: {e}"
                )))
            })?;
        active.insert(
            id,
            Active {
                stop,
                publisher,
                ifaces,
                thread: Some(thread),
            },
        );
        Ok(id)
    }

    /// Asks a job to stop; false if it is not going on.
    pub fn stop(&self, id: JobId) -> bool {
        let going = self.running().iter().any(|r| r.0 == id);
        if let (true, Some(a)) = (going, self.lock().get(&id)) {
            a.stop.store(true, Ordering::Relaxed);
        }
        going
    }

    /// A job's last event and its events from now on; None if it is not going on.
    pub fn subscribe(&self, id: JobId) -> Option<(Option<JobEvent>, broadcast::Receiver<JobEvent>)> {
        let active = self.lock();
        let a = active.get(&id)?;
        let last = a.publisher.last.lock().unwrap_or_else(|e| e.into_inner());
        Some((last.clone(), a.publisher.events.subscribe()))
    }

    /// The jobs going on, with their last event's value (a job that has sent its end event
    /// is no longer going on: its result is in the database).
    pub fn running(&self) -> Vec<(JobId, Option<Arc<Value>>)> {
        self.reap();
        let active = self.lock();
        active
            .iter()
            .filter_map(|(id, a)| {
                let last = a.publisher.last.lock().unwrap_or_else(|e| e.into_inner());
                match &*last {
                    Some(e) if e.kind == "end" => None,
                    other => Some((*id, other.as_ref().map(|e| e.value.clone()))),
                }
            })
            .collect()
    }

    /// Whether job `id`'s thread is still at work (a job that sent its end event still
    /// writes its report, and holds its interfaces, until its thread ends).
    pub fn holds(&self, id: JobId) -> bool {
        self.reap();
        self.lock().contains_key(&id)
    }

    /// Forgets the jobs whose thread has ended.
    pub fn reap(&self) {
        let mut active = self.lock();
        let ended: Vec<JobId> = active
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

    /// Asks every job to stop.
    pub fn stop_flags(&self) {
        for a in self.lock().values() {
            a.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Stops every job and waits for each to store what it measured.
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

/// A mutex's guard, poisoned or not: a panicked holder's value is still the best there is.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
