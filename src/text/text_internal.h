/* text_internal: the insides of the text module shared by its sources and
 * open to its tests and benchmarks: the character classes, the tokenizer
 * struct, each kind's encoder and decoder. Not part of the public interface
 * (include/cloze/text.h).
 *
 * The files call one way, each only the ones above it:
 *   unicode.c      UTF-8, the character classes, the byte-string hash
 *   normalize.c    cloze-prep's normaliser and sentence splitter
 *   vocab_table.c  id vectors, the string table, the tokenizer struct's id
 *                  index, free and accessors: what both tokenizers build on
 *   wordpiece.c    WordPiece: vocab.txt, encode, decode
 *   bpe.c          GPT-2 byte-level BPE: encoder.json + vocab.bpe, encode,
 *                  decode, bytes_to_unicode, the pre-tokeniser
 *   tokenizer.c    encode and decode dispatched by kind */
#ifndef CLOZE_TEXT_INTERNAL_H
#define CLOZE_TEXT_INTERNAL_H

#include "cloze/text.h"

/* ---- UTF-8 and character classes. Character classes follow the
 * definitions the reference tokenizers use (cited per function); the
 * Unicode tables come from libutf8proc. ---- */

/* Decodes the UTF-8 sequence at p (n > 0 bytes left) into *cp: returns its
 * length, or 0 when the byte at p starts no valid sequence (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF, none cut short). */
size_t cz_utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);

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

/* ---- the tokenizer ---- */

/* GPT-2 merge table: (left id, right id) -> rank and merged id. */
typedef struct cz_pairtab {
    uint64_t *key; /* (left << 32 | right) + 1, 0 = empty */
    uint32_t *rank, *merged;
    uint32_t mask;
} cz_pairtab;

struct cz_tokenizer {
    cz_tokenizer_kind kind;
    cz_tokenizer_options opt;
    uint64_t fingerprint;
    uint32_t vocab_size; /* 1 + largest id */
    char **id_to_token;  /* points into the blob of `vocab` (NULL for gaps) */
    cz_strtab vocab;     /* full token strings as in the vocabulary file */
    /* WordPiece */
    cz_strtab cont; /* "##x" tokens, keyed by x */
    int32_t unk_id;
    unsigned char ascii_class[128];           /* WP_DROP / WP_SPACE / WP_PUNCT / WP_CHAR */
    uint32_t max_start_chars, max_cont_chars; /* longest pieces, in code points */
    /* BPE */
    cz_pairtab merges;
    uint32_t byte_id[256];                 /* id of each single byte's token */
    unsigned char unicode_to_byte_lo[512]; /* bytes_to_unicode inverse, cp < 512 */
    uint32_t byte_to_unicode[256];
};

int cz_wordpiece_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out,
                        cz_error *err);
char *cz_wordpiece_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);
int cz_bpe_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out, cz_error *err);
char *cz_bpe_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);

/* BPE of one pre-tokenised piece; force_long uses the heap algorithm meant
 * for long pieces at any length (tests compare the two). */
int cz_bpe_piece_ids(const cz_tokenizer *t, const unsigned char *p, size_t n, int force_long,
                     cz_ids *out, cz_error *err);

/* Builds id_to_token and vocab_size from t->vocab (vocab_table.c). */
int cz_tokenizer_index_ids(cz_tokenizer *t, cz_error *err);

#endif
