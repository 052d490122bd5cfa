/* tokenizer: the interface cloze-prep uses for both vocabularies.
 *
 * WordPiece (BERT: BasicTokenizer + greedy longest-match-first WordPiece, as in
 * google-research/bert tokenization.py and Hugging Face's BertTokenizer) and
 * GPT-2 byte-level BPE (openai/gpt-2 encoder.py). A tokenizer is immutable
 * after loading, so threads share one. */
#ifndef CLOZE_PREP_TOKENIZER_H
#define CLOZE_PREP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"

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
void cz_tokenizer_free(cz_tokenizer *t);

cz_tokenizer_kind cz_tokenizer_kind_of(const cz_tokenizer *t);
uint32_t cz_tokenizer_vocab_size(const cz_tokenizer *t);
/* FNV-1a 64 of the vocabulary file bytes (and merges for BPE): stored in shards. */
uint64_t cz_tokenizer_fingerprint(const cz_tokenizer *t);
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

#endif
