#!/usr/bin/env python3
"""mklive.py LENGTH.tfw OUT.tfw: programs/length.tfp's model as tfc writes it
(d_model 3: tokens in column 0, out in 1, n.frac in 2) with a column reused as
the compiler reuses a dead register's (docs/weight-format.md, *Registers*):
layer 1, the Map that reads n.frac, zeroes it (one more ReLU unit,
relu(n.frac) = n.frac as n.frac >= 0, subtracted) and writes out into its
column 2, which the unembedding then reads. So n.frac holds column 2 in state
1 only ("live": [1, 1]; state 0 is the embedding's output, state i + 1 layer
i's) and out in state 2 ("live": [2, 2]); column 1 is left unused. It prints
what the original prints, and a reader that ignored "live" would read out's
values as n.frac after layer 1.

mklive.py IN.tfw OUT.tfw KEY=TEXT ...: IN with each __metadata__.KEY set to
TEXT as it is (malformed JSON goes through), KEY=- deleting it: the edits of
tests/torch.sh's live-range cases.

Written with json, struct and torch only, not through runtime/model/tfw.c's
writer (which refuses what its reader refuses)."""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import tfw_torch  # noqa: E402


def header_of(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def frame(header, body):
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + body


def write(path, meta, tensors):
    header, body, at = {"__metadata__": meta}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().float().contiguous()
        raw = struct.pack("<%df" % t.numel(), *t.flatten().tolist())
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        body.append(raw)
        at += len(raw)
    with open(path, "wb") as f:
        f.write(frame(header, b"".join(body)))


def reuse(src, out):
    meta, t = tfw_torch.read(src)
    regs = {r["name"]: r for r in json.loads(meta["registers"])}
    if (regs["out"]["offset"], regs["n.frac"]["offset"], int(meta["d_model"])) != (1, 2, 3) or \
            len(json.loads(meta["layers"])) != 2:
        sys.exit("mklive.py: %s is not length.tfp's model as expected" % src)
    t = {k: v.clone() for k, v in t.items()}
    fc1w, fc1b = t["layers.1.mlp.fc1.weight"], t["layers.1.mlp.fc1.bias"]
    fc2w = t["layers.1.mlp.fc2.weight"]
    # one more unit: relu(n.frac), taken from column 2, where out goes instead
    t["layers.1.mlp.fc1.weight"] = torch.cat([fc1w, torch.tensor([[0.0, 0.0, 1.0]])])
    t["layers.1.mlp.fc1.bias"] = torch.cat([fc1b, torch.zeros(1)])
    w = torch.zeros(3, fc2w.shape[1] + 1)
    w[2, :-1] = fc2w[1]
    w[2, -1] = -1.0
    t["layers.1.mlp.fc2.weight"] = w
    u = t["unembed.weight"]
    u[:, 2], u[:, 1] = u[:, 1].clone(), 0.0
    layers = json.loads(meta["layers"])
    layers[1]["d_hidden"] += 1
    meta["layers"] = json.dumps(layers)
    meta["registers"] = json.dumps([
        regs["tokens"],
        dict(regs["n.frac"], live=[1, 1]),
        dict(regs["out"], offset=2, live=[2, 2]),
    ])
    write(out, meta, t)


def edit(src, out, edits):
    header, body = header_of(src)
    meta = header["__metadata__"]
    for e in edits:
        key, _, text = e.partition("=")
        if text == "-":
            meta.pop(key, None)
        else:
            meta[key] = text
    with open(out, "wb") as f:
        f.write(frame(header, body))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if len(sys.argv) == 3:
        reuse(sys.argv[1], sys.argv[2])
    else:
        edit(sys.argv[1], sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
