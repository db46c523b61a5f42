#!/usr/bin/env bash
# The demo: build, bring up the veth testbed, send examples/demo.toml through it with
# gapless while tcpdump captures at the sink, and print both sides' report.
#   scripts/demo.sh [--keep]   (--keep leaves the testbed up)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
G=target/release/gapless
out=out/demo
mkdir -p "$out"

$G testbed up
ip netns exec gl-rx tcpdump -i gl-rx0 -w "$out/rx.pcap" --time-stamp-precision=nano -B 131072 -s 2048 2>"$out/tcpdump.log" &
tcpdump_pid=$!
trap 'kill -INT $tcpdump_pid 2>/dev/null || true; [[ "${1:-}" == "--keep" ]] || $G testbed down >/dev/null' EXIT
for _ in $(seq 50); do grep -q "listening on" "$out/tcpdump.log" && break; sleep 0.1; done

echo
echo "== gapless run examples/demo.toml --netns gl-tx --iface gl-tx0 =="
$G run examples/demo.toml --netns gl-tx --iface gl-tx0 --json "$out/result.json"
sleep 1.5   # let libpcap hand over its last TPACKET_V3 block
kill -INT $tcpdump_pid; wait $tcpdump_pid 2>/dev/null || true

echo
echo "== at the sink: tcpdump on gl-rx0 (nanosecond timestamps), analysed by bench/sinkstats.py =="
python3 bench/sinkstats.py "$out/rx.pcap" --result "$out/result.json"
echo
echo "files: $out/result.json (the result file), $out/rx.pcap (the sink's capture)"
