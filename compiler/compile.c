/* compile.c: the compiler's stages, in order; the source goes into the model.
 *
 *   text --parse--> TfProgram --names and kinds--> TfIr --values--> TfIr with
 *   value sets, error bounds and general ops' plans (--fuse--> tables
 *   composed --angles--> selections on points) --plans--> each layer's kind
 *   and size, the limits --lower--> TfModel (--schedule--> fewer, wider
 *   layers)
 *
 * The stages in parentheses run at -O for a program of general ops only
 * (compiler/fuse.h, compiler/angles.h, compiler/schedule.h).
 *
 * Each stage reports what it refuses to the TfDiag; the next runs only when
 * none did. A learned model (`model { ... }`) leaves after names and kinds
 * for compiler/learned.c.
 */
#include "compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "angles.h"
#include "checker.h"
#include "diag.h"
#include "stage_dump.h"
#include "fuse.h"
#include "learned.h"
#include "lower.h"
#include "numbers.h"
#include "parse.h"
#include "plans.h"
#include "schedule.h"
#include "values.h"

static char *dup_text(const char *s, size_t len) {
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

static TfModel *learned_model(const TfIr *ir, TfDiag *diag, TfError *err) {
    TfLearnedSpec spec;
    TfModel *m = NULL;
    if (learned_check(ir->model, ir->n_vocab, ir->generate, diag, &spec) == 0) {
        spec.bos = ir->bos;
        char vocab[256]; /* characters: the checker refuses words here */
        for (int i = 0; i < ir->n_vocab; i++) vocab[i] = (char)ir->vocab[i];
        m = learned_build(&spec, vocab, ir->n_vocab, ir->generate, err);
    }
    learned_spec_free(&spec);
    return m;
}

/* The source, its file name and what made the model (`made_by`). */
static int attach_source(TfModel *m, const char *filename, const char *source, size_t len,
                         const TfCompileOptions *opts, const TfIr *ir) {
    const char *base = strrchr(filename, '/');
    base = base ? base + 1 : filename;
    m->source = dup_text(source, len);
    m->source_name = dup_text(base, strlen(base));
    // The registers held as numbers, by name (compiler/numbers.h).
    size_t cap = 64;
    for (int r = 0; opts->as_number && r < opts->n_as_number; r++)
        if (opts->as_number[r]) cap += strlen(ir->regs[r].name) + 3;
    char *numbers = malloc(cap), *made_by = malloc(cap + 200);
    if (!numbers || !made_by) {
        free(numbers), free(made_by);
        return -1;
    }
    size_t at = 0;
    numbers[0] = 0;
    for (int r = 0; opts->as_number && r < opts->n_as_number; r++)
        if (opts->as_number[r])
            at += (size_t)snprintf(numbers + at, cap - at, "%s\"%s\"", at ? "," : ",\"numbers\":[",
                                   ir->regs[r].name);
    if (at) snprintf(numbers + at, cap - at, "]");
    snprintf(made_by, cap + 200,
             "{\"tool\":\"tfc\",\"version\":\"%s\",\"options\":{\"O\":%d%s%s%s%s%s%s%s}}", TF_VERSION,
             opts->opt_level, opts->no_schedule ? ",\"schedule\":false" : "",
             opts->no_fuse && !opts->no_schedule ? ",\"fuse\":false" : "",
             opts->one_hot ? ",\"one_hot\":true" : "",
             opts->all_rows && opts->opt_level > 0 && !opts->no_schedule ? ",\"all_rows\":true" : "",
             opts->no_angles && opts->opt_level > 0 && !opts->no_schedule ? ",\"angles\":false" : "",
             opts->no_reuse && opts->opt_level > 0 && !opts->no_schedule ? ",\"reuse\":false" : "",
             numbers);
    free(numbers);
    m->made_by = made_by;
    return m->source && m->source_name ? 0 : -1;
}

/* Every op a seed op: the validator proves such a program op by op. */
static int seed_only(const TfIr *ir) {
    for (int i = 0; i < ir->n_ops; i++)
        if (ir->ops[i].plan->form != TF_PLAN_SEED) return 0;
    return ir->n_ops > 0;
}

static int general_only(const TfIr *ir) {
    for (int i = 0; i < ir->n_ops; i++)
        if (ir->ops[i].plan->form == TF_PLAN_SEED) return 0;
    return 1;
}

/* Ops side by side, dead columns out (compiler/schedule.h); a program of
 * seed ops only keeps every op and register (its validator's terms). The
 * model one layer per op is kept when the scheduled one would be larger
 * (merged layers lose the sharing of tensors that repeated ops have: the
 * adder's rounds); *undone then says so where made_by can ("schedule":
 * false: without the rewrites, which --no-schedule leaves out too, the
 * same model). Padding heads to one width can make the model larger than
 * its plan: the limit is checked again. */
static TfModel *schedule(TfModel *m, const TfIr *ir, const TfCompileOptions *opts,
                         size_t max_params, int rewrite, int *undone, TfDiag *diag,
                         TfError *err) {
    int flags = seed_only(ir) ? TF_SCHED_KEEP : opts->no_reuse ? 0 : TF_SCHED_REUSE;
    TfModel *s = schedule_model(m, flags, err);
    if (s && model_param_count(s) > model_param_count(m)) {
        model_free(s);
        *undone = !rewrite;
        return m;
    }
    model_free(m);
    if (s && model_param_count(s) > max_params) {
        diag_file_error(diag,
                        "the scheduled model has %zu parameters, more than the limit of %zu "
                        "(--max-params=N raises it, --no-schedule keeps one layer per op)",
                        model_param_count(s), max_params);
        model_free(s);
        return NULL;
    }
    return s;
}

/* The program compiled again with options o (its diagnostics counted, not
 * printed: the first compilation reported them), and the smaller of that
 * model and m kept; a tie, or a second compilation that fails (out of
 * memory), keeps m. o.rows_settled: the second compilation makes no
 * comparison of its own with all_rows. */
static TfModel *smaller_of(TfModel *m, const char *filename, const char *source, size_t len,
                           TfCompileOptions o) {
    o.rows_settled = 1;
    int n_errors = 0;
    TfError e2 = {""};
    TfModel *u = compile_source_opts(filename, source, len, &o, NULL, &n_errors, &e2);
    if (u && model_param_count(u) < model_param_count(m)) {
        model_free(m);
        return u; // its source and made_by ("fuse":false, "all_rows":true) attached already
    }
    model_free(u);
    return m;
}

/* Fusion composes a table into each table that reads it, so a large table
 * read by two Maps is copied into both, and the copies can outweigh what the
 * compositions save (compiler/fuse.h): the program is compiled again
 * without fusion and the smaller model kept (the fused one on a tie). */
static TfModel *smaller_unfused(TfModel *m, const char *filename, const char *source, size_t len,
                                const TfCompileOptions *opts) {
    TfCompileOptions o = *opts;
    o.no_fuse = 1;
    return smaller_of(m, filename, source, len, o);
}

/* A selection's head has no row for a query value that picks no key
 * (compiler/lower_general.c, row_live): the row would add 0 to every
 * score. But two heads can share one query tensor, and rows left out of
 * one and not the other make two (most_freq: 2,313 parameters more): the
 * program is compiled again with every row and the smaller model kept (the
 * one without the rows on a tie). */
static TfModel *smaller_with_all_rows(TfModel *m, const char *filename, const char *source,
                                      size_t len, const TfCompileOptions *opts) {
    TfCompileOptions o = *opts;
    o.all_rows = 1;
    return smaller_of(m, filename, source, len, o);
}

/* Terms compared on angles add four columns each and take their one-hots'
 * columns away only where nothing else reads those (compiler/angles.h):
 * the program is compiled again without them and the smaller model kept
 * (the one with angles on a tie). */
static TfModel *smaller_without_angles(TfModel *m, const char *filename, const char *source,
                                       size_t len, const TfCompileOptions *opts) {
    TfCompileOptions o = *opts;
    o.no_angles = 1;
    return smaller_of(m, filename, source, len, o);
}

/* *m replaced by u when u is smaller (a tie keeps *m); the other freed.
 * 1 when u was kept. */
static int keep_smaller(TfModel **m, TfModel *u) {
    if (u && model_param_count(u) < model_param_count(*m)) {
        model_free(*m);
        *m = u;
        return 1;
    }
    model_free(u);
    return 0;
}

/* The program compiled with the registers as[r] != 0 held as numbers
 * (NULL when it does not compile so). */
static TfModel *as_numbers(const char *filename, const char *source, size_t len, TfCompileOptions o,
                           const unsigned char *as, int n_regs) {
    o.as_number = as;
    o.n_as_number = n_regs;
    int n_errors = 0;
    TfError e2 = {""};
    return compile_source_opts(filename, source, len, &o, NULL, &n_errors, &e2);
}

/* Registers of numbers held as numbers (compiler/numbers.h), each choice
 * compiled in full (its own fusion, rows and angles), the smallest model
 * kept (m, all one-hot, on a tie). Tried: all of the groups at once; each
 * group alone; of three groups or more, each with one group left out
 * (add_decimal: its output cannot be a number, its digits can only with
 * their sum); each group in turn on top of those that made the model
 * smaller before it.
 * Diagnostics are counted, not printed. */
static TfModel *held_as_numbers(TfModel *m, const char *filename, const char *source, size_t len,
                                const TfCompileOptions *opts, const int *group, int n_groups,
                                int n_regs) {
    unsigned char *as = calloc((size_t)n_regs, 1), *step = calloc((size_t)n_regs, 1);
    if (!as || !step) {
        free(as), free(step);
        return m;
    }
    size_t step_n = model_param_count(m); // the forward steps' model so far: all one-hot
    TfModel *stepped = NULL;
    for (int r = 0; n_groups > 1 && r < n_regs; r++) as[r] = group[r] >= 0;
    if (n_groups > 1) keep_smaller(&m, as_numbers(filename, source, len, *opts, as, n_regs));
    for (int g = 0; n_groups > 1 && g < n_groups; g++) {
        for (int r = 0; r < n_regs; r++) as[r] = group[r] == g;
        keep_smaller(&m, as_numbers(filename, source, len, *opts, as, n_regs));
        for (int r = 0; n_groups > 2 && r < n_regs; r++) as[r] = group[r] >= 0 && group[r] != g;
        if (n_groups > 2) keep_smaller(&m, as_numbers(filename, source, len, *opts, as, n_regs));
    }
    for (int g = 0; g < n_groups; g++) {
        for (int r = 0; r < n_regs; r++) as[r] = step[r] || group[r] == g;
        TfModel *u = as_numbers(filename, source, len, *opts, as, n_regs);
        if (u && model_param_count(u) < step_n) {
            model_free(stepped);
            stepped = u;
            step_n = model_param_count(u);
            memcpy(step, as, (size_t)n_regs);
        } else {
            model_free(u);
        }
    }
    if (stepped) keep_smaller(&m, stepped);
    free(as), free(step);
    return m;
}

/* tfc --dump=STAGE: prints what the stage made when it is the one asked
 * for; 1 when it printed (the pipeline stops). */
static int dump_at(const TfCompileOptions *opts, int stage, const TfProgram *prog,
                   const TfIr *ir, const TfPlans *plans, const TfModel *m) {
    if (opts->dump != stage) return 0;
    FILE *f = opts->dump_out ? opts->dump_out : stdout;
    switch (stage) {
    case TF_DUMP_AST: ast_print(f, prog); break;
    case TF_DUMP_IR: dump_ir(f, ir); break;
    case TF_DUMP_PLANS: dump_plans(f, ir, plans); break;
    case TF_DUMP_LAYERS: dump_layers(f, m); break;
    }
    return 1;
}

/* A learned model (`model { ... }`) has no ops to analyse or plan: its
 * --dump=ir and --dump=plans print its registers (dump_ir), --dump=layers
 * the model. */
static TfModel *learned_stages(const TfIr *ir, const TfCompileOptions *opts, TfDiag *diag,
                               TfError *err) {
    if (opts->dump == TF_DUMP_IR || opts->dump == TF_DUMP_PLANS) {
        dump_ir(opts->dump_out ? opts->dump_out : stdout, ir);
        return NULL;
    }
    return learned_model(ir, diag, err);
}

TfModel *compile_source_opts(const char *filename, const char *source, size_t len,
                             const TfCompileOptions *opts, FILE *diag_out, int *n_errors,
                             TfError *err) {
    size_t max_params = opts->max_params ? opts->max_params : TF_DEFAULT_MAX_PARAMS;
    TfDiag diag;
    diag_init(&diag, filename, source, len, diag_out);
    *n_errors = 0;
    tf_error_set(err, "%s", "");
    TfModel *m = NULL;
    TfIr *ir = NULL;
    TfPlans plans = {0};
    int fused = 0, angled = 0, n_declared = 0, n_groups = 0, *group = NULL, unscheduled = 0;

    // 1. Parse. A program with syntax errors is not checked further: its
    //    missing statements would only produce follow-on errors.
    TfProgram *prog = tf_parse(source, len, &diag);
    if (!prog) {
        tf_error_set(err, "out of memory while parsing");
        return NULL;
    }
    if (diag.n_errors || dump_at(opts, TF_DUMP_AST, prog, NULL, NULL, NULL)) goto done;
    // 2. Names and kinds: declarations, op signatures, `repeat`.
    ir = check_program(prog, &diag);
    if (!ir && diag.n_errors == 0) tf_error_set(err, "out of memory");
    if (!ir || diag.n_errors) goto done;
    n_declared = ir->n_regs;
    if (opts->as_number) numbers_apply(ir, opts->as_number, opts->n_as_number);
    if (ir->model) {
        m = learned_stages(ir, opts, &diag, err);
    } else {
        // 3. One value analysis over every op.
        if (values_analyze(ir, opts->opt_level, &diag) < 0) {
            tf_error_set(err, "out of memory");
            goto done;
        }
        if (diag.n_errors) goto done;
        // 3b. MLP fusion: consecutive tables composed (a scheduled program
        //     of general ops: `rewrite`).
        int scheduled = opts->opt_level > 0 && !opts->no_schedule;
        int rewrite = scheduled && general_only(ir);
        // Which registers could be held as numbers (tried at the end).
        // Not in a second compilation that settles rows and angles (the
        // first tries the numbers on its final model).
        if (rewrite && !opts->one_hot && !opts->as_number && !opts->rows_settled &&
            opts->dump == TF_DUMP_NONE) {
            group = malloc((size_t)n_declared * sizeof *group);
            n_groups = group ? numbers_groups(ir, n_declared, group) : -1;
            if (n_groups < 0) {
                tf_error_set(err, "out of memory");
                goto done;
            }
        }
        fused = rewrite && !opts->no_fuse ? fuse_ops(ir) : 0;
        if (fused < 0) {
            tf_error_set(err, "out of memory");
            goto done;
        }
        // 3c. Selections that pick one key value compared on angles.
        angled = rewrite && !opts->no_angles ? angles_plan(ir) : 0;
        if (angled < 0) {
            tf_error_set(err, "out of memory");
            goto done;
        }
        if (dump_at(opts, TF_DUMP_IR, prog, ir, NULL, NULL)) goto done;
        // 4. Layer plans: what each op becomes, its size, the limits.
        if (plans_make(ir, opts->opt_level, max_params, &diag, &plans) < 0) {
            if (diag.n_errors == 0) tf_error_set(err, "out of memory");
            goto done;
        }
        if (dump_at(opts, TF_DUMP_PLANS, prog, ir, &plans, NULL)) goto done;
        // 5. Lowering: the weights.
        m = lower_program(ir, opts->opt_level, rewrite, opts->all_rows, err);
        // 6. Scheduling: ops side by side, dead columns out.
        if (m && scheduled)
            m = schedule(m, ir, opts, max_params, rewrite, &unscheduled, &diag, err);
        // 7. Fusion pays or is undone: the model as small as unfused.
        if (m && fused > 0 && diag.n_errors == 0 && opts->dump == TF_DUMP_NONE)
            m = smaller_unfused(m, filename, source, len, opts);
        // 8. Rows that pick no key left out only where that is smaller.
        if (m && rewrite && !opts->all_rows && !opts->rows_settled && diag.n_errors == 0 &&
            opts->dump == TF_DUMP_NONE)
            m = smaller_with_all_rows(m, filename, source, len, opts);
        // 9. Angles kept only where they make the model smaller.
        if (m && angled > 0 && !opts->rows_settled && diag.n_errors == 0 &&
            opts->dump == TF_DUMP_NONE)
            m = smaller_without_angles(m, filename, source, len, opts);
        // 10. Registers of numbers in one column where that is smaller than
        //     the model so far, each variant compiled through steps 8 and 9
        //     of its own.
        if (m && n_groups > 0 && diag.n_errors == 0)
            m = held_as_numbers(m, filename, source, len, opts, group, n_groups, n_declared);
    }
    if (m && diag.n_errors == 0 && dump_at(opts, TF_DUMP_LAYERS, prog, ir, NULL, m)) {
        model_free(m);
        m = NULL;
        goto done;
    }
    TfCompileOptions as_made = *opts;
    as_made.no_schedule |= unscheduled;
    if (m && !m->made_by && attach_source(m, filename, source, len, &as_made, ir) < 0) {
        tf_error_set(err, "out of memory");
        model_free(m);
        m = NULL;
    }
done:
    free(group);
    plans_free(&plans);
    check_free(ir);
    ast_free_program(prog);
    diag_finish(&diag);
    *n_errors = diag.n_errors;
    if (*n_errors && m) {
        model_free(m);
        m = NULL;
    }
    return m;
}

TfModel *compile_source(const char *filename, const char *source, size_t len, int opt_level,
                        FILE *diag_out, int *n_errors, TfError *err) {
    TfCompileOptions opts = {.opt_level = opt_level, .dump = TF_DUMP_NONE};
    return compile_source_opts(filename, source, len, &opts, diag_out, n_errors, err);
}
