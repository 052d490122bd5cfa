/* json: a small reader of whole JSON documents (RFC 8259) into a tree, for
 * the files cloze reads from other tools: Hugging Face config.json and
 * tokenizer_config.json, SQuAD's dataset files. Strings are decoded to
 * UTF-8 (every escape, surrogate pairs; a lone surrogate is an error);
 * numbers are doubles. Errors say "byte N: what". */
#ifndef CLOZE_JSON_H
#define CLOZE_JSON_H

#include <stddef.h>

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

#endif
