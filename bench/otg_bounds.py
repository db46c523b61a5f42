"""The totals `gapless_otg::bounds` puts on a config, sized (issue 68, item 3): at each bound,
the time `set_config` takes and the peak memory of the server and its FRR daemons together
(the sum of their RSS, sampled every 50 ms while it runs); at the bound plus one, the time to
the refusal and its message, which must name the path and the limit. Two veths in one
namespace, snappi over HTTPS to a `gapless serve` this script starts (bench/otg_devices.py).

    sudo .venv/bin/python bench/otg_bounds.py [--only bgp isis ospf random]

The goal (issue 68): at each bound, under 60 s and 2 GiB; at the bound plus one, refused at
once. One JSON line per case goes to stdout and bench/results/otg-bounds-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from otg_devices import REPO, serving

NS = "glbounds"
DAEMONS = {"bgpd", "isisd", "ospfd", "ospf6d", "zebra", "staticd", "watchfrr", "mgmtd"}


def ports() -> Dict[str, Any]:
    return {"ports": [{"name": "p1", "location": f"{NS}/veth-a"}, {"name": "p2", "location": f"{NS}/veth-z"}]}


def device(proto: Dict[str, Any]) -> Dict[str, Any]:
    eth = {"name": "e1", "connection": {"choice": "port_name", "port_name": "p1"}, "mac": "02:00:00:00:00:01",
           "ipv4_addresses": [{"name": "a1", "address": "10.0.0.1", "gateway": "10.0.0.2", "prefix": 30}]}
    return {**ports(), "devices": [{"name": "d1", "ethernets": [eth], **proto}]}


def v4(count: int, base: str = "20.0.0.0") -> List[Dict[str, Any]]:
    return [{"address": base, "prefix": 32, "count": count, "step": 1}]


def bgp(n: int) -> Dict[str, Any]:
    peer = {"name": "peer", "peer_address": "10.0.0.2", "as_type": "ebgp", "as_number": 64512,
            "v4_routes": [{"name": "r", "addresses": v4(min(n, 1_000_000)) + (v4(n - 1_000_000, "60.0.0.0") if n > 1_000_000 else [])}]}
    return device({"bgp": {"router_id": "10.0.0.1", "ipv4_interfaces": [{"ipv4_name": "a1", "peers": [peer]}]}})


def isis(n: int) -> Dict[str, Any]:
    return device({"isis": {"name": "i", "system_id": "640000000001",
                            "interfaces": [{"name": "ii", "eth_name": "e1", "network_type": "point_to_point"}],
                            "v4_routes": [{"name": "r", "addresses": v4(n)}]}})


def ospf(n: int) -> Dict[str, Any]:
    return device({"ospfv2": {"name": "o", "router_id": {"choice": "custom", "custom": "10.0.0.1"},
                              "interfaces": [{"name": "oi", "ipv4_name": "a1"}],
                              "v4_routes": [{"name": "r", "addresses": v4(n)}]}})


def random_values(n: int) -> Dict[str, Any]:
    """Flows of one random UDP source port each, 65,536 values a flow, `n` values in all."""
    flows, left = [], n
    while left > 0:
        count = min(left, 65_536)
        left -= count
        udp = {"src_port": {"choice": "random", "random": {"min": 1, "max": 65_535, "seed": 1, "count": count}}}
        flows.append({"name": f"f{len(flows)}", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
                      "packet": [{"choice": "ethernet", "ethernet": {}}, {"choice": "ipv4", "ipv4": {}},
                                 {"choice": "udp", "udp": udp}]})
    return {**ports(), "flows": flows}


CASES: Dict[str, tuple[int, Callable[[int], Dict[str, Any]]]] = {
    "bgp": (1_000_000, bgp), "isis": (100_000, isis), "ospf": (4_096, ospf), "random": (1_048_576, random_values),
}


def rss_kib(root: int) -> int:
    """The RSS of `root`, its descendants and every FRR daemon, KiB."""
    procs: Dict[int, tuple[int, str, int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            status = Path(f"/proc/{d}/status").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        procs[int(d)] = (ppid, name, rss)
    mine, grew = {root}, True
    while grew:
        more = {p for p, (pp, _, _) in procs.items() if pp in mine} - mine
        mine |= more
        grew = bool(more)
    return sum(rss for p, (_, name, rss) in procs.items() if p in mine or name in DAEMONS)


def timed(api: Any, srv: Any, cfg: Dict[str, Any]) -> Dict[str, Any]:
    """set_config of `cfg`: seconds, peak RSS (MiB), and the error if it was refused."""
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(srv.pid))
            time.sleep(0.05)

    t = threading.Thread(target=sample)
    t.start()
    t0 = time.monotonic()
    err = None
    try:
        api.set_config(api.config().deserialize(json.dumps(cfg)))
    except Exception as e:  # noqa: BLE001 - a refusal is a result here
        err = str(e)[:400]
    secs = time.monotonic() - t0
    done.set()
    t.join()
    return {"seconds": round(secs, 2), "peak_rss_mib": round(peak[0] / 1024, 1), "error": err}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=list(CASES))
    a = ap.parse_args()
    out = REPO / "bench" / "results" / f"otg-bounds-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    bad = 0
    with serving(NS) as (api, srv), out.open("w") as log:
        idle = rss_kib(srv.pid)
        for kind in a.only:
            bound, make = CASES[kind]
            for n in (bound, bound + 1):
                r = {"case": kind, "n": n, "idle_rss_mib": round(idle / 1024, 1), **timed(api, srv, make(n))}
                if n == bound:
                    r["ok"] = r["error"] is None and r["seconds"] < 60 and r["peak_rss_mib"] < 2048
                else:
                    r["ok"] = r["error"] is not None and str(bound) in r["error"].replace(",", "") and r["seconds"] < 1
                bad += not r["ok"]
                print(json.dumps(r), flush=True)
                log.write(json.dumps(r) + "\n")
                timed(api, srv, ports())
    print(f"{bad} of {2 * len(a.only)} cases missed the goal; raw: {out.relative_to(REPO)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "bench"))
    sys.exit(main())
