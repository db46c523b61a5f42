"""Trials over several ports on this 2-core machine: are bidirectional trials at 100 kframes/s
aggregate valid (the sender held its schedule), and what does a trial's set-up cost per port?

    sudo .venv/bin/python bench/ports.py [ROUNDS]      (default 5; about 1 min per round)

Each round runs, interleaved, one trial of each case on the testbed `glbp` with a router
without a shaper (`--dut router --ports 4`):

- `one-way 100k`: the one-way form, 100 kframes/s from end 0 to end 1 (the peer case);
- `bidirectional 100k`: 50 kframes/s each way on ends 0 and 1, one send loop for both;
- `bidirectional 100k direct`: the same on the direct veth testbed `glbq` (no device,
  no forwarding CPU);
- `setup 1/2/4 ports`: short trials (0.1 s, no warm-up, no settle) one-way, both ways,
  and in a full mesh of 4, at 1 kframes/s per direction; the time between two trials'
  callbacks, less the metered 0.1 s and the meter's 0.3 s linger, is the set-up and
  tear-down of one trial, given per port.

Each trial is judged with the default late limit (0.1 % of frames more than a gap late).
One line per trial goes to bench/results/ports-<UTC>.jsonl.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import gapless

REPO = Path(__file__).resolve().parents[1]
BED, DIRECT = "glbp", "glbq"


def ends(bed: str, n: int) -> List[Dict[str, str]]:
    names = [f"{bed}-tx0", f"{bed}-rx0"] + [f"{bed}-p{k}" for k in range(2, n)]
    spaces = [f"{bed}-tx", f"{bed}-rx"] + [f"{bed}-p{k}" for k in range(2, n)]
    return [{"iface": i, "netns": s} for i, s in zip(names, spaces)]


def experiment(bed: str, ports: int, pairs: str, pps: float, duration: float, reps: int = 1,
               warmup: float = 0.3, settle: float = 0.3) -> Dict[str, Any]:
    e = ends(bed, ports)
    spec: Dict[str, Any] = {
        "method": "repeat",
        "trial": {"warmup_s": warmup, "settle_s": settle, "duration_s": duration, "repetitions": reps,
                  "max_retries": 0},
        "profile": {"stream": [{"name": "m", "size": 64, "timing": {"rate_pps": pps}}]},
    }
    if pairs == "one-way":
        spec["tx"], spec["rx"] = e[0], e[1]
    else:
        spec["ports"], spec["pairs"] = e, pairs
    return spec


def validity(case: str, bed: str, ports: int, pairs: str, pps: float) -> Dict[str, Any]:
    r = gapless.experiment(experiment(bed, ports, pairs, pps, 2.0))
    t = r["trials"][0]
    return {"case": case, "valid": t["valid"], "late_share": t["late_share"], "loss_pct": t["loss_pct"],
            "sent": t["sent"], "received": t["received"], "schedule": t["schedule"],
            "directions": [{k: d[k] for k in ("direction", "sent", "received", "loss_ratio")}
                           for d in t.get("directions", [])]}


def setup(case: str, ports: int, pairs: str) -> Dict[str, Any]:
    stamps: List[float] = []
    reps = 6
    gapless.experiment(experiment(BED, ports, pairs, 1000.0, 0.1, reps, 0.0, 0.0),
                       on_trial=lambda _t: stamps.append(time.monotonic()))
    gaps = [b - a - 0.1 - 0.3 for a, b in zip(stamps, stamps[1:])]
    used = 2 if pairs == "one-way" else ports
    return {"case": case, "ports": used, "per_trial_s": gaps, "per_port_ms": [g * 1000 / used for g in gaps]}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    subprocess.run(["gapless", "testbed", "up", "--name", BED, "--dut", "router", "--ports", "4"], check=True,
                   capture_output=True)
    subprocess.run(["gapless", "testbed", "up", "--name", DIRECT], check=True, capture_output=True)
    out = REPO / "bench" / "results" / f"ports-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    try:
        with out.open("w") as f:
            for k in range(rounds):
                for row in (validity("one-way 100k", BED, 2, "one-way", 100_000),
                            validity("bidirectional 100k", BED, 2, "bidirectional", 50_000),
                            validity("bidirectional 100k direct", DIRECT, 2, "bidirectional", 50_000),
                            setup("setup one-way", 2, "one-way"),
                            setup("setup bidirectional", 2, "bidirectional"),
                            setup("setup full mesh 4", 4, "full-mesh")):
                    row["round"] = k
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(json.dumps(row)[:200])
    finally:
        for b in (BED, DIRECT):
            subprocess.run(["gapless", "testbed", "down", "--name", b], capture_output=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
