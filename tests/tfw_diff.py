#!/usr/bin/env python3
"""tfw_diff.py TFC TFINFO MKGENERAL [N]: the two weight-file readers accept
exactly the same files.

From a few valid files (the adder at -O and -O0, sort's categorical
registers, pattern's layers of several ops, a learned classifier with norms and biases, tests/mkgeneral.c's
every-position, stop-token, run-time-checked and number-printing models,
tests/mkparts.py's layers of several ops, tests/mklive.py's registers that share a column in
states they do not both hold: "live"), which both must accept, N
mutated files (default 3000, a fixed seed): bytes flipped, inserted or cut in
the header and in the data, the header length changed, and JSON-level edits (a key deleted, doubled,
renamed or given another value, nested JSON in metadata strings edited the same way, escapes
and invalid UTF-8 inserted). Each goes through runtime/model/tfw.c (`tfinfo FILE`:
exit 0 accepts, 1 refuses) and tools/tfw_torch.py's check(); any file one
accepts and the other refuses, and any exception other than TfwError from
the Python reader, is a failure. Prints counts; exits 1 on any failure.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import tfw_torch  # noqa: E402

VALUES = [0, 1, -1, 2, 3, 4, 6, 7, 8, 16, 1.5, 2.0, -0.0, 1e400, -1e400, 2**31, 2**53, 2**53 + 1,
          2**64, 10**30, "", "x", "a", "F32", "F16", "tfw", "1", "0", "-1", " 1", "+1", "01", "1_0",
          "\u0661", "attention", "mlp", "norm", "gelu", "relu", "token", "position", "scalar",
          "categorical", "classify", "next_token", "every_position", "first", "last", "é", True,
          False, None, [], {}, [1], [0, 4], [1, 1, 1, 1, 1], "[]", "{}", "[\"a\"]", 1e-50, 1e300,
          [0, 1], [1, 2], [0, 0], [2, 1], [1, -1], [0, 2**31], "heads", "units"]
# Keys a renamed key becomes: a part's range under the other layer kind's name, ...
KEYS = ["heads", "units", "name", "op", "line", "parts", "kind", "live", "zz"]
RAW = ["\\u0000", "\\ud800", "\\udc00x", "\\ud83d\\ude00", "\xff", "\xc0\xaf", "\xed\xa0\x80",
       "\t", "\x01", "NaN", "Infinity", "-Infinity", "01", "1.", ".5", "+1", "1e", "-", "\\x",
       "\\u12", " ", "\n", "\ufeff", ",", "]", "}", "\"", "\\\\", "[" * 40, "1" * 41, "é"]


def frame(header_bytes, data):
    pad = (8 - (8 + len(header_bytes)) % 8) % 8
    h = header_bytes + b" " * pad
    return struct.pack("<Q", len(h)) + h + data


def split(buf):
    (n,) = struct.unpack("<Q", buf[:8])
    return buf[8:8 + n], buf[8 + n:]


def paths(x, prefix=()):
    """Every (path, value) in a JSON tree, descending into metadata strings
    that hold JSON (marked by a "json" step)."""
    yield prefix, x
    if isinstance(x, dict):
        for k, v in x.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from paths(v, prefix + (i,))
    elif isinstance(x, str) and x[:1] in "[{":
        try:
            inner = json.loads(x)
        except ValueError:
            return
        yield from paths(inner, prefix + ("json",))


def edit(tree, path, fn):
    """tree with fn applied to the value at path (fn returns the new value,
    or a special DELETE)."""
    if not path:
        return fn(tree)
    step, rest = path[0], path[1:]
    if step == "json":
        new = edit(json.loads(tree), rest, fn)
        if new is DELETE:
            return ""
        return json.dumps(new, separators=(",", ":"), ensure_ascii=False)
    tree = tree.copy()
    new = edit(tree[step], rest, fn)
    if new is DELETE:
        del tree[step]
    else:
        tree[step] = new
    return tree


DELETE = object()


def json_mutation(rng, header):
    try:
        tree = json.loads(header.decode("utf-8"))
    except (ValueError, RecursionError):
        return text_mutation(rng, header)
    all_paths = [p for p, _ in paths(tree) if p]
    if not all_paths:
        return text_mutation(rng, header)
    path = rng.choice(all_paths)
    r = rng.random()
    if r < 0.3:
        new = edit(tree, path, lambda v: DELETE)
    elif r < 0.8:
        val = rng.choice(VALUES)
        new = edit(tree, path, lambda v: val)
    elif r < 0.88 and isinstance(path[-1], str) and path[-1] != "json":
        key = rng.choice(KEYS)

        def rename(obj):
            return {(key if k == path[-1] else k): v for k, v in obj.items()}
        new = edit(tree, path[:-1], rename)
    else:
        def bump(v):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return v + "x" if isinstance(v, str) else v
            return v + rng.choice([-1, 1, 4, -4])
        new = edit(tree, path, bump)
    if new is DELETE:
        new = {}
    try:
        return json.dumps(new, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    except ValueError:
        return header


def text_mutation(rng, header):
    s = header.decode("utf-8", "surrogateescape")
    r = rng.random()
    if r < 0.35:  # double a "key":value pair by copying a key with another value
        keys = [i for i in range(len(s)) if s.startswith('":', i)]
        if keys:
            end = rng.choice(keys)
            start = s.rfind('"', 0, end)
            while start > 0 and s[start - 1] == "\\":
                start = s.rfind('"', 0, start - 1)
            key = s[start:end + 2]
            val = json.dumps(rng.choice(VALUES), ensure_ascii=False)
            # insert the same key into the same object: right after its '{' or ','
            at = max(s.rfind("{", 0, start), s.rfind(",", 0, start)) + 1
            s = s[:at] + key + val + "," + s[at:]
    else:
        raw = rng.choice(RAW)
        quotes = [i for i, c in enumerate(s) if c == '"']
        at = rng.choice(quotes) + 1 if quotes and rng.random() < 0.7 else rng.randrange(len(s) + 1)
        s = s[:at] + raw + s[at:]
    return s.encode("utf-8", "surrogateescape")


def byte_mutation(rng, buf):
    b = bytearray(buf)
    r = rng.random()
    if r < 0.15:
        b = b[:rng.randrange(8, len(b))]
    elif r < 0.3:  # header length
        (n,) = struct.unpack("<Q", b[:8])
        n = rng.choice([0, 1, n - 8, n - 1, n + 1, n + 8, 64 << 20, (64 << 20) + 1, 2**63])
        b[:8] = struct.pack("<Q", n % 2**64)
    elif r < 0.5:  # a weight set to NaN, infinity, or a huge value
        (n,) = struct.unpack("<Q", b[:8])
        if len(b) >= 8 + n + 4:
            i = 8 + n + 4 * rng.randrange((len(b) - 8 - n) // 4)
            b[i:i + 4] = struct.pack("<f", rng.choice([float("nan"), float("inf"), -float("inf"), 3e38]))
    else:
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256) if rng.random() < 0.5 else b[i] ^ (1 << rng.randrange(8))
    return bytes(b)


def mutate(rng, buf):
    if len(buf) < 16:
        return buf + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    header, data = split(buf)
    r = rng.random()
    if r < 0.5:
        return frame(json_mutation(rng, header), data)
    if r < 0.75:
        return frame(text_mutation(rng, header), data)
    return byte_mutation(rng, buf)


def python_accepts(buf):
    try:
        tfw_torch.check(buf)
        return True, ""
    except tfw_torch.TfwError as e:
        return False, str(e)


def main():
    tfc, tfinfo, mkgeneral = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 3000
    src = os.environ.get("TF_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    rng = random.Random(int(os.environ.get("TF_DIFF_SEED", "13")))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        seeds = []
        for name, opts in (("adder", []), ("adder", ["-O0"]), ("sort", []), ("xor", []), ("pattern", [])):
            out = os.path.join(tmp, "%s%s.tfw" % (name, "".join(opts)))
            subprocess.run([tfc, *opts, os.path.join(src, "programs", name + ".tfp"), "-o", out], check=True)
            seeds.append(out)
        subprocess.run([mkgeneral, tmp], check=True)
        seeds += [os.path.join(tmp, n) for n in ("every.tfw", "stop.tfw", "tie.tfw", "frac.tfw")]
        parts = os.path.join(tmp, "parts.tfw")
        subprocess.run([sys.executable, os.path.join(src, "tests", "mkparts.py"), parts], check=True)
        seeds.append(parts)
        length, reuse = os.path.join(tmp, "length.tfw"), os.path.join(tmp, "reuse.tfw")
        subprocess.run([tfc, os.path.join(src, "programs", "length.tfp"), "-o", length], check=True)
        subprocess.run([sys.executable, os.path.join(src, "tests", "mklive.py"), length, reuse], check=True)
        seeds.append(reuse)
        for p in seeds:  # the valid files themselves
            c = subprocess.run([tfinfo, p], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            py_ok, py_msg = python_accepts(open(p, "rb").read())
            if c.returncode != 0 or not py_ok:
                print("FAIL: seed %s: tfinfo %s, tfw_torch.py %s" % (
                    os.path.basename(p), c.stderr.decode(errors="replace").strip() or "accepts",
                    py_msg or "accepts"))
                failures += 1
        seeds = [open(p, "rb").read() for p in seeds]
        counts = {True: 0, False: 0}
        path = os.path.join(tmp, "m.tfw")
        for i in range(n):
            buf = seeds[i % len(seeds)]
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                buf = mutate(rng, buf)
            with open(path, "wb") as f:
                f.write(buf)
            c = subprocess.run([tfinfo, path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if c.returncode not in (0, 1):
                print("FAIL: tfinfo exited %d on mutant %d: %s" % (c.returncode, i, c.stderr[-300:]))
                failures += 1
                continue
            c_ok = c.returncode == 0
            try:
                py_ok, py_msg = python_accepts(buf)
            except Exception as e:  # a crash of the Python reader
                print("FAIL: tools/tfw_torch.py raised %r on mutant %d" % (e, i))
                failures += 1
                continue
            counts[c_ok] += 1
            if c_ok != py_ok:
                failures += 1
                keep = os.path.join(os.environ.get("TF_BUILD_DIR", "."), "tfw_diff_%d.tfw" % i)
                with open(keep, "wb") as f:
                    f.write(buf)
                print("FAIL: mutant %d (kept as %s): tfrun %s (%s), tfw_torch.py %s (%s)"
                      % (i, keep, "accepts" if c_ok else "refuses",
                         c.stderr.decode(errors="replace").strip()[:200],
                         "accepts" if py_ok else "refuses", py_msg[:200]))
    print("%d mutants: %d accepted by both, %d refused by both, %d disagreements or crashes"
          % (n, counts[True], counts[False] - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
