/* tfc: compile a .tfp program into a .tfw weight file.
 *
 *   tfc [-O | -O0] [--no-schedule | --no-fuse] [--one-hot] [--no-angles] [--no-reuse] [--no-prove] [-v] [-o OUT.tfw] [--max-params=N] [--] PROGRAM.tfp
 *   tfc --dump=ast|ir|plans|layers [-O | -O0] [--no-schedule] [--] PROGRAM.tfp
 *
 * Every model tfc writes is first proven against its program (compiler/
 * prove.h, the validator tfprove runs), at every level: where the proof
 * fails, nothing is written and the error names the op, its line and
 * layer, the failing case and a prompt on which the weights and the
 * program disagree (compiler/prove_search.h). Where the validator does not
 * cover a part (no maxlen to bound the inputs, a table too large, ...) the
 * weights are written with a warning naming it; --prove makes that an
 * error too. A learned model (a `model` block) has nothing to prove
 * against and is written as it is, unless --prove asks for the proof.
 * --no-prove writes the weights unproven (tfprove FILE.tfw proves them
 * later).
 *
 * -v prints what was written: the layers, heads, hidden units, tensors and
 * parameters, then one line for each layer that holds several ops (tfc's
 * scheduler merges ops whose inputs are ready into one layer) naming them.
 * --dump=STAGE prints the program after that stage on stdout and stops,
 * writing no weights (compiler/stage_dump.h).
 *
 * Exit status (the same in every tool, runtime/tools/cli.h): 0 compiled; 1
 * the program has errors (reported as file:line:col diagnostics on stderr),
 * or the file cannot be read or is not a program; 2 usage error (an output
 * path refused included); 3 memory ran out, whichever stage it was in, or
 * the weights or standard output could not be written (130 and the like:
 * killed by a signal; the output file is then left as it was).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compile.h"
#include "stage_dump.h"
#include "file.h"
#include "outfile.h"
#include "parse.h"
#include "prove.h"
#include "prove_search.h"
#include "tfw.h"

#define TFC_EXIT_DONE (-1) /* parse_options: --help or --version printed */

static void usage(FILE *f) {
    fprintf(f, "usage: tfc [options] [--] PROGRAM.tfp\n"
               "  -o, --output=OUT  write the weights to OUT (default: PROGRAM.tfw beside the\n"
               "                    source); a symbolic link is written through, a directory,\n"
               "                    device or read-only file is refused\n"
               "  -O               optimized constructions: heads of their true rank, only the\n"
               "                   registers each layer needs, exact ReLU steps (the default)\n"
               "  -O0              seed 001's constructions, dense, to the float\n"
               "  --no-schedule    at -O, keep one layer per op in program order (no MLP\n"
               "                   fusion, no ops side by side, no dead columns dropped)\n"
               "  --no-fuse        at -O, schedule without MLP fusion (by default fusion is\n"
               "                   kept only where the model is no larger than without it)\n"
               "  --one-hot        keep every cat register one-hot (by default, at -O, a register\n"
               "                   of numbers that no selection compares is held in one column\n"
               "                   where the model comes out smaller, and proven so)\n"
               "  --no-angles      at -O, every selection compares one-hots (by default a\n"
               "                   term that picks one key value per query value, such as\n"
               "                   k.n == q.want, compares points on a circle, two columns a\n"
               "                   side, where the model comes out smaller, and proven so)\n"
               "  --no-reuse       at -O, every register keeps its columns to itself (by\n"
               "                   default a register written after an MLP can take the columns\n"
               "                   of one nothing reads any more, which that MLP clears, where\n"
               "                   the model comes out smaller)\n"
               "  --no-prove       write the weights without proving them (by default they are\n"
               "                   proven against the program first, as tfprove does: where\n"
               "                   the proof fails nothing is written, and the error names\n"
               "                   the op's line, the layer, the failing case and a\n"
               "                   counterexample prompt; a part the validator does not\n"
               "                   cover is a warning)\n"
               "  --prove          a part the validator does not cover is an error too (and a\n"
               "                   learned model, which has nothing to prove against)\n"
               "  -v, --verbose    print a summary of what was written (and the ops each\n"
               "                   layer of several ops holds)\n"
               "  --max-params=N   refuse a model of more than N parameters before building\n"
               "                   it (default 2^26 = 67108864)\n"
               "  --dump=STAGE     print the program after STAGE on stdout and stop (no\n"
               "                   weights written): ast (the syntax tree), ir (each\n"
               "                   register's columns, value set, error bound and writer;\n"
               "                   each op's form and inputs), plans (each op's plan and\n"
               "                   layer size), layers (each layer's kind, size and parts)\n"
               "  -h, --help       this help;  --version  the version\n"
               "Diagnostics are file:line:col messages on stderr.\n" CLI_EXIT_HELP);
}

/* PROGRAM.tfp -> PROGRAM.tfw; any other name gets .tfw appended. */
static char *default_output(const char *src) {
    size_t n = strlen(src);
    char *out = malloc(n + 5);
    if (!out) return NULL;
    memcpy(out, src, n + 1);
    if (n > 4 && strcmp(src + n - 4, ".tfp") == 0) out[n - 4] = '\0';
    strcat(out, ".tfw");
    return out;
}

/* tfc -v: one line per layer that holds several ops, naming them:
 * "  layer 0: attention, 3 heads: n (line 10), hist (line 11)". */
static void print_merged_layers(const TfModel *m) {
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->n_parts == 0) continue;
        if (ly->kind == TF_LAYER_ATTENTION)
            printf("  layer %d: attention, %d head%s:", l, ly->n_heads, ly->n_heads == 1 ? "" : "s");
        else
            printf("  layer %d: %s, %d hidden unit%s:", l, tf_layer_kind_names[ly->kind],
                   ly->d_hidden, ly->d_hidden == 1 ? "" : "s");
        for (int i = 0; i < ly->n_parts; i++) {
            printf("%s %s", i ? "," : "", ly->parts[i].name);
            if (ly->parts[i].line > 0) printf(" (line %d)", ly->parts[i].line);
        }
        fputc('\n', stdout);
    }
}

/* tfc -v: "OUT: 5 layers (2 attention with 3 heads, 3 MLP: ...), ..." and
 * the layers that hold several ops. */
static void print_summary(const TfModel *m, const char *out_path) {
    int attn = 0, heads = 0, widest = 0, hidden = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind == TF_LAYER_ATTENTION) {
            attn++;
            heads += ly->n_heads;
        } else if (ly->kind == TF_LAYER_MLP) {
            hidden += ly->d_hidden;
            if (ly->d_hidden > widest) widest = ly->d_hidden;
        }
    }
    printf("%s: %d layers (%d attention with %d heads, %d MLP: widest %d, %d hidden units in "
           "all), d_model %d, %d tensors, %zu parameters\n",
           out_path, m->n_layers, attn, heads, m->n_layers - attn, widest, hidden, m->d_model,
           m->n_tensors, model_param_count(m));
    print_merged_layers(m);
}

/* The validator on the model before it is written: 0 to write it, else
 * the exit status. Proven: written. Proven within a wider numeric bound
 * than the construction's estimate: written with the proven bound (what
 * tfrun --check and the report compare within). A part the validator does
 * not cover (not proven: no maxlen, a table too large, ...): written,
 * with a warning at its line and *unproven set, unless --prove asked for
 * the proof (strict). The weights shown wrong in some case (failed): nothing written, the
 * error at the op's line, the failing case and a counterexample prompt
 * (prove_search). */
static int prove(TfModel *m, int strict, const char *src_path, const char *source, size_t len, double *estimate,
                 int *unproven) {
    TfProof P;
    TfError err;
    if (prove_model(m, &P, &err) < 0) {
        fprintf(stderr, "tfc: %s: %s\n", src_path, err.msg);
        return cli_error_status(&err);
    }
    if (P.verdict == TF_PROOF_FAILED && P.bound_short) {
        *estimate = m->output_error_bound;
        m->output_error_bound = nextafter(P.output_bound, INFINITY);
        P.verdict = TF_PROOF_PROVEN;
    }
    if (P.verdict == TF_PROOF_PROVEN) {
        prove_free(&P);
        return 0;
    }
    TfDiag d;
    diag_init(&d, src_path, source, len, stderr);
    TfLoc loc = {P.fail_line, 1, P.fail_line, 1};
    if (P.verdict == TF_PROOF_UNPROVEN && !strict) {
        const char *why = P.reason; // less its "line N: ", which the diagnostic gives
        if (strncmp(why, "line ", 5) == 0 && strstr(why, ": ")) why = strstr(why, ": ") + 2;
        if (P.fail_line > 0) diag_warning(&d, loc, "the weights are written unproven: %s", why);
        else fprintf(stderr, "%s: warning: the weights are written unproven: %s\n", src_path, why);
        *unproven = 1;
        prove_free(&P);
        return 0;
    }
    const char *what = P.verdict == TF_PROOF_FAILED ? "the weights are not proven" : "cannot prove the weights";
    if (P.fail_line > 0) diag_error(&d, loc, "%s: %s", what, P.reason);
    else diag_file_error(&d, "%s: %s", what, P.reason);
    for (int k = 0; k < P.n_assign; k++)
        fprintf(stderr, "  case: %s = %s\n", P.assign_reg[k], P.assign_val[k]);
    prove_search(m, &P, stderr);
    diag_hint(&d, "nothing was written; with --no-prove tfc writes the weights unproven (tfprove FILE.tfw then says the same)");
    prove_free(&P);
    return CLI_EXIT_INPUT;
}

/* The selections a model compares on angles (compiler/angles.h): the
 * registers of their key points, `NAME.kcos` (NAME.tN.kcos for term N);
 * printed when print is set. Returns how many. */
static int angle_terms(const TfModel *m, int print) {
    int n = 0;
    for (int r = 0; r < m->n_regs; r++) {
        const char *name = m->regs[r].name;
        size_t l = name ? strlen(name) : 0;
        if (l < 5 || strcmp(name + l - 5, ".kcos") != 0) continue;
        if (print) printf("%s%.*s", n ? " " : "compared on angles (two columns a side): ", (int)(l - 5), name);
        n++;
    }
    if (print && n) putchar('\n');
    return n;
}

/* A model holding registers as numbers (compiler/numbers.h) or comparing
 * selections on angles that the
 * validator shows wrong in some case is compiled again with every register
 * one-hot (and no angles): where the compiler's margins and the validator's disagree, the
 * user gets the one-hot model and its own verdict (a part the validator
 * does not cover leaves either unproven: the smaller stays). Nonzero when
 * it was compiled again: 1 for the numbers, 2 for the angles, 3 both. */
static int one_hot_unless_proven(TfModel **m, const TfCompileOptions *opts, const char *src_path,
                                 const char *source, size_t len) {
    int numbers = (*m)->made_by && strstr((*m)->made_by, "\"numbers\"") != NULL;
    int angles = angle_terms(*m, 0) > 0;
    if (!numbers && !angles) return 0;
    TfProof P;
    TfError err;
    if (prove_model(*m, &P, &err) < 0) return 0; // prove() reports it
    int failed = P.verdict == TF_PROOF_FAILED && !P.bound_short; // not a part it does not cover
    prove_free(&P);
    if (!failed) return 0;
    TfCompileOptions o = *opts;
    o.one_hot |= numbers;
    o.no_angles |= angles;
    int n_errors = 0;
    TfError e2 = {""};
    TfModel *u = compile_source_opts(src_path, source, len, &o, NULL, &n_errors, &e2);
    if (!u) return 0;
    model_free(*m);
    *m = u;
    return numbers | angles << 1;
}

/* -v: the registers the model holds as numbers, from its made_by. */
static void print_numbers(const TfModel *m) {
    const char *p = m->made_by ? strstr(m->made_by, "\"numbers\":[") : NULL;
    if (!p) return;
    p += strlen("\"numbers\":[");
    const char *end = strchr(p, ']');
    printf("held as numbers (one column each): ");
    for (; p < end; p++)
        if (*p != '"') putchar(*p == ',' ? ' ' : *p);
    putchar('\n');
}

/* -v: the registers that took dead registers' columns (compiler/schedule.h,
 * step 4), each with those it took them from: "columns reused: out (from
 * state 5: b.q2.clean), c.q6.clean (from state 5: a)". */
static void print_reuse(const TfModel *m) {
    int n = 0;
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *g = &m->regs[r];
        if (g->live_from == 0) continue;
        printf("%s%s (from state %d:", n++ ? ", " : "columns reused: ", g->name, g->live_from);
        for (int o = 0; o < m->n_regs; o++) {
            const TfRegister *h = &m->regs[o];
            if (o != r && h->live_to < g->live_from && h->offset < g->offset + g->size &&
                g->offset < h->offset + h->size)
                printf(" %s", h->name);
        }
        putchar(')');
    }
    if (n) printf(" (--no-reuse keeps every register's columns its own)\n");
}

/* What the command line asks for. */
typedef struct TfcArgs {
    const char *src_path, *out_path;
    int verbose, prove; /* prove: 0 --no-prove, 1 the default, 2 --prove */
    TfCompileOptions opts;
} TfcArgs;

/* Reads the options into *A: 0, or the exit status to leave with at once
 * (after --help, --version, or a usage error reported). */
static int parse_options(int argc, char **argv, TfcArgs *A) {
    enum { OPT_VERSION = 256, OPT_MAX_PARAMS, OPT_NO_SCHEDULE, OPT_NO_FUSE, OPT_DUMP, OPT_PROVE,
           OPT_NO_PROVE, OPT_ONE_HOT, OPT_NO_ANGLES, OPT_NO_REUSE };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},         {"version", no_argument, NULL, OPT_VERSION},
        {"max-params", required_argument, NULL, OPT_MAX_PARAMS},
        {"no-schedule", no_argument, NULL, OPT_NO_SCHEDULE},
        {"no-fuse", no_argument, NULL, OPT_NO_FUSE},
        {"one-hot", no_argument, NULL, OPT_ONE_HOT},
        {"no-angles", no_argument, NULL, OPT_NO_ANGLES},
        {"no-reuse", no_argument, NULL, OPT_NO_REUSE},
        {"dump", required_argument, NULL, OPT_DUMP},
        {"prove", no_argument, NULL, OPT_PROVE},
        {"no-prove", no_argument, NULL, OPT_NO_PROVE},
        {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:O::vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': A->out_path = optarg; break;
        case 'v': A->verbose = 1; break;
        case 'O':
            if (!optarg || strcmp(optarg, "1") == 0) {
                A->opts.opt_level = 1;
            } else if (strcmp(optarg, "0") == 0) {
                A->opts.opt_level = 0;
            } else {
                fprintf(stderr, "tfc: unknown optimization level '-O%s' (-O0 or -O)\n", optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case OPT_NO_SCHEDULE: A->opts.no_schedule = 1; break;
        case OPT_NO_FUSE: A->opts.no_fuse = 1; break;
        case OPT_ONE_HOT: A->opts.one_hot = 1; break;
        case OPT_NO_ANGLES: A->opts.no_angles = 1; break;
        case OPT_NO_REUSE: A->opts.no_reuse = 1; break;
        case OPT_PROVE: A->prove = 2; break; // asked for: a learned model is refused
        case OPT_NO_PROVE: A->prove = 0; break;
        case OPT_DUMP:
            A->opts.dump = dump_stage_find(optarg);
            if (A->opts.dump < 0) {
                fprintf(stderr, "tfc: unknown stage '--dump=%s' (ast, ir, plans or layers)\n",
                        optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return cli_flush_stdout("tfc") < 0 ? CLI_EXIT_SYSTEM : TFC_EXIT_DONE;
        case OPT_VERSION:
            cli_version("tfc", NULL, NULL, 0, NULL);
            return cli_flush_stdout("tfc") < 0 ? CLI_EXIT_SYSTEM : TFC_EXIT_DONE;
        case OPT_MAX_PARAMS: {
            char *end = NULL;
            errno = 0;
            unsigned long long n = strtoull(optarg, &end, 10);
            if (optarg[0] == '-' || end == optarg || *end || errno || n == 0 ||
                n > (unsigned long long)SIZE_MAX / 4) {
                fprintf(stderr, "tfc: --max-params needs a positive number of parameters, not '%s'\n",
                        optarg);
                return CLI_EXIT_USAGE;
            }
            A->opts.max_params = (size_t)n;
            break;
        }
        default: cli_option_error("tfc", c, argv, longopts); return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) A->src_path = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "tfc: more than one program given ('%s' and '%s')\n", A->src_path,
                argv[optind]);
        return CLI_EXIT_USAGE;
    }
    if (!A->src_path) {
        fprintf(stderr, "tfc: no program given\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv) {
    TfcArgs A = {NULL, NULL, 0, 1, {.opt_level = 1, .dump = TF_DUMP_NONE, .dump_out = stdout}};
    int quit = parse_options(argc, argv, &A);
    if (quit) return quit == TFC_EXIT_DONE ? 0 : quit;
    const char *src_path = A.src_path, *out_path = A.out_path;
    cli_remove_output_on_signals();

    size_t len = 0;
    TfError rerr;
    char *source = tf_file_read_max(src_path, TF_MAX_SOURCE, &len, &rerr);
    if (!source) {
        fprintf(stderr, "tfc: %s\n", rerr.msg);
        return cli_error_status(&rerr);
    }
    if (cli_expect_program("tfc", src_path, source, len) < 0) {
        free(source);
        return CLI_EXIT_INPUT;
    }
    int dumping = A.opts.dump != TF_DUMP_NONE;
    char *default_out = out_path || dumping ? NULL : default_output(src_path);
    if (!out_path) out_path = default_out;
    TfError err = {""};
    // A bad output path is found before a long compile, not after.
    int bad_out = !dumping && (!out_path || outfile_check(out_path, &err) < 0);
    if (bad_out) fprintf(stderr, "tfc: %s\n", out_path ? err.msg : "out of memory");
    if (bad_out || (!dumping && cli_refuse_same_file("tfc", out_path, src_path) < 0)) {
        free(source);
        free(default_out);
        return out_path ? CLI_EXIT_USAGE : CLI_EXIT_SYSTEM;
    }

    int n_errors = 0;
    TfModel *m = compile_source_opts(src_path, source, len, &A.opts, stderr, &n_errors, &err);
    int status = 0, one_hot_again = m && A.prove && one_hot_unless_proven(&m, &A.opts, src_path, source, len);
    double estimate = -1; // the construction's output bound, where the proof raised it
    int unproven = 0;     // written with a part the validator does not cover
    if (!m && n_errors > 0) {
        status = CLI_EXIT_INPUT;
    } else if (!m && !(dumping && err.msg[0] == '\0')) {
        fprintf(stderr, "tfc: %s: %s\n", src_path, err.msg);
        status = cli_error_status(&err);
    } else if (m && A.prove && !(m->learned && A.prove == 1) && (status = prove(m, A.prove == 2, src_path, source, len, &estimate, &unproven)) != 0) {
        // nothing written
    } else if (m && tfw_write(m, out_path, &err) < 0) {
        fprintf(stderr, "tfc: %s\n", err.msg); // not representable (1), or not written (3)
        status = cli_error_status(&err);
    } else if (m && A.verbose) {
        print_summary(m, out_path);
        if (!A.opts.no_schedule && m->made_by && strstr(m->made_by, "\"schedule\":false"))
            printf("scheduling undone: the model with one layer per op has fewer parameters\n");
        if (!A.opts.no_fuse && m->made_by && strstr(m->made_by, "\"fuse\":false"))
            printf("MLP fusion undone: the model without it has fewer parameters\n");
        print_numbers(m);
        angle_terms(m, 1);
        print_reuse(m);
        if (one_hot_again & 1)
            printf("the registers held as numbers were not proven: compiled again one-hot\n");
        if (one_hot_again & 2)
            printf("the selections compared on angles were not proven: compiled again without angles\n");
        if (m->learned) printf("a learned model: nothing to prove against\n");
        else if (A.prove && unproven)
            printf("not proven: a part the validator does not cover (the warning above says which)\n");
        else if (A.prove && estimate >= 0)
            printf("proven against the program, the output within %.3g (the construction's estimate, %.3g, is "
                   "not proven; tfprove %s prints each op's margin)\n", m->output_error_bound, estimate, out_path);
        else if (A.prove) printf("proven against the program (tfprove %s prints each op's margin)\n", out_path);
        else printf("not proven (--no-prove; tfprove %s proves it)\n", out_path);
    }
    model_free(m);
    free(source);
    free(default_out);
    if (cli_flush_stdout("tfc") < 0 && status == 0) status = CLI_EXIT_SYSTEM;
    return status;
}
