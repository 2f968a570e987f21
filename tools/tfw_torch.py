#!/usr/bin/env python3
"""Run a .tfw weight file in PyTorch, independently of tfrun.

Reads the file with nothing but json, struct and torch.frombuffer, and runs
it with the semantics docs/weight-format.md specifies. Prints what tfrun
prints: each prompt followed by its generated tokens, one line per prompt,
stopping before the stop token when the model has one (for a model read at
every position: the input, a TAB and the argmax token at every position,
after the BOS position when it has a bos; for a classifier: the input, its
class and the class's probability, tab-separated).

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


def read(path):
    """(metadata dict, {name: float32 tensor}) of a .tfw (safetensors) file."""
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
    """The transformer a .tfw describes: attention, MLP and LayerNorm layers
    (pre-norm when a layer has norm tensors), next-token or classifier output.
    Its tensors may require gradients: tools/train_torch.py trains it."""

    def __init__(self, meta, tensors):
        self.vocab = json.loads(meta["vocab"])
        self.layers = json.loads(meta["layers"])
        self.generate = int(meta["generate"])
        self.t = tensors
        self.tok = tensors["embed.token.weight"]
        self.pos = tensors["embed.position.weight"]
        self.unembed = tensors["unembed.weight"]
        self.unembed_bias = tensors.get("unembed.bias")
        self.max_len = self.pos.shape[0]
        self.classify = meta.get("output_kind") == "classify"
        self.classes = json.loads(meta["classes"]) if self.classify else None
        self.classify_at_last = meta.get("classify_at") == "last"
        mode = meta.get("output_mode", "next_token")
        if mode not in ("next_token", "every_position"):
            raise TfwError("output_mode %r is not next_token or every_position" % mode)
        self.every_position = mode == "every_position"
        self.bos = self.token_id(meta, "bos")
        self.stop_token = self.token_id(meta, "stop_token")

    def token_id(self, meta, key):
        """The vocabulary index of the one-token metadata string `key`, or None."""
        if key not in meta:
            return None
        if meta[key] not in self.vocab:
            raise TfwError("%s %r is not in the vocabulary" % (key, meta[key]))
        return self.vocab.index(meta[key])

    def linear(self, x, l, weight, bias):
        y = x @ self.t[l[weight]].T
        return y + self.t[l[bias]] if bias in l else y

    def norm(self, x, l):
        d = x.shape[-1]
        return torch.nn.functional.layer_norm(x, (d,), self.t[l["norm_weight"]],
                                              self.t[l["norm_bias"]], l.get("norm_eps", 1e-5))

    def attention(self, x, l, key_mask=None, scores_out=None):
        B, L, _ = x.shape
        H, dh, dv = l["heads"], l["d_head"], l["d_vhead"]
        q = self.linear(x, l, "query", "query_bias").view(B, L, H, dh).transpose(1, 2)
        k = self.linear(x, l, "key", "key_bias").view(B, L, H, dh).transpose(1, 2)
        v = self.linear(x, l, "value", "value_bias").view(B, L, H, dv).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * l["scale"]
        if scores_out is not None:
            scores_out.append(scores)
        if l["causal"]:
            future = torch.ones(L, L, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if key_mask is not None:  # [B, L], True where a key is padding
            scores = scores.masked_fill(key_mask[:, None, None, :], float("-inf"))
        heads = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, L, H * dv)
        if "output" in l:
            heads = heads @ self.t[l["output"]].T
        if "output_bias" in l:
            heads = heads + self.t[l["output_bias"]]
        return heads

    def mlp(self, x, l):
        h = self.linear(x, l, "fc1_weight", "fc1_bias")
        h = torch.nn.functional.gelu(h) if l["activation"] == "gelu" else torch.relu(h)
        return self.linear(h, l, "fc2_weight", "fc2_bias")

    def hidden(self, ids, key_mask=None, dropout=0.0, scores_out=None):
        """ids [B, L] -> the residual stream after the last layer [B, L, d]."""
        L = ids.shape[1]
        x = self.tok[ids] + self.pos[:L].unsqueeze(0)
        for l in self.layers:
            if l["kind"] == "norm":
                x = self.norm(x, l)
                continue
            h = self.norm(x, l) if "norm_weight" in l else x
            if l["kind"] == "attention":
                y = self.attention(h, l, key_mask, scores_out)
            else:
                y = self.mlp(h, l)
            if dropout > 0:
                y = torch.nn.functional.dropout(y, dropout, training=True)
            x = x + y
        return x

    def logits(self, x):
        y = x @ self.unembed.T
        return y + self.unembed_bias if self.unembed_bias is not None else y

    def next_tokens(self, ids):
        """ids [B, L] -> greedy next token id of each sequence [B]."""
        return self.logits(self.hidden(ids)[:, -1]).argmax(dim=-1)  # the first maximum on ties

    def every_position_tokens(self, ids):
        """ids [B, L] -> the argmax token at every position [B, L]."""
        return self.logits(self.hidden(ids)).argmax(dim=-1)

    def classify_probs(self, ids):
        """ids [B, L] (one length) -> class probabilities [B, n_classes]."""
        x = self.hidden(ids)
        x = x[:, -1] if self.classify_at_last else x[:, 0]
        return torch.softmax(self.logits(x), dim=-1)


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
    """The output tokens of each prompt, in input order, running equal-length
    prompts together: the generated tokens (cut before the first stop token,
    and at most as many as the position encoding allows, when the model has
    one), or for an every-position model the token at every position."""
    by_len = {}
    for i, ids in enumerate(prompts):
        by_len.setdefault(len(ids), []).append(i)
    out = {}
    for length, members in by_len.items():
        for start in range(0, len(members), batch):
            chunk = members[start:start + batch]
            ids = torch.tensor([prompts[i] for i in chunk], dtype=torch.long).reshape(len(chunk), length)
            if model.every_position:
                toks = model.every_position_tokens(ids)
                for row, i in enumerate(chunk):
                    out[i] = toks[row].tolist()
                continue
            steps = n_new
            if model.stop_token is not None:
                steps = min(n_new, model.max_len - length + 1)
            for _ in range(steps):
                ids = torch.cat([ids, model.next_tokens(ids).unsqueeze(1)], dim=1)
                if model.stop_token is not None and bool((ids[:, length:] == model.stop_token).any(dim=1).all()):
                    break
            for row, i in enumerate(chunk):
                toks = ids[row, length:].tolist()
                if model.stop_token is not None and model.stop_token in toks:
                    toks = toks[:toks.index(model.stop_token)]
                out[i] = toks
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
        model = Transformer(*read(args.weights))
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
            one_pass = model.classify or model.every_position or model.stop_token is not None
            # The last generated token is never fed back: prompt + n_new - 1 rows.
            if len(text) + (0 if one_pass else n_new - 1) > model.max_len:
                raise TfwError("%s: too long for the position encoding" % where)
            ids = tokenize(model, text, where)
            if model.bos is not None and ids[0] != model.bos:
                raise TfwError("%s: the input must start with the beginning-of-sequence token %r"
                               % (where, model.vocab[model.bos]))
            prompts.append(ids)
            ok_texts.append(text)
        except TfwError as e:
            print("tfw_torch: %s" % e, file=sys.stderr)
            status = 1
    if model.classify:
        with torch.no_grad():
            for text, ids in zip(ok_texts, prompts):
                p = model.classify_probs(torch.tensor([ids], dtype=torch.long))[0]
                c = int(p.argmax())
                print("%s\t%s\t%.4f" % (text, model.classes[c], float(p[c])))
        return status
    with torch.no_grad():
        generated = run(model, prompts, n_new, args.batch_size)
    for text, toks in zip(ok_texts, generated):
        if model.every_position:
            start = 1 if model.bos is not None else 0
            print(text + "\t" + "".join(token_text(model.vocab[t]) for t in toks[start:]))
        else:
            print(text + "".join(token_text(model.vocab[t]) for t in toks))
    return status


if __name__ == "__main__":
    sys.exit(main())
