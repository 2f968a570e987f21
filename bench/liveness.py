#!/usr/bin/env python3
"""bench/liveness.py WEIGHTS.tfw ...: how narrow each model's residual stream
could be if a register's columns were reused once nothing reads it (issue
23's "liveness", not built yet): a measurement to plan it by.

For each file, from its weights alone: the residual columns each layer reads
(non-zero columns of its query, key, value and fc1 weights) and writes
(non-zero rows of its output and fc2 weights and biases), the unembedding's
reads and every run-time check's register as reads after its layer. A
register is live from the layer that first writes it (the embedding, -1, for
the token, position and folded registers) to the last layer that reads it.
Prints per file: d_model, the most columns live at once (after each layer:
the registers written so far and read later), and the registers live there.
This is a lower bound on what column reuse gives: the layer that takes dead
columns must also remove their value (an MLP unit per column), which it
ignores.
"""
import array
import json
import struct
import sys


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__")

    def tensor(name):
        t = h[name]
        s, e = t["data_offsets"]
        return t["shape"], array.array("f", b[8 + n + s:8 + n + e])
    return meta, tensor


def cols_read(tensor, name, d):
    """Input columns a [rows, d] weight touches."""
    shape, a = tensor(name)
    rows = shape[0]
    return {c for r in range(rows) for c in range(d) if a[r * d + c] != 0}


def cols_written(tensor, name, d):
    """Output rows a [d, k] weight (or [d] bias) touches."""
    shape, a = tensor(name)
    k = shape[1] if len(shape) == 2 else 1
    return {r for r in range(d) for c in range(k) if a[r * k + c] != 0}


def analyse(path):
    meta, tensor = read(path)
    d = int(meta["d_model"])
    regs = json.loads(meta["registers"])
    layers = json.loads(meta["layers"])
    col_reg = {}
    for r in regs:
        for c in range(r["offset"], r["offset"] + r["size"]):
            col_reg[c] = r["name"]
    reads, writes = [], []
    for ly in layers:
        rd, wr = set(), set()
        if ly["kind"] == "attention":
            for role in ("query", "key", "value"):
                rd |= cols_read(tensor, ly[role], d)
            if ly.get("output"):
                wr |= cols_written(tensor, ly["output"], d)
        elif ly["kind"] == "mlp":
            rd |= cols_read(tensor, ly["fc1_weight"], d)
            wr |= cols_written(tensor, ly["fc2_weight"], d)
            if ly.get("fc2_bias"):
                wr |= cols_written(tensor, ly["fc2_bias"], d)
        reads.append({col_reg.get(c) for c in rd} - {None})
        writes.append({col_reg.get(c) for c in wr} - {None})
    final_reads = {meta["output"]} if meta.get("output") else set()  # the output register
    for ch in json.loads(meta.get("checks", "[]")):
        if 0 <= ch.get("layer", -1) < len(reads):
            reads[ch["layer"]].add(ch["register"])
    n = len(layers)
    first = {r["name"]: (min([i for i in range(n) if r["name"] in writes[i]], default=-1)) for r in regs}
    last = {}
    for r in regs:
        name = r["name"]
        lr = [i for i in range(n) if name in reads[i]]
        last[name] = n if name in final_reads else (max(lr) if lr else first[name])
    size = {r["name"]: r["size"] for r in regs}
    best, at, live_at = 0, -1, []
    for t in range(-1, n):  # after layer t (-1: the embedding)
        live = [r for r in size if first[r] <= t < last[r]]
        w = sum(size[r] for r in live)
        if w > best:
            best, at, live_at = w, t, live
    return d, n, best, at, live_at


def main():
    print("| file | d_model | layers | most columns live at once | after layer | live there |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for path in sys.argv[1:]:
        d, n, best, at, live = analyse(path)
        print("| %s | %d | %d | %d | %s | %s |" % (path.split("/")[-1], d, n, best,
              "embedding" if at < 0 else at, ", ".join(live)))


if __name__ == "__main__":
    main()
