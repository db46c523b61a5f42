use super::*;

/// A device that forwards `cap` frames/s and drops the rest; the sender falls behind on
/// the trials listed in `late` (by index).
struct FakeDut {
    cap: f64,
    late: Vec<usize>,
    seeds: Vec<u64>,
    stop_after: Option<usize>,
}

impl Trials for FakeDut {
    fn run(&mut self, index: usize, plan: &TrialPlan) -> Result<TrialRun, TrialError> {
        if self.stop_after.is_some_and(|n| index >= n) {
            return Err(TrialError::Stopped);
        }
        self.seeds.push(plan.seed);
        let rate = plan.rate_pps.unwrap_or(1000.0);
        let sent = plan.count.unwrap_or((rate * plan.duration_s) as u64);
        let received = if rate <= self.cap {
            sent
        } else {
            (self.cap * plan.duration_s) as u64
        };
        let late = self.late.contains(&index);
        Ok(TrialRun {
            sent,
            sent_total: sent,
            received,
            late_over_gap: if late { sent / 100 } else { 0 },
            // A 1 s stall: a catch-up burst over the default limit at any rate from 1 000
            // frames/s.
            late_max_ns: if late { 1_000_000_000 } else { 0 },
            schedule: if late { "NOT held".into() } else { "held".into() },
            held: !late,
            ..Default::default()
        })
    }
}

fn dut(cap: f64) -> FakeDut {
    FakeDut {
        cap,
        late: Vec::new(),
        seeds: Vec::new(),
        stop_after: None,
    }
}

const BASE: &str = r#"
method = "rfc2544"
profile = "p.toml"
tx = { iface = "gl-tx0", netns = "gl-tx" }
rx = { iface = "gl-rx0", netns = "gl-rx" }
"#;

fn spec(extra: &str) -> ExperimentSpec {
    spec_of("rfc2544", extra)
}

fn spec_of(method: &str, extra: &str) -> ExperimentSpec {
    let base = BASE.replace("\"rfc2544\"", &format!("{method:?}"));
    ExperimentSpec::from_toml(&format!("{base}{extra}"), "e.toml").expect("valid")
}

#[test]
fn rfc2544_finds_the_fake_capacity_for_each_tolerance_and_reuses_trials() {
    let s = spec("[rfc2544]\nframe_sizes = [64, 512]\nmax_rate_pps = 100000\nresolution_pct = 0.5\nloss_tolerance_pct = [0, 0.1, 1]\n");
    let mut d = dut(50_000.0);
    let r = run(&s, 1, &mut d);
    assert!(!r.stopped, "{:?}", r.error);
    assert_eq!(r.rfc2544.len(), 2);
    for size in &r.rfc2544 {
        for t in &size.throughput {
            let tp = t.throughput_pps.expect("found");
            // Within tolerance tol, rates up to cap / (1 - tol) pass.
            let top = 50_000.0 / (1.0 - t.loss_tolerance_pct / 100.0);
            assert!(
                tp <= top && tp >= top * 0.995 - 1.0,
                "tol {} %: expected within 0.5 % below {top}, got {tp}",
                t.loss_tolerance_pct
            );
            assert!(t.search.converged);
        }
    }
    // The second and third searches start where the first did: 100 kpps is tried once per size.
    let at_max = r.trials.iter().filter(|t| t.plan.rate_pps == Some(100_000.0)).count();
    assert_eq!(at_max, 2, "expected the maximum tried once per size, got {at_max}");
    assert_eq!(r.repeats, 0);
}

#[test]
fn a_trial_whose_sender_fell_behind_is_run_again_and_counted() {
    let s = spec("[rfc2544]\nframe_sizes = [64]\nmax_rate_pps = 100000\n");
    let mut d = dut(50_000.0);
    d.late = vec![0, 1];
    let r = run(&s, 7, &mut d);
    assert_eq!(r.repeats, 2, "expected 2 repeats, got {}", r.repeats);
    assert!(r.trials[0].repeated && r.trials[1].repeated && !r.trials[2].repeated);
    assert!(!r.trials[0].valid && r.trials[0].invalid_reason.as_deref().unwrap().contains("fell behind"));
    assert!(r.trials[2].valid);
    assert_eq!(r.trials[0].plan, r.trials[2].plan, "the same trial again");
    // Only the valid attempt counts in the search.
    let used = &r.rfc2544[0].throughput[0].trials;
    assert!(
        !used.contains(&0) && !used.contains(&1) && used.contains(&2),
        "{used:?}"
    );
}

#[test]
fn an_always_late_sender_uses_its_last_attempt_and_says_so() {
    let s = spec_of("repeat", "[trial]\nrepetitions = 2\nmax_retries = 2\n");
    let mut d = dut(1e9);
    d.late = (0..100).collect();
    let r = run(&s, 1, &mut d);
    // 2 repetitions × (1 + 2 retries).
    assert_eq!(r.trials.len(), 6, "expected 6 attempts, got {}", r.trials.len());
    assert_eq!(r.repeats, 4);
    let p = r.repeat.expect("point");
    assert_eq!(p.invalid_used, 2);
    assert_eq!(p.trials, vec![2, 5]);
}

#[test]
fn an_mlrsearch_whose_sender_fails_every_load_stops_and_says_so_in_its_result() {
    let s = spec_of(
        "mlrsearch",
        "[mlrsearch]\ngoals = [{ name = \"NDR\", loss_ratio = 0.0 }]\nmax_rate_pps = 100000\nmin_rate_pps = 100\n",
    );
    let mut d = dut(50_000.0);
    d.late = (0..1000).collect();
    let r = run(&s, 1, &mut d);
    let m = r.mlrsearch.expect("a search result");
    assert!(m.sender_gave_up, "expected sender_gave_up; got {m:?}");
    assert!(
        m.sender.contains("search stopped") && m.sender_cap_pps.is_some(),
        "expected the verdict to say the search stopped; got {:?}",
        m.sender
    );
    assert!(
        m.goals.iter().all(|g| g.lower_bound_pps.is_none()),
        "expected no bound from failed trials; got {:?}",
        m.goals
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("mlrsearch stopped after")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn repetitions_have_their_own_seeds_and_a_confidence_interval() {
    let s = spec_of(
        "sweep",
        "[trial]\nrepetitions = 3\n[sweep]\nparameter = \"rate\"\nvalues = [1000, 60000]\ncurves = { parameter = \"burst\", values = [1, 4] }\n",
    );
    let mut d = dut(50_000.0);
    let r = run(&s, 10, &mut d);
    assert_eq!(r.sweep.len(), 2);
    assert_eq!(r.sweep[1].curve, Some(Setting::Burst(4)));
    assert_eq!(r.sweep[0].points.len(), 2);
    assert_eq!(&d.seeds[..3], &[10, 11, 12]);
    let lossy = &r.sweep[0].points[1];
    assert_eq!(lossy.loss_pct.n, 3);
    // 60 kpps into 50 kpps: a sixth lost in every repetition, so no spread.
    assert!((lossy.loss_pct.mean - 100.0 / 6.0).abs() < 1e-6, "{:?}", lossy.loss_pct);
    assert_eq!(lossy.loss_pct.half_width, Some(0.0));
}

#[test]
fn back_to_back_and_frame_loss_follow_the_rfc() {
    let s = spec("[rfc2544]\ntests = [\"frame-loss\", \"back-to-back\"]\nframe_sizes = [64]\nmax_rate_pps = 100000\nmax_burst = 1000\n");
    // A fake whose queue takes 300 frames of a burst.
    struct Queue;
    impl Trials for Queue {
        fn run(&mut self, _: usize, p: &TrialPlan) -> Result<TrialRun, TrialError> {
            let rate = p.rate_pps.unwrap();
            let sent = p.count.unwrap_or((rate * p.duration_s) as u64);
            let received = match p.count {
                Some(n) => n.min(300),
                None if rate <= 75_000.0 => sent,
                None => (75_000.0 * p.duration_s) as u64,
            };
            Ok(TrialRun {
                sent,
                sent_total: sent,
                received,
                ..Default::default()
            })
        }
    }
    let r = run(&s, 1, &mut Queue);
    let sz = &r.rfc2544[0];
    assert_eq!(sz.back_to_back.as_ref().unwrap().bursts, vec![300]);
    let loads: Vec<f64> = sz.frame_loss.iter().map(|l| l.load_pct).collect();
    // 100, 90, 80 lose; 70 and 60 do not: two clean steps end it.
    assert_eq!(loads, vec![100.0, 90.0, 80.0, 70.0, 60.0]);
    assert!((sz.frame_loss[0].loss_pct - 25.0).abs() < 1e-9);
}

#[test]
fn a_wire_rate_gives_each_size_its_own_maximum() {
    let s = spec("[rfc2544]\nframe_sizes = [64, 1518]\nmax_rate_bps = 1e9\n");
    let r = s.rfc2544.as_ref().unwrap();
    assert!((r.max_rate(64) - 1_488_095.2).abs() < 0.1, "{}", r.max_rate(64));
    assert!((r.max_rate(1518) - 81_274.4).abs() < 0.1, "{}", r.max_rate(1518));
    let mut d = dut(1e9);
    let out = run(&s, 1, &mut d);
    let firsts: Vec<f64> = out.trials.iter().map(|t| t.plan.rate_pps.unwrap()).collect();
    assert!(
        (firsts[0] - r.max_rate(64)).abs() < 1e-6 && (firsts[1] - r.max_rate(1518)).abs() < 1e-6,
        "{firsts:?}"
    );
}

#[test]
fn a_stop_keeps_what_was_measured() {
    let s = spec("[rfc2544]\nframe_sizes = [64]\nmax_rate_pps = 100000\n");
    let mut d = dut(50_000.0);
    d.stop_after = Some(3);
    let r = run(&s, 1, &mut d);
    assert!(r.stopped);
    assert_eq!(r.trials.len(), 3);
}

#[test]
fn a_plan_sets_every_stream() {
    let base = crate::ProfileSpec::from_toml(
        "[[stream]]\nsize = 64\n[stream.timing]\nrate_bps_l1 = 1e6\n[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 5\ncount = 9\n",
        "p",
    )
    .unwrap();
    let plan = TrialPlan {
        purpose: String::new(),
        rate_pps: Some(1000.0),
        size: Some(512),
        burst: Some(4),
        pattern: None,
        duration_s: 2.0,
        warmup_s: 0.5,
        count: None,
        seed: 3,
        learning: None,
        loads: Vec::new(),
    };
    let p = plan.apply(&base);
    assert_eq!(p.seed, Some(3));
    for s in &p.streams {
        assert_eq!(s.timing.rate_pps, Some(500.0));
        assert_eq!(s.timing.rate_bps_l1, None);
        assert_eq!(s.timing.burst, Some(4));
        assert_eq!((s.timing.count, s.timing.duration_s), (None, Some(2.5)));
        assert!(matches!(s.size, Some(SizeSpec::Fixed(512))));
    }
}

#[test]
fn bad_experiment_files_name_the_key() {
    let cases = [
        ("method = \"rfc2544\"\n", "[rfc2544]"),
        ("method = \"sweep\"\n", "[sweep]"),
        ("[rfc2544]\nmax_rate_pps = -1\n", "rfc2544.max_rate_pps = -1"),
        (
            "[rfc2544]\nframe_sizes = [64]\n",
            "give max_rate_pps (frames/s) or max_rate_bps",
        ),
        (
            "[rfc2544]\nmax_rate_pps = 10\nmin_rate_pps = 20\n",
            "rfc2544.min_rate_pps = 20",
        ),
        (
            "[rfc2544]\nmax_rate_pps = 10\nframe_sizes = [64, 20]\n",
            "rfc2544.frame_sizes[1] = 20",
        ),
        (
            "[rfc2544]\nmax_rate_pps = 10\nloss_tolerance_pct = [100]\n",
            "rfc2544.loss_tolerance_pct[0] = 100",
        ),
        (
            "[rfc2544]\nmax_rate_pps = 10\nresolution_pps = 1\nresolution_pct = 1\n",
            "not both",
        ),
        (
            "[rfc2544]\nmax_rate_pps = 10\ntests = [\"speed\"]\n",
            "unknown variant `speed`",
        ),
        (
            "[trial]\nduration_s = 0\n[rfc2544]\nmax_rate_pps = 10\n",
            "trial.duration_s = 0",
        ),
        (
            "[trial]\nconfidence = 95\n[rfc2544]\nmax_rate_pps = 10\n",
            "trial.confidence = 95",
        ),
        ("[trial]\nwarm_up = 1\n", "unknown field `warm_up`"),
        ("[sweep]\nparameter = \"burst\"\nvalues = [0]\n", "sweep: burst 0"),
        (
            "[sweep]\nparameter = \"pattern\"\nvalues = [\"onoff\"]\n",
            "sweep.values[0] = \"onoff\"",
        ),
        ("[sweep]\nparameter = \"rate\"\n", "give `values = [...]`"),
    ];
    let inline = BASE.replace("profile = \"p.toml\"\n", "");
    for (extra, want) in [
        (
            "[rfc2544]\nmax_rate_pps = 10\n[profile]\nbogus = 1\n",
            "in the [profile] table: unknown field `bogus`",
        ),
        (
            "profile = 3\n[rfc2544]\nmax_rate_pps = 10\n",
            "profile = 3: give a profile file's path",
        ),
    ] {
        let e = ExperimentSpec::from_toml(&format!("{inline}{extra}"), "e.toml").expect_err(extra);
        assert!(
            e.contains(want),
            "for {extra:?}: expected an error with {want:?}, got {e:?}"
        );
    }
    for (extra, want) in cases {
        let text = if extra.starts_with("method") {
            format!("{}{extra}", BASE.replace("method = \"rfc2544\"\n", ""))
        } else if extra.contains("[sweep]") {
            format!("{}{extra}", BASE.replace("\"rfc2544\"", "\"sweep\""))
        } else {
            format!("{BASE}{extra}")
        };
        let e = ExperimentSpec::from_toml(&text, "e.toml").expect_err(extra);
        assert!(
            e.starts_with("e.toml: ") && e.contains(want),
            "for {extra:?}: expected an error with {want:?}, got {e:?}"
        );
    }
}

/// A bridge whose table holds `table` learned addresses and which learns at most
/// `learn_pps` source addresses per second; it forwards `cap` frames/s in all.
struct FakeBridge {
    table: u32,
    learn_pps: f64,
    cap: f64,
}

impl Trials for FakeBridge {
    fn run(&mut self, _index: usize, plan: &TrialPlan) -> Result<TrialRun, TrialError> {
        let Some(l) = &plan.learning else {
            return dut(self.cap).run(0, plan);
        };
        // The test port's own address takes one entry first.
        let room = self.table.saturating_sub(1);
        let learned = if l.learning_pps <= self.learn_pps {
            l.addresses.min(room)
        } else {
            0
        };
        let n = u64::from(l.addresses);
        Ok(TrialRun {
            sent: n,
            sent_total: n,
            received: n,
            flooded: Some(n - u64::from(learned)),
            schedule: "held".into(),
            held: true,
            ..Default::default()
        })
    }
}

const RFC2889: &str = r#"
method = "rfc2889"
profile = "p.toml"
ports = [{ iface = "a" }, { iface = "b" }, { iface = "c" }]
[rfc2889]
max_addresses = 100
max_rate_pps = 30000
learning_max_rate_pps = 10000
learning_rate_pps = 1000
"#;

#[test]
fn rfc2889_finds_the_table_less_the_test_port_and_the_learning_rate() {
    let spec = ExperimentSpec::from_toml(RFC2889, "e.toml").expect("valid");
    assert_eq!(
        spec.directions().unwrap().len(),
        6,
        "rfc2889's ports default to a full mesh"
    );
    let mut b = FakeBridge {
        table: 40,
        learn_pps: 2000.0,
        cap: 20_000.0,
    };
    let r = run(&spec, 1, &mut b);
    let x = r.rfc2889.as_ref().expect("rfc2889 result");
    let c = x.address_caching.as_ref().unwrap();
    assert_eq!(
        (c.addresses, c.capacity, c.own_entries),
        (Some(39), Some(40), 1),
        "{c:?}"
    );
    assert!(c.procedure.starts_with("RFC 2889 §5.7"), "{}", c.procedure);
    let l = x.address_learning_rate.as_ref().unwrap();
    assert_eq!(l.addresses, 39);
    let rate = l.rate_pps.expect("a learning rate");
    assert!(
        (1990.0..=2000.0).contains(&rate),
        "expected the learning rate within 1 % below 2000; got {rate}"
    );
    let m = x.fully_meshed.as_ref().unwrap();
    let tp = m.throughput_pps.expect("a throughput");
    assert!(
        (19_800.0..=20_000.0).contains(&tp),
        "expected the mesh throughput near 20000; got {tp}"
    );
    assert!(
        m.loss_pct > 30.0,
        "at 30000 offered, a third is lost; got {}",
        m.loss_pct
    );
}

#[test]
fn rfc2889_is_refused_without_ports_or_its_roles() {
    let one_way = RFC2889.replace(
        "ports = [{ iface = \"a\" }, { iface = \"b\" }, { iface = \"c\" }]",
        "tx = { iface = \"a\" }\nrx = { iface = \"b\" }",
    );
    let e = ExperimentSpec::from_toml(&one_way, "e.toml").unwrap_err();
    assert!(e.contains("tests a switch between ports"), "{e}");
    let two = RFC2889.replace(", { iface = \"c\" }", "");
    let e = ExperimentSpec::from_toml(&two, "e.toml").unwrap_err();
    assert!(e.contains("rfc2889.monitor_port = 2: there are 2 ports"), "{e}");
}

#[test]
fn every_example_experiment_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if path.extension().and_then(|x| x.to_str()) != Some("toml")
            || !text.lines().any(|l| l.starts_with("method = "))
        {
            continue;
        }
        let spec = ExperimentSpec::from_toml(&text, &path.display().to_string());
        assert!(
            spec.is_ok(),
            "expected {} to parse; got {:?}",
            path.display(),
            spec.err()
        );
        n += 1;
    }
    assert!(n >= 4, "expected the four example experiments; found {n}");
}

#[test]
fn loads_keep_only_their_directions_streams_each_at_its_share_with_their_ids() {
    let mut base = crate::ProfileSpec::from_toml(
        "[[stream]]\nsize = 64\n[stream.timing]\nrate_bps_l1 = 1e6\n[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 5\n[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 5\n[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 5\n",
        "p",
    )
    .unwrap();
    for (k, s) in base.streams.iter_mut().enumerate() {
        s.id = Some(k as u16);
    }
    // Streams 0 and 1 go 0→2, stream 2 goes 0→3, stream 3 goes 1→2.
    let dirs = [(0, 2), (0, 2), (0, 3), (1, 2)];
    let mut plan = TrialPlan {
        purpose: String::new(),
        rate_pps: None,
        size: Some(64),
        burst: None,
        pattern: None,
        duration_s: 1.0,
        warmup_s: 0.0,
        count: None,
        seed: 1,
        learning: None,
        loads: Vec::new(),
    };
    let (_, kept) = plan.apply_loads(&base, &dirs);
    assert_eq!(kept, [0, 1, 2, 3], "without loads every stream is kept");
    plan.loads = vec![
        DirectionLoad {
            from: 0,
            to: 2,
            pps: 500.0,
        },
        DirectionLoad {
            from: 1,
            to: 2,
            pps: 1000.0,
        },
    ];
    let (p, kept) = plan.apply_loads(&base, &dirs);
    assert_eq!(kept, [0, 1, 3], "expected the streams of 0→2 and 1→2");
    let rates: Vec<_> = p.streams.iter().map(|s| s.timing.rate_pps).collect();
    assert_eq!(rates, [Some(250.0), Some(250.0), Some(1000.0)]);
    assert_eq!(p.streams[0].timing.rate_bps_l1, None, "one rate per stream");
    let ids: Vec<_> = p.streams.iter().map(|s| s.id).collect();
    assert_eq!(ids, [Some(0), Some(1), Some(3)]);
}

/// A switch whose ports each forward `cap` frames/s: `shared` loses the overload of any
/// port from every direction alike (one shared queue: head-of-line blocking), else only
/// from the directions to the overloaded port; `pause` refuses the overload at the source
/// (flow control), so nothing is lost in the switch.
struct FakeSwitch {
    cap: f64,
    shared: bool,
    pause: bool,
}

impl Trials for FakeSwitch {
    fn run(&mut self, _index: usize, plan: &TrialPlan) -> Result<TrialRun, TrialError> {
        let t = plan.duration_s;
        let into = |to: usize| plan.loads.iter().filter(|l| l.to == to).map(|l| l.pps).sum::<f64>();
        let worst = plan.loads.iter().map(|l| self.cap / into(l.to)).fold(1.0, f64::min);
        let directions: Vec<directions::DirectionRun> = plan
            .loads
            .iter()
            .map(|l| {
                let share = if self.shared {
                    worst
                } else {
                    (self.cap / into(l.to)).min(1.0)
                };
                let sent = (l.pps * t) as u64;
                let (received, refused) = match self.pause {
                    true => ((sent as f64 * share) as u64, sent - (sent as f64 * share) as u64),
                    false => ((sent as f64 * share) as u64, 0),
                };
                directions::DirectionRun {
                    direction: format!("{}→{}", ["a", "b", "c", "d"][l.from], ["a", "b", "c", "d"][l.to]),
                    sent,
                    received,
                    loss_ratio: directions::DirectionRun::ratio(sent, received),
                    rx_pps: Some(received as f64 / t),
                    refused,
                    ..Default::default()
                }
            })
            .collect();
        let sent = directions.iter().map(|d| d.sent).sum();
        Ok(TrialRun {
            sent,
            sent_total: sent,
            received: directions.iter().map(|d| d.received).sum(),
            schedule: "held".into(),
            held: true,
            directions,
            ..Default::default()
        })
    }
}

const CONGESTION: &str = r#"
method = "rfc2889"
profile = "p.toml"
ports = [{ iface = "a" }, { iface = "b" }, { iface = "c" }, { iface = "d" }]
[trial]
duration_s = 2
[rfc2889]
tests = ["congestion_control"]
congestion_load_pps = 10000
"#;

#[test]
fn congestion_control_tells_egress_queues_from_head_of_line_blocking_and_back_pressure() {
    let spec = ExperimentSpec::from_toml(CONGESTION, "e.toml").expect("valid");
    let judge = |shared, pause| {
        let mut s = FakeSwitch {
            cap: 10_000.0,
            shared,
            pause,
        };
        let r = run(&spec, 1, &mut s);
        let c = r.rfc2889.unwrap().congestion_control.expect("a congestion result");
        assert_eq!(r.trials[0].plan.loads.len(), 3, "A→C, A→D, B→C");
        c
    };
    let c = judge(false, false);
    assert_eq!(
        (c.head_of_line_blocking, c.back_pressure),
        (Some(false), Some(false)),
        "{c:?}"
    );
    assert!(
        (c.congested_loss_pct - 100.0 / 3.0).abs() < 0.01,
        "expected 33.3 % lost at C; got {}",
        c.congested_loss_pct
    );
    assert_eq!(c.uncongested_loss_pct, 0.0);
    assert_eq!(c.congested_rate_pps.map(f64::round), Some(10_000.0));
    assert_eq!(c.intended_pps, [10_000.0, 10_000.0]);
    assert!(c.procedure.starts_with("RFC 2889 §5.5"), "{}", c.procedure);
    let c = judge(true, false);
    assert_eq!(
        c.head_of_line_blocking,
        Some(true),
        "a shared queue loses A→D too: {c:?}"
    );
    assert!(c.uncongested_loss_pct > 30.0, "got {}", c.uncongested_loss_pct);
    let c = judge(false, true);
    assert_eq!(c.back_pressure, Some(true), "the sources were held back: {c:?}");
    assert!(c.offered_pps[1] < c.intended_pps[1], "{c:?}");
}

#[test]
fn congestion_control_is_refused_without_four_ports_its_load_or_its_directions() {
    let three = CONGESTION.replace(", { iface = \"d\" }", "");
    let e = ExperimentSpec::from_toml(&three, "e.toml").unwrap_err();
    assert!(e.contains("rfc2889.congestion_ports = [0, 1, 2, 3]: port 3"), "{e}");
    let same = CONGESTION.replace(
        "congestion_load_pps",
        "congestion_ports = [0, 1, 2, 2]\ncongestion_load_pps",
    );
    let e = ExperimentSpec::from_toml(&same, "e.toml").unwrap_err();
    assert!(e.contains("four different ports"), "{e}");
    let no_load = CONGESTION.replace("congestion_load_pps = 10000", "");
    let e = ExperimentSpec::from_toml(&no_load, "e.toml").unwrap_err();
    assert!(e.contains("needs congestion_load_pps"), "{e}");
    let pairs = CONGESTION.replace("[trial]", "pairs = \"bidirectional\"\n[trial]");
    let e = ExperimentSpec::from_toml(&pairs, "e.toml").unwrap_err();
    assert!(e.contains("from port 0 to port 2, which pairs leaves out"), "{e}");
}

#[test]
fn ports_on_agents_are_all_or_none_each_with_its_addresses_and_a_host_port() {
    let base = r#"
method = "repeat"
profile = "p.toml"
pairs = "bidirectional"
ports = [{ iface = "a", agent = "198.18.1.2:8443", mac = "02:00:00:00:00:01", ip = "10.0.0.1" },
         { iface = "b", agent = "h2.lab:8443", mac = "02:00:00:00:00:02", ip = "10.0.0.2" }]
"#;
    let spec = ExperimentSpec::from_toml(base, "e.toml").expect("valid");
    assert!(spec.on_agents());
    for (from, to, want) in [
        (
            ", agent = \"h2.lab:8443\"",
            "",
            "ports[1].agent: every port of an experiment across hosts",
        ),
        (
            "h2.lab:8443",
            "h2.lab",
            "ports[1].agent = \"h2.lab\": give the agent's OTG listener as HOST:PORT",
        ),
        (
            ", mac = \"02:00:00:00:00:02\"",
            "",
            "ports[1]: a port on an agent needs its mac and ip",
        ),
    ] {
        let e = ExperimentSpec::from_toml(&base.replace(from, to), "e.toml").unwrap_err();
        assert!(e.contains(want), "replacing {from:?}: expected {want:?}; got {e}");
    }
    let rfc2889 = base.replace("method = \"repeat\"", "method = \"rfc2889\"")
        + "[rfc2889]\ntests = [\"fully_meshed\"]\nmax_rate_pps = 1000\n";
    let e = ExperimentSpec::from_toml(&rfc2889, "e.toml").unwrap_err();
    assert!(e.contains("method = \"rfc2889\" on agents"), "got {e}");
}
