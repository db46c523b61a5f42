#!/usr/bin/env bash
# Engine cost: ns per frame on the null backend (frames built and dropped, unpaced), for one
# stream without field ops, one with 4 field ops (2 inc, 2 random), and one of each pattern of
# issue 12 (pdf gaps, self-similar, a varying rate, cycling variants). 5 interleaved runs of
# 20 M frames each; prints every run and the medians, and appends the raw lines to
# bench/results/engine-<UTC time>.txt. Goal: under 50 ns per frame (> 20 Mpps per core).
#
#   bash bench/engine.sh                 # this tree's binary
#   bash bench/engine.sh OLD NEW ...     # several binaries, interleaved run by run (a
#                                        # before/after comparison on this noisy machine)
# Instructions per frame are added where `perf stat` can count them (not in this VM: no PMU).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -eq 0 ]]; then
  [[ -x target/release/gapless ]] || bash scripts/setup.sh
  set -- target/release/gapless
fi
insn() { perf stat -x, -e instructions:u "$@" 2>&1 >/dev/null | awk -F, '/instructions/ && $1 ~ /^[0-9]+$/ {print $1}'; }
tmp=$(mktemp -d)
cat > "$tmp/one.toml" <<'P'
[[stream]]
size = 64
[stream.timing]
rate_pps = 5e8
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
rate_pps = 5e8
count = 20_000_000
P
# The patterns of issue 12 (goal: none above 100 ns per frame).
pat() { printf '[[stream]]\nsize = 64\n%s\n[stream.timing]\nrate_pps = 2e8\ncount = 20_000_000\n%s\n' "$1" "$2" > "$tmp/$3.toml"; }
pat "" 'pattern = "distribution"
dist = { kind = "pdf", pdf = "x^2 * exp(-x/3)", support_us = [0, 60] }' pdf
pat "" 'pattern = "self_similar"
self_similar = { hurst = 0.8, slot_us = 1 }' selfsim
pat "" 'vary = { kind = "sine", amplitude = 0.5, period_s = 0.01 }' sine
printf '[[stream]]\n[stream.timing]\nrate_pps = 5e8\ncount = 20_000_000\n[[stream.variant]]\nsize = 64\nrepeat = 3\n[[stream.variant]]\nsize = { ramp = [80, 1518] }\n[stream.variant.template]\nl4 = "tcp"\n' > "$tmp/cycle.toml"
# Issue 67: four ops on the bit targets (ecn, ip_id, df, a TCP flag) against four on the
# targets before them (ports, DSCP, TTL), TCP frames both.
ops4() { # ops4 NAME FIELD:OP:ARGS ... (ARGS: "from = 1\nto = 3" or "values = [..]")
  local name=$1; shift
  printf '[[stream]]\nsize = 80\n[stream.template]\nl4 = "tcp"\n' > "$tmp/$name.toml"
  for f in "$@"; do
    IFS=: read -r field op args <<< "$f"
    printf '[[stream.field]]\nfield = "%s"\nop = "%s"\n%b\n' "$field" "$op" "$args" >> "$tmp/$name.toml"
  done
  printf '[stream.timing]\nrate_pps = 5e8\ncount = 20_000_000\n' >> "$tmp/$name.toml"
}
ops4 ops_old "src_port:inc:from = 1024\nto = 2047" "dst_port:random:from = 1\nto = 65535" "dscp:list:values = [0, 10, 46]" "ttl:inc:from = 1\nto = 64"
ops4 ops_new "ecn:list:values = [0, 1, 2, 3]" "ip_id:random:from = 0\nto = 65535" "df:list:values = [1, 0]" "tcp_syn:list:values = [1, 0, 0]"
# Issue 67 item 2: fields set by hand take the general path, checksums summed from the bytes
# (DESIGN-NOTES 93): TCP frames of 80 B with a hand IPv4 length and a bad TCP checksum,
# against the same frames without.
printf '[[stream]]\nsize = 80\n[stream.template]\nl4 = "tcp"\n[stream.timing]\nrate_pps = 5e8\ncount = 20_000_000\n' > "$tmp/tcp80.toml"
sed 's/^l4 = "tcp"$/l4 = "tcp"\nhand = { ip_length = 1000, l4_checksum = "bad" }/' "$tmp/tcp80.toml" > "$tmp/hand.toml"
PROFILES=${PROFILES:-one four pdf selfsim sine cycle ops_old ops_new tcp80 hand}
mkdir -p bench/results
out=bench/results/engine-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(git rev-parse --short HEAD 2>/dev/null)" > "$out"
for G in "$@"; do echo "# binary $G $(sha256sum "$G" | cut -c1-12)" >> "$out"; done
for rep in $(seq "${REPS:-5}"); do
  for p in $PROFILES; do
    for G in "$@"; do
      rm -f "$tmp/r.json"
      n=$(insn "$G" run "$tmp/$p.toml" --null --json "$tmp/r.json" -q || true)
      [[ -s $tmp/r.json ]] || { echo "$p: the run failed: $("$G" check "$tmp/$p.toml" 2>&1 | tail -1)" >&2; exit 1; }
      python3 -c "import json,sys; r=json.load(open('$tmp/r.json')); n='${n:-}'; print('$p', $rep, '$G', r['sent_frames'], r['duration_ns'], '%.1f' % (r['duration_ns']/r['sent_frames']), '%.1f' % (int(n)/r['sent_frames']) if n else '-')" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics, sys
LABELS = {"one": "1 stream, no field ops", "four": "1 stream, 4 field ops", "pdf": "pdf gaps",
          "selfsim": "self-similar fGn (1 µs slots)", "sine": "sine-varying rate",
          "cycle": "2 variants, 3:1, one with a size ramp",
          "ops_old": "TCP, 4 ops on ports, DSCP, TTL", "ops_new": "TCP, 4 ops on ECN, IP ID, DF, SYN",
          "tcp80": "TCP 80 B", "hand": "TCP 80 B, IPv4 length and a bad checksum by hand"}
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
bins = list(dict.fromkeys(r[2] for r in rows))
for name in dict.fromkeys(r[0] for r in rows):
    label = LABELS.get(name, name)
    base = None
    for b in bins:
        v = [float(r[5]) for r in rows if r[0] == name and r[2] == b]
        i = [float(r[6]) for r in rows if r[0] == name and r[2] == b and r[6] != "-"]
        m = statistics.median(v)
        base = base or m
        ins = f", {statistics.median(i):.0f} instructions/frame" if i else ""
        print(f"{label} [{b}]: median {m:.1f} ns/frame ({1e3 / m:.1f} Mpps, {m / base:.3f}x the first), min {min(v):.1f}{ins}, runs {v}")
PY
# Instructions per frame (callgrind): repeatable whatever else the machine does. The
# marginal count between 1 M and 2 M frames cancels start-up and calibration.
if command -v valgrind >/dev/null; then
  for G in "$@"; do
    for p in $PROFILES; do
      ir=()
      for n in 1000000 2000000; do
        sed "s/count = .*/count = $n/" "$tmp/$p.toml" > "$tmp/cg.toml"
        ir+=("$(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$G" run "$tmp/cg.toml" --null -q 2>&1 | sed -n 's/.*Collected : //p')")
      done
      echo "callgrind $p $G instructions/frame $(( (ir[1] - ir[0]) / 1000000 ))" | tee -a "$out"
    done
  done
fi
echo "raw: $out"
rm -rf "$tmp"
