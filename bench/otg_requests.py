"""Requests while a slow `set_config` runs (issue 58): a client polls `GET /config`,
`monitor/metrics` for ports and the dashboard's run list every 50 ms while a `set_config`
of 40 BGP device pairs (80 bgpd) comes up, and, interleaved in the same run, while the
server is idle. Each answer's time, per endpoint and condition: p50, p99, max. The goal: the
99th percentile under 100 ms while the config is set.

    sudo .venv/bin/python bench/otg_requests.py [--pairs 40] [--rounds 5]

Two veths in one namespace the script makes, as ixia-c users wire them; a `gapless serve`
it starts (target/ci/gapless when built). Prints one JSON line per round and condition and
writes them to bench/results/otg-requests-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import requests
import urllib3

from otg_bgp import config as bgp_config
from otg_devices import REPO, free_port, sh

NS = "glbgpbench"
PERIOD_S = 0.05


def server() -> tuple[subprocess.Popen, str, str]:  # type: ignore[type-arg]
    tmp, dash, otg = Path(tempfile.mkdtemp()), free_port(), free_port()
    binary = REPO / "target" / "ci" / "gapless"
    srv = subprocess.Popen([str(binary) if binary.exists() else "gapless", "serve", "--listen", f"127.0.0.1:{dash}",
                            "--otg-listen", f"127.0.0.1:{otg}", "--otg-grpc-listen", f"127.0.0.1:{free_port()}", "--no-gnmi",
                            "--db", str(tmp / "g.db")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while True:
        try:
            socket.create_connection(("127.0.0.1", otg), timeout=1).close()
            return srv, f"http://127.0.0.1:{dash}", f"https://127.0.0.1:{otg}"
        except OSError:
            assert srv.poll() is None and time.monotonic() - t0 < 30, "gapless serve did not listen within 30 s"
            time.sleep(0.05)


def poll(endpoints: Dict[str, Callable[[], Any]], until: threading.Event, min_s: float) -> Dict[str, List[float]]:
    """Each endpoint every PERIOD_S until `until` is set (and at least `min_s`): ms per answer."""
    took: Dict[str, List[float]] = {k: [] for k in endpoints}
    t_end = time.monotonic() + min_s
    while not until.is_set() or time.monotonic() < t_end:
        for name, call in endpoints.items():
            t0 = time.monotonic()
            call()
            took[name].append((time.monotonic() - t0) * 1e3)
        time.sleep(PERIOD_S)
    return took


def summary(ms: List[float]) -> Dict[str, float]:
    s = sorted(ms)
    return {"n": len(s), "p50_ms": round(statistics.median(s), 2), "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))], 2),
            "max_ms": round(s[-1], 2)}


def main() -> int:
    import snappi  # type: ignore[import-untyped]

    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    urllib3.disable_warnings()
    out = REPO / "bench" / "results" / f"otg-requests-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    sh("ip", "netns", "add", NS)
    sh("ip", "-n", NS, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-z")
    for d in ("lo", "veth-a", "veth-z"):
        sh("ip", "-n", NS, "link", "set", d, "up")
    srv, dash, otg = server()
    lines: List[str] = []
    try:
        api = snappi.api(location=otg, verify=False)
        body = bgp_config(api, args.pairs, 1).serialize()
        empty = api.config().serialize()
        hdr = {"Content-Type": "application/json"}
        # One kept-alive connection per endpoint, as a polling client keeps: a new TLS
        # handshake per request alone took about 50 ms here.
        sess = {k: requests.Session() for k in ("config", "metrics", "runs")}
        endpoints: Dict[str, Callable[[], Any]] = {
            "GET /config": lambda: sess["config"].get(f"{otg}/config", verify=False, timeout=30),
            "monitor/metrics port": lambda: sess["metrics"].post(f"{otg}/monitor/metrics", json={"choice": "port"},
                                                                 verify=False, timeout=30),
            "GET /api/runs": lambda: sess["runs"].get(f"{dash}/api/runs", timeout=30),
        }
        for r in range(args.rounds):
            for cond in ("idle", "during set_config"):
                done = threading.Event()
                took_s: Dict[str, float] = {}

                def set_it() -> None:
                    t0 = time.monotonic()
                    a = requests.post(f"{otg}/config", data=body, headers=hdr, verify=False, timeout=300)
                    assert a.status_code == 200, a.text
                    took_s["set_config_s"] = round(time.monotonic() - t0, 2)
                    done.set()

                if cond == "idle":
                    requests.post(f"{otg}/config", data=empty, headers=hdr, verify=False, timeout=300)
                    threading.Timer(3.0, done.set).start()
                    took = poll(endpoints, done, 3.0)
                else:
                    t = threading.Thread(target=set_it)
                    t.start()
                    took = poll(endpoints, done, 0.0)
                    t.join()
                row = {"round": r, "condition": cond, "pairs": args.pairs, **took_s,
                       **{k: summary(v) for k, v in took.items()}}
                print(json.dumps(row), flush=True)
                lines.append(json.dumps(row))
                out.write_text("\n".join(lines) + "\n")
            requests.post(f"{otg}/config", data=empty, headers=hdr, verify=False, timeout=300)
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
