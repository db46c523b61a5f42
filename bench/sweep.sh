#!/usr/bin/env bash
# Mind the Gap, Fig. 1, against the reference device under test: latency against offered load,
# one curve per burst size (1 = CBR, 4, 16, 64), each point REPS repetitions with their own
# seeds. The device: `gapless testbed up --dut router --dut-rate 24mbit` (50 kpps at 64 B).
# Writes bench/results/sweep-STAMP.{json,txt} and the plots in bench/results/sweep-STAMP/.
# Usage: bash bench/sweep.sh [REPS]      (default 3; about 4 minutes at 3)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=bench/results/sweep-$STAMP
gapless testbed up --name gl --dut router --dut-rate 24mbit
trap 'gapless testbed up --name gl >/dev/null' EXIT   # leave the direct testbed, as set-up made it
# max-retries 0: on this VM most trials' senders fall behind by the 0.1 % rule; the
# report counts them instead of running each again.
gapless sweep --testbed gl --param rate --values 5000,10000,20000,30000,40000,45000,48000 \
  --curves burst=1,4,16,64 --repetitions "$REPS" --duration 2 --warmup 0.3 --settle 0.3 \
  --max-retries 0 --json "$OUT.json" --report-dir "$OUT" -q | tee "$OUT.txt"
python3 bench/sweep_relative.py "$OUT.json" | tee -a "$OUT.txt"
