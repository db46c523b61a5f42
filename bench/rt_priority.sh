#!/usr/bin/env bash
# What --rt-priority buys against a CPU hog on the send loop's own core.
# Interleaved rounds of: a paced null run at 100 kpps for 3 s pinned to core C, with and
# without SCHED_FIFO, each with stress-ng --cpu 1 pinned to the same core. Prints lateness
# p50/p99/max, the frames more than one gap late and the verdict; raw results in
# bench/results/rt-priority-STAMP.{jsonl,md}.
#   bash bench/rt_priority.sh [ROUNDS=3] [CORE=1]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
core=${2:-1}
G=target/release/gapless
command -v stress-ng >/dev/null || { echo "needs stress-ng (apt-get install stress-ng)" >&2; exit 1; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
raw=bench/results/rt-priority-$stamp.jsonl
md=bench/results/rt-priority-$stamp.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null || true' EXIT
printf '[[stream]]\nname = "cbr"\n[stream.timing]\nrate_pps = 100_000\nduration_s = 3\n' >"$tmp/p.toml"
: >"$raw"
for r in $(seq "$rounds"); do
  for mode in normal fifo; do
    stress-ng --cpu 1 --taskset "$core" --timeout 6s --quiet &
    hog=$!
    sleep 0.5
    extra=()
    [[ $mode == fifo ]] && extra=(--rt-priority 50)
    $G run "$tmp/p.toml" --null --pace on --core "$core" -q --json "$tmp/r.json" "${extra[@]}" >/dev/null
    wait $hog || true
    python3 - "$tmp/r.json" "$mode" "$r" >>"$raw" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["lateness"]
print(json.dumps({"round": int(sys.argv[3]), "mode": sys.argv[2], "p50_ns": l["p50_ns"], "p99_ns": l["p99_ns"],
  "max_ns": l["max_ns"], "late_over_one_gap": l["late_over_one_gap"], "sent": r["sent_frames"],
  "schedule": r["verdict"]["schedule"], "loops": r["verdict"]["loops"]}))
PY
  done
done
python3 - "$raw" >"$md" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| mode | round | lateness p50 | p99 | max | frames > 1 gap late | schedule | runqueue wait |")
print("|---|---|---|---|---|---|---|---|")
for x in rows:
    w = x["loops"][0].get("runqueue_wait_ns") or 0
    print(f"| {x['mode']} | {x['round']} | {x['p50_ns']/1e3:.1f} µs | {x['p99_ns']/1e3:.1f} µs | {x['max_ns']/1e6:.2f} ms | {x['late_over_one_gap']} of {x['sent']} | {x['schedule']} | {w/1e6:.1f} ms |")
for m in ("normal", "fifo"):
    p = [x["p99_ns"] for x in rows if x["mode"] == m]
    print(f"\nmedian lateness p99, {m}: {st.median(p)/1e3:.1f} µs")
PY
cat "$md"
echo "raw: $raw"
