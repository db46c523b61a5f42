"""A live, metered run on the testbed, printing a snapshot twice a second.

    gapless testbed up
    python examples/python/live_testbed.py [TESTBED_NAME]
"""

from __future__ import annotations

import sys

import gapless

PROFILE = {
    "stream": [
        {"name": "a", "size": 64, "timing": {"rate_pps": 50_000, "duration_s": 3}},
        {"name": "b", "size": 512, "timing": {"pattern": "poisson", "rate_pps": 10_000, "duration_s": 3}},
    ]
}


def main() -> None:
    tb = sys.argv[1] if len(sys.argv) > 1 else "gl"
    with gapless.start(PROFILE, iface=f"{tb}-tx0", netns=f"{tb}-tx", rx=f"{tb}-rx0", rx_netns=f"{tb}-rx") as run:
        for snap in run.live(interval=0.5):
            total = snap["total"]
            rx = snap["streams"]["a"]["rx"] or {}
            print(f"{snap['elapsed_s']:5.1f} s  tx {total['tx']['rate_pps']:9.0f} pps  a: lost {rx.get('lost', '-')}")
    res = run.result()
    print(gapless.summary(res))


if __name__ == "__main__":
    main()
