"""Emulated hosts (OTG devices) on the testbed, as an ixia-c script has them: two devices,
one on each port, on VLAN 100, each the other's gateway; a UDP flow from one device's address
to the other's, whose destination MAC is the gateway's, learned by ARP when the traffic
starts. Run against `gapless serve`:

    gapless testbed up
    gapless serve &
    python examples/otg/snappi_devices.py [https://127.0.0.1:8443] [testbed name]

It prints d1's neighbour table (from `POST /monitor/states`) and what the flow sent and
received.
"""

from __future__ import annotations

import sys
import time

import snappi  # type: ignore[import-untyped]

location = sys.argv[1] if len(sys.argv) > 1 else "https://127.0.0.1:8443"
bed = sys.argv[2] if len(sys.argv) > 2 else "gl"

api = snappi.api(location=location, verify=False)
cfg = api.config()
cfg.ports.port(name="p1", location=f"{bed}-tx/{bed}-tx0").port(name="p2", location=f"{bed}-rx/{bed}-rx0")
for k, (port, mac, me, peer) in enumerate([("p1", "00:00:01:01:01:01", "192.0.2.1", "192.0.2.2"),
                                           ("p2", "00:00:01:01:01:02", "192.0.2.2", "192.0.2.1")]):
    d = cfg.devices.device(name=f"d{k + 1}")[-1]
    eth = d.ethernets.add()
    eth.name, eth.mac = f"d{k + 1}.eth", mac
    eth.connection.port_name = port
    vlan = eth.vlans.add()
    vlan.name, vlan.id = f"d{k + 1}.vlan", 100
    ip = eth.ipv4_addresses.add()
    ip.name, ip.address, ip.gateway, ip.prefix = f"d{k + 1}.ip", me, peer, 24

f = cfg.flows.flow(name="d1-to-d2")[-1]
f.tx_rx.device.tx_names, f.tx_rx.device.rx_names = ["d1.ip"], ["d2.ip"]
f.size.fixed, f.rate.pps, f.duration.fixed_packets.packets = 128, 2000, 1000
f.metrics.enable = True
f.metrics.latency.enable = True
f.packet.ethernet().ipv4().udp()[-1].dst_port.value = 5000   # the device's VLAN tag is added

api.set_config(cfg)
cs = api.control_state()
cs.traffic.flow_transmit.state = cs.traffic.flow_transmit.START
api.set_control_state(cs)

req = api.metrics_request()
req.flow.flow_names = []
while True:
    m = api.get_metrics(req).flow_metrics[0]
    if m.transmit == "stopped":
        break
    time.sleep(0.5)

states = api.states_request()
states.choice = "ipv4_neighbors"
for n in api.get_states(states).ipv4_neighbors:
    print(f"{n.ethernet_name}: {n.ipv4_address} is at {n.link_layer_address}")
print(f"{m.name}: sent {m.frames_tx}, received {m.frames_rx}, latency avg {m.latency.average_ns:.0f} ns")
sys.exit(0 if m.frames_tx == m.frames_rx == 1000 else 1)
