#!/usr/bin/env bash
# mkdeep.sh TFC N OUT.tfw: a deep weight file for the many-layers
# reproducers of issue 24 (tests/hardening.sh): programs/adder.tfp with its
# `repeat 4` block repeated N times, 8 N + 4 layers whose weights are shared
# (about 290 bytes a layer: N = 900 is 7,204 layers in 2.2 MB, N = 9000
# 72,004 layers in 21 MB). The adder stays correct.
set -eu
TFC=$1 N=$2 OUT=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -q '^repeat 4 {' "$SRC/programs/adder.tfp"
sed "s/^repeat 4 {/repeat $N {/" "$SRC/programs/adder.tfp" >"$tmp/deep$N.tfp"
"$TFC" "$tmp/deep$N.tfp" --max-params 999999999 -o "$OUT"
