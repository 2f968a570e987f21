#!/usr/bin/env python3
"""onnx_check.py TFCONVERT TFRUN ENGINE_LOGITS ORT_DIR WEIGHTS.tfw PROMPTS.txt [TOL]: one model in ONNX.

tfconvert writes WEIGHTS.onnx; python3-onnx's checker (full_check: types and
shapes inferred) accepts it. Everything else this script knows of the model
it reads from the ONNX file's metadata (vocabulary, output, stop token,
positions, classes), as a user of the file would.

tfrun --batch runs every prompt. ONNX Runtime (onnxruntime-node from
ORT_DIR, tests/onnx_run.js) and the engine (tests/engine_logits.c) then run
each prompt followed by what tfrun generated for it, in one pass (equal
lengths batched), and on every prompt:
  - ONNX Runtime's output is the line tfrun printed: a generating model's
    argmax at the last prompt position and at each generated one is the
    next token tfrun generated (so greedy generation in ONNX Runtime, one
    pass per token, gives tfrun's tokens), then the stop token where tfrun
    stopped before its limit; an every-position model's argmax tokens or
    values, a classifier's class and probability;
  - its logits (or values) at every position of that pass (a classifier's
    at its class position) are within 1e-5 of the engine's, relative to the
    largest of the prompt's (at least 1), or within TOL.
Prints one summary line; exit 1 on any failure. Run with /usr/bin/python3.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import threading

import numpy as np
import onnx
import onnx.checker

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = 512  # sequences per request (the engine holds a KV cache for each)
TOL = 1e-5


def token_text(tok):
    """A token as tfrun prints it (tools/python/tfw_torch.py's token_text);
    a word (a vocabulary of words) as it is."""
    if len(tok) > 1:
        return tok
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}
    if tok in escapes:
        return escapes[tok]
    if ord(tok) < 0x20 or ord(tok) >= 0x7F:
        return "\\x%02x" % ord(tok)
    return tok


def value_text(v):
    """A float32 as tfrun prints it (model_value_text): the shortest
    %.{1..9}g that reads back, a number from 1 to 1e16 written out."""
    if math.isnan(v):
        return "nan"
    for p in range(1, 10):
        s = "%.*g" % (p, v)
        if struct.unpack("<f", struct.pack("<f", float(s)))[0] == v:
            break
    if "e" in s and math.isfinite(v) and 1 <= abs(v) < 1e16:
        mant, exp10 = ("%.*e" % (p - 1, abs(v))).split("e")
        digits, exp10 = mant.replace(".", ""), int(exp10)
        whole = digits.ljust(exp10 + 1, "0")
        s = ("-" if v < 0 else "") + whole[:exp10 + 1] + ("." + whole[exp10 + 1:] if whole[exp10 + 1:] else "")
    return s


def parse_tokens(text, spelled):
    """tfrun's printed tokens back to ids; None when they do not parse."""
    ids, i = [], 0
    while i < len(text):
        for n in (4, 2, 1):  # \xNN, \n (and \\), a character
            if text[i:i + n] in spelled:
                ids.append(spelled[text[i:i + n]])
                i += n
                break
        else:
            return None
    return ids


class Server:
    """A process speaking onnx_run.js's protocol. A request that takes more
    than DEADLINE seconds kills it (a protocol mismatch would otherwise leave
    both sides waiting: the test fails instead of hanging)."""

    DEADLINE = 600

    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def _watch(self):
        t = threading.Timer(self.DEADLINE, self.p.kill)
        t.daemon = True
        t.start()
        return t

    def send(self, seqs):
        a = np.asarray(seqs, dtype="<i4")
        t = self._watch()
        try:
            self.p.stdin.write(struct.pack("<ii", a.shape[0], a.shape[1]) + a.tobytes())
            self.p.stdin.flush()
        finally:
            t.cancel()

    def receive(self, count):
        t = self._watch()
        try:
            data = self.p.stdout.read(4 * count)
        finally:
            t.cancel()
        if len(data) != 4 * count:
            raise RuntimeError("%s answered %d of %d bytes" % (self.p.args[0], len(data), 4 * count))
        return np.frombuffer(data, dtype="<f4")

    def close(self):
        try:
            self.p.stdin.write(struct.pack("<ii", 0, 0))
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        return self.p.wait()


def main():
    global TOL
    tfconvert, tfrun, engine, ort_dir, weights, prompts_path = sys.argv[1:7]
    if len(sys.argv) > 7:  # a model's own tolerance (tests/onnx.sh says why)
        TOL = float(sys.argv[7])
    name = os.path.basename(weights)
    tmp = tempfile.mkdtemp()
    onnx_path = os.path.join(tmp, "model.onnx")
    subprocess.run([tfconvert, weights, "-o", onnx_path], check=True)
    proto = onnx.load(onnx_path)
    onnx.checker.check_model(proto, full_check=True)
    meta = {p.key: p.value for p in proto.metadata_props}
    vocab = json.loads(meta["tfw.vocab"])
    index = {t: i for i, t in enumerate(vocab)}
    spelled = {token_text(t): i for i, t in enumerate(vocab)}
    words = any(len(t) > 1 for t in vocab)  # prompts and outputs: words apart
    sep = " " if words else ""
    n_new, max_len = int(meta["tfw.generate"]), int(meta["tfw.max_len"])
    bos = index[meta["tfw.bos"]] if "tfw.bos" in meta else None
    stop = index[meta["tfw.stop_token"]] if "tfw.stop_token" in meta else None
    classify = meta["tfw.output_kind"] == "classify"
    classes = json.loads(meta["tfw.classes"]) if classify else None
    every = meta["tfw.output_mode"] == "every_position"
    regs = {r["name"]: r for r in json.loads(meta["tfw.registers"])}
    out_reg = regs.get(meta.get("tfw.output"))
    # A scalar output the unembedding does not decode (no logits): values.
    numeric = every and out_reg is not None and out_reg["kind"] == "scalar" and \
        [o.name for o in proto.graph.output] == ["values"]
    W = 1 if numeric else len(classes) if classify else len(vocab)

    texts = [l.rstrip("\n") for l in open(prompts_path) if l.rstrip("\n")]
    want = subprocess.run([tfrun, weights, "--batch", prompts_path], capture_output=True,
                          text=True).stdout.splitlines()
    fails = []
    if len(want) != len(texts) or not texts:
        print("FAILED %s: tfrun printed %d lines for %d prompts" % (name, len(want), len(texts)))
        return 1

    # Each prompt's one pass: the prompt and, for a
    # generating model, what tfrun generated; `expect` what ONNX Runtime's
    # argmax must give at the positions from `first` on.
    cases = []  # (input ids, first, expected argmax ids or None)
    for text, line in zip(texts, want):
        # a BOS is the prompt's own first token
        prompt = [index.get(c, -1) for c in (text.split() if words else text)]
        if -1 in prompt:
            fails.append("%r: a character outside the vocabulary" % text)
            cases.append(None)
            continue
        if every or classify:
            cases.append((prompt, 0, None))
            continue
        if not line.startswith(text):
            gen = None
        elif words:
            gen = [index.get(w, -1) for w in line[len(text):].split()]
            gen = None if -1 in gen else gen
        else:
            gen = parse_tokens(line[len(text):], spelled)
        if gen is None:
            fails.append("%r: tfrun printed %r" % (text, line))
            cases.append(None)
            continue
        T = len(prompt)
        steps = min(n_new, max_len - T + 1) if stop is not None else n_new
        expect = gen + ([stop] if stop is not None and len(gen) < steps else [])
        if not expect or len(gen) > steps:
            fails.append("%r: tfrun generated %d tokens, the limit is %d" % (text, len(gen), steps))
            cases.append(None)
            continue
        seq = prompt + gen
        if len(seq) > T + len(expect) - 1:
            seq = seq[:T + len(expect) - 1]
        cases.append((seq, T - 1, expect))

    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    ort = Server(["node", os.path.join(HERE, "onnx_run.js"), onnx_path], env)
    eng = Server([engine, weights])
    by_len = {}
    for i, c in enumerate(cases):
        if c is not None:
            by_len.setdefault(len(c[0]), []).append(i)
    worst, start = 0.0, 1 if bos is not None else 0
    for L, members in sorted(by_len.items()):
        for at in range(0, len(members), CHUNK):
            chunk = members[at:at + CHUNK]
            seqs = [cases[i][0] for i in chunk]
            ort.send(seqs)
            eng.send(seqs)  # the two run at once
            B = len(chunk)
            got = ort.receive(B * L * W).reshape(B, L, W)
            if classify:
                ref = eng.receive(B * W).reshape(B, 1, W)
                pos = L - 1 if meta["tfw.classify_at"] == "last" else 0
                got = got[:, pos:pos + 1]
            else:
                ref = eng.receive(B * L * W).reshape(B, L, W)
            g64, r64 = got.astype(np.float64), ref.astype(np.float64)
            err = np.abs(g64 - r64).max(axis=(1, 2)) / np.maximum(1.0, np.abs(r64).max(axis=(1, 2)))
            err = np.where(np.isnan(err), np.inf, err)
            worst = max(worst, float(err.max()))
            for b in np.nonzero(err > TOL)[0][:3]:
                fails.append("%r: logits differ from the engine's by %.3g of the largest"
                             % (texts[chunk[b]], err[b]))
            for b, i in enumerate(chunk):
                text, line = texts[i], want[i]
                if numeric:
                    printed = text + "\t" + " ".join(value_text(float(v)) for v in got[b, start:, 0])
                elif every:
                    printed = text + "\t" + sep.join(token_text(vocab[t])
                                                    for t in got[b, start:].argmax(axis=1))
                elif classify:
                    lg = g64[b, 0]
                    c = int(lg.argmax())
                    prob = 1.0 / np.exp(lg - lg[c]).sum()
                    w = line.rsplit("\t", 1)
                    if w[0] != "%s\t%s" % (text, classes[c]) or abs(float(w[1]) - prob) > 1e-4:
                        fails.append("%r: ONNX Runtime %s %.4f, tfrun %r" % (text, classes[c], prob, line))
                    continue
                else:
                    first, expect = cases[i][1], cases[i][2]
                    picked = got[b, first:first + len(expect)].argmax(axis=1).tolist()
                    if picked != expect:
                        fails.append("%r: ONNX Runtime's next tokens %s, tfrun's %s"
                                     % (text, picked, expect))
                    continue
                if printed != line:
                    fails.append("%r: ONNX Runtime %r, tfrun %r" % (text, printed, line))
    if ort.close() != 0 or eng.close() != 0:
        fails.append("a server exited with an error")
    for f in fails[:3]:
        print("FAIL %s: %s" % (name, f))
    if fails:
        print("FAILED %s: %d prompts, %d failures; logits within %.2g of the engine's"
              % (name, len(texts), len(fails), worst))
    else:
        print("ok %s: %d prompts, tfrun's outputs on every one; logits within %.2g of the engine's; "
              "the checker accepts it" % (name, len(texts), worst))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
