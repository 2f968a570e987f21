/* json.c: see json.h. A recursive-descent check of the text (grammar, UTF-8,
 * the extra rules), then cJSON builds the tree, then a walk refuses repeated
 * keys. */
#include "json.h"
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tf_utf8_valid(const unsigned char *s, size_t len) {
    return tf_utf8_bad((const char *)s, len) == len; // utf8.h: the one UTF-8 check
}

typedef struct Scan {
    const unsigned char *s;
    size_t len, at;
    const char *problem;
} Scan;

static int fail(Scan *sc, const char *problem) {
    if (!sc->problem) sc->problem = problem;
    return -1;
}

static void skip_ws(Scan *sc) {
    while (sc->at < sc->len && (sc->s[sc->at] == ' ' || sc->s[sc->at] == '\t' ||
                                sc->s[sc->at] == '\n' || sc->s[sc->at] == '\r'))
        sc->at++;
}

static int peek(const Scan *sc) { return sc->at < sc->len ? sc->s[sc->at] : -1; }

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int hex4(Scan *sc, unsigned *out) {
    if (sc->len - sc->at < 4) return fail(sc, "a \\u escape needs four hex digits");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = sc->s[sc->at++];
        v <<= 4;
        if (is_digit(c)) v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(sc, "a \\u escape needs four hex digits");
    }
    *out = v;
    return 0;
}

static int scan_string(Scan *sc) {
    sc->at++; /* the opening quote */
    for (;;) {
        int c = peek(sc);
        if (c < 0) return fail(sc, "unterminated string");
        if (c == '"') {
            sc->at++;
            return 0;
        }
        if (c < 0x20) return fail(sc, "a control character in a string");
        if (c >= 0x80) {
            size_t start = sc->at, end = start + 1;
            while (end < sc->len && end - start < 4 && (sc->s[end] & 0xC0) == 0x80) end++;
            if (!tf_utf8_valid(sc->s + start, end - start)) return fail(sc, "invalid UTF-8");
            sc->at = end;
            continue;
        }
        sc->at++;
        if (c != '\\') continue;
        c = peek(sc);
        if (c < 0) return fail(sc, "unterminated string");
        sc->at++;
        if (strchr("\"\\/bfnrt", c) && c != 0) continue;
        if (c != 'u') return fail(sc, "an invalid escape in a string");
        unsigned u;
        if (hex4(sc, &u) < 0) return -1;
        if (u == 0) return fail(sc, "the escape \\u0000 (a NUL character)");
        if (u >= 0xDC00 && u <= 0xDFFF) return fail(sc, "an unpaired surrogate escape");
        if (u >= 0xD800 && u <= 0xDBFF) {
            unsigned low;
            if (sc->len - sc->at < 2 || sc->s[sc->at] != '\\' || sc->s[sc->at + 1] != 'u')
                return fail(sc, "an unpaired surrogate escape");
            sc->at += 2;
            if (hex4(sc, &low) < 0) return -1;
            if (low < 0xDC00 || low > 0xDFFF) return fail(sc, "an unpaired surrogate escape");
        }
    }
}

static int scan_number(Scan *sc) {
    size_t start = sc->at;
    if (peek(sc) == '-') sc->at++;
    if (peek(sc) == '0') {
        sc->at++;
    } else if (is_digit(peek(sc))) {
        while (is_digit(peek(sc))) sc->at++;
    } else {
        return fail(sc, "a malformed number");
    }
    if (peek(sc) == '.') {
        sc->at++;
        if (!is_digit(peek(sc))) return fail(sc, "a malformed number");
        while (is_digit(peek(sc))) sc->at++;
    }
    if (peek(sc) == 'e' || peek(sc) == 'E') {
        sc->at++;
        if (peek(sc) == '+' || peek(sc) == '-') sc->at++;
        if (!is_digit(peek(sc))) return fail(sc, "a malformed number");
        while (is_digit(peek(sc))) sc->at++;
    }
    if (sc->at - start > TF_JSON_MAX_NUMBER) return fail(sc, "a number of over 40 characters");
    return 0;
}

static int scan_literal(Scan *sc, const char *word) {
    size_t n = strlen(word);
    if (sc->len - sc->at < n || memcmp(sc->s + sc->at, word, n) != 0)
        return fail(sc, "not JSON");
    sc->at += n;
    return 0;
}

static int scan_value(Scan *sc, int depth) {
    skip_ws(sc);
    int c = peek(sc);
    if (c == '{' || c == '[') {
        if (depth >= TF_JSON_MAX_DEPTH) return fail(sc, "nesting deeper than 32");
        int close = c == '{' ? '}' : ']';
        sc->at++;
        skip_ws(sc);
        if (peek(sc) == close) {
            sc->at++;
            return 0;
        }
        for (;;) {
            if (close == '}') {
                skip_ws(sc);
                if (peek(sc) != '"') return fail(sc, "an object key that is not a string");
                if (scan_string(sc) < 0) return -1;
                skip_ws(sc);
                if (peek(sc) != ':') return fail(sc, "a missing ':' in an object");
                sc->at++;
            }
            if (scan_value(sc, depth + 1) < 0) return -1;
            skip_ws(sc);
            c = peek(sc);
            sc->at++;
            if (c == close) return 0;
            if (c != ',') return fail(sc, close == '}' ? "a missing ',' or '}' in an object"
                                                      : "a missing ',' or ']' in an array");
        }
    }
    if (c == '"') return scan_string(sc);
    if (c == '-' || is_digit(c)) return scan_number(sc);
    if (c == 't') return scan_literal(sc, "true");
    if (c == 'f') return scan_literal(sc, "false");
    if (c == 'n') return scan_literal(sc, "null");
    return fail(sc, c < 0 ? "unexpected end" : "not JSON");
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first key that appears twice in one object of the tree, or NULL.
 * *oom is set when the check could not allocate. */
static const char *repeated_key(const cJSON *j, int *oom) {
    for (; j; j = j->next) {
        if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) continue;
        if (cJSON_IsObject(j)) {
            size_t n = 0;
            for (const cJSON *c = j->child; c; c = c->next) n++;
            if (n > 1) {
                const char **names = malloc(n * sizeof *names);
                if (!names) {
                    *oom = 1;
                    return NULL;
                }
                size_t k = 0;
                for (const cJSON *c = j->child; c; c = c->next) names[k++] = c->string;
                qsort(names, n, sizeof *names, cmp_name);
                const char *dup = NULL;
                for (size_t i = 1; i < n && !dup; i++)
                    if (strcmp(names[i - 1], names[i]) == 0) dup = names[i];
                free(names);
                if (dup) return dup;
            }
        }
        const char *dup = repeated_key(j->child, oom);
        if (dup || *oom) return dup;
    }
    return NULL;
}

cJSON *tf_json_parse(const char *s, size_t len, const char *what, TfError *err) {
    Scan sc = {(const unsigned char *)s, len, 0, NULL};
    if (scan_value(&sc, 0) == 0) {
        skip_ws(&sc);
        if (sc.at < len) fail(&sc, "text after the JSON value");
    }
    if (sc.problem) {
        tf_error_set(err, "%s is not valid JSON: %s at byte %zu", what, sc.problem,
                     sc.at < len ? sc.at : len);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(s, len);
    if (!root) {
        tf_error_set(err, "%s: out of memory parsing JSON", what);
        return NULL;
    }
    int oom = 0;
    const char *dup = repeated_key(root, &oom);
    if (dup || oom) {
        if (oom) tf_error_set(err, "%s: out of memory parsing JSON", what);
        else tf_error_set(err, "%s: the key '%.60s' appears twice in one object", what, dup);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
