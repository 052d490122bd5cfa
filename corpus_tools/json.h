/* json: the one JSON string decoder of cloze-prep (RFC 8259 section 7),
 * shared by the encoder.json parser (bpe.c) and the JSON Lines reader
 * (prep_input.c). Only what those readers need: whitespace and string
 * literals; each reader walks its own objects. */
#ifndef CLOZE_PREP_JSON_H
#define CLOZE_PREP_JSON_H

#include "prep_text.h" /* cz_buf */

/* Flags for cz_json_string. */
enum {
    /* A \uXXXX surrogate without its partner becomes U+FFFD instead of an
     * error (RFC 8259 section 8.2 leaves such strings to the reader). */
    CZ_JSON_LONE_SURROGATE_FFFD = 1
};

/* Skips JSON whitespace (space, \t, \n, \r) from p; returns the first other
 * byte or end. */
const char *cz_json_ws(const char *p, const char *end);

/* Decodes the string literal whose opening quote is at *p, within [*p, end),
 * appending it as UTF-8 to out (out == NULL: only checks and skips it).
 * Escapes: \" \\ \/ \b \f \n \r \t, \uXXXX and surrogate pairs; other bytes,
 * raw control bytes included, are copied as they are. Returns 0 with *p just
 * after the closing quote; -1 when malformed (bad escape, lone surrogate
 * unless CZ_JSON_LONE_SURROGATE_FFFD, no closing quote), with *p at the
 * offending byte and err saying what; -2 when out of memory (err filled). */
int cz_json_string(const char **p, const char *end, unsigned flags, cz_buf *out, cz_error *err);

#endif
