//! Experiments on real sockets: the core's driver ([`gapless_core::experiment`]) decides
//! the trials; each trial here is a [`Run`] with a meter, a warm-up, and the settle time
//! before it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gapless_core::experiment::spec::{DutInfo, ProfileRef};
use gapless_core::experiment::{
    ExperimentResult, ExperimentSpec, TrialError, TrialPlan, TrialRecord, TrialRun, Trials,
};
use gapless_core::spec::BackendKind;

use crate::spec::{MeterSetup, PortRef, ProfileSource, RunSpec, RxSpec, TxSocket, TxTarget};
use crate::{EngineError, Run};

/// An experiment ready to run: the file, its profile, and the calibration it names.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub spec: ExperimentSpec,
    pub profile: ProfileSource,
    pub calibration: Option<(gapless_core::meter::Calibration, String)>,
    /// How results name the experiment (its path).
    pub label: String,
    /// Several ports: the directions, and where each stream leaves and is metered.
    pub ports: Option<crate::experiment_ports::PortsPlan>,
    /// RFC 2889: how the switch's table is emptied between iterations.
    pub age_out: Option<crate::rfc2889::AgeOut>,
}

impl Experiment {
    /// Reads an experiment file and what it names (relative to its directory).
    pub fn from_file(path: &Path) -> Result<Experiment, EngineError> {
        let text = crate::read_text(
            path,
            "experiment",
            "check the path (examples/rfc2544_dut.toml is one to start from)",
        )?;
        let origin = path.display().to_string();
        let spec = ExperimentSpec::from_toml(&text, &origin).map_err(|e| EngineError::BadFile {
            problem: e.strip_prefix(&format!("{origin}: ")).unwrap_or(&e).to_string(),
            path: origin.clone(),
            fix: "see the README's Experiments section for the keys".into(),
        })?;
        Experiment::new(
            spec,
            path.parent().unwrap_or(Path::new(".")),
            path.display().to_string(),
        )
    }

    /// An experiment from data; files it names are read from `dir`.
    pub fn new(spec: ExperimentSpec, dir: &Path, label: String) -> Result<Experiment, EngineError> {
        spec.check().map_err(|e| EngineError::BadFile {
            path: label.clone(),
            problem: e,
            fix: "see the README's Experiments section for the keys".into(),
        })?;
        let in_profile = |e: EngineError| EngineError::ExperimentProfile {
            experiment: label.clone(),
            inner: Box::new(e),
        };
        let mut profile = match &spec.profile {
            ProfileRef::Path(p) => ProfileSource::from_file(&dir.join(p)).map_err(in_profile)?,
            ProfileRef::Inline(p) => ProfileSource {
                spec: (**p).clone(),
                dir: dir.to_path_buf(),
                label: format!("{label} [profile]"),
            },
        };
        if profile.spec.streams.is_empty() {
            return Err(EngineError::BadFile {
                path: profile.label,
                problem: "the profile has no [[stream]]".into(),
                fix: "give the experiment's profile one stream (its rate and size are set per trial)".into(),
            });
        }
        let ports = match spec.multi_port() {
            true => {
                let (plan, p) = crate::experiment_ports::plan(&spec, &profile.spec, &label)?;
                profile.spec = p;
                Some(plan)
            }
            false => None,
        };
        let calibration = match &spec.calibration {
            Some(c) => {
                let p: PathBuf = dir.join(c);
                Some((crate::metering::load_calibration(&p)?, p.display().to_string()))
            }
            None => None,
        };
        // Every trial's profile must compile: check the first one now.
        profile.compile(None).map_err(in_profile)?;
        let mut x = Experiment {
            spec,
            profile,
            calibration,
            label,
            ports,
            age_out: None,
        };
        if x.spec.method == gapless_core::experiment::Method::Rfc2889 {
            let a = crate::rfc2889::age_out(&x.spec).map_err(|problem| EngineError::BadFile {
                path: x.label.clone(),
                problem,
                fix: "see the experiments guide's RFC 2889 section".into(),
            })?;
            x.age_out = a;
        }
        Ok(x)
    }

    /// Runs every trial; `on_trial` hears of each as it is judged. Stops early (keeping what
    /// was measured) when `stop` is raised or a trial fails.
    pub fn run(&self, stop: Arc<AtomicBool>, on_trial: &mut dyn FnMut(&TrialRecord)) -> ExperimentFile {
        let mut t = EngineTrials {
            x: self,
            stop,
            last_end: None,
            on_trial,
            machine: None,
            aged: false,
        };
        let r = gapless_core::experiment::run(&self.spec, self.seed(), &mut t);
        let machine = t.machine.take();
        self.file(r, machine)
    }

    /// The seed of the first repetition (the profile's, else 1).
    pub fn seed(&self) -> u64 {
        self.profile.spec.seed.unwrap_or(1)
    }

    /// The result file of what `r` found, `machine` the sending host.
    pub fn file(&self, mut r: ExperimentResult, machine: Option<gapless_core::host::Environment>) -> ExperimentFile {
        if let Some((c, p)) = &self.calibration {
            r.warnings.push(if c.valid {
                format!("calibration {p}: its latency offset of {} ns was subtracted from every latency", c.latency_offset_ns)
            } else {
                format!("calibration {p} is invalid: its offset was NOT subtracted. Fix: calibrate again on a quiet machine")
            });
        }
        ExperimentFile {
            tool: "gapless".into(),
            version: crate::VERSION.into(),
            experiment: self.label.clone(),
            spec: self.spec.clone(),
            dut: self.spec.dut.clone().or_else(|| testbed_dut(&self.spec)),
            machine,
            // Experiments subtract a calibration's offset only when it passed its own checks.
            calibration: self
                .calibration
                .as_ref()
                .map(|(c, p)| gapless_core::meter::CalibrationRef {
                    subtracted: c.valid,
                    ..c.reference(p)
                }),
            result: r,
        }
    }
}

/// Waits `settle_s` after the previous trial's end (queues drain), or until stopped.
pub fn settle(last_end: Option<Instant>, settle_s: f64, stop: &AtomicBool) -> Result<(), TrialError> {
    let Some(end) = last_end else { return Ok(()) };
    let until = end + Duration::from_secs_f64(settle_s);
    crate::trials::wait(until.saturating_duration_since(Instant::now()), stop)
}

/// An experiment's result file: what ran, where, against what, and every trial.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ExperimentFile {
    pub tool: String,
    pub version: String,
    pub experiment: String,
    pub spec: ExperimentSpec,
    pub dut: Option<DutInfo>,
    /// The sending host, as the first trial found it.
    pub machine: Option<gapless_core::host::Environment>,
    pub calibration: Option<gapless_core::meter::CalibrationRef>,
    #[serde(flatten)]
    pub result: ExperimentResult,
}

impl ExperimentFile {
    /// How the report names the device.
    pub fn dut_text(&self) -> Option<String> {
        self.dut.as_ref().map(DutInfo::text)
    }
}

/// The reference device of the testbed the sender's namespace belongs to (`NAME-tx`).
fn testbed_dut(spec: &ExperimentSpec) -> Option<DutInfo> {
    let (_, d) = crate::trials::reference_testbed(spec)?;
    Some(DutInfo {
        kind: match d.kind {
            gapless_io::testbed::dut::DutKind::Bridge => "reference bridge (gapless testbed --dut bridge)".into(),
            gapless_io::testbed::dut::DutKind::Router => "reference IPv4 router (gapless testbed --dut router)".into(),
            gapless_io::testbed::dut::DutKind::RouterFailover => {
                "reference IPv4 router with a backup path (gapless testbed --dut router-failover)".into()
            }
        },
        rate: d.rate_bps.map(|r| format!("{} {:.3} Mbit/s", d.qdisc, r as f64 / 1e6)),
        queue: d.rate_bps.map(|_| d.queue),
        note: None,
    })
}

struct EngineTrials<'a> {
    x: &'a Experiment,
    stop: Arc<AtomicBool>,
    last_end: Option<Instant>,
    on_trial: &'a mut dyn FnMut(&TrialRecord),
    machine: Option<gapless_core::host::Environment>,
    /// RFC 2889 on a real switch: its table was aged out since the last address test.
    aged: bool,
}

impl Trials for EngineTrials<'_> {
    fn run(&mut self, index: usize, plan: &TrialPlan) -> Result<TrialRun, TrialError> {
        if self.x.spec.on_agents() {
            return Err(TrialError::Failed("its ports are on agents, which `gapless experiment FILE --agent-token-file F` and a `gapless serve --agent-token-file F`'s experiments drive (Python does not yet)".into()));
        }
        self.settle()?;
        if let Some(l) = &plan.learning {
            return self.address_iteration(plan, l);
        }
        if let Some(a) = self.x.age_out.as_ref().filter(|_| !self.aged) {
            // The address tests filled the table: the ports' own addresses are learned
            // again from the warm-up only when there is room.
            crate::rfc2889::empty_table(a, &self.stop)?;
            self.aged = !matches!(a, crate::rfc2889::AgeOut::Flush(_));
        }
        let (spec, kept) = self.run_spec(plan).map_err(|e| TrialError::Failed(e.to_string()))?;
        self.announce(plan, &kept)?;
        let report = Run::start_with_stop(spec, self.stop.clone())
            .and_then(|h| h.wait())
            .map_err(|e| TrialError::Failed(format!("trial {}: {e}", index + 1)))?;
        self.last_end = Some(Instant::now());
        if self.stop.load(Ordering::Relaxed) {
            return Err(TrialError::Stopped);
        }
        if let Some(e) = report.backend_error.as_ref().or(report.meter_error.as_ref()) {
            return Err(TrialError::Failed(format!("trial {}: {e}", index + 1)));
        }
        let mut run = crate::trials::trial_run(&report);
        if let Some(p) = &self.x.ports {
            crate::experiment_ports::with_directions(
                &mut run,
                p.directions_of(&report.result.streams, report.result.rx.as_ref(), &kept),
            );
        }
        self.machine.get_or_insert_with(|| report.result.environment.clone());
        Ok(run)
    }

    fn judged(&mut self, rec: &TrialRecord) {
        (self.on_trial)(rec);
    }
}

impl EngineTrials<'_> {
    /// An iteration of RFC 2889's address tests.
    fn address_iteration(
        &mut self,
        plan: &TrialPlan,
        l: &gapless_core::experiment::rfc2889::LearningPlan,
    ) -> Result<TrialRun, TrialError> {
        let rig = crate::rfc2889::Rig {
            ports: self.x.ports.as_ref().expect("rfc2889 runs on ports"),
            age_out: self.x.age_out.as_ref().expect("checked when the experiment was made"),
            label: &self.x.label,
        };
        let run = crate::rfc2889::iteration(&rig, plan, l, &self.stop);
        self.last_end = Some(Instant::now());
        self.aged = false;
        run
    }

    /// A trial that sends only some directions (loads) on a switch: the ports that only
    /// receive announce their addresses first, so that the switch does not flood to them.
    fn announce(&self, plan: &TrialPlan, kept: &[usize]) -> Result<(), TrialError> {
        let Some(p) = self.x.ports.as_ref().filter(|_| !plan.loads.is_empty()) else {
            return Ok(());
        };
        let silent = p.silent_receivers(kept);
        let to = p.directions[p.stream_dirs[kept[0]]].from;
        crate::rfc2889::announce(p, &silent, to, &self.x.label, &self.stop)
            .map_err(|e| TrialError::Failed(format!("{}: announcing the receiving ports: {e}", plan.purpose)))
    }

    fn settle(&self) -> Result<(), TrialError> {
        settle(self.last_end, self.x.spec.trial.settle_s, &self.stop)
    }

    /// The trial's run, and which of the profile's streams it sends.
    fn run_spec(&self, plan: &TrialPlan) -> Result<(RunSpec, Vec<usize>), EngineError> {
        let x = self.x;
        let pairs = x.ports.as_ref().map(|p| p.stream_pairs()).unwrap_or_default();
        let (spec, kept) = plan.apply_loads(&x.profile.spec, &pairs);
        let profile = ProfileSource {
            spec,
            dir: x.profile.dir.clone(),
            label: format!("{} ({})", x.profile.label, plan.purpose),
        };
        let ports = x.spec.port_list();
        let sending = x.ports.as_ref().map(|p| p.trial_ports(&kept));
        let (tx, mut rx) = match (&x.ports, &sending) {
            (Some(p), Some(t)) => (t.tx[0].clone(), p.rx_spec()),
            _ => {
                let mut rx = RxSpec::new(ports[1].iface.clone());
                rx.netns = ports[1].netns.clone();
                (PortRef::from(&ports[0]), rx)
            }
        };
        let socket = ports[0].backend.map(|b| match b {
            BackendKind::Afxdp => TxSocket::AfXdp {
                mode: gapless_io::xdp::XdpMode::Auto,
                queue: 0,
            },
            _ => TxSocket::AfPacket(crate::spec::TxMethod::Sendmmsg),
        });
        rx.ring_blocks = ring_blocks(plan, &profile.spec);
        // Frames the device still holds when the sender ends arrive within the settle time.
        rx.linger = Duration::from_secs_f64(x.spec.trial.settle_s.max(0.3));
        rx.meter = MeterSetup {
            calibration: x.calibration.clone(),
            ..MeterSetup::default()
        };
        let spec = RunSpec {
            netns: tx.netns.clone(),
            rx: Some(rx),
            warmup: (plan.warmup_s > 0.0).then(|| Duration::from_secs_f64(plan.warmup_s)),
            core: crate::trials::sender_core(),
            more_tx: sending.as_ref().map(|t| t.tx[1..].to_vec()).unwrap_or_default(),
            stream_ports: sending.map(|t| t.stream_tx).unwrap_or_default(),
            // The sender's core is fixed: its load is probed (and warned of) before the first
            // trial only.
            probe_cores: self.machine.is_none(),
            close_later: !matches!(socket, Some(TxSocket::AfXdp { .. })),
            ..RunSpec::new(profile, TxTarget::Iface { name: tx.iface, socket })
        };
        Ok((spec, kept))
    }
}

/// The meter's ring for a trial: a quarter second of its frames (None: its rate is not in
/// frames/s, so the default ring).
fn ring_blocks(plan: &TrialPlan, p: &gapless_core::ProfileSpec) -> Option<u32> {
    let rate = plan
        .rate_pps
        .unwrap_or_else(|| p.streams.iter().filter_map(|s| s.timing.rate_pps).sum());
    let fixed = |s: &gapless_core::spec::StreamSpec| match s.size {
        Some(gapless_core::spec::SizeSpec::Fixed(n)) if s.variants.is_empty() => Some(n),
        _ => None,
    };
    // The largest frame, when every stream's size is fixed; else the largest Ethernet's.
    let size = plan.size.or_else(|| {
        let sizes: Option<Vec<u32>> = p.streams.iter().map(fixed).collect();
        sizes.and_then(|v| v.into_iter().max())
    });
    (rate > 0.0).then(|| crate::spec::ring_blocks_for(rate, size.unwrap_or(1518)))
}
