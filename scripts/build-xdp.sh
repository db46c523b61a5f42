#!/usr/bin/env bash
# Rebuilds the BPF programs (crates/gapless-io/xdp/*.o: the AF_XDP receive program and the
# VLAN tagger of emulated hosts) from their C sources. Only needed after editing a .c: the object is committed and embedded into gapless,
# so building gapless needs no clang. Needs Debian's clang and libbpf-dev:
#   apt-get install -y clang-14 libbpf-dev
set -euo pipefail
cd "$(dirname "$0")/../crates/gapless-io/xdp"
CLANG=${CLANG:-$(command -v clang-14 || command -v clang)}
for p in gapless_xdp gapless_vlan; do
  "$CLANG" -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c $p.c -o $p.o.tmp
  # Keep BTF (aya needs it for the maps), drop the DWARF sections.
  llvm-strip-14 -g $p.o.tmp 2>/dev/null || llvm-strip -g $p.o.tmp
  mv $p.o.tmp $p.o
done
sha256sum gapless_xdp.c gapless_xdp.o gapless_vlan.c gapless_vlan.o
