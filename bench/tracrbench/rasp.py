"""bench/tracrbench/rasp.py: a small RASP with Tracr's semantics, the reference for check.py.

Written for this benchmark from the semantics Tracr documents (tracr/rasp/rasp.py's
evaluator), not from its code. An SOp is a node of a graph; evaluate(sop, xs) runs it on one
input (a list of values, no BOS), value_set(...) lists the values it can hold as Tracr's
compiler infers them, and tracr_size(...) gives the blocks and d_model Tracr would build.

Semantics (Tracr's):
  tokens, indices    the input, and 0..n-1 (Tracr's first token has index 0)
  Map(f, x)          f(x) at each position; None stays None
  SequenceMap(f,x,y) f(x, y); None if either is None
  Select(k, q, p)    selected[q][k] = p(key, query): the key first (LT is key < query);
                     a Comparison refuses None (Tracr raises), a lambda sees it
  Aggregate(s, x)    over the selected keys: none -> the default; ints or bools -> their
                     mean (a float); one value of any other kind -> that value; several
                     -> Tracr raises ValueError (a categorical Aggregate must pick one)
  SelectorWidth(s)   the number of selected keys
  numerical(x)       only an annotation: the same values, encoded as one number
"""
import itertools

CATEGORICAL, NUMERICAL = "categorical", "numerical"


class RaspError(Exception):
    """Tracr's evaluator would raise on this input."""


class SOp:
    encoding = CATEGORICAL

    def children(self):
        return []

    # Tracr's operator overloads: a constant gives a Map, an SOp a SequenceMap.
    def _op(self, other, f):
        if isinstance(other, SOp):
            return SequenceMap(f, self, other)
        return Map(lambda x: f(x, other), self)

    def __eq__(self, o): return self._op(o, lambda x, y: x == y)
    def __ne__(self, o): return self._op(o, lambda x, y: x != y)
    def __lt__(self, o): return self._op(o, lambda x, y: x < y)
    def __le__(self, o): return self._op(o, lambda x, y: x <= y)
    def __gt__(self, o): return self._op(o, lambda x, y: x > y)
    def __ge__(self, o): return self._op(o, lambda x, y: x >= y)
    def __add__(self, o): return self._op(o, lambda x, y: x + y)
    def __sub__(self, o): return self._op(o, lambda x, y: x - y)
    def __mul__(self, o): return self._op(o, lambda x, y: x * y)
    def __and__(self, o): return self._op(o, lambda x, y: x and y)
    def __or__(self, o): return self._op(o, lambda x, y: x or y)
    def __invert__(self): return Map(lambda x: not x, self)
    __hash__ = object.__hash__

    def named(self, _name):
        return self


class _Tokens(SOp):
    pass


class _Indices(SOp):
    pass


tokens, indices = _Tokens(), _Indices()


class Map(SOp):
    def __init__(self, f, inner):
        self.f, self.inner = f, inner

    def children(self):
        return [self.inner]


class SequenceMap(SOp):
    def __init__(self, f, fst, snd):
        self.f, self.fst, self.snd = f, fst, snd

    def children(self):
        return [self.fst, self.snd]


def LinearSequenceMap(fst, snd, a, b):
    return SequenceMap(lambda x, y: a * x + b * y, fst, snd)


class Comparison:
    """Tracr's predicates, called with (key, query)."""
    def __init__(self, name, f):
        self.name, self.f = name, f

    def __call__(self, key, query):
        if key is None or query is None:
            raise RaspError("%s of None" % self.name)
        return self.f(key, query)


Comparison.EQ = Comparison("EQ", lambda k, q: k == q)
Comparison.NEQ = Comparison("NEQ", lambda k, q: k != q)
Comparison.LT = Comparison("LT", lambda k, q: k < q)
Comparison.LEQ = Comparison("LEQ", lambda k, q: k <= q)
Comparison.GT = Comparison("GT", lambda k, q: k > q)
Comparison.GEQ = Comparison("GEQ", lambda k, q: k >= q)
Comparison.TRUE = Comparison("TRUE", lambda k, q: True)
Comparison.FALSE = Comparison("FALSE", lambda k, q: False)


class Selector:
    def named(self, _name):
        return self


class Select(Selector):
    def __init__(self, keys, queries, predicate):
        self.keys, self.queries, self.predicate = keys, queries, predicate

    def children(self):
        return [self.keys, self.queries]


class _SelectorOp(Selector):
    def __init__(self, f, *inner):
        self.f, self.inner = f, inner

    def children(self):
        return list(self.inner)


def selector_and(a, b): return _SelectorOp(lambda x, y: x and y, a, b)
def selector_or(a, b): return _SelectorOp(lambda x, y: x or y, a, b)
def selector_not(a): return _SelectorOp(lambda x: not x, a)


class Aggregate(SOp):
    def __init__(self, selector, sop, default=None):
        self.selector, self.sop, self.default = selector, sop, default

    def children(self):
        return [self.selector, self.sop]


class SelectorWidth(SOp):
    def __init__(self, selector):
        self.selector = selector

    def children(self):
        return [self.selector]


def numerical(sop):
    sop.encoding = NUMERICAL
    return sop


def categorical(sop):
    sop.encoding = CATEGORICAL
    return sop


# ---- evaluation -------------------------------------------------------------------------

def _mean(xs, default):
    if not xs:
        return default
    if isinstance(xs[0], (bool, int)):
        return sum(xs) / len(xs)
    if len(xs) == 1:
        return xs[0]
    raise RaspError("Aggregate of several values %r" % (xs,))


def evaluate(expr, xs, memo=None):
    """The values of an SOp (a list) or a Selector (rows by query) on the input xs."""
    memo = {} if memo is None else memo
    if id(expr) in memo:
        return memo[id(expr)]
    ev = lambda e: evaluate(e, xs, memo)
    if isinstance(expr, _Tokens):
        out = list(xs)
    elif isinstance(expr, _Indices):
        out = list(range(len(xs)))
    elif isinstance(expr, Map):
        out = [None if x is None else expr.f(x) for x in ev(expr.inner)]
    elif isinstance(expr, SequenceMap):
        out = [None if x is None or y is None else expr.f(x, y)
               for x, y in zip(ev(expr.fst), ev(expr.snd))]
    elif isinstance(expr, Select):
        keys, queries = ev(expr.keys), ev(expr.queries)
        out = [[bool(expr.predicate(k, q)) for k in keys] for q in queries]
    elif isinstance(expr, _SelectorOp):
        rows = [ev(s) for s in expr.inner]
        out = [[bool(expr.f(*cells)) for cells in zip(*row)] for row in zip(*rows)]
    elif isinstance(expr, Aggregate):
        sel, vals = ev(expr.selector), ev(expr.sop)
        out = [_mean([v for s, v in zip(row, vals) if s], expr.default) for row in sel]
    elif isinstance(expr, SelectorWidth):
        out = [sum(row) for row in ev(expr.selector)]
    else:
        raise TypeError("not a RASP expression: %r" % (expr,))
    memo[id(expr)] = out
    return out


# ---- Tracr's compiled size --------------------------------------------------------------

def _nodes(sop):
    seen, order = set(), []

    def walk(e):
        if id(e) in seen:
            return
        seen.add(id(e))
        for c in e.children():
            walk(c)
        order.append(e)
    walk(sop)
    return order


def value_set(sop, vocab, max_seq_len, memo=None):
    """The values Tracr's basis inference gives an SOp: each Map applied to every value of its
    input (every pair for a SequenceMap), a categorical Aggregate the values of what it
    copies, a SelectorWidth 0..max_seq_len. A value the function raises on is left out."""
    memo = {} if memo is None else memo
    if id(sop) in memo:
        return memo[id(sop)]
    vs = lambda e: value_set(e, vocab, max_seq_len, memo)
    out = set()
    if isinstance(sop, _Tokens):
        out = set(vocab)
    elif isinstance(sop, _Indices):
        out = set(range(max_seq_len))
    elif isinstance(sop, Map):
        for x in vs(sop.inner):
            try:
                out.add(sop.f(x))
            except Exception:
                pass
    elif isinstance(sop, SequenceMap):
        for x, y in itertools.product(vs(sop.fst), vs(sop.snd)):
            try:
                out.add(sop.f(x, y))
            except Exception:
                pass
    elif isinstance(sop, Aggregate):
        out = set(vs(sop.sop))
    elif isinstance(sop, SelectorWidth):
        out = set(range(max_seq_len + 1))
    memo[id(sop)] = out
    return out


def tracr_size(sop, vocab, max_seq_len):
    """(blocks, d_model) of the model Tracr compiles from sop.

    Layers: Tracr gives every Map and SequenceMap an MLP, every Aggregate an attention layer,
    every SelectorWidth an attention layer and the MLP after it, and places each as early as
    its inputs allow in a stack that alternates attention and MLP; a block is one attention
    layer and the MLP after it. d_model: the 'one' direction, the tokens with the BOS, the
    positions (max_seq_len + 1: Tracr's figures for its own library, bench/compiled-size.md,
    fit this), one column per value of each categorical SOp, one per numerical SOp, and one
    more per SelectorWidth (the attention's output, which its MLP reads)."""
    slot = {}   # layer index: even attention, odd MLP; the inputs at -1
    d_model = 1 + len(vocab) + 1 + max_seq_len + 1
    for e in _nodes(sop):
        if isinstance(e, (_Tokens, _Indices)):
            slot[id(e)] = -1
            continue
        after = max((slot[id(c)] for c in e.children()), default=-1)
        if isinstance(e, (Map, SequenceMap)):
            s = after + 1 if after % 2 == 0 else after + 2       # the next odd slot
        elif isinstance(e, Aggregate):
            s = after + 1 if after % 2 == 1 or after < 0 else after + 2
            s = s if s % 2 == 0 else s + 1                      # the next even slot
        elif isinstance(e, SelectorWidth):
            a = after + 1 if after % 2 == 1 or after < 0 else after + 2
            a = a if a % 2 == 0 else a + 1
            s = a + 1
            d_model += 1
        else:   # a selector: no layer of its own, read by the attention that uses it
            s = after
        slot[id(e)] = s
        if isinstance(e, SOp):
            d_model += 1 if e.encoding == NUMERICAL else len(value_set(e, vocab, max_seq_len))
    return slot[id(sop)] // 2 + 1, d_model


