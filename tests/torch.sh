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

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
