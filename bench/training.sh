#!/usr/bin/env bash
# bench/training.sh [BUILD_DIR] [TASK...]: our trainer against PyTorch on the
# seed tasks, in the same run. For each task (binary_add xor secret_code
# first_token by default): tfc writes the initial weights, tftrain generates
# the data (--write-data) and trains; bench/torch_<task>.py trains the same
# weights on the same data with the same optimizer and number of steps, with
# PyTorch on 1 and on 2 threads, on tftrain's batches (train_torch.py --order:
# the same examples in the same order; the model's seed, which tftrain uses
# when given none). Prints one table row per run (tftrain's: the median of
# REPEAT runs, default 3) (bench/training.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-native}
shift || true
repeat=${REPEAT:-3}
# Benchmarks measure this CPU at its best: BUILD_DIR (default build-native)
# is configured with -DTF_NATIVE=ON (-march=native) and built here.
cmake -S . -B "$build" -DTF_NATIVE=ON >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(binary_add xor secret_code first_token)
PY=${PYTHON:-/usr/bin/python3} # one that can import torch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The BLAS and its kernel core: figures from different cores are not comparable.
echo "tftrain --version: $("$build/tftrain" --version 2>&1 | tail -n +2 | tr '\n' ' ')"
echo "| task | trainer | held-out accuracy | wall time (s) | examples/s |"
echo "| --- | --- | ---: | ---: | ---: |"
for t in "${tasks[@]}"; do
    d=$tmp/$t
    mkdir -p "$d"
    read -r -a task <<<"$($PY bench/torch_$t.py --task)"
    read -r -a opts <<<"$($PY bench/torch_$t.py --options)"
    "$build/tfc" "programs/$t.tfp" -o "$d/init.tfw"
    "$build/tftrain" "programs/$t.tfp" "${task[@]}" --write-data "$d" --steps 0 --quiet -o "$d/unused.tfw" >/dev/null
    # tftrain's runs are short (0.1 s to a few seconds), so one run says more
    # about the machine's moment than about tftrain: REPEAT runs (default 3;
    # the same trained weights each time), the median's row.
    for rep in $(seq "$repeat"); do
        "$build/tftrain" "programs/$t.tfp" "${task[@]}" "${opts[@]}" --eval-every 100000000 --quiet \
            -o "$d/ours.tfw" >"$d/ours$rep.txt"
        sed -n 's/^held-out accuracy \([0-9.]*%\).*steps in \([0-9.]*\) s, \([0-9]*\) examples.*/\2 \1 \3/p' "$d/ours$rep.txt"
    done | sort -n | sed -n "$(( (repeat + 1) / 2 ))p" |
        while read -r wall acc eps; do echo "| $t | tftrain (C, $(nproc) threads, median of $repeat) | $acc | $wall | $eps |"; done
    grep -v '^held-out' "$d/ours1.txt" | grep -v '^ ' | sed 's/^/    /' >&2 || true
    seed=$(sed -n 's/^ *seed \([0-9][0-9]*\);.*/\1/p' "programs/$t.tfp" | head -n 1)
    : "${seed:?programs/$t.tfp names no seed: tftrain takes its batch order from it}"
    for th in 1 2; do
        $PY "bench/torch_$t.py" "$d/init.tfw" "$d" --threads "$th" --order "$seed" >"$d/torch$th.txt"
        sed -n 's/^pytorch held-out accuracy \([0-9.]*%\).*steps in \([0-9.]*\) s, \([0-9]*\) examples.*/\1 \2 \3/p' "$d/torch$th.txt" |
            while read -r acc wall eps; do echo "| $t | PyTorch 1.13, $th thread$([ "$th" = 1 ] || echo s) | $acc | $wall | $eps |"; done
        grep -v '^pytorch held-out' "$d/torch$th.txt" | sed 's/^/    /' >&2 || true
    done
done
