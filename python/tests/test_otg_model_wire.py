"""Every leaf of every flow header of the pinned OTG model (snappi 1.62.0's generated classes,
walked, not listed), set to a value other than its default, is either refused with its path or
leaves in the frame at the field's place, read back by Scapy (issue 67, item 4). The frames come
from `gapless otg frames`, which plans a config as `set_config` does and builds each flow's
first frames as the engine does: no server, no veths, a few seconds. A newer model's new
fields are walked too, and fail here until PLACES says where Scapy finds them.

The end-to-end checks over veths, tcpdump and Scapy are in test_otg_wire.py."""
from __future__ import annotations

import json
import subprocess
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
import snappi  # type: ignore[import-untyped]
from scapy.contrib.gtp import GTP_U_Header  # type: ignore[import-untyped]
from scapy.contrib.mpls import MPLS  # type: ignore[import-untyped]
from scapy.layers.inet import ICMP, IP, TCP, UDP  # type: ignore[import-untyped]
from scapy.layers.inet6 import IPv6, ICMPv6EchoRequest  # type: ignore[import-untyped]
from scapy.layers.l2 import ARP, Dot1Q, Ether, GRE  # type: ignore[import-untyped]
from scapy.layers.vxlan import VXLAN  # type: ignore[import-untyped]

from conftest import cli

S = snappi.snappi
HEADERS = {
    "ethernet": "FlowEthernet", "vlan": "FlowVlan", "ipv4": "FlowIpv4", "ipv6": "FlowIpv6",
    "udp": "FlowUdp", "tcp": "FlowTcp", "icmp": "FlowIcmp", "icmpv6": "FlowIcmpv6", "arp": "FlowArp",
    "vxlan": "FlowVxlan", "gre": "FlowGre", "mpls": "FlowMpls", "gtpv1": "FlowGtpv1",
}

ETH = {"dst": {"choice": "value", "value": "02:00:00:00:00:02"}, "src": {"choice": "value", "value": "02:00:00:00:00:01"}}
IP4 = {"src": {"choice": "value", "value": "198.18.0.1"}, "dst": {"choice": "value", "value": "198.18.0.2"}}
IP6 = {"src": {"choice": "value", "value": "2001:db8::1"}, "dst": {"choice": "value", "value": "2001:db8::2"}}
# Each header under test (*) in the stack it is sent in; the others as set here.
STACKS: Dict[str, List[Tuple[str, Dict[str, Any]]]] = {
    "ethernet": [("ethernet*", ETH), ("ipv4", IP4), ("udp", {})],
    "vlan": [("ethernet", ETH), ("vlan*", {}), ("ipv4", IP4), ("udp", {})],
    "ipv4": [("ethernet", ETH), ("ipv4*", IP4), ("udp", {})],
    "ipv6": [("ethernet", ETH), ("ipv6*", IP6), ("udp", {})],
    "udp": [("ethernet", ETH), ("ipv4", IP4), ("udp*", {})],
    "tcp": [("ethernet", ETH), ("ipv4", IP4), ("tcp*", {})],
    "icmp": [("ethernet", ETH), ("ipv4", IP4), ("icmp*", {})],
    "icmpv6": [("ethernet", ETH), ("ipv6", IP6), ("icmpv6*", {})],
    "arp": [("ethernet", ETH), ("arp*", {})],
    "vxlan": [("ethernet", ETH), ("ipv4", IP4), ("udp", {}), ("vxlan*", {}), ("ethernet", ETH), ("ipv4", IP4), ("udp", {})],
    "gre": [("ethernet", ETH), ("ipv4", IP4), ("gre*", {}), ("ipv4", IP4), ("udp", {})],
    "mpls": [("ethernet", ETH), ("mpls*", {}), ("ipv4", IP4), ("udp", {})],
    "gtpv1": [("ethernet", ETH), ("ipv4", IP4), ("udp", {}), ("gtpv1*", {}), ("ipv4", IP4), ("udp", {})],
}

Read = Callable[[Any], Any]


def bit(layer: Any, field: str, mask: int) -> Read:
    return lambda p: int(bool(int(p[layer].getfieldval(field)) & mask))


def f(layer: Any, field: str) -> Read:
    return lambda p: p[layer].getfieldval(field)


def tos(shift: int, width: int) -> Read:
    return lambda p: (p[IP].tos >> shift) & ((1 << width) - 1)


# Where Scapy finds each leaf: a reader of the decoded frame, or None where the model's field
# is not a header field (gapless must refuse it by its path).
PLACES: Dict[str, Optional[Read]] = {
    "ethernet.dst": f(Ether, "dst"), "ethernet.src": f(Ether, "src"), "ethernet.ether_type": f(Ether, "type"),
    "ethernet.pfc_queue": None,
    "vlan.priority": f(Dot1Q, "prio"), "vlan.cfi": f(Dot1Q, "dei"), "vlan.id": f(Dot1Q, "vlan"),
    "vlan.tpid": f(Ether, "type"),
    "ipv4.version": f(IP, "version"), "ipv4.header_length": f(IP, "ihl"), "ipv4.priority.raw": f(IP, "tos"),
    "ipv4.priority.tos.precedence": tos(5, 3), "ipv4.priority.tos.delay": tos(4, 1),
    "ipv4.priority.tos.throughput": tos(3, 1), "ipv4.priority.tos.reliability": tos(2, 1),
    "ipv4.priority.tos.monetary": tos(1, 1), "ipv4.priority.tos.unused": tos(0, 1),
    "ipv4.priority.dscp.phb": tos(2, 6), "ipv4.priority.dscp.ecn": tos(0, 2),
    "ipv4.total_length": f(IP, "len"), "ipv4.identification": f(IP, "id"), "ipv4.reserved": bit(IP, "flags", 4),
    "ipv4.dont_fragment": bit(IP, "flags", 2), "ipv4.more_fragments": bit(IP, "flags", 1),
    "ipv4.fragment_offset": f(IP, "frag"), "ipv4.time_to_live": f(IP, "ttl"), "ipv4.protocol": f(IP, "proto"),
    "ipv4.header_checksum": f(IP, "chksum"), "ipv4.src": f(IP, "src"), "ipv4.dst": f(IP, "dst"),
    "ipv4.options": lambda p: options_as_set(p[IP]),
    "ipv6.version": f(IPv6, "version"), "ipv6.traffic_class": f(IPv6, "tc"), "ipv6.flow_label": f(IPv6, "fl"),
    "ipv6.payload_length": f(IPv6, "plen"), "ipv6.next_header": f(IPv6, "nh"), "ipv6.hop_limit": f(IPv6, "hlim"),
    "ipv6.src": f(IPv6, "src"), "ipv6.dst": f(IPv6, "dst"),
    "ipv6.dst_usids.locator": None, "ipv6.dst_usids.locator_length": None, "ipv6.dst_usids.usids": None,
    "udp.src_port": f(UDP, "sport"), "udp.dst_port": f(UDP, "dport"), "udp.length": f(UDP, "len"),
    "udp.checksum": f(UDP, "chksum"),
    "tcp.src_port": f(TCP, "sport"), "tcp.dst_port": f(TCP, "dport"), "tcp.seq_num": f(TCP, "seq"),
    "tcp.ack_num": f(TCP, "ack"), "tcp.data_offset": f(TCP, "dataofs"), "tcp.ecn_ns": bit(TCP, "reserved", 1),
    "tcp.ecn_cwr": bit(TCP, "flags", 0x80), "tcp.ecn_echo": bit(TCP, "flags", 0x40),
    "tcp.ctl_urg": bit(TCP, "flags", 0x20), "tcp.ctl_ack": bit(TCP, "flags", 0x10),
    "tcp.ctl_psh": bit(TCP, "flags", 0x08), "tcp.ctl_rst": bit(TCP, "flags", 0x04),
    "tcp.ctl_syn": bit(TCP, "flags", 0x02), "tcp.ctl_fin": bit(TCP, "flags", 0x01), "tcp.window": f(TCP, "window"),
    "tcp.checksum": f(TCP, "chksum"),
    "icmp.echo.type": f(ICMP, "type"), "icmp.echo.code": f(ICMP, "code"), "icmp.echo.checksum": f(ICMP, "chksum"),
    "icmp.echo.identifier": f(ICMP, "id"), "icmp.echo.sequence_number": f(ICMP, "seq"),
    "icmpv6.echo.type": f(ICMPv6EchoRequest, "type"), "icmpv6.echo.code": f(ICMPv6EchoRequest, "code"),
    "icmpv6.echo.identifier": f(ICMPv6EchoRequest, "id"), "icmpv6.echo.sequence_number": f(ICMPv6EchoRequest, "seq"),
    "icmpv6.echo.checksum": f(ICMPv6EchoRequest, "cksum"),
    "arp.hardware_type": f(ARP, "hwtype"), "arp.protocol_type": f(ARP, "ptype"), "arp.hardware_length": f(ARP, "hwlen"),
    "arp.protocol_length": f(ARP, "plen"), "arp.operation": f(ARP, "op"), "arp.sender_hardware_addr": f(ARP, "hwsrc"),
    "arp.sender_protocol_addr": f(ARP, "psrc"), "arp.target_hardware_addr": f(ARP, "hwdst"),
    "arp.target_protocol_addr": f(ARP, "pdst"),
    "vxlan.flags": f(VXLAN, "flags"), "vxlan.reserved0": f(VXLAN, "reserved1"), "vxlan.vni": f(VXLAN, "vni"),
    "vxlan.reserved1": f(VXLAN, "reserved2"),
    "gre.checksum_present": f(GRE, "chksum_present"), "gre.reserved0": lambda p: gre_word(p) >> 3 & 0x1ff,
    "gre.version": f(GRE, "version"), "gre.protocol": f(GRE, "proto"), "gre.checksum": f(GRE, "chksum"),
    "gre.reserved1": f(GRE, "offset"),
    "mpls.label": f(MPLS, "label"), "mpls.traffic_class": f(MPLS, "cos"), "mpls.bottom_of_stack": f(MPLS, "s"),
    "mpls.time_to_live": f(MPLS, "ttl"),
    "gtpv1.version": f(GTP_U_Header, "version"), "gtpv1.protocol_type": f(GTP_U_Header, "PT"),
    "gtpv1.reserved": f(GTP_U_Header, "reserved"), "gtpv1.e_flag": f(GTP_U_Header, "E"),
    "gtpv1.s_flag": f(GTP_U_Header, "S"), "gtpv1.pn_flag": f(GTP_U_Header, "PN"),
    "gtpv1.message_type": f(GTP_U_Header, "gtp_type"), "gtpv1.message_length": f(GTP_U_Header, "length"),
    "gtpv1.teid": f(GTP_U_Header, "teid"), "gtpv1.squence_number": f(GTP_U_Header, "seq"),
    "gtpv1.n_pdu_number": f(GTP_U_Header, "npdu"), "gtpv1.next_extension_header_type": f(GTP_U_Header, "next_ex"),
    "gtpv1.extension_headers": None,
}


def options_as_set(ip: Any) -> Any:
    """The IPv4 options as the list a script set: this test sets one option left at the
    model's default (`{}`, choice router_alert), which leaves as RFC 2113's four bytes; any
    other bytes come back as hex, and fail the comparison with what was set."""
    raw = bytes(ip)[20:ip.ihl * 4]
    return [{}] if raw == bytes.fromhex("94040000") else raw.hex()


def gre_word(p: Any) -> int:
    """GRE's first 16 bits as sent: C, the reserved0 bits (12), version (3)."""
    raw = bytes(p[GRE])
    return int.from_bytes(raw[:2], "big")


def leaves(prefix: str, cls: Any) -> Iterator[Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    """Every leaf under `cls`: (path, the model's type of its value, its defaults; a pattern's
    choices under the key `choices`)."""
    for name, spec in cls._TYPES.items():
        ty = spec.get("type")
        if name == "choice":
            continue
        if not isinstance(ty, str) or ty.endswith("Iter"):
            yield prefix + name, spec, {}
            continue
        k = getattr(S, ty)
        if ty.startswith("PatternFlow") and ("value" in k._TYPES or "custom" in k._TYPES):
            dflt = {**getattr(k, "_DEFAULTS", {}), "choices": k._TYPES["choice"]["enum"]}
            yield prefix + name, k._TYPES.get("value", k._TYPES.get("custom")), dflt
        else:
            yield from leaves(prefix + name + ".", k)


def value_for(spec: Dict[str, Any], dflt: Dict[str, Any]) -> Any:
    """A value of the leaf's type other than its default: its largest (the field's width
    filled), or one below when that is the default."""
    fmt = spec.get("format")
    if fmt == "mac":
        return "02:aa:bb:cc:dd:ee"
    if fmt == "ipv4":
        return "10.1.2.3"
    if fmt == "ipv6":
        return "2001:db8::1234"
    top = spec.get("maximum", 0xFFFFFFFF)
    if top > 0xFFFF:
        return min(top, 0x89ABCDEF) if top != 0xFFFFFFFF else 0x89ABCDEF
    return top - 1 if dflt.get("value", dflt.get("auto")) == top else top


def pattern(spec: Dict[str, Any], dflt: Dict[str, Any], value: Any) -> Dict[str, Any]:
    if "custom" in dflt or dflt.get("choice") == "generated":
        return {"choice": "custom", "custom": value}
    return {"choice": "value", "value": value}


def nest(rest: List[str], leaf: Any) -> Dict[str, Any]:
    """The header body setting path `rest` (IPv4's priority gets its choice named; ICMP's
    `echo` choice is named by `config`)."""
    if len(rest) == 1:
        return {rest[0]: leaf}
    inner = nest(rest[1:], leaf)
    if rest[0] == "priority":
        return {"priority": {"choice": rest[1], **inner}}
    return {rest[0]: inner}


def config(header: str, body: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
    """A port flow of the header's stack, `body` merged into the header under test; its index."""
    packet, at = [], -1
    for i, (name, base) in enumerate(STACKS[header]):
        kind = name.rstrip("*")
        b = json.loads(json.dumps(base))
        if name.endswith("*"):
            at = i
            for k, v in body.items():
                b[k] = v
            if kind == "icmp" or kind == "icmpv6":
                b = {"choice": "echo", **b}
        elif kind in ("icmp", "icmpv6"):
            b = {"choice": "echo", "echo": {}}
        packet.append({"choice": kind, kind: b})
    cfg = {"ports": [{"name": "p1", "location": "a"}, {"name": "p2", "location": "b"}],
           "flows": [{"name": "f", "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
                      "size": {"choice": "fixed", "fixed": 256}, "packet": packet}]}
    return cfg, at


def on_wire_or_refused(path: str, leaf: Any, want: List[Any]) -> None:
    """Sets leaf `path` to `leaf` (a pattern, or a list for a list field) in its header's stack:
    `gapless otg frames` must refuse it naming the field's path, or send `want`, one value a
    frame, at the field's place as Scapy reads it."""
    header, rest = path.split(".")[0], path.split(".")[1:]
    cfg, at = config(header, nest(rest, leaf))
    p = subprocess.run([cli(), "otg", "frames", "-", "--count", str(len(want))], input=json.dumps(cfg),
                       capture_output=True, text=True, timeout=30)
    where = f"flows[0].packet[{at}].{header}.{rest[0]}"
    if p.returncode != 0:
        assert where in p.stderr, f"{path}: expected the refusal to name {where}; got {p.stderr.strip()!r}"
        return
    read = PLACES[path]
    assert read is not None, f"{path}: expected a refusal (not a header field gapless can send); it was taken: {cfg}"
    frames = [bytes.fromhex(x) for x in json.loads(p.stdout)["flows"][0]["frames"]]
    mac = isinstance(want[0], str) and len(want[0]) == 17
    got = [str(read(Ether(f))).lower() if mac else read(Ether(f)) for f in frames]
    assert got == want, f"{path}: expected {want!r} on the wire, one a frame; Scapy read {got!r} from {[f.hex() for f in frames]}"


def every_leaf() -> List[Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    return [x for h, c in HEADERS.items() for x in leaves(h + ".", getattr(S, c))]


def test_every_leaf_of_the_model_has_a_place_known_to_this_test() -> None:
    walked = {path for path, _, _ in every_leaf()}
    assert len(walked) >= 100, f"expected the model's 108 leaves of 1.62.0; walked {len(walked)}"
    assert walked == set(PLACES), f"new in the model: {sorted(walked - set(PLACES))}; gone: {sorted(set(PLACES) - walked)}"


def leaf_of(path: str, spec: Dict[str, Any], dflt: Dict[str, Any]) -> Tuple[Any, Any]:
    """What sets leaf `path` to its test value (a pattern, or a list for a list field), and
    that value."""
    if spec == {} or spec.get("type") is list or str(spec.get("type", "")).endswith("Iter"):
        value: Any = ["0000"] if path.endswith(".usids") else [{}]
        return value, value
    value = value_for(spec, dflt)
    return pattern(spec, dflt, value), value


@pytest.mark.parametrize("path", sorted(PLACES))
def test_a_leaf_set_by_a_script_is_on_the_wire_at_its_place_or_refused_by_its_path(path: str) -> None:
    spec, dflt = next((s, d) for p, s, d in every_leaf() if p == path)
    leaf, value = leaf_of(path, spec, dflt)
    on_wire_or_refused(path, leaf, [value])


def second_value(spec: Dict[str, Any], first: Any) -> Any:
    """Another value of the leaf's type, for a list of two."""
    fmt = spec.get("format")
    if fmt in ("mac", "ipv4", "ipv6"):
        return {"mac": "02:11:22:33:44:55", "ipv4": "10.9.8.7", "ipv6": "2001:db8::5678"}[fmt]
    return 1 if first != 1 else 0


LISTED = sorted(p for p, _, d in every_leaf() if "values" in d.get("choices", []))


@pytest.mark.parametrize("path", LISTED)
def test_a_list_of_values_goes_out_in_turn_or_is_refused_by_its_path(path: str) -> None:
    spec, dflt = next((s, d) for p, s, d in every_leaf() if p == path)
    a = value_for(spec, dflt)
    b = second_value(spec, a)
    on_wire_or_refused(path, {"choice": "values", "values": [a, b]}, [a, b, a])


def stepped(spec: Dict[str, Any], dflt: Dict[str, Any]) -> Tuple[Dict[str, Any], List[Any]]:
    """An increment of two values ending at the leaf's test value, and the three frames' values."""
    fmt = spec.get("format")
    if fmt in ("mac", "ipv4", "ipv6"):
        start, step, nxt = {"mac": ("02:aa:bb:cc:dd:ee", "00:00:00:00:00:01", "02:aa:bb:cc:dd:ef"),
                            "ipv4": ("10.1.2.3", "0.0.0.1", "10.1.2.4"),
                            "ipv6": ("2001:db8::1234", "::1", "2001:db8::1235")}[fmt]
        return {"start": start, "step": step, "count": 2}, [start, nxt, start]
    top = value_for(spec, dflt)
    return {"start": top - 1, "step": 1, "count": 2}, [top - 1, top, top - 1]


STEPPED = sorted(p for p, _, d in every_leaf() if "increment" in d.get("choices", []))


@pytest.mark.parametrize("path", STEPPED)
def test_an_increment_goes_out_step_by_step_or_is_refused_by_its_path(path: str) -> None:
    spec, dflt = next((s, d) for p, s, d in every_leaf() if p == path)
    counter, want = stepped(spec, dflt)
    on_wire_or_refused(path, {"choice": "increment", "increment": counter}, want)


def test_bad_input_to_otg_frames_says_what_is_wrong_and_how_to_fix_it(tmp_path: Any) -> None:
    cases = [
        (["--count", "0"], "{}", "--count 0: give 1 to 1000 frames per flow"),
        ([], "not json", "not a JSON config"),
        ([], json.dumps({"flows": [{"name": "f"}]}), "flows[0].tx_rx"),
    ]
    for extra, text, want in cases:
        p = subprocess.run([cli(), "otg", "frames", "-", *extra], input=text, capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and want in p.stderr, f"expected exit 2 and {want!r}; got {p.returncode} {p.stderr!r}"
    missing = tmp_path / "none.json"
    p = subprocess.run([cli(), "otg", "frames", str(missing)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and str(missing) in p.stderr, f"expected the missing file named; got {p.stderr!r}"
