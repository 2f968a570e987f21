#!/usr/bin/env bash
# bench/engine.sh [BUILD_DIR]: how fast `tfrun --check` verifies the compiled
# adder, against the best PyTorch peer we could write (bench/torch_check.py),
# on the same weights, in the same run. Prints a Markdown table (bench/README.md
# keeps the last one).
#
#   tfrun: -O and -O0 weights; batched (2 threads) with and without the KV
#          cache; one prompt at a time on one thread.
#   PyTorch 1.13 (Debian's python3-torch): batched, KV cache, 2 threads,
#          torch.no_grad, batch size 4096; dense weights as stored, and packed
#          to their non-zero blocks (--packed). The ratio uses the faster.
#
# Every row checks its cases against the true sums, so "all passed" in every
# row means every configuration printed the same tokens. Rows marked with a
# smaller case count run on every k-th case of the 1,000,000 (set FULL=1 to
# run every tfrun row on all of them: about 15 minutes more). PyTorch rows
# always run on a sample: they measure speed, not our outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-native}
# Benchmarks measure this CPU at its best: BUILD_DIR (default build-native)
# is configured with -DTF_NATIVE=ON (-march=native) and built here.
# Progress on stderr (the table goes to stdout): what runs, and since when.
start=$SECONDS
progress() { echo "engine.sh: $*, $((SECONDS - start)) s elapsed" >&2; }
progress "building $build (-DTF_NATIVE=ON)"
cmake -S . -B "$build" -DTF_NATIVE=ON >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
full=${FULL:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PY=${PYTHON:-/usr/bin/python3} # one that can import torch

"$build/tfc" programs/adder.tfp -o "$tmp/O.tfw"
"$build/tfc" -O0 programs/adder.tfp -o "$tmp/O0.tfw"
"$PY" tools/adder_cases.py >"$tmp/all.tsv"
sample() { # k: every k-th case
    local k=$1
    awk -v k="$k" 'NR % k == 1 || k == 1' "$tmp/all.tsv" >"$tmp/every$k.tsv"
    echo "$tmp/every$k.tsv"
}
every() { # k: every k-th case, or all of them when FULL=1 (tfrun rows)
    if [ "$full" = 1 ]; then echo "$tmp/all.tsv"; else sample "$1"; fi
}

# Machine: cores, clock, the most float32 FLOP/s they can do (AVX2 + FMA:
# two 8-wide fused multiply-adds per cycle per core = 32 FLOP/cycle).
cores=$(nproc)
mhz=$(awk -F: '/^cpu MHz/ { s += $2; n++ } END { printf "%.0f", s / n }' /proc/cpuinfo)
per_cycle=8
grep -q ' avx2 ' /proc/cpuinfo && grep -q ' fma ' /proc/cpuinfo && per_cycle=32
peak=$(awk -v c="$cores" -v m="$mhz" -v p="$per_cycle" 'BEGIN { printf "%.1f", c * m * 1e6 * p / 1e9 }')
model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)

rows=()
tfrun_rate=""
torch_rate=""
run_tfrun() { # label, weights, cases file, extra tfrun arguments...
    local label=$1 w=$2 cases=$3
    shift 3
    local out mem
    progress "tfrun $label: $(wc -l <"$cases") cases"
    out=$(/usr/bin/time -f "%M" -o "$tmp/mem" "$build/tfrun" "$w" --check "$cases" "$@")
    mem=$(awk '{ printf "%.0f", $1 / 1024 }' "$tmp/mem")
    local line flop gflops passed n secs rate
    line=$(grep ' passed, ' <<<"$out")
    passed=$(awk '{ print $1 }' <<<"$line")
    n=$(sed -E 's/.*\(([0-9]+) cases in.*/\1/' <<<"$line")
    secs=$(sed -E 's/.* cases in ([0-9.]+) s.*/\1/' <<<"$line")
    rate=$(sed -E 's/.*: ([0-9]+) cases\/s.*/\1/' <<<"$line")
    flop=$(grep '^engine:' <<<"$out" | awk '{ print $2 }')
    gflops=$(grep '^engine:' <<<"$out" | awk '{ print $6 }')
    rows+=("| tfrun $label | $passed / $n | $secs | $rate | $mem | $flop | $gflops |")
    LAST_RATE=$rate
}
run_torch() { # label, weights, cases file, extra arguments...
    local label=$1 w=$2 cases=$3
    shift 3
    local out mem line passed n secs rate
    progress "PyTorch $label: $(wc -l <"$cases") cases"
    out=$(/usr/bin/time -f "%M" -o "$tmp/mem" $PY bench/torch_check.py "$w" "$cases" --threads 2 "$@")
    mem=$(awk '{ printf "%.0f", $1 / 1024 }' "$tmp/mem")
    line=$(grep ' passed, ' <<<"$out")
    passed=$(awk '{ print $1 }' <<<"$line")
    n=$(sed -E 's/.*\(([0-9]+) cases in.*/\1/' <<<"$line")
    secs=$(sed -E 's/.* cases in ([0-9.]+) s.*/\1/' <<<"$line")
    rate=$(sed -E 's/.*: ([0-9]+) cases\/s.*/\1/' <<<"$line")
    rows+=("| PyTorch $label | $passed / $n | $secs | $rate | $mem | | |")
    LAST_RATE=$rate
}

run_tfrun "-O, batched, cache, 2 threads" "$tmp/O.tfw" "$tmp/all.tsv" --threads 2
o_rate=$LAST_RATE
run_tfrun "-O, batched, no cache, 2 threads" "$tmp/O.tfw" "$tmp/all.tsv" --threads 2 --no-cache
run_tfrun "-O, one by one, cache, 1 thread" "$tmp/O.tfw" "$(every 10)" --threads 1 --batch-size 1
run_tfrun "-O0, batched, cache, 2 threads" "$tmp/O0.tfw" "$(every 10)" --threads 2
o0_rate=$LAST_RATE
run_tfrun "-O0, batched, no cache, 2 threads" "$tmp/O0.tfw" "$(every 10)" --threads 2 --no-cache
run_tfrun "-O0, one by one, cache, 1 thread" "$tmp/O0.tfw" "$(every 100)" --threads 1 --batch-size 1
run_torch "-O, batched, KV cache, 2 threads" "$tmp/O.tfw" "$(sample 20)"
torch_o=$LAST_RATE
run_torch "-O, packed weights, batched, KV cache, 2 threads" "$tmp/O.tfw" "$(sample 20)" --packed
[ "$LAST_RATE" -gt "$torch_o" ] && torch_o=$LAST_RATE
run_torch "-O0, batched, KV cache, 2 threads" "$tmp/O0.tfw" "$(sample 100)"
torch_o0=$LAST_RATE
run_torch "-O0, packed weights, batched, KV cache, 2 threads" "$tmp/O0.tfw" "$(sample 100)" --packed
[ "$LAST_RATE" -gt "$torch_o0" ] && torch_o0=$LAST_RATE

echo "Machine: $model, $cores cores at $mhz MHz: at most $peak GFLOP/s float32 ($per_cycle FLOP/cycle/core)."
# The BLAS and its kernel core: figures from different cores are not comparable.
echo "tfrun --version: $("$build/tfrun" --version 2>&1 | tail -n +2 | tr '\n' ' ')"
echo
echo "| run | cases passed | seconds | cases/s | peak memory (MB) | FLOP per case | GFLOP/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
echo
awk -v a="$o_rate" -v b="$torch_o" -v c="$o0_rate" -v d="$torch_o0" 'BEGIN {
    printf "tfrun / the faster PyTorch on the same -O weights: %.1fx; on the same -O0 weights: %.1fx.\n", a / b, c / d }'
