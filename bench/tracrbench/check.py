#!/usr/bin/env python3
"""bench/tracrbench/check.py TFC TFRUN [--random N] [--exhaustive L] [--every K] [--table] [NAME...]: TracrBench's
programs against a RASP evaluation with Tracr's semantics.

Each case_N_name.tfp here is one of InterpBench's cases (circuits_benchmark/benchmark/cases/,
https://github.com/FlyingPumba/circuits-benchmark) translated into .tfp as written in
Python; cases.py holds the same case as RASP (rasp.py, Tracr's semantics), which is the
reference. Every input of 1 to L tokens (default 3) and N random ones of 4 to maxlen - 1 tokens
(default 5,000; fixed seed) must give what the RASP evaluation gives at every position:
  - a categorical output equal by Python's == to the value its token spells (a word, True,
    False, a number: Tracr's value sets are Python sets, where 0.0, 0 and False are one);
  - a numeric output (`output_error_bound` in the weight file) within the proven bound plus
    float32's printing (1e-7 of the value);
  - None (an Aggregate that selects nothing, a Map's None): the token "None", as Python prints
    it (the .tfp writes Tracr's default None as `default: "None"`, or a Map's None as "None").
Inputs on which Tracr's evaluator raises (a categorical Aggregate of several values, a
comparison with None) have no RASP output and are counted apart ("raises").
--every K checks every K-th case in the order of their numbers (the sanitizer build's sample).
--table prints the Markdown table of README.md: tfc's blocks, d_model and parameters, and
Tracr's blocks and d_model (rasp.tracr_size: from Tracr's allocation, not a Tracr build).
"""
import itertools
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rasp  # noqa: E402
from cases import CASES, MAXLEN  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = 50000   # inputs per tfrun run


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def size(h):
    """(blocks, d_model, parameters) of a weight file, blocks counted as Tracr does: walking
    the layers in order, at most one attention layer then at most one MLP."""
    meta = h["__metadata__"]
    kinds = [l["kind"] for l in json.loads(meta["layers"]) if l["kind"] in ("attention", "mlp")]
    blocks, i = 0, 0
    while i < len(kinds):
        if kinds[i] == "attention":
            i += 1
        if i < len(kinds) and kinds[i] == "mlp":
            i += 1
        blocks += 1
    params = sum((t["data_offsets"][1] - t["data_offsets"][0]) // 4
                 for k, t in h.items() if k != "__metadata__")
    return blocks, int(meta["d_model"]), params


def split_words(text, names):
    """A printed output of words as its tokens: words apart, but an output-only token may hold
    spaces ("not spam"), matched first (the longest name that the words at hand spell)."""
    words, out, i = text.split(), [], 0
    longest = max(len(n.split(" ")) for n in names)
    while i < len(words):
        k = next((k for k in range(min(longest, len(words) - i), 1, -1)
                  if " ".join(words[i:i + k]) in names), 1)
        out.append(" ".join(words[i:i + k]))
        i += k
    return out


def inputs(vocab, maxlen, n_random, rng, exhaustive=3):
    for n in range(1, exhaustive + 1):
        yield from itertools.product(vocab, repeat=n)
    for _ in range(n_random):
        yield tuple(rng.choice(vocab) for _ in range(rng.randint(4, maxlen - 1)))


def printed_value(text):
    """A printed token as the Python value it spells: True, False, None, a number, or a word."""
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    try:
        return float(text)
    except ValueError:
        return text


def agrees(got, want, numeric, bound):
    """Whether tfrun's printed value `got` is the RASP value `want`, by Python's == (Tracr's
    value sets are Python sets: 0.0, 0 and False are one value), numbers of a numeric output
    within the proven bound; and the relative error."""
    if numeric and isinstance(want, (int, float)):
        try:
            err = abs(float(got) - want)
        except ValueError:
            return False, 0.0
        return err <= bound + 1e-7 * abs(want), err / max(1.0, abs(want))
    g = printed_value(got)
    if want is None or g is None or isinstance(want, str) or isinstance(g, str):
        return g == want, 0.0
    return abs(g - want) <= 1e-9 * max(1.0, abs(want)), 0.0


def check(name, tfc, tfrun, n_random, exhaustive, tmp):
    """(status, cases, raises, worst error, size): status 'pass' or why it failed."""
    program, vocab = CASES[name]
    maxlen = MAXLEN.get(name, 10)
    w = os.path.join(tmp, name + ".tfw")
    r = subprocess.run([tfc, os.path.join(HERE, name + ".tfp"), "-o", w],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "tfc: " + r.stderr.strip().splitlines()[0], 0, 0, 0, None
    h = header(w)
    meta = h["__metadata__"]
    numeric = "output_error_bound" in meta
    bound = float(meta.get("output_error_bound", 0))
    # a vocabulary of characters reads and prints its tokens side by side, one of words
    # separated by blanks (docs/language.md, Vocabulary)
    names = set(json.loads(meta["vocab"]))
    chars = all(len(t.encode("utf-8")) == 1 for t in names)
    sep = "" if chars else " "
    n_cases, raises, worst = 0, 0, 0.0
    it = inputs(vocab, maxlen, n_random, random.Random(27), exhaustive)
    while True:
        # in chunks, so that a million inputs (case 51: 100 tokens, 3 positions) fit in memory
        cases, wants = [], []
        for c in itertools.islice(it, CHUNK):
            try:
                wants.append(rasp.evaluate(program, list(c)))
            except rasp.RaspError:
                raises += 1
                continue
            cases.append(c)
        if not cases:
            break
        prompts = "".join("^" + sep + sep.join(str(t) for t in c) + "\n" for c in cases)
        r = subprocess.run([tfrun, w, "--batch", "-"], input=prompts, capture_output=True, text=True,
                           encoding="utf-8")
        if r.returncode != 0:
            return "tfrun: " + (r.stderr.strip().splitlines() or ["?"])[0], 0, 0, 0, None
        lines = r.stdout.splitlines()
        if len(lines) != len(cases):
            return "tfrun printed %d lines for %d cases" % (len(lines), len(cases)), 0, 0, 0, None
        for case, want, line in zip(cases, wants, lines):
            got = line.split("\t")[1]
            got = got.split() if numeric else list(got) if chars else split_words(got, names)
            shown = "^" + sep + sep.join(str(t) for t in case)
            if len(got) != len(want):
                return "%s: %d outputs for %d tokens" % (shown, len(got), len(want)), 0, 0, 0, None
            for g, x in zip(got, want):
                ok, err = agrees(g, x, numeric, bound)
                worst = max(worst, err)
                if not ok:
                    return ("%s: printed %s, RASP %r (bound %g)" % (shown, " ".join(got), want, bound),
                            0, 0, 0, None)
        n_cases += len(cases)
    if not n_cases:
        return "no case to check", 0, 0, 0, None
    return "pass", n_cases, raises, worst, size(h)


def main():
    argv = sys.argv[1:]
    n_random, exhaustive = 5000, 3
    if "--random" in argv:
        i = argv.index("--random")
        n_random = int(argv[i + 1])
        del argv[i:i + 2]
    if "--exhaustive" in argv:
        i = argv.index("--exhaustive")
        exhaustive = int(argv[i + 1])
        del argv[i:i + 2]
    every = 1
    if "--every" in argv:
        i = argv.index("--every")
        every = int(argv[i + 1])
        del argv[i:i + 2]
    table = "--table" in argv
    args = [a for a in argv if not a.startswith("--")]
    if len(args) < 2:
        print(__doc__)
        return 2
    tfc, tfrun, only = args[0], args[1], args[2:]
    names = [n for n in CASES if os.path.exists(os.path.join(HERE, n + ".tfp"))]
    names.sort(key=lambda n: int(n.split("_")[1]))
    if only:
        names = [n for n in names if n in only]
    names = names[::every]
    failed, rows = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            status, n, raises, worst, sz = check(name, tfc, tfrun, n_random, exhaustive, tmp)
            failed += status != "pass"
            rows.append((name, status, n, raises, worst, sz))
            if status != "pass":
                print("FAIL: %s: %s" % (name, status))
    if table:
        print("| program | result | cases (raises) | worst relative error | tfc blocks / d_model / "
              "parameters | Tracr blocks / d_model |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        sizes = []
        for name, status, n, raises, worst, sz in rows:
            program, vocab = CASES[name]
            tb, td = rasp.tracr_size(program, vocab, MAXLEN.get(name, 10) - 1)
            print("| `%s.tfp` | %s | %s | %s | %s | %d / %d |" % (
                name, status,
                (format(n, ",") + (" (%s)" % format(raises, ",") if raises else "")) if n else "",
                "%.1e" % worst if n else "",
                "%d / %d / %s" % (sz[0], sz[1], format(sz[2], ",")) if sz else "", tb, td))
            if sz:
                sizes.append((sz[0], sz[1], tb, td))
        if sizes:
            over = sum(b > tb for b, _, tb, _ in sizes)
            ratio = math.exp(sum(math.log(d / td) for _, d, _, td in sizes) / len(sizes))
            print("\nblocks: tfc %d, Tracr %d over the %d programs (%d with more blocks than Tracr's); "
                  "d_model %.2fx Tracr's (geometric mean)" % (
                      sum(s[0] for s in sizes), sum(s[2] for s in sizes), len(sizes), over, ratio))
    print("%d of %d programs agree with RASP on every case, %d failed"
          % (len(rows) - failed, len(rows), failed))
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
