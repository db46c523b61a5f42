#!/usr/bin/env bash
# Rebuilds the AF_XDP receive program (crates/gapless-io/xdp/gapless_xdp.o) from its C source.
# Only needed after editing gapless_xdp.c: the object is committed and embedded into gapless,
# so building gapless needs no clang. Needs Debian's clang and libbpf-dev:
#   apt-get install -y clang-14 libbpf-dev
set -euo pipefail
cd "$(dirname "$0")/../crates/gapless-io/xdp"
CLANG=${CLANG:-$(command -v clang-14 || command -v clang)}
"$CLANG" -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c gapless_xdp.c -o gapless_xdp.o.tmp
# Keep BTF (aya needs it for the map), drop the DWARF sections.
llvm-strip-14 -g gapless_xdp.o.tmp 2>/dev/null || llvm-strip -g gapless_xdp.o.tmp
mv gapless_xdp.o.tmp gapless_xdp.o
sha256sum gapless_xdp.c gapless_xdp.o
