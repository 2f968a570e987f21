#!/usr/bin/env python3
"""Convert a .tfw file to TransformerLens's layout: a HookedTransformerConfig-style
dict and a state dict of the names and shapes HookedTransformer expects.

    /usr/bin/python3 tools/tfw_to_transformerlens.py MODEL.tfw OUT.pt
        writes torch.save({"cfg": cfg, "state_dict": sd, "blocks": blocks, "states": states,
        "vocab": names, "input_vocab": n}, OUT.pt); vocab lists the tokens' names (characters,
        or words), and input_vocab how many of them a prompt can hold (the others are
        output-only: rows of the unembedding, zero rows of W_E that no prompt reaches);
        states (hook_states) the file's residual state each of TransformerLens's
        residual streams is (blocks.{b}.hook_resid_pre, _mid, _post), to decode registers by

    import tfw_to_transformerlens as t2tl
    cfg, sd, blocks = t2tl.convert(tfw_torch.load("MODEL.tfw"))
    # with TransformerLens installed:
    #   model = HookedTransformer(HookedTransformerConfig(**cfg)); model.load_state_dict(sd)

TransformerLens's blocks are uniform (attention then MLP, the same heads,
head width, MLP width, activation, attention direction and normalization in
every block); a .tfw's layers are not. The mapping (docs/python.md):

- blocks: an attention layer and the MLP layer right after it form one block;
  an attention layer without one gets a zero MLP, an MLP layer without an
  attention layer before it a zero attention (zero weights and biases: they
  add exactly 0). `blocks` lists, per block, the file's [attention layer,
  MLP layer] indices (None for padding).
- widths: n_heads, d_head and d_mlp are the largest of the file's; narrower
  heads, extra heads and narrower MLPs are padded with zeros (a head's value
  width d_vhead pads to d_head too).
- scales: TransformerLens divides every score by sqrt(d_head)
  (use_attn_scale); each layer's own scale is folded into its W_Q and b_Q.
- a layer without an output projection gets the identity as W_O.
- registers: TransformerLens has none, and its block b is not the file's
  layer b. hook_states(blocks) gives the file's residual state (state i + 1
  is layer i's output) of each of its residual streams, the state
  tfw_torch's decode needs, as a register may hold its columns in some
  states only (its "live" range):
  model.decode(tl_cache[name], "carry", state=hook_states(blocks)[name]).
- normalization "LN" when every attention and MLP layer has a pre-norm and
  the last layer is a norm layer (ln_final); None when no layer has norms.

Refused, with a message: more than one activation across the MLP layers
(gelu is TransformerLens's "gelu", the exact erf form; gelu_tanh its
"gelu_new"); causal and
bidirectional attention in one model; some layers pre-normed and others not,
norm layers anywhere but last (post-norm), or different LayerNorm eps.
Classifiers convert (d_vocab_out is the number of classes) but
TransformerLens reads logits at every position; the class is read at the
file's classify_at position.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfw_torch  # noqa: E402


class ConvertError(Exception):
    pass


def plan_blocks(layers):
    """[[attention layer or None, MLP layer or None], ...] in order."""
    blocks, i = [], 0
    while i < len(layers):
        kind = layers[i]["kind"]
        if kind == "attention":
            if i + 1 < len(layers) and layers[i + 1]["kind"] == "mlp":
                blocks.append([i, i + 1])
                i += 2
            else:
                blocks.append([i, None])
                i += 1
        elif kind == "mlp":
            blocks.append([None, i])
            i += 1
        else:
            i += 1  # norm layers: checked by check_norms
    return blocks


def hook_states(blocks, attn_only=False):
    """{TransformerLens's residual-stream name: the file's residual state it
    is} (state 0 the embedding's output, state i + 1 layer i's):
    blocks.{b}.hook_resid_pre, hook_resid_mid (after the block's attention;
    not in an attn_only model) and hook_resid_post, for decoding registers
    by state from a TransformerLens run (tfw_torch's decode, state=)."""
    states, s = {}, 0
    for b, (ai, mi) in enumerate(blocks):
        p = "blocks.%d." % b
        states[p + "hook_resid_pre"] = s
        s = s if ai is None else ai + 1
        if not attn_only:
            states[p + "hook_resid_mid"] = s
        s = s if mi is None else mi + 1
        states[p + "hook_resid_post"] = s
    return states


def check_norms(layers):
    """'LN' or None; raises ConvertError when the file's norms do not fit."""
    sub = [l for l in layers if l["kind"] != "norm"]
    normed = [("norm_weight" in l) for l in sub]
    norms = [i for i, l in enumerate(layers) if l["kind"] == "norm"]
    if not any(normed) and not norms:
        return None
    if not any(normed) or norms[:-1]:
        raise ConvertError("norm layers between the sublayers (post-norm): TransformerLens "
                           "has LayerNorms before its sublayers and at the end only")
    if not all(normed):
        raise ConvertError("some layers have a pre-norm and some do not: TransformerLens "
                           "normalizes every block or none")
    if norms != [len(layers) - 1]:
        raise ConvertError("a pre-norm model without a final norm layer: TransformerLens "
                           "applies ln_final")
    eps = {float(l.get("norm_eps", 1e-5)) for l in layers if l["kind"] == "norm" or "norm_weight" in l}
    if len(eps) != 1:
        raise ConvertError("LayerNorms with different eps: TransformerLens has one")
    return "LN"


def convert(model):
    """(cfg dict, state dict, blocks) of a tfw_torch.Model."""
    layers, t = model.layers, model.tf.t
    d = model.cfg["d_model"]
    attn = [l for l in layers if l["kind"] == "attention"]
    mlps = [l for l in layers if l["kind"] == "mlp"]
    acts = {l["activation"] for l in mlps}
    if len(acts) > 1:
        raise ConvertError("the MLP layers mix activations (%s): TransformerLens has one act_fn"
                           % ", ".join(sorted(acts)))
    dirs = {bool(l["causal"]) for l in attn}
    if len(dirs) > 1:
        raise ConvertError("causal and bidirectional attention layers: TransformerLens has one "
                           "attention_dir")
    act = acts.pop() if acts else "relu"
    act_fn = {"gelu_tanh": "gelu_new"}.get(act, act)  # TransformerLens's name of the tanh GELU
    norm = check_norms(layers)
    blocks = plan_blocks(layers)
    n_heads = max([l["heads"] for l in attn] + [1])
    d_head = max([max(l["d_head"], l["d_vhead"]) for l in attn] + [1])
    d_mlp = max([l["d_hidden"] for l in mlps] + [1])
    attn_scale = float(d_head) ** 0.5  # what TransformerLens divides the scores by
    eps = next((float(l.get("norm_eps", 1e-5)) for l in layers
                if l["kind"] == "norm" or "norm_weight" in l), 1e-5)
    cfg = {
        "n_layers": len(blocks), "d_model": d, "n_ctx": model.cfg["n_ctx"],
        "d_head": d_head, "n_heads": n_heads, "d_mlp": d_mlp if mlps else None,
        "d_vocab": model.cfg["d_vocab"], "d_vocab_out": model.cfg["d_vocab_out"],
        "act_fn": act_fn,
        "normalization_type": norm,
        "attention_dir": "bidirectional" if dirs == {False} else "causal",
        "attn_only": not mlps, "eps": eps, "use_attn_scale": True,
        "positional_embedding_type": "standard", "default_prepend_bos": False,
        "original_architecture": "tfw", "model_name": model.meta.get("source_name", "tfw"),
    }
    zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float32)  # noqa: E731
    get = lambda l, key: t[l[key]].detach() if key in l else None  # noqa: E731
    sd = {"embed.W_E": t["embed.token.weight"].detach().clone(),
          "pos_embed.W_pos": t["embed.position.weight"].detach().clone(),
          "unembed.W_U": t["unembed.weight"].detach().T.clone(),
          "unembed.b_U": (t["unembed.bias"].detach().clone() if "unembed.bias" in t
                          else zeros(model.cfg["d_vocab_out"]))}
    for b, (ai, mi) in enumerate(blocks):
        p = "blocks.%d." % b
        W = {k: zeros(n_heads, d, d_head) for k in ("W_Q", "W_K", "W_V")}
        B = {k: zeros(n_heads, d_head) for k in ("b_Q", "b_K", "b_V")}
        W_O, b_O = zeros(n_heads, d_head, d), zeros(d)
        ln1_w, ln1_b, ln2_w, ln2_b = torch.ones(d), zeros(d), torch.ones(d), zeros(d)
        if ai is not None:
            l = layers[ai]
            H, dh, dv = l["heads"], l["d_head"], l["d_vhead"]
            fold = float(l["scale"]) * attn_scale  # TL divides by attn_scale
            for key, wk, bk, width, f in (("Q", "query", "query_bias", dh, fold),
                                          ("K", "key", "key_bias", dh, 1.0),
                                          ("V", "value", "value_bias", dv, 1.0)):
                w = get(l, wk).reshape(H, width, d)  # [H*width, d] -> per head [width, d]
                W["W_" + key][:H, :, :width] = w.transpose(1, 2) * f
                if bk in l:
                    B["b_" + key][:H, :width] = get(l, bk).reshape(H, width) * f
            if "output" in l:
                W_O[:H, :dv, :] = get(l, "output").T.reshape(H, dv, d)
            else:  # the heads' concatenation is the residual update itself
                for h in range(H):
                    W_O[h, torch.arange(dv), h * dv + torch.arange(dv)] = 1.0
            if "output_bias" in l:
                b_O = get(l, "output_bias").clone()
            if norm:
                ln1_w, ln1_b = get(l, "norm_weight").clone(), get(l, "norm_bias").clone()
        for k in W:
            sd[p + "attn." + k] = W[k]
        for k in B:
            sd[p + "attn." + k] = B[k]
        sd[p + "attn.W_O"], sd[p + "attn.b_O"] = W_O, b_O
        if mlps:
            W_in, b_in, W_out, b_out = zeros(d, d_mlp), zeros(d_mlp), zeros(d_mlp, d), zeros(d)
            if mi is not None:
                l = layers[mi]
                F = l["d_hidden"]
                W_in[:, :F] = get(l, "fc1_weight").T
                W_out[:F, :] = get(l, "fc2_weight").T
                if "fc1_bias" in l:
                    b_in[:F] = get(l, "fc1_bias")
                if "fc2_bias" in l:
                    b_out = get(l, "fc2_bias").clone()
                if norm:
                    ln2_w, ln2_b = get(l, "norm_weight").clone(), get(l, "norm_bias").clone()
            sd[p + "mlp.W_in"], sd[p + "mlp.b_in"] = W_in, b_in
            sd[p + "mlp.W_out"], sd[p + "mlp.b_out"] = W_out, b_out
        if norm:
            sd[p + "ln1.w"], sd[p + "ln1.b"] = ln1_w, ln1_b
            if mlps:
                sd[p + "ln2.w"], sd[p + "ln2.b"] = ln2_w, ln2_b
    if norm:
        last = layers[-1]
        sd["ln_final.w"], sd["ln_final.b"] = get(last, "norm_weight").clone(), get(last, "norm_bias").clone()
    return cfg, sd, blocks


def main():
    if len(sys.argv) != 3:
        print("usage: tfw_to_transformerlens.py MODEL.tfw OUT.pt", file=sys.stderr)
        return 2
    try:
        model = tfw_torch.load(sys.argv[1])
        cfg, sd, blocks = convert(model)
    except (OSError, ValueError, KeyError, tfw_torch.TfwError, ConvertError) as e:
        print("tfw_to_transformerlens: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    # vocab: token i's name (a character, or a word), as TransformerLens's tokenizer would map it;
    # input_vocab: how many of them a prompt can hold (the rest are output-only: logits only)
    # states: the file's residual state of each residual stream (hook_states), to decode registers by
    torch.save({"cfg": cfg, "state_dict": sd, "blocks": blocks,
                "states": hook_states(blocks, cfg["attn_only"]),
                "vocab": model.vocab, "input_vocab": model.tf.n_input}, sys.argv[2])
    print("%s: %d blocks (%s), d_model %d, %d heads of %d, d_mlp %s, %s, %s"
          % (sys.argv[2], cfg["n_layers"], json.dumps(blocks), cfg["d_model"], cfg["n_heads"],
             cfg["d_head"], cfg["d_mlp"], cfg["act_fn"], cfg["normalization_type"] or "no norm"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
