/* compare.h: two models on the same prompt, side by side, every attention
 * head of one against every head of the other (tfrun --compare).
 *
 * Both captures must hold the same number of positions (the same prompt;
 * the token ids may differ, the vocabularies being the models' own). The
 * similarity of head a of model A and head b of model B on those n
 * positions compares their attention patterns row by row; every row of a
 * pattern is a probability distribution over the keys (masked keys hold 0):
 *
 *   sim(a, b) = 1 - (1/n) sum_q TV(a[q], b[q]),
 *   TV(x, y)  = 1/2 sum_k |x_k - y_k|      (total-variation distance)
 *
 * in [0, 1]: 1 when the two heads attend identically at every query, 0 when
 * at every query they put their weight on disjoint keys; 1 - sim is the
 * share of attention that would have to move to turn one pattern into the
 * other. It is computed in double from the float32 weights. The best match
 * of a head is the head of the other model with the highest similarity (the
 * first, in layer and head order, on a tie).
 *
 * The page (compare_write_html) is self-contained like report.h's report: a
 * table of contents; a summary (the prompt, each model's file, size and
 * the line tfrun prints for it); the similarity matrix as a heatmap (rows
 * A's heads, columns B's, white 0 to purple 1, each row's best match
 * outlined, the value in the cell when cells are large enough); both best-
 * match tables; then A's and B's attention maps in two columns, side by
 * side. Hover shows exact values; the script marks the page #report-ok
 * after checking its hover on the matrix (#report-error on any error).
 * Anchors: #summary, #similarity, #best, #model-a, #model-b,
 * #a-layer-L-hH, #b-layer-L-hH.
 *
 * Memory: compare_new returns a TfCompare the caller frees with
 * compare_free; it borrows the captures and the strings, which must
 * outlive it.
 */
#ifndef TF_COMPARE_H
#define TF_COMPARE_H

#include <stdio.h>

#include "inspect.h"

typedef struct TfCompareHead {
    int layer, head;
} TfCompareHead;

typedef struct TfCompare {
    const TfCapture *cap[2];  /* A and B (borrowed) */
    const char *file[2];      /* their weight files, as named on the command line */
    const char *result[2];    /* the line tfrun prints for each, or NULL (set by the caller) */
    int n_heads[2];           /* attention heads of A and of B */
    TfCompareHead *heads[2];  /* every head of each, in layer then head order */
    double *sim;              /* [n_heads[0], n_heads[1]]: sim(A's i, B's j) at i * n_heads[1] + j */
    int *best[2];             /* best[0][i]: B's head most like A's head i; best[1][j]: A's head
                                 most like B's head j */
} TfCompare;

/* sim() of head ha of layer la in a and head hb of layer lb in b; the
 * captures hold the same number of positions. */
double compare_similarity(const TfCapture *a, int la, int ha, const TfCapture *b, int lb, int hb);

/* Every head of a against every head of b. NULL with err set when the
 * positions differ, when a model has no attention head, or out of memory. */
TfCompare *compare_new(const TfCapture *a, const char *file_a, const TfCapture *b,
                       const char *file_b, TfError *err);
void compare_free(TfCompare *cmp);

/* The similarity matrix as an SVG picture (standalone: with an XML
 * declaration). */
void compare_svg_matrix(const TfCompare *cmp, int standalone, FILE *out);

/* Writes the comparison page. 0, or -1 with err naming the file. */
int compare_write_html(const TfCompare *cmp, const char *path, TfError *err);

/* Creates dir when missing and writes into it similarity.svg, and each
 * model's pictures (report_write_svgs) into dir/a and dir/b. 0, or -1 with
 * err. */
int compare_write_svgs(const TfCompare *cmp, const char *dir, TfError *err);

#endif
