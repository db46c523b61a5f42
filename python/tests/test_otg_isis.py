"""IS-IS behind OTG, driven through FRR's zebra and isisd per device (ranges as kernel routes), as ixia-c's
users script it: two veths in one namespace, snappi over HTTPS and gRPC, two routers L1/L2 on
a point-to-point link with IPv4 and IPv6 route ranges. Each lists only its peer's LSPs, with
the peer's ranges in them; a flow to each range has every frame received; a router set down
takes its peer's sessions down; a killed isisd is named in the metrics; bad IS-IS input is
refused with its path before anything starts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import Server, tcpdump, warnings_but_testbed_addresses
from test_otg import api, run_to_stop, transport  # noqa: F401 (transport: a fixture)
from test_otg_ixia import device_pair, two_veths, withdrawal

NS, A, Z = "glisis", "veth-a", "veth-z"
MAC = ("02:67:6c:15:00:01", "02:67:6c:15:00:02")


@pytest.fixture(scope="module")
def wires() -> Iterator[str]:
    assert Path("/usr/lib/frr/isisd").exists(), "expected FRR's isisd (scripts/setup.sh installs the frr package)"
    with two_veths(NS) as ns:
        yield ns


def isis_config(a: Any, network: str = "point_to_point") -> Any:
    """r1 (system id 640000000001) on p1 and r2 on p2, L1/L2 on one link with 1 s hellos;
    each announces two IPv4 /24s (metric 20) and one IPv6 /64."""
    cfg, devices = device_pair(a, NS, MAC, v6=True)
    for k, d in enumerate(devices, 1):
        d.isis.name, d.isis.system_id = f"r{k}", f"64000000000{k}"
        d.isis.basic.hostname = f"host{k}"
        itf = d.isis.interfaces.add(eth_name=f"d{k}.eth", name=f"d{k}.isis", network_type=network,
                                    level_type="level_1_2", metric=10)
        for lvl in (itf.l1_settings, itf.l2_settings):
            lvl.hello_interval, lvl.dead_interval = 1, 3
        r4 = d.isis.v4_routes.add(name=f"r{k}.v4", link_metric=20)
        r4.addresses.add(address=f"10.{k}0.0.0", prefix=24, count=2, step=1)
        r6 = d.isis.v6_routes.add(name=f"r{k}.v6")
        r6.addresses.add(address=f"2001:db8:{k}0::", prefix=64, count=1, step=1)
    return cfg


def isis_metrics(a: Any) -> dict[str, Any]:
    req = a.metrics_request()
    req.isis.router_names = []
    return {m.name: m for m in a.get_metrics(req).isis_metrics}


def wait_up(a: Any, within: float = 15) -> dict[str, Any]:
    t0 = time.monotonic()
    while True:
        m = isis_metrics(a)
        got = {n: (x.l1_sessions_up, x.l2_sessions_up) for n, x in m.items()}
        if got == {"r1": (1, 1), "r2": (1, 1)}:
            return m
        assert time.monotonic() - t0 < within, f"expected both routers up at L1 and L2 within {within} s; got {got}"
        time.sleep(0.2)


def lsps(a: Any, router: str) -> Any:
    req = a.states_request()
    req.isis_lsps.isis_router_names = [router]
    return a.get_states(req).isis_lsps[0].lsps


def wait_ranges(a: Any, router: str, within: float = 15) -> Any:
    """The peer's LSPs at both levels, once they carry its ranges."""
    t0 = time.monotonic()
    while True:
        got = lsps(a, router)
        v4 = [p.ipv4_address for x in got for t in x.tlvs.extended_ipv4_reachability_tlvs for p in t.prefixes]
        if len(got) == 2 and v4.count("10.20.1.0") == 2:
            return got
        assert time.monotonic() - t0 < within, f"expected r2's LSP at L1 and L2 with its ranges; got {[(x.lsp_id, x.pdu_type) for x in got]} with {v4}"
        time.sleep(0.3)


def test_isis_adjacencies_list_only_the_peers_lsps_and_carry_flows_to_its_ranges(
        server: Server, transport: str, wires: str) -> None:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(isis_config(a)).warnings) == []
    m = wait_up(a)
    assert m["r1"].l1_point_to_point_hellos_sent > 0 and m["r1"].l2_point_to_point_hellos_received > 0, m["r1"]
    got = wait_ranges(a, "r1")
    assert sorted((x.lsp_id, x.pdu_type) for x in got) == [("640000000002-00-00", "level_1"), ("640000000002-00-00", "level_2")], \
        "expected r2's LSP at each level, and none of r1's own"
    l2 = next(x for x in got if x.pdu_type == "level_2")
    assert [h.hostname for h in l2.tlvs.hostname_tlvs] == ["host2"]
    assert [n.system_id for t in l2.tlvs.extended_is_reachability_tlvs for n in t.neighbors] == ["640000000001"]
    v4 = {(p.ipv4_address, p.prefix_length): p.metric for t in l2.tlvs.extended_ipv4_reachability_tlvs for p in t.prefixes}
    assert {k: v for k, v in v4.items() if k[0].startswith("10.")} == {("10.20.0.0", 24): 20, ("10.20.1.0", 24): 20}, v4
    v6 = {(p.ipv6_address, p.prefix_length) for t in l2.tlvs.ipv6_reachability_tlvs for p in t.prefixes}
    assert ("2001:db8:20::", 64) in v6, v6
    assert isis_metrics(a)["r1"].l2_database_size == 2
    cfg = isis_config(a)
    # And one back from each of r2's ranges to r1's, at the same time (one run, both ways).
    ends = {"v4": ("r1.v4", "r2.v4"), "v6": ("r1.v6", "r2.v6"),
            "v4-back": ("r2.v4", "r1.v4"), "v6-back": ("r2.v6", "r1.v6")}
    for name, (src, dst) in ends.items():
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = [src], [dst]
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 500
        f.metrics.enable = True
        f.packet.ethernet()
        (f.packet.ipv6() if name.startswith("v6") else f.packet.ipv4())
        f.packet.udp()
    got = {x.name: (x.frames_tx, x.frames_rx) for x in run_to_stop(a, cfg)}
    assert got == {n: (500, 500) for n in ends}, f"expected every frame of the flows both ways received; got {got}"


def test_broadcast_adjacencies_come_up_and_list_the_peers_lsps_with_its_pseudonode(server: Server, wires: str) -> None:
    a = api(server, "https")
    cfg = isis_config(a, network="broadcast")
    for d in cfg.devices:
        d.isis.interfaces[0].level_type = "level_2"
    d2 = cfg.devices[1].isis.interfaces[0]
    d2.l2_settings.priority = 100  # r2 is the DIS: its pseudonode LSP is learned by r1
    a.set_config(cfg)
    t0 = time.monotonic()
    while True:
        m = isis_metrics(a)
        ids = sorted(x.lsp_id for x in lsps(a, "r1"))
        # The pseudonode's id is the DIS's circuit id, which FRR picks (not 00).
        pseudo = [i for i in ids if i.startswith("640000000002-") and i.endswith("-00") and i[13:15] != "00"]
        if m["r1"].l2_sessions_up == 1 and len(ids) == 2 and "640000000002-00-00" in ids and pseudo:
            break
        assert time.monotonic() - t0 < 20, f"expected r1 up at L2 with r2's LSP and pseudonode LSP; got {m['r1'].l2_sessions_up} and {ids}"
        time.sleep(0.3)
    assert m["r1"].l2_broadcast_hellos_received > 0 and not m["r1"].l2_point_to_point_hellos_received, m["r1"]
    assert "l1_sessions_up" not in m["r1"].serialize(), "expected no L1 figures for an L2-only router"


def lsp_stamps(pcap: Path, mac: str) -> list[int]:
    """The stamps (ns) of the IS-IS LSPs (PDU types 18 and 20) from `mac` in an 802.3/LLC
    capture."""
    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    src = bytes.fromhex(mac.replace(":", ""))
    # A nanosecond capture: `usec` holds the nanoseconds.
    return [m.sec * 1_000_000_000 + m.usec for d, m in RawPcapReader(str(pcap))
            if d[6:12] == src and d[14:18] == b"\xfe\xfe\x03\x83" and d[21] & 0x1F in (18, 20)]


def test_a_range_withdrawal_is_timed_by_its_lsp_on_the_wire_and_leaves_the_peers_lsps(
        server: Server, transport: str, wires: str, tmp_path: Path) -> None:
    a = api(server, transport)
    cfg = isis_config(a)
    f = cfg.flows.flow(name="to-r2")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["r1.v4"], ["r2.v4"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 1000, 100
    f.packet.ethernet().ipv4().udp()
    a.set_config(cfg)
    wait_up(a)
    wait_ranges(a, "r1")
    with tcpdump(NS, Z, tmp_path / "isis.pcap", "isis", "--immediate-mode"):
        cs = a.control_state()
        cs.protocol.route.names, cs.protocol.route.state = ["r2.v4"], "withdraw"
        asked = time.time_ns()
        assert len(a.set_control_state(cs).warnings) == 0, "expected the withdrawal's LSP seen on the wire"
        time.sleep(0.3)
    # r2's first LSP after the request: the one that no longer carries the range.
    sent = [t for t in lsp_stamps(tmp_path / "isis.pcap", MAC[1]) if t >= asked]
    assert sent, "expected tcpdump to see r2's new LSP"
    withdrawal(a, "to-r2", "r2.v4", sent[0], "LSP")
    t0 = time.monotonic()
    while True:
        v4 = {p.ipv4_address for x in lsps(a, "r1") for t in x.tlvs.extended_ipv4_reachability_tlvs for p in t.prefixes}
        if not {"10.20.0.0", "10.20.1.0"} & v4:
            break
        assert time.monotonic() - t0 < 5, f"expected r2's IPv4 range gone from r1's view of its LSPs; got {v4}"
        time.sleep(0.2)
    cs.protocol.route.state = "advertise"
    assert len(a.set_control_state(cs).warnings) == 0
    wait_ranges(a, "r1")


def test_a_router_set_down_takes_its_peers_sessions_down_and_comes_back(
        server: Server, transport: str, wires: str) -> None:
    a = api(server, transport)
    a.set_config(isis_config(a))
    wait_up(a)
    cs = a.control_state()
    cs.protocol.isis.routers.state, cs.protocol.isis.routers.router_names = "down", ["r2"]
    a.set_control_state(cs)
    t0 = time.monotonic()
    while (got := isis_metrics(a)["r1"]).l2_sessions_up != 0:
        assert time.monotonic() - t0 < 10, f"expected r1's sessions down within its 3 s hold; got {got}"
        time.sleep(0.2)
    assert got.l2_session_flap == 1, f"expected one flap at L2; got {got.l2_session_flap}"
    cs.protocol.isis.routers.state = "up"
    a.set_control_state(cs)
    wait_up(a)
    cs = a.control_state()
    cs.protocol.isis.routers.state, cs.protocol.isis.routers.router_names = "down", ["r9"]
    with pytest.raises(Exception, match="r9"):
        a.set_control_state(cs)


def test_a_killed_isisd_is_named_and_its_sessions_read_down(server: Server, wires: str) -> None:
    a = api(server, "https")
    a.set_config(isis_config(a))
    wait_up(a)
    pid = next(int(p.read_text()) for p in Path("/run/gapless-frr").glob("*/isisd.pid")
               if "host2" in (p.parent / "isisd.conf").read_text())
    os.kill(pid, signal.SIGKILL)
    import requests

    got = isis_metrics(a)["r2"]
    assert (got.l1_sessions_up, got.l2_sessions_up) == (0, 0), f"expected r2's sessions read down; got {got}"
    r = requests.post(f"{server.otg}/monitor/metrics", json={"choice": "isis"}, verify=False, timeout=10).json()
    assert any('isisd of IS-IS router "r2" exited' in w for w in r["warnings"]), f"expected a warning naming r2's isisd; got {r['warnings']}"
    cs = a.control_state()
    cs.protocol.all.state = cs.protocol.all.START
    a.set_control_state(cs)
    wait_up(a)


@pytest.mark.parametrize("change,want", [
    (lambda c: setattr(c.devices[0].isis.interfaces[0], "eth_name", "nope"),
     "devices[0].isis.interfaces[0].eth_name: device \"d1\" has no Ethernet named \"nope\""),
    (lambda c: setattr(c.devices[1].isis, "system_id", "6400"), "devices[1].isis.system_id: give 12 hex digits"),
    (lambda c: c.devices[0].isis.v4_routes[0].addresses[0].__setattr__("address", "255.255.255.0")
     or c.devices[0].isis.v4_routes[0].addresses[0].__setattr__("count", 5),
     "devices[0].isis.v4_routes[0].addresses[0]: 5 prefixes of /24 from 255.255.255.0"),
])
def test_bad_isis_input_is_refused_with_its_path_and_nothing_starts(server: Server, transport: str, wires: str,
                                                                    change: Any, want: str) -> None:
    a = api(server, transport)
    before = sorted(Path("/run/gapless-frr").glob("*/isisd.pid")) if Path("/run/gapless-frr").exists() else []
    cfg = isis_config(a)
    change(cfg)
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert want in str(e.value), f"expected {want!r}; got {e.value}"
    after = sorted(Path("/run/gapless-frr").glob("*/isisd.pid")) if Path("/run/gapless-frr").exists() else []
    assert len(after) <= len(before), f"expected no isisd started; before {before}, after {after}"


def test_protocols_stopped_and_started_again_advertise_every_range_as_the_config_says(server: Server, wires: str) -> None:
    """One state: after a withdrawal, protocol.all stop then start brings the router back as
    its config says, every range advertised (as BGP's and OSPF's ranges come back)."""
    a = api(server, "https")
    a.set_config(isis_config(a))
    wait_up(a)
    wait_ranges(a, "r1")
    cs = a.control_state()
    cs.protocol.route.names, cs.protocol.route.state = ["r2.v4"], "withdraw"
    a.set_control_state(cs)
    for state in ("stop", "start"):
        cs = a.control_state()
        cs.protocol.all.state = state
        assert len(a.set_control_state(cs).warnings) == 0
    wait_up(a)
    wait_ranges(a, "r1")


def keyed(a: Any, hello2: str = "h3llo") -> Any:
    """isis_config with HMAC-MD5 area and domain keys and a key on each interface's hellos
    (r2's hello key `hello2`), ignore_receive_md5 false, as featureprofiles' IS-IS tests set them."""
    cfg = isis_config(a)
    for k, d in enumerate(cfg.devices, 1):
        auth = d.isis.router_auth
        auth.ignore_receive_md5 = False
        auth.area_auth.auth_type, auth.area_auth.md5 = "md5", "ar3a"
        auth.domain_auth.auth_type, auth.domain_auth.md5 = "md5", "d0main"
        h = d.isis.interfaces[0].authentication
        h.auth_type, h.md5 = "md5", ("h3llo" if k == 1 else hello2)
    return cfg


def test_md5_keys_go_on_every_pdu_and_a_wrong_hello_key_keeps_the_adjacency_down(
        server: Server, transport: str, wires: str, tmp_path: Path) -> None:
    """Area, domain and hello keys (RFC 5304 HMAC-MD5): with the same keys both routers come
    up and list each other's ranges, and tshark finds the authentication TLV (HMAC-MD5) in the
    hellos and the LSPs on the wire; with another hello key on r2 no adjacency forms."""
    a = api(server, transport)
    a.set_config(a.config())  # no router of an earlier test sends while the capture runs
    with tcpdump(NS, Z, tmp_path / "i.pcap", "isis"):
        assert warnings_but_testbed_addresses(a.set_config(keyed(a)).warnings) == []
        wait_up(a)
        wait_ranges(a, "r1")
        time.sleep(2)
    import subprocess

    text = subprocess.run(["tshark", "-r", str(tmp_path / "i.pcap"), "-V"], capture_output=True, text=True, timeout=60).stdout
    blocks = text.split("\nFrame ")
    kinds = {k: (sum(1 for b in blocks if k in b and "hmac-md5 (54)" in b), sum(1 for b in blocks if k in b))
             for k in ("PDU Type: P2P HELLO", "LSP (")}
    assert all(signed == n > 0 for signed, n in kinds.values()), \
        f"expected every hello and LSP to carry an HMAC-MD5 authentication TLV (signed, seen); got {kinds}"
    assert a.set_config(keyed(a, hello2="0ther")).warnings is not None
    time.sleep(5)  # the dead interval is 3 s
    got = {n: (x.l1_sessions_up, x.l2_sessions_up) for n, x in isis_metrics(a).items()}
    assert got == {"r1": (0, 0), "r2": (0, 0)}, f"expected no adjacency with two hello keys; got {got}"
