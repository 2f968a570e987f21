/* diag.c: file:line:col diagnostics with the source line and a caret. */
#include "diag.h"

#include <stdarg.h>
#include <string.h>

void diag_init(TfDiag *d, const char *filename, const char *source, size_t len, FILE *out) {
    d->filename = filename;
    d->source = source;
    d->source_len = len;
    d->out = out;
    d->n_errors = 0;
    d->n_warnings = 0;
}

/* The text of line `line` (1-based) without its newline; NULL past the end. */
static const char *find_line(const TfDiag *d, int line, size_t *len) {
    if (!d->source || line < 1) return NULL;
    size_t pos = 0;
    for (int l = 1; l < line; l++) {
        const char *nl = memchr(d->source + pos, '\n', d->source_len - pos);
        if (!nl) return NULL;
        pos = (size_t)(nl - d->source) + 1;
    }
    if (pos > d->source_len) return NULL;
    const char *nl = memchr(d->source + pos, '\n', d->source_len - pos);
    *len = nl ? (size_t)(nl - d->source) - pos : d->source_len - pos;
    if (*len > 0 && d->source[pos + *len - 1] == '\r') (*len)--;
    return d->source + pos;
}

/* "   12 | text" and "      |    ^~~~" under the span of loc. A line longer
 * than TF_DIAG_MAX_TEXT shows a window around the caret, cut ends marked
 * "...", and the span is cut to the window. */
static void show_source(const TfDiag *d, TfLoc loc) {
    size_t len = 0;
    const char *text = find_line(d, loc.line, &len);
    if (!text) return;
    int col = loc.col < 1 ? 1 : loc.col;
    int end = loc.end_line == loc.line && loc.end_col >= col ? loc.end_col : col;
    if ((size_t)end > len && (size_t)col <= len) end = (int)len;
    size_t from = 0, to = len; /* the bytes shown: [from, to) */
    if (len > TF_DIAG_MAX_TEXT) {
        from = (size_t)col - 1 > TF_DIAG_MAX_TEXT / 4 ? (size_t)col - 1 - TF_DIAG_MAX_TEXT / 4 : 0;
        if (from > len) from = len;
        to = from + TF_DIAG_MAX_TEXT < len ? from + TF_DIAG_MAX_TEXT : len;
    }
    const char *pre = from > 0 ? "..." : "", *post = to < len ? "..." : "";
    fprintf(d->out, "%5d | %s%.*s%s\n", loc.line, pre, (int)(to - from), text + from, post);
    fprintf(d->out, "      | %s", from > 0 ? "   " : "");
    for (size_t c = from + 1; c < (size_t)col; c++)
        fputc(c - 1 < len && text[c - 1] == '\t' ? '\t' : ' ', d->out);
    if ((size_t)end > to && to > from) end = (int)to;
    fputc('^', d->out);
    for (int c = col + 1; c <= end; c++) fputc('~', d->out);
    fputc('\n', d->out);
}

/* vfprintf, cut after TF_DIAG_MAX_TEXT bytes with "...". */
static void print_cut(FILE *out, const char *fmt, va_list ap) {
    char buf[TF_DIAG_MAX_TEXT + 1];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    fputs(buf, out);
    if (n > TF_DIAG_MAX_TEXT) fputs("...", out);
}

static void report(TfDiag *d, const char *kind, TfLoc loc, int with_source, const char *fmt,
                   va_list ap) {
    if (!d->out) return; // counted only (diag.h)
    if (loc.line > 0)
        fprintf(d->out, "%s:%d:%d: %s: ", d->filename, loc.line, loc.col, kind);
    else
        fprintf(d->out, "%s: %s: ", d->filename, kind);
    print_cut(d->out, fmt, ap);
    fputc('\n', d->out);
    if (with_source && loc.line > 0) show_source(d, loc);
}

/* Past the limit, errors are counted but no longer shown (nor their notes). */
static int quiet(const TfDiag *d) { return d->n_errors > TF_DIAG_MAX_ERRORS; }

int diag_quiet(const TfDiag *d) { return d->n_errors >= TF_DIAG_MAX_ERRORS; }

void diag_finish(TfDiag *d) {
    if (!quiet(d) || !d->out) return;
    int more = d->n_errors - TF_DIAG_MAX_ERRORS;
    fprintf(d->out, "%s: %d more error%s not shown\n", d->filename, more, more == 1 ? "" : "s");
}

void diag_error(TfDiag *d, TfLoc loc, const char *fmt, ...) {
    d->n_errors++;
    if (quiet(d)) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, "error", loc, 1, fmt, ap);
    va_end(ap);
}

void diag_warning(TfDiag *d, TfLoc loc, const char *fmt, ...) {
    d->n_warnings++;
    if (quiet(d)) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, "warning", loc, 1, fmt, ap);
    va_end(ap);
}

void diag_note(TfDiag *d, TfLoc loc, const char *fmt, ...) {
    if (quiet(d)) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, "note", loc, 1, fmt, ap);
    va_end(ap);
}

void diag_hint(TfDiag *d, const char *fmt, ...) {
    if (quiet(d) || !d->out) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("hint: ", d->out);
    print_cut(d->out, fmt, ap);
    fputc('\n', d->out);
    va_end(ap);
}

void diag_file_error(TfDiag *d, const char *fmt, ...) {
    d->n_errors++;
    if (quiet(d)) return;
    va_list ap;
    va_start(ap, fmt);
    TfLoc none = {0, 0, 0, 0};
    report(d, "error", none, 0, fmt, ap);
    va_end(ap);
}
