"""Runs across hosts (issue 28): set-up-to-T0 time for 1, 2 and 4 agents, and the
controller's CPU per snapshot (one poll round of every agent).

    sudo .venv/bin/python bench/hosts.py [ROUNDS]

Four namespaces bh-h1..bh-h4, each an agent on a management veth, chained by data veths
(h1→h2→h3→h4), and a loop veth inside h1 for the one-agent case. A run of N agents sends one
flow per link of the chain's first N hosts (1000 frames at 10 kpps); the counts of agents are
taken turn about, ROUNDS times. Then a 10 s run on 4 agents measures the controller's CPU
time (utime + stime from /proc) per poll round. Raw lines go to bench/results/hosts-*.jsonl.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python" / "tests"))
from test_hosts import Lab, add_host, ended_run, ip, start  # noqa: E402

NS = [f"bh-h{k}" for k in range(1, 5)]


def topology(lab: Lab) -> None:
    for k, ns in enumerate(NS, 1):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"bh-m{k}"], capture_output=True)
        add_host(lab, f"h{k}", ns, f"bh-m{k}", f"198.18.11{k}")
    ip("-n", NS[0], "link", "add", "loop-a", "type", "veth", "peer", "name", "loop-b")
    for d in ("loop-a", "loop-b"):
        ip("-n", NS[0], "link", "set", d, "up")
    for k in range(3):
        ip("-n", NS[k], "link", "add", "out", "type", "veth", "peer", "name", "in", "netns", NS[k + 1])
        ip("-n", NS[k], "link", "set", "out", "up")
        ip("-n", NS[k + 1], "link", "set", "in", "up")


def config(lab: Lab, n: int, count: int) -> tuple[Any, Any]:
    a = lab.api()
    cfg = a.config()
    h = lab.hosts
    links = [("h1", "loop-a", "h1", "loop-b")] if n == 1 else [(f"h{k}", "out", f"h{k + 1}", "in") for k in range(1, n)]
    for i, (tx, ti, rx, ri) in enumerate(links):
        cfg.ports.port(name=f"t{i}", location=f"{h[tx].location}/{ti}")
        cfg.ports.port(name=f"r{i}", location=f"{h[rx].location}/{ri}")
        f = cfg.flows.flow(name=f"f{i}")[-1]
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = f"t{i}", [f"r{i}"]
        f.rate.pps = 10_000
        if count:
            f.duration.fixed_packets.packets = count
        f.packet.ethernet().ipv4().udp()
    return a, cfg


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, after the state field


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    out = Path(__file__).parent / "results" / time.strftime("hosts-%Y%m%dT%H%M%SZ.jsonl", time.gmtime())
    with TemporaryDirectory() as tmp:
        lab = Lab(Path(tmp))
        try:
            topology(lab)
            for k in range(1, 5):
                lab.start_agent(f"h{k}")
            lab.start_controller()
            setup: dict[int, list[float]] = {1: [], 2: [], 4: []}
            with open(out, "w") as o:
                for r in range(rounds):
                    for n in (1, 2, 4):
                        a, cfg = config(lab, n, 1000)
                        start(a, cfg)
                        res = ended_run(lab)["result"]
                        ms = res["setup_to_t0_ns"] / 1e6
                        setup[n].append(ms)
                        o.write(json.dumps({"kind": "setup_to_t0", "agents": n, "round": r, "ms": ms,
                                            "ending": res["ending"]}) + "\n")
                a, cfg = config(lab, 4, 0)
                assert lab.controller is not None
                pid = lab.controller.pid
                start(a, cfg)
                time.sleep(2.5)  # past the first checkpoint
                c0, p0 = cpu_ticks(pid), lab.run(lab.runs()[0]["id"])["result"]["checkpoint"]["polls"]
                time.sleep(10.0)
                c1, p1 = cpu_ticks(pid), lab.run(lab.runs()[0]["id"])["result"]["checkpoint"]["polls"]
                cs = a.control_state()
                cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
                a.set_control_state(cs)
                tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
                per = (c1 - c0) * tick_ms / max(1, p1 - p0)
                o.write(json.dumps({"kind": "cpu_per_snapshot", "agents": 4, "polls": p1 - p0,
                                    "cpu_ms": (c1 - c0) * tick_ms, "ms_per_snapshot": per}) + "\n")
            for n, xs in setup.items():
                print(f"{n} agent(s): set-up to T0 median {statistics.median(xs):.1f} ms (min {min(xs):.1f}, max {max(xs):.1f}, {len(xs)} runs)")
            print(f"controller CPU per snapshot of 4 agents: {per:.2f} ms ({p1 - p0} polls, {(c1 - c0) * tick_ms:.0f} ms CPU)")
            print(f"raw: {out}")
        finally:
            procs = [h.proc for h in lab.hosts.values()] + [lab.controller]
            for p in procs:
                if p is not None:
                    p.terminate()
                    p.wait(timeout=15)
            for k, ns in enumerate(NS, 1):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
                subprocess.run(["ip", "link", "del", f"bh-m{k}"], capture_output=True)


if __name__ == "__main__":
    main()
