#!/usr/bin/env bash
# onnx.sh TFC TFRUN TFCONVERT TFTRAIN ENGINE_LOGITS: tfconvert's ONNX files in
# ONNX Runtime (tests/onnx_check.py, tests/onnx_run.js, tests/engine_logits.c).
# Every program of programs/ (the compiled ones on 5,000 cases each, spread
# evenly over tests/program_ref.py's; the seed adder at -O on every 71st of its 1,000,000
# cases and at -O0 on every 701st (strides prime to 10, so that every pair of
# last digits, carry or not, is in both samples; tests/adder_check.sh runs
# them all through tfrun, and these are the same graph); the learned
# ones as tfc initializes them) and the seed tasks' trained models (short runs
# of tftrain) on every case of their held-out sets (1,000 prompts, where the
# task has as many): python3-onnx's checker accepts each file, ONNX Runtime
# gives tfrun's output on every case, and its logits at every position are
# within 1e-5 of the engine's. TF_ONNX_CASES=N caps the cases per model at N,
# evenly spread (the sanitizer build).
#
# onnxruntime-node comes from npm, installed once into TF_ORT_DIR (default
# BUILD/onnxruntime-node; its package carries the CPU runtime, so its install
# script, which fetches GPU libraries, is not run). When npm cannot install it
# the test fails: it never skips.
set -u
. "$(dirname "$0")/lib.sh"
TFC=$1 TFRUN=$2 TFCONVERT=$3 TFTRAIN=$4 ENGINE=$5
need_torch
ORT=${TF_ORT_DIR:-${TF_BUILD_DIR:?}/onnxruntime-node}
ORT_VERSION=1.30.0
if [ ! -f "$ORT/node_modules/onnxruntime-node/package.json" ] ||
    ! grep -q "\"version\": \"$ORT_VERSION\"" "$ORT/node_modules/onnxruntime-node/package.json"; then
    mkdir -p "$ORT"
    npm install --prefix "$ORT" --no-audit --no-fund --ignore-scripts "onnxruntime-node@$ORT_VERSION" \
        >"$tmp/npm.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || tail -5 "$tmp/npm.txt"
    check "npm install onnxruntime-node@$ORT_VERSION into $ORT" $rc
    [ $rc -eq 0 ] || { finish; exit 1; }
fi
NODE_PATH=$ORT/node_modules node -e "require('onnxruntime-node')"
check "node loads onnxruntime-node" $?
"$PY" -c "import onnx, onnx.checker" 2>"$tmp/err"
check "python3-onnx ($(cat "$tmp/err"))" $?

# one NAME WEIGHTS PROMPTS [TOL]: the model through onnx_check.py.
one() {
    "$PY" "$SRC/tests/onnx_check.py" "$TFCONVERT" "$TFRUN" "$ENGINE" "$ORT" "$2" "$3" ${4:+"$4"} >"$tmp/one.txt" 2>&1
    local rc=$?
    sed 's/^/  /' "$tmp/one.txt" | tail -4
    check "$1 in ONNX Runtime" $rc
    basename "$2" .tfw | sed 's/\.trained$//; s/0$//' >>"$tmp/ran.txt"
}
MAX=${TF_ONNX_CASES:-0}
# The library's programs: 5,000 cases each, spread evenly over tests/program_ref.py's
# (10,403 to 65,536 a program; tests/programs.sh runs them all through tfrun).
PMAX=5000
[ "$MAX" -gt 0 ] && PMAX=$MAX
# prefix_sum's output is held as a number (docs/language.md), written by a
# staircase with a slope: the float32 sum of up to 16 digits, which each
# runtime adds in its own order, passes into the number y, and each logit
# (2 v y - v^2) moves by 2 v times y's difference: 1.7e-5 of the largest
# logit measured. The tokens are compared exactly and the proven logit
# margin is 0.873: the logits within 1e-4.
for name in $("$PY" "$SRC/tests/program_ref.py" --list); do
    "$TFC" "$P/$name.tfp" -o "$tmp/$name.tfw" 2>/dev/null || { check "tfc $name" 1; continue; }
    "$PY" "$SRC/tests/program_ref.py" "$name" --max "$PMAX" | cut -f1 >"$tmp/$name.txt"
    tol=
    [ "$name" = prefix_sum ] && tol=1e-4
    one "$name" "$tmp/$name.tfw" "$tmp/$name.txt" $tol
done
# The seed adder: -O on every 71st case, -O0 on every 701st (or every MAX-th).
"$PY" "$SRC/tools/adder_cases.py" | cut -f1 >"$tmp/all.txt"
if [ "$MAX" -gt 0 ]; then
    awk -v k=$((1000000 / MAX)) 'NR % k == 1' "$tmp/all.txt" >"$tmp/adder0.txt"
    cp "$tmp/adder0.txt" "$tmp/adder.txt"
else
    awk 'NR % 71 == 1' "$tmp/all.txt" >"$tmp/adder.txt"
    awk 'NR % 701 == 1' "$tmp/all.txt" >"$tmp/adder0.txt"
fi
# The seed's constructions add terms of up to 1e4 that cancel (FindAndStore's
# scores, DiffPos's 1000 (a.cos - b.cos)): float32 rounds such sums to about
# 1e4 x 2^-24 per term, in whatever order a BLAS kernel adds them, which
# reaches 1e-4 of the logits (OpenBLAS's Prescott kernels against ONNX
# Runtime's: 9.5e-5 at -O, 1.8e-4 at -O0; 1.5e-6 on Haswell's). The proven
# logit margin is 0.717, and the tokens are compared exactly: the logits
# within 1e-3.
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw" && one "adder (-O)" "$tmp/adder.tfw" "$tmp/adder.txt" 1e-3
"$TFC" -O0 "$P/adder.tfp" -o "$tmp/adder0.tfw" && one "adder (-O0)" "$tmp/adder0.tfw" "$tmp/adder0.txt" 1e-3
# Registers that share columns (tests/mkgeneral.c --split: the adder's
# `left` split where its second clear_lro, layer 12, zeroed it):
# tfw.registers carries "live" where a range is narrower than every state,
# as the .tfw does, and nowhere else; the graph computes what tfrun does.
"${TF_BUILD_DIR:?}/mkgeneral" --split "$tmp/adder.tfw" left 13 left2 "$tmp/split.tfw" &&
    "$TFCONVERT" "$tmp/split.tfw" -o "$tmp/split.onnx" && "$TFCONVERT" "$tmp/adder.tfw" -o "$tmp/adder.onnx" &&
    "$PY" -c "
import json, sys, onnx
def regs(path):
    meta = {p.key: p.value for p in onnx.load(path).metadata_props}
    return {r['name']: r for r in json.loads(meta['tfw.registers'])}
r = regs(sys.argv[1])
assert r['left']['live'] == [0, 12] and r['left2']['live'] == [13, 36], (r['left'], r['left2'])
assert (r['left']['offset'], r['left']['size']) == (r['left2']['offset'], r['left2']['size'])
assert [n for n in r if 'live' in r[n]] == ['left', 'left2'], r
assert all('live' not in g for g in regs(sys.argv[2]).values())" "$tmp/split.onnx" "$tmp/adder.onnx"
check "tfw.registers carries the live ranges of registers that share columns" $?
one "adder with registers that share columns" "$tmp/split.tfw" "$tmp/adder0.txt" 1e-3
# Learned models: as tfc initializes them, and trained on the seed tasks.
for name in $(grep -l "model {" "$P"/*.tfp | xargs -n1 basename | sed 's/\.tfp$//'); do
    "$TFC" "$P/$name.tfp" -o "$tmp/$name.tfw" 2>/dev/null || { check "tfc $name" 1; continue; }
done
HELDOUT=1000
[ "$MAX" -gt 0 ] && HELDOUT=$MAX
train() { # NAME TASK [TRAIN HELDOUT]: a short run, its held-out set as the prompts
    "$TFTRAIN" "$P/$1.tfp" --task "$2" --train-size "${3:-200}" --heldout-size "${4:-$HELDOUT}" --steps 30 --quiet \
        --write-data "$tmp/$1.data" -o "$tmp/$1.trained.tfw" >/dev/null 2>&1
    check "tftrain $1 --task $2" $?
    cut -f1 "$tmp/$1.data/heldout.txt" >"$tmp/$1.prompts"
    one "$1 (trained, $2)" "$tmp/$1.trained.tfw" "$tmp/$1.prompts"
    one "$1 (as tfc initializes it)" "$tmp/$1.tfw" "$tmp/$1.prompts"
}
train binary_add binary-add:3 48 16   # 64 sums in all
train binary_add_msb binary-add-msb:5 200 800  # 1,024 sums in all
train first_token first-token:20
train xor xor
train secret_code secret-code
train decimal_add decimal-add:3
# The distillation students (docs/training.md) as tfc initializes them, on
# their teachers' cases.
for name in histogram sort; do
    "$TFC" "$P/${name}_student.tfp" -o "$tmp/${name}_student.tfw" 2>/dev/null &&
        one "${name}_student (as tfc initializes it)" "$tmp/${name}_student.tfw" "$tmp/$name.txt"
done
# Every program of programs/ ran.
for f in "$P"/*.tfp; do
    grep -qx "$(basename "$f" .tfp)" "$tmp/ran.txt"
    check "$(basename "$f") in ONNX Runtime" $?
done
# A converted GPT-2 (tests/gpt2_ref.py's folder, 2 layers, untied, gelu_new).
"$PY" "$SRC/tests/gpt2_ref.py" make "$tmp/gpt2" --layers 2 --d 16 --heads 2 --untied --seed 9 &&
    "$TFCONVERT" "$tmp/gpt2" -o "$tmp/gpt2.tfw" --generate 6
check "a GPT-2-style folder converted" $?
printf '12+34=\n0\n999+1= 7\n5+5=\n' >"$tmp/gpt2.txt"
one "the converted GPT-2" "$tmp/gpt2.tfw" "$tmp/gpt2.txt"
finish
