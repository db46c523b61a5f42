"""RFC 2889 §5.5 congestion control against switches built here, the way a user points it
at a real one (`[dut]`, not the reference bridge, which is refused: its veths have no
shared buffer). Four hosts A, B, C, D around a Linux bridge whose ports each forward at
most MOL frames/s (a tbf on the bridge's egress to C and to D). A sends MOL/2 to C and
MOL/2 to D, B sends MOL to C: C is congested at 150 %, D is not.

- **Egress queues** (one bridge): only C loses, a third of what it was sent; D loses
  nothing, so no head-of-line blocking.
- **A shared uplink** (A and B on an access bridge whose uplink to the bridge of C and D
  also forwards at most MOL): the overload towards C fills the uplink's one queue, and
  frames to D are lost with it (about half, the departures being Poisson): head-of-line
  blocking.

On veths nothing pauses a sender, so back pressure is never seen here (its judgement from
frames the sending device refused is unit-tested in gapless-core)."""

from __future__ import annotations

import subprocess
from typing import Any, Dict, Iterator, List

import pytest

import gapless
from conftest import gapless_cli, require_root

MOL = 5000
HOSTS = "abcd"
SW = "glcc-sw"
# A 64 B frame is 60 bytes in the kernel (no FCS): the shaper's rate is MOL of those.
RATE = f"{MOL * 60 * 8}bit"
CPU = max(1, len(__import__("os").sched_getaffinity(0))) - 1


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def shape(dev: str) -> None:
    """At most MOL frames/s out of `dev`, with a bucket of 50 frames and a queue of 150."""
    subprocess.run(["tc", "-n", SW, "qdisc", "add", "dev", dev, "root", "tbf", "rate", RATE,
                    "burst", "3028", "limit", "9000"], check=True, capture_output=True, text=True)


def bridge(name: str) -> None:
    ip("-n", SW, "link", "add", name, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    ip("-n", SW, "link", "set", name, "up")


def down() -> None:
    for ns in [f"glcc-{h}" for h in HOSTS] + [SW]:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def up(shared_uplink: bool) -> None:
    """The switch: C's and D's ports shaped; A and B on the same bridge, or on an access
    bridge whose uplink is shaped too."""
    down()
    ip("netns", "add", SW)
    bridge("br0")
    access = "br0"
    if shared_uplink:
        bridge("br1")
        access = "br1"
        ip("-n", SW, "link", "add", "up-in", "type", "veth", "peer", "name", "up-out")
        ip("-n", SW, "link", "set", "up-in", "master", "br1", "up")
        ip("-n", SW, "link", "set", "up-out", "master", "br0", "up")
        shape("up-in")
    for i, h in enumerate(HOSTS):
        ns = f"glcc-{h}"
        ip("netns", "add", ns)
        ip("-n", SW, "link", "add", f"sw-{h}", "type", "veth", "peer", "name", f"glcc-{h}0", "netns", ns)
        ip("-n", ns, "link", "set", f"glcc-{h}0", "address", f"02:cc:00:00:00:0{i + 1}", "up")
        ip("-n", ns, "addr", "add", f"198.18.60.{i + 1}/24", "dev", f"glcc-{h}0")
        ip("-n", SW, "link", "set", f"sw-{h}", "master", access if h in "ab" else "br0", "up")
        # The switch forwards on a CPU of its own, as the testbed's devices do: else the
        # bridge and its shaper run inside the sender's system calls and slow it instead
        # of dropping.
        subprocess.run(["ip", "netns", "exec", SW, "sh", "-c",
                        f"echo {1 << CPU:x} > /sys/class/net/sw-{h}/queues/rx-0/rps_cpus"], check=True)
    shape("sw-c")
    shape("sw-d")


def spec(kind: str) -> Dict[str, Any]:
    return {
        "name": f"rfc2889-congestion-{kind}",
        "method": "rfc2889",
        "ports": [{"iface": f"glcc-{h}0", "netns": f"glcc-{h}"} for h in HOSTS],
        "dut": {"kind": f"Linux bridge, {kind}, ports shaped to {MOL} frames/s (a test's)"},
        "trial": {"warmup_s": 0.3, "settle_s": 0.2, "duration_s": 2, "late_limit": 0.02},
        "rfc2889": {"tests": ["congestion_control"], "congestion_load_pps": MOL},
        # Poisson departures: with constant rates, which frames a full queue drops depends on
        # how the senders' phases line up (one run dropped 99.9 % of A→C and 0.1 % of A→D).
        "profile": {"stream": [{"name": "m", "size": 64, "timing": {"rate_pps": 1000, "pattern": "poisson"}}]},
    }


@pytest.fixture(scope="module", params=["egress queues", "shared uplink"])
def result(request: pytest.FixtureRequest) -> Iterator[Dict[str, Any]]:
    require_root()
    up(shared_uplink=request.param == "shared uplink")
    try:
        yield {"kind": request.param, "r": gapless.experiment(spec(request.param))}
    finally:
        down()


def directions(r: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    t = r["trials"][r["rfc2889"]["congestion_control"]["trials"][-1]]
    return {d["direction"]: d for d in t["directions"]}


def test_the_congestion_trial_sends_the_three_directions_at_their_loads(result: Dict[str, Any]) -> None:
    r = result["r"]
    c = r["rfc2889"]["congestion_control"]
    t = r["trials"][c["trials"][-1]]
    loads = {(x["from"], x["to"]): x["pps"] for x in t["plan"]["loads"]}
    assert loads == {(0, 2): MOL / 2, (0, 3): MOL / 2, (1, 2): MOL}, f"expected A→C, A→D at MOL/2 and B→C at MOL; got {loads}"
    d = directions(r)
    assert sorted(d) == ["glcc-a0→glcc-c0", "glcc-a0→glcc-d0", "glcc-b0→glcc-c0"], f"expected only the three directions; got {sorted(d)}"
    for name, x in d.items():
        want = loads[(0 if "-a0→" in name else 1, 2 if name.endswith("c0") else 3)] * t["plan"]["duration_s"]
        # Poisson departures: the count's standard deviation is its square root.
        assert abs(x["sent"] - want) <= 4 * want ** 0.5, f"{name}: expected {want:.0f} ± {4 * want ** 0.5:.0f} frames sent; got {x}"
        assert x.get("misdelivered", 0) == 0, f"{name}: expected C and D learned before the trial (no flooding); got {x}"
    assert c["procedure"].startswith("RFC 2889 §5.5"), c["procedure"]
    assert c["intended_pps"] == [MOL, MOL], c


def judged(c: Dict[str, Any], t: Dict[str, Any]) -> bool:
    """Whether the trial could be judged; when not, the verdict says the sender fell behind,
    and the result agrees."""
    if c["head_of_line_blocking"] is None:
        assert not t["valid"] and "fell behind" in c["not_judged"], f"expected an invalid trial's reason; got {c}"
        assert c["back_pressure"] is None, c
        return False
    assert t["valid"] and "not_judged" not in c, c
    return True


def test_congestion_is_judged_by_the_switch_built(result: Dict[str, Any]) -> None:
    r = result["r"]
    c = r["rfc2889"]["congestion_control"]
    t = r["trials"][c["trials"][-1]]
    if not judged(c, t):
        return
    assert c["back_pressure"] is False, f"veths pause nothing: expected no back pressure; got {c}"
    d = directions(r)
    if result["kind"] == "egress queues":
        assert c["head_of_line_blocking"] is False, f"expected no head-of-line blocking with one queue per port; got {c}"
        assert c["uncongested_loss_pct"] == 0.0, f"expected nothing lost to D; got {d}"
        assert 25.0 <= c["congested_loss_pct"] <= 40.0, f"expected about a third lost to C (33.3 %); got {c['congested_loss_pct']}"
        assert abs(c["congested_rate_pps"] - MOL) <= MOL * 0.1, f"expected C to receive about {MOL}/s; got {c['congested_rate_pps']}"
        assert abs(c["uncongested_rate_pps"] - MOL / 2) <= MOL * 0.05, f"expected D to receive {MOL / 2}/s; got {c}"
    else:
        assert c["head_of_line_blocking"] is True, f"expected the shared uplink to lose frames to D; got {c}"
        assert c["uncongested_loss_pct"] >= 20.0, f"expected about half lost to D through the uplink; got {d}"


def test_congestion_control_without_its_keys_is_refused() -> None:
    """Checked before any trial: no ports need to exist for these."""
    s = spec("x")
    s["rfc2889"].pop("congestion_load_pps")
    heard: List[Any] = []
    with pytest.raises(gapless.Error) as e:
        gapless.experiment(s, on_trial=heard.append)
    assert "needs congestion_load_pps" in str(e.value), f"expected the missing key named; got {e.value}"
    s = spec("x")
    s["pairs"] = [{"from": 0, "to": 2}]
    with pytest.raises(gapless.Error) as e:
        gapless.experiment(s, on_trial=heard.append)
    assert "from port 0 to port 3, which pairs leaves out" in str(e.value), f"got {e.value}"
    assert heard == [], f"expected no trial; got {heard}"


def test_congestion_control_on_the_reference_bridge_is_refused_for_its_missing_shared_buffer() -> None:
    """Four ends around `gapless testbed up --dut bridge`: refused before any trial."""
    require_root()
    gapless_cli("testbed", "up", "--name", "glcb", "--dut", "bridge", "--ports", "4")
    try:
        s = spec("reference")
        s.pop("dut")
        s["ports"] = [{"iface": f"glcb-{i}", "netns": f"glcb-{n}"}
                      for i, n in [("tx0", "tx"), ("rx0", "rx"), ("p2", "p2"), ("p3", "p3")]]
        heard: List[Any] = []
        with pytest.raises(gapless.Error) as e:
            gapless.experiment(s, on_trial=heard.append)
        assert "no shared buffer" in str(e.value), f"expected the reason named; got {e.value}"
        assert heard == [], f"expected no trial; got {heard}"
    finally:
        gapless_cli("testbed", "down", "--name", "glcb")
