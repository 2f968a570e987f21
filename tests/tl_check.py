#!/usr/bin/env python3
"""tl_check.py MODEL.tfw TOL PROMPT...: tools/tfw_to_transformerlens.py against a
forward pass written the way TransformerLens computes (its HookedTransformer is
not installed here): einsums over W_Q, W_K, W_V, W_O with b_*, LayerNorms ln1,
ln2, ln_final when normalization_type is "LN", the MLP's W_in, b_in, W_out,
b_out, then W_U and b_U.

For each prompt the converted model's residual stream after each block must
equal the module's (tools/tfw_torch.py) after the block's last layer, and its
logits the module's, to TOL times max(1, the largest finite |value|); and the
argmax at every position must be the same. Inside each block, the forward's
activations under TransformerLens's hook names must be the module's of the
block's layers (docs/python.md): hook_k, hook_v, hook_z, hook_attn_scores
(-inf at the same places), hook_pattern, hook_attn_out, mlp.hook_pre,
hook_post, hook_mlp_out, ln1/ln2.hook_normalized, and hook_q divided by the
scale folded into W_Q; padded heads' queries, keys, values and sums,
padded channels and units must be 0, and a padding sublayer's output.
Each register held in the file's residual state of a residual stream of
the forward (blocks.{b}.hook_resid_pre, _mid, _post: t2tl.hook_states)
decodes from it as from the module's (tfw_torch's decode, by state).
    tl_check.py --refuse MODEL.tfw MESSAGE: the converter must refuse the
        model with an error containing MESSAGE.
Exit 1 on any difference. Needs Debian's python3-torch.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import tfw_torch  # noqa: E402
import tfw_to_transformerlens as t2tl  # noqa: E402


# HookedTransformerConfig's fields (TransformerLens 1.x and 2.x) the converter may set.
TL_FIELDS = {"n_layers", "d_model", "n_ctx", "d_head", "model_name", "n_heads", "d_mlp", "act_fn",
             "d_vocab", "eps", "use_attn_scale", "original_architecture", "normalization_type",
             "attention_dir", "attn_only", "positional_embedding_type", "d_vocab_out",
             "default_prepend_bos"}


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def tl_forward(cfg, sd, tokens, cache):
    """logits [B, P, d_vocab_out] and the residual stream after each block;
    the activations into cache under TransformerLens's hook names."""
    P = tokens.shape[1]
    ln = cfg["normalization_type"] == "LN"
    act = {"gelu": torch.nn.functional.gelu, "relu": torch.relu,
           "gelu_new": lambda h: torch.nn.functional.gelu(h, approximate="tanh")}[cfg["act_fn"]]
    x = sd["embed.W_E"][tokens] + sd["pos_embed.W_pos"][:P][None]
    resid = []
    for b in range(cfg["n_layers"]):
        p = "blocks.%d." % b
        h = layer_norm(x, sd[p + "ln1.w"], sd[p + "ln1.b"], cfg["eps"]) if ln else x
        q = torch.einsum("bpd,hde->bphe", h, sd[p + "attn.W_Q"]) + sd[p + "attn.b_Q"]
        k = torch.einsum("bpd,hde->bphe", h, sd[p + "attn.W_K"]) + sd[p + "attn.b_K"]
        v = torch.einsum("bpd,hde->bphe", h, sd[p + "attn.W_V"]) + sd[p + "attn.b_V"]
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / cfg["d_head"] ** 0.5
        if cfg["attention_dir"] == "causal":
            scores = scores.masked_fill(torch.ones(P, P, dtype=torch.bool).triu(1), float("-inf"))
        pattern = torch.softmax(scores, dim=-1)
        z = torch.einsum("bkhe,bhqk->bqhe", v, pattern)
        out = torch.einsum("bqhe,hed->bqd", z, sd[p + "attn.W_O"]) + sd[p + "attn.b_O"]
        names = {"ln1.hook_normalized": h, "attn.hook_q": q, "attn.hook_k": k, "attn.hook_v": v,
                 "attn.hook_attn_scores": scores, "attn.hook_pattern": pattern, "attn.hook_z": z,
                 "hook_attn_out": out}
        names["hook_resid_pre"] = x
        x = x + out
        if not cfg["attn_only"]:
            names["hook_resid_mid"] = x
            h = layer_norm(x, sd[p + "ln2.w"], sd[p + "ln2.b"], cfg["eps"]) if ln else x
            pre = torch.einsum("bpd,dm->bpm", h, sd[p + "mlp.W_in"]) + sd[p + "mlp.b_in"]
            out = torch.einsum("bpm,md->bpd", act(pre), sd[p + "mlp.W_out"]) + sd[p + "mlp.b_out"]
            names.update({"ln2.hook_normalized": h, "mlp.hook_pre": pre, "mlp.hook_post": act(pre),
                          "hook_mlp_out": out})
            x = x + out
        names["hook_resid_post"] = x
        cache.update({p + k: v for k, v in names.items()})
        resid.append(x)
    if ln:
        x = layer_norm(x, sd["ln_final.w"], sd["ln_final.b"], cfg["eps"])
    return torch.einsum("bpd,dv->bpv", x, sd["unembed.W_U"]) + sd["unembed.b_U"], resid


def differs(got, want, tol):
    """Whether got differs from want by more than tol times max(1, want's
    largest finite |value|) or in its infinities; and by how much."""
    fin = torch.isfinite(want)
    if not torch.equal(fin, torch.isfinite(got)) or not torch.equal(got[~fin], want[~fin]):
        return True, float("inf")
    if not fin.any():
        return False, 0.0
    scale = max(1.0, float(want[fin].abs().max()))
    diff = float((got[fin] - want[fin]).abs().max()) / scale
    return not diff <= tol, diff


def block_pairs(model, cfg, tl, cache, b, ai, mi):
    """(what, TransformerLens's activation, the module's or None for 0) of
    block b, made of layers ai and mi (None: padding)."""
    p, pairs = "blocks.%d." % b, []
    norm = cfg["normalization_type"] == "LN"
    if ai is None:
        pairs.append(("hook_attn_out", tl[p + "hook_attn_out"], None))
    else:
        l, m = model.layers[ai], "blocks.%d." % ai
        H, dh, dv = l["heads"], l["d_head"], l["d_vhead"]
        fold = float(l["scale"]) * cfg["d_head"] ** 0.5  # folded into W_Q, b_Q
        for name, width, div in (("q", dh, fold), ("k", dh, 1.0), ("v", dv, 1.0), ("z", dv, 1.0)):
            t = tl[p + "attn.hook_" + name]
            pairs.append(("attn.hook_" + name, t[:, :, :H, :width] / div, cache[m + "attn.hook_" + name]))
            pad = torch.ones(t.shape, dtype=torch.bool)
            pad[:, :, :H, :width] = False
            pairs.append(("attn.hook_%s padding" % name, t[pad], None))
        for name in ("attn.hook_attn_scores", "attn.hook_pattern"):
            pairs.append((name, tl[p + name][:, :H], cache[m + name]))
        pairs.append(("hook_attn_out", tl[p + "hook_attn_out"], cache[m + "hook_attn_out"]))
        if norm:
            pairs.append(("ln1.hook_normalized", tl[p + "ln1.hook_normalized"], cache[m + "ln1.hook_normalized"]))
    if cfg["attn_only"]:
        return pairs
    if mi is None:
        pairs.append(("hook_mlp_out", tl[p + "hook_mlp_out"], None))
        return pairs
    l, m = model.layers[mi], "blocks.%d." % mi
    F = l["d_hidden"]
    for name in ("mlp.hook_pre", "mlp.hook_post"):
        pairs.append((name, tl[p + name][..., :F], cache[m + name]))
        pairs.append((name + " padding", tl[p + name][..., F:], None))
    pairs.append(("hook_mlp_out", tl[p + "hook_mlp_out"], cache[m + "hook_mlp_out"]))
    if norm:
        pairs.append(("ln2.hook_normalized", tl[p + "ln2.hook_normalized"], cache[m + "ln2.hook_normalized"]))
    return pairs


def main():
    if sys.argv[1] == "--refuse":
        try:
            t2tl.convert(tfw_torch.load(sys.argv[2]))
        except t2tl.ConvertError as e:
            ok = sys.argv[3] in str(e)
            print("%s: refused: %s" % (os.path.basename(sys.argv[2]), e))
            return 0 if ok else 1
        print("FAIL: %s converted; want a refusal with %r" % (sys.argv[2], sys.argv[3]))
        return 1
    path, tol, prompts = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    model = tfw_torch.load(path)
    cfg, sd, blocks = t2tl.convert(model)
    want_shapes = {"embed.W_E": (cfg["d_vocab"], cfg["d_model"]),
                   "pos_embed.W_pos": (cfg["n_ctx"], cfg["d_model"]),
                   "unembed.W_U": (cfg["d_model"], cfg["d_vocab_out"]),
                   "blocks.0.attn.W_Q": (cfg["n_heads"], cfg["d_model"], cfg["d_head"]),
                   "blocks.0.attn.W_O": (cfg["n_heads"], cfg["d_head"], cfg["d_model"]),
                   "blocks.0.attn.b_Q": (cfg["n_heads"], cfg["d_head"])}
    if not cfg["attn_only"]:
        want_shapes["blocks.0.mlp.W_in"] = (cfg["d_model"], cfg["d_mlp"])
        want_shapes["blocks.0.mlp.W_out"] = (cfg["d_mlp"], cfg["d_model"])
    failures = 0
    if set(cfg) - TL_FIELDS:
        print("FAIL: cfg keys HookedTransformerConfig does not have: %s" % sorted(set(cfg) - TL_FIELDS))
        failures += 1
    for name, shape in want_shapes.items():
        if tuple(sd[name].shape) != shape:
            print("FAIL: %s has shape %s, TransformerLens wants %s" % (name, tuple(sd[name].shape), shape))
            failures += 1
    compared = decoded = 0
    states = t2tl.hook_states(blocks, cfg["attn_only"])
    for prompt in prompts:
        tl = {}
        with torch.no_grad():
            logits, cache = model.run_with_cache(prompt)
            tl_logits, resid = tl_forward(cfg, sd, model.to_tokens(prompt), tl)
        for b, (ai, mi) in enumerate(blocks):
            last = mi if mi is not None else ai
            bad, diff = differs(resid[b], cache["blocks.%d.hook_resid_post" % last], tol)
            if bad:
                print("FAIL: %r: block %d (layers %s) differs by %.3g" % (prompt, b, [ai, mi], diff))
                failures += 1
            if states["blocks.%d.hook_resid_post" % b] != last + 1:
                print("FAIL: block %d (layers %s): hook_states says state %d"
                      % (b, [ai, mi], states["blocks.%d.hook_resid_post" % b]))
                failures += 1
            for name, got, want in block_pairs(model, cfg, tl, cache, b, ai, mi):
                bad, diff = differs(got, torch.zeros_like(got) if want is None else want, tol)
                compared += 1
                if bad:
                    print("FAIL: %r: block %d (layers %s): %s differs by %.3g%s"
                          % (prompt, b, [ai, mi], name, diff, "" if want is not None else " from 0"))
                    failures += 1
        for name, state in states.items():  # registers by state, from TransformerLens's streams
            if name not in tl:
                print("FAIL: hook_states names %s, which TransformerLens's forward has not" % name)
                failures += 1
                continue
            for reg in model.registers_at(state):
                got = model.decode(tl[name], reg, state=state)
                want = model.decode(cache, reg, state=state)
                decoded += 1
                if not all(g == w or (isinstance(g, float) and isinstance(w, (int, float)) and
                                      abs(g - w) <= tol * max(1.0, abs(w))) for g, w in zip(got, want)):
                    print("FAIL: %r: %s (state %d): register %s decodes to %s, the module's %s"
                          % (prompt, name, state, reg, got, want))
                    failures += 1
        bad, diff = differs(tl_logits, logits, tol)
        if bad or not torch.equal(tl_logits.argmax(-1), logits.argmax(-1)):
            print("FAIL: %r: logits differ by %.3g, or their argmax" % (prompt, diff))
            failures += 1
    print("%s: %d TransformerLens blocks %s, %d prompts, %d activations compared, %d registers "
          "decoded, %d failures" % (os.path.basename(path), cfg["n_layers"],
                                     blocks if len(blocks) < 8 else "...", len(prompts), compared,
                                     decoded, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
