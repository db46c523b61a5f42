"""Experiments over several ports, as FD.io CSIT runs its benchmarks: both directions at once
through the reference router (`gapless testbed up --dut router --ports 4`), every port's
egress shaped to 25 kframes/s of 64 B, so the bidirectional aggregate is 50 kframes/s.

- MLRsearch finds a bidirectional NDR within 3 % of the aggregate capacity, and PDR ≥ NDR,
  each direction carrying its half; latency at three fractions of PDR, per direction.
- RFC 2544's binary search for the same goals needs more trial seconds.
- Four ends in full mesh: every one of the 12 directions metered, tx = rx below capacity.
- Bad input is refused with its key before any trial.

The module's one testbed has four ends; the bidirectional trials use the first two. The
capacity is 25 kframes/s per port, not 50: this 2-core machine's reference router forwards
at most about 35-50 kframes/s in all (DESIGN-NOTES 72), and one direction's 50 would be over.
CSIT's `MLRsearch` package is compared one way (test_mlrsearch.py): both ways, at 50
kframes/s in all, the router's own CPU is near its limit and the capacity it shows moved by
1 % between two searches (the package's PDR [49831, 50081] against ours [50575, 50830] in
one CI run, within the width goal in another), more than the 0.5 % width the comparison
judges (DESIGN-NOTES 73)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import gapless
from conftest import gapless_cli, require_root
from test_mlrsearch import binary_trial_seconds, stopped_by_the_sender

BED = "glpt"
CAP = 25_000  # frames/s of 64 B per direction through a 12 Mbit/s tbf as it counts
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlrsearch_bidir.toml"


@pytest.fixture(scope="module")
def router() -> Iterator[str]:
    require_root()
    gapless_cli("testbed", "up", "--name", BED, "--dut", "router", "--dut-rate", "12mbit", "--ports", "4")
    try:
        yield BED
    finally:
        gapless_cli("testbed", "down", "--name", BED)


def ends(bed: str, n: int) -> List[Dict[str, str]]:
    names = [f"{bed}-tx0", f"{bed}-rx0"] + [f"{bed}-p{k}" for k in range(2, n)]
    spaces = [f"{bed}-tx", f"{bed}-rx"] + [f"{bed}-p{k}" for k in range(2, n)]
    return [{"iface": i, "netns": s} for i, s in zip(names, spaces)]


def bidir(bed: str) -> Dict[str, Any]:
    """The example `examples/mlrsearch_bidir.toml` (the issue's shape: two ports both ways,
    NDR and PDR, aggregate loads) on `bed`, with 1 s final trials for CI's time, the sender
    judged at the defaults (its catch-up bursts and rate, as test_mlrsearch's)."""
    spec = tomllib.loads(EXAMPLE.read_text().replace("gl-", f"{bed}-"))
    m = spec["mlrsearch"]
    m["final_trial_duration_s"], m["initial_trial_duration_s"] = 1, 0.25
    return spec


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bidir-report")


@pytest.fixture(scope="module")
def searched(router: str, report_dir: Path) -> Dict[str, Any]:
    return gapless.experiment(bidir(router), base_dir=EXAMPLE.parent, report_dir=report_dir)


def test_bidirectional_ndr_is_the_aggregate_of_both_directions(searched: Dict[str, Any]) -> None:
    r = searched
    if stopped_by_the_sender(r):
        return
    goals = {g["name"]: g for g in r["mlrsearch"]["goals"]}
    ndr, pdr = goals["NDR"]["conditional_throughput_pps"], goals["PDR"]["conditional_throughput_pps"]
    assert abs(ndr - 2 * CAP) <= 0.03 * 2 * CAP, f"expected NDR within 3 % of {2 * CAP} frames/s aggregate; got {ndr:.0f}"
    assert pdr >= ndr, f"expected PDR ≥ NDR; got {pdr:.0f} < {ndr:.0f}"
    names = [d["name"] for d in r["directions"]]
    assert names == [f"{BED}-tx0→{BED}-rx0", f"{BED}-rx0→{BED}-tx0"], names
    for d in r["directions"]:
        at = {a["what"]: a for a in d["at"]}
        lb = at["NDR lower bound"]
        assert lb["offered_pps"] == pytest.approx(goals["NDR"]["lower_bound_pps"] / 2), lb
        assert lb["loss_ratio"] == 0 and lb["sent"] == lb["received"] > 0.9 * CAP * 0.97, lb
    for t in r["trials"]:
        dirs = t["directions"]
        # Frames the kernel refused at the sender (ENOBUFS; CI saw 18 of 25,017 on
        # 2026-11-27) count as offered and lost, in the aggregate and in their own direction.
        assert sum(d["sent"] for d in dirs) == t["sent"], f"expected the directions' sent to add up to the trial's {t['sent']}; got {[d['sent'] for d in dirs]}"
        assert sum(d["received"] for d in dirs) == t["received"], t
        # A frame due just before the warm-up's end that a stall sent after it counts as
        # metered in its direction: the trial's own worst lateness says how many that can be.
        slack = 2 + int(t["late_max_ns"] * t["plan"]["rate_pps"] / 2 / 1e9)
        assert abs(dirs[0]["sent"] - dirs[1]["sent"]) <= slack, f"expected the load split evenly (± {slack}); got {dirs}"


def test_latency_at_fractions_is_given_per_direction(searched: Dict[str, Any], report_dir: Path) -> None:
    r = searched
    if stopped_by_the_sender(r):
        return
    pdr = next(g for g in r["mlrsearch"]["goals"] if g["name"] == "PDR")["conditional_throughput_pps"]
    for d in r["directions"]:
        lat = [a for a in d["at"] if a["what"].startswith("latency at")]
        assert [a["what"] for a in lat] == [f"latency at {p} % of PDR" for p in (10, 50, 90)], d["at"]
        for a, f in zip(lat, (0.1, 0.5, 0.9)):
            assert a["offered_pps"] == pytest.approx(f * pdr / 2), a
            p = a["latency"]["percentiles_ns"]
            assert 0 < p["p50"] <= p["p99"] <= p["p99_9"] <= p["p99_9999"], p
            assert a["latency"]["count"] == a["received"], a
    s = gapless.summary(r)
    assert s.index("NDR") < s.index("PDR") < s.index("by direction") < s.index("latency at 10 % of PDR"), s
    plots = sorted(p.name for p in report_dir.iterdir())
    assert "mlrsearch_latency_by_direction.png" in plots and "mlrsearch_latency.png" not in plots, plots
    csv = (report_dir / "trials.csv").read_text().splitlines()
    assert csv[0].endswith(",directions") and f"{BED}-rx0→{BED}-tx0" in csv[1], csv[:2]


def test_mlrsearch_needs_fewer_trial_seconds_than_rfc2544_both_ways(router: str, searched: Dict[str, Any]) -> None:
    if stopped_by_the_sender(searched):
        return
    spec = bidir(router)
    m = spec.pop("mlrsearch")
    spec["method"], spec["trial"]["duration_s"] = "rfc2544", 1
    spec["rfc2544"] = {"tests": ["throughput"], "frame_sizes": [64], "loss_tolerance_pct": [0, 0.5],
                       "max_rate_pps": m["max_rate_pps"], "min_rate_pps": m["min_rate_pps"], "resolution_pct": 0.5}
    b = gapless.experiment(spec)
    binary, mlr = binary_trial_seconds(b), searched["mlrsearch"]["trial_seconds"]
    print(f"bidirectional trial seconds: MLRsearch {mlr:.2f}, RFC 2544 binary search {binary:.2f}")
    assert mlr < binary, f"expected MLRsearch to need fewer trial seconds than RFC 2544's {binary}; got {mlr}"
    tp = b["rfc2544"][0]["throughput"][0]
    assert [d["name"] for d in b["directions"]] == [d["name"] for d in searched["directions"]], b["directions"]
    assert b["directions"][0]["at"][0]["what"].startswith("throughput 64 B"), b["directions"][0]
    assert abs(tp["throughput_pps"] - 2 * CAP) <= 0.03 * 2 * CAP, tp


def test_four_ends_in_full_mesh_meter_every_pair(router: str) -> None:
    """12 directions at 1500 frames/s each: each router port carries 4500 of its 25000."""
    spec = {
        "method": "repeat", "ports": ends(router, 4), "pairs": "full-mesh",
        "trial": {"warmup_s": 0.3, "settle_s": 0.3, "duration_s": 1, "late_limit": 0.02},
        "profile": {"stream": [{"name": "m", "size": 64, "timing": {"rate_pps": 1500}}]},
    }
    r = gapless.experiment(spec)
    t = next(t for t in r["trials"] if t["valid"] or not t["repeated"])
    if not t["valid"]:
        assert "NOT held" in t["invalid_reason"], t
        return
    dirs = t["directions"]
    names = {(d["from"], d["to"]) for d in r["directions"]}
    assert names == {(a, b) for a in range(4) for b in range(4) if a != b}, names
    for d in dirs:
        assert d["sent"] == d["received"] and abs(d["sent"] - 1500) <= 2, f"expected tx = rx ≈ 1500 per pair; got {d}"
        assert d.get("misdelivered", 0) == 0, d
        assert d["latency"]["count"] == d["received"], d


@pytest.mark.parametrize("change,want", [
    (lambda s: s["ports"][1].update(iface="nosuch0"), "ports[1]"),
    (lambda s: s.update(pairs="both"), "pairs = \"both\""),
    (lambda s: s.update(pairs=[{"from": 0, "to": 0}]), "pairs[0]: from and to are both port 0"),
    (lambda s: s["ports"].append(s["ports"][0]) or s.update(pairs="bidirectional"), "even number of ports"),
    (lambda s: s.update(tx=s["ports"][0]), "not both"),
    (lambda s: s["mlrsearch"].update(min_rate_pps=200_000), "mlrsearch.min_rate_pps = 200000"),
], ids=["no-such-port", "bad-pairs", "self-pair", "odd-bidirectional", "tx-and-ports", "min-above-max"])
def test_bad_input_is_refused_with_its_key_before_any_trial(router: str, change: Any, want: str) -> None:
    spec = bidir(router)
    change(spec)
    heard: List[Dict[str, Any]] = []
    with pytest.raises(gapless.Error) as e:
        gapless.experiment(spec, on_trial=heard.append)
    assert want in str(e.value), f"expected {want!r} in the error; got {e.value}"
    assert heard == [], f"expected no trial run; got {len(heard)}"
