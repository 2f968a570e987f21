"""tests/mutate_tfw.py IN.tfw OUT.tfw SEED: one single-weight mutation of a
weight file (tests/prove.sh's mutation test of the validator).

A .tfw is safetensors (docs/weight-format.md): an 8-byte header length, the
JSON header, then float32 tensors. One nonzero weight of a layer tensor (not
the embeddings) is chosen by SEED and scaled by -1, 0, 0.5, 2 or 1.01, or
two rows of its tensor are swapped. Prints what it did.
"""
import json
import random
import struct
import sys

src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
rnd = random.Random(seed)
names = sorted(k for k in header if k != "__metadata__" and (k.startswith("layers.") or k.startswith("shared.") or k.startswith("unembed")))
name = rnd.choice(names)
t = header[name]
b0, b1 = t["data_offsets"]
count = (b1 - b0) // 4
vals = list(struct.unpack("<%df" % count, body[b0:b1]))
nonzero = [i for i, v in enumerate(vals) if v != 0]
kind = rnd.randrange(6)
if kind == 5 and len(t["shape"]) == 2 and t["shape"][0] > 1:
    rows, cols = t["shape"]
    r1, r2 = rnd.sample(range(rows), 2)
    for c in range(cols):
        vals[r1 * cols + c], vals[r2 * cols + c] = vals[r2 * cols + c], vals[r1 * cols + c]
    what = "swapped rows %d and %d of %s" % (r1, r2, name)
else:
    i = rnd.choice(nonzero) if nonzero else rnd.randrange(count)
    f = [-1.0, 0.0, 0.5, 2.0, 1.01][kind % 5]
    if vals[i] == 0:
        vals[i] = 1.0
    else:
        vals[i] *= f
    what = "%s[%d] times %g" % (name, i, f)
body[b0:b1] = struct.pack("<%df" % count, *vals)
open(dst, "wb").write(data[:8 + n] + bytes(body))
print(what)
