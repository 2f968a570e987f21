/* checks.c: run-time checks of unproven categorical values. See checks.h. */
#include "checks.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CHECK_SHOWN 4 /* columns named in a failure message */

int check_first_position(const TfModel *m) { return m->bos >= 0 ? 1 : 0; }

int check_holds_one(const float *v, int size, size_t stride, double bound) {
    int hot = 0;
    for (int i = 0; i < size; i++) {
        double x = v[(size_t)i * stride];
        if (fabs(x - 1) <= bound)
            hot++;
        else if (!(fabs(x) <= bound))
            return 0;
    }
    return hot == 1;
}

/* Appends printf output to buf (n bytes, *len of them used), cutting it at the end. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void append(char *buf, size_t n, size_t *len, const char *fmt, ...) {
    if (*len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k < n - *len ? (size_t)k : n - *len - 1;
}

/* x ranks before y: larger, NaN first. */
static int before(float x, float y) { return isnan(x) ? !isnan(y) : x > y; }

void check_describe(const TfModel *m, const TfCheck *c, int pos, const float *v, size_t stride,
                    TfError *err) {
    const TfRegister *reg = &m->regs[c->reg];
    double bound = model_check_bound(m, c);
    // The columns away from 0 (beyond the bound, or NaN), largest first.
    int top[CHECK_SHOWN], n_top = 0, warm = 0, largest = 0;
    for (int i = 0; i < reg->size; i++) {
        float x = v[(size_t)i * stride];
        if (before(x, v[(size_t)largest * stride])) largest = i;
        if (fabs((double)x) <= bound) continue;
        warm++;
        int at = n_top;
        while (at > 0 && before(x, v[(size_t)top[at - 1] * stride])) at--;
        if (at >= CHECK_SHOWN) continue;
        if (n_top < CHECK_SHOWN) n_top++;
        memmove(top + at + 1, top + at, (size_t)(n_top - 1 - at) * sizeof *top);
        top[at] = i;
    }
    char held[200] = "";
    size_t len = 0;
    for (int k = 0; k < n_top; k++)
        append(held, sizeof held, &len, "%s%s %.2f", k ? ", " : "", reg->values[top[k]],
               (double)v[(size_t)top[k] * stride]);
    if (warm > n_top) append(held, sizeof held, &len, ", %d more", warm - n_top);
    if (warm == 0)
        append(held, sizeof held, &len, "no value above %.2g; the largest %s %.2f", bound,
               reg->values[largest], (double)v[(size_t)largest * stride]);
    char where[160];
    if (m->source_name && c->line > 0)
        snprintf(where, sizeof where, "%.140s:%d", m->source_name, c->line);
    else if (m->source_name)
        snprintf(where, sizeof where, "%.140s", m->source_name);
    else
        snprintf(where, sizeof where, "line %d", c->line);
    tf_error_set(err, "%s: %.80s: position %d does not hold one value within %.2g (%s); the "
                      "compiler could not prove it",
                 where, c->op, pos, bound, held);
}
