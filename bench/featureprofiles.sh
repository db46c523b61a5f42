#!/usr/bin/env bash
# featureprofiles' own back-to-back OTG tests (open-traffic-generator/featureprofiles, branch
# `static`, feature/experimental/otg_only) run through ondatra against this checkout's
# `gapless serve`, as a user of ixia-c runs them: four veths in one namespace (two pairs),
# OTG gRPC on 40051 (insecure), gNMI on 50051 (skip_verify), a featureprofiles binding.
# Nothing of featureprofiles is copied here: the script builds each test from a checkout of
# the fork (its go.mod fetches its modules through the Go proxy: about 1.6 GB and 15 minutes
# the first time) and records each test's verdict in bench/results.
#   bash bench/featureprofiles.sh FORK_CHECKOUT [TEST_DIR...]
# e.g. git clone --branch static https://github.com/open-traffic-generator/featureprofiles fp
#      bash bench/featureprofiles.sh fp isis_b2b link_state_b2b ospfv3
# Needs root (namespaces), Go (scripts/setup.sh --test) and the ci build of gapless.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
fork=$(cd "${1:?give the checkout of the fork}" && pwd)
shift
tests=("${@:-isis_b2b link_state_b2b ospfv3}")
read -r -a tests <<<"${tests[*]}"
otg="$fork/feature/experimental/otg_only"
[[ -d "$otg" ]] || { echo "featureprofiles.sh: $otg is missing: check out the fork's static branch" >&2; exit 2; }
gapless="$repo/target/ci/gapless"
[[ -x "$gapless" ]] || { echo "featureprofiles.sh: build gapless first (cargo build --profile ci)" >&2; exit 2; }
ns=glfp
work=$(mktemp -d)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$repo/bench/results/featureprofiles-$stamp.txt"
cleanup() {
  [[ -n "${server:-}" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns del "$ns" 2>/dev/null || true
ip netns add "$ns"
ip -n "$ns" link add veth-a type veth peer name veth-z
ip -n "$ns" link add veth-c type veth peer name veth-d
for d in lo veth-a veth-z veth-c veth-d; do ip -n "$ns" link set "$d" up; done
cat >"$work/b2b.binding" <<EOF
options { username: "admin" password: "admin" }
ates {
  id: "ate"
  vendor: IXIA
  name: "127.0.0.1:40051"
  otg { target: "127.0.0.1:40051" insecure: true timeout: 60 }
  gnmi { target: "127.0.0.1:50051" skip_verify: true timeout: 30 }
  ports { id: "port1" name: "$ns/veth-a" }
  ports { id: "port2" name: "$ns/veth-z" }
  ports { id: "port3" name: "$ns/veth-c" }
  ports { id: "port4" name: "$ns/veth-d" }
}
EOF
"$gapless" serve --listen 127.0.0.1:18081 --otg-listen 127.0.0.1:18444 --otg-grpc-listen 127.0.0.1:40051 \
  --gnmi-listen 127.0.0.1:50051 --db "$work/g.db" >"$work/serve.log" 2>&1 &
server=$!
sleep 3
{
  echo "# featureprofiles otg_only through ondatra against gapless $(git -C "$repo" rev-parse --short HEAD)"
  echo "# fork $(git -C "$fork" rev-parse --short HEAD), $(go version | cut -d' ' -f3)"
} | tee "$out"
for t in "${tests[@]}"; do
  dir="$otg/$t"
  testbed="$otg/otgb2b.testbed"
  grep -q port3 "$dir"/*_test.go && testbed="$otg/otgb2b4.testbed"
  if ! (cd "$dir" && go test -c -o "$work/$t.test" . >"$work/$t.build" 2>&1); then
    echo "$t: does not build: $(tail -1 "$work/$t.build")" | tee -a "$out"
    continue
  fi
  (cd "$dir" && timeout 600 "$work/$t.test" -binding "$work/b2b.binding" -testbed "$testbed" -test.v \
    -test.timeout 9m >"$work/$t.log" 2>&1) || true
  grep -E '^\s*--- (PASS|FAIL|SKIP)' "$work/$t.log" | sed "s/^/$t: /" | tee -a "$out" || true
  # The test's own table of flow metrics (otgutils.LogFlowMetrics), read over gNMI.
  awk '/OTG Flow Metrics/{on=1} on&&/^[[:space:]]*Name /{hdr=1;next} hdr&&/^[[:space:]]*-+[[:space:]]*$/{on=0;hdr=0} hdr&&NF' "$work/$t.log" |
    sed "s/^ */$t:   flow /" | tee -a "$out" || true
  grep -q -- '--- ' "$work/$t.log" || echo "$t: no verdict: $(tail -1 "$work/$t.log")" | tee -a "$out"
  grep -E 'Error|error' "$work/$t.log" | head -3 | cut -c1-400 | sed "s/^/$t:   /" | tee -a "$out" || true
done
echo "results: $out"
