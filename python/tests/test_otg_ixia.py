"""The OTG server as ixia-c's users wire it: two veths, `veth-a` and `veth-z`, in one namespace
(theirs is the host's; ours is one the test makes, so traffic stays inside it), snappi over
HTTPS and gRPC, and scripts written for ixia-c: captures checked byte for byte (every frame
whole, its FCS included, as long as the flow's size), patterns on tunnel headers (VXLAN over
IPv6 with a VNI list and an incrementing outer port), devices that resolve each other before
any traffic, and device namespaces that go with the config and the server."""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import snappi  # type: ignore[import-untyped]

from conftest import Server, gapless_cli, have, require_root, tcpdump, warnings_but_testbed_addresses
from test_otg import api, run_to_stop, set_link, start_traffic, tshark_problems, wait_stopped

NS, A, Z = "glix", "veth-a", "veth-z"
MAC_A, MAC_Z = "02:67:6c:0a:00:01", "02:67:6c:0a:00:02"


def sh(*args: str) -> None:
    p = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, f"expected `{' '.join(args)}` to succeed; got {p.returncode}: {p.stderr}"


@contextmanager
def two_veths(ns: str) -> Iterator[str]:
    """Two veths, `veth-a` and `veth-z`, in namespace `ns`, each the other's peer: the ixia-c
    set-up; the namespace goes at the end."""
    require_root()
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", A, "type", "veth", "peer", "name", Z)
        for dev in ("lo", A, Z):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def device_pair(a: Any, ns: str, macs: tuple[str, str], v6: bool = False,
                ip4: Callable[[int], tuple[str, str]] = lambda k: (f"1.1.1.{k}", f"1.1.1.{3 - k}"),
                v4: bool = True) -> tuple[Any, list[Any]]:
    """A config with p1 and p2 on `veth-a` and `veth-z` in `ns`, and devices d1 and d2 on them
    (`d{k}.eth`, IPv4 `d{k}.ip4` /24 with address and gateway `ip4(k)`, by default 1.1.1.k,
    each the other's gateway, unless not `v4`; with `v6` IPv6 `d{k}.ip6` 2001:db8::k/64): the set-up of the
    routing protocol tests."""
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{ns}/{A}").port(name="p2", location=f"{ns}/{Z}")
    devices = []
    for k in (1, 2):
        d = cfg.devices.device(name=f"d{k}")[-1]
        e = d.ethernets.add()
        e.name, e.mac, e.connection.port_name = f"d{k}.eth", macs[k - 1], f"p{k}"
        if v4:
            ip = e.ipv4_addresses.add()
            (ip.name, ip.prefix), (ip.address, ip.gateway) = (f"d{k}.ip4", 24), ip4(k)
        if v6:
            ip6 = e.ipv6_addresses.add()
            ip6.name, ip6.address, ip6.gateway, ip6.prefix = f"d{k}.ip6", f"2001:db8::{k}", f"2001:db8::{3 - k}", 64
        devices.append(d)
    return cfg, devices


def withdrawal(a: Any, flow: str, source: str, wire: int | None = None, what: str = "") -> int:
    """The time of the one `route_withdraw` event of `source` in `flow`'s convergence metric;
    with `wire`, checked within 1 ms of the `what` tcpdump saw then (ns)."""
    req = a.metrics_request()
    req.convergence.flow_names = [flow]
    ev = [e for e in a.get_metrics(req).convergence_metrics[0].events if e.type == "route_withdraw"]
    assert len(ev) == 1 and ev[0].source == source, f"expected one route_withdraw event for {source}; got {ev}"
    at = int(ev[0].begin_timestamp_ns)
    if wire is not None:
        assert abs(at - wire) < 1_000_000, f"expected the withdrawal's time within 1 ms of the {what} tcpdump saw at {wire}; got {at}"
    return at


@pytest.fixture(scope="module")
def ixia() -> Iterator[str]:
    with two_veths(NS) as ns:
        yield ns


@pytest.fixture(params=["https", "grpc"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["ixia", "testbed"])
def wiring(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The two ports' locations: two veths in one namespace (ixia-c's wiring), or the
    testbed's two namespaces."""
    if request.param == "ixia":
        request.getfixturevalue("ixia")
        return f"{NS}/{A}", f"{NS}/{Z}"
    tb = request.getfixturevalue("testbed")
    return f"{tb.tx_ns}/{tb.tx}", f"{tb.rx_ns}/{tb.rx}"


def ports(a: Any, wiring: tuple[str, str] = (f"{NS}/{A}", f"{NS}/{Z}")) -> Any:
    cfg = a.config()
    cfg.ports.port(name="p1", location=wiring[0]).port(name="p2", location=wiring[1])
    return cfg


def flow(cfg: Any, name: str, size: int, count: int = 20) -> Any:
    f = cfg.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = size, 1000, count
    f.metrics.enable = True
    return f


def tunnel_flows(cfg: Any) -> dict[str, int]:
    """One flow of each kind ixia-c scripts capture, each of its own size; returns name -> size."""
    sizes = {"udp": 128, "tcp": 200, "vxlan6": 300, "gre": 256, "mpls": 190, "arp": 64}
    f = flow(cfg, "udp", sizes["udp"])
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    ip.src.value, ip.dst.value = "10.0.0.1", "10.0.0.2"
    udp.src_port.increment.start, udp.src_port.increment.count = 5000, 4
    f = flow(cfg, "tcp", sizes["tcp"])
    eth, _ip, tcp = f.packet.ethernet().ipv4().tcp()
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    tcp.src_port.value, tcp.dst_port.value = 7000, 80
    # VXLAN over IPv6, a VNI list and an incrementing outer source port: what ixia-c refused
    # nothing of and gapless refused twice.
    f = flow(cfg, "vxlan6", sizes["vxlan6"])
    eth = f.packet.ethernet()[-1]
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    o6 = f.packet.ipv6()[-1]
    o6.src.value, o6.dst.value = "2001:db8::a", "2001:db8::b"
    ou = f.packet.udp()[-1]
    ou.src_port.increment.start, ou.src_port.increment.step, ou.src_port.increment.count = 49152, 1, 5
    f.packet.vxlan()[-1].vni.values = [100, 200, 300]
    ie = f.packet.ethernet()[-1]
    ie.src.value, ie.dst.value = "02:00:00:00:01:01", "02:00:00:00:01:02"
    ip = f.packet.ipv4()[-1]
    ip.src.value, ip.dst.value = "10.1.0.1", "10.1.0.2"
    f.packet.udp()[-1].dst_port.value = 4401
    f = flow(cfg, "gre", sizes["gre"])
    eth = f.packet.ethernet()[-1]
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    f.packet.ipv4()[-1].src.value = "192.0.2.1"
    f.packet.gre()
    f.packet.ipv4()[-1].dst.value = "10.2.0.2"
    f.packet.udp()
    f = flow(cfg, "mpls", sizes["mpls"])
    eth = f.packet.ethernet()[-1]
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    f.packet.mpls()[-1].label.value = 100
    lab = f.packet.mpls()[-1].label
    lab.increment.start, lab.increment.step, lab.increment.count = 200, 1, 3
    f.packet.ipv4()
    f.packet.udp()
    f = flow(cfg, "arp", sizes["arp"])
    eth, arp = f.packet.ethernet().arp()
    eth.src.value, eth.dst.value = MAC_A, "ff:ff:ff:ff:ff:ff"
    arp.sender_hardware_addr.value = MAC_A
    return sizes


def test_captured_frames_are_whole_with_their_fcs_and_tunnel_patterns_check_out(server: Server, transport: str,
                                                                                  wiring: tuple[str, str], tmp_path: Path) -> None:
    from scapy.all import IPv6, UDP, VXLAN, PcapNgReader, PcapReader  # type: ignore[import-untyped]

    a = api(server, transport)
    cfg = ports(a, wiring)
    sizes = tunnel_flows(cfg)
    fmt = "pcap" if transport == "https" else "pcapng"
    c = cfg.captures.capture(name="c")[-1]
    c.port_names, c.format = ["p2"], fmt
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    metrics = run_to_stop(a, None, set_config=False)
    for m in metrics:
        assert (m.frames_tx, m.frames_rx) == (20, 20), f"{m.name}: expected 20 sent and 20 received; got {m.frames_tx}, {m.frames_rx}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    creq = a.capture_request()
    creq.port_name = "p2"
    data = a.get_capture(creq).read()
    path = tmp_path / f"c.{fmt}"
    path.write_bytes(data)
    # The raw records, read without any library: every frame of ours ends with its FCS.
    frames = raw_frames(data, fmt)
    ours = [f for f in frames if f[6:12] == bytes.fromhex(MAC_A.replace(":", ""))]
    assert len(ours) == 6 * 20, f"expected the 120 frames of the six flows in the capture; got {len(ours)} of {len(frames)}"
    by_len: dict[int, int] = {}
    for f in ours:
        fcs = zlib.crc32(f[:-4]).to_bytes(4, "little")
        assert f[-4:] == fcs, f"expected the frame's FCS {fcs.hex()} at its end; got {f[-4:].hex()} in {f.hex()}"
        by_len[len(f)] = by_len.get(len(f), 0) + 1
    assert by_len == {s: 20 for s in sizes.values()}, f"expected 20 frames of each flow's size {sorted(sizes.values())}; got {by_len}"
    # Scapy reads the file as ixia-c users' scripts do; the VXLAN flow's patterns decode.
    reader = PcapReader if fmt == "pcap" else PcapNgReader
    vx = [p for p in reader(io.BytesIO(data)) if VXLAN in p]
    assert len(vx) == 20, f"expected Scapy to decode the 20 VXLAN frames; got {len(vx)}"
    assert [p[VXLAN].vni for p in vx] == [(100, 200, 300)[k % 3] for k in range(20)], [p[VXLAN].vni for p in vx]
    assert [p[IPv6][UDP].sport for p in vx] == [49152 + k % 5 for k in range(20)], [p[IPv6][UDP].sport for p in vx]
    problems = tshark_problems(path)
    assert problems == "", f"expected tshark to find no bad checksum or FCS and nothing malformed; got {problems}"
    # gapless analyze meters every frame of the capture, the GRE, MPLS and ARP frames too,
    # whose signature sits right before the FCS.
    gapless_cli("analyze", str(path), "--json", str(tmp_path / "a.json"))
    rep = json.loads((tmp_path / "a.json").read_text())
    got = sorted(s["rx_frames"] for s in rep["streams"])
    assert got == [20] * 6, f"expected gapless analyze to meter 20 frames of each of the six flows; got {got}"


def raw_frames(data: bytes, fmt: str) -> list[bytes]:
    """The captured bytes of each record, and the format's FCS marks checked on the way."""
    out = []
    if fmt == "pcap":
        (link,) = struct.unpack_from("<I", data, 20)
        # Plain Ethernet, as ixia-c's captures: Scapy reads a link type with the FCS bits
        # (0x50000001) as raw bytes.
        assert link == 1, f"expected the Ethernet link type in the pcap header; got {link:#x}"
        at = 24
        while at < len(data):
            incl, orig = struct.unpack_from("<II", data, at + 8)
            assert incl == orig, f"expected whole frames (captured = wire length); got {incl} of {orig}"
            out.append(data[at + 16:at + 16 + incl])
            at += 16 + incl
        return out
    at, fcslen = 0, None
    while at < len(data):
        btype, blen = struct.unpack_from("<II", data, at)
        body = data[at + 8:at + blen - 4]
        if btype == 1:  # Interface Description: options after 8 bytes
            o = 8
            while o + 4 <= len(body):
                code, olen = struct.unpack_from("<HH", body, o)
                if code == 13:
                    fcslen = body[o + 4]
                o += 4 + (olen + 3) // 4 * 4
        if btype == 6:
            incl, orig = struct.unpack_from("<II", body, 12)
            assert incl == orig, f"expected whole frames; got {incl} of {orig}"
            out.append(body[20:20 + incl])
        at += blen
    assert fcslen == 4, f"expected if_fcslen 4 in the pcapng interface; got {fcslen}"
    return out


def device_config(a: Any, tags: list[int], wiring: tuple[str, str] = (f"{NS}/{A}", f"{NS}/{Z}")) -> Any:
    cfg = ports(a, wiring)
    for k, port in enumerate(("p1", "p2")):
        e = cfg.devices.device(name=f"d{k + 1}")[-1].ethernets.add()
        e.name, e.mac, e.connection.port_name = f"d{k + 1}.eth", f"00:00:0a:0a:0a:0{k + 1}", port
        for vid in tags:
            v = e.vlans.add()
            v.name, v.id = f"d{k + 1}.v{vid}", vid
        ip = e.ipv4_addresses.add()
        ip.name, ip.address, ip.gateway, ip.prefix = f"d{k + 1}.ip4", f"1.1.1.{k + 1}", f"1.1.1.{2 - k}", 24
        ip6 = e.ipv6_addresses.add()
        ip6.name, ip6.address, ip6.gateway, ip6.prefix = f"d{k + 1}.ip6", f"2001:db8:9::{k + 1}", f"2001:db8:9::{2 - k}", 64
    f = cfg.flows.flow(name="d1-d2")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.ip4"], ["d2.ip4"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 1000, 100
    f.metrics.enable = True
    f.packet.ethernet().ipv4().udp()
    return cfg


def neighbors(a: Any, v6: bool) -> set[tuple[str, str, str]]:
    key, addr = ("ipv6_neighbors", "ipv6_address") if v6 else ("ipv4_neighbors", "ipv4_address")
    req = a.states_request()
    req.choice = key
    return {(r.ethernet_name, getattr(r, addr), r.link_layer_address or "") for r in getattr(a.get_states(req), key)}


@pytest.mark.parametrize("tags", [[], [100]], ids=["untagged", "dot1q"])
def test_devices_resolve_each_other_before_any_traffic_then_exchange_every_frame(server: Server, transport: str,
                                                                               wiring: tuple[str, str], tags: list[int]) -> None:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(device_config(a, tags, wiring)).warnings) == []
    want4 = {("d1.eth", "1.1.1.2", "00:00:0a:0a:0a:02"), ("d2.eth", "1.1.1.1", "00:00:0a:0a:0a:01")}
    want6 = {("d1.eth", "2001:db8:9::2", "00:00:0a:0a:0a:02"), ("d2.eth", "2001:db8:9::1", "00:00:0a:0a:0a:01")}
    t0 = time.monotonic()
    # What ixia-c's examples do: wait for the neighbours, with no traffic started.
    while not (want4 <= (got4 := neighbors(a, False)) and want6 <= (got6 := neighbors(a, True))):
        assert time.monotonic() - t0 < 10, f"expected both devices to list each other within 10 s of set_config; got {got4} and {got6}"
        time.sleep(0.1)
    cs = a.control_state()
    cs.protocol.all.state = cs.protocol.all.START
    assert len(a.set_control_state(cs).warnings) == 0, "expected protocol.all start to be taken, not warned about"
    m = run_to_stop(a, None, set_config=False)[0]
    assert (m.frames_tx, m.frames_rx) == (100, 100), f"expected 100 sent and 100 received between the devices; got {m.frames_tx}, {m.frames_rx}"


def netns_of(pid: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(f"gapless-dev-{pid}-")]


def test_device_namespaces_go_with_the_config_the_server_and_a_killed_server(server: Server, ixia: str, tmp_path: Path) -> None:
    # The module's server holds its devices' MACs on these veths: a second server's devices
    # with the same MACs are refused, naming the MAC.
    a = api(server, "https")
    a.set_config(device_config(a, []))
    s = Server(tmp_path / "a.db")
    try:
        with pytest.raises(Exception) as e:
            api(s, "https").set_config(device_config(a, []))
        assert "already has the MAC 00:00:0a:0a:0a:01" in " ".join(str(e.value).split()), f"expected the MAC in use named; got {e.value}"
    finally:
        s.stop()
    a.set_config(ports(a))
    s = Server(tmp_path / "a.db")
    try:
        a = api(s, "https")
        a.set_config(device_config(a, []))
        pid = s.proc.pid
        assert len(netns_of(pid)) == 2, f"expected a namespace per device; got {netns_of(pid)}"
        a.set_config(ports(a))
        assert netns_of(pid) == [], f"expected a config without devices to remove theirs; got {netns_of(pid)}"
        a.set_config(device_config(a, []))
        cfg = ports(a)
        cfg.lags.lag(name="lag1")
        with pytest.raises(Exception) as e:
            a.set_config(cfg)
        assert "lags[0].ports: a LAG has 1 to 32 members; got 0" in str(e.value), f"expected a LAG without members refused by its path; got {e.value}"
    finally:
        s.stop()
    assert netns_of(pid) == [], f"expected none of the server's device namespaces after it stopped; got {netns_of(pid)}"
    s = Server(tmp_path / "b.db")
    a = api(s, "https")
    a.set_config(device_config(a, []))
    killed = s.proc.pid
    os.kill(killed, signal.SIGKILL)
    s.proc.wait(timeout=10)
    s.log.close()
    assert len(netns_of(killed)) == 2, "expected a killed server to leave its device namespaces (it cannot remove them)"
    s = Server(tmp_path / "c.db")
    try:
        assert netns_of(killed) == [], f"expected the next server to remove a killed server's namespaces; got {netns_of(killed)}"
        a = api(s, "https")
        a.set_config(device_config(a, []))  # the killed server's MACs on the same veths are free again
        assert len(netns_of(s.proc.pid)) == 2
    finally:
        s.stop()


def convergence_config(a: Any, count: int) -> Any:
    cfg = ports(a)
    f = flow(cfg, "conv", 128, count=count)
    f.rate.pps = 10_000
    eth, _ip, _udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    cfg.options.flow_options.packet_loss_duration = True
    cfg.events.dp_events.enable, cfg.events.dp_events.rx_rate_threshold = True, 95
    cfg.events.cp_events.enable = True
    return cfg


def convergence(a: Any) -> Any:
    req = a.metrics_request()
    req.convergence.flow_names = ["conv"]
    return a.get_metrics(req).convergence_metrics[0]


def sink(path: Path) -> Any:
    return tcpdump(NS, Z, path, "udp")


def largest_gap_ns(path: Path) -> int:
    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    ts = [meta.sec * 1_000_000_000 + meta.usec for _, meta in RawPcapReader(str(path))]  # a nanosecond pcap
    return max(b - a for a, b in zip(ts, ts[1:]))


def test_a_port_link_down_and_up_is_timed_as_convergence_and_the_run_goes_on(server: Server, transport: str, ixia: str,
                                                                              tmp_path: Path) -> None:
    a = api(server, transport)
    with sink(tmp_path / "c.pcap"):
        start_traffic(a, convergence_config(a, 12_000))
        time.sleep(0.4)
        set_link(a, ["p1"], "down")
        req = a.metrics_request()
        req.port.port_names = ["p1"]
        assert a.get_metrics(req).port_metrics[0].link == "down"
        time.sleep(0.25)
        set_link(a, ["p1"], "up")
        m = wait_stopped(a)[0]
    assert m.frames_tx == 12_000, f"expected the flow to send all 12000 frames through the link flap; got {m.frames_tx}"
    lost = m.frames_tx - m.frames_rx
    assert 1_500 < lost < 4_000, f"expected about 250 ms of frames at 10 kframes/s lost; got {lost}"
    assert m.packet_loss_duration.value == pytest.approx(lost / m.frames_tx_rate * 1e3, rel=1e-6), \
        f"expected packet_loss_duration = lost / rate = {lost / m.frames_tx_rate * 1e3} ms; got {m.packet_loss_duration.value}"
    c = convergence(a)
    gap = largest_gap_ns(tmp_path / "c.pcap")
    got = c.data_plane_convergence_us * 1e3
    assert abs(got - gap) <= 100_000 + 0.01 * gap, f"expected data_plane_convergence_us within 100 µs + 1 % of the capture's outage {gap / 1e3:.0f} µs; got {c.data_plane_convergence_us}"
    kinds = [e.type for e in c.events]
    assert kinds.count("link_down") == 1 and kinds.count("link_up") == 1, f"expected the link events; got {kinds}"
    assert "flow_rx_rate_below_threshold" in kinds and "flow_rx_rate_above_threshold" in kinds, f"expected the crossings; got {kinds}"
    down = next(e for e in c.events if e.type == "link_down")
    assert down.source == "p1" and down.begin_timestamp_ns <= down.end_timestamp_ns
    # From the link down to the recovery: the last frame before the outage arrived within an
    # inter-frame gap (100 µs) of the link down, so the two figures are within a millisecond.
    assert abs(c.control_plane_data_plane_convergence_us - c.data_plane_convergence_us) < 1_000, \
        f"expected control-plane-to-data-plane convergence within 1 ms of the data plane's; got {c.control_plane_data_plane_convergence_us} and {c.data_plane_convergence_us} µs"


def test_a_sender_stall_is_no_convergence_event(server: Server, transport: str, ixia: str, tmp_path: Path) -> None:
    """A CPU hog on every core stalls the sender now and then: its frames leave late and in a
    burst, nothing is lost, and no rate crossing is reported."""
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(convergence_config(a, 8_000)).warnings) == []
    hog = subprocess.Popen([have("stress-ng"), "--cpu", "2", "--timeout", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sink(tmp_path / "c.pcap"):
            m = run_to_stop(a, None, set_config=False)[0]
    finally:
        hog.kill()
        hog.wait()
    assert m.frames_rx == m.frames_tx == 8_000, f"expected no loss (veths do not drop at 10 kframes/s); got {m.frames_tx}, {m.frames_rx}"
    kinds = [e.type for e in convergence(a).events]
    assert not any("threshold" in k for k in kinds), \
        f"expected no rate crossing from a stall without loss (largest gap {largest_gap_ns(tmp_path / 'c.pcap') / 1e6:.2f} ms); got {kinds}"


def otg_json(server: Server, path: str, body: dict[str, Any]) -> Any:
    """A POST to the OTG API over HTTPS, as JSON: what snappi's objects drop (`x_gapless`)."""
    import ssl
    import urllib.request

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    rq = urllib.request.Request(f"{server.otg}{path}", data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=10, context=ctx) as resp:
        return json.load(resp)


def test_flows_both_ways_and_a_third_on_a_shared_port_run_at_once_each_counted_and_captured(
        server: Server, transport: str, ixia: str) -> None:
    """Most ixia-c scripts send both ways between one port pair at once: one run, one send
    loop over both ports, one meter over both; a third flow shares p1 and is metered apart by
    its signature. The return flow's rate is a percentage with no layer1: of the veth's own
    10 Gbit/s, which the port metrics say."""
    a = api(server, transport)
    cfg = ports(a)
    sizes = {"ab": 128, "ab2": 200, "ba": 256}
    counts = {"ab": 400, "ab2": 150, "ba": 453}
    for name, tx, rx in (("ab", "p1", "p2"), ("ab2", "p1", "p2"), ("ba", "p2", "p1")):
        f = flow(cfg, name, sizes[name], counts[name])
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = tx, [rx]
        eth, ip, _ = f.packet.ethernet().ipv4().udp()
        eth.src.value, eth.dst.value = (MAC_A, MAC_Z) if tx == "p1" else (MAC_Z, MAC_A)
        ip.src.value, ip.dst.value = ("10.0.0.1", "10.0.0.2") if tx == "p1" else ("10.0.0.2", "10.0.0.1")
    # 0.01 % of 10 Gbit/s at L1: 1 Mbit/s of 276-byte-time frames, 452.9 frames/s.
    cfg.flows[2].rate.percentage = 0.01
    c = cfg.captures.capture(name="c")[-1]
    c.port_names, c.format = ["p1", "p2"], "pcap"
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p1", "p2"], "start"
    a.set_control_state(cs)
    metrics = run_to_stop(a, None, set_config=False)
    got = {m.name: (m.port_tx, m.port_rx, m.frames_tx, m.frames_rx) for m in metrics}
    want = {"ab": ("p1", "p2", 400, 400), "ab2": ("p1", "p2", 150, 150), "ba": ("p2", "p1", 453, 453)}
    assert got == want, f"expected every frame of each flow sent and received on its ports; got {got}"
    req = a.metrics_request()
    req.port.port_names = []
    pm = {p.name: (p.frames_tx, p.frames_rx) for p in a.get_metrics(req).port_metrics}
    assert pm == {"p1": (550, 453), "p2": (453, 550)}, f"expected each port to count what it sent and received; got {pm}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    macs = (bytes.fromhex(MAC_A.replace(":", "")), bytes.fromhex(MAC_Z.replace(":", "")))
    for port, flows in (("p1", ["ba"]), ("p2", ["ab", "ab2"])):
        creq = a.capture_request()
        creq.port_name = port
        frames = [f for f in raw_frames(a.get_capture(creq).read(), "pcap") if f[6:12] in macs]
        by_len: dict[int, int] = {}
        for f in frames:
            assert f[-4:] == zlib.crc32(f[:-4]).to_bytes(4, "little"), f"expected the FCS at the end of {f.hex()}"
            by_len[len(f)] = by_len.get(len(f), 0) + 1
        assert by_len == {sizes[n]: counts[n] for n in flows}, f"expected {port}'s capture to hold {flows}' frames by size; got {by_len}"
    if transport == "https":
        body = {"choice": "port", "port": {"port_names": []}}
        x = {p["name"]: p["x_gapless"] for p in otg_json(server, "/monitor/metrics", body)["port_metrics"]}
        for p in ("p1", "p2"):
            assert (x[p].get("link_speed_bps"), x[p].get("link_speed_source")) == (10e9, "kernel"), \
                f"expected port {p}'s speed read from the veth (10 Gbit/s, kernel); got {x[p]}"
        fl = otg_json(server, "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": ["ba"]}})["flow_metrics"][0]
        rate, want_rate = fl["frames_tx_rate"], 1e6 / ((256 + 20) * 8)
        assert abs(rate - want_rate) / want_rate < 0.01, f"expected 0.01 % of 10 Gbit/s: {want_rate:.1f} frames/s of 256 B; got {rate}"


def test_a_percentage_rate_on_a_port_without_a_speed_is_refused_with_the_fix(server: Server, transport: str, ixia: str) -> None:
    a = api(server, transport)
    cfg = a.config()
    # The loopback reports no speed (`ethtool lo` has no Speed line).
    cfg.ports.port(name="p1", location=f"{ixia}/lo").port(name="p2", location=f"{ixia}/{Z}")
    f = flow(cfg, "f", 128)
    f.packet.ethernet().ipv4().udp()
    f.rate.percentage = 1
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    msg = str(e.value)
    assert "rate.percentage" in msg and "Fix: name the port in a layer1 entry" in msg, f"expected the fix named; got {msg}"


def nested_flow(cfg: Any, name: str, size: int, tunnel: str, outer6: bool, inner6: bool, l4: str) -> None:
    """A flow from p1 to p2 of `tunnel` ("vxlan", "gre", "gtpv1" or "mpls") with an outer
    IPv4 or IPv6 header (none for MPLS) and an inner IPv4 or IPv6 packet carrying `l4`."""
    f = flow(cfg, name, size, 6)
    eth = f.packet.ethernet()[-1]
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    if tunnel != "mpls":
        o = f.packet.ipv6()[-1] if outer6 else f.packet.ipv4()[-1]
        o.src.value, o.dst.value = ("2001:db8::a", "2001:db8::b") if outer6 else ("192.0.2.1", "192.0.2.2")
    if tunnel in ("vxlan", "gtpv1"):
        f.packet.udp()
    if tunnel == "vxlan":
        f.packet.vxlan()[-1].vni.value = 77
        ie = f.packet.ethernet()[-1]
        ie.src.value, ie.dst.value = "02:00:00:00:01:01", "02:00:00:00:01:02"
    elif tunnel == "gre":
        f.packet.gre()
    elif tunnel == "gtpv1":
        f.packet.gtpv1()[-1].teid.value = 0x1234
    else:
        f.packet.mpls()[-1].label.value = 100
    i = f.packet.ipv6()[-1] if inner6 else f.packet.ipv4()[-1]
    i.src.value, i.dst.value = ("2001:db8:1::1", "2001:db8:1::2") if inner6 else ("10.1.0.1", "10.1.0.2")
    if l4 == "tcp":
        f.packet.tcp()[-1].dst_port.value = 80
    else:
        f.packet.udp()[-1].dst_port.value = 4401


def scapy_rebuild(frame: bytes) -> tuple[bytes, list[str]]:
    """The frame (no FCS) as Scapy builds it again from its layers with every length and
    checksum deleted and recomputed, and the names of the layers it read. A zero UDP checksum
    over IPv4 (none, which RFC 768 allows) is kept, as is a GRE header without one. A VXLAN
    frame's inner Ethernet frame ends with its own FCS, as ixia-c sends it (its issue #112):
    Scapy rebuilds the inner frame alone, its FCS is computed again over the rebuilt bytes,
    and the outer lengths and checksums count it."""
    from scapy.all import VXLAN, Ether, Raw, load_contrib  # type: ignore[import-untyped]

    load_contrib("mpls")
    load_contrib("gtp")
    p = Ether(frame)
    inner_layers: list[str] = []
    if VXLAN in p:
        inner = bytes(p[VXLAN].payload)
        again, inner_layers = scapy_rebuild(inner[:-4])
        p[VXLAN].remove_payload()
        p[VXLAN].add_payload(Raw(again + zlib.crc32(again).to_bytes(4, "little")))
    names = layer_names(p)
    return bytes(p), names + inner_layers


def layer_names(p: Any) -> list[str]:
    """The names of `p`'s layers down to its payload bytes, lengths and checksums deleted on
    the way (see `scapy_rebuild`)."""
    from scapy.all import IP, UDP  # type: ignore[import-untyped]

    layers: list[str] = []
    layer = p
    while layer.name not in ("Raw", "Padding", "NoPayload"):
        layers.append(layer.name)
        for f in ("len", "plen", "chksum", "length"):
            if f not in layer.fields:
                continue
            if f == "chksum" and isinstance(layer, UDP) and layer.chksum == 0 and isinstance(layer.underlayer, IP):
                continue
            if f == "chksum" and layer.name == "GRE" and not layer.chksum_present:
                continue
            delattr(layer, f)
        layer = layer.payload
    return layers


def test_every_nested_length_and_checksum_matches_scapys_rebuild(server: Server, ixia: str) -> None:
    """Every tunnel with each family outside and inside, UDP and TCP inside, two sizes (the
    FCS included, as OTG counts a size): each captured frame is the one Scapy builds again
    from its layers with every length and checksum recomputed."""
    a = api(server, "https")
    cfg = ports(a)
    cases = {}
    for tunnel in ("vxlan", "gre", "gtpv1", "mpls"):
        for outer6 in ((False, True) if tunnel != "mpls" else (False,)):
            for inner6 in (False, True):
                for l4, size in (("udp", 256), ("tcp", 390)):
                    name = f"{tunnel}-{'o6' if outer6 else 'o4'}-{'i6' if inner6 else 'i4'}-{l4}"
                    nested_flow(cfg, name, size, tunnel, outer6, inner6, l4)
                    cases[name] = size
    # Sizes that change frame by frame: 180, 220, 260, 300, 180, 220 B.
    nested_flow(cfg, "vxlan-ramp", 0, "vxlan", True, False, "tcp")
    ramp = cfg.flows[-1].size.increment
    ramp.start, ramp.end, ramp.step = 180, 300, 40
    c = cfg.captures.capture(name="c")[-1]
    c.port_names, c.format = ["p2"], "pcap"
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    metrics = run_to_stop(a, None, set_config=False)
    cases["vxlan-ramp"] = 0
    assert all(m.frames_rx == 6 for m in metrics), f"expected 6 frames of each flow; got {[(m.name, m.frames_rx) for m in metrics]}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    creq = a.capture_request()
    creq.port_name = "p2"
    frames = [f for f in raw_frames(a.get_capture(creq).read(), "pcap") if f[6:12] == bytes.fromhex(MAC_A.replace(":", ""))]
    assert len(frames) == 6 * len(cases), f"expected {6 * len(cases)} frames; got {len(frames)}"
    wrong, shallow = [], []
    for f in frames:
        body = f[:-4]
        again, layers = scapy_rebuild(body)
        if sum(n in ("IP", "IPv6") for n in layers) < (1 if "MPLS" in layers else 2) or layers[-1] not in ("UDP", "TCP"):
            shallow.append("/".join(layers))
        if again != body:
            diff = [i for i in range(min(len(again), len(body))) if again[i] != body[i]]
            wrong.append(f"{'/'.join(layers)} ({len(f)} B): bytes differ at {diff[:8]}; ours {body.hex()} Scapy's {again.hex()}")
    assert not shallow, f"expected Scapy to read every layer down to the inner UDP or TCP; it stopped at {sorted(set(shallow))}"
    assert not wrong, f"expected every frame to match Scapy's rebuild; {len(wrong)} did not, first: {wrong[:2]}"
