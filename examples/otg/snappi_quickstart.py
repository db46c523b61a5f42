"""An Open Traffic Generator script, as a test engineer writes it for any OTG tool, run
against `gapless serve` across the testbed:

    gapless testbed up
    gapless serve &                     # dashboard on :8080, OTG API on 127.0.0.1:8443
    python examples/otg/snappi_quickstart.py [http://127.0.0.1:8443] [testbed name]

Two flows of 1000 frames (UDP with an incrementing source port, and TCP) go from the
testbed's sender to its receiver; the script polls flow metrics until both have stopped and
prints what each sent and received, and gapless's own figures (`x_gapless`, which snappi
keeps out of its objects, so it is read from the raw reply here).
"""

from __future__ import annotations

import json
import sys
import time
import ssl
import urllib.request

import snappi  # type: ignore[import-untyped]

location = sys.argv[1] if len(sys.argv) > 1 else "https://127.0.0.1:8443"
bed = sys.argv[2] if len(sys.argv) > 2 else "gl"

api = snappi.api(location=location, verify=False)
cfg = api.config()
cfg.ports.port(name="p1", location=f"{bed}-tx/{bed}-tx0").port(name="p2", location=f"{bed}-rx/{bed}-rx0")
udp_flow, tcp_flow = cfg.flows.flow(name="udp").flow(name="tcp")
for f in (udp_flow, tcp_flow):
    f.tx_rx.port.tx_name, f.tx_rx.port.rx_names = "p1", ["p2"]
    f.size.fixed = 128                      # bytes on the wire, FCS included
    f.rate.pps = 2000
    f.duration.fixed_packets.packets = 1000
    f.metrics.enable = True
    f.metrics.latency.enable = True  # latency is reported only when asked for, as in ixia-c
eth, ip, udp = udp_flow.packet.ethernet().ipv4().udp()
eth.src.value, eth.dst.value = "02:67:6c:00:00:01", "02:67:6c:00:00:02"
ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
udp.src_port.increment.start, udp.src_port.increment.step, udp.src_port.increment.count = 5000, 1, 10
udp.dst_port.value = 6000
eth, ip, tcp = tcp_flow.packet.ethernet().ipv4().tcp()
eth.src.value, eth.dst.value = "02:67:6c:00:00:01", "02:67:6c:00:00:02"
ip.src.value, ip.dst.value = "198.18.0.1", "198.18.0.2"
tcp.src_port.value, tcp.dst_port.value = 7000, 80

api.set_config(cfg)
cs = api.control_state()
cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
api.set_control_state(cs)

req = api.metrics_request()
req.flow.flow_names = []
while True:
    metrics = api.get_metrics(req).flow_metrics
    if all(m.transmit == "stopped" for m in metrics):
        break
    time.sleep(0.5)
for m in metrics:
    print(f"{m.name}: sent {m.frames_tx}, received {m.frames_rx}, loss {m.loss:.3f} %, "
          f"latency avg {m.latency.average_ns:.0f} ns (min {m.latency.minimum_ns}, max {m.latency.maximum_ns})")

raw = urllib.request.Request(location + "/monitor/metrics", data=json.dumps({"choice": "flow", "flow": {}}).encode(),
                             headers={"Content-Type": "application/json"})
# The server's certificate is self-signed (made at its first start), as snappi's verify=False
# above assumes; to verify it instead, pass ssl.create_default_context(cafile="gapless-otg-cert.pem").
with urllib.request.urlopen(raw, context=ssl._create_unverified_context()) as r:
    for m in json.load(r)["flow_metrics"]:
        x = m["x_gapless"]
        print(f"{m['name']}: reordered {x['reordered']}, duplicated {x['duplicated']}, "
              f"latency p99.9 {x['latency_percentiles_ns']['p99_9']} ns, schedule {x['schedule']}")
ok = all(m.frames_tx == m.frames_rx == 1000 for m in metrics)
sys.exit(0 if ok else 1)
