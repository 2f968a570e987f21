/* intervene.h: interventions, tfrun's --ablate and --patch-from
 * (docs/inspect.md, "Ablation and patching").
 *
 *   TfIntervention *iv = intervention_parse(m, specs, n_specs, patching, &err);
 *   intervention_prepare(iv, TF_EDIT_MEAN, prompt, len, n_new, &err);   the means
 *   intervention_prepare(iv, TF_EDIT_PATCH, source, len2, n_new, &err); the patches
 *   infer_set_intervention(inf, iv, &err);    every run of inf is then edited
 *
 * An edit replaces one activation while the model runs, at every row the
 * engine computes: heads of an attention layer (their softmax-weighted sums
 * of values, TransformerLens's hook_z), hidden units of an MLP (after the
 * activation, hook_post), all a layer adds to the residual stream
 * (hook_attn_out / hook_mlp_out), or a register's columns of the residual
 * stream after a layer. It replaces them by 0 (zero), by their mean over
 * every position of the prompt's own unedited run (mean), or by their value
 * at the same position in another prompt's unedited run (patch; positions
 * that run does not have keep their own values). Later layers then read the
 * edited values; keys and values cached for later steps are the edited ones.
 *
 * A SPEC is a comma-separated list of items [MODE:]TARGET, MODE zero, mean
 * or patch (default: patch when patching, else zero), TARGET one of
 *   layers.N, LAYER                 what the layer adds (attention or MLP)
 *   layers.N.attn, layers.N.mlp     the same, saying which kind it must be
 *   layers.N.head.H, LAYER.head.H   head H (layers.N.heads.A-B: A to B)
 *   PART                            an op of a merged layer: its heads or units
 *   REG@layers.N, REG@LAYER, REG@embed   register REG after that layer
 * LAYER is a layer's name (tfinfo lists them: a compiled op's label, h.3.mlp
 * in a converted GPT-2) and names every layer of that name. A register
 * whose live range is narrower than every state (model.h's
 * TfRegister.live_from: another register may hold its columns in the
 * others) is edited after those of the layers where it holds its columns.
 *
 * Memory: an intervention borrows the model (which must outlive it) and
 * owns its edits; an engine borrows the intervention.
 */
#ifndef TF_INTERVENE_H
#define TF_INTERVENE_H

#include "model.h"

typedef enum TfEditMode { TF_EDIT_ZERO, TF_EDIT_MEAN, TF_EDIT_PATCH, TF_EDIT_MODE_COUNT } TfEditMode;

typedef enum TfEditSite {
    TF_SITE_HEADS,  /* attention: z channels of heads [first, first + count) */
    TF_SITE_UNITS,  /* MLP: hidden units [first, first + count), after the activation */
    TF_SITE_OUTPUT, /* what the layer adds, every column */
    TF_SITE_RESID,  /* residual columns [first, first + count) after `layer` (-1: the embedding) */
    TF_SITE_COUNT
} TfEditSite;

typedef struct TfEdit {
    TfEditMode mode;
    TfEditSite site;
    int layer;
    int lo, hi;    /* the columns edited, [lo, hi) of the site's activation */
    int width;     /* that activation's columns per row */
    char *label;   /* the item as given, owned */
    /* mean: width floats; patch: n_pos rows of width floats (row p: position
     * p); NULL until intervention_prepare (and for zero). */
    float *values;
    int n_pos;
} TfEdit;

typedef struct TfIntervention {
    const TfModel *m;
    TfEdit *edits;
    int n;
} TfIntervention;

extern const char *const tf_edit_mode_names[]; /* "zero", "mean", "patch" */

/* The edits that specs[0..n_specs) name; patching sets the default mode
 * to patch. NULL with err set: an item that names nothing ("--ablate:
 * 'cary' names no layer, op or register (did you mean 'carry'?)"), a head
 * out of range, a register without a layer, a register after layers (or
 * the embedding) where it does not hold its columns ("--ablate:
 * 'left@layers.14': register 'left' holds its columns in states 0..12 (the
 * embedding to after layer 11) only, not after layer 14 (read_left)"), a
 * norm layer. */
TfIntervention *intervention_parse(const TfModel *m, const char *const *specs, int n_specs,
                                   int patching, TfError *err);
void intervention_free(TfIntervention *iv);

/* 1 when some edit has mode `mode`. */
int intervention_has(const TfIntervention *iv, TfEditMode mode);

/* Runs the prompt (token ids) unedited, generating n_new tokens as tfrun
 * would (one pass for a model read at every position or a classifier),
 * and records the values the edits of mode `mode` (mean or patch) use.
 * 0, or -1 with err set. */
int intervention_prepare(TfIntervention *iv, TfEditMode mode, const int *ids, int len, int n_new,
                         TfError *err);

#endif
