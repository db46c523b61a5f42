"""Latency against offered rate through the testbed's reference router, plotted with
matplotlib when it is installed.

    gapless testbed up --dut router --dut-rate 24mbit
    python examples/python/latency_sweep.py [PLOT.png]
"""

from __future__ import annotations

import sys
from typing import List

import gapless

PROFILE = {"stream": [{"name": "s", "size": 64, "timing": {"rate_pps": 1000}}]}
RATES = [10_000, 20_000, 30_000, 40_000, 45_000, 48_000]


def main() -> None:
    res = gapless.sweep(
        PROFILE,
        tx="gl-tx0", tx_netns="gl-tx", rx="gl-rx0", rx_netns="gl-rx",
        trial={"duration_s": 1, "warmup_s": 0.2, "repetitions": 2},
        parameter="rate", values=RATES,
        on_trial=lambda t: print(f"trial {t['index']}: {'valid' if t['valid'] else 'invalid'}"),
    )
    points = res["sweep"][0]["points"]
    p50: List[float] = [p["latency_p50_ns"]["mean"] / 1e3 for p in points]
    p99: List[float] = [p["latency_p99_ns"]["mean"] / 1e3 for p in points]
    for r, a, b in zip(RATES, p50, p99):
        print(f"{r:7d} pps  p50 {a:8.1f} us  p99 {b:8.1f} us")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    plt.plot(RATES, p50, marker="o", label="p50")
    plt.plot(RATES, p99, marker="o", label="p99")
    plt.xlabel("offered rate (frames/s)")
    plt.ylabel("latency (us)")
    plt.legend()
    plt.savefig(sys.argv[1] if len(sys.argv) > 1 else "latency_sweep.png")


if __name__ == "__main__":
    main()
