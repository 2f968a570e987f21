/* report.c: SVG heatmaps and the HTML report. See report.h.
 *
 * Every picture is drawn here, in C, as SVG: the same code writes the
 * standalone files (--svg) and the figures inlined in the report, so the
 * report shows everything even with scripts off. The report's script only
 * adds hover and click: it maps the mouse to a cell with the figure's data-*
 * attributes and reads the exact value from the JSON the report embeds.
 */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "infer.h"

/* --- small writers ------------------------------------------------------- */

/* Text for HTML and SVG: & < > " ' escaped. */
static void put_escaped(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(s[i], f); break;
        }
    }
}

static void put_text(FILE *f, const char *s) { put_escaped(f, s, strlen(s)); }

/* A JSON string; '<' as \u003c so that the data cannot close its <script>. */
static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == '<' || ch == '>' || ch == '&')
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* A float exactly (9 significant digits round-trip float32); null if not finite. */
static void put_json_float(FILE *f, float v) {
    if (!isfinite(v))
        fputs("null", f);
    else if (v == 0)
        fputc('0', f);
    else
        fprintf(f, "%.9g", (double)v);
}

/* "3 '9'": a position and its token, for axis labels. */
static void pos_label(const TfCapture *c, int p, char *buf, size_t n) {
    char t[32];
    inspect_token_text(c->m, c->tokens[p], t, sizeof t);
    snprintf(buf, n, "%d %s", p, t);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Diverging colour for v / scale: blue (negative), white (0), red (positive).
 * Returns 0 for white (the cell is not drawn). */
static int diverging(float v, float scale, char *hex) {
    if (!isfinite(v)) {
        strcpy(hex, "#00ff00"); /* NaN and infinities stand out in green */
        return 1;
    }
    float t = v / scale;
    if (t > 1) t = 1;
    if (t < -1) t = -1;
    // White to #b2182b (positive) or #2166ac (negative).
    int r0 = t >= 0 ? 178 : 33, g0 = t >= 0 ? 24 : 102, b0 = t >= 0 ? 43 : 172;
    float a = fabsf(t);
    int r = (int)lroundf(255 + a * (float)(r0 - 255)),
        g = (int)lroundf(255 + a * (float)(g0 - 255)),
        b = (int)lroundf(255 + a * (float)(b0 - 255));
    if (r == 255 && g == 255 && b == 255) return 0;
    sprintf(hex, "#%02x%02x%02x", r, g, b);
    return 1;
}

/* White (w = lo) to #3f007d (w = hi) for attention weights; 0 when white. */
static int sequential(float w, float lo, float hi, char *hex) {
    if (!isfinite(w)) {
        strcpy(hex, "#00ff00");
        return 1;
    }
    float t = (w - lo) / (hi - lo);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    int r = (int)lroundf(255 - t * (255 - 63)), g = (int)lroundf(255 - t * 255),
        b = (int)lroundf(255 - t * (255 - 125));
    if (r == 255 && g == 255 && b == 255) return 0;
    sprintf(hex, "#%02x%02x%02x", r, g, b);
    return 1;
}

static void svg_open(FILE *f, int standalone, int width, int height) {
    if (standalone) fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans Mono, monospace\" font-size=\"10\"",
            width, height, width, height);
}

/* "after layer 3 step_out (StepPosition, line 42)" */
static void block_title(const TfCapture *c, int block, char *buf, size_t n) {
    if (block == 0) {
        snprintf(buf, n, "after the embedding");
        return;
    }
    const TfLayer *ly = &c->m->layers[block - 1];
    int k = snprintf(buf, n, "after layer %d %s (%s", block - 1, ly->name,
                     ly->op ? ly->op : tf_layer_kind_names[ly->kind]);
    if (k < 0 || (size_t)k >= n) return;
    if (ly->line > 0)
        snprintf(buf + k, n - (size_t)k, ", line %d)", ly->line);
    else
        snprintf(buf + k, n - (size_t)k, ")");
}

/* --- residual heatmap ------------------------------------------------------ */

typedef struct Geo {
    int left, top, cw, ch, width, height;
} Geo;

static Geo resid_geo(const TfCapture *c) {
    Geo g;
    int d = c->m->d_model;
    g.cw = clampi(900 / (d > 0 ? d : 1), 2, 14);
    g.ch = 14;
    g.left = 72;
    g.top = c->m->n_regs > 0 ? 100 : 44;
    g.width = g.left + d * g.cw + 16;
    if (g.width < 520) g.width = 520; /* room for the title and the legend */
    g.height = g.top + c->n_pos * g.ch + 22;
    return g;
}

/* Colour scale: register values are made to be about 1 (one-hots, sin and
 * cos), so compiled models saturate at +-1; otherwise the block's largest. */
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

void report_svg_residual(const TfCapture *c, int block, int standalone, FILE *f) {
    const TfModel *m = c->m;
    Geo g = resid_geo(c);
    int d = m->d_model;
    float scale = resid_scale(c, block);
    char title[256], label[64], hex[8];
    block_title(c, block, title, sizeof title);
    svg_open(f, standalone, g.width, g.height);
    fprintf(f,
            " class=\"hm\" data-kind=\"resid\" data-block=\"%d\" data-x0=\"%d\" data-y0=\"%d\" "
            "data-cw=\"%d\" data-ch=\"%d\" data-rows=\"%d\" data-cols=\"%d\">\n",
            block, g.left, g.top, g.cw, g.ch, c->n_pos, d);
    fputs("<title>residual stream ", f);
    put_text(f, title);
    fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fputs("<text x=\"4\" y=\"13\" font-size=\"12\" font-weight=\"bold\">residual ", f);
    put_text(f, title);
    fprintf(f, "</text>\n");

    // Register bands above the columns: the registers this block wrote in amber.
    if (m->n_regs > 0) {
        for (int r = 0; r < m->n_regs; r++) {
            const TfRegister *reg = &m->regs[r];
            int wrote = inspect_layer_wrote(c, block - 1, reg);
            int x = g.left + reg->offset * g.cw, w = reg->size * g.cw;
            fprintf(f,
                    "<rect class=\"band%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"7\" "
                    "fill=\"%s\"/>\n",
                    wrote ? " wrote" : "", x, g.top - 9, w > 1 ? w - 1 : 1,
                    wrote ? "#f59e0b" : (r % 2 ? "#9ca3af" : "#d1d5db"));
            fprintf(f, "<text class=\"reg\" transform=\"translate(%d,%d) rotate(-60)\"%s>",
                    x + w / 2 + 3, g.top - 12, wrote ? " font-weight=\"bold\"" : "");
            put_escaped(f, reg->name, 14);
            fputs("</text>\n", f);
        }
    } else {
        int step = d <= 64 ? 8 : d <= 256 ? 32 : 128;
        for (int col = 0; col < d; col += step)
            fprintf(f, "<text x=\"%d\" y=\"%d\">%d</text>\n", g.left + col * g.cw, g.top - 4, col);
    }
    // Position labels: "3 '9'".
    for (int p = 0; p < c->n_pos; p++) {
        pos_label(c, p, label, sizeof label);
        fprintf(f, "<text class=\"row\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", g.left - 4,
                g.top + p * g.ch + g.ch - 3);
        put_text(f, label);
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
            if (diverging(row[i], scale, hex))
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" fill=\"%s\"/>\n", i, p,
                        hex);
    }
    fputs("</g>\n", f);
    // Register boundaries and a frame.
    for (int r = 0; r < m->n_regs; r++)
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#9ca3af\" "
                "stroke-width=\"0.5\"/>\n",
                g.left + m->regs[r].offset * g.cw, g.top, g.left + m->regs[r].offset * g.cw,
                g.top + c->n_pos * g.ch);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#374151\" "
            "stroke-width=\"0.5\"/>\n",
            g.left, g.top, d * g.cw, c->n_pos * g.ch);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" fill=\"#4b5563\">rows: positions; columns: residual; red +, "
            "blue -, saturating at +-%.3g</text>\n",
            g.left, g.top + c->n_pos * g.ch + 15, (double)scale);
    fputs("</svg>\n", f);
}

/* --- attention matrix -------------------------------------------------------- */

static Geo att_geo(const TfCapture *c) {
    Geo g;
    g.cw = g.ch = clampi(480 / c->n_pos, 6, 36);
    g.left = 76;
    g.top = 84;
    g.width = g.left + c->n_pos * g.cw + 16;
    if (g.width < 380) g.width = 380; /* room for the title and the legend */
    g.height = g.top + c->n_pos * g.ch + 22;
    return g;
}

void report_svg_attention(const TfCapture *c, int layer, int head, int standalone, FILE *f) {
    const TfLayer *ly = &c->m->layers[layer];
    Geo g = att_geo(c);
    int P = c->n_pos;
    char label[64], hex[8];
    svg_open(f, standalone, g.width, g.height);
    fprintf(f,
            " class=\"hm\" data-kind=\"att\" data-layer=\"%d\" data-head=\"%d\" data-x0=\"%d\" "
            "data-y0=\"%d\" data-cw=\"%d\" data-ch=\"%d\" data-rows=\"%d\" data-cols=\"%d\">\n",
            layer, head, g.left, g.top, g.cw, g.ch, P, P);
    fprintf(f, "<title>attention, layer %d ", layer);
    put_text(f, ly->name);
    fprintf(f, ", head %d</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            head);
    fprintf(f, "<text x=\"4\" y=\"13\" font-size=\"12\" font-weight=\"bold\">layer %d ", layer);
    put_text(f, ly->name);
    fprintf(f, ", head %d%s</text>\n", head, ly->causal ? "" : " (bidirectional)");
    fprintf(f, "<text x=\"%d\" y=\"28\" fill=\"#4b5563\">key &#8594;</text>\n", g.left);
    fprintf(f, "<text x=\"4\" y=\"%d\" fill=\"#4b5563\">query &#8595;</text>\n", g.top - 4);
    int fs = g.ch < 10 ? g.ch : 10;
    for (int p = 0; p < P; p++) {
        pos_label(c, p, label, sizeof label);
        fprintf(f, "<text class=\"row\" x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"%d\">",
                g.left - 4, g.top + p * g.ch + g.ch / 2 + fs / 2 - 1, fs);
        put_text(f, label);
        fprintf(f,
                "</text>\n<text class=\"col\" transform=\"translate(%d,%d) rotate(-90)\" "
                "font-size=\"%d\">",
                g.left + p * g.cw + g.cw / 2 + fs / 2 - 1, g.top - 4, fs);
        put_text(f, label);
        fputs("</text>\n", f);
    }
    // The colours span the weights the queries can see, smallest to largest,
    // as an image plot scales (the seeds' pictures): a diffuse learned head
    // is as legible as a sharp compiled one. The legend gives both ends;
    // keys a causal query cannot see are grey.
    float lo = INFINITY, hi = -INFINITY;
    for (int q = 0; q < P; q++)
        for (int k = 0; k < P && (k <= q || !ly->causal); k++) {
            float w = capture_att(c, layer, head, q, k);
            if (w < lo) lo = w;
            if (w > hi) hi = w;
        }
    if (!(hi - lo > 1e-6f)) lo = 0, hi = hi > 0 ? hi : 1;
    fprintf(f,
            "<g class=\"cells\" transform=\"translate(%d,%d) scale(%d,%d)\" "
            "shape-rendering=\"crispEdges\">\n",
            g.left, g.top, g.cw, g.ch);
    for (int q = 0; q < P; q++)
        for (int k = 0; k < P; k++) {
            int masked = ly->causal && k > q;
            if (masked) strcpy(hex, "#e5e7eb");
            if (masked || sequential(capture_att(c, layer, head, q, k), lo, hi, hex))
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"1\" fill=\"%s\"/>\n", k, q,
                        hex);
        }
    fputs("</g>\n", f);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#374151\" "
            "stroke-width=\"0.5\"/>\n",
            g.left, g.top, P * g.cw, P * g.ch);
    fprintf(f,
            "<text x=\"4\" y=\"%d\" fill=\"#4b5563\">softmax weight: white %.3g, purple %.3g%s"
            "</text>\n",
            g.top + P * g.ch + 15, (double)lo, (double)hi, ly->causal ? ", grey masked" : "");
    fputs("</svg>\n", f);
}

/* --- files -------------------------------------------------------------------- */

static FILE *open_out(const char *path, TfError *err) {
    FILE *f = fopen(path, "w");
    if (!f) tf_error_set(err, "cannot write '%s': %s", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path, TfError *err) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        tf_error_set(err, "error writing '%s'", path);
        return -1;
    }
    return 0;
}

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
    int rc = 0;
    for (int b = 0; b < c->n_blocks && rc == 0; b++) {
        safe_name(b == 0 ? "embedding" : c->m->layers[b - 1].name, name, sizeof name);
        snprintf(path, plen, "%s/resid_%02d_%s.svg", dir, b, name);
        FILE *f = open_out(path, err);
        if (!f) {
            rc = -1;
            break;
        }
        report_svg_residual(c, b, 1, f);
        rc = close_out(f, path, err);
        if (b == 0 || !c->att[b - 1]) continue;
        for (int h = 0; h < c->m->layers[b - 1].n_heads && rc == 0; h++) {
            snprintf(path, plen, "%s/att_%02d_%s_h%d.svg", dir, b, name, h);
            if (!(f = open_out(path, err))) {
                rc = -1;
                break;
            }
            report_svg_attention(c, b - 1, h, 1, f);
            rc = close_out(f, path, err);
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

static const char *const report_css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#111827;max-width:1400px}\n"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\n"
    "code,pre,td.m,.dec td{font-family:'DejaVu Sans Mono',monospace}\n"
    "table{border-collapse:collapse}td,th{padding:1px 6px;text-align:left}\n"
    "table.layers tr:nth-child(even){background:#f3f4f6}\n"
    ".dec td,.dec th{text-align:right;border:1px solid #e5e7eb;min-width:2.2em}\n"
    ".dec th.r{text-align:left}.dec td.flag{background:#fecaca;font-weight:bold}\n"
    ".dec td.empty{color:#9ca3af}.dec td.sub{color:#6b7280;font-size:0.85em}\n"
    "details.layer{border-top:1px solid #d1d5db;padding:0.3em 0}\n"
    "details.layer summary{cursor:pointer;font-weight:600}\n"
    ".figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;margin:0.5em 0}\n"
    ".figs svg{border:1px solid #e5e7eb}.scroll{overflow-x:auto}\n"
    ".flagged{color:#b91c1c}.note{color:#b91c1c;font-family:monospace}\n"
    "#tip{position:fixed;pointer-events:none;background:#111827;color:#fff;padding:3px 6px;"
    "border-radius:3px;font:12px monospace;display:none;z-index:9}\n"
    "#pinned{position:fixed;bottom:0;left:0;right:0;background:#fffbeb;border-top:1px solid "
    "#f59e0b;font:12px monospace;padding:4px 1.5em;max-height:6em;overflow:auto}\n"
    "#pinned:empty{display:none}#status{color:#6b7280;font-size:12px}\n";

/* The first script, on its own so that it catches even a syntax error in
 * the second: any error marks the page with #report-error. */
static const char *const report_js_guard =
    "function mark(id,text){var p=document.createElement('p');p.id=id;p.textContent=text;"
    "document.getElementById('status').appendChild(p);}\n"
    "window.addEventListener('error',function(e){mark('report-error','script error: '+e.message+"
    "' (line '+e.lineno+')');});\n";

/* The script: hover shows a cell's exact value, click pins it; a self-check
 * at the end marks the page (#report-ok, or #report-error on any error). */
static const char *const report_js =
    "'use strict';\n"
    "var D=JSON.parse(document.getElementById('tf-data').textContent);\n"
    "var tip=document.getElementById('tip'),pinned=document.getElementById('pinned');\n"
    "function tok(p){return '\\''+D.tokens[p]+'\\'';}\n"
    "function fmt(v){return v===null?'not finite':String(v);}\n"
    "function colName(c){for(var i=0;i<D.regs.length;i++){var r=D.regs[i];"
    "if(c>=r[2]&&c<r[2]+r[3]){var j=c-r[2],sub=r[1]==='token'?' \\''+D.vocab[j]+'\\'':"
    "r[1]==='position'?(j===0?' sin':' cos'):r[4]?' = '+r[4][j]:'';return r[0]+'['+j+sub+']';}}"
    "return '';}\n"
    "function describe(svg,x,y){var s=svg.dataset,col=Math.floor((x-s.x0)/s.cw),"
    "row=Math.floor((y-s.y0)/s.ch);if(col<0||row<0||row>=+s.rows||col>=+s.cols)return null;\n"
    "if(s.kind==='resid'){var v=D.blocks[+s.block][row*D.d+col];return D.names[+s.block]+': "
    "position '+row+' '+tok(row)+', column '+col+(colName(col)?' '+colName(col):'')+' = "
    "'+fmt(v);}\n"
    "var a=D.att[s.layer+'/'+s.head];return 'layer '+s.layer+' head '+s.head+': query '+row+' '+"
    "tok(row)+' -> key '+col+' '+tok(col)+' = '+fmt(a[row*D.P+col]);}\n"
    "function where(svg,ev){var pt=svg.createSVGPoint();pt.x=ev.clientX;pt.y=ev.clientY;"
    "return pt.matrixTransform(svg.getScreenCTM().inverse());}\n"
    "var figs=document.querySelectorAll('svg.hm');\n"
    "figs.forEach(function(svg){\n"
    " svg.addEventListener('mousemove',function(ev){var p=where(svg,ev),t=describe(svg,p.x,p.y);"
    "if(!t){tip.style.display='none';return;}tip.textContent=t;tip.style.display='block';"
    "tip.style.left=(ev.clientX+14)+'px';tip.style.top=(ev.clientY+14)+'px';});\n"
    " svg.addEventListener('mouseleave',function(){tip.style.display='none';});\n"
    " svg.addEventListener('click',function(ev){var p=where(svg,ev),t=describe(svg,p.x,p.y);"
    "if(t){var d=document.createElement('div');d.textContent=t;pinned.insertBefore(d,"
    "pinned.firstChild);}});\n"
    "});\n"
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
    "' attention maps; hover checked ('+tip.textContent+')');})();\n";

/* The data the script reads: tokens, registers, every block, every head. */
static void write_json_data(const TfCapture *c, FILE *f) {
    const TfModel *m = c->m;
    char t[32];
    fprintf(f, "{\"P\":%d,\"d\":%d,\"tokens\":[", c->n_pos, m->d_model);
    for (int p = 0; p < c->n_pos; p++) {
        inspect_token_text(m, c->tokens[p], t, sizeof t);
        if (p) fputc(',', f);
        put_json_string(f, t);
    }
    fputs("],\"vocab\":[", f);
    for (int v = 0; v < m->n_vocab; v++) {
        inspect_token_text(m, v, t, sizeof t);
        if (v) fputc(',', f);
        put_json_string(f, t);
    }
    fputs("],\"regs\":[", f);
    for (int r = 0; r < m->n_regs; r++) {
        fprintf(f, "%s[", r ? "," : "");
        put_json_string(f, m->regs[r].name);
        fprintf(f, ",\"%s\",%d,%d", tf_reg_kind_names[m->regs[r].kind], m->regs[r].offset,
                m->regs[r].size);
        if (m->regs[r].values) { // categorical: each column's value, for the hover text
            fputs(",[", f);
            for (int j = 0; j < m->regs[r].size; j++) {
                if (j) fputc(',', f);
                put_json_string(f, m->regs[r].values[j]);
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
        put_json_string(f, title);
    }
    fputs("],\n\"blocks\":[", f);
    for (int b = 0; b < c->n_blocks; b++) {
        fputs(b ? ",\n[" : "[", f);
        const float *x = capture_row(c, b, 0);
        for (size_t i = 0; i < (size_t)c->n_pos * (size_t)m->d_model; i++) {
            if (i) fputc(',', f);
            put_json_float(f, x[i]);
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
                    put_json_float(f, capture_att(c, l, h, q, k));
                }
            fputc(']', f);
        }
    }
    fputs("}}", f);
}

/* The registers block `block` wrote, decoded: one table row per register,
 * flagged cells red with the reason on hover. Learned models: the logit
 * lens's top output. */
static void write_decoded(const TfCapture *c, int block, FILE *f) {
    const TfModel *m = c->m;
    char t[32];
    fputs("<div class=\"scroll\"><table class=\"dec\"><tr><th class=\"r\">position</th>", f);
    for (int p = 0; p < c->n_pos; p++) fprintf(f, "<th>%d</th>", p);
    fputs("</tr>\n<tr><th class=\"r\">token</th>", f);
    for (int p = 0; p < c->n_pos; p++) {
        inspect_token_text(m, c->tokens[p], t, sizeof t);
        fputs("<th>", f);
        put_text(f, t);
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
                put_text(f, t);
                fprintf(f, " %.3f%s", (double)pr[j], j + 1 < k ? ", " : "");
            }
            inspect_output_text(m, ids[0], t, sizeof t);
            fputs("\">", f);
            put_text(f, t);
            fprintf(f, " <span class=\"sub\">%.2f</span></td>", (double)pr[0]);
        }
        fputs("</tr>\n", f);
    }
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *reg = &m->regs[r];
        if (!inspect_layer_wrote(c, block - 1, reg)) continue;
        fputs("<tr><th class=\"r\">", f);
        put_text(f, reg->name);
        fputs("</th>", f);
        for (int p = 0; p < c->n_pos; p++) {
            TfDecoded d;
            inspect_decode(m, reg, capture_row(c, block, p), &d);
            const char *cls = d.status == TF_DECODE_FLAGGED ? " class=\"flag\""
                              : d.status == TF_DECODE_EMPTY ? " class=\"empty\""
                                                            : "";
            fprintf(f, "<td%s title=\"", cls);
            if (d.status == TF_DECODE_FLAGGED) {
                put_text(f, d.why);
                fputs("; ", f);
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
                put_text(f, t);
            } else if (reg->kind == TF_REG_CATEGORICAL) {
                inspect_value_text(reg, d.index, t, sizeof t);
                put_text(f, t);
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
}

/* Flagged cells among the registers block `block` wrote. */
static int count_flags(const TfCapture *c, int block) {
    int n = 0;
    for (int r = 0; r < c->m->n_regs; r++) {
        if (!inspect_layer_wrote(c, block - 1, &c->m->regs[r])) continue;
        for (int p = 0; p < c->n_pos; p++) {
            TfDecoded d;
            inspect_decode(c->m, &c->m->regs[r], capture_row(c, block, p), &d);
            n += d.status == TF_DECODE_FLAGGED;
        }
    }
    return n;
}

/* The names of the registers layer `block - 1` wrote, comma separated. */
static void write_wrote(const TfCapture *c, int block, FILE *f) {
    int n = 0;
    for (int r = 0; r < c->m->n_regs; r++) {
        if (!inspect_layer_wrote(c, block - 1, &c->m->regs[r])) continue;
        if (n++) fputs(", ", f);
        put_text(f, c->m->regs[r].name);
    }
    if (c->m->n_regs == 0) fputs("(all columns)", f);
}

int report_write_html(const TfCapture *c, const char *path, TfError *err) {
    const TfModel *m = c->m;
    FILE *f = open_out(path, err);
    if (!f) return -1;
    char t[32], title[256];

    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>tfrun report",
          f);
    if (m->source_name) {
        fputs(": ", f);
        put_text(f, m->source_name);
    }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head><body>\n<h1>Inside ", report_css);
    put_text(f, m->source_name ? m->source_name : "a weight file");
    fputs("</h1>\n<p>Sequence <code>", f);
    for (int p = 0; p < c->n_pos; p++) {
        char tt[8];
        infer_token_text(m, c->tokens[p], tt);
        put_text(f, tt);
    }
    inspect_output_text(m, c->next, t, sizeof t);
    fprintf(f, "</code> (generation step %d, %d positions) &#8594; %s <code>", c->step, c->n_pos,
            c->values ? "every position" : m->output_kind == TF_OUTPUT_CLASSIFY ? "class" : "next");
    if (c->values) { /* a model that prints a number at every position */
        for (int p = 0; p < c->n_pos; p++) {
            char v[TF_VALUE_TEXT_MAX];
            infer_value_text(c->values[p], v);
            fprintf(f, "%s%s", p ? " " : "", v);
        }
    } else {
        put_text(f, t);
    }
    fprintf(f,
            "</code>. Model: d_model %d, %d layers, %d registers, vocabulary of %d, %zu "
            "parameters.</p>\n",
            m->d_model, m->n_layers, m->n_regs, m->n_vocab, model_param_count(m));
    if (m->output_reg >= 0 && m->output_kind == TF_OUTPUT_NEXT_TOKEN && !model_numeric_output(m)) {
        // What the unembedding reads: the output register at the last position.
        const TfRegister *reg = &m->regs[m->output_reg];
        TfDecoded d;
        inspect_decode(m, reg, capture_row(c, c->n_blocks - 1, c->n_pos - 1), &d);
        fprintf(f, "<p%s>The unembedding reads <code>",
                d.status == TF_DECODE_CLEAN ? "" : " class=\"flagged\"");
        put_text(f, reg->name);
        fprintf(f, "</code> at position %d: ", c->n_pos - 1);
        if (d.status == TF_DECODE_CLEAN) {
            inspect_token_text(m, d.index, t, sizeof t);
            fputs("<code>", f);
            put_text(f, t);
            fputs("</code>.</p>\n", f);
        } else {
            fputs(d.status == TF_DECODE_EMPTY
                      ? "&#9888; it is empty, so the next token is the argmax "
                        "of near-zero logits"
                      : "&#9888; ",
                  f);
            if (d.status == TF_DECODE_FLAGGED) put_text(f, d.why);
            fputs(".</p>\n", f);
        }
    }
    fputs("<p>Hover over any picture for the exact value under the mouse; click to pin it at the "
          "bottom. Red cells in the decoded tables do not decode cleanly (hover for why).</p>\n",
          f);

    // Layer list.
    fputs(
        "<h2 id=\"layers\">Layers</h2>\n<table class=\"layers\"><tr><th>#</th><th>name</th>"
        "<th>kind</th><th>op</th><th>line</th><th>source</th><th>changed</th><th>flags</th></tr>\n",
        f);
    int *flags = calloc((size_t)c->n_blocks, sizeof(int));
    if (!flags) {
        fclose(f);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int b = 0; b < c->n_blocks; b++) flags[b] = count_flags(c, b);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        fprintf(f, "<tr><td><a href=\"#block-%d\">%d</a></td><td>", l + 1, l);
        put_text(f, ly->name);
        fprintf(f, "</td><td>%s", tf_layer_kind_names[ly->kind]);
        if (ly->kind == TF_LAYER_ATTENTION)
            fprintf(f, ", %d head%s", ly->n_heads, ly->n_heads == 1 ? "" : "s");
        fputs("</td><td>", f);
        if (ly->op) put_text(f, ly->op);
        fputs("</td><td>", f);
        if (ly->line > 0) fprintf(f, "%d", ly->line);
        fputs("</td><td class=\"m\">", f);
        size_t n = 0;
        const char *src = source_line(m, ly->line, &n);
        if (src) put_escaped(f, src, n);
        fputs("</td><td>", f);
        write_wrote(c, l + 1, f);
        fprintf(f, "</td><td%s>%s</td></tr>\n", flags[l + 1] ? " class=\"flagged\"" : "",
                flags[l + 1] ? "&#9888;" : "");
    }
    fputs("</table>\n", f);

    // One section per block: decoded registers, residual heatmap, attention.
    fputs("<h2 id=\"trace\">Layer by layer</h2>\n", f);
    for (int b = 0; b < c->n_blocks; b++) {
        block_title(c, b, title, sizeof title);
        fprintf(f, "<details class=\"layer\" id=\"block-%d\" open><summary>", b);
        put_text(f, title);
        if (b > 0) {
            fputs(" &#8212; changed ", f);
            write_wrote(c, b, f);
        }
        if (flags[b])
            fprintf(f, " <span class=\"flagged\">&#9888; %d cell%s flagged</span>", flags[b],
                    flags[b] == 1 ? "" : "s");
        fputs("</summary>\n", f);
        if (b > 0 && m->layers[b - 1].line > 0) {
            size_t n = 0;
            const char *src = source_line(m, m->layers[b - 1].line, &n);
            if (src) {
                fprintf(f, "<pre>%4d | ", m->layers[b - 1].line);
                put_escaped(f, src, n);
                fputs("</pre>\n", f);
            }
        }
        write_decoded(c, b, f);
        fputs("<div class=\"figs\">\n", f);
        report_svg_residual(c, b, 0, f);
        if (b > 0 && c->att[b - 1])
            for (int h = 0; h < m->layers[b - 1].n_heads; h++)
                report_svg_attention(c, b - 1, h, 0, f);
        fputs("</div></details>\n", f);
    }
    free(flags);

    if (m->source) {
        fputs("<h2 id=\"source\">Source</h2>\n<pre>", f);
        put_text(f, m->source);
        fputs("</pre>\n", f);
    }
    fputs("<div id=\"status\"></div><div id=\"tip\"></div><div id=\"pinned\"></div>\n", f);
    fputs("<script type=\"application/json\" id=\"tf-data\">", f);
    write_json_data(c, f);
    fprintf(f, "</script>\n<script>\n%s</script>\n<script>\n%s</script>\n</body></html>\n",
            report_js_guard, report_js);
    return close_out(f, path, err);
}
