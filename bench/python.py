"""The Python path against the CLI, in one interleaved run (this machine is noisy).

1. Overhead: 20 M frames of one 64 B stream on the null backend (built and dropped,
   unpaced), `gapless.run(...)` in this process against `gapless run --null` as a process.
   Both report the engine's own rate (`achieved_pps` = frames / the send loop's time); the
   wall time around each call is reported too (the CLI's includes exec and exit).
   Goal: the same Mpps within 2 %.
2. `live()` at 10 Hz: a paced 100 kpps run on a testbed for 3 s, with and without a
   snapshot every 0.1 s; the sender's lateness p99 of each. Goal: no measurable change.

    .venv/bin/python bench/python.py [REPS]      # as root (part 2 makes a testbed)

Prints every run and the medians, and writes the raw lines to
bench/results/python-<UTC time>.txt.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import gapless

REPO = Path(__file__).resolve().parents[1]
CLI = str(REPO / "target" / "release" / "gapless")
NULL = {"stream": [{"size": 64, "timing": {"rate_pps": 5e8, "count": 20_000_000}}]}
PACED = {"stream": [{"size": 64, "timing": {"rate_pps": 100_000, "duration_s": 3}}]}


def null_py() -> Dict[str, float]:
    t0 = time.perf_counter()
    r = gapless.run(NULL, null=True)
    return {"mpps": r["achieved_pps"] / 1e6, "wall_s": time.perf_counter() - t0}


def null_cli(toml: Path, out: Path) -> Dict[str, float]:
    t0 = time.perf_counter()
    subprocess.run([CLI, "run", str(toml), "--null", "-q", "--json", str(out)], check=True, capture_output=True)
    wall = time.perf_counter() - t0
    return {"mpps": json.loads(out.read_text())["achieved_pps"] / 1e6, "wall_s": wall}


def paced(live: bool) -> Dict[str, float]:
    with gapless.start(PACED, iface="glbp-tx0", netns="glbp-tx") as run:
        n = sum(1 for _ in run.live(0.1)) if live else 0
    r = run.result()
    return {"p99_ns": r["lateness"]["p99_ns"], "p99_9_ns": r["lateness"]["p99_9_ns"], "snapshots": n, "held": r["verdict"]["held"]}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    lines: List[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    tmp = Path(tempfile.mkdtemp())
    toml = tmp / "null.toml"
    gapless.Profile(NULL).save(toml)
    res: Dict[str, List[Dict[str, float]]] = {"py": [], "cli": [], "quiet": [], "live": []}
    for i in range(reps):
        for kind in (("py", "cli") if i % 2 == 0 else ("cli", "py")):
            r = null_py() if kind == "py" else null_cli(toml, tmp / "r.json")
            res[kind].append(r)
            say(f"null 20M {kind:4s} rep {i}: {r['mpps']:.2f} Mpps (engine), wall {r['wall_s']:.3f} s")
    subprocess.run([CLI, "testbed", "up", "--name", "glbp"], check=True, capture_output=True)
    try:
        for i in range(reps):
            for kind in (("quiet", "live") if i % 2 == 0 else ("live", "quiet")):
                r = paced(kind == "live")
                res[kind].append(r)
                say(f"paced 100k {kind:5s} rep {i}: lateness p99 {r['p99_ns']} ns, p99.9 {r['p99_9_ns']} ns, {r['snapshots']} snapshots, held {r['held']}")
    finally:
        subprocess.run([CLI, "testbed", "down", "--name", "glbp"], check=True, capture_output=True)
    med = lambda k, f: statistics.median(x[f] for x in res[k])  # noqa: E731
    say(f"median null: python {med('py', 'mpps'):.2f} Mpps vs CLI {med('cli', 'mpps'):.2f} Mpps: ratio {med('py', 'mpps') / med('cli', 'mpps'):.3f}")
    say(f"median wall: python {med('py', 'wall_s'):.3f} s vs CLI {med('cli', 'wall_s'):.3f} s")
    say(f"median lateness p99: without live {med('quiet', 'p99_ns'):.0f} ns, with live(0.1) {med('live', 'p99_ns'):.0f} ns")
    say(f"median lateness p99.9: without live {med('quiet', 'p99_9_ns'):.0f} ns, with live(0.1) {med('live', 'p99_9_ns'):.0f} ns")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "bench" / "results" / f"python-{stamp}.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"raw: {out}")


if __name__ == "__main__":
    main()
