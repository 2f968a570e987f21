#!/usr/bin/env bash
# mpi.sh TFC TFRUN TFTRAIN: tfrun --check/--batch and tftrain under mpirun on
# 1, 2 and 3 ranks (docs/cluster.md) give what one process gives: the same
# counts, failures (in case order) and exit status, the same completions in
# the same order, the same trained bytes, also after --resume. Skipped (exit
# 77) when the build has no MPI (TF_MPIEXEC empty).
set -u
TFC=$1
TFRUN=$2
TFTRAIN=$3
MPIEXEC=${TF_MPIEXEC:-}
if [ -z "$MPIEXEC" ]; then
    echo "skipped: built without MPI"
    exit 77
fi
# Root may run mpirun only when told; more ranks than cores is the point here.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { "$MPIEXEC" --oversubscribe -n "$@"; }
# mpi_stdin IN OUT N ARGS...: mpi with IN on standard input, which mpirun
# forwards to rank 0, and standard output to OUT. Open MPI 4's mpirun itself sometimes crashes in its
# stdin forwarding (orte_iof_hnp_read_local_handler, open-mpi/ompi#7483:
# status 139, nothing of ours ran wrong); such a run is tried once more.
mpi_stdin() {
    local in=$1 out=$2 status
    shift 2
    mpi "$@" <"$in" >"$out"
    status=$?
    if [ $status -eq 139 ]; then
        echo "note: mpirun crashed forwarding standard input (open-mpi/ompi#7483); running again" >&2
        mpi "$@" <"$in" >"$out"
        status=$?
    fi
    return $status
}
. "$(dirname "$0")/lib.sh"
# The parts of a --check report that do not depend on how it ran: the
# failures and the counts (not the time, threads or ranks).
summary() { sed -e 's/ (\([0-9]*\) cases in .*/ (\1 cases)/' -e '/^engine:/d' "$1"; }

"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw"
check "tfc adder" $?

# 160,000 cases (five blocks of shard.c's 32,768 lines; 40,000 under the
# sanitizers), those with a = 123 made wrong, and one bad line; --threads 1
# so that three ranks fit.
max=400
[ -n "${TF_MPI_MAX:-}" ] && max=$TF_MPI_MAX
wrong='s/^\(0123+[0-9]*=\t\).*/\19999/'
$PY "$SRC/tools/adder_cases.py" --max $max | sed "$wrong" >"$tmp/cases.tsv"
bad=$(($(wc -l <"$tmp/cases.tsv") * 9 / 16)) # in rank 1's share of 2 and of 3
sed -i "${bad}s/.*/0001+0002x\t3000/" "$tmp/cases.tsv"
"$TFRUN" "$tmp/adder.tfw" --check "$tmp/cases.tsv" --threads 1 >"$tmp/ref.txt" 2>"$tmp/ref.err"
want=$?
[ $want -eq 1 ] && grep -q "^FAIL line" "$tmp/ref.txt" && grep -q ":$bad: " "$tmp/ref.err"
check "one process: failures, a bad line, exit 1" $?
summary "$tmp/ref.txt" >"$tmp/ref.sum"
for n in 1 2 3; do
    mpi $n "$TFRUN" "$tmp/adder.tfw" --check "$tmp/cases.tsv" --threads 1 >"$tmp/f$n.txt" 2>"$tmp/f$n.err"
    got=$?
    summary "$tmp/f$n.txt" | cmp -s - "$tmp/ref.sum" && [ $got -eq $want ] &&
        grep -q ":$bad: " "$tmp/f$n.err"
    check "--check FILE on $n ranks: the same failures, counts, bad line and exit status" $?
    mpi_stdin "$tmp/cases.tsv" "$tmp/p$n.txt" $n "$TFRUN" "$tmp/adder.tfw" --check - --threads 1 2>"$tmp/p$n.err"
    got=$?
    summary "$tmp/p$n.txt" | cmp -s - "$tmp/ref.sum" && [ $got -eq $want ] &&
        grep -q ":$bad: " "$tmp/p$n.err"
    st=$?
    check "--check - (a pipe) on $n ranks: the same failures, counts and exit status" $st
    [ $st -eq 0 ] || { # what differed (seen once on a loaded machine)
        echo "  exit $got (want $want); stderr:"
        head -5 "$tmp/p$n.err"
        summary "$tmp/p$n.txt" | diff "$tmp/ref.sum" - | head -5
    }
done
if [ $n -eq 3 ]; then
    [ "$(grep -c '^tfrun: ' "$tmp/f3.err")" -eq 1 ]
    check "the bad line is reported once, by the rank that read it" $?
fi

# Each rank its own generator's share (--shard-input): the same failures in
# case order (line numbers count in each rank's own input) and counts.
$PY "$SRC/tools/adder_cases.py" --max $max | sed "$wrong" |
    "$TFRUN" "$tmp/adder.tfw" --check - --threads 1 >"$tmp/g.txt"
summary "$tmp/g.txt" | sed 's/^FAIL line [0-9]*/FAIL/' >"$tmp/g.sum"
for n in 2 3; do
    mpi $n sh -c "$PY '$SRC/tools/adder_cases.py' --max $max --shard \$OMPI_COMM_WORLD_RANK/\$OMPI_COMM_WORLD_SIZE |
        sed '$wrong' | '$TFRUN' '$tmp/adder.tfw' --check - --shard-input --threads 1" >"$tmp/s$n.txt"
    got=$?
    summary "$tmp/s$n.txt" | sed 's/^FAIL line [0-9]*/FAIL/' | cmp -s - "$tmp/g.sum" && [ $got -eq 1 ]
    check "--shard-input with adder_cases.py --shard on $n ranks: one summary, the same failures" $?
done
mpi 2 sh -c "$PY '$SRC/tools/adder_cases.py' --max 100 --shard \$OMPI_COMM_WORLD_RANK/\$OMPI_COMM_WORLD_SIZE |
    '$TFRUN' '$tmp/adder.tfw' --check - --shard-input" >"$tmp/ok.txt"
got=$?
[ $got -eq 0 ] && grep -q "^10000 passed, 0 failed (.* x 2 ranks" "$tmp/ok.txt"
check "every case right: exit 0 on every rank, one summary (exit $got)" $?

# --batch: the completions in input order.
cut -f1 "$tmp/cases.tsv" | grep -v x >"$tmp/prompts.txt"
"$TFRUN" "$tmp/adder.tfw" --batch "$tmp/prompts.txt" >"$tmp/bref.txt"
for n in 2 3; do
    mpi $n "$TFRUN" "$tmp/adder.tfw" --batch "$tmp/prompts.txt" --threads 1 | cmp -s - "$tmp/bref.txt"
    check "--batch FILE on $n ranks: the same completions in order" $?
    mpi_stdin "$tmp/prompts.txt" "$tmp/bp$n.txt" $n "$TFRUN" "$tmp/adder.tfw" --batch - --threads 1 &&
        cmp -s "$tmp/bp$n.txt" "$tmp/bref.txt"
    check "--batch - on $n ranks: the same completions in order" $?
done

# tftrain: the same bytes on 1, 2, 3 ranks (and threads): binary_add (4
# chunks of 16), first_token (dropout: masks per chunk), secret_code
# (attention-score targets; batches of 3: one chunk, ranks with none).
train() { # train NAME PROGRAM ARGS...
    local name=$1 prog=$2
    shift 2
    "$TFTRAIN" "$P/$prog.tfp" "$@" --threads 1 --quiet -o "$tmp/$name.1.tfw" >"$tmp/$name.1.txt"
    check "tftrain $name" $?
    for n in 1 2 3; do
        mpi $n "$TFTRAIN" "$P/$prog.tfp" "$@" --threads 1 --quiet -o "$tmp/$name.r$n.tfw" >"$tmp/$name.r$n.txt"
        cmp -s "$tmp/$name.1.tfw" "$tmp/$name.r$n.tfw"
        check "tftrain $name on $n ranks: the same file" $?
        sed 's/; [0-9]* steps in .*//' "$tmp/$name.r$n.txt" | cmp -s - <(sed 's/; [0-9]* steps in .*//' "$tmp/$name.1.txt")
        check "tftrain $name on $n ranks: the same held-out accuracy and loss, printed once" $?
    done
    mpi 2 "$TFTRAIN" "$P/$prog.tfp" "$@" --threads 2 --quiet -o "$tmp/$name.r2t2.tfw" >/dev/null
    cmp -s "$tmp/$name.1.tfw" "$tmp/$name.r2t2.tfw"
    check "tftrain $name on 2 ranks x 2 threads: the same file" $?
}
ba=(--task binary-add:8 --train-size 2000 --heldout-size 200 --batch-size 64 --lr 3e-3)
train binary_add binary_add "${ba[@]}" --steps 40
train first_token first_token --task first-token:20 --train-size 500 --heldout-size 200 \
    --batch-size 32 --optimizer adam --steps 40
train secret_code secret_code --task secret-code --train-size 300 --heldout-size 200 \
    --batch-size 3 --steps 40

# Checkpoints and --resume under MPI: rank 0 alone writes; 20 steps on 2
# ranks, resumed for 20 more on 3, are the 40 steps of one process.
mpi 2 "$TFTRAIN" "$P/binary_add.tfp" "${ba[@]}" --steps 20 --checkpoint-every 10 --quiet \
    -o "$tmp/half.tfw" >/dev/null
check "tftrain --checkpoint-every on 2 ranks" $?
mpi 3 "$TFTRAIN" --resume "$tmp/half.tfw" "${ba[@]}" --steps 40 --quiet -o "$tmp/resumed.tfw" >/dev/null
# The tensors (the bytes after the header): the headers differ in made_by,
# which records that the resumed run started from a checkpoint.
data() { tail -c +$((9 + $(od -An -tu8 -N8 "$1" | tr -d ' '))) "$1"; }
cmp -s <(data "$tmp/binary_add.1.tfw") <(data "$tmp/resumed.tfw")
check "20 steps on 2 ranks + 20 resumed on 3 == 40 steps in one process, bit for bit" $?

# Interrupting training under mpirun (issue 24): SIGINT to rank 0 saved a
# checkpoint and then deadlocked, the other rank waiting in the next step.
# The ranks agree after each step whether one was interrupted: all stop
# together, rank 0 saves, every rank exits 130. Open MPI's mpirun turns
# Ctrl-C into SIGTERM (no checkpoint) but forwards SIGUSR1, which tftrain
# takes as SIGINT. The checkpoint resumes, in one process, to the bits of an
# uninterrupted run. (set -m: a background job that does not ignore SIGINT.)
interrupt() { # interrupt rank0|mpirun OUT: sets rc and k (the step saved)
    rm -f "$tmp/pid.0" "$tmp/sig.err"
    set -m
    "$MPIEXEC" --oversubscribe -n 2 sh -c 'echo $$ >"$1/pid.$OMPI_COMM_WORLD_RANK"; shift; exec "$@"' sh "$tmp" \
        "$TFTRAIN" "$P/binary_add.tfp" "${ba[@]}" --steps 100000000 --progress -o "$2" \
        >/dev/null 2>"$tmp/sig.err" &
    local pid=$!
    set +m
    for _ in $(seq 1 6000); do
        grep -q "ETA" "$tmp/sig.err" 2>/dev/null && [ -s "$tmp/pid.0" ] && break
        sleep 0.1
    done
    if [ "$1" = rank0 ]; then kill -INT "$(cat "$tmp/pid.0")"; else kill -USR1 "$pid"; fi
    # A deadlock would hang here: the test's timeout ends it.
    wait "$pid"
    rc=$?
    k=$(tr '\r' '\n' <"$tmp/sig.err" |
        sed -n 's/^tftrain: interrupted after step \([0-9]*\) of 100000000; saved a checkpoint to .*/\1/p')
}
for how in rank0 mpirun; do
    interrupt $how "$tmp/int_$how.tfw"
    [ $rc -eq 130 ] && [ -n "$k" ] && [ "$k" -gt 0 ] && [ -e "$tmp/int_$how.ckpt.tfw" ]
    check "SIGINT to rank 0 / SIGUSR1 to mpirun ($how): exit 130 after step $k, a checkpoint" $?
    "$TFTRAIN" --resume "$tmp/int_$how.tfw" "${ba[@]}" --steps $((k + 3)) --quiet -o "$tmp/int_r.tfw" >/dev/null &&
        "$TFTRAIN" "$P/binary_add.tfp" "${ba[@]}" --steps $((k + 3)) --quiet -o "$tmp/int_s.tfw" >/dev/null &&
        cmp -s <(data "$tmp/int_r.tfw") <(data "$tmp/int_s.tfw")
    check "... it resumes to the uninterrupted run's bits ($how)" $?
done

# Run-time checks and numbers (tests/mkgeneral.c's tie.tfw and frac.tfw) on 2
# ranks: the same lines, the same errors, the same exit status.
"${TF_BUILD_DIR:?}/mkgeneral" "$tmp"
printf '^aaa\n^ab\n^ccc\n^aab\n' >"$tmp/tie.txt"
"$TFRUN" "$tmp/tie.tfw" --batch "$tmp/tie.txt" >"$tmp/tie.1" 2>"$tmp/tie.1e"
s1=$?
mpi 2 "$TFRUN" "$tmp/tie.tfw" --batch "$tmp/tie.txt" --threads 1 >"$tmp/tie.2" 2>"$tmp/tie.2e"
s2=$?
# (mpiexec adds its own lines to stderr about the exit status; each rank
# reports the errors of its own share, and mpirun interleaves the ranks'
# stderr in no fixed order, so the errors are compared as sets)
[ $s1 -eq 1 ] && [ $s2 -eq 1 ] && cmp -s "$tmp/tie.1" "$tmp/tie.2" &&
    grep '^tfrun: ' "$tmp/tie.2e" | sort | cmp -s - <(sort "$tmp/tie.1e") && [ -s "$tmp/tie.1e" ]
check "run-time checks on 2 ranks: the same lines and errors, exit 1" $?
printf '^hello\t0 0 1/3 1/2 2/5\n^ll\t1 1\n^ab\tx\n' >"$tmp/frac.tsv"
mpi 2 "$TFRUN" "$tmp/frac.tfw" --check "$tmp/frac.tsv" --threads 1 >"$tmp/frac.2" 2>/dev/null
s2=$?
[ $s2 -eq 1 ] && grep -q '^2 passed, 0 failed, 1 bad lines' "$tmp/frac.2"
check "numbers: --check on 2 ranks" $?

finish
