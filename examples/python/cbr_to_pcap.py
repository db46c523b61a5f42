"""A CBR run written to a pcap of the scheduled departures, then metered offline.

    python examples/python/cbr_to_pcap.py [OUT.pcap]
"""

from __future__ import annotations

import sys

import gapless


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "cbr.pcap"
    prof = gapless.Profile.from_toml("examples/cbr.toml")
    res = gapless.run(prof, out=out, duration=0.5)
    print(f"{res['sent_frames']} frames to {out}")
    rep = gapless.analyze(out, profile=prof)
    for s in rep["streams"]:
        ia = s["interarrival"] or {}
        print(f"{s['name']}: {s['rx_frames']} frames, mean gap {ia.get('mean_ns')} ns")


if __name__ == "__main__":
    main()
