"""IS-IS route ranges on OTG devices through FRR, as ixia-c users wire them: two devices on two
veths in one namespace, L1/L2 point-to-point with 1 s hellos, each announcing R /32s; the time
from `set_config` until the first of the other's prefixes, and all of them at both levels,
are in r1's LSP database (`isis_lsps`). Snappi over HTTPS to a `gapless serve` it starts.

    sudo .venv/bin/python bench/otg_isis.py [--routes 2 1000 10000]

Prints one JSON line per size and writes them to bench/results/otg-isis-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from otg_devices import REPO, serving

NS = "glisisbench"


def config(api, n: int):  # type: ignore[no-untyped-def]
    cfg = api.config()
    cfg.ports.port(name="p1", location=f"{NS}/veth-a").port(name="p2", location=f"{NS}/veth-z")
    for k in (1, 2):
        d = cfg.devices.device(name=f"d{k}")[-1]
        e = d.ethernets.add()
        e.name, e.mac, e.connection.port_name = f"d{k}.eth", f"02:67:6c:15:00:0{k}", f"p{k}"
        ip = e.ipv4_addresses.add()
        ip.name, ip.prefix, ip.address, ip.gateway = f"d{k}.ip4", 24, f"1.1.1.{k}", f"1.1.1.{3 - k}"
        d.isis.name, d.isis.system_id = f"r{k}", f"64000000000{k}"
        itf = d.isis.interfaces.add(eth_name=f"d{k}.eth", name=f"d{k}.isis", network_type="point_to_point",
                                    level_type="level_1_2", metric=10)
        for lvl in (itf.l1_settings, itf.l2_settings):
            lvl.hello_interval, lvl.dead_interval = 1, 3
        r4 = d.isis.v4_routes.add(name=f"r{k}.v4", link_metric=20)
        r4.addresses.add(address=f"{10 * k}.0.0.0", prefix=32, count=n, step=1)
    return cfg


def prefixes_at_r1(api) -> int:  # type: ignore[no-untyped-def]
    req = api.states_request()
    req.isis_lsps.isis_router_names = ["r1"]
    lsps = api.get_states(req).isis_lsps[0].lsps
    return sum(len(t.prefixes) for x in lsps for t in x.tlvs.extended_ipv4_reachability_tlvs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--routes", type=int, nargs="*", default=[2, 1000, 10000])
    args = ap.parse_args()
    out = REPO / "bench" / "results" / f"otg-isis-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    lines = []
    with serving(NS) as (api, _):
        for n in args.routes:
            t0 = time.monotonic()
            api.set_config(config(api, n))
            t1 = time.monotonic()
            first = None
            # r2's prefixes at both levels (an L1 and an L2 LSP each).
            while (got := prefixes_at_r1(api)) < 2 * n:
                if got and first is None:
                    first = time.monotonic()
                assert time.monotonic() - t0 < 300, f"{n} routes: r1 had {got} of {2 * n} prefix entries after 300 s"
                time.sleep(0.2)
            t2 = time.monotonic()
            row = {"routes_per_router": n, "set_config_ms": round((t1 - t0) * 1e3, 1),
                   "first_prefixes_ms": round(((first or t2) - t0) * 1e3, 1), "all_at_peer_ms": round((t2 - t0) * 1e3, 1)}
            print(json.dumps(row), flush=True)
            lines.append(json.dumps(row))
            out.write_text("\n".join(lines) + "\n")
            api.set_config(api.config())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
