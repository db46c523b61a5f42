#!/usr/bin/env bash
# Sets up (see setup.sh) and runs every test: unit, statistical, CLI, and the root-only
# integration tests on veth testbeds that the tests make and remove themselves.
# Every test binary runs (--no-fail-fast); the last line is always 'N passed, N failed', and
# the exit code is non-zero when any test, binary or check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# Each stage's time is printed at the end (and kept in target/test-times.txt).
times=$(mktemp)
stage_t0=$(date +%s)
stage() { # stage NAME: closes the stage that ran since the last call
  local now; now=$(date +%s)
  printf '%-28s %5d s\n' "$1" $((now - stage_t0)) >> "$times"
  stage_t0=$now
}
bash scripts/setup.sh --test || exit 1
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:/root/.cargo/bin:$PATH"
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
stage "set-up"
status=0
cargo fmt --all -- --check || { echo "test.sh: cargo fmt --check failed (run cargo fmt --all)"; status=1; }
cargo clippy --profile ci --locked --all-targets --quiet -- -D warnings || { echo "test.sh: clippy failed"; status=1; }
# Every intra-doc link resolves (private items documented, so links to them count).
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links -A rustdoc::private_intra_doc_links" \
  cargo doc --profile ci --locked --no-deps --workspace --document-private-items --quiet \
  || { echo "test.sh: cargo doc found broken intra-doc links"; status=1; }
stage "fmt + clippy + doc links"
log=$(mktemp)
# The ci profile (DESIGN-NOTES 39): the test binaries setup.sh --test built.
cargo test --profile ci --locked --workspace --no-fail-fast 2>&1 | tee "$log"
cargo_rc=${PIPESTATUS[0]}
stage "cargo tests"
# The Python API's tests (pytest, in .venv made by setup.sh), counted in the closing line.
pylog=$(mktemp)
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 python/tests 2>&1 | tee "$pylog"
py_rc=${PIPESTATUS[0]}
stage "pytest"
read -r py_pass py_fail < <(tail -n 1 "$pylog" | awk '{ p = 0; f = 0
  for (i = 1; i < NF; i++) { if ($(i + 1) ~ /^passed/) p += $i; if ($(i + 1) ~ /^(failed|error)/) f += $i }
  print p, f }')
if [[ $py_rc -ne 0 && ${py_fail:-0} -eq 0 ]]; then py_fail=1; fi
echo "test result: pytest. ${py_pass:-0} passed; ${py_fail:-0} failed (python/tests)" | tee -a "$log"
[[ -d target/screenshots ]] && echo "test.sh: the dashboard test's screenshots are in $(pwd)/target/screenshots"
echo "test.sh: time per stage"
mkdir -p target && cp "$times" target/test-times.txt
cat "$times"
# One closing line for the whole workspace (cargo's own last line is an empty doc-test block).
# A test binary that failed to build or crashed has no 'test result' line: count it as failed.
awk -v rc="$cargo_rc" -v st="$status" '
  /^test result:/ { p += $4; f += $6 }
  END {
    if (rc != 0 && f == 0) f = 1
    if (st != 0 && f == 0) f = 1
    printf "%d passed, %d failed\n", p, f
    exit (f > 0 || p == 0)
  }' "$log"
