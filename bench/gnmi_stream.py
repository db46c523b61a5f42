"""gNMI's cost beside a run (issue 59): 1,000 flows of 10 frames a second each on two veths
in one namespace, 15 s, sent with and without a gNMI STREAM subscription that samples every
flow's state each second (`flows/flow[name=*]/state`, PROTO), in one interleaved run (this
machine is noisy). For each run: the run's own verdict on its schedule, the worst lateness,
frames sent and received, the server's CPU seconds in its tokio threads (where the gNMI
stream's gathering and encoding run) and in all, and the updates the subscriber read.

    .venv/bin/python bench/gnmi_stream.py [REPS]      # as root (it makes two veths)

Prints every run and the medians, and writes the raw lines to
bench/results/gnmi-stream-<UTC time>.jsonl.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.client
from pathlib import Path
from typing import Any, Dict, List

import grpc  # type: ignore[import-untyped]
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[1]
CLI = os.environ.get("GAPLESS_BIN", str(REPO / "target" / "release" / "gapless"))
NS, A, Z = "glbg", "veth-a", "veth-z"
FLOWS, PPS, SECONDS = 1000, 10, 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def otg(port: int, path: str, body: Dict[str, Any]) -> Any:
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=60, context=ssl._create_unverified_context())
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    assert r.status == 200, f"{path}: {r.status} {data[:500]!r}"
    return json.loads(data)


def config() -> Dict[str, Any]:
    flows = []
    for i in range(FLOWS):
        flows.append({"name": f"f{i}", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
                      "size": {"choice": "fixed", "fixed": 128}, "rate": {"choice": "pps", "pps": PPS},
                      "duration": {"choice": "fixed_seconds", "fixed_seconds": {"seconds": SECONDS}},
                      "metrics": {"enable": True},
                      "packet": [{"choice": "ethernet", "ethernet": {}}, {"choice": "ipv4", "ipv4": {}}, {"choice": "udp", "udp": {}}]})
    return {"ports": [{"name": "p1", "location": f"{NS}/{A}"}, {"name": "p2", "location": f"{NS}/{Z}"}], "flows": flows}


def cpu(pid: int) -> tuple[float, float]:
    """(tokio threads', whole process's) CPU seconds so far."""
    tick = os.sysconf("SC_CLK_TCK")
    tok = total = 0.0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (t / "comm").read_text().strip()
            f = (t / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        s = (int(f[11]) + int(f[12])) / tick
        total += s
        if comm.startswith("tokio"):
            tok += s
    return tok, total


def subscribe(gnmi_port: int, cert: bytes, stop: threading.Event, seen: List[int]) -> None:
    creds = grpc.ssl_channel_credentials(root_certificates=cert)
    chan = grpc.secure_channel(f"127.0.0.1:{gnmi_port}", creds)
    stub = gnmi_pb2_grpc.gNMIStub(chan)
    path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="flows"), gnmi_pb2.PathElem(name="flow", key={"name": "*"}),
                               gnmi_pb2.PathElem(name="state")])
    sub = gnmi_pb2.SubscriptionList(mode=0, encoding=2, subscription=[
        gnmi_pb2.Subscription(path=path, mode=2, sample_interval=1_000_000_000)])
    call = stub.Subscribe(iter([gnmi_pb2.SubscribeRequest(subscribe=sub)]))
    try:
        for r in call:
            seen[0] += len(r.update.update)
            if stop.is_set():
                break
    finally:
        call.cancel()
        chan.close()


def one_run(otg_port: int, gnmi_port: int, cert: bytes, pid: int, with_gnmi: bool) -> Dict[str, Any]:
    otg(otg_port, "/config", config())
    stop, seen = threading.Event(), [0]
    th = threading.Thread(target=subscribe, args=(gnmi_port, cert, stop, seen)) if with_gnmi else None
    if th:
        th.start()
        time.sleep(2)
    c0 = cpu(pid)
    t0 = time.monotonic()
    otg(otg_port, "/control/state", {"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}})
    while True:
        time.sleep(1)
        m = otg(otg_port, "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": ["f0"]}})["flow_metrics"][0]
        if m["transmit"] == "stopped":
            break
        assert time.monotonic() - t0 < SECONDS + 60, "the run did not end"
    c1 = cpu(pid)
    stop.set()
    if th:
        th.join(timeout=10)
    all_m = otg(otg_port, "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": []}})["flow_metrics"]
    x = all_m[0]["x_gapless"]
    late = [f["x_gapless"].get("lateness") or {} for f in all_m]
    return {
        "gnmi": with_gnmi,
        "schedule": x.get("schedule"),
        "late_max_ns": max((float(l.get("max_ns") or 0) for l in late), default=0.0),
        "frames_tx": sum(f["frames_tx"] for f in all_m),
        "frames_rx": sum(f["frames_rx"] for f in all_m),
        "tokio_cpu_s": round(c1[0] - c0[0], 3),
        "process_cpu_s": round(c1[1] - c0[1], 3),
        "seconds": round(time.monotonic() - t0, 2),
        "updates_read": seen[0],
    }


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    only = os.environ.get("GNMI_ONLY")
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    sh("ip", "netns", "add", NS)
    tmp = Path(tempfile.mkdtemp())
    srv = None
    try:
        sh("ip", "-n", NS, "link", "add", A, "type", "veth", "peer", "name", Z)
        for d in ("lo", A, Z):
            sh("ip", "-n", NS, "link", "set", d, "up")
        otg_port, gnmi_port = free_port(), free_port()
        srv = subprocess.Popen([CLI, "serve", "--listen", f"127.0.0.1:{free_port()}", "--otg-listen", f"127.0.0.1:{otg_port}",
                                "--no-otg-grpc", "--gnmi-listen", f"127.0.0.1:{gnmi_port}", "--db", str(tmp / "g.db")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", gnmi_port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() - t0 < 10, "the server did not listen"
                time.sleep(0.05)
        cert = (tmp / "g-otg-cert.pem").read_bytes()
        out = REPO / "bench" / "results" / f"gnmi-stream-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.jsonl"
        rows = []
        for rep in range(reps):
            for with_gnmi in ((True,) if only else (False, True) if rep % 2 == 0 else (True, False)):
                r = one_run(otg_port, gnmi_port, cert, srv.pid, with_gnmi)
                r["rep"] = rep
                rows.append(r)
                print(json.dumps(r), flush=True)
                with out.open("a") as f:
                    f.write(json.dumps(r) + "\n")
        for g in (False, True):
            mine = [r for r in rows if r["gnmi"] == g]
            print(f"gnmi={g}: tokio CPU median {statistics.median(r['tokio_cpu_s'] for r in mine):.3f} s, "
                  f"process CPU median {statistics.median(r['process_cpu_s'] for r in mine):.2f} s, "
                  f"schedules {[r['schedule'] for r in mine]}, updates {[r['updates_read'] for r in mine]}")
        print(f"raw results: {out}")
    finally:
        if srv:
            srv.terminate()
            srv.wait(timeout=20)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


if __name__ == "__main__":
    main()
