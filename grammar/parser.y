/* parser.y: the grammar of .tfp programs (docs/language.md, "Grammar").
 *
 * A pure parser with locations. Syntax errors are reported with the
 * expected tokens named as they are written in source; the parser recovers
 * at the next ';' (or the '}' closing a repeat), so one run reports several.
 */
%code requires {
#include "ast.h"
#include "diag.h"
#include "lexer_state.h"

#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif

typedef struct TfStmtList { TfStmt *head, *tail; } TfStmtList;
typedef struct TfNameList { TfName *v; int n; } TfNameList;
typedef struct TfArgList { TfArg *v; int n; } TfArgList;
typedef struct TfValueList { TfValue *v; int n; } TfValueList;
typedef struct TfSettingList { TfSetting *v; int n; } TfSettingList;
typedef struct TfExprList { TfExpr **v; int n; } TfExprList;
typedef struct TfEntryList { TfTableEntry *v; int n; } TfEntryList;
typedef struct TfCodeList { int *v; TfLoc *locs; int n; } TfCodeList;

/* What the parse of one program works on. */
typedef struct TfParseCtx {
    TfDiag *diag;
    TfLexState *lex;
    TfProgram *prog;
    int last_error_line, last_error_col; /* one message per error position */
} TfParseCtx;
}

%code provides {
#define YYSTYPE TF_YYSTYPE
#define YYLTYPE TF_YYLTYPE
int tf_yylex(YYSTYPE *yylval, YYLTYPE *yylloc, yyscan_t scanner);
}

%code {
#include <stdlib.h>
#include <string.h>

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                   \
    do {                                                              \
        if (N) {                                                      \
            (Cur).line = YYRHSLOC(Rhs, 1).line;                       \
            (Cur).col = YYRHSLOC(Rhs, 1).col;                         \
            (Cur).end_line = YYRHSLOC(Rhs, N).end_line;               \
            (Cur).end_col = YYRHSLOC(Rhs, N).end_col;                 \
        } else {                                                      \
            (Cur).line = (Cur).end_line = YYRHSLOC(Rhs, 0).end_line;  \
            (Cur).col = (Cur).end_col = YYRHSLOC(Rhs, 0).end_col + 1; \
        }                                                             \
    } while (0)

static void yyerror(YYLTYPE *loc, yyscan_t scanner, TfParseCtx *ctx, const char *msg);
static TfStmtList list_add(TfStmtList l, TfStmt *s);
static int names_add(TfNameList *l, TfName n);
static int args_add(TfArgList *l, TfArg a);
static void free_args(TfArgList *l);
static void free_names(TfNameList *l);
static int values_add(TfValueList *l, TfValue v);
static void free_values(TfValueList *l);
static int settings_add(TfSettingList *l, TfSetting st);
static void free_settings(TfSettingList *l);
static TfName make_name(char *text, TfLoc loc);
static TfArg make_arg(TfName name, TfExpr *e, TfLoc loc);
static TfExpr *new_expr(TfExprKind kind, TfLoc loc);
static TfExpr *binary(int op, TfExpr *a, TfExpr *b, TfLoc loc);
static TfExpr *slice(TfExpr *x, TfExpr *start, TfExpr *stop, TfExpr *step, TfLoc loc);
static TfExpr *method(TfExpr *self, TfName name, TfExprList args, TfLoc loc);
static int exprs_add(TfExprList *l, TfExpr *e);
static void free_exprs(TfExprList *l);
static int entries_add(TfEntryList *l, TfTableEntry e);
static void free_entries(TfEntryList *l);
static int string_token(TfParseCtx *ctx, TfLexString *s, TfLoc loc);
static int codes_add(TfCodeList *l, int code, TfLoc loc);
static int vocab_append(int **codes, TfLoc **locs, int *n, TfCodeList *more);
#define NEW_EXPR(var, kind, loc) \
    do { if (!((var) = new_expr((kind), (loc)))) YYNOMEM; } while (0)
#define NEW_STMT(var, kind, loc) \
    do { if (!((var) = ast_new_stmt((kind), (loc)))) YYNOMEM; } while (0)
}

%define api.pure full
%define api.prefix {tf_yy}
%define api.location.type {TfLoc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {yyscan_t scanner}
%parse-param {TfParseCtx *ctx}

%initial-action {
    @$.line = @$.end_line = 1;
    @$.col = @$.end_col = 1;
}

%union {
    char *str;
    long num;
    TfLexString *string;
    TfStmt *stmt;
    TfStmtList list;
    TfNameList names;
    TfArgList args;
    TfArg arg;
    TfName name;
    TfDeclKind decl;
    double real;
    TfValue value;
    TfValueList values;
    TfSetting setting;
    TfSettingList settings;
    TfExpr *expr;
    TfExprList exprs;
    TfEntryList entries;
    TfTableEntry entry;
    TfCodeList codes;
}

%token KW_VOCAB "vocab" KW_PERIOD "period" KW_POSITION "position" KW_TOKEN "token"
%token KW_SCALAR "scalar" KW_OUTPUT "output" KW_GENERATE "generate" KW_REPEAT "repeat"
%token KW_MODEL "model" KW_CAT "cat" KW_NUM "num" KW_BOS "bos" KW_MAXLEN "maxlen"
%token KW_UNTIL "until" KW_AND "and" KW_OR "or" KW_NOT "not" KW_TRUE "true" KW_IN "in"
%token ARROW "->" FAT_ARROW "=>" EQ "==" NE "!=" LE "<=" GE ">=" POW "**"
%token <str> IDENT "identifier"
%token <num> INT "integer"
%token <num> CHAR "character literal"
%token <string> STRING "string literal"
%token <real> NUMBER "number"

%type <list> items body
%type <stmt> item body_item op_stmt call repeat
%type <names> names
%type <args> args args_opt
%type <arg> arg
%type <name> dest_opt
%type <decl> decl_kind

%type <value> value
%type <values> values
%type <setting> setting
%type <settings> settings
%type <expr> expr primary key
%type <expr> slice_part
%type <exprs> expr_list key_list args_list
%type <entries> entries
%type <entry> entry
%type <names> input_names
%type <num> token_lit
%type <codes> token_list vocab_outputs

%right '?' ':'
%left "or"
%left "and"
%right "not"
%nonassoc "==" "!=" '<' "<=" '>' ">=" "in"
%left '+' '-'
%left '*' '/' '%'
%right UNARY
%right "**"
%nonassoc NAME      /* a bare name before '.': the '.' belongs to it (k.x, x.lower()) */
%left '.' '['

%destructor { free($$); } <str>
%destructor { if ($$) { free($$->bytes); free($$->locs); free($$); } } <string>
%destructor { ast_free_stmts($$); } <stmt>
%destructor { ast_free_stmts($$.head); } <list>
%destructor { free_names(&$$); } <names>
%destructor { free_args(&$$); } <args>
%destructor { free($$.name.text); ast_free_expr($$.expr); } <arg>
%destructor { free($$.text); } <name>
%destructor { free($$.text); } <value>
%destructor { free_values(&$$); } <values>
%destructor { ast_free_setting(&$$); } <setting>
%destructor { free_settings(&$$); } <settings>
%destructor { ast_free_expr($$); } <expr>
%destructor { free_exprs(&$$); } <exprs>
%destructor { free_entries(&$$); } <entries>
%destructor { free($$.v); free($$.locs); } <codes>
%destructor {
    for (int i = 0; i < $$.n_keys; i++) ast_free_expr($$.keys[i]);
    free($$.keys);
    ast_free_expr($$.value);
} <entry>

%%

program
    : items                         { ctx->prog->stmts = $1.head; }
    ;

items
    : %empty                        { $$ = (TfStmtList){NULL, NULL}; }
    | items item                    { $$ = list_add($1, $2); }
    ;

item
    : "vocab" STRING vocab_outputs ';' {
        NEW_STMT($$, TF_STMT_VOCAB, @$);
        $$->vocab_len = $2->len;
        $$->vocab_locs = $2->locs;
        $$->vocab_codes = malloc((size_t)($2->len > 0 ? $2->len : 1) * sizeof(int));
        int ascii = 1;
        for (int i = 0; $$->vocab_codes && i < $2->len; i++) {
            $$->vocab_codes[i] = (unsigned char)$2->bytes[i];
            if (($2->bytes[i] & 0x80) && ascii) {
                ascii = 0;
                diag_error(ctx->diag, $2->locs[i],
                           "a vocabulary string is one token a byte, ASCII only");
                diag_hint(ctx->diag, "list a token of several bytes: vocab [\"^\", \"a\", ...]");
            }
        }
        free($2->bytes);
        free($2);
        if (!$$->vocab_codes) YYNOMEM;
        $$->vocab_n_out = $3.n;
        if (vocab_append(&$$->vocab_codes, &$$->vocab_locs, &$$->vocab_len, &$3) < 0) YYNOMEM;
    }
    | "vocab" '[' token_list ']' vocab_outputs ';' {
        NEW_STMT($$, TF_STMT_VOCAB, @$);
        $$->vocab_codes = $3.v;
        $$->vocab_locs = $3.locs;
        $$->vocab_len = $3.n;
        $$->vocab_list = 1;
        $3 = (TfCodeList){NULL, NULL, 0};
        $$->vocab_n_out = $5.n;
        if (vocab_append(&$$->vocab_codes, &$$->vocab_locs, &$$->vocab_len, &$5) < 0) YYNOMEM;
    }
    | "period" INT ';' {
        NEW_STMT($$, TF_STMT_PERIOD, @$);
        $$->value = $2;
        $$->value_loc = @2;
    }
    | decl_kind names ';' {
        NEW_STMT($$, TF_STMT_DECL, @$);
        $$->decl_kind = $1;
        $$->names = $2.v;
        $$->n_names = $2.n;
    }
    | "output" IDENT ';' {
        NEW_STMT($$, TF_STMT_OUTPUT, @$);
        $$->dest = make_name($2, @2);
    }
    | "output" IDENT IDENT IDENT "position" ';' {
        int ok = strcmp($3, "at") == 0 && strcmp($4, "every") == 0;
        free($3);
        free($4);
        if (!ok) {
            diag_error(ctx->diag, @3, "expected ';' or 'at every position' after the output register");
            free($2);
            $$ = NULL;
        } else {
            NEW_STMT($$, TF_STMT_OUTPUT, @$);
            $$->dest = make_name($2, @2);
            $$->every_position = 1;
        }
    }
    | "generate" INT ';' {
        NEW_STMT($$, TF_STMT_GENERATE, @$);
        $$->value = $2;
        $$->value_loc = @2;
    }
    | "generate" "until" token_lit ';' {
        NEW_STMT($$, TF_STMT_GENERATE, @$);
        $$->ch = (int)$3;
        $$->ch_loc = @3;
    }
    | "generate" INT "until" token_lit ';' {
        NEW_STMT($$, TF_STMT_GENERATE, @$);
        $$->value = $2;
        $$->value_loc = @2;
        $$->ch = (int)$4;
        $$->ch_loc = @4;
    }
    | "bos" token_lit ';' {
        NEW_STMT($$, TF_STMT_BOS, @$);
        $$->ch = (int)$2;
        $$->ch_loc = @2;
    }
    | "maxlen" INT ';' {
        NEW_STMT($$, TF_STMT_MAXLEN, @$);
        $$->value = $2;
        $$->value_loc = @2;
    }
    | "model" '{' settings '}' {
        NEW_STMT($$, TF_STMT_MODEL, @$);
        $$->settings = $3.v;
        $$->n_settings = $3.n;
    }
    | op_stmt
    | repeat
    | error ';'                     { $$ = NULL; yyerrok; }
    ;

/* model { key value, value ...; ... } */
settings
    : %empty                        { $$ = (TfSettingList){NULL, 0}; }
    | settings setting {
        $$ = $1;
        $1 = (TfSettingList){NULL, 0};
        if (settings_add(&$$, $2) < 0) YYNOMEM;
    }
    | settings error ';'            { $$ = $1; $1 = (TfSettingList){NULL, 0}; yyerrok; }
    ;

setting
    : IDENT values ';' {
        memset(&$$, 0, sizeof $$);
        $$.key = make_name($1, @1);
        $$.values = $2.v;
        $$.n_values = $2.n;
        $$.loc = @$;
    }
    ;

values
    : value {
        $$ = (TfValueList){NULL, 0};
        if (values_add(&$$, $1) < 0) YYNOMEM;
    }
    | values ',' value {
        $$ = $1;
        $1 = (TfValueList){NULL, 0};
        if (values_add(&$$, $3) < 0) YYNOMEM;
    }
    | values value {
        $$ = $1;
        $1 = (TfValueList){NULL, 0};
        if (values_add(&$$, $2) < 0) YYNOMEM;
    }
    ;

value
    : IDENT {
        memset(&$$, 0, sizeof $$);
        $$.kind = TF_VALUE_NAME; $$.loc = @1; $$.text = $1;
    }
    | INT {
        memset(&$$, 0, sizeof $$);
        $$.kind = TF_VALUE_INT; $$.loc = @1; $$.ival = $1; $$.number = (double)$1;
    }
    | NUMBER {
        memset(&$$, 0, sizeof $$);
        $$.kind = TF_VALUE_NUMBER; $$.loc = @1; $$.number = $1;
    }
    | STRING {
        memset(&$$, 0, sizeof $$);
        $$.kind = TF_VALUE_STRING;
        $$.loc = @1;
        $$.text = malloc((size_t)$1->len + 1);
        if ($$.text) {
            if ($1->len > 0) memcpy($$.text, $1->bytes, (size_t)$1->len); // none when unterminated
            $$.text[$1->len] = '\0';
        }
        free($1->bytes);
        free($1->locs);
        free($1);
        if (!$$.text) YYNOMEM;
    }
    ;

decl_kind
    : "position"                    { $$ = TF_DECL_POSITION; }
    | "token"                       { $$ = TF_DECL_TOKEN; }
    | "scalar"                      { $$ = TF_DECL_SCALAR; }
    | "cat"                         { $$ = TF_DECL_CAT; }
    | "num"                         { $$ = TF_DECL_NUM; }
    ;

names
    : IDENT {
        $$ = (TfNameList){NULL, 0};
        if (names_add(&$$, make_name($1, @1)) < 0) YYNOMEM;
    }
    | names ',' IDENT {
        $$ = $1;
        $1 = (TfNameList){NULL, 0};
        if (names_add(&$$, make_name($3, @3)) < 0) YYNOMEM;
    }
    ;

/* repeat N { ops and repeats } */
repeat
    : "repeat" INT '{' body '}' {
        NEW_STMT($$, TF_STMT_REPEAT, @$);
        $$->value = $2;
        $$->value_loc = @2;
        $$->body = $4.head;
    }
    ;

body
    : %empty                        { $$ = (TfStmtList){NULL, NULL}; }
    | body body_item                { $$ = list_add($1, $2); }
    ;

body_item
    : op_stmt
    | repeat
    | error ';'                     { $$ = NULL; yyerrok; }
    ;

/* [label:] Op(args) [-> dest]; */
op_stmt
    : call ';'                      { $$ = $1; $$->loc = @$; }
    | IDENT ':' call ';' {
        $$ = $3;
        $$->label = make_name($1, @1);
        $$->loc = @$;
    }
    ;

call
    : IDENT '(' args_opt ')' dest_opt {
        NEW_STMT($$, TF_STMT_OP, @$);
        $$->op = make_name($1, @1);
        $$->args = $3.v;
        $$->n_args = $3.n;
        $$->dest = $5;
    }
    ;

args_opt
    : %empty                        { $$ = (TfArgList){NULL, 0}; }
    | args
    ;

args
    : arg {
        $$ = (TfArgList){NULL, 0};
        if (args_add(&$$, $1) < 0) YYNOMEM;
    }
    | args ',' arg {
        $$ = $1;
        $1 = (TfArgList){NULL, 0};
        if (args_add(&$$, $3) < 0) YYNOMEM;
    }
    ;

/* An argument is an expression, or a name and an expression; the checker
 * says which shape a seed op's argument has (a name, a token, `reg + n`,
 * `reg: n`). */
arg
    : expr                          { $$ = make_arg((TfName){NULL, @1}, $1, @$); }
    | IDENT ':' expr                { $$ = make_arg(make_name($1, @1), $3, @$); }
    ;

expr
    : primary
    | '-' expr %prec UNARY {
        if ($2->kind == TF_EXPR_INT && !$2->op) {
            $$ = $2;
            $$->ival = -$$->ival;
            $$->op = '-'; /* a signed literal */
            $$->loc = @$;
        } else if ($2->kind == TF_EXPR_REAL) {
            $$ = $2;
            $$->real = -$$->real;
            $$->loc = @$;
        } else {
            NEW_EXPR($$, TF_EXPR_UNARY, @$);
            $$->op = TF_EX_NEG;
            $$->a = $2;
        }
    }
    | '+' expr %prec UNARY {
        $$ = $2;
        if ($$->kind == TF_EXPR_INT && !$$->op) $$->op = '+';
        $$->loc = @$;
    }
    | "not" expr {
        NEW_EXPR($$, TF_EXPR_UNARY, @$);
        $$->op = TF_EX_NOT;
        $$->a = $2;
    }
    | expr '+' expr                 { if (!($$ = binary('+', $1, $3, @$))) YYNOMEM; }
    | expr '-' expr                 { if (!($$ = binary('-', $1, $3, @$))) YYNOMEM; }
    | expr '*' expr                 { if (!($$ = binary('*', $1, $3, @$))) YYNOMEM; }
    | expr '/' expr                 { if (!($$ = binary('/', $1, $3, @$))) YYNOMEM; }
    | expr '%' expr                 { if (!($$ = binary('%', $1, $3, @$))) YYNOMEM; }
    | expr "**" expr                { if (!($$ = binary(TF_EX_POW, $1, $3, @$))) YYNOMEM; }
    | expr "==" expr                { if (!($$ = binary(TF_EX_EQ, $1, $3, @$))) YYNOMEM; }
    | expr "!=" expr                { if (!($$ = binary(TF_EX_NE, $1, $3, @$))) YYNOMEM; }
    | expr '<' expr                 { if (!($$ = binary('<', $1, $3, @$))) YYNOMEM; }
    | expr "<=" expr                { if (!($$ = binary(TF_EX_LE, $1, $3, @$))) YYNOMEM; }
    | expr '>' expr                 { if (!($$ = binary('>', $1, $3, @$))) YYNOMEM; }
    | expr ">=" expr                { if (!($$ = binary(TF_EX_GE, $1, $3, @$))) YYNOMEM; }
    | expr "and" expr               { if (!($$ = binary(TF_EX_AND, $1, $3, @$))) YYNOMEM; }
    | expr "or" expr                { if (!($$ = binary(TF_EX_OR, $1, $3, @$))) YYNOMEM; }
    | expr "in" expr                { if (!($$ = binary(TF_EX_IN, $1, $3, @$))) YYNOMEM; }
    | expr "not" "in" expr %prec "in" { if (!($$ = binary(TF_EX_NOT_IN, $1, $4, @$))) YYNOMEM; }
    | expr '?' expr ':' expr {
        NEW_EXPR($$, TF_EXPR_COND, @$);
        $$->a = $1;
        $$->b = $3;
        $$->c = $5;
    }
    ;

primary
    : INT                           { NEW_EXPR($$, TF_EXPR_INT, @$); $$->ival = $1; }
    | NUMBER                        { NEW_EXPR($$, TF_EXPR_REAL, @$); $$->real = $1; }
    | CHAR                          { NEW_EXPR($$, TF_EXPR_CHAR, @$); $$->ch = (int)$1; }
    | STRING {
        int code;
        if ($1->len == 0 && !$1->bad) { /* in an expression a string may be empty: Python's "" */
            free($1->bytes), free($1->locs), free($1);
            code = ast_token_code(ctx->prog, "", 0);
            if (code < 0) code = -2;
        } else {
            code = string_token(ctx, $1, @1);
        }
        $1 = NULL;
        if (code == -2) YYNOMEM;
        if (code < 0) YYERROR;
        NEW_EXPR($$, TF_EXPR_CHAR, @$);
        $$->ch = code;
    }
    | "true"                        { NEW_EXPR($$, TF_EXPR_TRUE, @$); }
    | IDENT %prec NAME              { NEW_EXPR($$, TF_EXPR_NAME, @$); $$->name = make_name($1, @1); }
    | IDENT '.' IDENT {
        int side = strcmp($1, "k") == 0 ? 'k' : strcmp($1, "q") == 0 ? 'q' : 0;
        if (!side)
            diag_error(ctx->diag, @1,
                       "'%s.' names neither side of a selection: write k.%s (the key position) "
                       "or q.%s (the query position)", $1, $3, $3);
        free($1);
        NEW_EXPR($$, TF_EXPR_FIELD, @$);
        $$->side = side ? side : 'k';
        $$->name = make_name($3, @3);
    }
    | IDENT '(' expr_list ')' {
        NEW_EXPR($$, TF_EXPR_CALL, @$);
        $$->name = make_name($1, @1);
        $$->args = $3.v;
        $$->n_args = $3.n;
    }
    | '(' expr ')'                  { $$ = $2; $$->loc = @$; if ($$->kind == TF_EXPR_INT) $$->op = 0; }
    /* Python's strings: x[i], x[a:b], x[a:b:c] (any part may be left out),
     * x.lower(), k.x.upper(), "".join(sorted(x)). */
    | primary '[' expr ']' {
        NEW_EXPR($$, TF_EXPR_INDEX, @$);
        $$->a = $1;
        $$->b = $3;
    }
    | primary '[' slice_part ':' slice_part ']' {
        if (!($$ = slice($1, $3, $5, NULL, @$))) YYNOMEM;
    }
    | primary '[' slice_part ':' slice_part ':' slice_part ']' {
        if (!($$ = slice($1, $3, $5, $7, @$))) YYNOMEM;
    }
    | IDENT '.' IDENT '(' args_list ')' {
        TfExpr *self = new_expr(TF_EXPR_NAME, @1);
        if (!self) { free($1); free($3); free_exprs(&$5); YYNOMEM; }
        self->name = make_name($1, @1);
        if (!($$ = method(self, make_name($3, @3), $5, @$))) YYNOMEM;
    }
    | primary '.' IDENT '(' args_list ')' {
        if (!($$ = method($1, make_name($3, @3), $5, @$))) YYNOMEM;
    }
    | '[' input_names ':' entries ']' {
        NEW_EXPR($$, TF_EXPR_TABLE, @$);
        $$->inputs = $2.v;
        $$->n_inputs = $2.n;
        $$->entries = $4.v;
        $$->n_entries = $4.n;
    }
    ;

expr_list
    : expr {
        $$ = (TfExprList){NULL, 0};
        if (exprs_add(&$$, $1) < 0) YYNOMEM;
    }
    | expr_list ',' expr {
        $$ = $1;
        $1 = (TfExprList){NULL, 0};
        if (exprs_add(&$$, $3) < 0) YYNOMEM;
    }
    ;

/* A slice's start, stop or step: left out (NULL) or an expression. */
slice_part
    : %empty                        { $$ = NULL; }
    | expr
    ;

/* A method's arguments: none, or expressions. */
args_list
    : %empty                        { $$ = (TfExprList){NULL, 0}; }
    | expr_list
    ;

input_names
    : IDENT {
        $$ = (TfNameList){NULL, 0};
        if (names_add(&$$, make_name($1, @1)) < 0) YYNOMEM;
    }
    | input_names ',' IDENT {
        $$ = $1;
        $1 = (TfNameList){NULL, 0};
        if (names_add(&$$, make_name($3, @3)) < 0) YYNOMEM;
    }
    ;

entries
    : entry {
        $$ = (TfEntryList){NULL, 0};
        if (entries_add(&$$, $1) < 0) YYNOMEM;
    }
    | entries ',' entry {
        $$ = $1;
        $1 = (TfEntryList){NULL, 0};
        if (entries_add(&$$, $3) < 0) YYNOMEM;
    }
    ;

/* key => value; the key is a literal, a parenthesized tuple of literals,
 * or `_` (any other input). */
entry
    : key "=>" expr {
        memset(&$$, 0, sizeof $$);
        $$.loc = @$;
        $$.value = $3;
        if ($1->kind == TF_EXPR_NAME && strcmp($1->name.text, "_") == 0) {
            ast_free_expr($1);
        } else {
            $$.keys = malloc(sizeof *$$.keys);
            if (!$$.keys) { ast_free_expr($1); YYNOMEM; }
            $$.keys[0] = $1;
            $$.n_keys = 1;
        }
    }
    | '(' key ',' key_list ')' "=>" expr {
        memset(&$$, 0, sizeof $$);
        $$.loc = @$;
        $$.value = $7;
        $$.keys = malloc(((size_t)$4.n + 1) * sizeof *$$.keys);
        if (!$$.keys) { ast_free_expr($2); YYNOMEM; }
        $$.keys[0] = $2;
        memcpy($$.keys + 1, $4.v, (size_t)$4.n * sizeof *$$.keys);
        $$.n_keys = $4.n + 1;
        free($4.v);
        $4 = (TfExprList){NULL, 0};
    }
    ;

key_list
    : key {
        $$ = (TfExprList){NULL, 0};
        if (exprs_add(&$$, $1) < 0) YYNOMEM;
    }
    | key_list ',' key {
        $$ = $1;
        $1 = (TfExprList){NULL, 0};
        if (exprs_add(&$$, $3) < 0) YYNOMEM;
    }
    ;

key
    : INT                           { NEW_EXPR($$, TF_EXPR_INT, @$); $$->ival = $1; }
    | '-' INT                       { NEW_EXPR($$, TF_EXPR_INT, @$); $$->ival = -$2; }
    | NUMBER                        { NEW_EXPR($$, TF_EXPR_REAL, @$); $$->real = $1; }
    | '-' NUMBER                    { NEW_EXPR($$, TF_EXPR_REAL, @$); $$->real = -$2; }
    | token_lit                     { NEW_EXPR($$, TF_EXPR_CHAR, @$); $$->ch = (int)$1; }
    | IDENT                         { NEW_EXPR($$, TF_EXPR_NAME, @$); $$->name = make_name($1, @1); }
    ;

/* A token: 'a', or a string naming one ("a" is 'a'; "the" a word). */
token_lit
    : CHAR                          { $$ = $1; }
    | STRING {
        $$ = string_token(ctx, $1, @1);
        $1 = NULL;
        if ($$ == -2) YYNOMEM;
        if ($$ < 0) YYERROR;
    }
    ;

token_list
    : STRING {
        int c = string_token(ctx, $1, @1);
        $1 = NULL;
        if (c == -2) YYNOMEM;
        $$ = (TfCodeList){NULL, NULL, 0};
        if (c >= 0 && codes_add(&$$, c, @1) < 0) YYNOMEM;
    }
    | token_list ',' STRING {
        $$ = $1;
        $1 = (TfCodeList){NULL, NULL, 0};
        int c = string_token(ctx, $3, @3);
        $3 = NULL;
        if (c == -2) YYNOMEM;
        if (c >= 0 && codes_add(&$$, c, @3) < 0) YYNOMEM;
    }
    ;

/* The tokens only outputs print: `vocab [...] output ["None", "not spam"]`. */
vocab_outputs
    : %empty                        { $$ = (TfCodeList){NULL, NULL, 0}; }
    | "output" '[' token_list ']'   { $$ = $3; $3 = (TfCodeList){NULL, NULL, 0}; }
    ;

dest_opt
    : %empty                        { $$ = make_name(NULL, @$); }
    | "->" IDENT                    { $$ = make_name($2, @2); }
    ;

%%

static TfStmtList list_add(TfStmtList l, TfStmt *s) {
    if (!s) return l;
    if (l.tail)
        l.tail->next = s;
    else
        l.head = s;
    l.tail = s;
    return l;
}

/* Lists grow to the next power of two when full (n is 0 or a power of two),
 * so a list of n items costs O(n) copying: 100,000 names are no quadratic path. */
static int list_full(int n) { return (n & (n - 1)) == 0; }
static size_t list_room(int n) { return n ? 2 * (size_t)n : 1; }

static int names_add(TfNameList *l, TfName n) {
    TfName *v = list_full(l->n) ? realloc(l->v, list_room(l->n) * sizeof *v) : l->v;
    if (!v) {
        free(n.text);
        return -1;
    }
    l->v = v;
    v[l->n++] = n;
    return 0;
}

static int args_add(TfArgList *l, TfArg a) {
    TfArg *v = list_full(l->n) ? realloc(l->v, list_room(l->n) * sizeof *v) : l->v;
    if (!v) {
        free(a.name.text);
        ast_free_expr(a.expr);
        return -1;
    }
    l->v = v;
    v[l->n++] = a;
    return 0;
}

static void free_args(TfArgList *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].name.text);
        ast_free_expr(l->v[i].expr);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static int values_add(TfValueList *l, TfValue x) {
    TfValue *v = realloc(l->v, ((size_t)l->n + 1) * sizeof *v);
    if (!v) {
        free(x.text);
        return -1;
    }
    l->v = v;
    v[l->n++] = x;
    return 0;
}

static void free_values(TfValueList *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].text);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static int settings_add(TfSettingList *l, TfSetting st) {
    TfSetting *v = realloc(l->v, ((size_t)l->n + 1) * sizeof *v);
    if (!v) {
        ast_free_setting(&st);
        return -1;
    }
    l->v = v;
    v[l->n++] = st;
    return 0;
}

static void free_settings(TfSettingList *l) {
    for (int i = 0; i < l->n; i++) ast_free_setting(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static void free_names(TfNameList *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].text);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static TfName make_name(char *text, TfLoc loc) {
    TfName n = {text, loc};
    return n;
}

static TfExpr *new_expr(TfExprKind kind, TfLoc loc) {
    TfExpr *e = calloc(1, sizeof *e);
    if (e) {
        e->kind = kind;
        e->loc = loc;
    }
    return e;
}

static TfExpr *binary(int op, TfExpr *a, TfExpr *b, TfLoc loc) {
    TfExpr *e = new_expr(TF_EXPR_BINARY, loc);
    if (!e) {
        ast_free_expr(a);
        ast_free_expr(b);
        return NULL;
    }
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

/* x[start:stop:step] (NULL where left out); takes ownership, NULL when
 * memory ran out. */
static TfExpr *slice(TfExpr *x, TfExpr *start, TfExpr *stop, TfExpr *step, TfLoc loc) {
    TfExpr *e = new_expr(TF_EXPR_SLICE, loc);
    TfExpr **parts = calloc(3, sizeof *parts);
    if (!e || !parts) {
        free(e), free(parts);
        ast_free_expr(x), ast_free_expr(start), ast_free_expr(stop), ast_free_expr(step);
        return NULL;
    }
    e->a = x;
    e->args = parts;
    parts[0] = start, parts[1] = stop, parts[2] = step;
    e->n_args = 3;
    return e;
}

/* self.name(args); takes ownership, NULL when memory ran out. */
static TfExpr *method(TfExpr *self, TfName name, TfExprList args, TfLoc loc) {
    TfExpr *e = new_expr(TF_EXPR_METHOD, loc);
    if (!e) {
        ast_free_expr(self);
        free(name.text);
        free_exprs(&args);
        return NULL;
    }
    e->a = self;
    e->name = name;
    e->args = args.v;
    e->n_args = args.n;
    return e;
}

static int exprs_add(TfExprList *l, TfExpr *e) {
    TfExpr **v = realloc(l->v, ((size_t)l->n + 1) * sizeof *v);
    if (!v) {
        ast_free_expr(e);
        return -1;
    }
    l->v = v;
    v[l->n++] = e;
    return 0;
}

static void free_exprs(TfExprList *l) {
    for (int i = 0; i < l->n; i++) ast_free_expr(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static void free_entry(TfTableEntry *t) {
    for (int k = 0; k < t->n_keys; k++) ast_free_expr(t->keys[k]);
    free(t->keys);
    ast_free_expr(t->value);
}

static int entries_add(TfEntryList *l, TfTableEntry t) {
    TfTableEntry *v = realloc(l->v, ((size_t)l->n + 1) * sizeof *v);
    if (!v) {
        free_entry(&t);
        return -1;
    }
    l->v = v;
    v[l->n++] = t;
    return 0;
}

static void free_entries(TfEntryList *l) {
    for (int i = 0; i < l->n; i++) free_entry(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* An argument as written: `expr`, or `name: expr` (name.text NULL when
 * absent). Takes ownership of both. */
static TfArg make_arg(TfName name, TfExpr *e, TfLoc loc) {
    TfArg a;
    memset(&a, 0, sizeof a);
    a.loc = loc;
    a.name = name;
    a.expr = e;
    return a;
}

/* The code of a string literal used as a token (ast_token_code); frees s.
 * -1 after reporting an empty token or a word holding NUL, -2 when memory
 * ran out. */
static int string_token(TfParseCtx *ctx, TfLexString *s, TfLoc loc) {
    int code = -1;
    if (s->bad)
        ; /* the scanner said why */
    else if (s->len == 0)
        diag_error(ctx->diag, loc, "a token cannot be empty");
    else if (s->len > 1 && memchr(s->bytes, '\0', (size_t)s->len))
        diag_error(ctx->diag, loc, "a token of several characters cannot hold NUL");
    else if (s->len > TF_TOKEN_NAME_MAX)
        diag_error(ctx->diag, loc, "a token of %d bytes, over the limit of %d", s->len,
                   TF_TOKEN_NAME_MAX);
    else if ((code = ast_token_code(ctx->prog, s->bytes, s->len)) < 0)
        code = -2;
    free(s->bytes);
    free(s->locs);
    free(s);
    return code;
}

static int codes_add(TfCodeList *l, int code, TfLoc loc) {
    if ((l->n & (l->n - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        size_t cap = l->n ? 2 * (size_t)l->n : 1;
        int *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        TfLoc *locs = realloc(l->locs, cap * sizeof *locs);
        if (!locs) return -1;
        l->locs = locs;
    }
    l->v[l->n] = code;
    l->locs[l->n++] = loc;
    return 0;
}

/* Appends more's codes and locations to a vocabulary's (more is emptied). */
static int vocab_append(int **codes, TfLoc **locs, int *n, TfCodeList *more) {
    if (more->n == 0) return 0;
    int *v = realloc(*codes, (size_t)(*n + more->n) * sizeof *v);
    if (!v) return -1;
    *codes = v;
    TfLoc *l = realloc(*locs, (size_t)(*n + more->n) * sizeof *l);
    if (!l) return -1;
    *locs = l;
    memcpy(v + *n, more->v, (size_t)more->n * sizeof *v);
    memcpy(l + *n, more->locs, (size_t)more->n * sizeof *l);
    *n += more->n;
    free(more->v);
    free(more->locs);
    *more = (TfCodeList){NULL, NULL, 0};
    return 0;
}

static void yyerror(YYLTYPE *loc, yyscan_t scanner, TfParseCtx *ctx, const char *msg) {
    (void)scanner;
    diag_error(ctx->diag, *loc, "%s", msg);
}

/* How a token kind reads in a message: 'x' for punctuation and keywords,
 * a description for the others. */
static const char *symbol_text(yysymbol_kind_t sym, char *buf, size_t n) {
    switch (sym) {
    case YYSYMBOL_YYEOF: return "end of file";
    case YYSYMBOL_IDENT: return "an identifier";
    case YYSYMBOL_INT: return "an integer";
    case YYSYMBOL_CHAR: return "a character literal";
    case YYSYMBOL_STRING: return "a string literal";
    case YYSYMBOL_NUMBER: return "a number";
    default: break;
    }
    // Keywords and "->" come unquoted, punctuation as ';'.
    const char *name = yysymbol_name(sym);
    if (name[0] == '\'')
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "'%s'", name);
    return buf;
}

/* The source text of a token, quoted, for "before 'repeat'". */
static void token_text(const TfParseCtx *ctx, TfLoc loc, yysymbol_kind_t sym, char *buf, size_t n) {
    const TfDiag *d = ctx->diag;
    if (sym == YYSYMBOL_YYEOF || !d->source) {
        snprintf(buf, n, "end of file");
        return;
    }
    // Find the start of loc.line, then the column.
    size_t pos = 0;
    for (int line = 1; line < loc.line && pos < d->source_len; pos++)
        if (d->source[pos] == '\n') line++;
    pos += (size_t)(loc.col - 1);
    size_t len = loc.end_line == loc.line && loc.end_col >= loc.col ? (size_t)(loc.end_col - loc.col + 1) : 1;
    if (pos >= d->source_len) {
        snprintf(buf, n, "end of file");
        return;
    }
    if (len > d->source_len - pos) len = d->source_len - pos;
    if (len > 40) len = 40;
    snprintf(buf, n, "'%.*s'", (int)len, d->source + pos);
}

/* Tokens that can start an expression, and binary operators. (A string
 * starts one too, where a token literal may stand: yyreport_syntax_error.) */
static int expr_start(yysymbol_kind_t sym) {
    if (sym == YYSYMBOL_IDENT || sym == YYSYMBOL_INT || sym == YYSYMBOL_CHAR ||
        sym == YYSYMBOL_NUMBER || sym == YYSYMBOL_KW_TRUE || sym == YYSYMBOL_KW_NOT)
        return 1;
    const char *name = yysymbol_name(sym);
    return strcmp(name, "'('") == 0 || strcmp(name, "'['") == 0 || strcmp(name, "'-'") == 0 ||
           strcmp(name, "'+'") == 0;
}

static int is_operator(yysymbol_kind_t sym) {
    if (sym == YYSYMBOL_EQ || sym == YYSYMBOL_NE || sym == YYSYMBOL_LE || sym == YYSYMBOL_GE ||
        sym == YYSYMBOL_KW_AND || sym == YYSYMBOL_KW_OR || sym == YYSYMBOL_POW ||
        sym == YYSYMBOL_KW_IN)
        return 1;
    const char *name = yysymbol_name(sym);
    return name[0] == '\'' && name[1] && strchr("+-*/%<>?.", name[1]) && name[2] == '\'';
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, yyscan_t scanner, TfParseCtx *ctx) {
    (void)scanner;
    TfLoc loc = *yypcontext_location(yyctx);
    if (loc.line == ctx->last_error_line && loc.col == ctx->last_error_col) return 0;
    ctx->last_error_line = loc.line;
    ctx->last_error_col = loc.col;
    if (diag_quiet(ctx->diag)) { /* counted, not shown: no need for its text */
        diag_error(ctx->diag, loc, "syntax error");
        return 0;
    }

    yysymbol_kind_t all[YYNTOKENS];
    int n_all = yypcontext_expected_tokens(yyctx, all, YYNTOKENS);
    // Expressions make long lists: the tokens that can start one read as
    // "an expression", and operators that could continue one are left out
    // when the list is long.
    yysymbol_kind_t expected[YYNTOKENS];
    int n = 0, starts_expr = 0, token_lit = 0;
    for (int i = 0; i < n_all; i++) {
        starts_expr += expr_start(all[i]);
        token_lit |= all[i] == YYSYMBOL_CHAR;
    }
    // After an operand, '[' (x[i]) and "not" (not in) continue it: operators then.
    int operand_next = 1;
    for (int i = 0; i < n_all; i++) operand_next &= all[i] != YYSYMBOL_IDENT;
    int lump = starts_expr >= 4 && !operand_next;
    for (int i = 0; i < n_all; i++) {
        if (lump && (expr_start(all[i]) || (token_lit && all[i] == YYSYMBOL_STRING))) continue;
        int continues = operand_next && (all[i] == YYSYMBOL_KW_NOT || strcmp(yysymbol_name(all[i]), "'['") == 0);
        if (n_all > 6 && (is_operator(all[i]) || continues)) continue;
        expected[n++] = all[i];
    }
    yysymbol_kind_t got = yypcontext_token(yyctx);
    char found[64], want[512] = "", one[48];
    token_text(ctx, loc, got, found, sizeof found);
    int semicolon = 0;
    if (lump) snprintf(want, sizeof want, "an expression");
    for (int i = 0; i < n; i++) {
        if (strcmp(yysymbol_name(expected[i]), "';'") == 0) semicolon = 1;
        size_t len = strlen(want);
        snprintf(want + len, sizeof want - len, "%s%s",
                 len == 0 ? "" : i == n - 1 ? " or " : ", ", symbol_text(expected[i], one, sizeof one));
    }
    n += lump;
    // Something missing at the end of a line (a ';', mostly) is reported
    // there, not at the next line's first token.
    TfLoc prev = ctx->lex->prev_end;
    if (semicolon && got != YYSYMBOL_YYEOF && prev.line > 0 && prev.line < loc.line) {
        TfLoc after = {prev.end_line, prev.end_col + 1, prev.end_line, prev.end_col + 1};
        char before[64];
        token_text(ctx, prev, YYSYMBOL_IDENT, before, sizeof before);
        diag_error(ctx->diag, after, "expected %s after %s", want, before);
    } else if (n > 0) {
        diag_error(ctx->diag, loc, "expected %s before %s", want, found);
    } else {
        diag_error(ctx->diag, loc, "unexpected %s", found);
    }
    return 0;
}
