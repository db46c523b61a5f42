"""gapless's BGP against speakers we did not write: BIRD 2 and GoBGP, each in a namespace of
its own behind one of the two ports (veth-a and veth-z in one namespace, as ixia-c users wire
them; their peers bird-a and gobgp-z in the speakers' namespaces). Every other routing test
pairs gapless+FRR with gapless+FRR, where a quirk or parsing mistake both ends share goes
unseen; here what gapless advertises is read back from BIRD's and GoBGP's own tables, and
what they advertise from gapless's.

- d1 (p1, AS 65001) peers with BIRD (AS 65100) over IPv4 and over IPv6, one session each;
- d2 (p2, AS 65002) peers with GoBGP (AS 65200) over IPv4;
- d1's OSPFv2 router and OSPFv3 instance are adjacent with BIRD's, point to point in area 0."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conftest import Server, require_root, tcpdump, warnings_but_testbed_addresses
from test_otg import api, transport  # noqa: F401 (transport: a fixture)
from test_otg_bgp import prefixes, updates_in
from test_otg_ixia import device_pair, sh

NS, BIRD_NS, GOBGP_NS = "glpeer", "glpeer-bird", "glpeer-gobgp"
A, Z = "veth-a", "veth-z"
MAC = ("02:67:6c:0e:00:01", "02:67:6c:0e:00:02")
RUN = Path(f"/run/gltest-peers-{os.getpid()}")
BIRD_CONF = """router id 9.9.9.9;
protocol device {}
protocol static s4 { ipv4; route 172.16.0.0/24 blackhole; route 172.16.1.0/24 blackhole; }
protocol static s6 { ipv6; route 2001:db8:ff::/64 blackhole; }
protocol bgp d1v4 {
  local 198.18.1.1 as 65100; neighbor 198.18.1.2 as 65001; connect retry time 1; error wait time 1, 5;
  ipv4 { import all; export where source = RTS_STATIC; };
}
protocol ospf v2 o4 {
  ipv4 { import all; export where source = RTS_STATIC; };
  area 0 { interface "bird-a" { type ptp; hello 1; dead 4; }; };
}
protocol ospf v3 o6 {
  ipv6 { import all; export where source = RTS_STATIC; };
  area 0 { interface "bird-a" { type ptp; hello 1; dead 4; }; };
}
protocol bgp d1v6 {
  local 2001:db8:1::1 as 65100; neighbor 2001:db8:1::2 as 65001; connect retry time 1; error wait time 1, 5;
  ipv6 { import all; export where source = RTS_STATIC; };
}
"""
GOBGP_CONF = """[global.config]
  as = 65200
  router-id = "9.9.9.8"
  local-address-list = ["198.18.2.1"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "198.18.2.2"
    peer-as = 65002
  [neighbors.timers.config]
    connect-retry = 1
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
"""


def wait_for(what: str, check: Callable[[], Any], within: float = 20) -> Any:
    """`check()`'s first truthy answer, polled; fails after `within` s with its last answer."""
    t0 = time.monotonic()
    while not (got := check()):
        assert time.monotonic() - t0 < within, f"expected {what} within {within} s; last answer {got!r}"
        time.sleep(0.1)
    return got


def birdc(*args: str) -> str:
    p = subprocess.run(["birdc", "-s", str(RUN / "bird.ctl"), *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, f"expected birdc {' '.join(args)} to answer; got {p.returncode}: {p.stderr}{p.stdout}"
    return p.stdout


def gobgp(*args: str) -> Any:
    p = subprocess.run(["ip", "netns", "exec", GOBGP_NS, "gobgp", "-j", *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, f"expected gobgp {' '.join(args)} to answer; got {p.returncode}: {p.stderr}{p.stdout}"
    return json.loads(p.stdout or "null")


def bird_state(protocol: str) -> str:
    """BIRD's `show protocols` Info column for `protocol` (Established, Active, ...)."""
    line = next((x for x in birdc("show", "protocols").splitlines() if x.startswith(protocol + " ")), "")
    return line.split()[-1] if line else ""


def bird_routes(protocol: str) -> dict[str, dict[str, str]]:
    """BIRD's routes learned from `protocol`, by prefix: each attribute of `show route all`
    (`BGP.origin`, `BGP.as_path`, `OSPF.metric1`, `Type`, ...) as BIRD prints it."""
    routes: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in birdc("show", "route", "all", "protocol", protocol).splitlines():
        if m := re.match(r"^(\S+/\d+)\s", line):
            current = routes.setdefault(m.group(1), {})
        elif current is not None and (m := re.match(r"^\s+(BGP\.\w+|OSPF\.\w+|Type):\s*(.*)$", line)):
            current[m.group(1)] = m.group(2).strip()
    return routes


@contextmanager
def daemon(ns: str, ready: Callable[[], bool], *argv: str) -> Iterator[None]:
    """A speaker run in the foreground in `ns` until the block ends; `ready()` says it answers."""
    log = open(RUN / f"{argv[0]}.log", "w")
    p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(f"{argv[0]} to answer", lambda: ready() or p.poll() is not None, 10)
        assert p.poll() is None, f"expected {argv[0]} to run; it exited {p.returncode}: {(RUN / f'{argv[0]}.log').read_text()}"
        yield
    finally:
        p.kill()
        p.wait(timeout=10)
        log.close()


def answers(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0


@pytest.fixture(scope="module")
def peers() -> Iterator[str]:
    """The tester's namespace (ports veth-a and veth-z) wired to BIRD's and GoBGP's."""
    require_root()
    for tool in ("bird", "birdc", "gobgpd", "gobgp"):
        assert subprocess.run(["which", tool], capture_output=True).returncode == 0, \
            f"expected {tool} (scripts/setup.sh --test installs bird2 and gobgpd)"
    for n in (NS, BIRD_NS, GOBGP_NS):
        subprocess.run(["ip", "netns", "del", n], capture_output=True)
        sh("ip", "netns", "add", n)
    RUN.mkdir(exist_ok=True)
    try:
        for port, side, peer_ns, net in ((A, "bird-a", BIRD_NS, 1), (Z, "gobgp-z", GOBGP_NS, 2)):
            sh("ip", "-n", NS, "link", "add", port, "type", "veth", "peer", "name", side, "netns", peer_ns)
            sh("ip", "-n", NS, "link", "set", port, "up")
            sh("ip", "-n", peer_ns, "addr", "add", f"198.18.{net}.1/24", "dev", side)
            sh("ip", "-n", peer_ns, "addr", "add", f"2001:db8:{net}::1/64", "dev", side, "nodad")
            for dev in ("lo", side):
                sh("ip", "-n", peer_ns, "link", "set", dev, "up")
        (RUN / "bird.conf").write_text(BIRD_CONF)
        (RUN / "gobgpd.toml").write_text(GOBGP_CONF)
        bird_up = lambda: answers("birdc", "-s", str(RUN / "bird.ctl"), "show", "status")  # noqa: E731
        gobgp_up = lambda: answers("ip", "netns", "exec", GOBGP_NS, "gobgp", "global")  # noqa: E731
        with daemon(BIRD_NS, bird_up, "bird", "-f", "-c", str(RUN / "bird.conf"), "-s", str(RUN / "bird.ctl")), \
             daemon(GOBGP_NS, gobgp_up, "gobgpd", "-f", str(RUN / "gobgpd.toml"), "--api-hosts", "127.0.0.1:50051",
                    "--pprof-disable", "-p", "--log-level", "warn"):
            yield NS
    finally:
        for n in (NS, BIRD_NS, GOBGP_NS):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        subprocess.run(["rm", "-rf", str(RUN)])


def peers_config(a: Any) -> Any:
    """d1 on p1 in eBGP with BIRD over IPv4 (range d1.r4: four /24s from 10.10.0.0, MED 50,
    origin egp, two communities, an AS path) and over IPv6 (d1.r6: two /64s, MED 70, origin
    incomplete); d2 on p2 in eBGP with GoBGP (d2.r4: two /24s from 10.20.0.0, MED 20, origin
    igp, a community)."""
    cfg, devices = device_pair(a, NS, MAC, ip4=lambda k: (f"198.18.{k}.2", f"198.18.{k}.1"))
    d1, d2 = devices
    ip6 = d1.ethernets[0].ipv6_addresses.add()
    ip6.name, ip6.address, ip6.gateway, ip6.prefix = "d1.ip6", "2001:db8:1::2", "2001:db8:1::1", 64
    for k, d in ((1, d1), (2, d2)):
        d.bgp.router_id = f"1.1.1.{k}"
        peer = d.bgp.ipv4_interfaces.add(ipv4_name=f"d{k}.ip4").peers.add()
        peer.name, peer.peer_address, peer.as_type, peer.as_number = f"d{k}.bgp4", f"198.18.{k}.1", "ebgp", 65000 + k
        r4 = peer.v4_routes.add(name=f"d{k}.r4")
        r4.addresses.add(address=f"10.{k}0.0.0", prefix=24, count=4 if k == 1 else 2, step=1)
        r4.advanced.multi_exit_discriminator, r4.advanced.origin = (50, "egp") if k == 1 else (20, "igp")
        r4.communities.add(type="manual_as_number", as_number=65000, as_custom=7 * k)
        if k == 1:
            r4.communities.add(type="no_export")
            r4.as_path.segments.add(type="as_seq", as_numbers=[65010, 65011])
    peer6 = d1.bgp.ipv6_interfaces.add(ipv6_name="d1.ip6").peers.add()
    peer6.name, peer6.peer_address, peer6.as_type, peer6.as_number = "d1.bgp6", "2001:db8:1::1", "ebgp", 65001
    r6 = peer6.v6_routes.add(name="d1.r6")
    r6.addresses.add(address="2001:db8:10::", prefix=64, count=2, step=1)
    r6.advanced.multi_exit_discriminator, r6.advanced.origin = 70, "incomplete"
    return cfg


def bgpd_log(server: Server) -> str:
    """The last lines of the server's bgpd logs, for a failure's message."""
    logs = sorted(Path("/run/gapless-frr").glob(f"{server.proc.pid}-*/bgpd.log"))
    return "\n".join(f"{p}:\n" + "\n".join(p.read_text().splitlines()[-12:]) for p in logs)


def configured(server: Server, transport: str) -> Any:
    a = api(server, transport)
    assert warnings_but_testbed_addresses(a.set_config(peers_config(a)).warnings) == []
    # BIRD waits `error wait time` after a session error before it tries again: 1 s here,
    # not its 60 s, so that one error does not hold a test for a minute.
    for p in ("d1v4", "d1v6"):
        t0 = time.monotonic()
        while bird_state(p) != "Established":
            assert time.monotonic() - t0 < 20, \
                f"expected BIRD's session {p} with d1 Established within 20 s; BIRD says {birdc('show', 'protocols', 'all', p)}; bgpd's log: {bgpd_log(server)}"
            time.sleep(0.1)
    return a


def test_bird_learns_v4_and_v6_ranges_with_every_attribute_and_gapless_lists_birds_routes(
        server: Server, transport: str, peers: str) -> None:
    a = configured(server, transport)
    v4 = wait_for("BIRD to learn d1's four /24s", lambda: (r := bird_routes("d1v4")) and len(r) == 4 and r)
    assert sorted(v4) == [f"10.10.{i}.0/24" for i in range(4)], f"expected d1's four /24s at BIRD; got {sorted(v4)}"
    for prefix, attrs in v4.items():
        want = {"BGP.origin": "EGP", "BGP.as_path": "65001 65010 65011", "BGP.next_hop": "198.18.1.2",
                "BGP.med": "50", "BGP.community": "(65000,7) (65535,65281)"}
        got = {k: attrs.get(k) for k in want}
        assert got == want, f"expected {prefix}'s attributes at BIRD {want}; got {got}"
    v6 = wait_for("BIRD to learn d1's two /64s", lambda: (r := bird_routes("d1v6")) and len(r) == 2 and r)
    assert set(v6) == {"2001:db8:10::/64", "2001:db8:10:1::/64"}, f"expected d1's two /64s at BIRD; got {sorted(v6)}"
    for prefix, attrs in v6.items():
        got = (attrs.get("BGP.origin"), attrs.get("BGP.as_path"), attrs.get("BGP.med"), attrs.get("BGP.next_hop", "").split()[0])
        assert got == ("Incomplete", "65001", "70", "2001:db8:1::2"), f"expected {prefix}'s attributes at BIRD; got {attrs}"
    # What BIRD advertises (its static routes), as gapless lists it.
    learned = wait_for("d1 to learn BIRD's two /24s",
                       lambda: (x := prefixes(a, "d1.bgp4")) and len(x.ipv4_unicast_prefixes) == 2 and x)
    got4 = sorted((p.ipv4_address, p.prefix_length, p.ipv4_next_hop, tuple(s.as_numbers[0] for s in p.as_path.segments))
                  for p in learned.ipv4_unicast_prefixes)
    assert got4 == [(f"172.16.{i}.0", 24, "198.18.1.1", (65100,)) for i in range(2)], \
        f"expected BIRD's /24s with next hop 198.18.1.1 and AS path 65100; got {got4}"
    learned6 = wait_for("d1 to learn BIRD's /64", lambda: (x := prefixes(a, "d1.bgp6")) and x.ipv6_unicast_prefixes and x)
    got6 = [(p.ipv6_address, p.prefix_length, p.origin) for p in learned6.ipv6_unicast_prefixes]
    assert got6 == [("2001:db8:ff::", 64, "igp")], f"expected BIRD's /64 (origin igp) at d1; got {got6}"


def test_gobgp_learns_the_range_with_every_attribute_in_its_json(server: Server, peers: str) -> None:
    configured(server, "https")

    def rib() -> Any:
        r = gobgp("global", "rib")
        return r if r and len(r) == 2 else None

    r = wait_for("GoBGP to learn d2's two /24s", rib)
    assert sorted(r) == ["10.20.0.0/24", "10.20.1.0/24"], f"expected d2's /24s in GoBGP's RIB; got {sorted(r)}"
    for prefix, paths in r.items():
        attrs = {x["type"]: x for x in paths[0]["attrs"]}
        got = (attrs[1]["value"], attrs[2]["as_paths"][0]["asns"], attrs[3]["nexthop"], attrs[4]["metric"],
               attrs[8]["communities"])
        # GoBGP's types: 1 ORIGIN (0 igp), 2 AS_PATH, 3 NEXT_HOP, 4 MED, 8 COMMUNITIES (65000:14).
        assert got == (0, [65002], "198.18.2.2", 20, [65000 << 16 | 14]), f"expected {prefix}'s attributes in GoBGP; got {attrs}"


def test_a_withdrawal_leaves_bird_and_the_advertise_comes_back_each_timed_by_its_update(
        server: Server, peers: str, tmp_path: Path) -> None:
    a = configured(server, "https")
    wait_for("BIRD to learn d1's /24s", lambda: len(bird_routes("d1v4")) == 4)
    times = {}
    for state in ("withdraw", "advertise"):
        pcap = tmp_path / f"{state}.pcap"
        with tcpdump(NS, A, pcap, "tcp port 179 and ip", "--immediate-mode"):
            t0 = time.time_ns()
            cs = a.control_state()
            cs.protocol.route.names, cs.protocol.route.state = ["d1.r4"], state
            assert len(a.set_control_state(cs).warnings) == 0
            want = 0 if state == "withdraw" else 4
            wait_for(f"BIRD's table to hold {want} of d1's /24s after the {state}", lambda: len(bird_routes("d1v4")) == want, 5)
            seen = time.time_ns()
        from scapy.all import RawPcapReader  # type: ignore[import-untyped]

        sent = [m.sec * 1_000_000_000 + m.usec for d, m in RawPcapReader(str(pcap)) if 2 in updates_in(d)]
        assert sent, f"expected tcpdump to see the {state}'s UPDATE"
        assert t0 <= sent[0] <= seen, f"expected the {state}'s UPDATE on the wire between the request and BIRD's table changing; got {sent[0] - t0} ns after"
        times[state] = (sent[0] - t0) / 1e6
    print(f"UPDATE on the wire after the request: withdraw {times['withdraw']:.1f} ms, advertise {times['advertise']:.1f} ms")


def test_a_killed_server_takes_its_session_with_bird_down(server: Server, peers: str, tmp_path: Path) -> None:
    """kill -9 of the server: its keeper stops its bgpd, which closes the session with a
    Cease, so BIRD sees it go down at once rather than at its hold timer's end (90 s)."""
    shared = api(server, "https")
    shared.set_config(shared.config())  # the module's server lets go of the MACs and ports
    s = Server(tmp_path / "k.db")
    try:
        configured(s, "https")
        os.kill(s.proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        s.proc.wait(timeout=10)
        wait_for("BIRD's session with d1 down", lambda: bird_state("d1v4") != "Established" or None, 2)
        print(f"BIRD saw the session go down {(time.monotonic() - t0) * 1000:.0f} ms after the kill")
    finally:
        if s.proc.poll() is None:
            s.stop()
        s.log.close()
        # The next server removes the killed one's device namespaces, which hold the MACs.
        Server(tmp_path / "next.db").stop()


def p2p(itf: Any) -> None:
    """An OSPF interface point to point in area 0, hello 1 s, dead 4 s (as BIRD's)."""
    itf.area.id, itf.network_type.choice = 0, "point_to_point"
    itf.advanced.hello_interval, itf.advanced.dead_interval = 1, 4


def ranges(routes: Any, name: str, inter: tuple[str, int], ext: tuple[str, int], origin: str) -> None:
    """Two prefixes from `inter` inter-area (metric 20) and one at `ext` of `origin` (metric 33)."""
    routes.add(name=f"{name}.inter", metric=20).addresses.add(address=inter[0], prefix=inter[1], count=2, step=1)
    x = routes.add(name=f"{name}.ext", metric=33)
    x.route_origin.choice = origin
    x.addresses.add(address=ext[0], prefix=ext[1], count=1, step=1)


def ospf_config(a: Any) -> Any:
    """d1 (d2 a plain host on p2), with an OSPFv2 router (ranges: two /24s inter-area, metric 20, and one /24
    external type 1, metric 33) and an OSPFv3 instance (two /64s inter-area, one external
    type 2), each point to point with BIRD in area 0, hello 1 s, dead 4 s."""
    cfg, (d1, _) = device_pair(a, NS, MAC, ip4=lambda k: (f"198.18.{k}.2", f"198.18.{k}.1"))
    ip6 = d1.ethernets[0].ipv6_addresses.add()
    ip6.name, ip6.address, ip6.gateway, ip6.prefix = "d1.ip6", "2001:db8:1::2", "2001:db8:1::1", 64
    o = d1.ospfv2
    o.name = "o1"
    p2p(o.interfaces.add(name="d1.ospf", ipv4_name="d1.ip4"))
    ranges(o.v4_routes, "o1", ("10.30.0.0", 24), ("10.39.0.0", 24), "external_type_1")
    d1.ospfv3.router_id.choice = "auto"
    inst = d1.ospfv3.instances.add(name="o61")
    p2p(inst.interfaces.add(name="d1.ospf6", ipv6_name="d1.ip6"))
    ranges(inst.v6_routes, "o61", ("2001:db8:30::", 64), ("2001:db8:39::", 64), "external_type_2")
    return cfg


def test_ospfv2_and_ospfv3_ranges_reach_bird_with_their_types_and_gapless_lists_birds_externals(
        server: Server, peers: str) -> None:
    a = api(server, "https")
    assert warnings_but_testbed_addresses(a.set_config(ospf_config(a)).warnings) == []
    want4 = {"10.30.0.0/24": "OSPF-IA", "10.30.1.0/24": "OSPF-IA", "10.39.0.0/24": "OSPF-E1"}
    want6 = {"2001:db8:30::/64": "OSPF-IA", "2001:db8:30:1::/64": "OSPF-IA", "2001:db8:39::/64": "OSPF-E2"}
    for proto, want in (("o4", want4), ("o6", want6)):
        got = wait_for(f"BIRD's {proto} to learn d1's ranges",
                       lambda proto=proto, want=want: (r := bird_routes(proto)) and set(want) <= set(r) and r, 30)
        types = {p: got[p].get("Type", "").split()[0] for p in want}
        assert types == want, f"expected BIRD's {proto} to hold d1's ranges as {want}; got {types}"
        for p in want:
            metric = int(got[p].get("OSPF.metric2" if want[p] == "OSPF-E2" else "OSPF.metric1", "0"))
            floor = 33 if "E" in want[p] else 20
            assert metric >= floor, f"expected {p}'s metric at BIRD to include the range's {floor}; got {got[p]}"
    # BIRD's static routes, exported as externals, as gapless lists them.
    req = a.states_request()
    req.ospfv2_lsas.router_names = ["o1"]
    import ipaddress

    # The LSA's prefix is its id under its mask: BIRD gives 172.16.0.0/24 the id 172.16.0.255
    # (RFC 2328, appendix E), which gapless lists as BIRD sent it.
    ext = wait_for("d1 to hold BIRD's two external LSAs",
                   lambda: (x := [str(ipaddress.ip_network(f"{e.header.lsa_id}/{e.network_mask}", strict=False))
                                  for e in a.get_states(req).ospfv2_lsas[0].external_as_lsas
                                  if e.header.advertising_router_id == "9.9.9.9"]) and len(x) == 2 and x)
    assert sorted(ext) == ["172.16.0.0/24", "172.16.1.0/24"], f"expected BIRD's /24s as external LSAs at d1; got {ext}"
    req2 = a.metrics_request()
    req2.ospfv2.router_names = ["o1"]
    o1 = a.get_metrics(req2).ospfv2_metrics[0]
    assert o1.full_state_count == 1 and o1.lsa_received >= 2 and o1.lsa_sent >= 2, \
        f"expected o1 Full with BIRD and LSAs both ways; got {o1}"
