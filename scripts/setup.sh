#!/usr/bin/env bash
# Installs what gapless needs on a fresh Debian/Ubuntu machine and builds it (release).
#   scripts/setup.sh          runtime + test tools: iproute2, tcpdump, tshark, util-linux, python3
#                             (and python3-venv), chromium (the dashboard's browser test, driven
#                             headless by Playwright: no browser download), the release build,
#                             and the Python package in .venv
#   scripts/setup.sh --bench  also the peer tools the benchmarks compare against
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(iproute2 tcpdump tshark util-linux python3 python3-venv ca-certificates stress-ng chromium)
if [[ "${1:-}" == "--bench" ]]; then
  # dpdk-testpmd is in dpdk-dev; its AF_XDP and AF_PACKET drivers and mempool are separate packages.
  pkgs+=(netsniff-ng tcpreplay iperf3 d-itg dpdk-dev librte-net-af-xdp23 librte-net-af-packet23 librte-mempool-ring23)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to install: ${missing[*]} (run with sudo)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  for c in "$HOME/.cargo/bin/cargo" /root/.cargo/bin/cargo; do
    [[ -x "$c" ]] && export PATH="$(dirname "$c"):$PATH" && break
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: Rust is missing. Install Rust 1.85 or newer with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi
if [[ "${1:-}" == "--fuzz" ]]; then
  # The nightly toolchain and cargo-fuzz, for bench/fuzz.sh.
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
fi
# One build for the demo and the tests: the test binaries are built here too, with the same
# release profile, so `cargo test --release` after it compiles nothing more.
cargo build --release --locked --quiet --all-targets
# The Python package (crates/gapless-py, python/gapless) into .venv, with what its tests
# and examples use (pytest, mypy, scapy, pandas, matplotlib, snappi for the OTG tests and
# Playwright for the browser test: all optional for users).
# `pip install .` builds the extension with maturin, reusing the cargo build above.
py="${PYTHON:-python3}"
[[ -x .venv/bin/python ]] || "$py" -m venv .venv || { echo "setup: '$py -m venv' failed: install python3-venv" >&2; exit 1; }
.venv/bin/python -m pip install --quiet --disable-pip-version-check ".[test]"
echo "setup: installed the gapless Python package into $(pwd)/.venv (use .venv/bin/python, or . .venv/bin/activate)"
# gapless on PATH: a link in /usr/local/bin (root), else ~/.local/bin.
bin="$(pwd)/target/release/gapless"
if [[ -w /usr/local/bin ]]; then dest=/usr/local/bin; else dest="$HOME/.local/bin"; mkdir -p "$dest"; fi
ln -sf "$bin" "$dest/gapless"
echo "setup: built $bin, linked as $dest/gapless"
case ":$PATH:" in *":$dest:"*) ;; *) echo "setup: add $dest to PATH to run gapless by name" ;; esac
