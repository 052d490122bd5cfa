/* text: what turns raw text into token ids, shared by cloze-prep, the
 * fine-tuning task readers and the programs.
 *
 *   - UTF-8 decoding and checking (RFC 3629);
 *   - the normaliser and the rule-based sentence splitter of cloze-prep
 *     (rules in docs/formats.md, "Normalisation" and "Sentences");
 *   - WordPiece (BERT: BasicTokenizer + greedy longest-match-first
 *     WordPiece, as google-research/bert tokenization.py and Hugging Face's
 *     BertTokenizer) and GPT-2 byte-level BPE (openai/gpt-2 encoder.py),
 *     loaded from their vocabulary files (vocab.txt; encoder.json +
 *     vocab.bpe);
 *   - the two pre-tokenisers and the string table, which the vocabulary
 *     learners of cloze-prep build on.
 *
 * A tokenizer is immutable after loading, so threads share one. The
 * character classes and the tokenizer's insides are in
 * src/text/text_internal.h (its tests may include it). */
#ifndef CLOZE_TEXT_H
#define CLOZE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"

/* ---- UTF-8 ---- */

/* Decodes one code point at s[*i] (i < len) and advances *i. A malformed or
 * truncated sequence yields U+FFFD and consumes one byte. */
uint32_t cz_utf8_next(const unsigned char *s, size_t len, size_t *i);
/* Offset of the first byte of s that starts no valid sequence (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF, none cut short),
 * or len when all of s is UTF-8. */
size_t cz_utf8_invalid_at(const unsigned char *s, size_t len);
/* Writes cp as UTF-8 into out (4 bytes room); returns the byte count. */
int cz_utf8_put(uint32_t cp, char *out);

/* ---- normalisation and sentences ---- */

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

/* ---- tokenizers ---- */

typedef struct cz_ids {
    uint32_t *ids;
    size_t n, cap;
} cz_ids;

int cz_ids_push(cz_ids *v, uint32_t id, cz_error *err);
void cz_ids_free(cz_ids *v);

typedef enum { CZ_TOK_WORDPIECE = 0, CZ_TOK_BPE = 1 } cz_tokenizer_kind;

typedef struct cz_tokenizer_options {
    int lower_case;       /* WordPiece: 1 = uncased (lower-case + strip accents) */
    int max_word_chars;   /* WordPiece: words longer than this become [UNK] */
    int tokenize_chinese; /* WordPiece: split CJK characters out (default 1) */
} cz_tokenizer_options;

void cz_tokenizer_options_default(cz_tokenizer_options *o);

typedef struct cz_tokenizer cz_tokenizer;

/* WordPiece from a BERT vocab.txt. */
int cz_tokenizer_load_wordpiece(cz_tokenizer **out, const char *vocab_path,
                                const cz_tokenizer_options *o, cz_error *err);
/* GPT-2 BPE from encoder.json + vocab.bpe (merges). */
int cz_tokenizer_load_bpe(cz_tokenizer **out, const char *encoder_json, const char *merges_path,
                          cz_error *err);
/* The same from the files' bytes in memory (a checkpoint's vocab.* blobs);
 * the names are for messages. The bytes are not kept. */
int cz_tokenizer_load_wordpiece_mem(cz_tokenizer **out, const char *vocab_name, const void *vocab,
                                    size_t len, const cz_tokenizer_options *o, cz_error *err);
int cz_tokenizer_load_bpe_mem(cz_tokenizer **out, const char *encoder_name, const void *encoder,
                              size_t encoder_len, const char *merges_name, const void *merges,
                              size_t merges_len, cz_error *err);
void cz_tokenizer_free(cz_tokenizer *t);

cz_tokenizer_kind cz_tokenizer_kind_of(const cz_tokenizer *t);
uint32_t cz_tokenizer_vocab_size(const cz_tokenizer *t);
/* The vocabulary's fingerprint (cz_vocab_fingerprint of its files): stored in shards. */
uint64_t cz_tokenizer_fingerprint(const cz_tokenizer *t);
/* The one rule of a vocabulary's fingerprint, which shards, manifests and
 * checkpoints carry: FNV-1a 64 (core.h, CZ_FNV_SEED) of the vocabulary
 * file's bytes (vocab.txt; encoder.json), then, for BPE, of the merges
 * file's bytes (vocab.bpe) seeded with that; WordPiece: merges NULL, 0. */
uint64_t cz_vocab_fingerprint(const void *vocab, size_t vocab_len, const void *merges,
                              size_t merges_len);
/* Id of a token string, or -1 ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<|endoftext|>"). */
int32_t cz_tokenizer_token_id(const cz_tokenizer *t, const char *token);
/* The token string of an id (WordPiece: as in vocab.txt; BPE: the
 * byte-to-unicode form as in encoder.json). */
const char *cz_tokenizer_token(const cz_tokenizer *t, uint32_t id);

/* Appends the ids of UTF-8 text (no [CLS]/[SEP] added). Text must be valid
 * UTF-8 (cloze-prep normalises first). */
int cz_tokenizer_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out,
                        cz_error *err);
/* Decodes ids back to text into a malloc'ed, NUL-terminated string and
 * its length in *len (when not NULL): BPE byte-exact, so the text may hold
 * NUL bytes and invalid UTF-8, decode(encode(x)) == x for any bytes x;
 * WordPiece joins "##" continuations and separates words by spaces. Ids
 * outside the vocabulary are skipped. */
char *cz_tokenizer_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);

/* ---- pre-tokenisers (the tokenizers' first step; the learners' too) ---- */

/* BERT's BasicTokenizer: calls fn for each word of text (normalised UTF-8,
 * offs[k] = byte offset of code point k, offs[ncp] = length). A word longer
 * than o->max_word_chars arrives with ncp = max_word_chars + 1 and only its
 * first max_word_chars code points. fn returns 0 or -1 (stops the split). */
typedef int (*cz_word_fn)(void *ctx, const char *word, const uint32_t *offs, int ncp);
int cz_bert_split(const cz_tokenizer_options *o, const char *text, size_t len, cz_word_fn fn,
                  void *ctx, cz_error *err);
/* GPT-2's pre-tokeniser regex: end of the piece that starts at s[i]. */
size_t cz_gpt2_piece_end(const unsigned char *s, size_t len, size_t i);
/* GPT-2 bytes_to_unicode (encoder.py): printable Latin-1 bytes map to
 * themselves, the other 68 to 256, 257, ... in byte order. */
void cz_gpt2_byte_map(uint32_t byte_to_unicode[256]);

/* ---- the string table of the vocabularies ----
 * Strings -> ids by open addressing. Strings live NUL-terminated in one blob;
 * a slot holds the full hash (to skip most string compares) and id + 1
 * (0 = empty). Inserting an existing string overwrites its id, as a Python
 * dict does when vocab.txt repeats a line. Entries are numbered 0..n-1 in
 * the order their strings were first put; entry k is the len[k] bytes at
 * blob + off[k] (readers may read those; only the functions change them). */
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
/* The id of s, or -1. */
int32_t cz_strtab_get(const cz_strtab *t, const char *s, size_t len);

#endif
