"""Clocks across hosts (issue 28's first part): an agent (`gapless serve`) in a network
namespace of its own, reached over a management veth on 198.18.x addresses with its token
and its pinned certificate, and `gapless clock` in the root namespace measuring its clock's
offset. The namespaces share one clock, so the agent shifts its readings with the documented
test option --test-clock-offset-ns; the offset measured must hold that shift within the bound
it reports, and the doubt must be named when the kernel says the clock is not synchronised."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import cli, free_port, require_root

NS, HOST, PEER = "glck-h1", "198.18.100.1", "198.18.100.2"
SHIFT = 40_000_000  # ns: the agent's clock as if 40 ms ahead


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture()
def agent(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """An agent in namespace h1 on a management veth: (OTG URL, token file, its certificate)."""
    require_root()
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "link", "del", "glck-m0"], capture_output=True)
    ip("netns", "add", NS)
    proc = None
    try:
        ip("link", "add", "glck-m0", "type", "veth", "peer", "name", "glck-m1", "netns", NS)
        ip("addr", "add", f"{HOST}/30", "dev", "glck-m0")
        ip("link", "set", "glck-m0", "up")
        ip("-n", NS, "addr", "add", f"{PEER}/30", "dev", "glck-m1")
        ip("-n", NS, "link", "set", "glck-m1", "up")
        ip("-n", NS, "link", "set", "lo", "up")
        token = tmp_path / "token"
        token.write_text("an-agent-token-of-some-length\n")
        db = tmp_path / "agent.db"
        otg = free_port()
        proc = subprocess.Popen(["ip", "netns", "exec", NS, cli(), "serve", "--listen", f"{PEER}:{free_port()}",
                                 "--otg-listen", f"{PEER}:{otg}", "--no-otg-grpc", "--no-gnmi", "--token-file", str(token),
                                 "--db", str(db), "--test-clock-offset-ns", str(SHIFT)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cert = tmp_path / "agent-otg-cert.pem"
        t0 = time.monotonic()
        while not cert.exists() or subprocess.run(["ip", "netns", "exec", NS, "ss", "-ltn", f"sport = :{otg}"],
                                                  capture_output=True, text=True).stdout.count("LISTEN") == 0:
            assert proc.poll() is None, f"expected the agent to start; it exited: {proc.stdout.read() if proc.stdout else ''}"
            assert time.monotonic() - t0 < 20, "expected the agent to listen within 20 s"
            time.sleep(0.1)
        yield f"https://{PEER}:{otg}", token, cert
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        subprocess.run(["ip", "link", "del", "glck-m0"], capture_output=True)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def clock(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cli(), "clock", *args], capture_output=True, text=True, timeout=120)


def test_the_offset_of_an_agents_clock_is_measured_within_its_bound_and_doubt_is_named(agent: tuple[str, Path, Path]) -> None:
    url, token, cert = agent
    p = clock(url, "--token-file", str(token), "--agent-cert", str(cert), "-n", "32", "--json")
    assert p.returncode == 0, f"expected gapless clock to measure; got {p.returncode}: {p.stderr}"
    r = json.loads(p.stdout)
    o = r["offset"]
    assert o["exchanges"] == 32 and o["rtt_ns"] >= 0, o
    err = abs(o["offset_ns"] - SHIFT)
    assert err <= o["bound_ns"], f"expected the {SHIFT} ns shift within the bound; got {o['offset_ns']} ± {o['bound_ns']} ns"
    assert o["bound_ns"] < SHIFT // 4, f"expected a bound well under the shift on a veth; got ±{o['bound_ns']} ns"
    assert r["test_clock_offset_ns"] == SHIFT
    # Whatever this machine's clock is, the doubt follows the kernel's own flag on each side.
    for side, state in (("this host", r["local"]), (url, r["remote"])):
        named = any(d.startswith(side) and "STA_UNSYNC" in d for d in r["untrusted"])
        assert named == state["unsynchronised"], f"expected {side}'s doubt named exactly when its kernel says unsynchronised; got {r['untrusted']} for {state}"


def test_a_wrong_token_or_an_unpinned_certificate_is_refused_with_its_fix(agent: tuple[str, Path, Path], tmp_path: Path) -> None:
    url, token, cert = agent
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-agents-token-at-all\n")
    p = clock(url, "--token-file", str(wrong), "--agent-cert", str(cert), "-n", "2")
    assert p.returncode != 0 and "401" in p.stderr and "Fix" in p.stderr, f"expected 401 with its fix; got {p.returncode}: {p.stderr}"
    p = clock(url, "--token-file", str(token), "-n", "2")
    assert p.returncode != 0 and "--agent-cert" in p.stderr, f"expected the self-signed certificate refused unless pinned; got {p.returncode}: {p.stderr}"
    other = tmp_path / "empty.pem"
    other.write_text("")
    p = clock(url, "--token-file", str(token), "--agent-cert", str(other), "-n", "2")
    assert p.returncode != 0 and "no certificate" in p.stderr, f"expected an empty --agent-cert refused; got {p.stderr}"
