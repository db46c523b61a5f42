#!/usr/bin/env bash
# Engine cost: ns per frame on the null backend (frames built and dropped, unpaced), for one
# stream without field ops and one with 4 field ops (2 inc, 2 random). 5 interleaved runs of
# 20 M frames each; prints every run and the medians, and appends the raw lines to
# bench/results/engine-<UTC time>.txt. Goal: under 50 ns per frame (> 20 Mpps per core).
set -euo pipefail
cd "$(dirname "$0")/.."
G=target/release/gapless
[[ -x $G ]] || bash scripts/setup.sh
tmp=$(mktemp -d)
cat > "$tmp/one.toml" <<'P'
[[stream]]
size = 64
[stream.timing]
rate_pps = 1e9
count = 20_000_000
P
cat > "$tmp/four.toml" <<'P'
[[stream]]
size = 64
[[stream.field]]
field = "ip_src"
op = "inc"
from = "198.18.0.1"
to = "198.18.0.254"
[[stream.field]]
field = "ip_dst"
op = "random"
from = "198.18.1.1"
to = "198.18.1.254"
[[stream.field]]
field = "src_port"
op = "random"
from = 1024
to = 65535
[[stream.field]]
field = "dst_port"
op = "inc"
from = 1
to = 100
[stream.timing]
rate_pps = 1e9
count = 20_000_000
P
mkdir -p bench/results
out=bench/results/engine-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(git rev-parse --short HEAD 2>/dev/null)" > "$out"
for rep in 1 2 3 4 5; do
  for p in one four; do
    "$G" run "$tmp/$p.toml" --null --json "$tmp/r.json" -q > /dev/null
    python3 -c "import json,sys; r=json.load(open('$tmp/r.json')); print('$p', $rep, r['sent_frames'], r['duration_ns'], '%.1f' % (r['duration_ns']/r['sent_frames']))" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
for name, label in (("one", "1 stream, no field ops"), ("four", "1 stream, 4 field ops")):
    v = [float(r[4]) for r in rows if r[0] == name]
    print(f"{label}: median {statistics.median(v):.1f} ns/frame ({1e3 / statistics.median(v):.1f} Mpps), runs {v}")
PY
# Instructions per frame (callgrind): repeatable whatever else the machine does. The
# marginal count between 1 M and 2 M frames cancels start-up and calibration.
if command -v valgrind >/dev/null; then
  for p in one four; do
    ir=()
    for n in 1000000 2000000; do
      sed "s/count = .*/count = $n/" "$tmp/$p.toml" > "$tmp/cg.toml"
      ir+=("$(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$G" run "$tmp/cg.toml" --null -q 2>&1 | sed -n 's/.*Collected : //p')")
    done
    echo "callgrind $p instructions/frame $(( (ir[1] - ir[0]) / 1000000 ))" | tee -a "$out"
  done
fi
echo "raw: $out"
rm -rf "$tmp"
