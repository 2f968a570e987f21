// onnx_run.js MODEL.onnx: a model that tfconvert wrote, in ONNX Runtime
// (onnxruntime-node), as a server for tests/onnx_check.py, which speaks the
// same protocol to the engine (tests/engine_logits.c). On standard input
// and output, one request after another (little-endian):
//
//   request   int32 B, int32 T, then B * T int32 token ids; B = 0 ends
//   answer    float32 B * T * W: the graph's output for input_ids [B, T]
//             (logits [B, T, W], or values [B, T] with W = 1)
const fs = require('fs');
const ort = require('onnxruntime-node');

function readExactly(n) { // n bytes of standard input, or null at its end
  const buf = Buffer.alloc(n);
  let got = 0;
  while (got < n) {
    let k;
    try {
      k = fs.readSync(0, buf, got, n - got, null);
    } catch (e) {
      if (e.code === 'EAGAIN') continue;
      throw e;
    }
    if (k === 0) {
      if (got === 0) return null;
      throw new Error('a request cut short');
    }
    got += k;
  }
  return buf;
}

function writeAll(buf) {
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

(async () => {
  const session = await ort.InferenceSession.create(process.argv[2]);
  for (;;) {
    const head = readExactly(8);
    if (head === null) break;
    const B = head.readInt32LE(0), T = head.readInt32LE(4);
    if (B === 0) break;
    const body = readExactly(4 * B * T);
    const ids = new BigInt64Array(B * T);
    for (let i = 0; i < B * T; i++) ids[i] = BigInt(body.readInt32LE(4 * i));
    const out = await session.run({input_ids: new ort.Tensor('int64', ids, [B, T])});
    const t = out.logits || out.values;
    writeAll(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
})().catch(e => { console.error('onnx_run.js: ' + e); process.exit(1); });
