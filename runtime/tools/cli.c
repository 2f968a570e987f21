/* cli.c: see cli.h. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"

#ifndef TF_VERSION
#define TF_VERSION "unknown"
#endif

#define CLI_SNIFF_BYTES 4096
#define CLI_PROGRESS_DELAY 1.0     /* seconds before a terminal sees a line */
#define CLI_PROGRESS_INTERVAL 0.25 /* seconds between updates */

void cli_version(const char *prog, const char *library, const char *core, int fallback,
                 const char *best) {
    printf("%s (tfc) %s\n", prog, TF_VERSION);
    if (!library) {
        printf("BLAS: none (%s multiplies no matrices)\n", prog);
        return;
    }
    printf("BLAS: %s\n", library);
    if (!core) return;
    const char *env = getenv("OPENBLAS_CORETYPE"), *was = getenv("TF_BLAS_FALLBACK");
    if (env && *env && was && *was)
        printf("kernels: %s (OPENBLAS_CORETYPE=%s, set by %s: OpenBLAS alone chose %s, its "
               "generic fallback, for this CPU)\n", core, env, prog, was);
    else if (env && *env)
        printf("kernels: %s (OPENBLAS_CORETYPE=%s)\n", core, env);
    else
        printf("kernels: %s (chosen by OpenBLAS for this CPU)\n", core);
    if (fallback && best)
        fprintf(stderr, "%s: warning: %s is OpenBLAS's generic fallback, but this CPU can run %s's "
                        "kernels: matrix products run slower, and trained weights differ in their "
                        "last bits from those trained on %s (OPENBLAS_CORETYPE=%s chooses it; "
                        "with the variable unset, %s chooses it itself)\n",
                prog, core, best, best, best, prog);
}

void cli_blas_prefer_core(char **argv, const char *fallback, const char *best, int one_thread) {
    const char *env = getenv("OPENBLAS_CORETYPE"), *threads = getenv("OPENBLAS_NUM_THREADS");
    int core = fallback && best && !(env && *env);
    int thread = one_thread && !(threads && *threads);
    if (!core && !thread) return;
    if (core && (setenv("OPENBLAS_CORETYPE", best, 1) != 0 ||
                 setenv("TF_BLAS_FALLBACK", fallback, 1) != 0))
        core = 0;
    if (thread && setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) thread = 0;
    if (core || thread) execv("/proc/self/exe", argv);
    // No /proc, or the binary is gone: run on as OpenBLAS started.
    if (core) {
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv("TF_BLAS_FALLBACK");
    }
    if (thread) unsetenv("OPENBLAS_NUM_THREADS");
}

int cli_argv_has(char *const *argv, const char *opt) {
    size_t n = strlen(opt);
    for (int i = 1; argv[i] && strcmp(argv[i], "--") != 0; i++)
        if (strncmp(argv[i], opt, n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '='))
            return 1;
    return 0;
}

/* ---- options ------------------------------------------------------------- */

void cli_option_error(const char *prog, int c, char *const *argv, const struct option *longopts) {
    const char *a = optind > 0 ? argv[optind - 1] : "";
    // getopt_long leaves optopt 0 for a long option it does not know; a
    // short option in the middle of a cluster is not argv[optind - 1].
    int is_long = strncmp(a, "--", 2) == 0 && (c == ':' || optopt == 0 || strchr(a, '='));
    if (!is_long) {
        if (c == ':')
            fprintf(stderr, "%s: -%c needs a value\n", prog, optopt);
        else
            fprintf(stderr, "%s: unknown option '-%c' (see '%s --help')\n", prog, optopt, prog);
    } else {
        const char *name = a + 2, *eq = strchr(name, '=');
        int n = eq ? (int)(eq - name) : (int)strlen(name), exact = 0, prefix = 0;
        for (const struct option *o = longopts; o->name; o++) {
            if (strncmp(o->name, name, (size_t)n) != 0) continue;
            prefix++;
            exact |= o->name[n] == '\0';
        }
        if (c == ':')
            fprintf(stderr, "%s: --%.*s needs a value\n", prog, n, name);
        else if (exact || (prefix == 1 && eq))
            fprintf(stderr, "%s: --%.*s takes no value\n", prog, n, name);
        else if (prefix > 1)
            fprintf(stderr, "%s: ambiguous option '--%.*s' (see '%s --help')\n", prog, n, name, prog);
        else
            fprintf(stderr, "%s: unknown option '--%.*s' (see '%s --help')\n", prog, n, name, prog);
    }
}

int cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_parse_float(const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = (float)v;
    return 0;
}

/* ---- kinds of input files ------------------------------------------------ */

CliFileKind cli_file_kind(const void *head, size_t n) {
    const unsigned char *b = head;
    if (n == 0) return CLI_FILE_OTHER;
    // tfw.h's header length is below 2^32 (far below): bytes 4..7 are 0.
    if (n >= 9 && b[8] == '{' && !b[4] && !b[5] && !b[6] && !b[7]) return CLI_FILE_WEIGHTS;
    // Text has no NUL byte and few control characters (a stray one in a
    // program is the compiler's to point at).
    size_t controls = 0;
    for (size_t i = 0; i < n; i++) {
        if (!b[i]) return CLI_FILE_OTHER;
        controls += (b[i] < 0x20 && !strchr("\t\n\r\f\v", b[i])) || b[i] == 0x7f;
    }
    return controls * 32 > n ? CLI_FILE_OTHER : CLI_FILE_TEXT;
}

int cli_expect_weights(const char *prog, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char head[CLI_SNIFF_BYTES + 1];
    size_t n = fread(head, 1, CLI_SNIFF_BYTES, f);
    fclose(f);
    if (cli_file_kind(head, n) != CLI_FILE_TEXT) return 0;
    head[n] = '\0';
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bn = strlen(base);
    int program = strstr(head, "vocab") || (bn > 4 && strcmp(base + bn - 4, ".tfp") == 0);
    if (program)
        fprintf(stderr, "%s: %s is a program source, not a weight file (compile it with tfc: "
                        "tfc %s -o OUT.tfw)\n", prog, path, path);
    else
        fprintf(stderr, "%s: %s is a text file, not a weight file\n", prog, path);
    return -1;
}

int cli_expect_program(const char *prog, const char *path, const char *buf, size_t len) {
    switch (cli_file_kind(buf, len < CLI_SNIFF_BYTES ? len : CLI_SNIFF_BYTES)) {
    case CLI_FILE_WEIGHTS:
        fprintf(stderr, "%s: %s is a weight file, not a program (tfinfo %s shows what it holds)\n",
                prog, path, path);
        return -1;
    case CLI_FILE_OTHER:
        if (len == 0) return 0; /* an empty program: the compiler says what is missing */
        fprintf(stderr, "%s: %s is a binary file, not a program source\n", prog, path);
        return -1;
    default:
        return 0;
    }
}

int cli_refuse_same_file(const char *prog, const char *out, const char *in) {
    struct stat so, si;
    if (!in || stat(out, &so) != 0 || stat(in, &si) != 0) return 0;
    if (so.st_dev != si.st_dev || so.st_ino != si.st_ino) return 0;
    fprintf(stderr, "%s: %s is %s itself; refusing to overwrite it\n", prog, out, in);
    return -1;
}

/* ---- signals and standard output ----------------------------------------- */

void cli_die_of_signal(int sig) {
    outfile_remove_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_catch_signal(int sig, void (*handler)(int)) {
    struct sigaction sa, old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void cli_remove_output_on_signals(void) {
    cli_catch_signal(SIGINT, cli_die_of_signal);
    cli_catch_signal(SIGTERM, cli_die_of_signal);
    cli_catch_signal(SIGHUP, cli_die_of_signal);
    cli_catch_signal(SIGXFSZ, cli_die_of_signal); /* past the file size limit (ulimit -f) */
}

int cli_flush_stdout(const char *prog) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: error writing standard output: %s\n", prog,
            errno ? strerror(errno) : "write failed");
    return -1;
}

/* ---- time and the progress line ----------------------------------------- */

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_duration(double seconds, char *buf, size_t size) {
    if (!(seconds >= 0)) seconds = 0;
    if (seconds < 60) {
        snprintf(buf, size, "%.1f s", seconds);
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s < 3600)
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

void cli_progress_init(CliProgress *p, int force) {
    memset(p, 0, sizeof *p);
    p->forced = force;
    p->on = force || isatty(STDERR_FILENO);
    p->start = p->last = cli_now();
}

/* Replaces the line on screen with text (no newline). */
static void progress_put(CliProgress *p, const char *text) {
    int n = (int)strlen(text);
    fprintf(stderr, "\r%s%*s", text, p->width > n ? p->width - n : 0, "");
    p->width = n;
    fflush(stderr);
}

void cli_progress_update(CliProgress *p, double fraction, const char *fmt, ...) {
    if (!p->on) return;
    double t = cli_now();
    if (t - p->last < CLI_PROGRESS_INTERVAL ||
        (!p->forced && t - p->start < CLI_PROGRESS_DELAY))
        return;
    p->last = t;
    char text[256], el[32], eta[32];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    cli_duration(t - p->start, el, sizeof el);
    size_t used = strlen(text);
    if (fraction > 0 && fraction <= 1) {
        cli_duration((t - p->start) * (1 - fraction) / fraction, eta, sizeof eta);
        snprintf(text + used, sizeof text - used, ", %s elapsed, ETA %s", el, eta);
    } else {
        snprintf(text + used, sizeof text - used, ", %s elapsed", el);
    }
    progress_put(p, text);
}

void cli_progress_clear(CliProgress *p) {
    if (!p->width) return;
    fprintf(stderr, "\r%*s\r", p->width, "");
    fflush(stderr);
    p->width = 0;
}

void cli_progress_end(CliProgress *p, const char *fmt, ...) {
    if (!p->on || (!p->forced && !p->width)) return;
    char text[256], el[32];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    cli_duration(cli_now() - p->start, el, sizeof el);
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used, ", %s", el);
    progress_put(p, text);
    fputc('\n', stderr);
    p->width = 0;
}

int cli_error_status(const TfError *err) {
    // runtime/model/outfile.c says "PATH: cannot write: REASON" when the
    // bytes could not be written (a full disk, a file size limit), and
    // "...; refusing to replace it" of a path it will not write to
    if (tf_error_is_memory(err) || strstr(err->msg, ": cannot write: ")) return CLI_EXIT_SYSTEM;
    return strstr(err->msg, "; refusing to replace it") ? CLI_EXIT_USAGE : CLI_EXIT_INPUT;
}
