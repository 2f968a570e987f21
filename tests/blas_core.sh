#!/usr/bin/env bash
# blas_core.sh TFC TFRUN TFTRAIN TFINFO FAKE_CORENAME_SO: what --version says
# of the BLAS and its kernels, and the choice of a better core than OpenBLAS's
# generic fallback (runtime/engine/blas.h, cli_blas_prefer_core). The
# fallback is forced by fake_corename.so (LD_PRELOAD), which makes OpenBLAS
# name its core "Prescott" whenever OPENBLAS_CORETYPE is unset, as OpenBLAS
# 0.3.21 does on recent Intel Xeons.
set -u
TFC=$1 TFRUN=$2 TFTRAIN=$3 TFINFO=$4 FAKE=$5
. "$(dirname "$0")/lib.sh"
# The sanitizers' runtime must come first among the libraries; the stand-in
# is only a name.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0

# The core this CPU should get, from the kernel's view of its flags (the
# tools use __builtin_cpu_supports: two independent readings).
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
best=""
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl; then
    best=SkylakeX
elif has avx2 && has fma; then
    if grep -qm1 AuthenticAMD /proc/cpuinfo; then best=Zen; else best=Haswell; fi
fi
echo "this CPU's best OpenBLAS core: ${best:-none (no AVX2)}"

for tool in "$TFC" "$TFINFO"; do
    name=$(basename "$tool")
    [ "$("$tool" --version | sed -n 2p)" = "BLAS: none ($name multiplies no matrices)" ]
    check "$name --version: no BLAS" $?
done

for tool in "$TFRUN" "$TFTRAIN"; do
    name=$(basename "$tool")
    # As the user set it: respected, named, and warned about on a CPU that has better.
    v=$(OPENBLAS_CORETYPE=Prescott "$tool" --version 2>"$tmp/err")
    check "$name --version with OPENBLAS_CORETYPE=Prescott: exit 0" $?
    [[ "$(sed -n 2p <<<"$v")" == "BLAS: OpenBLAS "*" Prescott "* ]]
    check "$name --version names OpenBLAS and its configuration (got '$(sed -n 2p <<<"$v")')" $?
    [ "$(sed -n 3p <<<"$v")" = "kernels: Prescott (OPENBLAS_CORETYPE=Prescott)" ]
    check "$name: OPENBLAS_CORETYPE=Prescott is respected (got '$(sed -n 3p <<<"$v")')" $?
    if [ -n "$best" ]; then
        grep -q "^$name: warning: Prescott is OpenBLAS's generic fallback, but this CPU can run $best's kernels" "$tmp/err"
        check "$name warns of the fallback (got '$(cat "$tmp/err")')" $?
    else
        [ ! -s "$tmp/err" ]; check "$name: no warning on a CPU without AVX2" $?
    fi
    # Unset: OpenBLAS's own choice on this CPU is a fast core (or, without
    # AVX2, whatever it is, without a warning).
    v=$(env -u OPENBLAS_CORETYPE "$tool" --version 2>"$tmp/err" | sed -n 3p)
    [[ "$v" == "kernels: "*" (chosen by OpenBLAS for this CPU)" ]] && [ ! -s "$tmp/err" ]
    check "$name, OPENBLAS_CORETYPE unset: OpenBLAS's own core, no warning (got '$v' $(cat "$tmp/err"))" $?
    # Unset, and OpenBLAS falls back: the tool runs again on the best core.
    v=$(env -u OPENBLAS_CORETYPE LD_PRELOAD="$FAKE" "$tool" --version 2>"$tmp/err" | sed -n 3p)
    if [ -n "$best" ]; then
        [ "$v" = "kernels: $best (OPENBLAS_CORETYPE=$best, set by $name: OpenBLAS alone chose Prescott, its generic fallback, for this CPU)" ] &&
            [ ! -s "$tmp/err" ]
        check "$name, a fallback core and OPENBLAS_CORETYPE unset: re-run on $best (got '$v' $(cat "$tmp/err"))" $?
    else
        [ "$v" = "kernels: Prescott (chosen by OpenBLAS for this CPU)" ]
        check "$name, no AVX2: Prescott kept (got '$v')" $?
    fi
    # An empty variable is an unset one to OpenBLAS.
    v=$(OPENBLAS_CORETYPE= LD_PRELOAD="$FAKE" "$tool" --version 2>/dev/null | sed -n 3p)
    [[ -z "$best" || "$v" == "kernels: $best (OPENBLAS_CORETYPE=$best, set by"* ]]
    check "$name, OPENBLAS_CORETYPE empty: as unset (got '$v')" $?
done

# The re-executed tool does its job, with its arguments and standard input.
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw"
out=$(printf '0999+0111=\n0001+0002=\n' |
    env -u OPENBLAS_CORETYPE LD_PRELOAD="$FAKE" "$TFRUN" "$tmp/adder.tfw" --batch - 2>&1)
[ "$out" = "$(printf '0999+0111=0111\n0001+0002=3000')" ]
check "a re-executed tfrun reads its arguments and standard input (got '$out')" $?

# OpenBLAS starts its threads when it loads (one per further CPU) and spins
# them; tfrun --batch and --check multiply on their own threads, so they run
# again without OpenBLAS's (cli_blas_prefer_core): one thread in all with
# --threads 1, counted in /proc while it waits for its input.
threads_of() { # OPTION ENV... : tfrun --threads 1 OPTION FIFO's threads, while it waits
    local opt=$1
    shift
    threads_waiting env "$@" "$TFRUN" --threads 1 "$tmp/adder.tfw" "$opt@FIFO@"
}
threads_waiting() { # COMMAND...: its threads while it waits to open @FIFO@ (an argument)
    rm -f "$tmp/fifo"
    mkfifo "$tmp/fifo"
    "${@//@FIFO@/$tmp/fifo}" >/dev/null 2>&1 &
    local pid=$!
    # The open returns once tfrun opens its end: after it re-executed, with
    # OpenBLAS loaded (its threads are started before main).
    exec 7>"$tmp/fifo"
    local n
    n=$(ls "/proc/$pid/task" | wc -l)
    exec 7>&-
    wait "$pid"
    echo "$n"
}
for opt in --batch= --check=; do
    n=$(threads_of "$opt" -u OPENBLAS_NUM_THREADS)
    [ "$n" = 1 ]
    check "tfrun ${opt%=}, OPENBLAS_NUM_THREADS unset: no OpenBLAS threads (threads: $n)" $?
done
# tftrain too (it multiplies on its own workers): waiting for its training data.
"$TFC" "$P/xor.tfp" -o "$tmp/xor.tfw"
printf '0abcd1\t1\n' >"$tmp/heldout.txt"
n=$(threads_waiting env -u OPENBLAS_NUM_THREADS "$TFTRAIN" "$tmp/xor.tfw" --data @FIFO@ \
    --heldout "$tmp/heldout.txt" --steps 1 --threads 1 -o "$tmp/xor_out.tfw")
[ "$n" = 1 ]
check "tftrain, OPENBLAS_NUM_THREADS unset: no OpenBLAS threads (threads: $n)" $?
if [ "$(nproc)" -ge 2 ]; then
    # The count sees OpenBLAS's threads where there are some (the user's setting wins).
    n=$(threads_of --batch= OPENBLAS_NUM_THREADS=2)
    [ "$n" = 2 ]
    check "tfrun --batch, OPENBLAS_NUM_THREADS=2: OpenBLAS's second thread (threads: $n)" $?
fi
finish
