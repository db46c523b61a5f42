//! The driver's RFC 2889 tests ([`super::rfc2889`]): the address searches as iterations of
//! learning and test frames, and fully meshed forwarding as the throughput search over the
//! aggregate load of every direction.

use super::directions::DirectionRun;
use super::drive::{Driver, Step};
use super::rfc2889::{
    caching_procedure, congestion_procedure, learning_procedure, mesh_procedure, Bisect, CachingResult,
    CongestionResult, LearningPlan, LearningRateResult, MeshResult, Rfc2889Result, Rfc2889Spec, Rfc2889Test,
};
use super::search::{Resolution, Search, SearchSpec};
use super::spec::{Rfc2544Spec, Rfc2544Test};
use super::{DirectionLoad, Setting, TrialRecord};

/// The test port's own address, learned before the learning frames: one table entry.
const OWN_ENTRIES: u32 = 1;

impl Driver<'_> {
    pub(super) fn rfc2889(&mut self, r: &Rfc2889Spec) -> Step<()> {
        self.out.rfc2889 = Some(Rfc2889Result::default());
        let flush = match r.aging_time_s {
            Some(a) => format!("the switch's aging time ({a} s) and a second were waited"),
            None => "the bridge's learned entries were flushed (IFLA_BR_FDB_FLUSH)".to_string(),
        };
        if r.tests.contains(&Rfc2889Test::AddressCaching) {
            let c = self.caching(r, &flush)?;
            self.rfc2889_out().address_caching = Some(c);
        }
        if r.tests.contains(&Rfc2889Test::AddressLearningRate) {
            let l = self.learning_rate(r, &flush)?;
            self.rfc2889_out().address_learning_rate = Some(l);
        }
        if r.tests.contains(&Rfc2889Test::FullyMeshed) {
            let m = self.fully_meshed(r)?;
            self.rfc2889_out().fully_meshed = Some(m);
        }
        if r.tests.contains(&Rfc2889Test::CongestionControl) {
            let c = self.congestion(r)?;
            self.rfc2889_out().congestion_control = Some(c);
        }
        Ok(())
    }

    fn rfc2889_out(&mut self) -> &mut Rfc2889Result {
        self.out.rfc2889.as_mut().expect("set first")
    }

    /// One iteration: N addresses learned at `learning_pps`, then tested.
    fn iteration(&mut self, r: &Rfc2889Spec, n: u32, learning_pps: f64, what: String) -> Step<usize> {
        let mut p = self.plan(what, &[Setting::Size(r.frame_size)], 0);
        p.learning = Some(LearningPlan {
            addresses: n,
            learning_pps,
            test_pps: r.test_rate_pps,
            learning_port: r.learning_port,
            test_port: r.test_port,
            monitor_port: r.monitor_port,
            aging_time_s: r.aging_time_s,
        });
        p.count = Some(u64::from(n));
        p.warmup_s = 0.0;
        self.trial(p)
    }

    fn caching(&mut self, r: &Rfc2889Spec, flush: &str) -> Step<CachingResult> {
        let mut b = Bisect::new(r.min_addresses, r.max_addresses);
        let mut trials = Vec::new();
        while let Some(n) = b.next() {
            let i = self.iteration(r, n, r.learning_rate_pps, format!("address caching: {n} addresses"))?;
            b.record(n, learned(&self.out.trials[i]));
            trials.push(i);
        }
        let found = b.result();
        Ok(CachingResult {
            addresses: found,
            own_entries: OWN_ENTRIES,
            capacity: found.map(|n| n + OWN_ENTRIES),
            at_max: found == Some(r.max_addresses),
            procedure: caching_procedure(r, flush),
            trials,
        })
    }

    fn learning_rate(&mut self, r: &Rfc2889Spec, flush: &str) -> Step<LearningRateResult> {
        let cached = self
            .out
            .rfc2889
            .as_ref()
            .and_then(|x| x.address_caching.as_ref())
            .and_then(|c| c.addresses);
        let n = r.learning_addresses.or(cached).unwrap_or(r.max_addresses);
        let mut search = Search::new(SearchSpec {
            min_pps: r.learning_min_rate_pps,
            max_pps: r.learning_max_rate_pps,
            resolution: Resolution::Relative(r.resolution_pct / 100.0),
            max_iterations: 16,
            tolerance: 0.0,
        })
        .expect("checked");
        let mut trials = Vec::new();
        while let Some(rate) = search.next_rate() {
            let i = self.iteration(
                r,
                n,
                rate,
                format!("address learning rate: {n} addresses at {rate:.0} pps"),
            )?;
            let t = &self.out.trials[i];
            // An address not learned is a failed frame of the search.
            let ok = if learned(t) {
                t.run.sent
            } else {
                t.run.sent.saturating_sub(t.run.flooded.unwrap_or(0).max(1))
            };
            search.record(t.run.sent, ok);
            trials.push(i);
        }
        let res = search.result();
        Ok(LearningRateResult {
            rate_pps: res.throughput_pps,
            addresses: n,
            procedure: learning_procedure(r, n, flush),
            search: res,
            trials,
        })
    }

    fn fully_meshed(&mut self, r: &Rfc2889Spec) -> Step<MeshResult> {
        let max = r.max_rate_pps.expect("checked");
        let as_2544 = Rfc2544Spec {
            tests: vec![Rfc2544Test::Throughput],
            frame_sizes: vec![r.frame_size],
            loss_tolerance_pct: vec![0.0],
            min_rate_pps: Some(r.min_rate_pps.unwrap_or(max / 100.0)),
            max_rate_pps: Some(max),
            max_rate_bps: None,
            resolution_pps: None,
            resolution_pct: Some(r.resolution_pct),
            max_iterations: 16,
            max_burst: 1,
        };
        let t = self.throughput(&as_2544, r.frame_size, 0.0)?;
        // The search tries the maximum first: that trial is the forwarding rate's.
        let at_max = self
            .cache
            .get(&(r.frame_size, max.to_bits()))
            .copied()
            .unwrap_or(t.trials[0]);
        let m = &self.out.trials[at_max];
        Ok(MeshResult {
            ports: self.spec.ports.len(),
            throughput_pps: t.throughput_pps,
            offered_pps: max,
            forwarding_rate_pps: m.run.rx_pps,
            loss_pct: m.loss_pct,
            procedure: mesh_procedure(r, self.spec.ports.len()),
            search: t.search,
            trials: t.trials,
        })
    }
}

impl Driver<'_> {
    /// Congestion control: one trial of the three directions at their loads (run again
    /// while the sender fell behind, as every trial is).
    fn congestion(&mut self, r: &Rfc2889Spec) -> Step<CongestionResult> {
        let mut p = self.plan(
            "congestion control: 150 % to the congested port".into(),
            &[Setting::Size(r.frame_size)],
            0,
        );
        p.loads = r
            .congestion_loads()
            .into_iter()
            .map(|(from, to, pps)| DirectionLoad { from, to, pps })
            .collect();
        let first = self.out.trials.len();
        let i = self.trial(p)?;
        let names = self.spec.directions().unwrap_or_default();
        let t = &self.out.trials[i];
        // The trial's directions in the order A→C, A→D, B→C.
        let dirs: Vec<DirectionRun> = r
            .congestion_loads()
            .iter()
            .map(|&(from, to, _)| {
                let name = names.iter().find(|d| (d.from, d.to) == (from, to)).map(|d| &d.name);
                let run = t.run.directions.iter().find(|x| Some(&x.direction) == name);
                run.cloned().unwrap_or_default()
            })
            .collect();
        Ok(congestion_result(r, t, &dirs, (first..=i).collect()))
    }
}

/// What the congestion trial `t` shows; `dirs` are its directions A→C, A→D, B→C.
fn congestion_result(r: &Rfc2889Spec, t: &TrialRecord, dirs: &[DirectionRun], trials: Vec<usize>) -> CongestionResult {
    let loads = r.congestion_loads();
    let sum = |idx: &[usize], f: &dyn Fn(&DirectionRun) -> u64| -> u64 {
        idx.iter().filter_map(|&k| dirs.get(k)).map(f).sum()
    };
    let loss_pct = |idx: &[usize]| {
        let sent = sum(idx, &|d| d.sent);
        100.0 * DirectionRun::ratio(sent, sum(idx, &|d| d.received))
    };
    let rate = |idx: &[usize]| -> Option<f64> { idx.iter().map(|&k| dirs.get(k).and_then(|d| d.rx_pps)).sum() };
    // Frames each source offered per metered second: sent less what its device refused.
    let offered = |idx: &[usize]| sum(idx, &|d| d.sent - d.refused.min(d.sent)) as f64 / t.plan.duration_s;
    let intended = [loads[0].2 + loads[1].2, loads[2].2];
    let offered_pps = [offered(&[0, 1]), offered(&[2])];
    let refused = sum(&[0, 1, 2], &|d| d.refused);
    CongestionResult {
        ports: r.congestion_ports,
        load_pps: r.congestion_load_pps.unwrap_or(0.0),
        uncongested_loss_pct: loss_pct(&[1]),
        congested_loss_pct: loss_pct(&[0, 2]),
        expected_congested_loss_pct: 100.0 / 3.0,
        congested_rate_pps: rate(&[0, 2]),
        uncongested_rate_pps: rate(&[1]),
        offered_pps,
        intended_pps: intended,
        head_of_line_blocking: t.valid.then(|| sum(&[1], &|d| d.sent - d.received.min(d.sent)) > 0),
        back_pressure: t.valid.then_some(refused > 0),
        not_judged: t.invalid_reason.clone(),
        procedure: congestion_procedure(r, t.plan.duration_s),
        trials,
    }
}

/// Every test frame reached the learning port and none was flooded.
fn learned(t: &TrialRecord) -> bool {
    t.run.flooded == Some(0) && t.run.received >= t.run.sent && t.run.sent > 0
}
