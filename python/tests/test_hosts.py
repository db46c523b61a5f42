"""Runs across hosts (issue 28): three hosts h1, h2, h3 as network namespaces, each with a
gapless agent on a management veth (198.18.x addresses, its own token file), data veths h1–h2
and h3–h2, and a controller in the root namespace on loopback that snappi drives. The
namespaces share one clock, so one agent shifts its clock with the documented test option
--test-clock-offset-ns, and the controller must measure that shift and flag the latency."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import snappi

from conftest import cli, free_port, require_root

TOKEN = "the-agents-token-for-this-test"
SHIFT = 40_000_000  # ns: h1's clock as if 40 ms ahead, in the shifted test


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def wait_listening(proc: subprocess.Popen[str], host: str, port: int, log: Path, ns: str | None = None) -> None:
    t0 = time.monotonic()
    while True:
        cmd = ["ss", "-ltn", f"sport = :{port}"]
        out = subprocess.run((["ip", "netns", "exec", ns] if ns else []) + cmd, capture_output=True, text=True).stdout
        if "LISTEN" in out:
            return
        assert proc.poll() is None, f"expected gapless serve to start on {host}:{port}; it exited: {log.read_text()}"
        assert time.monotonic() - t0 < 20, f"expected gapless serve to listen on {host}:{port} within 20 s"
        time.sleep(0.05)


@dataclass
class Host:
    ns: str
    mgmt: str  # the root namespace's end of the management veth
    addr: str  # the agent's management address
    otg: int
    api: int = 0
    proc: subprocess.Popen[str] | None = None
    log: Path | None = None

    @property
    def location(self) -> str:
        return f"{self.addr}:{self.otg}"


@dataclass
class Lab:
    tmp: Path
    hosts: dict[str, Host] = field(default_factory=dict)
    controller: subprocess.Popen[str] | None = None
    api_port: int = 0
    otg_port: int = 0
    grpc_port: int = 0

    def start_agent(self, name: str, token: str = TOKEN, shift: int = 0) -> None:
        h = self.hosts[name]
        tf = self.tmp / f"{name}.token"
        tf.write_text(token + "\n")
        h.log = self.tmp / f"{name}.log"
        h.api = free_port()
        args = [cli(), "serve", "--listen", f"{h.addr}:{h.api}", "--otg-listen", f"{h.addr}:{h.otg}", "--no-gnmi",
                "--token-file", str(tf), "--db", str(self.tmp / f"{name}.db")]
        if shift:
            args += ["--test-clock-offset-ns", str(shift)]
        h.proc = subprocess.Popen(["ip", "netns", "exec", h.ns, *args], stdout=open(h.log, "w"), stderr=subprocess.STDOUT, text=True)
        wait_listening(h.proc, h.addr, h.otg, h.log, h.ns)

    def start_controller(self) -> None:
        tf = self.tmp / "agents.token"
        tf.write_text(TOKEN + "\n")
        self.api_port = self.api_port or free_port()
        self.otg_port = self.otg_port or free_port()
        self.grpc_port = self.grpc_port or free_port()
        log = self.tmp / "controller.log"
        self.controller = subprocess.Popen(
            [cli(), "serve", "--listen", f"127.0.0.1:{self.api_port}", "--otg-listen", f"127.0.0.1:{self.otg_port}",
             "--agent-token-file", str(tf), "--db", str(self.tmp / "controller.db"), "--otg-grpc-listen", f"127.0.0.1:{self.grpc_port}", "--no-gnmi"],
            stdout=open(log, "a"), stderr=subprocess.STDOUT, text=True)
        wait_listening(self.controller, "127.0.0.1", self.otg_port, log)

    def api(self, transport: str = "https") -> Any:
        if transport == "grpc":
            return snappi.api(location=f"127.0.0.1:{self.grpc_port}", transport="grpc")
        return snappi.api(location=f"https://127.0.0.1:{self.otg_port}", verify=False)

    def runs(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/runs", timeout=5) as r:
            return list(json.load(r)["runs"])

    def run(self, rid: int) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/runs/{rid}", timeout=5) as r:
            return dict(json.load(r))

    def agent_call(self, name: str, path: str, body: dict[str, Any], token: str | None = TOKEN,
                   origin: str | None = None) -> tuple[int, dict[str, Any]]:
        """A direct call to an agent's API, with its token (as a controller would make it)."""
        import ssl

        h = self.hosts[name]
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if origin:
            headers["Origin"] = origin
        req = urllib.request.Request(f"https://{h.location}/gapless/agent/v1/{path}", data=json.dumps(body).encode(),
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
                return r.status, dict(json.load(r))
        except urllib.error.HTTPError as e:
            return e.code, dict(json.load(e))


def add_host(lab: Lab, name: str, ns: str, mgmt: str, subnet: str) -> None:
    """Namespace `ns` as host `name`: a management veth `mgmt` here (SUBNET.1/30) to its
    `mgmt` (SUBNET.2), where its agent will listen."""
    ip("netns", "add", ns)
    ip("link", "add", mgmt, "type", "veth", "peer", "name", "mgmt", "netns", ns)
    ip("addr", "add", f"{subnet}.1/30", "dev", mgmt)
    ip("link", "set", mgmt, "up")
    ip("-n", ns, "addr", "add", f"{subnet}.2/30", "dev", "mgmt")
    for dev in ("mgmt", "lo"):
        ip("-n", ns, "link", "set", dev, "up")
    lab.hosts[name] = Host(ns, mgmt, f"{subnet}.2", free_port())


@pytest.fixture()
def lab(tmp_path: Path) -> Iterator[Lab]:
    """h1, h2, h3 with management veths gh-mK (198.18.10K.1/30 here, .2 in hK) and data veths
    gh-d1 (h1) – gh-d2a (h2) and gh-d3 (h3) – gh-d2b (h2). Agents are started by the tests."""
    require_root()
    names = {"h1": 1, "h2": 2, "h3": 3}
    lab = Lab(tmp_path)

    def clean() -> None:
        for n, k in names.items():
            subprocess.run(["ip", "link", "del", f"gh-m{k}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", f"gh-{n}"], capture_output=True)

    clean()
    try:
        for n, k in names.items():
            add_host(lab, n, f"gh-{n}", f"gh-m{k}", f"198.18.10{k}")
        for a, b, peer in (("h1", "gh-d1", "gh-d2a"), ("h3", "gh-d3", "gh-d2b")):
            ip("-n", f"gh-{a}", "link", "add", b, "type", "veth", "peer", "name", peer, "netns", "gh-h2")
            ip("-n", f"gh-{a}", "link", "set", b, "up")
            ip("-n", "gh-h2", "link", "set", peer, "up")
        yield lab
    finally:
        procs = [h.proc for h in lab.hosts.values()] + [lab.controller]
        for p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            if p is not None:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
        clean()


def config(lab: Lab, flows: list[tuple[str, str, str, int, int]], transport: str = "https") -> Any:
    """A config with ports p1 (h1 gh-d1), p2 (h2 gh-d2a), p3 (h3 gh-d3), p4 (h2 gh-d2b) and the
    flows (name, tx, rx, frames, pps)."""
    a = lab.api(transport)
    cfg = a.config()
    h = lab.hosts
    for name, host, iface in (("p1", "h1", "gh-d1"), ("p2", "h2", "gh-d2a"), ("p3", "h3", "gh-d3"), ("p4", "h2", "gh-d2b")):
        cfg.ports.port(name=name, location=f"{h[host].location}/{iface}")
    for name, tx, rx, count, pps in flows:
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = tx, [rx]
        f.size.fixed = 128
        f.rate.pps = pps
        if count:
            f.duration.fixed_packets.packets = count
        f.metrics.enable = True
        f.metrics.latency.enable = True
        f.metrics.timestamps = True
        eth, ip4, udp = f.packet.ethernet().ipv4().udp()
        eth.src.value, eth.dst.value = "02:00:00:00:00:01", "02:00:00:00:00:02"
        ip4.src.value, ip4.dst.value = "10.0.0.1", "10.0.0.2"
        udp.src_port.value, udp.dst_port.value = 5000, 6000
    return a, cfg


def start(a: Any, cfg: Any) -> None:
    a.set_config(cfg)
    cs = a.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    a.set_control_state(cs)


def ended_run(lab: Lab, timeout: float = 60) -> dict[str, Any]:
    """The controller's newest run, once it has ended."""
    t0 = time.monotonic()
    while True:
        runs = lab.runs()
        if runs and runs[0]["status"] != "running":
            return lab.run(runs[0]["id"])
        assert time.monotonic() - t0 < timeout, f"expected the run to end within {timeout} s; got {runs[:1]}"
        time.sleep(0.2)


@pytest.mark.parametrize("transport", ["https", "grpc"])
def test_a_flow_across_hosts_arrives_whole_and_its_latency_carries_a_bound(lab: Lab, transport: str) -> None:
    for n in ("h1", "h2"):
        lab.start_agent(n)
    lab.start_controller()
    a, cfg = config(lab, [("f", "p1", "p2", 10_000, 20_000)], transport)
    start(a, cfg)
    run = ended_run(lab)
    r = run["result"]
    assert run["status"] == "finished", f"expected finished; got {run['status']}: {run.get('error')}"
    f = r["flows"][0]
    assert f["frames_tx"] == 10_000 and f["frames_rx"] == 10_000, f"expected 10000 sent and received; got {f['frames_tx']} / {f['frames_rx']}"
    assert f["latency"]["count"] == 10_000, f"expected every frame's latency; got {f['latency'].get('count')}"
    b = f["latency_bound"]
    assert b["bound_ns"] > 0 and b["from"], f"expected a cross-host latency with its bound; got {b}"
    # The bound is what the clocks allow; the verdict flags it exactly when it is over 10 %
    # of the median or a clock is unsynchronised.
    med = f["latency"]["percentiles_ns"]["p50"]
    untrusted = any(ag["clock_untrusted"] for ag in r["agents"])
    assert b["trusted"] == (not untrusted and b["bound_ns"] <= 0.1 * abs(med)), f"expected the verdict to follow the bound {b} at median {med}"
    assert (r["verdict"]["latency"] == "trusted") == b["trusted"]
    # OTG metrics from snappi: the same counts, latency filled.
    req = a.metrics_request()
    req.flow.flow_names = []
    m = a.get_metrics(req).flow_metrics[0]
    assert (m.frames_tx, m.frames_rx, m.transmit) == (10_000, 10_000, "stopped"), f"got {m}"
    assert m.latency.average_ns > 0
    # Per port: p2's histogram holds every frame; per agent: its clock and start skew.
    p2 = next(p for p in r["ports"] if p["name"] == "p2")
    assert p2["frames_rx"] == 10_000 and p2["latency"]["count"] == 10_000, p2
    h1 = next(ag for ag in r["agents"] if ag["tx_ports"] == ["p1"])
    assert h1["start_skew_ns"][0]["skew_ns"] is not None and h1["offset"]["exchanges"] == 16, h1
    dashboard_shows_a_section_per_agent(lab, run["id"], r)


def dashboard_shows_a_section_per_agent(lab: Lab, rid: int, r: dict[str, Any]) -> None:
    """The controller's dashboard, in headless Chromium: the run in the history, a section per
    agent, the flows table with the counts, and the latency's verdict."""
    from playwright.sync_api import expect, sync_playwright

    from test_dashboard import chromium

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{lab.api_port}/")
        page.click('nav .tab[data-tab="history"]')
        page.locator(f'#runs tr[data-id="{rid}"]').click()
        view = page.locator(".run-view .hosts-view")
        expect(view.locator("section.agent")).to_have_count(len(r["agents"]))
        for ag in r["agents"]:
            expect(view.locator(f'section.agent[data-agent="{ag["agent"]}"] h3')).to_contain_text(ag["agent"])
        expect(view.locator('.tile[data-key="received"]')).to_have_attribute("data-value", "10000")
        expect(view.locator("table.flows tbody tr td").nth(3)).to_have_attribute("data-v", "10000")
        expect(view.locator('.banner [data-key="latency"]')).to_contain_text(r["verdict"]["latency"])
        browser.close()


def test_two_senders_start_together_within_their_reported_skews(lab: Lab) -> None:
    for n in ("h1", "h2", "h3"):
        lab.start_agent(n)
    lab.start_controller()
    a, cfg = config(lab, [("a", "p1", "p2", 2_000, 10_000), ("b", "p3", "p4", 2_000, 10_000)])
    start(a, cfg)
    r = ended_run(lab)["result"]
    # Each sender's first departure on the shared clock: its start (T0, moved by its measured
    # offset while the kernel says the clocks are not synchronised) plus its reported skew.
    skew = {ag["tx_ports"][0]: ag["start_ns"] - r["t0_unix_ns"] + ag["start_skew_ns"][0]["skew_ns"]
            for ag in r["agents"] if ag["tx_ports"]}
    fa, fb = (next(f for f in r["flows"] if f["name"] == n) for n in ("a", "b"))
    assert fa["frames_rx"] == 2_000 and fb["frames_rx"] == 2_000, f"got {fa['frames_rx']}, {fb['frames_rx']}"
    first = {n: f["latency"] for n, f in (("a", fa), ("b", fb))}
    req = a.metrics_request()
    req.flow.flow_names = []
    ts = {m.name: m.timestamps.first_timestamp_ns for m in a.get_metrics(req).flow_metrics}
    # First arrival = T0 + the sender's skew + that frame's latency (one shared clock here).
    got = (ts["a"] - ts["b"]) - (skew["p1"] - skew["p3"])
    slack = max(first["a"]["max_ns"], first["b"]["max_ns"])
    assert abs(got) <= slack, (f"expected the first arrivals {ts['a'] - ts['b']} ns apart, as the skews {skew} say, "
                               f"to within a frame's latency ({slack} ns); got {got} ns off")


def test_a_shifted_agent_clock_is_measured_within_its_bound_and_the_latency_flagged(lab: Lab) -> None:
    lab.start_agent("h1", shift=SHIFT)
    lab.start_agent("h2")
    lab.start_controller()
    a, cfg = config(lab, [("f", "p1", "p2", 2_000, 10_000)])
    start(a, cfg)
    r = ended_run(lab)["result"]
    h1 = next(ag for ag in r["agents"] if ag["tx_ports"] == ["p1"])
    o = h1["offset"]
    assert abs(o["offset_ns"] - SHIFT) <= o["bound_ns"], f"expected the {SHIFT} ns shift within {o['offset_ns']} ± {o['bound_ns']} ns"
    f = r["flows"][0]
    assert f["frames_rx"] == 2_000
    b = f["latency_bound"]
    assert not b["trusted"] and b["bound_ns"] >= SHIFT - o["bound_ns"], f"expected the latency flagged with a bound of at least the shift; got {b}"
    assert r["verdict"]["latency"] == "NOT trusted" and r["verdict"]["latency_doubts"][0]["flow"] == "f"
    # The start was translated to h1's clock: it still started with the others.
    # With unsynchronised clocks the start is moved by each agent's measured offset; with
    # synchronised ones every agent starts at T0 on its own clock.
    moved = any(ag["clock_untrusted"] for ag in r["agents"])
    assert h1["start_ns"] - r["t0_unix_ns"] == (o["offset_ns"] if moved else 0), h1
    assert abs(h1["start_skew_ns"][0]["skew_ns"]) < SHIFT // 4, f"expected h1 to start at its start on its own clock; got skew {h1['start_skew_ns']}"


def wait_lost(lab: Lab, a: Any, t_fault: float, agent: str) -> float:
    """Seconds from the fault until the controller marks the agent lost in the flow metrics."""
    req = a.metrics_request()
    req.flow.flow_names = []
    while True:
        body = json.dumps({"choice": "flow", "flow": {"flow_names": []}}).encode()
        import ssl

        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        rq = urllib.request.Request(f"https://127.0.0.1:{lab.otg_port}/monitor/metrics", data=body,
                                    headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(rq, timeout=5, context=ctx) as resp:
            m = json.load(resp)["flow_metrics"][0]
        if any(agent in x for x in m["x_gapless"]["agent_lost"]):
            took = time.monotonic() - t_fault
            # Its ports are down in the port metrics, with why.
            pm = a.metrics_request()
            pm.port.port_names = []
            down = [p.name for p in a.get_metrics(pm).port_metrics if p.link == "down"]
            mine = {"h1": ["p1"], "h2": ["p2"]}[next(n for n, h in lab.hosts.items() if h.location == agent)]
            assert down == mine, f"expected {agent}'s ports {mine} down; got {down}"
            return took
        assert time.monotonic() - t_fault < 10, f"expected {agent} marked lost; got {m['x_gapless']}"
        time.sleep(0.05)


def flowing(lab: Lab) -> tuple[Any, int]:
    """Agents on h1 and h2, a continuous flow h1→h2 going for 1.5 s: the API and the frames
    received so far. A change of the running flow's rate is refused with its fix."""
    for n in ("h1", "h2"):
        lab.start_agent(n)
    lab.start_controller()
    a, cfg = config(lab, [("f", "p1", "p2", 0, 5_000)])
    start(a, cfg)
    time.sleep(1.5)
    req = a.metrics_request()
    req.flow.flow_names = []
    before = int(a.get_metrics(req).flow_metrics[0].frames_rx)
    assert before > 0, "expected frames received before the fault"
    cu = a.config_update()
    cu.flows.property_names = ["rate"]
    cfg.flows[0].rate.pps = 1_000
    cu.flows.flows.append(cfg.flows[0])
    with pytest.raises(Exception) as e:
        a.update_config(cu)
    assert "across hosts" in str(e.value) and "Fix" in str(e.value), f"expected a rate change refused while the run goes on; got {e.value}"
    return a, before


def test_a_killed_rx_agent_ends_the_run_agent_lost_keeping_every_count(lab: Lab) -> None:
    a, before = flowing(lab)
    h2 = lab.hosts["h2"]
    assert h2.proc is not None
    subprocess.run(["pkill", "-9", "-f", "--", f"--otg-listen {h2.addr}:{h2.otg}"], check=True)
    t = time.monotonic()
    took = wait_lost(lab, a, t, h2.location)
    assert took <= 2.0, f"expected h2's ports marked within 2 s; got {took:.2f} s"
    run = ended_run(lab, timeout=20)
    assert run["status"] == "agent_lost" and h2.location in (run["error"] or ""), f"got {run['status']}: {run['error']}"
    f = run["result"]["flows"][0]
    assert f["frames_rx"] >= before and f["frames_tx"] > f["frames_rx"], f"expected the counts received kept; got {f['frames_tx']} / {f['frames_rx']} (≥ {before} seen)"
    assert f["tx_final"] is True and f["rx_final"] is False, f"expected the lost meter's counts marked not final; got {f}"
    # The TX agent was stopped: its share is gone.
    code, body = lab.agent_call("h1", "poll", {"run": run["result"]["run"]})
    assert code == 404, f"expected h1's share stopped and forgotten; got {code} {body}"


def test_a_cut_management_link_ends_the_run_and_the_cut_agent_stops_by_itself(lab: Lab) -> None:
    a, before = flowing(lab)
    h1 = lab.hosts["h1"]
    ip("link", "set", h1.mgmt, "down")
    t = time.monotonic()
    took = wait_lost(lab, a, t, h1.location)
    assert took <= 2.0, f"expected h1's ports marked within 2 s; got {took:.2f} s"
    run = ended_run(lab, timeout=20)
    assert run["status"] == "agent_lost", f"got {run['status']}: {run['error']}"
    f = run["result"]["flows"][0]
    assert f["frames_rx"] >= before and f["tx_final"] is False and f["rx_final"] is True, f"got {f}"
    # h1 kept sending only until its lease ran out, then stopped by itself.
    time.sleep(3.5)
    ip("link", "set", h1.mgmt, "up")
    time.sleep(0.3)
    code, body = lab.agent_call("h1", "poll", {"run": run["result"]["run"]})
    assert code == 200 and body["expired"] is True and body["tx_done"] is True, f"expected h1's share expired and stopped; got {code} {body}"


def test_a_wrong_token_or_an_unreachable_agent_refuses_the_config_naming_it(lab: Lab) -> None:
    lab.start_agent("h1", token="a-different-token-entirely")
    lab.start_agent("h2")
    lab.start_controller()
    a, cfg = config(lab, [("f", "p1", "p2", 10, 100)])
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    msg = str(e.value)
    assert lab.hosts["h1"].location in msg and "agent token" in msg and "Fix" in msg, f"got {msg}"
    cfg.ports[0].location = f"{lab.hosts['h1'].addr}:{free_port()}/gh-d1"
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert "unreachable" in str(e.value) and cfg.ports[0].location.split("/")[0] in str(e.value), f"got {e.value}"


def test_a_killed_controller_leaves_its_run_interrupted_and_the_agents_stop_by_themselves(lab: Lab) -> None:
    flowing(lab)
    rid = lab.runs()[0]["id"]
    run_key = lab.run(rid)["result"]["checkpoint"]["run"]
    assert lab.controller is not None
    lab.controller.kill()
    lab.controller.wait()
    time.sleep(3.5)  # the 3 s lease
    for n in ("h1", "h2"):
        code, body = lab.agent_call(n, "poll", {"run": run_key})
        assert code == 200 and body["expired"] is True, f"expected {n}'s share stopped by its lease; got {code} {body}"
    lab.start_controller()
    run = lab.run(rid)
    assert run["status"] == "interrupted", f"expected the run interrupted after the restart; got {run['status']}"


def test_an_agent_refuses_a_start_it_cannot_make_and_guards_its_api(lab: Lab) -> None:
    lab.start_agent("h1")
    share = {"version": 1, "run": "direct", "lease_ms": 5000, "rx": [],
             "tx": [{"port": "p1", "iface": "gh-d1", "netns": None, "flows": ["f"],
                     "profile": {"seed": 1, "stream": [{"name": "f", "id": 0, "timing": {"rate_pps": 1000, "count": 10},
                                                        "template": {"l4": "udp"}}]}}]}
    code, body = lab.agent_call("h1", "prepare", share, token=None)
    assert code == 401, f"expected a share refused without the token; got {code} {body}"
    code, body = lab.agent_call("h1", "prepare", share, origin="https://evil.example")
    assert code == 403, f"expected a web page's request refused; got {code} {body}"
    code, body = lab.agent_call("h1", "prepare", share)
    assert code == 200 and body["ready"] is True, f"expected the share prepared; got {code} {body}"
    # The share holds its interface in the agent's job table: a local run cannot take it.
    h1 = lab.hosts["h1"]
    run = {"toml": "[[stream]]\nname = 'x'\n[stream.timing]\nrate_pps = 10\ncount = 1\n", "options": {"iface": "gh-d1"}}
    req = urllib.request.Request(f"http://{h1.addr}:{h1.api}/api/runs", data=json.dumps(run).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    err = json.load(e.value)
    assert e.value.code == 409 and "a share of a run across hosts" in err["error"], f"expected the interface busy with the share; got {e.value.code} {err}"
    code, body = lab.agent_call("h1", "prepare", {**share, "run": "another"})
    assert code == 409 and "direct" in body["errors"][0], f"expected a second share refused while one runs; got {code} {body}"
    now = time.time_ns()
    code, body = lab.agent_call("h1", "start", {"run": "direct", "start_ns": now})
    assert code == 409 and "cannot make the start" in body["errors"][0], f"expected a start in the past refused; got {code} {body}"
    code, body = lab.agent_call("h1", "poll", {"run": "direct"})
    assert code == 200 and body["tx"][0]["done"] is False and body["start_ns"] is None, f"expected nothing started; got {body}"
    code, body = lab.agent_call("h1", "stop", {"run": "direct"})
    assert code == 200 and body["tx"][0]["result"]["sent_frames"] == 0, f"expected nothing sent; got {code} {body}"


def mac_of(ns: str, iface: str) -> str:
    out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", iface], check=True, capture_output=True, text=True).stdout
    return str(json.loads(out)[0]["address"])


def experiment_file(lab: Lab, path: Path, **port_extra: Any) -> Path:
    """Both ways between h1's gh-d1 and h2's gh-d2a, each port on its host's agent: two
    repetitions of 1 s at 2,000 frames/s each way after a 0.3 s warm-up."""
    h = lab.hosts
    ports = []
    for host, iface, ip4 in (("h1", "gh-d1", "198.18.110.1"), ("h2", "gh-d2a", "198.18.110.2")):
        p = {"iface": iface, "agent": h[host].location, "mac": mac_of(h[host].ns, iface), "ip": ip4, **port_extra}
        ports.append("{ " + ", ".join(f'{k} = "{v}"' for k, v in p.items() if v is not None) + " }")
    path.write_text(f"""name = "across-hosts"
method = "repeat"
ports = [{", ".join(ports)}]
pairs = "bidirectional"
[trial]
warmup_s = 0.3
settle_s = 0.2
duration_s = 1
repetitions = 2
[profile]
[[profile.stream]]
name = "m"
size = 64
[profile.stream.timing]
rate_pps = 2000
""")
    return path


def test_an_experiment_across_hosts_meters_each_direction_on_its_own_host_to_the_frame(lab: Lab) -> None:
    """The warm-up is counted from one T0 on every host, so the sender on one host and the
    meter on the other agree on every frame: each direction received exactly what it sent
    after the warm-up (a direct veth loses none)."""
    for n in ("h1", "h2"):
        lab.start_agent(n)
    tf = lab.tmp / "agents.token"
    tf.write_text(TOKEN + "\n")
    spec, out = experiment_file(lab, lab.tmp / "x.toml"), lab.tmp / "x.json"
    p = subprocess.run([cli(), "experiment", str(spec), "--agent-token-file", str(tf), "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"expected the experiment to finish; got {p.returncode}: {p.stderr}{p.stdout}"
    r = json.loads(out.read_text())
    assert len(r["trials"]) >= 2, r["trials"]
    for t in r["trials"]:
        dirs = {d["direction"]: d for d in t["directions"]}
        assert sorted(dirs) == ["gh-d1→gh-d2a", "gh-d2a→gh-d1"], f"expected both directions; got {sorted(dirs)}"
        # A frame due just before the warm-up's end that a stall sent after it counts as
        # metered: the trial's own worst lateness says how many that can be.
        slack = 2 + t["late_max_ns"] * 2000 // 1_000_000_000
        for name, d in dirs.items():
            assert abs(d["sent"] - 2000) <= slack, \
                f"{name}: expected 2000 ± {slack} frames after the warm-up (2, and the {t['late_max_ns']} ns the sender was late at worst); got {d}"
            assert d["received"] == d["sent"], f"{name}: expected every frame metered on the other host, to the frame; got {d}"
            assert d["latency"]["count"] == d["received"], f"{name}: expected a latency per frame; got {d['latency']['count']}"
        assert t["warmup_sent"] > 0 and t["warmup_received"] == t["warmup_sent"], f"expected the warm-up counted apart on both hosts; got {t}"
    clocks = [w for w in r["warnings"] if w.startswith("agent ") and "its clock is" in w]
    assert len(clocks) == 2, f"expected each agent's clock offset in the warnings; got {r['warnings']}"
    assert "by direction" in p.stdout, p.stdout
    via_api = experiment_via_controller(lab, spec.read_text())
    for t in via_api["trials"]:
        slack = 2 + t["late_max_ns"] * 2000 // 1_000_000_000
        for d in t["directions"]:
            assert d["received"] == d["sent"] and abs(d["sent"] - 2000) <= slack, f"through the controller's API (± {slack}): {d}"


def experiment_via_controller(lab: Lab, toml: str) -> dict[str, Any]:
    """The same experiment posted to a controller's `/api/experiments` (the dashboard's
    call), which drives the agents with its --agent-token-file; its result once finished."""
    lab.start_controller()
    base = f"http://127.0.0.1:{lab.api_port}/api/experiments"
    req = urllib.request.Request(base, data=toml.encode(), headers={"Content-Type": "application/toml"})
    with urllib.request.urlopen(req, timeout=30) as r:
        xid = json.load(r)["id"]
    t0 = time.monotonic()
    while True:
        with urllib.request.urlopen(f"{base}/{xid}", timeout=5) as r:
            x = json.load(r)
        if x["status"] != "running":
            break
        assert time.monotonic() - t0 < 60, f"expected the experiment to end within 60 s; got {x['status']}"
        time.sleep(0.2)
    assert x["status"] == "finished", f"expected it finished; got {x['status']}: {x.get('error')}"
    return dict(x["result"])


def test_an_experiment_across_hosts_is_refused_before_any_trial_without_its_token_or_addresses(lab: Lab) -> None:
    lab.start_agent("h1")
    lab.start_agent("h2", token="a-different-token-entirely")
    tf = lab.tmp / "agents.token"
    tf.write_text(TOKEN + "\n")
    spec = experiment_file(lab, lab.tmp / "x.toml")
    for args, want in (([], "give --agent-token-file F"),
                       (["--agent-token-file", str(tf)], f"agent {lab.hosts['h2'].location}")):
        p = subprocess.run([cli(), "experiment", str(spec), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and want in p.stderr, f"expected {want!r}; got {p.returncode}: {p.stderr}"
        assert "trial 1" not in p.stderr, f"expected no trial; got {p.stderr}"
    # A server without the agents' token refuses it before any trial (here h1's own server).
    h1 = lab.hosts["h1"]
    req = urllib.request.Request(f"http://{h1.addr}:{h1.api}/api/experiments", data=spec.read_bytes(),
                                 headers={"Content-Type": "application/toml", "Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    body = json.load(e.value)
    assert e.value.code == 422 and "--agent-token-file" in body["error"], f"expected 422 naming the flag; got {e.value.code} {body}"
    text = spec.read_text()
    spec.write_text(text.replace(f'mac = "{mac_of("gh-h1", "gh-d1")}", ', "", 1))
    p = subprocess.run([cli(), "experiment", str(spec), "--agent-token-file", str(tf)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "ports[0]: a port on an agent needs its mac and ip" in p.stderr, p.stderr
