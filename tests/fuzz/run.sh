#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS [HARNESS...]: builds the libFuzzer harnesses with
# clang (CMake option TF_FUZZ=ON, build dir $TF_FUZZ_BUILD, default build-fuzz
# at the top of the repository) and runs each (compile tfw batch dataset
# inspect train, or those named) for SECONDS, one after the other. Exits
# non-zero on any
# finding (a crash, a sanitizer report, a leak, an input over -timeout or
# -rss_limit_mb); the input is kept in $TF_FUZZ_BUILD/fuzz-work/HARNESS/.
#
# tests/fuzz/run.sh --smoke: each harness over its seed corpus, then 2,000
# runs; exits 77 (skipped) when clang cannot link libFuzzer. CTest runs it.
#
# Seeds: tests/fuzz/corpus/HARNESS (committed), and for the weight-file
# reader .tfw files compiled here, for the GPT-2 folder reader folders made
# here by tests/gpt2_ref.py (weights are never committed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${TF_FUZZ_BUILD:-$root/build-fuzz}
smoke=0
if [ "${1:-}" = --smoke ]; then
    smoke=1
    shift
elif ! [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    echo "usage: tests/fuzz/run.sh SECONDS [compile|tfw|batch|dataset|inspect|train|gpt2...] | --smoke" >&2
    exit 2
else
    seconds=$1
    shift
fi
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(compile tfw batch dataset inspect train gpt2)

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
cmake --build "$build" -j"$(nproc)" --target fuzz_targets tfc tfrun tftrain mkgeneral >/dev/null

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

# fuzz_train's seeds: a 4-byte little-endian length, a weight file, training
# data: two learned models with data of their task, and the compiled adder
# with its own answers (the --init recipe of docs/training.md).
seeds_train=$work/seeds-train
if [ ! -d "$seeds_train" ]; then
    t=$seeds_train.tmp
    mkdir -p "$t"
    for pt in xor:xor secret_code:secret-code; do
        p=${pt%%:*}
        "$build/tfc" "$root/programs/$p.tfp" -o "$t/$p.tfw"
        ASAN_OPTIONS=detect_leaks=0 "$build/tftrain" "$t/$p.tfw" --task "${pt#*:}" --train-size 6 \
            --heldout-size 2 --steps 1 --quiet --write-data "$t/$p.data" -o "$t/$p.out.tfw" >/dev/null
        cp "$t/$p.data/train.txt" "$t/$p.txt"
    done
    "$build/tfc" "$root/programs/adder.tfp" -o "$t/adder.tfw"
    printf '0001+0002=\n0999+0111=\n' | ASAN_OPTIONS=detect_leaks=0 "$build/tfrun" "$t/adder.tfw" --batch - |
        sed 's/=/=\t/' >"$t/adder.txt"
    for p in xor secret_code adder; do
        python3 -c 'import struct, sys
w = open(sys.argv[1], "rb").read()
sys.stdout.buffer.write(struct.pack("<I", len(w)) + w + open(sys.argv[2], "rb").read())' \
            "$t/$p.tfw" "$t/$p.txt" >"$t/$p.seed"
    done
    mkdir -p "$seeds_train"
    mv "$t"/*.seed "$seeds_train"/
    rm -rf "$t"
fi

# fuzz_gpt2's seeds: small GPT-2-style folders of tests/gpt2_ref.py (PyTorch,
# /usr/bin/python3), packed as fuzz_gpt2.c reads them (a flags byte, config.json
# and the vocabulary with 4-byte little-endian lengths, model.safetensors):
# tied with vocab.json and the transformer. prefix; untied, exact GELU, no
# prefix, a character vocabulary.
seeds_gpt2=$work/seeds-gpt2
if [ ! -d "$seeds_gpt2" ]; then
    t=$seeds_gpt2.tmp
    rm -rf "$t"
    mkdir -p "$t"
    ref=$root/tests/gpt2_ref.py
    /usr/bin/python3 "$ref" make "$t/tied" --layers 1 --d 8 --heads 2 --positions 8 --seed 1 &&
        /usr/bin/python3 "$ref" make "$t/chars" --layers 1 --d 8 --heads 1 --positions 6 --untied \
            --no-prefix --act gelu --vocab-mode chars --seed 2 || {
        echo "tests/gpt2_ref.py (/usr/bin/python3 with torch) could not make fuzz_gpt2's seeds" >&2
        exit 1
    }
    printf '0123456789+= \n' >"$t/chars/vocab.txt"
    for f in tied:0:vocab.json chars:1:vocab.txt; do
        IFS=: read -r name flags vocab <<<"$f"
        python3 -c 'import struct, sys
d, flags, vocab = sys.argv[1], int(sys.argv[2]), sys.argv[3]
part = lambda b: struct.pack("<I", len(b)) + b
read = lambda n: open(d + "/" + n, "rb").read()
sys.stdout.buffer.write(bytes([flags]) + part(read("config.json")) + part(read(vocab)) +
                        read("model.safetensors"))' "$t/$name" "$flags" "$vocab" >"$t/$name.seed"
    done
    mkdir -p "$seeds_gpt2"
    mv "$t"/*.seed "$seeds_gpt2"/
    rm -rf "$t"
fi

status=0
for h in "${harnesses[@]}"; do
    bin=$build/tests/fuzz/fuzz_$h
    [ -x "$bin" ] || { echo "no harness $h" >&2; exit 2; }
    seeds=$root/tests/fuzz/corpus/$h
    [ "$h" = tfw ] || [ "$h" = inspect ] && seeds=$seeds_tfw
    [ "$h" = train ] && seeds=$seeds_train
    more=()
    [ "$h" = gpt2 ] && seeds=$seeds_gpt2 more=("$root/tests/fuzz/corpus/gpt2")
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
    # programs and weight files of up to 64 KiB, lines of up to 4 KiB, a
    # weight file and its training data of up to 256 KiB (the adder's 138 KB).
    maxlen=65536
    case $h in batch | dataset) maxlen=4096 ;; train) maxlen=262144 ;; esac
    if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
        "$bin" "${limits[@]}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=$maxlen \
        -print_final_stats=1 -artifact_prefix="$work/$h/artifacts/" "$corpus" "$seeds" "${more[@]}" \
        >"$work/$h/log" 2>&1; then
        echo "FINDING in fuzz_$h: see $work/$h/log and $work/$h/artifacts/"
        grep -E 'ERROR|FINDING|SUMMARY|Test unit written' "$work/$h/log" | head -10
        status=1
    fi
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$work/$h/log" | sed "s/^/fuzz_$h /"
    [ "$smoke" = 1 ] && rm -rf "$corpus"
done
exit $status
