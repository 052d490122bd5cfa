/* Multi-head self-attention (Vaswani et al. 2017, Sec. 3.2.2; model_private.h):
 *   Attn(X) = concat_h softmax(Q_h K_h^T / sqrt(d) + mask) V_h,  d = H / A,
 * Q, K, V the three thirds of the layer's fused q/k/v output (qkv_act
 * [N, 3H]); mask: the key bias on padded keys (model.c, as Hugging Face
 * BERT's extended attention mask) and, for GPT, no key after its query
 * (causal). Dropout on the probabilities (attn_dropout) as BERT and GPT-1
 * do. */
#include <math.h>
#include <omp.h>

#include "model_private.h"

static int attn_dropping(const cz_model *m, const cz_batch *b) {
    return b->train && m->cfg.attn_dropout > 0.0f;
}

/* Dropout of the attention probabilities of every sequence: sequence s's
 * [A, T, T] block is one stream, element (h, q, k) at index
 * (h*P + q)*P + k with P = max_positions, not T: a sequence's mask does not
 * depend on the length its batch is padded to (cz_batch_view_packed), so a
 * fine-tuning batch padded to its longest sequence trains as one padded to
 * max_seq. */
static void attn_dropout(cz_model *m, const cz_batch *b, int l, float *y, const float *x) {
    int T = b->seq, A = m->cfg.heads;
    uint64_t P = (uint64_t)m->cfg.max_positions;
    size_t per = (size_t)A * T * T;
    for (int s = 0; s < b->batch; s++) {
        cz_rng_stream st = model_dropout_stream(b, s, l, SITE_ATTN_PROBS);
        for (int h = 0; h < A; h++) {
            size_t o = s * per + (size_t)h * T * T;
            cz_dropout_rows(y + o, x + o, T, T, P, m->cfg.attn_dropout, &st, (uint64_t)h * P * P);
        }
    }
}

/* ---- the products, one (sequence, head) pair at a time ----
 * Each pair's products are small (T x T x d: 1M multiply-adds at T = 128,
 * d = 64), too small to split over threads; so the pairs run side by side,
 * each on one thread with its own single-thread GEMM context, through the
 * model's product path (model_product). Every product is computed exactly
 * as one call on m->gemm would (cz_gemm_single_thread), so the results do
 * not depend on the thread count. */
typedef struct attn_head_args {
    cz_model *m;
    layer *ly;
    const cz_batch *b;
    float scale;
    const float *pd; /* probabilities after dropout */
} attn_head_args;
typedef void (*attn_head_fn)(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h);

static void attn_per_head(cz_model *m, int pairs, attn_head_fn fn, const attn_head_args *a) {
    int A = m->cfg.heads;
    if (m->n_attn_gemm == 0) { /* no GEMM context: the reference loops */
        for (int i = 0; i < pairs; i++) fn(m->gemm, a, i / A, i % A);
        return;
    }
    int nt = omp_get_max_threads() < m->n_attn_gemm ? omp_get_max_threads() : m->n_attn_gemm;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int i = 0; i < pairs; i++) fn(m->attn_gemm[omp_get_thread_num()], a, i / A, i % A);
}

/* C = alpha op(A) op(B) on g, fp32 operands */
static void head_product(const cz_gemm_ctx *g, int ta, int tb, int mm, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float *c, int ldc) {
    model_product(g, ta, tb, mm, n, k, alpha, cz_mat_f32(a, lda), cz_mat_f32(b, ldb), 0, 0.0f, c,
                  ldc);
}

/* S = scale Q K^T into probs (the softmax runs over all pairs afterwards) */
static void attn_head_scores(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h) {
    int T = a->b->seq, H = a->m->cfg.hidden, A = a->m->cfg.heads, d = H / A;
    const float *q = a->ly->qkv_act + (size_t)s * T * 3 * H + h * d;
    float *p = a->ly->probs + ((size_t)s * A + h) * T * T;
    head_product(g, 0, 1, T, T, d, a->scale, q, 3 * H, q + H, 3 * H, p, T);
}

/* ctx = Pd V */
static void attn_head_context(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h) {
    int T = a->b->seq, H = a->m->cfg.hidden, A = a->m->cfg.heads, d = H / A;
    const float *v = a->ly->qkv_act + (size_t)s * T * 3 * H + 2 * H + h * d;
    const float *p = a->pd + ((size_t)s * A + h) * T * T;
    head_product(g, 0, 0, T, d, T, 1.0f, p, T, v, 3 * H, a->ly->ctx + (size_t)s * T * H + h * d, H);
}

/* ctx = Pd V: dV = Pd^T dctx, dPd = dctx V^T */
static void attn_head_context_backward(const cz_gemm_ctx *g, const attn_head_args *a, int s,
                                       int h) {
    cz_model *m = a->m;
    int T = a->b->seq, H = m->cfg.hidden, A = m->cfg.heads, d = H / A;
    size_t row0 = (size_t)s * T, pp = ((size_t)s * A + h) * T * T;
    const float *v = a->ly->qkv_act + row0 * 3 * H + 2 * H + h * d;
    float *dv = m->dqkv + row0 * 3 * H + 2 * H + h * d;
    const float *dctx = m->dctx + row0 * H + h * d;
    head_product(g, 1, 0, T, d, T, 1.0f, a->pd + pp, T, dctx, H, dv, 3 * H);
    head_product(g, 0, 1, T, T, d, 1.0f, dctx, H, v, 3 * H, m->dprobs + pp, T);
}

/* S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q */
static void attn_head_scores_backward(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h) {
    cz_model *m = a->m;
    int T = a->b->seq, H = m->cfg.hidden, A = m->cfg.heads, d = H / A;
    size_t row0 = (size_t)s * T, pp = ((size_t)s * A + h) * T * T;
    const float *q = a->ly->qkv_act + row0 * 3 * H + h * d, *k = q + H;
    float *dq = m->dqkv + row0 * 3 * H + h * d, *dk = dq + H;
    head_product(g, 0, 0, T, d, T, a->scale, m->dprobs + pp, T, k, 3 * H, dq, 3 * H);
    head_product(g, 1, 0, T, d, T, a->scale, m->dprobs + pp, T, q, 3 * H, dk, 3 * H);
}

/* Scores of all (sequence, head) pairs by GEMM, then one softmax (and one
 * dropout) over all B*A*T rows, so those kernels get enough rows to use
 * every thread; then P V per pair. */
void model_attention_forward(cz_model *m, layer *ly, int l, const cz_batch *b) {
    int T = b->seq, A = m->cfg.heads, B = b->batch;
    float scale = cz_model_attn_scale(&m->cfg); /* 1/sqrt(d), or µP's (model.h) */
    int causal = m->cfg.arch == CZ_ARCH_GPT;
    PHASE(gemm,
          attn_per_head(m, B * A, attn_head_scores, &(attn_head_args){m, ly, b, scale, NULL}));
    PHASE(attention,
          cz_attn_softmax_batch(ly->probs, B, A, T, b->attn_mask ? m->key_bias : NULL, causal));
    const float *pd = ly->probs;
    if (attn_dropping(m, b)) {
        PHASE(attention, attn_dropout(m, b, l, m->probs_drop, ly->probs));
        pd = m->probs_drop;
    }
    PHASE(gemm, attn_per_head(m, B * A, attn_head_context, &(attn_head_args){m, ly, b, scale, pd}));
}

/* From dctx [N, H] to dqkv [N, 3H]. */
void model_attention_backward(cz_model *m, layer *ly, int l, const cz_batch *b) {
    int T = b->seq, A = m->cfg.heads, B = b->batch;
    float scale = cz_model_attn_scale(&m->cfg); /* 1/sqrt(d), or µP's (model.h) */
    const float *pd = ly->probs;
    if (attn_dropping(m, b)) { /* the forward's mask, regenerated */
        PHASE(attention, attn_dropout(m, b, l, m->probs_drop, ly->probs));
        pd = m->probs_drop;
    }
    /* ctx = Pd V: dV = Pd^T dctx, dPd = dctx V^T */
    PHASE(gemm, attn_per_head(m, B * A, attn_head_context_backward,
                              &(attn_head_args){m, ly, b, scale, pd}));
    if (attn_dropping(m, b)) PHASE(attention, attn_dropout(m, b, l, m->dprobs, m->dprobs));
    PHASE(attention, cz_softmax_backward(m->dprobs, ly->probs, m->dprobs, B * A * T, T));
    /* S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q */
    PHASE(gemm, attn_per_head(m, B * A, attn_head_scores_backward,
                              &(attn_head_args){m, ly, b, scale, NULL}));
}
