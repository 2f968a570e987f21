/* tfprove: proves a weight file against the program in its `source`
 * (compiler/prove.h), whatever made it; on a failure, searches for a prompt
 * that reaches the failing case and runs the weights on it to show whether
 * they and the program disagree there (compiler/prove_search.h).
 * With --check CASES it then runs the cases as `tfrun --check` does
 * (runtime/engine/runner.h), a numeric output compared within the bound
 * the validator proved instead of the file's output_error_bound.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "infer.h"
#include "prove.h"
#include "prove_search.h"
#include "runner.h"
#include "tfw.h"


static void usage(FILE *f) {
    fprintf(f, "usage: tfprove [--threads T] FILE.tfw\n"
               "       tfprove [--threads T] FILE.tfw --check CASES|-\n"
               "Proves that the weights compute the program in the file's source, on every input\n"
               "up to maxlen: per op its margin, per numeric output its bound. On a failure it\n"
               "names the op, its line, the layer and a prompt on which to look (run by the\n"
               "weights: whether they and the program disagree there).\n"
               "  --check CASES  then run the lines prompt<TAB>expected of CASES ('-': standard\n"
               "                 input) as tfrun --check does, a numeric output compared within\n"
               "                 the bound proven here instead of the file's output_error_bound\n"
               "                 (the file may claim less); needs every op proven\n"
               "  --threads T    threads for the attention heads (default: the CPUs online, at\n"
               "                 most 16; the proof and its report do not depend on it)\n"
               "  -h, --help     this help;  --version  the version\n"
               "A file that is not proven (a failure, or a part it cannot prove) exits 1; with\n"
               "--check, a failed case, or no proven bound to check within, exits 1.\n"
               CLI_EXIT_HELP);
}

/* --check: the cases in path, numbers within the proven bound. */
static int check_cases(TfModel *m, const TfProof *P, const char *path) {
    if (!P->bound_proven && (model_numeric_output(m) || P->verdict != TF_PROOF_PROVEN)) {
        printf("--check: not run: %s\n",
               model_numeric_output(m) ? "no end-to-end bound proven for the output"
                                       : "the weights are not proven");
        return CLI_EXIT_INPUT;
    }
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tfprove: cannot open '%s': %s\n", path, strerror(errno));
        return CLI_EXIT_INPUT;
    }
    TfError err = {""};
    int n_new = m->generate;
    if (runner_limit_new_tokens(m, n_new, &n_new, &err) < 0) {
        fprintf(stderr, "tfprove: %s\n", err.msg);
        if (f != stdin) fclose(f);
        return CLI_EXIT_INPUT;
    }
    if (model_numeric_output(m)) m->output_error_bound = (float)P->output_bound;
    if (model_numeric_output(m) && (double)m->output_error_bound < P->output_bound)
        m->output_error_bound = nextafterf(m->output_error_bound, INFINITY);
    TfRunnerOptions o = {.n_new = n_new, .batch_size = 256, .n_threads = runner_default_threads(),
                         .use_cache = 1, .check = 1, .show_failures = 10};
    TfRunnerStats st;
    int rc = runner_run(m, f, f == stdin ? "<stdin>" : path, stdout, stderr, &o, &st, &err);
    if (f != stdin) fclose(f);
    if (rc < 0) {
        fprintf(stderr, "tfprove: %s\n", err.msg);
        return cli_error_status(&err);
    }
    if (st.failed > o.show_failures) printf("... and %ld more failures\n", st.failed - o.show_failures);
    printf("%ld passed, %ld failed", st.passed, st.failed);
    if (st.bad) printf(", %ld bad lines", st.bad);
    if (model_numeric_output(m)) printf(" (numbers within the proven bound %.3g)", P->output_bound);
    printf("\n");
    return st.bad || st.failed || st.errors ? CLI_EXIT_INPUT : 0;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'},
        {"check", required_argument, 0, 'c'}, {"threads", required_argument, 0, 'T'},
        {0, 0, 0, 0}};
    const char *check_path = NULL;
    int c;
    long threads = 0;
    opterr = 0; /* cli_option_error says it once */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return cli_flush_stdout("tfprove") < 0 ? CLI_EXIT_SYSTEM : 0;
        case 'V':
            cli_version("tfprove", NULL, NULL, 0, NULL);
            return cli_flush_stdout("tfprove") < 0 ? CLI_EXIT_SYSTEM : 0;
        case 'c': check_path = optarg; break;
        case 'T':
            if (cli_parse_long(optarg, 1, 16, &threads) < 0) {
                fprintf(stderr, "tfprove: --threads wants a number from 1 to 16, not '%s'\n", optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        default: cli_option_error("tfprove", c, argv, longopts); return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *path = argv[optind];
    if (cli_expect_weights("tfprove", path) < 0) return CLI_EXIT_INPUT;
    TfError err;
    TfModel *m = tfw_read(path, &err);
    if (!m) {
        fprintf(stderr, "tfprove: %s\n", err.msg);
        return cli_error_status(&err);
    }
    TfProof P;
    if (prove_model_threads(m, (int)threads, &P, &err) < 0) {
        fprintf(stderr, "tfprove: %s: %s\n", path, err.msg);
        model_free(m);
        return cli_error_status(&err);
    }
    for (int i = 0; i < P.n_lines; i++) printf("%s\n", P.lines[i]);
    int rc = 0;
    if (P.verdict == TF_PROOF_PROVEN) {
        printf("%s: proven\n", path);
    } else {
        printf("%s: %s: %s\n", path, P.verdict == TF_PROOF_FAILED ? "NOT PROVEN" : "not proven", P.reason);
        for (int k = 0; k < P.n_assign; k++)
            printf("  case: %s = %s\n", P.assign_reg[k], P.assign_val[k]);
        if (P.n_cases > 1) printf("  (and %d more failing cases of this check)\n", P.n_cases - 1);
        prove_search(m, &P, stdout);
        rc = CLI_EXIT_INPUT;
    }
    // --check: the cases decide (within the proven bound, whatever the file claims).
    if (check_path) {
        fflush(stdout);
        rc = check_cases(m, &P, check_path);
    }
    prove_free(&P);
    model_free(m);
    if (cli_flush_stdout("tfprove") < 0) return CLI_EXIT_SYSTEM;
    return rc;
}
