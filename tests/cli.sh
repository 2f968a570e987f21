#!/usr/bin/env bash
# cli.sh TFC TFRUN: the command line of tfc and tfrun: flags, default output
# names, output lines, error messages and exit codes.
set -u
TFC=$1
TFRUN=$2
SRC=${TF_SOURCE_DIR:?TF_SOURCE_DIR must point at the source tree}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# expect NAME WANT_STATUS WANT_STDOUT WANT_STDERR_SUBSTRING -- COMMAND...
expect() {
    local name=$1 want_status=$2 want_out=$3 want_err=$4
    shift 5
    local out err status
    out=$("$@" 2>"$tmp/stderr")
    status=$?
    err=$(cat "$tmp/stderr")
    # A wanted stdout starting with '~' only has to appear in stdout.
    local out_ok=1
    if [ "${want_out:0:1}" = "~" ]; then
        [[ "$out" == *"${want_out:1}"* ]] || out_ok=0
    else
        [ "$out" = "$want_out" ] || out_ok=0
    fi
    if [ "$status" != "$want_status" ] || [ "$out_ok" = 0 ] ||
        { [ -n "$want_err" ] && [[ "$err" != *"$want_err"* ]]; } ||
        { [ -z "$want_err" ] && [ -n "$err" ]; }; then
        echo "FAIL: $name"
        echo "  status $status (want $want_status)"
        echo "  stdout: $out"
        echo "  want:   $want_out"
        echo "  stderr: $err"
        echo "  want stderr containing: $want_err"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
}

W=$tmp/adder.tfw
expect "tfc compiles the adder" 0 "" "" -- "$TFC" "$SRC/programs/adder.tfp" -o "$W"
[ -s "$W" ] && passed=$((passed + 1)) || { echo "FAIL: no weight file written"; failed=$((failed + 1)); }

cp "$SRC/programs/adder.tfp" "$tmp/beside.tfp"
expect "tfc writes beside the source by default" 0 "" "" -- "$TFC" "$tmp/beside.tfp"
[ -s "$tmp/beside.tfw" ] && passed=$((passed + 1)) || { echo "FAIL: no beside.tfw"; failed=$((failed + 1)); }
cmp -s "$W" "$tmp/beside.tfw" && { echo "FAIL: source_name should differ"; failed=$((failed + 1)); } || passed=$((passed + 1))

summary=$("$TFC" "$SRC/programs/adder.tfp" -o "$tmp/v.tfw" -v)
if [[ "$summary" == "$tmp/v.tfw: 36 layers (11 attention with 11 heads, 25 MLP: widest "*"), d_model 80, "*" tensors, "*" parameters"$'\n'"scheduling undone: the model with one layer per op has fewer parameters"$'\n'"proven against the program (tfprove $tmp/v.tfw prints each op's margin)" ]]; then
    passed=$((passed + 1))
else
    echo "FAIL: tfc -v summary: $summary"; failed=$((failed + 1))
fi
# Tensor names carry the index of the layer tfinfo lists: a tensor one layer
# uses is layers.<i>.<role>, one several layers use shared.<k>.<role>; every
# shared name is used by two layers or more, every layers.<i> name by layer i only.
"$TF_BUILD_DIR/tfinfo" "$W" >"$tmp/info.txt"
bad=$(awk '/^ +[0-9]+ [^ ]+ +(attention|mlp|norm) / { layer = $1 }
    $2 ~ /^layers\./ { split($2, p, "."); if (p[2] != layer) print layer ": " $2 }
    $2 ~ /^shared\./ { if (!(($2, layer) in seen)) { seen[$2, layer] = 1; users[$2]++ } }
    END { for (t in users) if (users[t] < 2) print t " has one layer" }' "$tmp/info.txt" 2>&1)
n=$(grep -cE '^ +(query|key|value|output|fc[12]_(weight|bias)) +(layers|shared)\.' "$tmp/info.txt")
if [ -z "$bad" ] && [ "$n" -gt 36 ] && grep -q ' layers\.35\.\| shared\.' "$tmp/info.txt"; then
    passed=$((passed + 1))
else
    echo "FAIL: tensor names and layer indices ($n tensor lines): $bad"; failed=$((failed + 1))
fi
# __metadata__.made_by: the tool, its version and the options that shaped the file.
made_by() { # made_by FILE: the made_by string of a weight file's header
    "${PYTHON:-python3}" -c 'import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]
print(json.loads(d[8:8 + n])["__metadata__"].get("made_by", ""))' "$1"
}
"$TFC" "$SRC/programs/adder.tfp" -O0 -o "$tmp/o0.tfw"
# The adder at -O keeps one layer per op (scheduled, it would be larger:
# compiler/compile.c, schedule), which made_by says as --no-schedule would.
expect "made_by records tfc -O" 0 '{"tool":"tfc","version":"0.1.0","options":{"O":1,"schedule":false}}' "" -- made_by "$W"
expect "tfinfo prints made_by" 0 '~made by: {"tool":"tfc","version":"0.1.0","options":{"O":1,"schedule":false}}' "" -- "$TF_BUILD_DIR/tfinfo" "$W"
"$TFC" "$SRC/programs/histogram.tfp" -o "$tmp/hist-made.tfw"
expect "made_by records tfc -O (a scheduled program)" 0 '{"tool":"tfc","version":"0.1.0","options":{"O":1,"numbers":["out"]}}' "" -- made_by "$tmp/hist-made.tfw"
"$TFC" --no-schedule "$SRC/programs/adder.tfp" -o "$tmp/adder-ns.tfw"
cmp -s "$W" "$tmp/adder-ns.tfw" && passed=$((passed + 1)) ||
    { echo "FAIL: the adder at -O is the file --no-schedule writes"; failed=$((failed + 1)); }
expect "made_by records tfc -O0" 0 '{"tool":"tfc","version":"0.1.0","options":{"O":0}}' "" -- made_by "$tmp/o0.tfw"
expect "tfc without arguments" 2 "" "tfc: no program given" -- "$TFC"
expect "tfc unknown option" 2 "" "tfc: unknown option '--frobnicate'" -- "$TFC" --frobnicate x.tfp
expect "tfc -o without a name" 2 "" "tfc: -o needs a value" -- "$TFC" "$SRC/programs/adder.tfp" -o
expect "tfc missing file" 1 "" "tfc: $tmp/nope.tfp: cannot open: No such file or directory" -- "$TFC" "$tmp/nope.tfp"
# A directory was "No such device" (issue 24).
expect "tfc a directory" 1 "" "tfc: $tmp: not a regular file (a directory)" -- "$TFC" "$tmp"
expect "tfc unwritable output" 2 "" "tfc: " -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/no/such/dir/x.tfw"
expect "tfc --help" 0 "$("$TFC" --help)" "" -- "$TFC" --help

expect "the README's line" 0 "0999+0111=0111" "" -- "$TFRUN" "$W" "0999+0111="
expect "-n 10 as the seed's demo" 0 "0999+0111=0111000000" "" -- "$TFRUN" "$W" -n 10 "0999+0111="
expect "options after the prompt" 0 "0999+0111=0111000000" "" -- "$TFRUN" "$W" "0999+0111=" -n 10
expect "-n 0" 0 "0123+0456=" "" -- "$TFRUN" "$W" -n 0 "0123+0456="
# Nothing writes the output register, so every step picks token 0: '\n'.
printf 'vocab "\\na"; token o; output o; generate 2;\n' >"$tmp/nl.tfp"
"$TFC" --no-prove "$tmp/nl.tfp" -o "$tmp/nl.tfw"
expect "a generated newline is printed escaped" 0 'a\n\n' "" -- "$TFRUN" "$tmp/nl.tfw" "a"
expect "prompt outside the vocabulary" 1 "" "tfrun: prompt: character 'a' at index 8 is not in the vocabulary" \
    -- "$TFRUN" "$W" "0999+011a="
expect "empty prompt" 1 "" "tfrun: prompt: empty prompt" -- "$TFRUN" "$W" ""
# The 4th token is never fed back: 97 + 3 positions fit in 100, 98 + 3 do not.
long=$(printf '0%.0s' $(seq 1 98))
expect "too long for the position encoding" 1 "" \
    "tfrun: prompt: 98 prompt tokens plus 4 to generate exceed the 100 positions of the position encoding" \
    -- "$TFRUN" "$W" "$long"
expect "longest prompt that fits" 0 "${long:1}0000" "" -- "$TFRUN" "$W" "${long:1}"
expect "missing weight file" 1 "" "tfrun: $tmp/missing.tfw: cannot open" -- "$TFRUN" "$tmp/missing.tfw" "1+1="
head -c 100 "$W" >"$tmp/truncated.tfw"
expect "truncated weight file" 1 "" "tfrun: $tmp/truncated.tfw: " -- "$TFRUN" "$tmp/truncated.tfw" "1+1="
printf 'hello, I am not a weight file at all' >"$tmp/foreign.tfw"
expect "foreign file" 1 "" "tfrun: $tmp/foreign.tfw is a text file, not a weight file" -- "$TFRUN" "$tmp/foreign.tfw" "1+1="
head -c 100 /dev/zero >"$tmp/zeros.tfw"
expect "a binary foreign file" 1 "" "tfrun: $tmp/zeros.tfw: " -- "$TFRUN" "$tmp/zeros.tfw" "1+1="
expect "no prompt" 2 "" "tfrun: no prompt given" -- "$TFRUN" "$W"
expect "no weights" 2 "" "tfrun: no weight file given" -- "$TFRUN"
expect "bad -n" 2 "" "tfrun: -n wants a non-negative number, not 'x'" -- "$TFRUN" "$W" -n x "1+1="
expect "bad --batch-size" 2 "" "tfrun: --batch-size wants a number from 1 to 4096, not '0'" -- "$TFRUN" "$W" --batch - --batch-size 0
printf '' >"$tmp/empty.txt"
expect "--batch on an empty file" 0 "" "" -- "$TFRUN" "$W" --batch "$tmp/empty.txt"
expect "prompt and --batch" 2 "" "tfrun: give either a prompt or --batch/--check, not both" -- "$TFRUN" "$W" "1+1=" --batch -
expect "unknown option" 2 "" "tfrun: unknown option '--fast'" -- "$TFRUN" "$W" --fast "1+1="

printf '0999+0111=\n0001+0002=\n0500+0499=\n' >"$tmp/prompts.txt"
expect "--batch FILE" 0 "$(printf '0999+0111=0111\n0001+0002=3000\n0500+0499=9990')" "" \
    -- "$TFRUN" "$W" --batch "$tmp/prompts.txt"
expect "--batch - reads standard input" 0 "$(printf '0999+0111=0111\n0001+0002=3000\n0500+0499=9990')" "" \
    -- bash -c "\"$TFRUN\" \"$W\" --batch - <\"$tmp/prompts.txt\""
expect "--batch-size 2 gives the same lines" 0 "$(printf '0999+0111=0111\n0001+0002=3000\n0500+0499=9990')" "" \
    -- "$TFRUN" "$W" --batch "$tmp/prompts.txt" --batch-size 2
printf '0999+0111=\n09x9+0111=\n\n0001+0002=\n' >"$tmp/bad.txt"
expect "--batch keeps going past bad lines" 1 "$(printf '0999+0111=0111\n0001+0002=3000')" \
    "tfrun: $tmp/bad.txt:2: character 'x' at index 2 is not in the vocabulary" -- "$TFRUN" "$W" --batch "$tmp/bad.txt"
expect "--batch names an empty line" 1 "$(printf '0999+0111=0111\n0001+0002=3000')" \
    "tfrun: $tmp/bad.txt:3: empty prompt" -- "$TFRUN" "$W" --batch "$tmp/bad.txt"
expect "--batch missing file" 1 "" "tfrun: cannot open '$tmp/none.txt'" -- "$TFRUN" "$W" --batch "$tmp/none.txt"

expect "--threads 1 and --no-cache give the same lines" 0 \
    "$(printf '0999+0111=0111\n0001+0002=3000\n0500+0499=9990')" "" \
    -- "$TFRUN" "$W" --batch "$tmp/prompts.txt" --threads 1 --no-cache --batch-size 1
expect "bad --threads" 2 "" "tfrun: --threads wants a number from 1 to 64, not '0'" \
    -- "$TFRUN" "$W" --batch - --threads 0
expect "--batch and --check together" 2 "" "tfrun: give one --batch or --check file" \
    -- "$TFRUN" "$W" --batch - --check -

# --check: prompt<TAB>expected completion.
printf '0999+0111=\t0111\n0001+0002=\t3000\n' >"$tmp/good.tsv"
expect "--check passes" 0 "~2 passed, 0 failed (2 cases in" "" -- "$TFRUN" "$W" --check "$tmp/good.tsv"
printf '0999+0111=\t0111\n0001+0002=\t3001\n0500+0499=\t9990\n' >"$tmp/wrong.tsv"
expect "--check reports a failure in full and exits 1" 1 \
    "~FAIL line 2: 0001+0002= -> 3000 (expected 3001)" "" -- "$TFRUN" "$W" --check "$tmp/wrong.tsv"
expect "--check counts" 1 "~2 passed, 1 failed (3 cases in" "" -- "$TFRUN" "$W" --check "$tmp/wrong.tsv"
printf '0999+0111=\t0111\n0001+0002=3000\n' >"$tmp/notab.tsv"
expect "--check names a line without a TAB" 1 "~1 passed, 0 failed, 1 bad lines" \
    "tfrun: $tmp/notab.tsv:2: no TAB between the prompt and the expected completion" \
    -- "$TFRUN" "$W" --check "$tmp/notab.tsv"

# General-language runtime features on hand-built models (tests/mkgeneral.c):
# every-position output with a bos and a bidirectional layer, a stop token.
G=$tmp/general
mkdir -p "$G"
expect "mkgeneral writes its models" 0 "" "" -- "${TF_BUILD_DIR:?}/mkgeneral" "$G"
E=$G/every.tfw
S=$G/stop.tfw
expect "every position: one pass, the token after the BOS at each position" 0 "$(printf '^abab\tbcbc')" "" \
    -- "$TFRUN" "$E" "^abab"
expect "every position: a 'c' later in the input changes earlier positions" 0 "$(printf '^abca\txxxx')" "" \
    -- "$TFRUN" "$E" "^abca"
expect "every position: the BOS alone prints nothing after the TAB" 0 "$(printf '^\t')" "" -- "$TFRUN" "$E" "^"
expect "every position: -n changes nothing" 0 "$(printf '^ab\tbc')" "" -- "$TFRUN" "$E" -n 5 "^ab"
expect "every position: --no-cache changes nothing" 0 "$(printf '^ab\tbc')" "" -- "$TFRUN" "$E" --no-cache "^ab"
expect "every position: the input must start with the BOS" 1 "" \
    "tfrun: prompt: the input must start with the beginning-of-sequence token '^'" -- "$TFRUN" "$E" "abc"
long16=$(printf 'a%.0s' $(seq 1 15))
expect "every position: max_len positions fit" 0 "$(printf '^%s\t%s' "$long16" "$(printf 'b%.0s' $(seq 1 15))")" "" \
    -- "$TFRUN" "$E" "^$long16"
expect "every position: one more does not" 1 "" \
    "tfrun: prompt: 17 prompt tokens exceed the 16 positions of the position encoding" -- "$TFRUN" "$E" "^a$long16"
printf '^abab\n^abca\nabc\n^c\n^%s\n^bbb\n' "$long16" >"$G/every.txt"
want_every=$(printf '^abab\tbcbc\n^abca\txxxx\n^c\tx\n^%s\t%s\n^bbb\tccc' "$long16" "$(printf 'b%.0s' $(seq 1 15))")
expect "every position: --batch, mixed lengths, a bad line" 1 "$want_every" \
    "tfrun: $G/every.txt:3: the input must start with the beginning-of-sequence token '^'" \
    -- "$TFRUN" "$E" --batch "$G/every.txt"
expect "every position: --batch-size 1 --threads 1 gives the same lines" 1 "$want_every" "every.txt:3" \
    -- "$TFRUN" "$E" --batch "$G/every.txt" --batch-size 1 --threads 1
expect "every position: --batch-size 2 --threads 3 gives the same lines" 1 "$want_every" "every.txt:3" \
    -- "$TFRUN" "$E" --batch "$G/every.txt" --batch-size 2 --threads 3
printf '^abab\tbcbc\n^abca\txxxx\n^\t\n^ba\tcb\n^ab\tbb\n' >"$G/every.tsv"
expect "every position: --check compares the printed tokens" 1 "~FAIL line 5: ^ab -> bc (expected bb)" "" \
    -- "$TFRUN" "$E" --check "$G/every.tsv"
expect "every position: --check counts" 1 "~4 passed, 1 failed (5 cases in" "" \
    -- "$TFRUN" "$E" --check "$G/every.tsv"
expect "every position: --trace shows the categorical register and the output row" 0 \
    "~    rot               .    'b'    'c'" "" -- "$TFRUN" "$E" --trace "^ab"
expect "every position: --trace ends with the output" 0 "~$(printf '    output            -      b      c\n^ab\tbc')" "" \
    -- "$TFRUN" "$E" --trace "^ab"

expect "stop token: generation stops before it" 0 "abc" "" -- "$TFRUN" "$S" "a"
expect "stop token: at once" 0 "c" "" -- "$TFRUN" "$S" "c"
expect "stop token: -n is the most" 0 "ab" "" -- "$TFRUN" "$S" -n 1 "a"
expect "stop token: the position encoding ends generation" 0 "aaaab" "" -- "$TFRUN" "$S" "aaaa"
expect "stop token: --no-cache" 0 "abc" "" -- "$TFRUN" "$S" --no-cache "a"
expect "stop token: a prompt longer than max_len" 1 "" \
    "tfrun: prompt: 5 prompt tokens exceed the 4 positions of the position encoding" -- "$TFRUN" "$S" "aaaaa"
printf 'a\nc\naaaa\nab\nb\nbbb\n' >"$G/stop.txt"
want_stop=$(printf 'abc\nc\naaaab\nabc\nbc\nbbbc')
expect "stop token: --batch, each prompt stops on its own" 0 "$want_stop" "" -- "$TFRUN" "$S" --batch "$G/stop.txt"
expect "stop token: --batch-size 1 gives the same lines" 0 "$want_stop" "" \
    -- "$TFRUN" "$S" --batch "$G/stop.txt" --batch-size 1 --threads 1
printf 'a\tbc\nc\t\naaaa\tb\nab\tc\nbbb\tc$\n' >"$G/stop.tsv"
expect "stop token: --check" 1 "~FAIL line 5: bbb -> c (expected c\$)" "" -- "$TFRUN" "$S" --check "$G/stop.tsv"
expect "stop token: --check counts" 1 "~4 passed, 1 failed" "" -- "$TFRUN" "$S" --check "$G/stop.tsv"
expect "stop token: --trace-all runs the steps until the stop" 0 "~step 2: 3 positions \"abc\" -> next \$" "" \
    -- "$TFRUN" "$S" --trace-all "a"
expect "stop token: --step past the stop" 1 "" "tfrun: --step 3: generation stopped; the steps run are 0 to 2" \
    -- "$TFRUN" "$S" --step 3 --trace "a"

# Run-time checks (tests/mkgeneral.c's tie.tfw): b must hold one value after
# layer 0 at every position; a tie of two letters does not.
T=$G/tie.tfw
tie_err="tie.tfp:2: Aggregate -> b: position 2 does not hold one value within 0.01 ('a' 0.50, 'b' 0.50); the compiler could not prove it"
# The BOS position holds nothing in b (as in compiled programs): not checked.
expect "check: one value everywhere runs" 0 "$(printf '^aaa\tbbb')" "" -- "$TFRUN" "$T" "^aaa"
expect "check: 0.75 and 0.25 are no value (issue 22)" 1 "" \
    "tfrun: tie.tfp:2: Aggregate -> b: position 4 does not hold one value within 0.01 ('a' 0.75, 'b' 0.25)" \
    -- "$TFRUN" "$T" "^aaab"
expect "check: a tie is an error naming the op's line, the position and the values" 1 "" \
    "tfrun: $tie_err" -- "$TFRUN" "$T" "^ab"
expect "check: 2/3 and 1/3 is not one value" 1 "" \
    "tfrun: tie.tfp:2: Aggregate -> b: position 3 does not hold one value within 0.01 ('a' 0.67, 'b' 0.33)" \
    -- "$TFRUN" "$T" "^aab"
expect "check: the first failing position is named" 1 "" \
    "position 2 does not hold one value within 0.01 ('a' 0.50, 'c' 0.50)" -- "$TFRUN" "$T" "^acbbbb"
expect "check: --no-cache" 1 "" "tfrun: $tie_err" -- "$TFRUN" "$T" --no-cache "^ab"
printf '^aaa\n^ab\n^ccc\n^aaaa\n^ab\n' >"$G/tie.txt"
expect "check: --batch, the failing prompts report, the others run" 1 \
    "$(printf '^aaa\tbbb\n^ccc\taaa\n^aaaa\tbbbb')" "tfrun: $G/tie.txt:2: $tie_err" \
    -- "$TFRUN" "$T" --batch "$G/tie.txt"
expect "check: --batch names every failing line" 1 "~^aaaa" "tfrun: $G/tie.txt:5: $tie_err" \
    -- "$TFRUN" "$T" --batch "$G/tie.txt" --batch-size 1 --threads 3
printf '^aaa\tbbb\n^ab\tbc\n^aaaa\tbbbb\n' >"$G/tie.tsv"
expect "check: --check counts a failed check as a failed case" 1 "~2 passed, 1 failed (3 cases in" "" \
    -- "$TFRUN" "$T" --check "$G/tie.tsv"
expect "check: --check prints the failure" 1 "~FAIL line 2: ^ab: $tie_err (expected bc)" "" \
    -- "$TFRUN" "$T" --check "$G/tie.tsv"
expect "check: --trace shows where it fails, then the error" 1 \
    "~    ! check of b fails: $tie_err" "tfrun: $tie_err" -- "$TFRUN" "$T" --trace "^ab"
expect "check: --trace of a passing input has no failure" 0 "~$(printf '^aaa\tbbb')" "" \
    -- "$TFRUN" "$T" --trace "^aaa"
# The same model generating: each step is checked, and every row of the
# prompt, also those whose output nobody reads.
TG=$G/tie_gen.tfw
expect "check, generating: -n 1" 0 "^ab" "" -- "$TFRUN" "$TG" -n 1 "^a"
expect "check, generating: the second step fails" 1 "" "tfrun: $tie_err" -- "$TFRUN" "$TG" "^a"
expect "check, generating: a prompt row that is not the last fails" 1 "" "tfrun: $tie_err" \
    -- "$TFRUN" "$TG" -n 1 "^abaa"
expect "check, generating: a clean prompt" 0 "^aaaab" "" -- "$TFRUN" "$TG" -n 1 "^aaaa"
expect "check, generating: the generated b mixes with the a's" 1 "" \
    "tfrun: tie.tfp:2: Aggregate -> b: position 5 does not hold one value within 0.01 ('a' 0.80, 'b' 0.20)" \
    -- "$TFRUN" "$TG" "^aaaa"
printf '^a\n^aaaa\n^abaa\n^aa\n' >"$G/tie_gen.txt"
expect "check, generating: --batch" 1 "" "tfrun: $G/tie_gen.txt:4: tie.tfp:2: Aggregate -> b: position 3 does not hold one value within 0.01 ('a' 0.67, 'b' 0.33)" \
    -- "$TFRUN" "$TG" --batch "$G/tie_gen.txt"
expect "check, generating: --batch --no-cache" 1 "" "tfrun: $G/tie_gen.txt:3: $tie_err" \
    -- "$TFRUN" "$TG" --batch "$G/tie_gen.txt" --no-cache --batch-size 1
expect "check, generating: --trace-all traces the failing step" 1 "~step 1: 3 positions \"^ab\"" "tfrun: $tie_err" \
    -- "$TFRUN" "$TG" --trace-all "^a"

# Numbers as outputs (mkgeneral's frac.tfw: the fraction of 'l' so far, a
# scalar output register, no unembed.weight, output_error_bound 1e-06).
F=$G/frac.tfw
expect "number: each position's value, shortest float32 text" 0 "$(printf '^hello\t0 0 0.33333334 0.5 0.4')" "" \
    -- "$TFRUN" "$F" "^hello"
expect "number: the BOS alone prints nothing after the TAB" 0 "$(printf '^\t')" "" -- "$TFRUN" "$F" "^"
printf '^hello\n^llll\nhello\n^hhlhhl\n' >"$G/frac.txt"
expect "number: --batch" 1 "$(printf '^hello\t0 0 0.33333334 0.5 0.4\n^llll\t1 1 1 1\n^hhlhhl\t0 0 0.33333334 0.25 0.2 0.33333334')" \
    "tfrun: $G/frac.txt:3: the input must start with the beginning-of-sequence token '^'" \
    -- "$TFRUN" "$F" --batch "$G/frac.txt"
# issue 27: a number of several digits prints without an exponent (10, not
# 1e+01), one prompt, --batch, --check's failures and the trace alike.
cat >"$G/tens.tfp" <<'EOF'
vocab "^ab"; bos '^'; maxlen 9; cat c; num d;
c: Count(k.tokens == 'a') -> c;
d: Map(c * 10) -> d;
output d at every position;
EOF
"$TFC" "$G/tens.tfp" -o "$G/tens.tfw" 2>/dev/null
# A number is proven within its bound (0.0069 here), not to the float: its
# last digits may depend on the BLAS kernels and on which prompts share a
# product (OPENBLAS_CORETYPE=Prescott prints 20.000061 for ^aab batched with
# ^ab, Haswell 20), so each is compared within the bound, its text for the
# exponent.
out=$("$TFRUN" "$G/tens.tfw" --batch - <<<"$(printf '^ab\n^aab')" 2>&1)
awk -F'\t' 'NR == 1 { want = 10; p = "^ab" } NR == 2 { want = 20; p = "^aab" }
    $1 != p || NF != 2 { bad = 1 }
    { n = split($2, v, " "); if (n != NR + 1) bad = 1
      for (i = 1; i <= n; i++) if (v[i] ~ /[eE]/ || v[i] - want > 0.0069 || want - v[i] > 0.0069) bad = 1 }
    END { exit bad || NR != 2 }' <<<"$out"
if [ $? -eq 0 ]; then passed=$((passed + 1)); else
    echo "FAIL: number: 10 and 20 without an exponent, within the bound: got"
    echo "$out"
    failed=$((failed + 1))
fi
printf '^ab\t10 11\n' >"$G/tens.tsv"
expect "number: --check prints what it got as 10" 1 "~^ab -> 10 10 (expected 10 11)" "" -- "$TFRUN" "$G/tens.tfw" --check "$G/tens.tsv"
expect "number: the trace prints 10" 0 "~    d                 0     10     10" "" -- "$TFRUN" "$G/tens.tfw" --trace "^ab"
# round is Python's: halves to even (issue 22). c * 0.5 for c = 1, 3, 5, 7:
# round(0.5) = 0, round(1.5) = 2, round(2.5) = 2, round(3.5) = 4.
cat >"$G/round.tfp" <<'EOF'
vocab "^ab"; bos '^'; maxlen 9; cat c; num r;
c: Count(k.tokens == 'a') -> c;
r: Map(round(c * 0.5) - round(-c * 0.5)) -> r;
output r at every position;
EOF
"$TFC" "$G/round.tfp" -o "$G/round.tfw" 2>/dev/null
expect "round: halves to even, as Python's round" 0 \
    "$(printf '^a\t0\n^aaa\t4 4 4\n^aaaaa\t4 4 4 4 4\n^aaaaaaa\t8 8 8 8 8 8 8')" "" \
    -- "$TFRUN" "$G/round.tfw" --batch - <<<"$(printf '^a\n^aaa\n^aaaaa\n^aaaaaaa')"
# Within 1e-06 + 1e-6 |e| of 0.4: 0.4000013 is, 0.4000015 is not.
printf '^hello\t0 0 1/3 1/2 2/5\n^hello\t0 0 0.3333333 0.5 0.4000013\n^hello\t0 0 1/3 1/2 0.4000015\n^hello\t0 0 1/3 1/2\n^llll\t1 1 1 1\n^\t\n' >"$G/frac.tsv"
expect "number: --check compares within the bound" 1 "~4 passed, 2 failed (6 cases in" "" \
    -- "$TFRUN" "$F" --check "$G/frac.tsv"
expect "number: --check prints a failure" 1 "~FAIL line 3: ^hello -> 0 0 0.33333334 0.5 0.4 (expected 0 0 1/3 1/2 0.4000015)" "" \
    -- "$TFRUN" "$F" --check "$G/frac.tsv"
expect "number: --check wants as many values as positions" 1 "~FAIL line 4: ^hello -> 0 0 0.33333334 0.5 0.4 (expected 0 0 1/3 1/2)" "" \
    -- "$TFRUN" "$F" --check "$G/frac.tsv"
printf '^hello\t0 0 1/3 1/2 2/5\r\n^ll\t1 1\r\n' >"$G/frac_crlf.tsv"
expect "number: --check with CRLF lines" 0 "~2 passed, 0 failed (2 cases in" "" \
    -- "$TFRUN" "$F" --check "$G/frac_crlf.tsv"
printf '^hel\t0 x 1/3\n^hel\t0 0 1/0\n^l\t1\n' >"$G/frac_bad.tsv"
expect "number: --check names a value that is not a number" 1 "~1 passed, 0 failed, 2 bad lines" \
    "tfrun: $G/frac_bad.tsv:1: expected value 2 'x' is not a number or a fraction p/q" \
    -- "$TFRUN" "$F" --check "$G/frac_bad.tsv"
expect "number: --check refuses a fraction over 0" 1 "~1 passed" \
    "tfrun: $G/frac_bad.tsv:2: expected value 3 '1/0' is not a number or a fraction p/q" \
    -- "$TFRUN" "$F" --check "$G/frac_bad.tsv"
expect "number: --trace shows the scalar as the output does (shortest float32 text)" 0 \
    "~    frac                   0           0           0  0.33333334         0.5         0.4" "" \
    -- "$TFRUN" "$F" --trace "^hello"
expect "number: --trace's result line" 0 \
    "~step 0: 6 positions \"^hello\" -> every position 0 0 0 0.33333334 0.5 0.4" "" \
    -- "$TFRUN" "$F" --trace "^hello"
expect "number: --trace ends with the values" 0 "~$(printf '^hello\t0 0 0.33333334 0.5 0.4')" "" \
    -- "$TFRUN" "$F" --trace "^hello"

TFINFO=$TF_BUILD_DIR/tfinfo
# Issue 13's reproducers: a Map over three categorical registers at maxlen 68 (a
# 1.46 GB file before) and sort at maxlen 65536 (64 GiB) are refused before any
# weight is built, naming the op and the option that raises the limit.
printf 'vocab "^ab"; bos %s; maxlen 68; cat x, y, z, w;\nx: Map(indices) -> x;\ny: Map(indices + 1) -> y;\nz: Map(indices + 2) -> z;\nw: Map(x + y + z) -> w;\noutput tokens;\n' "'^'" >"$tmp/huge_map.tfp"
expect "tfc: a 570-million-parameter Map is refused" 1 "" \
    "huge_map.tfp:5:4: error: this Map becomes a layer of 569645595 parameters, which takes the model past the limit of 67108864 parameters" \
    -- "$TFC" "$tmp/huge_map.tfp" -o "$tmp/huge_map.tfw"
sed 's/maxlen [0-9]*;/maxlen 65536;/' "$SRC/programs/sort.tfp" >"$tmp/huge_sort.tfp"
expect "tfc: sort at maxlen 65536 is refused" 1 "" "error: this selection compares" \
    -- "$TFC" "$tmp/huge_sort.tfp" -o "$tmp/huge_sort.tfw"
# A number as the output (issue 11): frac_prevs of 'l', printed at every
# position; --check within the bound the compiler proved.
printf 'vocab "^helo"; bos %s; maxlen 8; num isl, f;\nisl: Map(tokens == %s ? 1 : 0) -> isl;\nf: Aggregate(k.indices <= q.indices, isl, causal) -> f;\noutput f at every position;\n' "'^'" "'l'" >"$tmp/frac_l.tfp"
expect "general: a num output compiles" 0 "" "" -- "$TFC" "$tmp/frac_l.tfp" -o "$tmp/frac_l.tfw"
# The construction's estimate of this mean (2.85e-06) is less than the
# validator can prove of the weights (3.44e-05: the scores' rounding); tfc
# writes the proven bound, which tfprove proves, and -v says so.
expect "general: tfc writes the output bound it proves" 0 \
    "~proven against the program, the output within 3.44e-05 (the construction's estimate, 2.85e-06, is not proven" "" \
    -- "$TFC" -v "$tmp/frac_l.tfp" -o "$tmp/frac_l.tfw"
expect "general: ... which tfprove proves" 0 "~output f: within 3.44e-05 of the value (the file claims 3.44e-05)" "" \
    -- "$TF_BUILD_DIR/tfprove" "$tmp/frac_l.tfw"
expect "general: a num output prints its values" 0 "$(printf '^hello\t0 0 0.33333334 0.5 0.4')" "" \
    -- "$TFRUN" "$tmp/frac_l.tfw" "^hello"
printf '^hello\t0 0 1/3 1/2 2/5\n' >"$tmp/frac_l.tsv"
expect "general: --check compares numbers within the bound" 0 "~1 passed, 0 failed" "" \
    -- "$TFRUN" "$tmp/frac_l.tfw" --check "$tmp/frac_l.tsv"
# --trace shows every scalar at full precision, in a model whose output is a
# token too (frac_prevs_mean: a numeric mean, then a staircase to a digit).
"$TFC" "$SRC/programs/frac_prevs_mean.tfp" -o "$tmp/frac_mean.tfw"
expect "trace: a scalar register at full precision in a token model" 0 \
    "~    frac                   0           1         0.5  0.33333334        0.25" "" \
    -- "$TFRUN" "$tmp/frac_mean.tfw" --trace "^abcc"
# The layer limit applies outside `repeat` too (issue 13: 250,000 top-level ops).
{ printf 'vocab "ab"; token t; output t;\n'; for i in $(seq 1 100001); do echo 'Clear(t);'; done; } >"$tmp/many_ops.tfp"
expect "tfc: more than 100000 top-level ops" 1 "" "error: the program has more than 100000 ops" \
    -- "$TFC" "$tmp/many_ops.tfp" -o "$tmp/many_ops.tfw"
# Count's two layers are both labelled Count (its second layer is no Map);
# -O0, as -O composes Count's steps with the Map that prints them.
"$TFC" -O0 "$SRC/programs/histogram.tfp" -o "$tmp/hist.tfw"
expect "tfinfo: Count's steps layer is labelled Count" 0 "~hist.steps     mlp       Count" "" \
    -- "$TFINFO" "$tmp/hist.tfw"
expect "tfinfo: categorical register values" 0 "~  rot            categorical 5-7  output  values 'a' 'b' 'c'" "" -- "$TFINFO" "$E"
expect "tfinfo: every-position output" 0 \
    "~generation: every position: one pass, the argmax token at each position after the BOS; unembedding reads rot" "" \
    -- "$TFINFO" "$E"
expect "tfinfo: a model's run-time checks" 0 "~  b              after layer 0  line 2  Aggregate -> b" "" -- "$TFINFO" "$T"
expect "tfinfo: a model that prints numbers" 0 \
    "~generation: every position: one pass, the number frac holds at each position after the BOS (within 1e-06); no unembedding" "" \
    -- "$TFINFO" "$F"
expect "tfinfo: the BOS" 0 "~beginning of sequence: '^' (every input starts with it)" "" -- "$TFINFO" "$E"
expect "tfinfo: the stop token" 0 \
    "~generation: until the stop token '\$' (not printed), at most 10 tokens, greedy; unembedding reads next" "" \
    -- "$TFINFO" "$S"
# Registers that share columns (model.h's live ranges; mkgeneral --split):
# the adder's `left` split where its second clear_lro (layer 12) zeroed it,
# `left` the first round's digit and `left2` the later rounds'. tfinfo
# prints each range; the trace shows each register only in its own states,
# decoded there (the units digit of 1234, then the tens), and says where
# left ends; the output is the adder's.
V=$tmp/split.tfw
expect "mkgeneral --split writes a model whose registers share columns" 0 "" "" \
    -- "$TF_BUILD_DIR/mkgeneral" --split "$W" left 13 left2 "$V"
expect "tfinfo: a register's live range" 0 \
    "~  left           token       22-35  live in states 0..12 (the embedding to after layer 11)" "" \
    -- "$TFINFO" "$V"
expect "tfinfo: the live range of the register that takes its columns" 0 \
    "~  left2          token       22-35  live in states 13..36 (after layer 12 to after layer 35)" "" \
    -- "$TFINFO" "$V"
if "$TFINFO" "$W" | grep -q "live in"; then
    echo "FAIL: tfinfo prints a live range for registers held in every state"; failed=$((failed + 1))
else
    passed=$((passed + 1))
fi
expect "shared columns: the same sums" 0 "1234+5678=2196" "" -- "$TFRUN" "$V" "1234+5678="
"$TFRUN" "$V" --trace "1234+5678=" >"$tmp/split-trace.txt"
# trace_rows LAYER: the register rows of that layer's section, cells single-spaced.
trace_rows() {
    awk -v l="  layer $1 " 'index($0, l) == 1 {on = 1; next} /^  layer / {on = 0}
        on && /^    [a-z]/ {$1 = $1; print}' "$tmp/split-trace.txt"
}
# (Position 3 reads between two digits: flagged, '!', and harmless.)
[ "$(trace_rows 6 | grep -c '^left')" -eq 1 ] && trace_rows 6 | grep -qx 'left 1 1 1 1!\? 4 4 4 4 4 4' &&
    [ "$(trace_rows 14 | grep -c '^left')" -eq 1 ] &&
    trace_rows 14 | grep -qx 'left2 1 1 1 1!\? 3 3 3 3 3 3' &&
    ! trace_rows 12 | grep -q '^left' &&
    grep -qF "    ~ left ends: held in states 0..12 (the embedding to after layer 11); its columns 22-35 are left2's from state 13" "$tmp/split-trace.txt" &&
    grep -qF "i+1 layer i's: left 0..12, left2 13..36; each shows only there)" "$tmp/split-trace.txt" &&
    [ "$(for l in $(seq 12 35); do trace_rows "$l"; done | grep -c '^left ')" -eq 0 ] &&
    [ "$(for l in $(seq 0 11); do trace_rows "$l"; done | grep -c '^left2 ')" -eq 0 ]
if [ $? -eq 0 ]; then
    passed=$((passed + 1))
else
    echo "FAIL: --trace of registers that share columns:"; cat "$tmp/split-trace.txt"; failed=$((failed + 1))
fi

# Layers that hold several ops side by side (a layer's `parts`), on a model
# tests/mkparts.py writes by hand: each op's heads or hidden units in
# tfinfo, the trace's layer headers, both readers running it alike.
PY=${PYTHON:-python3}
P=$tmp/parts.tfw
expect "mkparts writes its model" 0 "" "" -- "$PY" "$SRC/tests/mkparts.py" "$P"
expect "parts: tfinfo reads the model" 0 "~layers: 2" "" -- "$TFINFO" "$P"
"$TFINFO" "$P" >"$tmp/parts-info.txt"
want_parts=$(printf '%s\n' \
    '    0 n+hist         attention 2 ops' \
    '      3 heads, d_head 2, d_vhead 1, scale 1, causal' \
    '      head 0: n (Count, line 10)' \
    '      heads 1-2: hist (Aggregate, line 11)' \
    '    1 out+x          mlp       2 ops' \
    '      d_hidden 6, relu' \
    '      units 0-3: out (Map, line 12)' \
    '      units 4-5: x (line 13)')
if [ "$(grep -E '^    [01] |^      ([0-9]+ heads|d_hidden|heads? |units? )' "$tmp/parts-info.txt")" = "$want_parts" ]; then
    passed=$((passed + 1))
else
    echo "FAIL: tfinfo lists each op's heads and hidden units under its layer:"
    sed -n '/^layers/,/^tensors/p' "$tmp/parts-info.txt"
    failed=$((failed + 1))
fi
expect "parts: tfrun runs the merged layers" 0 "abcaaa" "" -- "$TFRUN" "$P" "abc"
expect "parts: tools/tfw_torch.py runs them alike" 0 "abcaaa" "" -- "$PY" "$SRC/tools/tfw_torch.py" "$P" "abc"
expect "parts: --trace names each op of a merged attention layer" 0 \
    "~  layer 0 n+hist  (attention; head 0: n (Count, line 10); heads 1-2: hist (Aggregate, line 11))" "" \
    -- "$TFRUN" "$P" --trace "abc"
expect "parts: --trace names each op of a merged MLP" 0 \
    "~  layer 1 out+x  (mlp; units 0-3: out (Map, line 12); units 4-5: x (line 13))" "" \
    -- "$TFRUN" "$P" --trace "abc"
# A compiled program whose ops tfc runs side by side (pattern.tfp: t1 and t2
# the two heads of its first layer, reading the positions through p1 and
# p2, compiler/fuse.c): tfc -v names the
# ops of each such layer, the same ones, in the same order, as tfinfo lists.
"$TFC" -v "$SRC/programs/pattern.tfp" -o "$tmp/pattern.tfw" >"$tmp/pattern-v.txt"
expect "parts: tfc -v names the heads' ops" 0 "~  layer 0: attention, 2 heads: t1 (line 13), t2 (line 14)" "" \
    -- cat "$tmp/pattern-v.txt"
want_merged=$("$TFINFO" "$tmp/pattern.tfw" | awk '
    $1 ~ /^[0-9]+$/ && $3 ~ /^(attention|mlp|norm)$/ {l = $1; merged = $5 == "ops"}
    merged && $1 ~ /^(heads?|units?)$/ && $2 ~ /:$/ {names[l] = names[l] (names[l] == "" ? "" : ",") $3}
    END {for (i = 0; i < 1000; i++) if (i in names) printf "%d:%s ", i, names[i]}')
got_merged=$(sed -n 's/^  layer \([0-9]*\): [^:]*: \(.*\)$/\1:\2/p' "$tmp/pattern-v.txt" |
    sed 's/ (line [0-9]*)//g; s/, /,/g' | tr '\n' ' ')
if [ -n "$want_merged" ] && [ "$got_merged" = "$want_merged" ]; then
    passed=$((passed + 1))
else
    echo "FAIL: tfc -v and tfinfo name the same merged layers: tfc -v '$got_merged', tfinfo '$want_merged'"
    failed=$((failed + 1))
fi
# A part that leaves head 2 uncovered: both readers refuse it, naming the field.
"$PY" - "$P" "$tmp/parts_gap.tfw" <<'PYEOF'
import json, struct, sys
buf = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", buf[:8])
h = json.loads(buf[8:8 + n])
layers = json.loads(h["__metadata__"]["layers"])
layers[0]["parts"][1]["heads"] = [1, 1]
h["__metadata__"]["layers"] = json.dumps(layers)
t = json.dumps(h).encode()
t += b" " * ((8 - (8 + len(t)) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + buf[8 + n:])
PYEOF
gap_msg="__metadata__.layers[0].parts cover heads 0 to 1 of the layer's 3"
expect "parts: tfinfo refuses parts that leave a head out" 1 "" "tfinfo: $tmp/parts_gap.tfw: $gap_msg" \
    -- "$TFINFO" "$tmp/parts_gap.tfw"
expect "parts: tools/tfw_torch.py refuses them too" 1 "" "$gap_msg" \
    -- "$PY" "$SRC/tools/tfw_torch.py" "$tmp/parts_gap.tfw" "abc"

# General ops: two unlabelled Counts each keep their own hidden fraction
# register (they once shared one and added up).
cat >"$tmp/two_counts.tfp" <<'EOF2'
vocab "^ab0123456789";
bos '^';
maxlen 17;
cat n, m, out;
Count(k.tokens == 'a') -> n;
Count(k.tokens == 'b') -> m;
Map(min(n + m, 9)) -> out;
output out at every position;
EOF2
expect "general: two unlabelled Counts compile" 0 "" "" -- "$TFC" "$tmp/two_counts.tfp" -o "$tmp/two_counts.tfw"
expect "general: two unlabelled Counts count apart" 0 "$(printf '^aab\t333')" "" -- "$TFRUN" "$tmp/two_counts.tfw" "^aab"

# issue 11: a categorical copy whose selection may pick positions holding
# different values compiles with a warning naming the op (and a run-time check).
cat >"$tmp/tie.tfp" <<'EOF'
vocab "^abcd"; bos '^'; maxlen 17; cat b;
b: Aggregate(k.indices <= q.indices, tokens) -> b;
output b at every position;
EOF
expect "general: an unproven categorical copy warns" 0 "" \
    "tie.tfp:2:4: warning: Aggregate: the positions this selection picks may hold different values of 'tokens'" \
    -- "$TFC" "$tmp/tie.tfp" -o "$tmp/tie.tfw"
expect "general: the unproven copy is checked at run time" 1 "" \
    "tie.tfp:2: Aggregate -> b: position 2 does not hold one value within " \
    -- "$TFRUN" "$tmp/tie.tfw" "^abcd"
expect "general: the check names the values" 1 "" "('a' 0.50, 'b' 0.50); the compiler could not prove it" \
    -- "$TFRUN" "$tmp/tie.tfw" "^abcd"
# issue 22: three equal values and one other (0.75 and 0.25) are no value,
# at every level; three equal values are exactly one.
for level in -O -O0 "-O --no-schedule"; do
    # shellcheck disable=SC2086
    "$TFC" $level "$tmp/tie.tfp" -o "$tmp/tie_l.tfw" 2>/dev/null
    expect "general: a 3:1 mixture fails its check ($level)" 1 "" \
        "tie.tfp:2: Aggregate -> b: position 4 does not hold one value within " \
        -- "$TFRUN" "$tmp/tie_l.tfw" "^aaab"
    expect "general: ... naming the values ($level)" 1 "" "('a' 0.75, 'b' 0.25)" \
        -- "$TFRUN" "$tmp/tie_l.tfw" --batch - <<<"^aaab"
    expect "general: three equal values pass ($level)" 0 "$(printf '^aaa\taaa')" "" \
        -- "$TFRUN" "$tmp/tie_l.tfw" "^aaa"
done
expect "general: where the positions agree it runs" 0 "$(printf '^aaaa\taaaa')" "" -- "$TFRUN" "$tmp/tie.tfw" "^aaaa"
# The unembedding is never shared with an identical token embedding.
printf 'vocab "ab"; output tokens;\n' >"$tmp/echo.tfp"
expect "tfc: output tokens over the whole vocabulary compiles" 0 "" "" -- "$TFC" --no-prove "$tmp/echo.tfp" -o "$tmp/echo.tfw"
expect "tfrun runs it (it has unembed.weight)" 0 "~ab" "" -- "$TFRUN" "$tmp/echo.tfw" "ab"
# tfc proves what it writes (compiler/tfc.c): a program without bos and
# maxlen (no bound on its inputs) is outside what the validator proves, so
# it is written with a warning naming that; --prove makes it an error and
# writes nothing; --no-prove writes it silently, and -v says which.
rm -f "$tmp/echo2.tfw"
expect "tfc: a program the validator does not cover is written, with a warning" 0 "" \
    "echo.tfp: warning: the weights are written unproven: not proven: no bos and maxlen" \
    -- "$TFC" "$tmp/echo.tfp" -o "$tmp/echo2.tfw"
cmp -s "$tmp/echo.tfw" "$tmp/echo2.tfw" && passed=$((passed + 1)) ||
    { echo "FAIL: ... the same weights as --no-prove writes"; failed=$((failed + 1)); }
rm -f "$tmp/echo2.tfw"
expect "tfc --prove: not covered is an error" 1 "" "error: cannot prove the weights: line 0: not proven: no bos and maxlen" \
    -- "$TFC" --prove "$tmp/echo.tfp" -o "$tmp/echo2.tfw"
[ ! -e "$tmp/echo2.tfw" ] && passed=$((passed + 1)) || { echo "FAIL: ... and nothing is written"; failed=$((failed + 1)); }
expect "tfc -v --no-prove says the weights are not proven" 0 "~not proven (--no-prove; tfprove $tmp/echo2.tfw proves it)" "" \
    -- "$TFC" -v --no-prove "$tmp/echo.tfp" -o "$tmp/echo2.tfw"
# --no-schedule: one layer per op (histogram: Count's two layers and the Map),
# recorded in made_by; the default composes Count's steps with the Map.
"$TFC" --no-schedule "$SRC/programs/histogram.tfp" -o "$tmp/hist-ns.tfw"
expect "tfc --no-schedule keeps one layer per op" 0 "~, 3 layers," "" -- "$TFINFO" "$tmp/hist-ns.tfw"
expect "tfc --no-schedule is in made_by" 0 '~"schedule":false' "" -- "$TFINFO" "$tmp/hist-ns.tfw"
"$TFC" "$SRC/programs/histogram.tfp" -o "$tmp/hist-s.tfw"
expect "tfc schedules by default" 0 "~, 2 layers," "" -- "$TFINFO" "$tmp/hist-s.tfw"
# MLP fusion is kept only where it pays (compiler/compile.c, smaller_unfused):
# here it composes r4's table into r5's, which then reads indices and the
# Count where r4 held one value after the BOS and the Count dropped out
# (1,755 parameters fused, 162 not: a program of tests/differential.py's,
# seed 1015; 42 now that the token columns nothing reads are left out). --no-fuse schedules without it; the default writes the same
# bytes and -v says why. histogram keeps its fusion (2 layers, not 3).
cat >"$tmp/unfused.tfp" <<'EOF2'
vocab ["^", "x", "yy", "cd", "0", "1", "2"]; bos '^'; maxlen 8;
cat r3, r4;
num r5;
r3: Count(k.indices != q.indices) -> r3;
r4: Map(indices == 0 ? r3 : 1) -> r4;
r5: Map(r4 * r4) -> r5;
output r5 at every position;
EOF2
"$TFC" --no-fuse "$tmp/unfused.tfp" -o "$tmp/unfused-nf.tfw"
expect "tfc: fusion undone where the model without it is smaller" 0 \
    "~MLP fusion undone: the model without it has fewer parameters" "" \
    -- "$TFC" -v "$tmp/unfused.tfp" -o "$tmp/unfused.tfw"
cmp -s "$tmp/unfused.tfw" "$tmp/unfused-nf.tfw" && passed=$((passed + 1)) ||
    { echo "FAIL: ... the same weights as --no-fuse"; failed=$((failed + 1)); }
expect "... 42 parameters" 0 "~d_model 2, 1 layer, 42 parameters" "" -- "$TFINFO" "$tmp/unfused.tfw"
expect "tfc --no-fuse is in made_by" 0 '~"fuse":false' "" -- "$TFINFO" "$tmp/unfused-nf.tfw"
"$TFC" --no-fuse "$SRC/programs/histogram.tfp" -o "$tmp/hist-nf.tfw"
expect "tfc --no-fuse: histogram's Count steps and Map apart" 0 "~, 3 layers," "" -- "$TFINFO" "$tmp/hist-nf.tfw"
# Registers of numbers that nothing needs one-hot are held as numbers
# (compiler/numbers.h): add_decimal's digits, column sums and the copies of
# both, and its output, in one column each; -v names them, made_by records
# them, and --one-hot keeps the one-hot model (83,111 parameters against
# 12,505). The output's Map (qt + carry / 2) % 10 is one staircase over the
# sum with a slope (compiler/map.c, map_offset into a number): 4 units.
expect "tfc -v names the registers held as numbers" 0 \
    "~held as numbers (one column each): dig adig sum qt out" "" \
    -- "$TFC" -v "$SRC/programs/add_decimal.tfp" -o "$tmp/adn.tfw"
expect "... in made_by" 0 '~"numbers":["dig","adig","sum","qt","out"]' "" -- "$TFINFO" "$tmp/adn.tfw"
expect "... 12505 parameters" 0 "~, 12505 parameters" "" -- "$TFINFO" "$tmp/adn.tfw"
# A dead register's columns go to a later one (compiler/schedule.h, step 4):
# --no-reuse keeps each register's columns its own (d_model 42, 13,167
# parameters against 38 and 12,505), says so in made_by, and has no live
# ranges; the reused model lists its own and computes the same sums (the
# cases below run it; tests/programs.sh runs every program's).
"$TFC" --no-reuse "$SRC/programs/add_decimal.tfp" -o "$tmp/adnr.tfw" 2>/dev/null
expect "tfc --no-reuse: every register's columns its own" 0 "~d_model 42, 9 layers, 13167 parameters" \
    "" -- "$TFINFO" "$tmp/adnr.tfw"
expect "tfc --no-reuse is in made_by" 0 '~"reuse":false' "" -- "$TFINFO" "$tmp/adnr.tfw"
expect "tfc -v names the registers that took dead ones' columns" 0 \
    "~columns reused: carry (from state 7: indices), out (from state 7: indices)" "" \
    -- "$TFC" -v "$SRC/programs/add_decimal.tfp" -o "$tmp/adn-v.tfw"
expect "... and tfc -v --no-reuse none" 0 "" "" \
    -- sh -c "! '$TFC' -v --no-reuse '$SRC/programs/add_decimal.tfp' -o '$tmp/adnr-v.tfw' | grep -q 'columns reused'"
expect "... no live ranges" 0 "" "" -- sh -c "! '$TFINFO' '$tmp/adnr.tfw' | grep -q 'live in states'"
expect "... d_model 38 with reused columns, their registers' live ranges listed" 0 "" "" \
    -- sh -c "'$TFINFO' '$tmp/adn.tfw' | grep -q 'd_model 38,' && '$TFINFO' '$tmp/adn.tfw' | grep -q 'live in states'"
expect "... the output's staircase over qt + carry / 2 with a slope: 4 units" 0 "" "" \
    -- sh -c "'$TFINFO' '$tmp/adn.tfw' | grep -A1 ' out  *mlp' | grep -q 'd_hidden 4,'"
"$TFC" --one-hot "$SRC/programs/add_decimal.tfp" -o "$tmp/ad1h.tfw" 2>/dev/null
expect "tfc --one-hot: every cat register one-hot" 0 "~, 83111 parameters" "" -- "$TFINFO" "$tmp/ad1h.tfw"
expect "tfc --one-hot is in made_by" 0 '~"one_hot":true' "" -- "$TFINFO" "$tmp/ad1h.tfw"
# The carry's selection (k.nstop == q.want) compares points on a circle
# (compiler/angles.h): its head has 3 rows instead of a row per value of
# want, and nstop and m lose their one-hots. -v names it, tfinfo lists its
# columns; --no-angles keeps the one-hot rows (25,869 parameters), and made_by
# says so. Both models add alike (the cases below).
expect "tfc -v names the selections compared on angles" 0 \
    "~compared on angles (two columns a side): carry.t1" "" \
    -- "$TFC" -v "$SRC/programs/add_decimal.tfp" -o "$tmp/adn.tfw"
expect "... their points' columns in the register table" 0 "~carry.t1.kcos" "" -- "$TFINFO" "$tmp/adn.tfw"
"$TFC" --no-angles "$SRC/programs/add_decimal.tfp" -o "$tmp/adna.tfw" 2>/dev/null
expect "tfc --no-angles: one-hot rows" 0 "~, 25869 parameters" "" -- "$TFINFO" "$tmp/adna.tfw"
expect "tfc --no-angles is in made_by" 0 '~"angles":false' "" -- "$TFINFO" "$tmp/adna.tfw"
# add10 (issue 23): two 10-digit numbers added in at most 6,080 stored
# parameters (AdderBoard's first entry), proven. Its carry's query points are
# read through a chain (compiler/angles.c: want = m + 1, m a copy of nstop):
# nstop's steps write them, m's head copies them, and neither m nor want has
# a column; its output is held as a number that the unembedding decodes,
# written by a staircase with a slope (4 units). The cases: AdderBoard's 10
# edge cases and the rest of tests/program_ref.py's (tests/programs.sh runs
# them all).
expect "add10: tfc -v names the chain's points and the output held as a number" 0 \
    "~held as numbers (one column each): dig adig sum qt tot out" "" \
    -- "$TFC" -v "$SRC/programs/add10.tfp" -o "$tmp/add10.tfw"
n10=$("$TFINFO" "$tmp/add10.tfw" | sed -n '1s/.*, \([0-9]*\) parameters$/\1/p')
expect "... at most 6,080 stored parameters ($n10)" 0 "" "" -- test "${n10:-99999}" -le 6080
expect "... 5130 parameters, d_model 18" 0 "~d_model 18, 10 layers, 5130 parameters" "" \
    -- "$TFINFO" "$tmp/add10.tfw"
expect "... carry's query points copied by m's head, written by nstop's steps" 0 \
    "~carry.t1.qcos.nstop" "" -- "$TFINFO" "$tmp/add10.tfw"
expect "... no columns for m, want or out's one-hot" 0 "" "" \
    -- sh -c "! '$TFINFO' '$tmp/add10.tfw' | grep -E -q '^  (m|want|nstop) |^  out .*categorical'"
expect "... the unembedding has a bias (it decodes the number)" 0 "~unembed.bias" "" \
    -- "$TFINFO" "$tmp/add10.tfw"
expect "... out's Map a staircase with a slope: 4 units" 0 "" "" \
    -- sh -c "'$TFINFO' '$tmp/add10.tfw' | grep -A1 ' out  *mlp' | grep -q 'd_hidden 4,'"
expect "tfc --dump=plans: the copy's head carries the points" 0 \
    "~and the points carry.t1.qcos, copied from carry.t1.qcos.nstop" "" \
    -- "$TFC" --dump=plans "$SRC/programs/add10.tfp"
expect "... proven by tfprove" 0 "~add10.tfw: proven" "" -- "$TF_BUILD_DIR/tfprove" "$tmp/add10.tfw"
printf '^%s+%s=\t%s\n' 0000000000 0000000000 00000000000 0000000000 0000000001 00000000001 \
    9999999999 0000000000 09999999999 9999999999 0000000001 10000000000 \
    9999999999 9999999999 19999999998 5000000000 5000000000 10000000000 \
    1111111111 8888888889 10000000000 1234567890 9876543210 11111111100 \
    0000000001 9999999999 10000000000 >"$tmp/edges.tsv"
expect "... AdderBoard's edge cases pass" 0 "~9 passed, 0 failed" "" \
    -- "$TFRUN" "$tmp/add10.tfw" --check "$tmp/edges.tsv"
# An output read at every position held as a number (issue 23): Tracr's
# frac_prevs with the library's tokens (digits and 'T'), d_model 14 as
# Tracr's, one-hot 18. 'T' is no number: it is held as 9, the code above
# the largest digit (8), so its unembedding row is 2 * 9 = 18 with bias -81.
FP=$SRC/bench/tracr/frac_prevs_lib.tfp
expect "frac_prevs_lib: its output held as a number" 0 "~held as numbers (one column each): out" "" \
    -- "$TFC" -v "$FP" -o "$tmp/fpl.tfw"
expect "... d_model 14, as Tracr's" 0 "~d_model 14, 3 layers, 1750 parameters" "" -- "$TFINFO" "$tmp/fpl.tfw"
expect "... 'T' decoded from 9: row 18, bias -81" 0 "T 18 -81" "" -- /usr/bin/python3 -c "
import json, struct, sys
d = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', d[:8])[0]; h = json.loads(d[8:8 + n])
m = h['__metadata__']; v = json.loads(m['vocab']); t = v.index('T')
out = [r for r in json.loads(m['registers']) if r['name'] == 'out'][0]
def f(name, i):
    e = h[name]; return struct.unpack_from('<f', d, 8 + n + e['data_offsets'][0] + 4 * i)[0]
print('T', round(f('unembed.weight', t * h['unembed.weight']['shape'][1] + out['offset'])),
      round(f('unembed.bias', t)))" "$tmp/fpl.tfw"
"$TFC" --one-hot "$FP" -o "$tmp/fpl1.tfw" 2>/dev/null
expect "... --one-hot: d_model 18" 0 "~d_model 18," "" -- "$TFINFO" "$tmp/fpl1.tfw"
for p in h e l o; do for q in h e l o; do for r in h e l o; do for s in h l; do for u in l o; do
    echo "^$p$q$r$s$u"; done; done; done; done; done >"$tmp/fpl.prompts"
"$TFRUN" "$tmp/fpl1.tfw" --batch "$tmp/fpl.prompts" >"$tmp/fpl1.out"
expect "... the same outputs as one-hot on 256 prompts, 'T' among them" 0 "" "" \
    -- sh -c "'$TFRUN' '$tmp/fpl.tfw' --batch '$tmp/fpl.prompts' | cmp - '$tmp/fpl1.out' && grep -q T '$tmp/fpl1.out'"
expect "... proven by tfprove" 0 "~fpl.tfw: proven" "" -- "$TF_BUILD_DIR/tfprove" "$tmp/fpl.tfw"
# A part the validator does not cover: tfc -v says the weights are unproven.
expect "tfc -v: written unproven, not 'proven'" 0 \
    "~not proven: a part the validator does not cover (the warning above says which)" \
    "the weights are written unproven" -- "$TFC" -v "$SRC/bench/tracr/shuffle_dyck3_plain.tfp" -o "$tmp/sd3.tfw"
# words copies two registers from the same mirrored position (k.indices ==
# q.opp twice): the second part reads the first's points, and opp's one-hot,
# read by nothing else, has no columns.
"$TFC" "$SRC/programs/words.tfp" -o "$tmp/words.tfw" 2>/dev/null
expect "tfc: two parts with the same points share them (words)" 0 "~word.kcos" "" \
    -- "$TFINFO" "$tmp/words.tfw"
expect "... no points of their own for the second, no columns for opp" 0 "" "" \
    -- sh -c "! '$TFINFO' '$tmp/words.tfw' | grep -E -q 'seen.kcos|^  opp '"
# A query value that picks no key has no row in its head (compiler/
# lower_general.c, row_live): reverse goes from 98,773 parameters to 43,861
# (with one-hot selections; 33,657 with its copy on angles, which frees the
# mirrored position's one-hot). most_freq's two heads share a query tensor
# whose rows would then differ: tfc compiles it again with every row and
# keeps that, the smaller model, which made_by records.
"$TFC" --no-angles "$SRC/programs/reverse.tfp" -o "$tmp/rev.tfw" 2>/dev/null
expect "tfc: no row for a query value that picks no key (reverse)" 0 "~, 43861 parameters" "" \
    -- "$TFINFO" "$tmp/rev.tfw"
"$TFC" "$SRC/programs/reverse.tfp" -o "$tmp/rev-a.tfw" 2>/dev/null
expect "... and its copy on angles (reverse)" 0 "~, 33657 parameters" "" -- "$TFINFO" "$tmp/rev-a.tfw"
"$TFC" "$SRC/programs/most_freq.tfp" -o "$tmp/mf.tfw" 2>/dev/null
expect "tfc: every row kept where that is smaller (most_freq)" 0 '~"all_rows":true' "" \
    -- "$TFINFO" "$tmp/mf.tfw"
# dyck2's depth held as a number is shown wrong by the validator (its
# staircases leave the Counts that read it less room): tfc compiles it
# again one-hot, says so, and writes what --one-hot writes. (dyck2 itself
# holds its output as a number, which the validator proves; here a Count
# that compares the output, read by nothing, keeps the output one-hot.)
sed -e 's/^cat \(.*\), out;/cat \1, out, nf;/' \
    -e "s/^output out at every position;/nf: Count(k.out == 'F', causal) -> nf;\n&/" \
    "$SRC/programs/dyck2.tfp" >"$tmp/dyck2.tfp"
expect "tfc -v: registers held as numbers not proven, compiled again one-hot" 0 \
    "~the registers held as numbers were not proven: compiled again one-hot" "" \
    -- "$TFC" -v "$tmp/dyck2.tfp" -o "$tmp/dyck2.tfw"
"$TFC" --one-hot "$tmp/dyck2.tfp" -o "$tmp/dyck2-1h.tfw"
cmp -s "$tmp/dyck2.tfw" "$tmp/dyck2-1h.tfw" && passed=$((passed + 1)) ||
    { echo "FAIL: ... the same weights as --one-hot"; failed=$((failed + 1)); }
printf '^12345678+87654329=\t100000007\n^00000000+00000000=\t000000000\n^99999999+99999999=\t199999998\n' >"$tmp/adn.tsv"
expect "... both add" 0 "~3 passed, 0 failed" "" -- "$TFRUN" "$tmp/adn.tfw" --check "$tmp/adn.tsv"
expect "... and without angles" 0 "~3 passed, 0 failed" "" -- "$TFRUN" "$tmp/adna.tfw" --check "$tmp/adn.tsv"
# Padding heads to the widest made the scheduled model larger than its
# plan: six selections of 3 query rows and one over 60 positions (62 rows)
# became seven heads of 62 rows, 122,926 parameters. Heads of alike sizes
# now go into consecutive layers where that is smaller (compiler/schedule.c,
# head_groups): the six narrow heads in one layer, the wide one in the next,
# 22,133 parameters (36,196 before the token columns nothing reads and the
# rows that pick no key were left out), within a limit of 60,000 (the limit
# is still checked again after scheduling); --no-schedule stays within it too.
{
    printf 'vocab "^abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"; bos %s; maxlen 60;\n' "'^'"
    printf 'num one, a0, a1, a2, a3, a4, a5, x, s;\none: Map(1) -> one;\n'
    for i in 0 1 2 3 4 5; do
        printf "a$i: Aggregate(k.tokens == '%s', one, default: 0) -> a$i;\n" "$(printf 'abcdef' | cut -c$((i + 1)))"
    done
    printf 'x: Aggregate(k.indices <= q.indices, one, default: 0) -> x;\n'
    printf 's: Map(a0 + a1 + a2 + a3 + a4 + a5 + x) -> s;\noutput s at every position;\n'
} >"$tmp/pad.tfp"
expect "tfc --max-params: the scheduled model's heads in two layers fit" 0 \
    "~2 attention with 7 heads, 2 MLP: widest 2, 4 hidden units in all), d_model 75, 19 tensors, 22133 parameters" "" \
    -- "$TFC" -v --no-prove --max-params 60000 "$tmp/pad.tfp" -o "$tmp/pad.tfw"
expect "tfc --no-schedule --max-params: one layer per op fits" 0 "" "" \
    -- "$TFC" --no-schedule --max-params 60000 "$tmp/pad.tfp" -o "$tmp/pad.tfw"
# --max-params: the limit, and its usage errors.
expect "tfc --max-params refuses a larger model" 1 "" \
    "error: this Aggregate becomes a layer of" -- "$TFC" --max-params 2000 "$tmp/tie.tfp" -o "$tmp/tie2.tfw"
expect "tfc --max-params needs a number" 2 "" "tfc: --max-params needs a positive number" \
    -- "$TFC" --max-params x "$tmp/tie.tfp"
expect "tfc --max-params 0 is refused" 2 "" "tfc: --max-params needs a positive number" \
    -- "$TFC" --max-params 0 "$tmp/tie.tfp"
expect "general: a prompt without the BOS" 1 "" "must start with the beginning-of-sequence token" \
    -- "$TFRUN" "$tmp/two_counts.tfw" "aab"

# A compiled program with a stop rule: '=' -> 'a' -> 'b' -> '$' (stop).
cat >"$tmp/until.tfp" <<'EOF2'
vocab "^ab=$";
bos '^';
maxlen 8;
cat next;
next: Map([tokens: '=' => 'a', 'a' => 'b', _ => '$']) -> next;
output next;
generate until '$';
EOF2
expect "general: generate until compiles" 0 "" "" -- "$TFC" "$tmp/until.tfp" -o "$tmp/until.tfw"
expect "general: generation stops at the stop token" 0 "^=ab" "" -- "$TFRUN" "$tmp/until.tfw" "^="
expect "general: the stop token can come first" 0 "^b" "" -- "$TFRUN" "$tmp/until.tfw" "^b"
printf '^=\tab\n^a\tb\n^ab\t\n' >"$tmp/until.tsv"
expect "general: --check with a stop token" 0 "~3 passed, 0 failed" "" -- "$TFRUN" "$tmp/until.tfw" --check "$tmp/until.tsv"


# ---- conventions (issue 13): getopt_long, --version, wrong kinds of files,
# CRLF, progress lines, output paths, limits ----------------------------------
ok() { # ok STATUS NAME (the status first: expanding NAME may change $?)
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL: $2"; failed=$((failed + 1)); fi
}
TFINFO=$TF_BUILD_DIR/tfinfo
for tool in "$TFC" "$TFRUN" "$TFINFO"; do
    name=$(basename "$tool")
    v=$("$tool" --version | head -1)
    [[ "$v" =~ ^$name\ \(tfc\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
    ok $? "$name --version prints '$name (tfc) X.Y.Z' (got '$v')"
    "$tool" --version | sed -n 2p | grep -q '^BLAS: '
    ok $? "$name --version names the BLAS (tests/blas_core.sh: the kernels)"
    "$tool" --help | grep -q "^exit status: 0 "
    ok $? "$name --help lists the exit codes"
    expect "$name: an unknown option" 2 "" "$name: unknown option '--bogus' (see '$name --help')" -- "$tool" --bogus=1 x
done
expect "tfc --output=FILE" 0 "" "" -- "$TFC" --output="$tmp/eq.tfw" "$SRC/programs/adder.tfp"
cmp -s "$W" "$tmp/eq.tfw"
ok $? "--output=FILE writes what -o FILE writes"
expect "tfc -O0 and -O1" 0 "" "" -- "$TFC" -O0 "$SRC/programs/adder.tfp" -O1 -o "$tmp/o1.tfw"
cmp -s "$W" "$tmp/o1.tfw"
ok $? "the last -O wins"
expect "tfc -O2" 2 "" "tfc: unknown optimization level '-O2'" -- "$TFC" -O2 "$SRC/programs/adder.tfp"
expect "tfc --verbose=1" 2 "" "tfc: --verbose takes no value" -- "$TFC" --verbose=1 "$SRC/programs/adder.tfp"
expect "tfrun --check=FILE --batch-size=2 --threads=1" 0 "~2 passed, 0 failed" "" \
    -- "$TFRUN" "$W" --check="$tmp/good.tsv" --batch-size=2 --threads=1
expect "tfrun -n3 and -n 3" 0 "0999+0111=011" "" -- "$TFRUN" -n3 "$W" "0999+0111="
expect "tfrun --no-cache=1" 2 "" "tfrun: --no-cache takes no value" -- "$TFRUN" "$W" --no-cache=1 "1+1="
expect "tfrun an ambiguous abbreviation" 2 "" "tfrun: ambiguous option '--tr'" -- "$TFRUN" "$W" --tr "1+1="
expect "tfrun --check without a value" 2 "" "tfrun: --check needs a value" -- "$TFRUN" "$W" --check
expect "tfrun -n without a value" 2 "" "tfrun: -n needs a value" -- "$TFRUN" "$W" "1+1=" -n
printf 'vocab "-a";\ntoken o;\noutput o;\ngenerate 1;\n' >"$tmp/dash.tfp"
"$TFC" --no-prove "$tmp/dash.tfp" -o "$tmp/dash.tfw"
expect "-- ends the options: a prompt that starts with '-'" 0 "-a-" "" -- "$TFRUN" "$tmp/dash.tfw" -- "-a"
expect "-- with options before it" 0 "-a--" "" -- "$TFRUN" -n 2 "$tmp/dash.tfw" -- "-a"
expect "without --, '-a' is an option" 2 "" "tfrun: unknown option '-a'" -- "$TFRUN" "$tmp/dash.tfw" "-a"
expect "tfc -- PROGRAM" 0 "" "" -- "$TFC" -o "$tmp/dd.tfw" -- "$SRC/programs/adder.tfp"

# The wrong kind of input file is named as such.
expect "tfc given a weight file" 1 "" "tfc: $W is a weight file, not a program (tfinfo $W shows" -- "$TFC" "$W"
[ "$("$TFC" "$W" 2>&1 | wc -l)" -eq 1 ]
ok $? "tfc given a weight file says so in one line"
head -c 3000 /dev/urandom | tr -d '\000' | tr '\001-\037' '\001' >"$tmp/random.tfp"
expect "tfc given a binary file" 1 "" "tfc: $tmp/random.tfp is a binary file, not a program source" -- "$TFC" "$tmp/random.tfp"
expect "tfrun given a program" 1 "" \
    "tfrun: $SRC/programs/adder.tfp is a program source, not a weight file (compile it with tfc" \
    -- "$TFRUN" "$SRC/programs/adder.tfp" "1+1="
expect "tfinfo given a program" 1 "" "tfinfo: $SRC/programs/adder.tfp is a program source, not a weight file" \
    -- "$TFINFO" "$SRC/programs/adder.tfp"
expect "tfrun reads a weight file from a pipe" 0 "0999+0111=0111" "" \
    -- bash -c "\"$TFRUN\" <(cat \"$W\") 0999+0111="

# CRLF line ends: programs, --batch and --check input.
sed 's/$/\r/' "$SRC/programs/adder.tfp" >"$tmp/crlf.tfp"
expect "a CRLF program compiles" 0 "" "" -- "$TFC" "$tmp/crlf.tfp" -o "$tmp/crlf.tfw"
expect "the CRLF program runs as the LF one" 0 "0999+0111=0111" "" -- "$TFRUN" "$tmp/crlf.tfw" "0999+0111="
printf 'vocab "01";\r\ntoken o;\r\nbogus x;\r\n' >"$tmp/crlf_bad.tfp"
"$TFC" "$tmp/crlf_bad.tfp" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "crlf_bad.tfp:3:7: error" "$tmp/err" && ! grep -q $'\r' "$tmp/err"
ok $? "a CRLF program's diagnostics point at the line and print no CR"
sed 's/$/\r/' "$tmp/good.tsv" >"$tmp/good_crlf.tsv"
expect "--check accepts CRLF lines" 0 "~2 passed, 0 failed (2 cases in" "" -- "$TFRUN" "$W" --check "$tmp/good_crlf.tsv"
sed 's/$/\r/' "$tmp/prompts.txt" >"$tmp/prompts_crlf.txt"
expect "--batch accepts CRLF lines" 0 "$(printf '0999+0111=0111\n0001+0002=3000\n0500+0499=9990')" "" \
    -- "$TFRUN" "$W" --batch "$tmp/prompts_crlf.txt"
printf 'a\r\nc\r\n' >"$G/stop_crlf.txt"
expect "--batch accepts CRLF lines (stop token)" 0 "$(printf 'abc\nc')" "" -- "$TFRUN" "$S" --batch "$G/stop_crlf.txt"

# The progress line: on stderr with --progress, "\r"-updated, ending in a newline.
"$TFRUN" "$W" --check "$tmp/good.tsv" --progress >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "^2 passed, 0 failed" "$tmp/out" && [ "$(head -c 1 "$tmp/err")" = $'\r' ] &&
    tr '\r' '\n' <"$tmp/err" | tail -1 | grep -q "^2 cases (100%), 0 failed, [0-9]* cases/s, [0-9.]* s *$" &&
    [ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" = '\n' ]
ok $? "--check --progress: a progress line on stderr ($(tr '\r' '|' <"$tmp/err"))"
"$TFRUN" "$W" --batch - --progress <"$tmp/prompts.txt" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(cat "$tmp/out")" = "$(printf '0999+0111=0111\n0001+0002=3000\n0500+0499=9990')" ] &&
    grep -q "3 prompts (100%), [0-9]* prompts/s" "$tmp/err"
ok $? "--batch --progress: the same output, a progress line on stderr ($(tr '\r' '|' <"$tmp/err"))"
"$TFRUN" "$W" --check "$tmp/good.tsv" >"$tmp/out" 2>"$tmp/err"
[ ! -s "$tmp/err" ]
ok $? "no progress line when stderr is not a terminal"

# -n is checked against the positions before anything is sized by it.
expect "-n far beyond max_len with --batch" 2 "" \
    "tfrun: -n 2147483647 tokens to generate exceed the 100 positions of the position encoding" \
    -- "$TFRUN" "$W" -n 2147483647 --batch "$tmp/prompts.txt"
expect "-n far beyond max_len, one prompt" 2 "" "tfrun: -n 101 tokens to generate exceed the 100 positions" \
    -- "$TFRUN" "$W" -n 101 "0"
expect "-n max_len after a one-token prompt" 0 "~0" "" -- "$TFRUN" "$W" -n 100 "0"
expect "stop token: -n far beyond max_len is the most" 0 "abc" "" -- "$TFRUN" "$S" -n 2147483647 "a"
expect "stop token: -n far beyond max_len with --batch" 0 "$want_stop" "" \
    -- "$TFRUN" "$S" -n 2147483647 --batch "$G/stop.txt"
expect "every position: -n far beyond max_len changes nothing" 0 "$(printf '^ab\tbc')" "" \
    -- "$TFRUN" "$E" -n 2147483647 "^ab"
expect "every position: -n far beyond max_len with --batch" 1 "$want_every" "every.txt:3" \
    -- "$TFRUN" "$E" -n 2147483647 --batch "$G/every.txt"

# Output paths: through a symbolic link, never over a non-regular or a
# read-only file; no temporary file left after a failure or a signal.
mkdir -p "$tmp/paths/sub"
ln -s target.tfw "$tmp/paths/link.tfw"
expect "-o through a dangling symlink" 0 "" "" -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/link.tfw"
[ -L "$tmp/paths/link.tfw" ] && cmp -s "$W" "$tmp/paths/target.tfw"
ok $? "the link is kept and its target written"
ln -s ../link.tfw "$tmp/paths/sub/chain.tfw"
expect "-o through a chain of relative links" 0 "" "" -- "$TFC" --no-prove "$tmp/nl.tfp" -o "$tmp/paths/sub/chain.tfw"
[ -L "$tmp/paths/sub/chain.tfw" ] && [ -L "$tmp/paths/link.tfw" ] && cmp -s "$tmp/nl.tfw" "$tmp/paths/target.tfw"
ok $? "a chain of links is followed to its end"
expect "-o a directory" 2 "" "tfc: $tmp/paths is a directory" -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths"
expect "-o a device" 2 "" "tfc: /dev/null is not a regular file (a device, FIFO or socket); refusing to replace it" \
    -- "$TFC" "$SRC/programs/adder.tfp" -o /dev/null
[ -c /dev/null ]
ok $? "/dev/null is still a device"
mkfifo "$tmp/paths/fifo"
expect "-o a FIFO" 2 "" "tfc: $tmp/paths/fifo is not a regular file" -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/fifo"
ln -s fifo "$tmp/paths/fifolink"
expect "-o a link to a FIFO" 2 "" "tfc: $tmp/paths/fifolink: its target $tmp/paths/fifo is not a regular file" \
    -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/fifolink"
cp "$tmp/nl.tfw" "$tmp/paths/ro.tfw"
chmod 444 "$tmp/paths/ro.tfw"
expect "-o a read-only file" 2 "" "tfc: $tmp/paths/ro.tfw is read-only; refusing to replace it" \
    -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/ro.tfw"
cmp -s "$tmp/nl.tfw" "$tmp/paths/ro.tfw"
ok $? "the read-only file is unchanged"
ln -s ro.tfw "$tmp/paths/rolink.tfw"
expect "-o a link to a read-only file" 2 "" "its target $tmp/paths/ro.tfw is read-only" \
    -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/rolink.tfw"
ln -s loop2 "$tmp/paths/loop1"
ln -s loop1 "$tmp/paths/loop2"
expect "-o a loop of links" 2 "" "tfc: $tmp/paths/loop1: cannot follow the symbolic link" \
    -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/loop1"
cp "$SRC/programs/adder.tfp" "$tmp/paths/self.tfp"
ln -s self.tfp "$tmp/paths/selflink.tfw"
expect "-o the source itself" 2 "" "tfc: $tmp/paths/selflink.tfw is $tmp/paths/self.tfp itself; refusing to overwrite it" \
    -- "$TFC" "$tmp/paths/self.tfp" -o "$tmp/paths/selflink.tfw"
cmp -s "$SRC/programs/adder.tfp" "$tmp/paths/self.tfp"
ok $? "the source is unchanged"
chmod 644 "$tmp/paths/ro.tfw"
cp "$tmp/nl.tfw" "$tmp/paths/mode.tfw"
chmod 600 "$tmp/paths/mode.tfw"
"$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/mode.tfw" && [ "$(stat -c %a "$tmp/paths/mode.tfw")" = 600 ]
ok $? "a replaced file keeps its mode"
# A file size limit: killed by SIGXFSZ (the temporary file is removed on the
# way out), or, with the signal ignored, a write error (removed too).
(ulimit -f 1; exec "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/big.tfw") 2>/dev/null
[ $? -gt 128 ] && [ -z "$(ls "$tmp/paths" | grep big)" ]
ok $? "killed while writing: no temporary file left ($(ls "$tmp/paths" | grep big))"
(ulimit -f 1; trap '' XFSZ; exec "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/paths/big.tfw") 2>"$tmp/err"
[ $? -eq 3 ] && grep -q "tfc: $tmp/paths/big.tfw: cannot write: File too large" "$tmp/err" && [ -z "$(ls "$tmp/paths" | grep big)" ]
ok $? "a failed write: one line, no temporary file left ($(cat "$tmp/err"))"
[ -z "$(ls "$tmp" "$tmp/paths" | grep '\.tmp\.')" ]
ok $? "no temporary files anywhere"

# Vocabularies of words (programs/words.tfp): prompts are words apart,
# outputs too; names in tfinfo and the trace; unknown words named.
WW=$tmp/words.tfw
expect "tfc compiles a vocabulary of words" 0 "" "" -- "$TFC" "$SRC/programs/words.tfp" -o "$WW"
expect "words in, words and numbers out" 0 $'^ the cat sat on the mat\tmat 2 on sat cat 1' "" \
    -- "$TFRUN" "$WW" "^ the cat sat on the mat"
expect "any blanks between words; the prompt printed as given" 0 $'^  10\t-1 \t10 -1' "" \
    -- "$TFRUN" "$WW" $'^  10\t-1 '
expect "an unknown word, with the closest token" 1 "" \
    "tfrun: prompt: word 3 'cta' is not in the vocabulary; did you mean 'cat'?" -- "$TFRUN" "$WW" "^ the cta"
expect "an unknown word, no close token" 1 "" "tfrun: prompt: word 2 'elephant' is not in the vocabulary" \
    -- "$TFRUN" "$WW" "^ elephant"
[ "$(cat "$tmp/stderr")" = "tfrun: prompt: word 2 'elephant' is not in the vocabulary" ]
ok $? "the unknown word's error is one line"
expect "a prompt of blanks is empty" 1 "" "tfrun: prompt: empty prompt" -- "$TFRUN" "$WW" "  "
expect "more words than positions" 1 "" "tfrun: prompt: 10 prompt tokens exceed the 9 positions" \
    -- "$TFRUN" "$WW" "^ 1 2 3 4 5 6 7 8 the"
printf '^ the\ncat\n\n  sat\n' >"$tmp/tokens.txt"
expect "--tokens FILE: its words, printed one space apart" 0 $'^ the cat sat\tsat cat 1' "" \
    -- "$TFRUN" "$WW" --tokens "$tmp/tokens.txt"
expect "--tokens and a prompt" 2 "" "tfrun: give a prompt, --tokens or --batch/--check, one of them" \
    -- "$TFRUN" "$WW" --tokens "$tmp/tokens.txt" "^ the"
expect "--tokens of a missing file" 1 "" "tfrun: --tokens $tmp/nope.txt: cannot open" \
    -- "$TFRUN" "$WW" --tokens "$tmp/nope.txt"
printf '0999+0111=\n' >"$tmp/chars.txt"
expect "--tokens for a vocabulary of characters: the text less its line end" 0 "0999+0111=0111" "" \
    -- "$TFRUN" "$W" --tokens "$tmp/chars.txt"
printf '^ the cat\tcat 1\n^ 10\t-1\n^ mat\tmat the\n' >"$tmp/words_check.tsv"
expect "--check compares words" 1 "~2 passed, 1 failed" "" -- "$TFRUN" "$WW" --check "$tmp/words_check.tsv" --threads 1
expect "tfinfo lists the words" 0 "~0:^ 1:the 2:cat 3:sat 4:on 5:mat 6:10 7:-1" "" -- "$TF_BUILD_DIR/tfinfo" "$WW"
expect "tfinfo: a register of words and numbers" 0 "~'cat' 'sat' 'on' 'mat' (24 values)" "" -- "$TF_BUILD_DIR/tfinfo" "$WW"
"$TFRUN" "$WW" --trace "^ the cat" >"$tmp/trace.txt"
grep -q '^step 0: 3 positions "^ the cat" -> every position "^ cat 1"$' "$tmp/trace.txt" &&
    grep -q "^    token  *^  *the  *cat$" "$tmp/trace.txt" && grep -q "^    word  *\.  *'cat'  *'the'$" "$tmp/trace.txt"
ok $? "--trace shows the words ($(head -1 "$tmp/trace.txt"))"
printf 'vocab ["^", "the", "cat", "sat", "end"];\nbos "^";\nmaxlen 8;\ncat nxt;\n'"nxt: Map([tokens: \"the\" => \"cat\", \"cat\" => \"sat\", _ => \"end\"]) -> nxt;\noutput nxt;\ngenerate until \"end\";\n" >"$tmp/gen_words.tfp"
expect "a program generating words" 0 "" "" -- "$TFC" "$tmp/gen_words.tfp" -o "$tmp/gen_words.tfw"
expect "generated words follow the prompt, one space apart" 0 "^ the cat sat" "" -- "$TFRUN" "$tmp/gen_words.tfw" "^ the"
expect "generation stops at the word \"end\"" 0 "^ sat" "" -- "$TFRUN" "$tmp/gen_words.tfw" "^ sat"
expect "the BOS named" 1 "" "tfrun: prompt: the input must start with the beginning-of-sequence token '^'" \
    -- "$TFRUN" "$tmp/gen_words.tfw" "the"

# Output-only tokens (docs/language.md, Vocabulary): printed, never read; a
# space in one printed as it is; UTF-8 tokens (emoji) in and out.
OO=$tmp/spam.tfw
expect "tfc compiles output-only tokens" 0 "" "" -- "$TFC" "$SRC/bench/tracrbench/case_20_spam_detector.tfp" -o "$OO"
expect "an output-only token with a space, printed as it is" 0 $'^ J now spam\tnot spam spam not spam' "" \
    -- "$TFRUN" "$OO" "^ J now spam"
expect "a prompt holding an output-only token: one line" 1 "" \
    "tfrun: prompt: word 2 'not' is not in the vocabulary; did you mean 'no'?" -- "$TFRUN" "$OO" "^ not spam"
printf 'vocab "^ab" output ["c"];\nbos "^";\nmaxlen 6;\ncat x;\nx: Map(tokens == "a" ? "c" : tokens) -> x;\noutput x at every position;\n' >"$tmp/chars_out.tfp"
expect "output-only characters" 0 "" "" -- "$TFC" "$tmp/chars_out.tfp" -o "$tmp/chars_out.tfw"
expect "an output-only character printed" 0 $'^abba\tcbbc' "" -- "$TFRUN" "$tmp/chars_out.tfw" "^abba"
expect "an output-only character in a prompt" 1 "" \
    "tfrun: prompt: character 'c' at index 2 is an output-only token: outputs print it, no prompt holds it" \
    -- "$TFRUN" "$tmp/chars_out.tfw" "^acb"
[ "$(wc -l <"$tmp/stderr")" -eq 1 ]
ok $? "the output-only token's error is one line"
TR=$tmp/trend.tfw
expect "numbers and words beside the vocabulary" 0 "" "" -- "$TFC" "$SRC/bench/tracrbench/case_13_trend_analysis.tfp" -o "$TR"
expect "an output-only word in a prompt" 1 "" \
    "tfrun: prompt: word 3 'None' is an output-only token: outputs print it, no prompt holds it" \
    -- "$TFRUN" "$TR" "^ 1 None"
printf '^ 1 2 2 0\n^ 1 increasing\n' >"$tmp/trend_batch.txt"
expect "--batch: an output-only token in one prompt fails that line" 1 \
    $'^ 1 2 2 0\tincreasing constant decreasing None' "output-only token" \
    -- "$TFRUN" "$TR" --batch "$tmp/trend_batch.txt"
printf '^ 1 2 2 0\tincreasing constant decreasing None\n^ 2 1\tdecreasing None\n' >"$tmp/trend_check.tsv"
expect "--check compares output-only words" 0 "~2 passed, 0 failed" "" -- "$TFRUN" "$TR" --check "$tmp/trend_check.tsv" --threads 1
expect "tfinfo names the output-only tokens" 0 \
    "~vocabulary: 8 tokens (4 output-only, 4..7: outputs print them, no prompt holds them)" "" \
    -- "$TF_BUILD_DIR/tfinfo" "$TR"
expect "tfinfo quotes a token with a space" 0 "~13:'not spam'" "" -- "$TF_BUILD_DIR/tfinfo" "$OO"
"$TFRUN" "$TR" --trace "^ 2 1" >"$tmp/trace_oo.txt" &&
    grep -q '^step 0: 3 positions "^ 2 1" -> every position "[^ ]* decreasing None"$' "$tmp/trace_oo.txt" &&
    grep -q "^    output  *-  *decreasing  *None$" "$tmp/trace_oo.txt"
ok $? "--trace reads output-only tokens ($(head -1 "$tmp/trace_oo.txt"); the BOS's token means nothing)"
"$TFRUN" "$OO" --report "$tmp/spam.html" "^ J now" >/dev/null && grep -q "not spam" "$tmp/spam.html"
ok $? "--report shows an output-only token with a space"
EM=$tmp/emoji.tfw
expect "tfc compiles UTF-8 tokens" 0 "" "" -- "$TFC" "$SRC/bench/tracrbench/case_36_emoji_sentiment.tfp" -o "$EM"
expect "emoji in, words out" 0 $'^ \xf0\x9f\x98\x8a \xf0\x9f\x93\x98\tpositive neutral' "" \
    -- "$TFRUN" "$EM" $'^ \xf0\x9f\x98\x8a \xf0\x9f\x93\x98'
expect "a prompt word that is not UTF-8" 1 "" "tfrun: prompt: word 2 holds the byte 0xf0, which is not valid UTF-8" \
    -- "$TFRUN" "$EM" $'^ \xf0\x9f'
expect "tfinfo lists the emoji" 0 $'~1:\xf0\x9f\x93\x98 2:\xf0\x9f\x98\x8a' "" -- "$TF_BUILD_DIR/tfinfo" "$EM"

# Errors writing standard output.
if [ -w /dev/full ]; then
    expect "tfc -v to a full disk" 3 "" "tfc: error writing standard output: No space left on device" \
        -- bash -c "\"$TFC\" -v \"$SRC/programs/adder.tfp\" -o \"$tmp/full.tfw\" >/dev/full"
    expect "tfinfo to a full disk" 3 "" "tfinfo: error writing standard output" \
        -- bash -c "\"$TFINFO\" \"$W\" >/dev/full"
    expect "tfrun to a full disk" 3 "" "tfrun: error writing standard output" \
        -- bash -c "\"$TFRUN\" \"$W\" --batch \"$tmp/prompts.txt\" >/dev/full"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
