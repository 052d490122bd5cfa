/* The one JSON string decoder (cz_json_decode_string) and the tree reader
 * built on it: every escape, surrogate pairs, the two lenient modes and
 * their strict defaults, errors with the offending byte, an emit failure,
 * and strings inside a parsed document. */
#include "cloze/json.h"

#include <string.h>

#include "check.h"

typedef struct out {
    char s[256];
    size_t n;
    int fail_after; /* pieces accepted before emit fails; -1: never */
} out;

static int emit(void *ctx, const char *s, size_t n, cz_error *err) {
    out *o = ctx;
    if (o->fail_after == 0) return cz_fail(err, "no room");
    if (o->fail_after > 0) o->fail_after--;
    memcpy(o->s + o->n, s, n);
    o->n += n;
    o->s[o->n] = 0;
    return 0;
}

/* Decodes lit; returns the rc, the text in o, *used = bytes consumed. */
static int decode(const char *lit, unsigned flags, out *o, size_t *used, cz_error *err) {
    memset(o, 0, sizeof *o);
    o->fail_after = -1;
    const char *p = lit;
    int rc = cz_json_decode_string(&p, lit + strlen(lit), flags, emit, o, err);
    *used = (size_t)(p - lit);
    return rc;
}

int main(void) {
    out o;
    size_t used;
    cz_error err;
    CHECK(decode("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\" tail", 0, &o, &used, &err) == 0 &&
              !strcmp(o.s, "a\"b\\c/d\b\f\n\r\t") && used == 22,
          "simple escapes: [%s] used %zu", o.s, used);
    CHECK(decode("\"\\u00e9\\u20AC\\ud83d\\ude00\"", 0, &o, &used, &err) == 0 &&
              !strcmp(o.s, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
          "\\u escapes and a surrogate pair: [%s]", o.s);
    CHECK(decode("\"\"", 0, &o, &used, &err) == 0 && o.n == 0 && used == 2, "empty string");
    /* a lone surrogate: an error by default, U+FFFD when asked */
    CHECK(decode("\"x\\ud800y\"", 0, &o, &used, &err) == -1 && strstr(err.msg, "surrogate") &&
              used == 2,
          "lone surrogate: %s (at %zu)", err.msg, used);
    CHECK(decode("\"x\\ud800y\"", CZ_JSON_LONE_SURROGATE_FFFD, &o, &used, &err) == 0 &&
              !strcmp(o.s, "x\xef\xbf\xbdy"),
          "lone surrogate as U+FFFD: [%s]", o.s);
    CHECK(decode("\"\\udc00\"", CZ_JSON_LONE_SURROGATE_FFFD, &o, &used, &err) == 0 &&
              !strcmp(o.s, "\xef\xbf\xbd"),
          "lone low surrogate as U+FFFD");
    /* raw control bytes: an error by default (RFC 8259 section 7), kept when asked */
    CHECK(decode("\"a\tb\"", 0, &o, &used, &err) == -1 && strstr(err.msg, "control") && used == 2,
          "raw tab: %s", err.msg);
    CHECK(decode("\"a\tb\"", CZ_JSON_RAW_CONTROL, &o, &used, &err) == 0 && !strcmp(o.s, "a\tb"),
          "raw tab kept");
    CHECK(decode("\"a\\qb\"", 0, &o, &used, &err) == -1 && strstr(err.msg, "escape") && used == 2,
          "bad escape: %s", err.msg);
    /* an escaped newline: the message stays one line (the byte in hex) */
    CHECK(decode("\"a\\\nb\"", 0, &o, &used, &err) == -1 && !strchr(err.msg, '\n') &&
              strstr(err.msg, "0x0A"),
          "bad escape of a newline: %s", err.msg);
    CHECK(decode("\"\\u12g4\"", 0, &o, &used, &err) == -1 && used == 1, "bad hex");
    CHECK(decode("\"abc", 0, &o, &used, &err) == -1 && strstr(err.msg, "unterminated"),
          "no closing quote");
    CHECK(decode("\"abc\\", 0, &o, &used, &err) == -1 && strstr(err.msg, "unterminated"),
          "ends in an escape");
    /* emit NULL: only checked and skipped */
    const char *lit = "\"skip\\n me\",", *p = lit;
    CHECK(cz_json_decode_string(&p, lit + strlen(lit), 0, NULL, NULL, &err) == 0 && *p == ',',
          "skip only");
    /* an emit failure stops with -2 and its message */
    memset(&o, 0, sizeof o);
    o.fail_after = 1;
    p = "\"ab\\ncd\"";
    CHECK(cz_json_decode_string(&p, p + 8, 0, emit, &o, &err) == -2 && !strcmp(err.msg, "no room"),
          "emit failure: %s", err.msg);
    CHECK(*cz_json_ws(" \t\r\n x", " \t\r\n x" + 6) == 'x', "whitespace");

    /* the tree reader uses the same decoder, strictly, with the byte offset */
    cz_json *root;
    const char *doc = "{\"name\": \"caf\\u00e9\", \"n\": 3, \"list\": [\"\\ud83d\\ude00\"]}";
    CHECK(cz_json_parse(doc, strlen(doc), &root, &err) == 0, "%s", err.msg);
    if (root) {
        CHECK(!strcmp(cz_json_get_string(root, "name"), "caf\xc3\xa9"), "member string");
        CHECK(cz_json_get_number(root, "n", 0) == 3, "member number");
        const cz_json *l = cz_json_get(root, "list");
        CHECK(l && l->count == 1 && !strcmp(l->child->string, "\xf0\x9f\x98\x80"), "array string");
        cz_json_free(root);
    }
    const char *bad = "{\"k\": \"a\\ud800\"}";
    CHECK(cz_json_parse(bad, strlen(bad), &root, &err) == -1 && strstr(err.msg, "byte 8") &&
              strstr(err.msg, "surrogate"),
          "tree error: %s", err.msg);
    return check_finish(NULL);
}
