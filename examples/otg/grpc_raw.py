#!/usr/bin/env python3
"""The OTG API over gRPC without snappi's wrapper (or gosnappi): grpcio with the stubs that
snappi's wheel ships (otg_pb2, otg_pb2_grpc), as ondatra/featureprofiles-style clients call
service otg.Openapi. One UDP flow of 1000 frames across the testbed, polled until it stops.

  gapless testbed up
  gapless serve &                                   # gRPC on 127.0.0.1:40051
  python3 examples/otg/grpc_raw.py [127.0.0.1:40051] [testbed name, default gl]
"""
import sys
import time

import grpc  # type: ignore[import-untyped]
from google.protobuf import empty_pb2
from snappi import otg_pb2 as pb  # type: ignore[import-untyped]
from snappi import otg_pb2_grpc as pb_grpc  # type: ignore[import-untyped]

target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:40051"
bed = sys.argv[2] if len(sys.argv) > 2 else "gl"
stub = pb_grpc.OpenapiStub(grpc.insecure_channel(target))
print("version:", stub.GetVersion(empty_pb2.Empty()).version.api_spec_version)

cfg = pb.Config()
cfg.ports.add(name="p1", location=f"{bed}-tx/{bed}-tx0")
cfg.ports.add(name="p2", location=f"{bed}-rx/{bed}-rx0")
f = cfg.flows.add(name="udp")
f.tx_rx.choice = pb.FlowTxRx.Choice.port
f.tx_rx.port.tx_name = "p1"
f.tx_rx.port.rx_names.append("p2")
f.size.choice, f.size.fixed = pb.FlowSize.Choice.fixed, 128
f.rate.choice, f.rate.pps = pb.FlowRate.Choice.pps, 2000
f.duration.choice = pb.FlowDuration.Choice.fixed_packets
f.duration.fixed_packets.packets = 1000
f.metrics.enable = True
f.metrics.latency.enable = True
for choice in ("ethernet", "ipv4", "udp"):
    h = f.packet.add()
    h.choice = getattr(pb.FlowHeader.Choice, choice)
    getattr(h, choice).SetInParent()
stub.SetConfig(pb.SetConfigRequest(config=cfg))

cs = pb.ControlState(choice=pb.ControlState.Choice.traffic)
cs.traffic.choice = pb.StateTraffic.Choice.flow_transmit
cs.traffic.flow_transmit.state = pb.StateTrafficFlowTransmit.State.start
stub.SetControlState(pb.SetControlStateRequest(control_state=cs))

req = pb.MetricsRequest(choice=pb.MetricsRequest.Choice.flow)
req.flow.SetInParent()
for _ in range(100):
    m = stub.GetMetrics(pb.GetMetricsRequest(metrics_request=req)).metrics_response.flow_metrics[0]
    if m.transmit == pb.FlowMetric.Transmit.stopped:
        break
    time.sleep(0.2)
print(f"{m.name}: sent {m.frames_tx}, received {m.frames_rx}, loss {m.loss:.3f} %, "
      f"latency avg {m.latency.average_ns:.0f} ns")
sys.exit(0 if m.frames_tx == m.frames_rx == 1000 else 1)
