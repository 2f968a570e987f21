#!/usr/bin/env python3
"""prove_mutations.py BUILD_DIR [options]: the mutation test of the validator
(issue 22; compiler/prove.h, tfprove).

For each library program that tfprove proves (compiled by tfc), it makes
single-weight mutations of the weight file and asks tfprove about each:

  kinds   sign (w -> -w), scale (w -> f w, f in 0, 0.5, 0.9, 1.01, 1.1, 2,
          10) of one nonzero weight of any tensor (embeddings, layers,
          unembedding, shared biases); two rows of a tensor swapped; two
          attention heads' queries swapped (head i's query meets head j's
          keys), or two whole heads swapped (query, key, value and output:
          the same function, which must stay proven)

and runs the original and the mutated weights (tfrun --batch) on every
prompt up to a small length and on random longer ones, up to maxlen. Each
mutation is then one of:

  proven                  tfprove proves it: no prompt may print anything
                          else than the original (else: a soundness bug),
                          but a run-time check may fail where it passed
                          (loud: the proof holds where the program's
                          checks pass, docs/language.md)
  counterexample          tfprove names a prompt on which the weights print
                          something else than the program: tfrun must
                          confirm it (the mutated weights print what tfprove
                          says, the original weights, which are proven, print
                          something else), else: a bug
  not proven              refused without a counterexample (the margin is
                          what is not proven, no prompt reaches the case, a
                          part it cannot prove): honest only when no prompt
                          run here prints anything else; a prompt that does
                          is a missed counterexample (a failure)
  loud                    the only change on the prompts run: a run-time
                          check now fails (an error, never a wrong answer)

"changed" means some prompt prints something else (or tfprove's confirmed
counterexample shows one). The run fails (exit 1) on a soundness bug, an
unconfirmed counterexample or a missed one, or when it checked nothing.
It prints one line per program (mutations, changed, refused, confirmed
counterexamples, not proven, changed nothing) and the totals.

  --programs a,b     these programs (default: a few quick ones, CI)
  --all              every library program (but the slow ones: --slow too)
  --mutations N      mutations per program (default 8; --full: 100)
  --full             --all --mutations 100 (the figures for the issue)
  --level L          tfc's level (default -O)
  --seed S           the random seed (default 22)
  --short N          at most N prompts of every length up to the longest
                     that fits (default 1500); --random N more, random (200)
  --timeout S        seconds per tfprove (default 120: then "timed out")
  --keep DIR         keep the mutated files that fail
  --verbose          one line per mutation
"""
import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = ["count_token", "length", "reverse", "histogram", "frac_prevs", "balance", "add_binary",
         "add10"]
SLOW = {"add_decimal16", "sort_case"}  # add_decimal16: the slowest proof; sort_case: a refusal's
# counterexample search (tfprove running its 1M-parameter model on prompts up to 30 letters) runs past
# the timeout (the proof itself: about a second)
FACTORS = [0.0, 0.5, 0.9, 1.01, 1.1, 2.0, 10.0]


class Tfw:
    """A .tfw read as safetensors: the header kept as written, tensors as arrays."""

    def __init__(self, path):
        data = open(path, "rb").read()
        n = struct.unpack("<Q", data[:8])[0]
        self.prefix = data[:8 + n]
        self.header = json.loads(data[8:8 + n])
        self.body = bytearray(data[8 + n:])
        self.meta = self.header["__metadata__"]

    def names(self):
        return sorted(k for k in self.header if k != "__metadata__")

    def get(self, name):
        t = self.header[name]
        a, b = t["data_offsets"]
        return np.frombuffer(bytes(self.body[a:b]), dtype="<f4").reshape(t["shape"]).copy()

    def put(self, name, arr):
        a, b = self.header[name]["data_offsets"]
        self.body[a:b] = np.ascontiguousarray(arr, dtype="<f4").tobytes()

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.prefix + bytes(self.body))


def mutate(base_path, out_path, rnd):
    """One mutation of base_path into out_path; returns what it did."""
    w = Tfw(base_path)
    layers = json.loads(w.meta.get("layers", "[]"))
    multi = [l for l in layers if l.get("kind") == "attention" and l.get("heads", 1) > 1]
    kind = rnd.random()
    if multi and kind < 0.1:
        l = rnd.choice(multi)
        h1, h2 = rnd.sample(range(l["heads"]), 2)
        whole = kind < 0.04
        dh, dv = l["d_head"], l["d_vhead"]
        blocks = [("query", dh, 0), ("query_bias", dh, 0)]
        if whole:
            blocks += [("key", dh, 0), ("key_bias", dh, 0), ("value", dv, 0), ("value_bias", dv, 0),
                       ("output", dv, 1)]
        for field, size, axis in blocks:
            if not l.get(field):
                continue
            t = w.get(l[field])
            a = t if axis == 0 else t.T
            s1, s2 = slice(h1 * size, (h1 + 1) * size), slice(h2 * size, (h2 + 1) * size)
            tmp = a[s1].copy()
            a[s1] = a[s2]
            a[s2] = tmp
            w.put(l[field], t)
        w.write(out_path)
        what = "whole heads" if whole else "the queries of heads"
        return "%s %d and %d of layer '%s' swapped" % (what, h1, h2, l["name"])
    names = [n for n in w.names() if np.any(w.get(n) != 0)]
    name = rnd.choice(names)
    t = w.get(name)
    if kind < 0.25 and t.ndim == 2 and t.shape[0] > 1:
        rows = [r for r in range(t.shape[0])]
        for _ in range(20):  # two rows that differ (swapping equal rows changes nothing)
            r1, r2 = rnd.sample(rows, 2)
            if np.any(t[r1] != t[r2]):
                break
        t[[r1, r2]] = t[[r2, r1]]
        w.put(name, t)
        w.write(out_path)
        return "rows %d and %d of %s swapped" % (r1, r2, name)
    flat = t.reshape(-1)
    nz = np.flatnonzero(flat)
    i = int(nz[rnd.randrange(len(nz))])
    f = -1.0 if kind < 0.5 else rnd.choice(FACTORS)
    old = float(flat[i])
    flat[i] = np.float32(old * f)
    w.put(name, t)
    w.write(out_path)
    return "%s[%d] = %.9g times %g" % (name, i, old, f)


def prompts_for(w, n_short, n_random, rnd):
    """Every prompt up to the longest length whose prompts fit n_short in
    all, then n_random random ones up to maxlen (the BOS first; a generating
    model's leave room for what it generates). No prompt holds a line break
    (a --batch line cannot)."""
    vocab = json.loads(w.meta["vocab"])
    bos = w.meta.get("bos")
    maxlen = w.header["embed.position.weight"]["shape"][0]
    words = any(len(t) != 1 for t in vocab)
    alph = [t for t in vocab if t != bos and "\n" not in t and "\r" not in t]
    sep = " " if words else ""
    head = (bos + sep) if bos is not None else ""
    gen = w.meta.get("output_mode", "next_token") == "next_token"
    longest = maxlen - (1 if bos is not None else 0) - (max(int(w.meta.get("generate", "0") or 0), 0) if gen else 0)
    out, level = [], [[]]
    for n in range(1, longest + 1):
        level = [p + [t] for p in level for t in alph]
        if len(out) + len(level) > n_short:
            break
        out += level
    short = max((len(p) for p in out), default=0)
    for _ in range(n_random):
        n = rnd.randint(min(short + 1, longest), longest)
        if rnd.random() < 0.5:  # two tokens mixed: long runs, Counts far from 0
            a, b = rnd.choice(alph), rnd.choice(alph)
            cut = rnd.random()
            out.append([a if rnd.random() < cut else b for _ in range(n)])
        else:
            out.append([rnd.choice(alph) for _ in range(n)])
    return [head + sep.join(p) for p in out], short


def seed_prompts(w, facts, n, rnd):
    """A seed program's prompts: tfprove proves it under input facts (its
    first line: "input facts: '+', '=' once each at or before the last
    position, in any order; ...; Multiply reads digits ..."), so only prompts
    that hold them say anything of the proof: digits, each of those tokens
    once, in the order listed, at least 4 digits before each (every position
    a GetRelativeToken reads exists) and 0 to 4 digits after the last, room
    left for what the model generates."""
    head = facts.split("once each")[0]
    anchors = re.findall(r"'([^']+)'", head)
    vocab = json.loads(w.meta["vocab"])
    digits = [t for t in vocab if t.isdigit()]
    maxlen = w.header["embed.position.weight"]["shape"][0]
    room = maxlen - max(int(w.meta.get("generate", "0") or 0), 0)
    out = set()
    for _ in range(50 * n):
        if len(out) >= n:
            break
        parts = [rnd.randint(4, 12) for _ in anchors] + [rnd.choice([0, 0, 1, 2, 3, 4])]
        if sum(parts) + len(anchors) > room:
            continue
        text = ""
        for i, k in enumerate(parts):
            text += "".join(rnd.choice(digits) for _ in range(k)) + (anchors[i] if i < len(anchors) else "")
        out.add(text)
    return sorted(out)


def run_batch(tfrun, path, prompts, tmp):
    """prompt -> printed output ('ERROR': the prompt failed a run-time check).

    tfrun --batch prints one line per prompt that runs, in order (PROMPT<TAB>
    OUTPUT, or a generating model's PROMPT followed by what it generated) and
    names each one that does not on stderr by its line number."""
    inp = os.path.join(tmp, "prompts.txt")
    with open(inp, "w") as f:
        f.write("".join(p + "\n" for p in prompts))
    r = subprocess.run([tfrun, path, "--batch", inp], capture_output=True, text=True,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    failed = {int(m.group(1)) for m in re.finditer(r"^tfrun: [^\n]*?:(\d+): ", r.stderr, re.M)}
    ran = [p for i, p in enumerate(prompts, 1) if i not in failed]
    lines = r.stdout.splitlines()
    if len(lines) != len(ran):
        raise RuntimeError("tfrun --batch printed %d lines for %d prompts that ran (%s)" % (
            len(lines), len(ran), r.stderr.strip().splitlines()[-1:]))
    got = {p: "ERROR" for p in prompts}
    for p, line in zip(ran, lines):
        if not line.startswith(p):
            raise RuntimeError("tfrun --batch printed %r for the prompt %r" % (line, p))
        got[p] = line[len(p) + 1:] if line[len(p):len(p) + 1] == "\t" else line[len(p):]
    return got


def run_next(tfrun, path, prompt):
    """The next token a generating model gives after prompt (tfrun -n 1), or
    'ERROR'."""
    r = subprocess.run([tfrun, path, "-n", "1", "--", prompt], capture_output=True, text=True,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    out = r.stdout.rstrip("\n")
    return out[len(prompt):].strip() if r.returncode == 0 and out.startswith(prompt) else "ERROR"


def same(a, b, numeric, bound):
    if a == b:
        return True
    if not numeric or "ERROR" in (a, b):
        return False
    try:
        x, y = [float(v) for v in a.split()], [float(v) for v in b.split()]
    except ValueError:
        return False
    # Both within the proven bound of the program's value: not a change.
    return len(x) == len(y) and all(abs(u - v) <= 2 * bound for u, v in zip(x, y))


def parse_counterexample(text):
    """(prompt, what the weights print, whether that is the next token) from
    tfprove's counterexample line: "... the weights print '...')" for every
    position, "the program gives 'a' next, the weights 'b'" for a generating
    model (seed programs included); "the weights stop: ..." (a run-time check
    fails where the program answers) is 'ERROR', as run_batch reads it."""
    for line in text.splitlines():
        if line.startswith("counterexample: prompt '"):
            rest = line[len("counterexample: prompt '"):]
            prompt = rest[:rest.index("': ")]
            weights, nxt = None, False
            k = rest.rfind("the weights '")
            if "the weights stop: " in rest:  # a run-time check fails where the program answers
                weights, nxt = "ERROR", "' next, the weights stop: " in rest
            elif k >= 0 and rest.endswith("')"):
                weights = rest[k + len("the weights '"):-2]
            elif k >= 0 and "' next, the weights '" in rest and rest.endswith("'"):
                weights, nxt = rest[k + len("the weights '"):-1], True
            return prompt, weights, nxt
    return None, None, False


def one_program(a, prog, tmp, rnd, totals):
    tfc, tfprove, tfrun = (os.path.join(a.build, t) for t in ("tfc", "tfprove", "tfrun"))
    base = os.path.join(tmp, prog + ".tfw")
    r = subprocess.run([tfc, a.level, os.path.join(SRC, "programs", prog + ".tfp"), "-o", base],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("%-16s not compiled: %s" % (prog, r.stderr.strip().splitlines()[-1:]))
        return
    try:
        r = subprocess.run([tfprove, base], capture_output=True, text=True, timeout=a.timeout * 4)
    except subprocess.TimeoutExpired:
        print("%-16s skipped: tfprove over %g s on the original" % (prog, a.timeout * 4))
        return
    if r.returncode != 0:
        last = [l for l in r.stdout.splitlines() if "proven" in l.lower()]
        print("%-16s skipped: not proven itself (%s)" % (prog, last[-1] if last else r.returncode))
        return
    w = Tfw(base)
    regs = {r["name"]: r for r in json.loads(w.meta["registers"])}
    numeric = regs.get(w.meta.get("output"), {}).get("kind") not in ("token", "categorical")
    bound = float(w.meta.get("output_error_bound", "0") or 0)
    facts = [l for l in r.stdout.splitlines() if l.startswith("input facts: ") and "once each" in l]
    if facts:
        prompts, short = seed_prompts(w, facts[0], a.short + a.random, rnd), 0
    else:
        prompts, short = prompts_for(w, a.short, a.random, rnd)
    ref = run_batch(tfrun, base, prompts, tmp)
    c = dict(mutations=0, changed=0, refused=0, confirmed=0, not_proven=0, nothing=0, loud=0,
             proven=0, timed_out=0, bugs=0)
    mut = os.path.join(tmp, "mut.tfw")
    for k in range(a.mutations):
        what = mutate(base, mut, rnd)
        got = run_batch(tfrun, mut, prompts, tmp)
        diff = [p for p in prompts if not same(ref[p], got[p], numeric, bound)]
        silent = [p for p in diff if got[p] != "ERROR"]
        try:
            pr = subprocess.run([tfprove, mut], capture_output=True, text=True, timeout=a.timeout)
            rc, out = pr.returncode, pr.stdout + pr.stderr
        except subprocess.TimeoutExpired:
            rc, out = None, ""
        c["mutations"] += 1
        verdict, bug = "", ""
        cx, cx_weights, cx_next = parse_counterexample(out)
        if rc is None:
            c["timed_out"] += 1
            verdict = "timed out"
            changed = bool(diff)
        elif rc == 0:
            verdict = "proven"
            c["proven"] += not diff
            changed = bool(diff)
            if silent:
                bug = "SOUNDNESS: proven, but '%s' prints '%s' (the original '%s')" % (
                    silent[0], got[silent[0]], ref[silent[0]])
            elif diff:  # proven where the program's run-time checks pass
                c["loud"] += 1
                verdict = "proven; a run-time check now fails on '%s' (the original '%s')" % (
                    diff[0], ref[diff[0]])
        elif rc == 1 and cx is not None:
            c["refused"] += 1
            if cx_next:  # the next token after cx (a generating model)
                one, orig = run_next(tfrun, mut, cx), run_next(tfrun, base, cx)
            else:
                one = run_batch(tfrun, mut, [cx], tmp)[cx]
                orig = run_batch(tfrun, base, [cx], tmp)[cx]
            ok = not same(one, orig, numeric, bound) and (cx_weights is None or one == cx_weights)
            changed = True
            if ok:
                c["confirmed"] += 1
                verdict = "counterexample '%s' confirmed (%s, was %s)" % (cx, one, orig)
            else:
                bug = "UNCONFIRMED counterexample '%s': tfrun prints '%s' (the original '%s', tfprove says '%s')" % (
                    cx, one, orig, cx_weights)
        elif rc == 1:
            c["refused"] += 1
            changed = bool(diff)
            if silent:
                bug = "MISSED: refused without a counterexample, but '%s' prints '%s' (the original '%s')" % (
                    silent[0], got[silent[0]], ref[silent[0]])
            elif diff:
                c["loud"] += 1
                verdict = "refused; the change on the prompts run is a run-time check failing"
            else:
                c["not_proven"] += 1
                verdict = "not proven, no prompt changed"
        else:
            changed = bool(diff)
            bug = "tfprove exited %s: %s" % (rc, out.strip().splitlines()[-1:] if out else "")
        c["changed"] += changed
        c["nothing"] += not changed
        if bug:
            c["bugs"] += 1
            print("  %s: %s: %s" % (prog, what, bug))
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                shutil.copy(mut, os.path.join(a.keep, "%s-%d.tfw" % (prog, k)))
        elif a.verbose:
            print("  %s %d: %s: %s" % (prog, k, what, verdict))
    print("%-16s %3d mutations: %3d changed an output (%3d confirmed counterexamples, %d loud), "
          "%3d changed nothing (%3d proven, %3d not proven), %d timed out, %d bugs; "
          "%d prompts (all up to %d tokens)" % (
              prog, c["mutations"], c["changed"], c["confirmed"], c["loud"], c["nothing"],
              c["proven"], c["not_proven"], c["timed_out"], c["bugs"], len(prompts), short))
    sys.stdout.flush()
    c["programs"] = 1
    for key in c:
        totals[key] = totals.get(key, 0) + c[key]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--programs")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--slow", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--mutations", type=int)
    ap.add_argument("--level", default="-O")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--short", type=int, default=1500)
    ap.add_argument("--random", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--keep")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.mutations is None:
        a.mutations = 100 if a.full else 8
    if a.programs:
        progs = a.programs.split(",")
    elif a.all or a.full:
        progs = sorted(f[:-4] for f in os.listdir(os.path.join(SRC, "programs")) if f.endswith(".tfp"))
        progs = [p for p in progs if a.slow or p not in SLOW]
    else:
        progs = QUICK
    rnd = random.Random(a.seed)
    totals = {}
    tmp = tempfile.mkdtemp()
    try:
        for p in progs:
            one_program(a, p, tmp, rnd, totals)
    finally:
        shutil.rmtree(tmp)
    t = totals
    print("total: %d mutations of %d programs: %d changed an output (%d refused with a confirmed "
          "counterexample, %d loud), %d changed nothing (%d proven, %d not proven), %d timed out, "
          "%d bugs" % (t.get("mutations", 0), t.get("programs", 0), t.get("changed", 0),
                       t.get("confirmed", 0), t.get("loud", 0), t.get("nothing", 0),
                       t.get("proven", 0), t.get("not_proven", 0), t.get("timed_out", 0),
                       t.get("bugs", 0)))
    return 1 if t.get("bugs", 0) or not t.get("mutations", 0) or not t.get("changed", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
