#!/usr/bin/env python3
"""bench/tracrbench/check.py TFC TFRUN [--random N] [--table]: TracrBench's programs
that need math in a Map, against Python.

Each program here is one of InterpBench's cases (circuits_benchmark/benchmark/cases/,
https://github.com/FlyingPumba/circuits-benchmark), translated into .tfp as written in
Python: the same function (math.cosh, x ** 0.5, int(...)), the same vocabulary (the numbers
as words, "10" and "-0.30000000000000004" included), max_seq_len 10 with the BOS. The
reference below is the case's own lambda, applied by RASP's semantics (a Map applies to
every token). Every input of 1 to 3 tokens and N random ones of 4 to 9 tokens (default
5,000; fixed seed) must give what Python gives: a categorical output exactly, a number
within the error bound the compiler proved (the weight file's output_error_bound) plus
float32's printing (1e-7 of the value). --table prints the Markdown table of README.md.
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

INTS = [str(i) for i in range(0, 11)]

# name -> (the case's function of one token value, the vocabulary as Python prints it,
#          the token -> value conversion)
CASES = {
    "case_50_cosh": (math.cosh, INTS, int),
    "case_52_sqrt": (lambda x: x ** 0.5, INTS, int),
    "case_54_tanh": (math.tanh, INTS, int),
    "case_55_sinh": (lambda x: math.sinh(x), INTS, int),
    "case_64_cube": (lambda x: x ** 3, INTS, int),
    "case_65_cube_root": (lambda x: x ** (1 / 3) if x >= 0 else -(-x) ** (1 / 3), INTS, int),
    "case_70_cos": (lambda x: math.cos(x), INTS, int),
    "case_73_sin": (lambda x: math.sin(x), INTS, int),
    "case_77_tan": (lambda x: math.tan(x), INTS, int),
    "case_84_atan": (lambda x: math.atan(x), INTS, int),
    "case_85_square": (lambda x: x ** 2, INTS, int),
    "case_101_is_square": (lambda x: 1 if x ** 0.5 == int(x ** 0.5) else 0,
                           [str(i) for i in range(0, 30)], int),
    "case_104_exp": (lambda x: math.exp(x), INTS, int),
    "case_114_log10": (lambda element: math.log(element, 10), [str(i) for i in range(1, 11)], int),
    "case_121_asin": (lambda x: math.asin(x), [str(-1 + x * 2 / 20) for x in range(20)], float),
    "case_123_acos": (lambda x: math.acos(x), [str(-1 + x * 2 / 20) for x in range(20)], float),
}
MAX_TOKENS = 9  # max_seq_len 10, the BOS included


def metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})


def inputs(vocab, n_random, rng):
    for n in range(1, 4):
        yield from itertools.product(vocab, repeat=n)
    for _ in range(n_random):
        yield tuple(rng.choice(vocab) for _ in range(rng.randint(4, MAX_TOKENS)))


def check(name, tfc, tfrun, n_random, tmp):
    """(status, cases, worst error): status 'pass', or why it failed."""
    fn, vocab, conv = CASES[name]
    here = os.path.dirname(os.path.abspath(__file__))
    w = os.path.join(tmp, name + ".tfw")
    r = subprocess.run([tfc, os.path.join(here, name + ".tfp"), "-o", w],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "tfc: " + r.stderr.strip().splitlines()[0], 0, 0
    meta = metadata(w)
    numeric = "output_error_bound" in meta
    bound = float(meta.get("output_error_bound", 0))
    cases = list(inputs(vocab, n_random, random.Random(27)))
    prompts = "\n".join("^ " + " ".join(c) for c in cases) + "\n"
    r = subprocess.run([tfrun, w, "--batch", "-"], input=prompts, capture_output=True, text=True)
    if r.returncode != 0:
        return "tfrun: " + (r.stderr.strip().splitlines() or ["?"])[0], 0, 0
    lines = r.stdout.splitlines()
    if len(lines) != len(cases):
        return "tfrun printed %d lines for %d cases" % (len(lines), len(cases)), 0, 0
    worst = 0.0
    for case, line in zip(cases, lines):
        got = line.split("\t")[1].split()
        want = [fn(conv(t)) for t in case]
        if len(got) != len(want):
            return "^ %s: %d outputs for %d tokens" % (" ".join(case), len(got), len(want)), 0, 0
        for g, x in zip(got, want):
            if not numeric:
                if g != str(x):
                    return "^ %s: printed %s, Python %s" % (" ".join(case), g, x), 0, 0
                continue
            err = abs(float(g) - x)
            worst = max(worst, err / max(1.0, abs(x)))
            if err > bound + 1e-7 * abs(x):
                return "^ %s: printed %s, Python %r (bound %g)" % (" ".join(case), g, x, bound), 0, 0
    return "pass", len(cases), worst


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) < 2:
        print(__doc__)
        return 2
    tfc, tfrun = args[0], args[1]
    n_random = 5000
    if "--random" in sys.argv:
        n_random = int(sys.argv[sys.argv.index("--random") + 1])
        args = [a for a in args if a != str(n_random)]
    failed = 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            status, n, worst = check(name, tfc, tfrun, n_random, tmp)
            failed += status != "pass"
            rows.append((name, status, n, worst))
            if status != "pass":
                print("FAIL: %s: %s" % (name, status))
    if "--table" in sys.argv:
        print("| program | result | cases | worst relative error |")
        print("| --- | --- | --- | --- |")
        for name, status, n, worst in rows:
            print("| `%s.tfp` | %s | %s | %s |" % (name, status, format(n, ",") if n else "",
                                                  "%.1e" % worst if n else ""))
    print("%d of %d programs agree with Python on every case, %d failed"
          % (len(rows) - failed, len(rows), failed))
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
