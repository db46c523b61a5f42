"""OSPFv2 behind OTG, driven through FRR's zebra and ospfd per device, as ixia-c's users script
it: two veths in one namespace, snappi over HTTPS and gRPC, two routers on a point-to-point
link with 1 s hellos. Both reach Full; each lists the other's inter-area range as summary
LSAs (type 3) and its external range as an AS-external LSA (type 5) with its metric type; a
flow to the peer's range has every frame received; bad OSPF input is refused with its path."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import Server, tcpdump, warnings_but_testbed_addresses
from test_gnmi import client as gnmi_client
from test_otg import api, run_to_stop, transport  # noqa: F401 (transport: a fixture)
from test_otg_ixia import device_pair, two_veths, withdrawal

NS, A, Z = "glospf", "veth-a", "veth-z"
MAC = ("02:67:6c:0f:00:01", "02:67:6c:0f:00:02")


@pytest.fixture(scope="module")
def wires() -> Iterator[str]:
    assert Path("/usr/lib/frr/ospfd").exists(), "expected FRR's ospfd (scripts/setup.sh installs the frr package)"
    with two_veths(NS) as ns:
        yield ns


def ospf_config(a: Any) -> Any:
    """o1 (router id 1.1.1.1) on p1 and o2 on p2, p2p in area 0; each announces two /24s
    inter-area (metric 20) and one /24 external type 1 (metric 33)."""
    cfg, devices = device_pair(a, NS, MAC)
    for k, d in enumerate(devices, 1):
        o = d.ospfv2
        o.name = f"o{k}"
        itf = o.interfaces.add(name=f"d{k}.ospf", ipv4_name=f"d{k}.ip4")
        itf.area.id = 0
        itf.network_type.choice = "point_to_point"
        itf.advanced.hello_interval, itf.advanced.dead_interval = 1, 4
        r = o.v4_routes.add(name=f"o{k}.inter", metric=20)
        r.addresses.add(address=f"10.{k}0.0.0", prefix=24, count=2, step=1)
        x = o.v4_routes.add(name=f"o{k}.ext", metric=33)
        x.route_origin.choice = "external_type_1"
        x.addresses.add(address=f"10.{k}9.0.0", prefix=24, count=1, step=1)
    return cfg


def ospf_metrics(a: Any) -> dict[str, Any]:
    req = a.metrics_request()
    req.ospfv2.router_names = []
    return {m.name: m for m in a.get_metrics(req).ospfv2_metrics}


def lsas(a: Any, router: str) -> Any:
    req = a.states_request()
    req.ospfv2_lsas.router_names = [router]
    return a.get_states(req).ospfv2_lsas[0]


def wait_learned(a: Any, within: float = 20) -> Any:
    """Both routers Full, and o1 holding o2's summary and external LSAs."""
    t0 = time.monotonic()
    while True:
        m = ospf_metrics(a)
        s = lsas(a, "o1")
        sums = sorted(x.header.lsa_id for x in s.network_summary_lsas)
        ext = [x.header.lsa_id for x in s.external_as_lsas]
        full = (m["o1"].full_state_count, m["o2"].full_state_count)
        p2p = [(ln.id, ln.data) for r in s.router_lsas for ln in r.links if ln.type == "point_to_point"]
        if full == (1, 1) and sums == ["10.20.0.0", "10.20.1.0"] and ext == ["10.29.0.0"] and p2p:
            return s
        assert time.monotonic() - t0 < within, f"expected Full, o2's ranges and o2's p2p link at o1 within {within} s; got Full {full}, summaries {sums}, externals {ext}, links {p2p}"
        time.sleep(0.3)


def test_ospfv2_p2p_reaches_full_lists_the_peers_summary_and_external_lsas_and_carries_flows(
        server: Server, transport: str, wires: str) -> None:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(ospf_config(a)).warnings) == []
    s = wait_learned(a)
    summary = s.network_summary_lsas[0]
    assert (summary.header.advertising_router_id, summary.network_mask, summary.metric) == ("1.1.1.2", "255.255.255.0", 20), summary
    ext = s.external_as_lsas[0]
    assert (ext.metric, ext.metric_type, ext.header.advertising_router_id) == (33, 1, "1.1.1.2"), ext
    assert all(r.header.advertising_router_id != "1.1.1.1" for r in s.router_lsas), "expected only LSAs learned from o2"
    p2p = [ln for r in s.router_lsas for ln in r.links if ln.type == "point_to_point"]
    assert [(ln.id, ln.data) for ln in p2p] == [("1.1.1.1", "1.1.1.2")], p2p
    if transport == "grpc":
        # The same database over gNMI, as the OTG models key it: pygnmi's Get in PROTO.
        with gnmi_client(server) as gc:
            got = gc.get(path=["ospfv2-routers/ospfv2-router[name=o1]/state/link-state-database"], encoding="proto")
        ups = {u["path"].split("lsa-states/")[1]: u["val"] for n in got["notification"] for u in n.get("update", [])}
        key = f"external-as-lsa[link-state-id={ext.header.lsa_id}]/state"
        assert (ups[f"{key}/metric"], ups[f"{key}/metric-type"], ups[f"{key}/advertising-router"]) == (33, 1, "1.1.1.2"), ups
        links = {k: v for k, v in ups.items() if k.startswith("router-lsa") and "/link[id=1.1.1.1]/" in k}
        assert sorted(v for k, v in links.items() if k.endswith("/type") or k.endswith("/data")) == ["1.1.1.2", "POINT_TO_POINT"], links
    m = ospf_metrics(a)["o1"]
    assert m.hellos_sent > 0 and m.hellos_received > 0 and m.dbd_sent > 0 and m.ls_update_received > 0, m
    # The LSA counters, counted on the wire: o2's router, two summaries and an external
    # reached o1, and o1 acknowledged them (FRR delays its acks up to a second); each LS
    # Update and Acknowledgment FRR counted carried at least one LSA or LSA header.
    t0 = time.monotonic()
    while True:
        m = ospf_metrics(a)["o1"]
        got_lsas = (m.lsa_sent, m.lsa_received, m.router_lsa_received, m.summary_lsa_received, m.external_lsa_received,
                    m.lsa_ack_sent, m.ls_ack_sent, m.ls_update_received)
        if m.lsa_sent >= 2 and m.lsa_received >= 4 and m.router_lsa_received >= 1 and m.summary_lsa_received >= 2 \
                and m.external_lsa_received >= 1 and m.lsa_ack_sent >= max(1, m.ls_ack_sent) \
                and m.lsa_received >= m.ls_update_received:
            break
        assert time.monotonic() - t0 < 10, \
            f"expected o1 to have sent 2+ LSAs, received o2's 4+ (router, 2 summaries, external) and acked them, within 10 s; got {got_lsas}"
        time.sleep(0.3)
    for k in ("network_lsa", "nssa_lsa", "opaque_local", "opaque_area", "opaque_domain"):
        assert getattr(m, f"{k}_received") is not None, f"expected {k}_received filled (0 when none came); got None"
    cfg = ospf_config(a)
    for name, ends in (("to-o2", (["o1.inter"], ["o2.inter"])), ("to-o1", (["o2.inter"], ["o1.inter"]))):
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ends
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 500
        f.metrics.enable = True
        f.packet.ethernet().ipv4().udp()
    got = [(x.name, x.frames_tx, x.frames_rx) for x in run_to_stop(a, cfg)]
    assert got == [("to-o2", 500, 500), ("to-o1", 500, 500)], f"expected every frame of the flows both ways between the ranges received; got {got}"
    after = ospf_metrics(a)["o1"]
    assert after.lsa_received >= m.lsa_received, f"expected the counters to only grow; got {after.lsa_received} after {m.lsa_received}"


def test_protocols_stopped_read_the_sessions_down_and_started_again_come_back(server: Server, wires: str) -> None:
    """Started again, every range is advertised as the config says, the ones withdrawn before
    the stop included (one state for every protocol)."""
    a = api(server, "https")
    a.set_config(ospf_config(a))
    wait_learned(a)
    cs = a.control_state()
    cs.protocol.route.names, cs.protocol.route.state = ["o2.inter", "o2.ext"], "withdraw"
    a.set_control_state(cs)
    cs = a.control_state()
    cs.protocol.all.state = cs.protocol.all.STOP
    a.set_control_state(cs)
    m = ospf_metrics(a)
    assert m["o1"].full_state_count == 0 and m["o2"].full_state_count == 0, m
    cs.protocol.all.state = cs.protocol.all.START
    a.set_control_state(cs)
    wait_learned(a)


def summary_stamps(pcap: Path, src_mac: str, ids: set[str]) -> list[int]:
    """The stamps of the OSPFv2 LS Updates `src_mac` sent that carry a summary LSA (type 3)
    for one of `ids`, in a nanosecond pcap."""
    import socket

    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    mac, out = bytes.fromhex(src_mac.replace(":", "")), []
    for d, m in RawPcapReader(str(pcap)):
        o = 14 + (d[14] & 0x0F) * 4
        if d[6:12] != mac or d[12:14] != b"\x08\x00" or d[23] != 89 or d[o + 1] != 4:
            continue
        p = o + 28
        for _ in range(int.from_bytes(d[o + 24:o + 28], "big")):
            if d[p + 3] == 3 and socket.inet_ntoa(d[p + 4:p + 8]) in ids:
                out.append(m.sec * 1_000_000_000 + m.usec)
                break
            p += int.from_bytes(d[p + 18:p + 20], "big")
    return out


def test_a_range_withdrawal_is_timed_by_the_ls_update_that_flushes_it_and_leaves_the_peers_lsas(
        server: Server, transport: str, wires: str, tmp_path: Path) -> None:
    a = api(server, transport)
    cfg = ospf_config(a)
    f = cfg.flows.flow(name="to-o2")[-1]  # the convergence metrics are a flow's
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["o1.inter"], ["o2.inter"]
    f.packet.ethernet().ipv4().udp()
    a.set_config(cfg)
    wait_learned(a)
    with tcpdump(NS, Z, tmp_path / "ospf.pcap", "ip proto 89", "--immediate-mode"):
        cs = a.control_state()
        cs.protocol.route.names, cs.protocol.route.state = ["o2.inter"], "withdraw"
        asked = time.time_ns()
        assert len(a.set_control_state(cs).warnings) == 0, "expected the withdrawal's LS Update seen on the wire"
        time.sleep(0.3)
    # o2 floods its router LSA at once, and flushes its summaries at its next ABR task (FRR:
    # 5 s later): the withdrawal's time is the LS Update that carries them.
    sent = [t for t in summary_stamps(tmp_path / "ospf.pcap", MAC[1], {"10.20.0.0", "10.20.1.0"}) if t >= asked]
    assert sent, "expected tcpdump to see o2's LS Update flushing its summaries"
    withdrawal(a, "to-o2", "o2.inter", sent[0], "LS Update")
    t0 = time.monotonic()
    while sums := sorted(x.header.lsa_id for x in lsas(a, "o1").network_summary_lsas):
        assert time.monotonic() - t0 < 5, f"expected o2's summary LSAs gone from o1 after the withdrawal; got {sums}"
        time.sleep(0.2)
    cs.protocol.route.state = "advertise"
    assert len(a.set_control_state(cs).warnings) == 0, "expected the advertisement's LS Update seen on the wire"
    wait_learned(a)


def ospf3_config(a: Any, v4: bool = True) -> Any:
    """o61 and o62 (OSPFv3, router ids from their IPv6 addresses) p2p in area 0; each announces
    two /64s inter-area (metric 20) and one external (metric 33). Without `v4`, the devices
    have IPv6 addresses only."""
    cfg, devices = device_pair(a, NS, MAC, v6=True, v4=v4)
    for k, d in enumerate(devices, 1):
        d.ospfv3.router_id.choice = "auto"
        inst = d.ospfv3.instances.add(name=f"o6{k}")
        itf = inst.interfaces.add(name=f"d{k}.ospf6", ipv6_name=f"d{k}.ip6")
        itf.area.id = 0
        itf.network_type.choice = "point_to_point"
        itf.advanced.hello_interval, itf.advanced.dead_interval = 1, 4
        inst.v6_routes.add(name=f"o6{k}.inter", metric=20).addresses.add(address=f"2001:db8:{k}0::", prefix=64, count=2, step=1)
        x = inst.v6_routes.add(name=f"o6{k}.ext", metric=33)
        x.route_origin.choice = "external_type_2"
        # Spelled long, as the conformance suite spells 6:6:6:0:0:0:0:0: answered as spelled.
        x.addresses.add(address=f"2001:db8:{k}9:0:0:0:0:0", prefix=64, count=1, step=1)
    return cfg


def test_ospfv3_p2p_reaches_full_lists_the_peers_inter_area_prefixes_and_carries_flows(
        server: Server, transport: str, wires: str) -> None:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(ospf3_config(a)).warnings) == []
    t0 = time.monotonic()
    while True:
        req = a.metrics_request()
        req.ospfv3.router_names = []
        full = {m.name: m.full_state_count for m in a.get_metrics(req).ospfv3_metrics}
        sreq = a.states_request()
        sreq.ospfv3_lsas.router_names = ["o61"]
        s = a.get_states(sreq).ospfv3_lsas[0]
        iap = sorted((x.address_prefix, x.prefix_length, x.metric) for x in s.inter_area_prefix_lsas)
        ext = [x.address_prefix for x in s.external_as_lsas]
        if full == {"o61": 1, "o62": 1} and set(iap) == {("2001:db8:20::", 64, 20), ("2001:db8:20:1::", 64, 20)} and len(iap) == 2 and ext == ["2001:db8:29:0:0:0:0:0"]:
            break
        assert time.monotonic() - t0 < 20, f"expected Full and o62's ranges at o61; got Full {full}, inter-area prefixes {iap}, externals {ext}"
        time.sleep(0.3)
    assert all(x.header.advertising_router_id != s.router_lsas[0].neighbor_router_id for x in s.router_lsas), "expected only o62's LSAs"
    req = a.metrics_request()
    req.ospfv3.router_names = ["o61"]
    m = a.get_metrics(req).ospfv3_metrics[0]
    got_lsas = (m.lsa_sent, m.lsa_received, m.inter_area_prefix_lsa_received, m.external_lsa_received, m.link_lsa_received)
    assert m.lsa_sent >= 2 and m.lsa_received >= 4 and m.inter_area_prefix_lsa_received >= 2 and m.external_lsa_received >= 1 \
        and m.link_lsa_received >= 1, f"expected o61 to count o62's LSAs on the wire by type; got {got_lsas}"
    # Flows both ways between the OSPFv3 ranges of devices that have only IPv6 addresses.
    cfg = ospf3_config(a, v4=False)
    for name, ends in (("to-o62", (["o61.inter"], ["o62.inter"])), ("to-o61", (["o62.inter"], ["o61.inter"]))):
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ends
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 500
        f.metrics.enable = True
        f.packet.ethernet().ipv6().udp()
    got = [(x.name, x.frames_tx, x.frames_rx) for x in run_to_stop(a, cfg)]
    assert got == [("to-o62", 500, 500), ("to-o61", 500, 500)], f"expected every frame of the flows both ways between o61's and o62's ranges received; got {got}"


def inter_area_prefix_stamps(pcap: Path, src_mac: str, prefixes: set[str]) -> list[int]:
    """The stamps of the OSPFv3 LS Updates `src_mac` sent that carry an inter-area-prefix LSA
    (0x2003) for one of `prefixes` ("2001:db8:20::/64"), in a nanosecond pcap."""
    import ipaddress

    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    mac, out = bytes.fromhex(src_mac.replace(":", "")), []
    for d, m in RawPcapReader(str(pcap)):
        o = 14 + 40  # Ethernet, IPv6 (ospf6d sends no extension headers)
        if d[6:12] != mac or d[12:14] != b"\x86\xdd" or d[20] != 89 or d[o + 1] != 4:
            continue
        p = o + 20
        for _ in range(int.from_bytes(d[o + 16:o + 20], "big")):
            if d[p + 2:p + 4] == b"\x20\x03":
                plen = d[p + 24]
                words = d[p + 28:p + 28 + (plen + 31) // 32 * 4]
                net = ipaddress.IPv6Address(words.ljust(16, b"\0"))
                if f"{net}/{plen}" in prefixes:
                    out.append(m.sec * 1_000_000_000 + m.usec)
                    break
            p += int.from_bytes(d[p + 18:p + 20], "big")
    return out


def v3_inter_area(a: Any) -> list[str]:
    sreq = a.states_request()
    sreq.ospfv3_lsas.router_names = ["o61"]
    return sorted(x.address_prefix for x in a.get_states(sreq).ospfv3_lsas[0].inter_area_prefix_lsas)


def test_an_ospfv3_range_withdrawal_is_timed_by_its_ls_update_and_the_range_comes_back(
        server: Server, transport: str, wires: str, tmp_path: Path) -> None:
    """ospf6d takes the range's stub out of its area over the vty (a stub set down was
    sometimes never flushed: DESIGN-NOTES 76); the LS Update that flushes the inter-area
    prefixes is the withdrawal's time, checked against tcpdump's."""
    a = api(server, transport)
    cfg = ospf3_config(a)
    f = cfg.flows.flow(name="to-o62")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["o61.inter"], ["o62.inter"]
    f.size.fixed = 128
    f.packet.ethernet().ipv6().udp()
    a.set_config(cfg)
    both = ["2001:db8:20:1::", "2001:db8:20::"]
    t0 = time.monotonic()
    while (got := v3_inter_area(a)) != both:
        assert time.monotonic() - t0 < 20, f"expected o62's inter-area prefixes {both} at o61; got {got}"
        time.sleep(0.3)
    with tcpdump(NS, Z, tmp_path / "ospf6.pcap", "ip6 proto 89", "--immediate-mode"):
        cs = a.control_state()
        cs.protocol.route.names, cs.protocol.route.state = ["o62.inter"], "withdraw"
        asked = time.time_ns()
        w = a.set_control_state(cs).warnings
        assert len(w) == 0, f"expected the withdrawal's LS Update seen on the wire; got warnings {w}"
        time.sleep(0.3)
    sent = [t for t in inter_area_prefix_stamps(tmp_path / "ospf6.pcap", MAC[1], {"2001:db8:20::/64", "2001:db8:20:1::/64"}) if t >= asked]
    assert sent, "expected tcpdump to see o62's LS Update flushing its inter-area prefixes"
    withdrawal(a, "to-o62", "o62.inter", sent[0], "LS Update")
    t0 = time.monotonic()
    while got := v3_inter_area(a):
        assert time.monotonic() - t0 < 10, f"expected o62's inter-area prefixes gone from o61 after the withdrawal; got {got}"
        time.sleep(0.2)
    cs.protocol.route.state = "advertise"
    w = a.set_control_state(cs).warnings
    assert len(w) == 0, f"expected the advertisement's LS Update seen on the wire; got warnings {w}"
    t0 = time.monotonic()
    while (got := v3_inter_area(a)) != both:
        assert time.monotonic() - t0 < 10, f"expected o62's inter-area prefixes back at o61 after the advertisement; got {got}"
        time.sleep(0.2)


@pytest.mark.parametrize("change,want", [
    (lambda c: setattr(c.devices[0].ospfv2.interfaces[0], "ipv4_name", "nope"),
     'devices[0].ospfv2.interfaces[0].ipv4_name: no IPv4 address named "nope"'),
    (lambda c: setattr(c.devices[1].ospfv2.v4_routes[0].route_origin, "choice", "nssa_external"),
     'devices[1].ospfv2.v4_routes[0].route_origin.choice: "nssa_external" is not supported'),
])
def test_bad_ospf_input_is_refused_with_its_path(server: Server, transport: str, wires: str, change: Any, want: str) -> None:
    a = api(server, transport)
    cfg = ospf_config(a)
    change(cfg)
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert want in str(e.value), f"expected {want!r}; got {e.value}"
