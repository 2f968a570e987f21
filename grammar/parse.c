/* parse.c: tf_parse, the owner of the scanner and the parser. */
#include "parse.h"

#include <stdlib.h>

#include "lexer_state.h"
#include "parser.tab.h"
#include "lexer.yy.h"

TfProgram *tf_parse(const char *source, size_t len, TfDiag *diag) {
    TfProgram *prog = calloc(1, sizeof *prog);
    if (!prog) return NULL;
    if (len > (size_t)TF_MAX_SOURCE) {
        diag_file_error(diag, "the program is larger than %d bytes", TF_MAX_SOURCE);
        return prog;
    }
    TfLexState st = {diag, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0}};
    yyscan_t scanner;
    if (tf_yylex_init_extra(&st, &scanner) != 0) {
        free(prog);
        return NULL;
    }
    YY_BUFFER_STATE buf = tf_yy_scan_bytes(source, (int)len, scanner);
    TfParseCtx ctx = {diag, &st, prog, 0, 0};
    int rc = tf_yyparse(scanner, &ctx);
    tf_yy_delete_buffer(buf, scanner);
    tf_yylex_destroy(scanner);
    if (rc == 2) {
        ast_free_program(prog);
        return NULL;
    }
    return prog;
}
