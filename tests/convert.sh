#!/usr/bin/env bash
# convert.sh TFCONVERT TFRUN TFC TFTRAIN: tfconvert's GPT-2-style folders.
# tests/gpt2_ref.py builds folders (random weights, Hugging Face names and
# Conv1D layouts) with its own GPT-2 forward in float64; each converted file
# must give the same final stream and logits within 1e-5 (of the largest
# value) and the same greedy generations under tfrun. Then the inspection
# tools and the trainer on a converted file, and the refusals, each naming
# the key, tensor or token.
set -u
. "$(dirname "$0")/lib.sh"
TFCONVERT=$1 TFRUN=$2 TFC=$3 TFTRAIN=$4
need_torch
REF=$SRC/tests/gpt2_ref.py
prompts=("0" "12+34=" "999+1= 7" $'5\n5')
# ref_check FOLDER TFW N PROMPT...: tfrun on TFW against the test's GPT-2
# forward on FOLDER (gpt2_ref.py check). The sanitizer build
# (TF_SKIP_PEERS=1) runs tfrun on the prompts under the sanitizers and leaves
# the comparison to the gcc build.
ref_check() {
    if [ "${TF_SKIP_PEERS:-0}" != 1 ]; then
        "$PY" "$REF" check "$1" "$TFRUN" "${@:2}"
        return
    fi
    local tfw=$2 n=$3 prompt
    shift 3
    for prompt in "$@"; do
        "$TFRUN" "$tfw" --dump "$tmp/ref.safetensors" -- "$prompt" >/dev/null &&
            "$TFRUN" "$tfw" -n "$n" -- "$prompt" >/dev/null || return 1
        echo "ok (tfrun only: TF_SKIP_PEERS)"
    done
}

# shape NAME ARGS...: make, convert, compare (the vocabulary from vocab.json,
# or --vocab for the folders made with --vocab-mode chars).
shape() {
    local name=$1
    shift
    "$PY" "$REF" make "$tmp/$name" "$@" || { check "make $name" 1; return; }
    local vocab=()
    case " $* " in *" chars "*) vocab=(--vocab $'0123456789+= \n') ;; esac
    "$TFCONVERT" "${vocab[@]}" "$tmp/$name" -o "$tmp/$name.tfw"
    check "tfconvert $name ($*)" $?
    ref_check "$tmp/$name" "$tmp/$name.tfw" 8 "${prompts[@]}" >"$tmp/$name.out"
    rc=$?
    [ $rc -eq 0 ] || cat "$tmp/$name.out"
    check "$name: logits within 1e-5 and the same generations as GPT-2 ($(grep -c '^ok' "$tmp/$name.out") prompts)" $rc
}
shape l1_tied --layers 1 --d 16 --heads 2
shape l4_untied --layers 4 --d 32 --heads 4 --untied --no-prefix --vocab-mode chars --seed 2
shape l4_tied_chars --layers 4 --d 24 --heads 3 --vocab-mode chars --seed 3
shape l2_gelu --layers 2 --d 16 --heads 4 --act gelu --untied --seed 4 --scale-by-layer
shape l1_relu --layers 1 --d 8 --heads 1 --act relu --no-prefix --seed 5

f=$tmp/l4_untied.tfw
# made_by names the folder and what was read.
"$PY" - "$f" "$tmp/l4_untied" <<'EOF'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
meta = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])["__metadata__"]
m = json.loads(meta["made_by"])
assert m["tool"] == "tfconvert" and m["from"]["format"] == "gpt2", m
assert m["from"]["path"] == sys.argv[2] and m["from"]["vocab"] == "--vocab", m
assert m["from"]["activation_function"] == "gelu_new" and m["from"]["tie_word_embeddings"] is False, m
layers = json.loads(meta["layers"])
assert [l["kind"] for l in layers] == ["attention", "mlp"] * 4 + ["norm"], layers
assert all(l["activation"] == "gelu_tanh" for l in layers if l["kind"] == "mlp")
EOF
check "made_by records the folder; 4 blocks become 8 pre-norm layers and ln_f, gelu_tanh" $?

# The inspection tools on a converted file.
"$TFRUN" "$f" --trace "12+34=" >"$tmp/trace.txt" && grep -q "^  layer 7 h.3.mlp  (mlp)" "$tmp/trace.txt" &&
    grep -q "^  layer 8 ln_f  (norm)" "$tmp/trace.txt"
check "--trace" $?
"$TFRUN" "$f" --report "$tmp/r.html" "12+34=" >/dev/null && grep -q "h.3.mlp" "$tmp/r.html"
check "--report" $?
"$TFRUN" "$f" --dump "$tmp/d.safetensors" "12+34=" >/dev/null &&
    "$PY" -c "
import json, struct, sys
h = open(sys.argv[1], 'rb').read()
names = json.loads(h[8:8 + struct.unpack('<Q', h[:8])[0]])
assert 'blocks.7.mlp.hook_post' in names and 'blocks.0.attn.hook_pattern' in names" "$tmp/d.safetensors"
check "--dump" $?
"$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw" &&
    "$TFRUN" "$f" --compare "$tmp/adder.tfw" --report "$tmp/cmp.html" "0999+0111=" >"$tmp/cmp.txt" &&
    [ "$(sed -n 2p "$tmp/cmp.txt")" = "0999+0111=0111" ] && grep -q "adder.tfw" "$tmp/cmp.html"
check "--compare against the compiled adder" $?
"$TFTRAIN" --init "$f" --task decimal-add:2 --train-size 200 --heldout-size 20 --steps 5 \
    --batch-size 16 -o "$tmp/tuned.tfw" >"$tmp/train.txt" 2>&1 &&
    "$TFRUN" "$tmp/tuned.tfw" "12+34=" >/dev/null &&
    "$PY" -c "
import json, struct, sys
h = open(sys.argv[1], 'rb').read()
m = json.loads(json.loads(h[8:8 + struct.unpack('<Q', h[:8])[0]])['__metadata__']['made_by'])
assert m['tool'] == 'tftrain' and m['from']['tool'] == 'tfconvert', m" "$tmp/tuned.tfw"
rc=$?
[ $rc -eq 0 ] || cat "$tmp/train.txt"
check "tftrain --init on the converted file; made_by nests tfconvert" $rc

# Back out: a .tfw that is exactly a GPT-2 to a folder. The converted
# folders come back tensor for tensor (the mask buffers aside), and their
# conversion runs as the first did.
"$TFCONVERT" "$tmp/l1_tied.tfw" -o "$tmp/back1" && "$TFCONVERT" "$tmp/l4_untied.tfw" -o "$tmp/back4"
check "tfconvert .tfw -o FOLDER" $?
"$PY" - "$tmp" <<'EOF'
import json, os, sys
sys.path.insert(0, os.environ["TF_SOURCE_DIR"] + "/tests")
import gpt2_ref as g
t = sys.argv[1]
for orig, back, prefix in (("l1_tied", "back1", "transformer."), ("l4_untied", "back4", "")):
    a = g.read_safetensors("%s/%s/model.safetensors" % (t, orig))
    b = g.read_safetensors("%s/%s/model.safetensors" % (t, back))
    a = {("transformer." + k if prefix == "" and not k.startswith("lm_head") else k): v
         for k, v in a.items() if not (k.endswith(".attn.bias") and v.dim() == 4)}
    assert set(a) == set(b), (orig, set(a) ^ set(b))
    assert all(bool((a[k] == b[k]).all()) for k in a), orig
    ca, cb = (json.load(open("%s/%s/config.json" % (t, x))) for x in (orig, back))
    for k in ("n_embd", "n_layer", "n_head", "n_positions", "vocab_size", "activation_function",
              "layer_norm_epsilon", "tie_word_embeddings"):
        assert ca[k] == cb[k], (orig, k, ca[k], cb[k])
assert json.load(open("%s/back1/vocab.json" % t)) == json.load(open("%s/l1_tied/vocab.json" % t))
EOF
check "the folders come back: every tensor bit for bit, config.json, vocab.json" $?
"$TFCONVERT" "$tmp/back4" -o "$tmp/back4.tfw" &&
    [ "$("$TFRUN" "$tmp/back4.tfw" -n 8 "12+34=")" = "$("$TFRUN" "$tmp/l4_untied.tfw" -n 8 "12+34=")" ]
check "the folder converted again generates the same" $?
# A vocabulary of words: vocab.json's tokens of several characters are the
# .tfw's words (tfinfo lists them, prompts and generations are words apart,
# as GPT-2 generates), and vocab.json comes back with them.
rm -rf "$tmp/words_gpt2" && cp -r "$tmp/l1_tied" "$tmp/words_gpt2"
"$PY" - "$tmp/words_gpt2/vocab.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
words = {"+": "plus", "=": "equals", "\u0120": "-1", "\u010a": "10"}  # '+', '=', space, newline
assert all(k in v for k in words), sorted(v)
json.dump({words.get(k, k): i for k, i in v.items()}, open(sys.argv[1], "w"))
EOF
"$TFCONVERT" "$tmp/words_gpt2" -o "$tmp/words.tfw" &&
    "$(dirname "$TFRUN")/tfinfo" "$tmp/words.tfw" | grep -q "10:plus 11:equals 12:-1 13:10"
check "tfconvert: vocab.json of words; tfinfo lists them" $?
"$PY" - "$tmp/words_gpt2" "$TFRUN" "$tmp/words.tfw" <<'EOF'
import json, os, subprocess, sys
sys.path.insert(0, os.environ["TF_SOURCE_DIR"] + "/tests")
import gpt2_ref as g
folder, tfrun, tfw = sys.argv[1:]
names = {i: t for t, i in json.load(open(folder + "/vocab.json")).items()}
index = {t: i for i, t in names.items()}
ref = g.Gpt2(folder)
for prompt in ("1 2 plus 3 4 equals", "10 -1  9", "equals"):
    ids = [index[w] for w in prompt.split()]
    want = prompt + "".join(" " + names[i] for i in ref.generate(ids, 6)[len(ids):])
    got = subprocess.run([tfrun, tfw, "-n", "6", prompt], check=True, capture_output=True,
                         text=True).stdout
    assert got == want + "\n", (prompt, got, want)
EOF
check "a GPT-2 of words generates in tfrun, words apart, as in the test's GPT-2 forward" $?
"$TFCONVERT" "$tmp/words.tfw" -o "$tmp/words_back" &&
    "$PY" -c "import json, sys; a, b = (json.load(open(p + '/vocab.json')) for p in sys.argv[1:]); assert a == b, (a, b)" \
        "$tmp/words_gpt2" "$tmp/words_back"
check "the folder comes back with its words in vocab.json" $?
"$TFRUN" "$tmp/words.tfw" "1 pluss" 2>"$tmp/err.txt"
[ $? -eq 1 ] && [ "$(cat "$tmp/err.txt")" = "tfrun: prompt: word 2 'pluss' is not in the vocabulary; did you mean 'plus'?" ]
check "an unknown word of a converted model ($(cat "$tmp/err.txt"))" $?
# A learned pre-norm model (tfc's initialization of decimal_add.tfp, exact
# GELU, learned positions) has an unembedding bias, which GPT-2's lm_head
# has not; without it, the model fits GPT-2: the test's own GPT-2 forward on
# the folder gives tfrun's final stream and generations on the .tfw.
"$TFC" "$P/decimal_add.tfp" -o "$tmp/dec_bias.tfw" && "$TFCONVERT" "$tmp/dec_bias.tfw" -o "$tmp/x" 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "not a GPT-2 exactly: unembed.bias: GPT-2's lm_head has no bias" "$tmp/err.txt" && [ ! -e "$tmp/x" ]
check "an unembedding bias is refused" $?
"$PY" -c "
import sys; sys.path.insert(0, sys.argv[1] + '/tests'); import gpt2_ref as g
t = g.read_safetensors(sys.argv[2]); del t['unembed.bias']
g.write_safetensors(sys.argv[3], t, meta=g.read_metadata(sys.argv[2]))" "$SRC" "$tmp/dec_bias.tfw" "$tmp/dec.tfw" &&
    "$TFCONVERT" "$tmp/dec.tfw" -o "$tmp/dec_gpt2" &&
    ref_check "$tmp/dec_gpt2" "$tmp/dec.tfw" 4 "123+456=" "9+9=" >"$tmp/dec.out"
rc=$?
[ $rc -eq 0 ] || cat "$tmp/dec.out"
check "a learned model as a GPT-2 folder runs in the test's GPT-2 forward as in tfrun" $rc
"$TFCONVERT" "$tmp/adder.tfw" -o "$tmp/adder_gpt2" 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "adder.tfw: not a GPT-2 exactly: 36 layers: GPT-2 is blocks of an attention and an MLP layer, then a norm layer" "$tmp/err.txt"
check "the compiled adder is refused, saying why" $?
printf 'vocab "ab";\nmodel { d_model 8; layers 1; heads 2; d_ff 8; norm post; positions learned; max_len 8; }\n' >"$tmp/post.tfp"
"$TFC" "$tmp/post.tfp" -o "$tmp/post.tfw" 2>/dev/null && "$TFCONVERT" "$tmp/post.tfw" -o "$tmp/post_gpt2" 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "not a GPT-2 exactly: .*has no pre-norm" "$tmp/err.txt"
check "a post-norm model is refused, naming the layer ($(cat "$tmp/err.txt"))" $?

# refuse NAME PATTERN FOLDER-EDIT [TFCONVERT ARGS]: exit 1 and one line matching.
refuse() {
    local name=$1 pattern=$2 edit=$3
    shift 3
    rm -rf "$tmp/bad"
    cp -r "$tmp/l1_tied" "$tmp/bad"
    (cd "$tmp/bad" && "$PY" -c "$edit") || { check "edit for $name" 1; return; }
    "$TFCONVERT" "$@" "$tmp/bad" -o "$tmp/bad.tfw" >"$tmp/out.txt" 2>"$tmp/err.txt"
    local rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err.txt" &&
        [ ! -e "$tmp/bad.tfw" ]; then
        check "$name" 0
    else
        echo "  exit $rc, stderr: $(cat "$tmp/err.txt")"
        check "$name" 1
    fi
}
cfg='import json; c = json.load(open("config.json"))'
save='json.dump(c, open("config.json", "w"))'
refuse "a missing config key" "config.json: no n_embd" "$cfg; del c['n_embd']; $save"
refuse "an activation it cannot hold" "activation_function 'swish' cannot be represented" \
    "$cfg; c['activation_function'] = 'swish'; $save"
refuse "another model type" "model_type 'llama' is not gpt2" "$cfg; c['model_type'] = 'llama'; $save"
refuse "cross-attention" "add_cross_attention" "$cfg; c['add_cross_attention'] = True; $save"
refuse "no lm_head.weight when untied" "no tensor 'lm_head.weight'" \
    "$cfg; c['tie_word_embeddings'] = False; $save"
refuse "a vocabulary over 256 tokens" "vocab_size 300: a .tfw vocabulary holds at most 256" \
    "$cfg; c['vocab_size'] = 300; $save"
refuse "a word beside the space token (words are typed apart)" "vocabulary entry 12 ' ' is not a token of a vocabulary of words" \
    "import json; v = json.load(open('vocab.json')); v['ab'] = v.pop('3'); json.dump(v, open('vocab.json', 'w'))"
refuse "a word of a byte above ASCII" "token 'a.*b' \(id 3\) is not one" \
    "import json; v = json.load(open('vocab.json')); v['a\\u00e9b'] = v.pop('3'); json.dump(v, open('vocab.json', 'w'))"
refuse "a missing token id" "vocab.json: no token has id 3" \
    "import json; v = json.load(open('vocab.json')); del v['3']; json.dump(v, open('vocab.json', 'w'))"
refuse "no vocab.json" "vocab.json: cannot open \(a character model: give --vocab" \
    "import os; os.remove('vocab.json')"
refuse "--vocab of the wrong length" "--vocab has 3 characters, but config.json's vocab_size is 14" \
    "pass" --vocab abc
refuse "--vocab with a byte above ASCII (fuzz_gpt2's finding)" "--vocab: character 14 is the byte 0xcf: a .tfw vocabulary holds ASCII characters only" \
    "pass" --vocab $'0123456789+= \xcf'
refuse "a wrong shape" "tensor 'transformer.h.0.mlp.c_fc.weight' has shape \[64, 16\], not \[16, 64\]" \
    "import sys; sys.path.insert(0, '$SRC/tests'); import gpt2_ref as g; t = g.read_safetensors('model.safetensors'); t['transformer.h.0.mlp.c_fc.weight'] = t['transformer.h.0.mlp.c_fc.weight'].T; g.write_safetensors('model.safetensors', t)"
refuse "a tensor GPT-2 does not have" "tensor 'transformer.h.1.ln_1.weight' is not part of a GPT-2 model of config.json's 1 layers" \
    "import sys, torch; sys.path.insert(0, '$SRC/tests'); import gpt2_ref as g; t = g.read_safetensors('model.safetensors'); t['transformer.h.1.ln_1.weight'] = torch.ones(16); g.write_safetensors('model.safetensors', t)"
refuse "a float16 tensor" "tensor '[^']+': dtype 'F16' is not supported \(only F32\)" \
    "import json, struct; d = open('model.safetensors', 'rb').read(); n = struct.unpack('<Q', d[:8])[0]; h = json.loads(d[8:8+n]); k = next(k for k in h if k != '__metadata__'); h[k]['dtype'] = 'F16'; s = json.dumps(h).encode(); s += b' ' * (-len(s) % 8); open('model.safetensors', 'wb').write(struct.pack('<Q', len(s)) + s + d[8+n:])"
refuse "not a GPT-2 checkpoint" "no tensor 'wte.weight' \(nor 'transformer.wte.weight'\)" \
    "import sys; sys.path.insert(0, '$SRC/tests'); import gpt2_ref as g; t = g.read_safetensors('model.safetensors'); t['embed'] = t.pop('transformer.wte.weight'); g.write_safetensors('model.safetensors', t)"
"$TFCONVERT" "$tmp/nothing" -o "$tmp/x.tfw" 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "nothing: cannot open" "$tmp/err.txt"
check "a missing input" $?
"$TFCONVERT" "$tmp/l1_tied" 2>/dev/null
[ $? -eq 2 ]
check "no -o: usage error" $?
"$TFCONVERT" "$f" -o "$tmp/x.tfw" 2>"$tmp/err.txt"
[ $? -eq 2 ] && grep -q "a GPT-2-style folder converts to a .tfw, a .tfw to a .onnx file or a GPT-2-style folder" "$tmp/err.txt" &&
    [ ! -e "$tmp/x.tfw" ]
check "a .tfw to a .tfw: usage error" $?
"$TFCONVERT" "$SRC/programs/adder.tfp" -o "$tmp/x.onnx" 2>"$tmp/err.txt"
[ $? -eq 1 ] && grep -q "is a program source, not a weight file" "$tmp/err.txt"
check "a program given for a .tfw" $?
finish
