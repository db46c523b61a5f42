"""The OTG API driven by the real snappi client across the testbed: the quickstart (two
flows, UDP with an incrementing source port and TCP, fixed counts, polled until stopped,
every frame sent and received), value/values/increment/decrement/random patterns on UDP and
TCP ports checked on the wire, IPv6, rates and errors as snappi sees them."""

from __future__ import annotations

import itertools
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any, List

import pytest
import snappi  # type: ignore[import-untyped]
from scapy.all import IPv6, TCP, UDP, rdpcap  # type: ignore[import-untyped]

from conftest import Server, Testbed, have, tcpdump, warnings_but_testbed_addresses

MAC_TX, MAC_RX = "02:67:6c:00:00:01", "02:67:6c:00:00:02"


@pytest.fixture(params=["https", "grpc"])
def transport(request: pytest.FixtureRequest) -> str:
    """Each test runs over both of the server's OTG transports, as snappi scripts use them."""
    return str(request.param)


def api(server: Server, transport: str) -> Any:
    if transport == "grpc":
        return snappi.api(location=server.grpc, transport="grpc", version_check=True)
    return snappi.api(location=server.otg, verify=False, version_check=True)


def config(a: Any, tb: Testbed) -> tuple[Any, Any, Any]:
    cfg = a.config()
    p1 = cfg.ports.port(name="p1", location=f"{tb.tx_ns}/{tb.tx}")[-1]
    p2 = cfg.ports.port(name="p2", location=f"{tb.rx_ns}/{tb.rx}")[-1]
    return cfg, p1, p2


def flow(cfg: Any, name: str, count: int, pps: int = 2000, size: int = 128) -> Any:
    f = cfg.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name = "p1"
    f.tx_rx.port.rx_names = ["p2"]
    f.size.fixed = size
    f.rate.pps = pps
    f.duration.fixed_packets.packets = count
    f.metrics.enable = True
    f.metrics.latency.enable = True
    f.metrics.timestamps = True
    return f


def start_traffic(a: Any, cfg: Any) -> Any:
    """Sets the config (no warnings expected) and starts every flow; returns the control state."""
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    cs = a.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    a.set_control_state(cs)
    return cs


def set_link(a: Any, ports: List[str], state: str) -> None:
    """control/state port link `state` ("up" or "down") on `ports`."""
    link = a.control_state()
    link.port.link.port_names, link.port.link.state = ports, state
    a.set_control_state(link)


def run_to_stop(a: Any, cfg: Any, timeout: float = 30, set_config: bool = True) -> List[Any]:
    """Sets the config (unless told not to), starts traffic and polls flow metrics until every
    flow is stopped."""
    if set_config:
        start_traffic(a, cfg)
    else:
        cs = a.control_state()
        cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
        a.set_control_state(cs)
    return wait_stopped(a, timeout)


def wait_stopped(a: Any, timeout: float = 30) -> List[Any]:
    """Polls the flow metrics (traffic started) until every flow has stopped; returns them."""
    req = a.metrics_request()
    req.flow.flow_names = []
    t0 = time.monotonic()
    while True:
        m = list(a.get_metrics(req).flow_metrics)
        if all(x.transmit == "stopped" for x in m):
            return m
        assert time.monotonic() - t0 < timeout, f"expected every flow to stop within {timeout} s; got {[(x.name, x.transmit) for x in m]}"
        time.sleep(0.2)


def capture(tb: Testbed, path: Path, what: str = "ip or ip6") -> Any:
    """tcpdump on the testbed's receiving end while the block runs."""
    return tcpdump(tb.rx_ns, tb.rx, path, what, "-s", "512")


def test_quickstart_two_flows_every_frame_sent_and_received(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 1000
    f1 = flow(cfg, "udp", count)
    eth, ip, udp = f1.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
    udp.src_port.increment.start, udp.src_port.increment.step, udp.src_port.increment.count = 5000, 1, 10
    udp.dst_port.value = 6000
    f2 = flow(cfg, "tcp", count)
    eth, ip, tcp = f2.packet.ethernet().ipv4().tcp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
    tcp.src_port.value, tcp.dst_port.value = 7000, 80
    metrics = run_to_stop(a, cfg)
    for m in metrics:
        assert (m.name, m.frames_tx, m.frames_rx) == (m.name, count, count), f"expected {count} sent and received by {m.name}; got tx {m.frames_tx} rx {m.frames_rx}"
        assert m.bytes_tx == count * 128, f"expected {count * 128} bytes (FCS included); got {m.bytes_tx}"
        lat = m.latency
        assert m.loss == 0 and 0 < lat.minimum_ns <= lat.average_ns <= lat.maximum_ns, m
        assert m.timestamps.first_timestamp_ns < m.timestamps.last_timestamp_ns, m.timestamps
    req = a.metrics_request()
    req.port.port_names = []
    ports = {p.name: p for p in a.get_metrics(req).port_metrics}
    assert (ports["p1"].frames_tx, ports["p2"].frames_rx) == (2 * count, 2 * count)


PATTERNS = {
    "values": (lambda f: setattr(f, "values", [7, 9, 11]), [7, 9, 11]),
    "increment": (lambda f: (setattr(f.increment, "start", 5000), setattr(f.increment, "step", 2), setattr(f.increment, "count", 5)),
                  [5000, 5002, 5004, 5006, 5008]),
    "decrement": (lambda f: (setattr(f.decrement, "start", 6000), setattr(f.decrement, "step", 3), setattr(f.decrement, "count", 4)),
                  [6000, 5997, 5994, 5991]),
}


@pytest.mark.parametrize("proto,pattern", list(itertools.product(["udp", "tcp"], PATTERNS)))
def test_port_patterns_on_the_wire(server: Server, transport: str, testbed: Testbed, tmp_path: Path, proto: str, pattern: str) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 24
    f = flow(cfg, f"{proto}-{pattern}", count, pps=1000)
    eth, _ip, l4 = getattr(f.packet.ethernet().ipv4(), proto)()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    set_pattern, cycle = PATTERNS[pattern]
    set_pattern(l4.src_port)
    l4.dst_port.value = 4321
    with capture(testbed, tmp_path / "c.pcap"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (count, count), f"expected {count} each way; got {m.frames_tx}, {m.frames_rx}"
    layer = UDP if proto == "udp" else TCP
    pkts = [p for p in rdpcap(str(tmp_path / "c.pcap")) if layer in p and p[layer].dport == 4321]
    got = [p[layer].sport for p in pkts]
    want = [cycle[k % len(cycle)] for k in range(count)]
    assert got == want, f"expected source ports {want}; got {got}"


def tagged_flow(a: Any, tb: Testbed, count: int) -> Any:
    """A flow whose DSCP cycles through 10, 46 and 0, its DSCP and ECN bits tagged as they
    arrive (`egress_packet`), as featureprofiles checks QoS marking."""
    cfg, _, _ = config(a, tb)
    f = flow(cfg, "marked", count, pps=3000)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
    ip.priority.dscp.phb.values = [10, 46, 0]
    udp.src_port.value, udp.dst_port.value = 5000, 4322
    f.egress_packet.ethernet()
    raw = f.egress_packet.ipv4()[-1].priority.raw
    raw.metric_tags.add(name="dscp", offset=0, length=6)
    raw.metric_tags.add(name="ecn", offset=6, length=2)
    return cfg


def test_tagged_metrics_count_each_dscp_as_it_arrives(server: Server, transport: str, testbed: Testbed, tmp_path: Path) -> None:
    a = api(server, transport)
    count = 600
    cfg = tagged_flow(a, testbed, count)
    with capture(testbed, tmp_path / "c.pcap", "udp dst port 4322"):
        m = run_to_stop(a, cfg)[0]
    assert m.frames_rx == count, f"expected {count} received; got {m.frames_rx}"
    # What the wire carried, per TOS byte, read by Scapy from tcpdump's capture.
    wire: dict[str, int] = {}
    for p in rdpcap(str(tmp_path / "c.pcap")):
        wire[f"0x{p['IP'].tos >> 2:02x}"] = wire.get(f"0x{p['IP'].tos >> 2:02x}", 0) + 1
    assert wire == {"0x0a": 200, "0x2e": 200, "0x00": 200}, f"expected 200 frames of each DSCP on the wire; got {wire}"
    got = {}
    for t in m.tagged_metrics:
        tags = {x.name: x.value.hex for x in t.tags}
        assert tags["ecn"] == "0x0", f"expected ECN 0x0 (two bits: one hex digit); got {tags}"
        got[tags["dscp"]] = t.frames_rx
        assert t.bytes_rx == t.frames_rx * 128, f"expected 128 bytes a frame, FCS included; got {t.bytes_rx} for {t.frames_rx}"
        assert t.frames_tx is None, f"a received tag has no transmitted count; got {t.frames_tx}"
    assert got == wire, f"expected the tagged counts to match the wire {wire}; got {got}"
    # The request's filter: one DSCP, one counter; and none at all.
    req = a.metrics_request()
    req.flow.flow_names = ["marked"]
    req.flow.tagged_metrics.filters.add(name="dscp", values=["0x2E"])
    req.flow.tagged_metrics.metric_names = ["frames_rx"]
    only = a.get_metrics(req).flow_metrics[0].tagged_metrics
    assert [(len(only), only[0].frames_rx, only[0].bytes_rx)] == [(1, 200, None)], f"expected DSCP 46 alone, frames only; got {only}"
    req = a.metrics_request()
    req.flow.tagged_metrics.include = False
    assert len(a.get_metrics(req).flow_metrics[0].tagged_metrics) == 0


def test_tags_on_sent_fields_count_each_value_sent_and_received(server: Server, testbed: Testbed) -> None:
    a = api(server, "grpc")
    cfg, _, _ = config(a, testbed)
    f = flow(cfg, "sent-tags", 300, pps=3000)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
    ip.priority.dscp.phb.values = [10, 46, 0]
    ip.priority.dscp.phb.metric_tags.add(name="dscp")
    udp.src_port.value, udp.dst_port.value = 5000, 4323
    m = run_to_stop(a, cfg)[0]
    got = {t.tags[0].value.hex: (t.frames_tx, t.frames_rx) for t in m.tagged_metrics}
    assert got == {"0x0a": (100, 100), "0x2e": (100, 100), "0x00": (100, 100)}, f"expected 100 of each DSCP sent and received; got {got}"


def test_metric_tags_that_cannot_be_placed_are_refused_with_their_path(server: Server, testbed: Testbed) -> None:
    a = api(server, "https")
    cfg = tagged_flow(a, testbed, 10)
    cfg.flows[0].egress_packet[1].priority.raw.metric_tags[1].offset = 7
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    want = "flows[0].egress_packet[1].ipv4.priority.raw.metric_tags[1]: offset 7 and length 2 leave the field's 8 bits"
    text = " ".join(str(e.value).replace("''", "'").split())  # snappi prints the error as YAML
    assert want in text and "400" in text, f"expected {want!r}; got {text}"


def test_random_ports_stay_in_bounds_and_a_seed_repeats_the_sequence(server: Server, transport: str, testbed: Testbed, tmp_path: Path) -> None:
    a = api(server, transport)
    seqs = []
    for run in range(2):
        cfg, _, _ = config(a, testbed)
        count = 48
        f = flow(cfg, "rnd", count, pps=1000)
        eth, _ip, udp = f.packet.ethernet().ipv4().udp()
        eth.src.value, eth.dst.value = MAC_TX, MAC_RX
        udp.src_port.random.min, udp.src_port.random.max = 2000, 2100
        udp.src_port.random.seed, udp.src_port.random.count = 42, 16
        udp.dst_port.value = 4322
        with capture(testbed, tmp_path / f"r{run}.pcap"):
            m = run_to_stop(a, cfg)[0]
        assert (m.frames_tx, m.frames_rx) == (count, count), f"expected {count} each way; got {m.frames_tx}, {m.frames_rx}"
        pkts = [p for p in rdpcap(str(tmp_path / f"r{run}.pcap")) if UDP in p and p[UDP].dport == 4322]
        seqs.append([p[UDP].sport for p in pkts])
    got = seqs[0]
    assert len(got) == 48 and all(2000 <= x <= 2100 for x in got), f"expected 48 source ports in [2000, 2100]; got {got}"
    assert got[:16] * 3 == got, f"expected the 16 values of count to repeat; got {got}"
    assert len(set(got)) > 8, f"expected 16 draws from 101 values to differ; got {got[:16]}"
    assert seqs[1] == got, f"expected seed 42 to give the same sequence twice; got {got[:16]} and {seqs[1][:16]}"


@pytest.mark.parametrize("version", [4, 6])
def test_icmp_echo_requests_with_varying_identifier_and_sequence(server: Server, transport: str, testbed: Testbed, tmp_path: Path,
                                                              version: int) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 20
    f = flow(cfg, f"icmp{version}", count, pps=1000)
    eth, ip, icmp = (f.packet.ethernet().ipv4().icmp() if version == 4 else f.packet.ethernet().ipv6().icmpv6())
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip.src.value, ip.dst.value = ("198.18.0.1", "198.18.0.2") if version == 4 else ("2001:db8::1", "2001:db8::2")
    icmp.echo.identifier.value = 77
    icmp.echo.sequence_number.increment.start, icmp.echo.sequence_number.increment.count = 100, 5
    with capture(testbed, tmp_path / "c.pcap"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (count, count), f"expected {count} each way; got {m.frames_tx}, {m.frames_rx}"
    from scapy.all import ICMP, ICMPv6EchoRequest, raw  # type: ignore[import-untyped]

    layer = ICMP if version == 4 else ICMPv6EchoRequest
    pkts = [p for p in rdpcap(str(tmp_path / "c.pcap")) if layer in p and (version == 6 or p[ICMP].type == 8)]
    assert len(pkts) == count, f"expected {count} echo requests on the wire; got {len(pkts)}"
    assert [p[layer].id for p in pkts] == [77] * count
    assert [p[layer].seq for p in pkts] == [100 + k % 5 for k in range(count)], [p[layer].seq for p in pkts]
    field = "chksum" if version == 4 else "cksum"
    for p in pkts:  # Scapy recomputes a deleted checksum: it must come out as sent
        q = p.copy()
        delattr(q[layer], field)
        want = getattr(p.__class__(raw(q))[layer], field)
        assert getattr(p[layer], field) == want, f"expected ICMP checksum {want:#06x}; got {getattr(p[layer], field):#06x} in {p!r}"


def tshark_problems(pcap: Path) -> str:
    """What tshark, with checksum validation on (the FCS too, where the file says frames carry
    one), calls malformed or a bad checksum."""
    p = subprocess.run([have("tshark"), "-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                        "-o", "tcp.check_checksum:TRUE", "-o", "eth.check_fcs:TRUE",
                        "-Y", "_ws.malformed or _ws.expert.severity >= warning",
                        "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"expected tshark to read {pcap}; got {p.stderr}"
    return p.stdout.strip()


def test_arp_packets_with_varying_addresses_decode_on_the_wire_and_every_frame_is_metered(server: Server, transport: str,
                                                                                         testbed: Testbed, tmp_path: Path) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 50
    f = flow(cfg, "arp", count, pps=1000, size=64)
    eth, arp = f.packet.ethernet().arp()
    eth.src.value, eth.dst.value = MAC_TX, "ff:ff:ff:ff:ff:ff"
    arp.operation.value = 1
    arp.sender_hardware_addr.value = MAC_TX
    arp.sender_protocol_addr.increment.start, arp.sender_protocol_addr.increment.step = "192.0.2.1", "0.0.0.1"
    arp.sender_protocol_addr.increment.count = 5
    arp.target_protocol_addr.decrement.start, arp.target_protocol_addr.decrement.step = "192.0.2.109", "0.0.0.1"
    arp.target_protocol_addr.decrement.count = 10
    with capture(testbed, tmp_path / "a.pcap", "arp"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (count, count), f"expected {count} ARP frames sent and metered; got {m.frames_tx}, {m.frames_rx}"
    from scapy.all import ARP  # type: ignore[import-untyped]

    pkts = [p for p in rdpcap(str(tmp_path / "a.pcap")) if ARP in p and p[ARP].hwsrc == MAC_TX]
    assert len(pkts) == count, f"expected {count} of our ARP requests on the wire; got {len(pkts)}"
    assert {(p[ARP].op, p[ARP].hwtype, p[ARP].ptype, p[ARP].hwlen, p[ARP].plen) for p in pkts} == {(1, 1, 0x0800, 6, 4)}
    assert [p[ARP].psrc for p in pkts] == [f"192.0.2.{1 + k % 5}" for k in range(count)], [p[ARP].psrc for p in pkts]
    assert [p[ARP].pdst for p in pkts] == [f"192.0.2.{109 - k % 10}" for k in range(count)], [p[ARP].pdst for p in pkts]
    assert len(pkts[0]) == 60, f"expected 60 B frames (64 with FCS); got {len(pkts[0])}"
    problems = tshark_problems(tmp_path / "a.pcap")
    assert problems == "", f"expected tshark to find nothing wrong; got {problems}"


@pytest.mark.parametrize("tunnel", ["vxlan", "gre", "mpls", "gtpv1"])
def test_tunnelled_flows_decode_on_the_wire_and_every_frame_is_metered(server: Server, transport: str, testbed: Testbed, tmp_path: Path,
                                                                       tunnel: str) -> None:
    from scapy.all import GRE, IP, VXLAN, Ether, load_contrib  # type: ignore[import-untyped]

    load_contrib("mpls")
    load_contrib("gtp")
    from scapy.contrib.gtp import GTP_U_Header  # type: ignore[import-untyped]
    from scapy.contrib.mpls import MPLS  # type: ignore[import-untyped]

    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 30
    f = flow(cfg, tunnel, count, pps=1000, size=256)
    eth = f.packet.ethernet()[-1]
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    if tunnel == "mpls":
        f.packet.mpls()[-1].label.value = 100
        f.packet.mpls()[-1].label.value = 200
    else:
        outer = f.packet.ipv4()[-1]
        outer.src.value, outer.dst.value = "192.0.2.1", "192.0.2.2"
        if tunnel in ("vxlan", "gtpv1"):
            f.packet.udp()
        if tunnel == "vxlan":
            f.packet.vxlan()[-1].vni.value = 4660
            inner_eth = f.packet.ethernet()[-1]
            inner_eth.src.value, inner_eth.dst.value = "02:00:00:00:01:01", "02:00:00:00:01:02"
        elif tunnel == "gre":
            f.packet.gre()
        else:
            f.packet.gtpv1()[-1].teid.value = 77
    ip = f.packet.ipv4()[-1]
    ip.src.value, ip.dst.value = "10.0.0.1", "10.0.0.2"
    udp = f.packet.udp()[-1]
    udp.src_port.increment.start, udp.src_port.increment.count = 3000, 3
    udp.dst_port.value = 4323
    with capture(testbed, tmp_path / "t.pcap", "ip or mpls"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (count, count), f"expected {count} {tunnel} frames sent and metered; got {m.frames_tx}, {m.frames_rx}"
    layer = {"vxlan": VXLAN, "gre": GRE, "mpls": MPLS, "gtpv1": GTP_U_Header}[tunnel]
    pkts = [p for p in rdpcap(str(tmp_path / "t.pcap")) if layer in p and UDP in p[layer] and p[layer][UDP].dport == 4323]
    assert len(pkts) == count, f"expected {count} {tunnel} frames Scapy decodes to the inner UDP; got {len(pkts)}"
    inner = [p[layer][IP] for p in pkts]
    assert {(i.src, i.dst) for i in inner} == {("10.0.0.1", "10.0.0.2")}, inner[0].summary()
    assert [i[UDP].sport for i in inner] == [3000 + k % 3 for k in range(count)]
    assert all(len(p) == 252 for p in pkts), f"expected 252-byte frames (256 with FCS); got {sorted({len(p) for p in pkts})}"
    if tunnel == "vxlan":
        assert {p[VXLAN].vni for p in pkts} == {4660} and {p[VXLAN][Ether].dst for p in pkts} == {"02:00:00:00:01:02"}
        # As ixia-c sends it (its issue #112): the inner frame ends with its own FCS, and the
        # inner IPv4 length leaves room for it (252 - 14 - 20 - 8 - 8 - 14 - 4 = 184).
        frames = [bytes(p[VXLAN].payload) for p in pkts]
        fcs = [(f[-4:], zlib.crc32(f[:-4]).to_bytes(4, "little")) for f in frames]
        assert all(got == want for got, want in fcs), f"expected each inner FCS to be the inner frame's CRC-32; got {fcs[:2]}"
        assert {i.len for i in inner} == {184}, f"expected inner IPv4 length 184 (the inner FCS left out); got {sorted({i.len for i in inner})}"
    if tunnel == "gtpv1":
        assert {p[GTP_U_Header].teid for p in pkts} == {77}
    if tunnel == "mpls":
        assert {(p[MPLS].label, p[MPLS].payload.label) for p in pkts} == {(100, 200)}
    problems = tshark_problems(tmp_path / "t.pcap")
    assert problems == "", f"expected tshark to find no malformed frame or bad checksum; got {problems}"


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_a_capture_on_the_rx_port_holds_every_frame_with_nanosecond_times(server: Server, transport: str, testbed: Testbed,
                                                                         tmp_path: Path, fmt: str) -> None:
    import io

    from scapy.all import PcapNgReader, PcapReader  # type: ignore[import-untyped]

    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 40
    f = flow(cfg, "cap", count, pps=1000, size=200)
    eth, _ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    udp.dst_port.value = 4324
    c = cfg.captures.capture(name="c1")[-1]
    c.port_names = ["p2"]
    c.format = fmt
    c.packet_size = 100
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    req = a.metrics_request()
    req.port.port_names = ["p2"]
    assert a.get_metrics(req).port_metrics[0].capture == "started"
    m = run_to_stop(a, cfg, set_config=False)[0]
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    assert a.get_metrics(req).port_metrics[0].capture == "stopped"
    creq = a.capture_request()
    creq.port_name = "p2"
    data = a.get_capture(creq).read()
    reader = PcapNgReader if fmt == "pcapng" else PcapReader
    pkts = [p for p in reader(io.BytesIO(data)) if UDP in p and p[UDP].dport == 4324]
    assert (m.frames_rx, len(pkts)) == (count, count), f"expected the {count} frames the meter took in the capture; got {m.frames_rx} metered, {len(pkts)} captured"
    assert {len(p) for p in pkts} == {100}, f"expected frames cut to packet_size 100; got {sorted({len(p) for p in pkts})}"
    assert {p.wirelen for p in pkts} == {200}, f"expected the wire length kept (the flow's 200 B, FCS included); got {sorted({p.wirelen for p in pkts})}"
    ts = [int(p.time * 1_000_000_000) for p in pkts]
    assert ts == sorted(ts) and len(set(t % 1000 for t in ts)) > 1, f"expected increasing nanosecond times; got {ts[:5]}"
    gaps = [b - a_ for a_, b in zip(ts, ts[1:])]
    assert 0.5e6 < sorted(gaps)[len(gaps) // 2] < 1.5e6, f"expected a median gap near 1 ms at 1000 pps; got {sorted(gaps)[len(gaps) // 2]}"


def test_capture_filters_are_refused_with_their_path(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    flow(cfg, "cap", 10).packet.ethernet().ipv4().udp()
    c = cfg.captures.capture(name="c1")[-1]
    c.port_names = ["p2"]
    c.filters.ethernet()
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert "captures[0].filters" in str(e.value) and "Fix" in str(e.value), str(e.value)


DEV_MAC = ("00:00:01:01:01:01", "00:00:01:01:01:02")


def devices_config(a: Any, tb: Testbed, version: int, gateway: str = "") -> tuple[Any, Any]:
    """Two devices back to back across the testbed, each the other's gateway, and one flow
    between their addresses."""
    cfg, _, _ = config(a, tb)
    addrs = ("192.0.2.1", "192.0.2.2") if version == 4 else ("2001:db8:1::1", "2001:db8:1::2")
    for k, port in enumerate(("p1", "p2")):
        d = cfg.devices.device(name=f"d{k + 1}")[-1]
        e = d.ethernets.add()
        e.name, e.mac = f"d{k + 1}.eth", DEV_MAC[k]
        e.connection.port_name = port
        ips = e.ipv4_addresses if version == 4 else e.ipv6_addresses
        ip = ips.add()
        ip.name, ip.address = f"d{k + 1}.ip", addrs[k]
        ip.gateway = gateway if (gateway and k == 0) else addrs[1 - k]
        ip.prefix = 24 if version == 4 else 64
    f = cfg.flows.flow(name="dev")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.ip"], ["d2.ip"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 200
    f.metrics.enable = True
    f.packet.ethernet()
    (f.packet.ipv4() if version == 4 else f.packet.ipv6())
    f.packet.udp()[-1].dst_port.value = 4325
    return cfg, f


@pytest.mark.parametrize("version", [4, 6])
def test_device_flows_resolve_their_gateway_and_every_frame_arrives(server: Server, transport: str, testbed: Testbed,
                                                                  tmp_path: Path, version: int) -> None:
    a = api(server, transport)
    cfg, _ = devices_config(a, testbed, version)
    with capture(testbed, tmp_path / "d.pcap", "udp port 4325"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (200, 200), f"expected 200 sent and received between the devices; got {m.frames_tx}, {m.frames_rx}"
    from scapy.all import Ether  # type: ignore[import-untyped]

    pkts = rdpcap(str(tmp_path / "d.pcap"))
    assert len(pkts) == 200, f"expected 200 frames on the wire; got {len(pkts)}"
    ipl = IPv6 if version == 6 else __import__("scapy.all", fromlist=["IP"]).IP
    got = {(p[Ether].src, p[Ether].dst, p[ipl].src, p[ipl].dst) for p in pkts}
    want_ips = ("192.0.2.1", "192.0.2.2") if version == 4 else ("2001:db8:1::1", "2001:db8:1::2")
    assert got == {(DEV_MAC[0], DEV_MAC[1], *want_ips)}, f"expected d1 -> d2 by the resolved MAC; got {got}"
    req = a.states_request()
    key = "ipv4_neighbors" if version == 4 else "ipv6_neighbors"
    req.choice = key
    getattr(req, key).ethernet_names = ["d1.eth"]
    rows = list(getattr(a.get_states(req), key))
    addr = "ipv4_address" if version == 4 else "ipv6_address"
    found = {(r.ethernet_name, getattr(r, addr), r.link_layer_address) for r in rows}
    assert ("d1.eth", want_ips[1], DEV_MAC[1]) in found, f"expected d1's neighbour {want_ips[1]} at {DEV_MAC[1]}; got {found}"


@pytest.mark.parametrize("tags", [[(100, "x8100", 3)], [(300, "x88A8", 0), (100, "x8100", 5)]], ids=["dot1q", "qinq"])
def test_devices_on_vlans_resolve_tagged_and_their_flows_go_tagged(server: Server, transport: str, testbed: Testbed,
                                                                 tmp_path: Path, tags: list[tuple[int, str, int]]) -> None:
    a = api(server, transport)
    cfg, _ = devices_config(a, testbed, 4)
    for d in cfg.devices:
        for vid, tpid, prio in tags:
            v = d.ethernets[0].vlans.add()
            v.name, v.id, v.tpid, v.priority = f"{d.name}.v{vid}", vid, tpid, prio
    with capture(testbed, tmp_path / "v.pcap", "vlan"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (200, 200), f"expected 200 sent and received between the tagged devices; got {m.frames_tx}, {m.frames_rx}"
    from scapy.all import ARP, Dot1AD, Dot1Q, Ether  # type: ignore[import-untyped]

    pkts = rdpcap(str(tmp_path / "v.pcap"))
    flow = [p for p in pkts if UDP in p and p[UDP].dport == 4325]
    assert len(flow) == 200, f"expected the 200 flow frames tagged on the wire; got {len(flow)} of {len(pkts)} tagged frames"

    def stack(p: Any) -> list[tuple[int, int, int]]:
        out, layer, tpid = [], p[Ether].payload, p[Ether].type
        while isinstance(layer, (Dot1Q, Dot1AD)):
            out.append((tpid, layer.vlan, layer.prio))
            tpid, layer = layer.type, layer.payload
        return out

    want = [(0x8100 if t == "x8100" else 0x88A8, vid, prio) for vid, t, prio in tags]
    assert {tuple(stack(p)) for p in flow} == {tuple(want)}, f"expected every flow frame tagged {want}; got {({tuple(stack(p)) for p in flow})}"
    arps = [p for p in pkts if ARP in p]
    assert arps and all(len(stack(p)) == len(tags) and [s[1] for s in stack(p)] == [t[0] for t in tags] for p in arps), \
        f"expected the gateway's ARP on the wire with the device's tags; got {[stack(p) for p in arps]}"
    req = a.states_request()
    req.choice = "ipv4_neighbors"
    req.ipv4_neighbors.ethernet_names = ["d1.eth"]
    found = {(r.ipv4_address, r.link_layer_address) for r in a.get_states(req).ipv4_neighbors}
    assert ("192.0.2.2", DEV_MAC[1]) in found, f"expected d1's tagged neighbour 192.0.2.2 at {DEV_MAC[1]}; got {found}"


def start_unresolved(a: Any, gateway: str) -> List[str]:
    """Starts every flow of a config whose device flow's gateway `gateway` cannot answer;
    returns the start's warnings, after checking the start gave up within its 3 s bound."""
    cs = a.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    t0 = time.monotonic()
    warnings = list(a.set_control_state(cs).warnings or [])
    took = time.monotonic() - t0
    assert took < 8, f"expected the start to give up on {gateway} within its 3 s bound; took {took:.1f} s"
    return warnings


def test_devices_on_different_vlans_do_not_hear_each_other(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _ = devices_config(a, testbed, 4)
    for d, vid in zip(cfg.devices, (100, 200)):
        v = d.ethernets[0].vlans.add()
        v.name, v.id = f"{d.name}.v", vid
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    warnings = start_unresolved(a, "192.0.2.2")
    wait_stopped(a)
    assert any("192.0.2.2" in w for w in warnings), f"expected d1 (VLAN 100) unable to resolve d2 (VLAN 200); got {warnings}"


def test_an_unresolvable_gateway_sends_to_the_models_default_mac_and_the_start_warns(server: Server, transport: str,
                                                                                     testbed: Testbed, tmp_path: Path) -> None:
    """The model: an implementation unable to generate an `auto` value uses its default. So a
    flow whose gateway never answers goes to 00:00:00:00:00:00 (here the veth delivers it and
    the meter counts it), and the start's warning names the flow, the gateway and the fix."""
    from scapy.all import Ether  # type: ignore[import-untyped]

    a = api(server, transport)
    cfg, _ = devices_config(a, testbed, 4, gateway="192.0.2.99")
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    with capture(testbed, tmp_path / "u.pcap", "udp port 4325"):
        warnings = start_unresolved(a, "192.0.2.99")
        m = wait_stopped(a)[0]
    assert len(warnings) == 1 and all(k in warnings[0] for k in ('flow "dev"', "192.0.2.99", "00:00:00:00:00:00", "Fix")), \
        f"expected one warning naming the flow, the gateway, the MAC used and the fix; got {warnings}"
    assert (m.frames_tx, m.frames_rx) == (200, 200), f"expected 200 sent and metered; got {m.frames_tx}, {m.frames_rx}"
    dsts = {p[Ether].dst for p in rdpcap(str(tmp_path / "u.pcap"))}
    assert dsts == {"00:00:00:00:00:00"}, f"expected every frame to 00:00:00:00:00:00; got {dsts}"


def test_ipv6_with_an_incrementing_source_address(server: Server, transport: str, testbed: Testbed, tmp_path: Path) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    count = 40
    f = flow(cfg, "v6", count, pps=1000, size=128)
    eth, ip6, udp = f.packet.ethernet().ipv6().udp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip6.src.increment.start, ip6.src.increment.step, ip6.src.increment.count = "2001:db8::1", "::1", 4
    ip6.dst.value = "2001:db8::ff"
    udp.src_port.value, udp.dst_port.value = 1111, 2222
    with capture(testbed, tmp_path / "c.pcap"):
        m = run_to_stop(a, cfg)[0]
    assert (m.frames_tx, m.frames_rx) == (count, count), f"expected {count} each way; got {m.frames_tx}, {m.frames_rx}"
    pkts = [p for p in rdpcap(str(tmp_path / "c.pcap")) if IPv6 in p and UDP in p and p[UDP].dport == 2222]
    got = [p[IPv6].src for p in pkts]
    want = [f"2001:db8::{1 + k % 4}" for k in range(count)]
    assert got == want, f"expected IPv6 sources {want[:6]}...; got {got[:6]}..."
    assert {p[IPv6].dst for p in pkts} == {"2001:db8::ff"}
    assert all(len(p) == 124 for p in pkts), f"expected 124-byte frames (128 with FCS); got {sorted({len(p) for p in pkts})}"


def test_continuous_flow_stopped_by_the_script_and_a_rate_in_mbps(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    f = cfg.flows.flow(name="cont")[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    f.packet.ethernet().ipv4().udp()
    f.size.fixed = 1000
    f.rate.mbps = 8  # 1000 frames/s of 1000 B at L2
    cs = start_traffic(a, cfg)
    time.sleep(1.0)
    req = a.metrics_request()
    req.flow.flow_names = ["cont"]
    live = a.get_metrics(req).flow_metrics[0]
    assert live.transmit == "started" and live.frames_tx > 0, live
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
    a.set_control_state(cs)
    # Stop answers once the run has ended: its counts are final and a new config is taken.
    m = a.get_metrics(req).flow_metrics[0]
    assert m.transmit == "stopped", f"expected the flow stopped when stop answered; got {m.transmit}"
    assert 600 <= m.frames_tx <= 1600, f"expected about 1000 frames in ~1 s at 8 Mbit/s of 1000 B; got {m.frames_tx}"
    assert m.frames_rx + m.frames_tx * m.loss / 100 == pytest.approx(m.frames_tx), m
    time.sleep(0.3)
    again = a.get_metrics(req).flow_metrics[0]
    assert (again.frames_tx, again.frames_rx) == (m.frames_tx, m.frames_rx), \
        f"expected the counts final at the stop's answer; got {(m.frames_tx, m.frames_rx)} then {(again.frames_tx, again.frames_rx)}"
    a.set_config(cfg)  # no 409: nothing runs any more


def test_stopping_some_flows_of_a_run_is_refused_naming_the_others(server: Server, transport: str, testbed: Testbed) -> None:
    """Flows started together are one send loop: stopping one of them would stop the others,
    so it is refused with their names, and they go on; an unknown flow is refused by name."""
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    for name in ("one", "other"):
        flow(cfg, name, 3000, pps=1000).packet.ethernet().ipv4().udp()
    cs = start_traffic(a, cfg)
    try:
        for names, want in ((["one"], 'flows ["other"] were started with these'), (["nosuch"], "no flow named \"nosuch\"")):
            cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
            cs.traffic.flow_transmit.flow_names = names
            with pytest.raises(Exception) as e:
                a.set_control_state(cs)
            said = " ".join(str(e.value).split()).replace("\\", "")
            assert "flow_transmit.flow_names" in said and want in said, \
                f"expected {want!r} by its path; got {said}"
        req = a.metrics_request()
        req.flow.flow_names = []
        assert all(m.transmit == "started" for m in a.get_metrics(req).flow_metrics), "expected both flows still sent"
    finally:
        cs.traffic.flow_transmit.flow_names = []
        cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
        a.set_control_state(cs)


def test_a_paused_flow_sends_nothing_while_the_other_goes_on_then_resumes(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    for name in ("held", "free"):
        flow(cfg, name, 3000, pps=2000).packet.ethernet().ipv4().udp()
    cs = start_traffic(a, cfg)
    time.sleep(0.3)
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.PAUSE
    cs.traffic.flow_transmit.flow_names = ["held"]
    a.set_control_state(cs)
    req = a.metrics_request()
    req.flow.flow_names = []

    def metrics() -> dict[str, Any]:
        return {m.name: m for m in a.get_metrics(req).flow_metrics}

    time.sleep(0.3)  # past the next snapshot
    m0 = metrics()
    time.sleep(0.6)
    m1 = metrics()
    assert m1["held"].transmit == "paused", f"expected held paused, got {m1['held'].transmit}"
    assert m1["free"].transmit in ("started", "stopped"), m1["free"]
    assert m1["held"].frames_tx == m0["held"].frames_tx, \
        f"expected no frames of a paused flow in 0.6 s: {m0['held'].frames_tx} then {m1['held'].frames_tx}"
    assert m0["held"].frames_tx < 3000, f"expected held paused before its end, sent {m0['held'].frames_tx}"
    assert m1["free"].frames_tx >= min(3000, m0["free"].frames_tx + 800), \
        f"expected free to go on at 2000 frames/s: {m0['free'].frames_tx} then {m1['free'].frames_tx}"
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.RESUME
    a.set_control_state(cs)
    t0 = time.monotonic()
    while True:
        m = list(a.get_metrics(req).flow_metrics)
        if all(x.transmit == "stopped" for x in m):
            break
        assert time.monotonic() - t0 < 20, f"expected both flows to end after the resume; got {[(x.name, x.transmit) for x in m]}"
        time.sleep(0.2)
    for x in m:
        assert (x.frames_tx, x.frames_rx) == (3000, 3000), f"{x.name}: expected 3000 sent and received, got {(x.frames_tx, x.frames_rx)}"
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.PAUSE
    cs.traffic.flow_transmit.flow_names = ["held"]
    with pytest.raises(Exception) as e:
        a.set_control_state(cs)
    assert "not being sent" in str(e.value), f"expected a paused flow that has ended refused by name, got {e.value}"


def test_update_config_changes_a_running_flows_rate_and_size_seen_at_the_sink(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    for name in ("fast", "same"):
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
        f.packet.ethernet().ipv4().udp()
        f.size.fixed, f.rate.pps = 128, 1000
        f.metrics.enable = True
    cs = start_traffic(a, cfg)
    time.sleep(0.5)
    req = a.metrics_request()
    req.flow.flow_names = []

    def sample() -> dict[str, Any]:
        return {m.name: (m.frames_tx, m.frames_rx, m.bytes_rx) for m in a.get_metrics(req).flow_metrics}

    def update(prop: str, edit: Any) -> None:
        cu = a.config_update()
        cu.flows.property_names = [prop]
        changed = cfg.flows[0]
        edit(changed)
        cu.flows.flows.append(changed)
        a.update_config(cu)

    update("rate", lambda f: setattr(f.rate, "pps", 3000))
    update("size", lambda f: setattr(f.size, "fixed", 100))
    time.sleep(0.4)  # past the change and the next snapshot of both ends
    s0 = sample()
    time.sleep(1.5)
    s1 = sample()
    d = {k: [s1[k][i] - s0[k][i] for i in range(3)] for k in s0}
    tx_ratio, rx_ratio = d["fast"][0] / max(1, d["same"][0]), d["fast"][1] / max(1, d["same"][1])
    assert 2.4 < tx_ratio < 3.6 and 2.4 < rx_ratio < 3.6, \
        f"expected fast at 3x same's rate, sent and received, after the update; got {s0} then {s1}"
    assert d["fast"][2] == 100 * d["fast"][1], f"expected 100 B frames of fast at the sink, got {d['fast']} (frames, bytes)"
    assert d["same"][2] == 128 * d["same"][1], f"expected same's 128 B frames unchanged, got {d['same']}"
    assert (a.get_config().flows[0].rate.pps, a.get_config().flows[0].size.fixed) == (3000, 100)
    with pytest.raises(Exception) as e:
        update("size", lambda f: setattr(f.size, "fixed", 256))
    said = " ".join(str(e.value).split())
    assert "larger than the largest this run was started with" in said, f"expected 256 B refused while sent, got {said}"
    assert a.get_config().flows[0].size.fixed == 100, "expected a refused update to change nothing"
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.STOP
    a.set_control_state(cs)
    t0 = time.monotonic()
    while not all(m.transmit == "stopped" for m in a.get_metrics(req).flow_metrics):
        assert time.monotonic() - t0 < 5, "expected the flows to stop within 5 s"
        time.sleep(0.1)
    update("size", lambda f: setattr(f.size, "fixed", 256))  # stopped: taken for the next start
    assert a.get_config().flows[0].size.fixed == 256


def test_grpc_streaming_calls_chunk_the_config_metrics_states_and_capture(server: Server, testbed: Testbed) -> None:
    """snappi with enable_grpc_streaming, chunks of 16 B: streamSetConfig, streamGetConfig,
    streamSetControlState, streamGetMetrics, streamGetStates and streamGetCapture: requests go
    in many otg.Data chunks, replies in chunks of up to 4 MiB (several chunks are the Rust
    test's), and the answers are those of the unary calls."""
    import io

    from scapy.all import PcapReader  # type: ignore[import-untyped]

    a = api(server, "grpc")
    a.enable_grpc_streaming = True
    a._chunk_size = 16  # the setter takes MiB; small chunks make every request several
    cfg, _ = devices_config(a, testbed, 4)
    cfg.flows[0].duration.fixed_packets.packets = 100
    c = cfg.captures.capture(name="c1")[-1]
    c.port_names, c.format = ["p2"], "pcap"
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    got = a.get_config()
    assert [f.name for f in got.flows] == ["dev"] and [d.name for d in got.devices] == ["d1", "d2"], f"expected the config back through streamGetConfig; got {got}"
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    m = run_to_stop(a, cfg, set_config=False)[0]
    assert (m.frames_tx, m.frames_rx) == (100, 100), f"expected 100 sent and received, metrics through streamGetMetrics; got {m.frames_tx}, {m.frames_rx}"
    req = a.states_request()
    req.choice = "ipv4_neighbors"
    found = {(r.ethernet_name, r.ipv4_address, r.link_layer_address) for r in a.get_states(req).ipv4_neighbors}
    assert ("d1.eth", "192.0.2.2", DEV_MAC[1]) in found, f"expected d1's neighbour through streamGetStates; got {found}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    creq = a.capture_request()
    creq.port_name = "p2"
    data = a.get_capture(creq).read()
    pkts = [p for p in PcapReader(io.BytesIO(data)) if UDP in p and p[UDP].dport == 4325]
    assert len(pkts) == 100, f"expected the 100 frames in a capture of several chunks; got {len(pkts)} in {len(data)} B"


def test_what_gapless_cannot_send_is_a_validation_error_naming_the_path(server: Server, transport: str, testbed: Testbed) -> None:
    a = api(server, transport)
    cfg, _, _ = config(a, testbed)
    f = flow(cfg, "ppp", 10)
    f.packet.ethernet().ppp()
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    text = str(e.value)
    assert "flows[0].packet[1].choice" in text and "ppp" in text, f"expected the unsupported header's path; got {text}"
    assert "400" in text or "validation" in text, text


def test_the_snappi_example_script_runs_against_the_server(server: Server, testbed: Testbed) -> None:
    import sys

    from conftest import EXAMPLES

    p = subprocess.run([sys.executable, str(EXAMPLES / "otg" / "snappi_quickstart.py"), server.otg, testbed.name],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"expected the example to exit 0; got {p.returncode}: {p.stdout}{p.stderr}"
    for flow in ("udp", "tcp"):
        assert f"{flow}: sent 1000, received 1000" in p.stdout, f"expected {flow} 1000/1000 in: {p.stdout}"
    assert "latency p99.9" in p.stdout and "schedule" in p.stdout, p.stdout


def test_the_snappi_devices_example_runs_against_the_server(server: Server, testbed: Testbed) -> None:
    import sys

    from conftest import EXAMPLES

    p = subprocess.run([sys.executable, str(EXAMPLES / "otg" / "snappi_devices.py"), server.otg, testbed.name],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"expected the example to exit 0; got {p.returncode}: {p.stdout}{p.stderr}"
    assert "d1-to-d2: sent 1000, received 1000" in p.stdout, f"expected 1000/1000 between the devices in: {p.stdout}"
    assert "d1.eth: 192.0.2.2 is at 00:00:01:01:01:02" in p.stdout, f"expected d1's resolved gateway in: {p.stdout}"


def test_the_raw_grpc_example_runs_against_the_server(server: Server, testbed: Testbed) -> None:
    """grpcio with the stubs snappi's wheel ships, no snappi wrapper: what gosnappi-free gRPC
    clients do."""
    import sys

    from conftest import EXAMPLES

    p = subprocess.run([sys.executable, str(EXAMPLES / "otg" / "grpc_raw.py"), server.grpc, testbed.name],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"expected the example to exit 0; got {p.returncode}: {p.stdout}{p.stderr}"
    assert "version: 1.62.0" in p.stdout and "udp: sent 1000, received 1000" in p.stdout, p.stdout


def test_the_committed_otg_descriptor_matches_the_pinned_snappi() -> None:
    """The gRPC listener reads messages with crates/gapless-serve/proto/otg.fds: it must be
    the one snappi's wheel (the pinned version) ships."""
    import sys

    from conftest import REPO

    p = subprocess.run([sys.executable, str(REPO / "scripts" / "otg_descriptor.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"expected otg.fds to match snappi's otg_pb2; got {p.stdout}{p.stderr}"
