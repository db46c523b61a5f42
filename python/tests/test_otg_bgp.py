"""BGP behind OTG, driven through FRR's bgpd per device, as ixia-c's users script it: two
veths in one namespace (`veth-a`, `veth-z`), snappi over HTTPS and gRPC, two devices in eBGP
with IPv4 and IPv6 route ranges (the IPv6 ones over the IPv4 session), the learned prefixes
listed with their next hops, a flow to each range with every frame received, a withdrawal
timed by its UPDATE on the wire (checked against tcpdump), a withdrawal through a router (FRR
in a namespace between the ports) that loses the flow's frames until the route is back, timed
to the frame, and bad BGP input refused with its path before anything starts."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import Server, tcpdump, warnings_but_testbed_addresses
from test_otg import api, run_to_stop, transport, wait_stopped  # noqa: F401 (transport: a fixture)
from test_otg_ixia import device_pair, otg_json, sh, two_veths, withdrawal

NS, A, Z = "glbgp", "veth-a", "veth-z"
MAC = ("02:67:6c:0b:00:01", "02:67:6c:0b:00:02")


@pytest.fixture(scope="module")
def wires() -> Iterator[str]:
    """Two veths in one namespace, each the other's peer, and FRR installed."""
    assert Path("/usr/lib/frr/bgpd").exists(), "expected FRR's bgpd (scripts/setup.sh installs the frr package)"
    with two_veths(NS) as ns:
        yield ns


def bgp_config(a: Any) -> Any:
    """d1 (AS 65001, 1.1.1.1) on p1 and d2 (AS 65002, 1.1.1.2) on p2 in eBGP; each advertises
    four IPv4 /24s and two IPv6 /64s; d1's IPv4 range has a manual next hop, a MED, a
    community and an AS path."""
    cfg, devices = device_pair(a, NS, MAC)
    for k, d in enumerate(devices, 1):
        peer = ebgp_peer(d, k, f"1.1.1.{3 - k}", count=4)
        r6 = peer.v6_routes.add()
        r6.name = f"d{k}.r6"
        r6.addresses.add(address=f"2001:db8:{k}0::", prefix=64, count=2, step=1)
    r4 = cfg.devices[0].bgp.ipv4_interfaces[0].peers[0].v4_routes[0]
    r4.next_hop_mode, r4.next_hop_address_type, r4.next_hop_ipv4_address = "manual", "ipv4", "1.1.1.1"
    r4.advanced.multi_exit_discriminator = 50
    r4.communities.add(type="manual_as_number", as_number=65000, as_custom=7)
    seg = r4.as_path.segments.add()
    seg.type, seg.as_numbers = "as_seq", [65100]
    return cfg


def ebgp_peer(d: Any, k: int, peer_address: str, count: int) -> Any:
    """Device d{k}'s BGP (router id 1.1.1.k, AS 65000 + k) in eBGP with `peer_address` from
    its IPv4 address, advertising `count` /24s from 10.{k}0.0.0 as range d{k}.r4."""
    d.bgp.router_id = f"1.1.1.{k}"
    itf = d.bgp.ipv4_interfaces.add()
    itf.ipv4_name = f"d{k}.ip4"
    peer = itf.peers.add()
    peer.name, peer.peer_address, peer.as_type, peer.as_number = f"d{k}.bgp", peer_address, "ebgp", 65000 + k
    r4 = peer.v4_routes.add()
    r4.name = f"d{k}.r4"
    r4.addresses.add(address=f"10.{k}0.0.0", prefix=24, count=count, step=1)
    return peer


def bgp_metrics(a: Any) -> dict[str, Any]:
    req = a.metrics_request()
    req.bgpv4.peer_names = []
    return {m.name: m for m in a.get_metrics(req).bgpv4_metrics}


def wait_established(a: Any, within: float = 15) -> dict[str, Any]:
    t0 = time.monotonic()
    while True:
        m = bgp_metrics(a)
        if all(x.session_state == "up" for x in m.values()) and len(m) == 2:
            return m
        assert time.monotonic() - t0 < within, f"expected both sessions up within {within} s; got {[(n, x.fsm_state) for n, x in m.items()]}"
        time.sleep(0.2)


def wait_routes(a: Any, within: float = 15) -> dict[str, Any]:
    """Both sessions up and each peer holding the other's 4 + 2 routes."""
    t0 = time.monotonic()
    m = wait_established(a, within)
    while (got := (m["d1.bgp"].routes_received, m["d2.bgp"].routes_received)) != (6, 6):
        assert time.monotonic() - t0 < within, f"expected each peer to receive the other's 4 + 2 routes; got {got}"
        time.sleep(0.2)
        m = bgp_metrics(a)
    return m


def prefixes(a: Any, peer: str) -> Any:
    req = a.states_request()
    req.bgp_prefixes.bgp_peer_names = [peer]
    return a.get_states(req).bgp_prefixes[0]


def start_protocols(a: Any) -> None:
    cs = a.control_state()
    cs.protocol.all.state = cs.protocol.all.START
    assert len(a.set_control_state(cs).warnings) == 0


def test_ebgp_ranges_are_advertised_learned_with_next_hops_and_carry_every_frame(server: Server, transport: str,
                                                                                 wires: str) -> None:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(bgp_config(a)).warnings) == []
    start_protocols(a)
    m = wait_routes(a)
    assert (m["d1.bgp"].routes_advertised, m["d1.bgp"].fsm_state) == (6, "established"), m["d1.bgp"]
    # One OPEN: d2 (the higher address) waits for d1's connection, so the two never cross
    # (when both connected at once, FRR sometimes closed both and retried: 2 and 4 OPENs
    # were seen in CI on 2026-11-27).
    got = (m["d1.bgp"].opens_sent, m["d2.bgp"].opens_sent)
    assert m["d1.bgp"].updates_received >= 1 and got == (1, 1), f"expected one OPEN sent by each device; got {got}"
    learned = prefixes(a, "d2.bgp")
    v4 = {(p.ipv4_address, p.prefix_length): p for p in learned.ipv4_unicast_prefixes}
    assert sorted(v4) == [(f"10.10.{i}.0", 24) for i in range(4)], f"expected d1's four /24s; got {sorted(v4)}"
    p = v4[("10.10.0.0", 24)]
    assert (p.ipv4_next_hop, p.multi_exit_discriminator) == ("1.1.1.1", 50), p
    assert [list(s.as_numbers) for s in p.as_path.segments] == [[65001, 65100]], f"expected AS 65001 then the range's 65100; got {p.as_path}"
    v6 = {(q.ipv6_address, q.prefix_length): q for q in learned.ipv6_unicast_prefixes}
    assert set(v6) == {("2001:db8:10::", 64), ("2001:db8:10:1::", 64)}, f"expected d1's two /64s; got {sorted(v6)}"
    assert all(q.ipv4_next_hop == "1.1.1.1" for q in v6.values()), "expected the IPv6 routes' next hop to be d1's IPv4 address (mapped)"
    # A flow from each of d1's ranges to d2's: sent through d1's gateway, every frame received.
    cfg = bgp_config(a)
    # And one back from each of d2's ranges to d1's, at the same time (one run, both ways).
    ends = {"v4": ("d1.r4", "d2.r4"), "v6": ("d1.r6", "d2.r6"),
            "v4-back": ("d2.r4", "d1.r4"), "v6-back": ("d2.r6", "d1.r6")}
    for name, (src, dst) in ends.items():
        f = cfg.flows.flow(name=name)[-1]
        f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = [src], [dst]
        f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 500
        f.metrics.enable = True
        f.packet.ethernet()
        (f.packet.ipv6() if name.startswith("v6") else f.packet.ipv4())
        f.packet.udp()
    got = {x.name: (x.frames_tx, x.frames_rx) for x in run_to_stop(a, cfg)}
    assert got == {n: (500, 500) for n in ends}, f"expected every frame of the flows both ways received; got {got}"


def test_a_withdrawal_is_timed_by_its_update_on_the_wire_and_the_range_leaves_the_peer(
        server: Server, transport: str, wires: str, tmp_path: Path) -> None:
    a = api(server, transport)
    cfg = bgp_config(a)
    f = cfg.flows.flow(name="to-d2")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.r4"], ["d2.r4"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 4000
    f.metrics.enable = True
    f.packet.ethernet().ipv4().udp()
    assert warnings_but_testbed_addresses(a.set_config(cfg).warnings) == []
    wait_routes(a)
    # tcpdump beside the port, as a user checks it; in immediate mode, or the UPDATE waits in
    # libpcap's ring for its 1 s block timeout and is not written before tcpdump stops.
    with tcpdump(NS, Z, tmp_path / "bgp.pcap", "tcp port 179", "--immediate-mode"):
        cs = a.control_state()
        cs.protocol.route.names, cs.protocol.route.state = ["d2.r4"], "withdraw"
        assert len(a.set_control_state(cs).warnings) == 0, "expected the withdrawal's UPDATE seen on the wire"
        time.sleep(0.3)
    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    # A nanosecond capture: `usec` holds the nanoseconds.
    updates = [m.sec * 1_000_000_000 + m.usec for d, m in RawPcapReader(str(tmp_path / "bgp.pcap")) if 2 in updates_in(d)]
    assert updates, "expected tcpdump to see the withdrawal's UPDATE"
    withdrawal(a, "to-d2", "d2.r4", updates[0], "UPDATE")
    learned = prefixes(a, "d1.bgp")
    assert not [p for p in learned.ipv4_unicast_prefixes if p.ipv4_address.startswith("10.20.")], "expected d2's IPv4 range gone from d1"


def updates_in(frame: bytes) -> list[int]:
    """The BGP message types in an Ethernet/IPv4/TCP frame."""
    ihl = (frame[14] & 0x0F) * 4
    tcp = 14 + ihl
    msg = frame[tcp + (frame[tcp + 12] >> 4) * 4:]
    kinds = []
    while len(msg) >= 19 and msg[:16] == b"\xff" * 16:
        kinds.append(msg[18])
        msg = msg[max(19, int.from_bytes(msg[16:18], "big")):]
    return kinds


@pytest.mark.parametrize("change,want", [
    (lambda c: setattr(c.devices[0].bgp.ipv4_interfaces[0], "ipv4_name", "nosuch"),
     'devices[0].bgp.ipv4_interfaces[0].ipv4_name: no IPv4 address named "nosuch"'),
    (lambda c: setattr(c.devices[0].bgp.ipv4_interfaces[0].peers[0], "as_number", 0),
     "peers[0].as_number: 0 is not an AS number"),
    (lambda c: c.devices[0].bgp.ipv4_interfaces[0].peers[0].v4_routes[0].addresses[0].__setattr__("count", 100_000),
     "run past the end of the address space"),
], ids=["unknown-interface", "as-out-of-range", "range-past-the-end"])
def test_bad_bgp_input_is_a_400_naming_the_path_with_nothing_started(server: Server, transport: str, wires: str,
                                                                     change: Any, want: str) -> None:
    a = api(server, transport)
    cfg = bgp_config(a)
    if "past the end" in want:
        cfg.devices[0].bgp.ipv4_interfaces[0].peers[0].v4_routes[0].addresses[0].address = "255.255.0.0"
    change(cfg)
    before = daemons()
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert want in str(e.value), f"expected {want!r} in the error; got {e.value}"
    assert daemons() == before, "expected no bgpd started for a refused config"


def daemons() -> list[str]:
    return sorted(subprocess.run(["pgrep", "-f", "gapless-frr"], capture_output=True, text=True).stdout.split())


def daemon_dirs(pid: int) -> list[Path]:
    return sorted(Path("/run/gapless-frr").glob(f"{pid}-*"))


def bgpd_pids(pid: int) -> list[int]:
    return [int(p.read_text()) for d in daemon_dirs(pid) for p in d.glob("bgpd.pid")]


def running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(") ", 1)[1][0] not in "ZX"


def test_a_killed_bgpd_shows_its_session_down_and_the_server_says_which(server: Server, wires: str) -> None:
    import requests

    a = api(server, "https")
    assert warnings_but_testbed_addresses(a.set_config(bgp_config(a)).warnings) == []
    wait_established(a)
    # The routers start a few at a time, in any order: d2's directory is the one whose
    # bgpd has d2's router id.
    d2 = next(d for d in daemon_dirs(server.proc.pid) if " bgp router-id 1.1.1.2\n" in (d / "bgpd.conf").read_text())
    os.kill(int((d2 / "bgpd.pid").read_text()), signal.SIGKILL)
    t0 = time.monotonic()
    while (m := bgp_metrics(a))["d1.bgp"].session_state == "up":
        assert time.monotonic() - t0 < 5, "expected d1's session to go down when its peer's daemon died"
        time.sleep(0.1)
    assert (m["d2.bgp"].session_state, m["d2.bgp"].fsm_state) == ("down", "idle"), m["d2.bgp"]
    r = requests.post(f"{server.otg}/monitor/metrics", json={"choice": "bgpv4"}, verify=False, timeout=10).json()
    assert any('bgpd of device "d2" exited' in w for w in r["warnings"]), f"expected a warning naming d2's daemon; got {r['warnings']}"
    # protocol.all start brings it back.
    start_protocols(a)
    wait_established(a)


def gone_within(pids: list[int], seconds: float) -> float:
    """Seconds until none of `pids` runs; fails after `seconds`, naming those left."""
    t0 = time.monotonic()
    while any(map(running, pids)):
        left = [p for p in pids if running(p)]
        assert time.monotonic() - t0 < seconds, f"expected the daemons gone within {seconds} s; {left} still run"
        time.sleep(0.02)
    return time.monotonic() - t0


def test_a_killed_servers_daemons_are_stopped_by_its_keeper_and_the_next_server_clears_up(
        server: Server, wires: str, tmp_path: Path) -> None:
    """kill -9 leaves no handler to run: the server's keeper, holding the other end of a pipe
    the kernel closes with the server, stops its daemons (FRR's daemons fork away and change
    user, so a parent-death signal would not reach them)."""
    # The module's server lets go of its devices' MACs on the veths first.
    shared = api(server, "https")
    shared.set_config(shared.config())
    s = Server(tmp_path / "a.db")
    a = api(s, "https")
    assert warnings_but_testbed_addresses(a.set_config(bgp_config(a)).warnings) == []
    wait_established(a)
    killed = s.proc.pid
    pids = bgpd_pids(killed)
    assert len(pids) == 2 and all(map(running, pids)), f"expected a bgpd per device; got {pids}"
    os.kill(killed, signal.SIGKILL)
    s.proc.wait(timeout=10)
    s.log.close()
    took = gone_within(pids, 1.0)
    print(f"a killed server's daemons were gone {took * 1000:.0f} ms after its death")
    s = Server(tmp_path / "b.db")
    try:
        assert daemon_dirs(killed) == [], f"expected the next server to remove their directories; got {daemon_dirs(killed)}"
        a = api(s, "https")
        a.set_config(bgp_config(a))  # the same MACs and addresses are free again
        wait_established(a)
    finally:
        s.stop()
    assert bgpd_pids(s.proc.pid) == [] and daemon_dirs(s.proc.pid) == [], "expected a stopped server to stop its daemons"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_server_and_its_daemons_as_ctrl_c_does(
        server: Server, wires: str, tmp_path: Path, sig: signal.Signals) -> None:
    shared = api(server, "https")
    shared.set_config(shared.config())
    s = Server(tmp_path / "a.db")
    a = api(s, "https")
    a.set_config(bgp_config(a))
    pids, pid = bgpd_pids(s.proc.pid), s.proc.pid
    assert len(pids) == 2, f"expected a bgpd per device; got {pids}"
    t0 = time.monotonic()
    s.proc.send_signal(sig)
    rc = s.proc.wait(timeout=15)
    took = time.monotonic() - t0
    s.log.close()
    assert rc == 0, f"expected {sig.name} to stop the server cleanly (exit 0); got {rc}"
    assert took < 10, f"expected the server stopped within 10 s of {sig.name}; it took {took:.1f} s"
    assert not any(map(running, pids)) and daemon_dirs(pid) == [], \
        f"expected its daemons stopped and their directories removed; running {[p for p in pids if running(p)]}, dirs {daemon_dirs(pid)}"


# A router between the ports, as a tester is wired to the device it accepts: the ports are
# veth-a and veth-z in one namespace, their peers dut-a and dut-z in the router's, where FRR's
# zebra and bgpd (AS 65100) learn d2's range and install it in the kernel, which forwards.
DUT_NS, DUT_AS = "glbgp-dut", 65100


@contextmanager
def frr_router(ns: str, conf: str) -> Iterator[None]:
    """zebra and bgpd started in `ns` with `conf`, in a directory of /run that FRR's user can
    reach; stopped by their pids, the directory removed."""
    run = Path(f"/run/gltest-dut-{os.getpid()}")
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    shutil.chown(run, "frr", "frr")
    (run / "frr.conf").write_text(conf)
    pids = []
    try:
        for daemon in ("zebra", "bgpd"):
            sh("ip", "netns", "exec", ns, f"/usr/lib/frr/{daemon}", "-d", "-u", "frr", "-g", "frr", "-N", "gltest-dut",
               "-f", str(run / "frr.conf"), "-i", str(run / f"{daemon}.pid"), f"--vty_socket={run}",
               "-z", str(run / "zserv.api"), f"--log=file:{run}/{daemon}.log")
            t0 = time.monotonic()
            while not (run / f"{daemon}.pid").exists():
                assert time.monotonic() - t0 < 5, f"expected {daemon} to write its pid; its log: {(run / f'{daemon}.log').read_text() if (run / f'{daemon}.log').exists() else ''}"
                time.sleep(0.05)
            pids.append(int((run / f"{daemon}.pid").read_text()))
        yield
    finally:
        for pid in reversed(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)


@pytest.fixture(scope="module")
def dut() -> Iterator[str]:
    """The tester's namespace (ports veth-a, veth-z) wired to a router namespace running FRR."""
    ns = "glbgp-t"
    for n in (ns, DUT_NS):
        subprocess.run(["ip", "netns", "del", n], capture_output=True)
        sh("ip", "netns", "add", n)
    try:
        for port, side, net in ((A, "dut-a", 1), (Z, "dut-z", 2)):
            sh("ip", "-n", ns, "link", "add", port, "type", "veth", "peer", "name", side, "netns", DUT_NS)
            sh("ip", "-n", ns, "link", "set", port, "up")
            sh("ip", "-n", DUT_NS, "addr", "add", f"198.18.{net}.1/24", "dev", side)
            sh("ip", "-n", DUT_NS, "link", "set", side, "up")
        sh("ip", "netns", "exec", DUT_NS, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        conf = f"""frr defaults traditional
hostname dut
router bgp {DUT_AS}
 bgp router-id 9.9.9.9
 no bgp ebgp-requires-policy
 neighbor 198.18.1.2 remote-as external
 neighbor 198.18.1.2 timers connect 1
 neighbor 198.18.2.2 remote-as external
 neighbor 198.18.2.2 timers connect 1
"""
        with frr_router(DUT_NS, conf):
            yield ns
    finally:
        for n in (ns, DUT_NS):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def dut_config(a: Any, ns: str) -> Any:
    """d1 (198.18.1.2, AS 65001) and d2 (198.18.2.2, AS 65002), each in eBGP with the router;
    d2 advertises 10.20.0.0/24; a flow of 30 000 frames at 10 kframes/s from d1 to it,
    with loss durations and convergence events on."""
    cfg, devices = device_pair(a, ns, MAC, ip4=lambda k: (f"198.18.{k}.2", f"198.18.{k}.1"))
    for k, d in enumerate(devices, 1):
        ebgp_peer(d, k, f"198.18.{k}.1", count=1)
    f = cfg.flows.flow(name="to-d2")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.r4"], ["d2.r4"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 10_000, 30_000
    f.metrics.enable = True
    f.packet.ethernet().ipv4().udp()
    cfg.options.flow_options.packet_loss_duration = True
    cfg.events.dp_events.enable, cfg.events.dp_events.rx_rate_threshold = True, 95
    cfg.events.cp_events.enable = True
    return cfg


def dut_routes() -> str:
    return subprocess.run(["ip", "-n", DUT_NS, "route", "show", "10.20.0.0/24"], capture_output=True, text=True).stdout


def set_route(a: Any, state: str) -> None:
    cs = a.control_state()
    cs.protocol.route.names, cs.protocol.route.state = ["d2.r4"], state
    assert len(a.set_control_state(cs).warnings) == 0, f"expected the {state}'s UPDATE seen on the wire"


def test_a_withdrawal_through_a_router_loses_the_flow_until_the_route_is_back_timed_to_the_frame(
        server: Server, transport: str, dut: str) -> None:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(dut_config(a, dut)).warnings) == []
    t0 = time.monotonic()
    while "198.18.2.2" not in dut_routes():
        assert time.monotonic() - t0 < 20, f"expected the router to install d2's range via 198.18.2.2; got {dut_routes()!r}"
        time.sleep(0.2)
    cs = a.control_state()
    cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
    a.set_control_state(cs)
    time.sleep(1.0)
    set_route(a, "withdraw")
    time.sleep(0.5)
    assert dut_routes() == "", f"expected the router to remove d2's range after the withdrawal; got {dut_routes()!r}"
    set_route(a, "advertise")
    m = wait_stopped(a)[0]
    lost = m.frames_tx - m.frames_rx
    assert m.frames_tx == 30_000 and 0 < lost < 30_000, f"expected the flow to lose frames while the range was withdrawn; got tx {m.frames_tx}, rx {m.frames_rx}"
    req = a.metrics_request()
    req.convergence.flow_names = ["to-d2"]
    c = a.get_metrics(req).convergence_metrics[0]
    at = {e.type: e.begin_timestamp_ns for e in c.events}
    assert set(at) >= {"route_withdraw", "route_advertise", "flow_rx_rate_below_threshold", "flow_rx_rate_above_threshold"}, \
        f"expected both route events and both crossings; got {[(e.type, e.source) for e in c.events]}"
    below, above = at["flow_rx_rate_below_threshold"], at["flow_rx_rate_above_threshold"]
    # The last frame before the outage may still arrive after the UPDATE left (the router
    # needs time to act on it); the first after it arrives only once the route is back.
    assert at["route_withdraw"] - 100_000 <= below < at["route_advertise"] <= above, \
        f"expected withdraw <= below threshold < advertise <= above threshold (ns); got {at}"
    # Exact to a frame: the outage's span is the lost frames' time at the flow's rate, when
    # the sender kept its schedule. A frame that left late (this VM's host stalls the sender)
    # arrives that much later: then the run's own lateness must account for the difference.
    span_ns = above - below
    late = otg_json(server, "/monitor/metrics", {"choice": "flow", "flow": {"flow_names": ["to-d2"]}})["flow_metrics"][0]["x_gapless"]["lateness"]
    off = abs(span_ns - (lost + 1) * 100_000)
    if late["max_ns"] <= 100_000:
        assert off <= 2 * 100_000, \
            f"expected the outage's span to be (lost + 1) frame intervals = {(lost + 1) * 100} µs within two frames; got {span_ns / 1e3:.0f} µs"
    else:
        assert late["late_over_one_gap"] > 0 and off <= 2 * 100_000 + late["max_ns"], \
            f"expected the outage's span within two frames and the sender's worst lateness ({late['max_ns']} ns) of {(lost + 1) * 100} µs; got {span_ns / 1e3:.0f} µs ({late})"
    assert c.data_plane_convergence_us == pytest.approx(span_ns / 1e3), f"expected the longest outage's span; got {c.data_plane_convergence_us}"
    assert c.control_plane_data_plane_convergence_us == pytest.approx((above - at["route_withdraw"]) / 1e3), \
        f"expected control-plane convergence from the withdrawal to the recovery; got {c.control_plane_data_plane_convergence_us}"
    print(f"router: outage {span_ns / 1e6:.2f} ms, {lost} frames; recovery {(above - at['route_advertise']) / 1e6:.2f} ms after the advertise's UPDATE,"
          f" loss {(below - at['route_withdraw']) / 1e6:.2f} ms after the withdrawal's")


def many_pairs_config(a: Any, pairs: int) -> Any:
    """`pairs` BGP device pairs on the two ports, each in eBGP with its twin (a slow set_config:
    a bgpd each, started one after another)."""
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    for i in range(pairs):
        for k in (1, 2):
            d = cfg.devices.device(name=f"m{i}-{k}")[-1]
            e = d.ethernets.add()
            e.name, e.mac, e.connection.port_name = f"m{i}-{k}.eth", f"02:67:6c:0c:{i:02x}:0{k}", f"p{k}"
            ip = e.ipv4_addresses.add()
            ip.name, ip.address, ip.gateway, ip.prefix = f"m{i}-{k}.ip4", f"10.99.{i}.{k}", f"10.99.{i}.{3 - k}", 24
            d.bgp.router_id = f"10.99.{i}.{k}"
            peer = d.bgp.ipv4_interfaces.add(ipv4_name=ip.name).peers.add()
            peer.name, peer.peer_address, peer.as_type, peer.as_number = f"m{i}-{k}.bgp", f"10.99.{i}.{3 - k}", "ebgp", 65000 + k
    return cfg


def test_requests_answer_while_a_slow_set_config_brings_its_daemons_up(server: Server, wires: str) -> None:
    """set_config holds the server's state only to swap configs: while it brings 20 bgpd up,
    GET /config answers with the config being set, a second set_config and a control request
    are a 409 that says why, and port metrics answer. Ordering, not timing: the bench
    (bench/otg_requests.py) measures how long they take."""
    import threading

    import requests

    a = api(server, "https")
    cfg = many_pairs_config(a, 20)
    body = cfg.serialize()
    done = threading.Event()
    answer: dict[str, Any] = {}

    def set_it() -> None:
        answer["r"] = requests.post(f"{server.otg}/config", data=body, headers={"Content-Type": "application/json"},
                                    verify=False, timeout=120)
        done.set()

    t = threading.Thread(target=set_it)
    t.start()
    seen: dict[str, int] = {}
    try:
        while not done.is_set():
            g = requests.get(f"{server.otg}/config", verify=False, timeout=10)
            if g.status_code == 200 and len(g.json().get("devices", [])) == 40 and not done.is_set():
                seen["get"] = 200
                again = requests.post(f"{server.otg}/config", data=body, headers={"Content-Type": "application/json"},
                                      verify=False, timeout=10)
                ctl = requests.post(f"{server.otg}/control/state", verify=False, timeout=10,
                                    json={"choice": "protocol", "protocol": {"choice": "all", "all": {"state": "start"}}})
                if not done.is_set():
                    seen["again"], seen["control"] = again.status_code, ctl.status_code
                    assert "a config is being set" in again.text and "a config is being set" in ctl.text, (again.text, ctl.text)
                break
            time.sleep(0.01)
    finally:
        t.join(timeout=120)
    print(f"while set_config ran: {seen}")
    assert answer["r"].status_code == 200, answer["r"].text
    assert seen.get("get") == 200, f"expected GET /config to answer with the config being set before set_config did; saw {seen}"
    if "again" in seen:
        assert (seen["again"], seen["control"]) == (409, 409), f"expected 409 for both while it was set; got {seen}"
    a.set_config(a.config())
