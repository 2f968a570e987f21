#!/usr/bin/env bash
# train_torch.sh TFTRAIN TFC: PyTorch cross-check of the trainer. For four
# seed-task models (post-norm + ReLU, pre-norm + GELU, a classifier without
# positions, and the secret code with its attention-score loss), from the
# same initial weights (tfc) and the same batch: the loss and every gradient
# (tftrain --dump-grads) and the parameters after 10 AdamW steps (with
# warm-up, cosine decay and clipping) must agree with PyTorch's
# (tools/train_torch.py): the loss and gradients to 1e-4 relative, the
# parameters to a tolerance per element that follows rounding through Adam's
# division by the root of the second moment (adam_tolerances), so that the
# check holds on every OpenBLAS kernel core (OPENBLAS_CORETYPE). Then whole
# runs over many batches and epochs (replay): PyTorch takes tftrain's
# batches (train_torch.py --order, tftrain's permutation of each epoch), and
# the parameters after the run must agree the same way: the batch order,
# the schedule and the optimizer's state across steps.
set -u
TFTRAIN=$1
TFC=$2
. "$(dirname "$0")/lib.sh"
need_torch

# cross NAME PROGRAM TASK N_EXAMPLES [extra tftrain/train_torch options...]
cross() {
    local name=$1 prog=$SRC/programs/$2 task=$3 n=$4
    shift 4
    local d=$tmp/$name opts=(--lr 1e-2 --clip 0.5 --warmup 3 --cosine --min-lr 1e-3 --steps 10)
    mkdir -p "$d"
    "$TFC" "$prog" -o "$d/init.tfw"
    check "$name: tfc" $?
    "$TFTRAIN" "$prog" --task "$task" --train-size "$n" --heldout-size 5 --write-data "$d" \
        --steps 0 --quiet -o "$d/unused.tfw" >/dev/null
    check "$name: generate data" $?
    local loss
    loss=$("$TFTRAIN" "$prog" --data "$d/train.txt" --heldout "$d/heldout.txt" --batch-size "$n" \
        --dropout 0 --dump-grads "$d/grads.tfw" "$@" | sed -n 's/^loss //p')
    check "$name: tftrain --dump-grads" $?
    "$TFTRAIN" "$prog" --data "$d/train.txt" --heldout "$d/heldout.txt" --batch-size "$n" \
        --dropout 0 --optimizer adamw "${opts[@]}" --quiet -o "$d/after.tfw" "$@" >/dev/null
    check "$name: tftrain 10 AdamW steps" $?
    echo "== $name"
    "$PY" "$SRC/tools/train_torch.py" check "$d/init.tfw" "$d/train.txt" "$d/grads.tfw" \
        "$d/after.tfw" --loss "$loss" --optimizer adamw "${opts[@]}" ${SECRET:+--secret}
    check "$name: PyTorch agrees" $?
}

# train_torch.py reads the settings the tensors do not say from the file's
# metadata (__metadata__.learned): first_token has dropout 0.1 and no positions.
"$TFC" "$SRC/programs/first_token.tfp" -o "$tmp/ft.tfw" &&
    "$PY" -c 'import sys
sys.path.insert(0, sys.argv[1])
import train_torch
model, params, dropout = train_torch.load_model(sys.argv[2])
names = [n for n, t in model.t.items() if any(t is p for p in params)]
assert dropout == 0.1 and "embed.position.weight" not in names and "embed.token.weight" in names, (dropout, names)
' "$SRC/tools" "$tmp/ft.tfw"
check "train_torch.py takes dropout and positions from __metadata__.learned" $?

cross binary_add binary_add.tfp binary-add:8 48
cross decimal_add decimal_add.tfp decimal-add:2 32
cross first_token first_token.tfp first-token:20 32
# The secret code's attention loss needs tftrain's generator (text data carry
# no attention targets): the same 30 examples, whole, as one batch.
d=$tmp/secret
mkdir -p "$d"
P=$SRC/programs/secret_code.tfp
"$TFC" "$P" -o "$d/init.tfw"
"$TFTRAIN" "$P" --task secret-code --train-size 30 --heldout-size 5 --write-data "$d" --steps 0 \
    --quiet -o "$d/unused.tfw" >/dev/null
loss=$("$TFTRAIN" "$P" --task secret-code --train-size 30 --heldout-size 5 --batch-size 30 \
    --dump-grads "$d/grads.tfw" | sed -n 's/^loss //p')
check "secret_code: tftrain --dump-grads" $?
opts=(--lr 1e-2 --clip 0.5 --warmup 3 --cosine --min-lr 1e-3 --steps 10)
"$TFTRAIN" "$P" --task secret-code --train-size 30 --heldout-size 5 --batch-size 30 \
    --optimizer adamw "${opts[@]}" --quiet -o "$d/after.tfw" >/dev/null
check "secret_code: tftrain 10 AdamW steps" $?
echo "== secret_code (with the attention-score loss)"
"$PY" "$SRC/tools/train_torch.py" check "$d/init.tfw" "$d/train.txt" "$d/grads.tfw" "$d/after.tfw" \
    --loss "$loss" --optimizer adamw "${opts[@]}" --secret
check "secret_code: PyTorch agrees" $?

# replay NAME PROGRAM TASK N_TRAIN SEED [tftrain/train_torch options...]: N_TRAIN
# examples, batches of 64 (an epoch ends inside a batch), 12 steps.
replay() {
    local name=$1 prog=$SRC/programs/$2 task=$3 n=$4 seed=$5
    shift 5
    local d=$tmp/replay_$name opts=(--batch-size 64 --steps 12 "$@")
    mkdir -p "$d"
    "$TFC" "$prog" -o "$d/init.tfw" &&
        "$TFTRAIN" "$prog" --task "$task" --train-size "$n" --heldout-size 20 --write-data "$d" \
            --steps 0 --quiet -o "$d/unused.tfw" >/dev/null &&
        "$TFTRAIN" "$prog" --data "$d/train.txt" --heldout "$d/heldout.txt" --seed "$seed" \
            "${opts[@]}" --quiet -o "$d/after.tfw" >/dev/null
    check "$name: tftrain 12 steps on $n examples" $?
    echo "== $name: PyTorch on tftrain's batches (--order $seed)"
    "$PY" "$SRC/tools/train_torch.py" train "$d/init.tfw" --data "$d/train.txt" \
        --heldout "$d/heldout.txt" --order "$seed" --compare "$d/after.tfw" "${opts[@]}" --threads 1
    check "$name: PyTorch on tftrain's batches ends where tftrain does" $?
    # Another seed's batches end elsewhere: the comparison must tell them apart.
    "$PY" "$SRC/tools/train_torch.py" train "$d/init.tfw" --data "$d/train.txt" \
        --heldout "$d/heldout.txt" --order "$((seed + 1))" --compare "$d/after.tfw" "${opts[@]}" \
        --threads 1 >"$d/other.txt"
    [ $? = 1 ] && grep -q '^FAIL ' "$d/other.txt"
    check "$name: PyTorch on another seed's batches is refused" $?
    # --compare needs --order: without the same batches there is nothing to hold.
    "$PY" "$SRC/tools/train_torch.py" train "$d/init.tfw" --data "$d/train.txt" \
        --heldout "$d/heldout.txt" --compare "$d/after.tfw" "${opts[@]}" --threads 1 \
        >/dev/null 2>"$d/err.txt"
    [ $? = 1 ] && grep -q "^train_torch: --compare needs --order" "$d/err.txt"
    check "$name: --compare without --order is refused" $?
}
replay binary_add binary_add.tfp binary-add:8 100 3 --optimizer adamw --lr 3e-3 --warmup 5 --cosine
replay first_token first_token.tfp first-token:20 100 2 --optimizer adam --lr 1e-3 --dropout 0

finish
