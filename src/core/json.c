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
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
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

static int hex4(reader *r, unsigned *out) {
    if (r->end - r->p < 4) return fail_at(r, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail_at(r, "bad hex digit in \\u escape");
    }
    r->p += 4;
    *out = v;
    return 0;
}

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

/* The string literal at r->p (its opening quote) into a malloc'ed buffer.
 * The decoded form is never longer than the literal (\uXXXX: 6 bytes in,
 * at most 3 out; a surrogate pair: 12 in, 4 out). */
static int parse_string(reader *r, char **out, size_t *out_len) {
    r->p++; /* the quote */
    const char *q = r->p;
    while (q < r->end && *q != '"') q += (*q == '\\' && q + 1 < r->end) ? 2 : 1;
    if (q >= r->end) return fail_at(r, "unterminated string");
    char *buf = malloc((size_t)(q - r->p) + 1);
    if (!buf) return cz_fail(r->err, "out of memory");
    size_t n = 0;
    while (*r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20) {
            free(buf);
            return fail_at(r, "control character in string");
        }
        if (c != '\\') {
            buf[n++] = (char)c;
            r->p++;
            continue;
        }
        r->p++;
        char e = *r->p++;
        unsigned cp;
        switch (e) {
        case '"':
            buf[n++] = '"';
            break;
        case '\\':
            buf[n++] = '\\';
            break;
        case '/':
            buf[n++] = '/';
            break;
        case 'b':
            buf[n++] = '\b';
            break;
        case 'f':
            buf[n++] = '\f';
            break;
        case 'n':
            buf[n++] = '\n';
            break;
        case 'r':
            buf[n++] = '\r';
            break;
        case 't':
            buf[n++] = '\t';
            break;
        case 'u':
            if (hex4(r, &cp)) {
                free(buf);
                return -1;
            }
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(buf);
                return fail_at(r, "lone low surrogate in \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* needs its low half */
                unsigned lo;
                if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u') {
                    free(buf);
                    return fail_at(r, "high surrogate without its low half");
                }
                r->p += 2;
                if (hex4(r, &lo)) {
                    free(buf);
                    return -1;
                }
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    free(buf);
                    return fail_at(r, "high surrogate without its low half");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            n += put_utf8(buf + n, cp);
            break;
        default:
            free(buf);
            return fail_at(r, "unknown escape in string");
        }
    }
    r->p++; /* closing quote */
    buf[n] = 0;
    *out = buf;
    *out_len = n;
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
