"""Live snapshots of a metered run on the testbed (root)."""

from __future__ import annotations

import gapless
from conftest import Testbed, stream


def test_live_counts_rise_and_the_result_matches_the_last_snapshot(testbed: Testbed) -> None:
    prof = {"stream": [stream("a", rate=20_000, count=40_000), stream("b", rate=5_000, count=10_000)]}
    snaps = []
    with gapless.start(prof, iface=testbed.tx, netns=testbed.tx_ns, rx=testbed.rx, rx_netns=testbed.rx_ns) as run:
        for snap in run.live(interval=0.25):
            snaps.append(snap)
    res = run.result()
    assert len(snaps) >= 5, f"expected a snapshot every 0.25 s of a 2 s run; got {len(snaps)}"
    for name in ("a", "b"):
        sent = [s["streams"][name]["tx"]["sent"] for s in snaps]
        assert sent == sorted(sent), f"stream {name}: expected sent counts to rise; got {sent}"
        got = [s["streams"][name]["rx"]["received"] for s in snaps if s["streams"][name]["rx"]]
        assert got == sorted(got) and got, f"stream {name}: expected received counts to rise; got {got}"
    last = snaps[-1]
    assert last["total"]["tx"]["sent"] == res["sent_frames"], (last["total"]["tx"], res["sent_frames"])
    by_name = {s["name"]: s for s in res["rx"]["streams"]}
    for name in ("a", "b"):
        assert last["streams"][name]["tx"]["sent"] == next(s["sent_frames"] for s in res["streams"] if s["name"] == name)
        assert last["streams"][name]["rx"]["received"] == by_name[name]["rx_frames"], (last["streams"][name], by_name[name]["rx_frames"])
    # Every frame arrived, or the verdict says the schedule was not held and why.
    lost = sum(s["lost_vs_tx"] or 0 for s in res["rx"]["streams"])
    assert lost == 0 or not res["verdict"]["held"], f"expected no loss on the testbed; got {lost} with {res['verdict']}"


def test_measure_meters_what_a_run_sends_across_the_testbed(testbed: Testbed) -> None:
    import threading

    prof = gapless.Profile({"stream": [stream("m", rate=10_000, count=5_000)]})
    out: dict = {}  # type: ignore[type-arg]
    t = threading.Thread(target=lambda: out.update(rep=gapless.measure(testbed.rx, netns=testbed.rx_ns, duration=2.0, profile=prof)))
    t.start()
    import time

    time.sleep(0.3)
    res = gapless.run(prof, iface=testbed.tx, netns=testbed.tx_ns)
    t.join()
    s = out["rep"]["streams"][0]
    assert s["name"] == "m" and s["rx_frames"] == res["sent_frames"] == 5000, (s["name"], s["rx_frames"], res["sent_frames"])
    assert s["seq"]["lost"] == 0 and s["seq"]["reordered"] == 0, s["seq"]
