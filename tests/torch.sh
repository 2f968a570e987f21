#!/usr/bin/env bash
# torch.sh TFC TFRUN: PyTorch as an independent peer. tools/tfw_torch.py
# loads the compiled adder with json + torch.frombuffer only and runs it with
# the semantics of docs/weight-format.md; its completions must equal tfrun's,
# line for line, and both must equal sums computed here.
set -u
TFC=$1
TFRUN=$2
SRC=${TF_SOURCE_DIR:?TF_SOURCE_DIR must point at the source tree}
PY=${PYTHON:-python3} # CMake passes one that can import torch (CMakeLists.txt)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # check NAME CONDITION-STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}

if ! "$PY" -c 'import torch' 2>"$tmp/err"; then
    echo "FAIL: $PY cannot import torch (install Debian's python3-torch): $(cat "$tmp/err")"
    echo "0 passed, 1 failed"
    exit 1
fi

W=$tmp/adder.tfw
"$TFC" "$SRC/programs/adder.tfp" -o "$W"
check "compile the adder" $?

# 1,200 prompts: random pairs over 0000..0999, the extremes, and the demo.
"$PY" - "$tmp/prompts.txt" "$tmp/expected.txt" <<'EOF'
import random, sys
rng = random.Random(2026)
pairs = [(rng.randrange(1000), rng.randrange(1000)) for _ in range(1196)]
pairs += [(0, 0), (999, 999), (999, 111), (500, 500)]
with open(sys.argv[1], "w") as p, open(sys.argv[2], "w") as e:
    for a, b in pairs:
        prompt = "%04d+%04d=" % (a, b)
        p.write(prompt + "\n")
        e.write(prompt + ("%04d" % (a + b))[::-1] + "\n")
EOF
check "write prompts" $?

"$TFRUN" "$W" --batch "$tmp/prompts.txt" >"$tmp/tfrun.txt"
check "tfrun --batch" $?
"$PY" "$SRC/tools/tfw_torch.py" "$W" --batch "$tmp/prompts.txt" >"$tmp/torch.txt"
check "tfw_torch.py --batch" $?

n=$(wc -l <"$tmp/torch.txt")
[ "$n" -eq 1200 ]
check "PyTorch answered all 1200 prompts (got $n)" $?
cmp -s "$tmp/tfrun.txt" "$tmp/torch.txt"
check "tfrun and PyTorch print identical lines" $?
if ! cmp -s "$tmp/tfrun.txt" "$tmp/torch.txt"; then diff "$tmp/tfrun.txt" "$tmp/torch.txt" | head -5; fi
cmp -s "$tmp/expected.txt" "$tmp/torch.txt"
check "PyTorch's sums are right" $?
if ! cmp -s "$tmp/expected.txt" "$tmp/torch.txt"; then diff "$tmp/expected.txt" "$tmp/torch.txt" | head -5; fi

out=$("$PY" "$SRC/tools/tfw_torch.py" "$W" -n 10 "0999+0111=")
[ "$out" = "0999+0111=0111000000" ]
check "PyTorch prints the seed's demo line (got '$out')" $?

"$PY" "$SRC/tools/tfw_torch.py" "$W" "09x9+0111=" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "vocabulary" "$tmp/err"
check "PyTorch rejects a token outside the vocabulary" $?

# Output-only tokens (a space in one: case 20 of TracrBench) and UTF-8 tokens
# (case 36): PyTorch prints what tfrun prints, and refuses the same prompts.
O=$tmp/output_only
mkdir -p "$O"
"$TFC" "$SRC/bench/tracrbench/case_20_spam_detector.tfp" -o "$O/spam.tfw" &&
    "$TFC" "$SRC/bench/tracrbench/case_36_emoji_sentiment.tfp" -o "$O/emoji.tfw" &&
    "$TFC" "$SRC/bench/tracrbench/case_117_sum_of_last_two.tfp" -o "$O/sum.tfw"
check "tfc: output-only tokens and emoji" $?
printf '^ J now spam\n^ offer click b\n^ no\n' >"$O/spam.txt"
printf '^ \xf0\x9f\x98\x8a \xf0\x9f\x93\x98\n^ \xf0\x9f\x98\xa2\n' >"$O/emoji.txt"
printf '^ 10 10\n^ 3\n^ 9 8 7\n' >"$O/sum.txt"
for f in spam emoji sum; do
    "$TFRUN" "$O/$f.tfw" --batch "$O/$f.txt" >"$O/$f.tfrun" &&
        "$PY" "$SRC/tools/tfw_torch.py" "$O/$f.tfw" --batch "$O/$f.txt" >"$O/$f.torch" &&
        cmp -s "$O/$f.tfrun" "$O/$f.torch"
    check "$f: tfrun and PyTorch print identical lines ($(head -1 "$O/$f.torch"))" $?
done
grep -qxF "$(printf '^ 10 10\t20 20')" "$O/sum.torch"
check "PyTorch prints the output-only number 20" $?
"$PY" "$SRC/tools/tfw_torch.py" "$O/sum.tfw" "^ 3 None" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "word 3 'None' is an output-only token" "$tmp/err"
check "PyTorch rejects an output-only token in a prompt" $?

# The general language's runtime features (tests/mkgeneral.c): every-position
# output with a bos and a bidirectional attention layer, and a stop token.
G=$tmp/general
mkdir -p "$G"
"${TF_BUILD_DIR:?}/mkgeneral" "$G"
check "mkgeneral" $?
printf '^abab\n^abca\n^\n^c\n^aaaaaaaaaaaaaaa\n^cba\n^bb\n' >"$G/every.txt"
"$TFRUN" "$G/every.tfw" --batch "$G/every.txt" >"$G/tfrun.txt"
check "tfrun every-position --batch" $?
"$PY" "$SRC/tools/tfw_torch.py" "$G/every.tfw" --batch "$G/every.txt" >"$G/torch.txt"
check "tfw_torch.py every-position --batch" $?
cmp -s "$G/tfrun.txt" "$G/torch.txt"
check "every position: tfrun and PyTorch print identical lines" $?
grep -qxF "$(printf '^abca\txxxx')" "$G/torch.txt"
check "every position: PyTorch sees the later 'c' (bidirectional)" $?
printf 'a\nc\naaaa\nab\nb\nbbb\nba\n' >"$G/stop.txt"
"$TFRUN" "$G/stop.tfw" --batch "$G/stop.txt" >"$G/tfrun_stop.txt"
check "tfrun stop-token --batch" $?
"$PY" "$SRC/tools/tfw_torch.py" "$G/stop.tfw" --batch "$G/stop.txt" >"$G/torch_stop.txt"
check "tfw_torch.py stop-token --batch" $?
cmp -s "$G/tfrun_stop.txt" "$G/torch_stop.txt"
check "stop token: tfrun and PyTorch print identical lines" $?
[ "$(head -1 "$G/torch_stop.txt")" = "abc" ]
check "stop token: PyTorch stops before the stop token" $?
"$PY" "$SRC/tools/tfw_torch.py" "$G/every.tfw" "abc" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "beginning-of-sequence" "$tmp/err"
check "PyTorch rejects an input without the BOS" $?

# Run-time checks (mkgeneral's tie.tfw): PyTorch fails the same prompts with
# the same message and prints the same lines for the others.
printf '^aaa\n^ab\n^ccc\n^aaaab\n^acbbbb\n^aab\n^cccccca\n' >"$G/tie.txt"
"$TFRUN" "$G/tie.tfw" --batch "$G/tie.txt" >"$G/tfrun_tie.txt" 2>"$G/tfrun_tie.err"
[ $? -eq 1 ]
check "tfrun: a failed check exits 1" $?
"$PY" "$SRC/tools/tfw_torch.py" "$G/tie.tfw" --batch "$G/tie.txt" >"$G/torch_tie.txt" 2>"$G/torch_tie.err"
[ $? -eq 1 ]
check "PyTorch: a failed check exits 1" $?
cmp -s "$G/tfrun_tie.txt" "$G/torch_tie.txt"
check "checks: tfrun and PyTorch print identical lines for the prompts that pass" $?
[ "$(wc -l <"$G/torch_tie.txt")" -eq 2 ] && grep -q "position 7 does not hold one value within 0.01 ('c' 0.86, 'a' 0.14)" "$G/torch_tie.err"
check "checks: 2 prompts pass (6 c and 1 a, 0.86 and 0.14, is no value: issue 22)" $?
# The same messages, after each tool's own prefix (tfrun: FILE:LINE:, tfw_torch: line N:).
sed -E 's/^tfrun: [^:]*:([0-9]+): /line \1: /' "$G/tfrun_tie.err" >"$G/tfrun_tie.msg"
sed -E 's/^tfw_torch: //' "$G/torch_tie.err" >"$G/torch_tie.msg"
cmp -s "$G/tfrun_tie.msg" "$G/torch_tie.msg"
check "checks: tfrun and PyTorch print the same errors" $?
if ! cmp -s "$G/tfrun_tie.msg" "$G/torch_tie.msg"; then diff "$G/tfrun_tie.msg" "$G/torch_tie.msg" | head -6; fi
grep -qF "line 2: tie.tfp:2: Aggregate -> b: position 2 does not hold one value within 0.01 ('a' 0.50, 'b' 0.50); the compiler could not prove it" "$G/torch_tie.msg"
check "checks: PyTorch names the op, the position and the values" $?
# Numbers as tfrun prints them (model_value_text; tests/test_tfw.c's table).
"$PY" - "$SRC/tools/python" <<'PYEOF2'
import sys
sys.path.insert(0, sys.argv[1])
import tfw_torch, struct
f = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
cases = [(10, "10"), (-10, "-10"), (100, "100"), (2.5, "2.5"), (1234.5, "1234.5"),
         (12345678, "12345678"), (1.5e10, "15000000000"), (6241, "6241"), (0.1, "0.1"),
         (1e-5, "1e-05"), (0, "0"), (1 / 3, "0.33333334"), (3.4e38, "3.4e+38"), (1e17, "1e+17"),
         (float("inf"), "inf"), (float("nan"), "nan")]
bad = [(v, t, tfw_torch.value_text(f(v))) for v, t in cases if tfw_torch.value_text(f(v)) != t]
if bad:
    print("value_text (value, want, got):", bad)
    sys.exit(1)
PYEOF2
check "PyTorch prints numbers as tfrun does (10, not 1e+01)" $?

# Issue 22's program: a compiled Aggregate over k.indices <= q.indices is
# checked within the bound tfc proved; 3 'a' and 1 'b' fail in both tools.
cat >"$G/mix.tfp" <<'EOF'
vocab "^abcd"; bos '^'; maxlen 17;
cat b;
b: Aggregate(k.indices <= q.indices, tokens) -> b;
output b at every position;
EOF
"$TFC" "$G/mix.tfp" -o "$G/mix.tfw" 2>/dev/null
printf '^aaab\n^aaaa\n' >"$G/mix.txt"
"$TFRUN" "$G/mix.tfw" --batch "$G/mix.txt" >"$G/tfrun_mix.txt" 2>"$G/tfrun_mix.err"
s1=$?
"$PY" "$SRC/tools/tfw_torch.py" "$G/mix.tfw" --batch "$G/mix.txt" >"$G/torch_mix.txt" 2>"$G/torch_mix.err"
s2=$?
[ $s1 -eq 1 ] && [ $s2 -eq 1 ] && [ "$(cat "$G/torch_mix.txt")" = "$(printf '^aaaa\taaaa')" ] &&
    cmp -s "$G/tfrun_mix.txt" "$G/torch_mix.txt" &&
    grep -q "^tfw_torch: line 1: mix.tfp:3: Aggregate -> b: position 4 does not hold one value within .* ('a' 0.75, 'b' 0.25)" "$G/torch_mix.err" &&
    [ "$(sed -E 's/^tfrun: [^:]*:1: //' "$G/tfrun_mix.err")" = "$(sed -E 's/^tfw_torch: line 1: //' "$G/torch_mix.err")" ]
check "checks: issue 22's ^aaab fails in tfrun and PyTorch alike, ^aaaa passes" $?
# Generating with checks (tie_gen.tfw): each step, every row.
printf '^a\n^aaaa\n^abaa\n^aa\n^c\n^cccb\n' >"$G/tie_gen.txt"
"$TFRUN" "$G/tie_gen.tfw" --batch "$G/tie_gen.txt" >"$G/tfrun_gen.txt" 2>"$G/tfrun_gen.err"
"$PY" "$SRC/tools/tfw_torch.py" "$G/tie_gen.tfw" --batch "$G/tie_gen.txt" >"$G/torch_gen.txt" 2>"$G/torch_gen.err"
cmp -s "$G/tfrun_gen.txt" "$G/torch_gen.txt"
check "checks, generating: tfrun and PyTorch print identical lines" $?
sed -E 's/^tfrun: [^:]*:([0-9]+): /line \1: /' "$G/tfrun_gen.err" >"$G/tfrun_gen.msg"
sed -E 's/^tfw_torch: //' "$G/torch_gen.err" >"$G/torch_gen.msg"
cmp -s "$G/tfrun_gen.msg" "$G/torch_gen.msg" && [ "$(wc -l <"$G/torch_gen.msg")" -eq 6 ]
check "checks, generating: the same 6 errors (^aaaa's generated b is a mixture)" $?

# Numbers as outputs (mkgeneral's frac.tfw): the same lines, and PyTorch's
# numbers pass tfrun --check (within the file's error bound).
printf '^hello\n^\n^llll\n^hhlhhl\n^lhlhlhlhlhlhlhl\n^eeeeeeeeeeeeeel\n^helloleoh\n' >"$G/frac.txt"
"$TFRUN" "$G/frac.tfw" --batch "$G/frac.txt" >"$G/tfrun_frac.txt"
check "tfrun numbers --batch" $?
"$PY" "$SRC/tools/tfw_torch.py" "$G/frac.tfw" --batch "$G/frac.txt" >"$G/torch_frac.txt"
check "tfw_torch.py numbers --batch" $?
cmp -s "$G/tfrun_frac.txt" "$G/torch_frac.txt"
check "numbers: tfrun and PyTorch print identical lines" $?
if ! cmp -s "$G/tfrun_frac.txt" "$G/torch_frac.txt"; then diff "$G/tfrun_frac.txt" "$G/torch_frac.txt" | head -6; fi
grep -qxF "$(printf '^hello\t0 0 0.33333334 0.5 0.4')" "$G/torch_frac.txt"
check "numbers: PyTorch prints frac_prevs of ^hello" $?
"$TFRUN" "$G/frac.tfw" --check "$G/torch_frac.txt" >/dev/null
check "numbers: PyTorch's values pass tfrun --check" $?
# An output held as a number (programs/add10.tfp; docs/weight-format.md,
# "Numbers as outputs"): the unembedding and its bias decode the number into
# digits in PyTorch as in tfrun, and without the unembedding both refuse the
# file with the same message.
"$TFC" "$SRC/programs/add10.tfp" -o "$G/add10.tfw" 2>/dev/null
check "tfc add10" $?
printf '^0000000000+0000000000=\n^9999999999+9999999999=\n^1234567890+9876543210=\n^0000000001+9999999999=\n' >"$G/add10.txt"
"$TFRUN" "$G/add10.tfw" --batch "$G/add10.txt" >"$G/tfrun_add10.txt" &&
    "$PY" "$SRC/tools/tfw_torch.py" "$G/add10.tfw" --batch "$G/add10.txt" >"$G/torch_add10.txt" &&
    cmp -s "$G/tfrun_add10.txt" "$G/torch_add10.txt" &&
    grep -qxF '^9999999999+9999999999=19999999998' "$G/torch_add10.txt"
check "output held as a number: tfrun and PyTorch print the same sums" $?
"$PY" -c "import sys; b = open(sys.argv[1], 'rb').read(); i = b.index(b'\"unembed.weight\"')
open(sys.argv[2], 'wb').write(b[:i] + b'\"unembed.weigh_\"' + b[i + 16:])" "$G/add10.tfw" "$G/add10_nou.tfw"
"$TFRUN" "$G/add10_nou.tfw" "^1+2=" 2>"$G/nou_tfrun.txt"
t=$?
"$PY" "$SRC/tools/tfw_torch.py" "$G/add10_nou.tfw" "^1+2=" 2>"$G/nou_torch.txt"
p=$?
[ $t -ne 0 ] && [ $p -ne 0 ] && grep -q "tensor 'unembed.weight' is missing" "$G/nou_tfrun.txt" &&
    grep -q "tensor 'unembed.weight' is missing" "$G/nou_torch.txt"
check "output held as a number, no unembedding: tfrun and PyTorch refuse it alike" $?

# Live ranges (docs/weight-format.md, *Registers*): tests/mklive.py's length
# model, where layer 1 zeroes n.frac and writes out into its column, runs and
# decodes by state; tfinfo/tfrun and PyTorch accept and refuse the same "live"
# fields with the same messages.
Lv=$tmp/live
mkdir -p "$Lv"
"$TFC" "$SRC/programs/length.tfp" -o "$Lv/length.tfw" && "$PY" "$SRC/tests/mklive.py" "$Lv/length.tfw" "$Lv/reuse.tfw"
check "mklive.py: length with out on n.frac's column (live [1, 1], [2, 2])" $?
printf '^\n^a\n^abab\n^aaaaaaaaaabbbbbb\n^bbbbbbbbbb\n' >"$Lv/p.txt"
"$TFRUN" "$Lv/length.tfw" --batch "$Lv/p.txt" >"$Lv/length.txt" &&
    "$TFRUN" "$Lv/reuse.tfw" --batch "$Lv/p.txt" >"$Lv/tfrun.txt" &&
    "$PY" "$SRC/tools/tfw_torch.py" "$Lv/reuse.tfw" --batch "$Lv/p.txt" >"$Lv/torch.txt" &&
    cmp -s "$Lv/length.txt" "$Lv/tfrun.txt" && cmp -s "$Lv/tfrun.txt" "$Lv/torch.txt" &&
    grep -qxF "$(printf '^abab\t4444')" "$Lv/torch.txt"
check "a reused column: tfrun and PyTorch print what the original prints" $?
"$TFRUN" "$Lv/reuse.tfw" --dump "$Lv/reuse.safetensors" "^abab" >/dev/null
check "tfrun --dump of the reused model" $?
"$PY" - "$SRC/tools" "$Lv" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import torch
import tfw_torch
d = sys.argv[2]
fails = []
def expect(name, ok):
    if not ok:
        fails.append(name)
        print("FAIL: " + name)
def refused(name, fn, text):
    try:
        got = fn()
    except tfw_torch.TfwError as e:
        expect("%s: %r in %r" % (name, text, str(e)), text in str(e))
        return
    expect("%s is refused (got %r)" % (name, got), False)
# (layer 1's sums run in another order once it writes column 2: out is 4 within 2e-5)
near = lambda a, b: len(a) == len(b) and all(abs(x - y) <= 1e-3 for x, y in zip(a, b))  # noqa: E731

m0, m = tfw_torch.load(d + "/length.tfw"), tfw_torch.load(d + "/reuse.tfw")
_, c0 = m0.run_with_cache("^abab")
_, c = m.run_with_cache("^abab")
frac, out = m0.decode(c0, "n.frac", state=1), m0.decode(c0, "out", state=2)
expect("the original: n.frac 1/5, out 4 (%s, %s)" % (frac, out),
       near(frac, [1, 0.2, 0.2, 0.2, 0.2]) and out == [0, 4, 4, 4, 4])
# Column 2 after layer 1 is out's, not n.frac's: a reader must go by state.
expect("column 2 holds out after layer 1",
       near(c["blocks.1.hook_resid_post"][0, :, 2].tolist(), out))
expect("live ranges", (m.live("n.frac"), m.live("out"), m.live("tokens")) == ((1, 1), (2, 2), (0, 2)))
expect("registers_at", [m.registers_at(s) for s in range(3)] ==
       [["tokens"], ["tokens", "n.frac"], ["tokens", "out"]])
expect("default: n.frac in its last live state (1)", m.decode(c, "n.frac") == frac)
expect("default: out after the last layer", near(m.decode(c, "out"), out))
expect("state=1", m.decode(c, "n.frac", state=1) == frac)
expect("state=2", near(m.decode(c, "out", state=2), out))
expect("a hook of state 1 (layer 1's input)", m.decode(c, "n.frac", hook="blocks.1.hook_resid_pre") == frac)
expect("a tensor with its state", near(m.decode(c["blocks.1.hook_resid_post"], "out", state=2), out))
expect("a register live everywhere, from any stream",
       m.decode(c["blocks.0.hook_resid_post"], "tokens") == ["'^'", None, None, None, None])
refused("n.frac in state 2", lambda: m.decode(c, "n.frac", state=2),
        "register 'n.frac' holds its columns in states 1..1 only")
refused("n.frac after layer 1", lambda: m.decode(c, "n.frac", hook="blocks.1.hook_resid_post"),
        "not in state 2 (blocks.1.hook_resid_post)")
refused("n.frac in the embedding", lambda: m.decode(c, "n.frac", hook="hook_embed"), "not in state 0")
refused("out in state 1", lambda: m.decode(c, "out", state=1), "register 'out' holds its columns in states 2..2 only")
refused("out after layer 0", lambda: m.decode(c, "out", hook="blocks.0.hook_resid_post"), "not in state 1")
refused("a hook and another state", lambda: m.decode(c, "out", hook="blocks.1.hook_resid_post", state=1),
        "is residual state 2, not state 1")
refused("a tensor of no known state", lambda: m.decode(c["blocks.1.hook_resid_post"], "out"), "give state=")
refused("a state past the last", lambda: m.decode(c, "tokens", state=3), "not a residual state 0..2")
refused("an activation that is no residual stream", lambda: m.decode(c, "tokens", hook="blocks.0.attn.hook_q"),
        "blocks.0.attn.hook_q is not a residual stream (no register is read from it)")
_, acts = tfw_torch.read_safetensors(d + "/reuse.safetensors")
expect("the C engine's dump decodes by state too",
       near(m.decode(acts, "n.frac"), frac) and near(m.decode(acts, "out"), out))
refused("the dump's n.frac in state 2", lambda: m.decode(acts, "n.frac", state=2), "states 1..1 only")
sys.exit(1 if fails else 0)
PYEOF
check "the module decodes a reused column's registers by state, and refuses the others" $?
# Header edits: each accepted by both readers or refused by both, with the same message.
T='{"name":"tokens","kind":"categorical","offset":0,"size":1,"values":["'"'^'"'"]}'
F='{"name":"n.frac","kind":"scalar","offset":2,"size":1'
O='{"name":"out","kind":"scalar","offset":2,"size":1'
n_case=0
live_case() { # live_case NAME WANT(ok|load|message) [KEY=TEXT ...]: a header edit of reuse.tfw
    # (ok: both load it and print the same; load: both load it)
    local name=$1 want=$2
    shift 2
    n_case=$((n_case + 1))
    local f=$Lv/case$n_case.tfw
    if [ $# -eq 0 ]; then cp "$Lv/reuse.tfw" "$f"; else "$PY" "$SRC/tests/mklive.py" "$Lv/reuse.tfw" "$f" "$@"; fi ||
        { check "live: $name: mklive.py" 1; return; }
    "${TF_BUILD_DIR:?}/tfinfo" "$f" >/dev/null 2>"$Lv/c.err"
    local c=$?
    "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import tfw_torch; tfw_torch.load(sys.argv[2])' \
        "$SRC/tools" "$f" 2>"$Lv/p.err"
    local p=$?
    if [ "$want" = load ]; then
        [ $c -eq 0 ] && [ $p -eq 0 ]
    elif [ "$want" = ok ]; then
        [ $c -eq 0 ] && [ $p -eq 0 ] &&
            "$TFRUN" "$f" "^abab" >"$Lv/c.out" 2>&1 &&
            "$PY" "$SRC/tools/tfw_torch.py" "$f" "^abab" >"$Lv/p.out" 2>&1 && cmp -s "$Lv/c.out" "$Lv/p.out"
    else
        [ $c -eq 1 ] && [ $p -ne 0 ] && grep -qF "$want" "$Lv/c.err" && grep -qF "TfwError: $want" "$Lv/p.err"
    fi
    check "live: $name: tfinfo and PyTorch agree ($want)" $?
}
live_case "disjoint ranges share a column" ok
live_case "live past the last state is capped" ok "registers=[$T,$F,\"live\":[1,1]},$O,\"live\":[2,99]}]"
live_case "live written as 1.0" ok "registers=[$T,$F,\"live\":[1.0,1e0]},$O,\"live\":[2,2147483646]}]"
live_case "ranges [0, 0] and [1, 2]" ok "registers=[$T,$F,\"live\":[0,0]},$O,\"live\":[1,2]}]"
live_case "overlapping ranges" "registers 'n.frac' and 'out' overlap" "registers=[$T,$F,\"live\":[0,1]},$O,\"live\":[1,2]}]"
live_case "no live: every state" "registers 'n.frac' and 'out' overlap" "registers=[$T,$F},$O,\"live\":[2,2]}]"
live_case "from after to" "__metadata__.registers[1]: live is not [from, to], integers 0 <= from <= to" \
    "registers=[$T,$F,\"live\":[1,0]},$O,\"live\":[2,2]}]"
for bad in '[1]' '[1,1,1]' '[0.5,1]' '["1","1"]' '[-1,1]' '[true,1]' 'null' '{}' '1' '[2,2147483647]'; do
    live_case "live $bad" "__metadata__.registers[1]: live is not [from, to], integers 0 <= from <= to" \
        "registers=[$T,$F,\"live\":$bad},$O,\"live\":[2,2]}]"
done
live_case "from past the last state" "register 'out': live range 3..4 is not within states 0..2" \
    "registers=[$T,$F,\"live\":[1,1]},$O,\"live\":[3,4]}]"
live_case "the output not live after the last layer" "output register 'out' does not hold its columns after the last layer" \
    "registers=[$T,$F,\"live\":[2,2]},$O,\"live\":[0,1]}]"
C='checks=[{"register":"tokens","layer":0,"line":11,"op":"Count -> n"}]'
live_case "a check where its register is live" load "$C" "registers=[$T,$F,\"live\":[1,1]},$O,\"live\":[2,2]}]"
live_case "a check where its register is not live" "check 0: register 'tokens' does not hold its columns after layer 0" \
    "$C" "registers=[${T%\}},\"live\":[0,0]},$F,\"live\":[1,1]},$O,\"live\":[2,2]}]"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
