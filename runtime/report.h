/* report.h: pictures of a captured forward pass: SVG heatmaps and a
 * self-contained HTML report.
 *
 *   residual heatmap   rows = positions (labelled with their tokens),
 *                      columns = residual columns, grouped and labelled by
 *                      register (bands above; the registers the layer wrote
 *                      are highlighted); red positive, blue negative, white 0
 *   attention matrix   rows = query positions, columns = key positions, both
 *                      labelled with tokens; white 0 to dark purple at the
 *                      matrix's largest weight (1 for sharp heads)
 *
 * The HTML report is one file with inline CSS, SVG and JavaScript and no
 * network access: the layer list with source lines, then per layer the
 * decoded registers, the residual heatmap and every head's attention.
 * Hovering a cell shows its exact value; clicking pins it. The script adds
 * an element with id "report-ok" when it has run (it checks its own hover
 * lookup on the first heatmap) and one with id "report-error" on any error.
 *
 * Memory: nothing returned is owned by the caller; the capture is borrowed.
 */
#ifndef TF_REPORT_H
#define TF_REPORT_H

#include <stdio.h>

#include "inspect.h"

/* One standalone SVG document (with an XML declaration when standalone). */
void report_svg_residual(const TfCapture *c, int block, int standalone, FILE *out);
void report_svg_attention(const TfCapture *c, int layer, int head, int standalone, FILE *out);

/* Writes the HTML report. 0, or -1 with err naming the file. */
int report_write_html(const TfCapture *c, const char *path, TfError *err);

/* Creates dir when missing and writes into it resid_BB_NAME.svg for every
 * block (00 is the embedding) and att_BB_NAME_hH.svg for every head of
 * every attention layer (BB the block after the layer). 0, or -1 with err. */
int report_write_svgs(const TfCapture *c, const char *dir, TfError *err);

#endif
