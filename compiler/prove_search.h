/* prove_search.h: a counterexample for a proof that fails (compiler/prove.h).
 *
 * The validator names the failing op and the base variables' values of its
 * failing cases; this searches prompts that reach them (every short prompt,
 * a climb towards the case, longer prompts of one or two tokens), runs each
 * by the program (prove_ref_run) and by the weights (runtime/engine), and
 * prints the first on which they disagree:
 *
 *   counterexample: prompt '^aaaaaaa': at position 1 the program gives '7', the weights '^' (...)
 *
 * (a generating model: the prompt cut where the weights first go wrong and
 * the token each gives next; a run-time check that stops the weights where
 * the program answers: "the weights stop: ..."), else the prompts it tried.
 * The same prompts on every machine (fixed seeds, budgets in prompts).
 * Used by tfprove and by tfc, which proves what it writes.
 */
#ifndef TF_PROVE_SEARCH_H
#define TF_PROVE_SEARCH_H

#include <stdio.h>

#include "model.h"
#include "prove.h"

/* Searches for a counterexample to P (not proven) and prints what it
 * finds to out. A learned model (no program to evaluate) prints nothing. */
void prove_search(const TfModel *m, const TfProof *P, FILE *out);

#endif
