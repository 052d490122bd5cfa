/* json: a small reader of whole JSON documents (RFC 8259) into a tree, for
 * the files cloze reads from other tools: Hugging Face config.json and
 * tokenizer_config.json, SQuAD's dataset files. Strings are decoded to
 * UTF-8 (every escape, surrogate pairs; a lone surrogate is an error);
 * numbers are doubles. Errors say "byte N: what". */
#ifndef CLOZE_JSON_H
#define CLOZE_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "cloze/core.h"

typedef enum {
    CZ_JSON_NULL,
    CZ_JSON_BOOL,
    CZ_JSON_NUMBER,
    CZ_JSON_STRING,
    CZ_JSON_ARRAY,
    CZ_JSON_OBJECT
} cz_json_type;

typedef struct cz_json cz_json;
struct cz_json {
    cz_json_type type;
    int boolean;
    double number;
    char *string; /* STRING: NUL-terminated UTF-8 (may contain NUL: use len) */
    size_t len;
    char *key;      /* the member's name when this value sits in an object */
    cz_json *child; /* ARRAY / OBJECT: first element or member */
    cz_json *next;  /* the next sibling */
    int count;      /* ARRAY / OBJECT: number of children */
    size_t offset;  /* byte offset of the value in the text */
};

/* ---- the one JSON string decoder (RFC 8259 section 7) ----
 * Used by the tree reader below, the safetensors header reader, the BPE
 * tokenizer's encoder.json reader and cloze-prep's JSON Lines reader. */

/* JSON whitespace (space, \t, \n, \r) skipped from p: the first other byte,
 * or end. */
const char *cz_json_ws(const char *p, const char *end);

/* Flags of cz_json_decode_string. */
enum {
    /* A \uXXXX surrogate without its partner becomes U+FFFD instead of an
     * error (RFC 8259 section 8.2 leaves such strings to the reader). */
    CZ_JSON_LONE_SURROGATE_FFFD = 1,
    /* Raw bytes below 0x20 inside the literal are kept as they are instead
     * of being an error (the RFC requires them escaped). */
    CZ_JSON_RAW_CONTROL = 2
};

/* Receives the decoded string in pieces, in order; non-zero stops the
 * decoding (it then returns -2; emit fills err). */
typedef int (*cz_json_emit_fn)(void *ctx, const char *s, size_t n, cz_error *err);

/* Decodes the string literal whose opening quote is at *p, within [*p, end),
 * handing it to emit as UTF-8 (emit NULL: only checks and skips it).
 * Escapes: \" \\ \/ \b \f \n \r \t, \uXXXX and surrogate pairs; other
 * bytes are passed on as they are. Returns 0 with *p just after the closing
 * quote; -1 when malformed (bad escape, lone surrogate, raw control byte,
 * no closing quote; see the flags) with *p at the offending byte and err
 * saying what, without a position (the caller knows its file); -2 when
 * emit failed. */
int cz_json_decode_string(const char **p, const char *end, unsigned flags, cz_json_emit_fn emit,
                          void *ctx, cz_error *err);
/* cz_json_decode_string appending to out (out == NULL: only checks and
 * skips the literal); the same returns, -2 meaning out of memory. */
int cz_json_string(const char **p, const char *end, unsigned flags, cz_buf *out, cz_error *err);

/* Parses text[0, len) into *root (free with cz_json_free). Nesting deeper
 * than 64 levels and trailing non-space bytes are errors. */
int cz_json_parse(const char *text, size_t len, cz_json **root, cz_error *err);
void cz_json_free(cz_json *root);

/* The member `key` of an object (NULL when absent or not an object). */
const cz_json *cz_json_get(const cz_json *obj, const char *key);
/* The member as a string / number, or NULL / def when absent or of
 * another type. */
const char *cz_json_get_string(const cz_json *obj, const char *key);
double cz_json_get_number(const cz_json *obj, const char *key, double def);

/* Writes s to f as a JSON string literal: quotes, \" and \\ escaped,
 * control bytes as \u00XX, other bytes (UTF-8) as they are (RFC 8259 Sec. 7). */
void cz_json_write_string(FILE *f, const char *s);

#endif
