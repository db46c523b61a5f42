"""LAGs and LACP behind OTG, our own 802.1AX, against a partner we did not write: Open vSwitch's
userspace datapath (no kernel module; this kernel has no bonding, team or openvswitch module).

The set-up, in one namespace: veths m1-o1 and m2-o2 are the LAG's two links, m3-o3 a third
port. gapless has p1 (m1), p2 (m2) and p3 (m3); OVS bridges o1 and o2 as bond0 and o3 as a
port. A flow from the LAG to p3 goes through OVS's bond and out o3; OVS's view of the
aggregate is read from `ovs-appctl lacp/show`, and each member's share from the kernel's own
counters on the veths. Two LAGs of our own back to back are tested over HTTPS and gRPC."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conftest import Server, have, require_root, tcpdump, warnings_but_testbed_addresses
from test_otg import api, transport  # noqa: F401 (transport: a fixture)

NS = "gllag"
SYS_ID, KEY = "02:aa:00:00:00:01", 7


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout


def ns_sh(*args: str) -> str:
    return sh("ip", "netns", "exec", NS, *args)


class Ovs:
    """ovsdb-server and ovs-vswitchd of our own in the test's namespace, their files in `d`:
    bridge br0 (userspace datapath) with o1 and o2 as bond0 and o3 as a port."""

    def __init__(self, d: Path) -> None:
        self.d = d
        self.env = {**os.environ, "OVS_RUNDIR": str(d), "OVS_DBDIR": str(d), "OVS_LOGDIR": str(d)}
        db, sock = d / "conf.db", d / "db.sock"
        self.db = f"--db=unix:{sock}"
        self.run("ovsdb-tool", "create", str(db), "/usr/share/openvswitch/vswitch.ovsschema")
        self.run("ovsdb-server", str(db), f"--remote=punix:{sock}", f"--pidfile={d}/ovsdb.pid", "--detach",
                 f"--log-file={d}/ovsdb.log")
        self.vsctl("--no-wait", "init")
        self.run("ovs-vswitchd", f"unix:{sock}", f"--pidfile={d}/vswitchd.pid", "--detach", f"--log-file={d}/vswitchd.log")
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
        self.vsctl("add-port", "br0", "o3")

    def run(self, *args: str) -> str:
        return subprocess.run(["ip", "netns", "exec", NS, *args], check=True, capture_output=True, text=True,
                              timeout=60, env=self.env).stdout

    def vsctl(self, *args: str) -> str:
        return self.run("ovs-vsctl", self.db, "--timeout=20", *args)

    def appctl(self, *args: str) -> str:
        pid = (self.d / "vswitchd.pid").read_text().strip()
        return self.run("ovs-appctl", "-t", f"{self.d}/ovs-vswitchd.{pid}.ctl", *args)

    def bond(self, *settings: str) -> None:
        """bond0 over o1 and o2 anew, with `settings` (lacp=..., bond_mode=..., other_config:...)."""
        self.vsctl("--if-exists", "del-port", "br0", "bond0")
        self.vsctl("add-bond", "br0", "bond0", "o1", "o2", *settings)

    def members(self) -> dict[str, dict[str, str]]:
        """`lacp/show bond0` by member: each `key: value` line under it."""
        out: dict[str, dict[str, str]] = {}
        cur: dict[str, str] = {}
        for line in self.appctl("lacp/show", "bond0").splitlines():
            m = re.match(r"\s*member: (\w+): (.*)", line)
            if m:
                cur = out.setdefault(m.group(1), {"status": m.group(2)})
            elif ":" in line and cur is not None and out:
                k, v = line.split(":", 1)
                cur[k.strip()] = v.strip()
        return out

    def stop(self) -> None:
        for name in ("vswitchd", "ovsdb"):
            p = self.d / f"{name}.pid"
            if p.exists():
                subprocess.run(["kill", p.read_text().strip()], capture_output=True)


@pytest.fixture(scope="module")
def ovs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ovs]:
    """The namespace, its three veth pairs, and OVS on the o-ends; all gone at the end."""
    require_root()
    have("ovs-vswitchd")
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    sh("ip", "netns", "add", NS)
    o = None
    try:
        for k in (1, 2, 3):
            sh("ip", "-n", NS, "link", "add", f"m{k}", "type", "veth", "peer", "name", f"o{k}")
            for dev in (f"m{k}", f"o{k}"):
                sh("ip", "-n", NS, "link", "set", dev, "up")
        sh("ip", "-n", NS, "link", "set", "lo", "up")
        # OVS's userspace datapath reads and sends frames as they are: a TCP segment whose
        # checksum the kernel left to a NIC would reach the other side unfinished.
        for dev in ("m1", "m2", "m3", "o1", "o2", "o3"):
            ns_sh("ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off")
        o = Ovs(tmp_path_factory.mktemp("ovs"))
        yield o
    finally:
        if o is not None:
            o.stop()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def lag_config(a: Any, protocol: str = "lacp", activity: str = "active") -> Any:
    """p1, p2 as LAG l1 (system id SYS_ID, key KEY, port numbers 11 and 12, fast and short), p3;
    every link up again, whatever a test before left."""
    for k in (1, 2, 3):
        sh("ip", "-n", NS, "link", "set", f"m{k}", "up")
    cfg = a.config()
    for k in (1, 2, 3):
        cfg.ports.port(name=f"p{k}", location=f"{NS}/m{k}")
    lag = cfg.lags.lag(name="l1")[-1]
    if protocol == "lacp":
        lag.protocol.lacp.actor_system_id, lag.protocol.lacp.actor_key = SYS_ID, KEY
    else:
        lag.protocol.static.lag_id = 3
    for k in (1, 2):
        m = lag.ports.port(port_name=f"p{k}")[-1]
        m.ethernet.name, m.ethernet.mac = f"l1.m{k}", f"02:aa:00:00:01:0{k}"
        if protocol == "lacp":
            m.lacp.actor_port_number, m.lacp.actor_activity = 10 + k, activity
            m.lacp.lacpdu_periodic_time_interval, m.lacp.lacpdu_timeout = 1, 3
    return cfg


def lag_flow(cfg: Any, name: str, tx: str, rx: str, pps: int, count: int | None = None, seconds: float | None = None) -> Any:
    """A UDP flow whose source port takes 256 values, so that it spreads over the members."""
    f = cfg.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = tx, [rx]
    f.size.fixed, f.rate.pps = 128, pps
    if count is not None:
        f.duration.fixed_packets.packets = count
    else:
        f.duration.fixed_seconds.seconds = seconds
    f.metrics.enable = True
    eth, ip, udp = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = "02:aa:00:00:00:aa", "02:bb:00:00:00:03"
    ip.src.value, ip.dst.value = "10.9.0.1", "10.9.0.3"
    udp.src_port.increment.start, udp.src_port.increment.step, udp.src_port.increment.count = 5000, 1, 256
    udp.dst_port.value = 4789 + 1
    return f


def spread_over_members(a: Any, flow: str, frames: int) -> Any:
    """Runs `flow` from the LAG to p3: every frame arrives, and each member carries at least a
    quarter by its peer veth's own counter. The flow's metric, and each veth's count."""
    m, on = run_counted(a, flow, ("o1", "o2"))
    assert m.frames_tx == m.frames_rx == frames, f"expected all {frames} frames through OVS; got {m.frames_tx} sent, {m.frames_rx} received"
    assert all(n >= frames // 4 for n in on.values()), f"expected each member to carry at least a quarter; the veths counted {on}"
    return m, on


def run_counted(a: Any, flow: str, veths: tuple[str, ...]) -> tuple[Any, dict[str, int]]:
    """Runs `flow` to its end: its metric, and the frames each of `veths` received meanwhile
    (the kernel's own counters)."""
    before = {d: rx_packets(d) for d in veths}
    run_flow(a, flow)
    m = wait_done(a, flow)
    return m, {d: rx_packets(d) - before[d] for d in veths}


def members_count_their_share(a: Any, field: str, total: int, on: dict[str, int], veth: dict[str, str]) -> None:
    """The LAG members' port metric `field` (frames_tx or frames_rx) adds up to the flow's
    `total`, and each member's is what its veth `veth[port]` counted in `on` (within the
    LACPDUs)."""
    req = a.metrics_request()
    req.port.port_names = list(veth)
    got = {p.name: getattr(p, field) for p in a.get_metrics(req).port_metrics}
    assert sum(got.values()) == total, f"expected the members' {field} to add up to the flow's {total}; got {got}"
    assert all(abs(got[p] - on[d]) <= 20 for p, d in veth.items()), \
        f"expected each member's {field} to be what its veth counted (within LACPDUs); got {got} vs {on}"


def lacp(a: Any) -> dict[str, Any]:
    req = a.metrics_request()
    req.lacp.lag_names = ["l1"]
    return {m.lag_member_port_name: m for m in a.get_metrics(req).lacp_metrics}


def until(what: str, ok: Callable[[], Any], within: float) -> Any:
    t0 = time.monotonic()
    while not (got := ok()):
        assert time.monotonic() - t0 < within, f"expected {what} within {within} s"
        time.sleep(0.1)
    return got


def in_sync(ovs: Ovs) -> bool:
    m = ovs.members()
    return len(m) == 2 and all("current attached" in v["status"] and "distributing" in v.get("partner state", "")
                               for v in m.values())


def stamps_ns(path: Path) -> list[int]:
    """The kernel RX stamps of a nanosecond pcap's frames."""
    from scapy.all import RawPcapReader  # type: ignore[import-untyped]

    return [meta.sec * 1_000_000_000 + meta.usec for _, meta in RawPcapReader(str(path))]


BALANCE_TCP = ("lacp=active", "bond_mode=balance-tcp", "other_config:lacp-time=fast")


def set_and_sync(a: Any, ovs: Ovs, cfg: Any) -> None:
    """Sets `cfg` and waits for OVS to attach both members to our aggregate."""
    a.set_config(cfg)
    until("OVS in sync with us", lambda: in_sync(ovs), 15)


def rx_packets(dev: str) -> int:
    return int(ns_sh("cat", f"/sys/class/net/{dev}/statistics/rx_packets"))


def run_flow(a: Any, name: str) -> Any:
    cs = a.control_state()
    cs.traffic.flow_transmit.state, cs.traffic.flow_transmit.flow_names = "start", [name]
    a.set_control_state(cs)


def flow_metric(a: Any, name: str) -> Any:
    req = a.metrics_request()
    req.flow.flow_names = [name]
    return a.get_metrics(req).flow_metrics[0]


def wait_done(a: Any, name: str, within: float = 30) -> Any:
    return until(f"flow {name} to stop", lambda: (m := flow_metric(a, name)).transmit == "stopped" and m, within)


def test_ovs_sees_our_system_key_and_ports_each_synchronized_collecting_distributing(server: Server, ovs: Ovs) -> None:
    ovs.bond(*BALANCE_TCP)
    a = api(server, "https")
    assert warnings_but_testbed_addresses(a.set_config(lag_config(a)).warnings) == []
    until("OVS to attach both members to our aggregate", lambda: in_sync(ovs), 15)
    seen = ovs.members()
    for dev, port in (("o1", "11"), ("o2", "12")):
        m = seen[dev]
        assert (m["partner sys_id"], m["partner key"], m["partner port_id"]) == (SYS_ID, str(KEY), port), \
            f"expected OVS to see system {SYS_ID}, key {KEY}, port {port} on {dev}; got {m}"
        assert set(m["partner state"].split()) >= {"activity", "timeout", "aggregation", "synchronized", "collecting",
                                                   "distributing"}, m["partner state"]
    ours = until("both members distributing", lambda: (m := lacp(a)) and all(x.distributing for x in m.values()) and m, 5)
    for port, dev in (("p1", "o1"), ("p2", "o2")):
        x = ours[port]
        assert (x.system_id, x.oper_key, x.synchronization, x.activity, x.timeout) == (SYS_ID, KEY, "in_sync", "active", "short"), x
        assert (x.partner_id, str(x.partner_port_num)) == (seen[dev]["actor sys_id"], seen[dev]["actor port_id"]), \
            f"expected OVS's own view of itself as our partner on {port}; got {x} vs {seen[dev]}"
        assert x.lacp_packets_rx >= 1 and x.lacp_packets_tx >= 1 and x.lacp_rx_errors == 0, x
    req = a.metrics_request()
    req.lag.lag_names = ["l1"]
    (lag,) = a.get_metrics(req).lag_metrics
    assert (lag.name, lag.oper_status, lag.member_ports_up) == ("l1", "up", 2), lag
    # The same over gNMI, as ondatra and featureprofiles read it (pygnmi here).
    from test_gnmi import client, leaves

    with client(server) as gc:
        got = leaves(gc.get(path=["lags/lag[name=l1]/state", "lacp/lag-members/lag-member[name=p2]/state"],
                            encoding="proto"))
        tree = gc.get(path=["lacp/lag-members/lag-member[name=p1]"], encoding="json_ietf")
    [u] = tree["notification"][0]["update"]
    assert u["val"]["state"]["synchronization"] == "IN_SYNC" and u["val"]["state"]["counters"]["lacp-in-pkts"] != "0", u
    assert got["lags/lag[name=l1]/state/oper-status"] == "UP", got
    assert got["lags/lag[name=l1]/state/counters/member-ports-up"] == 2, got
    m = "lacp/lag-members/lag-member[name=p2]/state"
    assert (got[f"{m}/system-id"], got[f"{m}/oper-key"], got[f"{m}/port-num"]) == (SYS_ID, KEY, 12), got
    assert (got[f"{m}/synchronization"], got[f"{m}/distributing"]) == ("IN_SYNC", True), got
    assert (got[f"{m}/partner-id"], got[f"{m}/partner-port-num"]) == (seen["o2"]["actor sys_id"], int(seen["o2"]["actor port_id"])), got


def test_a_flow_from_the_lag_spreads_over_both_members_and_arrives_whole(server: Server, ovs: Ovs) -> None:
    ovs.bond(*BALANCE_TCP)
    a = api(server, "https")
    cfg = lag_config(a)
    lag_flow(cfg, "spread", "l1", "p3", pps=5_000, count=5_000)
    set_and_sync(a, ovs, cfg)
    _, on = spread_over_members(a, "spread", 5_000)
    members_count_their_share(a, "frames_tx", 5_000, on, {"p1": "o1", "p2": "o2"})


def test_a_member_link_down_moves_its_share_within_100_ms(server: Server, ovs: Ovs, tmp_path: Path) -> None:
    ovs.bond(*BALANCE_TCP)
    a = api(server, "https")
    cfg = lag_config(a)
    f = lag_flow(cfg, "conv", "l1", "p3", pps=20_000, count=60_000)
    f.metrics.enable = True
    cfg.events.dp_events.enable, cfg.events.dp_events.rx_rate_threshold = True, 95
    cfg.events.cp_events.enable = True
    set_and_sync(a, ovs, cfg)
    with tcpdump(NS, "m3", tmp_path / "sink.pcap", "udp", keep_all=True):
        run_flow(a, "conv")
        time.sleep(1)
        cs = a.control_state()
        cs.port.link.port_names, cs.port.link.state = ["p1"], "down"
        a.set_control_state(cs)
        m = wait_done(a, "conv")
    lost = m.frames_tx - m.frames_rx
    assert lost < 2_000, f"expected under 100 ms of frames at 20 kframes/s lost when p1 went down; got {lost} of {m.frames_tx}"
    req = a.metrics_request()
    req.convergence.flow_names = ["conv"]
    c = a.get_metrics(req).convergence_metrics[0]
    dp = c.data_plane_convergence_us
    # tcpdump on p3's interface, where the meter reads: the outage the meter timed runs from
    # the frame before the hole to the frame after it, which tcpdump saw at the same kernel
    # stamps. (Its largest gap is not the outage: a stall of the host or of OVS delays frames
    # without losing any, and the members' paths interleave, so half the frames are lost for
    # a few ms rather than all of them.)
    if dp is not None:
        assert dp < 100_000, f"expected the outage under 100 ms; got {dp} µs"
        ts = stamps_ns(tmp_path / "sink.pcap")
        edges = [e.begin_timestamp_ns for e in c.events if e.type.startswith("flow_rx_rate_")]
        spans = [(int(b), int(e)) for b, e in zip(edges[::2], edges[1::2])]
        frm, to = max(spans, key=lambda x: x[1] - x[0])
        assert abs((to - frm) / 1e3 - dp) < 1, f"expected the longest crossing pair to be the outage; got {spans} for {dp} µs"
        near = lambda t: min(abs(x - t) for x in ts)  # noqa: E731
        assert near(frm) <= 1_000 and near(to) <= 1_000, \
            f"expected tcpdump to have frames at the outage's edges {frm} and {to} (within 1 µs); got {near(frm)} and {near(to)} ns away"
    cs.port.link.state = "up"
    a.set_control_state(cs)


def test_flows_on_the_lag_start_with_a_member_down_and_go_over_the_other(server: Server, ovs: Ovs) -> None:
    ovs.bond(*BALANCE_TCP)
    a = api(server, "https")
    cfg = lag_config(a)
    lag_flow(cfg, "out", "l1", "p3", pps=5_000, count=4_000)
    f = lag_flow(cfg, "back", "p3", "l1", pps=5_000, count=4_000)
    f.packet[0].src.value, f.packet[0].dst.value = "02:bb:00:00:00:03", "02:aa:00:00:00:aa"
    set_and_sync(a, ovs, cfg)
    cs = a.control_state()
    cs.port.link.port_names, cs.port.link.state = ["p1"], "down"
    a.set_control_state(cs)
    try:
        def one_up() -> bool:
            req = a.metrics_request()
            req.lag.lag_names = ["l1"]
            return a.get_metrics(req).lag_metrics[0].member_ports_up == 1

        until("the LAG to count one member up", one_up, 5)
        before = {d: rx_packets(d) for d in ("o1", "o2", "m1", "m2")}
        run_flow(a, "out")  # it also teaches OVS the LAG's MAC, which "back" is sent to
        out = wait_done(a, "out")
        run_flow(a, "back")
        back = wait_done(a, "back")
        on = {d: rx_packets(d) - before[d] for d in before}
        assert out.frames_tx == out.frames_rx == 4_000, f"expected the flow from the LAG whole over p2; got {out}"
        assert back.frames_tx == back.frames_rx == 4_000, f"expected the flow to the LAG metered whole on p2; got {back}"
        assert on["o1"] == on["m1"] == 0 and on["o2"] >= 4_000 and on["m2"] >= 4_000, f"expected nothing on p1's link; the veths counted {on}"
    finally:
        cs.port.link.state = "up"
        a.set_control_state(cs)


def test_admin_down_on_a_member_moves_its_traffic_once_ovs_reads_the_next_lacpdu(server: Server, ovs: Ovs) -> None:
    ovs.bond(*BALANCE_TCP)
    a = api(server, "https")
    cfg = lag_config(a)
    lag_flow(cfg, "moved", "l1", "p3", pps=2_000, seconds=6)
    set_and_sync(a, ovs, cfg)
    cs = a.control_state()
    cs.protocol.lacp.admin.lag_member_names, cs.protocol.lacp.admin.state = ["p1"], "down"
    a.set_control_state(cs)
    t0 = time.monotonic()
    until("OVS to see p1 out of sync", lambda: "synchronized" not in ovs.members()["o1"].get("partner state", ""), 3)
    took = time.monotonic() - t0
    assert took < 1.5, f"expected OVS to read p1's next LACPDU (1 s apart, or at once on a change) within 1.5 s; took {took:.2f} s"
    x = lacp(a)
    assert (x["p1"].synchronization, x["p1"].distributing, x["p2"].distributing) == ("out_sync", False, True), x
    before = rx_packets("o1")
    run_flow(a, "moved")
    m = wait_done(a, "moved")
    on_o1 = rx_packets("o1") - before
    assert on_o1 <= 10, f"expected no flow frames on p1 (LACPDUs only); its peer counted {on_o1}"
    assert m.frames_rx == m.frames_tx == 12_000, f"expected every frame over p2; got {m.frames_tx} sent, {m.frames_rx} received"
    cs.protocol.lacp.admin.state = "up"
    a.set_control_state(cs)
    until("OVS in sync again", lambda: in_sync(ovs), 5)


def test_passive_members_against_an_active_partner_come_up(server: Server, ovs: Ovs) -> None:
    ovs.bond(*BALANCE_TCP)
    a = api(server, "https")
    a.set_config(lag_config(a, activity="passive"))
    until("OVS in sync with our passive members", lambda: in_sync(ovs), 15)
    x = lacp(a)
    assert all(m.activity == "passive" and m.distributing for m in x.values()), x
    assert all("activity" not in ovs.members()[d]["partner state"].split() for d in ("o1", "o2")), ovs.members()


def test_a_static_lag_works_against_an_ovs_bond_without_lacp(server: Server, ovs: Ovs) -> None:
    ovs.bond("lacp=off", "bond_mode=balance-slb", "other_config:all-members-active=true")
    a = api(server, "https")
    cfg = lag_config(a, protocol="static")
    lag_flow(cfg, "static", "l1", "p3", pps=5_000, count=5_000)
    a.set_config(cfg)
    spread_over_members(a, "static", 5_000)
    req = a.metrics_request()
    req.lacp.lag_names = ["l1"]
    assert list(a.get_metrics(req).lacp_metrics) == [], "a static LAG has no LACP"


def test_ovs_balance_tcp_to_our_lag_is_metered_as_one_sequence(server: Server, ovs: Ovs) -> None:
    # OVS gives every hash bucket a member when the bond comes up: all to the first member
    # enabled, until a rebalance moves some (every 10 s by default; every second here).
    ovs.bond("lacp=active", "bond_mode=balance-tcp", "other_config:lacp-time=fast",
             "other_config:bond-rebalance-interval=1000")
    a = api(server, "https")
    cfg = lag_config(a)
    f = lag_flow(cfg, "back", "p3", "l1", pps=5_000, count=20_000)
    # To the LAG's source MAC, which OVS learns on bond0 from "teach"; from p3's own.
    f.packet[0].src.value, f.packet[0].dst.value = "02:bb:00:00:00:03", "02:aa:00:00:00:aa"
    lag_flow(cfg, "teach", "l1", "p3", pps=100, count=10)
    set_and_sync(a, ovs, cfg)
    run_flow(a, "teach")
    wait_done(a, "teach")
    m, on = run_counted(a, "back", ("m1", "m2"))
    assert m.frames_rx == m.frames_tx == 20_000, f"expected all 20000 over both members as one flow; got {m}"
    assert all(n >= 1_000 for n in on.values()), \
        f"expected OVS's balance-tcp to use both members; got {on}\n{ovs.appctl('bond/show', 'bond0')}\n{ovs.appctl('fdb/show', 'br0')}"
    members_count_their_share(a, "frames_rx", 20_000, on, {"p1": "m1", "p2": "m2"})


def devices_on_lag_and_p3(cfg: Any) -> None:
    """d1 on LAG l1 (1.1.1.1) and d2 on p3 (1.1.1.2), each the other's gateway, in eBGP (AS
    65001 and 65002), each advertising four /24s; a flow from d1 to d2 whose UDP source port
    takes 256 values."""
    from test_otg_bgp import ebgp_peer

    for k, (conn, mac) in enumerate([("lag_name", "02:d1:00:00:00:01"), ("port_name", "02:d2:00:00:00:02")], 1):
        d = cfg.devices.device(name=f"d{k}")[-1]
        e = d.ethernets.add()
        e.name, e.mac = f"d{k}.eth", mac
        setattr(e.connection, conn, "l1" if k == 1 else "p3")
        ip = e.ipv4_addresses.add()
        ip.name, ip.address, ip.gateway, ip.prefix = f"d{k}.ip4", f"1.1.1.{k}", f"1.1.1.{3 - k}", 24
        ebgp_peer(d, k, f"1.1.1.{3 - k}", count=4)
    f = cfg.flows.flow(name="dev")[-1]
    f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.ip4"], ["d2.ip4"]
    f.size.fixed, f.rate.pps = 128, 5_000
    f.duration.fixed_packets.packets = 5_000
    f.metrics.enable = True
    _, _, udp = f.packet.ethernet().ipv4().udp()
    udp.src_port.increment.start, udp.src_port.increment.step, udp.src_port.increment.count = 5000, 1, 256
    udp.dst_port.value = 4790


def test_a_device_on_the_lag_peers_in_bgp_through_ovs_and_its_flow_spreads(server: Server, ovs: Ovs) -> None:
    """The device's ARP, its BGP session (TCP, both ways through OVS's bond) and its routes go
    over the LAG's interface, forwarded over the members; its flow spreads over both."""
    from test_otg_bgp import bgp_metrics, start_protocols

    ovs.bond(*BALANCE_TCP, "other_config:bond-rebalance-interval=1000")
    a = api(server, "https")
    cfg = lag_config(a)
    devices_on_lag_and_p3(cfg)
    set_and_sync(a, ovs, cfg)
    start_protocols(a)

    def routes() -> Any:
        m = bgp_metrics(a)
        got = {n: (x.session_state, x.routes_received) for n, x in m.items()}
        return got == {"d1.bgp": ("up", 4), "d2.bgp": ("up", 4)} and m

    m = until("both sessions up, each with the other's 4 routes", routes, 30)
    assert m["d1.bgp"].opens_sent >= 1 and m["d2.bgp"].updates_received >= 1, m
    req = a.states_request()
    req.ipv4_neighbors.ethernet_names = ["d1.eth"]
    n = a.get_states(req).ipv4_neighbors
    assert [(x.ipv4_address, x.link_layer_address) for x in n] == [("1.1.1.2", "02:d2:00:00:00:02")], \
        f"expected d1 to have resolved d2 over the LAG; got {n}"
    spread_over_members(a, "dev", 5_000)
    assert bgp_metrics(a)["d1.bgp"].session_state == "up", "expected the session still up after the flow"


@pytest.fixture(scope="module")
def back_to_back() -> Iterator[str]:
    """Namespace gllag2: veths a1-b1 and a2-b2, for two LAGs of our own."""
    require_root()
    ns = "gllag2"
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    sh("ip", "netns", "add", ns)
    try:
        for k in (1, 2):
            sh("ip", "-n", ns, "link", "add", f"a{k}", "type", "veth", "peer", "name", f"b{k}")
            for dev in (f"a{k}", f"b{k}"):
                sh("ip", "-n", ns, "link", "set", dev, "up")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_two_of_our_lags_back_to_back_negotiate_and_carry_a_flow(server: Server, transport: str, back_to_back: str) -> None:
    a = api(server, transport)
    cfg = a.config()
    for side in ("a", "b"):
        for k in (1, 2):
            cfg.ports.port(name=f"{side}{k}", location=f"{back_to_back}/{side}{k}")
        lag = cfg.lags.lag(name=f"lag-{side}")[-1]
        lag.protocol.lacp.actor_system_id = f"02:0{'ab'.index(side) + 1}:00:00:00:00"
        for k in (1, 2):
            m = lag.ports.port(port_name=f"{side}{k}")[-1]
            m.ethernet.name, m.ethernet.mac = f"{side}{k}.eth", f"02:0{'ab'.index(side) + 1}:00:00:00:0{k}"
        # A device on each LAG: each resolves the other through both LAGs' interfaces.
        k = "ab".index(side) + 1
        e = cfg.devices.device(name=f"d{side}")[-1].ethernets.add()
        e.name, e.mac, e.connection.lag_name = f"d{side}.eth", f"02:0{k}:00:00:00:dd", f"lag-{side}"
        ip = e.ipv4_addresses.add()
        ip.name, ip.address, ip.gateway, ip.prefix = f"d{side}.ip4", f"1.1.2.{k}", f"1.1.2.{3 - k}", 24
    lag_flow(cfg, "b2b", "lag-a", "lag-b", pps=5_000, count=5_000)
    a.set_config(cfg)

    def both_up() -> bool:
        req = a.metrics_request()
        req.lag.lag_names = []
        return all(m.oper_status == "up" and m.member_ports_up == 2 for m in a.get_metrics(req).lag_metrics)

    until("both LAGs up with two members each", both_up, 10)
    req = a.metrics_request()
    req.lacp.lag_names = ["lag-a"]
    x = {m.lag_member_port_name: m for m in a.get_metrics(req).lacp_metrics}
    assert (x["a1"].partner_id, x["a1"].partner_key, x["a1"].partner_port_num) == ("02:02:00:00:00:00", 2, 1), x["a1"]

    def resolved() -> Any:
        req = a.states_request()
        req.ipv4_neighbors.ethernet_names = []
        got = {(n.ethernet_name, n.ipv4_address, n.link_layer_address) for n in a.get_states(req).ipv4_neighbors}
        return got == {("da.eth", "1.1.2.2", "02:02:00:00:00:dd"), ("db.eth", "1.1.2.1", "02:01:00:00:00:dd")} and got

    until("each LAG's device to resolve the other's", resolved, 10)
    run_flow(a, "b2b")
    m = wait_done(a, "b2b")
    assert m.frames_rx == m.frames_tx == 5_000, f"expected the flow whole across the two LAGs; got {m}"
    req = a.metrics_request()
    req.lag.lag_names = ["lag-a", "lag-b"]
    got = {l.name: l for l in a.get_metrics(req).lag_metrics}
    assert got["lag-a"].frames_tx >= 5_000 and got["lag-b"].frames_rx == 5_000, got


def test_bad_lags_are_refused_with_their_path(server: Server) -> None:
    a = api(server, "https")
    cfg = lag_config(a)
    m = cfg.lags.lag(name="l2")[-1].ports.port(port_name="p2")[-1]
    m.ethernet.name, m.ethernet.mac = "l2.m1", "02:00:00:00:00:09"
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert "lags[1].ports[0].port_name: port \"p2\" is already a member of LAG \"l1\"" in str(e.value), e.value
    cfg = lag_config(a)
    cfg.lags[0].min_links = 3
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert "lags[0].min_links: 3 is more than the LAG" in str(e.value) and "2 members" in str(e.value), e.value
    cfg = lag_config(a)
    lag_flow(cfg, "bypass", "p1", "p3", pps=100, count=1)
    with pytest.raises(Exception) as e:
        a.set_config(cfg)
    assert "flows[0].tx_rx.port.tx_name: port \"p1\" is a member of LAG \"l1\"" in str(e.value), e.value
