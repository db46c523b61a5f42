#!/usr/bin/env bash
# Sets up (see setup.sh) and runs every test: unit, statistical, CLI, and the root-only
# integration tests on veth testbeds that the tests make and remove themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:/root/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --release --locked --all-targets --quiet -- -D warnings
log=$(mktemp)
cargo test --release --locked --workspace 2>&1 | tee "$log"
# One closing line for the whole workspace (cargo's own last line is an empty doc-test block).
awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed\n", p, f; exit (f > 0 || p == 0) }' "$log"
