"""No request string can stop the server (issue 68): each kind of named object of a config
(ports, a LAG, an LLDP agent, a device, its Ethernet and IPv4, a BGP peer and its route
range, a flow, a capture) is named in turn with a hostile string (NUL, control characters,
10,000 characters, unicode, a path, shell syntax, an FRR line). Each set_config answers 200 or
a 4xx that names a path, never a 5xx; a valid config is taken right after; no file is made;
a flow with a hostile name runs to its end. One server and one namespace for the module;
about 30 s."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator

import pytest
import requests

from conftest import Server
from test_otg_ixia import A, MAC_A, MAC_Z, Z, two_veths

NS = "glhx"
PWNED = "/tmp/gl-hostile-pwned"
HOSTILE = [
    "a\x00b",
    "a\nb\tc\x1b[2J",
    "x" * 10_000,
    "ünï-名前-🙂",
    "../../../../tmp/gl-hostile-path",
    f"$(touch {PWNED}); `touch {PWNED}`",
    "r\n!\nrouter bgp 1\n neighbor 192.0.2.9 remote-as 6",
]
KINDS = ["port", "lag", "lldp", "device", "ethernet", "ipv4", "bgp_peer", "route_range", "flow", "capture"]
BASE = {k: f"n-{k}" for k in KINDS}


@pytest.fixture(scope="module")
def veths() -> Iterator[str]:
    with two_veths(NS) as ns:
        yield ns


def config(n: Dict[str, str]) -> Dict[str, Any]:
    """Every kind of object but the LAG, named from `n`: p1 is `n["port"]`."""
    p1 = n["port"]
    return {
        "ports": [{"name": p1, "location": f"{NS}/{A}"}, {"name": "p2", "location": f"{NS}/{Z}"}],
        "lldp": [{"name": n["lldp"], "connection": {"choice": "port_name", "port_name": p1},
                  "chassis_id": {"choice": "mac_address_subtype",
                                 "mac_address_subtype": {"choice": "value", "value": "02:00:00:00:00:0a"}},
                  "port_id": {"choice": "local_subtype", "local_subtype": "x"}}],
        "devices": [{"name": n["device"],
                     "ethernets": [{"name": n["ethernet"], "mac": MAC_A,
                                    "connection": {"choice": "port_name", "port_name": p1},
                                    "ipv4_addresses": [{"name": n["ipv4"], "address": "192.0.2.1",
                                                        "gateway": "192.0.2.2", "prefix": 24}]}],
                     "bgp": {"router_id": "192.0.2.1", "ipv4_interfaces": [{"ipv4_name": n["ipv4"], "peers": [
                         {"name": n["bgp_peer"], "peer_address": "192.0.2.2", "as_type": "ebgp", "as_number": 65001,
                          "v4_routes": [{"name": n["route_range"], "addresses": [
                              {"address": "198.51.100.0", "prefix": 24, "count": 1}]}]}]}]}}],
        "flows": [{"name": n["flow"], "tx_rx": {"choice": "port", "port": {"tx_name": p1, "rx_names": ["p2"]}},
                   "packet": [{"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": MAC_A},
                                                                  "dst": {"choice": "value", "value": MAC_Z}}},
                              {"choice": "ipv4"}, {"choice": "udp"}],
                   "size": {"choice": "fixed", "fixed": 128}, "rate": {"choice": "pps", "pps": 1000},
                   "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 5}},
                   "metrics": {"enable": True}}],
        "captures": [{"name": n["capture"], "port_names": ["p2"], "format": "pcap"}],
    }


def lag_config(name: str) -> Dict[str, Any]:
    """A static LAG named `name` of both ports."""
    return {
        "ports": [{"name": "p1", "location": f"{NS}/{A}"}, {"name": "p2", "location": f"{NS}/{Z}"}],
        "lags": [{"name": name, "protocol": {"choice": "static", "static": {"lag_id": 3}},
                  "ports": [{"port_name": f"p{k}", "ethernet": {"name": f"m{k}", "mac": f"02:aa:00:00:01:0{k}"}}
                            for k in (1, 2)]}],
    }


def post(server: Server, path: str, body: Dict[str, Any]) -> requests.Response:
    return requests.post(f"{server.otg}/{path}", data=json.dumps(body), verify=False, timeout=60,
                         headers={"content-type": "application/json"})


def taken_or_refused_by_path(r: requests.Response, what: str) -> None:
    assert r.status_code < 500, f"{what}: expected 200 or a 4xx; got {r.status_code}: {r.text[:300]}"
    if r.status_code != 200:
        errors = r.json().get("errors", [])
        assert errors and all(("[" in e or "." in e) and ":" in e for e in errors), \
            f"{what}: expected each error to name a path; got {r.status_code} {errors}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_name_is_taken_or_refused_by_path_and_a_valid_config_follows(server: Server, veths: str, kind: str) -> None:
    value = HOSTILE[KINDS.index(kind) % len(HOSTILE)]
    what = f"{kind} named {value[:40]!r}{'...' if len(value) > 40 else ''}"
    body = lag_config(value) if kind == "lag" else config({**BASE, kind: value})
    r = post(server, "config", body)
    taken_or_refused_by_path(r, what)
    if kind == "flow" and r.status_code == 200:
        # A flow with this name runs to its end and reports under its name.
        r = post(server, "control/state", {"choice": "traffic", "traffic": {"choice": "flow_transmit",
                                           "flow_transmit": {"state": "start"}}})
        assert r.status_code == 200, f"{what}: expected the flow started; got {r.status_code}: {r.text[:300]}"
        stop = post(server, "control/state", {"choice": "traffic", "traffic": {"choice": "flow_transmit",
                                              "flow_transmit": {"state": "stop"}}})
        assert stop.status_code == 200, f"{what}: expected the stop taken; got {stop.status_code}: {stop.text[:300]}"
        m = post(server, "monitor/metrics", {"choice": "flow", "flow": {"flow_names": []}})
        assert m.status_code == 200, f"{what}: metrics got {m.status_code}: {m.text[:300]}"
        names = [f["name"] for f in m.json().get("flow_metrics", [])]
        assert names == [value], f"{what}: expected its metrics under its own name; got {names}"
    after = post(server, "config", lag_config("l1") if kind == "lag" else config(BASE))
    assert after.status_code == 200, f"after a {what}: expected a valid config taken; got {after.status_code}: {after.text[:300]}"
    assert not os.path.exists(PWNED), f"after a {what}: a file was made by shell syntax: {PWNED}"
    assert not os.path.exists("/tmp/gl-hostile-path"), f"after a {what}: a file was made at a path from a name"
    gone = post(server, "config", {"ports": []})
    assert gone.status_code == 200, f"expected the empty config taken; got {gone.status_code}: {gone.text[:300]}"


def test_a_panic_in_bring_up_leaves_no_state_and_the_next_config_is_taken(tmp_path: Any, veths: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-only fault hook (GAPLESS_TEST_FAULT=bring_up, read from the server's
    environment, never from a request) panics the first bring-up after the devices are up:
    that set_config gets a 500, and the next one, the same config, is taken: nothing says a
    config is being set, and the device's namespace was removed as the panic unwound. A
    server of its own; about 3 s."""
    monkeypatch.setenv("GAPLESS_TEST_FAULT", "bring_up")
    s = Server(tmp_path / "g.db")
    try:
        body = config(BASE)
        body.pop("lldp")
        body["devices"][0].pop("bgp")
        first = post(s, "config", body)
        assert first.status_code == 500 and "test-only fault" in first.text, \
            f"expected the fault's 500; got {first.status_code}: {first.text[:300]}"
        again = post(s, "config", body)
        assert again.status_code == 200, f"expected the same config taken after the panic; got {again.status_code}: {again.text[:300]}"
        m = post(s, "monitor/metrics", {"choice": "port", "port": {"port_names": []}})
        assert m.status_code == 200, f"expected metrics answered; got {m.status_code}: {m.text[:300]}"
        assert post(s, "config", {"ports": []}).status_code == 200
    finally:
        s.stop()


@pytest.mark.parametrize("where", ["../" + A, f"{NS}/..", f"{NS}/a234567890123456", f"{NS}/a:b", "x" * 256 + "/" + A])
def test_a_location_naming_what_the_kernel_would_not_take_is_refused_by_path(server: Server, veths: str, where: str) -> None:
    """A port's location is the one place a request names an interface and a namespace: a
    namespace of `..` (a directory outside /run/netns), an interface name over IFNAMSIZ or with
    ':', a namespace name over NAME_MAX, are refused before anything is opened."""
    body = config(BASE)
    body["ports"][0]["location"] = where
    r = post(server, "config", body)
    assert r.status_code == 400 and "ports[0].location" in r.text and "1 to 15 bytes" in r.text, \
        f"expected {where[:40]!r} refused by its path; got {r.status_code}: {r.text[:300]}"
    assert post(server, "config", config(BASE)).status_code == 200
    assert post(server, "config", {"ports": []}).status_code == 200


def arp_answer(iface: str, ip: str) -> str:
    """The MAC that answers an ARP request for `ip` sent on `iface` (in the module's
    namespace), or "" when none answers within half a second. Scapy sends it from a process
    in the namespace."""
    import subprocess
    import sys

    code = ("from scapy.all import ARP, Ether, srp1\n"
            f"r = srp1(Ether(dst='ff:ff:ff:ff:ff:ff') / ARP(pdst='{ip}', psrc='192.0.2.2'), iface='{iface}', timeout=0.5, verbose=0)\n"
            "print(r[ARP].hwsrc if r is not None else '')")
    p = subprocess.run(["ip", "netns", "exec", NS, sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"expected Scapy's ARP probe to run; got {p.stderr[-500:]}"
    return p.stdout.strip()


def test_a_server_killed_with_sigkill_leaves_no_namespace_or_daemon_behind(tmp_path: Any, veths: str) -> None:
    """`kill -9` of the server: within a second its keeper has killed the BGP daemon and
    removed the device namespace (with the macvlan on the test port that answered ARP for the
    device), so an ARP probe from the far end goes unanswered. A server of its own; about 5 s."""
    import signal
    import subprocess
    import time

    s = Server(tmp_path / "g.db")
    try:
        body = config(BASE)
        body.pop("lldp")
        r = post(s, "config", body)
        assert r.status_code == 200, f"expected the config taken; got {r.status_code}: {r.text[:300]}"
        prefix = f"gapless-dev-{s.proc.pid}-"
        mine = lambda: sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))  # noqa: E731
        spaces = mine()
        assert spaces, f"expected the device's namespace {prefix}*; got {os.listdir('/run/netns')}"
        pids = [int(p) for ns in spaces for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]
        assert pids, f"expected the BGP daemon in {spaces}; got no process"
        assert arp_answer(Z, "192.0.2.1") == MAC_A.lower(), "expected the device to answer ARP from the far end before the kill"
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(timeout=5)
        t0 = time.monotonic()
        def alive() -> list[int]:
            """The daemons still running (a zombie waiting for its parent to reap it runs no more)."""
            def state(p: int) -> str:
                try:
                    return open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0]
                except OSError:
                    return "gone"
            return [p for p in pids if state(p) not in ("gone", "Z", "X")]
        while (mine() or alive()) and time.monotonic() - t0 < 1.0:
            time.sleep(0.02)
        assert (mine(), alive()) == ([], []), \
            f"expected no namespace and no daemon 1 s after kill -9; got namespaces {mine()}, daemons {alive()}"
        got = arp_answer(Z, "192.0.2.1")
        assert got == "", f"expected no answer to ARP for the device after kill -9; {got} answered"
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
        s.log.close()
