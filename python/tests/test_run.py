"""Runs through Python: the CLI's pcap byte for byte, Ctrl-C, and reports."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import gapless
from conftest import gapless_cli, stream

PROFILE = {"seed": 5, "stream": [stream("a", rate=200_000, count=2000), stream("b", rate=50_000, count=500, size={"list": [64, 512, 1518]})]}


def test_run_to_a_pcap_is_the_clis_pcap_byte_for_byte(tmp_path: Path) -> None:
    prof = gapless.Profile(PROFILE)
    res = gapless.run(prof, out=tmp_path / "py.pcap", seed=11)
    prof.save(tmp_path / "p.toml")
    gapless_cli("run", str(tmp_path / "p.toml"), "--out", str(tmp_path / "cli.pcap"), "--seed", "11", "-q")
    py, cli = (tmp_path / "py.pcap").read_bytes(), (tmp_path / "cli.pcap").read_bytes()
    assert len(py) == len(cli) and py == cli, f"expected identical pcaps; got {len(py)} vs {len(cli)} bytes"
    assert res["sent_frames"] == 2500, f"expected 2500 frames sent; got {res['sent_frames']}"
    assert res["seed"] == 11 and not res["interrupted"]
    assert [s["name"] for s in res["streams"]] == ["a", "b"]


def test_the_null_backend_sends_every_frame_and_says_so() -> None:
    res = gapless.run({"stream": [stream(count=100_000, rate=1e6)]}, null=True)
    assert res["sent_frames"] == 100_000, f"got {res['sent_frames']}"
    assert "held" in res["verdict"], res["verdict"]
    text = gapless.summary(res)
    assert "100000" in text.replace(",", "").replace(" ", "") or "100 000" in text, text


def test_ctrl_c_stops_a_run_and_returns_its_result_marked_interrupted() -> None:
    prof = {"stream": [stream(rate=1000, count=60_000)]}
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    res = gapless.run(prof, null=True, pace=True)
    took = time.monotonic() - t0
    assert res["interrupted"] is True, f"expected interrupted; got {res['interrupted']}"
    assert 0 < res["sent_frames"] < 60_000, f"expected a partial count; got {res['sent_frames']}"
    assert took < 5, f"expected the run to end promptly after SIGINT at 0.5 s; took {took:.2f} s"


def test_ctrl_c_in_live_stops_the_run_and_the_result_is_kept() -> None:
    prof = {"stream": [stream(rate=1000, count=60_000)]}
    timer = threading.Timer(0.4, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    run = gapless.start(prof, null=True, pace=True)
    got_ki = False
    try:
        with run:
            for _ in run.live(interval=0.1):
                pass
    except KeyboardInterrupt:
        got_ki = True
    assert got_ki, "expected KeyboardInterrupt out of the with block"
    res = run.result()
    assert res["interrupted"] and res["sent_frames"] < 60_000, res["sent_frames"]


def test_analyze_and_report_give_the_clis_figures(tmp_path: Path) -> None:
    prof = gapless.Profile({"seed": 2, "stream": [stream(rate=100_000, count=5000)]})
    gapless.run(prof, out=tmp_path / "x.pcap")
    rep = gapless.analyze(tmp_path / "x.pcap", profile=prof)
    prof.save(tmp_path / "p.toml")
    gapless_cli("analyze", str(tmp_path / "x.pcap"), "--profile", str(tmp_path / "p.toml"), "--json", str(tmp_path / "cli.json"))
    import json

    cli = json.loads((tmp_path / "cli.json").read_text())
    for a, b in zip(rep["streams"], cli["streams"]):
        for k in ("name", "rx_frames", "seq", "latency", "interarrival"):
            assert a[k] == b[k], f"expected stream {a['name']} {k} as the CLI; got {a[k]} vs {b[k]}"
    n = gapless.report(rep, tmp_path / "rep")
    files = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert n == len(files) and any(f.endswith("interarrival.csv") for f in files), files
    frames = gapless.to_frame(rep)
    assert frames["streams"]["rx_frames"].tolist() == [5000]
    assert frames["interarrival"]["count"].sum() == 4999, frames["interarrival"]
    assert set(frames) == {"streams", "series", "latency", "interarrival"}


def test_snapshots_from_another_thread_while_waiting_for_the_result() -> None:
    # A thread that polls snapshots while the main thread waits for the result, and a
    # second waiter: none may block the others (run in a child with a timeout, so a
    # deadlock fails the test instead of hanging the suite).
    code = (
        "import threading, gapless\n"
        "run = gapless.start({'stream': [{'size': 64, 'timing': {'rate_pps': 20000, 'count': 20000}}]}, null=True, pace=True)\n"
        "seen = []\n"
        "def poll():\n"
        "    while not run.done:\n"
        "        seen.append(run.snapshot()['total']['tx']['sent'])\n"
        "    seen.append(run.snapshot()['total']['tx']['sent'])\n"
        "other = []\n"
        "ts = [threading.Thread(target=poll), threading.Thread(target=lambda: other.append(run.result()))]\n"
        "[t.start() for t in ts]\n"
        "res = run.result()\n"
        "[t.join() for t in ts]\n"
        "assert res['sent_frames'] == 20000 and other[0]['sent_frames'] == 20000, res['sent_frames']\n"
        "assert len(seen) > 10 and seen == sorted(seen) and seen[-1] == 20000, (len(seen), seen[-3:])\n"
        "print('ok', len(seen))\n"
    )
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("ok"), f"expected ok; got {p.returncode}: {p.stdout}{p.stderr}"
