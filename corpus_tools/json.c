/* json: see json.h. */
#include "json.h"

static int append(void *ctx, const char *s, size_t n, cz_error *err) {
    return cz_buf_append(ctx, s, n, err);
}

int cz_json_string(const char **p, const char *end, unsigned flags, cz_buf *out, cz_error *err) {
    return cz_json_decode_string(p, end, flags | CZ_JSON_RAW_CONTROL, out ? append : NULL, out,
                                 err);
}
