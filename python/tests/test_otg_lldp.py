"""LLDP behind OTG, native in gapless (an AF_PACKET socket per `lldp[]` entry), as ixia-c's
users script it: two veths in one namespace, snappi over HTTPS and gRPC. Each agent lists the
other as its neighbour with the configured chassis ID, port ID, TTL and system name; the frames
on the wire are read back by Scapy's own LLDP decoder; a neighbour another stack announces
(Scapy) is listed with its optional TLVs and forgotten when it says TTL 0; bad input is refused
with its path."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import Server, tcpdump, warnings_but_testbed_addresses
from test_otg import api, transport  # noqa: F401 (transport: a fixture)
from test_otg_ixia import two_veths

NS, A, Z = "gllldp", "veth-a", "veth-z"
CHASSIS = ("00:00:00:aa:00:01", "00:00:00:aa:00:02")


@pytest.fixture(scope="module")
def wires() -> Iterator[str]:
    with two_veths(NS) as ns:
        yield ns


def lldp_config(a: Any) -> Any:
    """l1 on p1 and l2 on p2, each with its chassis MAC, a local port ID, TTL 60 and a
    system name; advertised every 5 s."""
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    for k in (1, 2):
        l = cfg.lldp.add(name=f"l{k}", hold_time=60, advertisement_interval=5)
        l.connection.port_name = f"p{k}"
        l.chassis_id.mac_address_subtype.value = CHASSIS[k - 1]
        l.port_id.local_subtype = f"port-{k}"
        l.system_name.value = f"tester-{k}"
    return cfg


def neighbors(a: Any, agent: str) -> list[Any]:
    req = a.states_request()
    req.lldp_neighbors.lldp_names = [agent]
    return list(a.get_states(req).lldp_neighbors)


def wait_neighbors(a: Any, agent: str, count: int, within: float = 5) -> list[Any]:
    t0 = time.monotonic()
    while len(got := neighbors(a, agent)) != count:
        assert time.monotonic() - t0 < within, f"expected {count} neighbours of {agent} within {within} s; got {[n.neighbor_id for n in got]}"
        time.sleep(0.1)
    return got


def test_each_agent_lists_the_other_with_its_chassis_port_ttl_and_name(server: Server, transport: str, wires: str,
                                                                        tmp_path: Path) -> None:
    a = api(server, transport)
    with tcpdump(NS, Z, tmp_path / "lldp.pcap", "ether proto 0x88cc", "--immediate-mode"):
        assert warnings_but_testbed_addresses(a.set_config(lldp_config(a)).warnings) == []
        (n,) = wait_neighbors(a, "l2", 1)
    assert (n.chassis_id, n.chassis_id_type, n.port_id, n.port_id_type) == (CHASSIS[0], "mac_address", "port-1", "local"), n
    assert (n.ttl, n.system_name, n.lldp_name) == (60, "tester-1", "l2"), n
    (back,) = wait_neighbors(a, "l1", 1)
    assert (back.chassis_id, back.system_name) == (CHASSIS[1], "tester-2"), back
    req = a.metrics_request()
    req.lldp.lldp_names = []
    m = {x.name: x for x in a.get_metrics(req).lldp_metrics}
    assert m["l1"].frames_tx >= 1 and m["l2"].frames_rx >= 1 and m["l2"].frames_error_rx == 0, m
    # An independent decoder: Scapy's LLDP layers read the frame l1 sent.
    from scapy.all import rdpcap  # type: ignore[import-untyped]
    from scapy.contrib.lldp import (LLDPDUChassisID, LLDPDUSystemName,  # type: ignore[import-untyped]
                                    LLDPDUTimeToLive)

    sent = [p for p in rdpcap(str(tmp_path / "lldp.pcap")) if LLDPDUChassisID in p]
    # (The previous config's agent, stopped by this set_config, said TTL 0 first.)
    mine = [p for p in sent if p[LLDPDUChassisID].id == CHASSIS[0] and p[LLDPDUTimeToLive].ttl != 0]
    assert mine, f"expected l1's LLDPDU on the wire; got {[p.summary() for p in sent]}"
    p = mine[0]
    assert (p[LLDPDUTimeToLive].ttl, p[LLDPDUSystemName].system_name) == (60, b"tester-1"), p.show(dump=True)
    assert p.dst == "01:80:c2:00:00:0e"


def announce(ttl: int) -> None:
    """A foreign LLDP stack on veth-a (Scapy): chassis 02:00:00:00:00:99, its description,
    capabilities and a management address, TTL `ttl`."""
    code = f"""
from scapy.all import Ether, sendp
from scapy.contrib.lldp import *
f = (Ether(dst="01:80:c2:00:00:0e", src="02:00:00:00:00:99", type=0x88cc)
     / LLDPDUChassisID(subtype=4, id="02:00:00:00:00:99") / LLDPDUPortID(subtype=5, id="eth9")
     / LLDPDUTimeToLive(ttl={ttl}) / LLDPDUSystemDescription(description="other stack")
     / LLDPDUSystemCapabilities(mac_bridge_available=1, router_available=1, router_enabled=1)
     / LLDPDUManagementAddress(management_address_subtype=1, management_address=bytes([192, 0, 2, 9]), interface_numbering_subtype=2, interface_number=1)
     / LLDPDUEndOfLLDPDU())
sendp(f, iface="{A}", verbose=False)
"""
    subprocess.run(["ip", "netns", "exec", NS, sys.executable, "-c", code], check=True, timeout=60)


def test_a_foreign_neighbour_is_listed_with_its_optional_tlvs_and_forgotten_at_ttl_0(server: Server, wires: str) -> None:
    a = api(server, "https")
    a.set_config(lldp_config(a))
    wait_neighbors(a, "l2", 1)
    announce(120)
    got = {n.chassis_id: n for n in wait_neighbors(a, "l2", 2)}
    n = got["02:00:00:00:00:99"]
    assert (n.port_id, n.port_id_type, n.system_description) == ("eth9", "interface_name", "other stack"), n
    assert (n.management_address, n.management_address_type) == ("192.0.2.9", "ipv4"), n
    caps = {(c.capability_name, c.capability_enabled) for c in n.capabilities}
    assert caps == {("mac_bridge", False), ("router", True)}, caps
    req = a.states_request()
    req.lldp_neighbors.lldp_names, req.lldp_neighbors.neighbor_id_filters = ["l2"], ["02:00:00:00:00:99/eth9"]
    assert [x.chassis_id for x in a.get_states(req).lldp_neighbors] == ["02:00:00:00:00:99"]
    announce(0)
    (left,) = wait_neighbors(a, "l2", 1)
    assert left.chassis_id == CHASSIS[0], "expected the neighbour that said TTL 0 forgotten, l1 kept"


@pytest.mark.parametrize("change,want", [
    (lambda c: setattr(c.lldp[0].connection, "port_name", "p9"), 'lldp[0].connection.port_name: no port named "p9"'),
    (lambda c: setattr(c.lldp[1].connection, "port_name", "p1"), "lldp[1]: another LLDP agent has its name or port \"p1\""),
])
def test_bad_lldp_input_is_refused_with_its_path(server: Server, wires: str, change: Any, want: str) -> None:
    a = api(server, "https")
    cfg = lldp_config(a)
    change(cfg)
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert want in str(e.value), f"expected {want!r}; got {e.value}"
