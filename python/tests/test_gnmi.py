"""gNMI on the OTG YANG models, read with pygnmi (PyPI) and with grpcio and gnmi.proto's own
stubs (pygnmi ships them) for what pygnmi cannot send: Capabilities, Get in PROTO and
JSON_IETF, Subscribe ONCE, POLL and STREAM (SAMPLE, ON_CHANGE), bad requests and the token.
The ports are two veths in one namespace, as ixia-c's users wire them; the figures are checked
against the OTG API's own metrics, which the trees are made from."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Iterator

import grpc  # type: ignore[import-untyped]
import pytest
from pygnmi.client import gNMIclient, gNMIException  # type: ignore[import-untyped]
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc  # type: ignore[import-untyped]

from conftest import Server
from test_otg import api, run_to_stop, start_traffic, wait_stopped
from test_otg_ixia import A, MAC_A, MAC_Z, Z, device_pair, two_veths

NS = "glgn"


@pytest.fixture(scope="module")
def wires() -> Iterator[str]:
    with two_veths(NS) as ns:
        yield ns


def client(server: Server, **kw: Any) -> gNMIclient:
    # skip_verify: as ondatra's binding dials it (the server's certificate is self-signed).
    return gNMIclient(target=server.gnmi, username="ate", password=kw.pop("password", "x"), skip_verify=True, **kw)


def stub(server: Server, token: str | None = None) -> tuple[Any, list[tuple[str, str]]]:
    """gnmi.proto's stub over TLS that checks the server's certificate, and the metadata."""
    creds = grpc.ssl_channel_credentials(root_certificates=server.otg_cert.read_bytes())
    chan = grpc.secure_channel(f"{server.gnmi[0]}:{server.gnmi[1]}", creds)
    md = [("authorization", f"Bearer {token}")] if token else []
    return gnmi_pb2_grpc.gNMIStub(chan), md


def gpath(text: str) -> Any:
    elems = []
    for part in [p for p in text.strip("/").split("/") if p]:
        name, _, keys = part.partition("[")
        kv = dict(k.split("=", 1) for k in keys.rstrip("]").split("][") if k) if keys else {}
        elems.append(gnmi_pb2.PathElem(name=name, key=kv))
    return gnmi_pb2.Path(elem=elems)


def leaves(notification: dict[str, Any]) -> dict[str, Any]:
    """Path -> value of a Get's updates (pygnmi 0.8.15 reads no double_val: a decimal64 leaf,
    such as a port's rate, has no value here)."""
    return {u["path"]: u.get("val") for n in notification["notification"] for u in n.get("update", [])}


def one_flow(a: Any, name: str, count: int, pps: int) -> Any:
    cfg = a.config()
    cfg.ports.port(name="p1", location=f"{NS}/{A}").port(name="p2", location=f"{NS}/{Z}")
    f = cfg.flows.flow(name=name)[-1]
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, pps, count
    f.metrics.enable = True
    eth, ip, _ = f.packet.ethernet().ipv4().udp()
    eth.src.value, eth.dst.value = MAC_A, MAC_Z
    ip.src.value, ip.dst.value = "10.0.0.1", "10.0.0.2"
    return cfg


def test_capabilities_name_the_otg_models_and_the_encodings(server: Server) -> None:
    with client(server) as gc:
        caps = gc.capabilities()
    models = {m["name"] for m in caps["supported_models"]}
    assert {"open-traffic-generator-flow", "open-traffic-generator-port", "open-traffic-generator-bgp"} <= models, caps
    assert set(caps["supported_encodings"]) == {"json", "proto", "json_ietf"}, caps
    assert caps["gnmi_version"] == "0.10.0", caps


def test_get_reads_the_counters_the_otg_api_reports_in_proto_and_json_ietf(server: Server, wires: str) -> None:
    a = api(server, "https")
    got = run_to_stop(a, one_flow(a, "g1", 500, 2000))
    assert [(m.frames_tx, m.frames_rx) for m in got] == [(500, 500)], f"expected the run to deliver all; got {got}"
    with client(server) as gc:
        proto = leaves(gc.get(path=["flows/flow[name=g1]/state/counters"], encoding="proto"))
        tree = gc.get(path=["flows/flow[name=*]"], encoding="json_ietf")
        port = leaves(gc.get(path=["ports/port[name=p1]/state"], encoding="proto"))
        with pytest.raises(gNMIException) as bad:
            gc.get(path=["flows/flow[name=g1]/state/counterz"], encoding="proto")
        with pytest.raises(gNMIException) as ro:
            gc.set(update=[("flows/flow[name=g1]/state/name", "x")])
    base = "flows/flow[name=g1]/state/counters"
    assert {k: v for k, v in proto.items()} == {f"{base}/in-pkts": 500, f"{base}/out-pkts": 500,
                                                f"{base}/in-octets": 64000, f"{base}/out-octets": 64000}, proto
    [u] = tree["notification"][0]["update"]
    assert u["path"] == "flows/flow[name=g1]", u
    # RFC 7951: a uint64 is a string, a list entry holds its key, a float32 is base64.
    assert u["val"]["name"] == "g1" and u["val"]["state"]["counters"]["in-pkts"] == "500", u
    assert u["val"]["state"]["transmit"] is False, u
    assert port["ports/port[name=p1]/state/counters/out-frames"] == 500 and port["ports/port[name=p1]/state/link"] == "UP", port
    assert "no \"counterz\" at /flows/flow/state" in str(bad.value), f"expected the unknown leaf named; got {bad.value}"
    assert "read-only" in str(ro.value), f"expected Set refused as read-only; got {ro.value}"


def test_a_neighbour_appears_under_its_ethernets_name_once_resolved(server: Server, wires: str) -> None:
    a = api(server, "grpc")
    cfg, _ = device_pair(a, NS, (MAC_A, MAC_Z))
    a.set_config(cfg)
    t0 = time.monotonic()
    with client(server) as gc:
        while True:
            got = leaves(gc.get(path=["interfaces/interface[name=d1.eth]/ipv4-neighbors"], encoding="proto"))
            if got:
                break
            assert time.monotonic() - t0 < 10, "expected d1's neighbour resolved within 10 s"
            time.sleep(0.2)
    key = "interfaces/interface[name=d1.eth]/ipv4-neighbors/ipv4-neighbor[ipv4-address=1.1.1.2]/state"
    assert got == {f"{key}/ipv4-address": "1.1.1.2", f"{key}/link-layer-address": MAC_Z}, got


def test_subscribe_once_poll_and_a_stream_that_samples_counters_and_sends_changes(server: Server, wires: str) -> None:
    a = api(server, "https")
    cfg = one_flow(a, "s1", 3000, 1000)
    a.set_config(cfg)
    base = "flows/flow[name=s1]/state"
    with client(server) as gc:
        once = list(gc.subscribe_once({"subscription": [{"path": f"{base}/counters"}], "encoding": "proto"}))
        assert "sync_response" in once[-1] and leaves_of(once)[f"{base}/counters/out-pkts"] == 0, once
        sub = gc.subscribe_stream({"subscription": [
            {"path": f"{base}/counters/in-pkts", "mode": "sample", "sample_interval": 200_000_000},
            {"path": f"{base}/transmit", "mode": "on_change"}], "encoding": "proto"})
        first = sub.get_update(timeout=10)
        assert first["update"]["update"] and first.get("sync_response"), f"expected the first full set then a sync; got {first}"
        start_traffic(a, cfg)
        samples: list[tuple[int, int]] = []
        transmits: list[bool] = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5.0:
            u = sub.get_update(timeout=5)["update"]
            for x in u.get("update", []):
                if x["path"].endswith("in-pkts"):
                    samples.append((u["timestamp"], x["val"]))
                else:
                    transmits.append(x["val"])
        sub.close()
        wait_stopped(a)
        poll = gc.subscribe_poll({"subscription": [{"path": f"{base}/counters/in-pkts"}], "encoding": "proto"})
        polled = [poll.get_update(timeout=10), poll.get_update(timeout=10)]
        poll.close()
    assert transmits[:2] == [True, False], f"expected transmit sent when it went true, then false; got {transmits}"
    counts = [v for _, v in samples]
    assert counts == sorted(counts) and counts[-1] == 3000 and counts[0] < 3000, f"expected in-pkts sampled rising to 3000; got {counts}"
    gaps = [(b - a_) / 1e6 for (a_, _), (b, _) in zip(samples, samples[1:])]
    assert len(gaps) >= 10 and 160 <= statistics.median(gaps) <= 240, \
        f"expected samples every 200 ms (median of {len(gaps)} gaps within 20 %); got {gaps}"
    for p in polled:
        assert p.get("sync_response") and p["update"]["update"][0]["val"] == 3000, f"expected each poll's full set and sync; got {p}"


def leaves_of(updates: list[dict[str, Any]]) -> dict[str, Any]:
    return {x["path"]: x["val"] for u in updates if "update" in u for x in u["update"].get("update", [])}


def test_bad_requests_get_a_clear_status_and_the_server_goes_on(server: Server) -> None:
    gs, _ = stub(server)

    def first_error(*reqs: Any) -> Any:
        with pytest.raises(grpc.RpcError) as e:
            for _ in gs.Subscribe(iter(reqs), timeout=10):
                pass
        return e.value

    poll = first_error(gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()))
    assert poll.code() == grpc.StatusCode.INVALID_ARGUMENT and "a poll before any subscription" in poll.details(), poll
    many = gnmi_pb2.SubscriptionList(mode=1, subscription=[
        gnmi_pb2.Subscription(path=gpath(f"flows/flow[name=f{i}]")) for i in range(10_000)])
    big = first_error(gnmi_pb2.SubscribeRequest(subscribe=many))
    assert big.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "10000 paths" in big.details(), big
    # Get takes as many paths as a subscription list, and walks a duplicate once.
    with pytest.raises(grpc.RpcError) as get_big:
        gs.Get(gnmi_pb2.GetRequest(path=[gpath("ports")] * 1001, encoding=2), timeout=10)
    assert get_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "1001 paths in one Get, over the 1000" in get_big.value.details(), get_big.value
    same = gs.Get(gnmi_pb2.GetRequest(path=[gpath("ports")] * 1000, encoding=2), timeout=10)
    assert len(same.notification) == 1, f"expected one notification for 1000 copies of one path; got {len(same.notification)}"
    with pytest.raises(grpc.RpcError) as enc:
        gs.Get(gnmi_pb2.GetRequest(path=[gpath("flows")], encoding=3), timeout=10)
    assert enc.value.code() == grpc.StatusCode.UNIMPLEMENTED and "PROTO (2)" in enc.value.details(), enc.value
    fast = gnmi_pb2.SubscriptionList(subscription=[gnmi_pb2.Subscription(path=gpath("flows"), mode=2, sample_interval=1000)])
    quick = first_error(gnmi_pb2.SubscribeRequest(subscribe=fast))
    assert quick.code() == grpc.StatusCode.INVALID_ARGUMENT and "under the 100000000 ns" in quick.details(), quick
    # A client that never reads: a stream sampling everything every 100 ms, left unread.
    every = gnmi_pb2.SubscriptionList(subscription=[gnmi_pb2.Subscription(path=gpath("/"), mode=2, sample_interval=100_000_000)])
    stalled = gs.Subscribe(iter([gnmi_pb2.SubscribeRequest(subscribe=every)]), timeout=30)
    time.sleep(2)
    t0 = time.monotonic()
    r = gs.Get(gnmi_pb2.GetRequest(path=[gpath("ports")], encoding=2), timeout=10)
    took = time.monotonic() - t0
    stalled.cancel()
    assert len(r.notification) == 1 and took < 2, f"expected a Get answered within 2 s beside a stream nobody reads; took {took:.2f} s"


def test_a_server_with_a_token_takes_it_as_ondatras_password_or_a_bearer_token(tmp_path: Path) -> None:
    tok = tmp_path / "token"
    tok.write_text("a-secret-of-enough-length\n")
    s = Server(tmp_path / "g.db", "--token-file", str(tok))
    try:
        gs, md = stub(s, "a-secret-of-enough-length")
        assert gs.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=md, timeout=10).gNMI_version == "0.10.0"
        with pytest.raises(grpc.RpcError) as none:
            gs.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=10)
        assert none.value.code() == grpc.StatusCode.UNAUTHENTICATED and "password: TOKEN" in none.value.details(), none.value
        with client(s, password="a-secret-of-enough-length") as gc:
            assert gc.capabilities()["gnmi_version"] == "0.10.0"
        with pytest.raises(gNMIException) as wrong:
            with client(s, password="guess") as gc:
                gc.capabilities()
        assert "needs its token" in str(wrong.value), wrong.value
    finally:
        s.stop()



def test_an_open_stream_does_not_hold_a_sigterm_and_is_ended_with_unavailable(tmp_path: Path) -> None:
    import signal

    s = Server(tmp_path / "g.db")
    gs, _ = stub(s)
    every = gnmi_pb2.SubscriptionList(subscription=[gnmi_pb2.Subscription(path=gpath("ports"), mode=2, sample_interval=200_000_000)])
    stream = gs.Subscribe(iter([gnmi_pb2.SubscribeRequest(subscribe=every)]), timeout=60)
    next(stream)
    t0 = time.monotonic()
    s.stop(signal.SIGTERM)
    took = time.monotonic() - t0
    with pytest.raises(grpc.RpcError) as ended:
        for _ in stream:
            pass
    assert took < 10 and s.proc.returncode == 0, f"expected the server to stop within 10 s of SIGTERM; took {took:.1f} s, exit {s.proc.returncode}"
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, f"expected the stream ended as UNAVAILABLE; got {ended.value}"


def test_tagged_metrics_are_read_with_their_tags_in_proto_and_json_ietf(server: Server, wires: str) -> None:
    a = api(server, "https")
    cfg = one_flow(a, "t1", 300, 3000)
    f = cfg.flows[0]
    f.packet[1].priority.dscp.phb.values = [10, 46, 0]
    f.egress_packet.ethernet()
    raw = f.egress_packet.ipv4()[-1].priority.raw
    raw.metric_tags.add(name="dscp", offset=0, length=6)
    raw.metric_tags.add(name="ecn", offset=6, length=2)
    run_to_stop(a, cfg)
    at = "flows/flow[name=t1]/tagged-metrics/tagged-metric[name-value-pairs=dscp=0x2e&ecn=0x0]"
    with client(server) as gc:
        proto = gc.get(path=["flows/flow[name=t1]/tagged-metrics/tagged-metric[name-value-pairs=*]"], encoding="proto")
        tree = gc.get(path=["flows/flow[name=t1]/tagged-metrics"], encoding="json_ietf")
    got = leaves(proto)
    assert got[f"{at}/state/counters/in-pkts"] == 100, got
    # The tags, a keyless list, as JSON_IETF at their keyed entry (ygot unmarshals them there).
    assert got[at] == {"state": {"tags": [
        {"tag-name": "dscp", "tag-value": {"value-type": "HEX", "value-as-hex": "0x2e"}},
        {"tag-name": "ecn", "tag-value": {"value-type": "HEX", "value-as-hex": "0x0"}}]}}, got[at]
    # Below the entry (ondatra's TagsAny): one value per tag at the list's path. pygnmi's path
    # parser takes no "=" in a key, so this one goes through the stub.
    st, md = stub(server)
    req = gnmi_pb2.GetRequest(path=[gpath(f"{at}/state/tags")], encoding=gnmi_pb2.Encoding.Value("PROTO"))
    per_tag = [json.loads(u.val.json_ietf_val) for n in st.Get(req, metadata=md).notification for u in n.update]
    assert [t["tag-name"] for t in per_tag] == ["dscp", "ecn"], f"expected one value per tag at the list's path; got {per_tag}"
    [u] = tree["notification"][0]["update"]
    entries = {e["name-value-pairs"]: e for e in u["val"]["tagged-metric"]}
    assert set(entries) == {"dscp=0x0a&ecn=0x0", "dscp=0x2e&ecn=0x0", "dscp=0x00&ecn=0x0"}, entries
    e = entries["dscp=0x0a&ecn=0x0"]["state"]
    assert e["counters"]["in-pkts"] == "100" and len(e["tags"]) == 2, e
