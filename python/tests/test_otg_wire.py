"""What a script sets is what goes on the wire (issue 67), end to end: snappi sets header fields
that gapless used to take and drop (IPv4 priority raw and TOS bits, ECN beside DSCP, DF and
identification lists, IPv6 traffic class and flow label lists, an IPv6 header with its addresses
left out, TCP flag lists, IPv4 options) on flows between two veths in one namespace as ixia-c users wire them;
the capture is read by Scapy, a decoder we did not write. A field gapless does not apply is
refused with its path, over HTTPS and gRPC. One config, one run of 8 frames per flow: about 5 s."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterator

import pytest
import snappi  # type: ignore[import-untyped]

from conftest import Server
from test_otg import api, run_to_stop
from test_otg_ixia import A, MAC_A, MAC_Z, Z, two_veths

NS = "glwt"
COUNT = 8


@pytest.fixture(scope="module")
def veths() -> Iterator[str]:
    with two_veths(NS) as ns:
        yield ns


def flow(cfg: Any, name: str, dport: int) -> Any:
    """A flow of COUNT frames p1 -> p2 whose UDP or TCP destination port names it."""
    f = cfg.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 1000, COUNT
    f.metrics.enable = True
    eth = f.packet.ethernet()[-1]
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    return f


def config(a: Any) -> Any:
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = flow(cfg, "raw", 5001)
    ip = f.packet.ipv4()[-1]
    ip.priority.raw.values = [184, 32]
    ip.identification.increment.start, ip.identification.increment.step, ip.identification.increment.count = 1000, 3, 4
    ip.dont_fragment.values = [1, 0]
    f.packet.udp()[-1].dst_port.value = 5001
    f = flow(cfg, "dscp_ecn", 5002)
    ip = f.packet.ipv4()[-1]
    ip.priority.dscp.phb.value, ip.priority.dscp.ecn.values = 46, [2, 1]
    f.packet.udp()[-1].dst_port.value = 5002
    f = flow(cfg, "tos_bits", 5003)
    tos = f.packet.ipv4()[-1].priority.tos
    tos.precedence.value, tos.delay.value, tos.reliability.value = 5, 1, 1
    f.packet.udp()[-1].dst_port.value = 5003
    f = flow(cfg, "v6", 5004)
    ip6 = f.packet.ipv6()[-1]
    ip6.traffic_class.values = [0xb8, 0x04]
    ip6.flow_label.increment.start, ip6.flow_label.increment.count = 0xabcde, 3
    f.packet.udp()[-1].dst_port.value = 5004
    f = flow(cfg, "tcp_flags", 5005)
    f.packet.ipv4()
    tcp = f.packet.tcp()[-1]
    tcp.dst_port.value, tcp.ctl_ack.value, tcp.ctl_syn.values = 5005, 1, [1, 0]
    tcp.ecn_cwr.values = [0, 0, 1]
    f = flow(cfg, "options", 5007)
    ip = f.packet.ipv4()[-1]
    ip.options.add().choice = "router_alert"
    custom = ip.options.add().custom
    custom.type.copied_flag.value, custom.type.option_class.value, custom.type.option_number.value = 1, 2, 7
    custom.value = "abcd"
    f.packet.udp()[-1].dst_port.value = 5007
    return cfg


def run_and_capture(a: Any, cfg: Any) -> bytes:
    """Sets `cfg` with a pcap capture on p2, runs its flows to their end (each counted whole:
    COUNT sent and received), and returns the capture."""
    c = cfg.captures.capture(name="c")[-1]
    c.port_names, c.format = ["p2"], "pcap"
    a.set_config(cfg)
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    for m in run_to_stop(a, None, set_config=False):
        assert (m.frames_tx, m.frames_rx) == (COUNT, COUNT), f"{m.name}: expected {COUNT} sent and received; got {m.frames_tx}, {m.frames_rx}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    req = a.capture_request()
    req.port_name = "p2"
    return bytes(a.get_capture(req).read())


def test_each_field_a_script_sets_is_on_the_wire_as_scapy_reads_it(server: Server, veths: str, tmp_path: Path) -> None:
    from scapy.all import IP, TCP, UDP, IPv6, PcapReader  # type: ignore[import-untyped]

    a = api(server, "https")
    pkts = [p for p in PcapReader(io.BytesIO(run_and_capture(a, config(a)))) if (UDP in p or TCP in p)]
    by = {n: [p for p in pkts if (p[UDP] if UDP in p else p[TCP]).dport == port]
          for n, port in (("raw", 5001), ("dscp_ecn", 5002), ("tos_bits", 5003), ("v6", 5004), ("tcp_flags", 5005), ("options", 5007))}
    for n, ps in by.items():
        assert len(ps) == COUNT, f"{n}: expected Scapy to read {COUNT} frames; got {len(ps)}"
    raw = by["raw"]
    assert [p[IP].tos for p in raw] == [(184, 32)[k % 2] for k in range(COUNT)], [p[IP].tos for p in raw]
    assert [p[IP].id for p in raw] == [1000 + 3 * (k % 4) for k in range(COUNT)], [p[IP].id for p in raw]
    assert [bool(p[IP].flags.DF) for p in raw] == [k % 2 == 0 for k in range(COUNT)], [str(p[IP].flags) for p in raw]
    assert [p[IP].tos for p in by["dscp_ecn"]] == [46 << 2 | (2, 1)[k % 2] for k in range(COUNT)]
    assert {p[IP].tos for p in by["tos_bits"]} == {5 << 5 | 1 << 4 | 1 << 2}
    assert {str(p[IP].flags) for p in by["tos_bits"]} == {""}, "DF 0, the model's default"
    v6 = by["v6"]
    assert all(IPv6 in p and p[IPv6].src == "2001:2::1" for p in v6), "an IPv6 header leaves as IPv6 from the testbed's pair"
    assert [p[IPv6].tc for p in v6] == [(0xb8, 0x04)[k % 2] for k in range(COUNT)], [p[IPv6].tc for p in v6]
    assert [p[IPv6].fl for p in v6] == [0xabcde + k % 3 for k in range(COUNT)], [p[IPv6].fl for p in v6]
    flags = [int(p[TCP].flags) for p in by["tcp_flags"]]
    assert flags == [0x10 | (0x02 if k % 2 == 0 else 0) | (0x80 if k % 3 == 2 else 0) for k in range(COUNT)], flags
    # Router Alert (RFC 2113), then the custom option: type 1|10|00111 = 0xc7, length 4, abcd.
    opts = {(p[IP].ihl, bytes(p[IP])[20:28].hex(), p[IP].len) for p in by["options"]}
    assert opts == {(7, "94040000c704abcd", 128 - 4 - 14)}, f"expected IHL 7 with both options and the total length counting them; got {opts}"
    read = {tuple(type(o).__name__ for o in p[IP].options) for p in by["options"]}
    assert read == {("IPOption_Router_Alert", "Raw")}, f"expected Scapy to read Router Alert, then bytes it has no class for; got {read}"


@pytest.mark.parametrize("transport", ["https", "grpc"])
def test_a_field_gapless_does_not_send_is_refused_with_its_path(server: Server, veths: str, transport: str) -> None:
    a = api(server, transport)
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = flow(cfg, "mf", 5006)
    f.packet.ipv4()[-1].more_fragments.value = 1
    f.packet.udp()
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    text = " ".join(str(e.value).replace("''", "'").split())  # snappi prints the error as YAML
    assert "flows[0].packet[1].ipv4.more_fragments" in text and "gapless sends the model's default, 0" in text, \
        f"expected the refusal to name the field's path; got {text}"
    # A valid config is taken after it.
    a.set_config(config(a))


def test_imix_payload_and_a_delay_in_microseconds_go_on_the_wire(server: Server, veths: str) -> None:
    """size.weight_pairs (the model's imix preset, 64:570:1518 at 7:4:1) in exact proportions
    over each cycle of 12 frames, one flow in the meter; a fixed payload pattern at the start
    of the UDP payload; a delay in microseconds taken; standard_imix's 58 and 62 B padded to
    64 B with the warning naming them. About 3 s."""
    from scapy.all import UDP, PcapReader  # type: ignore[import-untyped]

    a = api(server, "https")
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = flow(cfg, "imix", 5007)
    f.size.weight_pairs.predefined = "imix"
    f.duration.fixed_packets.packets = 24
    f.duration.fixed_packets.delay.microseconds = 1500
    f.payload.fixed.pattern, f.payload.fixed.repeat = "deadbeef", True
    f.packet.ipv4()
    f.packet.udp()[-1].dst_port.value = 5007
    g = flow(cfg, "runts", 5008)
    g.size.weight_pairs.predefined = "standard_imix"
    g.packet.ipv4()
    g.packet.udp()[-1].dst_port.value = 5008
    c = cfg.captures.capture(name="c")[-1]
    c.port_names, c.format = ["p2"], "pcap"
    said = " ".join(a.set_config(cfg).warnings)
    assert 'flow "runts": flows[1].size.weight_pairs: frames of [58, 62] B are sent as 64 B' in said, \
        f"expected the padding named in set_config's warnings; got {said!r}"
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    got = {m.name: m for m in run_to_stop(a, None, set_config=False)}
    assert (got["imix"].frames_tx, got["imix"].frames_rx) == (24, 24), f"expected 24 frames sent and received as one flow; got {got['imix']}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    req = a.capture_request()
    req.port_name = "p2"
    pkts = [p for p in PcapReader(io.BytesIO(a.get_capture(req).read())) if UDP in p]
    imix = [p for p in pkts if p[UDP].dport == 5007]
    sizes = sorted(len(p) for p in imix)  # the capture holds the FCS, as ixia-c's does
    assert sizes == sorted([64] * 14 + [570] * 8 + [1518] * 2), f"expected 7:4:1 of 64/570/1518 B twice over; got {sizes}"
    for p in imix:
        body = bytes(p[UDP])[8:p[UDP].len][:-16]  # the 16-byte signature ends it; the FCS follows
        want = (bytes.fromhex("deadbeef") * 400)[:len(body)]
        assert body == want, f"expected the pattern repeated over the {len(body)} B before the signature; got {body[:12].hex()}..."
    runts = [len(p) for p in pkts if p[UDP].dport == 5008]
    assert runts and min(runts) == 64 and set(runts) <= {64, 594, 1518}, f"expected 58/62 B sent as 64 B; got {sorted(set(runts))}"


@pytest.mark.parametrize("field,set_it,want", [
    ("gap", lambda f: setattr(f.duration.continuous, "gap", 20), "flows[0].duration.continuous.gap: 20 B is not supported"),
    ("rx_tx_ratio", lambda f: setattr(f.metrics.rx_tx_ratio, "value", 2.0), "flows[0].metrics.rx_tx_ratio: only a value of 1"),
    ("delay_bytes", lambda f: setattr(f.duration.fixed_packets.delay, "bytes", 100), "flows[0].duration.fixed_packets.delay.bytes"),
], ids=["gap", "rx_tx_ratio", "delay_bytes"])
def test_a_flow_level_field_gapless_does_not_do_is_refused_with_its_path(server: Server, veths: str, field: str, set_it: Any, want: str) -> None:
    a = api(server, "grpc")
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = flow(cfg, field, 5009)
    if field != "delay_bytes":
        f.duration.continuous.gap = 12
    set_it(f)
    f.packet.ipv4()
    f.packet.udp()
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    text = " ".join(str(e.value).replace("''", "'").split())
    assert want in text, f"expected {want!r}; got {text}"


def bare_ip_flow(cfg: Any, name: str, vlan: int, v6: bool, size: int) -> Any:
    """A flow of Ethernet, a VLAN tag and an IP header with nothing after it (most of
    featureprofiles' flows have this shape; its OSPFv3 test sends 64 B over IPv6)."""
    f = flow(cfg, name, 0)
    f.size.fixed = size
    f.packet.vlan()[-1].id.value = vlan
    if v6:
        ip = f.packet.ipv6()[-1]
        ip.src.value, ip.dst.value = "2001:db8::1", "2001:db8::2"
    else:
        ip = f.packet.ipv4()[-1]
        ip.src.value, ip.dst.value = "192.0.2.1", "192.0.2.2"
    return f


def test_a_flow_that_ends_at_ip_leaves_so_and_small_frames_are_counted_by_their_headers(server: Server, veths: str) -> None:
    """No invented layer 4: Ethernet/VLAN/IPv4 leaves with protocol 61 (the model's auto), the
    signature at the end of the IP payload, latency measured; Ethernet/VLAN/IPv6 at 64 B (no
    room for the signature) leaves with next header 59 and is counted per flow by its VLAN,
    the warning naming the figures it lacks; a set protocol goes out as set. About 3 s."""
    from scapy.all import IP, Dot1Q, IPv6, PcapReader  # type: ignore[import-untyped]

    a = api(server, "https")
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    bare_ip_flow(cfg, "v4", 101, False, 128).metrics.latency.enable = True
    bare_ip_flow(cfg, "v6_small_a", 102, True, 64)
    bare_ip_flow(cfg, "v6_small_b", 103, True, 64)
    bare_ip_flow(cfg, "ospf", 104, False, 128).packet[-1].protocol.value = 89
    c = cfg.captures.capture(name="c")[-1]
    c.port_names, c.format = ["p2"], "pcap"
    said = " ".join(a.set_config(cfg).warnings)
    for n in ("v6_small_a", "v6_small_b"):
        assert f'flow "{n}": its 64 B frames have no room' in said and "no latency, sequence loss, reordering" in said, \
            f"expected a warning naming {n} and the figures it lacks; got {said!r}"
    assert '"v4"' not in said, f"expected no warning for the 128 B IPv4 flow; got {said!r}"
    cs = a.control_state()
    cs.port.capture.port_names, cs.port.capture.state = ["p2"], "start"
    a.set_control_state(cs)
    req = a.metrics_request()
    req.flow.flow_names = []
    req.flow.metric_names = ["frames_tx", "frames_rx"]
    got = {m.name: m for m in run_to_stop(a, None, set_config=False)}
    for n, m in got.items():
        assert (m.frames_tx, m.frames_rx) == (COUNT, COUNT), f"{n}: expected {COUNT} sent and {COUNT} counted; got {m.frames_tx}, {m.frames_rx}"
    cs.port.capture.state = "stop"
    a.set_control_state(cs)
    cap = a.capture_request()
    cap.port_name = "p2"
    pkts = [p for p in PcapReader(io.BytesIO(a.get_capture(cap).read())) if Dot1Q in p]
    by = {v: [p for p in pkts if p[Dot1Q].vlan == v] for v in (101, 102, 103, 104)}
    assert {v: len(ps) for v, ps in by.items()} == {v: COUNT for v in by}, f"expected {COUNT} frames per VLAN; got {[(v, len(ps)) for v, ps in by.items()]}"
    assert {(p[IP].proto, len(p)) for p in by[101]} == {(61, 128)}, f"expected IPv4 protocol 61 at 128 B; got {[(p[IP].proto, len(p)) for p in by[101]]}"
    assert {p[IP].proto for p in by[104]} == {89}, f"expected the protocol set, 89; got {[p[IP].proto for p in by[104]]}"
    for v in (102, 103):
        assert {(p[IPv6].nh, len(p)) for p in by[v]} == {(59, 64)}, f"expected next header 59 at 64 B; got {[(p[IPv6].nh, len(p)) for p in by[v]]}"
    lat = a.metrics_request()
    lat.flow.flow_names = ["v4"]
    m = a.get_metrics(lat).flow_metrics[0]
    assert m.latency.maximum_ns > 0, f"expected v4's frames signed (latency measured); got {m.latency}"


def test_two_small_flows_the_meter_cannot_tell_apart_are_refused_naming_both(server: Server, veths: str) -> None:
    a = api(server, "grpc")
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    bare_ip_flow(cfg, "x", 201, True, 64)
    bare_ip_flow(cfg, "y", 201, True, 64)
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    text = " ".join(str(e.value).replace("''", "'").split())
    assert 'flows "x" and "y"' in text and "do not tell them apart" in text and "vlan=201" in text, \
        f"expected the refusal to name both flows and their headers; got {text}"


def hand_config(a: Any) -> Any:
    """Flows p1 -> p2 whose versions, lengths, protocols and checksums are set by hand, each
    named by its UDP or TCP destination port (or ICMP echo id)."""
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = flow(cfg, "lengths", 6001)
    f.metrics.latency.enable = True
    ip = f.packet.ipv4()[-1]
    ip.total_length.value, ip.version.value, ip.protocol.value = 1000, 5, 99
    ip.header_checksum.generated = "bad"
    u = f.packet.udp()[-1]
    u.dst_port.value, u.length.value, u.checksum.custom = 6001, 9, 0x1234
    f = flow(cfg, "v6_lengths", 6002)
    ip6 = f.packet.ipv6()[-1]
    ip6.payload_length.value, ip6.version.value, ip6.next_header.value = 7, 7, 253
    f.packet.udp()[-1].dst_port.value = 6002
    f = flow(cfg, "tcp_bad", 6003)
    ip = f.packet.ipv4()[-1]
    ip.header_length.value = 6
    t = f.packet.tcp()[-1]
    t.dst_port.value, t.data_offset.value, t.checksum.generated = 6003, 15, "bad"
    f = flow(cfg, "icmp_custom", 0)
    f.packet.ipv4()
    e = f.packet.icmp()[-1].echo
    e.identifier.value, e.checksum.custom = 77, 0xbeef
    return cfg


def test_lengths_versions_and_checksums_set_by_hand_leave_as_given_and_are_metered(server: Server, veths: str) -> None:
    """Item 2: each field set by hand is read back by Scapy at its value; a checksum left good
    is good over the frame as sent, a bad one is bad on every frame, a custom one is itself;
    every flow is counted whole, and the one whose lengths mislead parsers keeps its latency
    (the signature read at the frame's end). About 3 s."""
    from scapy.all import ICMP, Ether, PcapReader  # type: ignore[import-untyped]
    from scapy.utils import checksum  # type: ignore[import-untyped]

    a = api(server, "grpc")
    raw = [bytes(p) for p in PcapReader(io.BytesIO(run_and_capture(a, hand_config(a))))]
    frames = [Ether(b) for b in raw]
    # Scapy reads version 5 as no IP header at all: these fields are read by their offsets.
    by_port = lambda et, at, port: [b for b in raw if b[12:14] == et and int.from_bytes(b[at:at + 2], "big") == port]
    v4 = by_port(b"\x08\x00", 36, 6001)
    v6 = by_port(b"\x86\xdd", 56, 6002)
    assert (len(v4), len(v6)) == (COUNT, COUNT), f"expected {COUNT} frames of each; got {len(v4)}, {len(v6)}"
    for b in v4:
        got = (b[14] >> 4, int.from_bytes(b[16:18], "big"), b[23], int.from_bytes(b[38:40], "big"), int.from_bytes(b[40:42], "big"))
        assert got == (5, 1000, 99, 9, 0x1234), f"expected version 5, total length 1000, protocol 99, UDP length 9, checksum 0x1234; got {got}"
        assert checksum(b[14:34]) == 0xfffe, f"expected the IPv4 checksum one off good; its sum gives {checksum(b[14:34]):#06x}"
    for b in v6:
        got = (b[14] >> 4, int.from_bytes(b[18:20], "big"), b[20])
        assert got == (7, 7, 253), f"expected IPv6 version 7, payload length 7, next header 253; got {got}"
    # IHL 6 makes Scapy read four bytes of TCP as IPv4 options: the TCP header is read at 34.
    tcp = [b for b in by_port(b"\x08\x00", 36, 6003) if b[23] == 6]
    icmp = [p for p in frames if ICMP in p and p[ICMP].id == 77]
    assert (len(tcp), len(icmp)) == (COUNT, COUNT), f"expected {COUNT} TCP and ICMP frames; got {len(tcp)}, {len(icmp)}"
    for b in tcp:
        assert (b[14] & 0xf, b[46] >> 4) == (6, 15), f"expected IHL 6 and data offset 15; got {b[14] & 0xf}, {b[46] >> 4}"
        assert checksum(b[14:34]) == 0, f"expected a good IPv4 checksum over the 20 bytes sent; got sum {checksum(b[14:34]):#06x}"
        seg = b[34:-4]  # the capture keeps each frame's FCS
        pseudo = b[26:34] + bytes([0, 6]) + len(seg).to_bytes(2, "big")
        assert checksum(pseudo + seg) == 0xfffe, f"expected the TCP checksum one off good; its sum gives {checksum(pseudo + seg):#06x}"
    assert {p[ICMP].chksum for p in icmp} == {0xbeef}, f"expected ICMP checksum 0xbeef; got {[hex(p[ICMP].chksum) for p in icmp]}"
    lat = a.metrics_request()
    lat.flow.flow_names = ["lengths"]
    m = a.get_metrics(lat).flow_metrics[0]
    assert m.latency.maximum_ns > 0, f"expected the lengths flow's signature read at the frame's end (latency measured); got {m.latency}"


def test_a_list_on_a_field_set_by_hand_is_refused_with_its_path(server: Server, veths: str) -> None:
    a = api(server, "https")
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = flow(cfg, "l", 6010)
    f.packet.ipv4()[-1].total_length.values = [100, 200]
    f.packet.udp()
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    text = " ".join(str(e.value).replace("''", "'").split())
    assert "flows[0].packet[1].ipv4.total_length: a field set by hand takes one value" in text, f"expected the path and the reason; got {text}"
