/* tokenizer_internal: the tokenizer struct and the string table shared by
 * tokenizer.c, wordpiece.c and bpe.c. Not part of the public interface. */
#ifndef CLOZE_PREP_TOKENIZER_INTERNAL_H
#define CLOZE_PREP_TOKENIZER_INTERNAL_H

#include "tokenizer.h"

/* Strings -> ids by open addressing. Strings live NUL-terminated in one blob;
 * a slot holds the full hash (to skip most string compares) and id + 1
 * (0 = empty). Inserting an existing string overwrites its id, as a Python
 * dict does when vocab.txt repeats a line. */
typedef struct cz_strtab {
    char *blob;
    size_t blob_len, blob_cap;
    uint32_t *off, *len; /* per entry index */
    uint32_t n, cap;     /* entries */
    uint64_t *slot_hash;
    uint32_t *slot_val; /* entry index + 1 */
    uint32_t *slot_id;
    uint32_t mask; /* slots - 1 */
    uint32_t max_len;
} cz_strtab;

int cz_strtab_init(cz_strtab *t, uint32_t expected, cz_error *err);
void cz_strtab_free(cz_strtab *t);
/* Adds s -> id (overwriting the id of an equal string). */
int cz_strtab_put(cz_strtab *t, const char *s, size_t len, uint32_t id, cz_error *err);
int32_t cz_strtab_get(const cz_strtab *t, const char *s, size_t len);

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
/* BERT's BasicTokenizer: calls fn for each word of text (normalised UTF-8,
 * offs[k] = byte offset of code point k, offs[ncp] = length). A word longer
 * than o->max_word_chars arrives with ncp = max_word_chars + 1 and only its
 * first max_word_chars code points. fn returns 0 or -1 (stops the split). */
typedef int (*cz_word_fn)(void *ctx, const char *word, const uint32_t *offs, int ncp);
int cz_bert_split(const cz_tokenizer_options *o, const char *text, size_t len, cz_word_fn fn,
                  void *ctx, cz_error *err);
/* GPT-2's pre-tokeniser regex: end of the piece that starts at s[i]. */
size_t cz_gpt2_piece_end(const unsigned char *s, size_t len, size_t i);

/* BPE of one pre-tokenised piece; force_long uses the heap algorithm meant
 * for long pieces at any length (tests compare the two). */
int cz_bpe_piece_ids(const cz_tokenizer *t, const unsigned char *p, size_t n, int force_long,
                     cz_ids *out, cz_error *err);

/* Builds id_to_token and vocab_size from t->vocab. */
int cz_tokenizer_index_ids(cz_tokenizer *t, cz_error *err);

/* GPT-2 bytes_to_unicode (encoder.py): printable Latin-1 bytes map to
 * themselves, the other 68 to 256, 257, ... in byte order. */
void cz_gpt2_byte_map(uint32_t byte_to_unicode[256]);

#endif
