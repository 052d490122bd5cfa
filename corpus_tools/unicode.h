/* unicode: the small UTF-8 and character-class helpers both tokenizers and
 * the vocabulary learner share. Character classes follow the definitions the
 * reference tokenizers use (cited per function); the Unicode tables come
 * from libutf8proc. */
#ifndef CLOZE_PREP_UNICODE_H
#define CLOZE_PREP_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the UTF-8 sequence at p (n > 0 bytes left) into *cp: returns its
 * length, or 0 when the byte at p starts no valid sequence (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF, none cut short). */
size_t cz_utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);
/* Decodes one code point at s[*i] (i < len) and advances *i. A malformed or
 * truncated sequence yields U+FFFD and consumes one byte. */
uint32_t cz_utf8_next(const unsigned char *s, size_t len, size_t *i);
/* Offset of the first byte of s that starts no valid sequence, or len when
 * all of s is UTF-8. */
size_t cz_utf8_invalid_at(const unsigned char *s, size_t len);
/* Writes cp as UTF-8 into out (4 bytes room); returns the byte count. */
int cz_utf8_put(uint32_t cp, char *out);

/* BERT (tokenization.py _is_whitespace, HF BertNormalizer): \t \n \r, space,
 * category Zs; also Zl/Zp, which Python's str.split() treats as separators. */
int cz_is_bert_space(uint32_t cp);
/* BERT _is_control as in HF's fast tokenizer: Cc Cf Cs Co, not Cn, except
 * \t \n \r. (HF slow: all C*; the original: Cc Cf only.) */
int cz_is_bert_control(uint32_t cp);
/* BERT _is_punctuation: ASCII 33-47, 58-64, 91-96, 123-126 or category P*. */
int cz_is_bert_punct(uint32_t cp);
/* BERT _is_chinese_char: the CJK Unified Ideographs blocks. */
int cz_is_cjk(uint32_t cp);
/* Unicode White_Space property (what \s matches in the GPT-2 regex). */
int cz_is_white_space(uint32_t cp);
/* \p{L} and \p{N}. */
int cz_is_letter(uint32_t cp);
int cz_is_number(uint32_t cp);

/* BERT per-character normalisation of a non-control, non-space code point:
 * lower-case (if lower) then NFD and drop Mn marks (if strip_accents).
 * Writes up to 18 code points to out; returns the count. */
int cz_bert_normalize_char(uint32_t cp, int lower, int strip_accents, uint32_t out[18]);

/* A fast 64-bit hash of a byte string (hash tables, not fingerprints). */
uint64_t cz_hash_bytes(const void *data, size_t len);

#endif
