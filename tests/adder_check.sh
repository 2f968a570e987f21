#!/usr/bin/env bash
# tests/adder_check.sh TFC TFRUN: exhaustive verification of the compiled
# adder with `tfrun --check`: every pair a+b with a, b < $TF_CHECK_MAX
# (1000 by default: all 1,000,000 cases; the sanitizer build uses fewer).
#   - tfc -O weights, batched, KV cache, all threads: every case passes;
#   - the same without the KV cache, and -O0 (the seed's constructions):
#     every 10th case passes; one prompt at a time on one thread: every
#     50th (these run 10-20x slower; the
#     benchmark, bench/engine.sh, runs them on every case);
#   - -O with spaces before the prompt, '=' at every position 9..99;
#   - -O0 the same up to its last position (36 rows), and one space more
#     refused as too long.
# Every case passing means every configuration printed the same tokens.
set -uo pipefail
TFC=$1
TFRUN=$2
TFINFO=$(dirname "$TFC")/tfinfo
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
check "-O, no cache" "$n10" "$tmp/adder.tfw" --check "$tmp/tenth.tsv" --no-cache
check "-O0" "$n10" "$tmp/adder0.tfw" --check "$tmp/tenth.tsv"
check "-O, one by one" "$n50" "$tmp/adder.tfw" --check "$tmp/fiftieth.tsv" --batch-size 1 --threads 1
check "-O0, one by one, no cache" "$n50" "$tmp/adder0.tfw" --check "$tmp/fiftieth.tsv" \
    --batch-size 1 --threads 1 --no-cache

# The prompt anywhere in the position encoding (issue 22): k spaces, then
# two random 4-digit numbers, so that '=' sits at every position 9..99; the
# sum's digits that fit in the 100 positions (the last one generated is not
# fed back) must be the sum's. 41 spaces put '=' at 50, where the seed's
# DiffPos at -O once printed 0101 for 0999+0111.
RANDOM=22
spaced_failed=0
for k in $(seq 0 90); do
    a=$((RANDOM % 10000)) b=$((RANDOM % 10000))
    [ "$k" -eq 41 ] && a=999 b=111
    s=$(printf '%04d' $(((a + b) % 10000)) | rev)
    n=$((4 < 91 - k ? 4 : 91 - k))
    prompt=$(printf "%${k}s%04d+%04d=" '' "$a" "$b")
    [ "$k" -eq 0 ] && prompt=$(printf '%04d+%04d=' "$a" "$b")
    got=$("$TFRUN" "$tmp/adder.tfw" -n "$n" "$prompt")
    if [ "$got" != "$prompt${s:0:n}" ]; then
        echo "FAIL: -O, '=' at position $((k + 9)): '$got', want '$prompt${s:0:n}'"
        spaced_failed=$((spaced_failed + 1))
    fi
done
echo "-O, '=' at every position 9..99 after spaces: $spaced_failed failed of 91"
[ "$spaced_failed" -eq 0 ] || failed=$((failed + 1))

# -O0: the position encoding has as many rows as the seed's FindAndStore
# holds for (compiler/lower.c, seed_positions: 36 at period 100), so every
# prompt tfrun accepts is in it: k spaces put '=' at 9..32, all 4 digits
# right; one more space is refused in one line, exit 1, before any output.
rows=$("$TFINFO" "$tmp/adder0.tfw" | sed -nE 's/.*max_len ([0-9]+) .*/\1/p')
RANDOM=23
spaced_failed=0
last=$((rows - 13)) # prompt k + 10 tokens, 4 generated, the last not fed back
for k in $(seq 0 "$last"); do
    a=$((RANDOM % 10000)) b=$((RANDOM % 10000))
    s=$(printf '%04d' $(((a + b) % 10000)) | rev)
    prompt=$(printf "%${k}s%04d+%04d=" '' "$a" "$b")
    [ "$k" -eq 0 ] && prompt=$(printf '%04d+%04d=' "$a" "$b")
    got=$("$TFRUN" "$tmp/adder0.tfw" "$prompt")
    if [ "$got" != "$prompt$s" ]; then
        echo "FAIL: -O0, '=' at position $((k + 9)): '$got', want '$prompt$s'"
        spaced_failed=$((spaced_failed + 1))
    fi
done
echo "-O0 ($rows positions), '=' at every position 9..$((last + 9)) after spaces: $spaced_failed failed of $((last + 1))"
[ "$rows" = 36 ] && [ "$spaced_failed" -eq 0 ] || failed=$((failed + 1))
long=$(printf "%$((last + 1))s0999+0111=" '')
out=$("$TFRUN" "$tmp/adder0.tfw" "$long" 2>"$tmp/err")
status=$?
if [ $status -ne 1 ] || [ -n "$out" ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
    ! grep -qF "tfrun: prompt: $((last + 11)) prompt tokens plus 4 to generate exceed the $rows positions of the position encoding" "$tmp/err"; then
    echo "FAIL: -O0, a prompt one token too long: exit $status, '$out', $(cat "$tmp/err")"
    failed=$((failed + 1))
fi

# A wrong expectation must fail: the check is not vacuous.
printf '0999+0111=\t0112\n' >"$tmp/wrong.tsv"
if "$TFRUN" "$tmp/adder.tfw" --check "$tmp/wrong.tsv" >/dev/null; then
    echo "FAIL: a wrong expected completion passed"
    failed=$((failed + 1))
fi
[ "$failed" -eq 0 ]
