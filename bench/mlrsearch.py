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
from test_mlrsearch import binary_trial_seconds, example, package_search, rfc2544_spec  # noqa: E402

BED = "glbm"


def ours() -> Dict[str, Any]:
    t0 = time.monotonic()
    r = gapless.experiment(example(BED))
    m = r["mlrsearch"]
    return {"search": "gapless mlrsearch", "wall_s": time.monotonic() - t0, "trials": len(m["trials"]),
            "trial_seconds": m["trial_seconds"], "retried_trial_seconds": m["retried_trial_seconds"],
            "goals": {g["name"]: [g["lower_bound_pps"], g["upper_bound_pps"]] for g in m["goals"]},
            "warnings": r["warnings"]}


def rfc2544() -> Dict[str, Any]:
    t0 = time.monotonic()
    r = gapless.experiment(rfc2544_spec(BED))
    tps = r["rfc2544"][0]["throughput"]
    return {"search": "gapless rfc2544 binary", "wall_s": time.monotonic() - t0, "trials": len(r["trials"]),
            "trial_seconds": binary_trial_seconds(r),
            "goals": {f"loss ≤ {t['loss_tolerance_pct']} %": t["throughput_pps"] for t in tps},
            "warnings": r["warnings"]}


def package() -> Dict[str, Any]:
    t0 = time.monotonic()
    goals, res, trials = package_search(BED, [0.0, 0.005])
    out = {}
    for name, g in zip(("NDR", "PDR"), goals):
        lo, hi = res[g].relevant_lower_bound, res[g].relevant_upper_bound
        out[name] = [None if lo is None else float(lo), None if hi is None else float(hi)]
    return {"search": "MLRsearch 1.2.1 package", "wall_s": time.monotonic() - t0, "trials": trials.trials,
            "trial_seconds": trials.seconds, "goals": out}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "bench" / "results" / f"mlrsearch-{stamp}.jsonl"
    subprocess.run(["gapless", "testbed", "up", "--name", BED, "--dut", "router", "--dut-rate", "12mbit"], check=True,
                   capture_output=True)
    try:
        with out.open("w") as f:
            for rep in range(reps):
                for run in (ours, rfc2544, package):
                    line = {"rep": rep + 1, **run()}
                    print(json.dumps(line), flush=True)
                    f.write(json.dumps(line) + "\n")
    finally:
        subprocess.run(["gapless", "testbed", "down", "--name", BED], capture_output=True)
    print(f"raw results: {out}")


if __name__ == "__main__":
    main()
