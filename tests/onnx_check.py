#!/usr/bin/env python3
"""onnx_check.py TFCONVERT TFRUN ORT_DIR WEIGHTS.tfw PROMPTS.txt: one model in ONNX.

tfconvert writes WEIGHTS.onnx; python3-onnx's checker (full_check: types and
shapes inferred) accepts it; ONNX Runtime (onnxruntime-node from ORT_DIR,
tests/onnx_run.js) runs every prompt as tfrun runs the .tfw, and the lines
it gives are tfrun --batch's, byte for byte; its logits (or output values)
at every position of the first pass are within 1e-5 of the PyTorch peer's
(tools/tfw_torch.py, which tests/torch.sh and tests/programs.sh hold to
tfrun's lines), relative to the largest. Prints one summary line; exit 1 on
any failure. Run with /usr/bin/python3 (onnx, torch).
"""
import json
import os
import subprocess
import sys
import tempfile

import onnx
import onnx.checker
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import tfw_torch  # noqa: E402


def main():
    tfconvert, tfrun, ort_dir, weights, prompts_path = sys.argv[1:6]
    name = os.path.basename(weights)
    tmp = tempfile.mkdtemp()
    onnx_path = os.path.join(tmp, "model.onnx")
    subprocess.run([tfconvert, weights, "-o", onnx_path], check=True)
    proto = onnx.load(onnx_path)
    onnx.checker.check_model(proto, full_check=True)
    meta = {p.key: p.value for p in proto.metadata_props}
    model = tfw_torch.load(weights)
    tf = model.tf
    meta["n_new"] = tf.generate
    texts = [l.rstrip("\n") for l in open(prompts_path) if l.rstrip("\n")]
    ids = [tfw_torch.tokenize(tf, t, "prompt") for t in texts]
    for path, obj in (("meta.json", meta), ("prompts.json", ids)):
        with open(os.path.join(tmp, path), "w") as f:
            json.dump(obj, f)
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    subprocess.run(["node", os.path.join(HERE, "onnx_run.js"), onnx_path,
                    os.path.join(tmp, "meta.json"), os.path.join(tmp, "prompts.json"),
                    os.path.join(tmp, "out.json")], check=True, env=env)
    results = json.load(open(os.path.join(tmp, "out.json")))
    want = subprocess.run([tfrun, weights, "--batch", prompts_path], capture_output=True,
                          text=True).stdout.splitlines()
    fails = 0
    start = 1 if tf.bos is not None else 0
    for i, (text, r) in enumerate(zip(texts, results)):
        if tf.classify:
            probs = tf.classify_probs(torch.tensor([ids[i]]))[0]
            got = "%s\t%s\t%.4f" % (text, tf.classes[r["class"]], r["prob"])
            w = want[i].rsplit("\t", 1)
            ok = got.rsplit("\t", 1)[0] == w[0] and abs(float(w[1]) - r["prob"]) <= 1e-4
        elif tf.numeric:
            got = text + "\t" + " ".join(tfw_torch.value_text(v) for v in r["values"][start:])
            ok = got == want[i]
        elif tf.every_position:
            got = text + "\t" + "".join(tfw_torch.token_text(tf.vocab[t]) for t in r["tokens"][start:])
            ok = got == want[i]
        else:
            got = text + "".join(tfw_torch.token_text(tf.vocab[t]) for t in r["tokens"])
            ok = got == want[i]
        if not ok:
            fails += 1
            if fails <= 3:
                print("FAIL %s: ONNX Runtime %r, tfrun %r" % (name, got, want[i]))
    worst = 0.0
    with torch.no_grad():
        for i, r in enumerate(results[:8]):
            ref = model(torch.tensor([ids[i]]))[0].double()
            got = torch.tensor(r["logits"], dtype=torch.float64).reshape(ref.shape)
            err = float((got - ref).abs().max() / max(1.0, float(ref.abs().max())))
            worst = max(worst, err)
    if worst > 1e-5:
        print("FAIL %s: ONNX Runtime's logits differ from PyTorch's by %.3g of the largest"
              % (name, worst))
        fails += 1
    if len(want) != len(texts) or not texts:
        print("FAIL %s: tfrun printed %d lines for %d prompts" % (name, len(want), len(texts)))
        fails += 1
    print("%s %s: %d prompts, the same lines as tfrun; logits within %.2g; checker accepts it"
          % ("FAILED" if fails else "ok", name, len(texts), worst))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
