#!/usr/bin/env bash
# The whole test suite: a warnings-as-errors build and an ASan+UBSan build,
# each running every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

for variant in build:-DTF_SANITIZE=OFF build-asan:-DTF_SANITIZE=ON; do
    dir=${variant%%:*}
    flag=${variant#*:}
    echo "== $dir ($flag)"
    cmake -S . -B "$dir" -DTF_WERROR=ON "$flag" >/dev/null
    cmake --build "$dir" -j"$jobs"
    ctest --test-dir "$dir" --output-on-failure -j"$jobs"
done
