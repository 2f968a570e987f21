/* stage_dump.h: the program as a stage left it, in text (tfc --dump=STAGE).
 *
 *   ast     the syntax tree (grammar/ast.c's ast_print)
 *   ir      after the value analysis (and, when the program is scheduled, the
 *           fusion): each register's kind, columns, value set, error bound
 *           and writer; each op's source, form and inputs
 *   plans   after the layer plans: each op's plan (its table, staircase,
 *           linear map or selection), the layer it becomes and its size
 *   layers  after lowering and scheduling: each layer's kind, size and parts
 *
 * The text is for people and golden tests (tests/dump_ir.sh), not a format
 * to parse: long value sets and tables are cut short with "...".
 *
 * Memory: nothing here allocates beyond the stack; every argument is borrowed.
 */
#ifndef TF_STAGE_DUMP_H
#define TF_STAGE_DUMP_H

#include <stdio.h>

#include "checker.h"
#include "model.h"
#include "plans.h"

typedef enum TfDumpStage {
    TF_DUMP_NONE,
    TF_DUMP_AST,
    TF_DUMP_IR,
    TF_DUMP_PLANS,
    TF_DUMP_LAYERS,
    TF_DUMP_STAGE_COUNT
} TfDumpStage;

/* "", "ast", "ir", "plans", "layers" */
extern const char *const tf_dump_stage_names[];

/* The stage of that name, or -1. */
int dump_stage_find(const char *name);

void dump_ir(FILE *f, const TfIr *ir);
void dump_plans(FILE *f, const TfIr *ir, const TfPlans *plans);
void dump_layers(FILE *f, const TfModel *m);

#endif
