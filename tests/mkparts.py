#!/usr/bin/env python3
"""mkparts.py OUT.tfw: writes a small hand-built model whose two layers each
hold two ops side by side, as tfc's scheduler (compiler/schedule.c) merges
them: the layers' `parts` (docs/weight-format.md, *Layers*), for
tests/cli.sh, tests/report.sh and tests/tfw_diff.py.

Written with nothing but json and struct, so that it does not go through
runtime/model/tfw.c's writer: both readers must accept what the format
document describes.

vocab "abc", d_model 9: registers tokens (0-2), pos (3-4, sin and cos of
2*pi*p/8), n (5), hist (6), out (7), x (8); max_len 8, generate 3.

  layer 0 "n+hist", attention, 3 heads (d_head 2, d_vhead 1, causal):
      head 0     n     (Count, line 10)       the fraction of 'a' so far -> n
      heads 1-2  hist  (Aggregate, line 11)   the fraction of 'b', of 'c' -> hist
  layer 1 "out+x", MLP, 6 ReLU units:
      units 0-3  out   (Map, line 12)         reads n and hist -> out
      units 4-5  x     (line 13, no op)       reads n -> x

The heads attend uniformly (query and key are 0), so head 0's value, the
'a' column of `tokens`, averages to the fraction of 'a' among positions
0..i. The unembedding reads n, hist and out, so the next token depends on
every part: "abc" -> "abcaaa" (the same in tfrun and tools/tfw_torch.py).
"""
import json
import math
import struct
import sys

VOCAB = "abc"
D = 9
MAX_LEN = 8
PERIOD = 8
SOURCE = """# parts.tfp: the program tests/mkparts.py's model stands for
# (a sketch: mkparts.py writes its weights by hand).
vocab "abc";
max_len 8;
register n: scalar;
register hist: scalar;
register out: scalar;
register x: scalar;

n:    Count(q.pos >= k.pos, k.tokens == 'a') -> n;
hist: Aggregate(q.pos >= k.pos, k.tokens == 'b') -> hist;
out:  Map(n - hist) -> out;
x:    n * 2 -> x;
output tokens;
"""


def zeros(*shape):
    n = 1
    for s in shape:
        n *= s
    return shape, [0.0] * n


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: mkparts.py OUT.tfw")
    t = {}

    shape, tok = zeros(len(VOCAB), D)
    for i in range(len(VOCAB)):
        tok[i * D + i] = 1.0
    t["embed.token.weight"] = (shape, tok)
    shape, pos = zeros(MAX_LEN, D)
    for p in range(MAX_LEN):
        pos[p * D + 3] = math.sin(2 * math.pi * p / PERIOD)
        pos[p * D + 4] = math.cos(2 * math.pi * p / PERIOD)
    t["embed.position.weight"] = (shape, pos)

    # Attention: 3 heads; uniform attention (query, key 0); head h's value
    # is token column h ('a', 'b', 'c'); the output adds head 0 into n, heads
    # 1 and 2 into hist (with weights 1 and -1: the fraction of 'b' minus
    # that of 'c').
    t["layers.0.attn.query.weight"] = zeros(6, D)
    t["layers.0.attn.key.weight"] = zeros(6, D)
    shape, val = zeros(3, D)
    for h in range(3):
        val[h * D + h] = 1.0
    t["layers.0.attn.value.weight"] = (shape, val)
    shape, out = zeros(D, 3)
    out[5 * 3 + 0] = 1.0
    out[6 * 3 + 1] = 1.0
    out[6 * 3 + 2] = -1.0
    t["layers.0.attn.output.weight"] = (shape, out)

    # MLP: units 0-3 (out) relu(+-n), relu(+-hist): out = |n| - |hist| + ...;
    # units 4-5 (x) relu(n), relu(-n): x = 2n.
    shape, w1 = zeros(6, D)
    for u, (col, sign) in enumerate([(5, 1), (5, -1), (6, 1), (6, -1), (5, 1), (5, -1)]):
        w1[u * D + col] = sign
    t["layers.1.mlp.fc1.weight"] = (shape, w1)
    shape, b1 = zeros(6)
    t["layers.1.mlp.fc1.bias"] = (shape, b1)
    shape, w2 = zeros(D, 6)
    for u, w in enumerate([1, 1, -1, -1]):
        w2[7 * 6 + u] = w
    w2[8 * 6 + 4] = 2.0
    w2[8 * 6 + 5] = -2.0
    t["layers.1.mlp.fc2.weight"] = (shape, w2)

    # Unembedding: 'a' when n leads, 'b' when hist does, 'c' after out.
    shape, un = zeros(len(VOCAB), D)
    un[0 * D + 5] = 2.0
    un[1 * D + 6] = 2.0
    un[2 * D + 7] = 1.0
    un[2 * D + 8] = -0.5
    t["unembed.weight"] = (shape, un)

    layers = [
        {"kind": "attention", "name": "n+hist", "op": "Count", "line": 10,
         "parts": [{"name": "n", "op": "Count", "line": 10, "heads": [0, 1]},
                   {"name": "hist", "op": "Aggregate", "line": 11, "heads": [1, 2]}],
         "heads": 3, "d_head": 2, "d_vhead": 1, "scale": 1.0, "causal": True,
         "query": "layers.0.attn.query.weight", "key": "layers.0.attn.key.weight",
         "value": "layers.0.attn.value.weight", "output": "layers.0.attn.output.weight"},
        {"kind": "mlp", "name": "out+x", "op": "Map", "line": 12,
         "parts": [{"name": "out", "op": "Map", "line": 12, "units": [0, 4]},
                   {"name": "x", "line": 13, "units": [4, 2]}],
         "d_hidden": 6, "activation": "relu",
         "fc1_weight": "layers.1.mlp.fc1.weight", "fc1_bias": "layers.1.mlp.fc1.bias",
         "fc2_weight": "layers.1.mlp.fc2.weight"},
    ]
    registers = [{"name": "tokens", "kind": "token", "offset": 0, "size": 3},
                 {"name": "pos", "kind": "position", "offset": 3, "size": 2}] + \
        [{"name": r, "kind": "scalar", "offset": 5 + i, "size": 1}
         for i, r in enumerate(["n", "hist", "out", "x"])]

    def dump(v):
        return json.dumps(v, separators=(",", ":"))

    meta = {"format": "tfw", "format_version": "1", "d_model": str(D), "period": str(PERIOD),
            "generate": "3", "vocab": dump(list(VOCAB)), "registers": dump(registers),
            "layers": dump(layers), "source": SOURCE, "source_name": "parts.tfp",
            "made_by": dump({"tool": "tests/mkparts.py"})}
    header, data, at = {"__metadata__": meta}, b"", 0
    for name, (shape, values) in t.items():
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    h = dump(header).encode("utf-8")
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


if __name__ == "__main__":
    main()
