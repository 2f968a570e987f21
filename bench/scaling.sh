#!/usr/bin/env bash
# bench/scaling.sh [BUILD_DIR]: ranks (mpirun) and threads on this machine
# (bench/scaling.md). tfrun --check on the adder's 1,000,000 cases and
# tftrain on binary_add (bench/torch_binary_add.py's task and options), each
# on 1 and 2 ranks x 1 and 2 threads; prints one markdown table row per run:
# cases/s or examples/s, and the efficiency against 1 rank x 1 thread
# (rate / (rate_1x1 x ranks x threads)). Every tftrain run must write the
# same bytes as the first; the script stops if one does not.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-native}
# Like the other benchmarks, BUILD_DIR (default build-native) is configured
# with -DTF_NATIVE=ON (-march=native) and built here.
cmake -S . -B "$build" -DTF_NATIVE=ON >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The BLAS and its kernel core: figures from different cores are not comparable.
echo "tftrain --version: $("$build/tftrain" --version 2>&1 | tail -n +2 | tr '\n' ' ')"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One rank runs without mpirun; two with mpirun, not bound to one core each
# (mpirun's default for 2 ranks), so that a rank's threads can spread.
launch() { # launch RANKS COMMAND...
    local n=$1
    shift
    if [ "$n" -eq 1 ]; then "$@"; else mpirun -n "$n" --bind-to none --oversubscribe "$@"; fi
}
eff() { awk -v r="$1" -v b="$2" -v k="$3" 'BEGIN { printf "%.0f %%", 100 * r / (b * k) }'; }

"$build/tfc" programs/adder.tfp -o "$tmp/adder.tfw"
$PY tools/adder_cases.py >"$tmp/cases.tsv"
echo "| run | ranks | threads | cases/s or examples/s | efficiency |"
echo "| --- | ---: | ---: | ---: | ---: |"
base=
for n in 1 2; do
    for t in 1 2; do
        launch $n "$build/tfrun" "$tmp/adder.tfw" --check "$tmp/cases.tsv" --threads $t >"$tmp/c.txt"
        rate=$(sed -n 's/.* cases in [0-9.]* s: \([0-9]*\) cases\/s.*/\1/p' "$tmp/c.txt")
        [ -n "$base" ] || base=$rate
        echo "| tfrun --check, 1,000,000 adder cases | $n | $t | $rate | $(eff "$rate" "$base" $((n * t))) |"
    done
done

read -r -a task <<<"$($PY bench/torch_binary_add.py --task)"
read -r -a opts <<<"$($PY bench/torch_binary_add.py --options)"
base=
for n in 1 2; do
    for t in 1 2; do
        launch $n "$build/tftrain" programs/binary_add.tfp "${task[@]}" "${opts[@]}" --threads $t \
            --eval-every 100000000 --quiet -o "$tmp/m$n$t.tfw" >"$tmp/t.txt"
        rate=$(sed -n 's/.* steps in [0-9.]* s, \([0-9]*\) examples\/s.*/\1/p' "$tmp/t.txt")
        acc=$(sed -n 's/^held-out accuracy \([0-9.]*%\).*/\1/p' "$tmp/t.txt")
        [ -n "$base" ] || base=$rate
        cmp "$tmp/m11.tfw" "$tmp/m$n$t.tfw" # the same model, bit for bit
        echo "| tftrain binary_add (held-out $acc) | $n | $t | $rate | $(eff "$rate" "$base" $((n * t))) |"
    done
done
