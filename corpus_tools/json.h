/* json: cloze-prep's JSON strings (the encoder.json parser in bpe.c and the
 * JSON Lines reader in prep_input.c), decoded by the one JSON string decoder
 * of cloze (cz_json_decode_string, include/cloze/json.h) into a cz_buf. Only
 * what those readers need: whitespace (cz_json_ws) and string literals;
 * each reader walks its own objects. */
#ifndef CLOZE_PREP_JSON_H
#define CLOZE_PREP_JSON_H

#include "cloze/json.h"

#include "prep_text.h" /* cz_buf */

/* Decodes the string literal whose opening quote is at *p, within [*p, end),
 * appending it as UTF-8 to out (out == NULL: only checks and skips it).
 * Raw control bytes are copied as they are (a corpus reader keeps text);
 * flags: CZ_JSON_LONE_SURROGATE_FFFD. Returns 0 with *p just after the
 * closing quote; -1 when malformed, with *p at the offending byte and err
 * saying what; -2 when out of memory (err filled). */
int cz_json_string(const char **p, const char *end, unsigned flags, cz_buf *out, cz_error *err);

#endif
