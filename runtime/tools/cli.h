/* cli.h: what the four tools (tfc, tfrun, tfinfo, tftrain) share on the
 * command line: option errors and --version in one wording, numbers in
 * arguments, naming the wrong kind of input file, removing a pending
 * output file when a signal ends the tool, a progress line on stderr, and
 * checking that standard output was written.
 *
 * Only the tools' main files use it. Unlike library code it prints (to
 * stderr and, for --version, stdout), but it never exits. It holds no
 * memory; a CliProgress is a plain struct the caller owns.
 */
#ifndef TF_CLI_H
#define TF_CLI_H

#include <getopt.h>
#include <stddef.h>

#include "error.h"

/* Exit status, one per kind of failure, the same in every tool (each one's
 * --help and the README's "Exit codes" say it; tests/exit_codes.sh checks it):
 *   0   success
 *   1   the input is wrong: a program with errors, a file that cannot be read
 *       or is not what it should be, a bad prompt, data or setting, a
 *       run-time check or --check that failed
 *   2   the command line is wrong: an unknown option, a bad or missing
 *       argument, an output path that is refused before any work
 *   3   the machine failed the tool: memory ran out, or an output (a file
 *       or standard output) could not be written
 *   130 interrupted (128 + SIGINT; other signals as the shell reports them) */
#define CLI_EXIT_INPUT 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_SYSTEM 3
#define CLI_EXIT_INTERRUPTED 130 /* 128 + SIGINT, as shells report it */
/* The lines each tool's --help ends with. */
#define CLI_EXIT_HELP                                                                          \
    "exit status: 0 success; 1 bad input (a program with errors, a file that cannot be\n"      \
    "read or is not what it should be, a bad prompt, data or setting, a failed check);\n"     \
    "2 usage error (the command line); 3 out of memory, or an output that could not be\n"    \
    "written (standard output included); 130 interrupted\n"

/* The status of a failure reported in err: CLI_EXIT_SYSTEM when memory ran
 * out or an output's bytes could not be written, CLI_EXIT_USAGE when an
 * output path was refused (a read-only file, a device), else CLI_EXIT_INPUT. */
int cli_error_status(const TfError *err);

/* Prints "PROG (tfc) VERSION" (the CMake project's version) on stdout, then
 * the BLAS the tool's matrix products run on: for a tool without any (tfc,
 * tfinfo: library NULL) "BLAS: none (PROG multiplies no matrices)"; else
 * "BLAS: LIBRARY" and "kernels: CORE (how it was chosen)". When core is a
 * generic fallback on a CPU with better vectors (fallback nonzero, best the
 * better core), a warning on stderr says so and how to choose best. */
void cli_version(const char *prog, const char *library, const char *core, int fallback,
                 const char *best);

/* OpenBLAS reads OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS when it loads,
 * before main. Re-executes the tool (/proc/self/exe, the same arguments)
 * once, with:
 * - OPENBLAS_CORETYPE=BEST and TF_BLAS_FALLBACK=FALLBACK (for --version)
 *   when OpenBLAS chose a generic fallback core (fallback: its name; NULL
 *   when it did not) on a CPU with a better one (best) and
 *   OPENBLAS_CORETYPE is unset or empty;
 * - OPENBLAS_NUM_THREADS=1 when one_thread and it is unset or empty: the
 *   tools multiply on their own threads, and OpenBLAS's, started with the
 *   library, spin for about 0.1 s of a core each before they sleep (the
 *   callers ask for it when OpenBLAS is linked, blas_core() not NULL, and
 *   the run is long: tfrun with --batch and --check only).
 * Call it first in main, before anything is read, started or initialised
 * (MPI). Returns only when it did not re-execute (nothing to do, the
 * variables set by the user, or exec failed: the tool then runs as OpenBLAS
 * started). The re-executed tool finds the variables set, so it never loops. */
void cli_blas_prefer_core(char **argv, const char *fallback, const char *best, int one_thread);

/* 1 when argv (after argv[0], before a "--") holds the long option opt
 * ("--check"), alone or as opt=VALUE: for decisions made before the options
 * are parsed (cli_blas_prefer_core). */
int cli_argv_has(char *const *argv, const char *opt);

/* Reports getopt_long's '?' or ':' (the option string must start with ':')
 * about the option just read: "PROG: unknown option '--bogus' (see 'PROG
 * --help')", "PROG:
 * --check needs a value", "PROG: --no-cache takes no value", "PROG:
 * ambiguous option '--tr'": one line. */
void cli_option_error(const char *prog, int c, char *const *argv, const struct option *longopts);

/* A whole decimal number in [lo, hi]; 0, or -1. */
int cli_parse_long(const char *s, long lo, long hi, long *out);
/* A number in [lo, hi]; 0, or -1. */
int cli_parse_float(const char *s, double lo, double hi, float *out);

/* What a file's first bytes look like. */
typedef enum CliFileKind {
    CLI_FILE_OTHER,   /* anything else, or not known (empty, unreadable, not a regular file) */
    CLI_FILE_WEIGHTS, /* a safetensors header: a small little-endian length, then '{' */
    CLI_FILE_TEXT,    /* no NUL byte, under 1/32 control characters: text */
} CliFileKind;
CliFileKind cli_file_kind(const void *head, size_t n);

/* Before reading a weight file: when path is a regular file holding text,
 * prints "PROG: PATH is a program source, not a weight file (compile it
 * with tfc: ...)" (or "is a text file") and returns -1; else 0. A pipe is
 * not looked at, so nothing is consumed from it. */
int cli_expect_weights(const char *prog, const char *path);

/* A program source read whole (buf, len): when it is a weight file or
 * binary, prints "PROG: PATH is a weight file, not a program (...)" (or "is
 * a binary file") and returns -1; else 0. */
int cli_expect_program(const char *prog, const char *path, const char *buf, size_t len);

/* Whether out names the same file as in (after symbolic links): then
 * prints "PROG: OUT is IN itself; refusing to overwrite it" and returns -1;
 * else 0 (in NULL, or either missing, is never the same). */
int cli_refuse_same_file(const char *prog, const char *out, const char *in);

/* On SIGINT, SIGTERM, SIGHUP and SIGXFSZ (unless ignored when the tool started):
 * remove the pending output file (outfile.h) and die of the signal. */
void cli_remove_output_on_signals(void);
/* Installs handler for sig (SA_RESTART), unless sig was ignored when the
 * tool started (nohup, a background job). */
void cli_catch_signal(int sig, void (*handler)(int));
/* That handler's body, for a tool with a handler of its own: removes the
 * pending output file and re-raises sig with its default action.
 * Async-signal-safe. */
void cli_die_of_signal(int sig);

/* Flushes standard output; on an error (a full disk, say) prints "PROG:
 * error writing standard output: REASON" and returns -1. */
int cli_flush_stdout(const char *prog);

/* Seconds on a monotonic clock. */
double cli_now(void);
/* "7.2 s" below a minute, else "12:05" or "1:02:05". */
void cli_duration(double seconds, char *buf, size_t size);

/* A progress line on stderr: "\r"-updated, at most a few times a second,
 * shown when stderr is a terminal (after the first second, so short runs
 * print nothing) or always when forced (--progress). */
typedef struct CliProgress {
    int on, forced;
    double start, last; /* cli_now() at init and at the last update */
    int width;          /* characters of the line now on screen; 0: none */
} CliProgress;
void cli_progress_init(CliProgress *p, int force);
/* Shows "TEXT, ELAPSED elapsed, ETA REMAINING" if it is time to; fraction
 * is the part of the work done (0 to 1), or negative when not known (no
 * ETA then). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void cli_progress_update(CliProgress *p, double fraction, const char *fmt, ...);
/* Erases the line, so other output can be written to the terminal. */
void cli_progress_clear(CliProgress *p);
/* The final state, "TEXT, ELAPSED" and a newline: when forced or when a
 * line was shown. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cli_progress_end(CliProgress *p, const char *fmt, ...);

#endif
