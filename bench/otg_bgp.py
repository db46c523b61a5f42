"""BGP on OTG devices through FRR's bgpd, as ixia-c users wire it: for N device pairs in
eBGP (one bgpd per device), the time from `set_config` + `protocol.all start` until every
session is Established and every route received; each bgpd's PSS; and for one pair, the time
for one peer to advertise R routes (until the other has received them all). Two veths in one
namespace the script makes; snappi over HTTPS to a `gapless serve` it starts.

    sudo .venv/bin/python bench/otg_bgp.py [--pairs 1 10 100] [--routes 100000] [--rounds 3]

Prints one JSON line per round and writes them to bench/results/otg-bgp-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from otg_devices import REPO, serving

NS = "glbgpbench"


def config(api, pairs: int, routes: int):  # type: ignore[no-untyped-def]
    """Pair i: devices 10.x.y.1 and .2 (a /30 each), AS 64512+2i and +2i+1, each advertising
    `routes` /32s (as /24s count from 20.0.0.0 / 30.0.0.0)."""
    cfg = api.config()
    cfg.ports.port(name="p1", location=f"{NS}/veth-a").port(name="p2", location=f"{NS}/veth-z")
    for i in range(pairs):
        base = f"10.{i // 64}.{(i % 64) * 4}"
        for k, port in enumerate(("p1", "p2")):
            d = cfg.devices.device(name=f"d{i}.{k}")[-1]
            e = d.ethernets.add()
            e.name, e.mac, e.connection.port_name = f"d{i}.{k}.eth", f"02:00:0c:{i >> 8:02x}:{i & 255:02x}:0{k + 1}", port
            ip = e.ipv4_addresses.add()
            ip.name, ip.address, ip.gateway, ip.prefix = f"d{i}.{k}.ip", f"{base}.{k + 1}", f"{base}.{2 - k}", 30
            d.bgp.router_id = f"{base}.{k + 1}"
            itf = d.bgp.ipv4_interfaces.add()
            itf.ipv4_name = f"d{i}.{k}.ip"
            peer = itf.peers.add()
            peer.name, peer.peer_address, peer.as_type, peer.as_number = f"d{i}.{k}.bgp", f"{base}.{2 - k}", "ebgp", 64512 + 2 * i + k
            r = peer.v4_routes.add()
            r.name = f"d{i}.{k}.r"
            r.addresses.add(address=f"{20 + 10 * k}.{i % 256}.0.0", prefix=32 if routes > 256 else 24, count=routes, step=1)
    return cfg


def metrics(api):  # type: ignore[no-untyped-def]
    req = api.metrics_request()
    req.bgpv4.peer_names = []
    return api.get_metrics(req).bgpv4_metrics


def withdraw_and_advertise(api, routes: int) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """Device d0.0 withdraws its range, then advertises it again: the time `set_control_state`
    took, and until d0.1 had received none of it (then all of it)."""
    out = {}
    for state, want in (("withdraw", 0), ("advertise", routes)):
        t0 = time.monotonic()
        cs = api.control_state()
        cs.protocol.route.state = state
        cs.protocol.route.names = ["d0.0.r"]
        api.set_control_state(cs)
        t1 = time.monotonic()
        while next(x.routes_received for x in metrics(api) if x.name == "d0.1.bgp") != want:
            assert time.monotonic() - t0 < 300, f"{state}: d0.1 did not reach {want} routes within 300 s"
            time.sleep(0.1)
        out[f"{state}_control_ms"] = round((t1 - t0) * 1e3, 1)
        out[f"{state}_until_peer_ms"] = round((time.monotonic() - t0) * 1e3, 1)
    return out


def pss_kb(server_pid: int) -> list[int]:
    out = []
    for pidfile in Path("/run/gapless-frr").glob(f"{server_pid}-*/bgpd.pid"):
        rollup = Path(f"/proc/{pidfile.read_text().strip()}/smaps_rollup").read_text()
        out += [int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, nargs="*", default=[1, 10, 100])
    ap.add_argument("--routes", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    out = REPO / "bench" / "results" / f"otg-bgp-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    lines = []

    def emit(row: dict) -> None:  # type: ignore[type-arg]
        print(json.dumps(row), flush=True)
        lines.append(json.dumps(row))
        out.write_text("\n".join(lines) + "\n")

    with serving(NS) as (api, srv):
        for pairs, routes in [(p, 1) for p in args.pairs] + [(1, args.routes)]:
            for r in range(args.rounds if routes == 1 else 1):
                t0 = time.monotonic()
                api.set_config(config(api, pairs, routes))
                cs = api.control_state()
                cs.protocol.all.state = "start"
                api.set_control_state(cs)
                t1 = time.monotonic()
                while True:
                    m = metrics(api)
                    if len(m) == 2 * pairs and all(x.session_state == "up" for x in m):
                        break
                    assert time.monotonic() - t0 < 300, "sessions not up within 300 s"
                    time.sleep(0.05)
                t2 = time.monotonic()
                while not all((x.routes_received or 0) >= routes for x in metrics(api)):
                    assert time.monotonic() - t0 < 600, "routes not received within 600 s"
                    time.sleep(0.1)
                t3 = time.monotonic()
                pss = pss_kb(srv.pid)
                row = {"pairs": pairs, "routes_per_peer": routes, "round": r, "set_config_and_start_ms": round((t1 - t0) * 1e3, 1),
                       "all_established_ms": round((t2 - t0) * 1e3, 1), "all_routes_received_ms": round((t3 - t0) * 1e3, 1),
                       "bgpd_pss_kb_max": max(pss, default=0), "bgpd_pss_kb_mean": round(sum(pss) / max(len(pss), 1))}
                if routes > 1:
                    row.update(withdraw_and_advertise(api, routes))
                emit(row)
                api.set_config(api.config())
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
