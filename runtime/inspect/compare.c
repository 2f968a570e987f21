/* compare.c: two models on the same prompt, head against head. See
 * compare.h.
 *
 * The pictures are report.c's attention maps (report_svg_attention) and
 * one more drawn here, the similarity matrix; the page shares report.c's
 * style and first script (draw.h) and has its own small script for hover.
 */
#define _POSIX_C_SOURCE 200809L
#include "compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "draw.h"
#include "outfile.h"
#include "report.h"

static const char side_name[2] = {'A', 'B'};
static const char side_id[2] = {'a', 'b'};

/* --- the numbers ----------------------------------------------------------- */

double compare_similarity(const TfCapture *a, int la, int ha, const TfCapture *b, int lb, int hb) {
    int n = a->n_pos;
    double tv = 0;
    for (int q = 0; q < n; q++) {
        double row = 0;
        for (int k = 0; k < n; k++)
            row += fabs((double)capture_att(a, la, ha, q, k) - (double)capture_att(b, lb, hb, q, k));
        tv += 0.5 * row;
    }
    return 1.0 - tv / n;
}

/* Every head of c's attention layers, in order; *n their number. */
static TfCompareHead *list_heads(const TfCapture *c, int *n) {
    const TfModel *m = c->m;
    *n = 0;
    for (int l = 0; l < m->n_layers; l++)
        if (c->att[l]) *n += m->layers[l].n_heads;
    TfCompareHead *h = malloc(((size_t)*n + 1) * sizeof *h);
    if (!h) return NULL;
    int i = 0;
    for (int l = 0; l < m->n_layers; l++)
        for (int k = 0; c->att[l] && k < m->layers[l].n_heads; k++) h[i++] = (TfCompareHead){l, k};
    return h;
}

#define COMPARE_MAX_PAIRS (1 << 20)

TfCompare *compare_new(const TfCapture *a, const char *file_a, const TfCapture *b,
                       const char *file_b, TfError *err) {
    if (a->n_pos != b->n_pos) {
        tf_error_set(err, "%s runs %d positions and %s %d: the heads cannot be compared", file_a,
                     a->n_pos, file_b, b->n_pos);
        return NULL;
    }
    // The page draws both models and a head-by-head matrix: bounded.
    if (inspect_check_size(a->m, a->n_pos, 0, TF_REPORT_MAX_CELLS, "the comparison", err) < 0 ||
        inspect_check_size(b->m, b->n_pos, 0, TF_REPORT_MAX_CELLS, "the comparison", err) < 0)
        return NULL;
    double heads[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        for (int l = 0; l < (s ? b : a)->m->n_layers; l++)
            if ((s ? b : a)->m->layers[l].kind == TF_LAYER_ATTENTION)
                heads[s] += (s ? b : a)->m->layers[l].n_heads;
    if (heads[0] * heads[1] > COMPARE_MAX_PAIRS) {
        tf_error_set(err, "%.0f heads against %.0f: over the limit of %d pairs of heads to compare",
                     heads[0], heads[1], COMPARE_MAX_PAIRS);
        return NULL;
    }
    TfCompare *cmp = calloc(1, sizeof *cmp);
    if (!cmp) goto oom;
    cmp->cap[0] = a, cmp->cap[1] = b;
    cmp->file[0] = file_a, cmp->file[1] = file_b;
    for (int s = 0; s < 2; s++) {
        cmp->heads[s] = list_heads(cmp->cap[s], &cmp->n_heads[s]);
        if (!cmp->heads[s]) goto oom;
        if (cmp->n_heads[s] == 0) {
            tf_error_set(err, "%s has no attention heads to compare", cmp->file[s]);
            compare_free(cmp);
            return NULL;
        }
    }
    int na = cmp->n_heads[0], nb = cmp->n_heads[1];
    cmp->sim = malloc((size_t)na * (size_t)nb * sizeof(double));
    cmp->best[0] = malloc((size_t)na * sizeof(int));
    cmp->best[1] = malloc((size_t)nb * sizeof(int));
    if (!cmp->sim || !cmp->best[0] || !cmp->best[1]) goto oom;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) {
            const TfCompareHead *x = &cmp->heads[0][i], *y = &cmp->heads[1][j];
            cmp->sim[(size_t)i * (size_t)nb + (size_t)j] =
                compare_similarity(a, x->layer, x->head, b, y->layer, y->head);
        }
    for (int i = 0; i < na; i++) {
        int best = 0;
        for (int j = 1; j < nb; j++)
            if (cmp->sim[(size_t)i * nb + j] > cmp->sim[(size_t)i * nb + best]) best = j;
        cmp->best[0][i] = best;
    }
    for (int j = 0; j < nb; j++) {
        int best = 0;
        for (int i = 1; i < na; i++)
            if (cmp->sim[(size_t)i * nb + j] > cmp->sim[(size_t)best * nb + j]) best = i;
        cmp->best[1][j] = best;
    }
    return cmp;
oom:
    compare_free(cmp);
    tf_error_set(err, "out of memory comparing the heads");
    return NULL;
}

void compare_free(TfCompare *cmp) {
    if (!cmp) return;
    for (int s = 0; s < 2; s++) {
        free(cmp->heads[s]);
        free(cmp->best[s]);
    }
    free(cmp->sim);
    free(cmp);
}

static double sim_at(const TfCompare *cmp, int i, int j) {
    return cmp->sim[(size_t)i * (size_t)cmp->n_heads[1] + (size_t)j];
}

/* "L6 h0 read_left": head i of side s; in a layer of several ops, the name
 * of the op the head belongs to ("L0 h1 hist", not "L0 h1 n+hist"). */
static void head_label(const TfCompare *cmp, int s, int i, char *buf, size_t n) {
    const TfCompareHead *h = &cmp->heads[s][i];
    const TfLayer *ly = &cmp->cap[s]->m->layers[h->layer];
    int part = inspect_part_of(ly, h->head);
    snprintf(buf, n, "L%d h%d %s", h->layer, h->head, part >= 0 ? ly->parts[part].name : ly->name);
}

/* The file name without its folders. */
static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* --- the similarity matrix ---------------------------------------------------- */

#define SIM_LABEL 20 /* head labels longer than this are cut */


/* A head's label in a matrix axis, cut to SIM_LABEL characters (the whole
 * label as its tooltip), and the end of its <text>. */
static void short_label(FILE *f, const char *label) {
    if (strlen(label) > SIM_LABEL) {
        fputs("<title>", f);
        draw_text(f, label);
        fputs("</title>", f);
    }
    draw_short(f, label, SIM_LABEL);
    fputs("</text>\n", f);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void compare_svg_matrix(const TfCompare *cmp, int standalone, FILE *f) {
    int na = cmp->n_heads[0], nb = cmp->n_heads[1], most = na > nb ? na : nb;
    int cell = clampi(560 / most, 8, 32);
    // Labels as large as the cells allow (a 10 px label's box is 11.6 px
    // tall), and when even 7 px ones do not fit, every k-th; a label of
    // SIM_LABEL characters of 10 px is 120 px long.
    int fs = clampi(cell - 2, 7, 10), every = (fs * 12 + cell * 10 - 1) / (cell * 10);
    int left = 132, top = 164;
    int width = left + nb * cell + 16, height = top + na * cell + 32;
    if (width < 460) width = 460; /* the legend */
    const char *title = "similarity of A's heads (rows) and B's (columns)";
    if (width < draw_title_width(strlen(title))) width = draw_title_width(strlen(title));
    char label[160], hex[8];

    draw_svg_open(f, standalone, width, height);
    fprintf(f,
            " class=\"hm\" data-kind=\"sim\" data-x0=\"%d\" data-y0=\"%d\" data-cw=\"%d\" "
            "data-ch=\"%d\" data-rows=\"%d\" data-cols=\"%d\">\n",
            left, top, cell, cell, na, nb);
    fputs("<title>head similarity: A ", f);
    draw_text(f, cmp->file[0]);
    fputs(" (rows) against B ", f);
    draw_text(f, cmp->file[1]);
    fputs(" (columns)</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fprintf(f, "<text x=\"4\" y=\"13\" font-size=\"12\" font-weight=\"bold\">%s</text>\n", title);
    fprintf(f, "<text x=\"%d\" y=\"28\" fill=\"#4b5563\">heads of B &#8594;</text>\n", left);
    fprintf(f, "<text x=\"4\" y=\"%d\" fill=\"#4b5563\">heads of A &#8595;</text>\n", top - 4);
    for (int i = 0; i < na; i += every) {
        head_label(cmp, 0, i, label, sizeof label);
        fprintf(f, "<text class=\"row\" x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"%d\">",
                left - 4, top + i * cell + cell / 2 + fs / 2 - 1, fs);
        short_label(f, label);
    }
    for (int j = 0; j < nb; j += every) {
        head_label(cmp, 1, j, label, sizeof label);
        fprintf(f, "<text class=\"col\" transform=\"translate(%d,%d) rotate(-90)\" font-size=\"%d\">",
                left + j * cell + cell / 2 + fs / 2 - 1, top - 4, fs);
        short_label(f, label);
    }
    fprintf(f,
            "<g class=\"cells\" transform=\"translate(%d,%d) scale(%d,%d)\" "
            "shape-rendering=\"crispEdges\">\n",
            left, top, cell, cell);
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (draw_sequential((float)sim_at(cmp, i, j), 0.0f, 1.0f, hex))
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" fill=\"%s\"/>\n", j, i,
                        hex);
    fputs("</g>\n", f);
    // Each row's best match outlined; the values written when they fit
    // (4 characters of 9 px: 22 px).
    for (int i = 0; i < na; i++)
        fprintf(f,
                "<rect class=\"best\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                "stroke=\"#f59e0b\" stroke-width=\"2\"/>\n",
                left + cmp->best[0][i] * cell + 1, top + i * cell + 1, cell - 2, cell - 2);
    for (int i = 0; cell >= 26 && i < na; i++)
        for (int j = 0; j < nb; j++) {
            double v = sim_at(cmp, i, j);
            fprintf(f,
                    "<text class=\"v\" x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\" "
                    "fill=\"%s\">%.2f</text>\n",
                    left + j * cell + cell / 2, top + i * cell + cell / 2 + 3,
                    v > 0.55 ? "#ffffff" : "#111827", v);
        }
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#374151\" "
            "stroke-width=\"0.5\"/>\n",
            left, top, nb * cell, na * cell);
    int y = top + na * cell + 6;
    draw_colour_bar(f, 4, y, 0, 0.0f, 1.0f);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" fill=\"#4b5563\">1 - mean TV; outlined: row's best</text>\n",
            4 + DRAW_BAR_W + 8, y + 8);
    fputs("</svg>\n", f);
}

/* --- the page ---------------------------------------------------------------- */

static const char *const compare_css =
    ".sbs{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}\n"
    ".sbs>section{min-width:0;overflow-x:auto;border-top:2px solid #d1d5db}\n"
    ".sbs .figs{flex-direction:column}\n"
    "table.sum td,table.sum th,table.best td,table.best th{border:1px solid #e5e7eb;"
    "vertical-align:top}\n"
    ".bests{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}\n"
    "table.best td.s{text-align:right;font-family:'DejaVu Sans Mono',monospace}\n";

/* The script: hover shows a cell's exact value, click pins it; a
 * self-check hovers the matrix's first cell and marks the page. */
static const char *const compare_js =
    "function describe(svg,x,y){var s=svg.dataset,col=Math.floor((x-s.x0)/s.cw),"
    "row=Math.floor((y-s.y0)/s.ch);if(col<0||row<0||row>=+s.rows||col>=+s.cols)return null;\n"
    "if(s.kind==='sim')return 'A '+D.heads[0][row]+' vs B '+D.heads[1][col]+': similarity '+"
    "fmt(D.sim[row*D.heads[1].length+col]);\n"
    "var m=svg.closest('[data-model]').dataset.model==='a'?0:1,a=D.att[m][s.layer+'/'+s.head];"
    "return (m?'B':'A')+' layer '+s.layer+' head '+s.head+': query '+row+' '+tok(row)+' -> key '+"
    "col+' '+tok(col)+' = '+fmt(a[row*D.P+col]);}\n"
    "draw_hover(document.querySelectorAll('svg.hm'),describe);\n"
    "(function(){var svg=document.querySelector('svg.hm[data-kind=sim]');"
    "if(!svg)throw new Error('no similarity matrix');var s=svg.dataset,pt=svg.createSVGPoint();"
    "pt.x=+s.x0+0.5*s.cw;pt.y=+s.y0+0.5*s.ch;pt=pt.matrixTransform(svg.getScreenCTM());\n"
    "svg.dispatchEvent(new MouseEvent('mousemove',{clientX:pt.x,clientY:pt.y,bubbles:true}));\n"
    "var want='similarity '+fmt(D.sim[0]);if(tip.textContent.slice(-want.length)!==want)"
    "throw new Error('hover shows \"'+tip.textContent+'\", expected '+want);\n"
    "tip.style.display='none';\n"
    "mark('report-ok','script ran: similarity matrix '+D.heads[0].length+'x'+D.heads[1].length+"
    "', '+document.querySelectorAll('#model-a svg.hm[data-kind=att]').length+' attention maps of "
    "A, '+document.querySelectorAll('#model-b svg.hm[data-kind=att]').length+' of B; hover "
    "checked ('+tip.textContent+')');})();\n";

/* The data the script (and a test) reads: tokens, head labels, the
 * similarities, every attention weight of both. */
static void write_json_data(const TfCompare *cmp, FILE *f) {
    const TfCapture *a = cmp->cap[0];
    char t[160];
    fprintf(f, "{\"P\":%d,\"tokens\":[", a->n_pos);
    for (int p = 0; p < a->n_pos; p++) {
        inspect_token_text(a->m, a->tokens[p], t, sizeof t);
        if (p) fputc(',', f);
        draw_json_string(f, t);
    }
    fputs("],\n\"files\":[", f);
    draw_json_string(f, cmp->file[0]);
    fputc(',', f);
    draw_json_string(f, cmp->file[1]);
    fputs("],\n\"heads\":[", f);
    for (int s = 0; s < 2; s++) {
        fputs(s ? "],[" : "[", f);
        for (int i = 0; i < cmp->n_heads[s]; i++) {
            head_label(cmp, s, i, t, sizeof t);
            if (i) fputc(',', f);
            draw_json_string(f, t);
        }
    }
    fputs("]],\n\"sim\":[", f);
    for (int i = 0; i < cmp->n_heads[0]; i++)
        for (int j = 0; j < cmp->n_heads[1]; j++) { /* null: not finite (a NaN weight) */
            double v = sim_at(cmp, i, j);
            if (i || j) fputc(',', f);
            if (isfinite(v))
                fprintf(f, "%.17g", v);
            else
                fputs("null", f);
        }
    fputs("],\n\"best\":[", f);
    for (int s = 0; s < 2; s++) {
        fputs(s ? "],[" : "[", f);
        for (int i = 0; i < cmp->n_heads[s]; i++) fprintf(f, "%s%d", i ? "," : "", cmp->best[s][i]);
    }
    fputs("]],\n\"att\":[", f);
    for (int s = 0; s < 2; s++) {
        const TfCapture *c = cmp->cap[s];
        fputs(s ? ",\n{" : "{", f);
        for (int i = 0; i < cmp->n_heads[s]; i++) {
            const TfCompareHead *h = &cmp->heads[s][i];
            fprintf(f, "%s\"%d/%d\":[", i ? ",\n" : "", h->layer, h->head);
            for (int q = 0; q < c->n_pos; q++)
                for (int k = 0; k < c->n_pos; k++) {
                    if (q || k) fputc(',', f);
                    draw_json_float(f, capture_att(c, h->layer, h->head, q, k));
                }
            fputc(']', f);
        }
        fputc('}', f);
    }
    fputs("]}", f);
}

/* A link to head i of side s: "L6 h0 read_left". */
static void head_link(const TfCompare *cmp, int s, int i, FILE *f) {
    char t[160];
    const TfCompareHead *h = &cmp->heads[s][i];
    head_label(cmp, s, i, t, sizeof t);
    fprintf(f, "<a href=\"#%c-layer-%d-h%d\">", side_id[s], h->layer, h->head);
    draw_text(f, t);
    fputs("</a>", f);
}

static void write_summary(const TfCompare *cmp, FILE *f) {
    const TfCapture *a = cmp->cap[0];
    fputs("<section id=\"summary\">\n<p>Both models run the prompt <code id=\"prompt\">", f);
    for (int p = 0; p < a->n_pos; p++) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(a->m, a->tokens[p], t);
        if (p > 0 && a->m->token_names) fputc(' ', f); /* words apart */
        draw_text(f, t);
    }
    fprintf(f, "</code> (%d positions); every attention head of A is compared with every head "
               "of B on it.</p>\n<table class=\"sum\"><tr><th></th><th>A</th><th>B</th></tr>\n",
            a->n_pos);
    fputs("<tr><th>file</th>", f);
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<td><code id=\"file-%c\">", side_id[s]);
        draw_text(f, cmp->file[s]);
        fputs("</code></td>", f);
    }
    fputs("</tr>\n<tr><th>program</th>", f);
    for (int s = 0; s < 2; s++) {
        const TfModel *m = cmp->cap[s]->m;
        fputs("<td>", f);
        draw_text(f, m->source_name ? m->source_name : "(none embedded)");
        fputs("</td>", f);
    }
    fputs("</tr>\n<tr><th>tfrun prints</th>", f);
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<td><code id=\"result-%c\">", side_id[s]);
        if (cmp->result[s]) draw_text(f, cmp->result[s]);
        fputs("</code></td>", f);
    }
    fputs("</tr>\n<tr><th>model</th>", f);
    for (int s = 0; s < 2; s++) {
        const TfModel *m = cmp->cap[s]->m;
        int n_att = 0;
        for (int l = 0; l < m->n_layers; l++) n_att += m->layers[l].kind == TF_LAYER_ATTENTION;
        fprintf(f,
                "<td>d_model %d, %d layers (%d attention), %d heads, %d registers, vocabulary of "
                "%d, %zu parameters</td>",
                m->d_model, m->n_layers, n_att, cmp->n_heads[s], m->n_regs, m->n_vocab,
                model_param_count(m));
    }
    fputs("</tr>\n<tr><th>mean best match</th>", f);
    for (int s = 0; s < 2; s++) {
        double sum = 0;
        for (int i = 0; i < cmp->n_heads[s]; i++)
            sum += s ? sim_at(cmp, cmp->best[1][i], i) : sim_at(cmp, i, cmp->best[0][i]);
        fprintf(f, "<td>%.4f over %c's %d heads</td>", sum / cmp->n_heads[s], side_name[s],
                cmp->n_heads[s]);
    }
    fputs("</tr></table>\n<p>Hover over any picture for the exact value under the mouse; click to "
          "pin it at the bottom.</p>\n</section>\n",
          f);
}

static void write_similarity(const TfCompare *cmp, FILE *f) {
    fputs("<section id=\"similarity\"><h2>Head against head</h2>\n<p>The similarity of two heads "
          "is 1 minus the mean, over the query positions, of the total-variation distance "
          "between their rows of attention weights (half the sum of the absolute differences): "
          "1 when they attend identically, 0 when every query of one attends where the other's "
          "does not. Each row's best match is outlined.</p>\n<div class=\"scroll\">",
          f);
    compare_svg_matrix(cmp, 0, f);
    fputs("</div></section>\n", f);
}

static void write_best(const TfCompare *cmp, FILE *f) {
    fputs("<section id=\"best\"><h2>Best matches</h2>\n<div class=\"bests\">\n", f);
    for (int s = 0; s < 2; s++) {
        int o = 1 - s;
        fprintf(f,
                "<table class=\"best\" id=\"best-%c\"><tr><th>head of %c</th><th>most like, "
                "in %c</th><th>similarity</th></tr>\n",
                side_id[s], side_name[s], side_name[o]);
        for (int i = 0; i < cmp->n_heads[s]; i++) {
            int j = cmp->best[s][i];
            double v = s ? sim_at(cmp, j, i) : sim_at(cmp, i, j);
            fputs("<tr><td>", f);
            head_link(cmp, s, i, f);
            fputs("</td><td>", f);
            head_link(cmp, o, j, f);
            fprintf(f, "</td><td class=\"s\" title=\"%.17g\">%.4f</td></tr>\n", v, v);
        }
        fputs("</table>\n", f);
    }
    fputs("</div></section>\n", f);
}

/* One model's attention maps, in a column of the side-by-side view. */
static void write_model(const TfCompare *cmp, int s, FILE *f) {
    const TfCapture *c = cmp->cap[s];
    fprintf(f, "<section id=\"model-%c\" data-model=\"%c\"><h2>%c: ", side_id[s], side_id[s],
            side_name[s]);
    draw_text(f, base_name(cmp->file[s]));
    fputs("</h2>\n<p><code>", f);
    if (cmp->result[s]) draw_text(f, cmp->result[s]);
    fputs("</code></p>\n<div class=\"figs\">\n", f);
    for (int i = 0; i < cmp->n_heads[s]; i++) {
        const TfCompareHead *h = &cmp->heads[s][i];
        int j = cmp->best[s][i];
        fprintf(f, "<div class=\"fig\" id=\"%c-layer-%d-h%d\"><div>most like ", side_id[s],
                h->layer, h->head);
        head_link(cmp, 1 - s, j, f);
        fprintf(f, " (%.4f)</div>\n", s ? sim_at(cmp, j, i) : sim_at(cmp, i, j));
        report_svg_attention(c, h->layer, h->head, 0, f);
        fputs("</div>\n", f);
    }
    fputs("</div></section>\n", f);
}

int compare_write_html(const TfCompare *cmp, const char *path, TfError *err) {
    FILE *f = outfile_open(path, err);
    if (!f) return -1;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>tfrun "
          "--compare: ",
          f);
    draw_text(f, base_name(cmp->file[0]));
    fputs(" and ", f);
    draw_text(f, base_name(cmp->file[1]));
    fprintf(f, "</title>\n<style>\n%s%s</style>\n</head><body data-page=\"compare\">\n"
               "<div class=\"page\">\n",
            draw_css, compare_css);
    fputs("<nav id=\"toc\"><b>Contents</b>\n<ol>\n<li><a href=\"#summary\">Summary</a></li>\n"
          "<li><a href=\"#similarity\">Head against head</a></li>\n"
          "<li><a href=\"#best\">Best matches</a></li>\n",
          f);
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<li><a href=\"#model-%c\">%c: ", side_id[s], side_name[s]);
        draw_short(f, base_name(cmp->file[s]), 18);
        fputs("</a></li>\n", f);
    }
    fputs("</ol>\n</nav>\n<main>\n<h1>", f);
    draw_text(f, base_name(cmp->file[0]));
    fputs(" and ", f);
    draw_text(f, base_name(cmp->file[1]));
    fputs(", side by side</h1>\n", f);
    write_summary(cmp, f);
    write_similarity(cmp, f);
    write_best(cmp, f);
    fputs("<div class=\"sbs\">\n", f);
    write_model(cmp, 0, f);
    write_model(cmp, 1, f);
    fputs("</div>\n</main></div>\n<div id=\"status\"></div><div id=\"tip\"></div>"
          "<div id=\"pinned\"></div>\n<script type=\"application/json\" id=\"tf-data\">",
          f);
    write_json_data(cmp, f);
    fprintf(f, "</script>\n<script>\n%s</script>\n<script>\n%s%s</script>\n</body></html>\n",
            draw_js_guard, draw_js_common, compare_js);
    return outfile_close(f, err);
}

int compare_write_svgs(const TfCompare *cmp, const char *dir, TfError *err) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        tf_error_set(err, "cannot create directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    size_t plen = strlen(dir) + 32;
    char *path = malloc(plen);
    if (!path) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    snprintf(path, plen, "%s/similarity.svg", dir);
    FILE *f = outfile_open(path, err);
    int rc = -1;
    if (f) {
        compare_svg_matrix(cmp, 1, f);
        rc = outfile_close(f, err);
    }
    for (int s = 0; s < 2 && rc == 0; s++) {
        snprintf(path, plen, "%s/%c", dir, side_id[s]);
        rc = report_write_svgs(cmp->cap[s], path, err);
    }
    free(path);
    return rc;
}
