//! # gapless-engine
//!
//! The engine every front end drives (the CLI, experiments, Python, HTTP):
//!
//! - **Runs**: [`Run::start`] takes a [`RunSpec`] (a profile, a [`TxTarget`], an optional
//!   [`RxSpec`] to meter while sending, cores, batch, pacing) and returns a [`RunHandle`]:
//!   [`RunHandle::snapshot`] for live [`Snapshot`]s, [`RunHandle::stop`], and
//!   [`RunHandle::wait`] for the [`RunReport`] (TX joined with RX).
//! - **Meters**: [`measure`] (live, on an interface), [`analyze`] (a capture or a CSV of
//!   timestamps), and [`calibrate`] (the setup's own latency offset and precision floor).
//! - **Reports**: [`report`] (the result model filled, the summary text, the atomic result
//!   writer), [`report::plots`] (CSV exports and PNG/SVG plots) and [`report::experiment`]
//!   (an experiment's summary, trial trace and plots).
//!
//! Errors are [`EngineError`]s, which describe the fault and the system fix; front ends add
//! their own hints. Underneath: the send loop ([`run::run`]: TSC clock, busy-wait, backend),
//! core probing and pinning ([`cpu`]), the meter loop ([`rx`]).
//!
//! ```no_run
//! use gapless_engine::{ProfileSource, Run, RunSpec, TxTarget};
//! let profile = ProfileSource::from_file("examples/cbr.toml".as_ref())?;
//! let run = Run::start(RunSpec::new(profile, TxTarget::Null))?;
//! println!("{:?}", run.snapshot().total.tx);
//! run.stop();
//! let report = run.wait()?;
//! println!("sent {}", report.result.sent_frames);
//! # Ok::<(), gapless_engine::EngineError>(())
//! ```

/// This build: the crate version, the git commit and the cargo profile, as the result file's
/// `version` and `gapless --version` print them: `0.1.0 (git 71b3003d1e2f, profile release)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("GAPLESS_COMMIT"),
    ", profile ",
    env!("GAPLESS_PROFILE"),
    ")"
);

pub mod capture;
pub mod clock;
pub mod cores;
pub mod cpu;
pub mod error;
pub mod events;
pub mod experiment;
pub mod experiment_ports;
mod frame_check;
pub mod live;
pub mod metering;
pub mod ratectl;
pub mod report;
pub mod request;
pub mod rfc2889;
pub mod run;
pub mod rx;
pub mod session;
pub mod snapshot;
pub mod spec;
mod trials;
mod tx_ports;

pub use error::EngineError;
pub use experiment::Experiment;

/// Reads a text file the engine was given; `what` names it in the error ("profile", …).
pub(crate) fn read_text(path: &std::path::Path, what: &'static str, fix: &'static str) -> Result<String, EngineError> {
    std::fs::read_to_string(path).map_err(|cause| EngineError::Unreadable {
        what,
        path: path.display().to_string(),
        cause,
        fix,
    })
}
pub use gapless_core::spec::RateControlKind;
pub use metering::{analyze, calibrate, measure, AnalyzeSpec, Calibrated, CalibrationSpec, MeasureSpec, Metered};
pub use run::{merge_workers, run, RunOptions, RunStats};
pub use session::{Pauser, Run, RunHandle, RunReport};
pub use snapshot::{RxSnapshot, Snapshot, StreamSnapshot, TxSnapshot};
pub use spec::{
    MeterSetup, Pacing, ProfileSource, RunSpec, RxPort, RxSocket, RxSpec, TxMethod, TxSocket, TxStampKind, TxTarget,
};
