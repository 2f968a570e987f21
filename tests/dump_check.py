#!/usr/bin/env python3
"""dump_check.py TFRUN WEIGHTS.tfw [--tol T] PROMPT...: tfrun --dump against tools/tfw_torch.py.

For each prompt:
- names: the dump and the PyTorch module's cache (run_with_cache) must hold
  the same names, and both every name docs/python.md promises for each
  layer (a name missing on either side fails);
- whole pass: every tensor of `tfrun --dump` must have the cache's shape
  and agree to T (default 1e-5) times max(1, the tensor's largest finite
  |value|); infinities (attention scores, -inf where a causal row cannot
  see the key) must be the same infinities at the same places;
- layer by layer: each layer of the module, given the dump's
  blocks.<i>.hook_resid_pre, must give every activation of the dump's
  block (normalized input, q, k, v, scores, pattern, z, hidden units, the
  layer's output, hook_resid_post) to 1e-5 times max(1, the largest |value|
  the layer computes but attention scores; for scores, their own largest
  finite |value| too). This holds even where the whole pass does not to
  1e-5: the adder's StepPosition layers add biases of +-1000, so each run
  rounds positions to 6.1e-5 (tests/test_trace.c) and the two runs' rounding
  differs with their summation order; tests/dump.sh gives the adder --tol 1e-3.
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


def finite_max(t):
    """The largest finite |value| of t (0 when none)."""
    t = t.abs()[torch.isfinite(t)]
    return float(t.max()) if t.numel() else 0.0


def close(got, want, tol, scale=None):
    """max |got - want| / max(1, scale or want's largest finite |value|) <=
    tol over the finite entries, the others equal (the same infinities at
    the same places, no NaN); and the ratio (inf when the others differ)."""
    fin = torch.isfinite(want)
    if not torch.equal(fin, torch.isfinite(got)) or not torch.equal(got[~fin], want[~fin]):
        return False, float("inf")
    if scale is None:
        scale = finite_max(want)
    diff = float((got[fin] - want[fin]).abs().max()) / max(1.0, scale) if fin.any() else 0.0
    return diff <= tol, diff


def layer_local(model, dump, failures, prompt):
    """Each layer from the dump's input against the dump's output."""
    n = 0
    for i, l in enumerate(model.layers):
        b = "blocks.%d." % i
        cache = {}
        with torch.no_grad():
            model.tf.layer(dump[b + "hook_resid_pre"], l, tfw_torch.Hook(cache, ""))
        scale = max([1.0] + [finite_max(v) for k, v in cache.items() if "scores" not in k])
        for key, got in cache.items():
            name = b + key
            if key == "hook_resid_pre" or name not in dump:
                continue  # the input; a missing name fails in main
            s = max(scale, finite_max(got)) if "scores" in key else scale
            ok, diff = close(got, dump[name], LOCAL_TOL, s)
            n += 1
            if not ok:
                print("FAIL: %r: layer %d alone: %s differs by %.3g (relative to %.3g)"
                      % (prompt, i, name, diff, s))
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
        if l["kind"] != "norm" and "norm_weight" in l:
            names.add(b + ("ln1" if l["kind"] == "attention" else "ln2") + ".hook_normalized")
    if model.layers and model.layers[-1]["kind"] == "norm":
        names.add("ln_final.hook_normalized")
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
            want = expected_names(model)
            for side, names in (("cache", set(cache)), ("dump", set(dump))):
                missing = want - names
                if missing:
                    print("FAIL: %r: the %s lacks %d promised names: %s"
                          % (prompt, side, len(missing), sorted(missing)[:5]))
                    failures += 1
            only = set(cache) - set(dump)
            if only:
                print("FAIL: %r: %d names in the cache, not in the dump: %s"
                      % (prompt, len(only), sorted(only)[:5]))
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
