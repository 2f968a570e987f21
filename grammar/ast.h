/* ast.h: the syntax tree of a .tfp program, as the parser builds it.
 *
 * The tree is purely syntactic: op names, register names and argument shapes
 * are checked later (compiler/checker.c). Every node carries the source
 * location it came from, so every later error can point at the text.
 *
 * Memory: a TfProgram owns every node, list and string below it;
 * ast_free_program releases all of it.
 */
#ifndef TF_AST_H
#define TF_AST_H

#include <stddef.h>
#include <stdio.h>

/* A span of source text: 1-based line and column of the first byte, and of
 * the last byte (inclusive). Columns count bytes. */
typedef struct TfLoc {
    int line, col;
    int end_line, end_col;
} TfLoc;

/* An identifier with where it was written. */
typedef struct TfName {
    char *text;
    TfLoc loc;
} TfName;

/* Expressions of the general ops (Map, Aggregate, Count): docs/language.md. */
typedef enum TfExprKind {
    TF_EXPR_INT,    /* 3                     : ival */
    TF_EXPR_REAL,   /* 0.5                   : real */
    TF_EXPR_CHAR,   /* 'a' "a" "cat"           : ch, a token code */
    TF_EXPR_TRUE,   /* true                  */
    TF_EXPR_NAME,   /* a register            : name */
    TF_EXPR_FIELD,  /* k.R or q.R            : side ('k' or 'q'), name (R) */
    TF_EXPR_UNARY,  /* - a, not a            : op, a */
    TF_EXPR_BINARY, /* a + b, a == b, a and b: op, a, b */
    TF_EXPR_COND,   /* c ? a : b             : a (condition), b, c */
    TF_EXPR_CALL,   /* min(a, b)             : name, args */
    TF_EXPR_TABLE,  /* [x, y: (0, 1) => 2, _ => 0]: inputs, entries */
    TF_EXPR_INDEX,  /* x[i]                  : a (x), b (i) */
    TF_EXPR_SLICE,  /* x[a:b:c]              : a (x), args[0..2] (start, stop, step; NULL
                                               where left out), n_args 3 */
    TF_EXPR_METHOD, /* x.lower(), s.join(l)  : a (the receiver), name, args */
    TF_EXPR_KIND_COUNT
} TfExprKind;

/* Operators: the character for one-character ones. */
enum {
    TF_EX_EQ = 256, TF_EX_NE, TF_EX_LE, TF_EX_GE, TF_EX_AND, TF_EX_OR, TF_EX_NOT, TF_EX_NEG,
    TF_EX_POW /* ** */, TF_EX_IN /* in */, TF_EX_NOT_IN /* not in */
};

typedef struct TfExpr TfExpr;

/* One table row: keys (one per input; n_keys 0 for the default `_`). */
typedef struct TfTableEntry {
    TfExpr **keys;
    int n_keys;
    TfExpr *value;
    TfLoc loc;
} TfTableEntry;

struct TfExpr {
    TfExprKind kind;
    TfLoc loc;
    int op;
    long ival;
    double real;
    int ch;
    int side;
    TfName name;
    TfExpr *a, *b, *c;
    TfExpr **args;
    int n_args;
    TfName *inputs;
    int n_inputs;
    TfTableEntry *entries;
    int n_entries;
};

void ast_free_expr(TfExpr *e);
/* Writes e as source text (fully parenthesized); W: the program's words. */
void ast_print_expr(FILE *f, const char *const *W, const TfExpr *e);

/* One op argument as written: an expression, or `name: expression` (an
 * option such as `default: 0`, or a seed op's step `out_pos: -1`). The
 * parser keeps it as it is; the checker says what shape it has
 * (compiler/checker.h, check_arg_shape). */
typedef struct TfArg {
    TfLoc loc;    /* the whole argument */
    TfName name;  /* `name: expression`: the name; text NULL otherwise */
    TfExpr *expr; /* owned, never NULL */
} TfArg;

typedef enum TfStmtKind {
    TF_STMT_VOCAB,    /* vocab "0123456789+= \n";    */
    TF_STMT_PERIOD,   /* period 100;                  */
    TF_STMT_DECL,     /* position a, b;  token t;  scalar s; */
    TF_STMT_OP,       /* [label:] Op(args) [-> dest]; */
    TF_STMT_REPEAT,   /* repeat 4 { ... }             */
    TF_STMT_OUTPUT,   /* output final;                */
    TF_STMT_GENERATE, /* generate 4;                  */
    TF_STMT_MODEL,    /* model { d_model 32; ... }    */
    TF_STMT_BOS,      /* bos '^';                     */
    TF_STMT_MAXLEN,   /* maxlen 17;                   */
    TF_STMT_KIND_COUNT
} TfStmtKind;

typedef enum TfDeclKind {
    TF_DECL_POSITION, TF_DECL_TOKEN, TF_DECL_SCALAR, TF_DECL_CAT, TF_DECL_NUM,
    TF_DECL_KIND_COUNT
} TfDeclKind;

/* A value of a model setting: `relu`, `32`, `0.1`, `"accept"`. */
typedef enum TfValueKind {
    TF_VALUE_NAME,
    TF_VALUE_INT,
    TF_VALUE_NUMBER,
    TF_VALUE_STRING,
    TF_VALUE_KIND_COUNT
} TfValueKind;

typedef struct TfValue {
    TfValueKind kind;
    TfLoc loc;
    char *text;    /* NAME and STRING (NUL-terminated; a STRING holds no NUL) */
    long ival;     /* INT */
    double number; /* INT and NUMBER */
} TfValue;

/* One `key value, value ...;` line of a model block. */
typedef struct TfSetting {
    TfName key;
    TfValue *values;
    int n_values;
    TfLoc loc; /* the whole line */
} TfSetting;

typedef struct TfStmt TfStmt;
struct TfStmt {
    TfStmtKind kind;
    TfLoc loc;     /* the whole statement */
    TfStmt *next;  /* next statement in the same list */

    /* VOCAB: the tokens as codes (TF_TOKEN_WORD), in order, and the location
     * of each: `vocab "ab\n"` gives one per byte (escapes resolved, the
     * location of the character or escape), `vocab ["^", "the"]` one per
     * string. vocab_list: 1 for the list form. The last vocab_n_out of them
     * are output-only tokens (`vocab [...] output ["None"]`): outputs print
     * them, prompts cannot hold them. */
    int *vocab_codes;
    int vocab_len;
    TfLoc *vocab_locs;
    int vocab_list;
    int vocab_n_out;

    /* PERIOD, GENERATE, REPEAT, MAXLEN: the integer and where it was
     * written (GENERATE: 0 when only `until` is given). BOS, and GENERATE
     * with `until`: the token code (ch, ch_loc; ch -1 when absent). */
    long value;
    TfLoc value_loc;
    int ch;
    TfLoc ch_loc;
    /* OUTPUT: 1 for `output R at every position;` */
    int every_position;

    /* DECL */
    TfDeclKind decl_kind;
    TfName *names;
    int n_names;

    /* OP: optional label (label.text NULL when absent), op name, arguments,
     * optional destination (dest.text NULL when absent). */
    TfName label;
    TfName op;
    TfArg *args;
    int n_args;
    TfName dest;

    /* OUTPUT: the register name (stored in dest). */

    /* REPEAT: the body. */
    TfStmt *body;

    /* MODEL: the settings, in source order (checked by compiler/learned.c). */
    TfSetting *settings;
    int n_settings;
};

/* A token literal is a code: 0..255 a one-byte token (the character 'a',
 * or the string "a"), TF_TOKEN_WORD + i the word TfProgram.words[i] (a
 * string literal of two bytes or more: "the", "10", "-1"). Equal texts get
 * equal codes. */
#define TF_TOKEN_WORD 256
#define TF_TOKEN_NAME_MAX 32 /* bytes of a word token (docs/language.md) */

typedef struct TfProgram {
    TfStmt *stmts; /* top-level statements in source order */
    char **words;  /* the words of token literals, each once (NUL-terminated) */
    int n_words;
} TfProgram;

/* The code of the token literal bytes[0..len) (no NUL when len > 1; len 0
 * the empty string of an expression, a word), interning a word; -1 when
 * memory ran out. */
int ast_token_code(TfProgram *p, const char *bytes, int len);
/* A token code as text for messages and dumps, without quotes: a byte as
 * ast_char_text writes it between 'quote's, a word as itself. */
const char *ast_token_text(const char *const *words, int code, int quote, char *buf);

/* Constructors used by the parser; each takes ownership of what it is given. */
TfStmt *ast_new_stmt(TfStmtKind kind, TfLoc loc);
void ast_free_stmts(TfStmt *s);
void ast_free_setting(TfSetting *st); /* its strings and values, not st itself */
void ast_free_program(TfProgram *p);

/* Readable dump of a tree (one statement per line): to f (tfc --dump=ast),
 * or into a new string *out (malloc'd, the caller frees it). */
void ast_print(FILE *f, const TfProgram *p);
void ast_dump(const TfProgram *p, char **out, size_t *len);
/* A character as written in a literal of the language between `quote`s
 * (' or "): a, \n, \', \x01 (buf holds 8 bytes; the result is buf or a
 * constant). The one escaper of .tfp text: messages, dumps. */
const char *ast_char_text(int c, int quote, char *buf);
/* Writes one op argument as source text (its expression fully
 * parenthesized, but for the outermost pair); W: the program's words. */
void ast_print_arg(FILE *f, const char *const *W, const TfArg *a);

extern const char *const tf_stmt_kind_names[];

#endif
