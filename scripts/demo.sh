#!/usr/bin/env bash
# The demo: build, bring up the veth testbed, calibrate over it, send examples/demo.toml
# through it while gapless's meter and tcpdump both listen at the sink, and print the
# sender's, the meter's and the capture's reports.
#   scripts/demo.sh [--keep]   (--keep leaves the testbed up)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
G=target/release/gapless
out=out/demo
mkdir -p "$out"

$G testbed up
echo
echo "== gapless calibrate: the setup's own latency offset and precision floor (2 s over the bare veth) =="
$G calibrate --tx gl-tx0 --tx-netns gl-tx --rx gl-rx0 --rx-netns gl-rx --duration 2 --out "$out/calibration.json"

ip netns exec gl-rx tcpdump -i gl-rx0 -w "$out/rx.pcap" --time-stamp-precision=nano -B 131072 -s 2048 2>"$out/tcpdump.log" &
tcpdump_pid=$!
trap 'kill -INT $tcpdump_pid 2>/dev/null || true; [[ "${1:-}" == "--keep" ]] || $G testbed down >/dev/null' EXIT
for _ in $(seq 50); do grep -q "listening on" "$out/tcpdump.log" && break; sleep 0.1; done

echo
echo "== gapless run examples/demo.toml --netns gl-tx --iface gl-tx0 --rx gl-rx0 --rx-netns gl-rx =="
$G run examples/demo.toml --netns gl-tx --iface gl-tx0 --rx gl-rx0 --rx-netns gl-rx \
    --calibration "$out/calibration.json" --json "$out/result.json" --report-dir "$out/report"
sleep 1.5   # let libpcap hand over its last TPACKET_V3 block
kill -INT $tcpdump_pid; wait $tcpdump_pid 2>/dev/null || true

echo
echo "== cross-check: tcpdump's capture at the sink (ns timestamps), through gapless analyze =="
$G analyze "$out/rx.pcap" --profile "$out/result.json" --signed-only --json "$out/tcpdump-analysis.json"
echo
echo "files: $out/result.json (TX and RX joined), $out/report/ (plots and CSV), $out/rx.pcap, $out/calibration.json"
