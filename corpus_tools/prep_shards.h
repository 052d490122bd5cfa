/* prep_shards: the `cloze-prep shards` pipeline: read documents, normalise,
 * split sentences, tokenize on a thread pool, write shards in input order.
 *
 * Determinism: documents are read in a fixed order (files in the given
 * order, directories sorted), tokenized in batches by OpenMP threads into
 * per-document slots, and written in read order, so the shards are
 * byte-identical for any thread count. With MPI, file i goes to rank
 * i % world; rank r owns train shards k with k % world == r. */
#ifndef CLOZE_PREP_SHARDS_H
#define CLOZE_PREP_SHARDS_H

#include <stdint.h>

#include "cloze/core.h"
#include "cloze/shard.h"
#include "prep_input.h"
#include "tokenizer.h"

typedef struct cz_prep_options {
    const char *out_dir;
    int n_shards;   /* train shards over all ranks */
    double heldout; /* fraction of documents held out, 0 = none */
    int threads;
    cz_input_format fmt;
    const char *jsonl_field;
    int wikitext_detok;
    int progress;    /* progress line on stderr */
    int rank, world; /* MPI position (0, 1 without MPI) */
} cz_prep_options;

typedef struct cz_prep_stats {
    uint64_t bytes_in, documents, heldout_documents, sentences, tokens, unk, bytes_replaced,
        chars_dropped;
} cz_prep_stats;
#define CZ_PREP_STATS_N 8 /* uint64 fields, for MPI reductions */

/* A document's tokens, sentence lengths and counts. */
typedef struct cz_prep_doc {
    cz_buf norm;
    cz_spans spans;
    cz_ids ids;
    uint32_t *sent_len;
    size_t n_sent, cap_sent;
    cz_prep_stats st;
    uint64_t hash; /* FNV-1a 64 of the normalised text: decides the heldout split */
} cz_prep_doc;

/* Raw document bytes into d (reset first). WordPiece (BERT): normalised,
 * split into sentences, each encoded; BPE (GPT): the bytes as they are
 * (cz_verbatim), encoded whole as one sentence. */
int cz_prep_document(const cz_tokenizer *tok, const char *raw, size_t len, int detok,
                     cz_prep_doc *d, cz_error *err);
void cz_prep_doc_free(cz_prep_doc *d);

/* Is a document with this content hash held out? (hash / 2^64 < fraction) */
int cz_prep_is_heldout(uint64_t hash, double fraction);

/* Writes this rank's shards (<out>/train-KKKKK.bin, <out>/heldout-RRRRR.bin). */
int cz_prep_shards(const cz_prep_options *o, const cz_tokenizer *tok, const cz_file_list *files,
                   cz_prep_stats *st, cz_error *err);

/* After every rank finished: the manifests of the shards in o->out_dir, with
 * the vocabulary they were made with (kind, size, fingerprint, and each
 * file's paths and SHA-256). Empty shards are removed and left out; heldout
 * lists no shard without --heldout. Free both with cz_manifest_free. */
int cz_prep_collect_manifests(const cz_prep_options *o, const cz_tokenizer *tok,
                              const char *vocab_path, const char *merges_path, cz_manifest *train,
                              cz_manifest *heldout, cz_error *err);

#endif
