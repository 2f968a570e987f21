#!/usr/bin/env python3
"""Run a .tfw weight file in PyTorch, independently of tfrun.

Reads the file with nothing but json, struct and torch.frombuffer, and runs
it with the semantics docs/weight-format.md specifies. As a script it prints
what tfrun prints: each prompt followed by its generated tokens, one line per prompt,
stopping before the stop token when the model has one (for a model read at
every position: the input, a TAB and the argmax token at every position,
after the BOS position when it has a bos, or, when its output register is a
scalar and it has no unembedding, that register's value at each of those positions, separated by
spaces, each the shortest text that reads back as the same float32; for a
classifier: the input, its class and the class's probability,
tab-separated). It performs the model's run-time checks (`checks`) as tfrun
does: a prompt that fails one prints the same error on stderr instead of a
line, and the exit status is 1.

    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] PROMPT
    /usr/bin/python3 tools/tfw_torch.py WEIGHTS.tfw [-n N] --batch FILE|-

As a module (docs/python.md):

    import tfw_torch
    model = tfw_torch.load("adder.tfw")            # a torch.nn.Module
    logits, cache = model.run_with_cache("0999+0111=")
    model.run_with_hooks("0999+0111=", fwd_hooks=[("blocks.8.hook_mlp_out", fn)])
    model.generate("0001+0008=", fwd_hooks=[...])  # edited: fn(act, hook) -> act
    cache["blocks.3.hook_resid_post"]              # [1, n_pos, d_model]
    cache["blocks.0.attn.hook_pattern"]            # [1, n_heads, n_pos, n_pos]
    model.decode(cache, "carry")                   # the register, per position, in
                                                   # the last state it is live in
    model.decode(cache, "carry", state=9)          # after layer 8 (refused where not live)
    model.generate("0999+0111=")                   # "0111"
    meta, tensors = tfw_torch.read("adder.tfw")    # validated as tfrun validates

Needs Debian's python3-torch (run it with /usr/bin/python3).
"""
import argparse
import json
import math
import os
import re
import stat
import struct
import sys

import torch


class TfwError(Exception):
    pass


MAX_HEADER = 64 * 1024 * 1024  # runtime/model/tfw.h TFW_MAX_HEADER
MAX_FILE = 1 << 31  # runtime/model/tfw.h TFW_MAX_FILE
JSON_MAX_DEPTH = 32  # runtime/model/json.h
JSON_MAX_NUMBER = 40
INT32_MAX = 2**31 - 1
U64 = 2**64 - 1
REG_KINDS = ("token", "position", "scalar", "categorical")
ACTIVATIONS = ("gelu", "relu", "gelu_tanh")


def _no_pairs_twice(pairs):
    seen = set()
    for k, _ in pairs:
        if k in seen:
            raise TfwError("the key %r appears twice in one object" % k)
        seen.add(k)
    return dict(pairs)


def _number(text):
    if len(text) > JSON_MAX_NUMBER:
        raise TfwError("a number of over %d characters" % JSON_MAX_NUMBER)
    return float(text) if any(c in text for c in ".eE") else int(text)


def _constant(name):
    raise TfwError("%s is not JSON" % name)


def _check_tree(x, depth=0):
    if isinstance(x, (dict, list)):
        if depth >= JSON_MAX_DEPTH:
            raise TfwError("nesting deeper than %d" % JSON_MAX_DEPTH)
        items = x.items() if isinstance(x, dict) else ((None, v) for v in x)
        for k, v in items:
            if k is not None:
                _check_string(k)
            _check_tree(v, depth + 1)
    elif isinstance(x, str):
        _check_string(x)


def _check_string(s):
    if "\x00" in s:
        raise TfwError("the escape \\u0000 (a NUL character)")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in s):
        raise TfwError("an unpaired surrogate escape")


def strict_json(text, what):
    """JSON as runtime/model/json.c accepts it (docs/weight-format.md): RFC 8259,
    no key twice in one object, no \\u0000, no unpaired surrogate, numbers
    of at most 40 characters, nesting at most 32 deep."""
    try:
        value = json.loads(text, object_pairs_hook=_no_pairs_twice, parse_float=_number,
                           parse_int=_number, parse_constant=_constant)
        _check_tree(value)
    except (ValueError, RecursionError, TfwError) as e:
        raise TfwError("%s is not valid JSON: %s" % (what, e))
    return value


def _double(v):
    """A JSON number as C's double, or None when it is not a number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _f32(x):
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.inf


def _int(v, lo, hi):
    """json_int in runtime/model/tfw.c: a whole number in [lo, hi], else None."""
    d = _double(v)
    if d is None or not (lo <= d <= hi) or math.floor(d) != d:
        return None
    return int(d)


def _int_string(meta, key, lo, hi):
    s = meta.get(key)
    if s is None:
        raise TfwError("__metadata__.%s is missing" % key)
    if not re.fullmatch(r"-?[0-9]+", s) or not lo <= int(s) <= hi:
        raise TfwError("__metadata__.%s is %r, not an integer between %d and %d" % (key, s, lo, hi))
    return int(s)


def _meta_json(meta, key):
    if key not in meta:
        raise TfwError("__metadata__.%s is missing" % key)
    v = strict_json(meta[key], "__metadata__." + key)
    if not isinstance(v, list):
        raise TfwError("__metadata__.%s is not a JSON array" % key)
    return v


def _check_entry(name, e):
    if not name:
        raise TfwError("a tensor needs a name")
    if not isinstance(e, dict):
        raise TfwError("tensor %r: header entry is not an object" % name)
    for k in ("dtype", "shape", "data_offsets"):
        if k not in e:
            raise TfwError("tensor %r: missing %s" % (name, k))
    if e["dtype"] != "F32":
        raise TfwError("tensor %r: dtype %r is not supported (only F32)" % (name, e["dtype"]))
    shape = e["shape"]
    if not isinstance(shape, list) or not 1 <= len(shape) <= 4:
        raise TfwError("tensor %r: shape is not an array of 1 to 4 dimensions" % name)
    n, dims = 1, []
    for d in shape:
        v = _int(d, 0, 2.0**53)
        if v is None:
            raise TfwError("tensor %r: shape is not non-negative integers" % name)
        if v and n > U64 // 4 // v:
            raise TfwError("tensor %r: shape overflows" % name)
        n *= v
        dims.append(v)
    if n == 0:
        raise TfwError("tensor %r: has no elements" % name)
    offs = e["data_offsets"]
    if not isinstance(offs, list) or len(offs) != 2:
        raise TfwError("tensor %r: data_offsets is not two non-negative integers" % name)
    b, en = _int(offs[0], 0, 2.0**53), _int(offs[1], 0, 2.0**53)
    if b is None or en is None:
        raise TfwError("tensor %r: data_offsets is not two non-negative integers" % name)
    if b > en or en - b != 4 * n:
        raise TfwError("tensor %r: data_offsets do not match its shape" % name)
    return dims, b, en


LIVE_END = INT32_MAX  # runtime/model/model.h TF_LIVE_END: "live" absent, to the last state


def _live(r, i):
    """read_live in runtime/model/tfw.c: a register's optional "live",
    [from, to], two integers 0 <= from <= to (to below 2^31 - 1): the
    residual states whose columns are the register's (state 0 the
    embedding's output, state i + 1 layer i's). Absent: every state."""
    if "live" not in r:
        return 0, LIVE_END
    v = r["live"]
    a, b = (_double(v[0]), _double(v[1])) if isinstance(v, list) and len(v) == 2 else (None, None)
    if a is None or b is None or not a >= 0 or not b >= a or b > INT32_MAX - 1 or \
            a != math.floor(a) or b != math.floor(b):
        raise TfwError("__metadata__.registers[%d]: live is not [from, to], integers 0 <= from <= to" % i)
    return int(a), int(b)


def _check_registers(regs, d_model, n_vocab, n_layers):
    """read_registers in runtime/model/tfw.c and validate_registers in
    runtime/model/model.c: [(name, kind, offset, size, live_from, live_to)].
    Two registers may share a column only in states they do not both hold
    (their live ranges, live_to capped at n_layers, are disjoint)."""
    out = []
    for i, r in enumerate(regs):
        if not isinstance(r, dict):
            raise TfwError("__metadata__.registers[%d] is not an object" % i)
        name, kind = r.get("name"), r.get("kind")
        off, size = _int(r.get("offset"), 0, INT32_MAX), _int(r.get("size"), 1, INT32_MAX)
        if not isinstance(name, str) or not isinstance(kind, str) or off is None or size is None:
            raise TfwError("__metadata__.registers[%d] needs a name, a kind, an offset and a size" % i)
        if kind not in REG_KINDS:
            raise TfwError("__metadata__.registers[%d]: unknown kind %r" % (i, kind))
        if kind == "categorical":
            values = r.get("values")
            if not isinstance(values, list) or len(values) != size:
                raise TfwError("__metadata__.registers[%d]: needs %d values" % (i, size))
            if not all(isinstance(v, str) and v for v in values):
                raise TfwError("__metadata__.registers[%d]: a value is not a non-empty string" % i)
            if len(set(values)) != len(values):
                raise TfwError("register %r: a value label appears twice" % name)
        elif "values" in r:
            raise TfwError("__metadata__.registers[%d]: a %s register has no values" % (i, kind))
        out.append((name, kind, off, size) + _live(r, i))
    for i, (name, kind, off, size, lf, lt) in enumerate(out):
        if not name:
            raise TfwError("register %d has no name" % i)
        want = {"token": n_vocab, "position": 2, "scalar": 1}.get(kind, size)
        if size != want:
            raise TfwError("register %r: a %s register has %d columns, not %d" % (name, kind, want, size))
        if off > d_model - size:
            raise TfwError("register %r: columns lie outside d_model" % name)
        if lf > n_layers:
            raise TfwError("register '%s': live range %d..%d is not within states 0..%d"
                           % (name, lf, lt, n_layers))
    names = [r[0] for r in out]
    if len(set(names)) != len(names):
        raise TfwError("a register name appears twice")
    # registers_distinct: swept by offset (then declaration order), the
    # registers still open at an offset all hold that column; a pair is named
    # in declaration order.
    end = lambda j: min(out[j][5], n_layers)  # noqa: E731
    opened = []
    for i in sorted(range(len(out)), key=lambda j: (out[j][2], j)):
        opened = [j for j in opened if out[j][2] + out[j][3] > out[i][2]]
        for j in opened:
            if out[j][4] > end(i) or out[i][4] > end(j):
                continue
            a, b = min(i, j), max(i, j)
            raise TfwError("registers '%s' and '%s' overlap" % (out[a][0], out[b][0]))
        opened.append(i)
    return out


def _check_checks(meta, regs, n_layers):
    """read_checks in runtime/model/tfw.c: each run-time check names a categorical
    register, an existing layer, a line >= 0 and the op's text, and may give
    its bound, a number in [0, 0.5)."""
    if "checks" not in meta:
        return
    checks = _meta_json(meta, "checks")
    if not isinstance(checks, list):
        raise TfwError("__metadata__.checks is not a JSON array")
    kinds = {r[0]: r[1] for r in regs}
    live = {r[0]: r[4:] for r in regs}
    for i, c in enumerate(checks):
        if not isinstance(c, dict) or not isinstance(c.get("register"), str) or \
                not isinstance(c.get("op"), str) or not c["op"] or \
                _int(c.get("layer"), 0, 2**31 - 1) is None or _int(c.get("line"), 0, 2**31 - 1) is None:
            raise TfwError("__metadata__.checks[%d] needs a register, a layer, a line and an op" % i)
        if kinds.get(c["register"]) != "categorical":
            raise TfwError("__metadata__.checks[%d]: register %r is not categorical" % (i, c["register"]))
        if c["layer"] >= n_layers:
            raise TfwError("__metadata__.checks[%d]: layer %d does not exist" % (i, c["layer"]))
        lf, lt = live[c["register"]]  # validate_checks: the register holds the state it checks
        if not lf <= c["layer"] + 1 <= lt:
            raise TfwError("check %d: register '%s' does not hold its columns after layer %d"
                           % (i, c["register"], c["layer"]))
        if "bound" in c:
            b = _double(c["bound"])
            if b is None or not 0 <= b < 0.5:
                raise TfwError("__metadata__.checks[%d]: bound is not a number in [0, 0.5)" % i)


def _check_parts(l, i, kind, n):
    """read_layer_parts in runtime/model/tfw.c: a scheduled layer's optional
    parts, [{"name", "op", "line", "heads": [first, count]}] ("units" in an
    MLP), cover heads (hidden units) 0..n-1 in order, no gap, no overlap."""
    if "parts" not in l:
        return
    where = "__metadata__.layers[%d].parts" % i
    if kind == "norm":
        raise TfwError(where + ": a norm layer has no parts")
    parts = l["parts"]
    if not isinstance(parts, list) or not parts:
        raise TfwError(where + " is not a non-empty array")
    key, other, what = ("heads", "units", "head") if kind == "attention" else ("units", "heads", "hidden unit")
    covered = 0
    for j, p in enumerate(parts):
        w = "%s[%d]" % (where, j)
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            raise TfwError(w + " needs a name")
        if "op" in p and not isinstance(p["op"], str):
            raise TfwError(w + ".op is not a string")
        if "line" in p and _int(p["line"], 0, INT32_MAX) is None:
            raise TfwError(w + ".line is not a line number")
        if other in p:
            raise TfwError("%s has %s, but a part of an %s layer has %s" % (w, other, kind, key))
        r = p.get(key)
        if not isinstance(r, list) or len(r) != 2 or \
                _int(r[0], 0, INT32_MAX) is None or _int(r[1], 0, INT32_MAX) is None:
            raise TfwError("%s.%s is not two non-negative integers [first, count]" % (w, key))
        first, count = _int(r[0], 0, INT32_MAX), _int(r[1], 0, INT32_MAX)
        if count < 1:
            raise TfwError("%s.%s: a part holds at least one %s" % (w, key, what))
        if first != covered:
            raise TfwError("%s.%s starts at %s %d, not %d (the parts cover the layer's %ss in order, "
                           "no gap, no overlap)" % (w, key, what, first, covered, what))
        if count > n - first:
            raise TfwError("%s.%s [%d, %d] runs past the layer's %d %ss" % (w, key, first, count, n, what))
        covered = first + count
    if covered != n:
        raise TfwError("%s cover %ss 0 to %d of the layer's %d" % (where, what, covered - 1, n))


def _check_layers(layers, shapes, d):
    def tensor(l, i, key, optional):
        if key not in l and optional:
            return None
        v = l.get(key)
        if not isinstance(v, str):
            raise TfwError("__metadata__.layers[%d].%s is %s" % (i, key, "missing" if v is None else "not a string"))
        if v not in shapes:
            raise TfwError("__metadata__.layers[%d].%s names tensor %r, which is not in the file" % (i, key, v))
        return shapes[v]

    def shape(t, i, key, want):
        if t is not None and t != want:
            raise TfwError("layer %d: %s has shape %s, expected %s" % (i, key, t, want))

    for i, l in enumerate(layers):
        if not isinstance(l, dict) or not isinstance(l.get("kind"), str) or not isinstance(l.get("name"), str):
            raise TfwError("__metadata__.layers[%d] needs a kind and a name" % i)
        if "line" in l and _int(l["line"], 0, INT32_MAX) is None:
            raise TfwError("__metadata__.layers[%d].line is not a line number" % i)
        kind = l["kind"]
        if kind not in ("attention", "mlp", "norm"):
            raise TfwError("__metadata__.layers[%d]: unknown kind %r" % (i, kind))
        if kind == "attention":
            heads, dh, dv = _int(l.get("heads"), 1, 65536), _int(l.get("d_head"), 1, INT32_MAX), \
                _int(l.get("d_vhead"), 1, INT32_MAX)
            if heads is None or dh is None or dv is None:
                raise TfwError("__metadata__.layers[%d] needs positive integers heads, d_head, d_vhead" % i)
            scale = _double(l.get("scale"))
            if scale is None or not math.isfinite(scale):
                raise TfwError("__metadata__.layers[%d].scale is not a finite number" % i)
            if not isinstance(l.get("causal"), bool):
                raise TfwError("__metadata__.layers[%d].causal is not true or false" % i)
            ts = {k: tensor(l, i, k, k not in ("query", "key", "value"))
                  for k in ("query", "key", "value", "output", "query_bias", "key_bias", "value_bias",
                            "output_bias")}
        elif kind == "mlp":
            if l.get("activation") not in ACTIVATIONS:
                raise TfwError("__metadata__.layers[%d].activation is not one of gelu, relu, gelu_tanh" % i)
            hidden = _int(l.get("d_hidden"), 1, INT32_MAX)
            if hidden is None:
                raise TfwError("__metadata__.layers[%d].d_hidden is not a positive integer" % i)
            ts = {k: tensor(l, i, k, k.endswith("bias")) for k in ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")}
        nw = tensor(l, i, "norm_weight", kind != "norm")
        nb = tensor(l, i, "norm_bias", kind != "norm")
        eps = 1e-5
        if "norm_eps" in l:
            eps = _double(l["norm_eps"])
            if eps is None or not math.isfinite(eps) or not eps > 0:
                raise TfwError("__metadata__.layers[%d].norm_eps is not a positive number" % i)
        _check_parts(l, i, kind, heads if kind == "attention" else hidden if kind == "mlp" else 0)
        # model_validate (runtime/model/model.c)
        if (nw is None) != (nb is None):
            raise TfwError("layer %d: a LayerNorm needs both norm_weight and norm_bias" % i)
        if nw is not None:
            e32 = _f32(eps)
            if not (e32 > 0 and math.isfinite(e32)):
                raise TfwError("layer %d: LayerNorm eps must be positive" % i)
            shape(nw, i, "norm_weight", [d])
            shape(nb, i, "norm_bias", [d])
        if kind == "attention":
            if not math.isfinite(_f32(scale)):
                raise TfwError("layer %d: attention scale is not finite" % i)
            hd, hv = heads * dh, heads * dv
            for k, want in (("query", [hd, d]), ("key", [hd, d]), ("value", [hv, d]),
                            ("query_bias", [hd]), ("key_bias", [hd]), ("value_bias", [hv]),
                            ("output_bias", [d])):
                shape(ts[k], i, k, want)
            if ts["output"] is not None:
                shape(ts["output"], i, "output", [d, hv])
            elif hv != d:
                raise TfwError("layer %d: without an output tensor, heads x d_vhead must equal d_model" % i)
        elif kind == "mlp":
            for k, want in (("fc1_weight", [hidden, d]), ("fc1_bias", [hidden]),
                            ("fc2_weight", [d, hidden]), ("fc2_bias", [d])):
                shape(ts[k], i, k, want)


def check(data):
    """(metadata dict, {name: float32 tensor}) of the bytes of a .tfw file,
    validated as runtime/model/tfw.c validates them: the two readers accept exactly
    the same files (tests/tfw_diff.py). TfwError names what is wrong."""
    if len(data) < 8:
        raise TfwError("file too short")
    (n,) = struct.unpack("<Q", data[:8])
    if n == 0 or n > MAX_HEADER or n > len(data) - 8:
        raise TfwError("header length %d is 0, over the limit or past the end of the file" % n)
    try:
        text = bytes(data[8:8 + n]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise TfwError("header is not valid JSON: invalid UTF-8 (%s)" % e)
    header = strict_json(text, "header")
    if not isinstance(header, dict):
        raise TfwError("header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict):
        raise TfwError("not a tfw file: no __metadata__ object")
    base, entries = 8 + n, []
    for name, e in header.items():
        entries.append((name,) + _check_entry(name, e))
    at = 0
    for name, dims, b, en in sorted(entries, key=lambda x: x[2]):
        if b != at:
            raise TfwError("tensor %r: a gap or an overlap before it" % name)
        at = en
    if at != len(data) - base:
        raise TfwError("the tensors do not end where the file does")
    tensors, shapes = {}, {}
    for name, dims, b, en in entries:
        raw = bytearray(data[base + b:base + en])
        t = torch.frombuffer(raw, dtype=torch.float32).reshape(dims)
        if not bool(torch.isfinite(t).all()):
            raise TfwError("tensor %r: an element is not a finite number" % name)
        tensors[name], shapes[name] = t, dims
    for k, v in meta.items():
        if not isinstance(v, str):
            raise TfwError("__metadata__.%s is not a string" % k)
    if meta.get("format") != "tfw":
        raise TfwError("not a tfw file")
    if _int_string(meta, "format_version", 0, 1000000) != 1:
        raise TfwError("format_version is not supported")
    d = _int_string(meta, "d_model", 1, 1 << 24)
    _int_string(meta, "period", 1, 1 << 24)
    _int_string(meta, "generate", 0, 1 << 24)
    vocab = _meta_json(meta, "vocab")
    if not 1 <= len(vocab) <= 256:
        raise TfwError("__metadata__.vocab has %d entries, not 1 to 256" % len(vocab))
    if not all(isinstance(t, str) and t for t in vocab):
        raise TfwError("__metadata__.vocab: an entry is not a non-empty string")
    # the last output_only_tokens tokens are output-only: never typed, they may hold spaces
    n_only = _int_string(meta, "output_only_tokens", 0, len(vocab) - 1) if "output_only_tokens" in meta else 0
    if is_words(vocab) and not all(re.fullmatch(r"[^\x00-\x1f\x7f]{1,32}" if i >= len(vocab) - n_only
                                                else r"[^\x00-\x20\x7f]{1,32}", t)
                                   and len(t.encode("utf-8")) <= 32 for i, t in enumerate(vocab)):
        raise TfwError("__metadata__.vocab: an entry is not a token of a vocabulary of words")
    if n_only and meta.get("output_mode") != "every_position":
        raise TfwError("output-only tokens in a model not read at every position")
    if "bos" in meta and meta["bos"] in vocab[len(vocab) - n_only:]:
        raise TfwError("__metadata__.bos is an output-only token")
    layers = _meta_json(meta, "layers")
    regs = _check_registers(_meta_json(meta, "registers"), d, len(vocab) - n_only, len(layers))
    _check_layers(layers, shapes, d)
    if "output" in meta:
        kinds = [r[1] for r in regs if r[0] == meta["output"]]
        if not kinds:
            raise TfwError("__metadata__.output names a register which is not declared")
        if [r[5] for r in regs if r[0] == meta["output"]][0] < len(layers):
            raise TfwError("output register '%s' does not hold its columns after the last layer"
                           % meta["output"])
        if kinds[0] not in ("token", "categorical", "scalar"):
            raise TfwError("output register is not a token, categorical or scalar register")
    n_out = len(vocab)
    classify = "output_kind" in meta and meta["output_kind"] != "next_token"
    if classify:
        if meta["output_kind"] != "classify":
            raise TfwError("__metadata__.output_kind is not next_token or classify")
        if meta.get("classify_at") not in ("first", "last"):
            raise TfwError("__metadata__.classify_at is not first or last")
        classes = _meta_json(meta, "classes")
        if not 1 <= len(classes) <= 65536 or not all(isinstance(c, str) and c for c in classes):
            raise TfwError("__metadata__.classes is not 1 to 65536 non-empty strings")
        n_out = len(classes)
    every = meta.get("output_mode", "next_token")
    if every not in ("next_token", "every_position"):
        raise TfwError("__metadata__.output_mode is not next_token or every_position")
    for key in ("bos", "stop_token"):
        if key in meta and meta[key] not in vocab:
            raise TfwError("__metadata__.%s is not one token of the vocabulary" % key)
    # A model that prints a number (a scalar output read at every position,
    # no unembedding) reads its output register, not logits.
    numeric = "output" in meta and not classify and every == "every_position" and \
        "unembed.weight" not in shapes and \
        [r[1] for r in regs if r[0] == meta["output"]][0] == "scalar"
    # Any other scalar output is a `cat` register held as a number, which
    # the unembedding (with its bias) decodes into tokens.
    _check_checks(meta, regs, len(layers))
    for key in ("made_by", "learned"):  # how the file was made: JSON objects
        if key in meta and not isinstance(strict_json(meta[key], "__metadata__." + key), dict):
            raise TfwError("__metadata__.%s is not a JSON object" % key)
    if "output_error_bound" in meta:
        if not numeric:
            raise TfwError("__metadata__.output_error_bound is only for a model whose output is a number")
        text = meta["output_error_bound"]
        bound = float(text) if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text) else -1.0
        if not math.isfinite(bound) or bound < 0:
            raise TfwError("__metadata__.output_error_bound is not a number >= 0")
    for key in ("embed.token.weight", "embed.position.weight") + (() if numeric else ("unembed.weight",)):
        if key not in shapes:
            raise TfwError("tensor %r is missing" % key)
    # model_validate (runtime/model/model.c)
    if len(set(vocab)) != len(vocab):
        raise TfwError("two vocabulary entries are the same")
    if (classify and (every == "every_position" or "stop_token" in meta)) or \
            (every == "every_position" and "stop_token" in meta):
        raise TfwError("the output kind, output mode and stop token do not go together")
    max_len = shapes["embed.position.weight"][0]
    for key, want in (("embed.token.weight", [len(vocab), d]), ("embed.position.weight", [max_len, d]),
                      ("unembed.weight", [n_out, d]), ("unembed.bias", [n_out])):
        if key in shapes and shapes[key] != want:
            raise TfwError("%s has shape %s, expected %s" % (key, shapes[key], want))
    return meta, tensors


def read(path):
    """(metadata dict, {name: float32 tensor}) of a .tfw file (see check)."""
    with open(path, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode) and \
                not stat.S_ISFIFO(os.fstat(f.fileno()).st_mode):
            raise TfwError("not a regular file")
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise TfwError("over the limit of %d bytes" % MAX_FILE)
    return check(data)


def read_safetensors(path):
    """(metadata dict, {name: float32 tensor}) of a safetensors file of F32
    tensors (a .tfw, or a tfrun --dump)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise TfwError("file too short")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise TfwError("header length exceeds the file")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise TfwError("tensor %s: dtype %s" % (name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        tensors[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(entry["shape"])
    return meta, tensors


class HookPoint:
    """What a hook function receives as `hook` (as in TransformerLens):
    the activation's name, e.g. "blocks.3.attn.hook_z"."""

    def __init__(self, name):
        self.name = name

    def layer(self):
        """The block (file layer) index, or None for an embedding."""
        parts = self.name.split(".")
        return int(parts[1]) if parts[0] == "blocks" else None

    def __repr__(self):
        return "HookPoint(%r)" % self.name


class Hook:
    """Where activations go: a dict (or None: nowhere), hook functions
    (a dict name -> [fn], or None) and a name prefix."""

    def __init__(self, parent, prefix, fns=None):
        if isinstance(parent, Hook):
            self.cache, self.fns, self.prefix = parent.cache, parent.fns, parent.prefix + prefix
        else:
            self.cache, self.fns, self.prefix = parent, fns, prefix
        self.called = parent.called if isinstance(parent, Hook) else set()

    def __bool__(self):
        return self.cache is not None or bool(self.fns)


def record(hook, name, value):
    """Runs the hook functions of prefix + name on value (each may return a
    replacement), stores the result in the cache, and returns it."""
    if isinstance(hook, Hook):
        full = hook.prefix + name
        if hook.fns and full in hook.fns:
            hook.called.add(full)
            for fn in hook.fns[full]:
                new = fn(value, hook=HookPoint(full))
                if new is not None:
                    if not torch.is_tensor(new) or new.shape != value.shape:
                        raise TfwError("hook on %s returned %r, not a tensor of shape %s"
                                       % (full, type(new).__name__, list(value.shape)))
                    value = new
        if hook.cache is not None:
            hook.cache[full] = value
    elif hook is not None:
        hook[name] = value
    return value


class Transformer:
    """The transformer a .tfw describes: attention, MLP and LayerNorm layers
    (pre-norm when a layer has norm tensors), next-token or classifier output.
    Its tensors may require gradients: tools/train_torch.py trains it."""

    def __init__(self, meta, tensors):
        self.vocab = json.loads(meta["vocab"])
        self.words = is_words(self.vocab)  # prompts and outputs are words apart
        # vocab[:n_input] a prompt can hold; the rest are output-only tokens
        self.n_input = len(self.vocab) - int(meta.get("output_only_tokens", "0"))
        self.layers = json.loads(meta["layers"])
        self.generate = int(meta["generate"])
        self.t = tensors
        self.tok = tensors["embed.token.weight"]
        self.pos = tensors["embed.position.weight"]
        self.unembed = tensors.get("unembed.weight")
        self.unembed_bias = tensors.get("unembed.bias")
        self.max_len = self.pos.shape[0]
        self.classify = meta.get("output_kind") == "classify"
        self.classes = json.loads(meta["classes"]) if self.classify else None
        self.classify_at_last = meta.get("classify_at") == "last"
        mode = meta.get("output_mode", "next_token")
        if mode not in ("next_token", "every_position"):
            raise TfwError("output_mode %r is not next_token or every_position" % mode)
        self.every_position = mode == "every_position"
        self.bos = self.token_id(meta, "bos")
        self.stop_token = self.token_id(meta, "stop_token")
        regs = {r["name"]: r for r in json.loads(meta.get("registers", "[]"))}
        out = regs.get(meta.get("output"))
        # A scalar output register read at every position without an
        # unembedding: a number, no logits.
        self.numeric = self.every_position and out is not None and out["kind"] == "scalar" and \
            self.unembed is None
        self.output_column = out["offset"] if self.numeric else None
        if self.unembed is None and not self.numeric:
            raise TfwError("tensor 'unembed.weight' is missing")
        self.source_name = meta.get("source_name")
        self.checks = {}  # layer index -> [(register, line, op, bound)]
        for c in json.loads(meta.get("checks", "[]")):
            reg = regs.get(c["register"])
            if reg is None or reg["kind"] != "categorical" or not 0 <= c["layer"] < len(self.layers):
                raise TfwError("check of %r after layer %r: no such categorical register or layer"
                               % (c["register"], c["layer"]))
            # check_bound in runtime/engine/checks.c: without one, 1 / (2 max_len).
            bound = float(c["bound"]) if "bound" in c else \
                0.5 / self.max_len if self.max_len > 2 else 0.25
            self.checks.setdefault(c["layer"], []).append((reg, c["line"], c["op"], bound))

    def token_id(self, meta, key):
        """The vocabulary index of the one-token metadata string `key`, or None."""
        if key not in meta:
            return None
        if meta[key] not in self.vocab:
            raise TfwError("%s %r is not in the vocabulary" % (key, meta[key]))
        return self.vocab.index(meta[key])

    def linear(self, x, l, weight, bias):
        y = x @ self.t[l[weight]].T
        return y + self.t[l[bias]] if bias in l else y

    def norm(self, x, l):
        d = x.shape[-1]
        return torch.nn.functional.layer_norm(x, (d,), self.t[l["norm_weight"]],
                                              self.t[l["norm_bias"]], l.get("norm_eps", 1e-5))

    def attention(self, x, l, key_mask=None, scores_out=None, hook=None):
        B, L, _ = x.shape
        H, dh, dv = l["heads"], l["d_head"], l["d_vhead"]
        q = self.linear(x, l, "query", "query_bias").view(B, L, H, dh)
        k = self.linear(x, l, "key", "key_bias").view(B, L, H, dh)
        v = self.linear(x, l, "value", "value_bias").view(B, L, H, dv)
        q = record(hook, "hook_q", q)
        k = record(hook, "hook_k", k)
        v = record(hook, "hook_v", v)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * l["scale"]
        if scores_out is not None:
            scores_out.append(scores)
        if l["causal"]:
            future = torch.ones(L, L, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if key_mask is not None:  # [B, L], True where a key is padding
            scores = scores.masked_fill(key_mask[:, None, None, :], float("-inf"))
        scores = record(hook, "hook_attn_scores", scores)
        pattern = torch.softmax(scores, dim=-1)
        pattern = record(hook, "hook_pattern", pattern)
        z = (pattern @ v).transpose(1, 2)
        z = record(hook, "hook_z", z)
        heads = z.reshape(B, L, H * dv)
        if "output" in l:
            heads = heads @ self.t[l["output"]].T
        if "output_bias" in l:
            heads = heads + self.t[l["output_bias"]]
        return heads

    def mlp(self, x, l, hook=None):
        h = self.linear(x, l, "fc1_weight", "fc1_bias")
        h = record(hook, "hook_pre", h)
        act = l["activation"]
        h = (torch.nn.functional.gelu(h) if act == "gelu" else
             torch.nn.functional.gelu(h, approximate="tanh") if act == "gelu_tanh" else torch.relu(h))
        h = record(hook, "hook_post", h)
        return self.linear(h, l, "fc2_weight", "fc2_bias")

    def check(self, x, layer, failures):
        """The run-time checks after `layer` on x [B, L, d]: each sequence b
        whose checked register does not hold one value within the check's
        bound (one column within it of 1, every other of 0) at some position
        after the BOS gets failures[b], the message of its first failure (the
        earliest layer, then position)."""
        first = 1 if self.bos is not None else 0  # the BOS position holds no value
        for reg, line, op, bound in self.checks.get(layer, []):
            v = x[:, first:, reg["offset"]:reg["offset"] + reg["size"]].double()
            hot = (v - 1).abs() <= bound
            ok = (hot.sum(dim=-1) == 1) & (hot | (v.abs() <= bound)).all(dim=-1)
            for b, p in ((b, p + first) for b, p in (~ok).nonzero().tolist()):
                if b not in failures:
                    failures[b] = self.check_message(reg, line, op, bound, p, x[b, p, reg["offset"]:reg["offset"] + reg["size"]].tolist())

    def check_message(self, reg, line, op, bound, pos, v):
        """tfrun's message for a failed check (runtime/engine/checks.c)."""
        labels = reg["values"]
        warm = [i for i in range(len(v)) if not abs(v[i]) <= bound]
        rank = lambda i: (0 if math.isnan(v[i]) else 1, -v[i] if not math.isnan(v[i]) else 0)
        warm.sort(key=rank)
        held = ", ".join("%s %.2f" % (labels[i], v[i]) for i in warm[:4])
        if len(warm) > 4:
            held += ", %d more" % (len(warm) - 4)
        if not warm:
            largest = min(range(len(v)), key=rank)
            held = "no value above %.2g; the largest %s %.2f" % (bound, labels[largest], v[largest])
        if self.source_name:
            where = "%s:%d" % (self.source_name, line) if line > 0 else self.source_name
        else:
            where = "line %d" % line
        return ("%s: %s: position %d does not hold one value within %.2g (%s); the compiler could "
                "not prove it" % (where, op, pos, bound, held))

    def layer(self, x, l, block=None, key_mask=None, dropout=0.0, scores_out=None):
        """One layer l of the file on the residual stream x [B, L, d]; its
        activations go to the Hook `block` ("blocks.<i>.")."""
        x = record(block, "hook_resid_pre", x)
        if l["kind"] == "norm":
            x = self.norm(x, l)
            return record(block, "hook_resid_post", x)
        attn = l["kind"] == "attention"
        h = x
        if "norm_weight" in l:
            h = self.norm(x, l)
            h = record(block, "ln1.hook_normalized" if attn else "ln2.hook_normalized", h)
        if attn:
            y = self.attention(h, l, key_mask, scores_out, Hook(block, "attn."))
        else:
            y = self.mlp(h, l, Hook(block, "mlp."))
        y = record(block, "hook_attn_out" if attn else "hook_mlp_out", y)
        if dropout > 0:
            y = torch.nn.functional.dropout(y, dropout, training=True)
        x = x + y
        return record(block, "hook_resid_post", x)

    def hidden(self, ids, key_mask=None, dropout=0.0, scores_out=None, failures=None, cache=None):
        """ids [B, L] -> the residual stream after the last layer [B, L, d].
        With a dict `failures`, performs the run-time checks (check); with a
        dict `cache` (or a Hook, which may carry hook functions), every named
        activation goes into it (docs/python.md)."""
        L = ids.shape[1]
        top = cache if isinstance(cache, Hook) else Hook(cache, "")
        emb, pos = self.tok[ids], self.pos[:L].unsqueeze(0)
        emb = record(top, "hook_embed", emb)
        pos = record(top, "hook_pos_embed", pos.expand_as(emb))
        x = emb + pos
        for i, l in enumerate(self.layers):
            x = self.layer(x, l, Hook(top, "blocks.%d." % i), key_mask, dropout, scores_out)
            if failures is not None and i in self.checks:
                self.check(x, i, failures)
        if self.layers and self.layers[-1]["kind"] == "norm":
            x = record(top, "ln_final.hook_normalized", x)
        return x

    def logits(self, x):
        y = x @ self.unembed.T
        return y + self.unembed_bias if self.unembed_bias is not None else y

    def next_tokens(self, ids, failures=None):
        """ids [B, L] -> greedy next token id of each sequence [B]."""
        return self.logits(self.hidden(ids, failures=failures)[:, -1]).argmax(dim=-1)  # the first maximum on ties

    def every_position_tokens(self, ids, failures=None):
        """ids [B, L] -> the argmax token at every position [B, L]."""
        return self.logits(self.hidden(ids, failures=failures)).argmax(dim=-1)

    def every_position_values(self, ids, failures=None):
        """ids [B, L] -> the output register's value at every position [B, L]."""
        return self.hidden(ids, failures=failures)[:, :, self.output_column]

    def classify_probs(self, ids):
        """ids [B, L] (one length) -> class probabilities [B, n_classes]."""
        x = self.hidden(ids)
        x = x[:, -1] if self.classify_at_last else x[:, 0]
        return torch.softmax(self.logits(x), dim=-1)


class Model(torch.nn.Module):
    """A .tfw file as a torch.nn.Module (load() makes one).

    Every tensor of the file is a parameter (frozen: model.requires_grad_()
    to differentiate), named as in the file with '.' replaced by '__'
    (model.tensor(name) finds it by its file name). forward takes a prompt
    (str), a list of prompts of one length, or token ids [batch, pos], and
    returns the logits at every position [batch, pos, outputs] (outputs: the
    vocabulary, or the classes of a classifier; for a model that prints a
    number, its output register's value at every position [batch, pos]); with return_cache=True it
    returns (logits, cache): a dict of named activations, one "block" per
    layer of the file (docs/python.md lists the names)."""

    def __init__(self, meta, tensors):
        super().__init__()
        params = {}
        for name, t in tensors.items():
            if name.startswith("optim."):
                continue
            p = torch.nn.Parameter(t, requires_grad=False)
            self.register_parameter(name.replace(".", "__"), p)
            params[name] = p
        self.meta = meta
        self.tf = Transformer(meta, params)
        self.vocab = self.tf.vocab
        self.registers = {r["name"]: r for r in json.loads(meta.get("registers", "[]"))}
        self.period = int(meta.get("period", self.tf.max_len))
        self.layers = self.tf.layers
        self.cfg = {
            "n_layers": len(self.layers), "d_model": int(meta["d_model"]),
            "n_ctx": self.tf.max_len, "d_vocab": len(self.vocab),
            "d_vocab_out": self.tf.unembed.shape[0], "classes": self.tf.classes,
            "layer_kinds": [l["kind"] for l in self.layers],
            "made_by": json.loads(meta["made_by"]) if "made_by" in meta else None,
            "learned": json.loads(meta["learned"]) if "learned" in meta else None,
        }

    def tensor(self, name):
        """The parameter holding the file's tensor `name`."""
        return self.tf.t[name]

    def to_tokens(self, text):
        """A prompt (or a list of prompts of one length) as ids [batch, pos]."""
        texts = [text] if isinstance(text, str) else list(text)
        ids = [tokenize(self.tf, t, "prompt %d" % i) for i, t in enumerate(texts)]
        if len({len(x) for x in ids}) != 1 or not ids[0]:
            raise TfwError("give non-empty prompts of one length")
        if len(ids[0]) > self.tf.max_len:
            raise TfwError("%d tokens exceed the %d positions" % (len(ids[0]), self.tf.max_len))
        return torch.tensor(ids, dtype=torch.long)

    def forward(self, tokens, return_cache=False, fwd_hooks=()):
        ids = self.to_tokens(tokens) if not torch.is_tensor(tokens) else tokens
        cache = {} if return_cache else None
        fns = {}
        for name, fn in fwd_hooks:
            fns.setdefault(name, []).append(fn)
        hook = Hook(cache, "", fns)
        x = self.tf.hidden(ids, cache=hook)
        missing = sorted(set(fns) - hook.called)
        if missing:
            raise TfwError("no activation is named %s (run_with_cache's names are)"
                           % ", ".join(missing))
        # A model that prints a number has no unembedding: its output register.
        out = x[:, :, self.tf.output_column] if self.tf.numeric else self.tf.logits(x)
        return (out, cache) if return_cache else out

    def run_with_cache(self, tokens):
        """(logits, cache), as TransformerLens's run_with_cache."""
        return self.forward(tokens, return_cache=True)

    def run_with_hooks(self, tokens, fwd_hooks=(), return_cache=False):
        """The logits with hook functions run on the way, as TransformerLens's
        run_with_hooks: fwd_hooks is a list of (name, fn), name one of
        run_with_cache's names ("blocks.5.attn.hook_z"); fn(activation,
        hook) sees the activation (hook.name names it) and may return a
        tensor of the same shape, which replaces it for everything after.
        With return_cache, (logits, cache) of the edited run."""
        return self.forward(tokens, return_cache=return_cache, fwd_hooks=fwd_hooks)

    def generate(self, text, n=None, fwd_hooks=()):
        """The completion of one prompt, as tfrun prints it after the prompt
        (for an every-position model: the tokens at each position; for a
        classifier: the class name). With fwd_hooks (run_with_hooks), every
        step's pass runs them: the edited model's completion."""
        with torch.no_grad():
            ids = self.to_tokens(text)
            if fwd_hooks:
                return self._generate_hooked(ids, self.tf.generate if n is None else n, fwd_hooks)
            if self.tf.classify:
                return self.tf.classes[int(self.tf.classify_probs(ids)[0].argmax())]
            toks = run(self.tf, [ids[0].tolist()], self.tf.generate if n is None else n, 1)[0]
        if isinstance(toks, str):  # a run-time check failed
            raise TfwError(toks)
        if self.tf.every_position and self.tf.bos is not None:
            toks = toks[1:]
        if self.tf.numeric:
            return " ".join(value_text(v) for v in toks)
        return tokens_text(self.tf, toks)

    def _generate_hooked(self, ids, n, fwd_hooks):
        """generate() of a next-token model, one hooked pass per step."""
        if self.tf.classify or self.tf.every_position:
            raise TfwError("generate with hooks: a model that generates (use run_with_hooks)")
        length = ids.shape[1]
        steps = n if self.tf.stop_token is None else min(n, self.tf.max_len - length + 1)
        for _ in range(steps):
            logits = self.run_with_hooks(ids, fwd_hooks)
            nxt = int(logits[0, -1].argmax())
            if nxt == self.tf.stop_token:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        return tokens_text(self.tf, ids[0, length:].tolist())

    def live(self, register):
        """(first, last): the residual states in which `register` holds its
        columns (the file's "live", its end capped at the last state;
        (0, n_layers) when the file gives none). State 0 is the embedding's
        output, state i + 1 layer i's (blocks.{i}.hook_resid_post); outside
        these states the columns may be another register's."""
        r = self._register(register)
        n = len(self.layers)
        live = r.get("live", [0, n])  # validated: integers (perhaps written 2.0)
        return int(live[0]), min(int(live[1]), n)

    def registers_at(self, state):
        """The names of the registers that hold their columns in residual
        state `state` (0 .. n_layers), in the file's order."""
        self._state(state)
        return [name for name in self.registers if self.live(name)[0] <= state <= self.live(name)[1]]

    def state_hook(self, state):
        """The cache's name of residual state `state`: blocks.0.hook_resid_pre
        for 0 (the embedding's output), blocks.{state-1}.hook_resid_post
        after (None for state 0 of a model without layers: hook_embed +
        hook_pos_embed)."""
        self._state(state)
        if state == 0:
            return "blocks.0.hook_resid_pre" if self.layers else None
        return "blocks.%d.hook_resid_post" % (state - 1)

    def hook_state(self, hook):
        """The residual state of the d_model-wide activation `hook`:
        hook_embed and hook_pos_embed (its two parts) 0; blocks.{i}.hook_resid_pre
        and blocks.{i}.ln1/ln2.hook_normalized (layer i's input) i;
        blocks.{i}.hook_resid_post and what layer i adds (hook_attn_out,
        hook_mlp_out) i + 1; ln_final.hook_normalized n_layers. None for a
        name the module does not make (a cache of your own); TfwError for
        one of its activations that is no residual stream (hook_q, ...)."""
        n = len(self.layers)
        if hook in ("hook_embed", "hook_pos_embed"):
            return 0
        if hook == "ln_final.hook_normalized":
            return n
        m = re.fullmatch(r"blocks\.([0-9]+)\.(.+)", hook)
        if not m or int(m.group(1)) >= n:
            return None
        i, rest = int(m.group(1)), m.group(2)
        if rest in ("hook_resid_pre", "ln1.hook_normalized", "ln2.hook_normalized"):
            return i
        if rest in ("hook_resid_post", "hook_attn_out", "hook_mlp_out"):
            return i + 1
        raise TfwError("%s is not a residual stream (no register is read from it)" % hook)

    def _register(self, register):
        if register not in self.registers:
            raise TfwError("no register %r (the registers: %s)"
                           % (register, ", ".join(self.registers) or "none"))
        return self.registers[register]

    def _state(self, state):
        n = len(self.layers)
        if isinstance(state, bool) or not isinstance(state, int) or not 0 <= state <= n:
            raise TfwError("state %r is not a residual state 0..%d (0 the embedding's output, "
                           "i + 1 layer i's)" % (state, n))

    def decode(self, cache, register, hook=None, batch=0, state=None):
        """Register `register` read at every position of one residual state,
        as tfrun --trace reads it: a token register gives its argmax token, a
        categorical one its value label (None when all near 0), a position
        register the position it points to (an int when within 0.1 of one,
        else a float; None when near 0), a scalar its value.

        A register holds its columns only in the states of its live range
        (live(register); the columns may be another register's in the
        others), so the state is always known and checked:

        - neither hook nor state: the last state the register is live in,
          its final value (after the last layer for a register live to the
          end; a register the compiler retires earlier is read where it
          was last held, not from columns another register took);
        - state=s: that state of the cache (state_hook(s));
        - hook=name: that activation of the cache, of the state hook_state
          gives (state=, when also given, must agree, and gives the state
          of a name of your own);
        - cache may also be one residual stream, a tensor [batch, pos,
          d_model] or [pos, d_model] (a TransformerLens run's, say), with
          state= saying which state it is.

        A state in which the register is not live is refused (TfwError
        naming the register and its live range), as is a stream whose state
        is unknown, unless the register is live in every state."""
        r = self._register(register)
        lo, hi = self.live(register)
        n = len(self.layers)
        if state is not None:
            self._state(state)
        if torch.is_tensor(cache):
            if hook is not None:
                raise TfwError("decode: hook names an activation of a cache; this is a tensor")
            x, where = cache if cache.dim() == 2 else cache[batch], "the tensor"
        else:
            if hook is None:
                hook = self.state_hook(hi if state is None else state)
            known = self.hook_state(hook) if hook is not None else 0
            if state is not None and known is not None and known != state:
                raise TfwError("decode: %s is residual state %d, not state %d" % (hook, known, state))
            state = known if state is None else state
            if hook is None:  # state 0 of a model without layers
                x, where = cache["hook_embed"][batch] + cache["hook_pos_embed"][batch], "state 0"
            elif hook not in cache:
                raise TfwError("decode: the cache has no %s" % hook)
            else:
                x, where = cache[hook][batch], hook
        if state is None and (lo, hi) != (0, n):
            raise TfwError("register '%s' holds its columns in states %d..%d only, and which state "
                           "%s is is unknown: give state=" % (register, lo, hi, where))
        if state is not None and not lo <= state <= hi:
            raise TfwError("register '%s' holds its columns in states %d..%d only (state 0 the "
                           "embedding's output, i + 1 layer i's), not in state %d (%s): they may be "
                           "another register's there" % (register, lo, hi, state, where))
        x = x.detach().double()
        if x.dim() != 2 or x.shape[-1] != int(self.cfg["d_model"]):
            raise TfwError("decode: %s is %s, not a residual stream [pos, %d]"
                           % (where, list(x.shape), self.cfg["d_model"]))
        cols = x[:, r["offset"]:r["offset"] + r["size"]]
        out = []
        for row in cols:
            if r["kind"] == "scalar":
                out.append(float(row[0]))
            elif r["kind"] == "position":
                if float(row.norm()) < 0.01:
                    out.append(None)
                    continue
                p = math.atan2(float(row[0]), float(row[1])) * self.period / (2 * math.pi) % self.period
                near = round(p) % self.period
                out.append(near if abs(p - round(p)) <= 0.1 else p)
            else:
                if float(row.abs().max()) < 0.01:
                    out.append(None)
                    continue
                i = int(row.argmax())
                out.append(self.vocab[i] if r["kind"] == "token" else r["values"][i])
        return out


def load(path):
    """The .tfw file at path as a Model (a torch.nn.Module)."""
    return Model(*read(path))


def is_words(vocab):
    """Whether a vocabulary is of words (some token is not one byte): its
    prompts and outputs are tokens separated by spaces."""
    return any(len(t.encode("utf-8")) != 1 for t in vocab)


def tokens_text(model, toks):
    """Token ids as tfrun prints them: characters (escaped) one after the
    other, or words separated by single spaces."""
    if model.words:
        return " ".join(model.vocab[t] for t in toks)
    return "".join(token_text(model.vocab[t]) for t in toks)


def token_text(tok):
    """A generated token as tfrun prints it."""
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}
    if tok in escapes:
        return escapes[tok]
    if ord(tok) < 0x20 or ord(tok) >= 0x7F:
        return "\\x%02x" % ord(tok)
    return tok


def value_text(v):
    """A float32 value as tfrun prints it (model_value_text): the shortest
    "%.{1..9}g" that reads back as the same float32, a number from 1 to 1e16
    written out ("10", not "1e+01")."""
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


def tokenize(model, prompt, where):
    index = {t: i for i, t in enumerate(model.vocab)}
    ids = []
    if model.words:  # words between spaces, tabs and line ends
        for i, w in enumerate(w for w in re.split(r"[ \t\r\n]+", prompt) if w):
            if w not in index:
                raise TfwError("%s: word %d %r is not in the vocabulary" % (where, i + 1, w))
            if index[w] >= model.n_input:
                raise TfwError("%s: word %d %r is an output-only token: outputs print it, no prompt "
                               "holds it" % (where, i + 1, w))
            ids.append(index[w])
        return ids
    for i, c in enumerate(prompt):
        if c not in index:
            raise TfwError("%s: character %r at index %d is not in the vocabulary" % (where, c, i))
        if index[c] >= model.n_input:
            raise TfwError("%s: character %r at index %d is an output-only token: outputs print "
                           "it, no prompt holds it" % (where, c, i))
        ids.append(index[c])
    return ids


def run(model, prompts, n_new, batch):
    """The outputs of each prompt, in input order, running equal-length
    prompts together: the generated tokens (cut before the first stop token,
    and at most as many as the position encoding allows, when the model has
    one), or for an every-position model the token (or value) at every
    position; a prompt that fails a run-time check gets its message (a str)."""
    by_len = {}
    for i, ids in enumerate(prompts):
        by_len.setdefault(len(ids), []).append(i)
    out = {}
    for length, members in by_len.items():
        for start in range(0, len(members), batch):
            chunk = members[start:start + batch]
            ids = torch.tensor([prompts[i] for i in chunk], dtype=torch.long).reshape(len(chunk), length)
            failures = {}
            if model.every_position:
                if model.numeric:
                    toks = model.every_position_values(ids, failures)
                else:
                    toks = model.every_position_tokens(ids, failures)
                for row, i in enumerate(chunk):
                    out[i] = failures.get(row, toks[row].tolist())
                continue
            steps = n_new
            if model.stop_token is not None:
                steps = min(n_new, model.max_len - length + 1)
            for _ in range(steps):
                ids = torch.cat([ids, model.next_tokens(ids, failures).unsqueeze(1)], dim=1)
                if model.stop_token is not None and bool((ids[:, length:] == model.stop_token).any(dim=1).all()):
                    break
            for row, i in enumerate(chunk):
                toks = ids[row, length:].tolist()
                if model.stop_token is not None and model.stop_token in toks:
                    toks = toks[:toks.index(model.stop_token)]
                out[i] = failures.get(row, toks)
    return [out[i] for i in range(len(prompts))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("prompt", nargs="?")
    ap.add_argument("-n", type=int, default=None, help="tokens to generate")
    ap.add_argument("--batch", help="file of prompts, one per line ('-': standard input)")
    ap.add_argument("--batch-size", type=int, default=512)
    args = ap.parse_intermixed_args()
    if (args.prompt is None) == (args.batch is None):
        ap.error("give a prompt or --batch")
    torch.set_num_threads(2)
    try:
        model = Transformer(*read(args.weights))
    except (OSError, ValueError, KeyError, TfwError) as e:
        print("tfw_torch: %s: %s" % (args.weights, e), file=sys.stderr)
        return 1
    n_new = model.generate if args.n is None else args.n
    if args.batch is None:
        texts, wheres = [args.prompt], ["prompt"]
    else:
        f = sys.stdin if args.batch == "-" else open(args.batch)
        texts = [line[:-1] if line.endswith("\n") else line for line in f]
        wheres = ["line %d" % (i + 1) for i in range(len(texts))]
    status, ok_texts, ok_wheres, prompts = 0, [], [], []
    for text, where in zip(texts, wheres):
        try:
            ids = tokenize(model, text, where) if model.words else None
            if not text or ids == []:
                raise TfwError("%s: empty prompt" % where)
            one_pass = model.classify or model.every_position or model.stop_token is not None
            # The last generated token is never fed back: prompt + n_new - 1 rows.
            if len(ids or text) + (0 if one_pass else n_new - 1) > model.max_len:
                raise TfwError("%s: too long for the position encoding" % where)
            ids = ids or tokenize(model, text, where)
            if model.bos is not None and ids[0] != model.bos:
                raise TfwError("%s: the input must start with the beginning-of-sequence token %r"
                               % (where, model.vocab[model.bos]))
            prompts.append(ids)
            ok_texts.append(text)
            ok_wheres.append(where)
        except TfwError as e:
            print("tfw_torch: %s" % e, file=sys.stderr)
            status = 1
    if model.classify:
        with torch.no_grad():
            for text, ids in zip(ok_texts, prompts):
                p = model.classify_probs(torch.tensor([ids], dtype=torch.long))[0]
                c = int(p.argmax())
                print("%s\t%s\t%.4f" % (text, model.classes[c], float(p[c])))
        return status
    with torch.no_grad():
        generated = run(model, prompts, n_new, args.batch_size)
    for text, where, toks in zip(ok_texts, ok_wheres, generated):
        if isinstance(toks, str):  # a run-time check failed
            print("tfw_torch: %s%s" % ("" if args.batch is None else where + ": ", toks),
                  file=sys.stderr)
            status = 1
            continue
        start = 1 if model.bos is not None else 0
        if model.numeric:
            print(text + "\t" + " ".join(value_text(v) for v in toks[start:]))
        elif model.every_position:
            print(text + "\t" + tokens_text(model, toks[start:]))
        else:
            print(text + (" " if model.words and toks else "") + tokens_text(model, toks))
    return status


if __name__ == "__main__":
    sys.exit(main())
