#!/usr/bin/env bash
# Many streams in little memory: N streams (default 10 000) of the same 64-byte CBR template,
# 10 pps and 5 frames each, paced on the null backend; peak RSS from /usr/bin/time -v, for
# each binary given (interleaved, ROUNDS times). Goal: 10 000 streams in at most 150 MB.
#   bash bench/many_streams.sh [BIN...]        default: target/release/gapless
#   N=10000 ROUNDS=3 bash bench/many_streams.sh OLD NEW
# Raw lines go to bench/results/many-streams-<UTC>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 0 ]] && set -- target/release/gapless
N=${N:-10000}
ROUNDS=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$N" > "$tmp/many.toml" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f'[[stream]]\nname = "s{i}"\nsize = 64\n[stream.timing]\nrate_pps = 10\ncount = 5\n')
PY
mkdir -p bench/results
out=bench/results/many-streams-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(git rev-parse --short HEAD) streams=$N bins=$*" > "$out"
for round in $(seq "$ROUNDS"); do
  for b in "$@"; do
    kb=$(/usr/bin/time -v "$b" run "$tmp/many.toml" --null --pace on -q 2>&1 >/dev/null | awk '/Maximum resident/ {print $6}')
    echo "$round $b peak_rss_mb $((kb / 1024))" | tee -a "$out"
  done
done
echo "raw: $out"
