#!/usr/bin/env bash
# bench/checks.sh [BUILD_DIR [BASELINE_BUILD_DIR]]: what run-time checks cost
# (docs/weight-format.md, "Run-time checks"). Prints a Markdown table
# (bench/README.md keeps the last one).
#
#   - Every model with checks: tests/mkgeneral.c's tie.tfw, and each library
#     program (programs/*.tfp) whose compiled file has a `checks` key, runs
#     `tfrun --check` on cases that pass, once as compiled and once with its
#     `checks` removed from the header (the same weights otherwise: that is
#     how the checks are switched off, for measuring only; tfrun has no
#     option for it). A program's cases (tests/program_ref.py, at most
#     20,000) are repeated until a run takes about a CPU second.
#   - The adder, which has no checks, with this build's tfrun and, when
#     BASELINE_BUILD_DIR is given (a build of the commit before the checks,
#     with -DTF_NATIVE=ON as this one), with that one's, on the same weight
#     file: the checks must cost nothing where there are none.
#
# BUILD_DIR (default build-native) is configured and built here with
# -DTF_NATIVE=ON, as bench/engine.sh does.
#
# One thread (--threads 1), CPU time rather than wall time, and the best of
# REPS runs (default 3) per row, alternating the two sides, to be less at the
# mercy of other load; still, numbers on a busy machine vary. FLOP per case
# (tfrun's count) does not: equal counts mean the same arithmetic.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-native}
base=${2:-}
cmake -S . -B "$build" -DTF_NATIVE=ON >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
reps=${REPS:-3}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# once TFRUN WEIGHTS CASES: "C F": cases per CPU second (user + system time of
# the process: less at the mercy of other load than wall time) and FLOP per
# case (tfrun's count: the same on every run); every case must pass.
once() {
    local tfrun=$1 w=$2 cases=$3 out n cpu
    n=$(wc -l <"$cases")
    out=$(/usr/bin/time -f "%U %S" -o "$tmp/time" "$tfrun" "$w" --check "$cases" --threads 1) || {
        echo "bench/checks.sh: $w: not every case passed:" >&2
        echo "$out" | head -5 >&2
        exit 1
    }
    grep -q "^$n passed, 0 failed" <<<"$out" || { echo "$out" >&2; exit 1; }
    cpu=$(awk '{ print $1 + $2 }' "$tmp/time")
    awk -v n="$n" -v c="$cpu" 'BEGIN { printf "%.0f ", n / (c > 0 ? c : 0.01) }'
    sed -nE 's/^engine: ([0-9]+) FLOP per case.*/\1/p' <<<"$out"
}

# pair TFRUN_A WEIGHTS_A TFRUN_B WEIGHTS_B CASES: "A FA B FB", the best
# cases per CPU second of $reps runs of each, alternating (so that other load
# hits both alike), and their FLOP per case.
pair() {
    local a=0 b=0 fa fb r f
    for _ in $(seq "$reps"); do
        read -r r fa < <(once "$1" "$2" "$5")
        [ "$r" -gt "$a" ] && a=$r
        read -r r fb < <(once "$3" "$4" "$5")
        [ "$r" -gt "$b" ] && b=$r
    done
    echo "$a $fa $b $fb"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# strip IN OUT: the weight file without its `checks` key.
strip() {
    "$PY" - "$1" "$2" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
header["__metadata__"].pop("checks", None)
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * ((8 - (8 + len(text)) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
EOF
}

n_checks() { # WEIGHTS: how many checks its header lists
    "$PY" - "$1" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
print(len(json.loads(json.loads(data[8:8 + n])["__metadata__"].get("checks", "[]"))))
EOF
}

echo "| model | checks | cases | with checks (cases per CPU s) | without | without / with | FLOP per case with / without |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
row() { # name, weights, cases
    local name=$1 w=$2 cases=$3 with without
    strip "$w" "$tmp/stripped.tfw"
    read -r with fw without fo < <(pair "$build/tfrun" "$w" "$build/tfrun" "$tmp/stripped.tfw" "$cases")
    printf '| %s | %s | %s | %s | %s | %s | %s / %s |\n' "$name" "$(n_checks "$w")" \
        "$(wc -l <"$cases")" "$with" "$without" "$(ratio "$without" "$with")" "$fw" "$fo"
}

# repeat WEIGHTS CASES: the cases file repeated until one run takes about a
# CPU second (a few tenths of a second measure little more than the clock's
# 10 ms ticks and the start-up).
repeat() {
    local rate k
    read -r rate _ < <(once "$build/tfrun" "$1" "$2")
    k=$(awk -v r="$rate" -v n="$(wc -l <"$2")" 'BEGIN { k = int(r / n + 0.999); print k < 1 ? 1 : k }')
    for _ in $(seq "$k"); do cat "$2"; done >"$tmp/repeated.tsv"
    mv "$tmp/repeated.tsv" "$2"
}

# tie.tfw: inputs whose letters are one value at every position: c^k, and
# c^k d for k >= 3 (then c holds at least 0.75, d at most 0.25).
"$build/mkgeneral" "$tmp"
"$PY" - >"$tmp/tie.tsv" <<'EOF'
import random
rng = random.Random(11)
nxt = {"a": "b", "b": "c", "c": "a"}
for _ in range(400000):
    c = rng.choice("abc")
    k = rng.randint(1, 7)
    s = c * k
    if k >= 3 and k < 7 and rng.random() < 0.5:
        s += rng.choice([d for d in "abc" if d != c])
    print("^%s\t%s" % (s, nxt[c] * len(s)))
EOF
row "tie.tfw (mkgeneral)" "$tmp/tie.tfw" "$tmp/tie.tsv"

for name in $("$PY" tests/program_ref.py --list); do
    "$build/tfc" "programs/$name.tfp" -o "$tmp/$name.tfw" >/dev/null 2>&1 || continue
    [ "$(n_checks "$tmp/$name.tfw")" -gt 0 ] || continue
    "$PY" tests/program_ref.py "$name" --max 20000 >"$tmp/$name.tsv"
    repeat "$tmp/$name.tfw" "$tmp/$name.tsv"
    row "$name" "$tmp/$name.tfw" "$tmp/$name.tsv"
done

# The adder: no checks; this tfrun against the baseline's, the same file.
"$build/tfc" programs/adder.tfp -o "$tmp/adder.tfw"
"$PY" tools/adder_cases.py | awk 'NR % 5 == 1' >"$tmp/adder.tsv"
echo
echo "| adder (no checks) | cases | this build (cases per CPU s) | baseline | this / baseline | FLOP per case this / baseline |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
if [ -n "$base" ]; then
    read -r now fn before fb < <(pair "$build/tfrun" "$tmp/adder.tfw" "$base/tfrun" "$tmp/adder.tfw" "$tmp/adder.tsv")
    printf '| adder | %s | %s | %s | %s | %s / %s |\n' "$(wc -l <"$tmp/adder.tsv")" "$now" "$before" \
        "$(ratio "$now" "$before")" "$fn" "$fb"
else
    read -r now fn < <(once "$build/tfrun" "$tmp/adder.tfw" "$tmp/adder.tsv")
    printf '| adder | %s | %s | (no baseline given) | | %s |\n' "$(wc -l <"$tmp/adder.tsv")" "$now" "$fn"
fi
