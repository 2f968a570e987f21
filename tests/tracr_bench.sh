#!/usr/bin/env bash
# tests/tracr_bench.sh TFC TFRUN: bench/tracr's programs (Tracr's nine programs of issue 12
# at Tracr's vocabularies and lengths, each as NAME_lib.tfp and NAME_plain.tfp) against
# their Python references (tests/program_ref.py --list-tracr).
#
# Every .tfp in bench/tracr must have a reference and every reference a .tfp. For each:
# compile it (tfc must not warn, except the run-time check of a categorical Aggregate it
# cannot prove single-valued), check its header comment's examples, then every case with
# `tfrun --check` (about 160,000 in all; Tracr's lengths make most of them exhaustive), and
# 20 prompts through the PyTorch peer (tools/tfw_torch.py) when $PYTHON imports torch.
# $TF_PROGRAM_CASES caps the cases per program, spread evenly (the sanitizer build: 1,000).
# bench/compiled-size.sh reports these programs' sizes; this only says they are right.
set -uo pipefail
TFC=$1
TFRUN=$2
ROOT=${TF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
PY=${PYTHON:-python3}
REF=$ROOT/tests/program_ref.py
DIR=$ROOT/bench/tracr
MAX=${TF_PROGRAM_CASES:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

names=$("$PY" "$REF" --list-tracr) || { echo "FAIL: $REF --list-tracr"; exit 1; }
[ -n "$names" ] || { echo "FAIL: $REF --list-tracr lists nothing"; exit 1; }
for src in "$DIR"/*.tfp; do
    grep -qx "$(basename "$src" .tfp)" <<<"$names" || fail "$src has no reference in $REF"
done
torch=1
"$PY" -c 'import torch' 2>/dev/null || { echo "note: $PY cannot import torch: no PyTorch peer"; torch=0; }

checked=0
for name in $names; do
    src=$DIR/$name.tfp
    w=$tmp/$name.tfw
    [ -f "$src" ] || { fail "$name: no $src"; continue; }
    if ! "$TFC" "$src" -o "$w" >"$tmp/tfc.out" 2>&1; then
        fail "$name: tfc $src"
        cat "$tmp/tfc.out"
        continue
    fi
    grep -v -e 'warning: Aggregate: the positions this selection picks may hold different values' \
        -e '^ *[0-9]* | ' -e '^ *| ' -e '^hint: a selection that picks one position' \
        "$tmp/tfc.out" >"$tmp/tfc.other"
    if [ -s "$tmp/tfc.other" ]; then
        fail "$name: tfc printed something (a warning?)"
        cat "$tmp/tfc.out"
    fi

    "$PY" "$REF" "$name" --examples "$src" >"$tmp/examples.tsv" ||
        fail "$name: the header's examples disagree with the reference"
    "$TFRUN" "$w" --check "$tmp/examples.tsv" >"$tmp/out" || { fail "$name: header examples"; head -5 "$tmp/out"; }

    "$PY" "$REF" "$name" --max "$MAX" >"$tmp/cases.tsv" || { fail "$name: $REF $name"; continue; }
    n=$(wc -l <"$tmp/cases.tsv")
    out=$("$TFRUN" "$w" --check "$tmp/cases.tsv")
    status=$?
    if [ "$n" -eq 0 ] || [ $status -ne 0 ] || ! grep -q "^$n passed, 0 failed (" <<<"$out"; then
        fail "$name: want $n passed, 0 failed, exit 0 (got exit $status)"
        echo "$out" | head -12
        continue
    fi
    result="$n passed"
    checked=$((checked + n))

    if [ $torch -eq 1 ]; then
        "$PY" "$REF" "$name" --max 20 | cut -f1 >"$tmp/prompts.txt"
        "$TFRUN" "$w" --batch "$tmp/prompts.txt" >"$tmp/tfrun.out" 2>&1
        "$PY" "$ROOT/tools/tfw_torch.py" "$w" --batch "$tmp/prompts.txt" >"$tmp/torch.out" 2>&1
        if cmp -s "$tmp/tfrun.out" "$tmp/torch.out"; then
            result="$result, 20 in PyTorch"
        else
            fail "$name: tools/tfw_torch.py and tfrun --batch print different lines"
            diff "$tmp/tfrun.out" "$tmp/torch.out" | head -6
        fi
    fi
    printf '%-22s %s\n' "$name" "$result"
done

# The checks are not vacuous: a wrong count fails, and so does a number off by 1/72 (far
# above the error bound tfc proves for it).
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

echo "$checked cases checked, $failed failed"
[ "$failed" -eq 0 ]
