/* tfc: compile a .tfp program into a .tfw weight file.
 *
 *   tfc PROGRAM.tfp [-o OUT.tfw] [-O | -O0] [-v] [--max-params N]
 *
 * Exit status: 0 compiled; 1 the program has errors (reported as
 * file:line:col diagnostics on stderr); 2 usage, I/O or internal error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "file.h"
#include "tfw.h"

#define TFC_EXIT_PROGRAM 1
#define TFC_EXIT_USAGE 2

static void usage(FILE *f) {
    fprintf(f, "usage: tfc PROGRAM.tfp [-o OUT.tfw] [-O | -O0] [-v] [--max-params N]\n"
               "  -o OUT   write the weights to OUT (default: PROGRAM.tfw beside the source)\n"
               "  -O       optimized constructions: heads of their true rank, only the\n"
               "           registers each layer needs, exact ReLU steps (the default)\n"
               "  -O0      seed 001's constructions, dense, to the float\n"
               "  -v       print a summary of what was written\n"
               "  --max-params N  refuse a model of more than N parameters (default 2^26 =\n"
               "           67108864), before building it\n");
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

int main(int argc, char **argv) {
    const char *src_path = NULL, *out_path = NULL;
    int verbose = 0, opt_level = 1;
    size_t max_params = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "tfc: -o needs a file name\n");
                usage(stderr);
                return TFC_EXIT_USAGE;
            }
            out_path = argv[i];
        } else if (strcmp(argv[i], "--max-params") == 0) {
            char *end = NULL;
            unsigned long long n = 0;
            if (++i < argc) {
                errno = 0;
                n = strtoull(argv[i], &end, 10);
            }
            if (i >= argc || argv[i][0] == '-' || !end || *end || end == argv[i] || errno ||
                n == 0 || n > (unsigned long long)SIZE_MAX / 4) {
                fprintf(stderr, "tfc: --max-params needs a positive number of parameters\n");
                usage(stderr);
                return TFC_EXIT_USAGE;
            }
            max_params = (size_t)n;
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = 1;
        } else if (strcmp(argv[i], "-O") == 0 || strcmp(argv[i], "-O1") == 0) {
            opt_level = 1;
        } else if (strcmp(argv[i], "-O0") == 0) {
            opt_level = 0;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "tfc: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return TFC_EXIT_USAGE;
        } else if (src_path) {
            fprintf(stderr, "tfc: more than one program given ('%s' and '%s')\n", src_path,
                    argv[i]);
            return TFC_EXIT_USAGE;
        } else {
            src_path = argv[i];
        }
    }
    if (!src_path) {
        fprintf(stderr, "tfc: no program given\n");
        usage(stderr);
        return TFC_EXIT_USAGE;
    }

    size_t len = 0;
    char *source = tf_file_read(src_path, &len);
    if (!source) {
        fprintf(stderr, "tfc: cannot read '%s': %s\n", src_path, strerror(errno));
        return TFC_EXIT_USAGE;
    }
    char *default_out = out_path ? NULL : default_output(src_path);
    if (!out_path) out_path = default_out;

    int n_errors = 0;
    TfError err = {""};
    TfCompileOptions opts = {opt_level, max_params};
    TfModel *m = compile_source_opts(src_path, source, len, &opts, stderr, &n_errors, &err);
    int status = 0;
    if (!m && n_errors > 0) {
        status = TFC_EXIT_PROGRAM;
    } else if (!m) {
        fprintf(stderr, "tfc: %s: %s\n", src_path, err.msg);
        status = TFC_EXIT_USAGE;
    } else if (!out_path || tfw_write(m, out_path, &err) < 0) {
        fprintf(stderr, "tfc: %s\n", out_path ? err.msg : "out of memory");
        status = TFC_EXIT_USAGE;
    } else if (verbose) {
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
    }
    model_free(m);
    free(source);
    free(default_out);
    return status;
}
