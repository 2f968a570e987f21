#!/usr/bin/env python3
"""Run a .tfw weight file in PyTorch, independently of tfrun.

Reads the file with nothing but json, struct and torch.frombuffer, and runs
it with the semantics docs/weight-format.md specifies. Prints what tfrun
prints: each prompt followed by its generated tokens, one line per prompt.

    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] PROMPT
    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] --batch FILE|-

Needs Debian's python3-torch (run it with /usr/bin/python3).
"""
import argparse
import json
import struct
import sys

import torch


class TfwError(Exception):
    pass


def load(path):
    """(metadata dict, {name: float32 tensor}) of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise TfwError("file too short")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise TfwError("header length exceeds the file")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__")
    if meta.get("format") != "tfw":
        raise TfwError("not a tfw file")
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise TfwError("tensor %s: dtype %s" % (name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        tensors[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(entry["shape"])
    return meta, tensors


class Transformer:
    """The decoder-only, LayerNorm-free transformer a .tfw describes."""

    def __init__(self, meta, tensors):
        self.vocab = json.loads(meta["vocab"])
        self.layers = json.loads(meta["layers"])
        self.generate = int(meta["generate"])
        self.t = tensors
        self.tok = tensors["embed.token.weight"]
        self.pos = tensors["embed.position.weight"]
        self.unembed = tensors["unembed.weight"]
        self.max_len = self.pos.shape[0]

    def attention(self, x, l):
        B, L, _ = x.shape
        H, dh, dv = l["heads"], l["d_head"], l["d_vhead"]
        q = (x @ self.t[l["query"]].T).view(B, L, H, dh).transpose(1, 2)
        k = (x @ self.t[l["key"]].T).view(B, L, H, dh).transpose(1, 2)
        v = (x @ self.t[l["value"]].T).view(B, L, H, dv).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * l["scale"]
        if l["causal"]:
            future = torch.ones(L, L, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        heads = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, L, H * dv)
        if "output" in l:
            heads = heads @ self.t[l["output"]].T
        return heads

    def mlp(self, x, l):
        h = x @ self.t[l["fc1_weight"]].T
        if "fc1_bias" in l:
            h = h + self.t[l["fc1_bias"]]
        h = torch.nn.functional.gelu(h) if l["activation"] == "gelu" else torch.relu(h)
        y = h @ self.t[l["fc2_weight"]].T
        if "fc2_bias" in l:
            y = y + self.t[l["fc2_bias"]]
        return y

    def next_tokens(self, ids):
        """ids [B, L] -> greedy next token id of each sequence [B]."""
        L = ids.shape[1]
        x = self.tok[ids] + self.pos[:L].unsqueeze(0)
        for l in self.layers:
            x = x + (self.attention(x, l) if l["kind"] == "attention" else self.mlp(x, l))
        logits = x[:, -1] @ self.unembed.T
        return logits.argmax(dim=-1)  # the first maximum on ties


def token_text(tok):
    """A generated token as tfrun prints it."""
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}
    if tok in escapes:
        return escapes[tok]
    if ord(tok) < 0x20 or ord(tok) >= 0x7F:
        return "\\x%02x" % ord(tok)
    return tok


def tokenize(model, prompt, where):
    index = {t: i for i, t in enumerate(model.vocab)}
    ids = []
    for i, c in enumerate(prompt):
        if c not in index:
            raise TfwError("%s: character %r at index %d is not in the vocabulary" % (where, c, i))
        ids.append(index[c])
    return ids


def run(model, prompts, n_new, batch):
    """Yields (index, line) in input order, running equal-length prompts together."""
    by_len = {}
    for i, ids in enumerate(prompts):
        by_len.setdefault(len(ids), []).append(i)
    out = {}
    for length, members in by_len.items():
        for start in range(0, len(members), batch):
            chunk = members[start:start + batch]
            ids = torch.tensor([prompts[i] for i in chunk], dtype=torch.long).reshape(len(chunk), length)
            for _ in range(n_new):
                ids = torch.cat([ids, model.next_tokens(ids).unsqueeze(1)], dim=1)
            for row, i in enumerate(chunk):
                out[i] = ids[row, length:].tolist()
    return [out[i] for i in range(len(prompts))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("prompt", nargs="?")
    ap.add_argument("-n", type=int, default=None, help="tokens to generate")
    ap.add_argument("--batch", help="file of prompts, one per line ('-': standard input)")
    ap.add_argument("--batch-size", type=int, default=512)
    args = ap.parse_intermixed_args()
    if (args.prompt is None) == (args.batch is None):
        ap.error("give a prompt or --batch")
    torch.set_num_threads(2)
    try:
        model = Transformer(*load(args.weights))
    except (OSError, ValueError, KeyError, TfwError) as e:
        print("tfw_torch: %s: %s" % (args.weights, e), file=sys.stderr)
        return 1
    n_new = model.generate if args.n is None else args.n
    if args.batch is None:
        texts, wheres = [args.prompt], ["prompt"]
    else:
        f = sys.stdin if args.batch == "-" else open(args.batch)
        texts = [line[:-1] if line.endswith("\n") else line for line in f]
        wheres = ["line %d" % (i + 1) for i in range(len(texts))]
    status, ok_texts, prompts = 0, [], []
    for text, where in zip(texts, wheres):
        try:
            if not text:
                raise TfwError("%s: empty prompt" % where)
            if len(text) + n_new > model.max_len:
                raise TfwError("%s: too long for the position encoding" % where)
            prompts.append(tokenize(model, text, where))
            ok_texts.append(text)
        except TfwError as e:
            print("tfw_torch: %s" % e, file=sys.stderr)
            status = 1
    with torch.no_grad():
        generated = run(model, prompts, n_new, args.batch_size)
    for text, toks in zip(ok_texts, generated):
        print(text + "".join(token_text(model.vocab[t]) for t in toks))
    return status


if __name__ == "__main__":
    sys.exit(main())
