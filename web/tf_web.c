/* tf_web.c: the WebAssembly entry of the playground (web/, tools/playground.sh).
 *
 * The page runs the tools themselves, not a copy of them: tfc.c, tfrun.c and
 * tfinfo.c are compiled with their main renamed (-Dmain=tfc_main, ...) and
 * web_tool calls one of them with an argument vector, on files in
 * Emscripten's in-memory file system, its standard output and error going
 * to two files the page reads back. So the page's diagnostics, results,
 * traces, reports and .tfw bytes are tfc's and tfrun's by construction.
 *
 * web_check is the one entry of its own: --check over a share of the cases
 * (runtime/engine/runner.h), with a progress callback to the page and the
 * counts returned as numbers, so that several workers can each check a
 * share and the page adds them up.
 *
 * Memory: strings passed in belong to the caller (the JavaScript glue);
 * nothing returned needs freeing. */
#define _POSIX_C_SOURCE 200809L

#include <emscripten.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"
#include "tfw.h"

int tfc_main(int argc, char **argv);
int tfrun_main(int argc, char **argv);
int tfinfo_main(int argc, char **argv);

#define WEB_MAX_ARGS 64
#define WEB_STDOUT "/tmp/stdout"
#define WEB_STDERR "/tmp/stderr"

/* Points stdout and stderr at fresh files; 0, or -1 when they cannot be opened. */
static int web_redirect(void) {
    // Emscripten 3.1.6 starts with umask 0777 (files created unreadable):
    // the usual 022, as a shell would give tfc.
    umask(022);
    fflush(stdout);
    fflush(stderr);
    if (!freopen(WEB_STDOUT, "w", stdout) || !freopen(WEB_STDERR, "w", stderr)) return -1;
    return 0;
}

/* Runs tool ("tfc", "tfrun" or "tfinfo") on the arguments in args, separated
 * by the unit separator \x1f (a prompt may hold any other character).
 * Returns the tool's exit status; what it printed is in /tmp/stdout and
 * /tmp/stderr. -1: no such tool, too many arguments, or no output files. */
EMSCRIPTEN_KEEPALIVE int web_tool(const char *tool, const char *args) {
    int (*entry)(int, char **) = strcmp(tool, "tfc") == 0      ? tfc_main
                                 : strcmp(tool, "tfrun") == 0  ? tfrun_main
                                 : strcmp(tool, "tfinfo") == 0 ? tfinfo_main
                                                                : NULL;
    if (!entry || web_redirect() < 0) return -1;
    char *copy = strdup(args);
    if (!copy) return -1;
    char *argv[WEB_MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = (char *)tool;
    if (*copy) {
        for (char *p = copy;; p++) {
            if (argc == WEB_MAX_ARGS) {
                free(copy);
                return -1;
            }
            argv[argc++] = p;
            p = strchr(p, '\x1f');
            if (!p) break;
            *p = '\0';
        }
    }
    argv[argc] = NULL;
    optind = 0; /* musl's getopt starts afresh: each call is a new process */
    int status = entry(argc, argv);
    fflush(stdout);
    fflush(stderr);
    free(copy);
    return status;
}

/* web_check's counts, read by the page after the call (web_check_stat). */
static TfRunnerStats web_stats;

static void web_progress(void *ctx, const TfRunnerStats *st) {
    (void)ctx;
    if (!st) return;
    EM_ASM({ if (Module.onCheckProgress) Module.onCheckProgress($0, $1, $2, $3); },
           (double)st->run, (double)st->failed, (double)st->bytes, (double)st->bad);
}

/* tfrun WEIGHTS --check CASES, one engine, for a share of the cases whose
 * first line is line first_line of the whole input (so failures name their
 * line in it). n_new < 0: the program's own `generate`. The failures, as
 * tfrun prints them, go to /tmp/stdout; bad lines and errors to
 * /tmp/stderr. Returns 0 when the run went through (failed cases
 * included), -1 when it could not start or stopped (the reason in
 * /tmp/stderr). */
EMSCRIPTEN_KEEPALIVE int web_check(const char *weights, const char *cases, long first_line,
                                   int n_new, int batch_size, int show_failures) {
    memset(&web_stats, 0, sizeof web_stats);
    if (web_redirect() < 0) return -1;
    TfError err = {""};
    TfModel *m = tfw_read(weights, &err);
    FILE *in = m ? fopen(cases, "r") : NULL;
    int rc = -1;
    if (!m) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
    } else if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        fprintf(stderr, "tfrun: the page checks compiled programs; check a classifier with "
                        "tfrun --check\n");
    } else if (!in) {
        fprintf(stderr, "tfrun: cannot open '%s'\n", cases);
    } else if (runner_limit_new_tokens(m, n_new < 0 ? m->generate : n_new, &n_new, &err) < 0) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
    } else {
        TfRunnerOptions o = {.n_new = n_new, .batch_size = batch_size, .n_threads = 1,
                             .use_cache = 1, .check = 1, .show_failures = show_failures,
                             .first_line = first_line, .progress = web_progress};
        rc = runner_run(m, in, cases, stdout, stderr, &o, &web_stats, &err);
        if (rc < 0) fprintf(stderr, "tfrun: %s\n", err.msg);
    }
    if (in) fclose(in);
    model_free(m);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

/* One of web_check's counts: 0 cases run, 1 passed, 2 failed, 3 bad lines,
 * 4 seconds, 5 floating-point operations. */
EMSCRIPTEN_KEEPALIVE double web_check_stat(int which) {
    switch (which) {
    case 0: return (double)web_stats.run;
    case 1: return (double)web_stats.passed;
    case 2: return (double)web_stats.failed;
    case 3: return (double)web_stats.bad;
    case 4: return web_stats.seconds;
    case 5: return web_stats.flops;
    default: return 0.0;
    }
}
