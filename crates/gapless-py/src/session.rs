//! Runs: `start` hands back a [`RunHandle`] with live snapshots, `stop`, and the result.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use gapless_engine::request::RunRequest;
use gapless_engine::{Run, RunReport, Snapshot};
use pyo3::prelude::*;

use crate::convert::{from_py, to_py};
use crate::errors::{option_mismatch, raise};
use crate::profile::source;
use crate::wait::{signalled, POLL};

/// A run going on (or ended): the engine's handle, then its outcome.
#[pyclass(module = "gapless._gapless", frozen)]
pub struct RunHandle {
    state: Mutex<State>,
}

enum State {
    Running(gapless_engine::RunHandle),
    /// The result dict, the error the run ended with (its `result` attribute set), and the
    /// last snapshot.
    Ended {
        result: Py<PyAny>,
        error: Option<PyErr>,
        last: Box<Snapshot>,
    },
    /// Taken while a thread waits for the run to join: the run's last snapshot (it has
    /// ended), for threads that ask meanwhile.
    Joining(Box<Snapshot>),
}

/// Starts a run of `profile` (a dict) with `options` (a dict of the run's keywords).
#[pyfunction]
pub fn start(
    py: Python<'_>,
    profile: &Bound<'_, PyAny>,
    dir: &str,
    label: &str,
    options: &Bound<'_, PyAny>,
) -> PyResult<RunHandle> {
    let src = source(py, profile, dir, label)?;
    let req: RunRequest = from_py(options).map_err(|m| option_mismatch(py, "a run", &m))?;
    let spec = req.spec(src).map_err(|e| raise(py, &e))?;
    let handle = py.detach(|| Run::start(spec)).map_err(|e| raise(py, &e))?;
    Ok(RunHandle {
        state: Mutex::new(State::Running(handle)),
    })
}

impl RunHandle {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `d` with the GIL released; true if the run has ended and been joined.
    /// The state's lock is taken only with the GIL released, and never held while taking
    /// the GIL, so a thread waiting here and one taking a snapshot cannot block each other.
    fn wait_for(&self, py: Python<'_>, d: Duration) -> bool {
        py.detach(|| {
            let g = self.lock();
            match &*g {
                State::Running(h) => h.wait_timeout(d),
                State::Ended { .. } => true,
                // Another thread is joining the run: wait for it to finish.
                State::Joining(_) => {
                    drop(g);
                    std::thread::sleep(d.min(Duration::from_millis(5)));
                    false
                }
            }
        })
    }

    /// Joins the ended run and keeps its outcome.
    fn join(&self, py: Python<'_>) {
        let mut g = self.lock();
        let last = match &*g {
            State::Running(h) => h.snapshot(),
            _ => return,
        };
        let State::Running(h) = std::mem::replace(&mut *g, State::Joining(Box::new(last.clone()))) else {
            unreachable!("matched as running above, under the same lock")
        };
        drop(g);
        let outcome = py.detach(|| h.wait());
        let state = match outcome
            .map_err(|e| raise(py, &e))
            .and_then(|r| ended(py, r, last.clone()))
        {
            Ok(state) => state,
            Err(e) => State::Ended {
                result: py.None(),
                error: Some(e),
                last: Box::new(last),
            },
        };
        *self.lock() = state;
    }
}

/// The run's result dict, and its failure (if any) as an exception carrying that dict.
fn ended(py: Python<'_>, report: RunReport, last: Snapshot) -> PyResult<State> {
    let result = to_py(py, &report.result)?.unbind();
    let error = report.failure().map(|e| {
        let err = raise(py, &e);
        let _ = err.value(py).setattr("result", result.bind(py));
        err
    });
    Ok(State::Ended {
        result,
        error,
        last: Box::new(last),
    })
}

#[pymethods]
impl RunHandle {
    /// The run as it stands: per stream and in total (the last one once it has ended).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let snap = match &*self.lock() {
            State::Running(h) => h.snapshot(),
            State::Ended { last, .. } => (**last).clone(),
            State::Joining(last) => (**last).clone(),
        };
        to_py(py, &snap)
    }

    /// Asks the run to end after the current departure; it still reports what it did.
    fn stop(&self) {
        if let State::Running(h) = &*self.lock() {
            h.stop();
        }
    }

    /// Whether the run has ended.
    fn done(&self) -> bool {
        match &*self.lock() {
            State::Running(h) => h.is_finished(),
            _ => true,
        }
    }

    /// Waits up to `timeout` seconds (None: until the end); true if the run has ended.
    /// Ctrl-C stops the run and raises KeyboardInterrupt.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        loop {
            let left = deadline.map_or(POLL, |d| d.saturating_duration_since(Instant::now()).min(POLL));
            if self.wait_for(py, left) {
                return Ok(true);
            }
            if let Err(e) = py.check_signals() {
                self.stop();
                return Err(e);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
        }
    }

    /// Waits for the end and returns the result dict (the JSON the CLI writes). Ctrl-C
    /// stops the run, which still returns its result, marked `interrupted`. A run that
    /// failed raises its error, with the result as its `result` attribute.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        loop {
            let ended = self.wait_for(py, POLL);
            if matches!(&*self.lock(), State::Running(h) if ended || h.is_finished()) {
                self.join(py);
            }
            if let State::Ended { result, error, .. } = &*self.lock() {
                return match error {
                    Some(e) => Err(e.clone_ref(py)),
                    None => Ok(result.clone_ref(py)),
                };
            }
            if signalled(py) {
                self.stop();
            }
        }
    }
}
