/* json.h: strict JSON for the weight-file header (docs/weight-format.md,
 * "What the readers reject").
 *
 * cJSON alone is lenient where Python's json (tools/tfw_torch.py) is not, and
 * the other way round: it accepts trailing garbage, "01", "1.", raw control
 * characters in strings and invalid UTF-8, keeps the first of two equal keys
 * (Python keeps the last) and cuts strings at an escaped NUL. tf_json_parse
 * accepts exactly RFC 8259 JSON, valid UTF-8, and further refuses what the
 * two readers would read differently: a key twice in one object, the escape
 * \u0000, an unpaired surrogate escape, a number longer than
 * TF_JSON_MAX_NUMBER characters and nesting deeper than TF_JSON_MAX_DEPTH.
 * tools/tfw_torch.py applies the same rules.
 *
 * Memory: the returned tree belongs to the caller (cJSON_Delete).
 */
#ifndef TF_JSON_H
#define TF_JSON_H

#include <cJSON.h>
#include <stddef.h>

#include "error.h"

#define TF_JSON_MAX_DEPTH 32
#define TF_JSON_MAX_NUMBER 40

/* The tree of the JSON text s[0..len), or NULL with err set to what is wrong
 * and where ("at byte N"). `what` names the text in messages ("header"). */
cJSON *tf_json_parse(const char *s, size_t len, const char *what, TfError *err);

/* 1 when s[0..len) is well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
int tf_utf8_valid(const unsigned char *s, size_t len);

#endif
