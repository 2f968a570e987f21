#!/usr/bin/env bash
# finetune_cli.sh TFC TFRUN TFTRAIN TFINFO: tftrain --init and --freeze/--train
# (docs/training.md, "Fine-tuning compiled weights"). A program compiled with
# a wrong table entry (tests/data/segments_bug.tfp) is repaired by training its
# table's output matrix alone on the correct program's outputs: the repaired
# model is right on all 10,000 inputs, every other tensor keeps its bytes,
# tfrun --trace decodes the right value in the repaired layer, made_by records
# the start. Then the options' errors.
set -u
TFC=$1
TFRUN=$2
TFTRAIN=$3
TFINFO=$4
. "$(dirname "$0")/lib.sh"
D=$SRC/tests/data

expect() { # expect NAME WANT_STATUS GOT_STATUS
    [ "$3" -eq "$2" ]
    check "$1 (exit $3, want $2)" $?
}
# errors NAME WANT_STATUS PATTERN ARGS...: tftrain ARGS fails with one line on
# stderr matching PATTERN and nothing written.
errors() {
    local name=$1 want=$2 pattern=$3
    shift 3
    rm -f "$tmp/e.tfw" "$tmp/e.ckpt.tfw"
    "$TFTRAIN" "$@" -o "$tmp/e.tfw" >"$tmp/out" 2>"$tmp/err"
    expect "$name" "$want" $?
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err"
    rc=$?
    check "$name: one line matching '$pattern' (got '$(cat "$tmp/err")')" $rc
    [ ! -e "$tmp/e.tfw" ]
    check "$name: nothing written" $?
}
# Names of the tensors whose bytes differ between two weight files (the
# same tensors, in the same order).
changed() {
    "$PY" - "$1" "$2" <<'EOF'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in h.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
print(" ".join(k for k in sorted(a) if a[k] != b.get(k)) or "none")
EOF
}

"$TFC" --no-schedule "$D/segments.tfp" -o "$tmp/good.tfw" &&
    "$TFC" --no-schedule "$D/segments_bug.tfp" -o "$tmp/bug.tfw"
check "tfc compiles segments.tfp and segments_bug.tfp" $?

# Every input, answered by the correct program: PROMPT<TAB>ANSWER.
seq -w 0 9999 | sed 's/.*/^&=/' >"$tmp/prompts.txt"
"$TFRUN" "$tmp/good.tfw" --batch "$tmp/prompts.txt" | sed 's/=/=\t/' >"$tmp/all.tsv"
[ "$(wc -l <"$tmp/all.tsv")" -eq 10000 ] && grep -qxF $'^9081=\t6672' "$tmp/all.tsv"
check "the correct program's 10,000 answers (^9081= -> 6672)" $?
"$TFRUN" "$tmp/bug.tfw" --check "$tmp/all.tsv" >"$tmp/bugcheck.txt"
expect "the buggy program fails some cases" 1 $?
grep -q "^6561 passed, 3439 failed" "$tmp/bugcheck.txt"
rc=$?
check "the buggy program is wrong on the 3,439 inputs with a 9 ($(tail -2 "$tmp/bugcheck.txt" | head -1))" $rc
"$TFRUN" "$tmp/bug.tfw" --trace "^9081=" | sed -n '/layer 0 seg/,/layer 1/p' | grep -E '^ +seg ' >"$tmp/bugseg.txt"
[ "$(awk '{print $3}' "$tmp/bugseg.txt")" = 8 ]
rc=$?
check "the buggy layer 0 decodes seg 8 for the 9 ($(cat "$tmp/bugseg.txt"))" $rc

# The repair: one in ten inputs to train on, every input held out.
awk 'NR % 10 == 1' "$tmp/all.tsv" >"$tmp/train.tsv"
"$TFTRAIN" --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" \
    --freeze all --train seg.mlp.fc2.weight --optimizer sgd --lr 0.05 --steps 50 --batch-size 32 \
    -o "$tmp/fixed.tfw" >"$tmp/train.txt"
check "tftrain --init segments_bug.tfw --freeze all --train seg.mlp.fc2.weight" $?
grep -q "^training 1 of 15 tensors (784 of 6954 parameters): layers.0.mlp.fc2.weight$" "$tmp/train.txt"
rc=$?
check "tftrain says what trains ($(head -1 "$tmp/train.txt"))" $rc
grep -q "^held-out accuracy 100.00% (10000/10000)" "$tmp/train.txt"
rc=$?
check "held-out accuracy 100% ($(tail -1 "$tmp/train.txt"))" $rc
"$TFRUN" "$tmp/fixed.tfw" --check "$tmp/all.tsv" >"$tmp/fixcheck.txt"
expect "tfrun --check: the repaired model passes every input" 0 $?
grep -q "^10000 passed, 0 failed" "$tmp/fixcheck.txt"
check "10000 passed, among them the 3,439 the buggy one failed" $?
[ "$(changed "$tmp/bug.tfw" "$tmp/fixed.tfw")" = "layers.0.mlp.fc2.weight" ]
rc=$?
check "only layers.0.mlp.fc2.weight changed; every other tensor is bit-identical (changed: $(changed "$tmp/bug.tfw" "$tmp/fixed.tfw"))" $rc
"$TFRUN" "$tmp/fixed.tfw" --trace "^9081=" >"$tmp/trace.txt"
sed -n '/layer 0 seg/,/layer 1/p' "$tmp/trace.txt" | grep -E '^ +seg ' >"$tmp/fixseg.txt"
[ "$(awk '{print $3}' "$tmp/fixseg.txt" | tr -d '!')" = 6 ]
rc=$?
check "the repaired layer 0 decodes seg 6 for the 9 ($(cat "$tmp/fixseg.txt"))" $rc
[ "$(tail -1 "$tmp/trace.txt")" = "^9081=6672" ]
check "tfrun --trace still runs the registers and prints ^9081=6672" $?
"$TFINFO" "$tmp/fixed.tfw" >"$tmp/info.txt"
grep -q "made by: {\"tool\":\"tftrain\",.*\"from\":{\"tool\":\"tfc\".*\"init\":\"$tmp/bug.tfw\",\"tensors\":\"--freeze all --train seg.mlp.fc2.weight\"" "$tmp/info.txt" &&
    grep -q "^    0 seg            mlp       Map                line 16$" "$tmp/info.txt" &&
    grep -q "^  seg            categorical" "$tmp/info.txt"
check "made_by records the compiled start and the rules; layers and registers kept" $?

for th in 1 3; do
    "$TFTRAIN" --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" \
        --freeze all --train seg.mlp.fc2.weight --optimizer sgd --lr 0.05 --steps 50 --batch-size 32 \
        --threads $th --quiet -o "$tmp/fixed$th.tfw" >/dev/null && cmp -s "$tmp/fixed$th.tfw" "$tmp/fixed.tfw"
    check "--threads $th writes the same file" $?
done

# Resuming: the same rules continue the checkpoint; other rules are refused.
"$TFTRAIN" --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" \
    --freeze all --train seg.mlp.fc2.weight --optimizer sgd --lr 0.05 --steps 20 --batch-size 32 \
    --quiet -o "$tmp/half.tfw" >/dev/null &&
    "$TFTRAIN" --resume "$tmp/half.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" \
        --freeze all --train seg.mlp.fc2.weight --optimizer sgd --lr 0.05 --steps 50 \
        --batch-size 32 --quiet -o "$tmp/resumed.tfw" >/dev/null &&
    [ "$(changed "$tmp/resumed.tfw" "$tmp/fixed.tfw")" = none ]
check "20 steps, then --resume to 50 with the same rules: the same tensors, bit for bit" $?
errors "--resume with other rules" 1 "tftrain: the checkpoint froze 'layers.0.mlp.fc1.weight' but these options train it" \
    --resume "$tmp/half.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --optimizer sgd \
    --freeze all --train seg.mlp --steps 50

# A fine-tuned file starts another fine-tuning; so does a checkpoint (a fresh optimizer).
"$TFTRAIN" --init "$tmp/half.ckpt.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" \
    --freeze all --train layers.0.mlp --steps 5 --quiet -o "$tmp/again.tfw" >"$tmp/again.txt"
check "--init from a checkpoint" $?
[ "$(changed "$tmp/half.tfw" "$tmp/again.tfw")" = "layers.0.mlp.fc1.bias layers.0.mlp.fc1.weight layers.0.mlp.fc2.weight shared.0.mlp.fc2.bias" ]
rc=$?
check "--train layers.0.mlp: the layer's four tensors changed, shared bias included ($(changed "$tmp/half.tfw" "$tmp/again.tfw"))" $rc

# A trained model as the start: its learned settings kept (learned positions
# train), the frozen tensors' bytes kept, its made_by under from, tfc's in history.
"$TFC" "$P/xor.tfp" -o "$tmp/xor0.tfw" &&
    "$TFTRAIN" "$tmp/xor0.tfw" --task xor --train-size 200 --heldout-size 50 --steps 5 --quiet \
        -o "$tmp/xor1.tfw" >/dev/null &&
    "$TFTRAIN" --init "$tmp/xor1.tfw" --task xor --train-size 200 --heldout-size 50 --steps 5 \
        --freeze embed.token.weight,layers.0 -o "$tmp/xor2.tfw" >"$tmp/xor.txt"
check "--init a trained model" $?
ch=$(changed "$tmp/xor1.tfw" "$tmp/xor2.tfw")
[[ " $ch " == *" embed.position.weight "* && " $ch " != *" embed.token.weight "* && " $ch " != *" layers.0."* && " $ch " == *" unembed.weight "* ]]
check "... its learned positions train, the frozen tensors keep their bytes (changed: $ch)" $?
"$TFINFO" "$tmp/xor2.tfw" | grep -q 'made by: {"tool":"tftrain",.*"from":{"tool":"tftrain",.*"history":\[{"tool":"tfc"'
check "... made_by records the trained file's, and its history" $?

# --freeze SPEC forms on the compiled adder (38 tensors).
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw"
printf '0999+0111=\t0111\n0001+0002=\t3000\n' >"$tmp/add.tsv"
"$TFTRAIN" --init "$tmp/adder.tfw" --data "$tmp/add.tsv" --heldout "$tmp/add.tsv" \
    --freeze embed,layers.0-2,unembed --steps 0 -o "$tmp/a.tfw" >"$tmp/a.txt"
check "--freeze embed,layers.0-2,unembed" $?
grep -q "^training 27 of 37 tensors" "$tmp/a.txt" && ! grep -q "embed.token.weight\|shared.0\.\|layers.1.attn" "$tmp/a.txt"
rc=$?
check "... freezes the embeddings, unembedding and layers 0-2 with their shared tensors ($(head -1 "$tmp/a.txt" | cut -c1-60))" $rc
"$TFTRAIN" --init "$tmp/adder.tfw" --data "$tmp/add.tsv" --heldout "$tmp/add.tsv" \
    --freeze all --train read_left --steps 0 -o "$tmp/a.tfw" >"$tmp/a.txt"
grep -q "^training 4 of 37 tensors (.*): embed.token.weight, shared.11.attn.query.weight, shared.12.attn.key.weight, shared.13.attn.output.weight$" "$tmp/a.txt" &&
    grep -q "^embed.token.weight is shared: it changes the embedding, layer 6 read_left, layer 7 read_right" "$tmp/a.txt"
check "--train read_left (a layer name): its tensors, and what sharing changes too" $?

# A model read at every position (sort.tfp): tfrun --batch's lines are its
# data, and the trainer's held-out accuracy before any step is tfrun's, 100%.
"$TFC" "$P/sort.tfp" -o "$tmp/sort.tfw" 2>/dev/null
printf '^%s\n' a dcadcb abcdabcd ddd ba cab dcba aabbccdd >"$tmp/sortp.txt"
"$TFRUN" "$tmp/sort.tfw" --batch "$tmp/sortp.txt" >"$tmp/sort.tsv"
grep -qxF $'^dcadcb\tabccdd' "$tmp/sort.tsv"
check "sort.tfp's lines: INPUT<TAB>OUTPUT" $?
"$TFTRAIN" --init "$tmp/sort.tfw" --data "$tmp/sort.tsv" --heldout "$tmp/sort.tsv" --steps 0 \
    -o "$tmp/s.tfw" --quiet >"$tmp/s.txt"
grep -q "^held-out accuracy 100.00% (8/8)" "$tmp/s.txt"
check "--init sort.tfw: the trainer reads every position as tfrun does (100% before training)" $?
printf '^abc\tab\n' >"$tmp/short.tsv"
errors "an every-position output of the wrong length" 1 "short.tsv:1: the output has 2 tokens; a model read at every position needs one per input position after the bos \(3\)" \
    --init "$tmp/sort.tfw" --data "$tmp/short.tsv" --heldout "$tmp/sort.tsv"

# Seed 001's constructions (-O0: 1e10 weights) trained whole: the gradient
# overflows float32 within a few steps; tftrain stops and says so. At lr 1e-3
# by step 2 to 4 on every OpenBLAS kernel tried; at 1e-5 only on some (Zen's
# and Haswell's ran the 100 steps: docs/training.md).
"$TFC" -O0 "$P/adder.tfp" -o "$tmp/adder0.tfw"
awk 'BEGIN { for (i = 0; i < 200; i++) printf "%04d+%04d=\n", (i * 3797) % 10000, (i * 9173 + 13) % 10000 }' |
    "$TFRUN" "$tmp/adder.tfw" --batch - | sed 's/=/=\t/' >"$tmp/add200.tsv"
errors "the -O0 adder trained whole" 1 "tftrain: the gradient overflows float32 at step [0-9]+ \(extreme weights" \
    --init "$tmp/adder0.tfw" --data "$tmp/add200.tsv" --heldout "$tmp/add200.tsv" --lr 1e-3 --steps 100

# Errors.
errors "--init and --resume" 2 "tftrain: --init and --resume exclude each other" \
    --init "$tmp/bug.tfw" --resume "$tmp/half.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
errors "--init and a program" 2 "tftrain: give one of a program .*, not several" \
    "$D/segments.tfp" --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
errors "--init of a program source" 1 "segments.tfp is a program source, not a weight file" \
    --init "$D/segments.tfp" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
head -c 300 /dev/urandom >"$tmp/junk.tfw"
errors "--init of random bytes" 1 "junk.tfw" \
    --init "$tmp/junk.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
errors "--init of a missing file" 1 "nowhere.tfw" \
    --init "$tmp/nowhere.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
errors "a compiled model as the program" 1 "bug.tfw holds a compiled model, not a learned one \(to fine-tune it: tftrain --init .*bug.tfw\)" \
    "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
errors "an unknown tensor" 2 "tftrain: --freeze: 'embd' names no tensor or layer \(did you mean 'embed'\?\)" \
    --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --freeze embd
errors "an unknown layer" 2 "tftrain: --train: 'segg' names no tensor or layer \(did you mean 'seg'\?\)" \
    --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --freeze all --train segg
errors "a layer out of range" 2 "tftrain: --freeze: 'layers.1-3': the model has 3 layers \(layers.0-2\)" \
    --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --freeze layers.1-3
errors "an unknown role" 2 "tftrain: --train: 'layers.2.mlp': no tensor of that layer has a role starting 'mlp'" \
    --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --freeze all --train layers.2.mlp
errors "an empty item" 2 "tftrain: --freeze: an empty item" \
    --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --freeze seg,,cp
errors "nothing to train" 2 "tftrain: nothing to train: every tensor is frozen" \
    --init "$tmp/bug.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" --freeze all
printf '9081=\t6672\n' >"$tmp/nobos.tsv"
errors "data without the model's bos" 1 "example 1 does not start with the model's beginning-of-sequence token '\^'" \
    --init "$tmp/bug.tfw" --data "$tmp/nobos.tsv" --heldout "$tmp/all.tsv"
printf 'vocab "ab";\nmaxlen 4;\nnum n;\nn: Map(indices * 2) -> n;\noutput n at every position;\n' >"$tmp/num.tfp"
"$TFC" "$tmp/num.tfp" -o "$tmp/num.tfw"
errors "a model whose output is a number" 1 "num.tfw: the model prints a number at every position \(register 'n'\)" \
    --init "$tmp/num.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv"
cp "$tmp/bug.tfw" "$tmp/same.tfw"
"$TFTRAIN" --init "$tmp/same.tfw" --data "$tmp/train.tsv" --heldout "$tmp/all.tsv" -o "$tmp/same.tfw" \
    >/dev/null 2>"$tmp/err"
expect "-o the --init file" 2 $?
grep -q "same.tfw" "$tmp/err" && cmp -s "$tmp/bug.tfw" "$tmp/same.tfw"
rc=$?
check "-o the --init file: refused, the file untouched ($(cat "$tmp/err"))" $rc
finish
