/* vocab_learn: learn a WordPiece vocabulary (BERT vocab.txt layout) or GPT-2
 * byte-level BPE merges (encoder.json + vocab.bpe) from text files, for
 * `cloze-prep vocab`. Deterministic: the same files and options give the same
 * bytes, whatever the thread count. Memory is bounded by the table of
 * distinct words (one entry per distinct pre-tokenised word + its count).
 * The algorithm is described in docs/tokenizers.md. */
#ifndef CLOZE_PREP_VOCAB_LEARN_H
#define CLOZE_PREP_VOCAB_LEARN_H

#include "cloze/core.h"

typedef struct cz_vocab_learn_options {
    int vocab_size;     /* total entries, specials and reserved included */
    int lower_case;     /* WordPiece: 1 = uncased (lower-case + strip accents) */
    int n_unused;       /* WordPiece: [unused0..n-1] after [PAD] (BERT: 99, so [UNK] = 100) */
    int min_frequency;  /* merges whose pair occurs fewer times are not learned (default 2) */
    int max_word_chars; /* WordPiece: longer words are skipped (default 100, as the tokenizer) */
} cz_vocab_learn_options;

void cz_vocab_learn_options_default(cz_vocab_learn_options *o);

/* vocab.txt: [PAD] [unused0..] [UNK] [CLS] [SEP] [MASK], every character
 * seen (and its ## form), then learned pieces; written atomically. */
int cz_learn_wordpiece_opts(const char *const *files, int n_files, const cz_vocab_learn_options *o,
                            const char *out_vocab, cz_error *err);
int cz_learn_wordpiece(const char *const *files, int n_files, int vocab_size, int lower_case,
                       const char *out_vocab, cz_error *err);

/* encoder.json (256 byte tokens, merges, then <|endoftext|> last) and
 * vocab.bpe ("#version: 0.2" + one merge per line, rank order). */
int cz_learn_bpe(const char *const *files, int n_files, int vocab_size,
                 const char *out_encoder_json, const char *out_merges, cz_error *err);

#endif
