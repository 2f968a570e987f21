#!/usr/bin/env bash
# dump.sh TFC TFRUN TFTRAIN: tfrun --dump against the PyTorch module
# (tools/tfw_torch.py, docs/python.md), on the adder (-O0 and -O: 36
# attention and MLP layers, GELU and ReLU), general programs (sort:
# categorical registers, bidirectional; histogram), a learned program
# compiled as tfc initializes it (decimal_add: 4 heads, pre-norm LayerNorm),
# a trained learned model (binary_add: 4 heads, pre-norm LayerNorm) and
# learned classifiers (first_token, 2 heads, post-norm; secret_code, 3
# heads): every name and tensor of the dump against the module's cache, q,
# k, v, scores, pattern, z and the MLPs' hidden units included
# (tests/dump_check.py); that a name missing from the dump or from the cache
# fails the check; the module's own API; --dump's errors.
set -u
TFC=$1
TFRUN=$2
TFTRAIN=$3
. "$(dirname "$0")/lib.sh"
# The sanitizer build (TF_SKIP_PEERS=1) runs every dump below under the
# sanitizers and leaves their comparison with PyTorch to the gcc build.
peers=1
[ "${TF_SKIP_PEERS:-0}" = 1 ] && peers=0
[ $peers = 0 ] || need_torch

"$TFC" -O0 "$P/adder.tfp" -o "$tmp/adder0.tfw" && "$TFC" "$P/adder.tfp" -o "$tmp/adder.tfw" &&
    "$TFC" "$P/sort.tfp" -o "$tmp/sort.tfw" && "$TFC" "$P/histogram.tfp" -o "$tmp/histogram.tfw" &&
    "$TFC" "$P/first_token.tfp" -o "$tmp/first_token.tfw" &&
    "$TFC" "$P/decimal_add.tfp" -o "$tmp/decimal_add.tfw" && "$TFC" "$P/words.tfp" -o "$tmp/words.tfw"
check "tfc compiles the models" $?
"$TFTRAIN" "$P/binary_add.tfp" --task binary-add:3 --train-size 48 --heldout-size 16 --steps 30 \
    --quiet -o "$tmp/binary_add.tfw" >/dev/null &&
    "$TFTRAIN" "$P/secret_code.tfp" --task secret-code --train-size 30 --heldout-size 5 --steps 30 \
        --quiet -o "$tmp/secret_code.tfw" >/dev/null
check "tftrain trains binary_add and secret_code" $?

# The adder's StepPosition biases of +-1000 round positions to 6.1e-5 in any
# float32 run (tests/test_trace.c): the whole passes agree to 1e-3 there, each
# layer on its own to 1e-5 (dump_check.py says how).
run_check() { # run_check NAME MODEL [--tol T] PROMPT...
    local name=$1
    shift
    if [ $peers = 1 ]; then
        "$PY" "$SRC/tests/dump_check.py" "$TFRUN" "$@"
        check "$name: tfrun --dump == tfw_torch.py" $?
        return
    fi
    local model=$1 prompt ok=0
    shift
    [ "$1" = --tol ] && shift 2
    for prompt in "$@"; do
        rm -f "$tmp/d.safetensors"
        "$TFRUN" "$model" --dump "$tmp/d.safetensors" -- "$prompt" >/dev/null && [ -s "$tmp/d.safetensors" ] ||
            ok=1
    done
    check "$name: tfrun --dump writes its file" $ok
}
run_check "adder -O0" "$tmp/adder0.tfw" --tol 1e-3 "0999+0111=" "1234+5678=" "0000+0000="
run_check "adder -O" "$tmp/adder.tfw" --tol 1e-3 "0999+0111=" "9999+9999="
run_check "sort" "$tmp/sort.tfw" "^dcbaabcd" "^aaaa"
run_check "histogram" "$tmp/histogram.tfw" "^abcabca"
run_check "words (a vocabulary of words)" "$tmp/words.tfw" "^ the cat sat" "^ 10 -1"
run_check "decimal_add (4 heads, 2 blocks, pre-norm; as tfc initializes it)" "$tmp/decimal_add.tfw" \
    "123+456=" "999+1="
run_check "trained binary_add (4 heads, pre-norm)" "$tmp/binary_add.tfw" "011+001=" "111+111="
run_check "first_token (post-norm classifier)" "$tmp/first_token.tfw" "31244123412341234123"
run_check "trained secret_code (classifier)" "$tmp/secret_code.tfw" "#2013" "#7"

if [ $peers = 1 ]; then
# A name missing on one side fails the check: a tfrun whose dump loses one
# tensor (the file rewritten without it).
cat >"$tmp/tfrun_drop" <<EOF
#!/usr/bin/env bash
"$TFRUN" "\$@" || exit
"$PY" -c 'import json, struct, sys
path, drop = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
del header[drop]
h = json.dumps(header).encode()
open(path, "wb").write(struct.pack("<Q", len(h)) + h + data[8 + n:])' "\$3" "\$DROP"
EOF
chmod +x "$tmp/tfrun_drop"
for drop in blocks.2.attn.hook_attn_scores blocks.1.mlp.hook_post; do
    DROP=$drop "$PY" "$SRC/tests/dump_check.py" "$tmp/tfrun_drop" "$tmp/binary_add.tfw" "011+001=" >"$tmp/out"
    [ $? -eq 1 ] && grep -q "the dump lacks 1 promised names: \['$drop'\]" "$tmp/out"
    check "a dump without $drop fails the check" $?
done
# ... and a module whose cache loses one name (tfw_torch.record skipping it).
for drop in blocks.0.attn.hook_q blocks.3.mlp.hook_pre; do
    "$PY" - "$SRC" "$drop" "$TFRUN" "$tmp/binary_add.tfw" >"$tmp/out" <<'PYEOF'
import runpy, sys
src, drop = sys.argv[1], sys.argv[2]
sys.path.insert(0, src + "/tools")
import tfw_torch
record = tfw_torch.record
def skip(hook, name, value):  # record returns the (possibly hooked) value
    if not (isinstance(hook, tfw_torch.Hook) and hook.prefix + name == drop):
        return record(hook, name, value)
    return value
tfw_torch.record = skip
sys.argv = [src + "/tests/dump_check.py", sys.argv[3], sys.argv[4], "011+001="]
runpy.run_path(sys.argv[0], run_name="__main__")
PYEOF
    [ $? -eq 1 ] && grep -q "the cache lacks 1 promised names: \['$drop'\]" "$tmp/out"
    check "a cache without $drop fails the check" $?
done

# The module: a torch.nn.Module whose parameters are the file's tensors; it
# generates what tfrun prints; registers decode by name.
"$PY" - "$SRC/tools" "$tmp" "$TFRUN" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import torch
import tfw_torch

tmp = sys.argv[2]
fails = []
def expect(name, ok):
    if not ok:
        fails.append(name)
        print("FAIL: " + name)

m = tfw_torch.load(tmp + "/adder.tfw")
_, tensors = tfw_torch.read(tmp + "/adder.tfw")
expect("a torch.nn.Module", isinstance(m, torch.nn.Module))
expect("one parameter per tensor", sum(1 for _ in m.parameters()) == len(tensors))
expect("parameters by file name", torch.equal(m.tensor("embed.token.weight"), tensors["embed.token.weight"]))
expect("generate", m.generate("0999+0111=") == "0111" and m.generate("1234+5678=", n=2) == "21")
logits, cache = m.run_with_cache("0999+0111=")
expect("logits [1, pos, vocab]", tuple(logits.shape) == (1, 10, 14))
expect("forward without a cache", torch.equal(m("0999+0111="), logits))
last = "blocks.%d.hook_resid_post" % (len(m.layers) - 1)
# The output register at the last position is the first generated token.
expect("decode final", m.decode(cache, "final")[-1] == "0")
expect("decode a position register", m.decode(cache, "pos") == list(range(10)))
expect("decode a token register at a hook", m.decode(cache, "tokens", hook="hook_embed") == list("0999+0111="))
expect("decode a scalar", all(isinstance(v, float) for v in m.decode(cache, "carry")))
try:
    m.decode(cache, "nope")
    expect("an unknown register is refused", False)
except tfw_torch.TfwError:
    pass
s = tfw_torch.load(tmp + "/sort.tfw")
expect("sort generates (every position)", s.generate("^dcbaabcd") == "aabbccdd")
_, sc = s.run_with_cache("^dcba")
cats = [r for r in s.registers.values() if r["kind"] == "categorical"]
expect("sort has categorical registers", bool(cats))
vals = s.decode(sc, cats[0]["name"])
expect("a categorical register decodes to its labels", all(v is None or v in cats[0]["values"] for v in vals))
w = tfw_torch.load(tmp + "/words.tfw")
expect("a model of words generates words apart", w.generate("^ the cat sat on the mat") == "mat 2 on sat cat 1")
_, wc = w.run_with_cache("^ the cat")
expect("its tokens decode to words", w.decode(wc, "tokens", hook="hook_embed") == ["^", "the", "cat"])
expect("its output register decodes to words and numbers", w.decode(wc, "out") == [None, "'cat'", "1"])
c = tfw_torch.load(tmp + "/first_token.tfw")
expect("a classifier generates its class", c.generate("31244123412341234123") in c.tf.classes)
expect("ln_final for a model ending in a norm layer",
       "ln_final.hook_normalized" in c.run_with_cache("3124")[1])
b = tfw_torch.load(tmp + "/binary_add.tfw")
_, bc = b.run_with_cache("011+001=")
expect("pre-norm inputs", "blocks.0.ln1.hook_normalized" in bc and "blocks.1.ln2.hook_normalized" in bc)
expect("metadata in cfg", b.cfg["learned"]["norm"] == "pre" and b.cfg["made_by"]["tool"] == "tftrain")
# A dump decodes as the module's own cache does.
import subprocess
subprocess.run([sys.argv[3], tmp + "/adder.tfw", "--dump", tmp + "/a.safetensors", "0999+0111="],
               check=True, stdout=subprocess.DEVNULL)
_, acts = tfw_torch.read_safetensors(tmp + "/a.safetensors")
expect("decode a dump", m.decode(acts, "final") == m.decode(cache, "final")
       and m.decode(acts, "left", hook="blocks.20.hook_resid_post") == m.decode(cache, "left", hook="blocks.20.hook_resid_post"))
# The dump's inner activations in TransformerLens's shapes; scores -inf
# exactly where the causal mask applies (its IGNORE), pattern 0 there.
subprocess.run([sys.argv[3], tmp + "/binary_add.tfw", "--dump", tmp + "/b.safetensors", "011+001="],
               check=True, stdout=subprocess.DEVNULL)
_, bd = tfw_torch.read_safetensors(tmp + "/b.safetensors")
shapes = {"blocks.2.attn.hook_q": (1, 8, 4, 8), "blocks.2.attn.hook_k": (1, 8, 4, 8),
          "blocks.2.attn.hook_v": (1, 8, 4, 8), "blocks.2.attn.hook_z": (1, 8, 4, 8),
          "blocks.2.attn.hook_attn_scores": (1, 4, 8, 8), "blocks.2.attn.hook_pattern": (1, 4, 8, 8),
          "blocks.2.ln1.hook_normalized": (1, 8, 32), "blocks.2.hook_attn_out": (1, 8, 32),
          "blocks.3.mlp.hook_pre": (1, 8, 64), "blocks.3.mlp.hook_post": (1, 8, 64),
          "blocks.3.ln2.hook_normalized": (1, 8, 32), "blocks.3.hook_mlp_out": (1, 8, 32)}
for name, shape in shapes.items():
    expect("%s has shape %s" % (name, shape), name in bd and tuple(bd[name].shape) == shape)
future = torch.ones(8, 8, dtype=torch.bool).triu(1)
sc, pat = bd["blocks.2.attn.hook_attn_scores"][0], bd["blocks.2.attn.hook_pattern"][0]
expect("scores -inf exactly where masked", bool(torch.isneginf(sc[:, future]).all())
       and bool(torch.isfinite(sc[:, ~future]).all()))
expect("pattern 0 where masked, rows sum to 1", bool((pat[:, future] == 0).all())
       and bool(((pat.sum(-1) - 1).abs() < 1e-5).all()))
expect("post = relu(pre) (binary_add uses relu)", torch.equal(bd["blocks.3.mlp.hook_post"],
                                                                   torch.relu(bd["blocks.3.mlp.hook_pre"])))
print("module checks: %d failures" % len(fails))
sys.exit(1 if fails else 0)
PYEOF
check "the module's API" $?
fi

# --dump's errors: one line, exit 1 for bad input, 2 for usage.
"$TFRUN" "$tmp/adder.tfw" --dump "$tmp/x.safetensors" "09x9+0111=" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "not in the vocabulary" "$tmp/err" && [ ! -e "$tmp/x.safetensors" ]
check "--dump with a bad prompt: exit 1, nothing written" $?
"$TFRUN" "$tmp/adder.tfw" --dump "$tmp/no/such/dir.safetensors" "0999+0111=" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "cannot create" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ]
check "--dump to an unwritable place: exit 1, one line ($(cat "$tmp/err"))" $?
printf '0999+0111=\n' >"$tmp/p.txt"
"$TFRUN" "$tmp/adder.tfw" --dump "$tmp/x.safetensors" --batch "$tmp/p.txt" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ]
check "--dump with --batch is a usage error" $?
out=$("$TFRUN" "$tmp/adder.tfw" --dump "$tmp/x.safetensors" "0999+0111=")
[ "$out" = "0999+0111=0111" ] && [ -s "$tmp/x.safetensors" ]
check "--dump still prints the completion" $?

finish
