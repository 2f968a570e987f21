"""tests/flip_weight.py IN.tfw OUT.tfw TENSOR COL: flips the sign of the
largest weight in column COL of a 2-D tensor of a weight file (safetensors,
docs/weight-format.md) and prints which (tests/prove.sh: a mutated seed op's
head that the validator must refuse)."""
import json, struct, sys
src, dst, name, col = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n]); body = bytearray(data[8 + n:])
t = h[name]; rows, cols = t["shape"]; b0 = t["data_offsets"][0]
vals = [struct.unpack_from("<f", body, b0 + 4 * (r * cols + col))[0] for r in range(rows)]
r = max(range(rows), key=lambda i: abs(vals[i]))
struct.pack_into("<f", body, b0 + 4 * (r * cols + col), -vals[r])
open(dst, "wb").write(data[:8 + n] + bytes(body))
print("flipped the sign of %s[%d, %d]" % (name, r, col))
