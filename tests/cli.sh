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
if [[ "$summary" == "$tmp/v.tfw: 36 layers (11 attention with 11 heads, 25 MLP: widest "*"), d_model 80, "*" tensors, "*" parameters" ]]; then
    passed=$((passed + 1))
else
    echo "FAIL: tfc -v summary: $summary"; failed=$((failed + 1))
fi
expect "tfc without arguments" 2 "" "tfc: no program given" -- "$TFC"
expect "tfc unknown option" 2 "" "tfc: unknown option '--frobnicate'" -- "$TFC" --frobnicate x.tfp
expect "tfc -o without a name" 2 "" "tfc: -o needs a file name" -- "$TFC" "$SRC/programs/adder.tfp" -o
expect "tfc missing file" 2 "" "tfc: cannot read '$tmp/nope.tfp': No such file or directory" -- "$TFC" "$tmp/nope.tfp"
expect "tfc unwritable output" 2 "" "tfc: " -- "$TFC" "$SRC/programs/adder.tfp" -o "$tmp/no/such/dir/x.tfw"
expect "tfc --help" 0 "$("$TFC" --help)" "" -- "$TFC" --help

expect "the README's line" 0 "0999+0111=0111" "" -- "$TFRUN" "$W" "0999+0111="
expect "-n 10 as the seed's demo" 0 "0999+0111=0111000000" "" -- "$TFRUN" "$W" -n 10 "0999+0111="
expect "options after the prompt" 0 "0999+0111=0111000000" "" -- "$TFRUN" "$W" "0999+0111=" -n 10
expect "-n 0" 0 "0123+0456=" "" -- "$TFRUN" "$W" -n 0 "0123+0456="
# Nothing writes the output register, so every step picks token 0: '\n'.
printf 'vocab "\\na"; token o; output o; generate 2;\n' >"$tmp/nl.tfp"
"$TFC" "$tmp/nl.tfp" -o "$tmp/nl.tfw"
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
expect "foreign file" 1 "" "tfrun: $tmp/foreign.tfw: " -- "$TFRUN" "$tmp/foreign.tfw" "1+1="
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

TFINFO=$TF_BUILD_DIR/tfinfo
# Issue 13's reproducers: a Map over three categorical registers at maxlen 68 (a
# 1.46 GB file before) and sort at maxlen 65536 (64 GiB) are refused before any
# weight is built, naming the op and the option that raises the limit.
printf 'vocab "^ab"; bos %s; maxlen 68; cat x, y, z, w;\nx: Map(indices) -> x;\ny: Map(indices + 1) -> y;\nz: Map(indices + 2) -> z;\nw: Map(x + y + z) -> w;\noutput tokens;\n' "'^'" >"$tmp/huge_map.tfp"
expect "tfc: a 600-million-parameter Map is refused" 1 "" \
    "huge_map.tfp:5:4: error: this Map becomes a layer of 603081055 parameters, which takes the model past the limit of 67108864 parameters" \
    -- "$TFC" "$tmp/huge_map.tfp" -o "$tmp/huge_map.tfw"
sed 's/maxlen [0-9]*;/maxlen 65536;/' "$SRC/programs/sort.tfp" >"$tmp/huge_sort.tfp"
expect "tfc: sort at maxlen 65536 is refused" 1 "" "error: this selection compares" \
    -- "$TFC" "$tmp/huge_sort.tfp" -o "$tmp/huge_sort.tfw"
# The layer limit applies outside `repeat` too (issue 13: 250,000 top-level ops).
{ printf 'vocab "ab"; token t; output t;\n'; for i in $(seq 1 100001); do echo 'Clear(t);'; done; } >"$tmp/many_ops.tfp"
expect "tfc: more than 100000 top-level ops" 1 "" "error: the program has more than 100000 ops" \
    -- "$TFC" "$tmp/many_ops.tfp" -o "$tmp/many_ops.tfw"
# Count's two layers are both labelled Count (its second layer is no Map).
"$TFC" "$SRC/programs/histogram.tfp" -o "$tmp/hist.tfw"
expect "tfinfo: Count's steps layer is labelled Count" 0 "~hist.steps     mlp       Count" "" \
    -- "$TFINFO" "$tmp/hist.tfw"
expect "tfinfo: categorical register values" 0 "~  rot            categorical 5-7  output  values 'a' 'b' 'c'" "" -- "$TFINFO" "$E"
expect "tfinfo: every-position output" 0 \
    "~generation: every position: one pass, the argmax token at each position after the BOS; unembedding reads rot" "" \
    -- "$TFINFO" "$E"
expect "tfinfo: the BOS" 0 "~beginning of sequence: '^' (every input starts with it)" "" -- "$TFINFO" "$E"
expect "tfinfo: the stop token" 0 \
    "~generation: until the stop token '\$' (not printed), at most 10 tokens, greedy; unembedding reads next" "" \
    -- "$TFINFO" "$S"

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
# The unembedding is never shared with an identical token embedding.
printf 'vocab "ab"; output tokens;\n' >"$tmp/echo.tfp"
expect "tfc: output tokens over the whole vocabulary compiles" 0 "" "" -- "$TFC" "$tmp/echo.tfp" -o "$tmp/echo.tfw"
expect "tfrun runs it (it has unembed.weight)" 0 "~ab" "" -- "$TFRUN" "$tmp/echo.tfw" "ab"
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

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
