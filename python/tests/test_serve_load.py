"""snappi polls `POST /monitor/metrics` as fast as it can, from a process pinned to the cores
the server keeps for itself, while a 100 kpps flow runs on the testbed: the flow's send
loop must not wait for its core (under 1 % of the run), and where its verdict says NOT held,
the causes must be the host's stalls or steal, never other tasks on the loop's core."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any, List


from conftest import Server, Testbed, warnings_but_testbed_addresses
from test_otg import MAC_RX, MAC_TX, api, config, flow


def cores_of(text: str) -> List[int]:
    out: List[int] = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def server_cores(pid: int) -> List[int]:
    """The cores the server's async workers may run on now."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields["Name"].strip().startswith("tokio-rt-worker"):
            return cores_of(fields["Cpus_allowed_list"].strip())
    raise AssertionError("expected a tokio worker thread in the server")


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_snappi_polling_metrics_flat_out_does_not_cost_the_flow_its_core(own_server: Server, testbed: Testbed) -> None:
    a = api(own_server, "https")
    cfg, _, _ = config(a, testbed)
    f = flow(cfg, "fast", count=500_000, pps=100_000, size=64)
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_TX, MAC_RX
    ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    cs = a.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    a.set_control_state(cs)
    time.sleep(0.5)  # the run holds its core by now
    rest = server_cores(own_server.proc.pid)
    os.sched_setaffinity(0, rest)
    req = a.metrics_request()
    req.flow.flow_names = ["fast"]
    polls, t0 = 0, time.monotonic()
    try:
        while True:
            m = list(a.get_metrics(req).flow_metrics)
            polls += 1
            if m[0].transmit == "stopped":
                break
            assert time.monotonic() - t0 < 30, "expected the flow to stop within 30 s"
    finally:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    secs = time.monotonic() - t0
    print(f"\nsnappi: {polls} metrics polls in {secs:.1f} s ({polls / secs:.0f}/s) from cores {rest}")
    assert m[0].frames_tx == 500_000, f"expected 500000 frames sent; got {m[0].frames_tx}"
    assert polls >= 100, f"expected snappi to poll flat out (at least 100 polls); got {polls}"
    run = get(own_server.url + "/api/runs")["runs"][0]
    r = get(own_server.url + f"/api/runs/{run['id']}")["result"]
    core = r["environment"]["tx_core"]
    assert core not in rest, f"expected the send loop's core {core} outside the server's cores {rest}"
    v = r["verdict"]
    lp = v["loops"][0]
    share = (lp.get("runqueue_wait_ns") or 0) / lp["wall_ns"]
    # The server's threads cannot run on the loop's core (affinity, `exclusive`): a wait there
    # is another program's, which the verdict must then name as such (this VM's host, or a
    # build beside the tests, can take the core for seconds).
    assert lp["exclusive"], f"expected every other thread of the server kept off core {core}; verdict {v}"
    if share >= 0.01:
        outside = [c for c in v["causes"] if c.startswith("tasks outside gapless") and f"core {core}" in c]
        assert outside and v["held"] is False, \
            f"expected the send loop to wait under 1 % of the run for its core, or the verdict to name tasks outside gapless; got {share:.3%}; verdict {v}"
    assert lp["exclusive"] is True, f"expected the loop's core to be the packet path's alone; verdict {v}"
    if v["held"] is False:
        # gapless's own threads are kept off the core (exclusive): what may be named is the
        # host's stalls, steal, or tasks outside gapless.
        others = [c for c in v["causes"] if c.startswith("other tasks took")]
        assert not others, f"the run was NOT held: expected host stalls, steal or tasks outside gapless, never gapless's own threads; got {v['causes']}"
