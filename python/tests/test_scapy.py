"""A Scapy packet as a stream's template: headers found, fields by name, checksums right."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import rdpcap

import gapless
from conftest import have


def valid(pkt: object) -> bool:
    """Scapy recomputes the checksums of a copy with them cleared; equal means valid."""
    fresh = Ether(bytes(pkt))
    for layer in (IP, UDP, TCP):
        if layer in fresh:
            del fresh[layer].chksum
    return bytes(Ether(bytes(fresh))) == bytes(pkt)


def test_a_scapy_template_with_a_field_op_on_the_ip_source(tmp_path: Path) -> None:
    pkt = Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=17, tos=0x28) / UDP(sport=4000, dport=53) / Raw(b"hello gapless")
    prof = {
        "seed": 1,
        "stream": [
            {
                "name": "scapy",
                "template": pkt,
                "field": [{"field": "ip_src", "op": "inc", "from": "10.1.0.1", "to": "10.1.0.50"}],
                "timing": {"rate_pps": 10_000, "count": 120},
            }
        ],
    }
    res = gapless.run(prof, out=tmp_path / "s.pcap")
    assert res["sent_frames"] == 120
    frames = rdpcap(str(tmp_path / "s.pcap"))
    assert len(frames) == 120, f"expected 120 frames; got {len(frames)}"
    for i, f in enumerate(frames):
        assert valid(f), f"frame {i}: expected valid IPv4 and UDP checksums"
        assert f[IP].src == f"10.1.0.{i % 50 + 1}", f"frame {i}: expected source 10.1.0.{i % 50 + 1}; got {f[IP].src}"
        assert (f[IP].dst, f[IP].ttl, f[IP].tos, f[UDP].sport, f[UDP].dport) == ("10.2.0.2", 17, 0x28, 4000, 53)
        assert (f[Ether].src, f[Ether].dst) == ("02:00:00:00:00:0a", "02:00:00:00:00:0b")
        assert bytes(f[UDP].payload).startswith(b"hello gapless"), bytes(f[UDP].payload)[:20]
    # The frame, its 16-byte signature after it, and the FCS: 14+20+8+13+16 = 71 (+4 = 75 B).
    assert len(frames[0]) == 71, f"expected 71 B frames; got {len(frames[0])}"
    # tshark agrees about every checksum.
    out = subprocess.run(
        [have("tshark"), "-r", str(tmp_path / "s.pcap"), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
         "-Y", "ip.checksum.status != 1 || udp.checksum.status != 1", "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "", f"expected tshark to find every checksum good; got frames {out.stdout.split()}"


def test_bytes_and_tcp_templates_and_what_cannot_be_a_template(tmp_path: Path) -> None:
    tcp = bytes(Ether() / IP(src="1.1.1.1", dst="2.2.2.2") / TCP(sport=1, dport=80, flags="PA", seq=99))
    res = gapless.run({"stream": [{"template": tcp, "size": 128, "timing": {"rate_pps": 1000, "count": 5}}]}, out=tmp_path / "t.pcap")
    frames = rdpcap(str(tmp_path / "t.pcap"))
    assert res["sent_frames"] == 5 and all(len(f) == 124 and valid(f) for f in frames)
    assert str(frames[0][TCP].flags) == "PA" and frames[0][TCP].seq == 99
    try:
        gapless.Profile({"stream": [{"template": bytes(Ether() / IP(options=[b"\x01" * 4]) / UDP()), "timing": {"rate_pps": 1, "count": 1}}]}).check()
    except gapless.ProfileError as e:
        assert e.path == "stream[0].template.frame" and "IPv4 options" in str(e), str(e)
    else:
        raise AssertionError("expected a ProfileError for IPv4 options")
