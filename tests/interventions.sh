#!/usr/bin/env bash
# interventions.sh TFC TFRUN [TFINFO]: tfrun --ablate and --patch-from
# (runtime/engine/intervene.h), against what the programs compute and
# against the Python module's run_with_hooks (tests/intervene_check.py).
set -u
. "$(dirname "$0")/lib.sh"
TFC=$1 TFRUN=$2 TFINFO=${3:-$(dirname "$1")/tfinfo}
need_torch
CHECK=$SRC/tests/intervene_check.py
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw" 2>/dev/null
"$TFC" "$P/add_decimal.tfp" -o "$tmp/dec.tfw" 2>/dev/null
A=$tmp/adder.tfw D=$tmp/dec.tfw

# The adder's carry is the scalar register `carry`, which each round's
# Multiply MLP (the four layers named multiply) writes. Zeroed after each,
# no carry reaches any digit: on every 4-digit case with a carry (every
# STRIDE-th under the sanitizers), exactly the digits a carry reaches change,
# to (a_i + b_i) mod 10.
"$PY" "$CHECK" nocarry "${TF_ABLATE_STRIDE:-1}" >"$tmp/nocarry.tsv" 2>"$tmp/nocarry.txt"
"$TFRUN" "$A" --ablate carry@multiply --check "$tmp/nocarry.tsv" >"$tmp/check.txt"
rc=$?
n=$(wc -l <"$tmp/nocarry.tsv")
grep -q "^$n passed, 0 failed" "$tmp/check.txt" && [ "$n" -gt 1000 ]
check "--ablate carry@multiply: every case with a carry loses exactly the digits it reaches ($(cat "$tmp/nocarry.txt"); $(head -1 "$tmp/check.txt"))" $((rc | $?))
# Unedited, the same cases give the true sums (the edit is what changes them).
"$TFRUN" "$A" --check "$tmp/nocarry.tsv" | grep -q "^0 passed, $n failed"
check "without --ablate none of them is the carry-less sum" $?
[ "$("$TFRUN" "$A" --ablate carry@layers.8 "0999+0111=")" = "0999+0111=0011" ]
check "carry zeroed after the first round only: the tens digit loses its carry" $?
"$TFRUN" "$A" --ablate carry@multiply --trace "0999+0111=" >"$tmp/trace.txt" &&
    [ "$(tail -1 "$tmp/trace.txt")" = "0999+0111=0000" ]
check "--trace with --ablate: the edited run's result" $?
"$TFRUN" "$A" --ablate carry@multiply --report "$tmp/r.html" "0999+0111=" >/dev/null && [ -s "$tmp/r.html" ]
check "--report with --ablate" $?
"$TFRUN" "$A" --ablate carry@multiply --compare "$A" --report "$tmp/c.html" "0999+0111=" >"$tmp/cmp.txt" &&
    [ "$(cat "$tmp/cmp.txt")" = $'0999+0111=0000\n0999+0111=0111' ]
check "--compare: the edit applies to the first model only" $?
"$TFRUN" "$A" --ablate carry@multiply --dump "$tmp/d.safetensors" "0999+0111=" >/dev/null &&
    "$PY" -c "
import json, struct, sys, torch
d = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', d[:8])[0]; h = json.loads(d[8:8 + n])
e = h['blocks.8.hook_resid_post']; off = e['data_offsets']
x = torch.frombuffer(bytearray(d[8 + n + off[0]:8 + n + off[1]]), dtype=torch.float32).reshape(e['shape'])
sys.path.insert(0, sys.argv[2] + '/tools'); import tfw_torch
m = tfw_torch.load(sys.argv[3]); c = m.registers['carry']['offset']
assert float(x[0, :, c].abs().max()) == 0.0" "$tmp/d.safetensors" "$SRC" "$A"
check "--dump with --ablate: carry is 0 after layer 8" $?

# Zero, mean and patch of heads and MLPs; a batch takes zero edits.
[ "$("$TFRUN" "$A" --ablate layers.8 "0999+0111=")" != "0999+0111=0111" ]
check "zeroing the first multiply's output changes the sum" $?
printf '0999+0111=\n0001+0002=\n' | "$TFRUN" "$A" --ablate carry@multiply --batch - >"$tmp/b.txt" &&
    [ "$(cat "$tmp/b.txt")" = $'0999+0111=0000\n0001+0002=3000' ]
check "--batch with a zero edit" $?
"$TFRUN" "$A" --ablate mean:read_left "0999+0111=" >/dev/null
check "mean: runs" $?
[ "$("$TFRUN" "$A" --ablate patch:multiply --patch-from "0999+0111=" "0999+0111=")" = "0999+0111=0111" ]
check "patching a prompt from itself changes nothing" $?

# add_decimal's carry head (the Aggregate `carry`): patched from a sum
# without carries, exactly the digits a carry reaches change, on random
# 4-digit additions with a carry (written as 8 digits).
"$PY" "$CHECK" decimal "${TF_PATCH_CASES:-60}" 7 >"$tmp/dec.tsv"
fails=0
while IFS=$'\t' read -r prompt want; do
    got=$("$TFRUN" "$D" --ablate carry --patch-from "^00000000+00000000=" "$prompt")
    [ "$got" = "$prompt$want" ] || { echo "  $prompt: $got, want $prompt$want"; fails=$((fails + 1)); }
done <"$tmp/dec.tsv"
[ "$fails" -eq 0 ] && [ -s "$tmp/dec.tsv" ]
check "add_decimal: the carry head patched from 0+0 removes exactly the carries ($(wc -l <"$tmp/dec.tsv") cases)" $?
# Zeroed, the carry head adds no carry (its selection is proven to pick one
# position, a Count numbering them: no run-time check): 1999 + 1 = 1990.
[ "$("$TFRUN" "$D" --ablate carry "^00001999+00000001=")" = "^00001999+00000001=000001990" ]
check "zeroing add_decimal's carry head drops the carries" $?
# A head whose copy is checked at run time (sort's, which the compiler
# cannot prove single-valued), zeroed, leaves its register holding no
# value: the check says so (the edit is out of the compiled range).
"$TFC" "$P/sort.tfp" -o "$tmp/sort.tfw" 2>/dev/null &&
    "$TFRUN" "$tmp/sort.tfw" --ablate sorted "^dcadcb" >/dev/null 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "Aggregate -> sorted: position 1 does not hold one value" "$tmp/err.txt"
check "zeroing sort's copy head fails its run-time check" $?

# C and Python agree on patching experiments (the carry head's block: its
# layer's index, as tfinfo lists it).
carry_layer=$("$TFINFO" "$D" | awk '$2 == "carry" && $3 == "attention" {print $1; exit}')
"$PY" "$CHECK" patch "$TFRUN" "$D" "blocks.$carry_layer.attn.hook_z" carry "^00000000+00000000=" \
    "^00001999+00000001=" "^12345678+87654329=" "^00000099+00000001=" "^55555555+44444445="
check "add_decimal: tfrun --patch-from = run_with_hooks on blocks.$carry_layer.attn.hook_z" $?
"$PY" "$CHECK" patch "$TFRUN" "$A" blocks.8.hook_mlp_out layers.8 "0001+0009=" \
    "0001+0008=" "0999+0111=" "0505+0505="
check "adder: tfrun --patch-from = run_with_hooks on blocks.8.hook_mlp_out" $?
"$PY" "$CHECK" patch "$TFRUN" "$A" blocks.16.hook_resid_post:carry "carry@layers.16" "0099+0001=" \
    "0011+0011=" "0090+0010="
check "adder: a register patched after a layer = run_with_hooks on hook_resid_post" $?

# errors NAME STATUS PATTERN ARGS...: tfrun ARGS fails with one line matching.
errors() {
    local name=$1 want=$2 pattern=$3
    shift 3
    "$TFRUN" "$@" >/dev/null 2>"$tmp/err.txt"
    local rc=$?
    if [ $rc -eq "$want" ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err.txt"; then
        check "$name" 0
    else
        echo "  exit $rc: $(cat "$tmp/err.txt")"
        check "$name" 1
    fi
}
errors "a misspelt name" 2 "'cary' names no layer, op or register \(did you mean 'carry'\?\)" \
    "$D" --ablate cary "^00001999+00000001="
errors "a head out of range" 2 "'layers.6.head.1': layer 6 \(read_left\) has heads 0 to 0" \
    "$A" --ablate layers.6.head.1 "0999+0111="
errors "heads of an MLP" 2 "layer 8 \(multiply\) is not an attention layer" \
    "$A" --ablate layers.8.head.0 "0999+0111="
errors "patch: without --patch-from" 2 "patch wants --patch-from PROMPT" \
    "$A" --ablate patch:multiply "0999+0111="
errors "--patch-from without --ablate" 2 "--patch-from wants --ablate SPEC" \
    "$A" --patch-from "0999+0111=" "0999+0111="
errors "--patch-from of another length" 2 "has 9 tokens, the prompt 10" \
    "$A" --ablate multiply --patch-from "999+0111=" "0999+0111="
errors "a mode it does not know" 2 "the mode 'half' is not zero, mean or patch" \
    "$A" --ablate half:multiply "0999+0111="
errors "mean: with --batch" 2 "take one prompt, not a file" \
    "$A" --ablate mean:multiply --batch /dev/null
errors "a layer out of range" 2 "the model has layers 0 to 35" "$A" --ablate layers.36 "0999+0111="
errors "a register at a layer that does not exist" 2 "'carry@nowhere' names no layer" \
    "$A" --ablate carry@nowhere "0999+0111="

# Registers that share columns (model.h's live ranges; tests/mkgeneral.c
# --split): the adder's `left` split where its second clear_lro (layer 12)
# zeroed it, `left` the first round's digit and `left2` the later rounds'.
# REG@LAYER edits REG after the layers of that name where it holds its
# columns: left@read_left is the first read_left only, left2@read_left the
# three others, as the same columns edited by layer in the unsplit adder.
V=$tmp/split.tfw
"${TF_BUILD_DIR:?}/mkgeneral" --split "$A" left 13 left2 "$V"
check "mkgeneral --split: left and left2 share columns" $?
same() { # same NAME SPEC_ON_V SPEC_ON_A: both runs of 1234+5678= print the same line
    local v a
    v=$("$TFRUN" "$V" --ablate "$2" "1234+5678=") && a=$("$TFRUN" "$A" --ablate "$3" "1234+5678=") &&
        [ "$v" = "$a" ]
    check "$1 ($v, $a)" $?
}
same "left@read_left edits after the first read_left only" left@read_left left@layers.6
same "left2@read_left after the three others" left2@read_left \
    left@layers.14,left@layers.22,left@layers.30
same "left2@layers.14 edits left's columns" left2@layers.14 left@layers.14
[ "$("$TFRUN" "$V" --ablate left@read_left "1234+5678=")" != \
    "$("$TFRUN" "$A" --ablate left@read_left "1234+5678=")" ]
check "... which is not what editing every read_left does" $?
errors "a register after a layer where another holds its columns" 2 \
    "^tfrun: --ablate: 'left@layers.14': register 'left' holds its columns in states 0\.\.12 \(the embedding to after layer 11\) only, not after layer 14 \(read_left\)$" \
    "$V" --ablate left@layers.14 "1234+5678="
errors "a register before it holds its columns" 2 \
    "'left2@layers.7': register 'left2' holds its columns in states 13\.\.36 \(after layer 12 to after layer 35\) only, not after layer 7 \(read_right\)$" \
    "$V" --ablate left2@layers.7 "1234+5678="
errors "a register at the embedding, before it holds its columns" 2 \
    "'left2@embed': register 'left2' holds its columns in states 13\.\.36 \(after layer 12 to after layer 35\) only, not after the embedding$" \
    "$V" --ablate left2@embed "1234+5678="
finish
