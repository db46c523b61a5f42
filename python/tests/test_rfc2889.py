"""RFC 2889 against the reference bridge (`gapless testbed up --dut bridge --ports 3
--fdb-max-learned 8`): the address caching capacity found equals the bridge's bound (the
test addresses found are the bound less the test port's own entry), the address learning
rate is a number with its procedure, and in a full mesh of three ports every direction is
delivered to its own port. The bound is set over rtnetlink (IFLA_BR_FDB_MAX_LEARNED) and
read back from the kernel here. Bad input is refused before any trial."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import gapless
from conftest import gapless_cli, require_root

BED = "gl89"
LIMIT = 8
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rfc2889_bridge.toml"


@pytest.fixture(scope="module")
def bridge() -> Iterator[str]:
    require_root()
    gapless_cli("testbed", "up", "--name", BED, "--dut", "bridge", "--ports", "3", "--fdb-max-learned", str(LIMIT))
    try:
        yield BED
    finally:
        gapless_cli("testbed", "down", "--name", BED)


def spec(bed: str) -> Dict[str, Any]:
    """The example `examples/rfc2889_bridge.toml` on `bed`, searched more coarsely for CI's
    time: up to 64 addresses, learning rates to 50,000 frames/s, 5 % resolution."""
    s = tomllib.loads(EXAMPLE.read_text().replace("gl-", f"{bed}-"))
    s["rfc2889"].update(max_addresses=64, max_rate_pps=12_000, learning_max_rate_pps=50_000, resolution_pct=5)
    s["trial"]["late_limit"] = 0.02
    return s


@pytest.fixture(scope="module")
def result(bridge: str) -> Dict[str, Any]:
    return gapless.experiment(spec(bridge))


def learned_entries(bed: str) -> int:
    """The bridge's learned (dynamic) entries now, as `bridge fdb show` lists them."""
    out = subprocess.run(["bridge", "-n", f"{bed}-dut", "-j", "fdb", "show", "br", "br0"],
                         check=True, capture_output=True, text=True).stdout
    return sum(1 for e in json.loads(out) if "permanent" not in e.get("state", "") and not e.get("flags"))


def test_the_bound_is_set_on_the_bridge(bridge: str) -> None:
    """`testbed up` again finds it up as asked: the bound it reads back from the kernel
    (RTM_GETLINK) is the one set."""
    out = gapless_cli("testbed", "up", "--name", bridge, "--dut", "bridge", "--ports", "3",
                      "--fdb-max-learned", str(LIMIT)).stdout
    assert "was already up" in out and f"at most {LIMIT} learned MAC addresses" in out, out


def test_address_caching_capacity_is_the_bound(bridge: str, result: Dict[str, Any]) -> None:
    c = result["rfc2889"]["address_caching"]
    assert c["capacity"] == LIMIT, f"expected the capacity {LIMIT} (the bridge's fdb_max_learned); got {c}"
    assert c["addresses"] == LIMIT - c["own_entries"] == LIMIT - 1, c
    assert c["procedure"].startswith("RFC 2889 §5.7") and "flushed" in c["procedure"], c["procedure"]
    trials = {t["index"]: t for t in result["trials"]}
    for i in c["trials"]:
        t = trials[i]
        n = t["plan"]["learning"]["addresses"]
        flooded = t["flooded"]
        if n <= LIMIT - 1:
            assert flooded == 0 and t["received"] == t["sent"] == n, f"expected {n} addresses learned; got {t}"
        else:
            assert flooded == n - (LIMIT - 1), f"expected the {n - LIMIT + 1} addresses past the bound flooded; got {t}"
    assert learned_entries(bridge) <= LIMIT, "the bridge learned more than its bound"


def test_address_learning_rate_is_a_number_with_its_procedure(result: Dict[str, Any]) -> None:
    lr = result["rfc2889"]["address_learning_rate"]
    assert lr["addresses"] == LIMIT - 1, lr
    assert lr["rate_pps"] is not None and 100 <= lr["rate_pps"] <= 50_000, lr
    assert lr["procedure"].startswith("RFC 2889 §5.8"), lr["procedure"]
    s = gapless.summary(result)
    assert "address caching capacity: 8 addresses (7 test addresses + 1" in s, s
    assert "address learning rate (7 addresses)" in s and "procedure: RFC 2889 §5.1" in s, s


def test_a_full_mesh_delivers_every_direction_to_its_own_port(result: Dict[str, Any]) -> None:
    m = result["rfc2889"]["fully_meshed"]
    assert m["ports"] == 3 and m["procedure"].startswith("RFC 2889 §5.1"), m
    assert m["throughput_pps"] == pytest.approx(12_000) and m["loss_pct"] == 0, m
    assert m["forwarding_rate_pps"] == pytest.approx(12_000, rel=0.01), m
    t = result["trials"][m["trials"][0]]
    assert len(t["directions"]) == 6, t["directions"]
    for d in t["directions"]:
        assert d["sent"] == d["received"] and abs(d["sent"] - 2000) <= 2, d
        assert d.get("misdelivered", 0) == 0, f"expected no flooding once the ports were learned; got {d}"


def test_flooded_frames_are_not_delivered(bridge: str) -> None:
    """A port that sends to the broadcast address: the bridge floods its frames to both
    other ports; each direction counts only what reached its own port, and the rest is
    reported as misdelivered."""
    s = spec(bridge)
    s["method"], s["pairs"] = "repeat", "full-mesh"
    s.pop("rfc2889")
    s["ports"][0]["next_hop_mac"] = "ff:ff:ff:ff:ff:ff"
    r = gapless.experiment(s)
    t = r["trials"][0]
    flooded = [d for d in t["directions"] if d["direction"].startswith(f"{bridge}-tx0")]
    for d in flooded:
        assert d["received"] == d["sent"] and d["misdelivered"] == d["sent"], f"expected each frame also at the other port; got {d}"
    assert any("reached another port than their own" in w for w in t["warnings"]), t["warnings"]


@pytest.mark.parametrize("change,want", [
    (lambda s: s["ports"].insert(0, s["ports"].pop(2)), "needs a bridge"),
    (lambda s: s["rfc2889"].update(tests=["congestion_control"]), "congestion_control needs four (0 to 2)"),
    (lambda s: s["rfc2889"].update(monitor_port=1), "three different ports"),
    (lambda s: s["ports"].pop(), "rfc2889.monitor_port = 2: there are 2 ports"),
    (lambda s: s["rfc2889"].pop("max_rate_pps"), "fully_meshed needs max_rate_pps"),
], ids=["no-bridge", "congestion-control", "same-port", "two-ports", "no-max-rate"])
def test_bad_input_is_refused_before_any_trial(bridge: str, change: Any, want: str) -> None:
    s = spec(bridge)
    change(s)
    heard: List[Dict[str, Any]] = []
    with pytest.raises(gapless.Error) as e:
        gapless.experiment(s, on_trial=heard.append)
    assert want in str(e.value), f"expected {want!r} in the error; got {e.value}"
    assert heard == [], f"expected no trial run; got {len(heard)}"
