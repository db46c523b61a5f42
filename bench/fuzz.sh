#!/usr/bin/env bash
# Fuzz smoke run: each cargo-fuzz target for SECONDS (60) from the committed corpus in
# fuzz/corpus/; a crash fails the script and leaves its input in fuzz/artifacts/. Needs the
# nightly toolchain and cargo-fuzz (`bash scripts/setup.sh --test`).
#   bash bench/fuzz.sh [SECONDS] [--smoke]
# --smoke (scripts/test.sh): the result is printed, not recorded in bench/results.
# The fuzz build lives in one directory per machine (GAPLESS_FUZZ_TARGET, default
# ~/.cache/gapless/fuzz-target), so a fresh clone on the same machine does not rebuild it.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
target_dir="${GAPLESS_FUZZ_TARGET:-${XDG_CACHE_HOME:-$HOME/.cache}/gapless/fuzz-target}"
mkdir -p "$target_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=../bench/results/fuzz-$stamp.txt
[[ "${2:-}" == "--smoke" ]] && out=/dev/null
: >"$out"
for t in profile capture csv classify; do
  # Work on a copy of the corpus: new inputs found in the run are not committed by accident.
  work=$(mktemp -d)
  cp -r "corpus/$t/." "$work/"
  log=$(mktemp)
  if cargo +nightly fuzz run --target-dir "$target_dir" "$t" "$work" -- -max_total_time="$secs" -rss_limit_mb=1024 -max_len=65536 >"$log" 2>&1; then
    echo "$t: ok, $(grep -Eo '#[0-9]+' "$log" | tail -1 | tr -d '#') runs in ${secs} s, $(grep -Eo 'cov: [0-9]+' "$log" | tail -1)" | tee -a "$out"
  else
    echo "$t: FAILED (see fuzz/artifacts/$t/)" | tee -a "$out"
    tail -30 "$log" | tee -a "$out"
    exit 1
  fi
  rm -rf "$work" "$log"
done
[[ "$out" == /dev/null ]] || echo "results: $out"
