/* draw.h: the small writers of the pages and pictures runtime/inspect draws
 * (report.c's report, compare.c's comparison): escaped HTML and SVG text,
 * JSON values, ColorBrewer colour ramps and their colour bar, an SVG's
 * opening tag, the output file, and the style sheet and first script every
 * page shares. Internal to runtime/inspect.
 *
 * Memory: nothing is allocated; the strings are static.
 */
#ifndef TF_DRAW_H
#define TF_DRAW_H

#include <stdio.h>

#include "error.h"

/* Text for HTML and SVG: & < > " ' escaped (at most n characters). */
void draw_escaped(FILE *f, const char *s, size_t n);
void draw_text(FILE *f, const char *s);
/* s cut to `max` characters, the last replaced by an ellipsis when cut. */
void draw_short(FILE *f, const char *s, size_t max);
/* A JSON string; '<' as \u003c so that the data cannot close its <script>. */
void draw_json_string(FILE *f, const char *s);
/* A float exactly (9 significant digits round-trip float32); null if not finite. */
void draw_json_float(FILE *f, float v);

/* Signed colour for v / scale: ColorBrewer's RdBu, blue (negative), white
 * (0), red (positive), saturating at +-1; NaN and infinities green. Writes
 * "#rrggbb" into hex (8 bytes); 0 when white (the cell need not be drawn). */
int draw_diverging(float v, float scale, char *hex);
/* White (w = lo) to dark purple (w = hi), ColorBrewer's Purples; as above. */
int draw_sequential(float w, float lo, float hi, char *hex);

#define DRAW_BAR_W 160 /* a colour bar's width in pixels */
/* A colour bar at (x, y), DRAW_BAR_W by 8 pixels: signed (-hi to +hi, 0 in
 * the middle) or sequential (lo to hi); its ends labelled under it. */
void draw_colour_bar(FILE *f, int x, int y, int signed_bar, float lo, float hi);

/* "<svg ..." with the size and the fonts, the tag left open for more
 * attributes (with an XML declaration first when standalone). */
void draw_svg_open(FILE *f, int standalone, int width, int height);
/* Pixels a picture's title of n characters needs (12 px bold monospace). */
int draw_title_width(size_t n);

/* The pages' style sheet, and their first script: on its own, so that it
 * catches even a syntax error in the next; it defines mark(id, text) (a
 * paragraph in #status) and marks any error with #report-error. */
extern const char *const draw_css;
extern const char *const draw_js_guard;

/* What both pages' main script starts with: D (the page's JSON data), tip
 * and pinned, tok(p), fmt(v), where(svg, ev), and draw_hover(svgs,
 * describe): hovering a heatmap cell shows describe(svg, x, y) in the tip,
 * clicking pins it. */
extern const char *const draw_js_common;

#endif
