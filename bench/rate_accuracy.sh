#!/usr/bin/env bash
# Rate accuracy at the sink: the mean rate an independent meter (`gapless measure` on core 1,
# kernel RX stamps, CLOCK_REALTIME) sees over SECS seconds, against the rate asked for, in ppm.
# Senders, interleaved at each rate and round, all on core 0 at batch 1:
#   c        bench/c/sendto_loop.c: TSC busy-wait calibrated against CLOCK_MONOTONIC_RAW
#            for 200 ms, one sendto() per frame
#   BIN...   each gapless binary given (e.g. before and after a change), AF_PACKET
#   bash bench/rate_accuracy.sh [BIN...]      default: target/release/gapless
#   RATES="10000 100000" SECS=5 ROUNDS=2 bash bench/rate_accuracy.sh OLD NEW
# Raw lines go to bench/results/rate-accuracy-<UTC>.txt; the summary is the median |ppm|.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 0 ]] && set -- target/release/gapless
G=$1
RATES=${RATES:-10000 100000}
SECS=${SECS:-5}
ROUNDS=${ROUNDS:-2}
tmp=$(mktemp -d)
cc -O2 -o "$tmp/sendto_loop" bench/c/sendto_loop.c
"$G" testbed up --name ra > /dev/null
trap '"$G" testbed down --name ra > /dev/null; rm -rf "$tmp"' EXIT
mkdir -p bench/results
out=bench/results/rate-accuracy-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(git rev-parse --short HEAD) secs=$SECS bins=$*" > "$out"
for round in $(seq "$ROUNDS"); do
  for rate in $RATES; do
    printf '[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = %s\nduration_s = %s\n' "$rate" "$SECS" > "$tmp/p.toml"
    for who in c "$@"; do
      "$G" measure --netns ra-rx --iface ra-rx0 --duration $((SECS + 2)) --core 1 -q --json "$tmp/m.json" > /dev/null &
      mp=$!
      sleep 0.5
      held=-
      if [[ $who == c ]]; then
        ip netns exec ra-tx "$tmp/sendto_loop" ra-tx0 "$rate" "$SECS" 0 > "$tmp/s.txt"
      else
        "$who" run "$tmp/p.toml" --netns ra-tx --iface ra-tx0 --core 0 -q --json "$tmp/r.json" > /dev/null || true
        held=$(python3 -c "import json; print(json.load(open('$tmp/r.json'))['verdict'].get('held'))")
      fi
      wait $mp || true
      python3 - "$tmp/m.json" "$rate" "$who" "$round" "$held" <<'PY' | tee -a "$out"
import json, sys
m = json.load(open(sys.argv[1])); rate = float(sys.argv[2])
s = max(m["streams"], key=lambda s: s["rx_frames"]) if m["streams"] else None
n = s["rx_frames"] if s else 0
span = (s["last_rx_ns"] - s["first_rx_ns"]) / 1e9 if s else 0
got = (n - 1) / span if span > 0 else 0
print(f"{sys.argv[4]} {int(rate)} {sys.argv[3]} rx {n} sink_pps {got:.3f} ppm {1e6 * (got / rate - 1):+.2f} held {sys.argv[5]}")
PY
    done
  done
done
python3 - "$out" <<'PY'
import sys, collections, statistics
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
by = collections.defaultdict(list)
for r in rows:
    by[(int(r[1]), r[2])].append(float(r[8]))
who = list(dict.fromkeys(r[2] for r in rows))
for rate in sorted({k[0] for k in by}):
    print(f"{rate:>8} pps  " + "  ".join(f"{w}: median {statistics.median(by[(rate, w)]):+.2f} ppm ({', '.join(f'{x:+.1f}' for x in by[(rate, w)])})" for w in who))
print(f"raw: {sys.argv[1]}")
PY
