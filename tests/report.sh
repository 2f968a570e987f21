#!/usr/bin/env bash
# report.sh TFC TFRUN TFINFO: looking inside the adder from the command line.
#
# tfinfo's listing; tfrun --trace on the adder and on a broken adder (without
# its step_out line), where the trace must show the first wrong layer; --svg
# files that parse as XML; and the --report page opened in headless Chromium:
# its script must run without errors (it marks the page #report-ok after
# checking its own hover lookup), every heatmap and label must be in the
# rendered DOM, and a screenshot goes to $TF_BUILD_DIR/report-adder.png.
#
# Exit 77 (skipped) when the checks that need no browser pass but chromium is
# not installed.
set -u
TFC=$1
TFRUN=$2
TFINFO=$3
SRC=${TF_SOURCE_DIR:?TF_SOURCE_DIR must point at the source tree}
BUILD=${TF_BUILD_DIR:-$PWD}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # check NAME STATUS [DETAIL]
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1))
    else
        echo "FAIL: $1${3:+: $3}"
        failed=$((failed + 1))
    fi
}
contains() { # contains NAME FILE STRING: FILE has STRING as a fixed string
    grep -qF -- "$3" "$2"
    check "$1" $? "no '$3' in $(basename "$2")"
}

W=$tmp/adder.tfw
"$TFC" "$SRC/programs/adder.tfp" -o "$W"
check "compile the adder" $?

# --- tfinfo --------------------------------------------------------------------
"$TFINFO" "$W" >"$tmp/info.txt" 2>"$tmp/info.err"
check "tfinfo exits 0" $? "$(cat "$tmp/info.err")"
params=$("$TFC" "$SRC/programs/adder.tfp" -o "$tmp/v.tfw" -v | sed -n 's/.* \([0-9]*\) parameters$/\1/p')
n_layers=$(sed -n 's/^layers: \([0-9]*\) .*/\1/p' "$tmp/info.txt")
contains "tfinfo: parameters as tfc -v counts them" "$tmp/info.txt" ", $params parameters"
contains "tfinfo: vocabulary" "$tmp/info.txt" "vocabulary: 14 tokens"
contains "tfinfo: the space token" "$tmp/info.txt" "12:' ' 13:\\n"
contains "tfinfo: position encoding" "$tmp/info.txt" "position encoding: sin, cos of 2*pi*p/100; max_len 100"
contains "tfinfo: a register" "$tmp/info.txt" "  left_pos       position    16-17  (sin, cos)"
contains "tfinfo: the output register" "$tmp/info.txt" "  final          token       66-79  output"
grep -qE '^ +0 find_plus +attention FindAndStore +line 39$' "$tmp/info.txt"
check "tfinfo: the first layer with op and line" $?
contains "tfinfo: a tensor" "$tmp/info.txt" "embed.token.weight"
contains "tfinfo: generation" "$tmp/info.txt" "generation: 4 tokens by default, greedy; unembedding reads final"
contains "tfinfo: the source" "$tmp/info.txt" "  39 | find_plus:  FindAndStore('+') -> left_pos;"
[ -n "$n_layers" ] && [ "$n_layers" -gt 0 ]
check "tfinfo: a layer count" $?
"$TFINFO" >/dev/null 2>&1
check "tfinfo without arguments exits 2" $(($? != 2))
"$TFINFO" "$tmp/missing.tfw" >/dev/null 2>"$tmp/err"
check "tfinfo on a missing file exits 1" $(($? != 1))
contains "tfinfo names the missing file" "$tmp/err" "tfinfo: $tmp/missing.tfw: cannot open"
"$TFINFO" --frobnicate "$W" >/dev/null 2>&1
check "tfinfo rejects unknown options" $(($? != 2))

# --- tfrun --trace ---------------------------------------------------------------
"$TFRUN" "$W" --trace "0999+0111=" >"$tmp/trace.txt" 2>"$tmp/err"
check "--trace exits 0" $? "$(cat "$tmp/err")"
[ "$(tail -n 1 "$tmp/trace.txt")" = "0999+0111=0111" ]
check "--trace ends with the completion" $?
contains "--trace: a layer header" "$tmp/trace.txt" "  layer 0 find_plus  (attention, FindAndStore, line 39)"
contains "--trace: the output" "$tmp/trace.txt" "  output: final at position 9 reads 0"
[ "$(grep -c '^step ' "$tmp/trace.txt")" = 1 ]
check "--trace traces one step" $?
# Rows before the '+' may hold blends of positions (nothing to find yet; -O's
# FindAndStore averages), which the trace rightly flags; the '=' row, the one
# that predicts, must decode cleanly.
! grep -qE '^ *!.* at 9:' "$tmp/trace.txt"
check "--trace: nothing flagged at the '=' of the good adder" $? "$(grep -E '^ *!.* at 9:' "$tmp/trace.txt" | head -3)"
"$TFRUN" "$W" --trace-all "0999+0111=" >"$tmp/all.txt"
[ "$(grep -c '^step ' "$tmp/all.txt")" = 4 ]
check "--trace-all traces every step" $?
"$TFRUN" "$W" --trace --step 2 "0999+0111=" | grep -q '^step 2: 12 positions "0999+0111=01" -> next 1$'
check "--step 2 traces the third step" $?
"$TFRUN" "$W" --trace --step 4 "0999+0111=" >/dev/null 2>"$tmp/err"
check "--step past the last step exits 1" $(($? != 1))
contains "--step past the end says why" "$tmp/err" "tfrun: --step 4: the steps run are 0 to 3"
"$TFRUN" "$W" --trace --batch - </dev/null >/dev/null 2>&1
check "--trace with --batch is a usage error" $(($? != 2))

# The broken adder: without step_out, out_pos is one too far. The first
# step_pos block of the trace shows it at the '=' (10 where the good adder
# has 9), and the trace ends saying the output register is empty there.
grep -v '^step_out:' "$SRC/programs/adder.tfp" >"$tmp/broken.tfp"
"$TFC" "$tmp/broken.tfp" -o "$tmp/broken.tfw"
"$TFRUN" "$tmp/broken.tfw" --trace "0999+0111=" >"$tmp/broken.txt"
first_out_pos() { # the out_pos line of the first step_pos block, last field
    awk '/^  layer [0-9]+ step_pos /{b=1; next} /^  (layer|embedding)/{if (b) exit}
         b && $1 == "out_pos" {print $NF; exit}' "$1"
}
[ "$(first_out_pos "$tmp/trace.txt")" = 9 ] && [ "$(first_out_pos "$tmp/broken.txt")" = 10 ]
check "the broken adder's first step_pos puts out_pos at 10, not 9" $? \
    "good $(first_out_pos "$tmp/trace.txt"), broken $(first_out_pos "$tmp/broken.txt")"
contains "the broken trace flags the empty output" "$tmp/broken.txt" \
    "! output: final is empty at position 9"
[ "$(tail -n 1 "$tmp/broken.txt")" = "0999+0111=0011" ]
check "the broken adder gets the sum wrong" $?

# --- tfrun --svg -------------------------------------------------------------------
"$TFRUN" "$W" --svg "$tmp/svg" "0999+0111=" >/dev/null
check "--svg exits 0" $?
n_resid=$(find "$tmp/svg" -name 'resid_*.svg' | wc -l)
n_att=$(find "$tmp/svg" -name 'att_*.svg' | wc -l)
[ "$n_resid" -eq $((n_layers + 1)) ]
check "--svg: one heatmap per layer and the embedding" $? "$n_resid files"
[ "$n_att" -ge 1 ] && [ -f "$tmp/svg/att_01_find_plus_h0.svg" ]
check "--svg: attention maps" $?
"${PYTHON:-python3}" -c '
import sys, xml.etree.ElementTree as ET
for f in sys.argv[1:]:
    ET.parse(f)' "$tmp"/svg/*.svg
check "--svg: every file is well-formed XML" $?
contains "--svg: register labels" "$tmp/svg/resid_01_find_plus.svg" ">left_pos</text>"
"$TFRUN" "$W" --svg "$tmp/trace.txt/x" "0999+0111=" >/dev/null 2>"$tmp/err"
check "--svg into an impossible directory exits 1" $(($? != 1))
contains "--svg names the directory" "$tmp/err" "cannot create directory '$tmp/trace.txt/x'"

# --- tfrun --report in Chromium ---------------------------------------------------
R=$tmp/adder.html
"$TFRUN" "$W" --report "$R" "0999+0111=" >"$tmp/out.txt"
check "--report exits 0" $?
[ "$(cat "$tmp/out.txt")" = "0999+0111=0111" ]
check "--report still prints the completion" $?
! grep -qE '<script[^>]+src=|<link[^>]+href=|@import' "$R"
check "the report loads nothing from elsewhere" $?

# --- models without registers ------------------------------------------------------
# Learned models (a `model { ... }` block; untrained weights are enough here):
# a pre-norm next-token model, whose trace shows the logit lens and every
# head, and a post-norm bidirectional classifier. Skipped, with a note, by a
# tfc that does not know model blocks.
cat >"$tmp/lm.tfp" <<'EOF'
vocab "ab()";
model {
    d_model 16; layers 2; heads 2; d_ff 32; activation relu;
    norm pre; positions learned; max_len 16;
    attention causal; predict next_token; seed 1;
}
generate 3;
EOF
cat >"$tmp/cls.tfp" <<'EOF'
vocab "ab()";
model {
    d_model 16; layers 1; heads 2; d_ff 32; activation gelu;
    norm post; positions sinusoidal; max_len 16;
    attention bidirectional; predict classes "no", "yes"; seed 2;
}
EOF
learned=0
if "$TFC" "$tmp/lm.tfp" -o "$tmp/lm.tfw" 2>/dev/null && "$TFC" "$tmp/cls.tfp" -o "$tmp/cls.tfw" 2>/dev/null; then
    learned=1
    "$TFINFO" "$tmp/lm.tfw" >"$tmp/lm-info.txt"
    check "tfinfo on a learned model" $?
    contains "tfinfo: no registers" "$tmp/lm-info.txt" "registers: 0"
    contains "tfinfo: the final norm" "$tmp/lm-info.txt" "final_norm     norm"
    "$TFRUN" "$tmp/lm.tfw" --trace-all "ab()" >"$tmp/lm.txt"
    check "--trace-all on a learned model" $?
    contains "learned trace: logit lens" "$tmp/lm.txt" "    lens top1 "
    contains "learned trace: attention matrices" "$tmp/lm.txt" "    head 1 (% of query row's attention"
    [ "$(grep -c '^step ' "$tmp/lm.txt")" = 3 ]
    check "learned trace: every step" $?
    "$TFRUN" "$tmp/cls.tfw" --trace --report "$tmp/cls.html" --svg "$tmp/cls-svg" "(ab)" >"$tmp/cls.txt"
    check "--trace --report --svg on a classifier" $?
    grep -qE '^step 0: 4 positions "\(ab\)" -> class (no|yes)$' "$tmp/cls.txt"
    check "classifier trace names the class" $? "$(head -n 1 "$tmp/cls.txt")"
    "$TFRUN" "$tmp/lm.tfw" --report "$tmp/lm.html" "ab()ab" >/dev/null
    check "--report on a learned model" $?
else
    echo "note: this tfc does not compile model blocks; learned-model checks skipped"
fi

# A general program: categorical registers in the trace and the report.
"$TFC" "$SRC/programs/reverse.tfp" -o "$tmp/rev.tfw"
check "tfc on a general program" $?
"$TFRUN" "$tmp/rev.tfw" --trace --report "$tmp/rev.html" "^abc" >"$tmp/rev.txt"
check "--trace --report on a general program" $?
contains "general trace: a categorical register as its values" "$tmp/rev.txt" "    reversed          .    'c'    'b'    'a'"
contains "general report: value labels for the hover text" "$tmp/rev.html" '["reversed","categorical",73,3,["'"'"'a'"'"'","'"'"'b'"'"'","'"'"'c'"'"'"]]'

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "$passed passed, $failed failed; SKIP: chromium is not installed (apt-get install chromium)"
    [ "$failed" -eq 0 ] && exit 77
    exit 1
fi
chrome() { # chrome ARGS...: headless, with a throwaway profile
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" \
        --no-first-run --disable-extensions "$@" 2>>"$tmp/chromium.log"
}
chrome --dump-dom "file://$R" >"$tmp/dom.html"
check "chromium renders the report" $? "$(tail -n 3 "$tmp/chromium.log")"
contains "the script ran and checked its hover" "$tmp/dom.html" '<p id="report-ok">script ran:'
! grep -q 'id="report-error"' "$tmp/dom.html"
check "no script errors" $? "$(grep -o 'id="report-error">[^<]*' "$tmp/dom.html")"
[ "$(grep -o 'data-kind="resid"' "$tmp/dom.html" | wc -l)" -eq $((n_layers + 1)) ]
check "a residual heatmap per layer in the page" $?
[ "$(grep -o 'data-kind="att"' "$tmp/dom.html" | wc -l)" -eq "$n_att" ]
check "every attention map in the page" $?
contains "heatmap cells drawn" "$tmp/dom.html" '<g class="cells"'
contains "register labels" "$tmp/dom.html" '>left_pos</text>'
contains "token labels on the axes" "$tmp/dom.html" '>9 =</text>'
contains "the layer list with source lines" "$tmp/dom.html" 'find_plus:  FindAndStore('
contains "the decoded trace" "$tmp/dom.html" '<th class="r">out_pos</th>'

if [ "$learned" = 1 ]; then
    for page in lm cls; do
        chrome --dump-dom "file://$tmp/$page.html" >"$tmp/$page-dom.html"
        grep -q '<p id="report-ok">script ran:' "$tmp/$page-dom.html" &&
            ! grep -q 'id="report-error"' "$tmp/$page-dom.html"
        check "the $page report runs its script without errors" $? \
            "$(grep -o 'id="report-error">[^<]*' "$tmp/$page-dom.html")"
    done
    contains "the learned report shows the logit lens" "$tmp/lm-dom.html" '<th class="r">logit lens</th>'
fi

chrome --dump-dom "file://$tmp/rev.html" >"$tmp/rev-dom.html"
grep -q '<p id="report-ok">script ran:' "$tmp/rev-dom.html" && ! grep -q 'id="report-error"' "$tmp/rev-dom.html"
check "the general program's report runs its script without errors" $? \
    "$(grep -o 'id="report-error">[^<]*' "$tmp/rev-dom.html")"
contains "the general report labels its registers" "$tmp/rev-dom.html" '>reversed</text>'

shot=$BUILD/report-adder.png
rm -f "$shot"
chrome --screenshot="$shot" --window-size=1400,2000 "file://$R" >/dev/null
[ -s "$shot" ] && [ "$(head -c 4 "$shot" | tail -c 3)" = "PNG" ]
check "a screenshot in $shot" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
