#!/usr/bin/env bash
# bench/suite_cpu.sh [DIR...]: what tools/test.sh's time is made of, in CPU
# seconds (user + system, every child process included), which a loaded
# machine changes little, where wall time says nothing: each build's
# compilation from clean and each test of it, one at a time, with the label
# filter tools/test.sh gives that build. DIR: build, build-asan
# (default both; each configured as tools/test.sh configures it).
# Prints one line per test, the slowest first, and per build the sum and
# that sum over 2 cores: the suite's wall time on an idle 2-core machine
# cannot be below it (tools/test.sh runs ctest -j2 and builds with -j2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- build build-asan
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cpu() { # cpu FILE COMMAND...: runs it, appends its CPU seconds to FILE
    local file=$1
    shift
    /usr/bin/time -f '%U %S' -o "$out/t" "$@" >/dev/null 2>&1 || echo "  (failed: $*)" >&2
    tail -1 "$out/t" | awk '{printf "%.1f\n", $1 + $2}' >>"$file"
}
total=0
for dir in "$@"; do
    case $dir in # tools/test.sh's configuration and filter for each build
        build) cc=cc sanitize=OFF sample=OFF filter=() ;;
        build-asan) cc=clang sanitize=ON sample=ON filter=(-LE peer) ;;
        *) echo "usage: bench/suite_cpu.sh [build|build-asan...]" >&2; exit 2 ;;
    esac
    tmpdir=$out/$dir
    CC=$cc cmake -S . -B "$tmpdir" -DTF_WERROR=ON -DTF_SANITIZE=$sanitize -DTF_SAMPLE_CHECKS=$sample >/dev/null
    : >"$out/b"
    cpu "$out/b" cmake --build "$tmpdir" -j2
    printf '%8.1f  %s: compilation\n' "$(cat "$out/b")" "$dir" | tee "$out/$dir.txt"
    ctest --test-dir "$tmpdir" -N "${filter[@]}" | sed -n 's/^ *Test *#[0-9]*: //p' >"$out/names"
    while read -r name; do
        : >"$out/c"
        cpu "$out/c" ctest --test-dir "$tmpdir" -R "^$name\$" "${filter[@]}" </dev/null # (mpirun reads stdin)
        printf '%8.1f  %s: %s\n' "$(cat "$out/c")" "$dir" "$name" | tee -a "$out/$dir.txt" >&2
    done <"$out/names"
    sort -rn "$out/$dir.txt"
    s=$(awk '{s += $1} END {printf "%.0f", s}' "$out/$dir.txt")
    echo "$dir: $s CPU seconds, at least $((s / 2)) s on 2 cores"
    total=$((total + s))
    rm -rf "$tmpdir"
done
echo "all: $total CPU seconds, at least $((total / 2)) s ($((total / 120)) min) on 2 cores"
