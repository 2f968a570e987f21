/* tfinfo: what is in a .tfw weight file.
 *
 *   tfinfo [--] WEIGHTS.tfw
 *
 * Prints the parameters (stored, non-zero, distinct non-zero values) and
 * the FLOP of one token's pass, the vocabulary, the position encoding, the register layout (a
 * register's live range where it is narrower than every state), every
 * layer (kind, the op and source line it came from, or for a layer that
 * holds several ops each op's heads or hidden units, name, op and line; its
 * tensors' shapes and parameter count), every tensor, the generation settings and the embedded
 * source. Exit status (runtime/tools/cli.h): 0 success; 1 a bad weight file; 2
 * usage error; 3 out of memory or an error writing standard output.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"
#include "tfw.h"

static void usage(FILE *f) {
    fprintf(f, "usage: tfinfo [--] WEIGHTS.tfw\n"
               "  prints the vocabulary, position encoding, registers, layers, tensors,\n"
               "  generation settings and embedded source of a weight file\n"
               "  -h, --help   this help;  --version  the version\n"
               CLI_EXIT_HELP);
}

/* "[80, 80]" */
static void print_shape(const TfTensor *t) {
    fputc('[', stdout);
    for (int i = 0; i < t->ndim; i++) printf("%s%lld", i ? ", " : "", (long long)t->shape[i]);
    fputc(']', stdout);
}

/* One tensor of a layer: "    query  layers.0.attn.query.weight [80, 80]",
 * marked "shared" when other layers use it too. */
static size_t print_layer_tensor(const TfModel *m, const int *uses, const char *role, int idx) {
    if (idx < 0) return 0;
    const TfTensor *t = &m->tensors[idx];
    printf("      %-12s %-34s ", role, t->name);
    print_shape(t);
    printf("%s\n", uses[idx] > 1 ? "  shared" : "");
    return t->nelem;
}

static void print_vocab(const TfModel *m) {
    printf("vocabulary: %d tokens", m->n_vocab);
    if (m->n_output_only > 0) // docs/weight-format.md, "Vocabulary"
        printf(" (%d output-only, %d..%d: outputs print them, no prompt holds them)",
               m->n_output_only, m->n_vocab - m->n_output_only, m->n_vocab - 1);
    printf("\n ");
    char buf[TF_TOKEN_TEXT_MAX];
    for (int i = 0; i < m->n_vocab; i++) {
        model_token_text(m, i, buf);
        printf(strchr(buf, ' ') ? " %d:'%s'" : " %d:%s", i, buf);
        if (i % 16 == 15 && i + 1 < m->n_vocab) printf("\n ");
    }
    fputc('\n', stdout);
}

/* A categorical register's value labels: "  values 0 1 2 ... 15 16 (17)",
 * the middle left out when there are many or they are long. */
#define TFINFO_VALUES_WIDTH 60
static void print_values(const TfRegister *reg) {
    size_t total = 0;
    for (int v = 0; v < reg->size; v++) total += strlen(reg->values[v]) + 1;
    printf("  values");
    if (total <= TFINFO_VALUES_WIDTH) {
        for (int v = 0; v < reg->size; v++) printf(" %s", reg->values[v]);
        return;
    }
    // As many from the front and the back as fit, each label cut to 12.
    size_t used = 0;
    int head = 0, tail = 0;
    while (head + tail < reg->size) {
        int take_head = head <= tail;
        const char *lab = reg->values[take_head ? head : reg->size - 1 - tail];
        size_t w = strlen(lab) > 12 ? 13 : strlen(lab) + 1;
        if (used + w > TFINFO_VALUES_WIDTH) break;
        used += w;
        if (take_head)
            head++;
        else
            tail++;
    }
    for (int v = 0; v < head; v++)
        printf(" %.12s%s", reg->values[v], strlen(reg->values[v]) > 12 ? "~" : "");
    printf(" ...");
    for (int v = reg->size - tail; v < reg->size; v++)
        printf(" %.12s%s", reg->values[v], strlen(reg->values[v]) > 12 ? "~" : "");
    printf(" (%d values)", reg->size);
}

/* A live range narrower than every state (TfRegister.live_from; another
 * register may hold the columns in the others): "  live in states 13..36
 * (after layer 12 to after layer 35)"; state 0 is the embedding's output,
 * state i + 1 layer i's (docs/weight-format.md). */
static void print_live(const TfModel *m, int r) {
    char range[128];
    model_live_text(m, r, range, sizeof range);
    printf("  live in %s", range);
}

static void print_registers(const TfModel *m) {
    printf("\nregisters: %d\n", m->n_regs);
    if (m->n_regs == 0) {
        printf("  (none: the residual stream has no named columns)\n");
        return;
    }
    printf("  %-14s %-11s %s\n", "name", "kind", "columns");
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *reg = &m->regs[r];
        printf("  %-14s %-11s ", reg->name, tf_reg_kind_names[reg->kind]);
        if (reg->size == 1)
            printf("%d", reg->offset);
        else
            printf("%d-%d", reg->offset, reg->offset + reg->size - 1);
        if (reg->kind == TF_REG_POSITION) printf("  (sin, cos)");
        if (r == m->output_reg) printf("  output");
        if (model_reg_reused(m, r)) print_live(m, r);
        if (reg->kind == TF_REG_CATEGORICAL) print_values(reg);
        fputc('\n', stdout);
    }
}

/* The ops a scheduled layer holds, one a line:
 * "      heads 1-2: hist (Aggregate, line 11)", "      unit 5: x". */
static void print_layer_parts(const TfLayer *ly) {
    const char *unit = ly->kind == TF_LAYER_ATTENTION ? "head" : "unit";
    for (int i = 0; i < ly->n_parts; i++) {
        const TfLayerPart *p = &ly->parts[i];
        if (p->count == 1)
            printf("      %s %d: %s", unit, p->first, p->name);
        else
            printf("      %ss %d-%d: %s", unit, p->first, p->first + p->count - 1, p->name);
        if (p->op && p->line > 0)
            printf(" (%s, line %d)", p->op, p->line);
        else if (p->op)
            printf(" (%s)", p->op);
        else if (p->line > 0)
            printf(" (line %d)", p->line);
        fputc('\n', stdout);
    }
}

static void print_layers(const TfModel *m, const int *uses) {
    printf("\nlayers: %d (a layer's parameters count its shared tensors too)\n", m->n_layers);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        printf("  %3d %-14s %s", l, ly->name, tf_layer_kind_names[ly->kind]);
        // A layer of several ops: its op and line are the first part's; the
        // parts below say each one's.
        if (ly->n_parts > 0)
            printf("%*s %d ops", 9 - (int)strlen(tf_layer_kind_names[ly->kind]), "", ly->n_parts);
        else if (ly->op)
            printf("%*s %-18s", 9 - (int)strlen(tf_layer_kind_names[ly->kind]), "", ly->op);
        if (ly->line > 0 && ly->n_parts == 0) printf(" line %d", ly->line);
        fputc('\n', stdout);
        size_t n = 0;
        if (ly->kind == TF_LAYER_ATTENTION) {
            printf("      %d head%s, d_head %d, d_vhead %d, scale %g, %s\n", ly->n_heads,
                   ly->n_heads == 1 ? "" : "s", ly->d_head, ly->d_vhead, (double)ly->scale,
                   ly->causal ? "causal" : "bidirectional");
            print_layer_parts(ly);
            n += print_layer_tensor(m, uses, "query", ly->query);
            n += print_layer_tensor(m, uses, "key", ly->key);
            n += print_layer_tensor(m, uses, "value", ly->value);
            n += print_layer_tensor(m, uses, "output", ly->output);
            n += print_layer_tensor(m, uses, "query_bias", ly->query_bias);
            n += print_layer_tensor(m, uses, "key_bias", ly->key_bias);
            n += print_layer_tensor(m, uses, "value_bias", ly->value_bias);
            n += print_layer_tensor(m, uses, "output_bias", ly->output_bias);
        } else if (ly->kind == TF_LAYER_MLP) {
            printf("      d_hidden %d, %s\n", ly->d_hidden, tf_activation_names[ly->act]);
            print_layer_parts(ly);
            n += print_layer_tensor(m, uses, "fc1_weight", ly->fc1_weight);
            n += print_layer_tensor(m, uses, "fc1_bias", ly->fc1_bias);
            n += print_layer_tensor(m, uses, "fc2_weight", ly->fc2_weight);
            n += print_layer_tensor(m, uses, "fc2_bias", ly->fc2_bias);
        } else {
            printf("      LayerNorm, eps %g\n", (double)ly->norm_eps);
        }
        if (ly->norm_weight >= 0 || ly->norm_bias >= 0) {
            if (ly->kind != TF_LAYER_NORM) printf("      pre-norm, eps %g\n", (double)ly->norm_eps);
            n += print_layer_tensor(m, uses, "norm_weight", ly->norm_weight);
            n += print_layer_tensor(m, uses, "norm_bias", ly->norm_bias);
        }
        printf("      %zu parameters\n", n);
    }
}

/* Every tensor, and how many of its floats are parameters: a checkpoint
 * also holds optimizer state (optim.*), which the model does not read. */
static void print_tensors(const TfModel *m, const int *uses) {
    size_t total = 0;
    for (int i = 0; i < m->n_tensors; i++) total += m->tensors[i].nelem;
    size_t params = model_param_count(m);
    printf("\ntensors: %d, %zu %s (float32, %zu bytes)", m->n_tensors, total,
           total > params ? "floats" : "parameters", total * sizeof(float));
    if (total > params)
        printf(": %zu parameters, %zu in tensors the model does not read", params, total - params);
    fputc('\n', stdout);
    for (int i = 0; i < m->n_tensors; i++) {
        const TfTensor *t = &m->tensors[i];
        printf("  %-36s ", t->name);
        print_shape(t);
        printf(" %zu%s\n", t->nelem,
               uses[i] ? "" : "  unused (e.g. optimizer state)");
    }
}

/* "parameters: 30100 stored, 4432 non-zero, 96 distinct non-zero values"
 * and the FLOP of one token's pass (model.h); -1 when memory ran out. */
static int print_counts(const TfModel *m) {
    TfParamCounts c;
    TfError err = {""};
    if (model_param_counts(m, &c, &err) < 0) {
        fprintf(stderr, "tfinfo: %s\n", err.msg);
        return -1;
    }
    TfTokenFlops f;
    model_token_flops(m, &f);
    printf("parameters: %zu stored, %zu non-zero, %zu distinct non-zero values\n", c.stored,
           c.nonzero, c.distinct);
    printf("FLOP per token: %.0f (every stored weight), %.0f (non-zero weights), + %.0f per "
           "position attended\n", f.dense, f.nonzero, f.per_position);
    return 0;
}

static void print_source(const TfModel *m) {
    if (!m->source) {
        printf("\nsource: none embedded\n");
        return;
    }
    printf("\nsource: %s\n", m->source_name ? m->source_name : "(unnamed)");
    const char *s = m->source;
    for (int line = 1; *s; line++) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        printf("%4d | %.*s\n", line, (int)n, s);
        s += n + (e ? 1 : 0);
    }
}

int main(int argc, char **argv) {
    const char *weights = NULL;
    enum { OPT_VERSION = 256 };
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                              {"version", no_argument, NULL, OPT_VERSION},
                                              {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return cli_flush_stdout("tfinfo") < 0 ? CLI_EXIT_SYSTEM : 0;
        case OPT_VERSION:
            cli_version("tfinfo", NULL, NULL, 0, NULL);
            return cli_flush_stdout("tfinfo") < 0 ? CLI_EXIT_SYSTEM : 0;
        default: cli_option_error("tfinfo", c, argv, longopts); return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) weights = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "tfinfo: more than one weight file given\n");
        return CLI_EXIT_USAGE;
    }
    if (!weights) {
        fprintf(stderr, "tfinfo: no weight file given\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cli_expect_weights("tfinfo", weights) < 0) return CLI_EXIT_INPUT;
    TfError err = {""};
    TfModel *m = tfw_read(weights, &err);
    if (!m) {
        fprintf(stderr, "tfinfo: %s\n", err.msg);
        return cli_error_status(&err);
    }

    printf("%s: tfw format %d, d_model %d, %d layer%s, %zu parameters\n", weights,
           TF_FORMAT_VERSION, m->d_model, m->n_layers, m->n_layers == 1 ? "" : "s",
           model_param_count(m));
    if (print_counts(m) < 0) {
        model_free(m);
        return CLI_EXIT_SYSTEM;
    }
    print_vocab(m);
    int sincos = 0; /* compiled programs: position registers, sin/cos embedding */
    for (int r = 0; r < m->n_regs; r++) sincos |= m->regs[r].kind == TF_REG_POSITION;
    if (sincos)
        printf("\nposition encoding: sin, cos of 2*pi*p/%d; max_len %d (embed.position.weight "
               "rows)\n",
               m->period, m->max_len);
    else
        printf("\nposition encoding: embed.position.weight, max_len %d rows (period %d)\n",
               m->max_len, m->period);
    print_registers(m);
    // How many fields name each tensor, counted once (per tensor: quadratic).
    int *uses = malloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1) * sizeof *uses);
    if (!uses) {
        fprintf(stderr, "tfinfo: out of memory\n");
        model_free(m);
        return CLI_EXIT_SYSTEM;
    }
    model_tensor_use_counts(m, uses);
    print_layers(m, uses);
    print_tensors(m, uses);
    free(uses);

    printf("\ngeneration: ");
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        printf("classifier, %d classes read at %s position:", m->n_classes,
               m->classify_at_last ? "the last" : "the first");
        for (int i = 0; i < m->n_classes && m->class_names; i++) printf(" %s", m->class_names[i]);
        fputc('\n', stdout);
    } else if (model_numeric_output(m)) {
        printf("every position: one pass, the number %s holds at each position%s (within %g); "
               "no unembedding\n",
               m->regs[m->output_reg].name, m->bos >= 0 ? " after the BOS" : "",
               m->output_error_bound);
    } else if (m->every_position) {
        printf("every position: one pass, the argmax token at each position%s; unembedding "
               "reads %s\n",
               m->bos >= 0 ? " after the BOS" : "",
               m->output_reg >= 0 ? m->regs[m->output_reg].name : "the whole residual stream");
    } else {
        if (m->stop_token >= 0) {
            char t[TF_TOKEN_TEXT_MAX];
            model_token_text(m, m->stop_token, t);
            printf("until the stop token '%s' (not printed), at most %d tokens", t, m->generate);
        } else {
            printf("%d tokens by default", m->generate);
        }
        printf(", greedy; unembedding reads %s\n",
               m->output_reg >= 0 ? m->regs[m->output_reg].name : "the whole residual stream");
    }
    if (m->bos >= 0) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, m->bos, t);
        printf("beginning of sequence: '%s' (every input starts with it)\n", t);
    }
    // How the file was made, as the metadata records it (docs/weight-format.md).
    if (m->made_by) printf("made by: %s\n", m->made_by);
    if (m->learned) printf("learned model: %s\n", m->learned);
    if (m->n_checks) printf("\nrun-time checks: %d (one value after the layer)\n", m->n_checks);
    for (int i = 0; i < m->n_checks; i++) {
        const TfCheck *c = &m->checks[i];
        printf("  %-14s after layer %d  line %d  %s\n", m->regs[c->reg].name, c->layer, c->line,
               c->op);
    }
    print_source(m);
    model_free(m);
    return cli_flush_stdout("tfinfo") < 0 ? CLI_EXIT_SYSTEM : 0;
}
