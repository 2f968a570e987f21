"""tests/scale_weight.py IN.tfw OUT.tfw TENSOR ROW COL FACTOR: scales one
weight of a 2-D tensor of a weight file (safetensors, docs/weight-format.md)
by FACTOR and prints it (tests/prove.sh: a mutated seed op's key that the
validator must refuse). COL is a number, or REGISTER=LABEL: the residual
column of that value of a categorical register (out='7', closes=14), which
moves when tfc leaves out the columns nothing reads, or the one column of a
register held as a number (the label then names the row's value only)."""
import struct, json, sys
src, dst, name = sys.argv[1], sys.argv[2], sys.argv[3]
row, factor = int(sys.argv[4]), float(sys.argv[6])
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n]); body = bytearray(data[8 + n:])
if "=" in sys.argv[5]:
    reg, label = sys.argv[5].split("=", 1)
    r = next(r for r in json.loads(h["__metadata__"]["registers"]) if r["name"] == reg)
    col = r["offset"] + (r["values"].index(label) if "values" in r else 0)
else:
    col = int(sys.argv[5])
t = h[name]; rows, cols = t["shape"]; at = t["data_offsets"][0] + 4 * (row * cols + col)
old = struct.unpack_from("<f", body, at)[0]
struct.pack_into("<f", body, at, old * factor)
open(dst, "wb").write(data[:8 + n] + bytes(body))
print("scaled %s[%d, %d] = %g by %g" % (name, row, col, old, factor))
