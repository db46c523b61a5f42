"""Outages timed to the frame, through the reference router (`gapless testbed up --dut
router`, one for the module): a route withdrawn for 250 ms at 100 kframes/s is one loss
episode whose span and frames match tcpdump's capture at the sink; scattered loss (a shaper
that cannot keep up: this kernel has no netem) gives the histogram the capture gives; a link
left down gives an open episode and the run goes on; a user's link down on the sending port
does not end the run; bad events are refused before any frame."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import gapless
from conftest import gapless_cli, require_root, tcpdump

BED = "glo"
TX, RX, DUT = f"{BED}-tx", f"{BED}-rx", f"{BED}-dut"
TX0, RX0, D1 = f"{BED}-tx0", f"{BED}-rx0", f"{BED}-d1"


@pytest.fixture(scope="module")
def router() -> Iterator[str]:
    require_root()
    gapless_cli("testbed", "up", "--name", BED, "--dut", "router")
    try:
        yield BED
    finally:
        gapless_cli("testbed", "down", "--name", BED)


def profile(tmp: Path, rate: int, seconds: float) -> Path:
    p = tmp / "p.toml"
    p.write_text(f'[[stream]]\nname = "s"\nsize = 64\n[stream.template]\n[stream.timing]\nrate_pps = {rate}\nduration_s = {seconds}\n')
    return p


def run(tmp: Path, rate: int, seconds: float, *events: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    args = ["run", str(profile(tmp, rate, seconds)), "--iface", TX0, "--netns", TX, "--rx", RX0, "--rx-netns", RX,
            "--json", str(tmp / "r.json"), "-q"]
    for e in events:
        args += ["--event", e]
    return gapless_cli(*args, check=check)


def sink_capture(path: Path) -> Any:
    """tcpdump at the sink, with a large buffer: it must keep every frame."""
    return tcpdump(RX, RX0, path, "udp", "-B", "65536", keep_all=True)


def captured(path: Path) -> list[tuple[int, int]]:
    """(arrival ns, sequence number) of every signed IPv4/UDP frame in the capture: records
    read with Scapy's pcap reader, the signature found from the IP length by hand (a parse of
    every frame with Scapy takes 20 s for 125 000 frames)."""
    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    out = []
    for data, meta in RawPcapReader(str(path)):
        if data[12:14] != b"\x08\x00" or data[23] != 17:
            continue
        end = 14 + int.from_bytes(data[16:18], "big")
        sig = data[end - 16:end]
        if sig[:2] == b"gL":
            ts = (meta.tshigh << 32 | meta.tslow) if hasattr(meta, "tshigh") else meta.sec * 1_000_000_000 + meta.usec
            out.append((ts, int.from_bytes(sig[4:8], "big")))
    return out


def stream_rx(tmp: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    r = json.loads((tmp / "r.json").read_text())
    return r, r["rx"]["streams"][0]


def test_a_withdrawn_route_is_one_episode_matching_the_capture(router: str, tmp_path: Path) -> None:
    with sink_capture(tmp_path / "c.pcap"):
        run(tmp_path, 100_000, 1.5, f"0.5s route del {DUT} 198.18.0.2/32", f"0.75s route add {DUT} 198.18.0.2/32 dev {D1}")
    r, s = stream_rx(tmp_path)
    ep = s["loss_episodes"]
    frames = captured(tmp_path / "c.pcap")
    assert len(frames) == s["rx_frames"], f"expected tcpdump to see the {s['rx_frames']} frames the meter saw; got {len(frames)}"
    gaps = [(b[0] - a[0], b[1] - a[1] - 1, a[0]) for a, b in zip(frames, frames[1:])]
    gap_ns, missing, before = max(gaps)
    assert abs(ep["longest_ns"] - gap_ns) <= 50_000, f"expected the longest episode's span {ep['longest_ns']} ns within 50 µs of the capture's largest gap {gap_ns} ns"
    assert abs(ep["longest_frames"] - missing) <= 2, f"expected {missing} frames (the capture's) in the longest episode, within 2; got {ep['longest_frames']}"
    assert 200e6 < gap_ns < 400e6, f"expected an outage of about 250 ms; got {gap_ns / 1e6:.1f} ms"
    assert ep["count"] == sum(1 for g in gaps if g[1] > 0), f"expected the capture's {sum(1 for g in gaps if g[1] > 0)} episodes; got {ep['count']}"
    dele, add = r["events"]
    assert dele["stamp"] == "the rtnetlink ACK" and dele["sent_ns"] <= dele["acked_ns"], dele
    # The episode brackets the withdrawal: its last frame before came before the deletion
    # was acknowledged (a frame in flight takes microseconds), its first after after the
    # route was back.
    assert ep["longest_from_ns"] <= dele["acked_ns"] + 1_000_000, f"expected the outage to start by the deletion's ACK; got {ep['longest_from_ns'] - dele['acked_ns']} ns after"
    assert ep["longest_from_ns"] + ep["longest_ns"] >= add["sent_ns"], "expected the first frame after the outage after the route was asked back"
    assert s["lost_vs_tx"] == ep["lost_frames"] and "open" not in ep, f"expected all loss in the episodes; got {s['lost_vs_tx']} vs {ep}"
    # The sender's long stalls are kept with their times, each within what its counts say.
    for lp in r["verdict"]["loops"]:
        for st in lp.get("long_stalls", []):
            assert 1_000_000 <= st["ns"] <= lp["stall_max_ns"], f"expected a kept stall of 1 ms up to the longest; got {st} in {lp}"


def test_scattered_loss_gives_the_captures_histogram(router: str, tmp_path: Path) -> None:
    # A shaper just below the offered rate drops a frame here and there (netem is not in
    # this kernel).
    subprocess.run(["ip", "netns", "exec", DUT, "tc", "qdisc", "replace", "dev", D1, "root", "tbf", "rate", "13mbit",
                    "burst", "1600", "limit", "1600"], check=True, capture_output=True)
    try:
        with sink_capture(tmp_path / "c.pcap"):
            run(tmp_path, 30_000, 0.6)
    finally:
        subprocess.run(["ip", "netns", "exec", DUT, "tc", "qdisc", "del", "dev", D1, "root"], capture_output=True)
    _, s = stream_rx(tmp_path)
    ep = s["loss_episodes"]
    seqs = [q for _, q in captured(tmp_path / "c.pcap")]
    holes = [b - a - 1 for a, b in zip(seqs, seqs[1:]) if b - a > 1]
    bins: dict[int, int] = {}
    for h in holes:
        k = h.bit_length() - 1
        bins[k] = bins.get(k, 0) + 1
    want = [{"frames_min": 1 << k, "frames_max": (2 << k) - 1, "count": bins[k]} for k in sorted(bins)]
    assert len(holes) > 20, f"expected scattered loss through the shaper; got {len(holes)} holes"
    assert ep["histogram"] == want, f"expected the capture's histogram {want}; got {ep['histogram']}"
    assert ep["count"] == len(holes) and ep["lost_frames"] == sum(holes), ep


def test_a_users_link_down_on_the_sending_port_does_not_end_the_run(router: str, tmp_path: Path) -> None:
    run(tmp_path, 20_000, 1.0, f"0.2s link down {TX}/{TX0}", f"0.4s link up {TX}/{TX0}")
    r, s = stream_rx(tmp_path)
    assert r["sent_frames"] == 20_000 and not r["interrupted"], f"expected the whole run; got {r['sent_frames']} ({r['stop_reason']})"
    assert r["link_held_drops"] > 2_000, f"expected the frames due while the link was down refused and counted; got {r['link_held_drops']}"
    ep = s["loss_episodes"]
    assert ep["count"] == 1 and ep["longest_frames"] >= r["link_held_drops"], f"expected one outage of at least the refused frames; got {ep}"
    assert 150e6 < ep["longest_ns"] < 600e6, f"expected an outage of about 200 ms; got {ep['longest_ns'] / 1e6:.1f} ms"


@pytest.mark.parametrize("event,want", [
    ("soon link down x", "starts with its time"),
    ("0.1s link down nosuch-ns/x", '"nosuch-ns" does not exist'),
    (f"0.1s link down {DUT}/nosuch0", "nosuch0"),
    (f"5s route del {DUT} 198.18.0.2/32", "after the run's planned end"),
])
def test_bad_events_are_refused_before_any_frame(router: str, tmp_path: Path, event: str, want: str) -> None:
    p = run(tmp_path, 1000, 0.5, event, check=False)
    assert p.returncode != 0 and want in p.stderr, f"expected {want!r} in the error; got {p.returncode}: {p.stderr}"
    assert not (tmp_path / "r.json").exists(), "expected no result: no frame sent"


def test_a_link_left_down_is_an_open_episode_and_the_run_goes_on(router: str, tmp_path: Path) -> None:
    """Through the Python API: the result carries the same figures as the CLI's. Last in the
    module: a port set down loses its routes and neighbours, and the router forwards nothing
    after it."""
    prof = gapless.Profile({"stream": [{"name": "s", "size": 64, "timing": {"rate_pps": 20_000, "duration_s": 0.8}}]})
    res = gapless.run(prof, iface=TX0, netns=TX, rx=RX0, rx_netns=RX, events=[f"0.3s link down {DUT}/{D1}"])
    subprocess.run(["ip", "-n", DUT, "link", "set", D1, "up"], check=True)
    s = res["rx"]["streams"][0]
    assert res["sent_frames"] == 16_000, f"expected the run to send all 16000 frames with the DUT's port down; got {res['sent_frames']} ({res['stop_reason']})"
    ep = s["loss_episodes"]
    tail = s["tx_sent"] - s["rx_frames"]
    assert 0.4 * 20_000 <= tail, f"expected the frames after 0.3 s lost; got {tail}"
    assert ep["open"] == {"from_ns": s["last_rx_ns"], "lost_frames": tail}, f"expected an open episode from the last arrival with {tail} frames; got {ep}"
    assert ep["count"] == 0, f"expected no hole before the tail; got {ep}"
