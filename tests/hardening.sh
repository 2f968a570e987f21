#!/usr/bin/env bash
# hardening.sh TFC TFRUN TFINFO TFTRAIN KILL_MID_WRITE_SO: the command-line reproducers of issues 13 and 24,
# each a specific one-line error and exit 1 or 2, in bounded time and memory
# (no timing is asserted: the inputs are sized so that the old quadratic or
# unbounded paths would not end in any sane time).
set -u
TFC=$1
TFRUN=$2
TFINFO=$3
TFTRAIN=$4
KILL_SO=$5
SRC=${TF_SOURCE_DIR:?TF_SOURCE_DIR must point at the source tree}
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
# AddressSanitizer reserves terabytes of shadow memory at start-up, so a tool
# built with it cannot start under ulimit -v: there the limits are left off
# (the refusals below come before any large allocation, limit or not) and
# the out-of-memory checks, which need the limit, run in the other builds.
asan=0
grep -qa __asan_init "$TFRUN" && asan=1
vlimit() { [ "$asan" = 1 ] || ulimit -v "$1"; }
check() { # check NAME STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL: $1 ${3:-}"; failed=$((failed + 1)); fi
}
says() { # says NAME FILE TEXT: FILE has TEXT
    grep -qF -- "$3" "$2"
    check "$1" $? "(got: $(head -c 300 "$2"))"
}

# tfrun /dev/zero grew to 18.8 GB: a device is refused at once.
"$TFRUN" /dev/zero "0+0=" >/dev/null 2>"$tmp/err"
check "tfrun /dev/zero exits 1" $(($? != 1))
says "tfrun /dev/zero names a device" "$tmp/err" "/dev/zero: not a regular file (a character device)"
"$TFINFO" "$tmp" >/dev/null 2>"$tmp/err"
check "tfinfo DIR exits 1" $(($? != 1))
says "tfinfo DIR names a directory" "$tmp/err" "not a regular file (a directory)"

# A 40 MB identifier: a header over the reader's 64 MiB; tfc says so and
# writes nothing.
"$PY" - "$tmp/big.tfp" <<'PYEOF'
import sys
n = "r" * (40 << 20)
open(sys.argv[1], "w").write('vocab "0123456789+= \\n";\nposition p;\ntoken out, %s;\n'
                             "find: FindAndStore('+') -> p;\nget: GetRelativeToken(p + 0) -> out;\n"
                             "output out;\n" % n)
PYEOF
"$TFC" --no-prove "$tmp/big.tfp" -o "$tmp/big.tfw" 2>"$tmp/err"
check "tfc with a 40 MB identifier exits 1" $(($? != 1))
says "tfc names the header limit" "$tmp/err" "over the readers' limit of 67108864 bytes"
[ ! -e "$tmp/big.tfw" ]
check "tfc wrote no file over the reader's limit" $?
rm -f "$tmp/big.tfp"

# Fuzzing: `output tokens at every position` compiled to a file without
# unembed.weight, which tfrun refuses. Whatever tfc does with it, it never
# writes a file tfrun refuses.
printf 'vocab "ab";\noutput tokens at every position;\n' >"$tmp/nounembed.tfp"
if "$TFC" "$tmp/nounembed.tfp" -o "$tmp/nounembed.tfw" 2>"$tmp/err"; then
    "$TFRUN" "$tmp/nounembed.tfw" "ab" >/dev/null 2>"$tmp/err"
    check "what tfc writes, tfrun reads" $? "$(cat "$tmp/err")"
else
    [ ! -e "$tmp/nounembed.tfw" ]
    check "tfc refused the program and wrote nothing" $? "$(cat "$tmp/err")"
fi

# A program that is not UTF-8 (found by fuzzing): the file would store it
# in JSON, which the readers refuse.
{ cat "$SRC/programs/xor.tfp"; printf '# caf\xe9\n'; } >"$tmp/latin1.tfp"
"$TFC" "$tmp/latin1.tfp" -o "$tmp/latin1.tfw" 2>"$tmp/err"
check "tfc on a Latin-1 program exits 1" $(($? != 1))
says "tfc says the program is not UTF-8" "$tmp/err" "the program is not valid UTF-8 text"

# A 30 MB string literal wrote gigabytes to stderr: messages and source
# lines are cut, and errors stop after 20 with a count.
"$PY" - "$tmp/str.tfp" <<'PYEOF'
import sys
s = "x" * (30 << 20)
with open(sys.argv[1], "w") as f:
    f.write('vocab "ab";\ntoken t;\n')
    for i in range(30):
        f.write('bad%d: Foo("%s") -> t;\n' % (i, s if i == 0 else s[:100000]))
PYEOF
"$TFC" "$tmp/str.tfp" -o "$tmp/str.tfw" 2>"$tmp/err"
check "tfc with a 30 MB string literal exits 1" $(($? != 1))
size=$(wc -c <"$tmp/err")
[ "$size" -lt 20000 ]
check "its diagnostics stay small" $? "($size bytes)"
says "and end with a count of the rest" "$tmp/err" "more errors not shown"
rm -f "$tmp/str.tfp"

# Random bytes: 4 MB of them (17 s before, quadratic in the errors).
head -c 4000000 /dev/urandom >"$tmp/rand.tfp"
"$TFC" "$tmp/rand.tfp" -o "$tmp/rand.tfw" 2>"$tmp/err"
check "tfc on random bytes exits 1" $(($? != 1))
size=$(wc -c <"$tmp/err")
[ "$size" -lt 20000 ]
check "its diagnostics stay small" $? "($size bytes)"

# Non-finite weights and a duplicated __metadata__ key (cJSON took the
# first, Python's json the last: the readers printed different sums): both
# readers refuse both.
"$TFC" "$SRC/programs/adder.tfp" -o "$tmp/adder.tfw" || exit 1
"$PY" - "$tmp/adder.tfw" "$tmp/nan.tfw" "$tmp/dup.tfw" <<'PYEOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
nan = bytearray(data)
nan[8 + n:8 + n + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(nan)
header = data[8:8 + n].rstrip(b" ")
header = header.replace(b'"__metadata__":{', b'"__metadata__":{"generate":"2",', 1)
header += b" " * ((8 - (8 + len(header)) % 8) % 8)
open(sys.argv[3], "wb").write(struct.pack("<Q", len(header)) + header + data[8 + n:])
PYEOF
for f in nan dup; do
    "$TFRUN" "$tmp/$f.tfw" "0999+0111=" >/dev/null 2>"$tmp/err"
    check "tfrun refuses $f.tfw with exit 1" $(($? != 1))
    "$PY" "$SRC/tools/tfw_torch.py" "$tmp/$f.tfw" "0999+0111=" >/dev/null 2>"$tmp/err.py"
    check "tfw_torch.py refuses $f.tfw with exit 1" $(($? != 1)) "$(cat "$tmp/err.py")"
done
"$TFRUN" "$tmp/nan.tfw" "0999+0111=" 2>&1 >/dev/null | grep -q "element 0 is NaN, not a finite number"
check "tfrun names the NaN" $?
"$TFRUN" "$tmp/dup.tfw" "0999+0111=" 2>&1 >/dev/null | grep -q "the key 'generate' appears twice"
check "tfrun names the repeated key" $?

# ---- issue 24 ----

# Finite weights whose products overflow float32: the engine stops with the
# layer and position (the NaN reached exp_vec, undefined behaviour, and the
# run printed tokens). scale.py IN OUT TENSOR FACTOR multiplies a tensor.
cat >"$tmp/scale.py" <<'PYEOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack("<Q", b[:8])
s, e = json.loads(b[8:8 + n])[sys.argv[3]]["data_offsets"]
k = (e - s) // 4
v = [x * float(sys.argv[4]) for x in struct.unpack("<%df" % k, b[8 + n + s:8 + n + e])]
b[8 + n + s:8 + n + e] = struct.pack("<%df" % k, *v)
open(sys.argv[2], "wb").write(b)
PYEOF
"$PY" "$tmp/scale.py" "$tmp/adder.tfw" "$tmp/huge.tfw" embed.token.weight 1e20
"$PY" "$tmp/scale.py" "$tmp/adder.tfw" "$tmp/hugeqk.tfw" shared.2.attn.key.weight 1e30
"$PY" "$tmp/scale.py" "$tmp/hugeqk.tfw" "$tmp/hugeqk.tfw" shared.0.attn.query.weight 1e30
printf '0999+0111=\t0111\n' >"$tmp/one.tsv"
for f in huge hugeqk; do
    for how in "" "--trace" "--check $tmp/one.tsv" "--report $tmp/r.html" "--dump $tmp/d.st"; do
        prompt=0999+0111=
        [[ "$how" == --check* ]] && prompt=
        # shellcheck disable=SC2086
        "$TFRUN" "$tmp/$f.tfw" $how $prompt >"$tmp/out" 2>"$tmp/err"
        check "tfrun $f.tfw $how exits 1" $(($? != 1))
        says "... naming the overflow" "$tmp/err" "overflows float32 at position 9: a value is infinite or NaN"
    done
done
says "an infinite score is named at its layer" "$tmp/err" "layer 1 (find_equal) overflows"
[ ! -e "$tmp/r.html" ] && [ ! -e "$tmp/d.st" ]
check "nothing written from an overflowed run" $?
# The adder trained whole with SGD (docs/training.md): the gradient overflows
# at step 3 and tftrain stops with a clear error, writing nothing.
"$TFRUN" "$tmp/adder.tfw" --batch - <<<$'0001+0002=\n0500+0499=\n0123+0456=\n9999+0001=' |
    sed 's/=/=\t/' >"$tmp/add.tsv"
"$TFTRAIN" --init "$tmp/adder.tfw" --data "$tmp/add.tsv" --heldout "$tmp/add.tsv" --steps 20 \
    --batch-size 4 --lr 1e-5 --optimizer sgd --quiet -o "$tmp/sgd.tfw" >"$tmp/out" 2>"$tmp/err"
check "tftrain --init adder.tfw --optimizer sgd exits 1" $(($? != 1))
says "... naming the overflow" "$tmp/err" "overflows float32 at step"
[ ! -e "$tmp/sgd.tfw" ]
check "... and writes nothing" $?

# A line longer than any prompt and answer is consumed, not stored: under
# ulimit -v 600000 a 300 MB line was taken as the end of the input ("1
# passed", exit 0), and a 1 GB line took 1 GB before "prompt too long".
{
    printf '0999+0111=\t0111\n'
    head -c 300000000 /dev/zero | tr '\0' 1
    printf '\t0\n0001+0002=\t3000\n'
} >"$tmp/long.tsv"
(vlimit 600000 && exec "$TFRUN" "$tmp/adder.tfw" --check "$tmp/long.tsv") >"$tmp/out" 2>"$tmp/err"
check "tfrun --check with a 300 MB line exits 1" $(($? != 1))
says "... naming the line and the limit" "$tmp/err" "long.tsv:2: line of 300000003 bytes, over the limit of 10496 for this model (100 positions)"
says "... and running the lines after it" "$tmp/out" "2 passed, 0 failed, 1 bad lines"
(vlimit 600000 && exec "$TFTRAIN" --init "$tmp/adder.tfw" --data "$tmp/long.tsv" --heldout "$tmp/one.tsv" \
    --steps 1 -o "$tmp/long.tfw") >"$tmp/out" 2>"$tmp/err"
check "tftrain --data with a 300 MB line exits 1" $(($? != 1))
says "... naming the line and the limit" "$tmp/err" "long.tsv:2: line of 300000003 bytes, over the limit of 10496"
rm -f "$tmp/long.tsv"
"$TFTRAIN" --init "$tmp/adder.tfw" --data "$tmp" --heldout "$tmp/one.tsv" --steps 1 -o "$tmp/dir.tfw" \
    >"$tmp/out" 2>"$tmp/err"
check "tftrain --data DIR exits 1" $(($? != 1))
says "... saying it is a directory (was: no examples)" "$tmp/err" "cannot read (line 1): Is a directory"

# A 50 MB string literal took 952 MB to reject (a location per byte): a
# literal over 64 KiB is refused before its bytes are decoded.
"$PY" - "$tmp/str50.tfp" <<'PYEOF'
import sys
open(sys.argv[1], "w").write('vocab "%s";\ntoken t;\noutput t;\n' % ("x" * (50 << 20)))
PYEOF
(vlimit 600000 && exec "$TFC" "$tmp/str50.tfp" -o "$tmp/str50.tfw") >/dev/null 2>"$tmp/err"
check "tfc with a 50 MB vocabulary string exits 1 under ulimit -v 600000" $(($? != 1))
says "... naming the limit" "$tmp/err" "str50.tfp:1:7: error: string literal of 52428802 bytes, over the limit of 65536"
# A program over the parser's 64 MiB is refused before it is read.
truncate -s 70000000 "$tmp/str50.tfp"
(vlimit 200000 && exec "$TFC" "$tmp/str50.tfp" -o "$tmp/str50.tfw") >/dev/null 2>"$tmp/err"
check "tfc with a 70 MB program exits 1" $(($? != 1))
says "... before reading it" "$tmp/err" "str50.tfp: 70000000 bytes, over the limit of 67108864 bytes"
rm -f "$tmp/str50.tfp"

# Many layers (tests/mkdeep.sh: the adder with its carry block repeated).
# A 21 MB file of 72,004 layers: tfinfo took 102 s (quadratic in layers),
# its report was 1.5 GB at 2.5 GB of memory, its dump 841 MB at 2.7 GB.
# tfinfo is linear; the report, the pictures, the comparison and the dump
# are refused before the run (runtime/inspect/inspect.h's limits). Each
# under 4 GiB (timeout: only a guard against a hang, status 124).
bash "$SRC/tests/mkdeep.sh" "$TFC" 9000 "$tmp/deep.tfw" 2>"$tmp/err"
check "mkdeep.sh compiles 72,004 layers" $? "$(cat "$tmp/err")"
(vlimit 4194304 && exec timeout 60 "$TFINFO" "$tmp/deep.tfw") >"$tmp/out" 2>"$tmp/err"
check "tfinfo deep.tfw exits 0" $? "($(cat "$tmp/err"))"
[ "$(grep -c ' copy_out ' "$tmp/out")" -eq 9000 ]
check "tfinfo lists them all" $?
for how in "--report $tmp/deep.html" "--svg $tmp/deep-svg" "--compare $tmp/deep.tfw --report $tmp/deep.html" \
    "--dump $tmp/deep.st"; do
    # shellcheck disable=SC2086
    (vlimit 4194304 && exec timeout 60 "$TFRUN" "$tmp/deep.tfw" $how "0999+0111=") >/dev/null 2>"$tmp/err"
    check "tfrun deep.tfw $how exits 1" $(($? != 1)) "($(cat "$tmp/err"))"
    says "... naming the limit" "$tmp/err" "values (72004 layers, 10 positions, d_model 80), over the limit of"
done
[ ! -e "$tmp/deep.html" ] && [ ! -e "$tmp/deep.st" ]
check "... writing nothing" $?
rm -f "$tmp/deep.tfw"
# tftrain --init of a 2.2 MB file of 7,204 layers took 4 GB (activations
# for 256 sequences whatever the batch, zeroed buffer by buffer). The
# activations are one block, sized first: within 4 GiB a small batch on one
# thread trains, and a batch that cannot fit is refused at once, naming
# what it needs. Not under AddressSanitizer (no ulimit -v there: the block
# would be had).
if [ "$asan" = 0 ]; then
    bash "$SRC/tests/mkdeep.sh" "$TFC" 900 "$tmp/deep.tfw" 2>"$tmp/err"
    check "mkdeep.sh compiles 7,204 layers" $? "$(cat "$tmp/err")"
    (vlimit 4194304 && exec timeout 60 "$TFTRAIN" --init "$tmp/deep.tfw" --data "$tmp/add.tsv" \
        --heldout "$tmp/add.tsv" --steps 1 --batch-size 4 --threads 1 --lr 1e-8 --quiet \
        -o "$tmp/deep1.tfw") >"$tmp/out" 2>"$tmp/err"
    check "tftrain --init deep.tfw --batch-size 4 --threads 1 within 4 GiB exits 0" $? "($(cat "$tmp/err"))"
    [ -s "$tmp/deep1.tfw" ]
    check "... and writes the model" $?
    # At the default lr one AdamW step moves every one of the 7,204 layers'
    # weights by about 1e-3: the held-out loss is NaN. That run used to exit 0
    # and write the model; it is refused, writing nothing.
    (vlimit 4194304 && exec timeout 60 "$TFTRAIN" --init "$tmp/deep.tfw" --data "$tmp/add.tsv" \
        --heldout "$tmp/add.tsv" --steps 1 --batch-size 4 --threads 1 --quiet -o "$tmp/deepnan.tfw") \
        >"$tmp/out" 2>"$tmp/err"
    check "tftrain --init deep.tfw at the default lr exits 1 (held-out loss NaN)" $(($? != 1)) "($(cat "$tmp/err"))"
    says "... saying so" "$tmp/err" "the held-out loss is not finite after step 1"
    [ ! -e "$tmp/deepnan.tfw" ] && [ ! -e "$tmp/deepnan.ckpt.tfw" ]
    check "... writing nothing" $?
    (vlimit 4194304 && exec timeout 60 "$TFTRAIN" --init "$tmp/deep.tfw" --data "$tmp/add.tsv" \
        --heldout "$tmp/add.tsv" --steps 1 --batch-size 64 --threads 8 --quiet -o "$tmp/deep8.tfw") \
        >"$tmp/out" 2>"$tmp/err"
    check "tftrain --init deep.tfw --threads 8 within 4 GiB exits 3 (out of memory)" $(($? != 3)) "($(cat "$tmp/err"))"
    grep -qE "out of memory for the trainer: 7204 layers' activations for [0-9]+ rows \(d_model 80\) need [0-9.]+ GiB" "$tmp/err"
    check "... naming the layers, rows and GiB" $? "($(cat "$tmp/err"))"
    [ ! -e "$tmp/deep8.tfw" ]
    check "... writing nothing" $?
    rm -f "$tmp/deep.tfw" "$tmp/deep1.tfw"
fi

# Out of memory hung tfrun and tftrain: OpenBLAS retries its 128 MiB work
# buffer for ever, and its exit handler waits for its own worker thread
# doing the same. Both refuse first (a hang runs into timeout: status 124).
if [ "$asan" = 0 ]; then
    (vlimit 150000 && exec timeout 60 "$TFRUN" "$tmp/adder.tfw" "0999+0111=") >/dev/null 2>"$tmp/err"
    check "tfrun under ulimit -v 150000 exits 3" $(($? != 3)) "($(cat "$tmp/err"))"
    says "... naming OpenBLAS's buffer" "$tmp/err" "out of memory: OpenBLAS needs a work buffer of 129 MiB"
    (vlimit 150000 && exec timeout 60 "$TFTRAIN" --init "$tmp/adder.tfw" --data "$tmp/add.tsv" \
        --heldout "$tmp/add.tsv" --steps 1 --quiet -o "$tmp/oom.tfw") >/dev/null 2>"$tmp/err"
    check "tftrain under ulimit -v 150000 exits 3" $(($? != 3)) "($(cat "$tmp/err"))"
    says "... naming OpenBLAS's buffer" "$tmp/err" "out of memory: OpenBLAS needs a work buffer of 129 MiB"
else
    echo "skip: the out-of-memory checks (ulimit -v) under AddressSanitizer"
fi

# Messages that misled. tfinfo on a --dump file blamed an "infinite element"
# (its masked attention scores).
"$TFRUN" "$tmp/adder.tfw" --dump "$tmp/acts.st" "0999+0111=" >/dev/null &&
    "$TFINFO" "$tmp/acts.st" >/dev/null 2>"$tmp/err"
check "tfinfo on an activations file exits 1" $(($? != 1))
says "... saying what the file is" "$tmp/err" "acts.st: an activations file (tfrun --dump), not a weight file"
# --teacher errors printed the path twice.
"$TFTRAIN" "$SRC/programs/histogram_student.tfp" --teacher "$tmp/none.tfw" -o "$tmp/st.tfw" 2>"$tmp/err"
check "tftrain --teacher MISSING exits 1" $(($? != 1))
[ "$(grep -o "none.tfw" "$tmp/err" | wc -l)" -eq 1 ]
check "... naming the path once" $? "($(cat "$tmp/err"))"
# A read-only mount was "read-only; remove it or make it writable" (a file
# its owner protected). Only where a user namespace can mount.
mkdir -p "$tmp/ro" && cp "$tmp/adder.tfw" "$tmp/ro/x.tfw"
if unshare -rm true 2>/dev/null; then
    unshare -rm sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec "$2" "$3" -o "$1/x.tfw"' \
        sh "$tmp/ro" "$TFC" "$SRC/programs/adder.tfp" >/dev/null 2>"$tmp/err"
    check "tfc -o on a read-only mount exits 2" $(($? != 2))
    says "... naming the file system" "$tmp/err" "x.tfw is on a read-only file system"
else
    echo "skipped: the read-only mount (no user namespaces here)"
fi

# --report, --svg, --compare pages and --write-data were written in place
# with fopen: a read-only file was overwritten, a FIFO hung. They go through
# the safe-output path now (runtime/model/outfile.h), checked before the run.
mkfifo "$tmp/fifo"
printf 'old' >"$tmp/ro.html" && chmod 444 "$tmp/ro.html"
mkdir -p "$tmp/svgs/a" && printf 'old' >"$tmp/svgs/resid_embedding.svg" && chmod 444 "$tmp/svgs/resid_embedding.svg"
printf 'old' >"$tmp/svgs/a/resid_embedding.svg" && chmod 444 "$tmp/svgs/a/resid_embedding.svg"
for how in "--report $tmp/ro.html" "--report $tmp/fifo" "--svg $tmp/svgs" "--compare $tmp/adder.tfw --report $tmp/fifo" \
    "--compare $tmp/adder.tfw --svg $tmp/svgs" "--dump $tmp/fifo" "--report $tmp/adder.tfw"; do
    # shellcheck disable=SC2086
    timeout 20 "$TFRUN" "$tmp/adder.tfw" $how "0999+0111=" >/dev/null 2>"$tmp/err"
    check "tfrun $how exits 2" $(($? != 2)) "($(cat "$tmp/err"))"
    grep -qE "is read-only; refusing|is not a regular file|is .*adder.tfw itself" "$tmp/err"
    check "... naming the target" $? "($(cat "$tmp/err"))"
done
[ "$(cat "$tmp/ro.html" "$tmp/svgs/resid_embedding.svg" "$tmp/svgs/a/resid_embedding.svg")" = oldoldold ]
check "the read-only files are untouched" $?
timeout 20 "$TFTRAIN" "$SRC/programs/xor.tfp" --task xor --steps 1 --quiet --write-data "$tmp/fifo" \
    -o "$tmp/x.tfw" >/dev/null 2>"$tmp/err"
check "tftrain --write-data FIFO exits 2" $(($? != 2))
says "... naming it" "$tmp/err" "cannot create directory '$tmp/fifo': Not a directory"
mkdir -p "$tmp/data" && printf 'old' >"$tmp/data/train.txt" && chmod 444 "$tmp/data/train.txt"
timeout 20 "$TFTRAIN" "$SRC/programs/xor.tfp" --task xor --steps 1 --quiet --write-data "$tmp/data" \
    -o "$tmp/x.tfw" >/dev/null 2>"$tmp/err"
check "tftrain --write-data over a read-only file exits 2" $(($? != 2))
says "... naming it" "$tmp/err" "train.txt is read-only; refusing to replace it"
"$TFRUN" "$tmp/adder.tfw" --report "$tmp/ok.html" "0999+0111=" >/dev/null && chmod 600 "$tmp/ok.html" &&
    "$TFRUN" "$tmp/adder.tfw" --report "$tmp/ok.html" "0001+0002=" >/dev/null &&
    [ "$(stat -c %a "$tmp/ok.html")" = 600 ] && grep -q "0001+0002=" "$tmp/ok.html" &&
    [ -z "$(ls "$tmp" | grep '\.tmp\.')" ]
check "a report replaces the old one, keeps its mode, leaves no temporary file" $?

# Temporary files of a tfc -o killed with SIGKILL stayed (TARGET.tmp.XXXXXX).
# The file is unnamed while it is written (O_TMPFILE): a writer killed
# half-way through (tests/kill_mid_write.c) leaves the old file and nothing
# else, or nothing where there was no file.
mkdir -p "$tmp/killed" && cp "$tmp/adder.tfw" "$tmp/killed/old.tfw"
for target in old new; do
    (LD_PRELOAD=$KILL_SO ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
        exec "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/killed/$target.tfw") >/dev/null 2>&1
    check "tfc -o $target.tfw is killed mid-write (SIGKILL: status 137)" $(($? != 137))
done
[ "$(ls -A "$tmp/killed")" = old.tfw ] && cmp -s "$tmp/adder.tfw" "$tmp/killed/old.tfw"
check "... leaving the old file whole and no temporary file" $? "($(ls -A "$tmp/killed" | tr '\n' ' '))"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
