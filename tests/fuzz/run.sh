#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS [HARNESS...]: builds the libFuzzer harnesses with
# clang (CMake option TF_FUZZ=ON, build dir $TF_FUZZ_BUILD, default build-fuzz
# at the top of the repository) and runs each (compile tfw batch dataset, or
# those named) for SECONDS, one after the other. Exits non-zero on any
# finding (a crash, a sanitizer report, a leak, an input over -timeout or
# -rss_limit_mb); the input is kept in $TF_FUZZ_BUILD/fuzz-work/HARNESS/.
#
# tests/fuzz/run.sh --smoke: each harness over its seed corpus, then 2,000
# runs; exits 77 (skipped) when clang cannot link libFuzzer. CTest runs it.
#
# Seeds: tests/fuzz/corpus/HARNESS (committed), and for the weight-file
# reader .tfw files compiled here (weights are never committed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${TF_FUZZ_BUILD:-$root/build-fuzz}
smoke=0
if [ "${1:-}" = --smoke ]; then
    smoke=1
    shift
elif ! [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    echo "usage: tests/fuzz/run.sh SECONDS [compile|tfw|batch|dataset...] | --smoke" >&2
    exit 2
else
    seconds=$1
    shift
fi
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(compile tfw batch dataset)

# clang with libFuzzer?
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe/p.c"
if ! command -v clang >/dev/null || ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    echo "clang with libFuzzer not found (apt-get install clang): fuzzing skipped" >&2
    [ "$smoke" = 1 ] && exit 77
    exit 1
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang cmake -S "$root" -B "$build" -DTF_FUZZ=ON -DTF_WERROR=ON >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target fuzz_targets tfc mkgeneral >/dev/null

work=$build/fuzz-work
mkdir -p "$work"
# Weight-file seeds: small classifiers (learned layouts: norms, biases), the
# every-position and stop-token models of tests/mkgeneral.c.
seeds_tfw=$work/seeds-tfw
if [ ! -d "$seeds_tfw" ]; then
    mkdir -p "$seeds_tfw.tmp"
    for p in xor first_token secret_code; do
        "$build/tfc" "$root/programs/$p.tfp" -o "$seeds_tfw.tmp/$p.tfw"
    done
    "$build/mkgeneral" "$seeds_tfw.tmp"
    mv "$seeds_tfw.tmp" "$seeds_tfw"
fi

status=0
for h in "${harnesses[@]}"; do
    bin=$build/tests/fuzz/fuzz_$h
    [ -x "$bin" ] || { echo "no harness $h" >&2; exit 2; }
    seeds=$root/tests/fuzz/corpus/$h
    [ "$h" = tfw ] && seeds=$seeds_tfw
    dict=()
    [ -f "$root/tests/fuzz/$h.dict" ] && dict=(-dict="$root/tests/fuzz/$h.dict")
    mkdir -p "$work/$h/corpus" "$work/$h/artifacts"
    if [ "$smoke" = 1 ]; then
        limits=(-runs=2000 -seed=1)
        corpus=$(mktemp -d "$work/$h/smoke.XXXXXX")
    else
        limits=(-max_total_time="$seconds")
        corpus=$work/$h/corpus
    fi
    echo "== fuzz_$h ${limits[*]}"
    # -timeout: no input may take 10 s; -rss_limit_mb: nor 2 GB; -max_len:
    # programs and weight files of up to 64 KiB, lines of up to 4 KiB.
    maxlen=65536
    case $h in batch | dataset) maxlen=4096 ;; esac
    if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
        "$bin" "${limits[@]}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=$maxlen \
        -print_final_stats=1 -artifact_prefix="$work/$h/artifacts/" "$corpus" "$seeds" \
        >"$work/$h/log" 2>&1; then
        echo "FINDING in fuzz_$h: see $work/$h/log and $work/$h/artifacts/"
        grep -E 'ERROR|FINDING|SUMMARY|Test unit written' "$work/$h/log" | head -10
        status=1
    fi
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$work/$h/log" | sed "s/^/fuzz_$h /"
    [ "$smoke" = 1 ] && rm -rf "$corpus"
done
exit $status
