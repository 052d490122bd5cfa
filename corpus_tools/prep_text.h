/* prep_text: text normalisation and rule-based sentence splitting for
 * cloze-prep (rules in docs/formats.md, "Normalisation" and "Sentences"). */
#ifndef CLOZE_PREP_TEXT_H
#define CLOZE_PREP_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"

/* A growable byte buffer (always NUL-terminated when len > 0). */
typedef struct cz_buf {
    char *data;
    size_t len, cap;
} cz_buf;

int cz_buf_append(cz_buf *b, const char *s, size_t n, cz_error *err);
void cz_buf_free(cz_buf *b);

typedef struct cz_norm_stats {
    uint64_t bytes_replaced; /* invalid UTF-8 bytes, each became U+FFFD */
    uint64_t chars_dropped;  /* control characters (C0 but \n \t, DEL, C1, BOM) removed */
} cz_norm_stats;

/* Normalises raw bytes into out (appended): invalid UTF-8 -> U+FFFD, control
 * characters dropped, every Unicode space (and \t, \r) -> ' ', runs of spaces
 * collapsed, each '\n'-separated paragraph trimmed, empty paragraphs removed.
 * wikitext_detok = 1 also turns " @-@ ", " @,@ ", " @.@ " into "-", ",", ".". */
int cz_normalize(const char *in, size_t n, int wikitext_detok, cz_buf *out, cz_norm_stats *st,
                 cz_error *err);

/* GPT mode (byte-level BPE is lossless): appends the document's bytes as
 * they are: whitespace, newlines, control characters and invalid UTF-8 are
 * text. Only wikitext_detok = 1 changes them (as cz_normalize does).
 * st->bytes_replaced counts the invalid UTF-8 bytes, here kept as bytes. */
int cz_verbatim(const char *in, size_t n, int wikitext_detok, cz_buf *out, cz_norm_stats *st,
                cz_error *err);

/* One sentence: bytes [start, start + len) of the text. */
typedef struct cz_span {
    uint32_t start, len;
} cz_span;

typedef struct cz_spans {
    cz_span *v;
    size_t n, cap;
} cz_spans;

/* Splits normalised text (paragraphs separated by '\n') into sentences,
 * appended to out. Every paragraph ends a sentence. */
int cz_split_sentences(const char *text, size_t n, cz_spans *out, cz_error *err);
void cz_spans_free(cz_spans *s);

#endif
