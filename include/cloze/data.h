/* data: training instances built on the fly from token shards.
 *
 * BERT follows create_pretraining_data.py (the original BERT code): target
 * length with short_seq_prob, segment A from whole sentences, B the true
 * continuation or (50%) a span of another document, truncate_seq_pair,
 * [CLS] A [SEP] B [SEP], 15% masking with 80/10/10 replacement, optional
 * whole-word masking. GPT: contiguous windows of seq+1 tokens across
 * documents joined by the end-of-text token.
 *
 * Every random choice is a function of (seed, epoch, global sample index)
 * through cz_rng (purpose CZ_RNG_INSTANCE / CZ_RNG_SHUFFLE), so sample g is the
 * same whichever rank builds it and however many ranks there are. The data
 * position of a run is one number: the next global sample index. */
#ifndef CLOZE_DATA_H
#define CLOZE_DATA_H

#include <stdint.h>

#include "cloze/batch.h"
#include "cloze/core.h"
#include "cloze/shard.h"

/* The data section of the configuration (keys data.*, docs/config.md). */
typedef struct cz_data_config {
    char train_manifest[CZ_PATH_MAX];   /* shards manifest written by cloze-prep */
    char heldout_manifest[CZ_PATH_MAX]; /* "" = no evaluation */
    int seq;                            /* max_seq_length (BERT 128 / GPT 512) */
    int max_pred;                       /* max_predictions_per_seq (20 at 128) */
    float masked_lm_prob;               /* 0.15 */
    float short_seq_prob;               /* 0.1 */
    int whole_word_mask;                /* 0/1 */
    /* second phase of the BERT length curriculum; phase2_fraction = 0: off */
    float phase2_fraction;   /* e.g. 0.1: last 10% of steps */
    int phase2_seq;          /* 512 */
    int phase2_max_pred;     /* 80 */
    int phase2_global_batch; /* 0 = same as train.global_batch */
    int phase2_micro_batch;  /* 0 = same as train.micro_batch */
} cz_data_config;

/* Buffers for up to `cap` sequences of `seq` tokens; a cz_batch views them. */
typedef struct cz_batch_buf {
    int cap, seq, max_pred;
    int32_t *tokens, *segments;
    uint8_t *attn_mask;
    int32_t *mlm_positions, *mlm_labels;
    float *mlm_weights;
    int32_t *nsp_labels;
    int32_t *targets;
    uint64_t *sample_ids;
    /* fine-tuning labels (cz_batch), filled by the task's own builder */
    int32_t *labels, *start_positions, *end_positions, *cls_index; /* [cap] */
    int32_t *token_labels;                                         /* [cap * seq] */
} cz_batch_buf;

int cz_batch_buf_alloc(cz_batch_buf *b, int cap, int seq, int max_pred, cz_error *err);
void cz_batch_buf_free(cz_batch_buf *b);
/* A cz_batch over the first n sequences of b (dropout fields left for the caller). */
cz_batch cz_batch_view(const cz_batch_buf *b, int n);
/* The same view padded to the longest of the n sequences instead of to
 * b->seq (Hugging Face's padding="longest"): T' = one past the last real
 * token (attn_mask 1) of any row, and the per-token fields (tokens,
 * segments, mask, targets, token labels) moved in place to stride T'. The
 * padding cut off is masked out of attention and carries no loss, so the
 * model computes the same function in fewer operations. Positions (SPAN
 * starts and ends, GPT's cls_index) stay valid: they point at real tokens.
 * The buffer's rows are at stride T' until the next build rewrites them. */
cz_batch cz_batch_view_packed(cz_batch_buf *b, int n);

typedef struct cz_data cz_data;

/* Opens a manifest (shards are mmapped lazily: a rank touches only the pages
 * of the samples it builds). Each shard's payload is verified (checksum,
 * ids) when it is first opened, unless "<manifest>.verified" records it as
 * verified and unchanged since (cz_verified_check, cloze/shard.h). */
int cz_data_open(cz_data **out, const char *manifest_path, cz_arch arch, const cz_data_config *cfg,
                 uint64_t seed, cz_error *err);
void cz_data_close(cz_data *d);
const cz_manifest *cz_data_manifest(const cz_data *d);

/* Number of distinct samples in one epoch for sequences of length seq. */
uint64_t cz_data_samples_per_epoch(cz_data *d, int seq);

/* Builds global sample `g` (epoch = g / samples_per_epoch) with length seq and
 * max_pred prediction slots into slot `slot` of buf. */
int cz_data_build(cz_data *d, cz_batch_buf *buf, int slot, uint64_t g, int seq, int max_pred,
                  cz_error *err);

/* Where sample g comes from: its epoch, and the item (BERT anchor = chunk
 * start, GPT window) it uses in [0, samples_per_epoch). Each item is used
 * exactly once per epoch. */
int cz_data_locate(cz_data *d, uint64_t g, int seq, uint64_t *epoch, uint64_t *item, cz_error *err);

/* The epoch order: a bijection of [0, n) keyed by (seed, epoch), item =
 * cz_data_permute(seed, epoch, n, g % n). */
uint64_t cz_data_permute(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t i);

/* Opens (mmaps) every shard and builds the sample index for seq: reads the
 * headers and boundary tables, and the payloads not yet verified (then
 * records them in the cache). Shards and indexes are
 * otherwise made on first use, which is not thread-safe; after
 * cz_data_prepare(d, seq) threads may call cz_data_build for that seq
 * concurrently (distinct slots). */
int cz_data_prepare(cz_data *d, int seq, cz_error *err);

#endif
