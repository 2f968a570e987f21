#!/usr/bin/env bash
# train_cli.sh TFTRAIN TFRUN TFC: the trainer's command line. Short runs of
# the seed tasks (the full ones are bench/ scripts), the trained files run by
# tfrun, determinism, resuming, and one-line errors with the right exit codes.
set -u
TFTRAIN=$1
TFRUN=$2
TFC=$3
SRC=${TF_SOURCE_DIR:?TF_SOURCE_DIR must point at the source tree}
P=$SRC/programs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # check NAME STATUS (call as `check "NAME" $?` only when NAME expands no command)
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
expect() { # expect NAME WANT_STATUS GOT_STATUS
    [ "$3" -eq "$2" ]
    check "$1 (exit $3, want $2)" $?
}

for prog in binary_add binary_add_msb first_token xor secret_code decimal_add; do
    "$TFC" "$P/$prog.tfp" -o "$tmp/$prog.init.tfw" 2>"$tmp/err"
    rc=$?
    check "tfc compiles $prog.tfp: $(cat "$tmp/err")" $rc
done

# Seed 003 in full (it takes a fraction of a second): 2013 accepted, every
# close negative rejected, each attention picture within 0.05, and of all
# 100,000 codes only 2013 accepted (tftrain's count, then tfrun's).
"$TFTRAIN" "$P/secret_code.tfp" --task secret-code --train-size 30000 --heldout-size 2000 \
    --batch-size 3 --lr 3e-3 --cosine --steps 10000 --quiet -o "$tmp/sc.tfw" >"$tmp/sc.txt"
check "tftrain secret-code" $?
grep -q "^held-out accuracy 100.00% (2000/2000)" "$tmp/sc.txt"
rc=$?
check "secret code: held-out accuracy 100% ($(head -1 "$tmp/sc.txt"))" $rc
grep -q "2013 accepted (p = .*); close negatives rejected: 36 of 36" "$tmp/sc.txt"
check "secret code: 2013 accepted, 36 of 36 close negatives rejected" $?
n=$(awk '/mean squared error/ && $7 < 0.05' "$tmp/sc.txt" | wc -l)
[ "$n" -eq 3 ]
check "secret code: 3 attention pictures within 0.05 MSE (got $n)" $?
grep -qx "secret code: 1 of 100000 codes accepted: #2013" "$tmp/sc.txt"
rc=$?
check "secret code: tftrain accepts #2013 alone ($(grep 'codes accepted' "$tmp/sc.txt"))" $rc
out=$(seq 0 99999 | sed 's/^/#/' | "$TFRUN" "$tmp/sc.tfw" --batch - | awk -F'\t' '$2 == "accept" { print $1 }')
[ "$out" = "#2013" ]
check "secret code: tfrun accepts #2013 alone of the 100,000 codes (got '$out')" $?
# --check on a classifier: INPUT<TAB>CLASS lines, the same verdicts.
seq 0 99999 | awk '{ printf "#%d\t%s\n", $1, $1 == 2013 ? "accept" : "reject" }' >"$tmp/codes.txt"
"$TFRUN" "$tmp/sc.tfw" --check "$tmp/codes.txt" >"$tmp/check.txt"
rc=$?
[ $rc -eq 0 ] && grep -q "^100000 passed, 0 failed (100000 cases in" "$tmp/check.txt"
check "secret code: tfrun --check passes all 100,000 codes (got $rc: $(tail -1 "$tmp/check.txt"))" $?
printf '#2013\treject\n#7\treject\n#7\n#7a\treject\n' >"$tmp/codes2.txt"
"$TFRUN" "$tmp/sc.tfw" --check "$tmp/codes2.txt" >"$tmp/check.txt" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -qx "FAIL line 1: #2013 -> accept (expected reject)" "$tmp/check.txt" &&
    grep -q "^1 passed, 1 failed, 2 bad lines (2 cases in" "$tmp/check.txt" &&
    grep -qx "tfrun: line 3: expected INPUT<TAB>CLASS" "$tmp/err" &&
    grep -q "^tfrun: line 4: character 'a' at index 2 is not in the vocabulary" "$tmp/err"
check "classifier --check: a failure, bad lines, exit 1 (got $rc: $(cat "$tmp/check.txt" "$tmp/err"))" $?
out=$("$TFRUN" "$tmp/sc.tfw" "#2013")
[[ "$out" == $'#2013\taccept\t'* ]]
check "tfrun classifies #2013 as accept (got '$out')" $?
out=$("$TFRUN" "$tmp/sc.tfw" "#2012")
[[ "$out" == $'#2012\treject\t'* ]]
check "tfrun classifies #2012 as reject (got '$out')" $?
out=$(printf '#2013\r\n#2012\r\n' | "$TFRUN" "$tmp/sc.tfw" --batch - | cut -f1,2)
[ "$out" = $'#2013\taccept\n#2012\treject' ]
check "tfrun classifies CRLF lines as LF ones (got '$out')" $?

# Seed 004, shortened: a progress line per evaluation, then the result.
"$TFTRAIN" "$P/first_token.tfp" --task first-token:20 --train-size 1000 --heldout-size 200 \
    --batch-size 32 --optimizer adam --lr 1e-3 --steps 1500 --eval-every 500 \
    -o "$tmp/ft.tfw" >"$tmp/ft.txt"
check "tftrain first-token" $?
n=$(grep -cE '^step +[0-9]+/1500  loss [0-9.]+  held-out +[0-9.]+%  lr [0-9.e+-]+ +[0-9]+ examples/s  elapsed [0-9.:]+( s)?  ETA [0-9.:]+( s)?$' "$tmp/ft.txt")
[ "$n" -eq 3 ]
check "three progress lines (got $n)" $?
acc=$(sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$tmp/ft.txt")
awk -v a="$acc" 'BEGIN { exit !(a >= 99) }'
check "first-token held-out accuracy >= 99% after 1500 steps (got $acc)" $?
out=$("$TFRUN" "$tmp/ft.tfw" "31244123412341234123" | cut -f1,2)
[ "$out" = $'31244123412341234123\t3' ]
check "tfrun recalls the first token (got '$out')" $?

# Binary addition of 3-bit numbers: tfrun generates the learned sums.
"$TFTRAIN" "$P/binary_add.tfp" --task binary-add:3 --train-size 48 --heldout-size 16 \
    --steps 300 --lr 3e-3 --quiet -o "$tmp/ba.tfw" --write-data "$tmp/ba" >"$tmp/ba.txt"
check "tftrain binary-add:3" $?
cut -f1 "$tmp/ba/train.txt" >"$tmp/ba/prompts.txt"
"$TFRUN" "$tmp/ba.tfw" -n 4 --batch "$tmp/ba/prompts.txt" >"$tmp/ba/got.txt"
check "tfrun runs the trained adder" $?
tr -d '\t' <"$tmp/ba/train.txt" >"$tmp/ba/want.txt"
n=$(paste -d'\n' "$tmp/ba/got.txt" "$tmp/ba/want.txt" | paste - - | awk '$1 == $2' | wc -l)
[ "$n" -ge 45 ]
check "the trained adder answers >= 45 of its 48 training sums (got $n)" $?

# Seed 000 in the seed's order (the sum most-significant bit first), at 5-bit
# operands: every generated answer is the sum of its prompt, and the model
# generates at least 95 % of the held-out sums, none of which it trained on.
"$TFTRAIN" "$P/binary_add_msb.tfp" --task binary-add-msb:5 --train-size 800 --heldout-size 200 \
    --steps 1500 --lr 3e-3 --warmup 50 --cosine --batch-size 32 --quiet -o "$tmp/msb.tfw" \
    --write-data "$tmp/msb" >"$tmp/msb.txt"
check "tftrain binary-add-msb:5" $?
bad=0
while IFS=$'\t' read -r prompt answer; do
    a=${prompt%%+*} b=${prompt#*+} b=${b%=}
    want=""
    for ((s = 2#$a + 2#$b, i = 0; i < 6; i++, s /= 2)); do want=$((s % 2))$want; done
    [ "$answer" = "$want" ] || bad=$((bad + 1))
done <"$tmp/msb/heldout.txt"
[ "$bad" -eq 0 ] && [ "$(wc -l <"$tmp/msb/heldout.txt")" -eq 200 ]
check "binary-add-msb:5 answers are the 6-bit sums, most-significant bit first ($bad wrong)" $?
[ -z "$(sort "$tmp/msb/train.txt" "$tmp/msb/heldout.txt" | cut -f1 | uniq -d)" ]
check "no held-out sum is a training sum" $?
"$TFRUN" "$tmp/msb.tfw" -n 6 --check "$tmp/msb/heldout.txt" >"$tmp/msb.check" 2>&1
n=$(sed -n 's/^\([0-9]*\) passed, .*/\1/p' "$tmp/msb.check")
[ "${n:-0}" -ge 190 ]
rc=$?
check "tfrun generates >= 190 of 200 held-out MSB-first sums (got ${n:-none}: $(tail -1 "$tmp/msb.check"))" $rc
acc=$(awk -v n="${n:-0}" 'BEGIN { printf "%.2f", n / 2 }')
grep -q "^held-out accuracy $acc% " "$tmp/msb.txt"
rc=$?
check "tftrain's held-out accuracy is what tfrun generates ($(cut -c1-40 "$tmp/msb.txt"))" $rc

# PyTorch (tools/tfw_torch.py) runs the trained files as tfrun does.
PY=${PYTHON:-python3} # CMake passes one that can import torch (CMakeLists.txt)
if "$PY" -c 'import torch' 2>/dev/null; then
    "$PY" "$SRC/tools/tfw_torch.py" "$tmp/ba.tfw" -n 4 --batch "$tmp/ba/prompts.txt" >"$tmp/ba/torch.txt"
    cmp -s "$tmp/ba/got.txt" "$tmp/ba/torch.txt"
    check "tfrun and PyTorch generate the same sums with the trained adder" $?
    printf '#2013\n#2012\n#3102\n#7\n#99999\n' >"$tmp/codes.txt"
    "$TFRUN" "$tmp/sc.tfw" --batch "$tmp/codes.txt" | cut -f1,2 >"$tmp/codes.tfrun"
    "$PY" "$SRC/tools/tfw_torch.py" "$tmp/sc.tfw" --batch "$tmp/codes.txt" | cut -f1,2 >"$tmp/codes.torch"
    cmp -s "$tmp/codes.tfrun" "$tmp/codes.torch" && [ "$(wc -l <"$tmp/codes.tfrun")" -eq 5 ]
    check "tfrun and PyTorch classify the same codes alike" $?
else
    echo "FAIL: $PY cannot import torch"
    failed=$((failed + 1))
fi

# The header's metadata (json) and the tensor data (the bytes after the header).
meta() { # meta FILE [KEY]: the tensor names, or a metadata value
    "${PYTHON:-python3}" -c 'import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n])
print(h["__metadata__"].get(sys.argv[2], "") if len(sys.argv) > 2 else " ".join(k for k in h if k != "__metadata__"))' "$@"
}
same_tensors() { # same_tensors A B: the same tensor names and data, bit for bit
    local na nb
    na=$(od -An -tu8 -N8 "$1" | tr -d ' ')
    nb=$(od -An -tu8 -N8 "$2" | tr -d ' ')
    [ "$(meta "$1")" = "$(meta "$2")" ] && cmp -s <(tail -c +$((9 + na)) "$1") <(tail -c +$((9 + nb)) "$2")
}

# Determinism: the same seed gives the same file, bit for bit; a run resumed
# from a checkpoint ends where the uninterrupted run ends.
common=(--task binary-add:3 --train-size 48 --heldout-size 16 --quiet)
"$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 40 -o "$tmp/r1.tfw" >/dev/null
"$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 40 -o "$tmp/r2.tfw" >/dev/null
cmp -s "$tmp/r1.tfw" "$tmp/r2.tfw"
check "two runs with one seed write identical files" $?
"$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 40 --seed 9 -o "$tmp/r3.tfw" >/dev/null
! cmp -s "$tmp/r1.tfw" "$tmp/r3.tfw"
check "another seed gives another model" $?
"$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 20 -o "$tmp/half.tfw" >/dev/null
"$TFTRAIN" --resume "$tmp/half.tfw" "${common[@]}" --steps 40 -o "$tmp/resumed.tfw" >/dev/null
check "tftrain --resume" $?
same_tensors "$tmp/r1.tfw" "$tmp/resumed.tfw"
check "20 steps + 20 resumed steps == 40 steps, bit for bit" $?
"$TFTRAIN" --resume "$tmp/half.ckpt.tfw" "${common[@]}" --steps 40 -o "$tmp/resumed2.tfw" >/dev/null &&
    cmp -s "$tmp/resumed.tfw" "$tmp/resumed2.tfw"
check "--resume reads the checkpoint given itself or beside the model" $?
# --steps is the total: resuming 20 steps with --steps 18 printed "-2 steps"
# and exited 0; fewer or as many steps as done are an error, nothing written.
for n in 18 20; do
    "$TFTRAIN" --resume "$tmp/half.tfw" "${common[@]}" --steps $n -o "$tmp/back.tfw" >/dev/null 2>"$tmp/err"
    [ $? -eq 1 ] && [ ! -e "$tmp/back.tfw" ] &&
        grep -q "half.tfw has had 20 steps already; --steps asks for $n in all, .*(give more than 20 to train on)" "$tmp/err"
    check "--resume with --steps $n after 20 steps: $(cat "$tmp/err")" $?
done

# -o writes the model alone; the optimizer state goes to the checkpoint beside it.
names=$(meta "$tmp/r1.tfw")
[[ "$names" != *optim.* ]] && [[ "$names" == *layers.0.attn.query.weight* ]]
check "the trained model holds no optimizer state" $?
ck=$(meta "$tmp/r1.ckpt.tfw")
[[ "$ck" == "$names optim.m.embed.token.weight "* ]] && [[ "$ck" == *" optim.step" ]]
check "the checkpoint holds the model, then the optimizer state" $?
out=$("$TFRUN" "$tmp/r1.ckpt.tfw" -n 4 "011+001=") && [ "$out" = "$("$TFRUN" "$tmp/r1.tfw" -n 4 "011+001=")" ]
check "tfrun runs the checkpoint as the model" $?
# Tensors carry the layer index: binary_add is pre-norm, attention + MLP per
# block, so block 1's attention is layer 2 and the final norm layer 4.
[[ "$names" == *" layers.2.attn.query.weight "* ]] && [[ "$names" == *" layers.3.mlp.fc1.weight "* ]] &&
    [[ "$names" == *" layers.4.norm.weight "* ]] && [[ "$names" != *"shared."* ]]
check "learned tensors are named by layer index (got $names)" $?

# __metadata__.made_by records how the file was made; learned the model block.
mb=$(meta "$tmp/resumed.tfw" made_by)
[[ "$mb" == '{"tool":"tftrain","version":"0.1.0","from":{"tool":"tftrain",'*'"steps":20,'* ]] &&
    [[ "$mb" == *'"optimizer":{"name":"adamw","lr":0.001,"beta1":0.9,"beta2":0.999,"eps":1e-08,"weight_decay":0.01,"clip":0}'* ]] &&
    [[ "$mb" == *'"data":{"task":"binary-add:3","seed":1,"train_size":48,"heldout_size":16},"batch_size":64,"steps":40,'* ]]
check "made_by records the optimizer, data, steps and where training started (got $mb)" $?
# made_by stays flat however often training resumes (each resume nested it
# one level deeper, and the readers refused the 30th): `from` is the run
# resumed, `history` the runs before it, oldest first.
cp "$tmp/resumed.tfw" "$tmp/chain.tfw" && cp "$tmp/resumed.ckpt.tfw" "$tmp/chain.ckpt.tfw"
rc=0
for s in $(seq 41 75); do
    "$TFTRAIN" --resume "$tmp/chain.tfw" "${common[@]}" --steps "$s" -o "$tmp/chain.tfw" >/dev/null || { rc=1; break; }
done
check "35 resumes in a row, each read back (stopped at step ${s})" $rc
mb=$(meta "$tmp/chain.tfw" made_by)
[[ "$mb" == '{"tool":"tftrain","version":"0.1.0","from":{"tool":"tftrain",'*'"steps":74,'*'"history":[{"tool":"tfc",'* ]] &&
    [ "$(grep -o '"tool":"tftrain"' <<<"$mb" | wc -l)" -eq 37 ] && [ "$(grep -o '"from"' <<<"$mb" | wc -l)" -eq 1 ] &&
    [[ "$mb" == *'"history":[{"tool":"tfc","version":"0.1.0","options":{"O":1}},{"tool":"tftrain","version":"0.1.0","optimizer":'*'"steps":20,'* ]]
check "made_by after 35 resumes: one from, the history flat, oldest first (got ${mb:0:300})" $?
[ "$(meta "$tmp/r1.tfw" learned)" = '{"d_model":32,"layers":2,"heads":4,"d_ff":64,"activation":"relu","norm":"pre","dropout":0,"positions":"learned","max_len":32,"attention":"causal","predict":"next_token","seed":1}' ]
rc=$?
check "learned records the model block ($(meta "$tmp/r1.tfw" learned))" $rc

# tftrain takes tfc's weight file as the program, its settings read from the
# metadata (dropout, positions, seed): the same training as from the source.
"$TFC" "$P/secret_code.tfp" -o "$tmp/scinit.tfw" &&
    "$TFTRAIN" "$tmp/scinit.tfw" --task secret-code --train-size 30 --heldout-size 5 --steps 20 \
        --quiet -o "$tmp/sc_w.tfw" >/dev/null &&
    "$TFTRAIN" "$P/secret_code.tfp" --task secret-code --train-size 30 --heldout-size 5 --steps 20 \
        --quiet -o "$tmp/sc_p.tfw" >/dev/null && same_tensors "$tmp/sc_w.tfw" "$tmp/sc_p.tfw"
check "training tfc's .tfw == training the program" $?
[[ "$(meta "$tmp/sc_w.tfw" made_by)" == *'"from":{"tool":"tfc","version":"0.1.0","options":{"O":1}}'* ]]
check "made_by.from names tfc" $?
l=$(meta "$tmp/first_token.init.tfw" learned)
[[ "$l" == *'"dropout":0.1,"positions":"none",'* ]]
check "first_token's dropout 0.1 and no positions are in the metadata (got $l)" $?

# --threads splits the attention and LayerNorm work (a batch big enough for a
# second thread to take part); the file is the same on any number of threads.
big=(--task binary-add:6 --train-size 512 --heldout-size 16 --batch-size 256 --quiet --steps 6)
"$TFTRAIN" "$P/binary_add.tfp" "${big[@]}" --threads 1 -o "$tmp/t1.tfw" >/dev/null &&
    "$TFTRAIN" "$P/binary_add.tfp" "${big[@]}" --threads 3 -o "$tmp/t3.tfw" >/dev/null &&
    cmp -s "$tmp/t1.tfw" "$tmp/t3.tfw"
check "--threads 1 and --threads 3 write identical files" $?

# Errors: one line, exit 1 for bad input, 2 for usage.
run_err() { # run_err NAME WANT_STATUS WANT_TEXT COMMAND...
    local name=$1 want=$2 text=$3
    shift 3
    "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    expect "$name" "$want" $rc
    grep -qF -- "$text" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ]
    local ok=$?
    check "$name: one line with '$text' (got '$(cat "$tmp/err")')" $ok
}
run_err "unknown option" 2 "tftrain: unknown option '--bogus'" \
    "$TFTRAIN" "$P/xor.tfp" --task xor --bogus
run_err "bad learning rate" 2 "tftrain: bad value 'fast' for --lr" \
    "$TFTRAIN" "$P/xor.tfp" --task xor --lr fast
run_err "bad thread count" 2 "tftrain: bad value '0' for --threads" \
    "$TFTRAIN" "$P/xor.tfp" --task xor --threads 0
run_err "no data" 2 "tftrain: give one of --task, --data (with --heldout) or --teacher" "$TFTRAIN" "$P/xor.tfp"
run_err "a program and --resume" 2 "tftrain: give one of a program (.tfp or .tfw), --init MODEL.tfw or --resume CHECKPOINT.tfw, not several" \
    "$TFTRAIN" "$P/xor.tfp" --resume "$tmp/r1.tfw" --task xor
run_err "unknown task" 1 "tftrain: unknown task 'multiply'" \
    "$TFTRAIN" "$P/xor.tfp" --task multiply -o "$tmp/x.tfw"
run_err "task for another model" 1 "task binary-add:4 needs a next-token model" \
    "$TFTRAIN" "$P/xor.tfp" --task binary-add:4 -o "$tmp/x.tfw"
run_err "a task parameter out of range" 1 "tftrain: task binary-add-msb: the parameter must be 1 to 30" \
    "$TFTRAIN" "$P/binary_add_msb.tfp" --task binary-add-msb:0 -o "$tmp/x.tfw"
run_err "program without a model" 1 "declares no learned model" \
    "$TFTRAIN" "$P/adder.tfp" --task xor -o "$tmp/x.tfw"
# tftrain does not link the compiler: it runs tfc (the one beside it, or $TFC).
printf 'vocab "ab"\nmodel {\n' >"$tmp/broken.tfp"
"$TFTRAIN" "$tmp/broken.tfp" --task xor -o "$tmp/x.tfw" >/dev/null 2>"$tmp/err"
expect "a program that does not compile" 1 $?
grep -q "broken.tfp:1:11: error: expected ';'" "$tmp/err" &&
    grep -q "tftrain: .*broken.tfp: does not compile (tfc exited with status 1)" "$tmp/err"
check "tfc's diagnostic, then tftrain's line (got '$(cat "$tmp/err")')" $?
TFC=/nonexistent/tfc run_err "no tfc to run" 1 "cannot run /nonexistent/tfc to compile it" \
    "$TFTRAIN" "$P/xor.tfp" --task xor -o "$tmp/x.tfw"
printf '0abcd1\t1\n0abzd1\t1\n' >"$tmp/bad.txt"
run_err "token outside the vocabulary" 1 "bad.txt:2: character 'z' is not in the model's vocabulary" \
    "$TFTRAIN" "$P/xor.tfp" --data "$tmp/bad.txt" --heldout "$tmp/bad.txt" -o "$tmp/x.tfw"
printf '0abcd1\tmaybe\n' >"$tmp/bad.txt"
run_err "unknown label" 1 "bad.txt:1: label 'maybe' is not a class of the model" \
    "$TFTRAIN" "$P/xor.tfp" --data "$tmp/bad.txt" --heldout "$tmp/bad.txt" -o "$tmp/x.tfw"
run_err "missing data file" 1 "/nonexistent.txt: cannot open" \
    "$TFTRAIN" "$P/xor.tfp" --data /nonexistent.txt --heldout /nonexistent.txt -o "$tmp/x.tfw"
run_err "resume from a text file" 1 "tftrain: $tmp/bad.txt is a text file, not a weight file" \
    "$TFTRAIN" --resume "$tmp/bad.txt" --task xor -o "$tmp/x.tfw"
# issue 24's fault 10: a --teacher that is text says so once (it said it twice).
run_err "a teacher that is a text file" 1 "tftrain: $tmp/bad.txt is a text file, not a weight file" \
    "$TFTRAIN" "$P/histogram_student.tfp" --teacher "$tmp/bad.txt" -o "$tmp/x.tfw"
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw"
run_err "a compiled (not learned) weight file" 1 "adder.tfw holds a compiled model, not a learned one (to fine-tune it: tftrain --init " \
    "$TFTRAIN" "$tmp/adder.tfw" --task xor -o "$tmp/x.tfw"
run_err "resume without a checkpoint" 1 "scinit.tfw holds no optimizer state and there is no checkpoint" \
    "$TFTRAIN" --resume "$tmp/scinit.tfw" --task secret-code -o "$tmp/x.tfw"
run_err "generated examples too long" 1 "task example '0" \
    "$TFTRAIN" "$P/xor.tfp" --task xor:20 -o "$tmp/x.tfw"
head -c 100 "$tmp/r1.tfw" >"$tmp/trunc.tfw"
run_err "resume from a truncated file" 1 "tftrain: $tmp/trunc.tfw: " \
    "$TFTRAIN" --resume "$tmp/trunc.tfw" --task xor -o "$tmp/x.tfw"
[ ! -e "$tmp/x.tfw" ]
check "no output file after a failure" $?


# ---- conventions (issue 13) --------------------------------------------------
v=$("$TFTRAIN" --version 2>/dev/null | head -1)
[[ "$v" =~ ^tftrain\ \(tfc\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
check "tftrain --version (got '$v')" $?
"$TFTRAIN" --help | grep -q "^exit status: 0 "
check "tftrain --help lists the exit codes" $?
run_err "an unknown option before another" 2 "tftrain: unknown option '--bogus'" \
    "$TFTRAIN" "$P/xor.tfp" --bogus --task xor
run_err "a flag given a value" 2 "tftrain: --quiet takes no value" "$TFTRAIN" "$P/xor.tfp" --task xor --quiet=1
run_err "a value missing at the end" 2 "tftrain: --lr needs a value" "$TFTRAIN" "$P/xor.tfp" --task xor --lr
"$TFTRAIN" "$P/binary_add.tfp" --task=binary-add:3 --train-size=48 --heldout-size=16 --quiet --steps=40 \
    --output="$tmp/eq.tfw" >/dev/null && cmp -s "$tmp/r1.tfw" "$tmp/eq.tfw"
check "--opt=value trains what --opt value trains" $?
"$TFTRAIN" "${common[@]}" --steps 40 -o "$tmp/dd.tfw" -- "$P/binary_add.tfp" >/dev/null && cmp -s "$tmp/r1.tfw" "$tmp/dd.tfw"
check "the program after --" $?
run_err "--resume given a program" 1 "tftrain: $P/binary_add.tfp is a program source, not a weight file" \
    "$TFTRAIN" --resume "$P/binary_add.tfp" --task binary-add:3

# CRLF data files train as LF ones.
sed 's/$/\r/' "$tmp/ba/train.txt" >"$tmp/ba/train_crlf.txt"
sed 's/$/\r/' "$tmp/ba/heldout.txt" >"$tmp/ba/heldout_crlf.txt"
"$TFTRAIN" "$P/binary_add.tfp" --data "$tmp/ba/train.txt" --heldout "$tmp/ba/heldout.txt" --steps 20 --quiet \
    -o "$tmp/lf.tfw" >/dev/null &&
    "$TFTRAIN" "$P/binary_add.tfp" --data "$tmp/ba/train_crlf.txt" --heldout "$tmp/ba/heldout_crlf.txt" \
        --steps 20 --quiet -o "$tmp/crlf.tfw" >/dev/null && same_tensors "$tmp/lf.tfw" "$tmp/crlf.tfw"
check "CRLF data files train the same model as LF ones" $?

# The output is checked before training: nothing is printed, no step runs.
"$TFTRAIN" "$P/binary_add.tfp" --task binary-add:3 --train-size 48 --heldout-size 16 --steps 100000 \
    -o "$tmp/none/x.tfw" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q "^tftrain: $tmp/none/x.tfw: cannot create: No such file or directory$" "$tmp/err"
rc=$?
check "an output in a missing directory is refused before training ($(cat "$tmp/err"))" $rc
cp "$tmp/r1.tfw" "$tmp/ro.tfw"
chmod 444 "$tmp/ro.tfw"
run_err "a read-only output is refused before training" 2 "tftrain: $tmp/ro.tfw is read-only; refusing to replace it" \
    "$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 100000 -o "$tmp/ro.tfw"
cmp -s "$tmp/r1.tfw" "$tmp/ro.tfw"
check "the read-only output is unchanged" $?
run_err "-o the training data itself" 2 "tftrain: $tmp/ba/train_crlf.txt is $tmp/ba/train_crlf.txt itself; refusing" \
    "$TFTRAIN" "$P/binary_add.tfp" --data "$tmp/ba/train_crlf.txt" --heldout "$tmp/ba/heldout.txt" -o "$tmp/ba/train_crlf.txt"
if [ -w /dev/full ]; then
    "$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 5 -o "$tmp/full.tfw" >/dev/full 2>"$tmp/err"
    rc=$?
    [ $rc -eq 3 ] && grep -q "tftrain: error writing standard output: No space left on device" "$tmp/err"
    check "tftrain to a full disk: exit 3 and a message" $?
fi

# --progress: a "\r"-updated line on stderr with the elapsed time, ending in a newline.
"$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 40 --progress -o "$tmp/p.tfw" >/dev/null 2>"$tmp/err" &&
    [ "$(head -c 1 "$tmp/err")" = $'\r' ] && [ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" = '\n' ] &&
    tr '\r' '\n' <"$tmp/err" | tail -1 | grep -q '^40 steps, [0-9]* examples/s, [0-9.]* s *$' &&
    cmp -s "$tmp/r1.tfw" "$tmp/p.tfw"
check "--progress: the final line on stderr, the same model" $?

# Ctrl-C (SIGINT) during training saves a checkpoint and exits 130; resuming
# it ends where an uninterrupted run ends. SIGTERM ends tftrain at once and
# leaves nothing behind. (set -m: a background job that does not ignore
# SIGINT; the signal is sent once the progress line shows training.)
train_until_signal() { # train_until_signal SIGNAL OUT: sets rc
    set -m
    "$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps 100000000 --progress -o "$2" \
        >"$tmp/sig.out" 2>"$tmp/sig.err" &
    local pid=$!
    set +m
    for _ in $(seq 1 6000); do
        grep -q "ETA" "$tmp/sig.err" && break
        sleep 0.1
    done
    kill "-$1" "$pid"
    wait "$pid"
    rc=$?
}
train_until_signal INT "$tmp/int.tfw"
expect "SIGINT: exit 130" 130 $rc
k=$(sed -n 's/.*tftrain: interrupted after step \([0-9]*\) of 100000000; saved a checkpoint to .*int\.ckpt\.tfw .*/\1/p' "$tmp/sig.err")
[ -n "$k" ] && [ "$k" -gt 0 ]
rc=$?
check "SIGINT: says at which step and where it saved ($(tr '\r' '|' <"$tmp/sig.err"))" $rc
"$TFTRAIN" --resume "$tmp/int.tfw" "${common[@]}" --steps $((k + 7)) -o "$tmp/int_resumed.tfw" >/dev/null &&
    "$TFTRAIN" "$P/binary_add.tfp" "${common[@]}" --steps $((k + 7)) -o "$tmp/int_straight.tfw" >/dev/null &&
    same_tensors "$tmp/int_resumed.tfw" "$tmp/int_straight.tfw"
check "SIGINT: the checkpoint resumes to the uninterrupted run, bit for bit" $?
train_until_signal TERM "$tmp/term.tfw"
expect "SIGTERM: killed by the signal" 143 $rc
[ ! -e "$tmp/term.tfw" ] && [ -z "$(ls "$tmp" | grep '\.tmp\.')" ]
check "SIGTERM: no output and no temporary file left" $?

# The model block's diagnostics.
printf 'vocab "01";\nmodel { d_model 8; heads 3; max_len 4; predict next_token; dropout 2; }\n' >"$tmp/m.tfp"
"$TFC" "$tmp/m.tfp" -o "$tmp/m.tfw" 2>"$tmp/err"
expect "tfc rejects a bad model block" 1 $?
grep -q "m.tfp:2:.*error: dropout must be a number from 0 up to (not including) 1" "$tmp/err"
check "dropout out of range is reported" $?
printf 'vocab "01";\nmodel { d_model 8; heads 3; max_len 4; predict next_token; }\n' >"$tmp/m.tfp"
"$TFC" "$tmp/m.tfp" -o "$tmp/m.tfw" 2>"$tmp/err"
grep -q "error: d_model 8 is not a multiple of the number of heads 3" "$tmp/err"
check "heads not dividing d_model is reported" $?
printf 'vocab "01";\nmodel { d_model 8; max_len 4; predict next_token; layer 2; }\n' >"$tmp/m.tfp"
"$TFC" "$tmp/m.tfp" -o "$tmp/m.tfw" 2>"$tmp/err"
grep -q "error: unknown model setting 'layer'" "$tmp/err" && grep -q "^hint: the settings are" "$tmp/err"
check "an unknown setting is reported with the list" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
