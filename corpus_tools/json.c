/* json: see json.h. */
#include "json.h"
#include "unicode.h"

const char *cz_json_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* Four hex digits at p (p + 4 <= end checked by the caller) -> *v. */
static int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* The byte a one-letter escape stands for, or -1. */
static int simple_escape(char c) {
    switch (c) {
    case '"':
    case '\\':
    case '/':
        return c;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return -1;
    }
}

/* The code point of \uXXXX at p (on the 'u'), joining a high surrogate with
 * the \uXXXX low one that follows (RFC 8259 section 7:
 * 0x10000 + (hi - 0xD800) * 0x400 + (lo - 0xDC00)). Advances *p past what it
 * used. Returns -1 for bad hex, -2 for a lone surrogate (*cp then holds it). */
static int unicode_escape(const char **p, const char *end, uint32_t *cp) {
    const char *q = *p + 1;
    if (end - q < 4 || hex4(q, cp)) return -1;
    q += 4;
    *p = q;
    uint32_t lo;
    if (*cp >= 0xD800 && *cp <= 0xDBFF && end - q >= 6 && q[0] == '\\' && q[1] == 'u' &&
        !hex4(q + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
        *p = q + 6;
        return 0;
    }
    return *cp >= 0xD800 && *cp <= 0xDFFF ? -2 : 0;
}

static int emit(cz_buf *out, const char *s, size_t n, cz_error *err) {
    if (!out) return 0;
    return cz_buf_append(out, s, n, err) ? -2 : 0;
}

int cz_json_string(const char **p, const char *end, unsigned flags, cz_buf *out, cz_error *err) {
    const char *s = *p + 1;
    while (s < end && *s != '"') {
        if (*s != '\\') { /* copy the run up to the next quote or escape */
            const char *r = s;
            while (r < end && *r != '"' && *r != '\\') r++;
            if (emit(out, s, (size_t)(r - s), err)) return -2;
            s = r;
            continue;
        }
        if (s + 1 >= end) {
            *p = s;
            return cz_fail(err, "unterminated escape");
        }
        char utf8[4];
        int n;
        if (s[1] == 'u') {
            const char *at = s;
            uint32_t cp;
            s++;
            int rc = unicode_escape(&s, end, &cp);
            if (rc == -2 && (flags & CZ_JSON_LONE_SURROGATE_FFFD)) {
                cp = 0xFFFD; /* a lone surrogate is no character */
            } else if (rc == -2) {
                *p = at;
                return cz_fail(err, "lone surrogate \\u%04X", (unsigned)cp);
            } else if (rc) {
                *p = at;
                return cz_fail(err, "bad \\u escape");
            }
            n = cz_utf8_put(cp, utf8);
        } else {
            int c = simple_escape(s[1]);
            if (c < 0) {
                *p = s;
                return cz_fail(err, "bad escape \\%c", s[1]);
            }
            utf8[0] = (char)c;
            n = 1;
            s += 2;
        }
        if (emit(out, utf8, (size_t)n, err)) return -2;
    }
    if (s >= end) {
        *p = s;
        return cz_fail(err, "unterminated string");
    }
    *p = s + 1;
    return 0;
}
