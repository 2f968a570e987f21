#!/usr/bin/env python3
"""tests/reach_check.py TFC TFRUN: value sets from the selection, on every input.

Each program below needs the compiler to derive a Count's or an Aggregate's
values from what its selection can pick (compiler/select.c, select_reach):
`Count(k.t > q.t)` never counts all 5 positions after the BOS, so its result
fits the vocabulary's digits 0..4 (and so for the other Counts); an Aggregate that copies tokens equal to a query
value 0 or 1 holds only 0 or 1, so a table with those two entries covers it.
Without that derivation each is refused. Python evaluates every program with
RASP's semantics on every input up to the program's maxlen, and tfrun --check
must agree on all of them (a value set that missed a reachable value would
print a wrong output). Item 3 of issue 27 rides along: a tie-break of
Tracr's kind, 1e-14 apart, whose labels must not collide.
"""
import itertools
import os
import subprocess
import sys
import tempfile

HEAD = 'vocab "^01234";\nbos \'^\';\nmaxlen 6;\ncat t;\nt: Map(int(tokens)) -> t;\n'


def count(pred, causal=False):
    """The counts at every position: pred(key, query) over (token, index)."""
    def f(ts):
        out = []
        for i in range(1, len(ts) + 1):
            last = i if causal else len(ts)
            out.append(sum(1 for j in range(1, last + 1)
                           if pred((ts[j - 1], j), (ts[i - 1], i))))
        return out
    return f


def copy_eq_small(ts):
    """Aggregate(k.t == q.y, t, default: 0), y = t < 2 ? 1 : 0; o = 3 - that."""
    out = []
    for i in range(1, len(ts) + 1):
        y = 1 if ts[i - 1] < 2 else 0
        picked = [ts[j - 1] for j in range(1, len(ts) + 1) if ts[j - 1] == y]
        out.append(3 - (picked[0] if picked else 0))
    return out


def tie_rank(ts):
    """The rank of t + i * 1e-14 among all positions' (a stable sort's place)."""
    u = [t + i * 1e-14 for i, t in enumerate(ts, 1)]
    return [sum(1 for x in u if x < y) for y in u]


PROGRAMS = [
    ("greater", "cat c;\nc: Count(k.t > q.t) -> c;\noutput c at every position;\n",
     count(lambda k, q: k[0] > q[0])),
    ("greater, causal", "cat c;\nc: Count(k.t > q.t, causal) -> c;\noutput c at every position;\n",
     count(lambda k, q: k[0] > q[0], True)),
    ("earlier or other", "cat c;\nc: Count(k.indices < q.indices or k.t != q.t) -> c;\n"
     "output c at every position;\n",
     count(lambda k, q: k[1] < q[1] or k[0] != q[0])),
    ("neighbours", "cat c;\nc: Count(k.indices == q.indices + 1 or k.indices == q.indices - 1) -> c;\n"
     "output c at every position;\n",
     count(lambda k, q: abs(k[1] - q[1]) == 1)),
    ("same value, not self", "cat c;\nc: Count(k.t == q.t and k.indices != q.indices) -> c;\n"
     "output c at every position;\n",
     count(lambda k, q: k[0] == q[0] and k[1] != q[1])),
    ("copy of 0 or 1", "cat s, c, o;\ny: Map(t < 2 ? 1 : 0) -> s;\n"
     "a: Aggregate(k.t == q.s, t, default: 0) -> c;\n"
     "o: Map([c: 0 => 3, 1 => 2]) -> o;\noutput o at every position;\n", copy_eq_small),
    ("tie-break 1e-14", "cat s, o;\nu: Map(t + indices * 0.00000000000001) -> s;\n"
     "cat c;\nc: Count(k.s < q.s) -> c;\no: Map(min(c, 4)) -> o;\n"
     "output o at every position;\n", tie_rank),
]


def main():
    tfc, tfrun = sys.argv[1], sys.argv[2]
    inputs = [s for n in range(1, 6) for s in itertools.product("01234", repeat=n)]
    failed = passed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, body, f in PROGRAMS:
            prog, w = os.path.join(tmp, "r.tfp"), os.path.join(tmp, "r.tfw")
            with open(prog, "w") as fh:
                fh.write(HEAD + body)
            r = subprocess.run([tfc, prog, "-o", w], capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print("FAIL: %s: tfc (exit %d): %s" % (name, r.returncode, r.stderr.strip()[:400]))
                continue
            cases = ["^%s\t%s" % ("".join(s), "".join(str(x) for x in f([int(c) for c in s])))
                     for s in inputs]
            r = subprocess.run([tfrun, w, "--check", "-"], input="\n".join(cases) + "\n",
                               capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print("FAIL: %s: %s" % (name, r.stdout.strip()[:500]))
            else:
                passed += 1
    print("%d programs agree with Python on all %d inputs, %d failed"
          % (passed, len(inputs), failed))
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
