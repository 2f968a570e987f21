#!/usr/bin/env bash
# The whole test suite, each time built with warnings as errors and run with
# CTest: the default compiler (gcc), everything; clang with AddressSanitizer +
# UndefinedBehaviorSanitizer (a second compiler's warnings and code generation,
# and the sanitizers, in one build), the suite on a sample: the exhaustive
# checks (the adder's million sums, the program library's cases, every
# ablation) run in full in the gcc build and on a sample here
# (TF_SAMPLE_CHECKS: the same code paths), and the fuzzing harnesses' smoke
# (tests/fuzz/) runs here, built in the same folder. Without clang the
# sanitizer build uses gcc and the fuzzing smoke is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

variants=(build:cc:OFF:OFF)
if command -v clang >/dev/null; then
    variants+=(build-asan:clang:ON:ON)
else
    echo "warning: clang not found (apt-get install clang): the sanitizer build uses gcc" >&2
    variants+=(build-asan:cc:ON:ON)
fi
# One progress line per build and per stage: which build, the time since the
# suite started (about 21 to 22 minutes on 2 cores: docs/architecture.md).
start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
n=${#variants[@]} i=0
for variant in "${variants[@]}"; do
    IFS=: read -r dir cc sanitize sample <<<"$variant"
    i=$((i + 1))
    echo "== [$i/$n] $dir ($cc, TF_SANITIZE=$sanitize): configuring and building, $(elapsed) elapsed"
    # A folder configured with another compiler (CMake keeps the first) is made anew.
    if [ -f "$dir/CMakeCache.txt" ] && ! grep -q "^CMAKE_C_COMPILER:[A-Z]*=.*$(command -v "$cc" | xargs basename)\$" "$dir/CMakeCache.txt"; then
        rm -rf "$dir"
    fi
    CC=$cc cmake -S . -B "$dir" -DTF_WERROR=ON -DTF_SANITIZE="$sanitize" -DTF_SAMPLE_CHECKS="$sample" >/dev/null
    cmake --build "$dir" -j"$jobs"
    echo "== [$i/$n] $dir: built, running the tests, $(elapsed) elapsed"
    # The peer-labelled tests (the browser build, ONNX Runtime, PyTorch's
    # forward and training beside ours) run once, in the first build: they
    # compare with an outside program, which the sanitizers do not check.
    skip=()
    if [ "$i" -gt 1 ]; then skip=(-LE peer); fi
    # One test more than the cores: some wait (a browser, mpirun, a signal
    # sent after a pause) while the others compute.
    ctest --test-dir "$dir" --output-on-failure -j"$((jobs + 1))" "${skip[@]}"
    echo "== [$i/$n] $dir: passed, $(elapsed) elapsed"
done
echo "== all $n builds passed in $(elapsed)"
