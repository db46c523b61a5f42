#!/usr/bin/env bash
# Scale in streams: peak RSS and wall time of one profile with N streams on the null backend.
#   start:  N CBR streams of 1 frame each (the time is start-up, planning and the result)
#   run:    N streams x 200 frames, unpaced (2 M frames at 10 000 streams)
#   paced:  N streams x 80 frames at 10 pps each, paced (every stream builds its lateness
#           histogram after 64 departures)
#   bash bench/streams.sh [BIN ...]     (default: this tree's binary; several: interleaved)
# Goal (issue 11): 10 000 streams under 200 MB and starting in under 1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -eq 0 ]]; then
  [[ -x target/release/gapless ]] || bash scripts/setup.sh
  set -- target/release/gapless
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench/results
out=bench/results/streams-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(git rev-parse --short HEAD)" > "$out"
prof() { # N COUNT RATE
  python3 -c "
import sys
n, count, rate = int(sys.argv[1]), sys.argv[2], sys.argv[3]
print(''.join('[[stream]]\nname = \"s%d\"\n[stream.timing]\nrate_pps = %s\ncount = %s\n' % (i, rate, count) for i in range(n)))" "$@"
}
for n in 1 100 1000 10000; do
  prof "$n" 1 100 > "$tmp/start-$n.toml"
  prof "$n" 200 100 > "$tmp/run-$n.toml"
  prof "$n" 80 10 > "$tmp/paced-$n.toml"
done
for n in 1 100 1000 10000; do
  for case in start run paced; do
    extra=()
    [[ $case == paced ]] && extra=(--pace on)
    for G in "$@"; do
      /usr/bin/time -f "%M %e" -o "$tmp/t" "$G" run "$tmp/$case-$n.toml" --null -q --json "$tmp/r.json" "${extra[@]}" > /dev/null
      read -r kb s < "$tmp/t"
      sent=$(python3 -c "import json; print(json.load(open('$tmp/r.json'))['sent_frames'])")
      echo "$case $n $G rss_mb $((kb / 1024)) wall_s $s sent $sent" | tee -a "$out"
    done
  done
done
echo "raw: $out"
