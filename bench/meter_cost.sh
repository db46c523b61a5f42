#!/usr/bin/env bash
# Meter cost: ns per frame of the core meter in memory (no IO), 64-byte signed UDP frames from
# 4 interleaved streams through classification and every per-stream figure
# (crates/gapless-core/examples/meter_cost.rs). Interleaved runs of 5 M frames; prints every
# run and the medians, then the instructions per frame (callgrind, the marginal count between
# 1 M and 2 M frames: repeatable whatever else the machine does), and appends the raw lines to
# bench/results/meter-cost-<UTC time>.txt. Goal (issue 33): at most 60 ns per frame.
#
#   bash bench/meter_cost.sh                # this tree's meter_cost, built without LTO
#   bash bench/meter_cost.sh OLD NEW ...    # several meter_cost binaries, interleaved run by
#                                           # run (a before/after comparison on this noisy
#                                           # machine)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -eq 0 ]]; then
  # Its own target directory: without LTO, so as not to undo the release build's.
  CARGO_TARGET_DIR=target/meter-cost CARGO_PROFILE_RELEASE_LTO=false \
    cargo build --release --locked -q -p gapless-core --example meter_cost
  set -- target/meter-cost/release/examples/meter_cost
fi
mkdir -p bench/results
out=bench/results/meter-cost-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(git rev-parse --short HEAD 2>/dev/null)" > "$out"
for B in "$@"; do echo "# binary $B $(sha256sum "$B" | cut -c1-12)" >> "$out"; done
for rep in $(seq "${REPS:-7}"); do
  for B in "$@"; do
    echo "$rep $B $("$B" 5000000 --meter-only | sed -n 's/.*meter_ns_per_frame=\([0-9.]*\).*/\1/p')" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
base = None
for b in dict.fromkeys(r[1] for r in rows):
    v = [float(r[2]) for r in rows if r[1] == b]
    m = statistics.median(v)
    base = base or m
    print(f"meter [{b}]: median {m:.1f} ns/frame ({m / base:.3f}x the first), min {min(v):.1f}, runs {v}")
PY
if command -v valgrind >/dev/null; then
  tmp=$(mktemp -d)
  for B in "$@"; do
    ir=()
    for n in 1000000 2000000; do
      ir+=("$(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$B" "$n" --meter-only 2>&1 | sed -n 's/.*Collected : //p')")
    done
    echo "callgrind $B instructions/frame $(( (ir[1] - ir[0]) / 1000000 ))" | tee -a "$out"
  done
  rm -rf "$tmp"
fi
echo "raw: $out"
