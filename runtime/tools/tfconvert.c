/* tfconvert: other people's models in, standard models out (docs/convert.md).
 *
 *   tfconvert [--vocab CHARS] [--generate N] FOLDER -o OUT.tfw
 *        a Hugging Face GPT-2-style folder (config.json, model.safetensors,
 *        vocab.json) to a weight file (runtime/convert/convert.h)
 *   tfconvert WEIGHTS.tfw -o OUT.onnx
 *        a weight file to ONNX (runtime/convert/onnx.c)
 *   tfconvert WEIGHTS.tfw -o FOLDER
 *        a weight file that is exactly a GPT-2 to a GPT-2-style folder
 *
 * What it converts is decided by what IN and OUT are: an IN directory is a
 * GPT-2-style folder; an OUT ending in .onnx an ONNX file, any other OUT
 * (but a .tfw) a folder. Exit status (runtime/tools/cli.h): 0 converted; 1 an
 * input that cannot be read or represented (a one-line message naming the
 * key, the tensor or the file), or an output it cannot make; 2 usage error
 * (an output .tfw path refused included); 3 out of memory, or the .tfw
 * could not be written.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "convert.h"
#include "model.h"
#include "outfile.h"
#include "tfw.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tfconvert [options] FOLDER -o OUT.tfw\n"
               "       tfconvert WEIGHTS.tfw -o OUT.onnx\n"
               "       tfconvert WEIGHTS.tfw -o FOLDER      (a model that is exactly a GPT-2)\n"
               "  FOLDER           a GPT-2-style folder: config.json, model.safetensors\n"
               "                   (float32; with or without the transformer. prefix) and\n"
               "                   vocab.json (tokens of one character)\n"
               "  -o FILE          the weight file to write\n"
               "  --vocab CHARS    the vocabulary of a character model, token i the i-th\n"
               "                   character (in place of vocab.json)\n"
               "  --generate N     the tokens tfrun generates by default (default 1)\n"
               "  -h, --help       this help;  --version  the version\n"
               CLI_EXIT_HELP);
}

/* FOLDER to OUT.tfw. */
static int from_gpt2(const char *in, const char *out, const TfConvertOptions *opt) {
    TfError err = {""};
    TfModel *m = convert_from_gpt2(in, opt, &err);
    if (!m) {
        // Messages about a file of the folder name it ("config.json: ..."),
        // or give its path already.
        if (strncmp(err.msg, in, strlen(in)) != 0) tf_error_prefix(&err, in);
        fprintf(stderr, "tfconvert: %s\n", err.msg);
        return cli_error_status(&err);
    }
    int rc = tfw_write(m, out, &err);
    model_free(m);
    if (rc < 0) {
        fprintf(stderr, "tfconvert: %s\n", err.msg);
        return cli_error_status(&err);
    }
    return 0;
}

/* WEIGHTS.tfw to OUT.onnx, or (folder 1) to a GPT-2-style folder. */
static int from_tfw(const char *in, const char *out, int folder) {
    TfError err = {""};
    if (cli_expect_weights("tfconvert", in) < 0) return CLI_EXIT_INPUT;
    TfModel *m = tfw_read(in, &err);
    if (m && folder && convert_to_gpt2(m, out, &err) < 0) tf_error_prefix(&err, in);
    if (!m || (folder ? err.msg[0] != 0 : convert_to_onnx(m, out, &err) < 0)) {
        fprintf(stderr, "tfconvert: %s\n", err.msg);
        model_free(m);
        return cli_error_status(&err);
    }
    model_free(m);
    return 0;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

int main(int argc, char **argv) {
    const char *out = NULL, *in = NULL;
    TfConvertOptions opt = {NULL, 0, 1, NULL};
    enum { OPT_VOCAB = 256, OPT_GENERATE, OPT_VERSION };
    static const struct option longopts[] = {
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"generate", required_argument, NULL, OPT_GENERATE},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0}};
    int c;
    long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case OPT_VOCAB:
            opt.vocab = optarg;
            opt.vocab_len = (int)strnlen(optarg, 257);
            break;
        case OPT_GENERATE:
            if (cli_parse_long(optarg, 1, INT_MAX, &v) < 0) {
                fprintf(stderr, "tfconvert: --generate wants a positive number, not '%s'\n",
                        optarg);
                return CLI_EXIT_USAGE;
            }
            opt.generate = (int)v;
            break;
        case 'h': usage(stdout); return cli_flush_stdout("tfconvert") < 0 ? CLI_EXIT_SYSTEM : 0;
        case OPT_VERSION:
            cli_version("tfconvert", NULL, NULL, 0, NULL);
            return cli_flush_stdout("tfconvert") < 0 ? CLI_EXIT_SYSTEM : 0;
        default: cli_option_error("tfconvert", c, argv, longopts); return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) in = argv[optind++];
    if (optind < argc || !in || !out) {
        fprintf(stderr, "tfconvert: %s\n", optind < argc ? "more than one input given"
                                           : !in         ? "no input given"
                                                         : "no output given (-o FILE)");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (opt.vocab && opt.vocab_len > 256) {
        fprintf(stderr, "tfconvert: --vocab has more than 256 characters\n");
        return CLI_EXIT_USAGE;
    }
    opt.source = in;
    cli_remove_output_on_signals();
    struct stat st;
    if (stat(in, &st) == 0 && S_ISDIR(st.st_mode)) {
        TfError err = {""};
        if (outfile_check(out, &err) < 0) { // refused before the work
            fprintf(stderr, "tfconvert: %s\n", err.msg);
            return tf_error_is_memory(&err) ? CLI_EXIT_SYSTEM : CLI_EXIT_USAGE;
        }
        return from_gpt2(in, out, &opt);
    }
    if (stat(in, &st) != 0) {
        fprintf(stderr, "tfconvert: %s: cannot open: no such file or directory\n", in);
        return CLI_EXIT_INPUT;
    }
    if (ends_with(out, ".onnx")) return from_tfw(in, out, 0);
    if (!ends_with(out, ".tfw")) return from_tfw(in, out, 1);
    fprintf(stderr, "tfconvert: %s to %s: a GPT-2-style folder converts to a .tfw, a .tfw to a "
                    ".onnx file or a GPT-2-style folder\n", in, out);
    return CLI_EXIT_USAGE;
}
