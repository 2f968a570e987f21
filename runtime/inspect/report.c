/* report.c: SVG heatmaps and the HTML report. See report.h.
 *
 * Every picture is drawn here, in C, as SVG: the same code writes the
 * standalone files (--svg) and the figures inlined in the report, so the
 * report shows everything even with scripts off. The report's script only
 * adds hover and click (it maps the mouse to a cell with the figure's data-*
 * attributes and reads the exact value from the JSON the report embeds) and
 * opens the collapsed section a link points into.
 *
 * Axis labels never overlap: register names stand upright and move aside
 * (with a leader line to their columns) when their columns are narrower
 * than a label; position labels of small cells are set smaller and, below
 * that, only every k-th is written (every cell still says its position on
 * hover).
 */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "draw.h"
#include "outfile.h"

/* --- labels (the small writers and the colours are in draw.c) -------------- */

/* "3 '9'": a position and its token, for axis labels. */
static void pos_label(const TfCapture *c, int p, char *buf, size_t n) {
    char t[32];
    inspect_token_text(c->m, c->tokens[p], t, sizeof t);
    snprintf(buf, n, "%d %s", p, t);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* "after layer 3 step_out (StepPosition, line 42)"; a layer of several ops
 * names each, "after layer 0 n+hist (head 0: n (Count, line 10); heads 1-2:
 * hist (Aggregate, line 11))". */
static void block_title(const TfCapture *c, int block, char *buf, size_t n) {
    if (block == 0) {
        snprintf(buf, n, "after the embedding");
        return;
    }
    const TfLayer *ly = &c->m->layers[block - 1];
    char what[160];
    inspect_layer_text(ly, 0, what, sizeof what);
    snprintf(buf, n, "after layer %d %s (%s)", block - 1, ly->name, what);
}

/* "head 3", or in a layer of several ops the op the head belongs to: "head
 * 1: hist (Aggregate, line 11)". */
static void head_text(const TfLayer *ly, int head, char *buf, size_t n) {
    int i = inspect_part_of(ly, head);
    char part[128];
    if (i >= 0) inspect_part_text(ly, i, INSPECT_PART_LINE, part, sizeof part);
    snprintf(buf, n, "head %d%s%s", head, i >= 0 ? ": " : "", i >= 0 ? part : "");
}

/* --- residual heatmap ------------------------------------------------------ */

#define LABEL_PITCH 12 /* pixels between upright 10 px labels (their boxes are 11.6 wide) */
#define LABEL_CHARS 12 /* register names longer than this are cut */

typedef struct Geo {
    int left, top, cw, ch, width, height;
} Geo;

/* Where the upright label of each register that holds its columns after
 * block `block` goes: x[r] (its centre), in the order of the registers'
 * columns, at least LABEL_PITCH apart; -1 for the others (registers that
 * share columns hold them in different blocks). Returns the rightmost. x
 * holds n_regs ints. */
static int place_reg_labels(const TfModel *m, int block, int left, int cw, int *x) {
    int *order = malloc((size_t)m->n_regs * sizeof(int));
    int right = left, n = 0;
    if (!order) {
        for (int r = 0; r < m->n_regs; r++)
            x[r] = model_reg_live(m, r, block) ? left + m->regs[r].offset * cw : -1;
        return right;
    }
    for (int r = 0; r < m->n_regs; r++) { /* insertion sort by first column */
        x[r] = -1;
        if (!model_reg_live(m, r, block)) continue;
        int j = n++;
        while (j > 0 && m->regs[order[j - 1]].offset > m->regs[r].offset) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = r;
    }
    int prev = -LABEL_PITCH * 2;
    for (int i = 0; i < n; i++) {
        const TfRegister *reg = &m->regs[order[i]];
        int want = left + reg->offset * cw + reg->size * cw / 2;
        x[order[i]] = want > prev + LABEL_PITCH ? want : prev + LABEL_PITCH;
        prev = x[order[i]];
        if (prev > right) right = prev;
    }
    free(order);
    return right;
}


static Geo resid_geo(const TfCapture *c, int block) {
    Geo g;
    char title[256];
    int d = c->m->d_model;
    g.cw = clampi(900 / (d > 0 ? d : 1), 2, 14);
    g.ch = 14;
    g.left = 72;
    g.top = c->m->n_regs > 0 ? 112 : 44;
    g.width = g.left + d * g.cw + 16;
    if (c->m->n_regs > 0) {
        int *x = malloc((size_t)c->m->n_regs * sizeof(int));
        int right = x ? place_reg_labels(c->m, block, g.left, g.cw, x) : 0;
        free(x);
        if (right + LABEL_PITCH > g.width) g.width = right + LABEL_PITCH;
    }
    if (g.width < 560) g.width = 560; /* room for the legend */
    block_title(c, block, title, sizeof title);
    if (g.width < draw_title_width(strlen("residual ") + strlen(title)))
        g.width = draw_title_width(strlen("residual ") + strlen(title));
    g.height = g.top + c->n_pos * g.ch + 32;
    return g;
}

/* Colour scale (the colour bar's ends): register values are made to be
 * about 1 (one-hots, sin and cos), so compiled models saturate at +-1;
 * otherwise the block's largest. */
static float resid_scale(const TfCapture *c, int block) {
    if (c->m->n_regs > 0) return 1.0f;
    float mx = 0;
    for (int p = 0; p < c->n_pos; p++) {
        const float *row = capture_row(c, block, p);
        for (int i = 0; i < c->m->d_model; i++)
            if (isfinite(row[i]) && fabsf(row[i]) > mx) mx = fabsf(row[i]);
    }
    return mx > 1e-6f ? mx : 1.0f;
}

/* A band's hover text: "left (columns 22-35)"; a register that holds its
 * columns in some states only, "left (columns 22-35, states 0..12 (the
 * embedding to after layer 11); shared with left2, states 13..36 (...))". */
static void band_title(const TfModel *m, int r, FILE *f) {
    const TfRegister *reg = &m->regs[r];
    char range[96];
    draw_text(f, reg->name);
    fprintf(f, " (columns %d-%d", reg->offset, reg->offset + reg->size - 1);
    if (model_reg_reused(m, r)) {
        model_live_text(m, r, range, sizeof range);
        fprintf(f, ", %s", range);
    }
    for (int j = 0, n = 0; j < m->n_regs; j++) {
        const TfRegister *o = &m->regs[j];
        if (j == r || o->offset >= reg->offset + reg->size || reg->offset >= o->offset + o->size)
            continue;
        model_live_text(m, j, range, sizeof range);
        fputs(n++ ? "; " : "; shared with ", f);
        draw_text(f, o->name);
        fprintf(f, ", %s", range);
    }
    fputc(')', f);
}

/* Register bands and upright names above the columns, of the registers
 * that hold their columns after this block (registers that share columns
 * hold them in different blocks); the registers this block wrote in amber.
 * A name whose columns are too narrow moves right, joined to its band by a
 * leader line. */
static void resid_reg_labels(const TfCapture *c, int block, const Geo *g, FILE *f) {
    const TfModel *m = c->m;
    int *lx = malloc((size_t)m->n_regs * sizeof(int));
    if (!lx) return;
    place_reg_labels(m, block, g->left, g->cw, lx);
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *reg = &m->regs[r];
        if (lx[r] < 0) continue; /* not held after this block */
        int wrote = inspect_register_wrote(c, block, r);
        int x = g->left + reg->offset * g->cw, w = reg->size * g->cw, mid = x + w / 2;
        fprintf(f,
                "<rect class=\"band%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"7\" fill=\"%s\">"
                "<title>",
                wrote ? " wrote" : "", x, g->top - 9, w > 1 ? w - 1 : 1,
                wrote ? "#f59e0b" : (r % 2 ? "#9ca3af" : "#d1d5db"));
        band_title(m, r, f);
        fputs("</title></rect>\n", f);
        if (lx[r] != mid)
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#9ca3af\" "
                    "stroke-width=\"0.7\"/>\n",
                    mid, g->top - 10, lx[r], g->top - 15);
        // Upright: the glyphs lie left of the baseline (ascent 9.3, descent
        // 2.4 px), so the baseline sits 3.5 px right of the label's centre.
        fprintf(f, "<text class=\"reg\" transform=\"translate(%d.5,%d) rotate(-90)\"%s>", lx[r] + 3,
                g->top - 17, wrote ? " font-weight=\"bold\"" : "");
        if (strlen(reg->name) > LABEL_CHARS) {
            fputs("<title>", f);
            draw_text(f, reg->name);
            fputs("</title>", f);
        }
        draw_short(f, reg->name, LABEL_CHARS);
        fputs("</text>\n", f);
    }
    free(lx);
}

void report_svg_residual(const TfCapture *c, int block, int standalone, FILE *f) {
    const TfModel *m = c->m;
    Geo g = resid_geo(c, block);
    int d = m->d_model;
    float scale = resid_scale(c, block);
    char title[256], label[64], hex[8];
    block_title(c, block, title, sizeof title);
    draw_svg_open(f, standalone, g.width, g.height);
    fprintf(f,
            " class=\"hm\" data-kind=\"resid\" data-block=\"%d\" data-x0=\"%d\" data-y0=\"%d\" "
            "data-cw=\"%d\" data-ch=\"%d\" data-rows=\"%d\" data-cols=\"%d\">\n",
            block, g.left, g.top, g.cw, g.ch, c->n_pos, d);
    fputs("<title>residual stream ", f);
    draw_text(f, title);
    fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fputs("<text x=\"4\" y=\"13\" font-size=\"12\" font-weight=\"bold\">residual ", f);
    draw_text(f, title);
    fprintf(f, "</text>\n");

    if (m->n_regs > 0) {
        resid_reg_labels(c, block, &g, f);
    } else {
        int step = d <= 64 ? 8 : d <= 256 ? 32 : 128;
        for (int col = 0; col < d; col += step)
            fprintf(f, "<text class=\"col\" x=\"%d\" y=\"%d\">%d</text>\n", g.left + col * g.cw,
                    g.top - 4, col);
    }
    // Position labels: "3 '9'".
    for (int p = 0; p < c->n_pos; p++) {
        pos_label(c, p, label, sizeof label);
        fprintf(f, "<text class=\"row\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", g.left - 4,
                g.top + p * g.ch + g.ch - 3);
        draw_short(f, label, 10);
        fputs("</text>\n", f);
    }
    // The cells, in cell units; white ones are left out.
    fprintf(f,
            "<g class=\"cells\" transform=\"translate(%d,%d) scale(%d,%d)\" "
            "shape-rendering=\"crispEdges\">\n",
            g.left, g.top, g.cw, g.ch);
    for (int p = 0; p < c->n_pos; p++) {
        const float *row = capture_row(c, block, p);
        for (int i = 0; i < d; i++)
            if (draw_diverging(row[i], scale, hex))
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" fill=\"%s\"/>\n", i, p,
                        hex);
    }
    fputs("</g>\n", f);
    // The boundaries of the registers held here, and a frame.
    for (int r = 0; r < m->n_regs; r++)
        if (model_reg_live(m, r, block))
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#9ca3af\" "
                    "stroke-width=\"0.5\"/>\n",
                    g.left + m->regs[r].offset * g.cw, g.top, g.left + m->regs[r].offset * g.cw,
                    g.top + c->n_pos * g.ch);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#374151\" "
            "stroke-width=\"0.5\"/>\n",
            g.left, g.top, d * g.cw, c->n_pos * g.ch);
    int y = g.top + c->n_pos * g.ch + 6;
    draw_colour_bar(f, g.left, y, 1, -scale, scale);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" fill=\"#4b5563\">rows: positions; columns: residual</text>\n",
            g.left + DRAW_BAR_W + 12, y + 8);
    fputs("</svg>\n", f);
}

/* --- attention matrix -------------------------------------------------------- */

static Geo att_geo(const TfCapture *c, int layer, int head) {
    Geo g;
    const TfLayer *ly = &c->m->layers[layer];
    // "layer 12 NAME, head 3 (bidirectional)", the name cut to 32; the head
    // named by its op in a layer of several.
    char ht[160];
    head_text(ly, head, ht, sizeof ht);
    size_t name = (strlen(ly->name) < 32 ? strlen(ly->name) : 32) + strlen(ht) - strlen("head 3");
    g.cw = g.ch = clampi(480 / c->n_pos, 6, 36);
    g.left = 76;
    g.top = 84;
    g.width = g.left + c->n_pos * g.cw + 16;
    if (g.width < 380) g.width = 380; /* room for the legend */
    if (g.width < draw_title_width(name + 34)) g.width = draw_title_width(name + 34);
    g.height = g.top + c->n_pos * g.ch + 32;
    return g;
}

/* The colours span the weights the queries can see, smallest to largest,
 * as an image plot scales (the seeds' pictures): a diffuse learned head is
 * as legible as a sharp compiled one. */
static void att_range(const TfCapture *c, int layer, int head, float *lo, float *hi) {
    const TfLayer *ly = &c->m->layers[layer];
    *lo = INFINITY, *hi = -INFINITY;
    for (int q = 0; q < c->n_pos; q++)
        for (int k = 0; k < c->n_pos && (k <= q || !ly->causal); k++) {
            float w = capture_att(c, layer, head, q, k);
            if (w < *lo) *lo = w;
            if (w > *hi) *hi = w;
        }
    if (!(*hi - *lo > 1e-6f)) *lo = 0, *hi = *hi > 0 ? *hi : 1;
}

/* One head's cells as 1x1 rects (query row, key column); keys a causal
 * query cannot see grey, white cells left out. */
static void att_cells(const TfCapture *c, int layer, int head, FILE *f) {
    const TfLayer *ly = &c->m->layers[layer];
    float lo, hi;
    char hex[8];
    att_range(c, layer, head, &lo, &hi);
    for (int q = 0; q < c->n_pos; q++)
        for (int k = 0; k < c->n_pos; k++) {
            int masked = ly->causal && k > q;
            if (masked) strcpy(hex, "#e5e7eb");
            if (masked || draw_sequential(capture_att(c, layer, head, q, k), lo, hi, hex))
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" fill=\"%s\"/>\n", k, q,
                        hex);
        }
}

void report_svg_attention(const TfCapture *c, int layer, int head, int standalone, FILE *f) {
    const TfLayer *ly = &c->m->layers[layer];
    Geo g = att_geo(c, layer, head);
    int P = c->n_pos;
    char label[64], ht[160];
    head_text(ly, head, ht, sizeof ht);
    int part = inspect_part_of(ly, head);
    draw_svg_open(f, standalone, g.width, g.height);
    fprintf(f,
            " class=\"hm\" data-kind=\"att\" data-layer=\"%d\" data-head=\"%d\" data-x0=\"%d\" "
            "data-y0=\"%d\" data-cw=\"%d\" data-ch=\"%d\" data-rows=\"%d\" data-cols=\"%d\"",
            layer, head, g.left, g.top, g.cw, g.ch, P, P);
    if (part >= 0) { /* the op this head belongs to, for the hover text */
        fputs(" data-part=\"", f);
        draw_text(f, ly->parts[part].name);
        fputc('"', f);
    }
    fprintf(f, ">\n<title>attention, layer %d ", layer);
    draw_text(f, ly->name);
    fputs(", ", f);
    draw_text(f, ht);
    fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fprintf(f, "<text x=\"4\" y=\"13\" font-size=\"12\" font-weight=\"bold\">layer %d ", layer);
    draw_short(f, ly->name, 32);
    fputs(", ", f);
    draw_text(f, ht);
    fprintf(f, "%s</text>\n", ly->causal ? "" : " (bidirectional)");
    fprintf(f, "<text x=\"%d\" y=\"28\" fill=\"#4b5563\">key &#8594;</text>\n", g.left);
    fprintf(f, "<text x=\"4\" y=\"%d\" fill=\"#4b5563\">query &#8595;</text>\n", g.top - 4);
    // Labels as large as the cells allow (a 10 px label's box is 11.6 px
    // tall), and when even 7 px ones do not fit, every k-th.
    int fs = clampi(g.ch - 2, 7, 10);
    int every = (fs * 12 + g.ch * 10 - 1) / (g.ch * 10);
    for (int p = 0; p < P; p += every) {
        pos_label(c, p, label, sizeof label);
        fprintf(f, "<text class=\"row\" x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"%d\">",
                g.left - 4, g.top + p * g.ch + g.ch / 2 + fs / 2 - 1, fs);
        draw_short(f, label, 10);
        fprintf(f,
                "</text>\n<text class=\"col\" transform=\"translate(%d,%d) rotate(-90)\" "
                "font-size=\"%d\">",
                g.left + p * g.cw + g.cw / 2 + fs / 2 - 1, g.top - 4, fs);
        draw_short(f, label, 8);
        fputs("</text>\n", f);
    }
    float lo, hi;
    att_range(c, layer, head, &lo, &hi);
    fprintf(f,
            "<g class=\"cells\" transform=\"translate(%d,%d) scale(%d,%d)\" "
            "shape-rendering=\"crispEdges\">\n",
            g.left, g.top, g.cw, g.ch);
    att_cells(c, layer, head, f);
    fputs("</g>\n", f);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#374151\" "
            "stroke-width=\"0.5\"/>\n",
            g.left, g.top, P * g.cw, P * g.ch);
    int y = g.top + P * g.ch + 6;
    draw_colour_bar(f, 4, y, 0, lo, hi);
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#4b5563\">softmax weight%s</text>\n", 4 + DRAW_BAR_W + 8,
            y + 8, ly->causal ? "; grey: masked" : "");
    fputs("</svg>\n", f);
}

/* --- thumbnails (the report's model view) --------------------------------------- */

#define THUMB 48 /* pixels */

/* One head's attention, THUMB pixels square, without labels. */
static void svg_att_thumb(const TfCapture *c, int layer, int head, FILE *f) {
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"thumb\" data-layer=\"%d\" "
            "data-head=\"%d\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "preserveAspectRatio=\"none\" shape-rendering=\"crispEdges\">"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            layer, head, THUMB, THUMB, c->n_pos, c->n_pos);
    att_cells(c, layer, head, f);
    fputs("</svg>", f);
}

/* What a layer without heads wrote: after minus before, positions down,
 * residual columns across, in signed colours scaled to its largest change. */
static void svg_write_thumb(const TfCapture *c, int layer, FILE *f) {
    int d = c->m->d_model;
    float mx = 0;
    char hex[8];
    for (int p = 0; p < c->n_pos; p++) {
        const float *a = capture_row(c, layer + 1, p), *b = capture_row(c, layer, p);
        for (int i = 0; i < d; i++)
            if (isfinite(a[i] - b[i]) && fabsf(a[i] - b[i]) > mx) mx = fabsf(a[i] - b[i]);
    }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"thumb-write\" data-layer=\"%d\" "
            "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" preserveAspectRatio=\"none\" "
            "shape-rendering=\"crispEdges\"><rect width=\"100%%\" height=\"100%%\" "
            "fill=\"white\"/>\n",
            layer, THUMB, THUMB, d, c->n_pos);
    for (int p = 0; p < c->n_pos && mx > 1e-6f; p++) {
        const float *a = capture_row(c, layer + 1, p), *b = capture_row(c, layer, p);
        for (int i = 0; i < d; i++)
            if (draw_diverging(a[i] - b[i], mx, hex))
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" fill=\"%s\"/>\n", i, p,
                        hex);
    }
    fputs("</svg>", f);
}

/* --- files -------------------------------------------------------------------- */

/* A layer name as a file name part: letters, digits, '_', '-' and '.'. */
static void safe_name(const char *s, char *buf, size_t n) {
    size_t i = 0;
    for (; s[i] && i + 1 < n && i < 48; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '-' || ch == '.';
        buf[i] = ok ? ch : '_';
    }
    buf[i] = '\0';
}

int report_write_svgs(const TfCapture *c, const char *dir, TfError *err) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        tf_error_set(err, "cannot create directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    size_t plen = strlen(dir) + 96;
    char *path = malloc(plen), name[64];
    if (!path) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    // File names carry the layer index that tfinfo lists and the titles say.
    int rc = 0;
    for (int b = 0; b < c->n_blocks && rc == 0; b++) {
        int l = b - 1;
        if (l < 0) {
            snprintf(path, plen, "%s/resid_embedding.svg", dir);
        } else {
            safe_name(c->m->layers[l].name, name, sizeof name);
            snprintf(path, plen, "%s/resid_%02d_%s.svg", dir, l, name);
        }
        FILE *f = outfile_open(path, err);
        if (!f) {
            rc = -1;
            break;
        }
        report_svg_residual(c, b, 1, f);
        rc = outfile_close(f, err);
        if (l < 0 || !c->att[l]) continue;
        for (int h = 0; h < c->m->layers[l].n_heads && rc == 0; h++) {
            snprintf(path, plen, "%s/att_%02d_%s_h%d.svg", dir, l, name, h);
            if (!(f = outfile_open(path, err))) {
                rc = -1;
                break;
            }
            report_svg_attention(c, l, h, 1, f);
            rc = outfile_close(f, err);
        }
    }
    free(path);
    return rc;
}

/* --- the HTML report ------------------------------------------------------------ */

/* Line `line` (1-based) of the model's source, or NULL; *len its length. */
static const char *source_line(const TfModel *m, int line, size_t *len) {
    if (!m->source || line < 1) return NULL;
    const char *s = m->source;
    for (int i = 1; i < line; i++) {
        s = strchr(s, '\n');
        if (!s) return NULL;
        s++;
    }
    const char *e = strchr(s, '\n');
    *len = e ? (size_t)(e - s) : strlen(s);
    return s;
}

/* The script: hover shows a cell's exact value, click pins it; links open
 * the collapsed section they point into; a self-check at the end marks the
 * page (#report-ok, or #report-error on any error). */
static const char *const report_js =
    "// The register that holds column c after block b (registers that share columns hold\n"
    "// them in different blocks: r[4]..r[5]); a column none holds there names its holders.\n"
    "function colName(c,b){var free=[];for(var i=0;i<D.regs.length;i++){var r=D.regs[i];"
    "if(c<r[2]||c>=r[2]+r[3])continue;if(b<r[4]||b>r[5]){free.push(r[0]+' in states '+r[4]+"
    "'..'+r[5]);continue;}var j=c-r[2],sub=r[1]==='token'?' \\''+D.vocab[j]+'\\'':"
    "r[1]==='position'?(j===0?' sin':' cos'):r[6]?' = '+r[6][j]:'';return r[0]+'['+j+sub+']';}"
    "return free.length?'(no register: '+free.join(', ')+')':'';}\n"
    "function describe(svg,x,y){var s=svg.dataset,col=Math.floor((x-s.x0)/s.cw),"
    "row=Math.floor((y-s.y0)/s.ch);if(col<0||row<0||row>=+s.rows||col>=+s.cols)return null;\n"
    "if(s.kind==='resid'){var v=D.blocks[+s.block][row*D.d+col];return D.names[+s.block]+': "
    "position '+row+' '+tok(row)+', column '+col+(colName(col,+s.block)?' '+"
    "colName(col,+s.block):'')+' = "
    "'+fmt(v);}\n"
    "var a=D.att[s.layer+'/'+s.head];return 'layer '+s.layer+' head '+s.head+"
    "(s.part?' ('+s.part+')':'')+': query '+row+' '+"
    "tok(row)+' -> key '+col+' '+tok(col)+' = '+fmt(a[row*D.P+col]);}\n"
    "var figs=document.querySelectorAll('svg.hm');\n"
    "draw_hover(figs,describe);\n"
    "// Navigation: a link into a collapsed section opens it (and its parents).\n"
    "function openAt(id){var e=id&&document.getElementById(id);for(;e;e=e.parentElement)"
    "if(e.tagName==='DETAILS')e.open=true;}\n"
    "document.addEventListener('click',function(ev){var a=ev.target.closest&&"
    "ev.target.closest('a[href^=\"#\"]');if(a)openAt(decodeURIComponent(a.getAttribute('href')"
    ".slice(1)));});\n"
    "window.addEventListener('hashchange',function(){openAt(decodeURIComponent(location.hash"
    ".slice(1)));});\n"
    "(function(){var id=decodeURIComponent(location.hash.slice(1)),e=id&&"
    "document.getElementById(id);if(e){openAt(id);e.scrollIntoView();}})();\n"
    "function openAll(v){document.querySelectorAll('details.layer').forEach(function(d){"
    "d.open=v;});}\n"
    "document.getElementById('open-all').addEventListener('click',function(){openAll(true);});\n"
    "document.getElementById('close-all').addEventListener('click',function(){openAll(false);});\n"
    "// Self-check: hover the first heatmap's largest cell and read the tooltip.\n"
    "(function(){var svg=document.querySelector('svg.hm[data-kind=resid]');"
    "if(!svg)throw new Error('no residual heatmap');var "
    "s=svg.dataset,b=D.blocks[+s.block],best=0;\n"
    "for(var i=1;i<b.length;i++)if(Math.abs(b[i])>Math.abs(b[best]))best=i;\n"
    "var row=Math.floor(best/D.d),col=best%D.d,pt=svg.createSVGPoint();"
    "pt.x=+s.x0+(col+0.5)*s.cw;pt.y=+s.y0+(row+0.5)*s.ch;pt=pt.matrixTransform(svg.getScreenCTM());"
    "\n"
    "svg.dispatchEvent(new MouseEvent('mousemove',{clientX:pt.x,clientY:pt.y,bubbles:true}));\n"
    "var want='= '+fmt(b[best]);if(tip.textContent.slice(-want.length)!==want)"
    "throw new Error('hover shows \"'+tip.textContent+'\", expected a value '+want);\n"
    "tip.style.display='none';\n"
    "mark('report-ok','script ran: '+document.querySelectorAll('svg.hm[data-kind=resid]').length+"
    "' residual heatmaps, '+document.querySelectorAll('svg.hm[data-kind=att]').length+"
    "' attention maps, '+document.querySelectorAll('svg.thumb').length+' head thumbnails; "
    "hover checked ('+tip.textContent+')');})();\n";

/* The data the script reads: tokens, registers, every block, every head. */
static void write_json_data(const TfCapture *c, FILE *f) {
    const TfModel *m = c->m;
    char t[TF_TOKEN_TEXT_MAX + 4];
    fprintf(f, "{\"P\":%d,\"d\":%d,\"tokens\":[", c->n_pos, m->d_model);
    for (int p = 0; p < c->n_pos; p++) {
        inspect_token_text(m, c->tokens[p], t, sizeof t);
        if (p) fputc(',', f);
        draw_json_string(f, t);
    }
    fputs("],\"vocab\":[", f);
    for (int v = 0; v < m->n_vocab; v++) {
        inspect_token_text(m, v, t, sizeof t);
        if (v) fputc(',', f);
        draw_json_string(f, t);
    }
    fputs("],\"regs\":[", f);
    for (int r = 0; r < m->n_regs; r++) {
        fprintf(f, "%s[", r ? "," : "");
        draw_json_string(f, m->regs[r].name);
        // Then the blocks it holds its columns after (TfRegister.live_from).
        int to = m->regs[r].live_to < m->n_layers ? m->regs[r].live_to : m->n_layers;
        fprintf(f, ",\"%s\",%d,%d,%d,%d", tf_reg_kind_names[m->regs[r].kind], m->regs[r].offset,
                m->regs[r].size, m->regs[r].live_from, to);
        if (m->regs[r].values) { // categorical: each column's value, for the hover text
            fputs(",[", f);
            for (int j = 0; j < m->regs[r].size; j++) {
                if (j) fputc(',', f);
                draw_json_string(f, m->regs[r].values[j]);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputs("],\"names\":[", f);
    for (int b = 0; b < c->n_blocks; b++) {
        char title[256];
        block_title(c, b, title, sizeof title);
        if (b) fputc(',', f);
        draw_json_string(f, title);
    }
    fputs("],\n\"blocks\":[", f);
    for (int b = 0; b < c->n_blocks; b++) {
        fputs(b ? ",\n[" : "[", f);
        const float *x = capture_row(c, b, 0);
        for (size_t i = 0; i < (size_t)c->n_pos * (size_t)m->d_model; i++) {
            if (i) fputc(',', f);
            draw_json_float(f, x[i]);
        }
        fputc(']', f);
    }
    fputs("],\n\"att\":{", f);
    int first = 1;
    for (int l = 0; l < m->n_layers; l++) {
        if (!c->att[l]) continue;
        for (int h = 0; h < m->layers[l].n_heads; h++) {
            fprintf(f, "%s\"%d/%d\":[", first ? "" : ",\n", l, h);
            first = 0;
            for (int q = 0; q < c->n_pos; q++)
                for (int k = 0; k < c->n_pos; k++) {
                    if (q || k) fputc(',', f);
                    draw_json_float(f, capture_att(c, l, h, q, k));
                }
            fputc(']', f);
        }
    }
    fputs("}}", f);
}

/* The registers whose live range ends before `block` (held after block - 1,
 * not after it), one line each: "left ends: held in states 0..12 (...);
 * its columns 22-35 are left2's from state 13". */
static void write_ended(const TfModel *m, int block, FILE *f) {
    for (int r = 0; block > 0 && r < m->n_regs; r++) {
        const TfRegister *reg = &m->regs[r];
        if (!model_reg_live(m, r, block - 1) || model_reg_live(m, r, block)) continue;
        char range[96];
        model_live_text(m, r, range, sizeof range);
        fputs("<p class=\"ended\"><code>", f);
        draw_text(f, reg->name);
        char where[512];
        inspect_handover_text(m, r, where, sizeof where);
        fprintf(f, "</code> ends: held in %s; ", range);
        draw_text(f, where);
        fputs(".</p>\n", f);
    }
}

/* The registers block `block` wrote, decoded: one table row per register,
 * flagged cells red with the reason on hover, but those the output does not
 * depend on (live, inspect_live): grey, "not read". Learned models: the
 * logit lens's top output. */
static void write_decoded(const TfCapture *c, const char *live, int block, FILE *f) {
    const TfModel *m = c->m;
    char t[32];
    fputs("<div class=\"scroll\"><table class=\"dec\"><tr><th class=\"r\">position</th>", f);
    for (int p = 0; p < c->n_pos; p++) fprintf(f, "<th>%d</th>", p);
    fputs("</tr>\n<tr><th class=\"r\">token</th>", f);
    for (int p = 0; p < c->n_pos; p++) {
        inspect_token_text(m, c->tokens[p], t, sizeof t);
        fputs("<th>", f);
        draw_text(f, t);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    if (m->n_regs == 0) {
        fputs("<tr><th class=\"r\">logit lens</th>", f);
        for (int p = 0; p < c->n_pos; p++) {
            int ids[3];
            float pr[3];
            int k = (int)m->tensors[m->unembed].shape[0];
            k = k < 3 ? k : 3;
            inspect_logit_lens(c, block, p, k, ids, pr);
            fputs("<td title=\"", f);
            for (int j = 0; j < k; j++) {
                inspect_output_text(m, ids[j], t, sizeof t);
                draw_text(f, t);
                fprintf(f, " %.3f%s", (double)pr[j], j + 1 < k ? ", " : "");
            }
            inspect_output_text(m, ids[0], t, sizeof t);
            fputs("\">", f);
            draw_text(f, t);
            fprintf(f, " <span class=\"sub\">%.2f</span></td>", (double)pr[0]);
        }
        fputs("</tr>\n", f);
    }
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *reg = &m->regs[r];
        if (!inspect_register_wrote(c, block, r)) continue;
        fputs("<tr><th class=\"r\">", f);
        draw_text(f, reg->name);
        fputs("</th>", f);
        for (int p = 0; p < c->n_pos; p++) {
            TfDecoded d;
            inspect_decode(m, reg, capture_row(c, block, p), &d);
            int read = d.status != TF_DECODE_FLAGGED || inspect_register_live(c, live, block, p, reg);
            const char *cls = d.status == TF_DECODE_FLAGGED ? read ? " class=\"flag\"" : " class=\"idle\""
                              : d.status == TF_DECODE_EMPTY ? " class=\"empty\""
                                                            : "";
            fprintf(f, "<td%s title=\"", cls);
            if (d.status == TF_DECODE_FLAGGED) {
                draw_text(f, d.why);
                fputs(read ? "; " : " (harmless: nothing on the way to the output reads it here); ", f);
            }
            if (reg->kind == TF_REG_TOKEN || reg->kind == TF_REG_CATEGORICAL)
                fprintf(f, "max %.6g, margin %.6g", (double)d.value, (double)d.margin);
            else if (reg->kind == TF_REG_POSITION)
                fprintf(f, "position %.6g, length %.6g", (double)d.value, (double)d.margin);
            else
                fprintf(f, "%.9g", (double)d.value);
            fputs("\">", f);
            if (d.status == TF_DECODE_EMPTY) {
                fputs(".", f);
            } else if (reg->kind == TF_REG_TOKEN) {
                inspect_token_text(m, d.index, t, sizeof t);
                draw_text(f, t);
            } else if (reg->kind == TF_REG_CATEGORICAL) {
                inspect_value_text(reg, d.index, t, sizeof t);
                draw_text(f, t);
            } else if (reg->kind == TF_REG_POSITION) {
                if (d.status == TF_DECODE_FLAGGED)
                    fprintf(f, "%.2f", (double)d.value);
                else
                    fprintf(f, "%d", d.index);
            } else {
                fprintf(f, "%.4g", (double)d.value);
            }
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table></div>\n", f);
    write_ended(m, block, f);
}

/* Flagged cells among the registers block `block` wrote, where the output
 * depends on them (a cell that does not decode but that nothing reads, such
 * as a FindAndStore before its token is in view, is not a fault). */
static int count_flags(const TfCapture *c, const char *live, int block) {
    int n = 0;
    for (int r = 0; r < c->m->n_regs; r++) {
        if (!inspect_register_wrote(c, block, r)) continue;
        for (int p = 0; p < c->n_pos; p++) {
            TfDecoded d;
            inspect_decode(c->m, &c->m->regs[r], capture_row(c, block, p), &d);
            n += d.status == TF_DECODE_FLAGGED &&
                 inspect_register_live(c, live, block, p, &c->m->regs[r]);
        }
    }
    return n;
}

/* The names of the registers layer `block - 1` wrote, comma separated. */
static void write_wrote(const TfCapture *c, int block, FILE *f) {
    int n = 0;
    for (int r = 0; r < c->m->n_regs; r++) {
        if (!inspect_register_wrote(c, block, r)) continue;
        if (n++) fputs(", ", f);
        draw_text(f, c->m->regs[r].name);
    }
    if (c->m->n_regs == 0)
        fputs("(all columns)", f);
    else if (n == 0)
        fputs("nothing", f);
}

/* Sections start open when the model has at most this many layers; larger
 * reports start collapsed, and the contents, the model view and the
 * program view lead into them. */
#define REPORT_OPEN_LAYERS 8

static void write_tokens(const TfModel *m, const int *ids, int from, int to, FILE *f) {
    for (int p = from; p < to; p++) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, ids[p], t);
        if (p > from && m->token_names) fputc(' ', f); /* words apart */
        draw_text(f, t);
    }
}

/* "layer 6 read_left (attention, GetRelativeToken, line 47)" as an attribute
 * value; a layer of several ops names each (inspect_layer_text). */
static void put_layer_title(const TfModel *m, int l, FILE *f) {
    const TfLayer *ly = &m->layers[l];
    char what[512];
    inspect_layer_text(ly, 1, what, sizeof what);
    fprintf(f, "layer %d ", l);
    draw_text(f, ly->name);
    fputs(" (", f);
    draw_text(f, what);
    fputc(')', f);
}

/* The source line of head (hidden unit) `unit` of layer ly: its op's. */
static int unit_line(const TfLayer *ly, int unit) {
    int i = inspect_part_of(ly, unit);
    return i >= 0 ? ly->parts[i].line : ly->line;
}

/* Whether layer ly holds an op of source line `line` (its own, or one of
 * its parts'). */
static int layer_has_line(const TfLayer *ly, int line) {
    if (ly->n_parts == 0) return ly->line == line;
    for (int i = 0; i < ly->n_parts; i++)
        if (ly->parts[i].line == line) return 1;
    return 0;
}

/* What the unembedding reads, for compiled models: the output register at
 * the last position (or every position), mapped to tokens through the
 * unembedding (inspect_output_read). */
static void write_unembedding(const TfCapture *c, FILE *f) {
    const TfModel *m = c->m;
    if (m->output_reg < 0 || m->output_kind != TF_OUTPUT_NEXT_TOKEN || model_numeric_output(m))
        return;
    const TfRegister *reg = &m->regs[m->output_reg];
    TfDecoded d;
    char t[32], v[32];
    if (c->outputs) {
        int from = m->bos >= 0 && c->tokens[0] == m->bos, bad = 0, first = -1;
        TfDecoded first_d = {0};
        for (int p = from; p < c->n_pos; p++)
            if (inspect_output_read(c, p, &d) < 0 || d.status != TF_DECODE_CLEAN) {
                if (!bad++) first = p, first_d = d;
            }
        fprintf(f, "<p%s>The unembedding reads <code>", bad ? " class=\"flagged\"" : "");
        draw_text(f, reg->name);
        fputs("</code> at every position; decoded, it holds <code id=\"unembed-reads\">", f);
        for (int p = from; p < c->n_pos; p++) {
            int tok = inspect_output_read(c, p, &d);
            char tt[TF_TOKEN_TEXT_MAX] = "?";
            if (tok >= 0) model_token_text(m, tok, tt);
            draw_text(f, tt);
        }
        fputs("</code>", f);
        if (bad) {
            fprintf(f, ". &#9888; %d position%s do%s not decode cleanly (first: position %d, ", bad,
                    bad == 1 ? "" : "s", bad == 1 ? "es" : "", first);
            draw_text(f, first_d.status == TF_DECODE_EMPTY     ? "empty"
                        : first_d.status == TF_DECODE_FLAGGED ? first_d.why
                                                              : "maps to no token");
            fputc(')', f);
        }
        fputs(".</p>\n", f);
        return;
    }
    int pos = c->n_pos - 1, tok = inspect_output_read(c, pos, &d);
    fprintf(f, "<p%s>The unembedding reads <code>",
            d.status == TF_DECODE_CLEAN && tok >= 0 ? "" : " class=\"flagged\"");
    draw_text(f, reg->name);
    fprintf(f, "</code> at position %d: ", pos);
    if (d.status == TF_DECODE_EMPTY) {
        fputs("&#9888; it is empty, so the next token is the argmax of near-zero logits", f);
    } else if (d.status == TF_DECODE_FLAGGED) {
        fputs("&#9888; ", f);
        draw_text(f, d.why);
    } else {
        if (reg->kind == TF_REG_CATEGORICAL) {
            inspect_value_text(reg, d.index, v, sizeof v);
            fputs("the value <code>", f);
            draw_text(f, v);
            fputs("</code>, ", f);
        }
        if (tok < 0) {
            fputs("&#9888; which the unembedding maps to no token", f);
        } else {
            inspect_token_text(m, tok, t, sizeof t);
            fputs(reg->kind == TF_REG_CATEGORICAL ? "token <code id=\"unembed-reads\">"
                                                  : "<code id=\"unembed-reads\">",
                  f);
            draw_text(f, t);
            fputs("</code>", f);
        }
    }
    fputs(".</p>\n", f);
}

static void write_summary(const TfCapture *c, FILE *f) {
    const TfModel *m = c->m;
    char t[32];
    fputs("<section id=\"summary\">\n<p id=\"result\">Sequence <code>", f);
    write_tokens(m, c->tokens, 0, c->n_pos, f);
    fprintf(f, "</code> (generation step %d, %d positions) &#8594; ", c->step, c->n_pos);
    if (c->values) { /* a model that prints a number at every position */
        fputs("at every position <code>", f);
        for (int p = m->bos >= 0 && c->tokens[0] == m->bos, first = p; p < c->n_pos; p++) {
            char v[TF_VALUE_TEXT_MAX];
            model_value_text(c->values[p], v);
            fprintf(f, "%s%s", p > first ? " " : "", v);
        }
        fputs("</code>", f);
    } else if (c->outputs) {
        fputs("at every position <code>", f);
        write_tokens(m, c->outputs, m->bos >= 0 && c->tokens[0] == m->bos, c->n_pos, f);
        fputs("</code>", f);
    } else if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        int id, pos = inspect_read_position(c);
        float p;
        inspect_logit_lens(c, c->n_blocks - 1, pos, 1, &id, &p);
        inspect_output_text(m, c->next, t, sizeof t);
        fputs("class <code>", f);
        draw_text(f, t);
        fprintf(f, "</code> (p %.4f, read at position %d)", (double)p, pos);
    } else {
        inspect_output_text(m, c->next, t, sizeof t);
        fputs("next <code>", f);
        draw_text(f, t);
        fputs("</code>", f);
    }
    fputs(".</p>\n", f);
    write_unembedding(c, f);
    int n_kind[TF_LAYER_KIND_COUNT] = {0};
    for (int l = 0; l < m->n_layers; l++) n_kind[m->layers[l].kind]++;
    fprintf(f, "<p>Model: d_model %d, %d layers (%d attention, %d MLP", m->d_model, m->n_layers,
            n_kind[TF_LAYER_ATTENTION], n_kind[TF_LAYER_MLP]);
    if (n_kind[TF_LAYER_NORM]) fprintf(f, ", %d norm", n_kind[TF_LAYER_NORM]);
    fprintf(f, "), %d registers, vocabulary of %d, %zu parameters.</p>\n", m->n_regs, m->n_vocab,
            model_param_count(m));
    // Registers held in some states only: which holds shared columns when.
    int n_reused = 0;
    for (int r = 0; r < m->n_regs; r++) {
        if (!model_reg_reused(m, r)) continue;
        char range[96];
        model_live_text(m, r, range, sizeof range);
        fputs(n_reused++ ? ", <code>"
                         : "<p id=\"live-ranges\">Registers that hold their columns in some "
                           "states only (state 0 is the embedding's output, state i+1 layer i's; "
                           "another register may hold the columns in the others): <code>",
              f);
        draw_text(f, m->regs[r].name);
        fprintf(f, "</code> %s", range);
    }
    if (n_reused) fputs(".</p>\n", f);
    fputs("<p>Hover over any picture for the exact value under the mouse; click to pin it at the "
          "bottom. Red cells in the decoded tables do not decode cleanly (hover for why).</p>\n"
          "</section>\n",
          f);
}

static void write_toc(const TfCapture *c, const int *flags, FILE *f) {
    const TfModel *m = c->m;
    fputs("<nav id=\"toc\"><b>Contents</b>\n<ol>\n<li><a href=\"#summary\">Summary</a></li>\n"
          "<li><a href=\"#model-view\">Model view</a></li>\n",
          f);
    if (m->source) fputs("<li><a href=\"#program\">Program</a></li>\n", f);
    fputs("<li><a href=\"#layers\">Layers</a></li>\n<li><a href=\"#trace\">Layer by layer</a>\n"
          "<ol>\n<li><a href=\"#embedding\">embedding</a></li>\n",
          f);
    for (int l = 0; l < m->n_layers; l++) {
        fprintf(f, "<li><a href=\"#layer-%d\"%s>%d ", l, flags[l + 1] ? " class=\"flagged\"" : "",
                l);
        draw_short(f, m->layers[l].name, 18);
        fprintf(f, "%s</a></li>\n", flags[l + 1] ? " &#9888;" : "");
    }
    fputs("</ol></li>\n</ol>\n<button id=\"open-all\" type=\"button\">open all</button>"
          "<button id=\"close-all\" type=\"button\">close all</button>\n</nav>\n",
          f);
}

/* Under a head's thumbnail, the op it computes: its name and source line
 * (the part's in a layer of several ops, else the layer's); "head H" for a
 * head no op names (a learned model's). */
static void write_thumb_caption(const TfLayer *ly, int h, FILE *f) {
    int i = inspect_part_of(ly, h);
    const char *name = i >= 0 ? ly->parts[i].name : ly->name;
    int line = unit_line(ly, h);
    fputs("<span class=\"mv-cap\">", f);
    if (i < 0 && !ly->op && line <= 0) {
        fprintf(f, "head %d</span>", h);
        return;
    }
    draw_text(f, name);
    if (line > 0) fprintf(f, "<br>line %d", line);
    fputs("</span>", f);
}

/* Every layer in order, as bertviz's and CircuitsVis's model views draw
 * them: an attention layer's heads as small attention matrices, another
 * layer as what it wrote; each links to its layer's section. */
static void write_model_view(const TfCapture *c, const int *flags, FILE *f) {
    const TfModel *m = c->m;
    int max_heads = 1;
    for (int l = 0; l < m->n_layers; l++)
        if (c->att[l] && m->layers[l].n_heads > max_heads) max_heads = m->layers[l].n_heads;
    int w = max_heads * (THUMB + 6) + 10;
    if (w < 116) w = 116;
    fputs("<section id=\"model-view\"><h2>Model view</h2>\n<p>Every layer in order: an attention "
          "layer's heads as their attention matrices (queries down, keys across, white to purple "
          "as in the full pictures), each under the name and source line of the op it computes (a "
          "layer may hold several ops side by side), an MLP as what it added to the residual "
          "stream (positions down, columns across; red positive, blue negative, scaled to its "
          "largest change). Click one to open its layer.</p>\n",
          f);
    fprintf(f, "<div class=\"mv\" style=\"grid-template-columns:repeat(auto-fill,%dpx)\">\n", w);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        fprintf(f,
                "<div class=\"mv-layer%s\" data-layer=\"%d\"><a class=\"mv-label\" "
                "href=\"#layer-%d\" title=\"",
                flags[l + 1] ? " flagged" : "", l, l);
        put_layer_title(m, l, f);
        fprintf(f, "\">%s%d ", flags[l + 1] ? "&#9888; " : "", l);
        draw_text(f, ly->name);
        fputs("</a><div class=\"mv-heads\">", f);
        if (c->att[l]) {
            for (int h = 0; h < ly->n_heads; h++) {
                char ht[160];
                head_text(ly, h, ht, sizeof ht);
                fprintf(f, "<a class=\"mv-head\" href=\"#layer-%d\" title=\"layer %d ", l, l);
                draw_text(f, ly->name);
                fputs(", ", f);
                draw_text(f, ht);
                fputs("\">", f);
                svg_att_thumb(c, l, h, f);
                write_thumb_caption(ly, h, f);
                fputs("</a>", f);
            }
        } else {
            fprintf(f, "<a href=\"#layer-%d\" title=\"what layer %d ", l, l);
            draw_text(f, ly->name);
            fputs(" added\">", f);
            svg_write_thumb(c, l, f);
            fputs("</a>", f);
        }
        fprintf(f, "</div><div class=\"mv-kind\">%s", tf_layer_kind_names[ly->kind]);
        if (c->att[l]) fprintf(f, ", %d head%s", ly->n_heads, ly->n_heads == 1 ? "" : "s");
        if (ly->n_parts > 0) fprintf(f, ", %d ops", ly->n_parts);
        fputs("</div></div>\n", f);
    }
    fputs("</div></section>\n", f);
}

/* After an op's line in the program view, where layer l computes it: "L3"
 * (the layer), then the heads "h1 h2" of an attention layer, or in an MLP of
 * several ops the hidden units "u0-3" it owns. */
static void write_line_links(const TfCapture *c, const int *flags, int l, int line, FILE *f) {
    const TfLayer *ly = &c->m->layers[l];
    fprintf(f, "<a class=\"ly%s\" href=\"#layer-%d\" title=\"", flags[l + 1] ? " flagged" : "",
            l);
    put_layer_title(c->m, l, f);
    fprintf(f, "\">L%d%s</a>", l, flags[l + 1] ? "&#9888;" : "");
    for (int h = 0; c->att[l] && h < ly->n_heads; h++) {
        if (unit_line(ly, h) != line) continue;
        char ht[160];
        head_text(ly, h, ht, sizeof ht);
        fprintf(f, "<a class=\"hd\" href=\"#layer-%d-h%d\" title=\"layer %d, ", l, h, l);
        draw_text(f, ht);
        fprintf(f, "\">h%d</a>", h);
    }
    for (int i = 0; ly->kind == TF_LAYER_MLP && i < ly->n_parts; i++) {
        const TfLayerPart *p = &ly->parts[i];
        if (p->line != line) continue;
        char pt[160];
        inspect_part_text(ly, i, INSPECT_PART_UNITS | INSPECT_PART_LINE, pt, sizeof pt);
        fprintf(f, "<a class=\"un\" href=\"#layer-%d\" title=\"layer %d, ", l, l);
        draw_text(f, pt);
        if (p->count == 1)
            fprintf(f, "\">u%d</a>", p->first);
        else
            fprintf(f, "\">u%d-%d</a>", p->first, p->first + p->count - 1);
    }
}

/* The source with line numbers; each op's line links to the layers (L)
 * and heads (h) or hidden units (u) it became. */
static void write_program(const TfCapture *c, const int *flags, FILE *f) {
    const TfModel *m = c->m;
    if (!m->source) return;
    int any = 0;
    for (int l = 0; l < m->n_layers; l++) {
        any |= m->layers[l].line > 0;
        for (int i = 0; i < m->layers[l].n_parts; i++) any |= m->layers[l].parts[i].line > 0;
    }
    fputs("<section id=\"program\"><h2>Program</h2>\n<p><code>", f);
    draw_text(f, m->source_name ? m->source_name : "the source");
    fputs(
        any ? "</code>: each op's line links to the layers (L) and heads (h) it became (in a "
              "layer of several ops, its own heads, or its hidden units (u) in an MLP).</p>\n"
            : "</code>: the layers of this model come from no line of it (learned weights).</p>\n",
        f);
    fputs("<div class=\"scroll\"><table class=\"prog\">\n", f);
    const char *s = m->source;
    for (int line = 1; *s; line++) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        int ops = 0;
        for (int l = 0; l < m->n_layers; l++) ops += layer_has_line(&m->layers[l], line);
        fprintf(f,
                "<tr id=\"line-%d\" data-line=\"%d\"%s><td class=\"ln\">%d</td><td class=\"src\">",
                line, line, ops ? " class=\"op\"" : "", line);
        draw_escaped(f, s, n);
        fputs("</td><td class=\"to\">", f);
        for (int l = 0; l < m->n_layers; l++)
            if (layer_has_line(&m->layers[l], line)) write_line_links(c, flags, l, line, f);
        fputs("</td></tr>\n", f);
        s += n + (e ? 1 : 0);
    }
    fputs("</table></div></section>\n", f);
}

static void write_layer_table(const TfCapture *c, const int *flags, FILE *f) {
    const TfModel *m = c->m;
    fputs(
        "<section><h2 id=\"layers\">Layers</h2>\n<table "
        "class=\"layers\"><tr><th>#</th><th>name</th>"
        "<th>kind</th><th>op</th><th>line</th><th>source</th><th>changed</th><th>flags</th></tr>\n",
        f);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        fprintf(f, "<tr><td><a href=\"#layer-%d\">%d</a></td><td>", l, l);
        draw_text(f, ly->name);
        fprintf(f, "</td><td>%s", tf_layer_kind_names[ly->kind]);
        if (ly->kind == TF_LAYER_ATTENTION)
            fprintf(f, ", %d head%s", ly->n_heads, ly->n_heads == 1 ? "" : "s");
        if (ly->n_parts > 0) fprintf(f, ", %d ops", ly->n_parts);
        fputs("</td><td>", f);
        // A layer of several ops: one line in each cell per op.
        int n_ops = ly->n_parts > 0 ? ly->n_parts : 1;
        for (int i = 0; i < n_ops; i++) {
            char pt[160];
            if (i) fputs("<br>", f);
            if (ly->n_parts > 0) {
                inspect_part_text(ly, i, INSPECT_PART_UNITS, pt, sizeof pt);
                draw_text(f, pt);
            } else if (ly->op) {
                draw_text(f, ly->op);
            }
        }
        fputs("</td><td>", f);
        for (int i = 0; i < n_ops; i++) {
            int line = ly->n_parts > 0 ? ly->parts[i].line : ly->line;
            size_t n = 0;
            if (i) fputs("<br>", f);
            if (source_line(m, line, &n))
                fprintf(f, "<a href=\"#line-%d\">%d</a>", line, line);
            else if (line > 0)
                fprintf(f, "%d", line);
        }
        fputs("</td><td class=\"m\">", f);
        for (int i = 0; i < n_ops; i++) {
            size_t n = 0;
            const char *src = source_line(m, ly->n_parts > 0 ? ly->parts[i].line : ly->line, &n);
            if (i) fputs("<br>", f);
            if (src) draw_escaped(f, src, n);
        }
        fputs("</td><td>", f);
        write_wrote(c, l + 1, f);
        fprintf(f, "</td><td%s>%s</td></tr>\n", flags[l + 1] ? " class=\"flagged\"" : "",
                flags[l + 1] ? "&#9888;" : "");
    }
    fputs("</table></section>\n", f);
}

/* The source lines of a layer's ops, each linked to the program view:
 * "  47 | read_left: ...", one line per op of a layer of several. */
static void write_source_lines(const TfModel *m, const TfLayer *ly, FILE *f) {
    int n_ops = ly->n_parts > 0 ? ly->n_parts : 1, open = 0;
    for (int i = 0; i < n_ops; i++) {
        int line = ly->n_parts > 0 ? ly->parts[i].line : ly->line;
        size_t n = 0;
        const char *src = source_line(m, line, &n);
        if (!src) continue;
        int seen = 0; /* two ops of one line show it once */
        for (int j = 0; j < i; j++) seen |= ly->parts[j].line == line;
        if (seen) continue;
        char num[16]; /* right-aligned in 4, the link on the digits only */
        int w = snprintf(num, sizeof num, "%d", line);
        fprintf(f, "%s%*s<a href=\"#line-%s\">%s</a> | ", open++ ? "\n" : "<pre>",
                w < 4 ? 4 - w : 0, "", num, num);
        draw_escaped(f, src, n);
    }
    if (open) fputs("</pre>\n", f);
}

/* One collapsible section per block: decoded registers, residual heatmap,
 * every head's attention. */
static void write_blocks(const TfCapture *c, const int *flags, const char *live, FILE *f) {
    const TfModel *m = c->m;
    char title[256];
    fputs("<section><h2 id=\"trace\">Layer by layer</h2>\n", f);
    for (int b = 0; b < c->n_blocks; b++) {
        int l = b - 1, open = b == 0 || m->n_layers <= REPORT_OPEN_LAYERS;
        block_title(c, b, title, sizeof title);
        if (l < 0)
            fprintf(f, "<details class=\"layer\" id=\"embedding\"%s><summary>",
                    open ? " open" : "");
        else
            fprintf(f, "<details class=\"layer\" id=\"layer-%d\" data-layer=\"%d\" data-line=\"%d\"",
                    l, l, m->layers[l].line);
        if (l >= 0 && m->layers[l].n_parts > 0) { /* every op's line, for the program view */
            fputs(" data-lines=\"", f);
            for (int i = 0; i < m->layers[l].n_parts; i++)
                fprintf(f, "%s%d", i ? " " : "", m->layers[l].parts[i].line);
            fputc('"', f);
        }
        if (l >= 0) fprintf(f, "%s><summary>", open ? " open" : "");
        draw_text(f, title);
        if (b > 0) {
            fputs(" &#8212; changed ", f);
            write_wrote(c, b, f);
        }
        if (flags[b])
            fprintf(f, " <span class=\"flagged\">&#9888; %d cell%s flagged</span>", flags[b],
                    flags[b] == 1 ? "" : "s");
        fputs("</summary>\n", f);
        if (l >= 0) write_source_lines(m, &m->layers[l], f);
        write_decoded(c, live, b, f);
        fputs("<div class=\"figs\">\n", f);
        report_svg_residual(c, b, 0, f);
        for (int h = 0; l >= 0 && c->att[l] && h < m->layers[l].n_heads; h++) {
            fprintf(f, "<div class=\"fig\" id=\"layer-%d-h%d\" data-line=\"%d\">", l, h,
                    unit_line(&m->layers[l], h));
            report_svg_attention(c, l, h, 0, f);
            fputs("</div>\n", f);
        }
        fputs("</div></details>\n", f);
    }
    fputs("</section>\n", f);
}

int report_write_html(const TfCapture *c, const char *path, TfError *err) {
    const TfModel *m = c->m;
    int *flags = calloc((size_t)c->n_blocks, sizeof(int));
    if (!flags) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    FILE *f = outfile_open(path, err);
    if (!f) {
        free(flags);
        return -1;
    }
    char *live = inspect_live(c); /* NULL: every flag counts */
    for (int b = 0; b < c->n_blocks; b++) flags[b] = count_flags(c, live, b);

    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>tfrun report",
          f);
    if (m->source_name) {
        fputs(": ", f);
        draw_text(f, m->source_name);
    }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head><body>\n<div class=\"page\">\n", draw_css);
    write_toc(c, flags, f);
    fputs("<main>\n<h1>Inside ", f);
    draw_text(f, m->source_name ? m->source_name : "a weight file");
    fputs("</h1>\n", f);
    write_summary(c, f);
    write_model_view(c, flags, f);
    write_program(c, flags, f);
    write_layer_table(c, flags, f);
    write_blocks(c, flags, live, f);
    free(flags);
    free(live);
    fputs(
        "</main></div>\n<div id=\"status\"></div><div id=\"tip\"></div><div id=\"pinned\"></div>\n",
        f);
    fputs("<script type=\"application/json\" id=\"tf-data\">", f);
    write_json_data(c, f);
    fprintf(f, "</script>\n<script>\n%s</script>\n<script>\n%s%s</script>\n</body></html>\n",
            draw_js_guard, draw_js_common, report_js);
    return outfile_close(f, err);
}
