#!/usr/bin/env python3
"""dump_check.py TFRUN WEIGHTS.tfw [--tol T] PROMPT...: tfrun --dump against tools/tfw_torch.py.

For each prompt:
- whole pass: every tensor of `tfrun --dump` must be in the PyTorch
  module's cache (run_with_cache) under the same name, with the same shape,
  and agree to T (default 1e-5) times max(1, the tensor's largest |value|);
- layer by layer: each layer of the module, given the dump's
  blocks.<i>.hook_resid_pre, must give its hook_resid_post (and attention
  pattern) to 1e-5 times max(1, the largest |value| the layer computes
  but attention scores). This holds even where the whole pass does not to
  1e-5: the adder's StepPosition layers add biases of +-1000, so each run
  rounds positions to 6.1e-5 (tests/test_trace.c) and the two runs' rounding
  differs with their summation order; tests/dump.sh gives the adder --tol 1e-3;
- the cache must hold the names docs/python.md promises for each layer.
Exit 1 on any difference. Needs Debian's python3-torch.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import tfw_torch  # noqa: E402

LOCAL_TOL = 1e-5


def close(got, want, tol, scale=None):
    """max |got - want| / max(1, scale or max |want|) <= tol; and the ratio."""
    if scale is None:
        scale = float(want.abs().max()) if want.numel() else 0.0
    diff = float((got - want).abs().max()) / max(1.0, scale) if want.numel() else 0.0
    return diff <= tol, diff


def layer_local(model, dump, failures, prompt):
    """Each layer from the dump's input against the dump's output."""
    n = 0
    for i, l in enumerate(model.layers):
        b = "blocks.%d." % i
        cache = {}
        with torch.no_grad():
            out = model.tf.layer(dump[b + "hook_resid_pre"], l, tfw_torch.Hook(cache, ""))
        finite = [v.abs()[torch.isfinite(v)] for k, v in cache.items() if "scores" not in k]
        scale = max([1.0] + [float(v.max()) for v in finite if v.numel()])
        for name, got in ((b + "hook_resid_post", out), (b + "attn.hook_pattern", cache.get("attn.hook_pattern"))):
            if name not in dump:
                continue
            ok, diff = close(got, dump[name], LOCAL_TOL, scale)
            n += 1
            if not ok:
                print("FAIL: %r: layer %d alone: %s differs by %.3g (relative to %.3g)"
                      % (prompt, i, name, diff, scale))
                failures.append(name)
    return n


def read_dump(path):
    meta, tensors = tfw_torch.read_safetensors(path)
    return meta, tensors


def expected_names(model):
    names = {"hook_embed", "hook_pos_embed"}
    for i, l in enumerate(model.layers):
        b = "blocks.%d." % i
        names |= {b + "hook_resid_pre", b + "hook_resid_post"}
        if l["kind"] == "attention":
            names |= {b + "attn.hook_" + n for n in ("q", "k", "v", "attn_scores", "pattern", "z")}
            names.add(b + "hook_attn_out")
        elif l["kind"] == "mlp":
            names |= {b + "mlp.hook_pre", b + "mlp.hook_post", b + "hook_mlp_out"}
    return names


def main():
    tfrun, weights, prompts = sys.argv[1], sys.argv[2], sys.argv[3:]
    tol = 1e-5
    if prompts[:1] == ["--tol"]:
        tol, prompts = float(prompts[1]), prompts[2:]
    model = tfw_torch.load(weights)
    failures = 0
    compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, prompt in enumerate(prompts):
            path = os.path.join(tmp, "d%d.safetensors" % k)
            r = subprocess.run([tfrun, weights, "--dump", path, prompt], capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL: tfrun --dump %r: %s" % (prompt, r.stderr.strip()))
                failures += 1
                continue
            meta, dump = read_dump(path)
            if meta.get("prompt") != prompt or json.loads(meta["tokens"]) != model.to_tokens(prompt)[0].tolist():
                print("FAIL: %r: the dump's prompt and tokens" % prompt)
                failures += 1
            with torch.no_grad():
                _, cache = model.run_with_cache(prompt)
            missing = expected_names(model) - set(cache)
            if missing:
                print("FAIL: %r: the cache lacks %s" % (prompt, sorted(missing)[:5]))
                failures += 1
            for name, c_val in dump.items():
                if name not in cache:
                    print("FAIL: %r: %s is in the dump, not in the cache" % (prompt, name))
                    failures += 1
                    continue
                t_val = cache[name].detach().float()
                if tuple(t_val.shape) != tuple(c_val.shape):
                    print("FAIL: %r: %s has shape %s in the dump, %s in the cache"
                          % (prompt, name, tuple(c_val.shape), tuple(t_val.shape)))
                    failures += 1
                    continue
                ok, diff = close(t_val, c_val, tol)
                compared += 1
                if not ok:
                    print("FAIL: %r: %s differs by %.3g (relative)" % (prompt, name, diff))
                    failures += 1
            local = []
            compared += layer_local(model, dump, local, prompt)
            failures += len(local)
    print("%s: %d tensors over %d prompts compared, %d failures"
          % (os.path.basename(weights), compared, len(prompts), failures))
    return 1 if failures or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
