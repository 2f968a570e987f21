"""tests/cut_positions.py IN.tfw OUT.tfw ROWS: the weight file with its
position encoding (embed.position.weight) cut to its first ROWS rows, so
that tfrun and tfprove take sequences of at most ROWS positions (the
seed's FindAndStore holds up to position 33 at period 100: tests/prove.sh
follows it on a short table)."""
import json, struct, sys
src, dst, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n]); body = data[8 + n:]
name = "embed.position.weight"
items = sorted([(k, v) for k, v in h.items() if k != "__metadata__"], key=lambda kv: kv[1]["data_offsets"][0])
out = bytearray(); nh = {"__metadata__": h.get("__metadata__", {})}
for k, v in items:
    b0, b1 = v["data_offsets"]; chunk = body[b0:b1]
    shape = list(v["shape"])
    if k == name:
        chunk = chunk[:rows * shape[1] * 4]; shape[0] = rows
    nh[k] = {"dtype": v["dtype"], "shape": shape, "data_offsets": [len(out), len(out) + len(chunk)]}
    out += chunk
hj = json.dumps(nh).encode()
hj += b" " * ((8 - len(hj) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hj)) + hj + bytes(out))
