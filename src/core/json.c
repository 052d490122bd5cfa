/* JSON documents into a tree (include/cloze/json.h). A recursive-descent
 * reader of RFC 8259: value = object / array / string / number / true /
 * false / null, with the grammar's whitespace between tokens. */
#include "cloze/json.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct reader {
    const char *start, *p, *end;
    cz_error *err;
} reader;

static int fail_at(reader *r, const char *what) {
    return cz_fail(r->err, "byte %zu: %s", (size_t)(r->p - r->start), what);
}

static void skip_ws(reader *r) {
    r->p = cz_json_ws(r->p, r->end);
}

static cz_json *new_node(reader *r, cz_json_type type) {
    cz_json *v = calloc(1, sizeof *v);
    if (!v) {
        cz_fail(r->err, "out of memory");
        return NULL;
    }
    v->type = type;
    v->offset = (size_t)(r->p - r->start);
    return v;
}

/* Four hex digits at p (p + 4 <= end checked by the caller) -> *v. */
static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

/* UTF-8 of a code point <= U+10FFFF (RFC 3629). */
static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
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

const char *cz_json_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* \uXXXX at *p (on the backslash), joined with the \uXXXX low surrogate that
 * follows a high one (RFC 8259 section 7: 0x10000 + (hi - 0xD800) * 0x400 +
 * (lo - 0xDC00)). Advances *p past what it used. Returns 0, -1 for bad hex,
 * -2 for a lone surrogate (*cp then holds it). */
static int unicode_escape(const char **p, const char *end, unsigned *cp) {
    const char *q = *p + 2;
    if (end - q < 4 || hex4(q, cp)) return -1;
    q += 4;
    *p = q;
    unsigned lo;
    if (*cp >= 0xD800 && *cp <= 0xDBFF && end - q >= 6 && q[0] == '\\' && q[1] == 'u' &&
        !hex4(q + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
        *p = q + 6;
        return 0;
    }
    return *cp >= 0xD800 && *cp <= 0xDFFF ? -2 : 0;
}

int cz_json_decode_string(const char **p, const char *end, unsigned flags, cz_json_emit_fn emit,
                          void *ctx, cz_error *err) {
    const char *s = *p + 1;
    while (s < end && *s != '"') {
        if (*s != '\\') { /* the run up to the next quote or escape, as it is */
            const char *r = s;
            while (r < end && *r != '"' && *r != '\\' &&
                   ((unsigned char)*r >= 0x20 || (flags & CZ_JSON_RAW_CONTROL)))
                r++;
            if (r < end && *r != '"' && *r != '\\') {
                *p = r;
                return cz_fail(err, "control byte 0x%02x in a string", (unsigned char)*r);
            }
            if (emit && r > s && emit(ctx, s, (size_t)(r - s), err)) return -2;
            s = r;
            continue;
        }
        if (s + 1 >= end) {
            *p = s;
            return cz_fail(err, "unterminated escape");
        }
        char utf8[4];
        size_t n;
        if (s[1] == 'u') {
            const char *at = s;
            unsigned cp;
            int rc = unicode_escape(&s, end, &cp);
            if (rc == -2 && (flags & CZ_JSON_LONE_SURROGATE_FFFD)) {
                cp = 0xFFFD; /* a lone surrogate is no character */
            } else if (rc == -2) {
                *p = at;
                return cz_fail(err, "lone surrogate \\u%04X", cp);
            } else if (rc) {
                *p = at;
                return cz_fail(err, "bad \\u escape");
            }
            n = put_utf8(utf8, cp);
        } else {
            int c = simple_escape(s[1]);
            if (c < 0) {
                *p = s;
                /* the byte as hex when it would break the one-line message */
                return (unsigned char)s[1] >= 0x20 && (unsigned char)s[1] < 0x7F
                           ? cz_fail(err, "bad escape \\%c", s[1])
                           : cz_fail(err, "bad escape \\ followed by byte 0x%02X",
                                     (unsigned char)s[1]);
            }
            utf8[0] = (char)c;
            n = 1;
            s += 2;
        }
        if (emit && emit(ctx, utf8, n, err)) return -2;
    }
    if (s >= end) {
        *p = s;
        return cz_fail(err, "unterminated string");
    }
    *p = s + 1;
    return 0;
}

static int buf_emit(void *ctx, const char *s, size_t n, cz_error *err) {
    return cz_buf_append(ctx, s, n, err);
}

int cz_json_string(const char **p, const char *end, unsigned flags, cz_buf *out, cz_error *err) {
    return cz_json_decode_string(p, end, flags, out ? buf_emit : NULL, out, err);
}

/* Into a buffer known to be large enough. */
typedef struct fill {
    char *o;
    size_t n;
} fill;

static int fill_emit(void *ctx, const char *s, size_t n, cz_error *err) {
    (void)err;
    fill *f = ctx;
    memcpy(f->o + f->n, s, n);
    f->n += n;
    return 0;
}

/* The string literal at r->p (its opening quote) into a malloc'ed buffer.
 * The decoded form is never longer than the literal (\uXXXX: 6 bytes in,
 * at most 3 out; a surrogate pair: 12 in, 4 out). */
static int parse_string(reader *r, char **out, size_t *out_len) {
    const char *q = r->p + 1;
    while (q < r->end && *q != '"') q += (*q == '\\' && q + 1 < r->end) ? 2 : 1;
    fill f = {malloc((size_t)(q - r->p) + 1), 0};
    if (!f.o) return cz_fail(r->err, "out of memory");
    cz_error e;
    if (cz_json_decode_string(&r->p, r->end, 0, fill_emit, &f, &e) != 0) {
        free(f.o);
        return fail_at(r, e.msg);
    }
    f.o[f.n] = 0;
    *out = f.o;
    *out_len = f.n;
    return 0;
}

static int parse_number(reader *r, double *out) {
    const char *s = r->p;
    if (s < r->end && *s == '-') s++;
    if (s >= r->end || *s < '0' || *s > '9') return fail_at(r, "expected a value");
    if (*s == '0')
        s++;
    else
        while (s < r->end && *s >= '0' && *s <= '9') s++;
    if (s < r->end && *s == '.') {
        s++;
        if (s >= r->end || *s < '0' || *s > '9') return fail_at(r, "bad number");
        while (s < r->end && *s >= '0' && *s <= '9') s++;
    }
    if (s < r->end && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < r->end && (*s == '+' || *s == '-')) s++;
        if (s >= r->end || *s < '0' || *s > '9') return fail_at(r, "bad number exponent");
        while (s < r->end && *s >= '0' && *s <= '9') s++;
    }
    char tmp[64];
    size_t k = (size_t)(s - r->p);
    if (k >= sizeof tmp) return fail_at(r, "number too long");
    memcpy(tmp, r->p, k);
    tmp[k] = 0;
    *out = strtod(tmp, NULL);
    r->p = s;
    return 0;
}

static int literal(reader *r, const char *word) {
    size_t k = strlen(word);
    if ((size_t)(r->end - r->p) < k || memcmp(r->p, word, k)) return fail_at(r, "expected a value");
    r->p += k;
    return 0;
}

static int parse_value(reader *r, int depth, cz_json **out);

/* The members of an object or elements of an array after its opening
 * bracket, up to and including the closing one. */
static int parse_children(reader *r, int depth, cz_json *v, char close) {
    cz_json **tail = &v->child;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len;
        skip_ws(r);
        if (close == '}') {
            if (r->p >= r->end || *r->p != '"') return fail_at(r, "expected a member name");
            if (parse_string(r, &key, &key_len)) return -1;
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':') {
                free(key);
                return fail_at(r, "expected ':'");
            }
            r->p++;
        }
        cz_json *c = NULL;
        int rc = parse_value(r, depth + 1, &c);
        if (!c) { /* nothing allocated: the key is still ours */
            free(key);
            return -1;
        }
        c->key = key; /* linked also on failure, so that cz_json_free frees it */
        *tail = c;
        tail = &c->next;
        v->count++;
        if (rc) return -1;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return 0;
        }
        return fail_at(r, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(reader *r, int depth, cz_json **out) {
    skip_ws(r);
    if (r->p >= r->end) return fail_at(r, "unexpected end of text");
    if (depth > MAX_DEPTH) return fail_at(r, "nested too deep");
    char c = *r->p;
    cz_json_type type = c == '{'               ? CZ_JSON_OBJECT
                        : c == '['             ? CZ_JSON_ARRAY
                        : c == '"'             ? CZ_JSON_STRING
                        : c == 't' || c == 'f' ? CZ_JSON_BOOL
                        : c == 'n'             ? CZ_JSON_NULL
                                               : CZ_JSON_NUMBER;
    cz_json *v = new_node(r, type);
    if (!v) return -1;
    *out = v; /* the caller's tree owns it from here, also on failure */
    switch (type) {
    case CZ_JSON_OBJECT:
    case CZ_JSON_ARRAY:
        r->p++;
        return parse_children(r, depth, v, c == '{' ? '}' : ']');
    case CZ_JSON_STRING:
        return parse_string(r, &v->string, &v->len);
    case CZ_JSON_BOOL:
        v->boolean = c == 't';
        return literal(r, c == 't' ? "true" : "false");
    case CZ_JSON_NULL:
        return literal(r, "null");
    default:
        return parse_number(r, &v->number);
    }
}

void cz_json_free(cz_json *v) {
    while (v) {
        cz_json *next = v->next;
        cz_json_free(v->child);
        free(v->string);
        free(v->key);
        free(v);
        v = next;
    }
}

int cz_json_parse(const char *text, size_t len, cz_json **root, cz_error *err) {
    reader r = {text, text, text + len, err};
    *root = NULL;
    cz_json *v = NULL;
    int rc = parse_value(&r, 0, &v);
    if (rc == 0) {
        skip_ws(&r);
        if (r.p != r.end) rc = fail_at(&r, "text after the value");
    }
    if (rc) {
        cz_json_free(v);
        return -1;
    }
    *root = v;
    return 0;
}

const cz_json *cz_json_get(const cz_json *obj, const char *key) {
    if (!obj || obj->type != CZ_JSON_OBJECT) return NULL;
    for (const cz_json *c = obj->child; c; c = c->next)
        if (c->key && !strcmp(c->key, key)) return c;
    return NULL;
}

const char *cz_json_get_string(const cz_json *obj, const char *key) {
    const cz_json *v = cz_json_get(obj, key);
    return v && v->type == CZ_JSON_STRING ? v->string : NULL;
}

double cz_json_get_number(const cz_json *obj, const char *key, double def) {
    const cz_json *v = cz_json_get(obj, key);
    return v && v->type == CZ_JSON_NUMBER ? v->number : def;
}

void cz_json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}
