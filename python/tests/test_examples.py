"""The examples in examples/python run and say what they did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, Testbed


def example(name: str, *args: str) -> str:
    p = subprocess.run([sys.executable, str(REPO / "examples" / "python" / name), *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"expected {name} to exit 0; got {p.returncode}:\n{p.stdout}{p.stderr}"
    return p.stdout


def test_the_cbr_example_writes_a_pcap_and_meters_it(tmp_path: Path) -> None:
    out = example("cbr_to_pcap.py", str(tmp_path / "cbr.pcap"))
    assert (tmp_path / "cbr.pcap").stat().st_size > 0
    assert "frames to" in out and "mean gap" in out, out


def test_the_scapy_example_prints_its_check_and_sends(tmp_path: Path) -> None:
    out = example("scapy_template.py", str(tmp_path / "s.pcap"))
    # 14 + 20 + 8 + 7 ("gapless") + 16 (signature) + 4 (FCS) = 69 B.
    assert "1000 frames to" in out and "1 field op(s)" in out and "frames 69..69 B" in out, out


def test_the_live_example_prints_snapshots_and_the_summary(testbed: Testbed) -> None:
    out = example("live_testbed.py", testbed.name)
    lines = [l for l in out.splitlines() if " pps " in l]
    assert len(lines) >= 4, f"expected a snapshot line every 0.5 s of a 3 s run; got {lines}"
    assert "verdict" in out.lower() or "held" in out.lower(), out
