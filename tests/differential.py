#!/usr/bin/env python3
"""tests/differential.py: random programs of the language, compiled by tfc at
-O, -O0 and --no-schedule, run by tfrun --batch on every input up to a small
length, and compared with an independent Python evaluation of
docs/language.md (issue 22).

    differential.py [--tfc B/tfc] [--tfrun B/tfrun] [--seed S] [--programs N]
                    [--time-budget SECONDS] [--jobs N] [--keep DIR]
                    [--cases FILE_OR_DIR ...] [--shape-check] [--minimize]

The evaluator below is written from docs/language.md only: it parses the
program text that tfc compiles (the subset the generator writes: vocabularies
of characters or words, bos, maxlen, cat/num/token/position registers, Map,
Count, Aggregate, the seed ops Clear, CopyOnMatch, IsZero, FindAndStore,
StepPosition, GetRelativeToken and Multiply (where docs/language.md's "Ops"
says what they compute for every construction: seed_op below), `output R at
every position` and
`output R; generate N;`, whose attention is causal and whose next token is
the output at the last position) and computes each position's value with exact rationals (fractions.Fraction), so a
program's expected output is exact; tfrun's numbers are compared within the
weight file's `output_error_bound` (+ 1e-6 relative, as `tfrun --check`).

For each program and level:
  - tfc exit 1 is a refusal: fine, if its first error is `file:line:col: error:`;
    exit 0 on a program the language says must be refused (an expression
    failing on a reachable value, a read of a cleared categorical register,
    an output value that is no token) is a failure; any other exit status,
    a signal, a time-out or an unlocated error is a LOUD failure;
  - every input is run through one `tfrun --batch` process per model. An
    input whose evaluation picks different values in a categorical
    Aggregate must fail tfrun's run-time check (an error naming its line);
    one that reads no value (a copy that selects nothing, without default:
    no value, or a failed check where the copy is checked) or rounds an exact half (`round`'s rule on halves is not in the
    language's definition) is not compared. A wrong answer that tfrun prints
    for an input (its line is no error: that prompt alone exits 0) is a
    SILENT disagreement (issue 22's count); an error on an input that must
    print is a loud failure;
  - the levels that compile are compared with each other (tokens exactly,
    numbers within the sum of their bounds).

--jobs N checks N programs at a time (the same programs, in the same order,
and the same counts as one job). Counts are printed at the end; each failing program is written with a failing
input to --keep DIR (default: none) and listed. The exit status is 1 when any
program fails (silent or loud), 0 otherwise. --cases runs .tfp files (e.g.
tests/data/differential/) and the two programs of issue 22 (always run first)
as fixed cases; --shape-check shows that the generator's space holds the
issue's two programs (each op of each is one the generator writes, given the
registers before it); --minimize shrinks each silent disagreement (drops
ops, lowers maxlen) and prints the smallest program that still shows it.
"""
import argparse
import copy
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

LEVELS = [("-O", ["-O"]), ("-O0", ["-O0"]), ("--no-schedule", ["--no-schedule"])]

ISSUE_PROGRAMS = [
    ("issue22_fusion_bound.tfp", """vocab "^ab0123"; bos '^'; maxlen 80;
cat c, out; num d;
c:   Count(k.tokens == 'a') -> c;
d:   Map(c * c) -> d;
out: Map(round(d * 2) % 4) -> out;
output out at every position;
"""),
    ("issue22_mixture_check.tfp", """vocab "^abcd"; bos '^'; maxlen 17;
cat b;
b: Aggregate(k.indices <= q.indices, tokens) -> b;
output b at every position;
"""),
]


# ---------------------------------------------------------------- the language
class SyntaxErr(Exception):
    """Text outside the subset this evaluator reads."""


class ExprError(Exception):
    """The language makes this an error on a reachable value: tfc must refuse."""


class Unspecified(Exception):
    """The language does not say what this input prints (no value, a half rounded)."""


class CheckFails(Exception):
    """A categorical Aggregate picks different values: tfrun's check must fail."""


TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\n]+|\#[^\n]*)
  | (?P<num>\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)
  | (?P<int>\d+)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<chr>'(?:[^'\\\n]|\\.)')
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>->|=>|==|!=|<=|>=|[-+*/%<>()\[\],;:?.{}])
""", re.X)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "0": "\0", "\\": "\\", "'": "'", '"': '"'}


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            out.append(ESCAPES[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def lex(text):
    toks, pos = [], 0
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if not m:
            raise SyntaxErr("stray %r" % text[pos])
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        v = m.group()
        if kind in ("str", "chr"):
            toks.append(("str" if kind == "str" else "tok", unescape(v[1:-1])))
        elif kind == "int":
            toks.append(("num", int(v)))
        elif kind == "num":
            toks.append(("num", Fraction(v)))
        else:
            toks.append((kind, v))
    toks.append(("eof", None))
    return toks


class Parser:
    def __init__(self, text):
        self.t, self.i = lex(text), 0

    def peek(self, k=0):
        return self.t[self.i + k]

    def next(self):
        tok = self.t[self.i]
        self.i += 1
        return tok

    def accept(self, v):
        if self.peek()[1] == v and self.peek()[0] in ("op", "id"):
            self.i += 1
            return True
        return False

    def expect(self, v):
        if not self.accept(v):
            raise SyntaxErr("expected %r, found %r" % (v, self.peek()[1]))

    def ident(self):
        k, v = self.next()
        if k != "id":
            raise SyntaxErr("expected an identifier, found %r" % (v,))
        return v

    # expr = or ["?" expr ":" expr]
    def expr(self):
        c = self.or_()
        if self.accept("?"):
            a = self.expr()
            self.expect(":")
            return ("cond", c, a, self.expr())
        return c

    def or_(self):
        e = self.and_()
        while self.accept("or"):
            e = ("bin", "or", e, self.and_())
        return e

    def and_(self):
        e = self.not_()
        while self.accept("and"):
            e = ("bin", "and", e, self.not_())
        return e

    def not_(self):
        if self.accept("not"):
            return ("not", self.not_())
        return self.cmp()

    def cmp(self):
        e = self.add()
        k, v = self.peek()
        if k == "op" and v in ("==", "!=", "<", "<=", ">", ">="):
            self.next()
            return ("bin", v, e, self.add())
        return e

    def add(self):
        e = self.mul()
        while self.peek() in (("op", "+"), ("op", "-")):
            e = ("bin", self.next()[1], e, self.mul())
        return e

    def mul(self):
        e = self.unary()
        while self.peek() in (("op", "*"), ("op", "/"), ("op", "%")):
            e = ("bin", self.next()[1], e, self.unary())
        return e

    def unary(self):
        if self.accept("-"):
            e = self.unary()
            return ("num", -e[1]) if e[0] == "num" else ("neg", e)
        if self.accept("+"):
            return self.unary()
        return self.atom()

    def key(self):
        neg = self.accept("-")
        k, v = self.next()
        if k == "num":
            return ("num", -v if neg else v)
        if k in ("tok", "str") and not neg:
            return ("tok", v)
        raise SyntaxErr("bad table key %r" % (v,))

    def atom(self):
        k, v = self.next()
        if k == "num":
            return ("num", v)
        if k in ("tok", "str"):
            return ("tok", v)
        if k == "op" and v == "(":
            e = self.expr()
            self.expect(")")
            return e
        if k == "op" and v == "[":
            regs = [self.ident()]
            while self.accept(","):
                regs.append(self.ident())
            self.expect(":")
            entries, default = [], None
            while True:
                if self.peek() == ("id", "_"):
                    self.next()
                    self.expect("=>")
                    default = self.expr()
                else:
                    if self.accept("("):
                        keys = [self.key()]
                        while self.accept(","):
                            keys.append(self.key())
                        self.expect(")")
                    else:
                        keys = [self.key()]
                    self.expect("=>")
                    entries.append((tuple(keys), self.expr()))
                if not self.accept(","):
                    break
            self.expect("]")
            return ("table", tuple(regs), tuple(entries), default)
        if k == "id":
            if v == "true":
                return ("true",)
            if v in ("q", "k") and self.peek() == ("op", "."):
                self.next()
                return ("qk", v, self.ident())
            if self.accept("("):
                args = [self.expr()]
                while self.accept(","):
                    args.append(self.expr())
                self.expect(")")
                return ("call", v, tuple(args))
            return ("reg", v)
        raise SyntaxErr("unexpected %r" % (v,))


class Program:
    """A parsed program: header, registers, ops (dicts) and the output."""

    def __init__(self, text):
        self.text = text
        self.vocab, self.words, self.bos, self.maxlen = None, False, None, None
        self.listed = False  # vocab [...]
        self.kinds = {"tokens": "cat", "indices": "cat", "pos": "position"}
        self.ops, self.output, self.generate = [], None, None
        self.cache = {}  # run_program's: (id of an expression, values read) -> result
        p = Parser(text)
        while p.peek()[0] != "eof":
            k, v = p.peek()
            if k == "id" and v == "vocab":
                p.next()
                if p.accept("["):
                    self.vocab = [p.next()[1]]
                    while p.accept(","):
                        self.vocab.append(p.next()[1])
                    p.expect("]")
                    self.words = any(len(w) != 1 for w in self.vocab)
                    self.listed = True
                else:
                    self.vocab = list(p.next()[1])
                p.expect(";")
            elif k == "id" and v == "bos":
                p.next()
                self.bos = p.next()[1]
                p.expect(";")
            elif k == "id" and v in ("maxlen", "period"):
                p.next()
                n = p.next()[1]
                if v == "maxlen":
                    self.maxlen = n
                p.expect(";")
            elif k == "id" and v in ("cat", "num", "scalar", "token", "position") and \
                    p.peek(1)[0] == "id":
                p.next()
                kind = {"scalar": "num"}.get(v, v)
                self.kinds[p.ident()] = kind
                while p.accept(","):
                    self.kinds[p.ident()] = kind
                p.expect(";")
            elif k == "id" and v == "output":
                p.next()
                self.output = p.ident()
                self.every = p.accept("at")
                if self.every and not (p.accept("every") and p.accept("position")):
                    raise SyntaxErr("expected `at every position`")
                p.expect(";")
            elif k == "id" and v == "generate":
                p.next()
                self.generate = p.next()[1]
                if not isinstance(self.generate, int):
                    raise SyntaxErr("only `generate N;`")
                p.expect(";")
            else:
                self.ops.append(self.parse_op(p))
        if not self.vocab or self.bos is None or self.maxlen is None or not self.output:
            raise SyntaxErr("needs vocab, bos, maxlen and output")
        if not self.every and self.generate is None:
            self.generate = 1

    @staticmethod
    def parse_op(p):
        if p.peek()[0] == "id" and p.peek(1) == ("op", ":"):
            p.next()
            p.next()
        name = p.ident()
        p.expect("(")
        args, named, flags = [], {}, set()
        if not p.accept(")"):
            while True:
                if p.peek()[0] == "id" and p.peek(1) == ("op", ":"):
                    key = p.ident()
                    p.next()
                    named[key] = p.expr()
                elif p.peek()[0] == "id" and p.peek()[1] in ("causal", "bidirectional", "sum") \
                        and p.peek(1)[1] in (",", ")"):
                    flags.add(p.next()[1])
                else:
                    args.append(p.expr())
                if not p.accept(","):
                    break
            p.expect(")")
        dest = p.ident() if p.accept("->") else None
        p.expect(";")
        if name not in ("Map", "Count", "Aggregate") + SEED_OPS:
            raise SyntaxErr("op %s is outside the evaluator's subset" % name)
        return {"op": name, "args": args, "named": named, "flags": flags, "dest": dest}


SEED_OPS = ("Clear", "CopyOnMatch", "IsZero", "FindAndStore", "StepPosition",
            "GetRelativeToken", "Multiply")


# ---------------------------------------------------------------- evaluation
def is_num(v):
    return isinstance(v, (int, Fraction)) and not isinstance(v, bool)


def norm(v):
    if isinstance(v, Fraction) and v.denominator == 1:
        return int(v)
    return v


def need_num(v, what):
    if not is_num(v):
        raise ExprError("%s of %r" % (what, v))
    return v


def need_bool(v, what):
    if not isinstance(v, bool):
        raise ExprError("%s of %r" % (what, v))
    return v


def same_value(a, b):
    if is_num(a) and is_num(b):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False


def evaluate(e, env, true_div):
    """The value of expression e; env(name) or env((side, name)) reads a register."""
    t = e[0]
    if t == "num":
        return norm(e[1])
    if t == "tok":
        return e[1]
    if t == "true":
        return True
    if t == "reg":
        return env(e[1])
    if t == "qk":
        return env((e[1], e[2]))
    if t == "neg":
        return norm(-need_num(evaluate(e[1], env, true_div), "minus"))
    if t == "not":
        return not need_bool(evaluate(e[1], env, true_div), "not")
    if t == "cond":
        c = need_bool(evaluate(e[1], env, true_div), "?:")
        return evaluate(e[2] if c else e[3], env, true_div)
    if t == "bin":
        op = e[1]
        a = evaluate(e[2], env, true_div)
        b = evaluate(e[3], env, true_div)  # both sides: a read of no value is one
        if op in ("and", "or"):
            need_bool(a, op)
            need_bool(b, op)
            return (a and b) if op == "and" else (a or b)
        if op in ("==", "!="):
            r = same_value(a, b)
            return r if op == "==" else not r
        if op in ("<", "<=", ">", ">="):
            if isinstance(a, str) and isinstance(b, str) and len(a) == 1 and len(b) == 1:
                a, b = ord(a), ord(b)
            need_num(a, op)
            need_num(b, op)
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        need_num(a, op)
        need_num(b, op)
        if op == "+":
            return norm(Fraction(a) + b)
        if op == "-":
            return norm(Fraction(a) - b)
        if op == "*":
            return norm(Fraction(a) * b)
        if b == 0:
            raise ExprError("%s by zero" % op)
        if op == "/":
            q = Fraction(a) / b
            integer = isinstance(a, int) and isinstance(b, int)
            return norm(q) if true_div or not integer else norm(q.__floor__())
        if op == "%":
            return norm(Fraction(a) - b * (Fraction(a) / b).__floor__())
        raise SyntaxErr(op)
    if t == "call":
        f, args = e[1], [evaluate(x, env, true_div) for x in e[2]]
        if f in ("min", "max"):
            for a in args:
                need_num(a, f)
            return (min if f == "min" else max)(args)
        if len(args) != 1:
            raise ExprError("%s takes one argument" % f)
        a = args[0]
        if f == "abs":
            return abs(need_num(a, f))
        if f == "floor":
            return norm(Fraction(need_num(a, f)).__floor__())
        if f == "round":
            x = Fraction(need_num(a, f))
            if x.denominator == 2:
                raise Unspecified("round of the half %s" % x)
            return norm((x + Fraction(1, 2)).__floor__())
        if f == "ord":
            if not isinstance(a, str) or len(a) != 1:
                raise ExprError("ord of %r" % (a,))
            return ord(a)
        if f == "chr":
            if not isinstance(a, int) or not 0 < a < 128:
                raise ExprError("chr of %r" % (a,))
            return chr(a)
        raise SyntaxErr("function %s" % f)
    if t == "table":
        vals = [env(r) for r in e[1]]
        for keys, res in e[2]:
            if len(keys) != len(vals):
                raise ExprError("table key of the wrong width")
            if all(same_value(norm(k[1]), v) for k, v in zip(keys, vals)):
                return evaluate(res, env, true_div)
        if e[3] is None:
            raise ExprError("table without the entry %r" % (vals,))
        return evaluate(e[3], env, true_div)
    raise SyntaxErr(t)


def regs_read(e, out):
    """The registers expression e reads (q./k. ones under their own name)."""
    if e[0] == "reg":
        out.add(e[1])
    elif e[0] == "qk":
        out.add(e[2])
    elif e[0] == "table":
        out.update(e[1])
    for x in e[1:]:
        if isinstance(x, tuple) and x and isinstance(x[0], str) and x[0] in EXPR_TAGS:
            regs_read(x, out)
        elif isinstance(x, tuple):
            for y in x:
                if isinstance(y, tuple) and y and y[0] in EXPR_TAGS:
                    regs_read(y, out)
                elif isinstance(y, tuple):  # table entries (keys, expr)
                    for z in y:
                        if isinstance(z, tuple) and z and z[0] in EXPR_TAGS:
                            regs_read(z, out)
    return out


EXPR_TAGS = {"num", "tok", "true", "reg", "qk", "neg", "not", "cond", "bin", "call", "table"}


def op_reads(op):
    out = set()
    for a in op["args"]:
        regs_read(a, out)
    for a in op["named"].values():
        regs_read(a, out)
    return out


def static_refusal(prog):
    """Reasons the language refuses the program whatever the input, per level:
    {level: reason}. A general op reading a categorical register after Clear is
    refused at every level; a number after Clear at -O0 (its values unknown)."""
    cleared, why = {}, {}
    for op in prog.ops:
        if op["op"] == "Clear":
            for a in op["args"]:
                if a[0] == "reg":
                    cleared[a[1]] = prog.kinds.get(a[1])
            continue
        if op["op"] in SEED_OPS:
            continue
        for r in op_reads(op) & set(cleared):
            if cleared[r] in ("cat", "token"):
                for lv, _ in LEVELS:
                    why.setdefault(lv, "reads %s after Clear" % r)
            else:
                why.setdefault("-O0", "reads the number %s after Clear (unknown at -O0)" % r)
    return why


def sides_read(sel, memo):
    """(q. registers, k. registers, registers read without a side) of a selection;
    memo: the program's cache (which keeps sel, so its id is not reused)."""
    key = ("sides", id(sel))
    if key not in memo:
        q, k, plain = set(), set(), set()

        def walk(e):
            if e[0] == "qk":
                (q if e[1] == "q" else k).add(e[2])
            elif e[0] == "reg":
                plain.add(e[1])
            elif e[0] == "table":
                plain.update(e[1])
                for keys, res in e[2]:
                    walk(res)
                if e[3]:
                    walk(e[3])
            else:
                for x in e[1:]:
                    if isinstance(x, tuple) and x and x[0] in EXPR_TAGS:
                        walk(x)
                    elif isinstance(x, tuple):
                        for y in x:
                            if isinstance(y, tuple) and y and y[0] in EXPR_TAGS:
                                walk(y)
        walk(sel)
        memo[key] = (sel, sorted(q), sorted(k), sorted(plain))
    return memo[key][1:]


def run_program(prog, toks):
    """The output at positions 1..n of the input toks (bos first): a list of values.
    Raises CheckFails, Unspecified or ExprError."""
    n = len(toks) - 1
    st = {"tokens": list(toks), "indices": list(range(n + 1)), "pos": list(range(n + 1))}
    written = set()

    def at(reg, i):
        if reg not in st:
            raise Unspecified("%s holds no value" % reg)
        v = st[reg][i]
        if v is None:
            raise Unspecified("%s holds no value at %d" % (reg, i))
        return v

    def keys(i, flags):
        # attention is causal in generating programs, bidirectional in the others
        causal = "causal" in flags or (not prog.every and "bidirectional" not in flags)
        return range(1, (i if causal else n) + 1)

    def cached(key, fn):
        # an expression's value depends only on the values it reads: one
        # evaluation per combination, for all inputs of the program
        r = prog.cache.get(key)
        if r is None:
            try:
                r = (True, fn())
            except (ExprError, Unspecified) as e:
                r = (False, e)
            prog.cache[key] = r
        if r[0]:
            return r[1]
        raise r[1]

    def selector(sel):
        """sel(i, j) for one op: each position's side values read once, each
        pair of side values evaluated once for the whole program."""
        qr, kr, plain = sides_read(sel, prog.cache)
        if plain:
            raise ExprError("a selection reads %s without q. or k." % plain[0])
        qs, ks, memo = {}, {}, prog.cache.setdefault(("sel", id(sel)), {})

        def side(cache, regs, i):
            v = cache.get(i)
            if v is None:
                v = cache[i] = tuple(at(r, i) for r in regs)
            return v

        def test(i, j):
            qv, kv = side(qs, qr, i), side(ks, kr, j)
            r = memo.get((qv, kv))
            if r is None:
                def env(x):
                    return dict(zip(qr, qv))[x[1]] if x[0] == "q" else dict(zip(kr, kv))[x[1]]
                try:
                    r = (True, need_bool(evaluate(sel, env, False), "selection"))
                except (ExprError, Unspecified) as e:
                    r = (False, e)
                memo[(qv, kv)] = r
            if r[0]:
                return r[1]
            raise r[1]
        return test

    def map_value(e, i, true_div):
        rk = ("reads", id(e))
        reads = prog.cache.get(rk)
        if reads is None:
            reads = prog.cache[rk] = (sorted(regs_read(e, set())), e)
        reads = reads[0]
        vals = tuple(at(r, i) for r in reads)
        env = dict(zip(reads, vals))
        return cached((id(e), vals), lambda: evaluate(e, env.__getitem__, true_div))

    for op in prog.ops:
        name, args, dest = op["op"], op["args"], op["dest"]
        kind = prog.kinds.get(dest)
        out = [None] * (n + 1)
        if name == "Map":
            for i in range(1, n + 1):
                v = map_value(args[0], i, kind == "num")
                if isinstance(v, bool):
                    raise Unspecified("a Map whose result is a truth value")
                if kind == "num" and not is_num(v):
                    raise ExprError("a number register given %r" % (v,))
                out[i] = v
        elif name == "Count":
            test = selector(args[0])
            for i in range(1, n + 1):
                out[i] = sum(1 for j in keys(i, op["flags"]) if test(i, j))
        elif name == "Aggregate":
            sel, val = args[0], args[1]
            dflt = op["named"].get("default")
            test = selector(sel)
            for i in range(1, n + 1):
                picked = [j for j in keys(i, op["flags"]) if test(i, j)]
                vals = [map_value(val, j, False) for j in picked]
                if kind == "num":
                    for v in vals:
                        need_num(v, "Aggregate")
                    if not vals:
                        out[i] = evaluate(dflt, None, True) if dflt else 0
                    elif "sum" in op["flags"]:
                        out[i] = norm(sum(Fraction(v) for v in vals))
                    else:
                        out[i] = norm(sum(Fraction(v) for v in vals) / len(vals))
                else:
                    if "sum" in op["flags"]:
                        raise ExprError("sum of a categorical value")
                    distinct = []
                    for v in vals:
                        if not any(same_value(v, d) for d in distinct):
                            distinct.append(v)
                    if len(distinct) > 1:
                        raise CheckFails("%s at position %d picks %r" % (dest, i, distinct))
                    if not distinct and not dflt:
                        # no value, or (a checked copy) a failed check: either is right
                        raise Unspecified("%s selects nothing at position %d" % (dest, i))
                    out[i] = distinct[0] if distinct else evaluate(dflt, None, False)
        elif name == "Clear":
            for a in args:
                r = a[1]
                if prog.kinds.get(r) == "num" and r in st:
                    st[r] = [None if v is None else min(v, 0) for v in st[r]]
                else:
                    st[r] = [None] * (n + 1)
            continue
        elif name in SEED_OPS[2:]:
            seed_op(prog, op, st, toks, n, written)
            continue
        elif name == "CopyOnMatch":
            flag, src = args[0][1], args[1][1]
            for i in range(1, n + 1):
                m = st.get(flag, [None] * (n + 1))[i]
                if dest not in written and m == 1:
                    out[i] = at(src, i)
        if dest in written:
            raise ExprError("%s is written twice" % dest)
        written.add(dest)
        st[dest] = out
    if not prog.every:
        return [at(prog.output, n)]
    return [at(prog.output, i) for i in range(1, n + 1)]


def gelu(x):
    return 0.5 * x * math.erfc(-x / math.sqrt(2.0))


def seed_op(prog, op, st, toks, n, written):
    """The seed ops of docs/language.md ("Ops") on the state st, where they are
    defined for every construction: a position register holds an integer p (its
    sin, cos of 2 pi p / period); FindAndStore(c) the position of the one c at
    or before each position (no value with none or several: the constructions
    differ there); GetRelativeToken(p + k) the token at p + k when it is at or
    before the position (no value otherwise); StepPosition moves by its steps;
    IsZero(z) is z + 0.1 GELU(10 - 100 z) - GELU(z + 10) + 10 (in place);
    Multiply(a, b, carry) -> out: the digit of a + b + carry modulo 10, and
    carry becomes 1 when that sum is 10 or more (a, b digit tokens, carry 0 or 1;
    no value otherwise)."""
    name, args, dest = op["op"], op["args"], op["dest"]
    col = lambda r: st.get(r, [None] * (n + 1))
    if name == "IsZero":
        r = args[0][1]
        st[r] = [None if v is None else
                 Fraction(float(v) + 0.1 * gelu(10 - 100 * float(v)) - gelu(float(v) + 10) + 10)
                 for v in col(r)]
        return
    if name == "StepPosition":
        for r, e in op["named"].items():
            k = evaluate(e, None, False)
            st[r] = [None if v is None else v + k for v in col(r)]
        return
    if dest in written:
        raise ExprError("%s is written twice" % dest)
    written.add(dest)
    out = [None] * (n + 1)
    if name == "FindAndStore":
        c = args[0][1]
        for i in range(1, n + 1):
            at = [j for j in range(i + 1) if toks[j] == c]
            out[i] = at[0] if len(at) == 1 else None
    elif name == "GetRelativeToken":
        e = args[0]
        reg, k = (e[2][1], evaluate(e[3], None, False) * (1 if e[1] == "+" else -1)) \
            if e[0] == "bin" else (e[1], 0)
        p = col(reg)
        for i in range(1, n + 1):
            t = None if p[i] is None else p[i] + k
            out[i] = toks[t] if t is not None and 0 <= t <= i else None
    elif name == "Multiply":
        a, b = col(args[0][1]), col(args[1][1])
        c = st.get(args[2][1], [0] * (n + 1))  # a register nothing wrote holds 0
        carry = [None] * (n + 1)
        for i in range(1, n + 1):
            if a[i] in DIGITS and b[i] in DIGITS and c[i] in (0, 1):
                v = int(a[i]) + int(b[i]) + int(c[i])
                out[i], carry[i] = str(v % 10), int(v >= 10)
        st[args[2][1]] = carry
    st[dest] = out


DIGITS = tuple("0123456789")


def value_text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    # a fraction with a finite decimal expansion, as a program writes it
    d = v.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return None
    s = "%.20f" % float(v)  # exact enough for the small decimals a program spells
    return s.rstrip("0").rstrip(".")


def expected_output(prog, prompt):
    """('out', [values]) | ('fail', why) | ('skip', why) | ('refuse', why)."""
    if not prog.every:
        # generation: the program runs on the sequence so far, the output at the
        # last position is the next token
        seq, made = list(prompt), []
        for _ in range(prog.generate):
            e = expected_output_once(prog, seq)
            if e[0] != "out":
                return e
            made += e[1]
            seq += e[1]
        return ("out", made)
    return expected_output_once(prog, prompt)


def expected_output_once(prog, prompt):
    try:
        vals = run_program(prog, prompt)
    except CheckFails as e:
        return ("fail", str(e))
    except Unspecified as e:
        return ("skip", str(e))
    except ExprError as e:
        return ("refuse", str(e))
    if prog.kinds.get(prog.output) == "num":
        return ("out", vals)
    texts = []
    for v in vals:
        t = value_text(v) if not isinstance(v, bool) else None
        # docs/language.md, "Output-only tokens": in a listed vocabulary
        # read at every position, a number no token spells is a token.
        number_token = prog.listed and prog.every and not isinstance(v, str)
        if t is None or (t not in prog.vocab and not number_token):
            return ("refuse", "output value %r is no token of the vocabulary" % (v,))
        texts.append(t)
    return ("out", texts)


# ---------------------------------------------------------------- inputs
def prompt_text(prog, toks):
    return " ".join(toks) if prog.words else "".join(toks)


def inputs_for(prog, rng, max_inputs=400, extra_long=12):
    """Every input over a few tokens up to a small length, plus some long ones."""
    toks = [t for t in prog.vocab if t != prog.bos]
    named = set(re.findall(r"'((?:[^'\\]|\\.))'|\"((?:[^\"\\]|\\.)*)\"", prog.text))
    named = {unescape(a or b) for a, b in named}
    # tokens the program names first, then the others, at most three
    alpha = [t for t in toks if t in named] + [t for t in toks if t not in named]
    if "Multiply(" in prog.text:  # digits, with carries
        alpha = ["9", "1", "5"]
    alpha = alpha[:3] if len(alpha) > 2 else alpha
    room = prog.maxlen - 1 - (0 if prog.every else prog.generate)  # tokens after the BOS
    out, length = [], 1
    while length <= room:
        batch = [list(p) for p in itertools.product(alpha, repeat=length)]
        if out and len(out) + len(batch) > max_inputs:
            break
        out += batch
        length += 1
    longest = room
    if longest > length:
        out.append([alpha[0]] * longest)
        out.append([alpha[-1]] * longest)
        for _ in range(extra_long):
            k = rng.randint(length, longest)
            out.append([rng.choice(alpha) for _ in range(k)])
    return [[prog.bos] + t for t in out]


# ---------------------------------------------------------------- tools
class Tools:
    def __init__(self, tfc, tfrun, tmp):
        self.tfc, self.tfrun, self.tmp = tfc, tfrun, tmp

    def compile(self, src, level_flags, out):
        path = os.path.join(self.tmp, "p.tfp")
        with open(path, "w") as fh:
            fh.write(src)
        try:
            r = subprocess.run([self.tfc, path, "-o", out] + level_flags,
                               capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return 124, "tfc: timed out after 120 s"
        return r.returncode, r.stderr

    def run(self, weights, prompts):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        try:
            r = subprocess.run([self.tfrun, weights, "--batch", "-", "--threads", "1"],
                               input="".join(p + "\n" for p in prompts),
                               capture_output=True, text=True, timeout=300, env=env)
        except subprocess.TimeoutExpired:
            return 124, {}, {}, "tfrun: timed out after 300 s"
        errs = {}
        for line in r.stderr.splitlines():
            m = re.match(r"tfrun: <stdin>:(\d+): (.*)", line)
            if m:
                errs[int(m.group(1)) - 1] = m.group(2)
        # one line per prompt that is no error, in input order: the prompt, then
        # a TAB and the outputs (every position) or the generated tokens
        outs, lines = {}, r.stdout.splitlines()
        k = 0
        for i, p in enumerate(prompts):
            if i in errs or k >= len(lines):
                continue
            line = lines[k]
            k += 1
            if line.startswith(p):
                outs[p] = line[len(p):]
        return r.returncode, outs, errs, r.stderr


def model_key(path):
    """What a model computes: the file without its made_by note (the level)."""
    with open(path, "rb") as fh:
        data = fh.read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    meta = head.get("__metadata__", {})
    meta.pop("made_by", None)
    bound = float(meta.get("output_error_bound", "0"))
    digest = hashlib.sha256(json.dumps(head, sort_keys=True).encode() + data[8 + n:])
    return digest.hexdigest(), bound


LOCATED = re.compile(r"^[^\n:]+:\d+:\d+: error: ", re.M)


def compare(prog, exp, got, bound):
    """None when tfrun's text got (after the prompt) agrees with the expected
    ('out', values)."""
    if prog.every:
        if not got.startswith("\t"):
            return "printed %r, no TAB after the prompt" % got
        got = got[1:]
    elif prog.words:
        got = got[1:] if got.startswith(" ") else got
    if prog.kinds.get(prog.output) == "num":
        parts = got.split()
        if len(parts) != len(exp):
            return "%d values, expected %d" % (len(parts), len(exp))
        for g, e in zip(parts, exp):
            try:
                gv = float(g)
            except ValueError:
                return "value %r" % g
            if not abs(gv - float(e)) <= bound + 1e-6 * abs(float(e)):
                return "value %s, expected %s (bound %g)" % (g, value_text(e) or str(e), bound)
        return None
    want = " ".join(exp) if prog.words else "".join(exp)
    return None if got == want else "printed %r, expected %r" % (got, want)


def check_program(tools, src, rng, name):
    """Compiles and runs src at every level; a dict of what happened."""
    res = {"name": name, "src": src, "refused": [], "compiled": [], "silent": [], "loud": [],
           "unrefused": [], "levels_differ": [], "skipped": 0, "checked_fail": 0, "inputs": 0}
    try:
        prog = Program(src)
    except (SyntaxErr, KeyError, IndexError) as e:
        res["loud"].append(("evaluator", "cannot read the program: %s" % e, None))
        return res
    res["features"] = features(prog)
    prompts = inputs_for(prog, rng)
    texts = [prompt_text(prog, p) for p in prompts]
    exps = [expected_output(prog, p) for p in prompts]
    res["inputs"] = len(prompts)
    static = static_refusal(prog)
    must_refuse = next((("%s: %s" % (texts[i], e[1])) for i, e in enumerate(exps)
                        if e[0] == "refuse"), None)
    ran = {}  # model key -> (rc, outs, errs, stderr)
    per_level = {}
    for level, flags in LEVELS:
        w = os.path.join(tools.tmp, "m%s.tfw" % level.strip("-"))
        if os.path.exists(w):
            os.unlink(w)
        rc, err = tools.compile(src, flags, w)
        if rc == 1:
            if not LOCATED.search(err):
                res["loud"].append((level, "refused without a located error: %s" % err[:300], None))
            else:
                res["refused"].append(level)
                res.setdefault("refusal", {})[level] = LOCATED.search(err) and \
                    err[LOCATED.search(err).start():].split("\n")[0]
            continue
        if rc != 0:
            res["loud"].append((level, "tfc exit status %d: %s" % (rc, err[-400:]), None))
            continue
        res["compiled"].append(level)
        why = must_refuse or static.get(level)
        if why:
            res["unrefused"].append((level, "compiled, but the language refuses it: " + why, None))
            continue
        key, bound = model_key(w)
        if key not in ran:
            ran[key] = tools.run(w, texts)
        rc2, outs, errs, stderr = ran[key]
        if rc2 not in (0, 1):
            res["loud"].append((level, "tfrun exit status %d: %s" % (rc2, stderr[-400:]), None))
            continue
        per_level[level] = (outs, bound)
        for i, (t, e) in enumerate(zip(texts, exps)):
            if e[0] == "skip":
                res["skipped"] += level == "-O"
                continue
            if e[0] == "fail":
                if i in errs:
                    res["checked_fail"] += level == "-O"
                    continue
                bad = "the run-time check must fail (%s) but tfrun printed %r" % (
                    e[1], (outs.get(t) or "").lstrip("\t "))
            elif i in errs:
                bad = "tfrun failed: %s" % errs[i]
                res["loud"].append((level, bad, t))
                break
            elif t not in outs:
                bad = "tfrun printed nothing for it"
                res["loud"].append((level, bad, t))
                break
            else:
                bad = compare(prog, e[1], outs[t], bound)
                if bad is None:
                    continue
            # a wrong answer printed for this input (its line alone exits 0): silent
            res["silent"].append((level, bad, t))
            break
    # the levels with each other
    levels = list(per_level)
    said = {t for t, e in zip(texts, exps) if e[0] == "out"}  # the language says what prints
    for a, b in itertools.combinations(levels, 2):
        (oa, ba), (ob, bb) = per_level[a], per_level[b]
        for t in texts:
            if t in said and t in oa and t in ob and oa[t] != ob[t]:
                if prog.kinds.get(prog.output) == "num":
                    va, vb = oa[t].split(), ob[t].split()
                    if len(va) == len(vb) and all(abs(float(x) - float(y)) <= ba + bb + 1e-6 *
                                                  abs(float(x)) for x, y in zip(va, vb)):
                        continue
                res["levels_differ"].append((a, b, t, oa[t], ob[t]))
                break
    return res


def bug_class(why):
    """A failure's kind, without its values: one line per distinct symptom."""
    if why.startswith("the run-time check must fail"):
        return "a categorical Aggregate picks different values, and tfrun prints a value"
    if why.startswith("compiled, but"):
        return "compiled a program the language refuses (%s)" % re.sub(r"^.*?: ", "", why)[:60]
    return re.sub(r"'[^']*'|\b\d[\d.e+-]*\b", "_", why)[:90]


FEATURES = [
    ("Count", r"Count\("),
    ("Map into num", None),
    ("staircase (Map of a num into cat)", None),
    ("mean Aggregate", None),
    ("sum Aggregate", r", sum\b"),
    ("categorical Aggregate", None),
    ("default:", r"default:"),
    ("Clear", r"\bClear\("),
    ("CopyOnMatch", r"CopyOnMatch\("),
    ("IsZero", r"\bIsZero\("),
    ("FindAndStore", r"\bFindAndStore\("),
    ("StepPosition", r"\bStepPosition\("),
    ("GetRelativeToken", r"\bGetRelativeToken\("),
    ("Multiply", r"\bMultiply\("),
    ("numeric output", None),
    ("word vocabulary", r"^vocab \["),
    ("maxlen >= 40", r"maxlen ([4-9]\d|\d{3,});"),
    ("generating", r"^generate \d+;"),
]


def features(prog):
    """The names of FEATURES a program has."""
    out = set()
    for name, rx in FEATURES:
        if rx and re.search(rx, prog.text, re.M):
            out.add(name)
    for op in prog.ops:
        kind = prog.kinds.get(op["dest"])
        if op["op"] == "Map":
            reads = op_reads(op)
            if kind == "num":
                out.add("Map into num")
            elif len(reads) == 1 and prog.kinds.get(next(iter(reads))) == "num":
                out.add("staircase (Map of a num into cat)")
        if op["op"] == "Aggregate":
            out.add("mean Aggregate" if kind == "num" and "sum" not in op["flags"] else
                    "categorical Aggregate" if kind != "num" else "sum Aggregate")
    if prog.kinds.get(prog.output) == "num":
        out.add("numeric output")
    return out


def failed(res):
    return bool(res["silent"] or res["loud"] or res["unrefused"])


# ---------------------------------------------------------------- generation
class Reg:
    def __init__(self, name, kind, vt, vals=None, none_ok=False, key_ok=True):
        self.name, self.kind, self.vt = name, kind, vt  # kind cat/num/token; vt tok/int/real
        self.vals = vals  # a sorted list of possible values (numbers), or None
        self.none_ok, self.key_ok = none_ok, key_ok


class Gen:
    """The generator's state: the header and the registers written so far."""

    def __init__(self, rng, vocab=None, maxlen=None):
        if vocab is None:
            vocab, maxlen = gen_header(rng)
        self.vocab, self.maxlen = vocab, maxlen
        self.words = any(len(t) != 1 for t in vocab)
        self.letters = [t for t in vocab[1:] if not t.isdigit()]
        self.digits = [t for t in vocab[1:] if t.isdigit()]
        self.ndigits = 0
        while str(self.ndigits) in self.digits:
            self.ndigits += 1
        self.regs = [Reg("tokens", "cat", "tok", None, False),
                     Reg("indices", "cat", "int", list(range(maxlen)))]
        self.count = 0
        self.generate = None  # N: a generating program (`output R; generate N;`)

    def fresh(self, kind, vt, vals=None, none_ok=False, key_ok=True, name=None):
        self.count += 1
        r = Reg(name or "r%d" % self.count, kind, vt, vals, none_ok, key_ok)
        self.regs.append(r)
        return r

    def pick(self, rng, pred):
        c = [r for r in self.regs if pred(r)]
        return rng.choice(c) if c else None


def gen_header(rng):
    if rng.random() < 0.2:
        words = rng.sample(["ab", "cd", "the", "x", "yy"], rng.randint(2, 3))
        vocab = ["^"] + words + [str(d) for d in range(rng.choice([2, 3, 4]))]
    else:
        k = rng.choice([0, 2, 3, 4, 5, 10])
        vocab = ["^"] + list("abcd"[:rng.randint(2, 4)]) + [str(d) for d in range(k)]
    r = rng.random()
    maxlen = rng.randint(4, 12) if r < 0.6 else rng.randint(13, 24) if r < 0.75 else \
        rng.randint(40, 80) if r < 0.95 else rng.randint(100, 250)
    return vocab, maxlen


def q(s):
    return "'%s'" % s if len(s) == 1 else '"%s"' % s


def lit(rng, g):
    """A token literal: a letter of the vocabulary, now and then one outside it
    ('z': false everywhere by docs/language.md; a word outside it is an error)."""
    return q("z") if rng.random() < 0.04 else q(rng.choice(g.letters))


def values_of(e, regs, true_div):
    """Every value e takes over its registers' values (None: unknown, too many)."""
    names = sorted(regs_read(e, set()))
    sets = []
    for n in names:
        r = regs[n]
        if r.vals is None:
            return None
        sets.append(r.vals)
    total = 1
    for s in sets:
        total *= len(s)
    if total > 20000:
        return None
    out = set()
    for combo in itertools.product(*sets):
        env = dict(zip(names, combo))
        try:
            v = evaluate(e, lambda x: env[x], true_div)
        except (ExprError, Unspecified):
            continue
        if isinstance(v, bool) or isinstance(v, str):
            return None
        out.add(v)
    return sorted(out)


def P(s):
    return Parser(s).expr()


def gen_selection(rng, g, depth=0):
    """A selection over categorical registers (k. on registers keys may read)."""
    ints = [r for r in g.regs if r.kind == "cat" and r.vt == "int"]
    toks = [r for r in g.regs if r.kind in ("cat", "token") and r.vt == "tok"]
    kints = [r for r in ints if r.key_ok]
    ktoks = [r for r in toks if r.key_ok]
    x = rng.random()
    if depth < 1 and x < 0.2:
        return "(%s) %s (%s)" % (gen_selection(rng, g, 1), rng.choice(["and", "or"]),
                                 gen_selection(rng, g, 1))
    x = rng.random()
    if x < 0.25 and ktoks:
        k = rng.choice(ktoks)
        if rng.random() < 0.5 and k.name == "tokens":
            return "k.tokens %s %s" % (rng.choice(["==", "==", "!="]), lit(rng, g))
        qq = rng.choice(toks)
        return "k.%s == q.%s" % (k.name, qq.name)
    if x < 0.8 and kints:
        k = rng.choice(kints)
        qq = rng.choice(ints)
        op = rng.choice(["==", "<", "<=", "<=", "!=", ">"])
        tail = rng.choice(["", "", "", " - 1", " + 1"])
        return "k.%s %s q.%s%s" % (k.name, op, qq.name, tail)
    if x < 0.9 and kints:
        k = rng.choice(kints)
        return "k.%s %s %d" % (k.name, rng.choice(["==", "<", ">="]), rng.randint(0, 3))
    if x < 0.95:
        return "true"
    return "not k.indices == q.indices" if rng.random() < 0.5 else "k.indices <= q.indices"


def op_line(dest, text):
    return "%s: %s -> %s;" % (dest, text, dest)


def gen_op(rng, g, final=False):
    """One op (list of lines) writing a fresh register, or None. final: the op
    writes `out`, the output, whose values must be tokens the vocabulary holds."""
    regs = {r.name: r for r in g.regs}
    ints = [r for r in g.regs if r.kind == "cat" and r.vt == "int"]
    toks = [r for r in g.regs if r.vt == "tok"]
    nums = [r for r in g.regs if r.kind == "num"]
    M = g.ndigits
    K = rng.randint(2, 5)
    if not final and nums and rng.random() < 0.04:
        x = rng.choice(nums)
        x.vals = None if x.vals is None else sorted({
            Fraction(float(v) + 0.1 * gelu(10 - 100 * float(v)) - gelu(float(v) + 10) + 10)
            for v in x.vals})
        return ["IsZero(%s);" % x.name]
    t = rng.random()
    if final:
        if M < 2 or t < 0.15:
            # a copy of tokens into the output (issue 22's second program)
            src = rng.choice(toks)
            sel = gen_selection(rng, g)
            d = g.fresh("cat", "tok", None, name="out")
            extra = ", default: %s" % lit(rng, g) if rng.random() < 0.3 else ""
            return [op_line(d.name, "Aggregate(%s, %s%s)" % (sel, src.name, extra))]
        src_pool = [r for r in g.regs if r.name not in ("tokens",)]
        last = g.regs[-1] if len(g.regs) > 2 else rng.choice(src_pool)
        x = last if rng.random() < 0.7 else rng.choice(src_pool)
        M = rng.randint(2, M)
        if x.kind == "num":
            e = rng.choice(["round(%s * %d) %% %d" % (x.name, rng.randint(1, 3), M),
                            "%s > %s ? 1 : 0" % (x.name, rng.choice(["0", "0.5", "1", "2"])),
                            "floor(%s) %% %d" % (x.name, M),
                            "min(max(round(%s), 0), %d)" % (x.name, M - 1),
                            "%s < 1 and %s > 0 ? 1 : 0" % (x.name, x.name)])
        elif x.vt == "tok":
            e = rng.choice(["%s == %s ? 1 : 0" % (x.name, lit(rng, g)),
                            "[%s: %s => 1, _ => 0]" % (x.name, lit(rng, g))])
        else:
            y = rng.choice(ints)
            e = rng.choice(["%s %% %d" % (x.name, M), "(%s + %s) %% %d" % (x.name, y.name, M),
                            "%s < %s ? 1 : 0" % (x.name, y.name),
                            "[%s: %d => 1, _ => 0]" % (x.name, rng.randint(0, 3)),
                            "min(%s, %d)" % (x.name, M - 1)])
        g.fresh("cat", "int", name="out")
        return [op_line("out", "Map(%s)" % e)]
    if t < 0.12:
        sel = gen_selection(rng, g)
        flag = ", causal" if rng.random() < 0.3 else ""
        d = g.fresh("cat", "int", list(range(g.maxlen)))
        return [op_line(d.name, "Count(%s%s)" % (sel, flag))]
    if t < 0.26:
        # a table over categorical registers into cat
        x = rng.choice(ints)
        y = rng.choice(ints)
        tk = rng.choice(toks)
        forms = ["(%s + %s) %% %d" % (x.name, y.name, K), "%s %% %d" % (x.name, K),
                 "min(%s, %s)" % (x.name, y.name), "abs(%s - %s)" % (x.name, y.name),
                 "%s < %s ? %d : %d" % (x.name, y.name, rng.randint(0, 3), rng.randint(0, 3)),
                 "%s == %d ? %s : %d" % (x.name, rng.randint(0, 2), y.name, rng.randint(0, 3)),
                 "[%s: %d => %d, %d => %d, _ => %d]" % (x.name, 0, rng.randint(0, 3), 1,
                                                        rng.randint(0, 3), rng.randint(0, 3)),
                 "[%s, %s: (%d, %d) => 1, _ => 0]" % (x.name, y.name, rng.randint(0, 2),
                                                     rng.randint(0, 2)),
                 "%s / 2" % x.name, "%s - 1" % x.name,
                 "%s == %s ? %d : %d" % (tk.name, lit(rng, g), rng.randint(0, 3),
                                         rng.randint(0, 3)),
                 "[%s: %s => 1, _ => 2]" % (tk.name, lit(rng, g))]
        if not g.words:
            forms.append("ord(%s) %% %d" % (tk.name, K))
        e = rng.choice(forms)
        d = g.fresh("cat", "int", values_of(P(e), regs, False),
                    none_ok=any(regs[n].none_ok for n in regs_read(P(e), set())))
        return [op_line(d.name, "Map(%s)" % e)]
    if t < 0.30 and toks and len(g.letters) >= 2:
        x = rng.choice(ints)
        a, b = rng.sample(g.letters, 2)
        e = "%s < %d ? %s : %s" % (x.name, rng.randint(0, 3), q(a), q(b))
        d = g.fresh("cat", "tok")
        return [op_line(d.name, "Map(%s)" % e)]
    if t < 0.44:
        # a table into num
        x = rng.choice(ints)
        forms = ["%s * %s" % (x.name, x.name), "%s / 2" % x.name, "%s * 0.5 + 1" % x.name,
                 "%s == 1 ? 2 : 0.5" % x.name, "%s - %d" % (x.name, rng.randint(0, 3)),
                 "%s == %s ? 1 : 0" % (rng.choice(toks).name, lit(rng, g))]
        e = rng.choice(forms)
        d = g.fresh("num", "real", values_of(P(e), regs, True))
        return [op_line(d.name, "Map(%s)" % e)]
    if t < 0.54 and nums:
        x, y = rng.choice(nums), rng.choice(nums)
        e = rng.choice(["%s + %s" % (x.name, y.name), "2 * %s - %s + 1" % (x.name, y.name),
                        "%s - 0.5" % x.name, "-%s" % x.name, "%s / 4" % x.name])
        d = g.fresh("num", "real", values_of(P(e), regs, True))
        return [op_line(d.name, "Map(%s)" % e)]
    if t < 0.61 and nums:
        x, c = rng.choice(nums), rng.choice(ints)
        e = rng.choice(["%s * %s" % (x.name, c.name),
                        "%s == %d ? %s : 0" % (c.name, rng.randint(0, 2), x.name),
                        "%s > %d ? %s : -%s" % (c.name, rng.randint(0, 2), x.name, x.name)])
        d = g.fresh("num", "real", values_of(P(e), regs, True))
        return [op_line(d.name, "Map(%s)" % e)]
    if t < 0.73 and nums:
        x = rng.choice(nums)
        if rng.random() < 0.5:
            e = rng.choice(["%s > %s ? 1 : 0" % (x.name, rng.choice(["0", "0.5", "1"])),
                            "round(%s * %d) %% %d" % (x.name, rng.randint(1, 3), K),
                            "floor(%s * 2)" % x.name, "min(round(%s), 3)" % x.name])
            d = g.fresh("cat", "int", values_of(P(e), regs, False))
        else:
            e = rng.choice(["%s * %s" % (x.name, x.name), "abs(%s)" % x.name,
                            "max(%s, 0.5)" % x.name, "floor(%s * 2) / 2" % x.name])
            d = g.fresh("num", "real", values_of(P(e), regs, True))
        return [op_line(d.name, "Map(%s)" % e)]
    if t < 0.86:
        pre = []
        if not nums or rng.random() < 0.4:
            # a 0/1 number to average or add up (frac_prevs's shape)
            x = g.fresh("num", "real", [0, 1])
            pre = [op_line(x.name, "Map(%s == %s ? 1 : 0)" % (rng.choice(toks).name,
                                                               lit(rng, g)))]
        else:
            x = rng.choice(nums)
        sel = gen_selection(rng, g)
        extra = ""
        if rng.random() < 0.3:
            extra += ", sum"
        elif rng.random() < 0.3:
            extra += ", default: %s" % rng.choice(["1", "0.5", "-1"])
        if rng.random() < 0.3:
            extra += ", causal"
        d = g.fresh("num", "real", None)
        return pre + [op_line(d.name, "Aggregate(%s, %s%s)" % (sel, x.name, extra))]
    if t < 0.91:
        src = rng.choice(ints + toks)
        sel = rng.choice(["k.indices == q.%s" % rng.choice(ints).name,
                          "k.indices == q.indices - 1", gen_selection(rng, g)])
        dflt = rng.random() < 0.5
        extra = ""
        if dflt:
            extra = ", default: %s" % (lit(rng, g) if src.vt == "tok"
                                       else str(rng.randint(0, 2)))
        vals = None
        if src.vt == "int" and src.vals is not None:
            vals = sorted(set(src.vals) | ({int(extra.split(": ")[1])} if dflt else set()))
        d = g.fresh("cat", src.vt, vals, none_ok=not dflt, key_ok=not dflt)
        return [op_line(d.name, "Aggregate(%s, %s%s)" % (sel, src.name, extra))]
    if t < 0.97 and nums:
        x = rng.choice(nums)
        x.vals = None if x.vals is None else sorted({min(v, 0) for v in x.vals})
        return ["Clear(%s);" % x.name]
    if t < 1.0 and not any(r.name == "t" for r in g.regs):
        f = g.fresh("num", "real", [1])
        g.fresh("token", "tok", None, name="t")
        return [op_line(f.name, "Map(indices >= 0 ? 1 : 0)"),
                "CopyOnMatch(%s, tokens) -> t;" % f.name]
    return None


def gen_final(rng, g):
    """The output: the last register itself (numbers, tokens, or digits), or an
    op writing `out`."""
    last = g.regs[-1] if len(g.regs) > 2 else None
    if last and g.generate and last.kind == "num":
        last = None  # a generating program prints tokens
    if last and rng.random() < (0.6 if last.kind == "num" else 0.3):
        if last.kind == "num" or (last.kind == "cat" and last.vt == "tok") or (
                last.kind == "cat" and last.vals and 0 <= last.vals[0] and
                last.vals[-1] < g.ndigits and all(isinstance(v, int) for v in last.vals)):
            return [], last.name
    if g.maxlen <= 90 and rng.random() < 0.12:
        return gen_seed_final(rng, g), "out"
    while True:
        lines = gen_op(rng, g, final=True)
        if lines:
            return lines, "out"


def gen_seed_final(rng, g):
    """The output `out` written by seed ops (docs/language.md, "Ops"): the
    token k before each position, the first token (FindAndStore of the BOS
    moved by StepPosition), the token after the one occurrence of a letter,
    or (a vocabulary with every digit) Multiply's digit of the token plus the
    first token plus a carry (a Map's 0/1, or 0)."""
    t = rng.random()
    if t >= 0.3 and g.maxlen > 34:
        t = rng.random() * 0.3  # -O0's FindAndStore fails past position 33 (docs/language.md)
    if t >= 0.3:
        g.fresh("position", "pos", name="p")
    if t < 0.3:
        g.fresh("token", "tok", name="out")
        return ["out: GetRelativeToken(pos - %d) -> out;" % rng.randint(0, 1)]
    first = ["p: FindAndStore('^') -> p;"]
    step, k = rng.choice([(1, 0), (2, -1), (1, -1), (3, -2)])
    first += ["StepPosition(p: %d);" % step]
    if t < 0.55 or (t >= 0.8 and g.ndigits < 10):
        g.fresh("token", "tok", name="out")
        return first + ["out: GetRelativeToken(p %s %d) -> out;" % ("-" if k < 0 else "+", abs(k))]
    if t < 0.8:
        g.fresh("token", "tok", name="out")
        return ["p: FindAndStore(%s) -> p;" % q(rng.choice(g.letters)),
                "out: GetRelativeToken(p + %d) -> out;" % rng.randint(0, 1)]
    lines = first + ["b: GetRelativeToken(p + 0) -> b;", "a: GetRelativeToken(pos + 0) -> a;"]
    for r in ("a", "b"):
        g.fresh("token", "tok", name=r)
    g.fresh("num", "real", [0, 1], name="carry")
    if rng.random() < 0.5:
        lines.append(op_line("carry", "Map(tokens == %s ? 1 : 0)" % q(rng.choice(g.digits))))
    g.fresh("token", "tok", name="out")
    return lines + ["Multiply(a, b, carry) -> out;"]


def render(g, lines, out):
    """The program text: header, declarations of the registers used, ops."""
    body = "\n".join(lines) + "\n"
    voc = ('"%s"' % "".join(g.vocab)) if not g.words else \
        "[%s]" % ", ".join('"%s"' % t for t in g.vocab)
    head = "vocab %s; bos '^'; maxlen %d;\n" % (voc, g.maxlen)
    decl = []
    for kind in ("cat", "num", "token", "position"):
        used = [r.name for r in g.regs if r.kind == kind and r.name not in ("tokens", "indices")
                and re.search(r"\b%s\b" % r.name, body + out)]
        if used:
            decl.append("%s %s;" % (kind, ", ".join(used)))
    tail = "output %s at every position;\n" % out if not g.generate else \
        "output %s;\ngenerate %d;\n" % (out, g.generate)
    return head + "".join(d + "\n" for d in decl) + body + tail


def prune(lines, out):
    """Drops ops whose register nothing reads (backwards from the output)."""
    need, kept = {out}, []
    for line in reversed(lines):
        m = re.match(r"(?:\w+: )?(\w+)\((.*)\)(?: -> (\w+))?;$", line)
        name, args, dest = m.group(1), m.group(2), m.group(3)
        if dest is None:  # Clear, IsZero, StepPosition: in place
            if args.split(":")[0].split(",")[0].strip() in need:
                kept.append(line)
            continue
        if dest in need:
            kept.append(line)
            need |= set(re.findall(r"(?<![.'\"\w])([a-z]\w*)\b", args)) | \
                set(re.findall(r"[qk]\.(\w+)", args))
    return list(reversed(kept))


def gen_program(rng):
    g = Gen(rng)
    if rng.random() < 0.2 and g.maxlen > 4:
        g.generate = rng.randint(1, 3)
    n = rng.choice([0, 1, 2, 2, 3, 3, 3, 4, 4, 5, 6])
    lines = []
    while len(lines) < n:
        op = gen_op(rng, g)
        if op:
            lines += op
    fl, out = gen_final(rng, g)
    lines = prune(lines + fl, out)
    return render(g, lines, out)


# ---------------------------------------------------------------- shape check
def abstract(line, kinds):
    """An op line with labels, registers and literals abstracted."""
    line = re.sub(r"^\w+:\s*", "", line.strip())
    line = re.sub(r"'(?:[^'\\]|\\.)'|\"[^\"]*\"", "TOK", line)
    line = re.sub(r"\b\d+(\.\d+)?\b", "NUM", line)
    return re.sub(r"\b([a-z]\w*)\b",
                  lambda m: m.group(1) if m.group(1) in ("tokens", "indices") else
                  {"cat": "C", "num": "N", "token": "T"}.get(kinds.get(m.group(1)), m.group(1)),
                  line)


def shape_check(tries=20000):
    """Each issue program is in the generator's space: its header is one
    gen_header writes, and each op (the last one with the output) one that
    gen_op/gen_final writes given the registers before it."""
    ok = True
    for name, text in ISSUE_PROGRAMS:
        prog = Program(text)
        want_head = (prog.vocab, prog.maxlen)
        hit = next((s for s in range(tries) if gen_header(random.Random(s)) == want_head), None)
        lines = [l.strip() for l in text.splitlines()[2:] if not l.startswith("output")]
        g = Gen(random.Random(0), prog.vocab, prog.maxlen)
        found = [hit]
        for k, line in enumerate(lines):
            final = k == len(lines) - 1
            want = abstract(line, prog.kinds)
            if final:
                want += " | output %s" % ("C" if prog.kinds[prog.output] == "cat" else "N")
            seed = None
            for s in range(tries):
                g2 = copy.deepcopy(g)
                rng = random.Random(s)
                if final:
                    ls, out = gen_final(rng, g2)
                else:
                    ls, out = gen_op(rng, g2), None
                if not ls or len(ls) != 1:
                    continue
                kinds = {r.name: r.kind for r in g2.regs if r.name not in ("tokens", "indices")}
                got = abstract(ls[0], kinds)
                if final:
                    got += " | output %s" % {"cat": "C", "num": "N"}.get(kinds.get(out), "?")
                if got == want:
                    seed, g = s, g2
                    break
            found.append(seed)
        good = all(s is not None for s in found)
        ok &= good
        print("shape %s: %s (header seed %s, op seeds %s)" % (
            name, "in the generator's space" if good else "NOT FOUND", found[0], found[1:]))
    return ok


# ---------------------------------------------------------------- minimizing
def minimize(tools, src, level, rng):
    """A smaller program (fewer ops, smaller maxlen) that still disagrees
    silently at level, with its shortest failing input."""
    def still(s):
        try:
            Program(s)
        except SyntaxErr:
            return None
        r = check_program(tools, s, random.Random(0), "min")
        hit = [x for x in r["silent"] if x[0] == level]
        return hit[0] if hit else None

    best = still(src)
    if not best:
        return src, None
    changed = True
    while changed:
        changed = False
        lines = src.splitlines()
        # drop an op, reading tokens or indices (or 1) where its register was read
        for i, line in enumerate(lines):
            m = re.match(r"(?:\w+:\s*)?\w+\(.*\)(?:\s*->\s*(\w+))?;$", line)
            if not m or line.startswith("output"):
                continue
            for stand_in in (None, "indices", "tokens", "1"):
                reg = m.group(1)
                rest = lines[:i] + lines[i + 1:]
                if reg and stand_in:
                    if re.search(r"\boutput %s\b" % reg, "\n".join(rest)):
                        continue
                    side = stand_in if stand_in != "1" else "indices"
                    rest = [re.sub(r"\b([qk])\.%s\b" % reg, r"\1." + side, l) for l in rest]
                    rest = [l if re.match(r"(cat|num|token) ", l) else
                            re.sub(r"(?<![\w.])%s\b(?!\s*:)" % reg, stand_in, l) for l in rest]
                    rest = [re.sub(r"\b%s, |, %s\b" % (reg, reg), "", l)
                            if re.match(r"(cat|num|token) ", l) else l for l in rest]
                    rest = [l for l in rest if not re.match(r"(cat|num|token) %s;$" % reg, l)]
                elif reg and stand_in is None and re.search(r"\b%s\b" % reg, "\n".join(rest[i:])):
                    continue
                cand = "\n".join(rest) + "\n"
                hit = still(cand)
                if hit:
                    src, best, changed = cand, hit, True
                    break
            if changed:
                break
        if changed:
            continue
        m = re.search(r"maxlen (\d+);", src)
        n = int(m.group(1))
        for smaller in sorted({n // 2, n - 10, n - 3, n - 1}):
            if 3 <= smaller < n:
                cand = src.replace(m.group(0), "maxlen %d;" % smaller)
                hit = still(cand)
                if hit:
                    src, best, changed = cand, hit, True
                    break
    # declarations nothing uses any more
    lines = src.splitlines()
    body = "\n".join(l for l in lines if not re.match(r"(cat|num|token) ", l))
    for k, l in enumerate(lines):
        m = re.match(r"(cat|num|token) (.*);$", l)
        if m:
            used = [r for r in m.group(2).split(", ") if re.search(r"\b%s\b" % r, body)]
            lines[k] = "%s %s;" % (m.group(1), ", ".join(used)) if used else None
    cand = "\n".join(l for l in lines if l is not None) + "\n"
    hit = still(cand) if cand != src else None
    return (cand, hit) if hit else (src, best)


# ---------------------------------------------------------------- driver
WORKER = {}


def worker_init(tfc, tfrun):
    tmp = tempfile.mkdtemp(prefix="differential.")
    WORKER["tools"] = Tools(tfc, tfrun, tmp)
    import atexit
    import shutil
    atexit.register(shutil.rmtree, tmp, True)


def worker_check(job):
    name, src, seed = job
    return check_program(WORKER["tools"], src, random.Random(seed), name), src, seed


def report(res, keep, lines_out):
    what = [("SILENT", x) for x in res["silent"]] + [("LOUD", x) for x in res["loud"]] + \
        [("UNREFUSED", x) for x in res["unrefused"]]
    for tag, (level, why, inp) in what:
        lines_out.append("%s %s at %s: %s%s" % (tag, res["name"], level, why,
                                                "" if inp is None else " (input %r)" % inp))
    if what:
        lines_out.append(res["src"])
    if keep and what:
        os.makedirs(keep, exist_ok=True)
        base = os.path.join(keep, res["name"].replace(".tfp", ""))
        with open(base + ".tfp", "w") as fh:
            fh.write(res["src"])
        with open(base + ".txt", "w") as fh:
            for tag, (level, why, inp) in what:
                fh.write("%s at %s: %s\ninput: %s\n" % (tag, level, why, inp))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.environ.get("TF_BUILD_DIR", os.path.join(here, "..", "build"))
    ap.add_argument("--tfc", default=os.path.join(build, "tfc"))
    ap.add_argument("--tfrun", default=os.path.join(build, "tfrun"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--time-budget", type=float, default=0, help="seconds (0: no limit)")
    ap.add_argument("--keep", default=None, help="write failing programs here")
    ap.add_argument("--cases", nargs="*", default=[], help=".tfp files or folders of them")
    ap.add_argument("--shape-check", action="store_true")
    ap.add_argument("--minimize", action="store_true", help="shrink each silent disagreement")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="programs checked in parallel")
    a = ap.parse_args()

    status = 0
    if a.shape_check and not shape_check():
        status = 1
    cases = list(ISSUE_PROGRAMS)
    for c in a.cases:
        files = sorted(os.path.join(c, f) for f in os.listdir(c) if f.endswith(".tfp")) \
            if os.path.isdir(c) else [c]
        for f in files:
            with open(f) as fh:
                cases.append((os.path.basename(f), fh.read()))
    t0 = time.time()
    counts = dict(programs=0, models=0, refused=0, agreeing=0, silent=0, loud=0, unrefused=0,
                  levels_differ=0, partly_refused=0, checked_fail=0, skipped=0, inputs=0)
    msgs, classes, covered, partly = [], {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tools = Tools(a.tfc, a.tfrun, tmp)

        def one(res, src, rng):
            name = res["name"]
            counts["programs"] += 1
            counts["models"] += len(res["compiled"])
            counts["inputs"] += res["inputs"]
            counts["skipped"] += res["skipped"]
            counts["checked_fail"] += res["checked_fail"]
            if len(res["refused"]) == len(LEVELS):
                counts["refused"] += 1
            elif res["refused"]:
                counts["partly_refused"] += 1
                kind = "refused at %s only: %s" % (" ".join(res["refused"]), re.sub(
                    r"^[^:]*:\d+:\d+: error: |'[^']*'|\b\d+\b", "",
                    res["refusal"][res["refused"][0]])[:70])
                partly.setdefault(kind, []).append(name)
            counts["silent"] += bool(res["silent"])
            counts["loud"] += bool(res["loud"])
            counts["unrefused"] += bool(res["unrefused"])
            counts["levels_differ"] += bool(res["levels_differ"])
            if res["compiled"] and not failed(res):
                counts["agreeing"] += 1
                for f in res.get("features", ()):
                    covered[f] = covered.get(f, 0) + 1
            report(res, a.keep, msgs)
            for lv_a, lv_b, t, oa, ob in res["levels_differ"][:1]:
                msgs.append("LEVELS %s: %s prints %r, %s %r on %r" % (name, lv_a, oa, lv_b, ob, t))
            if a.minimize and res["silent"]:
                small, hit = minimize(tools, src, res["silent"][0][0], rng)
                if hit:
                    msgs.append("MINIMIZED %s at %s: %s (input %r)\n%s" % (name, hit[0], hit[1],
                                                                           hit[2], small))
            if not a.quiet:
                for m in msgs:
                    print(m)
                msgs.clear()
            for tag in ("silent", "loud", "unrefused"):
                for level, why, inp in res[tag]:
                    kind = "%s: %s" % (tag, bug_class(why))
                    classes.setdefault(kind, []).append(name)
            return res

        def jobs():
            for name, src in cases:
                yield name, src, a.seed
            rng = random.Random(a.seed)
            for i in range(a.programs):
                if a.time_budget and time.time() - t0 > a.time_budget:
                    break
                src = gen_program(rng)
                yield "seed%d_%05d.tfp" % (a.seed, i), src, rng.random()

        if a.jobs > 1:
            # Each worker its own folder; the programs are the same as with one
            # job (generated here, in order), and so are the counts.
            # A few programs ahead of the workers, no more: the time budget is
            # checked as each is handed out.
            with multiprocessing.Pool(a.jobs, worker_init, (a.tfc, a.tfrun)) as pool:
                pending = []
                for job in jobs():
                    pending.append(pool.apply_async(worker_check, (job,)))
                    while len(pending) > 2 * a.jobs:
                        res, src, seed = pending.pop(0).get()
                        one(res, src, random.Random(seed))
                for p in pending:
                    res, src, seed = p.get()
                    one(res, src, random.Random(seed))
        else:
            for name, src, seed in jobs():
                one(check_program(tools, src, random.Random(seed), name), src, random.Random(seed))
    shown = 0
    for m in msgs:
        shown += not m.startswith(("SILENT", "LOUD", "UNREFUSED", "LEVELS", "MINIMIZED"))
        if shown <= 20:
            print(m)
    if shown > 20:
        print("... and %d more failing programs (--keep DIR writes them all)" % (shown - 20))
    for kind, names in sorted(classes.items()):
        progs = sorted(set(names))
        print("differential: %d programs: %s (%s%s)" % (len(progs), kind, ", ".join(progs[:4]),
                                                        ", ..." if len(progs) > 4 else ""))
    print("differential: %(programs)d programs (%(inputs)d inputs, %(models)d levels compiled), "
          "%(refused)d refused at every "
          "level, %(partly_refused)d at some, %(agreeing)d proven and agreeing; "
          "%(silent)d with a SILENT disagreement, %(loud)d with a loud failure, "
          "%(unrefused)d compiled though the language refuses them, %(levels_differ)d whose "
          "levels print differently; %(checked_fail)d inputs failed a check as they must, "
          "%(skipped)d not compared (no value, or a half rounded)" % counts)
    for kind, names in sorted(partly.items()):
        print("differential: %d programs %s (%s)" % (len(names), kind, ", ".join(names[:3])))
    print("differential: agreeing programs with %s" % ", ".join(
        "%s %d" % (f, covered.get(f, 0)) for f, _ in FEATURES))
    cpu = os.times()
    print("differential: %.0f s (CPU: %.0f s in Python, %.0f s in tfc and tfrun)" % (
        time.time() - t0, cpu.user + cpu.system, cpu.children_user + cpu.children_system))
    if counts["silent"] or counts["loud"] or counts["unrefused"]:
        status = 1
    if counts["agreeing"] == 0:
        print("differential: FAIL: no program was compiled and checked")
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
