"""`gapless serve` under client load, against a quiet server, in one interleaved run (this
machine is noisy): each repetition runs the same 100 kpps, 6 s CBR run on a testbed through
`POST /api/runs` twice, once with no clients and once while 16 pollers (`GET /api/runs` and
`GET /api/runs/ID`), 32 SSE readers and one OTG metrics poller hammer the server from
processes pinned to the cores the server keeps for itself. For each run: the verdict, the
late fraction (frames more than one gap late), the send loop's run-queue wait, steal and
stalls; for the load: requests answered per second, 429s, snapshot events read.

    .venv/bin/python bench/serve_load.py [REPS]      # as root (it makes a testbed)

Prints every run and the medians, and writes the raw lines to
bench/results/serve-load-<UTC time>.jsonl.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[1]
# GAPLESS_BIN: another build (e.g. target/ci/gapless, which the tests use) instead of the release one.
CLI = os.environ.get("GAPLESS_BIN", str(REPO / "target" / "release" / "gapless"))
PROFILE = '[[stream]]\nname = "a"\nsize = 64\n[stream.timing]\nrate_pps = 100000\nduration_s = 6\n'
TESTBED = "glsl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The OTG listener's port: HTTPS with the server's self-signed certificate.
TLS_PORTS: set = set()


def call(port: int, method: str, path: str, body: str = "") -> tuple[int, bytes]:
    if port in TLS_PORTS:
        import ssl

        c: http.client.HTTPConnection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ssl._create_unverified_context())
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"} if method != "GET" else {}
    c.request(method, path, body=body or None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def poller(port: int, paths: List[str], cores: List[int], until: float, out: Any) -> None:
    os.sched_setaffinity(0, cores)
    ok = limited = other = 0
    i = 0
    while time.time() < until:
        try:
            st, _ = call(port, "POST" if paths[i % len(paths)].startswith("POST ") else "GET",
                         paths[i % len(paths)].removeprefix("POST "), '{"choice": "flow"}' if paths[i % len(paths)].startswith("POST ") else "")
        except OSError:
            st = 0
        i += 1
        if st == 200:
            ok += 1
        elif st == 429:
            limited += 1
        else:
            other += 1
    out.put({"ok": ok, "limited": limited, "other": other, "events": 0})


def sse_reader(port: int, run: int, cores: List[int], until: float, out: Any) -> None:
    os.sched_setaffinity(0, cores)
    events = refused = 0
    while time.time() < until:
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(0.5)
        s.sendall(f"GET /api/runs/{run}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        try:
            while time.time() < until:
                chunk = s.recv(65536)
                if not chunk:
                    break
                if b" 503 " in chunk[:16]:
                    refused += 1
                events += chunk.count(b"event: snapshot")
        except OSError:
            pass
        s.close()
    out.put({"ok": 0, "limited": 0, "other": refused, "events": events})


def server_cores(pid: int) -> List[int]:
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        if "tokio-rt-worker" in status.splitlines()[0]:
            line = next(l for l in status.splitlines() if l.startswith("Cpus_allowed_list:"))
            out: List[int] = []
            for part in line.split(":")[1].strip().split(","):
                a, _, b = part.partition("-")
                out.extend(range(int(a), int(b or a) + 1))
            return out
    raise RuntimeError("no tokio worker (tokio-rt-worker) in the server")


def one(port: int, otg: int, pid: int, loaded: bool) -> Dict[str, Any]:
    st, body = call(port, "POST", "/api/runs", json.dumps({"toml": PROFILE, "testbed": TESTBED}))
    assert st == 201, body
    run = json.loads(body)["id"]
    time.sleep(0.5)
    load: Dict[str, int] = {"ok": 0, "limited": 0, "other": 0, "events": 0}
    t0 = time.time()
    if loaded:
        cores = server_cores(pid)
        # Pinned before the load's processes are made, so none of them starts on the loop's core.
        everything = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cores)
        until = t0 + 5.5
        q: Any = mp.Queue()
        procs = [mp.Process(target=poller, args=(port, ["/api/runs", f"/api/runs/{run}"], cores, until, q)) for _ in range(16)]
        procs += [mp.Process(target=sse_reader, args=(port, run, cores, until, q)) for _ in range(32)]
        procs += [mp.Process(target=poller, args=(otg, ["POST /monitor/metrics"], cores, until, q))]
        for p in procs:
            p.start()
        for _ in procs:
            for k, v in q.get().items():
                load[k] += v
        for p in procs:
            p.join()
        os.sched_setaffinity(0, everything)
    while True:
        st, body = call(port, "GET", f"/api/runs/{run}")
        r = json.loads(body)
        if r["status"] != "running":
            break
        time.sleep(0.2)
    secs = max(time.time() - t0, 1e-9) if loaded else 0.0
    v = r["result"]["verdict"]
    lp = v["loops"][0]
    wall = lp["wall_ns"]
    return {
        "loaded": loaded,
        "run": run,
        "held": v["held"],
        "late_fraction": v["late_fraction"],
        "runqueue_wait_share": (lp.get("runqueue_wait_ns") or 0) / wall,
        "steal_share": (lp.get("steal_ns") or 0) / wall,
        "stall_share": lp["stall_ns"] / wall,
        "tx_core": r["result"]["environment"]["tx_core"],
        "requests_per_s": (load["ok"] + load["limited"]) / secs if loaded else 0.0,
        "load": load,
        "causes": v["causes"],
    }


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    subprocess.run([CLI, "testbed", "up", "--name", TESTBED], check=True, capture_output=True)
    port, otg = free_port(), free_port()
    TLS_PORTS.add(otg)
    db = Path(tempfile.mkdtemp()) / "bench.db"
    srv = subprocess.Popen([CLI, "serve", "--listen", f"127.0.0.1:{port}", "--otg-listen", f"127.0.0.1:{otg}", "--no-otg-grpc", "--no-gnmi", "--db", str(db)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "bench" / "results" / f"serve-load-{stamp}.jsonl"
    rows: List[Dict[str, Any]] = []
    try:
        time.sleep(1)
        # The OTG listener needs a config for its metrics.
        cfg = {"ports": [{"name": "p1", "location": f"{TESTBED}-tx/{TESTBED}-tx0"}, {"name": "p2", "location": f"{TESTBED}-rx/{TESTBED}-rx0"}],
               "flows": [{"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}}, "packet": [{"choice": "ethernet"}]}]}
        assert call(otg, "POST", "/config", json.dumps(cfg))[0] == 200
        with out.open("w") as f:
            for i in range(reps):
                for loaded in (False, True):
                    row = one(port, otg, srv.pid, loaded)
                    row["rep"] = i
                    rows.append(row)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(f"rep {i} {'loaded' if loaded else 'quiet '}: held={row['held']} late={row['late_fraction']:.4%} "
                          f"runq={row['runqueue_wait_share']:.4%} steal={row['steal_share']:.4%} stalls={row['stall_share']:.4%} "
                          f"core={row['tx_core']} req/s={row['requests_per_s']:.0f} load={row['load']}")
    finally:
        srv.terminate()
        srv.wait(timeout=15)
        subprocess.run([CLI, "testbed", "down", "--name", TESTBED], capture_output=True)
    for loaded in (False, True):
        sel = [r for r in rows if r["loaded"] == loaded]
        print(f"median {'loaded' if loaded else 'quiet '}: late {statistics.median(r['late_fraction'] for r in sel):.4%}, "
              f"run-queue wait {statistics.median(r['runqueue_wait_share'] for r in sel):.4%}, "
              f"req/s {statistics.median(r['requests_per_s'] for r in sel):.0f}")
    print(f"raw: {out}")


if __name__ == "__main__":
    main()
