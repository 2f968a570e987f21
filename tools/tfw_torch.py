#!/usr/bin/env python3
"""Run a .tfw weight file in PyTorch, independently of tfrun.

Reads the file with nothing but json, struct and torch.frombuffer, and runs
it with the semantics docs/weight-format.md specifies.

As a script it prints what tfrun prints: each prompt followed by its
generated tokens, one line per prompt, stopping before the stop token when
the model has one (for a model read at every position: the input, a TAB and
the argmax token at every position, after the BOS position when it has a
bos; for a classifier: the input, its class and the class's probability,
tab-separated).

    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] PROMPT
    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] --batch FILE|-

As a module (docs/python.md):

    import tfw_torch
    model = tfw_torch.load("adder.tfw")            # a torch.nn.Module
    logits, cache = model.run_with_cache("0999+0111=")
    cache["blocks.3.hook_resid_post"]              # [1, n_pos, d_model]
    cache["blocks.0.attn.hook_pattern"]            # [1, n_heads, n_pos, n_pos]
    model.decode(cache, "carry")                   # the register, per position
    model.generate("0999+0111=")                   # "0111"

Needs Debian's python3-torch (run it with /usr/bin/python3).
"""
import argparse
import json
import math
import struct
import sys

import torch


class TfwError(Exception):
    pass


def read(path):
    """(metadata dict, {name: float32 tensor}) of a .tfw file."""
    meta, tensors = read_safetensors(path)
    if meta.get("format") != "tfw":
        raise TfwError("not a tfw file")
    return meta, tensors


def read_safetensors(path):
    """(metadata dict, {name: float32 tensor}) of a safetensors file of F32
    tensors (a .tfw, or a tfrun --dump)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise TfwError("file too short")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise TfwError("header length exceeds the file")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise TfwError("tensor %s: dtype %s" % (name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        tensors[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(entry["shape"])
    return meta, tensors


class Hook:
    """Where activations go: a dict (or None: nowhere) and a name prefix."""

    def __init__(self, parent, prefix):
        if parent is None:
            self.cache, self.prefix = None, prefix
        elif isinstance(parent, Hook):
            self.cache, self.prefix = parent.cache, parent.prefix + prefix
        else:
            self.cache, self.prefix = parent, prefix

    def __bool__(self):
        return self.cache is not None


def record(hook, name, value):
    """Stores value under the hook's prefix + name (nothing without a cache)."""
    if isinstance(hook, Hook):
        if hook:
            hook.cache[hook.prefix + name] = value
    elif hook is not None:
        hook[name] = value


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

    def attention(self, x, l, key_mask=None, scores_out=None, hook=None):
        B, L, _ = x.shape
        H, dh, dv = l["heads"], l["d_head"], l["d_vhead"]
        q = self.linear(x, l, "query", "query_bias").view(B, L, H, dh)
        k = self.linear(x, l, "key", "key_bias").view(B, L, H, dh)
        v = self.linear(x, l, "value", "value_bias").view(B, L, H, dv)
        record(hook, "hook_q", q)
        record(hook, "hook_k", k)
        record(hook, "hook_v", v)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * l["scale"]
        if scores_out is not None:
            scores_out.append(scores)
        if l["causal"]:
            future = torch.ones(L, L, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if key_mask is not None:  # [B, L], True where a key is padding
            scores = scores.masked_fill(key_mask[:, None, None, :], float("-inf"))
        record(hook, "hook_attn_scores", scores)
        pattern = torch.softmax(scores, dim=-1)
        record(hook, "hook_pattern", pattern)
        z = (pattern @ v).transpose(1, 2)
        record(hook, "hook_z", z)
        heads = z.reshape(B, L, H * dv)
        if "output" in l:
            heads = heads @ self.t[l["output"]].T
        if "output_bias" in l:
            heads = heads + self.t[l["output_bias"]]
        return heads

    def mlp(self, x, l, hook=None):
        h = self.linear(x, l, "fc1_weight", "fc1_bias")
        record(hook, "hook_pre", h)
        h = torch.nn.functional.gelu(h) if l["activation"] == "gelu" else torch.relu(h)
        record(hook, "hook_post", h)
        return self.linear(h, l, "fc2_weight", "fc2_bias")

    def layer(self, x, l, block=None, key_mask=None, dropout=0.0, scores_out=None):
        """One layer l of the file on the residual stream x [B, L, d]; its
        activations go to the Hook `block` ("blocks.<i>.")."""
        record(block, "hook_resid_pre", x)
        if l["kind"] == "norm":
            x = self.norm(x, l)
            record(block, "hook_resid_post", x)
            return x
        attn = l["kind"] == "attention"
        h = x
        if "norm_weight" in l:
            h = self.norm(x, l)
            record(block, "ln1.hook_normalized" if attn else "ln2.hook_normalized", h)
        if attn:
            y = self.attention(h, l, key_mask, scores_out, Hook(block, "attn."))
        else:
            y = self.mlp(h, l, Hook(block, "mlp."))
        record(block, "hook_attn_out" if attn else "hook_mlp_out", y)
        if dropout > 0:
            y = torch.nn.functional.dropout(y, dropout, training=True)
        x = x + y
        record(block, "hook_resid_post", x)
        return x

    def hidden(self, ids, key_mask=None, dropout=0.0, scores_out=None, cache=None):
        """ids [B, L] -> the residual stream after the last layer [B, L, d].
        With a dict `cache`, every named activation goes into it (docs/python.md)."""
        L = ids.shape[1]
        emb, pos = self.tok[ids], self.pos[:L].unsqueeze(0)
        record(cache, "hook_embed", emb)
        record(cache, "hook_pos_embed", pos.expand_as(emb))
        x = emb + pos
        for i, l in enumerate(self.layers):
            x = self.layer(x, l, Hook(cache, "blocks.%d." % i), key_mask, dropout, scores_out)
        if self.layers and self.layers[-1]["kind"] == "norm":
            record(cache, "ln_final.hook_normalized", x)
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


class Model(torch.nn.Module):
    """A .tfw file as a torch.nn.Module (load() makes one).

    Every tensor of the file is a parameter (frozen: model.requires_grad_()
    to differentiate), named as in the file with '.' replaced by '__'
    (model.tensor(name) finds it by its file name). forward takes a prompt
    (str), a list of prompts of one length, or token ids [batch, pos], and
    returns the logits at every position [batch, pos, outputs] (outputs: the
    vocabulary, or the classes of a classifier); with return_cache=True it
    returns (logits, cache): a dict of named activations, one "block" per
    layer of the file (docs/python.md lists the names)."""

    def __init__(self, meta, tensors):
        super().__init__()
        params = {}
        for name, t in tensors.items():
            if name.startswith("optim."):
                continue
            p = torch.nn.Parameter(t, requires_grad=False)
            self.register_parameter(name.replace(".", "__"), p)
            params[name] = p
        self.meta = meta
        self.tf = Transformer(meta, params)
        self.vocab = self.tf.vocab
        self.registers = {r["name"]: r for r in json.loads(meta.get("registers", "[]"))}
        self.period = int(meta.get("period", self.tf.max_len))
        self.layers = self.tf.layers
        self.cfg = {
            "n_layers": len(self.layers), "d_model": int(meta["d_model"]),
            "n_ctx": self.tf.max_len, "d_vocab": len(self.vocab),
            "d_vocab_out": self.tf.unembed.shape[0], "classes": self.tf.classes,
            "layer_kinds": [l["kind"] for l in self.layers],
            "made_by": json.loads(meta["made_by"]) if "made_by" in meta else None,
            "learned": json.loads(meta["learned"]) if "learned" in meta else None,
        }

    def tensor(self, name):
        """The parameter holding the file's tensor `name`."""
        return self.tf.t[name]

    def to_tokens(self, text):
        """A prompt (or a list of prompts of one length) as ids [batch, pos]."""
        texts = [text] if isinstance(text, str) else list(text)
        ids = [tokenize(self.tf, t, "prompt %d" % i) for i, t in enumerate(texts)]
        if len({len(x) for x in ids}) != 1 or not ids[0]:
            raise TfwError("give non-empty prompts of one length")
        if len(ids[0]) > self.tf.max_len:
            raise TfwError("%d tokens exceed the %d positions" % (len(ids[0]), self.tf.max_len))
        return torch.tensor(ids, dtype=torch.long)

    def forward(self, tokens, return_cache=False):
        ids = self.to_tokens(tokens) if not torch.is_tensor(tokens) else tokens
        cache = {} if return_cache else None
        logits = self.tf.logits(self.tf.hidden(ids, cache=cache))
        return (logits, cache) if return_cache else logits

    def run_with_cache(self, tokens):
        """(logits, cache), as TransformerLens's run_with_cache."""
        return self.forward(tokens, return_cache=True)

    def generate(self, text, n=None):
        """The completion of one prompt, as tfrun prints it after the prompt
        (for an every-position model: the tokens at each position; for a
        classifier: the class name)."""
        with torch.no_grad():
            ids = self.to_tokens(text)
            if self.tf.classify:
                return self.tf.classes[int(self.tf.classify_probs(ids)[0].argmax())]
            toks = run(self.tf, [ids[0].tolist()], self.tf.generate if n is None else n, 1)[0]
        if self.tf.every_position and self.tf.bos is not None:
            toks = toks[1:]
        return "".join(self.vocab[t] for t in toks)

    def decode(self, cache, register, hook=None, batch=0):
        """Register `register` read at every position from the residual
        stream `hook` of the cache (default: after the last layer), as
        tfrun --trace reads it: a token register gives its argmax token, a
        categorical one its value label (None when all near 0), a position
        register the position it points to (an int when within 0.1 of one,
        else a float; None when near 0), a scalar its value."""
        if register not in self.registers:
            raise TfwError("no register %r (the registers: %s)"
                           % (register, ", ".join(self.registers) or "none"))
        r = self.registers[register]
        if hook is None:
            hook = "blocks.%d.hook_resid_post" % (len(self.layers) - 1) if self.layers else "hook_embed"
        x = cache[hook][batch].detach().double()
        cols = x[:, r["offset"]:r["offset"] + r["size"]]
        out = []
        for row in cols:
            if r["kind"] == "scalar":
                out.append(float(row[0]))
            elif r["kind"] == "position":
                if float(row.norm()) < 0.01:
                    out.append(None)
                    continue
                p = math.atan2(float(row[0]), float(row[1])) * self.period / (2 * math.pi) % self.period
                near = round(p) % self.period
                out.append(near if abs(p - round(p)) <= 0.1 else p)
            else:
                if float(row.abs().max()) < 0.01:
                    out.append(None)
                    continue
                i = int(row.argmax())
                out.append(self.vocab[i] if r["kind"] == "token" else r["values"][i])
        return out


def load(path):
    """The .tfw file at path as a Model (a torch.nn.Module)."""
    return Model(*read(path))


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
