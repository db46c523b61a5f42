"""MLRsearch against RFC 2544's binary search, and against CSIT's MLRsearch package, on the
reference router: trial seconds and the bounds each finds for NDR (loss 0) and PDR (0.5 %).

    sudo .venv/bin/python bench/mlrsearch.py [REPS]     (default 3; about 2 min per rep)

Each repetition runs, in turn: gapless's `method = "mlrsearch"`, RFC 2544's binary search
(`method = "rfc2544"`, the same loss ratios, resolution and range, trials as long as the
final ones), and the `MLRsearch` package (1.2.1) driving gapless trials. One line per search
goes to bench/results/mlrsearch-<UTC>.jsonl. The router is shaped to 12 Mbit/s (25,000
frames/s of 64 B) and each search spans 1,000-50,000 frames/s with 1 s final trials, as
python/tests/test_mlrsearch.py does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python" / "tests"))

import gapless  # noqa: E402
from test_mlrsearch import GaplessTrials, binary_trial_seconds, example  # noqa: E402

BED = "glbm"


def ours() -> Dict[str, Any]:
    t0 = time.monotonic()
    r = gapless.experiment(example(BED))
    m = r["mlrsearch"]
    return {"search": "gapless mlrsearch", "wall_s": time.monotonic() - t0, "trials": len(m["trials"]),
            "trial_seconds": m["trial_seconds"], "retried_trial_seconds": m["retried_trial_seconds"],
            "goals": {g["name"]: [g["lower_bound_pps"], g["upper_bound_pps"]] for g in m["goals"]},
            "warnings": r["warnings"]}


def binary() -> Dict[str, Any]:
    spec = example(BED)
    m = spec.pop("mlrsearch")
    spec["method"] = "rfc2544"
    spec["trial"]["duration_s"] = m["final_trial_duration_s"]
    spec["rfc2544"] = {"tests": ["throughput"], "frame_sizes": [64], "loss_tolerance_pct": [0, 0.5],
                       "max_rate_pps": m["max_rate_pps"], "min_rate_pps": m["min_rate_pps"], "resolution_pct": 0.5}
    t0 = time.monotonic()
    r = gapless.experiment(spec)
    tps = r["rfc2544"][0]["throughput"]
    return {"search": "gapless rfc2544 binary", "wall_s": time.monotonic() - t0, "trials": len(r["trials"]),
            "trial_seconds": binary_trial_seconds(r),
            "goals": {f"loss ≤ {t['loss_tolerance_pct']} %": t["throughput_pps"] for t in tps},
            "warnings": r["warnings"]}


def package() -> Dict[str, Any]:
    from MLRsearch import Config, MultipleLossRatioSearch, SearchGoal  # type: ignore[import-untyped]

    goals = [SearchGoal(loss_ratio=x, exceed_ratio=0.5, relative_width=0.005, initial_trial_duration=0.25,
                        final_trial_duration=1.0, duration_sum=1.0, preceding_targets=2, fail_fast=False)
             for x in (0.0, 0.005)]
    cfg = Config()
    cfg.goals, cfg.min_load, cfg.max_load, cfg.search_duration_max, cfg.warmup_duration = goals, 1_000.0, 50_000.0, 900.0, None
    trials = GaplessTrials(BED)
    seconds = []
    measure = trials.measure

    def counted(intended_duration: float, intended_load: float) -> Any:
        seconds.append(intended_duration)
        return measure(intended_duration, intended_load)

    trials.measure = counted  # type: ignore[method-assign]
    t0 = time.monotonic()
    res = MultipleLossRatioSearch(config=cfg).search(measurer=trials)
    out = {}
    for name, g in zip(("NDR", "PDR"), goals):
        lo, hi = res[g].relevant_lower_bound, res[g].relevant_upper_bound
        out[name] = [None if lo is None else float(lo), None if hi is None else float(hi)]
    return {"search": "MLRsearch 1.2.1 package", "wall_s": time.monotonic() - t0, "trials": trials.trials,
            "trial_seconds": sum(seconds), "goals": out}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "bench" / "results" / f"mlrsearch-{stamp}.jsonl"
    subprocess.run(["gapless", "testbed", "up", "--name", BED, "--dut", "router", "--dut-rate", "12mbit"], check=True,
                   capture_output=True)
    try:
        with out.open("w") as f:
            for rep in range(reps):
                for run in (ours, binary, package):
                    line = {"rep": rep + 1, **run()}
                    print(json.dumps(line), flush=True)
                    f.write(json.dumps(line) + "\n")
    finally:
        subprocess.run(["gapless", "testbed", "down", "--name", BED], capture_output=True)
    print(f"raw results: {out}")


if __name__ == "__main__":
    main()
