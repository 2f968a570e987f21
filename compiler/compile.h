/* compile.h: the whole compiler as one call, source text -> model.
 *
 * compile_source runs the pipeline of the compiler, stage by stage
 * (compiler/compile.c): parse (grammar/), names and kinds
 * (compiler/checker.c), the value analysis over every op (compiler/values.c),
 * layer plans (compiler/plans.c), lowering (compiler/lower.c), and records the
 * program source in the model. Diagnostics go to diag_out as they are found.
 *
 * Memory: the returned model belongs to the caller (model_free).
 */
#ifndef TF_COMPILE_H
#define TF_COMPILE_H

#include <stdio.h>

#include "model.h"

typedef struct TfCompileOptions {
    int opt_level;     /* 0: seed 001's constructions, to the float; 1: -O (lower.h) */
    size_t max_params; /* refuse a larger model; 0: the default, 2^26 */
    int no_schedule;   /* 1: keep one layer per op, in program order, even at -O
                          (compiler/schedule.h) */
    int no_fuse;       /* 1: at -O, schedule without MLP fusion (compiler/fuse.h); 0: fuse
                          where the model comes out no larger than unfused */
    int one_hot;       /* 1: every `cat` register one-hot; 0: at -O, registers of numbers
                          nothing needs one-hot are held as numbers where the model comes out
                          smaller (compiler/numbers.h) */
    int all_rows;      /* 1: every query value keeps its row in a selection's head; 0: at -O,
                          the rows of values that pick no key are left out where the model
                          comes out smaller (compiler/lower_general.c, row_live) */
    int no_angles;     /* 1: every selection term compares one-hots; 0: at -O, terms that pick
                          one key value compare points on a circle where the model comes out
                          smaller (compiler/angles.h) */
    int no_reuse;      /* 1: at -O, each register keeps its columns to itself; 0: a dead
                          register's columns go to a later one where the model comes out
                          smaller (compiler/schedule.h, step 4) */
    int rows_settled;  /* 1: compile with all_rows as given, no second compilation (the
                          callers that compare models set it for theirs) */
    const unsigned char *as_number; /* those registers (by index) held as numbers, no search;
                                       NULL: search (see one_hot) */
    int n_as_number;
    int dump;          /* a TfDumpStage (compiler/stage_dump.h): print the program after that
                          stage to dump_out and stop (no model); 0: none */
    FILE *dump_out;
} TfCompileOptions;

/* opt_level 0: seed 001's constructions, to the float; 1 (tfc -O, the
 * default): the optimized ones (lower.h). NULL when the program has errors (then *n_errors > 0, all reported) or
 * when lowering failed (then err says why and *n_errors is 0). */
TfModel *compile_source(const char *filename, const char *source, size_t len, int opt_level,
                        FILE *diag_out, int *n_errors, TfError *err);

/* The same with every option. With opts->dump, the program is printed after
 * that stage and NULL returned: *n_errors 0 and err->msg "" when it was
 * printed (a stage that reports errors stops before printing). */
TfModel *compile_source_opts(const char *filename, const char *source, size_t len,
                             const TfCompileOptions *opts, FILE *diag_out, int *n_errors,
                             TfError *err);

#endif
