/* batch: the buffers one micro-batch is built into, and the cz_batch view the
 * model reads. One allocation per field, sized once for (cap, seq, max_pred):
 * nothing is allocated while training. */
#include "cloze/data.h"

#include <string.h>

int cz_batch_buf_alloc(cz_batch_buf *b, int cap, int seq, int max_pred, cz_error *err) {
    memset(b, 0, sizeof *b);
    if (cap <= 0 || seq <= 0 || max_pred < 0)
        return cz_fail(err, "batch buffer: bad sizes cap=%d seq=%d max_pred=%d", cap, seq,
                       max_pred);
    b->cap = cap;
    b->seq = seq;
    b->max_pred = max_pred;
    size_t bt = (size_t)cap * (size_t)seq, bp = (size_t)cap * (size_t)(max_pred > 0 ? max_pred : 1);
    b->tokens = cz_alloc(bt * sizeof(int32_t), err);
    b->segments = cz_alloc(bt * sizeof(int32_t), err);
    b->attn_mask = cz_alloc(bt, err);
    b->targets = cz_alloc(bt * sizeof(int32_t), err);
    b->mlm_positions = cz_alloc(bp * sizeof(int32_t), err);
    b->mlm_labels = cz_alloc(bp * sizeof(int32_t), err);
    b->mlm_weights = cz_alloc(bp * sizeof(float), err);
    b->nsp_labels = cz_alloc((size_t)cap * sizeof(int32_t), err);
    b->sample_ids = cz_alloc((size_t)cap * sizeof(uint64_t), err);
    b->labels = cz_alloc((size_t)cap * sizeof(int32_t), err);
    b->start_positions = cz_alloc((size_t)cap * sizeof(int32_t), err);
    b->end_positions = cz_alloc((size_t)cap * sizeof(int32_t), err);
    b->cls_index = cz_alloc((size_t)cap * sizeof(int32_t), err);
    b->token_labels = cz_alloc(bt * sizeof(int32_t), err);
    if (!b->labels || !b->start_positions || !b->end_positions || !b->cls_index ||
        !b->token_labels || !b->tokens || !b->segments || !b->attn_mask || !b->targets ||
        !b->mlm_positions || !b->mlm_labels || !b->mlm_weights || !b->nsp_labels ||
        !b->sample_ids) {
        cz_batch_buf_free(b);
        return cz_fail_prefix(err, "batch buffer (%d x %d)", cap, seq);
    }
    return 0;
}

void cz_batch_buf_free(cz_batch_buf *b) {
    cz_free(b->tokens);
    cz_free(b->segments);
    cz_free(b->attn_mask);
    cz_free(b->targets);
    cz_free(b->mlm_positions);
    cz_free(b->mlm_labels);
    cz_free(b->mlm_weights);
    cz_free(b->nsp_labels);
    cz_free(b->sample_ids);
    cz_free(b->labels);
    cz_free(b->start_positions);
    cz_free(b->end_positions);
    cz_free(b->cls_index);
    cz_free(b->token_labels);
    memset(b, 0, sizeof *b);
}

/* Moves row r of a [n, from] array to stride `to` (to <= from): rows only
 * move towards the start, in order, so memmove in place is safe. */
static void restride(void *base, size_t elem, int n, int from, int to) {
    char *p = base;
    for (int r = 1; r < n; r++)
        memmove(p + (size_t)r * to * elem, p + (size_t)r * from * elem, (size_t)to * elem);
}

cz_batch cz_batch_view_packed(cz_batch_buf *b, int n) {
    int T = b->seq, len = 1;
    for (int r = 0; r < n; r++) {
        const uint8_t *m = b->attn_mask + (size_t)r * T;
        int last = T;
        while (last > len && !m[last - 1]) last--;
        if (last > len) len = last;
    }
    if (len < T) {
        restride(b->tokens, sizeof *b->tokens, n, T, len);
        restride(b->segments, sizeof *b->segments, n, T, len);
        restride(b->attn_mask, 1, n, T, len);
        restride(b->targets, sizeof *b->targets, n, T, len);
        restride(b->token_labels, sizeof *b->token_labels, n, T, len);
    }
    cz_batch v = cz_batch_view(b, n);
    v.seq = len;
    return v;
}

/* Every field is set: BERT ignores targets (filled with -1), GPT ignores the
 * segment ids and the MLM/NSP fields and gets an all-ones attention mask. */
cz_batch cz_batch_view(const cz_batch_buf *b, int n) {
    cz_batch v;
    memset(&v, 0, sizeof v);
    v.batch = n;
    v.seq = b->seq;
    v.tokens = b->tokens;
    v.segments = b->segments;
    v.attn_mask = b->attn_mask;
    v.max_pred = b->max_pred;
    v.mlm_positions = b->mlm_positions;
    v.mlm_labels = b->mlm_labels;
    v.mlm_weights = b->mlm_weights;
    v.nsp_labels = b->nsp_labels;
    v.targets = b->targets;
    v.sample_ids = b->sample_ids;
    v.labels = b->labels;
    v.start_positions = b->start_positions;
    v.end_positions = b->end_positions;
    v.token_labels = b->token_labels;
    v.cls_index = b->cls_index;
    return v;
}
