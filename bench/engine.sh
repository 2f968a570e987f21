#!/usr/bin/env bash
# bench/engine.sh [BUILD_DIR]: how fast `tfrun --check` runs the compiled
# programs, against the start of issue 28 (commit 1e7017b, built from `git
# archive` in /tmp: BASE_COMMIT, BASE_SRC, BASE_BUILD) and against the PyTorch
# peer (bench/torch_check.py) on the same weights, in the same run. Prints
# Markdown tables (bench/engine.md keeps the last ones); progress on stderr.
#
# One row per program: the adder's 1,000,000 cases, the 10-digit add_decimal
# (bench/add_decimal10.tfp), the Count over 1,025 positions
# (bench/count_long.tfp; cases from bench/engine_cases.py: ADD10_CASES, default
# 20,000, and COUNT_CASES, default 200), and every program
# of the library with its cases (tests/program_ref.py; PROGRAMS="a b" picks
# some). Both tfruns check the same cases on the same .tfw (this tree's tfc),
# 2 threads; "same" means equal pass/fail counts and FLOP per case. GFLOP/s
# are the engine's (FLOP it counts, tfrun --check), and "of sgemm" divides by
# OpenBLAS's sgemm at n = 1024 on the same threads, measured in the same run
# (bench/sgemm.c). PyTorch runs every TORCH_EVERY-th case (default 20):
# at most TORCH_MAX (2,000) of them; batched, KV cache for generating programs, one pass per length for the
# every-position ones; programs that print numbers have none.
#
# DETAIL=1 adds the adder's configurations (the table of earlier issues):
#   tfrun: -O and -O0 weights; batched (2 threads) with and without the KV
#          cache; one prompt at a time on one thread.
#   PyTorch 1.13 (Debian's python3-torch): batched, KV cache, 2 threads,
#          torch.no_grad, batch size 4096; dense weights as stored, and packed
#          to their non-zero blocks (--packed). The ratio uses the faster.
# Rows marked with a smaller case count run on every k-th case of the
# 1,000,000 (FULL=1: every tfrun row on all of them).
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
cmake --build "$build" -j"$(nproc)" --target tfc tfrun >/dev/null
full=${FULL:-0}
detail=${DETAIL:-0}   # 1: also the adder's configurations (-O0, no cache, one by one)
threads=2
torch_every=${TORCH_EVERY:-20} # the PyTorch peer runs on every k-th case,
torch_max=${TORCH_MAX:-2000}   # at most this many
base_commit=${BASE_COMMIT:-1e7017b} # the start of issue 28
base_src=${BASE_SRC:-/tmp/tf-engine-base-src}
base_build=${BASE_BUILD:-/tmp/tf-engine-base}
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

if [ "$detail" = 1 ]; then
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

fi

# ---- the start of issue 28 against this tree, program by program --------------
# The same weights (compiled by this tree's tfc) and cases through both tfruns,
# 2 threads, interleaved; the sgemm figure measured just before, same threads.
progress "sgemm at n = 1024 (bench/sgemm.c), $threads threads"
cc -O2 bench/sgemm.c $(pkg-config --cflags --libs openblas) -o "$tmp/sgemm"
sgemm=$(OPENBLAS_NUM_THREADS=$threads "$tmp/sgemm" 1024)
cmp_rows=()
check_line() { # tfrun output -> "passed failed cases/s flop gflops"
    local line
    line=$(grep ' passed, ' <<<"$1")
    awk '{ print $1, $3 }' <<<"$line" | tr '\n' ' '
    sed -E 's/.*: ([0-9]+) cases\/s.*/\1/' <<<"$line" | tr '\n' ' '
    grep '^engine:' <<<"$1" | awk '{ print $2, $6 }'
}
compare() { # label, weights, cases, torch (1: run the PyTorch peer on a sample)
    local label=$1 w=$2 cases=$3 torch=$4 n base new tr="" same
    n=$(wc -l <"$cases")
    progress "$label: $n cases, start and this tree"
    base=$(check_line "$("$base_build/tfrun" "$w" --check "$cases" --threads "$threads" || true)")
    new=$(check_line "$("$build/tfrun" "$w" --check "$cases" --threads "$threads" || true)")
    if [ "$torch" = 1 ]; then
        awk -v k="$torch_every" -v m="$torch_max" 'NR % k == 1 { print; if (++c >= m) exit }' \
            "$cases" >"$tmp/torch.tsv"
        progress "$label: PyTorch on $(wc -l <"$tmp/torch.tsv") of them"
        tr=$({ $PY bench/torch_check.py "$w" "$tmp/torch.tsv" --threads "$threads" 2>&1 || true; } |
             sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*: ([0-9]+) cases\/s.*/\3 \1 \2/p')
    fi
    read -r bp bf brate bflop bg <<<"$base"
    read -r np_ nf nrate nflop ng <<<"$new"
    same=no
    [ "$bp $bf" = "$np_ $nf" ] && [ "$bflop" = "$nflop" ] && same=yes
    local tcol="n/a"
    if [ -n "$tr" ]; then
        read -r trate tp tf <<<"$tr"
        tcol="$trate ($tp/$((tp + tf)) passed)"
        [ "$tf" = 0 ] || tcol="$tcol, FAILED"
    fi
    cmp_rows+=("$(awk -v l="$label" -v n="$n" -v p="$np_" -v f="$nf" -v s="$same" -v fl="$nflop" \
        -v br="$brate" -v nr="$nrate" -v bg="$bg" -v ng="$ng" -v sg="$sgemm" -v t="$tcol" 'BEGIN {
        printf "| %s | %d / %d | %s | %s | %s | %s | %.2f | %.2f | %.1f %% | %.1fx | %s |", l, p, n, s, fl,
            br, nr, bg, ng, 100 * ng / sg, nr / br, t }')")
}

progress "building the start, $base_commit, in $base_build"
# Extracted once per commit (a stamp names it), so that rebuilds are incremental.
if [ "$(cat "$base_src/.commit" 2>/dev/null)" != "$(git rev-parse "$base_commit")" ]; then
    rm -rf "$base_src" && mkdir -p "$base_src"
    git archive "$base_commit" | tar -x -C "$base_src"
    git rev-parse "$base_commit" >"$base_src/.commit"
    rm -rf "$base_build"
fi
cmake -S "$base_src" -B "$base_build" -DTF_NATIVE=ON >/dev/null
cmake --build "$base_build" -j"$(nproc)" --target tfrun >/dev/null
compare "adder (10^6 cases)" "$tmp/O.tfw" "$tmp/all.tsv" 1
"$build/tfc" bench/add_decimal10.tfp -o "$tmp/add10.tfw" 2>/dev/null
"$PY" bench/engine_cases.py add_decimal10 "${ADD10_CASES:-20000}" >"$tmp/add10.tsv"
compare "add_decimal, 10 digits" "$tmp/add10.tfw" "$tmp/add10.tsv" 1
# --no-prove: the validator does not prove a Count this long (docs/language.md,
# Count); the compiler's certificate and the cases below stand for it.
"$build/tfc" --no-prove bench/count_long.tfp -o "$tmp/count.tfw" 2>/dev/null
"$PY" bench/engine_cases.py count_long "${COUNT_CASES:-200}" >"$tmp/count.tsv"
compare "Count, 1,025 positions" "$tmp/count.tfw" "$tmp/count.tsv" 1
for name in ${PROGRAMS:-$("$PY" tests/program_ref.py --list)}; do
    "$build/tfc" "programs/$name.tfp" -o "$tmp/$name.tfw" 2>/dev/null
    "$PY" tests/program_ref.py "$name" >"$tmp/$name.tsv"
    compare "$name" "$tmp/$name.tfw" "$tmp/$name.tsv" 1
done

echo "Machine: $model, $cores cores at $mhz MHz: at most $peak GFLOP/s float32 ($per_cycle FLOP/cycle/core)."
# The BLAS and its kernel core: figures from different cores are not comparable.
echo "tfrun --version: $("$build/tfrun" --version 2>&1 | tail -n +2 | tr '\n' ' ')"
if [ "$detail" = 1 ]; then
    echo
    echo "| run | cases passed | seconds | cases/s | peak memory (MB) | FLOP per case | GFLOP/s |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    awk -v a="$o_rate" -v b="$torch_o" -v c="$o0_rate" -v d="$torch_o0" 'BEGIN {
        printf "tfrun / the faster PyTorch on the same -O weights: %.1fx; on the same -O0 weights: %.1fx.\n", a / b, c / d }'

fi
echo
echo "sgemm (OpenBLAS, n = 1024, $threads threads, core ${OPENBLAS_CORETYPE:-as detected}): $sgemm GFLOP/s."
echo "Start: $base_commit (built in $base_build); this tree: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- runtime || echo ' + changes')."
echo
echo "| program | cases passed | same counts and FLOP as the start | FLOP per case | start cases/s | cases/s | start GFLOP/s | GFLOP/s | of sgemm | speed-up | PyTorch cases/s |"
echo "| --- | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${cmp_rows[@]}"
