"""A stream whose packet is built with Scapy, with a field op on the IP source.

    python examples/python/scapy_template.py [OUT.pcap]
"""

from __future__ import annotations

import sys

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

import gapless


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "scapy.pcap"
    pkt = Ether(dst="02:67:6c:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2", ttl=32) / UDP(sport=9, dport=4789) / Raw(b"gapless")
    prof = gapless.Profile(
        {
            "stream": [
                {
                    "name": "scapy",
                    "template": pkt,
                    "field": [{"field": "ip_src", "op": "inc", "from": "10.0.0.1", "to": "10.0.0.254"}],
                    "timing": {"rate_pps": 100_000, "count": 1000},
                }
            ]
        }
    )
    print(prof.check())
    res = gapless.run(prof, out=out)
    print(f"{res['sent_frames']} frames to {out}")


if __name__ == "__main__":
    main()
