#!/usr/bin/env bash
# tests/adder_check.sh TFC TFRUN: exhaustive verification of the compiled
# adder with `tfrun --check`: every pair a+b with a, b < $TF_CHECK_MAX
# (1000 by default: all 1,000,000 cases; the sanitizer build uses fewer).
#   - tfc -O weights, batched, KV cache, all threads: every case passes;
#   - the same without the KV cache: every case passes;
#   - -O0 (the seed's constructions), and one prompt at a time on one
#     thread: every 10th / 50th case passes (these run 10-20x slower; the
#     benchmark, bench/engine.sh, runs them on every case).
# Every case passing means every configuration printed the same tokens.
set -uo pipefail
TFC=$1
TFRUN=$2
ROOT=${TF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
MAX=${TF_CHECK_MAX:-1000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

"$TFC" "$ROOT/programs/adder.tfp" -o "$tmp/adder.tfw" || exit 1
"$TFC" -O0 "$ROOT/programs/adder.tfp" -o "$tmp/adder0.tfw" || exit 1
"${PYTHON:-python3}" "$ROOT/tools/adder_cases.py" --max "$MAX" >"$tmp/cases.tsv" || exit 1
n=$(wc -l <"$tmp/cases.tsv")
awk 'NR % 10 == 1' "$tmp/cases.tsv" >"$tmp/tenth.tsv"
awk 'NR % 50 == 1' "$tmp/cases.tsv" >"$tmp/fiftieth.tsv"
n10=$(wc -l <"$tmp/tenth.tsv")
n50=$(wc -l <"$tmp/fiftieth.tsv")

check() { # name, cases wanted, tfrun arguments...
    local name=$1 want=$2
    shift 2
    local out
    out=$("$TFRUN" "$@")
    local status=$?
    echo "$name: $out"
    if [ $status -ne 0 ] || ! grep -q "^$want passed, 0 failed (" <<<"$out"; then
        echo "FAIL: $name: want $want passed, 0 failed, exit 0 (got exit $status)"
        failed=$((failed + 1))
    fi
}

check "-O, batched, cache" "$n" "$tmp/adder.tfw" --check "$tmp/cases.tsv"
check "-O, no cache" "$n" "$tmp/adder.tfw" --check "$tmp/cases.tsv" --no-cache
check "-O0" "$n10" "$tmp/adder0.tfw" --check "$tmp/tenth.tsv"
check "-O, one by one" "$n50" "$tmp/adder.tfw" --check "$tmp/fiftieth.tsv" --batch-size 1 --threads 1
check "-O0, one by one, no cache" "$n50" "$tmp/adder0.tfw" --check "$tmp/fiftieth.tsv" \
    --batch-size 1 --threads 1 --no-cache

# A wrong expectation must fail: the check is not vacuous.
printf '0999+0111=\t0112\n' >"$tmp/wrong.tsv"
if "$TFRUN" "$tmp/adder.tfw" --check "$tmp/wrong.tsv" >/dev/null; then
    echo "FAIL: a wrong expected completion passed"
    failed=$((failed + 1))
fi
[ "$failed" -eq 0 ]
