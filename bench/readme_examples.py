"""The README's MLRsearch examples as the README runs them, at the files' own settings (2 s
final trials, 60 trial seconds at most): the one-way search against a router shaped to
24 Mbit/s (50 kframes/s of 64 B), the bidirectional one against 12 Mbit/s (25 kframes/s a
port). Each must end with NDR and PDR and their bounds, or, where a load the sender could not
hold bounds the answer, say so (python/tests/test_mlrsearch.py's `check_answer`).

    sudo .venv/bin/python bench/readme_examples.py      (about 2.5 min)

It was a test until 7 Dec 2026 (137 s of CI's pytest stage, the longest test); the same
searches run in the tests at CI's settings (test_mlrsearch.py one way, test_ports.py both
ways, 1 s final trials). One line per example goes to bench/results/readme-examples-<UTC>.jsonl.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python" / "tests"))

from conftest import gapless_cli  # noqa: E402
from test_mlrsearch import EXAMPLE, check_answer, readme_example  # noqa: E402


def main() -> int:
    out = REPO / "bench" / "results" / f"readme-examples-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, out.open("w") as log:
        for name, rate in (("mlrsearch_dut.toml", "24mbit"), ("mlrsearch_bidir.toml", "12mbit")):
            bed = "glrx"
            gapless_cli("testbed", "up", "--name", bed, "--dut", "router", "--dut-rate", rate)
            t0 = time.monotonic()
            try:
                r = readme_example(EXAMPLE.with_name(name), bed, Path(tmp))
            finally:
                gapless_cli("testbed", "down", "--name", bed)
            m = r["mlrsearch"]
            try:
                check_answer(r)
                verdict = "ok"
            except AssertionError as e:
                verdict, failed = f"FAILED: {e}", failed + 1
            line = {"example": name, "wall_s": round(time.monotonic() - t0, 1), "verdict": verdict,
                    "goals": {g["name"]: [g["lower_bound_pps"], g["upper_bound_pps"]] for g in m["goals"]},
                    "trial_seconds": m["trial_seconds"], "sender": m["sender"], "warnings": r["warnings"]}
            log.write(json.dumps(line) + "\n")
            print(f"{name}: {verdict}; goals {line['goals']}; {m['trial_seconds']:.1f} trial s; {line['wall_s']} s")
    print(f"raw: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
