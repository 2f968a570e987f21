/* utf8.h: the one UTF-8 check, for token names (the compiler's literals,
 * the weight file's vocabulary, prompts of words).
 *
 * Header-only (static inline) so that the grammar, which links nothing of
 * the runtime, and the runtime's model library share it.
 */
#ifndef TF_UTF8_H
#define TF_UTF8_H

#include <stddef.h>

/* The length (1..4) of the well-formed UTF-8 sequence at s[0..n), or 0 when
 * it is not one: a stray continuation byte, a truncated sequence, an overlong
 * form, a surrogate (U+D800..U+DFFF) or a code point over U+10FFFF. */
static inline int tf_utf8_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || n < (size_t)len) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    unsigned c1 = s[1];
    if (c == 0xe0 && c1 < 0xa0) return 0; /* overlong */
    if (c == 0xed && c1 > 0x9f) return 0; /* surrogate */
    if (c == 0xf0 && c1 < 0x90) return 0; /* overlong */
    if (c == 0xf4 && c1 > 0x8f) return 0; /* over U+10FFFF */
    return len;
}

/* The offset of the first byte of s[0..n) that does not start a well-formed
 * UTF-8 sequence, or n when all of it is UTF-8. */
static inline size_t tf_utf8_bad(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int l = tf_utf8_len(u + i, n - i);
        if (l == 0) return i;
        i += (size_t)l;
    }
    return n;
}

#endif
