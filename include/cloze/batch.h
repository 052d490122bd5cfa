/* batch: the micro-batch view, the one interface between data (which fills
 * it, src/data/batch.c) and model (which reads it). Plain arrays and the
 * architecture they are laid out for; neither side needs the other's
 * header.
 *
 * BERT fills tokens, segments, attn_mask and the masked-LM / NSP labels
 * (Devlin et al. 2018, Sec. 3.1); GPT fills tokens and targets, the next
 * token of every position (Radford et al. 2018, Sec. 3.1). */
#ifndef CLOZE_BATCH_H
#define CLOZE_BATCH_H

#include <stdint.h>

/* model.arch: the value order is the word order of CZ_ARCH_WORDS (the
 * config table reads the word as the enum's index). */
typedef enum { CZ_ARCH_BERT = 0, CZ_ARCH_GPT = 1 } cz_arch;
#define CZ_ARCH_WORDS "bert|gpt"

/* One micro-batch: B sequences of T tokens. */
typedef struct cz_batch {
    int batch, seq;
    const int32_t *tokens;    /* [B*T] */
    const int32_t *segments;  /* [B*T] BERT token type ids; NULL for GPT */
    const uint8_t *attn_mask; /* [B*T] 1 = real token, 0 = padding; NULL = all real */
    /* BERT heads */
    int max_pred;                 /* P prediction slots per sequence */
    const int32_t *mlm_positions; /* [B*P] position in [0,T) */
    const int32_t *mlm_labels;    /* [B*P] original token id */
    const float *mlm_weights;     /* [B*P] 1 = real slot, 0 = unused */
    const int32_t *nsp_labels;    /* [B] 0 = IsNext, 1 = NotNext */
    /* GPT head */
    const int32_t *targets; /* [B*T] next token id, -1 = no loss at this position */
    /* dropout keys: (seed, step, sample_ids[b], layer, site) -> Philox stream */
    int train; /* 1: dropout on, 0: off */
    uint64_t seed, step;
    const uint64_t *sample_ids; /* [B] global sample index of each sequence */
    /* fine-tuning heads (cz_head in model.h); NULL labels = forward only
     * (logits, no loss) */
    const int32_t *labels;          /* [B] CLASSIFY: class in [0, C) */
    const int32_t *start_positions; /* [B] SPAN: answer start token in [0, T) */
    const int32_t *end_positions;   /* [B] SPAN: answer end token (inclusive) */
    const int32_t *token_labels;    /* [B*T] TAG: class, -1 = no loss at this token */
    const int32_t *cls_index;       /* [B] GPT CLASSIFY: position of the extract token */
} cz_batch;

#endif
