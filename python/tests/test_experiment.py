"""Experiments from Python: a sweep on the testbed, trials heard as they are judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

import gapless
from conftest import Testbed


def test_a_sweep_on_the_testbed_hears_each_trial_and_returns_every_point(testbed: Testbed, tmp_path: Path) -> None:
    heard: List[Dict[str, Any]] = []
    res = gapless.sweep(
        {"stream": [{"name": "s", "size": 64, "timing": {"rate_pps": 1000}}]},
        tx=testbed.tx, tx_netns=testbed.tx_ns, rx=testbed.rx, rx_netns=testbed.rx_ns,
        trial={"duration_s": 0.5, "warmup_s": 0.1, "settle_s": 0.1, "repetitions": 2, "max_retries": 0},
        parameter="rate", values=[5000, 10000],
        on_trial=heard.append, report_dir=tmp_path / "rep",
    )
    trials = res["trials"]
    assert len(trials) == 4 and len(heard) == 4, f"expected 2 points x 2 repetitions = 4 trials; got {len(trials)} (heard {len(heard)})"
    assert [t["index"] for t in heard] == [t["index"] for t in trials]
    points = res["sweep"][0]["points"]
    assert len(points) == 2 and all(len(p["trials"]) == 2 for p in points), points
    for t in trials:
        # No loss on a direct link, or the trial says it was not valid (the sender fell behind).
        assert t["loss_pct"] == 0 or not t["valid"], f"trial {t['index']}: {t['loss_pct']} % lost, valid {t['valid']}"
    assert any(p.name.endswith(".csv") for p in (tmp_path / "rep").iterdir())


def test_a_bad_experiment_dict_names_the_key() -> None:
    with pytest.raises(gapless.ConfigError) as e:
        gapless.experiment({"method": "sweep", "profile": {"stream": [{"timing": {"rate_pps": 1}}]}, "tx": {"iface": "a"}, "rx": {"iface": "b"}, "trial": {"duration": 1}})
    assert e.value.path is not None and e.value.path.startswith("trial"), vars(e.value)
    assert "duration" in str(e.value), str(e.value)


def test_an_experiment_whose_trial_cannot_run_raises_with_what_it_has(testbed: Testbed) -> None:
    with pytest.raises(gapless.RunError) as e:
        gapless.sweep(
            {"stream": [{"name": "s", "size": 64, "timing": {"rate_pps": 1000}}]},
            tx="nosuch0", rx=testbed.rx, rx_netns=testbed.rx_ns,
            trial={"duration_s": 0.2, "repetitions": 1}, parameter="rate", values=[1000],
        )
    assert e.value.kind == "ExperimentFailed" and "nosuch0" in str(e.value), str(e.value)
    assert e.value.result is not None and e.value.result["stopped"] is True
