#!/usr/bin/env bash
# Sets up (see setup.sh) and runs every test: unit, statistical, CLI, and the root-only
# integration tests on veth testbeds that the tests make and remove themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:/root/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --release --locked --all-targets --quiet -- -D warnings
cargo test --release --locked --workspace 2>&1 | tee /tmp/gapless-test.log
grep -q "^test result: FAILED" /tmp/gapless-test.log && exit 1
exit 0
