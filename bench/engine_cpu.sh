#!/usr/bin/env bash
# bench/engine_cpu.sh [BUILD_DIR]: the engine's speed by CPU time, against the
# start of issue 28 (commit 1e7017b, built as bench/engine.sh builds it:
# BASE_COMMIT, BASE_SRC, BASE_BUILD), for issue 28's three targets: the
# adder's first ADDER_CASES (default 1,000,000) cases, the 10-digit
# add_decimal (ADD10_CASES, default 2,000; twice: the engine alone on this
# tree's --one-hot weights, which the start's tfrun reads, and end to end,
# each tree's tfc compiling the program for its own tfrun) and the Count over 1,025 positions (COUNT_CASES,
# default 20). On a machine shared with other jobs
# the wall clock measures the queue, not the engine; the CPU time a run
# uses (user + system, /usr/bin/time) is far steadier. Each tfrun --check
# runs on 1 thread, the start's and this tree's interleaved, REPEAT times
# (default 3), and the least CPU time of each counts. sgemm's GFLOP/s
# (bench/sgemm.c at n = 1024, 1 thread) is also by CPU time, in the same
# run. Prints a Markdown table (bench/engine.md keeps the last one);
# progress on stderr. Both tfruns must pass and fail the same cases
# ("same"), or the row says no. GFLOP/s are each engine's own count (tfrun
# --check's FLOP per case), which falls where an engine skips work: the
# speed-up is the ratio of CPU times. "of sgemm" is this tree's own count
# over sgemm's; "of sgemm, the start's FLOP" counts the work of a case as
# the start's engine does (its FLOP per case) over this tree's CPU time: the
# same work per case for both trees.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-native}
repeat=${REPEAT:-3}
base_commit=${BASE_COMMIT:-1e7017b}
base_src=${BASE_SRC:-/tmp/tf-engine-base-src}
base_build=${BASE_BUILD:-/tmp/tf-engine-base}
PY=${PYTHON:-/usr/bin/python3}
start=$SECONDS
progress() { echo "engine_cpu.sh: $*, $((SECONDS - start)) s elapsed" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

progress "building $build (-DTF_NATIVE=ON) and the start, $base_commit"
cmake -S . -B "$build" -DTF_NATIVE=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target tfc tfrun >/dev/null
if [ "$(cat "$base_src/.commit" 2>/dev/null)" != "$(git rev-parse "$base_commit")" ]; then
    rm -rf "$base_src" && mkdir -p "$base_src"
    git archive "$base_commit" | tar -x -C "$base_src"
    git rev-parse "$base_commit" >"$base_src/.commit"
    rm -rf "$base_build"
fi
cmake -S "$base_src" -B "$base_build" -DTF_NATIVE=ON >/dev/null
cmake --build "$base_build" -j"$(nproc)" --target tfrun tfc >/dev/null

cc -O2 bench/sgemm.c $(pkg-config --cflags --libs openblas) -o "$tmp/sgemm"
sgemm=$(OPENBLAS_NUM_THREADS=1 "$tmp/sgemm" 1024 cpu)

# cpu_run tfrun weights cases: prints "passed failed flop_per_case cpu_seconds"
cpu_run() {
    local out
    out=$(OPENBLAS_NUM_THREADS=1 /usr/bin/time -f "%U %S" -o "$tmp/time" \
          "$1" "$2" --check "$3" --threads 1 || true)
    printf '%s %s %s\n' "$(grep ' passed, ' <<<"$out" | awk '{ print $1, $3 }')" \
        "$(grep '^engine:' <<<"$out" | awk '{ print $2 }')" "$(awk '{ print $1 + $2 }' "$tmp/time")"
}
rows=()
compare() { # label, the start's weights, this tree's weights, cases
    local label=$1 wb=$2 w=$3 cases=$4 n bcpu=999999 ncpu=999999 b x
    n=$(wc -l <"$cases")
    for rep in $(seq "$repeat"); do
        progress "$label: $n cases, run $rep of $repeat (start, then this tree)"
        b=$(cpu_run "$base_build/tfrun" "$wb" "$cases")
        x=$(cpu_run "$build/tfrun" "$w" "$cases")
        bcpu=$(awk -v a="${b##* }" -v m="$bcpu" 'BEGIN { print a < m ? a : m }')
        ncpu=$(awk -v a="${x##* }" -v m="$ncpu" 'BEGIN { print a < m ? a : m }')
    done
    local same=no bp bf bflop np nf flop
    read -r bp bf bflop _ <<<"$b"
    read -r np nf flop _ <<<"$x"
    [ "$bp $bf" = "$np $nf" ] && same=yes
    rows+=("$(awk -v l="$label" -v n="$n" -v p="$np" -v s="$same" -v bfl="$bflop" -v fl="$flop" \
        -v bc="$bcpu" -v nc="$ncpu" -v sg="$sgemm" 'BEGIN {
        bg = bfl * n / bc / 1e9; ng = fl * n / nc / 1e9
        printf "| %s | %d / %d | %s | %d | %d | %.2f | %.2f | %.0f | %.0f | %.2f | %.2f | %.1f %% | %.1f %% | %.2fx |",
            l, p, n, s, bfl, fl, bc, nc, n / bc, n / nc, bg, ng, 100 * ng / sg,
            100 * bfl * n / nc / 1e9 / sg, bc / nc }')")
}

"$build/tfc" programs/adder.tfp -o "$tmp/adder.tfw"
"$PY" tools/adder_cases.py >"$tmp/all.tsv"
head -n "${ADDER_CASES:-1000000}" "$tmp/all.tsv" >"$tmp/adder.tsv"
compare "adder" "$tmp/adder.tfw" "$tmp/adder.tfw" "$tmp/adder.tsv"
# The engine alone runs weights both tfruns read: --one-hot (an output held
# as a number is decoded by a rule the start's tfrun does not know).
"$build/tfc" --one-hot bench/add_decimal10.tfp -o "$tmp/add10_oh.tfw" 2>/dev/null
"$build/tfc" bench/add_decimal10.tfp -o "$tmp/add10.tfw" 2>/dev/null
"$PY" bench/engine_cases.py add_decimal10 "${ADD10_CASES:-2000}" >"$tmp/add10.tsv"
compare "add_decimal, 10 digits (--one-hot)" "$tmp/add10_oh.tfw" "$tmp/add10_oh.tfw" "$tmp/add10.tsv"
# End to end: each tree's tfc compiles the program for its own tfrun.
"$base_build/tfc" bench/add_decimal10.tfp -o "$tmp/add10_start.tfw" 2>/dev/null
compare "add_decimal, 10 digits, each tree's tfc" "$tmp/add10_start.tfw" "$tmp/add10.tfw" "$tmp/add10.tsv"
"$build/tfc" --one-hot --no-prove bench/count_long.tfp -o "$tmp/count.tfw" 2>/dev/null
"$PY" bench/engine_cases.py count_long "${COUNT_CASES:-20}" >"$tmp/count.tsv"
compare "Count, 1,025 positions (--one-hot)" "$tmp/count.tfw" "$tmp/count.tfw" "$tmp/count.tsv"

echo "CPU: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo); tfrun --version:" \
     "$("$build/tfrun" --version 2>&1 | tail -n +2 | tr '\n' ' ')"
echo "sgemm (OpenBLAS, n = 1024, 1 thread, by CPU time): $sgemm GFLOP/s."
echo "Start: $base_commit (built in $base_build); this tree: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- runtime || echo ' + changes'). 1 thread; the least CPU time (user + system) of $repeat interleaved runs each."
echo
echo "| program | cases passed | same counts as the start | start FLOP per case | FLOP per case | start CPU s | CPU s | start cases/CPU-s | cases/CPU-s | start GFLOP/CPU-s | GFLOP/CPU-s | of sgemm | of sgemm, the start's FLOP | speed-up |"
echo "| --- | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
