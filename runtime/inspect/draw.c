/* draw.c: the writers the report and the comparison share. See draw.h. */
#define _POSIX_C_SOURCE 200809L
#include "draw.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* Text for HTML and SVG: & < > " ' escaped. */
void draw_escaped(FILE *f, const char *s, size_t n) {
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

void draw_text(FILE *f, const char *s) { draw_escaped(f, s, strlen(s)); }

/* s cut to `max` characters, the last replaced by an ellipsis when cut. */
void draw_short(FILE *f, const char *s, size_t max) {
    if (strlen(s) <= max) {
        draw_text(f, s);
        return;
    }
    draw_escaped(f, s, max - 1);
    fputs("&#8230;", f);
}

/* A JSON string; '<' as \u003c so that the data cannot close its <script>. */
void draw_json_string(FILE *f, const char *s) {
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
void draw_json_float(FILE *f, float v) {
    if (!isfinite(v))
        fputs("null", f);
    else if (v == 0)
        fputc('0', f);
    else
        fprintf(f, "%.9g", (double)v);
}


/* --- colours --------------------------------------------------------------- */

/* ColorBrewer's RdBu (signed values) and Purples (attention weights), from
 * white to the darkest shade. */
static const unsigned char ramp_red[5][3] = {
    {255, 255, 255}, {253, 219, 199}, {244, 165, 130}, {214, 96, 77}, {178, 24, 43}};
static const unsigned char ramp_blue[5][3] = {
    {255, 255, 255}, {209, 229, 240}, {146, 197, 222}, {67, 147, 195}, {33, 102, 172}};
static const unsigned char ramp_purple[5][3] = {
    {255, 255, 255}, {218, 218, 235}, {158, 154, 200}, {106, 81, 163}, {63, 0, 125}};

/* The colour at t in [0, 1] along a 5-stop ramp, as "#rrggbb"; 0 for
 * white (the cell is not drawn), 1 otherwise. */
static int ramp(const unsigned char (*stops)[3], float t, char *hex) {
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    float x = t * 4;
    int i = x >= 4 ? 3 : (int)x;
    float fr = x - (float)i;
    int rgb[3];
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lroundf((float)stops[i][k] + fr * (float)(stops[i + 1][k] - stops[i][k]));
    if (rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255) return 0;
    sprintf(hex, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    return 1;
}

/* Signed colour for v / scale: blue (negative), white (0), red (positive),
 * saturating at +-1; NaN and infinities green. 0 when white. */
int draw_diverging(float v, float scale, char *hex) {
    if (!isfinite(v)) {
        strcpy(hex, "#00ff00");
        return 1;
    }
    float t = v / scale;
    return ramp(t >= 0 ? ramp_red : ramp_blue, fabsf(t), hex);
}

/* White (w = lo) to dark purple (w = hi) for attention weights; 0 when white. */
int draw_sequential(float w, float lo, float hi, char *hex) {
    if (!isfinite(w)) {
        strcpy(hex, "#00ff00");
        return 1;
    }
    return ramp(ramp_purple, (w - lo) / (hi - lo), hex);
}

#define BAR_STEPS 20

/* A colour bar at (x, y), DRAW_BAR_W by 8 pixels: signed (-scale to +scale, with
 * 0 in the middle) or sequential (lo to hi); its ends labelled under it. */
void draw_colour_bar(FILE *f, int x, int y, int signed_bar, float lo, float hi) {
    char hex[8];
    fprintf(f, "<g class=\"colourbar\" shape-rendering=\"crispEdges\">\n");
    for (int i = 0; i < BAR_STEPS; i++) {
        float t = ((float)i + 0.5f) / BAR_STEPS, v = lo + (hi - lo) * t;
        int drawn = signed_bar ? draw_diverging(v, hi, hex) : draw_sequential(v, lo, hi, hex);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"8\" fill=\"%s\"/>\n",
                x + i * DRAW_BAR_W / BAR_STEPS, y, DRAW_BAR_W / BAR_STEPS, drawn ? hex : "#ffffff");
    }
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"8\" fill=\"none\" stroke=\"#6b7280\" "
            "stroke-width=\"0.5\"/>\n",
            x, y, DRAW_BAR_W);
    const char *fmt = signed_bar ? "%+.3g" : "%.3g"; /* "-1 0 +1"; "0 ... 1" */
    char end[32];
    snprintf(end, sizeof end, fmt, (double)lo);
    fprintf(f, "<text class=\"tick\" x=\"%d\" y=\"%d\" font-size=\"9\">%s</text>\n", x, y + 18,
            end);
    if (signed_bar)
        fprintf(f,
                "<text class=\"tick\" x=\"%d\" y=\"%d\" font-size=\"9\" "
                "text-anchor=\"middle\">0</text>\n",
                x + DRAW_BAR_W / 2, y + 18);
    snprintf(end, sizeof end, fmt, (double)hi);
    fprintf(
        f, "<text class=\"tick\" x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"end\">%s</text>\n",
        x + DRAW_BAR_W, y + 18, end);
    fputs("</g>\n", f);
}

void draw_svg_open(FILE *f, int standalone, int width, int height) {
    if (standalone) fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans Mono, monospace\" font-size=\"10\"",
            width, height, width, height);
}


/* Pixels a title of n characters needs (12 px bold monospace: 7.22 px a
 * character), with the margins. */
int draw_title_width(size_t n) { return (int)(n * 73 / 10) + 12; }

/* --- the pages' style and first script ------------------------------------------ */

const char *const draw_css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#111827}\n"
    ".page{display:grid;grid-template-columns:14em minmax(0,1fr);gap:1.5em;max-width:1600px;"
    "padding:0 1.5em}\n"
    "nav#toc{position:sticky;top:0;align-self:start;max-height:100vh;overflow:auto;"
    "font-size:13px;padding:1em 0.5em 1em 0;border-right:1px solid #e5e7eb;box-sizing:border-box}\n"
    "nav#toc ol{list-style:none;padding-left:0.9em;margin:0.15em 0}nav#toc>ol{padding-left:0}\n"
    "nav#toc a{color:#1d4ed8;text-decoration:none;white-space:nowrap}nav#toc a:hover{"
    "text-decoration:underline}\n"
    "nav#toc button{font-size:12px;margin:0.5em 0.3em 0 0}\n"
    "main{min-width:0;padding-bottom:5em}\n"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\n"
    "code,pre,td.m,.dec td,td.src{font-family:'DejaVu Sans Mono',monospace}\n"
    "table{border-collapse:collapse}td,th{padding:1px 6px;text-align:left}\n"
    "table.layers tr:nth-child(even){background:#f3f4f6}\n"
    ".dec td,.dec th{text-align:right;border:1px solid #e5e7eb;min-width:2.2em}\n"
    ".dec th.r{text-align:left}.dec td.flag{background:#fecaca;font-weight:bold}\n"
    ".dec td.idle{background:#f3f4f6;color:#6b7280}.dec td.empty{color:#9ca3af}.dec td.sub{color:#6b7280;font-size:0.85em}\n"
    ".mv{display:grid;gap:8px;margin:0.5em 0}\n"
    ".mv-layer{border:1px solid #e5e7eb;border-radius:3px;padding:2px 4px 4px;min-width:0}\n"
    ".mv-layer.flagged{border-color:#fca5a5}\n"
    ".mv-label{display:block;font-size:11px;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis;color:#111827;text-decoration:none}\n"
    ".mv-heads{display:flex;gap:4px}.mv-heads svg{display:block;border:1px solid #d1d5db}\n"
    "a.mv-head{display:block;width:50px;color:#4b5563;text-decoration:none}\n"
    ".mv-cap{display:block;font-size:9px;line-height:1.2;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis}\n"
    ".mv-kind{font-size:10px;color:#6b7280}\n"
    "table.prog td{padding:0 6px;vertical-align:top}table.prog td.ln{color:#9ca3af;"
    "text-align:right}\n"
    "table.prog td.src{white-space:pre}table.prog tr.op{background:#f9fafb}\n"
    "table.prog td.to a{margin-right:0.4em;text-decoration:none}table.prog a.hd{color:#7c3aed;"
    "font-size:0.85em}table.prog a.un{color:#b45309;font-size:0.85em}\n"
    "table.prog tr:target,details.layer:target>summary{background:#fef3c7}\n"
    "details.layer{border-top:1px solid #d1d5db;padding:0.3em 0}\n"
    "details.layer summary{cursor:pointer;font-weight:600}\n"
    ".figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;margin:0.5em 0}\n"
    ".figs svg{border:1px solid #e5e7eb;display:block}.scroll{overflow-x:auto}\n"
    ".flagged,a.flagged{color:#b91c1c}.note{color:#b91c1c;font-family:monospace}\n"
    "#tip{position:fixed;pointer-events:none;background:#111827;color:#fff;padding:3px 6px;"
    "border-radius:3px;font:12px monospace;display:none;z-index:9}\n"
    "#pinned{position:fixed;bottom:0;left:0;right:0;background:#fffbeb;border-top:1px solid "
    "#f59e0b;font:12px monospace;padding:4px 1.5em;max-height:6em;overflow:auto}\n"
    "#pinned:empty{display:none}#status{color:#6b7280;font-size:12px}\n";

/* The first script, on its own so that it catches even a syntax error in
 * the second: any error marks the page with #report-error. */
const char *const draw_js_guard =
    "function mark(id,text){var p=document.createElement('p');p.id=id;p.textContent=text;"
    "document.getElementById('status').appendChild(p);}\n"
    "window.addEventListener('error',function(e){mark('report-error','script error: '+e.message+"
    "' (line '+e.lineno+')');});\n";

const char *const draw_js_common =
    "'use strict';\n"
    "var D=JSON.parse(document.getElementById('tf-data').textContent);\n"
    "var tip=document.getElementById('tip'),pinned=document.getElementById('pinned');\n"
    "function tok(p){return '\\''+D.tokens[p]+'\\'';}\n"
    "function fmt(v){return v===null?'not finite':String(v);}\n"
    "function where(svg,ev){var pt=svg.createSVGPoint();pt.x=ev.clientX;pt.y=ev.clientY;"
    "return pt.matrixTransform(svg.getScreenCTM().inverse());}\n"
    "function draw_hover(svgs,describe){svgs.forEach(function(svg){\n"
    " svg.addEventListener('mousemove',function(ev){var p=where(svg,ev),t=describe(svg,p.x,p.y);"
    "if(!t){tip.style.display='none';return;}tip.textContent=t;tip.style.display='block';"
    "tip.style.left=(ev.clientX+14)+'px';tip.style.top=(ev.clientY+14)+'px';});\n"
    " svg.addEventListener('mouseleave',function(){tip.style.display='none';});\n"
    " svg.addEventListener('click',function(ev){var p=where(svg,ev),t=describe(svg,p.x,p.y);"
    "if(t){var d=document.createElement('div');d.textContent=t;pinned.insertBefore(d,"
    "pinned.firstChild);}});\n"
    "});}\n";
