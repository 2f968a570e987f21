#!/usr/bin/env python3
"""tests/mix_check.py TFC TFRUN [COUNT]: random programs mixing seed ops and
general ops over the same registers, against a Python evaluation.

Each round writes a program over vocab "^ab0123456789" (inputs of a and b; bos '^', maxlen 5) whose ops
are drawn from Map (categorical tables, numeric tables, linear maps,
staircases), Count, a numeric Aggregate (a causal mean), and the seed ops
Clear, IsZero and CopyOnMatch, all over the same few registers, and whose
output at every position is a digit computed from one of them. Python
evaluates the program with the language's meaning of each op (Clear leaves
a categorical register holding no value and a number v as min(v, 0); IsZero
z is z + 0.1 GELU(10 - 100 z) - GELU(z + 10) + 10; CopyOnMatch copies the
token where its flag is 1 and leaves no value where it is 0). Where tfc
compiles a program, Python must find every value it reads defined, and
`tfrun --check` must agree on every input of up to 4 letters; where Python
finds an undefined read, tfc must refuse the program. The test fails when
it checks no program, or no program whose seed ops' results are read.
Fixed seed: the same rounds every run.
"""
import itertools
import math
import os
import random
import re
import subprocess
import sys
import tempfile

HEAD = """vocab "^ab0123456789";
bos '^';
maxlen 5;
"""
CATS = ["c0", "c1", "c2"]
NUMS = ["n0", "n1", "n2"]
INPUTS = ["".join(p) for n in range(1, 5) for p in itertools.product("ab", repeat=n)]


class Undefined(Exception):
    """A read of a register that holds no value (or no known one)."""


def gelu(x):
    return 0.5 * x * math.erfc(-x / math.sqrt(2.0))


def get(state, reg, i):
    v = state[reg][i] if reg in state else None
    if v is None:
        raise Undefined(reg)
    return v


def gen_op(rng, written, valid, ones):
    """One op: (source line, Python effect on (state, tokens)). written: the
    registers written so far; valid: those a general op can read (mostly
    read from; sometimes, to be refused, any written one); ones: numeric
    registers that are always 1 (CopyOnMatch's flag). All updated."""
    pool = valid if rng.random() < 0.9 else written
    wcats = [r for r in CATS if r in pool]
    wnums = [r for r in NUMS if r in pool]
    free_cats = [r for r in CATS if r not in written]
    free_nums = [r for r in NUMS if r not in written]
    r = rng.random()
    if r < 0.14 and free_cats:
        d = rng.choice(free_cats)
        a, b = rng.randint(0, 3), rng.randint(0, 3)
        written.add(d)
        valid.add(d)
        return "Map(tokens == 'a' ? %d : %d) -> %s;" % (a, b, d), \
            lambda st, tk: st.__setitem__(d, [a if c == "a" else b for c in tk])
    if r < 0.24 and free_cats and wcats:
        d, x, y = rng.choice(free_cats), rng.choice(wcats), rng.choice(wcats)
        written.add(d)
        valid.add(d)
        return "Map((%s + %s) %% 3) -> %s;" % (x, y, d), \
            lambda st, tk: st.__setitem__(d, [(get(st, x, i) + get(st, y, i)) % 3
                                              for i in range(len(tk))])
    if r < 0.34 and free_nums and wcats:
        d, x = rng.choice(free_nums), rng.choice(wcats)
        v = rng.randint(-1, 2)  # c >= -1 is always true: a flag that is always 1
        written.add(d)
        valid.add(d)
        if v < 0:
            ones.add(d)
            return "Map(%s >= -1 ? 1 : 0) -> %s;" % (x, d), \
                lambda st, tk: st.__setitem__(d, [1.0 if get(st, x, i) >= -1 else 0.0
                                                  for i in range(len(tk))])
        return "Map(%s == %d ? 1 : 0) -> %s;" % (x, v, d), \
            lambda st, tk: st.__setitem__(d, [1.0 if get(st, x, i) == v else 0.0
                                              for i in range(len(tk))])
    if r < 0.42 and free_nums and wnums:
        d, x = rng.choice(free_nums), rng.choice(wnums)
        a, b = rng.randint(-2, 2), rng.randint(-2, 2)
        written.add(d)
        valid.add(d)
        return "Map(%d * %s + %d) -> %s;" % (a, x, b, d), \
            lambda st, tk: st.__setitem__(d, [a * get(st, x, i) + b for i in range(len(tk))])
    if r < 0.52 and free_cats and wnums:
        d, x = rng.choice(free_cats), rng.choice(wnums)
        written.add(d)
        valid.add(d)
        return "Map(%s > 0.5 ? 1 : 0) -> %s;" % (x, d), \
            lambda st, tk: st.__setitem__(d, [1 if get(st, x, i) > 0.5 else 0
                                              for i in range(len(tk))])
    if r < 0.58 and free_cats:
        d = rng.choice(free_cats)
        src = rng.choice(wcats + ["tokens"])
        written.add(d)
        valid.add(d)
        if src == "tokens":
            return "Count(k.tokens == 'a', causal) -> %s;" % d, \
                lambda st, tk: st.__setitem__(d, [tk[:i + 1].count("a") for i in range(len(tk))])
        return "Count(k.%s == 1, causal) -> %s;" % (src, d), \
            lambda st, tk: st.__setitem__(d, [sum(1 for j in range(i + 1) if get(st, src, j) == 1)
                                              for i in range(len(tk))])
    if r < 0.64 and free_nums and wnums:
        d, x = rng.choice(free_nums), rng.choice(wnums)
        written.add(d)
        valid.add(d)
        return "Aggregate(k.indices <= q.indices, %s, causal) -> %s;" % (x, d), \
            lambda st, tk: st.__setitem__(d, [sum(get(st, x, j) for j in range(i + 1)) / (i + 1)
                                              for i in range(len(tk))])
    if r < 0.76 and (wcats or wnums):
        x = rng.choice(wcats + wnums)
        if x in CATS:
            valid.discard(x)
        ones.discard(x)

        def clear(st, tk, x=x):
            if x in CATS:
                st[x] = [None] * len(tk)
            elif x in st:
                st[x] = [None if v is None else min(v, 0.0) for v in st[x]]
        return "Clear(%s);" % x, clear
    if r < 0.86 and wnums:
        x = rng.choice(wnums)
        valid.discard(x)  # 1 at the BOS: no general op may read it
        ones.discard(x)

        def is_zero(st, tk, x=x):
            st[x] = [None if v is None else v + 0.1 * gelu(10 - 100 * v) - gelu(v + 10) + 10
                     for v in st[x]]
        return "IsZero(%s);" % x, is_zero
    if r < 0.93 and wnums:
        x = rng.choice(sorted(ones) if ones and rng.random() < 0.8 else wnums)
        fresh = "t" not in written
        written.add("t")
        if fresh and x in ones and x in valid:
            valid.add("t")
        else:
            valid.discard("t")

        def copy(st, tk, x=x, fresh=fresh):
            out = []
            for i, c in enumerate(tk):
                m = st[x][i] if x in st else None
                out.append(c if fresh and m is not None and abs(m - 1) < 1e-3 else None)
            st["t"] = out
        return "CopyOnMatch(%s, tokens) -> t;" % x, copy
    if free_cats and "t" in pool:
        d = rng.choice(free_cats)
        written.add(d)
        valid.add(d)
        return "Map(t == 'a' ? 1 : 2) -> %s;" % d, \
            lambda st, tk: st.__setitem__(d, [1 if get(st, "t", i) == "a" else 2
                                              for i in range(len(tk))])
    return None


def gen_program(rng):
    written, valid, ones, lines, effects = set(), set(), set(), [], []
    while len(lines) < rng.randint(3, 8):
        op = gen_op(rng, written, valid, ones)
        if op:
            lines.append(op[0])
            effects.append(op[1])
    x = rng.choice(sorted(valid if valid and rng.random() < 0.9 else written))
    if x in CATS:
        lines.append("out: Map((%s %% 10 + 10) %% 10) -> out;" % x)
        final = lambda st, i: (get(st, x, i) % 10 + 10) % 10
    elif x in NUMS:
        lines.append("out: Map(%s > 0.5 ? 1 : 0) -> out;" % x)
        final = lambda st, i: 1 if get(st, x, i) > 0.5 else 0
    else:
        lines.append("out: Map(t == 'a' ? 1 : 0) -> out;")
        final = lambda st, i: 1 if get(st, "t", i) == "a" else 0
    lines.append("output out at every position;")
    # Does a general op (or the output) read what a seed op wrote?
    mixes = False
    for k, line in enumerate(lines):
        m = re.match(r"(Clear|IsZero)\((\w+)\)|CopyOnMatch\(\w+, tokens\) -> (t);", line)
        if m:
            reg = m.group(2) or m.group(3)
            mixes = mixes or any(re.search(r"\b%s\b" % reg, l.split("->")[0])
                                 for l in lines[k + 1:] if not l.startswith(("Clear", "IsZero")))

    body = "\n".join(lines) + "\n"
    decl = ""
    for kind, regs in (("cat", CATS + ["out"]), ("num", NUMS), ("token", ["t"])):
        used = [r for r in regs if re.search(r"\b%s\b" % r, body)]
        if used:
            decl += "%s %s;\n" % (kind, ", ".join(used))
    return HEAD + decl + body, effects, final, mixes


def evaluate(effects, final, tk):
    st = {}
    for eff in effects:
        eff(st, tk)
    return "".join(str(final(st, i)) for i in range(len(tk)))


def main():
    tfc, tfrun = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    rng = random.Random(11)
    passed = refused = failed = mixed = 0
    with tempfile.TemporaryDirectory() as tmp:
        prog, w = os.path.join(tmp, "m.tfp"), os.path.join(tmp, "m.tfw")
        for _ in range(count):
            src, effects, final, mixes = gen_program(rng)
            cases, undefined = [], None
            for tk in INPUTS:
                try:
                    cases.append("^%s\t%s" % (tk, evaluate(effects, final, tk)))
                except Undefined as e:
                    undefined = "reads %s where it holds no value (input %s)" % (e, tk)
                    break
            with open(prog, "w") as fh:
                fh.write(src)
            r = subprocess.run([tfc, prog, "-o", w], capture_output=True, text=True)
            if r.returncode == 1:
                refused += 1
                continue
            if r.returncode != 0:
                failed += 1
                print("FAIL: tfc exit %d: %s\n%s" % (r.returncode, r.stderr.strip()[:300], src))
                continue
            if undefined:
                failed += 1
                print("FAIL: tfc compiled a program that %s:\n%s" % (undefined, src))
                continue
            r = subprocess.run([tfrun, w, "--check", "-"], input="\n".join(cases) + "\n",
                               capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print("FAIL: tfrun disagrees with Python:\n%s%s" % (src, r.stdout[:600]))
                continue
            passed += 1
            mixed += mixes
    print("%d programs agree with Python on all %d inputs (%d of them read what a seed op "
          "wrote), %d refused, %d failed" % (passed, len(INPUTS), mixed, refused, failed))
    if passed == 0 or mixed == 0:
        print("FAIL: no program (or no program mixing seed and general ops) was checked")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
