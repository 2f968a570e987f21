#!/usr/bin/env bash
# bench/batch.sh [BUILD_DIR] [N]: prompts per second of `tfrun --batch` on the
# compiled adder (N prompts `abcd+efgh=` with both numbers below 1000,
# default 20,000), against one-prompt-per-process `tfrun` on 200 prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-20000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$build/tfc" programs/adder.tfp -o "$tmp/adder.tfw"
awk -v n="$n" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%04d+%04d=\n", int(rand() * 1000), int(rand() * 1000) }' >"$tmp/prompts.txt"

now() { date +%s.%N; }
for bs in 1 64 256 1024; do
    t0=$(now)
    "$build/tfrun" "$tmp/adder.tfw" --batch "$tmp/prompts.txt" --batch-size "$bs" >"$tmp/out.txt"
    t1=$(now)
    awk -v n="$n" -v t0="$t0" -v t1="$t1" -v bs="$bs" \
        'BEGIN { printf "tfrun --batch --batch-size %-5d %7d prompts in %6.2f s: %8.0f prompts/s\n", bs, n, t1 - t0, n / (t1 - t0) }'
done

head -200 "$tmp/prompts.txt" >"$tmp/few.txt"
t0=$(now)
while read -r p; do "$build/tfrun" "$tmp/adder.tfw" "$p" >/dev/null; done <"$tmp/few.txt"
t1=$(now)
awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "tfrun, one process per prompt   %7d prompts in %6.2f s: %8.0f prompts/s\n", 200, t1 - t0, 200 / (t1 - t0) }'
