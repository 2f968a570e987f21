#!/usr/bin/env bash
# exit_codes.sh TFC TFRUN TFINFO TFTRAIN TFCONVERT TFPROVE: one exit status per kind
# of failure, the same in every tool (runtime/tools/cli.h): 1 bad input, 2
# usage, 3 out of memory or an output that could not be written; and every
# tool's --help says so in the same words.
set -u
TFC=$1
TFRUN=$2
TFINFO=$3
TFTRAIN=$4
TFCONVERT=$5
TFPROVE=$6
. "$(dirname "$0")/lib.sh"

# status NAME WANT COMMAND...: the command exits with WANT (stderr kept in $tmp/err).
status() {
    local name=$1 want=$2
    shift 2
    "$@" >/dev/null 2>"$tmp/err"
    local got=$?
    [ "$got" -eq "$want" ]
    check "$name: exit $want (got $got: $(head -c 300 "$tmp/err"))" $?
}

W=$tmp/xor.tfw
"$TFC" "$P/xor.tfp" -o "$W" || { echo "FAIL: tfc cannot compile xor.tfp"; exit 1; }
printf 'vocab "ab";\ntoken o;\no = Bogus(o);\n' >"$tmp/bad.tfp"
printf 'this is no weight file\n' >"$tmp/text.tfw"
printf '0\t1\n' >"$tmp/data.tsv"
mkdir "$tmp/dir"

# Every tool's --help ends with the same exit-status lines.
"$TFC" --help | sed -n '/^exit status:/,$p' >"$tmp/help.tfc"
[ -s "$tmp/help.tfc" ]
check "tfc --help lists the exit status" $?
for tool in "$TFRUN" "$TFINFO" "$TFTRAIN" "$TFCONVERT" "$TFPROVE"; do
    "$tool" --help | sed -n '/^exit status:/,$p' >"$tmp/help"
    cmp -s "$tmp/help" "$tmp/help.tfc"
    check "$(basename "$tool") --help lists the exit status as tfc does" $?
done

# 2: the command line.
for tool in "$TFC" "$TFRUN" "$TFINFO" "$TFTRAIN" "$TFCONVERT" "$TFPROVE"; do
    status "$(basename "$tool") --bogus" 2 "$tool" --bogus
    [ "$(wc -l <"$tmp/err")" -eq 1 ]
    check "... saying so in one line ($(cat "$tmp/err"))" $?
done
status "tfprove without a file" 2 "$TFPROVE"
status "tfprove --threads 0" 2 "$TFPROVE" --threads 0 "$W"
[ "$(cat "$tmp/err")" = "tfprove: --threads wants a number from 1 to 16, not '0'" ]
check "tfprove --threads 0: one line naming the option and the value ($(cat "$tmp/err"))" $?
status "tfc without a program" 2 "$TFC"
status "tfrun -n beyond the positions" 2 "$TFRUN" "$W" -n 100000 "01"
status "tfc -o a directory" 2 "$TFC" "$P/xor.tfp" -o "$tmp/dir"
status "tfrun --report over its own weights" 2 "$TFRUN" "$W" --report "$W" "01"
status "tftrain -o its own data" 2 "$TFTRAIN" "$P/xor.tfp" --data "$tmp/data.tsv" \
    --heldout "$tmp/data.tsv" -o "$tmp/data.tsv"

# 1: the input.
status "tfc a program with errors" 1 "$TFC" "$tmp/bad.tfp" -o "$tmp/bad.tfw"
status "tfc a missing program" 1 "$TFC" "$tmp/none.tfp"
status "tfrun a file that is no weight file" 1 "$TFRUN" "$tmp/text.tfw" "01"
status "tfrun a prompt out of the vocabulary" 1 "$TFRUN" "$W" "0z"
status "tfinfo a missing file" 1 "$TFINFO" "$tmp/none.tfw"
status "tftrain a program with errors" 1 "$TFTRAIN" "$tmp/bad.tfp" --task xor -o "$tmp/t.tfw"
status "tfconvert a missing input" 1 "$TFCONVERT" "$tmp/none.tfw" -o "$tmp/x.onnx"
status "tfconvert a folder that is no model" 1 "$TFCONVERT" "$tmp/dir" -o "$tmp/x.tfw"
status "tfprove a missing file" 1 "$TFPROVE" "$tmp/none.tfw"
status "tfprove a file that is no weight file" 1 "$TFPROVE" "$tmp/text.tfw"
grep -q "is a text file, not a weight file" "$tmp/err"
check "... naming it ($(cat "$tmp/err"))" $?

# 3: standard output could not be written (a full disk).
if [ -w /dev/full ]; then
    status "tfc -v to a full disk" 3 bash -c "\"$TFC\" -v \"$P/xor.tfp\" -o \"$tmp/v.tfw\" >/dev/full"
    status "tfc --dump=ir to a full disk" 3 bash -c "\"$TFC\" --dump=ir \"$P/xor.tfp\" >/dev/full"
    status "tfrun to a full disk" 3 bash -c "\"$TFRUN\" \"$W\" 01 >/dev/full"
    status "tfinfo to a full disk" 3 bash -c "\"$TFINFO\" \"$W\" >/dev/full"
    status "tfconvert --help to a full disk" 3 bash -c "\"$TFCONVERT\" --help >/dev/full"
    status "tftrain --help to a full disk" 3 bash -c "\"$TFTRAIN\" --help >/dev/full"
else
    echo "skip: no /dev/full"
fi
# 3: an output whose bytes could not be written (a file size limit, the
# signal that would end the tool ignored).
status "tfc over a file size limit" 3 bash -c "ulimit -f 1; trap '' XFSZ; exec \"$TFC\" \"$P/adder.tfp\" -o \"$tmp/big.tfw\""
# 3: memory ran out (not under AddressSanitizer, whose shadow memory cannot
# start under ulimit -v).
if ! grep -qa __asan_init "$TFRUN"; then
    status "tfrun out of memory" 3 bash -c "ulimit -v 150000; exec timeout 60 \"$TFRUN\" \"$W\" 01"
    status "tfc out of memory" 3 bash -c "ulimit -v 40000; exec \"$TFC\" \"$P/sort.tfp\" -o \"$tmp/oom.tfw\""
else
    echo "skip: the out-of-memory checks (ulimit -v) under AddressSanitizer"
fi
finish
