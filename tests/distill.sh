#!/usr/bin/env bash
# distill.sh TFTRAIN TFRUN TFC: distillation (docs/training.md,
# "Distillation"). A learned student learns compiled histogram.tfp from the
# teacher's own labels, one head matching the teacher's attention; a
# generating teacher labels a file of prompts, a classifier its inputs; the
# command line's errors.
set -u
TFTRAIN=$1
TFRUN=$2
TFC=$3
source "$(dirname "$0")/lib.sh"

"$TFC" "$P/histogram.tfp" -o "$tmp/hist.tfw" 2>"$tmp/err"
check "tfc histogram.tfp: $(cat "$tmp/err")" $?
"$TFC" "$P/mul_digit.tfp" -o "$tmp/mul.tfw" 2>/dev/null
check "tfc mul_digit.tfp" $?

# The histogram, distilled: every position's count from the teacher; the
# student's one head learns the teacher's Count head (0.0 = 0.0). An
# untrained student scores 0.5% and a total-variation distance of 0.58; a
# student trained without matching follows the head far less closely.
hist() { # hist WEIGHT OUT
    "$TFTRAIN" "$P/histogram_student.tfp" --teacher "$tmp/hist.tfw" --teacher-inputs random:8:abcd \
        --train-size 2000 --heldout-size 200 --batch-size 32 --lr 3e-3 --cosine --steps 800 \
        --match-heads 0.0=0.0 --match-weight "$1" --quiet -o "$2"
}
hist 1 "$tmp/hs.tfw" >"$tmp/hs.txt"
check "tftrain --teacher hist.tfw" $?
acc=$(sed -n 's/^held-out accuracy \([0-9.]*\)%.*/\1/p' "$tmp/hs.txt")
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }'
check "distilled histogram: held-out accuracy against the teacher >= 90% (got '$acc')" $?
tv=$(sed -n 's/^matched head 0.0 = teacher 0.0: mean total-variation distance \([0-9.]*\) .*/\1/p' "$tmp/hs.txt")
awk -v d="$tv" 'BEGIN { exit !(d != "" && d < 0.1) }'
check "matched head follows the teacher's: distance < 0.1 (got '$tv')" $?
hist 0 "$tmp/hs0.tfw" >"$tmp/hs0.txt"
tv0=$(sed -n 's/^matched head 0.0 = teacher 0.0: mean total-variation distance \([0-9.]*\) .*/\1/p' "$tmp/hs0.txt")
awk -v d="$tv" -v d0="$tv0" 'BEGIN { exit !(d0 != "" && d0 > 2 * d) }'
check "without the pattern loss the head is further away ($tv0 vs $tv)" $?
# The student runs like the teacher: read at every position after the BOS.
for p in '^abcab' '^dddda' '^abcdabca' '^a'; do
    want=$("$TFRUN" "$tmp/hist.tfw" "$p")
    got=$("$TFRUN" "$tmp/hs.tfw" "$p")
    [ "$got" = "$want" ]
    check "student and teacher agree on $p (student '$got', teacher '$want')" $?
done
grep -aq '\\"teacher\\":\\"[^"]*hist.tfw\\",\\"teacher_inputs\\":\\"random:8:abcd\\",\\"match_heads\\":\\"0.0=0.0\\"' "$tmp/hs.tfw"
check "made_by records the teacher, the inputs and the matched heads" $?
# The same command, the same file.
hist 1 "$tmp/hs2.tfw" >/dev/null && cmp -s "$tmp/hs.tfw" "$tmp/hs2.tfw"
check "distillation is deterministic" $?

# A generating teacher labels a file of prompts with its continuation.
cat >"$tmp/mul_student.tfp" <<'P'
vocab "^0123456789*=";
generate 9;
model { d_model 16; layers 1; heads 2; d_ff 16; norm pre; max_len 24; predict next_token; seed 1; }
P
printf '^7*14285714=\n^3*00000012=\n^9*99999999=\n^0*12345678=\n^5*00000001=\n' >"$tmp/prompts.txt"
"$TFTRAIN" "$tmp/mul_student.tfp" --teacher "$tmp/mul.tfw" --teacher-inputs "$tmp/prompts.txt" \
    --heldout-size 2 --steps 2 --match-heads 0.1=0.0 --quiet --write-data "$tmp/mul" \
    -o "$tmp/ms.tfw" >"$tmp/ms.txt"
check "tftrain --teacher mul.tfw --teacher-inputs FILE" $?
while read -r p; do
    out=$("$TFRUN" "$tmp/mul.tfw" "$p")
    want=$(printf '%s\t%s' "$p" "${out#"$p"}")
    grep -qxF "$want" "$tmp/mul/train.txt" "$tmp/mul/heldout.txt"
    check "the teacher's continuation is the label: '$out'" $?
done <"$tmp/prompts.txt"
n=$(cat "$tmp/mul/train.txt" "$tmp/mul/heldout.txt" | wc -l)
[ "$n" -eq 5 ] && [ "$(wc -l <"$tmp/mul/heldout.txt")" -eq 2 ]
check "five prompts: two held out, three trained on (got $n)" $?

# A classifier teaches too (a trained one: seed 002's xor): its class is the label.
"$TFTRAIN" "$P/xor.tfp" --task xor:4 --steps 300 --quiet -o "$tmp/xor_teacher.tfw" >/dev/null
check "tftrain xor (the teacher)" $?
"$TFTRAIN" "$P/xor.tfp" --teacher "$tmp/xor_teacher.tfw" --teacher-inputs random:6 --train-size 500 \
    --heldout-size 50 --steps 1 --quiet --write-data "$tmp/xor" -o "$tmp/xs.tfw" >/dev/null
check "tftrain --teacher xor_teacher.tfw" $?
head -5 "$tmp/xor/heldout.txt" >"$tmp/xor5.txt"
while IFS=$'\t' read -r input label; do
    got=$("$TFRUN" "$tmp/xor_teacher.tfw" "$input" | cut -f2)
    [ -n "$input" ] && [ "$got" = "$label" ]
    check "the teacher's class is the label: '$input' -> '$label' (teacher '$got')" $?
done <"$tmp/xor5.txt"

# Errors: one line, exit 1 (bad files and models) or 2 (usage).
err_case() { # err_case NAME WANT_STATUS PATTERN ARGS...
    local name=$1 want=$2 pat=$3
    shift 3
    "$TFTRAIN" "$@" -o "$tmp/e.tfw" >/dev/null 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pat" "$tmp/err"
    check "$name: exit $rc (want $want), '$(cat "$tmp/err")'" $?
}
S=$P/histogram_student.tfp
printf 'vocab "^abcd0123456789";\nbos %s;\nmodel { d_model 8; max_len 17; attention bidirectional; predict every_position; }\n' "'^'" >"$tmp/small_vocab.tfp"
err_case "incompatible vocabulary" 1 "incompatible vocabularies: the teacher's token 'A' is not in the student's" \
    "$tmp/small_vocab.tfp" --teacher "$tmp/hist.tfw"
printf 'vocab "^abcd0123456789ABCDEFG";\nmodel { d_model 8; max_len 17; predict next_token; }\n' >"$tmp/next.tfp"
err_case "a generating student for an every-position teacher" 1 "declare \`predict every_position\`" \
    "$tmp/next.tfp" --teacher "$tmp/hist.tfw"
err_case "the teacher is a program" 1 "is a program source, not a weight file" \
    "$S" --teacher "$P/histogram.tfp"
printf 'not a model\0\1\2' >"$tmp/junk.tfw"
err_case "the teacher is not a weight file" 1 "junk.tfw" "$S" --teacher "$tmp/junk.tfw"
err_case "bad head pairs" 2 "bad head pairs '0.0'" "$S" --teacher "$tmp/hist.tfw" --match-heads 0.0
err_case "bad head pairs (trailing comma)" 2 "bad head pairs" "$S" --teacher "$tmp/hist.tfw" --match-heads 0.0=0.0,
# sscanf's %d took these (4294967296 wrapped to layer 0, spaces and signs
# skipped): each is refused.
for spec in 4294967296.0=0.0 "0. 0=0.0" 0.-0=0.0 +0.0=0.0 " 0.0=0.0" 0.0=0.0x 0.0==0.0 0x0.0=0.0; do
    err_case "bad head pairs ($spec)" 2 "bad head pairs '$spec'" "$S" --teacher "$tmp/hist.tfw" --match-heads "$spec"
done
err_case "five head pairs" 2 "at most 4" "$S" --teacher "$tmp/hist.tfw" \
    --match-heads 0.0=0.0,0.0=0.0,0.0=0.0,0.0=0.0,0.0=0.0
err_case "no such student layer" 1 "the student has no attention layer 3 (it has 1" \
    "$S" --teacher "$tmp/hist.tfw" --match-heads 3.0=0.0
err_case "no such teacher head" 1 "the teacher's attention layer 0 has no head 2 (it has 1)" \
    "$S" --teacher "$tmp/hist.tfw" --match-heads 0.0=0.2
err_case "--match-heads without --teacher" 2 "needs --teacher" "$S" --task xor --match-heads 0.0=0.0
err_case "--teacher with --task" 2 "give one of" "$S" --task xor --teacher "$tmp/hist.tfw"
err_case "inputs too long" 1 "inputs of 20 tokens after the BOS do not fit: at most 16" \
    "$S" --teacher "$tmp/hist.tfw" --teacher-inputs random:20
err_case "a character outside the teacher's vocabulary" 1 "'x' of random:...:abx is not in the teacher's vocabulary" \
    "$S" --teacher "$tmp/hist.tfw" --teacher-inputs random:4:abx
err_case "a domain too small" 1 "found only 4 distinct held-out inputs" \
    "$S" --teacher "$tmp/hist.tfw" --teacher-inputs random:1:abcd --heldout-size 10
printf '^ab\nab\n' >"$tmp/nobos.txt"
err_case "a prompt without the BOS" 1 "nobos.txt:2: the input does not start with the BOS '^'" \
    "$S" --teacher "$tmp/hist.tfw" --teacher-inputs "$tmp/nobos.txt"
finish
