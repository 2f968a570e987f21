#!/usr/bin/env bash
# bench/engine_same.sh OLD_TFRUN NEW_TFRUN [TFC]: whether two tfruns print
# byte-identical `--batch` output (every token generated, every value
# printed) on every library program's cases (tests/program_ref.py), the
# adder's first ADDER_CASES (default 100,000) of its 1,000,000
# (tools/adder_cases.py), and bench/engine.sh's two long programs
# (bench/engine_cases.py: ADD10_CASES, default 20,000; COUNT_CASES, 50).
# Both run the same weights (TFC's, default build/tfc) and the same threads.
# Prints one line per program and exits 1 when any output differs: the
# check an engine optimization must pass besides the tests. An OLD that
# refuses a program's weights (a format it predates: one error line, a failing exit status) skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 tfc=${3:-build/tfc}
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
differ=0
same() { # label, weights, cases (prompt<TAB>expected)
    local label=$1 w=$2 cases=$3
    cut -f1 "$cases" >"$tmp/prompts"
    local rc=0
    "$old" "$w" --batch "$tmp/prompts" --threads 2 >"$tmp/old.out" 2>&1 || rc=$?
    "$new" "$w" --batch "$tmp/prompts" --threads 2 >"$tmp/new.out" 2>&1 || true
    if [ "$rc" != 0 ] && [ "$(wc -l <"$tmp/old.out")" -le 1 ]; then
        echo "$label: skipped, OLD cannot run these weights: $(cat "$tmp/old.out")"
    elif cmp -s "$tmp/old.out" "$tmp/new.out"; then
        echo "$label: $(wc -l <"$tmp/prompts") prompts, identical output"
    else
        echo "$label: $(wc -l <"$tmp/prompts") prompts, OUTPUT DIFFERS:"
        diff "$tmp/old.out" "$tmp/new.out" | head -5 || true
        differ=1
    fi
}
"$tfc" programs/adder.tfp -o "$tmp/adder.tfw"
"$PY" tools/adder_cases.py >"$tmp/all.tsv"
head -n "${ADDER_CASES:-100000}" "$tmp/all.tsv" >"$tmp/adder.tsv"
same adder "$tmp/adder.tfw" "$tmp/adder.tsv"
"$tfc" bench/add_decimal10.tfp -o "$tmp/add10.tfw" 2>/dev/null
"$PY" bench/engine_cases.py add_decimal10 "${ADD10_CASES:-20000}" >"$tmp/add10.tsv"
same add_decimal10 "$tmp/add10.tfw" "$tmp/add10.tsv"
"$tfc" --no-prove bench/count_long.tfp -o "$tmp/count.tfw" 2>/dev/null # beyond what the validator proves
"$PY" bench/engine_cases.py count_long "${COUNT_CASES:-50}" >"$tmp/count.tsv"
same count_long "$tmp/count.tfw" "$tmp/count.tsv"
for name in $("$PY" tests/program_ref.py --list); do
    "$tfc" "programs/$name.tfp" -o "$tmp/$name.tfw" 2>/dev/null
    "$PY" tests/program_ref.py "$name" >"$tmp/$name.tsv"
    same "$name" "$tmp/$name.tfw" "$tmp/$name.tsv"
done
exit "$differ"
