"""OTG devices as ixia-c users wire them: how long `set_config` takes with N device pairs (each
device a macvlan in a namespace of its own), how long until every device lists its gateway
as a neighbour with no traffic started, and how long a config without devices takes to
remove them. Two veths in one namespace the script makes; snappi over HTTPS to a
`gapless serve` it starts.

    sudo .venv/bin/python bench/otg_devices.py [--pairs 1 5] [--rounds 5]

Prints one JSON line per round and writes them to bench/results/otg-devices-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
NS = "glbench"


def sh(*a: str) -> None:
    subprocess.run(a, check=True, capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(ns: str, pairs: tuple[tuple[str, str], ...] = (("veth-a", "veth-z"),)
            ) -> Iterator[tuple[Any, subprocess.Popen]]:  # type: ignore[type-arg]
    """Veth `pairs` in namespace `ns` (by default `veth-a` and `veth-z`, ixia-c's wiring), and
    a `gapless serve` (target/ci/gapless when built, else the one on PATH) listening for
    snappi over HTTPS: yields (the snappi api, the server's process); both go at the end."""
    import snappi  # type: ignore[import-untyped]

    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    sh("ip", "netns", "add", ns)
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    for a, z in pairs:
        sh("ip", "-n", ns, "link", "add", a, "type", "veth", "peer", "name", z)
        for d in (a, z):
            sh("ip", "-n", ns, "link", "set", d, "up")
    tmp, otg = Path(tempfile.mkdtemp()), free_port()
    binary = REPO / "target" / "ci" / "gapless"
    srv = subprocess.Popen([str(binary) if binary.exists() else "gapless", "serve", "--listen", f"127.0.0.1:{free_port()}",
                            "--otg-listen", f"127.0.0.1:{otg}", "--otg-grpc-listen", f"127.0.0.1:{free_port()}", "--no-gnmi",
                            "--db", str(tmp / "g.db")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", otg), timeout=1).close()
                break
            except OSError:
                assert srv.poll() is None and time.monotonic() - t0 < 30, "gapless serve did not listen within 30 s"
                time.sleep(0.05)
        yield snappi.api(location=f"https://127.0.0.1:{otg}", verify=False), srv
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def config(api, pairs: int):  # type: ignore[no-untyped-def]
    cfg = api.config()
    cfg.ports.port(name="p1", location=f"{NS}/veth-a").port(name="p2", location=f"{NS}/veth-z")
    for i in range(pairs):
        for k, port in enumerate(("p1", "p2")):
            e = cfg.devices.device(name=f"d{i}.{k}")[-1].ethernets.add()
            e.name, e.mac, e.connection.port_name = f"d{i}.{k}.eth", f"00:00:0b:00:{i:02x}:0{k + 1}", port
            ip = e.ipv4_addresses.add()
            ip.name, ip.address, ip.gateway, ip.prefix = f"d{i}.{k}.ip", f"10.{i}.0.{k + 1}", f"10.{i}.0.{2 - k}", 24
    return cfg


def resolved(api, pairs: int) -> bool:  # type: ignore[no-untyped-def]
    req = api.states_request()
    req.choice = "ipv4_neighbors"
    rows = [r for r in api.get_states(req).ipv4_neighbors if r.link_layer_address]
    return len(rows) >= 2 * pairs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    out = REPO / "bench" / "results" / f"otg-devices-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    with serving(NS) as (api, _):
        lines = []
        for pairs in args.pairs:
            for r in range(args.rounds):
                t0 = time.monotonic()
                api.set_config(config(api, pairs))
                t1 = time.monotonic()
                while not resolved(api, pairs):
                    assert time.monotonic() - t1 < 30, "neighbours not resolved within 30 s"
                    time.sleep(0.005)
                t2 = time.monotonic()
                api.set_config(api.config())
                t3 = time.monotonic()
                row = {"pairs": pairs, "round": r, "set_config_ms": round((t1 - t0) * 1e3, 1),
                       "resolved_after_ms": round((t2 - t1) * 1e3, 1), "teardown_ms": round((t3 - t2) * 1e3, 1)}
                print(json.dumps(row))
                lines.append(json.dumps(row))
        out.write_text("\n".join(lines) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
