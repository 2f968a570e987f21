/* report.h: pictures of a captured forward pass: SVG heatmaps and a
 * self-contained HTML report.
 *
 *   residual heatmap   rows = positions (labelled with their tokens),
 *                      columns = residual columns, grouped and labelled by
 *                      register (upright names above; the registers the
 *                      layer wrote are highlighted); red positive, blue
 *                      negative, white 0, with a colour bar
 *   attention matrix   rows = query positions, columns = key positions, both
 *                      labelled with tokens; white at the smallest visible
 *                      weight to dark purple at the largest, with a colour bar
 *
 * No two labels of a picture overlap: narrow registers' names move aside
 * (with a leader line), long ones are cut, and the positions of small cells
 * are labelled in a smaller font or every k-th.
 *
 * The HTML report is one file with inline CSS, SVG and JavaScript and no
 * network access: a table of contents, the result and what the unembedding
 * reads, a model view (every layer in order: an attention layer's heads as
 * thumbnails of their attention, another layer as what it added to the
 * residual), the program with each op's line linked to the layers and heads
 * it became, the layer list, then one collapsible section per layer with the
 * decoded registers, the residual heatmap and every head's attention
 * (closed at first when the model has more than 8 layers). Hovering a cell
 * shows its exact value; clicking pins it; a link into a closed section
 * opens it. The script adds an element with id "report-ok" when it has run
 * (it checks its own hover lookup on the first heatmap) and one with id
 * "report-error" on any error. Anchors: #summary, #model-view, #program,
 * #line-N, #layers, #trace, #embedding, #layer-L, #layer-L-hH.
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

/* Creates dir when missing and writes into it resid_embedding.svg,
 * resid_LL_NAME.svg (the residual after layer LL) for every layer and
 * att_LL_NAME_hH.svg for every head of every attention layer: LL is the
 * layer's index, as tfinfo lists it and the titles say. 0, or -1 with err. */
int report_write_svgs(const TfCapture *c, const char *dir, TfError *err);

#endif
