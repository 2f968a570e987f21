#!/usr/bin/env bash
# report.sh TFC TFRUN TFINFO TFTRAIN: looking inside the adder from the command line.
#
# tfinfo's listing (and its parameter count of a trained file, which also
# holds optimizer state); tfrun --trace on the adder and on a broken adder
# (without its step_out line), where the trace must show the first wrong
# layer, and on programs whose output register is categorical; --svg files
# that parse as XML and whose names carry the layer index their titles say;
# classifiers' result lines; and the --report pages opened in headless
# Chromium: their script must run without errors (it marks the page
# #report-ok after checking its own hover lookup), every heatmap and label
# must be in the rendered DOM, and tests/report_layout.js, appended to a copy
# of each page, checks the layout from the boxes the browser laid out (no
# overlapping labels, a model view thumbnail per head, every link with a
# target, the program view leading to the layers of each line), also on
# tests/mkparts.py's model, whose layers hold several ops (their labels, head
# captions and program-view links name each op). A screenshot goes to
# $TF_BUILD_DIR/report-adder.png.
#
# tfrun --compare: the adder against itself (similarity 1 on the diagonal)
# and against the adder compiled with -O0 (every score recomputed in Python
# from the two models' --dump patterns; one worked out by hand), two learned
# models, the page in Chromium (both models' columns and the matrix laid
# out, none overlapping; screenshot $TF_BUILD_DIR/report-compare.png), the
# --svg files and the command-line errors.
#
# Exit 77 (skipped) when the checks that need no browser pass but chromium (or
# node, which drives it) is not installed. The sanitizer build leaves out the
# browser's checks.
set -u
TFC=$1
TFRUN=$2
TFINFO=$3
TFTRAIN=$4
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

# A trained file holds the optimizer's state beside the model: the model's
# parameters are still the 18,436 that tfc -v counts for binary_add.
P=$SRC/programs
"$TFTRAIN" "$P/binary_add.tfp" --task binary-add:3 --train-size 48 --heldout-size 16 --quiet \
    --steps 2 -o "$tmp/ba.tfw" >/dev/null
check "tftrain binary_add (2 steps)" $?
ba_params=$("$TFC" "$P/binary_add.tfp" -o "$tmp/ba0.tfw" -v | sed -n 's/.* \([0-9]*\) parameters$/\1/p')
"$TFINFO" "$tmp/ba.tfw" >"$tmp/ba-info.txt"
grep -q "^$tmp/ba.tfw: tfw format [0-9]*, d_model 32, 5 layers, $ba_params parameters\$" "$tmp/ba-info.txt"
check "tfinfo counts a trained model's parameters, not its optimizer state" $? \
    "$(head -n 1 "$tmp/ba-info.txt"); tfc -v: $ba_params"
"$TFRUN" "$tmp/ba.tfw" --report "$tmp/ba.html" "101+011=" >/dev/null
grep -q "vocabulary of [0-9]*, $ba_params parameters" "$tmp/ba.html"
check "the report counts the same parameters" $?

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

# A categorical output register: its hot column's value is not a token id.
# The trace's last line names the token tfrun generates.
"$TFC" --one-hot "$P/add_decimal.tfp" -o "$tmp/ad.tfw"
"$TFRUN" "$tmp/ad.tfw" -n 1 --trace "^12345678+87654329=" >"$tmp/ad.txt"
contains "trace: a categorical output reads the generated token" "$tmp/ad.txt" \
    "  output: out at position 18 reads 1 (value 1)"
[ "$(tail -n 1 "$tmp/ad.txt")" = "^12345678+87654329=1" ]
check "add_decimal generates 1 first" $?
# The same output held as a number (tfc's default): the unembedding's
# argmax over the number's logits names the token.
"$TFC" "$P/add_decimal.tfp" -o "$tmp/adn.tfw"
"$TFRUN" "$tmp/adn.tfw" -n 1 --trace "^12345678+87654329=" >"$tmp/adn.txt"
contains "trace: an output held as a number reads the generated token" "$tmp/adn.txt" \
    "  output: out at position 18 reads 1 (the number 1, decoded)"
[ "$(tail -n 1 "$tmp/adn.txt")" = "^12345678+87654329=1" ]
check "... and generates 1 first" $?

# --- tfrun --svg -------------------------------------------------------------------
"$TFRUN" "$W" --svg "$tmp/svg" "0999+0111=" >/dev/null
check "--svg exits 0" $?
n_resid=$(find "$tmp/svg" -name 'resid_*.svg' | wc -l)
n_att=$(find "$tmp/svg" -name 'att_*.svg' | wc -l)
[ "$n_resid" -eq $((n_layers + 1)) ]
check "--svg: one heatmap per layer and the embedding" $? "$n_resid files"
[ "$n_att" -ge 1 ] && [ -f "$tmp/svg/att_00_find_plus_h0.svg" ] && [ -f "$tmp/svg/resid_embedding.svg" ]
check "--svg: attention maps" $?
# File names carry the layer index tfinfo lists, and the titles agree.
bad_names=""
for f in "$tmp"/svg/att_*.svg "$tmp"/svg/resid_[0-9]*.svg; do
    b=$(basename "$f" .svg)
    l=$((10#$(echo "$b" | cut -d_ -f2)))
    name=$(awk -v l="$l" '$1 == l && $3 ~ /^(attention|mlp|norm)$/ {print $2; exit}' "$tmp/info.txt")
    case $b in
    att_*) grep -q "<title>attention, layer $l $name, head" "$f" ;;
    *) grep -q "<title>residual stream after layer $l $name (" "$f" ;;
    esac || bad_names="$bad_names $b"
done
[ -z "$bad_names" ] && [ -f "$tmp/svg/att_07_read_right_h0.svg" ]
check "--svg: file names and titles name the same layer" $? "$bad_names"
"${PYTHON:-python3}" -c '
import sys, xml.etree.ElementTree as ET
for f in sys.argv[1:]:
    ET.parse(f)' "$tmp"/svg/*.svg
check "--svg: every file is well-formed XML" $?
contains "--svg: register labels" "$tmp/svg/resid_00_find_plus.svg" ">left_pos</text>"
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
# A warning sign means something is wrong (issue 24: 14 of the correct
# adder's 36 layers had one): the blends of positions before the '+' and '='
# are in view, which nothing on the way to the output reads, are grey
# ("idle"), not red. A copy of the adder whose find_plus writes left_pos at
# 0.6 of its length still computes the sum, but is flagged where it is read.
idle=$(grep -o 'class="idle"' "$R" | wc -l)
! grep -q 'class="flag"\|&#9888;' "$R" && [ "$idle" -gt 10 ]
check "the correct adder's report: no warning sign, $idle harmless cells grey" $? \
    "$(grep -o '&#9888;[^<]*' "$R" | head -3)"
"${PYTHON:-python3}" - "$W" "$tmp/weak.tfw" <<'PYEOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack("<Q", b[:8])
s, e = json.loads(b[8:8 + n])["layers.0.attn.output.weight"]["data_offsets"]
v = [x * 0.6 for x in struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])]
b[8 + n + s:8 + n + e] = struct.pack("<%df" % len(v), *v)
open(sys.argv[2], "wb").write(b)
PYEOF
"$TFRUN" "$tmp/weak.tfw" --report "$tmp/weak.html" "0999+0111=" >/dev/null &&
    grep -q 'class="flag" title="length 0.6, not 1' "$tmp/weak.html" &&
    grep -q '<a href="#layer-0" class="flagged">' "$tmp/weak.html"
check "a weakened find_plus is flagged where the output reads it" $?
# Registers that share columns (tests/mkgeneral.c --split: the adder's `left`
# split where its second clear_lro, layer 12, zeroed it; `left2` holds the
# columns after): each block's heatmap labels the register that holds them
# there (left the 13 blocks 0..12, left2 the 24 others), and so does the
# hover (in Chromium, below).
"$BUILD/mkgeneral" --split "$W" left 13 left2 "$tmp/split.tfw" &&
    "$TFRUN" "$tmp/split.tfw" --report "$tmp/split.html" "1234+5678=" >/dev/null
check "--report on registers that share columns" $?
[ "$(grep -o '>left</text>' "$tmp/split.html" | wc -l)" -eq 13 ] &&
    [ "$(grep -o '>left2</text>' "$tmp/split.html" | wc -l)" -eq 24 ]
check "shared columns: each block labels the register that holds them there" $?
contains "shared columns: the live ranges in the summary" "$tmp/split.html" \
    "<code>left</code> states 0..12 (the embedding to after layer 11), <code>left2</code> states 13..36 (after layer 12 to after layer 35).</p>"

# --- models without registers ------------------------------------------------------
# Learned models (a `model { ... }` block; untrained weights are enough here):
# a pre-norm next-token model, whose trace shows the logit lens and every
# head, and a post-norm bidirectional classifier. Skipped, with a note, by a
# tfc that does not know model blocks.
cat >"$tmp/lm.tfp" <<'EOF'
vocab "ab()";
model {
    d_model 16; layers 2; heads 2; d_ff 32; activation relu;
    norm pre; positions learned; max_len 64;
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
    # The result line tfrun prints without the options, after the trace.
    plain=$("$TFRUN" "$tmp/cls.tfw" "(ab)")
    [ "$(tail -n 1 "$tmp/cls.txt")" = "$plain" ] && [ "$("$TFRUN" "$tmp/cls.tfw" --svg "$tmp/cls-svg" "(ab)")" = "$plain" ] &&
        [ "$("$TFRUN" "$tmp/cls.tfw" --report "$tmp/cls.html" "(ab)")" = "$plain" ]
    check "--trace, --svg and --report print a classifier's result line" $? "plain: $plain; $(tail -n 1 "$tmp/cls.txt")"
    cls_class=$(echo "$plain" | cut -f2)
    cls_p=$(echo "$plain" | cut -f3)
    contains "the classifier trace ends with its prediction" "$tmp/cls.txt" "  output: class $cls_class at position 0 (p $cls_p)"
    contains "the classifier report names the class" "$tmp/cls.html" "class <code>$cls_class</code> (p $cls_p, read at position 0)"
    # 56 positions: the attention pictures' cells are 8 pixels, too small
    # for a label each.
    "$TFRUN" "$tmp/lm.tfw" -n 1 --report "$tmp/lm.html" "$(printf 'ab()%.0s' $(seq 14))" >/dev/null
    check "--report on a learned model" $?
    # --compare prints a classifier's line as tfrun does.
    "$TFRUN" "$tmp/cls.tfw" --compare "$tmp/cls.tfw" --svg "$tmp/cls-cmp" "(ab)" >"$tmp/out.txt"
    [ "$(cat "$tmp/out.txt")" = "$(printf '%s\n%s' "$plain" "$plain")" ] && [ -f "$tmp/cls-cmp/similarity.svg" ]
    check "--compare of a classifier prints its result line" $? "$(cat "$tmp/out.txt")"
else
    echo "note: this tfc does not compile model blocks; learned-model checks skipped"
fi

# A general program: categorical registers in the trace and the report.
"$TFC" "$SRC/programs/reverse.tfp" -o "$tmp/rev.tfw"
check "tfc on a general program" $?
"$TFRUN" "$tmp/rev.tfw" --trace --report "$tmp/rev.html" "^abc" >"$tmp/rev.txt"
check "--trace --report on a general program" $?
# (the columns as wide as the points' numbers: compiler/angles.h)
contains "general trace: a categorical register as its values" "$tmp/rev.txt" "    reversed                .         'c'         'b'         'a'"
# The register's first column as tfinfo lists it (the scheduler lays the stream out).
rev_col=$("$TFINFO" "$tmp/rev.tfw" | awk '$1 == "reversed" && $2 == "categorical" {split($3, c, "-"); print c[1]}')
# After its size, the states it holds its columns in (0 to the last: every one).
rev_layers=$("$TFINFO" "$tmp/rev.tfw" | sed -n '1s/.*, \([0-9]*\) layers, .*/\1/p')
contains "general report: value labels for the hover text" "$tmp/rev.html" '["reversed","categorical",'"$rev_col"',3,0,'"$rev_layers"',["'"'"'a'"'"'","'"'"'b'"'"'","'"'"'c'"'"'"]]'

# Names longer than the pictures' labels and titles allow, on a short
# sequence (small pictures).
long=the_token_found_at_the_mirrored_position
sed "s/\bopp\b/the_position_this_token_lands_on_when_reversed/g; s/\breversed\b/$long/g" \
    "$SRC/programs/reverse.tfp" >"$tmp/long.tfp"
"$TFC" "$tmp/long.tfp" -o "$tmp/long.tfw" && "$TFRUN" "$tmp/long.tfw" --report "$tmp/long.html" "^ab" >/dev/null
check "--report on a program with long names" $?

# Layers that hold several ops side by side (tests/mkparts.py's model): every
# label of a merged layer names its ops; each head's thumbnail says its op and
# line; the program view links each op's line to its layer and to its own
# heads (attention) or hidden units (an MLP).
"${PYTHON:-python3}" "$SRC/tests/mkparts.py" "$tmp/parts.tfw"
check "mkparts writes its model" $?
"$TFRUN" "$tmp/parts.tfw" --report "$tmp/parts.html" --svg "$tmp/parts-svg" "abc" >/dev/null
check "--report --svg on a model with parts" $?
PH=$tmp/parts.html
contains "parts: the section names each op" "$PH" \
    '>after layer 0 n+hist (head 0: n (Count, line 10); heads 1-2: hist (Aggregate, line 11)) &#8212;'
contains "parts: a merged MLP's section too" "$PH" \
    '>after layer 1 out+x (units 0-3: out (Map, line 12); units 4-5: x (line 13)) &#8212;'
contains "parts: a head's picture names its op" "$tmp/parts-svg/att_00_n_hist_h2.svg" \
    'layer 0 n+hist, head 2: hist (Aggregate, line 11)</text>'
contains "parts: the hover knows a head's op" "$tmp/parts-svg/att_00_n_hist_h1.svg" 'data-part="hist"'
[ "$(grep -o '<span class="mv-cap">[^/]*</span>' "$PH" | tr '\n' ' ')" = \
    '<span class="mv-cap">n<br>line 10</span> <span class="mv-cap">hist<br>line 11</span> <span class="mv-cap">hist<br>line 11</span> ' ]
check "parts: each head's thumbnail under its op's name and line" $? \
    "$(grep -o '<span class="mv-cap">[^/]*</span>' "$PH")"
# row LINE [PAGE]: the program view's links after line LINE; links: their texts.
row() { grep -o "<tr id=\"line-$1\".*</tr>" "${2:-$PH}" | sed 's/.*<td class="to">//'; }
links() { row "$1" "${2:-$PH}" | grep -o '>[Lhu][0-9-]*</a>' | tr -d '<>/a' | tr '\n' ' '; }
[ "$(links 10)" = "L0 h0 " ] && [ "$(links 11)" = "L0 h1 h2 " ] && [ "$(links 12)" = "L1 u0-3 " ] &&
    [ "$(links 13)" = "L1 u4-5 " ]
check "parts: each op's line links to its layer and its own heads or hidden units" $? \
    "10: $(links 10); 11: $(links 11); 12: $(links 12); 13: $(links 13)"
row 11 | grep -qF 'href="#layer-0-h1" title="layer 0, head 1: hist (Aggregate, line 11)">h1</a>' &&
    row 12 | grep -qF 'href="#layer-1" title="layer 1, units 0-3: out (Map, line 12)">u0-3</a>'
check "parts: the program view's links say which op" $? "$(row 11) $(row 12)"
contains "parts: a merged layer's section knows every op's line" "$PH" 'data-line="10" data-lines="10 11"'
# A compiled program whose ops tfc ran side by side: pattern.tfp's t1 (line
# 13) and t2 (line 14) are the two heads of one layer, L the index tfinfo gives.
"$TFC" "$SRC/programs/pattern.tfp" -o "$tmp/pattern.tfw" &&
    "$TFRUN" "$tmp/pattern.tfw" --report "$tmp/pattern.html" "^abcabc" >/dev/null
check "--report on pattern.tfp" $?
"$TFINFO" "$tmp/pattern.tfw" >"$tmp/pattern-info.txt"
L=$(sed -n 's/^ *\([0-9]*\) t1+t2 *attention *2 ops$/\1/p' "$tmp/pattern-info.txt")
[ -n "$L" ] && grep -qx '      head 0: t1 (Aggregate, line 13)' "$tmp/pattern-info.txt" &&
    grep -qx '      head 1: t2 (Aggregate, line 14)' "$tmp/pattern-info.txt"
check "pattern.tfp: tfinfo lists t1 and t2 as the heads of one layer" $? "$(sed -n '/^layers/,/^tensors/p' "$tmp/pattern-info.txt" | head -30)"
[ "$(links 13 "$tmp/pattern.html")" = "L$L h0 " ] && [ "$(links 14 "$tmp/pattern.html")" = "L$L h1 " ]
check "pattern.tfp: lines 13 and 14 link to their own head of layer $L" $? \
    "13: $(links 13 "$tmp/pattern.html"); 14: $(links 14 "$tmp/pattern.html")"
contains "pattern.tfp: t2's thumbnail says its op" "$tmp/pattern.html" '<span class="mv-cap">t2<br>line 14</span>'

# --- tfrun --compare ------------------------------------------------------------
# The same adder compiled with -O0: the same 11 heads, which the -O build's
# FindAndStore makes average where there is nothing to find yet.
W0=$tmp/adder0.tfw
"$TFC" -O0 "$SRC/programs/adder.tfp" -o "$W0"
C=$tmp/cmp.html
"$TFRUN" "$W" --compare "$W0" --report "$C" --svg "$tmp/cmp-svg" "0999+0111=" >"$tmp/out.txt" 2>"$tmp/err"
check "--compare exits 0" $? "$(cat "$tmp/err")"
[ "$(cat "$tmp/out.txt")" = "$(printf '0999+0111=0111\n0999+0111=0111')" ]
check "--compare prints both models' results, A's first" $? "$(cat "$tmp/out.txt")"
"$TFRUN" "$W" --compare "$W" --report "$tmp/self.html" "0999+0111=" >/dev/null
check "--compare of a model with itself" $?
"$TFRUN" "$W" --dump "$tmp/a.safetensors" "0999+0111=" >/dev/null &&
    "$TFRUN" "$W0" --dump "$tmp/a0.safetensors" "0999+0111=" >/dev/null
check "--dump of both adders" $?
# The scores, recomputed from the patterns --dump writes: every pair of
# heads, the best matches, and itself against itself 1 on the diagonal
# (and each head's best match scoring 1).
# find_plus (layer 0, head 0) is worked out by hand: -O0 attends to position
# 0 until the '+' is in view, -O spreads evenly over positions 0..q, so rows
# 1, 2, 3 differ by total variation 1/2, 2/3, 3/4 and the other 7 rows not
# at all: 1 - (1/2 + 2/3 + 3/4) / 10.
"${PYTHON:-python3}" - "$C" "$tmp/self.html" "$tmp/a.safetensors" "$tmp/a0.safetensors" <<'PYEOF' >"$tmp/py.txt" 2>&1
import json, re, struct, sys
def page(path):
    return json.loads(re.search(r'<script type="application/json" id="tf-data">(.*?)</script>',
                                open(path).read(), re.S).group(1))
def patterns(path):  # {(layer, head): [[row of keys]]} from a --dump file
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        m = re.fullmatch(r"blocks\.(\d+)\.attn\.hook_pattern", name)
        if not m:
            continue
        _, H, P, _ = e["shape"]
        b, _ = e["data_offsets"]
        v = struct.unpack("<%df" % (H * P * P), data[8 + n + b:8 + n + b + 4 * H * P * P])
        for h in range(H):
            out[(int(m.group(1)), h)] = [v[(h * P + q) * P:(h * P + q + 1) * P] for q in range(P)]
    return out
def sim(x, y):
    return 1 - sum(0.5 * sum(abs(a - b) for a, b in zip(r, s)) for r, s in zip(x, y)) / len(x)
D, S = page(sys.argv[1]), page(sys.argv[2])
A, B = patterns(sys.argv[3]), patterns(sys.argv[4])
ka, kb = sorted(A), sorted(B)
fails = []
if [("L%d h%d" % k) for k in ka] != [h.split(" ")[0] + " " + h.split(" ")[1] for h in D["heads"][0]]:
    fails.append("the heads of A: %s" % D["heads"][0])
want = [sim(A[i], B[j]) for i in ka for j in kb]
worst = max(abs(w - g) for w, g in zip(want, D["sim"]))
if len(want) != len(D["sim"]) or worst > 1e-9:
    fails.append("similarities differ from Python's by %g" % worst)
best = [max(range(len(kb)), key=lambda j: (want[i * len(kb) + j], -j)) for i in range(len(ka))]
if best != D["best"][0]:
    fails.append("best matches %s, Python %s" % (D["best"][0], best))
hand = 1 - (1 / 2 + 2 / 3 + 3 / 4) / 10
if abs(D["sim"][0] - hand) > 1e-6:
    fails.append("find_plus against find_plus: %r, by hand %r" % (D["sim"][0], hand))
n = len(S["heads"][0])
diag = [S["sim"][i * n + i] for i in range(n)]
# (find_equal and find_out attend alike: a tie, which the first wins)
if n != 11 or any(d != 1 for d in diag) or any(S["sim"][i * n + b] != 1 for i, b in enumerate(S["best"][0])):
    fails.append("itself: diagonal %s, best %s" % (diag, S["best"][0]))
print("\n".join(fails) or "ok %d pairs, largest difference %g; find_plus %r" % (len(want), worst, D["sim"][0]))
PYEOF
[ "$(head -c 3 "$tmp/py.txt")" = "ok " ]
check "--compare: the scores are Python's, 1 on the diagonal against itself, find_plus by hand" $? "$(cat "$tmp/py.txt")"
contains "--compare: the page names both files" "$C" "<code id=\"file-b\">$W0</code>"
contains "--compare: the result of B" "$C" '<code id="result-b">0999+0111=0111</code>'
[ -f "$tmp/cmp-svg/similarity.svg" ] && [ -f "$tmp/cmp-svg/a/att_00_find_plus_h0.svg" ] &&
    [ -f "$tmp/cmp-svg/b/resid_embedding.svg" ] &&
    "${PYTHON:-python3}" -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$tmp/cmp-svg/similarity.svg"
check "--compare --svg: the matrix and both models' pictures" $?
# Compiled against learned, vocabularies of 14 and 12 tokens: the adder and
# programs/decimal_add.tfp's model (untrained), 11 heads against 8.
"$TFC" "$SRC/programs/decimal_add.tfp" -o "$tmp/da.tfw" &&
    "$TFRUN" "$W" --compare "$tmp/da.tfw" --report "$tmp/cmp-da.html" "0999+0111=" >"$tmp/out.txt"
check "--compare of a compiled and a learned model" $?
[ "$(head -n 1 "$tmp/out.txt")" = "0999+0111=0111" ] && [ "$(wc -l <"$tmp/out.txt")" -eq 2 ] &&
    grep -qF '"heads":[["L0 h0 find_plus",' "$tmp/cmp-da.html" && grep -qF '],["L0 h0 block0.attn",' "$tmp/cmp-da.html"
check "--compare: the compiled adder's 11 heads against decimal_add's" $? "$(cat "$tmp/out.txt")"
# Two learned models: binary_add trained 2 steps against the untrained one.
"$TFRUN" "$tmp/ba.tfw" --compare "$tmp/ba0.tfw" --report "$tmp/cmp-ba.html" "101+011=" >/dev/null
check "--compare of two learned models" $?
# The errors: one line, nothing written.
cmp_err() { # cmp_err NAME STATUS MESSAGE ARGS...: tfrun ARGS exits STATUS saying MESSAGE
    local name=$1 want=$2 msg=$3
    shift 3
    rm -f "$tmp/none.html"
    "$TFRUN" "$@" >/dev/null 2>"$tmp/err"
    local got=$?
    [ "$got" -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$msg" "$tmp/err" &&
        [ ! -e "$tmp/none.html" ]
    check "--compare: $name" $? "exit $got: $(cat "$tmp/err")"
}
cmp_err "a missing B" 1 "tfrun: $tmp/missing.tfw: cannot open" \
    "$W" --compare "$tmp/missing.tfw" --report "$tmp/none.html" "0999+0111="
cmp_err "a prompt outside B's vocabulary" 1 \
    "tfrun: prompt for $tmp/ba.tfw: character '9' at index 1 is not in the vocabulary" \
    "$W" --compare "$tmp/ba.tfw" --report "$tmp/none.html" "0999+0111="
cmp_err "a prompt outside A's vocabulary" 1 "tfrun: prompt for $W: character '^' at index 0 is not in the vocabulary" \
    "$W" --compare "$tmp/rev.tfw" --report "$tmp/none.html" "^abc"
cmp_err "a program source as B" 1 "is a program source, not a weight file" \
    "$W" --compare "$SRC/programs/adder.tfp" --report "$tmp/none.html" "0999+0111="
# A program of one Map: one MLP layer, no head to compare.
printf '%s\n' 'vocab "^ab";' "bos '^';" 'maxlen 8;' 'cat out;' \
    "out: Map(tokens == 'a' ? 'b' : 'a') -> out;" 'output out at every position;' >"$tmp/noatt.tfp"
"$TFC" "$tmp/noatt.tfp" -o "$tmp/noatt.tfw"
cmp_err "a model without attention heads" 1 "tfrun: $tmp/noatt.tfw has no attention heads to compare" \
    "$tmp/rev.tfw" --compare "$tmp/noatt.tfw" --report "$tmp/none.html" "^ab"
cmp_err "nothing to write" 2 "tfrun: --compare wants --report FILE or --svg DIR" \
    "$W" --compare "$W0" "0999+0111="
cmp_err "with --trace" 2 "not with --trace, --step or --dump" \
    "$W" --compare "$W0" --trace --report "$tmp/none.html" "0999+0111="
cmp_err "with --batch" 2 "take one prompt, not a file" \
    "$W" --compare "$W0" --report "$tmp/none.html" --batch /dev/null

# The sanitizer build (TF_SKIP_PEERS=1, CMakeLists.txt) stops here: what
# follows checks the pages in a browser, and the pages are the gcc build's,
# byte for byte, where it runs.
if [ "${TF_SKIP_PEERS:-0}" = 1 ]; then
    echo "$passed passed, $failed failed; the pages in Chromium: in the gcc build (TF_SKIP_PEERS)"
    [ "$failed" -eq 0 ]
    exit
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "$passed passed, $failed failed; SKIP: chromium is not installed (apt-get install chromium)"
    [ "$failed" -eq 0 ] && exit 77
    exit 1
fi
NODE=$(command -v node || command -v nodejs || true)
if [ -z "$NODE" ]; then
    echo "$passed passed, $failed failed; SKIP: node is not installed (apt-get install nodejs)"
    [ "$failed" -eq 0 ] && exit 77
    exit 1
fi
# Every page in one Chromium (tests/playground_driver.js over the DevTools
# pipe; a browser start costs about 3.5 s of CPU): each PAGE opened with
# tests/report_layout.js appended (PAGE-l.html; it marks the page done), at
# 1400 x 2000, its DOM saved in PAGE-dom.html; the layout checker's lines
# in PAGE-layout.txt. The adder's and the comparison's pages are also
# screenshots ($TF_BUILD_DIR/report-adder.png, report-compare.png).
laid=("$R")
[ "$learned" = 1 ] && laid+=("$tmp/lm.html" "$tmp/cls.html")
laid+=("$tmp/rev.html" "$tmp/parts.html" "$tmp/pattern.html" "$tmp/long.html" "$C" "$tmp/cmp-ba.html")
laid+=("$tmp/split.html")
[ -f "$tmp/cmp-da.html" ] && laid+=("$tmp/cmp-da.html")
shot_adder=$BUILD/report-adder.png shot_cmp=$BUILD/report-compare.png
rm -f "$shot_adder" "$shot_cmp"
sep="" jobs="["
for page in "${laid[@]}"; do
    base=${page%.html}
    { sed 's#</body></html>$##' "$page"; printf '<script>\n'; cat "$SRC/tests/report_layout.js"
      printf '</script></body></html>\n'; } >"$base-l.html"
    shot=""
    [ "$page" = "$R" ] && shot=",\"screenshot\":\"$shot_adder\""
    [ "$page" = "$C" ] && shot=",\"screenshot\":\"$shot_cmp\""
    jobs+="$sep{\"url\":\"file://$base-l.html\",\"width\":1400,\"height\":2000,\"timeout\":60,"
    jobs+="\"eval\":\"document.documentElement.outerHTML\",\"save\":\"$base-dom.html\"$shot}"
    sep=","
done
# The hover's register names on the page of registers that share columns:
# column 22 after block 12 (left's), 13 and 36 (left2's), column 23 after 36.
jobs+=",{\"url\":\"file://$tmp/split-l.html\",\"timeout\":60,"
jobs+="\"eval\":\"[colName(22,12),colName(22,13),colName(22,36),colName(23,36)].join('|')\"}"
printf '%s]\n' "$jobs" >"$tmp/layout-jobs.json"
CHROMIUM=$CHROMIUM timeout 600 "$NODE" "$SRC/tests/playground_driver.js" "$tmp/layout-jobs.json" \
    >"$tmp/layout-out.txt" 2>>"$tmp/chromium.log"
check "the pages in one Chromium" $? "$(grep error "$tmp/layout-out.txt" | head -3)"
# layout PAGE: the checks of PAGE's DOM and layout lines.
layout() {
    local page=$1 base=${1%.html}
    touch "$base-dom.html"
    sed -n '/<pre id="layout">/,/<\/pre>/p' "$base-dom.html" |
        sed 's#.*<pre id="layout">##;s#</pre>.*##' >"$base-layout.txt"
    grep -q '<p id="report-ok">script ran:' "$base-dom.html" && ! grep -q 'id="report-error"' "$base-dom.html"
    check "$(basename "$page"): the script runs without errors" $? \
        "$(grep -o 'id="report-error">[^<]*' "$base-dom.html")"
    grep -q '^links [0-9]' "$base-layout.txt" && ! grep -q '^FAIL' "$base-layout.txt"
    check "$(basename "$page"): the layout" $? "$(grep '^FAIL' "$base-layout.txt" | head -5)"
}
layout "$R"
cp "$tmp/adder-dom.html" "$tmp/dom.html"
[ "$(grep -o 'data-kind="resid"' "$tmp/dom.html" | wc -l)" -eq $((n_layers + 1)) ]
check "a residual heatmap per layer in the page" $?
[ "$(grep -o 'data-kind="att"' "$tmp/dom.html" | wc -l)" -eq "$n_att" ]
check "every attention map in the page" $?
contains "heatmap cells drawn" "$tmp/dom.html" '<g class="cells"'
contains "register labels" "$tmp/dom.html" '>left_pos</text>'
contains "token labels on the axes" "$tmp/dom.html" '>9 =</text>'
contains "the layer list with source lines" "$tmp/dom.html" 'find_plus:  FindAndStore('
contains "the decoded trace" "$tmp/dom.html" '<th class="r">out_pos</th>'
# The model view: as many thumbnails in each layer as tfinfo lists heads.
want_heads=$(awk '/^layers: /{on=1; next} /^tensors: /{on=0}
    on && $1 ~ /^[0-9]+$/ && $3 ~ /^(attention|mlp|norm)$/ {if (l != "") {printf "%s%s:%d", sep, l, h; sep=","}; l=$1; h=0}
    on && $2 ~ /^heads?,$/ {h=$1}
    END {if (l != "") printf "%s%s:%d", sep, l, h}' "$tmp/info.txt")
[ "$(sed -n 's/^heads //p' "$tmp/adder-layout.txt")" = "$want_heads" ]
check "the model view: one thumbnail per head of every layer" $? \
    "page: $(sed -n 's/^heads //p' "$tmp/adder-layout.txt"); tfinfo: $want_heads"
# Navigable: the adder's page opens with its 36 sections closed (it was
# 23,000 pixels tall with every section open).
height=$(sed -n 's/^height //p' "$tmp/adder-layout.txt")
[ -n "$height" ] && [ "$height" -lt 8000 ]
check "the adder's report opens at most 8000 pixels tall" $? "$height"
contains "the contents" "$tmp/dom.html" '<nav id="toc">'
contains "the program view links line 47 to layer 6's head" "$tmp/dom.html" 'href="#layer-6-h0"'

if [ "$learned" = 1 ]; then
    layout "$tmp/lm.html"
    layout "$tmp/cls.html"
    contains "the learned report shows the logit lens" "$tmp/lm-dom.html" '<th class="r">logit lens</th>'
fi

layout "$tmp/rev.html"
layout "$tmp/parts.html"
layout "$tmp/pattern.html"
[ "$(sed -n 's/^heads //p' "$tmp/parts-layout.txt")" = "0:3,1:0" ]
check "parts.html: three head thumbnails in the merged attention layer" $? "$(sed -n 's/^heads //p' "$tmp/parts-layout.txt")"
contains "the general report labels its registers" "$tmp/rev-dom.html" '>reversed</text>'
layout "$tmp/long.html"
layout "$tmp/split.html"
grep -qF "\"value\":\"left[0 '0']|left2[0 '0']|left2[0 '0']|left2[1 '1']\"" "$tmp/layout-out.txt"
check "split.html: the hover names the register that holds a column after each block" $? \
    "$(grep -o '"value":"left[^"]*"' "$tmp/layout-out.txt")"
contains "long register names are cut" "$tmp/long.html" "<title>$long</title>the_token_f&#8230;</text>"

# The comparisons: both models' columns and the matrix laid out, not
# overlapping, a best-match outline per row, 11 heads each.
layout "$C"
grep -q '^compare A:11 B:11 matrix 11x11$' "$tmp/cmp-layout.txt"
check "cmp.html: 11 attention maps of each model, an 11x11 matrix" $? "$(grep '^compare' "$tmp/cmp-layout.txt")"
grep -q '<p id="report-ok">script ran: similarity matrix 11x11, 11 attention maps of A, 11 of B; hover checked (A L0 h0 find_plus vs B L0 h0 find_plus: similarity 0.80833' "$tmp/cmp-dom.html"
check "cmp.html: the hover reads the matrix" $? "$(grep -o '<p id="report-ok">[^<]*' "$tmp/cmp-dom.html")"
layout "$tmp/cmp-ba.html"
layout "$tmp/cmp-da.html"
grep -q '^compare A:11 B:8 matrix 11x8$' "$tmp/cmp-da-layout.txt"
check "cmp-da.html: 11 heads against 8" $? "$(grep '^compare' "$tmp/cmp-da-layout.txt")"
[ -s "$shot_cmp" ]
check "a screenshot in $shot_cmp" $?
[ -s "$shot_adder" ] && [ "$(head -c 4 "$shot_adder" | tail -c 3)" = "PNG" ]
check "a screenshot in $shot_adder" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
