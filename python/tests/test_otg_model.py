"""The server guide's table of flow header fields (made from gapless_otg::model::FIELDS, which a
Rust test keeps equal to it) read against the OTG model itself, snappi 1.62.0's generated
classes: every field of every header gapless sends is in the table, the table has no field the
model lacks, and each default the table states is the model's (issue 67). No server, no veths:
well under a second."""
from __future__ import annotations

import re
from pathlib import Path

import snappi  # type: ignore[import-untyped]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "server.md"

# The model's class for each header (and sub-object) of the table.
CLASSES = {
    "ethernet": "FlowEthernet", "vlan": "FlowVlan", "ipv4": "FlowIpv4", "ipv4.priority": "FlowIpv4Priority",
    "ipv4.priority.tos": "FlowIpv4Tos", "ipv4.priority.dscp": "FlowIpv4Dscp", "ipv6": "FlowIpv6",
    "udp": "FlowUdp", "tcp": "FlowTcp", "icmp": "FlowIcmp", "icmp.echo": "FlowIcmpEcho",
    "icmpv6": "FlowIcmpv6", "icmpv6.echo": "FlowIcmpv6Echo", "arp": "FlowArp", "vxlan": "FlowVxlan",
    "gre": "FlowGre", "mpls": "FlowMpls", "gtpv1": "FlowGtpv1",
}


def table() -> list[tuple[str, str, str]]:
    text = GUIDE.read_text()
    body = text.split("<!-- header-fields:begin -->\n", 1)[1].split("<!-- header-fields:end -->", 1)[0]
    rows = [line.strip("|").split("|") for line in body.splitlines()[2:] if line.startswith("|")]
    return [(h.strip(), f.strip(), how.strip()) for h, f, how in rows]


def model_fields(cls_name: str) -> dict:
    cls = getattr(snappi.snappi, cls_name)
    return dict(cls._TYPES)


def test_the_pinned_model_is_the_one_the_table_was_made_for():
    from importlib.metadata import version

    assert version("snappi") == "1.62.0", f"expected snappi 1.62.0, the model gapless pins; got {version('snappi')}"


def test_every_field_of_every_header_is_in_the_table_and_no_other():
    rows = table()
    assert rows, "expected the guide's header-fields table"
    for header, cls in CLASSES.items():
        want = set(model_fields(cls))
        got = {f for h, f, _ in rows if h == header}
        assert got == want, f"{header}: expected the model's fields {sorted(want)}, the table has {sorted(got)}"
    assert {h for h, _, _ in rows} == set(CLASSES), "the table names a header the test does not know"


def test_each_default_the_table_states_is_the_model_s():
    checked = 0
    for header, field, how in table():
        m = re.search(r"at the model's default, (\d+)|only (auto)|only (generated good)|only (empty)", how)
        if not m:
            continue
        kind = model_fields(CLASSES[header])[field]["type"]
        if m.group(4):
            assert not (isinstance(kind, str) and kind.startswith("Pattern")), f"{header}.{field} is a pattern, not a list"
            checked += 1
            continue
        dflt = getattr(snappi.snappi, kind)._DEFAULTS
        if not kind.startswith("Pattern"):
            # IPv4's priority: its default, TOS byte 0, is DSCP's PHB 0 and ECN 0.
            assert (kind, dflt) == ("FlowIpv4Priority", {"choice": "dscp"}), f"{header}.{field}: {kind} {dflt}"
            for part in ("Phb", "Ecn"):
                d = getattr(snappi.snappi, f"PatternFlowIpv4Dscp{part}")._DEFAULTS
                assert d["value"] == 0, f"ipv4.priority.dscp.{part.lower()}: the model {d}"
        elif m.group(1) is not None:
            n = int(m.group(1))
            assert dflt.get("choice") in ("value", "auto") and dflt.get("value", dflt.get("auto")) == n, \
                f"{header}.{field}: the table says default {n}, the model {dflt}"
        elif m.group(2):
            assert dflt.get("choice") == "auto", f"{header}.{field}: the table says auto, the model {dflt}"
        else:
            assert dflt == {"choice": "generated", "generated": "good"}, f"{header}.{field}: the model {dflt}"
        checked += 1
    assert checked >= 30, f"expected most unapplied fields' defaults checked, got {checked}"
