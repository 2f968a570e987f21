#!/usr/bin/env bash
# The whole test suite, each time built with warnings as errors and run with
# CTest: the default compiler (gcc); the same with AddressSanitizer + UndefinedBehaviorSanitizer; clang
# (without sanitizers: a second compiler's warnings and code generation; its
# build also runs the fuzzing harnesses' short smoke, tests/fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

variants=(build:cc:OFF build-asan:cc:ON)
if command -v clang >/dev/null; then
    variants+=(build-clang:clang:OFF)
else
    echo "warning: clang not found (apt-get install clang): the clang build is skipped" >&2
fi
for variant in "${variants[@]}"; do
    IFS=: read -r dir cc sanitize <<<"$variant"
    echo "== $dir ($cc, TF_SANITIZE=$sanitize)"
    CC=$cc cmake -S . -B "$dir" -DTF_WERROR=ON -DTF_SANITIZE="$sanitize" >/dev/null
    cmake --build "$dir" -j"$jobs"
    ctest --test-dir "$dir" --output-on-failure -j"$jobs"
done
