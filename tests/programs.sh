#!/usr/bin/env bash
# tests/programs.sh TFC TFRUN [TFINFO]: the program library (programs/*.tfp,
# written with the general ops) against its Python references
# (tests/program_ref.py).
#
# For every program that tests/program_ref.py lists: compile it (tfc must not
# warn, except that a categorical Aggregate it cannot prove single-valued is
# checked at run time: the warning and its hint), check its header comment's examples and then all its cases with
# `tfrun --check` (every case must pass), and print its size (layers, d_model,
# parameters, from TFINFO, by default tfinfo next to TFRUN) and its case count.
# $TF_PROGRAM_CASES caps the cases per program, spread evenly over the list
# (the sanitizer build runs 1,000); unset, every case runs.
#
# Then PyTorch as an independent peer (tools/tfw_torch.py, when Debian's
# python3-torch imports): on a sample of each program's prompts (100 for
# every-position programs, 20 for generating ones, which it runs without a
# cache) it must print exactly what tfrun --batch prints.
set -uo pipefail
TFC=$1
TFRUN=$2
TFINFO=${3:-$(dirname "$TFRUN")/tfinfo}
ROOT=${TF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
PY=${PYTHON:-python3} # CMake passes one that can import torch (CMakeLists.txt)
REF=$ROOT/tests/program_ref.py
MAX=${TF_PROGRAM_CASES:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

names=$("$PY" "$REF" --list) || { echo "FAIL: $REF --list"; exit 1; }
torch=1
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "note: $PY cannot import torch: the PyTorch peer is skipped (tests/torch.sh fails on it)"
    torch=0
fi
printf '%-18s %7s %7s %10s %12s %8s  %s\n' program layers d_model parameters "FLOP/case" cases result
for name in $names; do
    src=$ROOT/programs/$name.tfp
    w=$tmp/$name.tfw
    if ! "$TFC" "$src" -o "$w" >"$tmp/tfc.out" 2>&1; then
        fail "$name: tfc $src"
        cat "$tmp/tfc.out"
        continue
    fi
    # Only the run-time-check warning (its three source lines and hint) may appear.
    grep -v -e 'warning: Aggregate: the positions this selection picks may hold different values' \
        -e '^ *[0-9]* | ' -e '^ *| ' -e '^hint: a selection that picks one position' \
        "$tmp/tfc.out" >"$tmp/tfc.other"
    if [ -s "$tmp/tfc.other" ]; then
        fail "$name: tfc printed something (a warning?)"
        cat "$tmp/tfc.out"
    fi
    # "FILE: tfw format 1, d_model 199, 6 layers, 151134 parameters"
    size=$("$TFINFO" "$w" | head -1 | sed -n 's/.*d_model \([0-9]*\), \([0-9]*\) layers, \([0-9]*\) parameters.*/\2 \1 \3/p')
    [ -n "$size" ] || size="? ? ?"

    if ! "$PY" "$REF" "$name" --examples "$src" >"$tmp/examples.tsv"; then
        fail "$name: the header's examples disagree with the reference"
    fi
    out=$("$TFRUN" "$w" --check "$tmp/examples.tsv")
    if [ $? -ne 0 ]; then
        fail "$name: header examples"
        echo "$out" | head -5
    fi

    if [ "$MAX" -gt 0 ]; then
        "$PY" "$REF" "$name" --max "$MAX" >"$tmp/cases.tsv"
    else
        "$PY" "$REF" "$name" >"$tmp/cases.tsv"
    fi || { fail "$name: $REF $name"; continue; }
    n=$(wc -l <"$tmp/cases.tsv")
    out=$("$TFRUN" "$w" --check "$tmp/cases.tsv")
    status=$?
    flop=$(sed -n 's/^engine: \([0-9]*\) FLOP per case.*/\1/p' <<<"$out")
    if [ $status -ne 0 ] || ! grep -q "^$n passed, 0 failed (" <<<"$out"; then
        result="FAILED"
        fail "$name: want $n passed, 0 failed, exit 0 (got exit $status)"
        echo "$out" | head -12
    else
        result="$n passed"
    fi

    if [ $torch -eq 1 ]; then
        k=20
        grep -q '^output .* at every position' "$src" && k=100
        "$PY" "$REF" "$name" --max $k | cut -f1 >"$tmp/prompts.txt"
        "$TFRUN" "$w" --batch "$tmp/prompts.txt" >"$tmp/tfrun.out" 2>&1
        "$PY" "$ROOT/tools/tfw_torch.py" "$w" --batch "$tmp/prompts.txt" >"$tmp/torch.out" 2>&1
        if cmp -s "$tmp/tfrun.out" "$tmp/torch.out"; then
            result="$result, $k in PyTorch"
        else
            result="$result, PyTorch DIFFERS"
            fail "$name: tools/tfw_torch.py and tfrun --batch print different lines"
            diff "$tmp/tfrun.out" "$tmp/torch.out" | head -6
        fi
    fi
    # shellcheck disable=SC2086
    printf '%-18s %7s %7s %10s %12s %8s  %s\n' "$name" $size "${flop:-?}" "$n" "$result"
done

# The check is not vacuous: one wrong expectation fails.
"$TFC" "$ROOT/programs/reverse.tfp" -o "$tmp/reverse.tfw" >/dev/null 2>&1
printf '^abc\tcba\n^abc\tabc\n' >"$tmp/wrong.tsv"
if "$TFRUN" "$tmp/reverse.tfw" --check "$tmp/wrong.tsv" >/dev/null; then
    fail "a wrong expected output passed"
fi
echo "$failed failed"
[ "$failed" -eq 0 ]
