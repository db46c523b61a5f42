#!/usr/bin/env bash
# pcap replay: speed and memory on the null backend (frames read from the file, built and
# dropped, unpaced). Writes a capture of 10^7 frames of 60 B (760 MB; FRAMES= to change) to
# a temporary directory, reads it once to warm the page cache, then replays it REPS (3)
# times, interleaved with the same run of a CBR profile (the engine's own speed) as the
# reference. Prints Mpps and peak RSS (GNU time) per run and appends them to
# bench/results/replay-<UTC time>.txt.
# Goals (issue 12): >= 5 Mpps from a page-cache-warm file; memory that does not grow with
# the file (compare FRAMES=1000000 with the default).
set -euo pipefail
cd "$(dirname "$0")/.."
G=${G:-target/release/gapless}
[[ -x $G ]] || bash scripts/setup.sh
FRAMES=${FRAMES:-10000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/big.pcap" "$FRAMES" <<'PY'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
frame = bytes.fromhex("02676c00000202676c00000188b5") + bytes(46)
with open(path, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    rec = bytearray()
    for i in range(n):
        t = 1_000_000_000 + i * 1000
        rec += struct.pack("<IIII", t // 10**9, t % 10**9, 60, 60) + frame
        if len(rec) > 1 << 22:
            f.write(rec); rec.clear()
    f.write(rec)
PY
cat "$tmp/big.pcap" > /dev/null
printf '[[stream]]\n[stream.replay]\nfile = "big.pcap"\n[stream.timing]\n' > "$tmp/replay.toml"
printf '[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 5e8\ncount = %s\n' "$FRAMES" > "$tmp/cbr.toml"
mkdir -p bench/results
out=bench/results/replay-$(date -u +%Y%m%dT%H%M%SZ).txt
echo "# $(uname -r) $(git rev-parse --short HEAD 2>/dev/null) frames $FRAMES" > "$out"
for rep in $(seq "${REPS:-3}"); do
  for p in replay cbr; do
    /usr/bin/time -f "%M" -o "$tmp/rss" "$G" run "$tmp/$p.toml" --null --json "$tmp/r.json" -q
    python3 -c "import json; r=json.load(open('$tmp/r.json')); print('$p', $rep, r['sent_frames'], '%.2f Mpps' % (r['sent_frames']*1e3/r['duration_ns']), 'rss_kb', open('$tmp/rss').read().strip())" | tee -a "$out"
  done
done
echo "raw: $out"
