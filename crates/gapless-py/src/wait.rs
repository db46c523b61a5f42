//! Waiting with the GIL released, and Ctrl-C while waiting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::prelude::*;

/// How often a wait looks for a pending signal (Python runs its handlers only when asked).
pub const POLL: Duration = Duration::from_millis(50);

/// Runs `work` on a thread of its own with the GIL released. A signal whose Python handler
/// raises (Ctrl-C: KeyboardInterrupt) raises `stop`, which the work ends on, keeping what it
/// did; the exception itself is dropped, since the result says it was interrupted.
pub fn interruptible<T: Send>(py: Python<'_>, stop: &AtomicBool, work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let h = s.spawn(work);
        while !h.is_finished() {
            py.detach(|| std::thread::sleep(Duration::from_millis(5)));
            if !h.is_finished() && signalled(py) {
                stop.store(true, Ordering::Relaxed);
            }
        }
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// Whether a signal handler raised (the exception is dropped).
pub fn signalled(py: Python<'_>) -> bool {
    py.check_signals().is_err()
}
