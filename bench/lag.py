"""What a LAG costs the send loop (issue 60): the highest rate one send loop reaches on one
port against the same flow on a static LAG of two members (each frame hashed, copied to its
member's buffer, sent on its socket: DESIGN-NOTES 87). Interleaved per round, so the noise of
this machine falls on both alike. Two veth pairs in a namespace the script makes; snappi over
HTTPS to a `gapless serve` it starts (target/ci/gapless when built).

    sudo .venv/bin/python bench/lag.py [--rounds 5] [--frames 400000]

Each flow asks for 5 Mframes/s of 64-byte frames, more than the loop can send here, so the
rate it reaches (`frames_tx_rate` once it stopped: frames over its run time) is the loop's
ceiling. Prints one JSON line per run and writes them to bench/results/lag-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from otg_devices import REPO, serving

NS = "glbenchlag"


def config(api: Any, frames: int, lags: bool) -> Any:
    """Ports a1, a2, b1, b2, and flow `port` a1 -> b1; or (`lags`) a1..a2 as static LAG la,
    b1..b2 as lb, and flow `lag` la -> lb (a member is no flow's own port)."""
    cfg = api.config()
    for side in ("a", "b"):
        for k in (1, 2):
            cfg.ports.port(name=f"{side}{k}", location=f"{NS}/{side}{k}")
        if not lags:
            continue
        lag = cfg.lags.lag(name=f"l{side}")[-1]
        lag.protocol.static.lag_id = 1 + "ab".index(side)
        for k in (1, 2):
            m = lag.ports.port(port_name=f"{side}{k}")[-1]
            m.ethernet.name, m.ethernet.mac = f"{side}{k}.eth", f"02:0{1 + 'ab'.index(side)}:00:00:00:0{k}"
    for name, tx, rx in [("lag", "la", "lb") if lags else ("port", "a1", "b1")]:
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = tx, [rx]
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 64, 5_000_000, frames
        eth, ip, udp = f.packet.ethernet().ipv4().udp()
        eth.src.value, eth.dst.value = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
        ip.src.value, ip.dst.value = "10.0.0.1", "10.0.0.2"
        udp.src_port.increment.start, udp.src_port.increment.step, udp.src_port.increment.count = 1024, 1, 256
    return cfg


def run(api: Any, name: str) -> dict[str, Any]:
    cs = api.control_state()
    cs.traffic.flow_transmit.state, cs.traffic.flow_transmit.flow_names = "start", [name]
    api.set_control_state(cs)
    req = api.metrics_request()
    req.flow.flow_names = [name]
    t0 = time.monotonic()
    while (m := api.get_metrics(req).flow_metrics[0]).transmit != "stopped":
        assert time.monotonic() - t0 < 120, f"flow {name} did not stop within 120 s"
        time.sleep(0.1)
    return {"flow": name, "frames_tx": m.frames_tx, "frames_rx": m.frames_rx, "tx_pps": round(m.frames_tx_rate)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=400_000)
    args = ap.parse_args()
    out = REPO / "bench" / "results" / f"lag-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    rows: list[dict[str, Any]] = []
    with serving(NS, (("a1", "b1"), ("a2", "b2"))) as (api, _):
        for r in range(args.rounds):
            for name in (("port", "lag") if r % 2 == 0 else ("lag", "port")):
                api.set_config(config(api, args.frames, name == "lag"))
                time.sleep(0.2)  # the LAGs' first tick: their members distribute
                row = {"round": r, **run(api, name)}
                print(json.dumps(row))
                rows.append(row)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ratios = [next(x["tx_pps"] for x in rows if x["round"] == r and x["flow"] == "lag")
              / next(x["tx_pps"] for x in rows if x["round"] == r and x["flow"] == "port") for r in range(args.rounds)]
    print(f"lag / port send rate per round: {[round(x, 3) for x in ratios]}, median {statistics.median(ratios):.3f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
