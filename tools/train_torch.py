#!/usr/bin/env python3
"""Train a .tfw model in PyTorch, as tftrain does, for cross-checks and benchmarks.

The model is tools/tfw_torch.py's Transformer, its tensors loaded with json +
torch.frombuffer; the data are tftrain's text files (PROMPT<TAB>ANSWER or
INPUT<TAB>LABEL). Same loss (cross-entropy on answer tokens or on the class;
for the secret code, plus the attention-score MSE on "#2013"), same
optimizers, schedule, clipping and dropout placement as runtime/train/train.c.

    train_torch.py check INIT.tfw DATA.txt GRADS.tfw AFTER.tfw [--steps 10 ...]
        loss and every gradient of the whole DATA as one batch against
        tftrain --dump-grads, then the parameters after --steps AdamW steps
        against tftrain's output; exit 1 when the loss or a gradient differs
        by more than 1e-4 relative, or a parameter by more than its tolerance
        (adam_tolerances: rounding's effect through Adam's division, to first
        order, plus 1e-4 relative).
    train_torch.py train INIT.tfw --data TRAIN.txt --heldout HELDOUT.txt [...]
        trains and prints held-out accuracy, wall time and examples/s. With
        --order SEED the batches are tftrain's (tftrain_perm: the same
        examples in the same order as tftrain --seed SEED on the same data);
        with --compare AFTER.tfw (tftrain's output of the same run) the
        parameters must then agree with tftrain's as check's do, exit 1
        otherwise.

Needs Debian's python3-torch (run it with /usr/bin/python3).
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfw_torch  # noqa: E402

SECRET_TARGETS = [
    [[0, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 0, 1, 0]],
    [[0, 0, 1, 0, 0], [0, 1, 0, 1, 0], [0, 0, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 0, 0]],
    [[1, 1, 1, 0, 1], [0, 1, 0, 0, 0], [1, 0, 1, 0, 0], [0, 1, 0, 1, 0], [0, 0, 1, 0, 0]],
]


def load_model(path):
    meta, tensors = tfw_torch.read(path)
    tensors = {k: v.clone() for k, v in tensors.items() if not k.startswith("optim.")}
    model = tfw_torch.Transformer(meta, tensors)
    # The model block's settings, as tfc records them (docs/weight-format.md).
    if "learned" not in meta:
        raise SystemExit("train_torch: %s records no learned-model settings (__metadata__.learned)" % path)
    learned = json.loads(meta["learned"])
    learned_pos = learned["positions"] == "learned"
    dropout = float(learned["dropout"])
    params = [v for k, v in tensors.items() if k != "embed.position.weight" or learned_pos]
    for p in params:
        p.requires_grad_(True)
    return model, params, dropout


def load_data(model, path):
    """[(token ids, n_prompt, label)] of a text file."""
    index = {t: i for i, t in enumerate(model.vocab)}
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            prompt, answer = line.split("\t")
            if model.classify:
                out.append(([index[c] for c in prompt], len(prompt), model.classes.index(answer), prompt))
            else:
                out.append(([index[c] for c in prompt + answer], len(prompt), -1, prompt))
    return out


def batch_tensors(model, examples):
    """Padded ids [B, L], key mask, targets [B, L] (-100: none), labels, gather rows."""
    L = max(len(e[0]) - (0 if model.classify else 1) for e in examples)
    B = len(examples)
    ids = torch.zeros(B, L, dtype=torch.long)
    pad = torch.ones(B, L, dtype=torch.bool)
    targets = torch.full((B, L), -100, dtype=torch.long)
    labels = torch.zeros(B, dtype=torch.long)
    last = torch.zeros(B, dtype=torch.long)
    for b, (toks, n_prompt, label, _) in enumerate(examples):
        seq = toks if model.classify else toks[:-1]
        ids[b, :len(seq)] = torch.tensor(seq)
        pad[b, :len(seq)] = False
        last[b] = len(seq) - 1
        if model.classify:
            labels[b] = label
        else:
            targets[b, n_prompt - 1:len(seq)] = torch.tensor(toks[n_prompt:])
    return ids, pad, targets, labels, last


class Tensors:
    """A whole dataset as padded tensors, so that a batch is one indexing."""

    def __init__(self, model, examples):
        self.ids, self.pad, self.targets, self.labels, self.last = batch_tensors(model, examples)
        self.secret = torch.tensor([e[3] == "#2013" for e in examples], dtype=torch.bool)
        self.n = len(examples)

    def batch(self, idx):
        ids, pad, targets = self.ids[idx], self.pad[idx], self.targets[idx]
        L = int((~pad).sum(dim=1).max())  # trim padding every sequence of the batch has
        return ids[:, :L], pad[:, :L], targets[:, :L], self.labels[idx], self.last[idx], self.secret[idx]


def loss_and_correct(model, data, idx=None, dropout=0.0, secret=False):
    """data: a Tensors; idx: the examples of the batch (None: all)."""
    if idx is None:
        idx = torch.arange(data.n)
    ids, pad, targets, labels, last, is_secret = data.batch(idx)
    scores = [] if secret else None
    key_mask = pad if pad.any() else None
    x = model.hidden(ids, key_mask, dropout, scores)
    if model.classify:
        rows = x[torch.arange(len(idx)), last] if model.classify_at_last else x[:, 0]
        logits = model.logits(rows)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        correct = int((logits.argmax(-1) == labels).sum())
    else:
        logits = model.logits(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1), ignore_index=-100)
        ok = (logits.argmax(-1) == targets) | (targets == -100)
        correct = int(ok.all(dim=1).sum())
    if secret:
        # The attention-score loss on each "#2013": the mean over the batch's
        # occurrences of the sum over heads of the MSE against the picture.
        occ = is_secret.nonzero().flatten()
        if len(occ):
            tgt = torch.tensor(SECRET_TARGETS, dtype=torch.float32)
            s = scores[0][occ, :, :5, :5]
            loss = loss + ((s - tgt) ** 2).mean(dim=(2, 3)).sum(dim=1).mean()
    return loss, correct


def make_optimizer(params, args):
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
    return cls(params, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
               weight_decay=args.weight_decay)


def lr_factor(step, total, args):
    """runtime/train/train.c's train_lr_at, divided by lr."""
    if args.warmup > 0 and step < args.warmup:
        return (step + 1) / args.warmup
    if not args.cosine:
        return 1.0
    span = total - args.warmup
    progress = min(1.0, (step - args.warmup) / span) if span > 0 else 1.0
    lr = args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * progress))
    return lr / args.lr


MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def tftrain_perm(seed, epoch, n):
    """The order in which tftrain --seed SEED takes the n training examples in
    epoch `epoch` (runtime/tools/tftrain.c, batch_indices): Fisher-Yates from
    the last element down, j drawn below i + 1 by runtime/model/rng.h's
    generator (SplitMix64) seeded with seed * 7919 + epoch."""
    state = ((seed * 7919 + epoch) * GOLDEN + 1) & MASK64
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        state = (state + GOLDEN) & MASK64
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        j = (z ^ (z >> 31)) % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return torch.tensor(perm)


def train_steps(model, params, data, args, steps, dropout, secret, batch_size, watch=None):
    """watch(step, lr): called after each step's gradients are clipped, before the update.
    Epochs are torch.randperm's, or tftrain's with args.order (tftrain_perm)."""
    opt = make_optimizer(params, args)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, args))
    order = getattr(args, "order", None)
    epoch = [0]

    def next_perm():
        if order is None:
            return torch.randperm(data.n)
        epoch[0] += 1
        return tftrain_perm(order, epoch[0] - 1, data.n)

    perm, at = next_perm(), 0
    for _ in range(steps):
        if at + batch_size <= data.n:
            idx = perm[at:at + batch_size]
            at += batch_size
        else:  # the epoch's rest, then the next epoch's start
            rest = perm[at:]
            perm = next_perm()
            at = batch_size - len(rest)
            idx = torch.cat([rest, perm[:at]])
        opt.zero_grad()
        loss, _ = loss_and_correct(model, data, idx, dropout, secret)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        if watch:
            watch(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()


def evaluate(model, data, secret):
    with torch.no_grad():
        correct = 0
        for i in range(0, data.n, 256):
            correct += loss_and_correct(model, data, torch.arange(i, min(i + 256, data.n)))[1]
    return correct


def rel_diff(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-12))


def adam_tolerances(model, params, args, eps_g, noise):
    """How far tftrain's parameters may be from PyTorch's after Adam steps.

    Adam divides each element's first moment by the root of its second: an
    element whose gradients are all tiny (v small) moves a whole step
    whatever their size, so rounding that is negligible in the gradient
    (eps_g of the tensor's largest) can change its step entirely, and its
    direction when the gradient is near zero. So the bound is per element,
    to first order in the gradient's rounding nu_t = K * eps_g *
    max|g_t| (K = 10: the rounding of 10 steps' parameters feeding later
    gradients): at step t the update lr_t * m^/(sqrt(v^) + eps) moves by at
    most lr_t * (1 + b_t) * nu_t / (sqrt(v^_t) + eps), b_t being Adam's
    largest |m^/sqrt(v^)| (Cauchy-Schwarz over the moments' sums: 1 at the
    first step); and never by more than the 2 * lr_t * b_t of two steps in
    opposite directions. A tensor whose gradient is zero in exact arithmetic
    (noise) is all rounding: it gets that largest bound. SGD has no division: its bound is lr_t * nu_t *
    (momentum's sum). Returns {name: () -> tolerance tensor} (filled in as
    the steps run) and the watch function for train_steps."""
    K = 10.0
    b1, b2 = args.beta1, args.beta2
    names = {id(v): k for k, v in model.t.items()}
    acc = {names[id(p)]: torch.zeros_like(p, dtype=torch.float64) for p in params}
    v = {n: torch.zeros_like(a) for n, a in acc.items()}
    m_sum = [0.0]
    step = [0]

    def watch(lr):
        step[0] += 1
        t = step[0]
        m_sum[0] = args.momentum * m_sum[0] + 1.0  # SGD: 1 + mu + mu^2 + ...
        for p in params:
            n = names[id(p)]
            g = p.grad.detach().double()
            nu = K * float(g.abs().max()) * (1.0 if n in noise else eps_g)
            if args.optimizer == "sgd":
                acc[n] += lr * nu * m_sum[0]
                continue
            v[n] = b2 * v[n] + (1 - b2) * g * g
            r = b1 * b1 / b2
            bt = (1 - b1) / math.sqrt(1 - b2) * math.sqrt(sum(r ** k for k in range(t)))
            bt *= math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            root = (v[n] / (1 - b2 ** t)).sqrt() + args.eps
            acc[n] += torch.clamp(lr * (1 + bt) * nu / root, max=2 * lr * bt)

    return {n: (lambda n=n: acc[n].float()) for n in acc}, watch


def check(args):
    model, params, _ = load_model(args.init)
    data = Tensors(model, load_data(model, args.data))
    secret = args.secret
    loss, _ = loss_and_correct(model, data, None, 0.0, secret)
    loss.backward()
    bad = 0
    _, grads = tfw_torch.read(args.grads)
    ours = float(args.loss) if args.loss is not None else None
    if ours is not None:
        d = abs(ours - float(loss)) / abs(float(loss))
        print("loss: ours %.9g, PyTorch %.9g, relative difference %.2e" % (ours, float(loss), d))
        bad += d > args.rtol
    names = {id(v): k for k, v in model.t.items()}
    worst = 0.0
    # A gradient that is zero in exact arithmetic (the key bias of a model
    # whose loss does not look at attention scores: softmax ignores a shift
    # of a whole row) is rounding noise in both; such a tensor must be tiny
    # in both, and Adam, which scales any gradient to about lr, may take its
    # noise anywhere within its largest step: its parameters are held to
    # that bound only (adam_tolerances).
    gmax = max(float(p.grad.abs().max()) for p in params)
    noise = set()
    for p in params:
        name = names[id(p)]
        if float(p.grad.abs().max()) < 1e-6 * gmax:
            ok = float(grads[name].abs().max()) < 1e-6 * gmax
            print("gradient of %s is zero in exact arithmetic: |ours| %.1e, |PyTorch| %.1e%s" %
                  (name, float(grads[name].abs().max()), float(p.grad.abs().max()), "" if ok else "  FAIL"))
            bad += not ok
            noise.add(name)
            continue
        d = rel_diff(grads[name], p.grad)
        worst = max(worst, d)
        if d > args.rtol:
            print("FAIL gradient of %s: relative difference %.2e" % (name, d))
            bad += 1
    print("gradients: %d tensors, worst relative difference %.2e" % (len(params) - len(noise), worst))
    # Parameters after args.steps steps on the same batch, to a tolerance
    # per element (adam_tolerances). eps_g: how far our gradients are from
    # PyTorch's, relative to each tensor's largest (rounding: the kernels'
    # order of sums), at least float32's half ulp.
    eps_g = max(worst, 2.0 ** -24)
    model, params, _ = load_model(args.init)
    tol, watch = adam_tolerances(model, params, args, eps_g, noise)
    train_steps(model, params, data, args, args.steps, 0.0, secret, data.n, watch)
    _, after = tfw_torch.read(args.after)
    return 1 if compare_after(model, tol, after, args, args.steps) + bad else 0


def compare_after(model, tol, after, args, steps):
    """Failures of tftrain's parameters `after` against the model's, each
    element within its tolerance tol (adam_tolerances) plus args.rtol of
    its tensor's largest; a tensor not trained must be unchanged."""
    bad = 0
    worst, widened, total = 0.0, 0, 0
    for name, p in model.t.items():
        if name not in tol:  # not trained (fixed positions)
            d = rel_diff(after[name], p.detach())
            if d > 0:
                print("FAIL %s is not trained but changed: relative difference %.2e" % (name, d))
                bad += 1
            continue
        t = tol[name]() + args.rtol * float(p.detach().abs().max())
        r = float(((after[name] - p.detach()).abs() / t).max())
        widened += int((tol[name]() > 0.1 * args.lr).sum())
        total += p.numel()
        worst = max(worst, r)
        if not r <= 1.0:
            i = int(((after[name] - p.detach()).abs() / t).flatten().argmax())
            print("FAIL %s after %d steps: element %d differs by %.2e, %.1fx its tolerance %.2e" %
                  (name, steps, i, float((after[name] - p.detach()).flatten()[i].abs()), r,
                   float(t.flatten()[i])))
            bad += 1
    print("parameters after %d %s steps: worst difference %.2f of its tolerance "
          "(%d of %d elements, their gradients within rounding of 0, may differ by over lr/10)" %
          (steps, args.optimizer, worst, widened, total))
    return bad


def replay_tolerances(model, params, data, args, dropout):
    """adam_tolerances for a run on tftrain's batches (--order, --compare):
    the tensors whose gradient on the first batch is within 1e-6 of the
    largest are noise (see check); the other gradients are taken to be
    within 1e-6 of their tensor's largest of tftrain's (check measures
    1e-7 to 1e-6 against tftrain --dump-grads)."""
    if args.order is None or dropout > 0:
        raise SystemExit("train_torch: --compare needs --order (the same batches) and no dropout")
    idx = tftrain_perm(args.order, 0, data.n)[:args.batch_size]
    loss, _ = loss_and_correct(model, data, idx, 0.0, args.secret)
    loss.backward()
    gmax = max(float(p.grad.abs().max()) for p in params)
    names = {id(v): k for k, v in model.t.items()}
    noise = {names[id(p)] for p in params if float(p.grad.abs().max()) < 1e-6 * gmax}
    for p in params:
        p.grad = None
    return adam_tolerances(model, params, args, 1e-6, noise)


def train(args):
    model, params, dropout = load_model(args.init)
    if args.dropout is not None:
        dropout = args.dropout
    data = Tensors(model, load_data(model, args.data))
    held = Tensors(model, load_data(model, args.heldout))
    tol, watch = None, None
    if args.compare:
        tol, watch = replay_tolerances(model, params, data, args, dropout)
    t0 = time.perf_counter()
    train_steps(model, params, data, args, args.steps, dropout, args.secret, args.batch_size, watch)
    wall = time.perf_counter() - t0
    correct = evaluate(model, held, args.secret)
    print("pytorch held-out accuracy %.2f%% (%d/%d); %d steps in %.2f s, %.0f examples/s" %
          (100.0 * correct / held.n, correct, held.n, args.steps, wall,
           args.steps * args.batch_size / wall))
    if args.compare:
        _, after = tfw_torch.read(args.compare)
        if compare_after(model, tol, after, args, args.steps):
            return 1
    if args.secret:
        with torch.no_grad():
            codes = ["#2013"] + ["#" + "2013"[:p] + c + "2013"[p + 1:] for p in range(4)
                                 for c in "0123456789" if c != "2013"[p]]
            ids = torch.tensor([[model.vocab.index(c) for c in s] for s in codes])
            probs = model.classify_probs(ids)
            acc = model.classes.index("accept")
            pred = probs.argmax(-1)
            scores = []
            model.hidden(ids[:1], None, 0.0, scores)
            mse = ((scores[0][0] - torch.tensor(SECRET_TARGETS)) ** 2).mean(dim=(1, 2))
            print("pytorch secret code: 2013 %s (p = %.4f); close negatives rejected: %d of 36; "
                  "attention MSE %s" % ("accepted" if pred[0] == acc else "REJECTED",
                                        float(probs[0, acc]), int((pred[1:] != acc).sum()),
                                        ", ".join("%.5f" % float(v) for v in mse)))
            # Every code "#0" .. "#99999", one batch per number of digits.
            accepted = []
            for n in range(1, 6):
                xs = range(0 if n == 1 else 10 ** (n - 1), 10 ** n)
                ids = torch.tensor([[model.vocab.index(c) for c in "#%d" % x] for x in xs])
                pred = model.classify_probs(ids).argmax(-1)
                accepted += ["#%d" % x for x, p in zip(xs, pred.tolist()) if p == acc]
            print("pytorch secret code: %d of 100000 codes accepted: %s%s" %
                  (len(accepted), " ".join(accepted[:20]), " ..." if len(accepted) > 20 else ""))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["check", "train"])
    ap.add_argument("init")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--data")
    ap.add_argument("--heldout")
    ap.add_argument("--loss")
    ap.add_argument("--optimizer", default="adamw", choices=["sgd", "adam", "adamw"])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=None)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--cosine", action="store_true")
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--dropout", type=float, default=None)
    ap.add_argument("--secret", action="store_true", help="the secret code's attention loss")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--order", type=int, help="tftrain's batches: the order of tftrain --seed ORDER")
    ap.add_argument("--compare", metavar="AFTER.tfw",
                    help="with --order: tftrain's parameters after the same run, to agree with ours")
    args = ap.parse_args(argv)
    if args.weight_decay is None:
        args.weight_decay = 0.01 if args.optimizer == "adamw" else 0.0
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.mode == "check":
        if len(args.files) != 3:
            ap.error("check needs DATA.txt GRADS.tfw AFTER.tfw")
        args.data, args.grads, args.after = args.files
        return check(args)
    if not args.data or not args.heldout:
        ap.error("train needs --data and --heldout")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
