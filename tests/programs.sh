#!/usr/bin/env bash
# tests/programs.sh [--tracr] TFC TFRUN [TFINFO]: the program library
# (programs/*.tfp, written with the general ops) against its Python references
# (tests/program_ref.py); with --tracr, bench/tracr's programs instead (Tracr's
# nine programs of issue 12 at Tracr's vocabularies and lengths, each as
# NAME_lib.tfp and NAME_plain.tfp; tests/program_ref.py --list-tracr), every
# one of which must have a reference, and every reference a program.
#
# For every program that tests/program_ref.py lists: compile it (tfc must not
# warn, except that a categorical Aggregate it cannot prove single-valued is
# checked at run time: the warning and its hint), check its header comment's examples and then all its cases with
# `tfrun --check` (every case must pass, and there must be some), and print its size (layers, d_model,
# parameters, from TFINFO, by default tfinfo next to TFRUN) and its case count.
# $TF_PROGRAM_CASES caps the cases per program, spread evenly over the list
# (the sanitizer build runs 200, without the PyTorch peer below); unset, every
# case runs.
#
# Then PyTorch as an independent peer (tools/tfw_torch.py, when Debian's
# python3-torch imports; every program in one process, tests/torch_many.py):
# on a sample of each program's prompts (100 for every-position programs, 20
# for generating ones, which it runs without a cache) it must print exactly
# what tfrun --batch prints, and exit with the same status.
set -uo pipefail
tracr=0
if [ "${1:-}" = --tracr ]; then
    tracr=1
    shift
fi
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
checked=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

if [ $tracr -eq 1 ]; then
    DIR=$ROOT/bench/tracr
    names=$("$PY" "$REF" --list-tracr) || { echo "FAIL: $REF --list-tracr"; exit 1; }
    [ -n "$names" ] || { echo "FAIL: $REF --list-tracr lists nothing"; exit 1; }
    for src in "$DIR"/*.tfp; do
        grep -qx "$(basename "$src" .tfp)" <<<"$names" || fail "$src has no reference in $REF"
    done
else
    DIR=$ROOT/programs
    names=$("$PY" "$REF" --list) || { echo "FAIL: $REF --list"; exit 1; }
fi
torch=1
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "note: $PY cannot import torch: the PyTorch peer is skipped (tests/torch.sh fails on it)"
    torch=0
fi
if [ "$MAX" -gt 0 ] && [ $torch -eq 1 ]; then # the sanitizer build's sample: our code, not PyTorch's
    echo "note: TF_PROGRAM_CASES=$MAX (a sample): the PyTorch peer runs in the full build"
    torch=0
fi
printf '%-22s %7s %7s %10s %12s %8s  %s\n' program layers d_model parameters "FLOP/case" cases result
for name in $names; do
    src=$DIR/$name.tfp
    w=$tmp/$name.tfw
    [ -f "$src" ] || { fail "$name: no $src"; continue; }
    if ! "$TFC" "$src" -o "$w" >"$tmp/tfc.out" 2>&1; then
        fail "$name: tfc $src"
        cat "$tmp/tfc.out"
        continue
    fi
    # Only the run-time-check warning (its three source lines and hint) may
    # appear, and where the validator is known not to cover a program (tfc's
    # proof: compiler/prove.h), its warning.
    unproven=()
    case $name in
    shuffle_dyck3_plain) unproven=(-e 'warning: the weights are written unproven: layer [0-9]*: not proven: its units read more than 2^22 combinations') ;;
    esac
    grep -v -e 'warning: Aggregate: the positions this selection picks may hold different values' \
        "${unproven[@]}" \
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
    if [ "$n" -eq 0 ] || [ $status -ne 0 ] || ! grep -q "^$n passed, 0 failed (" <<<"$out"; then
        result="FAILED"
        fail "$name: want $n passed, 0 failed, exit 0 (got exit $status)"
        echo "$out" | head -12
    else
        result="$n passed"
        checked=$((checked + n))
    fi

    # The PyTorch peer's prompts: k of the cases, spread evenly; it runs them
    # all after the loop, in one process (tests/torch_many.py).
    if [ $torch -eq 1 ]; then
        k=20
        grep -q '^output .* at every position' "$src" && k=100
        awk -F'\t' -v n="$n" -v k=$k 'n <= k || (NR - 1) % int(n / k) == 0 { print $1 }' \
            "$tmp/cases.tsv" | head -n $k >"$tmp/$name.prompts"
        "$TFRUN" "$w" --batch "$tmp/$name.prompts" >"$tmp/$name.tfrun" 2>&1
        echo "exit $?" >>"$tmp/$name.tfrun"
        printf '%s\t%s\t%s\n' "$w" "$tmp/$name.prompts" "$tmp/$name.torch" >>"$tmp/torch.jobs"
        result="$result, $(wc -l <"$tmp/$name.prompts") in PyTorch"
    fi
    # shellcheck disable=SC2086
    printf '%-22s %7s %7s %10s %12s %8s  %s\n' "$name" $size "${flop:-?}" "$n" "$result"
done

if [ $torch -eq 1 ] && [ -s "$tmp/torch.jobs" ]; then
    "$PY" "$ROOT/tests/torch_many.py" "$tmp/torch.jobs" || fail "tests/torch_many.py"
    while IFS=$'\t' read -r w _ out; do
        name=$(basename "$w" .tfw)
        if ! cmp -s "$tmp/$name.tfrun" "$out"; then
            fail "$name: tools/tfw_torch.py and tfrun --batch print different lines"
            diff "$tmp/$name.tfrun" "$out" | head -6
        fi
    done <"$tmp/torch.jobs"
    echo "PyTorch peer: $(wc -l <"$tmp/torch.jobs") programs compared with tfrun --batch"
fi

# The checks are not vacuous: one wrong expectation fails; at Tracr's
# settings a wrong count fails, and so does a number off by 1/72 (far above
# the error bound tfc proves for it).
if [ $tracr -eq 0 ]; then
    "$TFC" "$ROOT/programs/reverse.tfp" -o "$tmp/reverse.tfw" >/dev/null 2>&1
    printf '^abc\tcba\n^abc\tabc\n' >"$tmp/wrong.tsv"
    if "$TFRUN" "$tmp/reverse.tfw" --check "$tmp/wrong.tsv" >/dev/null; then
        fail "a wrong expected output passed"
    fi
else
    "$TFC" "$DIR/hist_plain.tfp" -o "$tmp/hist.tfw" >/dev/null 2>&1
    printf '^abac\t2121\n^abac\t2111\n' >"$tmp/wrong.tsv"
    out=$("$TFRUN" "$tmp/hist.tfw" --check "$tmp/wrong.tsv") # exits 1: a case failed
    grep -q '^1 passed, 1 failed' <<<"$out" ||
        fail "want the right count to pass and the wrong one to fail"
    "$TFC" "$DIR/pair_balance_plain.tfp" -o "$tmp/pb.tfw" >/dev/null 2>&1
    printf '^a()b(c))\t0 1/2 0 0 1/5 1/6 0 -1/8\n^a()b(c))\t0 1/2 0 0 1/5 1/6 0 -1/9\n' >"$tmp/wrong.tsv"
    out=$("$TFRUN" "$tmp/pb.tfw" --check "$tmp/wrong.tsv")
    grep -q '^1 passed, 1 failed' <<<"$out" ||
        fail "want the right numbers to pass and the wrong one to fail"
fi
echo "$checked cases checked, $failed failed"
[ "$failed" -eq 0 ]
