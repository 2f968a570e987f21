/* ops.c: the op table. Meanings and weights: docs/language.md, "Ops"; each
 * row's last fields name the functions that lower the op (compiler/lower.c)
 * and size its layer (compiler/plans.c). */
#include "ops.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "lower_internal.h"
#include "plans.h"

#define R TF_ACCESS_READ
#define W TF_ACCESS_WRITE
#define REG(kinds, role, access) {TF_PARAM_REG, (kinds), (role), (access)}

const TfOpInfo tf_ops[] = {
    [TF_OP_FIND_AND_STORE] = {"FindAndStore", "find_and_store", TF_LAYER_ATTENTION, 1,
                              {{TF_PARAM_TOKEN_LITERAL, 0, "the token to find", 0}}, 0,
                              TF_KINDS_POSITION, "FindAndStore('c') -> position", 0,
                              {lower_find_and_store, lower_find_and_store_opt},
                              plans_size_find_and_store},
    [TF_OP_GET_RELATIVE_TOKEN] = {"GetRelativeToken", "get_relative_token", TF_LAYER_ATTENTION, 1,
                                  {{TF_PARAM_REG_OFFSET, TF_KINDS_POSITION,
                                    "the position to read at", R}},
                                  0, TF_KINDS_TOKEN, "GetRelativeToken(position + n) -> token", 0,
                                  {lower_get_relative_token, lower_get_relative_token_opt},
                                  plans_size_get_relative_token},
    [TF_OP_MULTIPLY] = {"Multiply", "multiply", TF_LAYER_MLP, 3,
                        {REG(TF_KINDS_TOKEN, "the left digit", R),
                         REG(TF_KINDS_TOKEN, "the right digit", R),
                         REG(TF_KINDS_SCALAR, "the carry", R | W)},
                        0, TF_KINDS_TOKEN, "Multiply(token, token, scalar) -> token", 0,
                        {lower_multiply, lower_multiply_opt}, plans_size_multiply},
    [TF_OP_CLEAR] = {"Clear", "clear", TF_LAYER_MLP, 1,
                     {REG(TF_KINDS_ANY, "a register to clear", W)}, 1, 0,
                     "Clear(register, ...)", 0, {lower_clear, lower_clear_opt}, plans_size_clear},
    [TF_OP_STEP_POSITION] = {"StepPosition", "step_position", TF_LAYER_MLP, 1,
                             {{TF_PARAM_REG_STEP, TF_KINDS_POSITION, "a position to step", R | W}}, 1, 0,
                             "StepPosition(position: n, ...)", 0,
                             {lower_step_position, lower_step_position_opt},
                             plans_size_step_position},
    [TF_OP_DIFF_POS] = {"DiffPos", "diff_pos", TF_LAYER_MLP, 2,
                        {REG(TF_KINDS_POSITION, "the first position", R),
                         REG(TF_KINDS_POSITION, "the second position", R)},
                        0, TF_KINDS_SCALAR, "DiffPos(position, position) -> scalar", 0,
                        {lower_diff_pos, lower_diff_pos_opt}, plans_size_diff_pos},
    [TF_OP_IS_ZERO] = {"IsZero", "is_zero", TF_LAYER_MLP, 1,
                       {REG(TF_KINDS_SCALAR, "the scalar to test", R | W)}, 0, 0, "IsZero(scalar)", 0,
                       {lower_is_zero, lower_is_zero}, plans_size_is_zero}, /* -O: the seed's */
    [TF_OP_COPY_ON_MATCH] = {"CopyOnMatch", "copy_on_match", TF_LAYER_MLP, 2,
                             {REG(TF_KINDS_SCALAR, "the match flag", R),
                              REG(TF_KINDS_TOKEN, "the token to copy", R)},
                             0, TF_KINDS_TOKEN, "CopyOnMatch(scalar, token) -> token", 0,
                             {lower_copy_on_match, lower_copy_on_match_opt},
                             plans_size_copy_on_match},
    [TF_OP_MAP] = {"Map", "map", TF_LAYER_MLP, 1, {{TF_PARAM_EXPR, 0, "the expression", R}}, 0,
                   TF_KINDS_CATEGORICAL | TF_KINDS_SCALAR, "Map(expression) -> cat or num", 1,
                   {NULL, NULL}, plans_size_general},
    [TF_OP_AGGREGATE] = {"Aggregate", "aggregate", TF_LAYER_ATTENTION, 2,
                         {{TF_PARAM_EXPR, 0, "the selection", R}, {TF_PARAM_EXPR, 0, "the value", R}},
                         1, TF_KINDS_CATEGORICAL | TF_KINDS_SCALAR,
                         "Aggregate(k.R == q.S, value[, default: V][, causal]) -> cat or num", 1,
                         {NULL, NULL}, plans_size_general},
    [TF_OP_COUNT_MATCHES] = {"Count", "count", TF_LAYER_ATTENTION, 1,
                             {{TF_PARAM_EXPR, 0, "the selection", R}}, 1, TF_KINDS_CATEGORICAL,
                             "Count(k.R == q.S[, causal]) -> cat", 1,
                             {NULL, NULL}, plans_size_general},
};
static_assert(sizeof tf_ops / sizeof tf_ops[0] == TF_OP_COUNT, "one row per op");

int ops_find(const char *name) {
    for (int i = 0; i < TF_OP_COUNT; i++)
        if (strcmp(tf_ops[i].name, name) == 0) return i;
    return -1;
}

