use super::*;
use crate::experiment::search::{Resolution, Search, SearchSpec};

fn goal(name: &str, loss_ratio: f64) -> Goal {
    Goal {
        name: name.into(),
        loss_ratio,
        exceed_ratio: 0.5,
        width: 0.005,
        initial_trial_duration_s: 0.5,
        final_trial_duration_s: 2.0,
        duration_sum_s: 2.0,
        preceding_targets: 2,
    }
}

fn spec(goals: Vec<Goal>) -> MlrSpec {
    MlrSpec {
        goals,
        min_load: 2_000.0,
        max_load: 200_000.0,
        search_duration_max_s: 600.0,
    }
}

/// Trial `n` through a device that forwards up to `cap` frames/s and drops the rest:
/// (sent, forwarded).
fn through(n: &NextTrial, cap: f64) -> (u64, u64) {
    let sent = (n.load * n.duration_s).round() as u64;
    (sent, ((cap * n.duration_s).round() as u64).min(sent))
}

/// A device that forwards up to `cap` frames/s and drops the rest; `noise(i)` adds lost
/// frames to trial i.
fn search(s: MlrSpec, cap: f64, noise: &dyn Fn(usize) -> u64) -> Mlr {
    let mut m = Mlr::new(s).unwrap();
    let mut i = 0;
    while let Some(n) = m.next_trial() {
        let (sent, passed) = through(&n, cap);
        m.record(sent, passed.saturating_sub(noise(i)));
        i += 1;
        assert!(i < 500, "expected the search to end; it ran {i} trials");
    }
    m
}

#[test]
fn ndr_and_pdr_are_found_together_within_their_width() {
    let m = search(spec(vec![goal("NDR", 0.0), goal("PDR", 0.005)]), 50_000.0, &|_| 0);
    let r = m.results();
    let (ndr, pdr) = (&r[0], &r[1]);
    assert!(ndr.met && pdr.met, "expected both goals met: {r:?}");
    let (lo, hi) = (ndr.lower_bound_pps.unwrap(), ndr.upper_bound_pps.unwrap());
    assert!(
        lo <= 50_000.0 && hi > 50_000.0,
        "expected NDR's bounds around 50000; got {lo}..{hi}"
    );
    assert!(
        (hi - lo) / hi <= 0.005 + 1e-12,
        "expected NDR no wider than 0.5 %; got {}",
        (hi - lo) / hi
    );
    assert_eq!(ndr.conditional_throughput_pps, Some(lo), "no loss at the lower bound");
    // PDR: 0.5 % loss allowed, so up to 50000 / 0.995.
    let p = pdr.lower_bound_pps.unwrap();
    assert!(
        (50_000.0 / 0.995 * 0.99..=50_000.0 / 0.995).contains(&p),
        "expected PDR near 50251; got {p}"
    );
    assert!(pdr.conditional_throughput_pps.unwrap() >= ndr.conditional_throughput_pps.unwrap());
    for t in m.trials() {
        assert!(
            (2_000.0..=200_000.0).contains(&t.load_pps),
            "a load out of range: {t:?}"
        );
    }
}

/// RFC 2544's binary search for each goal, 2 s trials, the same resolution: its trial
/// seconds against MLRsearch's for the same device.
#[test]
fn mlrsearch_needs_fewer_trial_seconds_than_a_binary_search_per_goal() {
    let m = search(spec(vec![goal("NDR", 0.0), goal("PDR", 0.005)]), 50_000.0, &|_| 0);
    let mut binary = 0.0;
    for tolerance in [0.0, 0.005] {
        let mut s = Search::new(SearchSpec {
            min_pps: 2_000.0,
            max_pps: 200_000.0,
            resolution: Resolution::Relative(0.005),
            max_iterations: 64,
            tolerance,
        })
        .unwrap();
        while let Some(rate) = s.next_rate() {
            let sent = (rate * 2.0) as u64;
            s.record(sent, sent.min(100_000));
            binary += 2.0;
        }
    }
    let mlr = m.trial_seconds();
    eprintln!(
        "trial seconds: MLRsearch {mlr} in {} trials, binary searches {binary}",
        m.trials().len()
    );
    assert!(
        mlr < binary,
        "expected fewer trial seconds than the binary searches' {binary}; got {mlr}"
    );
    let full = m.trials().iter().filter(|t| t.duration_s == 2.0).count();
    assert!(
        full <= 8,
        "expected full-length trials only near the answer; got {full} of {}",
        m.trials().len()
    );
}

#[test]
fn a_device_that_keeps_up_ends_the_search_at_the_maximum() {
    let m = search(spec(vec![goal("NDR", 0.0)]), 1e9, &|_| 0);
    let r = &m.results()[0];
    assert!(r.met, "{r:?}");
    assert_eq!((r.lower_bound_pps, r.upper_bound_pps), (Some(200_000.0), None));
    let durations: Vec<f64> = m.trials().iter().map(|t| t.duration_s).collect();
    assert_eq!(
        durations,
        [0.5, 1.0, 2.0],
        "expected one trial per target, each at the maximum: {:?}",
        m.trials()
    );
}

#[test]
fn a_device_that_loses_at_the_minimum_has_no_lower_bound() {
    let m = search(spec(vec![goal("NDR", 0.0)]), 1_000.0, &|_| 0);
    let r = &m.results()[0];
    assert!(r.met, "{r:?}");
    assert_eq!(r.lower_bound_pps, None);
    assert_eq!(r.conditional_throughput_pps, None);
    let hi = r.upper_bound_pps.unwrap();
    assert!(
        (2_000.0..2_000.0 / 0.995).contains(&hi),
        "expected the minimum load as the upper bound; got {hi}"
    );
}

#[test]
fn with_an_exceed_ratio_a_lossy_trial_now_and_then_does_not_move_the_bound() {
    // PDR as CSIT runs it: 1 s trials, 4 s in all, half may exceed. Every third trial loses
    // 2 % of its frames whatever the load.
    let mut g = goal("PDR", 0.005);
    (g.final_trial_duration_s, g.duration_sum_s, g.initial_trial_duration_s) = (1.0, 4.0, 0.5);
    let m = search(spec(vec![g]), 50_000.0, &|i| if i % 3 == 2 { 1_000 } else { 0 });
    let r = &m.results()[0];
    assert!(r.met, "{r:?}");
    let lo = r.lower_bound_pps.unwrap();
    assert!(
        (50_000.0 * 0.98..=50_000.0 / 0.995).contains(&lo),
        "expected the bound near the capacity despite the noise; got {lo}"
    );
}

#[test]
fn the_search_stops_at_its_duration_limit_and_says_so() {
    let mut s = spec(vec![goal("NDR", 0.0)]);
    s.search_duration_max_s = 3.0;
    let m = search(s, 50_000.0, &|_| 0);
    assert!(m.ran_out(), "expected the limit reached with NDR unmet");
    assert!(m.trial_seconds() >= 3.0 && m.trial_seconds() < 3.0 + 2.0);
}

#[test]
fn bad_goals_are_refused_with_their_key() {
    let mut s = spec(vec![goal("NDR", 1.0)]);
    let e = Mlr::new(s.clone()).unwrap_err();
    assert!(e.starts_with("mlrsearch.goals[0].loss_ratio = 1"), "{e}");
    s.goals[0].loss_ratio = 0.0;
    s.min_load = 300_000.0;
    let e = Mlr::new(s.clone()).unwrap_err();
    assert!(
        e.starts_with("mlrsearch.min_rate_pps = 300000: give a positive rate below max_rate_pps"),
        "{e}"
    );
    s.min_load = 2_000.0;
    s.goals[0].duration_sum_s = 1.0;
    let e = Mlr::new(s).unwrap_err();
    assert!(e.contains("goals[0].duration_sum_s = 1"), "{e}");
}

/// A sender that cannot hold `sender` frames/s or more, before a device that forwards `cap`.
fn search_with_sender(s: MlrSpec, cap: f64, sender: f64) -> (Mlr, usize) {
    let mut m = Mlr::new(s).unwrap();
    let (mut i, mut failed) = (0, 0);
    while let Some(n) = m.next_trial() {
        if n.load >= sender {
            m.sender_failed(sender, n.duration_s);
            failed += 1;
        } else {
            let (sent, passed) = through(&n, cap);
            m.record(sent, passed);
        }
        i += 1;
        assert!(i < 500, "expected the search to end; it ran {i} trials");
    }
    (m, failed)
}

#[test]
fn a_sender_that_cannot_hold_the_maximum_caps_the_search_which_goes_on_below_it() {
    // The device forwards 150 000 frames/s; the sender holds up to 60 000.
    let (m, failed) = search_with_sender(spec(vec![goal("NDR", 0.0), goal("PDR", 0.005)]), 150_000.0, 60_000.0);
    assert!(failed >= 1, "expected the maximum load to fail");
    let cap = m.sender_cap_pps().expect("a cap");
    assert_eq!(
        cap, 200_000.0,
        "expected the maximum, which failed, as the smallest load the sender could not hold"
    );
    assert!(
        failed <= 3,
        "expected the sender's own figure to find its limit in a few trials; {failed} failed"
    );
    for r in m.results() {
        assert!(r.met, "expected the goal met at the sender's limit: {r:?}");
        let lo = r.lower_bound_pps.expect("a lower bound");
        assert!(
            lo < 60_000.0 && lo > 60_000.0 * 0.98 && r.upper_bound_pps.is_none(),
            "expected the lower bound the largest load the sender holds, no upper bound; got {r:?}"
        );
    }
    assert!(
        m.trials().iter().all(|t| t.load_pps < 60_000.0),
        "no recorded trial above the cap"
    );
    // Below the device's capacity the search still finds the device's own NDR.
    let (m, _) = search_with_sender(spec(vec![goal("NDR", 0.0)]), 40_000.0, 60_000.0);
    let r = &m.results()[0];
    let (lo, hi) = (r.lower_bound_pps.unwrap(), r.upper_bound_pps.unwrap());
    assert!(
        r.met && lo <= 40_000.0 && hi > 40_000.0,
        "expected NDR's bounds around 40000; got {r:?}"
    );
}

#[test]
fn a_sender_that_cannot_hold_the_minimum_leaves_no_answer() {
    let (m, _) = search_with_sender(spec(vec![goal("NDR", 0.0)]), 150_000.0, 1_000.0);
    assert!(m.sender_below_minimum());
    assert!(m.trials().is_empty());
    assert_eq!(m.results()[0].lower_bound_pps, None);
}

#[test]
fn a_sender_that_fails_every_load_by_a_little_stops_the_search_after_a_few_failures() {
    // Its own figures say it holds just below each load it failed: without a limit the
    // search would walk the grid down one step a trial.
    let mut m = Mlr::new(spec(vec![goal("NDR", 0.0)])).unwrap();
    let mut failed = 0;
    while let Some(n) = m.next_trial() {
        m.sender_failed(n.load * 0.999, n.duration_s);
        failed += 1;
        assert!(failed < 100, "expected the search to stop; {failed} loads failed");
    }
    assert_eq!(
        failed, MAX_SENDER_FAILURES,
        "expected the search to stop after {MAX_SENDER_FAILURES} failed loads; got {failed}"
    );
    assert!(
        m.sender_gave_up() && !m.ran_out(),
        "expected the stop said as the sender's, not as the search's time running out"
    );
}

#[test]
fn the_seconds_of_loads_the_sender_failed_count_towards_the_search_duration() {
    let mut s = spec(vec![goal("NDR", 0.0)]);
    s.search_duration_max_s = 3.0;
    let mut m = Mlr::new(s).unwrap();
    let n = m.next_trial().expect("a first trial");
    m.sender_failed(n.load / 2.0, 3.0);
    assert!(
        m.next_trial().is_none() && m.ran_out(),
        "expected the search stopped after 3 s of failed trials, with its goal unmet"
    );
}

#[test]
fn a_load_failed_below_one_the_sender_held_is_a_stall_and_is_tried_again_not_a_cap() {
    // The device forwards 40 000 frames/s; the sender holds everything but fails the first
    // attempt below a load it had already held (a stall of the machine).
    let mut m = Mlr::new(spec(vec![goal("NDR", 0.0)])).unwrap();
    let (mut held, mut stalled, mut i) = (0.0f64, None, 0);
    while let Some(n) = m.next_trial() {
        i += 1;
        assert!(i < 500, "expected the search to end; it ran {i} trials");
        if stalled.is_none() && held > n.load {
            assert_eq!(m.sender_failed(n.load / 2.0, n.duration_s), SenderFailure::Stall);
            assert_eq!(m.next_trial(), Some(n.clone()), "expected the same trial given again");
            stalled = Some(n.load);
            continue;
        }
        held = held.max(n.load);
        let (sent, passed) = through(&n, 40_000.0);
        m.record(sent, passed);
    }
    let at = stalled.expect("a load below one held");
    assert_eq!(m.sender_cap_pps(), None, "expected no cap from a stall at {at}");
    assert_eq!(m.sender_stalls(), 1);
    let r = &m.results()[0];
    let (lo, hi) = (r.lower_bound_pps.unwrap(), r.upper_bound_pps.unwrap());
    assert!(
        r.met && lo <= 40_000.0 && hi > 40_000.0,
        "expected NDR's bounds around 40000 after the stall; got {r:?}"
    );
}

#[test]
fn stalls_again_and_again_stop_the_search_after_the_same_number_of_failures() {
    let mut m = Mlr::new(spec(vec![goal("NDR", 0.0)])).unwrap();
    let first = m.next_trial().unwrap();
    let sent = (first.load * first.duration_s) as u64;
    m.record(sent, sent / 2);
    let mut failed = 0;
    while let Some(n) = m.next_trial() {
        assert!(n.load <= first.load);
        assert_eq!(m.sender_failed(n.load, n.duration_s), SenderFailure::Stall);
        failed += 1;
        assert!(failed < 100, "expected the search to stop; {failed} attempts failed");
    }
    assert_eq!(
        failed, MAX_SENDER_FAILURES,
        "expected a stop after {MAX_SENDER_FAILURES}"
    );
    assert!(
        m.sender_gave_up() && m.sender_cap_pps().is_none(),
        "expected a stop without a cap"
    );
}
