#!/usr/bin/env bash
# Installs what gapless needs on a fresh Debian/Ubuntu machine and builds it. Each step prints
# its time, so a slow one shows.
#   scripts/setup.sh           the runtime: iproute2, tcpdump, tshark, util-linux, frr (bgpd
#                              for OTG devices' BGP, started per device by gapless serve); builds the
#                              `gapless` binary (release) and links it onto PATH. The demo
#                              needs only this.
#   scripts/setup.sh --python  also python3 and the Python package in .venv (pip install .)
#   scripts/setup.sh --test    also what the tests need: chromium (the browser tests, driven
#                              headless by Playwright: no browser download), stress-ng, the test
#                              binaries (profile `ci`), and the Python package with its test
#                              extras, and the ondatra tests' Go binary (Go 1.26 or newer:
#                              /usr/local/go from go.dev, or GOTOOLCHAIN; modules from the
#                              Go module proxy). The `gapless` it links onto PATH is the `ci` build the
#                              tests run (no fat-LTO release build: DESIGN-NOTES 45)
#   scripts/setup.sh --bench   also the peer tools the benchmarks compare against, and the
#                              nightly toolchain with cargo-fuzz (bench/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
case "$mode" in "" | --python | --test | --bench) ;; *)
  echo "setup: unknown option $mode (give --python, --test, --bench or nothing)" >&2; exit 2 ;;
esac
t_all=$(date +%s)
step() { # step NAME COMMAND...: runs it and prints how long it took
  local name=$1 t0; shift; t0=$(date +%s)
  "$@"
  echo "setup: $name took $(( $(date +%s) - t0 )) s"
}

pkgs=(iproute2 tcpdump tshark util-linux ca-certificates frr)
case "$mode" in
  --python) pkgs+=(python3 python3-venv) ;;
  --test) pkgs+=(python3 python3-venv chromium stress-ng curl bird2 gobgpd openvswitch-switch ethtool) ;;
  # dpdk-testpmd is in dpdk-dev; its AF_XDP and AF_PACKET drivers and mempool are separate packages.
  --bench) pkgs+=(python3 python3-venv stress-ng netsniff-ng tcpreplay iperf3 d-itg dpdk-dev librte-net-af-xdp23 librte-net-af-packet23 librte-mempool-ring23) ;;
esac
apt_install() {
  local missing=() p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to install: ${missing[*]} (run with sudo)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
step "apt" apt_install

if ! command -v cargo >/dev/null 2>&1; then
  for c in "$HOME/.cargo/bin/cargo" /root/.cargo/bin/cargo; do
    [[ -x "$c" ]] && export PATH="$(dirname "$c"):$PATH" && break
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: Rust is missing. Install Rust 1.85 or newer with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi

# The binary users run and the benchmarks measure: the release profile (DESIGN-NOTES 39).
# The tests run the ci profile's binary, which their build makes anyway (DESIGN-NOTES 45).
if [[ "$mode" == --test ]]; then
  # Every test binary, in the ci profile (thin LTO, parallel codegen: DESIGN-NOTES 39), so
  # the test run after it compiles nothing more. The gapless binary is built with them (the
  # integration tests run it): a `cargo build -p gapless` of its own unified other features
  # and built gapless-serve and gapless a second time (1 min 43 s on the 2-core test VM).
  step "cargo test --no-run (profile ci; the gapless binary the tests run)" \
    cargo test --profile ci --locked --quiet --workspace --no-run
  bin="$(pwd)/target/ci/gapless"
else
  step "cargo build --release (the gapless binary)" cargo build --release --locked --quiet -p gapless --bin gapless
  bin="$(pwd)/target/release/gapless"
fi
if [[ -w /usr/local/bin ]]; then dest=/usr/local/bin; else dest="$HOME/.local/bin"; mkdir -p "$dest"; fi
ln -sf "$bin" "$dest/gapless"
echo "setup: built $bin, linked as $dest/gapless"
case ":$PATH:" in *":$dest:"*) ;; *) echo "setup: add $dest to PATH to run gapless by name" ;; esac

if [[ "$mode" == --bench ]]; then
  # bench/fuzz.sh: the coverage-guided fuzz runs (the tests replay the committed corpus on
  # stable Rust: crates/gapless-io/tests/fuzz_corpus.rs).
  fuzz_tools() {
    rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
    command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
  }
  step "nightly + cargo-fuzz" fuzz_tools
fi
if [[ "$mode" == --test ]]; then
  # ondatra (tests/ondatra) needs Go 1.26 or newer. Debian's golang-go is older: take Go from
  # go.dev (/usr/local/go), or any Go >= 1.21 with GOTOOLCHAIN=go1.26.8, which fetches that
  # toolchain from the module proxy. Its modules come from the proxy too (tests/ondatra/go.sum
  # pins them); Go's build cache keeps the binary, so a second build takes a second.
  command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
  ondatra_tests() {
    if ! command -v go >/dev/null 2>&1; then
      echo "setup: Go is missing. Install Go 1.26 or newer from https://go.dev/dl into /usr/local/go, then run this again" >&2
      exit 1
    fi
    (cd tests/ondatra && go test -c -o ../../target/ondatra/ondatra.test .) || {
      echo "setup: the ondatra tests did not build (go $(go env GOVERSION); they need 1.26 or newer: set GOTOOLCHAIN=go1.26.8)" >&2; exit 1; }
  }
  step "go test -c (the ondatra tests, tests/ondatra)" ondatra_tests
fi
if [[ -n "$mode" && "$mode" != --bench ]]; then
  py="${PYTHON:-python3}"
  extra=""; [[ "$mode" == --test ]] && extra="[test]"
  python_pkg() {
    # The tests' extension reuses the ci profile's build; users get the release profile's.
    [[ "$mode" == --test ]] && export MATURIN_PEP517_ARGS="--profile ci"
    [[ -x .venv/bin/python ]] || "$py" -m venv .venv || { echo "setup: '$py -m venv' failed: install python3-venv" >&2; exit 1; }
    .venv/bin/python -m pip install --quiet --disable-pip-version-check ".$extra"
  }
  step "pip install .$extra (the Python package into .venv)" python_pkg
  echo "setup: installed the gapless Python package into $(pwd)/.venv (use .venv/bin/python, or . .venv/bin/activate)"
fi
echo "setup: done in $(( $(date +%s) - t_all )) s"
