#!/usr/bin/env python3
"""tests/expr_check.py TFC TFRUN [COUNT]: random Map expressions against Python.

Each round writes a program whose output at every position is
((EXPR) % 10 + 10) % 10 for a random expression EXPR over two categorical
registers: a, the digit at the position, and b, the digit before it (an
Aggregate with default 0). Python evaluates the same expression with the
language's rules (integer / and % floor, comparisons and `and`/`or`/`not`
give 0 or 1, `c ? x : y` tests c != 0); tfrun --check must agree on all 100
two-digit inputs. Math functions (sin ... sqrt, log with a base) appear as
int(F(x) * 10), Python's math in double, and `**` with exponents 0..3. An
expression that fails on some input (division by zero, log of 0, sqrt of a
negative, asin outside -1..1, exp beyond a double) must be refused by tfc
with a located error naming that kind of failure instead. Fixed seed: the
same rounds every run.
"""
import math
import os
import random
import subprocess
import sys
import tempfile

PROGRAM = """vocab "^0123456789";
bos '^';
maxlen 3;
cat a, b, out;
a:   Map(ord(tokens) - ord('0')) -> a;
b:   Aggregate(k.indices == q.indices - 1, a, default: 0) -> b;
out: Map(((%s) %% 10 + 10) %% 10) -> out;
output out at every position;
"""

MATH = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp", "log",
        "log2", "log10", "sqrt"]
# What tfc's message says for each exception Python raises.
REFUSAL = {ZeroDivisionError: ["by zero"], OverflowError: ["overflows"],
           ValueError: ["(not positive)", "(negative)", "(outside -1..1)"]}

BINARY = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or"]


def gen_math(rng, depth):
    """int(F(x) * 10) of a math function F of x (-10..9, or a quarter of
    that), or x ** k with k 0..3 (so that integers stay far below 2^53)."""
    s, f = gen(rng, depth - 1)
    s, f = "((%s) %% 20 - 10)" % s, lambda a, b, f=f: f(a, b) % 20 - 10
    if rng.random() < 0.25:
        k = rng.randint(0, 3)
        return "(%s ** %d)" % (s, k), lambda a, b: f(a, b) ** k
    if rng.random() < 0.5:
        s, f = "(%s / 4.0)" % s, lambda a, b, f=f: f(a, b) / 4.0
    fn = rng.choice(MATH)
    if fn == "log" and rng.random() < 0.5:
        return "int(log(%s, 10) * 10)" % s, lambda a, b: int(math.log(f(a, b), 10) * 10)
    py = getattr(math, fn)
    return "int(%s(%s) * 10)" % (fn, s), lambda a, b: int(py(f(a, b)) * 10)


def gen(rng, depth):
    """A random expression: (source text, Python function of a and b)."""
    r = rng.random()
    if depth == 0 or r < 0.25:
        choice = rng.random()
        if choice < 0.35:
            return "a", lambda a, b: a
        if choice < 0.7:
            return "b", lambda a, b: b
        n = rng.randint(0, 9)
        return str(n), lambda a, b, n=n: n
    if r < 0.35:
        s, f = gen(rng, depth - 1)
        if rng.random() < 0.5:
            return "(-%s)" % s, lambda a, b: -f(a, b)
        return "(not %s)" % s, lambda a, b: int(not f(a, b))
    if r < 0.45:
        (s1, f1), (s2, f2), (s3, f3) = gen(rng, depth - 1), gen(rng, depth - 1), gen(rng, depth - 1)
        return "(%s ? %s : %s)" % (s1, s2, s3), \
            lambda a, b: f2(a, b) if f1(a, b) != 0 else f3(a, b)
    if r < 0.55:
        return gen_math(rng, depth)
    if r < 0.62:
        fn = rng.choice(["min", "max", "abs"])
        if fn == "abs":
            s, f = gen(rng, depth - 1)
            return "abs(%s)" % s, lambda a, b: abs(f(a, b))
        (s1, f1), (s2, f2) = gen(rng, depth - 1), gen(rng, depth - 1)
        py = min if fn == "min" else max
        return "%s(%s, %s)" % (fn, s1, s2), lambda a, b: py(f1(a, b), f2(a, b))
    op = rng.choice(BINARY)
    (s1, f1), (s2, f2) = gen(rng, depth - 1), gen(rng, depth - 1)
    ops = {
        "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
        "/": lambda x, y: x // y, "%": lambda x, y: x % y,
        "==": lambda x, y: int(x == y), "!=": lambda x, y: int(x != y),
        "<": lambda x, y: int(x < y), "<=": lambda x, y: int(x <= y),
        ">": lambda x, y: int(x > y), ">=": lambda x, y: int(x >= y),
    }
    if op == "and":
        return "(%s and %s)" % (s1, s2), lambda a, b: int(f1(a, b) != 0 and f2(a, b) != 0)
    if op == "or":
        return "(%s or %s)" % (s1, s2), lambda a, b: int(f1(a, b) != 0 or f2(a, b) != 0)
    return "(%s %s %s)" % (s1, op, s2), lambda a, b, g=ops[op]: g(f1(a, b), f2(a, b))


def main():
    tfc, tfrun = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    rng = random.Random(2026)
    failed = passed = refused = math_checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            src, f = gen(rng, rng.randint(1, 4))
            cases, errors = [], set()
            for x in range(10):
                for y in range(10):
                    try:
                        first = f(x, 0) % 10
                        second = f(y, x) % 10
                    except (ZeroDivisionError, ValueError, OverflowError) as exc:
                        errors.update(REFUSAL[type(exc)])
                        continue
                    cases.append("^%d%d\t%d%d" % (x, y, first, second))
            prog = os.path.join(tmp, "e.tfp")
            with open(prog, "w") as fh:
                fh.write(PROGRAM % src)
            w = os.path.join(tmp, "e.tfw")
            r = subprocess.run([tfc, prog, "-o", w], capture_output=True, text=True)
            if errors:
                ok = r.returncode == 1 and "e.tfp:7:" in r.stderr and \
                    any(w in r.stderr for w in errors)
                refused += ok
                if not ok:
                    failed += 1
                    print("FAIL: %s: tfc should refuse (%s), got %d: %s"
                          % (src, " or ".join(sorted(errors)), r.returncode, r.stderr.strip()[:300]))
                continue
            if r.returncode != 0:
                failed += 1
                print("FAIL: %s: tfc: %s" % (src, r.stderr.strip()[:300]))
                continue
            r = subprocess.run([tfrun, w, "--check", "-"], input="\n".join(cases) + "\n",
                               capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print("FAIL: %s: %s" % (src, r.stdout.strip()[:500]))
            else:
                passed += 1
                math_checked += "**" in src or "int(" in src
    print("%d expressions agree with Python on all inputs (%d with math), %d refused, "
          "%d failed" % (passed, math_checked, refused, failed))
    if not math_checked:
        print("FAIL: no math function was checked")
    if passed == 0:
        print("FAIL: no expression was checked")
    return 1 if failed or passed == 0 or not math_checked else 0


if __name__ == "__main__":
    sys.exit(main())
