#!/usr/bin/env bash
# bench/compiled-size.sh OLD_BIN_DIR NEW_BIN_DIR [NAME...]: what two builds of tfc compile
# every program to, side by side (issue 12: compact models). Prints Markdown
# (bench/compiled-size.md keeps the last run).
#
# Each BIN_DIR holds tfc, tfinfo and tfrun (a build directory will do). Every program in
# programs/ and bench/tracr/ (or only the NAMEs given: `histogram`, `tracr/hist_lib`) is
# compiled by both tfc's, and each weight file described by its own build's tfinfo:
#
#   - attention layers, MLP layers, heads (summed over the attention layers), blocks
#     (Tracr's count: walking the layers in order, a block is at most one attention layer
#     followed by at most one MLP layer), d_model and parameters (stored floats), the
#     non-zero ones and their distinct values (nzd), as "before -> after";
#   - generation speed: `tfrun --check --threads 1` of each build on its own weights, on the
#     program's cases from tests/program_ref.py (at most 20,000, repeated until a run takes
#     about a CPU second; the adder: every 10th of tools/adder_cases.py), in cases per CPU
#     second (user + system), the best of REPS runs (default 3) alternating the two builds,
#     and tfrun's FLOP per case (which does not vary from run to run). Every case must pass,
#     or the cell says FAILED. Learned programs (model { ... }) have no cases: "-".
#     SPEED=0 skips the speed columns.
#
# Then bench/tracr's rows against Tracr's own compilations (issue 12's table, measured
# with Tracr at the same vocabularies and lengths): blocks and d_model, and whether tfc's
# new build meets them: no more blocks, and no wider once the tokens tfc's vocabulary holds
# only to print them (Tracr's outputs are not tokens) are taken off.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/compiled-size.sh OLD_BIN_DIR NEW_BIN_DIR [NAME...]" >&2; exit 2; }
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
shift 2
cd "$(dirname "$0")/.."
for d in "$old" "$new"; do
    for t in tfc tfinfo tfrun; do
        [ -x "$d/$t" ] || { echo "bench/compiled-size.sh: no $d/$t" >&2; exit 2; }
    done
done
PY=${PYTHON:-python3}
reps=${REPS:-3}
speed=${SPEED:-1}
REF=tests/program_ref.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Tracr's side (issue 12): vocabulary size (its tokens, without BOS), blocks, d_model, and
# the most heads in one of its attention layers.
declare -A tracr_vocab=([length]=4 [hist]=4 [sort]=4 [sort_unique]=4 [frac_prevs]=4
    [pair_balance]=5 [shuffle_dyck2]=4 [shuffle_dyck3]=6 [detect_pattern]=3)
declare -A tracr_blocks=([length]=1 [hist]=1 [sort]=3 [sort_unique]=2 [frac_prevs]=2
    [pair_balance]=2 [shuffle_dyck2]=8 [shuffle_dyck3]=9 [detect_pattern]=3)
declare -A tracr_dmodel=([length]=19 [hist]=19 [sort]=43 [sort_unique]=23 [frac_prevs]=14
    [pair_balance]=23 [shuffle_dyck2]=55 [shuffle_dyck3]=73 [detect_pattern]=26)
declare -A tracr_heads=([length]=1 [hist]=1 [sort]=1 [sort_unique]=1 [frac_prevs]=1
    [pair_balance]=2 [shuffle_dyck2]=4 [shuffle_dyck3]=6 [detect_pattern]=2)
tracr_order="length hist sort sort_unique frac_prevs pair_balance shuffle_dyck2 shuffle_dyck3 detect_pattern"

# describe TFINFO WEIGHTS: "attention mlp heads max_heads blocks d_model parameters n_tok",
# n_tok the columns of `tokens` (n_vocab, or fewer where tfc left out those no layer reads),
# parsed from tfinfo's text: the first line (d_model, parameters), "vocabulary: N tokens",
# and in the layer list each layer's line ("  %3d NAME KIND ...") and, for attention, the
# "N head(s)" line under it.
describe() {
    "$1" "$2" | "$PY" -c '
import re, sys
lines = sys.stdin.read().splitlines()
m = re.search(r"d_model (\d+), \d+ layers?, (\d+) parameters", lines[0])
d_model, params = m.group(1), m.group(2)
n_vocab = next((re.match(r"vocabulary: (\d+) tokens", l).group(1) for l in lines
                if l.startswith("vocabulary: ")), "?")
tok = next((re.match(r"  tokens +\S+ +(\d+)(?:-(\d+))?", l) for l in lines
            if re.match(r"  tokens +\S+ +\d", l)), None)
if tok:  # the columns tokens keeps
    n_vocab = str(int(tok.group(2) or tok.group(1)) - int(tok.group(1)) + 1)
kinds, heads, in_layers = [], [], False
for l in lines:
    if l.startswith("layers: "):
        in_layers = True
        continue
    if in_layers and l and not l.startswith(" "):
        break
    if not in_layers:
        continue
    lm = re.match(r" {2,4}\d+ \S+\s+(attention|mlp|norm)\b", l)
    if lm:
        kinds.append(lm.group(1))
        heads.append(0)
        continue
    hm = re.match(r" {6}(\d+) heads?\b", l)
    if hm and kinds and kinds[-1] == "attention" and heads[-1] == 0:
        heads[-1] = int(hm.group(1))
seq = [k for k in kinds if k != "norm"]
blocks, i = 0, 0
while i < len(seq):  # at most one attention, then at most one MLP
    if seq[i] == "attention":
        i += 1
    if i < len(seq) and seq[i] == "mlp":
        i += 1
    blocks += 1
print(seq.count("attention"), seq.count("mlp"), sum(heads), max(heads, default=0), blocks,
      d_model, params, n_vocab)
'
}

# nzd WEIGHTS: "NONZERO DISTINCT", the non-zero floats of the file's tensors and their
# distinct values (tfinfo's second and third counts; read here from the safetensors
# file, so that a build whose tfinfo predates them is measured alike).
nzd() {
    "$PY" -c '
import array, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
nz, seen = 0, set()
for k, t in h.items():
    if k == "__metadata__":
        continue
    s, e = t["data_offsets"]
    a = array.array("f", b[8 + n + s:8 + n + e])
    for x in a:
        if x != 0:
            nz += 1
            seen.add(x)
print(nz, len(seen))
' "$1"
}

# once TFRUN WEIGHTS CASES: "RATE FLOP", cases per CPU second and FLOP per case, or
# "FAILED -" when not every case passes.
once() {
    local n out cpu
    n=$(wc -l <"$3")
    if ! out=$(/usr/bin/time -f "%U %S" -o "$tmp/time" "$1" "$2" --check "$3" --threads 1 2>&1) ||
        ! grep -q "^$n passed, 0 failed" <<<"$out"; then
        echo "FAILED -"
        return
    fi
    cpu=$(awk '{ print $1 + $2 }' "$tmp/time")
    awk -v n="$n" -v c="$cpu" 'BEGIN { printf "%.0f ", n / (c > 0 ? c : 0.01) }'
    sed -nE 's/^engine: ([0-9]+) FLOP per case.*/\1/p' <<<"$out"
}

# best TFRUN_A W_A TFRUN_B W_B CASES: "A FA B FB", the best of $reps alternating runs.
best() {
    local a=0 b=0 fa=- fb=- r f
    for _ in $(seq "$reps"); do
        read -r r f < <(once "$1" "$2" "$5")
        if [ "$r" = FAILED ]; then a=FAILED; elif [ "$a" != FAILED ] && [ "$r" -gt "$a" ]; then a=$r; fi
        fa=$f
        read -r r f < <(once "$3" "$4" "$5")
        if [ "$r" = FAILED ]; then b=FAILED; elif [ "$b" != FAILED ] && [ "$r" -gt "$b" ]; then b=$r; fi
        fb=$f
    done
    echo "$a $fa $b $fb"
}

# cases NAME OUT: the program's cases, or nothing (exit 1) when it has none.
cases() {
    case $1 in
    adder) "$PY" tools/adder_cases.py | awk 'NR % 10 == 1' >"$2" ;;
    tracr/*) "$PY" "$REF" "${1#tracr/}" --max 20000 >"$2" 2>/dev/null ;;
    *) "$PY" "$REF" "$1" --max 20000 >"$2" 2>/dev/null ;;
    esac
}

# repeat WEIGHTS CASES: the cases repeated until one run of the new build takes about a
# CPU second (a tenth of a second measures little more than the clock's ticks).
repeat() {
    local rate k
    read -r rate _ < <(once "$new/tfrun" "$1" "$2")
    [ "$rate" = FAILED ] && return
    k=$(awk -v r="$rate" -v n="$(wc -l <"$2")" 'BEGIN { k = int(r / n + 0.999); print k < 1 ? 1 : k }')
    for _ in $(seq "$k"); do cat "$2"; done >"$tmp/repeated.tsv"
    mv "$tmp/repeated.tsv" "$2"
}

arrow() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1 -> $2"; fi; }

if [ $# -gt 0 ]; then
    names="$*"
else
    names=$(for f in programs/*.tfp; do basename "$f" .tfp; done
            for f in bench/tracr/*.tfp; do echo "tracr/$(basename "$f" .tfp)"; done)
fi

echo "| program | attention layers | MLP layers | heads | blocks | d_model | parameters | non-zero | distinct | cases/CPU s | FLOP/case |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
declare -A after_blocks after_dmodel after_vocab before_blocks before_dmodel after_maxheads
for name in $names; do
    case $name in tracr/*) src=bench/$name.tfp ;; *) src=programs/$name.tfp ;; esac
    wo=$tmp/old.tfw
    wn=$tmp/new.tfw
    okold=1 oknew=1
    "$old/tfc" "$src" -o "$wo" >/dev/null 2>&1 || okold=0
    "$new/tfc" "$src" -o "$wn" >/dev/null 2>&1 || oknew=0
    if [ $okold -eq 1 ]; then read -r a1 m1 h1 _ b1 d1 p1 _ < <(describe "$old/tfinfo" "$wo")
        read -r z1 u1 < <(nzd "$wo")
    else a1=fails m1=fails h1=fails b1=fails d1=fails p1=fails z1=fails u1=fails; fi
    if [ $oknew -eq 1 ]; then read -r a2 m2 h2 x2 b2 d2 p2 v2 < <(describe "$new/tfinfo" "$wn")
        read -r z2 u2 < <(nzd "$wn")
    else a2=fails m2=fails h2=fails x2=fails b2=fails d2=fails p2=fails v2=fails z2=fails u2=fails; fi
    after_blocks[$name]=$b2 after_dmodel[$name]=$d2 after_vocab[$name]=$v2 after_maxheads[$name]=$x2
    before_blocks[$name]=$b1 before_dmodel[$name]=$d1
    rate="-" flop="-"
    if [ "$speed" != 0 ] && [ $okold -eq 1 ] && [ $oknew -eq 1 ] && ! grep -q '^ *model *{' "$src" &&
        cases "$name" "$tmp/cases.tsv" && [ -s "$tmp/cases.tsv" ]; then
        repeat "$wn" "$tmp/cases.tsv"
        read -r r1 f1 r2 f2 < <(best "$old/tfrun" "$wo" "$new/tfrun" "$wn" "$tmp/cases.tsv")
        rate="$r1 -> $r2"
        flop=$(arrow "$f1" "$f2")
    fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$(arrow "$a1" "$a2")" \
        "$(arrow "$m1" "$m2")" "$(arrow "$h1" "$h2")" "$(arrow "$b1" "$b2")" \
        "$(arrow "$d1" "$d2")" "$(arrow "$p1" "$p2")" "$(arrow "$z1" "$z2")" "$(arrow "$u1" "$u2")" \
        "$rate" "$flop"
done

# meets BLOCKS DMODEL EXTRA TRACR_BLOCKS TRACR_DMODEL: yes, or what is over.
meets() {
    [ "$1" = fails ] && { echo "fails to compile"; return; }
    local why=()
    [ "$1" -le "$4" ] || why+=("$(( $1 - $4 )) block(s) more")
    [ $(( $2 - $3 )) -le "$5" ] || why+=("d_model $(( $2 - $3 - $5 )) wider")
    if [ ${#why[@]} -eq 0 ]; then echo yes; else echo "no: ${why[0]}${why[1]:+; ${why[1]}}"; fi
}

have_tracr=0
for t in $tracr_order; do [ -n "${after_blocks[tracr/${t}_lib]:-}" ] && have_tracr=1; done
[ $have_tracr -eq 1 ] || exit 0
echo
echo "| program (Tracr's setting) | Tracr blocks / d_model (most heads) | tfc | printed-token columns | blocks / d_model | most heads | meets Tracr |"
echo "| --- | ---: | --- | ---: | ---: | ---: | --- |"
for t in $tracr_order; do
    for v in lib plain; do
        n=tracr/${t}_$v
        [ -n "${after_blocks[$n]:-}" ] || continue
        b=${after_blocks[$n]} d=${after_dmodel[$n]} voc=${after_vocab[$n]}
        # The token columns beyond the BOS's and Tracr's vocabulary: those
        # kept only to print outputs (none once tfc leaves unread ones out).
        extra=$(( ${voc/fails/1} - 1 - ${tracr_vocab[$t]} ))
        [ "$extra" -ge 0 ] || extra=0
        printf '| %s | %s / %s (%s) | %s | %s | %s / %s | %s | %s |\n' "$t" "${tracr_blocks[$t]}" \
            "${tracr_dmodel[$t]}" "${tracr_heads[$t]}" "$v" "$extra" \
            "$(arrow "${before_blocks[$n]}" "$b")" "$(arrow "${before_dmodel[$n]}" "$d")" \
            "${after_maxheads[$n]}" "$(meets "$b" "$d" "$extra" "${tracr_blocks[$t]}" "${tracr_dmodel[$t]}")"
    done
done
