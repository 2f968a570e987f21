#!/usr/bin/env python3
"""GPT-2-style folders and their own forward pass, for tests/convert.sh.

    gpt2_ref.py make FOLDER --layers L --d D --heads H --vocab-mode json|chars
                [--untied] [--act gelu_new|gelu|relu] [--no-prefix] [--seed S]
                [--positions P] [--scale-by-layer]
        writes FOLDER/config.json, FOLDER/model.safetensors (float32, the
        Hugging Face names: Conv1D weights [in, out]) and, for json,
        FOLDER/vocab.json (GPT-2's byte-level spelling: 'Ġ' is the space)
    gpt2_ref.py check FOLDER TFRUN CONVERTED.tfw N PROMPT...
        for each prompt: tfrun --dump's final normalized stream and the logits
        it gives against this file's forward (float64), within 1e-5 of the
        largest value; then the greedy generations of N tokens of tfrun and of
        this forward, which must be identical. Prints one line per failure
        and exits 1 on any.

The forward is written here from GPT-2's definition (transformers'
modeling_gpt2.py: pre-norm blocks, Conv1D x @ W + b, causal softmax
attention scaled by 1/sqrt(d_head), ln_f, tied or separate lm_head); it
shares nothing with tfconvert or tfrun. Run it with /usr/bin/python3 (torch).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import torch

CHARS = "0123456789+= \n"  # the adder's vocabulary: --compare against it


def write_safetensors(path, tensors, prefix_meta=True, meta=None):
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    if meta is not None:
        header["__metadata__"] = meta
    elif prefix_meta:
        header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_metadata(path):
    data = open(path, "rb").read()
    return json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]]).get("__metadata__")


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + en]),
                                     dtype=torch.float32).reshape(e["shape"])
    return out


def byte_level(c):
    """GPT-2's bytes_to_unicode spelling of one byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return chr(dict(zip(bs, cs))[ord(c)])


def make(a):
    g = torch.Generator().manual_seed(a.seed)
    d, L, V, P = a.d, a.layers, len(CHARS), a.positions
    F = 4 * d
    rnd = lambda *s, std=0.4: torch.randn(*s, generator=g) * std
    t = {"wte.weight": rnd(V, d, std=1.0), "wpe.weight": rnd(P, d, std=0.5)}
    for i in range(L):
        h = "h.%d." % i
        t[h + "ln_1.weight"] = 1 + rnd(d, std=0.2)
        t[h + "ln_1.bias"] = rnd(d, std=0.2)
        t[h + "attn.c_attn.weight"] = rnd(d, 3 * d)
        t[h + "attn.c_attn.bias"] = rnd(3 * d, std=0.2)
        t[h + "attn.c_proj.weight"] = rnd(d, d)
        t[h + "attn.c_proj.bias"] = rnd(d, std=0.2)
        t[h + "ln_2.weight"] = 1 + rnd(d, std=0.2)
        t[h + "ln_2.bias"] = rnd(d, std=0.2)
        t[h + "mlp.c_fc.weight"] = rnd(d, F)
        t[h + "mlp.c_fc.bias"] = rnd(F, std=0.2)
        t[h + "mlp.c_proj.weight"] = rnd(F, d, std=0.2)
        t[h + "mlp.c_proj.bias"] = rnd(d, std=0.2)
        # The causal-mask buffer older checkpoints carry: no parameter.
        t[h + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
    t["ln_f.weight"] = 1 + rnd(d, std=0.2)
    t["ln_f.bias"] = rnd(d, std=0.2)
    prefix = "" if a.no_prefix else "transformer."
    out = {prefix + k: v for k, v in t.items()}
    if a.untied:
        out["lm_head.weight"] = rnd(V, d, std=1.0)
    os.makedirs(a.folder, exist_ok=True)
    write_safetensors(os.path.join(a.folder, "model.safetensors"), out)
    config = {"model_type": "gpt2", "n_embd": d, "n_layer": L, "n_head": a.heads,
              "n_positions": P, "n_ctx": P, "vocab_size": V, "n_inner": None,
              "activation_function": a.act, "layer_norm_epsilon": 1e-5,
              "tie_word_embeddings": not a.untied, "scale_attn_weights": True,
              "scale_attn_by_inverse_layer_idx": a.scale_by_layer,
              "architectures": ["GPT2LMHeadModel"]}
    with open(os.path.join(a.folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if a.vocab_mode == "json":
        with open(os.path.join(a.folder, "vocab.json"), "w") as f:
            json.dump({byte_level(c): i for i, c in enumerate(CHARS)}, f)


class Gpt2:
    """GPT-2's forward in float64, from the folder's own tensors."""

    def __init__(self, folder):
        cfg = json.load(open(os.path.join(folder, "config.json")))
        t = read_safetensors(os.path.join(folder, "model.safetensors"))
        t = {k[len("transformer."):] if k.startswith("transformer.") else k: v.double()
             for k, v in t.items()}
        self.t, self.cfg = t, cfg
        self.H, self.L = cfg["n_head"], cfg["n_layer"]
        self.head = t["wte.weight"] if cfg["tie_word_embeddings"] else t["lm_head.weight"]
        self.act = {"gelu_new": lambda x: 0.5 * x * (1 + torch.tanh(
                        math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                    "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
                    "relu": torch.relu}[cfg["activation_function"]]

    def ln(self, x, name):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.cfg["layer_norm_epsilon"]) * \
            self.t[name + ".weight"] + self.t[name + ".bias"]

    def final(self, ids):
        t = self.t
        T = len(ids)
        x = t["wte.weight"][ids] + t["wpe.weight"][:T]
        d = x.shape[-1]
        dh = d // self.H
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        for i in range(self.L):
            h = "h.%d." % i
            y = self.ln(x, h + "ln_1") @ t[h + "attn.c_attn.weight"] + t[h + "attn.c_attn.bias"]
            q, k, v = (y[:, j * d:(j + 1) * d].view(T, self.H, dh).transpose(0, 1) for j in range(3))
            s = q @ k.transpose(-1, -2) / math.sqrt(dh)
            if self.cfg.get("scale_attn_by_inverse_layer_idx"):
                s = s / (i + 1)
            z = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
            x = x + z.transpose(0, 1).reshape(T, d) @ t[h + "attn.c_proj.weight"] + t[h + "attn.c_proj.bias"]
            m = self.act(self.ln(x, h + "ln_2") @ t[h + "mlp.c_fc.weight"] + t[h + "mlp.c_fc.bias"])
            x = x + m @ t[h + "mlp.c_proj.weight"] + t[h + "mlp.c_proj.bias"]
        return self.ln(x, "ln_f")

    def generate(self, ids, n):
        ids = list(ids)
        for _ in range(n):
            ids.append(int((self.final(ids)[-1] @ self.head.T).argmax()))
        return ids


def folder_chars(folder):
    """The folder's vocabulary as characters (vocab.json, byte-level), or CHARS."""
    path = os.path.join(folder, "vocab.json")
    if not os.path.exists(path):
        return CHARS
    back = {byte_level(chr(b)): chr(b) for b in range(1, 127)}
    v = json.load(open(path))
    return "".join(back[t] for t, _ in sorted(v.items(), key=lambda kv: kv[1]))


def check(a):
    global CHARS
    CHARS = folder_chars(a.folder)
    ref = Gpt2(a.folder)
    fails = 0
    for prompt in a.prompts:
        ids = [CHARS.index(c) for c in prompt]
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "acts.safetensors")
            subprocess.run([a.tfrun, a.tfw, "--dump", dump, prompt], check=True,
                           stdout=subprocess.DEVNULL)
            got = read_safetensors(dump)["ln_final.hook_normalized"][0].double()
        want = ref.final(ids)
        worst = float((got - want).abs().max() / want.abs().max())
        logits_got, logits_want = got @ ref.head.T, want @ ref.head.T
        worst_l = float((logits_got - logits_want).abs().max() / logits_want.abs().max())
        if not (worst <= 1e-5 and worst_l <= 1e-5):
            print("FAIL %r: final stream off by %.3g, logits by %.3g (relative to the largest)"
                  % (prompt, worst, worst_l))
            fails += 1
        else:
            print("ok %r: final stream within %.2g, logits within %.2g" % (prompt, worst, worst_l))
        # tfrun prints the prompt, then the tokens escaped (\n as two characters).
        esc = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}
        gen = prompt + "".join(esc.get(CHARS[i], CHARS[i]) for i in ref.generate(ids, a.n)[len(ids):])
        out = subprocess.run([a.tfrun, a.tfw, "-n", str(a.n), "--", prompt], check=True,
                             capture_output=True, text=True).stdout
        if out != gen + "\n":
            print("FAIL %r: tfrun generates %r, GPT-2 %r" % (prompt, out, gen + "\n"))
            fails += 1
    sys.exit(1 if fails or not a.prompts else 0)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("folder")
    m.add_argument("--layers", type=int, default=1)
    m.add_argument("--d", type=int, default=16)
    m.add_argument("--heads", type=int, default=2)
    m.add_argument("--positions", type=int, default=24)
    m.add_argument("--vocab-mode", choices=("json", "chars"), default="json")
    m.add_argument("--untied", action="store_true")
    m.add_argument("--act", default="gelu_new")
    m.add_argument("--no-prefix", action="store_true")
    m.add_argument("--scale-by-layer", action="store_true")
    m.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("folder")
    c.add_argument("tfrun")
    c.add_argument("tfw")
    c.add_argument("n", type=int)
    c.add_argument("prompts", nargs="*")
    a = p.parse_args()
    make(a) if a.cmd == "make" else check(a)


if __name__ == "__main__":
    main()
