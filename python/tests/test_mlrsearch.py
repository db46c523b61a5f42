"""MLRsearch (RFC 9971) through the reference router (`gapless testbed up --dut router`),
shaped to 25 kframes/s at 64 B: NDR and PDR in one search, with fewer trial seconds than
RFC 2544's binary search for the same goals and resolution; latency at fractions of PDR; the
`MLRsearch` package (CSIT's, 1.2.1) driving gapless trials against the same device agrees;
bad input is refused with its key before any trial.

The example file `examples/mlrsearch_dut.toml` is the experiment run, on this module's
testbed, at the rate this 2-core machine's reference router carries without its own CPU
becoming the bottleneck (at 50 kframes/s it did on 2026-11-27: loss far above the shaper's)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

import gapless
from conftest import gapless_cli, require_root

BED = "glmlr"
CAP = 25_000  # frames/s of 64 B through a 12 Mbit/s tbf as it counts (60 B per frame)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlrsearch_dut.toml"


@pytest.fixture(scope="module")
def router() -> Iterator[str]:
    require_root()
    gapless_cli("testbed", "up", "--name", BED, "--dut", "router", "--dut-rate", "12mbit")
    try:
        yield BED
    finally:
        gapless_cli("testbed", "down", "--name", BED)


def example(bed: str) -> Dict[str, Any]:
    """The example experiment on `bed`: 25 kframes/s of capacity, a 50 kframes/s maximum,
    1 s final trials (the example's 2 s halve for CI's time).

    The sender is judged at the defaults: a trial is run again when a stall made it send
    more than 128 frames back to back on a port, or it fell 0.1 % short of its schedule.
    NDR within 3 % of the shaper's rate is what shows that the stalls it let pass (bursts
    that fit the router's 256-frame queue) did not matter; a load the sender could not hold
    bounds the answer instead, and `stopped_by_the_sender` checks that it says so."""
    spec = tomllib.loads(EXAMPLE.read_text().replace("gl-", f"{bed}-"))
    m = spec["mlrsearch"]
    m["max_rate_pps"], m["min_rate_pps"], m["final_trial_duration_s"] = 50_000, 1_000, 1
    m["initial_trial_duration_s"] = 0.25
    return spec


def stopped_by_the_sender(r: Dict[str, Any]) -> bool:
    """Whether a load the sender could not hold on this VM (its host stalls the sender's
    vCPU for milliseconds) bounds a goal, so that the device's own bound was not reached.
    If the sender failed at all, its verdict says so, every goal's lower bound lies below
    that load, and the trials it failed give their reasons in numbers."""
    m = r["mlrsearch"]
    cap = m.get("sender_cap_pps")
    if m["sender_stalls"]:
        # A load failed below one the sender had held is a stall, run again, never a cap.
        assert f"{m['sender_stalls']} attempts at loads it had held" in m["sender"], m["sender"]
    if cap is None and not m["sender_gave_up"]:
        assert "held every load" in m["sender"], m["sender"]
        return False
    assert ("could not hold" if cap is not None else "held every load") in m["sender"], m["sender"]
    failed = [t for t in r["trials"] if not t["valid"]]
    assert failed, "expected the trials the sender failed in the result"
    for t in failed:
        why = t["invalid_reason"]
        assert any(w in why for w in ("back to back", "held back", "fewer frames", "late_limit")), why
    if m["sender_gave_up"] or m["ran_out"]:
        # The search stopped early (the sender failed load after load, or their attempts
        # spent the time): a goal may have no lower bound, and the verdict says why.
        lost = sorted(t["plan"]["rate_pps"] for t in failed)
        assert not m["sender_gave_up"] or ("search stopped" in m["sender"] and len(lost) >= 8), f"expected the verdict and 8 attempts failed; got {m['sender']!r}, {lost}"
        assert not m["ran_out"] or m["trial_seconds"] + m["sender_failed_seconds"] >= r["spec"]["mlrsearch"]["search_duration_max_s"], m
        bounded = [g for g in m["goals"] if g["lower_bound_pps"] is not None]
    else:
        bounded = m["goals"]
    for g in bounded:
        assert g["lower_bound_pps"] is not None and (cap is None or g["lower_bound_pps"] < cap), f"expected {g['name']} below {cap}; got {g}"
    return len(bounded) < len(m["goals"]) or any(g["upper_bound_pps"] is None for g in m["goals"])


def rfc2544_spec(bed: str) -> Dict[str, Any]:
    """RFC 2544's binary search on `bed` for the example's goals: the same loss ratios,
    resolution and range, trials as long as the final ones."""
    spec = example(bed)
    m = spec.pop("mlrsearch")
    spec["method"] = "rfc2544"
    spec["trial"]["duration_s"] = m["final_trial_duration_s"]
    spec["rfc2544"] = {"tests": ["throughput"], "frame_sizes": [64], "loss_tolerance_pct": [0, 0.5],
                       "max_rate_pps": m["max_rate_pps"], "min_rate_pps": m["min_rate_pps"], "resolution_pct": 0.5}
    return spec


def binary_trial_seconds(r: Dict[str, Any]) -> float:
    return sum(t["plan"]["duration_s"] for t in r["trials"] if not t["repeated"])


@pytest.fixture(scope="module")
def searched(router: str) -> Dict[str, Any]:
    heard: List[Dict[str, Any]] = []
    r = gapless.experiment(example(router), on_trial=heard.append, base_dir=EXAMPLE.parent)
    assert len(heard) == len(r["trials"]), "expected every trial heard as it was judged"
    return r


def test_ndr_and_pdr_are_found_in_one_search_within_their_width(searched: Dict[str, Any]) -> None:
    r = searched
    if stopped_by_the_sender(r):
        return
    goals = {g["name"]: g for g in r["mlrsearch"]["goals"]}
    ndr, pdr = goals["NDR"], goals["PDR"]
    assert ndr["met"] and pdr["met"], f"expected both goals met; got {r['mlrsearch']['goals']}"
    got = ndr["conditional_throughput_pps"]
    assert abs(got - CAP) <= 0.03 * CAP, f"expected NDR within 3 % of {CAP} frames/s; got {got:.0f} ({ndr})"
    assert (ndr["upper_bound_pps"] - ndr["lower_bound_pps"]) / ndr["upper_bound_pps"] <= 0.005 + 1e-9, ndr
    assert pdr["conditional_throughput_pps"] >= got, f"expected PDR ≥ NDR; got {pdr['conditional_throughput_pps']} < {got}"
    trials = r["mlrsearch"]["trials"]
    assert sum(t["duration_s"] for t in trials) == pytest.approx(r["mlrsearch"]["trial_seconds"])
    for t in trials:
        rec = r["trials"][t["trial"]]
        assert rec["valid"] and rec["plan"]["rate_pps"] == pytest.approx(t["load_pps"]), (t, rec["plan"])
        assert t["goal"] in (None, "NDR", "PDR") and t["target"], t
    full = [t for t in trials if t["duration_s"] == 1]
    assert len(full) < len(trials), "expected short trials first, full-length ones only near the answer"


def test_latency_is_measured_at_fractions_of_pdr(searched: Dict[str, Any]) -> None:
    r = searched
    if stopped_by_the_sender(r):
        return
    pdr = next(g for g in r["mlrsearch"]["goals"] if g["name"] == "PDR")["conditional_throughput_pps"]
    lat = r["mlrsearch"]["latency"]
    assert [x["fraction"] for x in lat] == [0.1, 0.5, 0.9], lat
    for x in lat:
        assert x["rate_pps"] == pytest.approx(x["fraction"] * pdr), x
        assert x["point"]["latency_p99_ns"]["mean"] > 0, x["point"]
    summary = gapless.summary(r)
    assert summary.index("NDR") < summary.index("latency at 10 % of PDR"), summary


def test_mlrsearch_needs_fewer_trial_seconds_than_rfc2544_for_the_same_goals(router: str,
                                                                          searched: Dict[str, Any]) -> None:
    if stopped_by_the_sender(searched):
        return
    b = gapless.experiment(rfc2544_spec(router))
    binary, mlr = binary_trial_seconds(b), searched["mlrsearch"]["trial_seconds"]
    print(f"trial seconds: MLRsearch {mlr:.2f} ({len(searched['mlrsearch']['trials'])} trials), "
          f"RFC 2544 binary search {binary:.2f} ({len(b['trials'])} trials)")
    assert mlr < binary, f"expected MLRsearch to need fewer trial seconds than RFC 2544's {binary}; got {mlr}"
    tp = b["rfc2544"][0]["throughput"][0]["throughput_pps"]
    ndr = searched["mlrsearch"]["goals"][0]["conditional_throughput_pps"]
    assert abs(tp - ndr) <= 0.01 * tp, f"expected RFC 2544's zero-loss throughput {tp:.0f} near NDR; got {ndr:.0f}"


class GaplessTrials:
    """The MLRsearch package's measurer: each trial is a gapless experiment of one trial
    (method "repeat") at the load and duration asked, on the module's testbed."""

    def __init__(self, bed: str) -> None:
        self.bed, self.trials, self.seconds = bed, 0, 0.0

    def measure(self, intended_duration: float, intended_load: float) -> Any:
        from MLRsearch import MeasurementResult  # type: ignore[import-untyped]

        spec = example(self.bed)
        spec.pop("mlrsearch")
        spec["method"] = "repeat"
        spec["trial"].update(duration_s=intended_duration, repetitions=1)
        spec["profile"]["stream"][0]["timing"]["rate_pps"] = intended_load
        r = gapless.experiment(spec)
        t = next(t for t in r["trials"] if not t["repeated"])
        self.trials += 1
        self.seconds += intended_duration
        return MeasurementResult(intended_duration=intended_duration, intended_load=intended_load,
                                 offered_count=t["sent"], forwarding_count=t["received"])


def package_search(bed: str, loss_ratios: List[float], measurer: Optional[GaplessTrials] = None,
                   max_load: float = 50_000.0) -> tuple[List[Any], Any, GaplessTrials]:
    """CSIT's MLRsearch 1.2.1 with the example's goals at `loss_ratios`, driving gapless trials
    on `bed` (or `measurer`'s) up to `max_load`: (its goals, its result by goal, the measurer
    with its counts)."""
    from MLRsearch import Config, MultipleLossRatioSearch, SearchGoal

    goals = [SearchGoal(loss_ratio=x, exceed_ratio=0.5, relative_width=0.005, initial_trial_duration=0.25,
                        final_trial_duration=1.0, duration_sum=1.0, preceding_targets=2, fail_fast=False)
             for x in loss_ratios]
    cfg = Config()
    cfg.goals, cfg.min_load, cfg.max_load, cfg.search_duration_max, cfg.warmup_duration = goals, 1_000.0, max_load, 600.0, None
    trials = measurer or GaplessTrials(bed)
    return goals, MultipleLossRatioSearch(config=cfg).search(measurer=trials), trials


def agree_within_width(name: str, theirs: tuple[float, float], ours: Dict[str, Any], width: float = 0.005) -> None:
    """The package's interval and ours hold the same threshold, as far as the width goal
    resolves it: they overlap, or the gap between them is within `width` of the load."""
    lo, hi = theirs
    gap = max(lo, ours["lower_bound_pps"]) - min(hi, ours["upper_bound_pps"])
    assert gap <= width * max(hi, ours["upper_bound_pps"]), \
        f"expected {name}'s intervals within the width goal {width} of each other: the package's [{lo:.0f}, {hi:.0f}], ours [{ours['lower_bound_pps']:.0f}, {ours['upper_bound_pps']:.0f}] (gap {gap:.0f})"


def test_the_mlrsearch_package_driving_gapless_trials_agrees(router: str, searched: Dict[str, Any]) -> None:
    """CSIT's MLRsearch 1.2.1 (an earlier draft of RFC 9971) with the same goals: its
    intervals and ours both hold the device's thresholds, within the width goal."""
    if stopped_by_the_sender(searched):
        return
    goals, theirs, _ = package_search(router, [g["loss_ratio"] for g in searched["mlrsearch"]["goals"]])
    for goal, ours in zip(goals, searched["mlrsearch"]["goals"]):
        res = theirs[goal]
        lo, hi = float(res.relevant_lower_bound), float(res.relevant_upper_bound)
        print(f"{ours['name']}: package [{lo:.0f}, {hi:.0f}], gapless [{ours['lower_bound_pps']:.0f}, {ours['upper_bound_pps']:.0f}]")
        agree_within_width(ours["name"], (lo, hi), ours)


@pytest.mark.parametrize("change,want", [
    (lambda s: s["mlrsearch"]["goals"][1].update(loss_ratio=1.0), "mlrsearch.goals[1].loss_ratio = 1"),
    (lambda s: s["mlrsearch"].update(min_rate_pps=60_000), "mlrsearch.min_rate_pps = 60000: give a positive rate below max_rate_pps"),
    (lambda s: s["tx"].update(iface="nosuch0"), "nosuch0"),
    (lambda s: s.pop("mlrsearch"), "method = \"mlrsearch\" needs an [mlrsearch] table"),
], ids=["loss-ratio", "min-above-max", "no-such-port", "no-table"])
def test_bad_input_is_refused_with_its_key_before_any_trial(router: str, change: Any, want: str) -> None:
    spec = example(router)
    change(spec)
    heard: List[Dict[str, Any]] = []
    with pytest.raises(gapless.Error) as e:
        gapless.experiment(spec, on_trial=heard.append)
    assert want in str(e.value), f"expected {want!r} in the error; got {e.value}"
    assert heard == [], f"expected no trial run; got {len(heard)}"


def test_the_python_function_takes_the_tables_keys(router: str) -> None:
    spec = example(router)
    with pytest.raises(gapless.Error) as e:
        gapless.mlrsearch(spec["profile"], tx=spec["tx"], rx=spec["rx"], trial=spec["trial"],
                          goals=[{"name": "NDR", "loss_ratio": 0.0}], max_rate_pps=1000, min_rate_pps=5000)
    assert "mlrsearch.min_rate_pps = 5000" in str(e.value), str(e.value)


def readme_example(path: Path, bed: str, tmp: Path) -> Dict[str, Any]:
    """`gapless experiment` of the example file as the README runs it, unchanged but for the
    testbed's name; its result."""
    f, out = tmp / path.name, tmp / f"{path.stem}.json"
    f.write_text(path.read_text().replace("gl-", f"{bed}-"))
    p = gapless_cli("experiment", str(f), "--json", str(out), check=False)
    assert p.returncode == 0, f"expected the README's {path.name} to finish; got {p.returncode}: {p.stderr}{p.stdout}"
    assert "MLRsearch (RFC 9971):" in p.stdout and "the sender:" in p.stdout, p.stdout
    return dict(json.loads(out.read_text()))


def check_answer(r: Dict[str, Any]) -> None:
    """Each goal has its conditional throughput and bounds; a bound set by the sender is
    below the load it could not hold; every trial the sender failed says why."""
    m = r["mlrsearch"]
    assert not any("has no answer" in w for w in r["warnings"]), r["warnings"]
    assert m["sender"], "expected a verdict on the sender"
    cap = m.get("sender_cap_pps")
    # On a machine whose stalls fail the sender at load after load, the search stops after
    # a few such loads and says so; its bounds are then as far as it got.
    gave_up = any("mlrsearch stopped after the sender could not hold" in w for w in r["warnings"])
    assert not gave_up or cap is not None, f"expected the load the sender could not hold; got {m}"
    # The files bound the search's trial seconds (search_duration_max_s): a search that spends
    # them with a goal unmet says so, and keeps its bounds as far as it got.
    ran_out = any("mlrsearch reached search_duration_max_s" in w for w in r["warnings"])
    if ran_out:
        limit = r["spec"]["mlrsearch"]["search_duration_max_s"]
        # Attempts at loads the sender could not hold count towards the bound too.
        spent = m["trial_seconds"] + m["sender_failed_seconds"]
        assert spent >= limit, f"expected at least {limit} trial seconds spent; got {m['trial_seconds']} + {m['sender_failed_seconds']} at loads the sender could not hold"
        assert not all(g["met"] for g in m["goals"]), f"expected a goal unmet when the time ran out; got {m['goals']}"
    for g in m["goals"]:
        lo, hi = g["lower_bound_pps"], g["upper_bound_pps"]
        if gave_up or ran_out:
            continue
        assert g["conditional_throughput_pps"] and lo, f"expected {g['name']} with a conditional throughput; got {g}"
        assert g["met"], f"expected {g['name']} met (its width, or a bound at the sender's or the range's end); got {g}"
        if cap is not None:
            assert lo < cap, f"expected {g['name']}'s lower bound {lo} below the load the sender could not hold, {cap}"
        if hi is None:
            assert cap is not None or lo == r["spec"]["mlrsearch"]["max_rate_pps"], \
                f"expected a goal without an upper bound to end at the sender's limit or the maximum; got {g}, cap {cap}"
    for t in r["trials"]:
        if not t["valid"]:
            why = t["invalid_reason"]
            assert any(w in why for w in ("back to back", "held back", "fewer frames")), \
                f"expected the sender's reason in numbers; got {why}"
