#!/usr/bin/env python3
"""The best PyTorch peer we could write for `tfrun --check`: batched,
incremental (KV cache), torch.no_grad, the same .tfw weights.

    /usr/bin/python3 bench/torch_check.py WEIGHTS.tfw CASES.tsv [--batch-size B] [--threads T]

CASES.tsv holds lines `prompt<TAB>expected completion` (tools/adder_cases.py).
A model read at every position (expected: the tokens at every position, the
BOS position's left out) runs one batched forward pass per prompt length
(tools/tfw_torch.py's Transformer, causal and bidirectional layers as the
file says); models that print numbers are not covered.
With --packed, every weight is first cut to its non-zero rows and columns
(index_select of the columns read, a small product, index_add into the rows
written), the one trick of tfrun's plan that fits PyTorch's dense tensors.
Prompts of one length run together, B at a time: the prompt goes through
every layer in one pass, each layer's keys and values go into preallocated
caches, and every further token costs one position per sequence. Matrix
products are torch.nn.functional.linear (one addmm per layer); the weights
are used as the file stores them (dense). Prints the same summary line as
tfrun --check; exits 1 if any case fails.

Needs Debian's python3-torch: run it with /usr/bin/python3.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from tfw_torch import Transformer, read, token_text  # noqa: E402


def packed(w, b=None, in_cols=None):
    """(rows kept, columns read, the block) of a weight [out, in] and bias:
    the rows with a non-zero weight or bias and the columns they read."""
    nz = w != 0
    rows = (nz.any(dim=1) | (b != 0 if b is not None else False)).nonzero().flatten()
    cols = nz.any(dim=0).nonzero().flatten() if in_cols is None else in_cols
    block = w[rows][:, cols].contiguous()
    return rows, cols, block, (b[rows].contiguous() if b is not None else None)


class Incremental:
    """Greedy generation with a KV cache, for models of attention and MLP
    layers (the compiled programs). With pack=True every weight is cut to
    its non-zero rows and columns first (what tfrun's plan does; the
    residual stream is still one dense [B, T, d] tensor)."""

    def __init__(self, model, pack=False):
        self.m = model
        self.pack = pack
        t = model.t
        self.layers = []
        if pack:
            for l in model.layers:
                if l["kind"] == "attention":
                    if l["heads"] != 1:
                        raise SystemExit("--packed runs one-head attention layers")
                    wq, wk, wv = t[l["query"]], t[l["key"]], t[l["value"]]
                    # Channels where both the query and the key row are non-zero.
                    ch = ((wq != 0).any(dim=1) & (wk != 0).any(dim=1)).nonzero().flatten()
                    _, qc, qb, _ = packed(wq[ch])
                    _, kc, kb, _ = packed(wk[ch])
                    vr, vc, vb, _ = packed(wv)
                    if "output" in l:
                        orow, _, ob, _ = packed(t[l["output"]][:, vr], None,
                                                torch.arange(len(vr)))
                    else:
                        orow, ob = vr, None
                    self.layers.append(("attn", qc, qb, kc, kb, vc, vb, orow, ob, l["scale"]))
                elif l["kind"] == "mlp":
                    r1, c1, w1, b1 = packed(t[l["fc1_weight"]], t.get(l.get("fc1_bias")))
                    w2full = t[l["fc2_weight"]][:, r1]
                    r2, _, w2, b2 = packed(w2full, t.get(l.get("fc2_bias")),
                                           torch.arange(len(r1)))
                    self.layers.append(("mlp", c1, w1, b1, r2, w2, b2, l["activation"] == "gelu"))
                else:
                    raise SystemExit("torch_check.py runs compiled models (attention and MLP layers)")
            return
        for l in model.layers:
            if l["kind"] == "attention":
                if not l["causal"]:
                    raise SystemExit("torch_check.py: a bidirectional layer: no KV cache")
                bias = tuple(t.get(l.get(b)) for b in
                             ("query_bias", "key_bias", "value_bias", "output_bias"))
                self.layers.append(("attn", l, t[l["query"]], t[l["key"]], t[l["value"]],
                                    t.get(l.get("output")), l["heads"], l["d_head"], l["d_vhead"],
                                    l["scale"]) + bias)
            elif l["kind"] == "mlp":
                self.layers.append(("mlp", l, t[l["fc1_weight"]], t.get(l.get("fc1_bias")),
                                    t[l["fc2_weight"]], t.get(l.get("fc2_bias")),
                                    l["activation"] == "gelu"))
            else:
                raise SystemExit("torch_check.py runs compiled models (attention and MLP layers)")

    def generate_packed(self, ids, n_new):
        m = self.m
        B, L0 = ids.shape
        Lmax = L0 + n_new - 1
        caches = {}
        out = []
        x = m.tok[ids] + m.pos[:L0].unsqueeze(0)
        start = 0
        for step in range(n_new):
            T = x.shape[1]
            for i, layer in enumerate(self.layers):
                if layer[0] == "attn":
                    _, qc, qb, kc, kb, vc, vb, orow, ob, scale = layer
                    q = F.linear(x[..., qc], qb)
                    k = F.linear(x[..., kc], kb)
                    v = F.linear(x[..., vc], vb)
                    if i not in caches:
                        caches[i] = (torch.empty(B, Lmax, k.shape[-1]), torch.empty(B, Lmax, v.shape[-1]))
                    kcache, vcache = caches[i]
                    kcache[:, start:start + T] = k
                    vcache[:, start:start + T] = v
                    s = torch.matmul(q, kcache[:, :start + T].transpose(1, 2)) * scale
                    if T > 1:
                        mask = torch.ones(T, start + T, dtype=torch.bool).triu(start + 1)
                        s = s.masked_fill(mask, float("-inf"))
                    h = torch.matmul(torch.softmax(s, dim=-1), vcache[:, :start + T])
                    y = F.linear(h, ob) if ob is not None else h
                    x[..., orow] += y
                else:
                    _, c1, w1, b1, r2, w2, b2, gelu = layer
                    h = F.linear(x[..., c1], w1, b1)
                    h = F.gelu(h) if gelu else torch.relu(h)
                    x[..., r2] += F.linear(h, w2, b2)
            nxt = F.linear(x[:, -1], m.unembed, m.unembed_bias).argmax(dim=-1)
            out.append(nxt)
            start += T
            if step + 1 < n_new:
                x = m.tok[nxt].unsqueeze(1) + m.pos[start].view(1, 1, -1)
        return torch.stack(out, dim=1)

    def generate(self, ids, n_new):
        if self.pack:
            return self.generate_packed(ids, n_new)
        m = self.m
        B, L0 = ids.shape
        Lmax = L0 + n_new - 1
        caches = {}
        out = []
        x = m.tok[ids] + m.pos[:L0].unsqueeze(0)  # [B, L0, d]
        start = 0
        for step in range(n_new):
            T = x.shape[1]
            for i, layer in enumerate(self.layers):
                if layer[0] == "attn":
                    _, l, wq, wk, wv, wo, H, dh, dv, scale, bq, bk, bv, bo = layer
                    q = F.linear(x, wq, bq).view(B, T, H, dh).transpose(1, 2)
                    k = F.linear(x, wk, bk).view(B, T, H, dh).transpose(1, 2)
                    v = F.linear(x, wv, bv).view(B, T, H, dv).transpose(1, 2)
                    if i not in caches:
                        caches[i] = (torch.empty(B, H, Lmax, dh), torch.empty(B, H, Lmax, dv))
                    kc, vc = caches[i]
                    kc[:, :, start:start + T] = k
                    vc[:, :, start:start + T] = v
                    keys, vals = kc[:, :, :start + T], vc[:, :, :start + T]
                    s = torch.matmul(q, keys.transpose(-1, -2)) * scale
                    if T > 1:  # the prompt: causal within it
                        mask = torch.ones(T, start + T, dtype=torch.bool).triu(start + 1)
                        s = s.masked_fill(mask, float("-inf"))
                    h = torch.matmul(torch.softmax(s, dim=-1), vals)
                    h = h.transpose(1, 2).reshape(B, T, H * dv)
                    x = x + (F.linear(h, wo, bo) if wo is not None else h)
                else:
                    _, l, w1, b1, w2, b2, gelu = layer
                    h = F.linear(x, w1, b1)
                    h = F.gelu(h) if gelu else torch.relu(h)
                    x = x + F.linear(h, w2, b2)
            nxt = F.linear(x[:, -1], m.unembed, m.unembed_bias).argmax(dim=-1)
            out.append(nxt)
            start += T
            if step + 1 < n_new:
                x = m.tok[nxt].unsqueeze(1) + m.pos[start].view(1, 1, -1)
        return torch.stack(out, dim=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("cases")
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--packed", action="store_true",
                    help="cut every weight to its non-zero rows and columns first")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = Transformer(*read(args.weights))
    eng = None if model.every_position else Incremental(model, pack=args.packed)
    index = {t: i for i, t in enumerate(model.vocab)}
    t0 = time.time()
    with open(args.cases) as f:
        cases = [line.rstrip("\n").split("\t") for line in f]
    by_len = {}
    for prompt, want in cases:
        by_len.setdefault(len(prompt), []).append((prompt, want))
    passed = failed = 0
    shown = []
    if model.every_position:
        if model.numeric:
            sys.exit("torch_check.py: this model prints numbers; only token outputs are checked")
        start = 1 if model.bos is not None else 0
        with torch.no_grad():
            for length, group in by_len.items():
                for b in range(0, len(group), args.batch_size):
                    chunk = group[b:b + args.batch_size]
                    ids = torch.tensor([[index[c] for c in p] for p, _ in chunk], dtype=torch.long)
                    got = model.every_position_tokens(ids).tolist()
                    for (prompt, want), toks in zip(chunk, got):
                        text = "".join(token_text(model.vocab[t]) for t in toks[start:])
                        passed += text == want
                        failed += text != want
        group = []
        by_len = {}
    with torch.no_grad():
        for length, group in by_len.items():
            n_new = len(group[0][1])
            for b in range(0, len(group), args.batch_size):
                chunk = group[b:b + args.batch_size]
                ids = torch.tensor([[index[c] for c in p] for p, _ in chunk], dtype=torch.long)
                got = eng.generate(ids, n_new).tolist()
                for (prompt, want), toks in zip(chunk, got):
                    text = "".join(token_text(model.vocab[t]) for t in toks)
                    if text == want:
                        passed += 1
                    else:
                        failed += 1
                        if len(shown) < 10:
                            shown.append("FAIL %s -> %s (expected %s)" % (prompt, text, want))
    dt = time.time() - t0
    for line in shown:
        print(line)
    n = passed + failed
    print("%d passed, %d failed (%d cases in %.2f s: %.0f cases/s, %d threads, batch size %d%s)"
          % (passed, failed, n, dt, n / dt if dt > 0 else 0, args.threads, args.batch_size,
             ", packed" if args.packed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
