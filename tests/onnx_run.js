// onnx_run.js MODEL.onnx META.json PROMPTS.json OUT.json: runs a model that
// tfconvert wrote in ONNX Runtime (onnxruntime-node), as tfrun runs the .tfw:
// greedy generation (one full pass per step, stopping at the stop token),
// the argmax token or the output value at every position, or a classifier's
// class. META holds the model's metadata_props (tests/onnx_check.py reads
// them with python3-onnx); PROMPTS is a list of token-id lists. Writes, per
// prompt, {"tokens": [...]} (or "values", or "class" and "prob") and the
// logits of the first pass at every position for the first few prompts.
const fs = require('fs');
const ort = require('onnxruntime-node');

async function run(session, seqs) { // seqs: lists of one length -> {logits | values, dims}
  const B = seqs.length, T = seqs[0].length;
  const ids = new BigInt64Array(B * T);
  seqs.forEach((s, b) => s.forEach((t, i) => { ids[b * T + i] = BigInt(t); }));
  const out = await session.run({input_ids: new ort.Tensor('int64', ids, [B, T])});
  return out.logits || out.values;
}

function argmax(data, off, n) {
  let best = 0;
  for (let v = 1; v < n; v++) if (data[off + v] > data[off + best]) best = v;
  return best;
}

(async () => {
  const [model, metaPath, promptsPath, outPath] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(metaPath));
  const prompts = JSON.parse(fs.readFileSync(promptsPath));
  const session = await ort.InferenceSession.create(model);
  const every = meta['tfw.output_mode'] === 'every_position';
  const classify = meta['tfw.output_kind'] === 'classify';
  const stop = 'tfw.stop_token' in meta ? JSON.parse(meta['tfw.vocab']).indexOf(meta['tfw.stop_token']) : -1;
  const n = meta.n_new, maxLen = Number(meta['tfw.max_len']);
  const results = new Array(prompts.length);
  const byLen = new Map();
  prompts.forEach((p, i) => { if (!byLen.has(p.length)) byLen.set(p.length, []); byLen.get(p.length).push(i); });
  for (const [T, members] of byLen) {
    for (let start = 0; start < members.length; start += 256) {
      const chunk = members.slice(start, start + 256);
      let seqs = chunk.map(i => prompts[i].slice());
      const first = await run(session, seqs);
      const V = first.dims.length === 3 ? first.dims[2] : 0;
      chunk.forEach((i, b) => {
        results[i] = {};
        if (i < 8) results[i].logits = Array.from(first.data.slice(b * T * Math.max(V, 1), (b + 1) * T * Math.max(V, 1)));
      });
      if (!V) { // a number at every position
        chunk.forEach((i, b) => { results[i].values = Array.from(first.data.slice(b * T, (b + 1) * T)); });
        continue;
      }
      if (classify) {
        const at = meta['tfw.classify_at'] === 'last' ? T - 1 : 0;
        chunk.forEach((i, b) => {
          const off = (b * T + at) * V, c = argmax(first.data, off, V);
          let sum = 0;
          for (let v = 0; v < V; v++) sum += Math.exp(first.data[off + v] - first.data[off + c]);
          results[i].class = c;
          results[i].prob = 1 / sum;
        });
        continue;
      }
      if (every) {
        chunk.forEach((i, b) => {
          results[i].tokens = [];
          for (let p = 0; p < T; p++) results[i].tokens.push(argmax(first.data, (b * T + p) * V, V));
        });
        continue;
      }
      const steps = stop >= 0 ? Math.min(n, maxLen - T + 1) : n;
      const done = chunk.map(() => false);
      chunk.forEach(i => { results[i].tokens = []; });
      let logits = first;
      for (let step = 0; step < steps; step++) {
        const L = seqs[0].length;
        chunk.forEach((i, b) => {
          const t = argmax(logits.data, (b * L + L - 1) * V, V);
          if (!done[b]) {
            if (t === stop) done[b] = true;
            else results[i].tokens.push(t);
          }
          seqs[b].push(t);
        });
        if (step + 1 === steps || done.every(x => x)) break;
        logits = await run(session, seqs);
      }
    }
  }
  fs.writeFileSync(outPath, JSON.stringify(results));
})().catch(e => { console.error('onnx_run.js: ' + e); process.exit(1); });
