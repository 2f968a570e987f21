#!/usr/bin/env bash
# The whole test suite, each time built with warnings as errors and run with
# CTest: the default compiler (gcc); the same with AddressSanitizer + UndefinedBehaviorSanitizer; clang
# (without sanitizers: a second compiler's warnings and code generation; its
# build runs the unit tests and the tests labelled second-compiler, the
# fuzzing harnesses' short smoke among them, tests/fuzz/). The
# exhaustive checks (the adder's million sums, the program library's cases,
# every ablation) run in full in the gcc build and on a sample in the other
# two (TF_SAMPLE_CHECKS: the same code paths, compiled otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

variants=(build:cc:OFF:OFF build-asan:cc:ON:ON)
if command -v clang >/dev/null; then
    variants+=(build-clang:clang:OFF:ON)
else
    echo "warning: clang not found (apt-get install clang): the clang build is skipped" >&2
fi
# One progress line per build and per stage: which build, the time since the
# suite started (the whole of it stays within 20 minutes on 2 cores).
start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
n=${#variants[@]} i=0
for variant in "${variants[@]}"; do
    IFS=: read -r dir cc sanitize sample <<<"$variant"
    i=$((i + 1))
    echo "== [$i/$n] $dir ($cc, TF_SANITIZE=$sanitize): configuring and building, $(elapsed) elapsed"
    CC=$cc cmake -S . -B "$dir" -DTF_WERROR=ON -DTF_SANITIZE="$sanitize" -DTF_SAMPLE_CHECKS="$sample" >/dev/null
    cmake --build "$dir" -j"$jobs"
    echo "== [$i/$n] $dir: built, running the tests, $(elapsed) elapsed"
    # The peer-labelled tests (the browser build, ONNX Runtime) run once, in
    # the first build: their outcome does not depend on the host compiler.
    # The clang build: the unit tests and those labelled second-compiler
    # (CMakeLists.txt says which and why).
    skip=()
    if [ "$i" -gt 1 ]; then skip=(-LE peer); fi
    if [ "$cc" = clang ]; then skip=(-L 'unit|second-compiler'); fi
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" "${skip[@]}"
    echo "== [$i/$n] $dir: passed, $(elapsed) elapsed"
done
echo "== all $n builds passed in $(elapsed)"
