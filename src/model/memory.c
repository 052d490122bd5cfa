/* The model's memory (model_private.h): creating a model allocates, once,
 * everything its forward and backward passes use, for the largest batch it
 * is made for; cz_model_get_memory reports the plan. Recomputation
 * (cfg.recompute = CZ_RECOMPUTE_LAYERS; Chen et al. 2016, "Training Deep
 * Nets with Sublinear Memory Cost", Sec. 3): every layer's activation
 * pointers alias ONE set of scratch buffers, and forward keeps only the
 * layer inputs x[l] (model.c runs each layer's forward again before its
 * backward). */
#include <omp.h>
#include <string.h>

#include "model_private.h"

/* The tensor tables, then the parameters and their gradients. */
static int alloc_params(cz_model *m, cz_error *err) {
    int L = m->cfg.layers;
    m->mem_slot = MEM_OTHER; /* tables, then re-assigned below */
    TAKE(m->tensors, MAX_TENSORS);
    TAKE(m->tensor_kind, MAX_TENSORS);
    TAKE(m->tensor_key, MAX_TENSORS);
    TAKE(m->layers, L);
    if (L * 16 + 16 > MAX_TENSORS)
        return cz_fail(err, "model: %d layers exceed the tensor table", L);
    model_build_table(m);
    m->mem_plan[MEM_OTHER] = 0; /* the tables are not part of the plan */
    m->mem_slot = MEM_PARAMS;
    TAKE(m->params, m->n_params);
    TAKE(m->grads, m->n_params);
    return 0;
}

/* Each layer's input, and the activations backward needs: one set per
 * layer, or with recomputation one set that every layer aliases. */
static int alloc_layers(cz_model *m, cz_error *err) {
    int L = m->cfg.layers, H = m->cfg.hidden, I = m->cfg.intermediate, A = m->cfg.heads,
        T = m->max_t, B = m->max_b;
    size_t N = (size_t)B * T;
    m->mem_slot = MEM_LAYER_INPUTS;
    TAKE(m->x, L + 1);
    for (int l = 0; l <= L; l++) TAKE(m->x[l], N * H);
    if (m->pre_ln) TAKE(m->x_last, N * H);
    m->mem_slot = MEM_LAYER_ACTS;
    int sets = m->cfg.recompute == CZ_RECOMPUTE_LAYERS ? 1 : L;
    for (int l = 0; l < L; l++) {
        layer *ly = &m->layers[l];
        if (l >= sets) { /* recomputation: alias layer 0's set */
            layer *s0 = &m->layers[0];
            ly->qkv_act = s0->qkv_act;
            ly->probs = s0->probs;
            ly->ctx = s0->ctx;
            ly->r1 = s0->r1;
            ly->h1 = s0->h1;
            ly->r2 = s0->r2;
            ly->u = s0->u;
            ly->g = s0->g;
            ly->mean1 = s0->mean1;
            ly->rstd1 = s0->rstd1;
            ly->mean2 = s0->mean2;
            ly->rstd2 = s0->rstd2;
            continue;
        }
        TAKE(ly->qkv_act, N * 3 * H);
        TAKE(ly->probs, (size_t)B * A * T * T);
        TAKE(ly->ctx, N * H);
        TAKE(ly->r1, N * H);
        TAKE(ly->h1, N * H);
        TAKE(ly->r2, N * H);
        TAKE(ly->u, N * I);
        TAKE(ly->g, N * I);
        TAKE(ly->mean1, N);
        TAKE(ly->rstd1, N);
        TAKE(ly->mean2, N);
        TAKE(ly->rstd2, N);
    }
    return 0;
}

/* The rest of the forward and backward working memory: embeddings, the
 * LM rows, BERT's pre-training heads, the backward scratch. */
static int alloc_work(cz_model *m, cz_error *err) {
    const cz_model_config *cfg = &m->cfg;
    int bert = cfg->arch == CZ_ARCH_BERT;
    int H = cfg->hidden, I = cfg->intermediate, A = cfg->heads, V = m->vrows, T = m->max_t,
        B = m->max_b, P = m->max_p;
    size_t N = (size_t)B * T, BP = (size_t)B * P;
    m->mem_slot = MEM_OTHER;
    TAKE(m->emb_sum, N * H);
    TAKE(m->emb_ln, N * H);
    TAKE(m->emb_mean, N);
    TAKE(m->emb_rstd, N);
    if (m->pre_ln) {
        TAKE(m->lnf_mean, N);
        TAKE(m->lnf_rstd, N);
    }
    TAKE(m->key_bias, N);
    TAKE(m->probs_drop, (size_t)B * A * T * T);
    TAKE(m->dprobs, (size_t)B * A * T * T);
    TAKE(m->tmp_h, N * H);
    /* LM rows: BERT's MLM slots, GPT's tokens (also for the auxiliary LM loss) */
    int lm = cfg->head == CZ_HEAD_PRETRAIN || cfg->lm_weight > 0; /* lm_weight: GPT's task heads */
    size_t rows = !lm ? 0 : bert ? BP : N;
    TAKE(m->logits, rows * V);
    TAKE(m->row_loss, rows);
    TAKE(m->row_label, rows);
    TAKE(m->row_argmax, rows);
    TAKE(m->row_scale, rows);
    if (bert) {
        TAKE(m->mlm_h, BP * H);
        TAKE(m->mlm_u, BP * H);
        TAKE(m->mlm_g, BP * H);
        TAKE(m->mlm_z, BP * H);
        TAKE(m->mlm_mean, BP);
        TAKE(m->mlm_rstd, BP);
        TAKE(m->dmlm, BP * H);
        TAKE(m->dmlm2, BP * H);
        TAKE(m->cls, (size_t)B * H);
        TAKE(m->pooled, (size_t)B * H);
        TAKE(m->dcls, (size_t)B * H);
        TAKE(m->nsp_logits, (size_t)B * 2);
        TAKE(m->nsp_loss, B);
        TAKE(m->nsp_argmax, B);
        TAKE(m->nsp_scale, B);
    }
    TAKE(m->dx, N * H);
    TAKE(m->dy, N * H);
    TAKE(m->dr, N * H);
    TAKE(m->df, N * H);
    TAKE(m->dh1, N * H);
    TAKE(m->dctx, N * H);
    TAKE(m->di, N * I);
    TAKE(m->dqkv, N * 3 * H);
    TAKE(m->row_of, V);
    TAKE(m->row_ids, N);
    TAKE(m->tok_slot, N);
    TAKE(m->row_vals, N * H);
    memset(m->row_of, 0, (size_t)V * sizeof *m->row_of);
    return 0;
}

/* One single-threaded GEMM context per OpenMP thread for the attention's
 * per-head products (attention.c). */
static int make_attn_gemm(cz_model *m, const cz_gemm_ctx *gemm, cz_error *err) {
    if (!gemm) return 0;
    int nt = omp_get_max_threads();
    /* not from model_take(): these are not activations (memory plan) */
    if (!(m->attn_gemm = cz_alloc((size_t)nt * sizeof *m->attn_gemm, err))) return -1;
    for (; m->n_attn_gemm < nt; m->n_attn_gemm++)
        if (!(m->attn_gemm[m->n_attn_gemm] = cz_gemm_single_thread(gemm, err))) return -1;
    return 0;
}

/* The precision is the configuration's (model.matmul_precision); the GEMM
 * context must run it (cz_model_gemm_setup makes one that does). Without a
 * context (a model made for its tensors: exports, imports, counts) the
 * products run the fp32 reference loops. */
static int check_precision(const cz_model_config *cfg, const cz_gemm_ctx *gemm, cz_error *err) {
    if (gemm && !cz_gemm_is_bf16(gemm) != !cfg->matmul_bf16)
        return cz_fail(err, "model: model.matmul_precision is %s but the GEMM context runs %s",
                       cfg->matmul_bf16 ? "bf16" : "fp32", cfg->matmul_bf16 ? "fp32" : "bf16");
    return 0;
}

int cz_model_create(cz_model **out, const cz_model_config *cfg, int max_batch, int max_seq,
                    int max_pred, const cz_gemm_ctx *gemm, cz_error *err) {
    *out = NULL;
    if (model_check_create(cfg, max_batch, max_seq, max_pred, err) ||
        check_precision(cfg, gemm, err))
        return -1;
    cz_model *m = cz_alloc(sizeof *m, err);
    if (!m) return -1;
    m->cfg = *cfg;
    m->out_mult = cz_model_output_mult_of(cfg);
    m->max_b = max_batch;
    m->max_t = max_seq;
    m->max_p = cfg->arch == CZ_ARCH_BERT && cfg->head == CZ_HEAD_PRETRAIN ? max_pred : 0;
    m->gemm = gemm;
    m->bf16 = cfg->matmul_bf16 && gemm;
    m->scratch_layer = -1;
    if (alloc_params(m, err) || alloc_layers(m, err) || alloc_work(m, err) ||
        model_alloc_task_head(m, err) || make_attn_gemm(m, gemm, err)) {
        cz_model_free(m);
        return -1;
    }
    /* the block, chosen once: post-LN (BERT, GPT-1) or pre-LN (GPT-2) */
    m->layer = m->pre_ln ? &model_pre_ln_layer : &model_post_ln_layer;
    *out = m;
    return 0;
}

void cz_model_free(cz_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_attn_gemm; i++) cz_gemm_free(m->attn_gemm[i]);
    cz_free(m->attn_gemm);
    for (int i = m->n_allocs - 1; i >= 0; i--) cz_free(m->allocs[i]);
    cz_free(m);
}

void cz_model_get_memory(const cz_model *m, cz_model_memory *out) {
    out->params = m->mem_plan[MEM_PARAMS];
    out->layer_inputs = m->mem_plan[MEM_LAYER_INPUTS];
    out->layer_acts = m->mem_plan[MEM_LAYER_ACTS];
    out->other = m->mem_plan[MEM_OTHER];
    out->activations = out->layer_inputs + out->layer_acts + out->other;
}

/* ---- the buffers' public views ---- */

const cz_model_config *cz_model_get_config(const cz_model *m) {
    return &m->cfg;
}
size_t cz_model_num_params(const cz_model *m) {
    return m->n_params;
}
float *cz_model_params(cz_model *m) {
    return m->params;
}
float *cz_model_grads(cz_model *m) {
    return m->grads;
}

void cz_model_zero_grads(cz_model *m) {
    memset(m->grads, 0, m->n_params * sizeof *m->grads);
}

const float *cz_model_hidden_states(const cz_model *m, int l) {
    return l >= 0 && l <= m->cfg.layers ? m->x[l] : NULL;
}
