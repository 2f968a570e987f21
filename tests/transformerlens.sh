#!/usr/bin/env bash
# transformerlens.sh TFC TFTRAIN: tools/tfw_to_transformerlens.py against a
# forward pass written the way TransformerLens computes (tests/tl_check.py;
# TransformerLens itself is not a Debian package), each block's residual
# stream and its activations under TransformerLens's hook names (q, k, v,
# scores, pattern, z, MLP pre/post, outputs) against tools/tfw_torch.py's
# cache of the block's layers: the adder -O0 (one GELU
# MLP or attention per block, padded), sort (bidirectional, ReLU, attention
# and MLP layers paired), words (a vocabulary of words), a trained pre-norm model and the secret code
# classifier, length with a column two registers hold in turn (registers
# decoded by state); and the models it must refuse, with the reason.
set -u
TFC=$1
TFTRAIN=$2
. "$(dirname "$0")/lib.sh"
need_torch
"$TFC" -O0 "$P/adder.tfp" -o "$tmp/adder0.tfw" && "$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw" &&
    "$TFC" "$P/sort.tfp" -o "$tmp/sort.tfw" && "$TFC" "$P/first_token.tfp" -o "$tmp/first_token.tfw"
check "tfc compiles the models" $?
"$TFTRAIN" "$P/binary_add.tfp" --task binary-add:3 --train-size 48 --heldout-size 16 --steps 30 \
    --quiet -o "$tmp/binary_add.tfw" >/dev/null &&
    "$TFTRAIN" "$P/secret_code.tfp" --task secret-code --train-size 30 --heldout-size 5 --steps 30 \
        --quiet -o "$tmp/secret_code.tfw" >/dev/null
check "tftrain trains binary_add and secret_code" $?

# The adder's +-1000 biases: float32 runs differ by 1.3e-4 after them (dump.sh).
"$PY" "$SRC/tests/tl_check.py" "$tmp/adder0.tfw" 1e-3 "0999+0111=" "1234+5678="
check "adder -O0 in TransformerLens's layout" $?
"$PY" "$SRC/tests/tl_check.py" "$tmp/sort.tfw" 1e-5 "^dcbaabcd" "^abab"
check "sort in TransformerLens's layout" $?
"$TFC" "$P/words.tfp" -o "$tmp/words.tfw" &&
    "$PY" "$SRC/tests/tl_check.py" "$tmp/words.tfw" 1e-5 "^ the cat sat" "^ 10 -1 the on mat"
check "words (a vocabulary of words: prompts typed apart) in TransformerLens's layout" $?
"$PY" "$SRC/tools/tfw_to_transformerlens.py" "$tmp/words.tfw" "$tmp/words.pt" >/dev/null &&
    "$PY" -c 'import sys, torch
assert torch.load(sys.argv[1])["vocab"][:8] == ["^", "the", "cat", "sat", "on", "mat", "10", "-1"]' "$tmp/words.pt"
check "the conversion lists the token names (vocab)" $?
"$TFC" "$SRC/bench/tracrbench/case_13_trend_analysis.tfp" -o "$tmp/trend.tfw" &&
    "$PY" "$SRC/tests/tl_check.py" "$tmp/trend.tfw" 1e-5 "^ 1 2 2 0" "^ 2 1 0 0 1" &&
    "$PY" "$SRC/tools/tfw_to_transformerlens.py" "$tmp/trend.tfw" "$tmp/trend.pt" >/dev/null &&
    "$PY" -c 'import sys, torch
d = torch.load(sys.argv[1])
assert d["vocab"] == ["^", "0", "1", "2", "None", "increasing", "decreasing", "constant"], d["vocab"]
assert d["input_vocab"] == 4 and d["cfg"]["d_vocab_out"] == 8, (d["input_vocab"], d["cfg"])' "$tmp/trend.pt"
check "output-only tokens in TransformerLens's layout (input_vocab 4 of 8 tokens)" $?
# A column two registers hold in turn (tests/mklive.py: n.frac in state 1, out
# in state 2, both in the one block's streams): TransformerLens's residual
# streams decode by the file's state (hook_states; states in the .pt).
"$TFC" "$P/length.tfp" -o "$tmp/length.tfw" && "$PY" "$SRC/tests/mklive.py" "$tmp/length.tfw" "$tmp/reuse.tfw" &&
    "$PY" "$SRC/tests/tl_check.py" "$tmp/reuse.tfw" 1e-5 "^abab" "^bbbbbbbbbbbb" >"$tmp/out" &&
    grep -q "1 TransformerLens blocks \[\[0, 1\]\], 2 prompts, .*, 10 registers decoded, 0 failures" "$tmp/out" &&
    "$PY" "$SRC/tools/tfw_to_transformerlens.py" "$tmp/reuse.tfw" "$tmp/reuse.pt" >/dev/null &&
    "$PY" -c 'import sys, torch
s = torch.load(sys.argv[1])["states"]
assert s == {"blocks.0.hook_resid_pre": 0, "blocks.0.hook_resid_mid": 1, "blocks.0.hook_resid_post": 2}, s' "$tmp/reuse.pt"
check "registers that share a column decode by state from TransformerLens's blocks ($(tail -1 "$tmp/out"))" $?
"$PY" "$SRC/tests/tl_check.py" "$tmp/binary_add.tfw" 1e-5 "011+001=" "111+111="
check "trained binary_add in TransformerLens's layout" $?
"$PY" "$SRC/tests/tl_check.py" "$tmp/secret_code.tfw" 1e-5 "#2013" "#7"
check "secret_code in TransformerLens's layout" $?
"$PY" "$SRC/tests/tl_check.py" --refuse "$tmp/adder.tfw" "mix activations (gelu, relu)"
check "the -O adder (GELU and ReLU MLPs) is refused" $?
"$PY" "$SRC/tests/tl_check.py" --refuse "$tmp/first_token.tfw" "post-norm"
check "a post-norm model is refused" $?

# The command line writes cfg, state dict and block map with torch.save.
"$PY" "$SRC/tools/tfw_to_transformerlens.py" "$tmp/binary_add.tfw" "$tmp/ba.pt" >"$tmp/out" &&
    "$PY" -c 'import sys, torch
d = torch.load(sys.argv[1])
assert d["cfg"]["n_layers"] == 2 and d["cfg"]["normalization_type"] == "LN", d["cfg"]
assert d["blocks"] == [[0, 1], [2, 3]] and d["state_dict"]["blocks.1.attn.W_Q"].shape == (4, 32, 8)' "$tmp/ba.pt"
check "tfw_to_transformerlens.py writes the conversion ($(cat "$tmp/out"))" $?
"$PY" "$SRC/tools/tfw_to_transformerlens.py" "$tmp/adder.tfw" "$tmp/a.pt" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "^tfw_to_transformerlens: .*adder.tfw: the MLP layers mix activations" "$tmp/err" &&
    [ ! -e "$tmp/a.pt" ]
check "a refusal is one line, exit 1 ($(cat "$tmp/err"))" $?

finish
