/* BERT (Devlin et al. 2018) and GPT-1 (Radford et al. 2018): post-LN
 * Transformer blocks (Vaswani et al. 2017); GPT-2's pre-LN decoder (Radford
 * et al. 2019, Sec. 2.3); forward and backward in fp32.
 * The fine-tuning heads are task_heads.c's; what the files share, and
 * their order, is model_private.h's.
 *
 * Post-LN block (BERT Sec. 3, GPT-1 Sec. 3.1 and 4.1; Vaswani et al. Sec. 3):
 *   h = LN(x + Drop(Attn(x)))        Attn = softmax(Q K^T / sqrt(d) + mask) V, per head
 *   y = LN(h + Drop(W2 GELU(W1 h + b1) + b2))
 * Pre-LN block (model.layout = pre_ln; GPT-2 Sec. 2.3: LayerNorm "moved to
 * the input of each sub-block", one more after the last block):
 *   r = x + Drop(Attn(LN1(x)))
 *   y = r + Drop(W2 GELU(W1 LN2(r) + b1) + b2)
 *   the heads read LN_f(y of the last layer)
 * Activations are row-major [tokens x features], token n = b*T + t.
 *
 * Parameter layout: one flat buffer, tensors in the order backward finishes
 * them: the tied word embedding, heads, layer L-1, ..., layer 0, the other
 * embeddings. The word embedding's gradient has two parts: the LM decoder's
 * (dense, every vocabulary row, done at the start of backward) and the
 * embedding lookup's (only the rows of the batch's tokens, done at the very
 * end). With a rows hook (cz_model_set_grad_rows_hook) the lookup's rows go
 * to the hook instead of the buffer, so the word embedding's range is final
 * with the heads and its all-reduce can run under the whole encoder's
 * backward; the few rows follow after backward (Goyal et al. 2017 and
 * PyTorch DDP bucket the same way: reduce what is final first). The
 * gradient buffer has the same layout; backward calls the grad hook with
 * each finished range, in buffer order.
 *
 * Recomputation (cfg.recompute = CZ_RECOMPUTE_LAYERS; Chen et al. 2016,
 * "Training Deep Nets with Sublinear Memory Cost", Sec. 3): every layer's
 * activation pointers alias ONE set of scratch buffers. Forward keeps only the
 * layer inputs x[l]; backward runs layer l's forward again from x[l] just
 * before layer l's backward. The layer forward is a pure function of x[l],
 * the parameters and the dropout keys (seed, step, sample, layer, site), and
 * the kernels are deterministic for a given thread count, so the scratch then
 * holds bitwise the activations a full forward would have kept. */
#include "cloze/model.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "model_private.h"

/* Additive score for padded keys, as Hugging Face BERT (extended attention
 * mask (1 - mask) * -10000): exp underflows to exactly 0 in fp32. */
#define PAD_KEY_BIAS (-10000.0f)

/* The tied word embedding goes first in the buffer (top of the file) but
 * keeps its place in the table, after the layers, so that the initial
 * values stay those of the layout it had before. */
static void reserve_word_embedding(cz_model *m) {
    m->wte = 0;
    m->lm_head = 0;
    m->vrows = cz_model_vocab_rows(&m->cfg);
    m->pre_ln = m->cfg.layout == CZ_LAYOUT_PRE_LN;
    m->n_params = (size_t)m->vrows * (size_t)m->cfg.hidden;
}

/* BERT's query, key and value maps, named as Hugging Face's three Linear
 * layers but stored as one: the three weights one after the other (a
 * [3H, H] matrix, rows q, k, v), then the three biases. Then the three maps
 * are one product with 3H outputs, as GPT's fused c_attn: one pass over the
 * input and a 3H x H weight gradient instead of three H x H ones (measured
 * faster: docs/performance.md, "BERT-mini: fused q/k/v, bias gradient,
 * k-split weight gradients"). */
static lin add_qkv(cz_model *m, const char *prefix, int h) {
    const char *names[3] = {"query", "key", "value"};
    char name[96];
    lin l = {0, 0, h, 3 * h, 0};
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s.%s.weight", prefix, names[k]);
        size_t w = model_add_tensor(m, name, h, h, KIND_WEIGHT);
        if (k == 0) l.w = w;
    }
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s.%s.bias", prefix, names[k]);
        size_t b = model_add_tensor(m, name, h, 0, KIND_BIAS);
        if (k == 0) l.b = b;
    }
    return l;
}

static void add_ln(cz_model *m, const char *prefix, size_t *g, size_t *b) {
    char name[96];
    int h = m->cfg.hidden;
    snprintf(name, sizeof name, "%s.weight", prefix);
    *g = model_add_tensor(m, name, h, 0, KIND_LN_GAMMA);
    snprintf(name, sizeof name, "%s.bias", prefix);
    *b = model_add_tensor(m, name, h, 0, KIND_LN_BETA);
}

static void build_bert_table(cz_model *m) {
    const cz_model_config *c = &m->cfg;
    int h = c->hidden, in = c->intermediate;
    char p[96];
    reserve_word_embedding(m);
    m->heads_begin = m->n_params;
    if (c->head == CZ_HEAD_PRETRAIN) {
        m->mlm_dense = model_add_lin(m, "cls.predictions.transform.dense", h, h, 0);
        add_ln(m, "cls.predictions.transform.LayerNorm", &m->mlm_ln_g, &m->mlm_ln_b);
        m->mlm_bias = model_add_tensor(m, "cls.predictions.bias", c->vocab_size, 0, KIND_BIAS);
        m->pooler = model_add_lin(m, "bert.pooler.dense", h, h, 0);
        m->nsp = model_add_lin(m, "cls.seq_relationship", h, 2, 0);
    } else {
        model_build_task_head(m);
    }
    m->heads_end = m->n_params;
    for (int l = c->layers - 1; l >= 0; l--) {
        layer *ly = &m->layers[l];
        ly->begin = m->n_params;
        snprintf(p, sizeof p, "bert.encoder.layer.%d.attention.self", l);
        ly->qkv = add_qkv(m, p, h);
        snprintf(p, sizeof p, "bert.encoder.layer.%d.attention.output.dense", l);
        ly->attn_out = model_add_lin(m, p, h, h, 0);
        snprintf(p, sizeof p, "bert.encoder.layer.%d.attention.output.LayerNorm", l);
        add_ln(m, p, &ly->ln1_g, &ly->ln1_b);
        snprintf(p, sizeof p, "bert.encoder.layer.%d.intermediate.dense", l);
        ly->ffn_in = model_add_lin(m, p, h, in, 0);
        snprintf(p, sizeof p, "bert.encoder.layer.%d.output.dense", l);
        ly->ffn_out = model_add_lin(m, p, in, h, 0);
        snprintf(p, sizeof p, "bert.encoder.layer.%d.output.LayerNorm", l);
        add_ln(m, p, &ly->ln2_g, &ly->ln2_b);
        ly->end = m->n_params;
    }
    m->emb_begin = m->n_params;
    model_place_tensor(m, "bert.embeddings.word_embeddings.weight", c->vocab_size, h, KIND_WEIGHT,
                       m->wte);
    m->wpe = model_add_tensor(m, "bert.embeddings.position_embeddings.weight", c->max_positions, h,
                              KIND_WEIGHT);
    m->wtt = model_add_tensor(m, "bert.embeddings.token_type_embeddings.weight", c->type_vocab_size,
                              h, KIND_WEIGHT);
    add_ln(m, "bert.embeddings.LayerNorm", &m->lne_g, &m->lne_b);
    m->emb_end = m->n_params;
}

/* model.lm_head = untied: GPT's LM head as a matrix of its own, with the
 * word embedding's rows (padding included, so the head's product keeps its
 * round width), named as Hugging Face's untied LM head. */
static void add_lm_head(cz_model *m) {
    if (m->cfg.untied_head)
        m->lm_head = model_add_tensor(m, "lm_head.weight", m->vrows, m->cfg.hidden, KIND_WEIGHT);
}

/* GPT-2's names (GPT2LMHeadModel's state dict). The final LayerNorm's
 * backward runs right after the head's, so it lies with the heads and is
 * final with them (the range backward reports first). */
static void build_gpt2_table(cz_model *m) {
    const cz_model_config *c = &m->cfg;
    int h = c->hidden, in = c->intermediate;
    char p[96];
    m->heads_begin = m->n_params; /* LM head is the tied embedding, or its own */
    add_lm_head(m);
    if (c->head != CZ_HEAD_PRETRAIN) model_build_task_head(m);
    add_ln(m, "transformer.ln_f", &m->lnf_g, &m->lnf_b);
    m->heads_end = m->n_params;
    for (int l = c->layers - 1; l >= 0; l--) {
        layer *ly = &m->layers[l];
        ly->begin = m->n_params;
        snprintf(p, sizeof p, "transformer.h.%d.ln_1", l);
        add_ln(m, p, &ly->ln1_g, &ly->ln1_b);
        snprintf(p, sizeof p, "transformer.h.%d.attn.c_attn", l);
        ly->qkv = model_add_lin(m, p, h, 3 * h, 1);
        snprintf(p, sizeof p, "transformer.h.%d.attn.c_proj", l);
        ly->attn_out = model_add_lin_kind(m, p, h, h, 1, KIND_RESID_WEIGHT);
        snprintf(p, sizeof p, "transformer.h.%d.ln_2", l);
        add_ln(m, p, &ly->ln2_g, &ly->ln2_b);
        snprintf(p, sizeof p, "transformer.h.%d.mlp.c_fc", l);
        ly->ffn_in = model_add_lin(m, p, h, in, 1);
        snprintf(p, sizeof p, "transformer.h.%d.mlp.c_proj", l);
        ly->ffn_out = model_add_lin_kind(m, p, in, h, 1, KIND_RESID_WEIGHT);
        ly->end = m->n_params;
    }
    m->emb_begin = m->n_params;
    model_place_tensor(m, "transformer.wte.weight", m->vrows, h, KIND_WEIGHT, m->wte);
    m->wpe = model_add_tensor(m, "transformer.wpe.weight", c->max_positions, h, KIND_WEIGHT);
    m->emb_end = m->n_params;
}

static void build_gpt_table(cz_model *m) {
    const cz_model_config *c = &m->cfg;
    int h = c->hidden, in = c->intermediate;
    char p[96];
    reserve_word_embedding(m);
    if (m->pre_ln) {
        build_gpt2_table(m);
        return;
    }
    m->heads_begin = m->n_params; /* LM head is the tied embedding, or its own */
    add_lm_head(m);
    if (c->head != CZ_HEAD_PRETRAIN) model_build_task_head(m);
    m->heads_end = m->n_params;
    for (int l = c->layers - 1; l >= 0; l--) {
        layer *ly = &m->layers[l];
        ly->begin = m->n_params;
        snprintf(p, sizeof p, "transformer.h.%d.attn.c_attn", l);
        ly->qkv = model_add_lin(m, p, h, 3 * h, 1);
        snprintf(p, sizeof p, "transformer.h.%d.attn.c_proj", l);
        ly->attn_out = model_add_lin(m, p, h, h, 1);
        snprintf(p, sizeof p, "transformer.h.%d.ln_1", l);
        add_ln(m, p, &ly->ln1_g, &ly->ln1_b);
        snprintf(p, sizeof p, "transformer.h.%d.mlp.c_fc", l);
        ly->ffn_in = model_add_lin(m, p, h, in, 1);
        snprintf(p, sizeof p, "transformer.h.%d.mlp.c_proj", l);
        ly->ffn_out = model_add_lin(m, p, in, h, 1);
        snprintf(p, sizeof p, "transformer.h.%d.ln_2", l);
        add_ln(m, p, &ly->ln2_g, &ly->ln2_b);
        ly->end = m->n_params;
    }
    m->emb_begin = m->n_params;
    model_place_tensor(m, "transformer.tokens_embed.weight", m->vrows, h, KIND_WEIGHT, m->wte);
    m->wpe =
        model_add_tensor(m, "transformer.positions_embed.weight", c->max_positions, h, KIND_WEIGHT);
    m->emb_end = m->n_params;
}

/* ---- creation: memory ---- */

static int check_config(const cz_model_config *c, int max_b, int max_t, int max_p, cz_error *err) {
    if (cz_model_config_check(c, NULL, err)) return cz_fail_prefix(err, "model");
    if (max_b < 1) return cz_fail(err, "model: batch %d must be >= 1", max_b);
    switch (cz_model_shape_rule(c, max_t, max_p)) {
    case CZ_SHAPE_SEQ:
        return cz_fail(err, "model: max_seq %d must be in [1, max_positions %d]", max_t,
                       c->max_positions);
    case CZ_SHAPE_PRED:
        return cz_fail(err, "model: max_pred %d must be in [1, max_seq %d]", max_p, max_t);
    }
    return 0;
}

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
    if (m->cfg.arch == CZ_ARCH_BERT)
        build_bert_table(m);
    else
        build_gpt_table(m);
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
 * per-head products (attn_per_head). */
static int make_attn_gemm(cz_model *m, const cz_gemm_ctx *gemm, cz_error *err) {
    if (!gemm) return 0;
    int nt = omp_get_max_threads();
    /* not from model_take(): these are not activations (memory plan) */
    if (!(m->attn_gemm = cz_alloc((size_t)nt * sizeof *m->attn_gemm, err))) return -1;
    for (; m->n_attn_gemm < nt; m->n_attn_gemm++)
        if (!(m->attn_gemm[m->n_attn_gemm] = cz_gemm_single_thread(gemm, err))) return -1;
    return 0;
}

int cz_model_create(cz_model **out, const cz_model_config *cfg, int max_batch, int max_seq,
                    int max_pred, const cz_gemm_ctx *gemm, cz_error *err) {
    *out = NULL;
    if (check_config(cfg, max_batch, max_seq, max_pred, err)) return -1;
    cz_model *m = cz_alloc(sizeof *m, err);
    if (!m) return -1;
    m->cfg = *cfg;
    m->max_b = max_batch;
    m->max_t = max_seq;
    m->max_p = cfg->arch == CZ_ARCH_BERT && cfg->head == CZ_HEAD_PRETRAIN ? max_pred : 0;
    m->gemm = gemm;
    m->scratch_layer = -1;
    if (alloc_params(m, err) || alloc_layers(m, err) || alloc_work(m, err) ||
        model_alloc_task_head(m, err) || make_attn_gemm(m, gemm, err)) {
        cz_model_free(m);
        return -1;
    }
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
int cz_model_num_tensors(const cz_model *m) {
    return m->n_tensors;
}
const cz_tensor_info *cz_model_tensor(const cz_model *m, int i) {
    return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}
const cz_tensor_info *cz_model_find_tensor(const cz_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

void cz_model_get_memory(const cz_model *m, cz_model_memory *out) {
    out->params = m->mem_plan[MEM_PARAMS];
    out->layer_inputs = m->mem_plan[MEM_LAYER_INPUTS];
    out->layer_acts = m->mem_plan[MEM_LAYER_ACTS];
    out->other = m->mem_plan[MEM_OTHER];
    out->activations = out->layer_inputs + out->layer_acts + out->other;
}

void cz_model_set_grad_hook(cz_model *m, cz_grad_ready_fn fn, void *ctx) {
    m->hook = fn;
    m->hook_ctx = ctx;
}

void cz_model_set_grad_rows_hook(cz_model *m, cz_grad_rows_fn fn, void *ctx) {
    m->rows_hook = fn;
    m->rows_ctx = ctx;
}

size_t cz_model_embeddings_begin(const cz_model *m) {
    return m->emb_begin;
}

/* build_bert_table / build_gpt_table lay tensors out in the order backward
 * finishes them (top of the file), and cz_model_backward reports each
 * range as it finishes: from offset 0 upwards. */
cz_grad_order cz_model_grad_order(const cz_model *m) {
    (void)m;
    return CZ_GRAD_ASCENDING;
}

void cz_model_zero_grads(cz_model *m) {
    memset(m->grads, 0, m->n_params * sizeof *m->grads);
}

/* Truncated normal: draw i of the k-th tensor created takes the first of
 * the normals (seed, INIT, k) at 64*i, 64*i+1, ... that lies within 2 std
 * (a pure function of (seed, k, i); P(64 rejections) ~ 0.0455^64). */
void cz_model_init_weights(cz_model *m, uint64_t seed) {
    for (int k = 0; k < m->n_tensors; k++) {
        const cz_tensor_info *t = &m->tensors[k];
        float *w = m->params + t->offset;
        int kind = m->tensor_kind[k];
        if (kind != KIND_WEIGHT && kind != KIND_RESID_WEIGHT) {
            float v = kind == KIND_LN_GAMMA ? 1.0f : 0.0f;
            for (size_t i = 0; i < t->numel; i++) w[i] = v;
            continue;
        }
        float std = kind == KIND_RESID_WEIGHT
                        ? (float)(m->cfg.init_range / sqrt(2.0 * m->cfg.layers))
                        : m->cfg.init_range;
        cz_rng_stream s = cz_rng_stream_make(seed, CZ_RNG_INIT, (uint64_t)m->tensor_key[k], 0, 0);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < t->numel; i++) {
            double z = 0;
            for (int a = 0; a < 64; a++) {
                z = cz_rng_normal(&s, 64 * (uint64_t)i + (uint64_t)a);
                if (fabs(z) <= 2.0) break;
            }
            if (fabs(z) > 2.0) z = 0;
            w[i] = (float)(std * z);
        }
    }
    /* the word embedding's padding rows (model.vocab_pad_to) start and stay
     * 0, and an untied LM head's */
    size_t H = (size_t)m->cfg.hidden, V = (size_t)m->cfg.vocab_size;
    memset(m->params + m->wte + V * H, 0, ((size_t)m->vrows - V) * H * sizeof(float));
    if (m->lm_head != m->wte)
        memset(m->params + m->lm_head + V * H, 0, ((size_t)m->vrows - V) * H * sizeof(float));
}

/* ---- profiling ---- */

void cz_model_set_bf16_inputs(cz_model *m, int on) {
    m->no_bf16_inputs = !on;
}

void cz_model_set_profiling(cz_model *m, int on) {
    if (on) memset(&m->prof, 0, sizeof m->prof);
    m->profiling = on;
}

void cz_model_get_profile(const cz_model *m, cz_model_profile *out) {
    *out = m->prof;
}

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

/* ---- attention products, one (sequence, head) pair at a time ----
 * Each pair's products are small (T x T x d: 1M multiply-adds at T = 128,
 * d = 64), too small to split over threads; so the pairs run side by side,
 * each on one thread with its own single-thread GEMM context. Every product
 * is computed exactly as one call on m->gemm would (cz_gemm_single_thread),
 * so the results do not depend on the thread count. */
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

/* S = scale Q K^T into probs (the softmax runs over all pairs afterwards) */
static void attn_head_scores(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h) {
    int T = a->b->seq, H = a->m->cfg.hidden, A = a->m->cfg.heads, d = H / A;
    const float *q = a->ly->qkv_act + (size_t)s * T * 3 * H + h * d;
    float *p = a->ly->probs + ((size_t)s * A + h) * T * T;
    cz_gemm(g, 0, 1, T, T, d, a->scale, q, 3 * H, q + H, 3 * H, 0.0f, p, T);
}

/* ctx = Pd V */
static void attn_head_context(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h) {
    int T = a->b->seq, H = a->m->cfg.hidden, A = a->m->cfg.heads, d = H / A;
    const float *v = a->ly->qkv_act + (size_t)s * T * 3 * H + 2 * H + h * d;
    const float *p = a->pd + ((size_t)s * A + h) * T * T;
    cz_gemm(g, 0, 0, T, d, T, 1.0f, p, T, v, 3 * H, 0.0f, a->ly->ctx + (size_t)s * T * H + h * d,
            H);
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
    cz_gemm(g, 1, 0, T, d, T, 1.0f, a->pd + pp, T, dctx, H, 0.0f, dv, 3 * H);
    cz_gemm(g, 0, 1, T, T, d, 1.0f, dctx, H, v, 3 * H, 0.0f, m->dprobs + pp, T);
}

/* S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q */
static void attn_head_scores_backward(const cz_gemm_ctx *g, const attn_head_args *a, int s, int h) {
    cz_model *m = a->m;
    int T = a->b->seq, H = m->cfg.hidden, A = m->cfg.heads, d = H / A;
    size_t row0 = (size_t)s * T, pp = ((size_t)s * A + h) * T * T;
    const float *q = a->ly->qkv_act + row0 * 3 * H + h * d, *k = q + H;
    float *dq = m->dqkv + row0 * 3 * H + h * d, *dk = dq + H;
    cz_gemm(g, 0, 0, T, d, T, a->scale, m->dprobs + pp, T, k, 3 * H, 0.0f, dq, 3 * H);
    cz_gemm(g, 1, 0, T, d, T, a->scale, m->dprobs + pp, T, q, 3 * H, 0.0f, dk, 3 * H);
}

/* Scores of all (sequence, head) pairs by GEMM, then one softmax (and one
 * dropout) over all B*A*T rows, so those kernels get enough rows to use
 * every thread; then P V per pair. */
static void attention_forward(cz_model *m, layer *ly, int l, const cz_batch *b) {
    int T = b->seq, H = m->cfg.hidden, A = m->cfg.heads, d = H / A, B = b->batch;
    float scale = 1.0f / sqrtf((float)d);
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
static void attention_backward(cz_model *m, layer *ly, int l, const cz_batch *b) {
    int T = b->seq, H = m->cfg.hidden, A = m->cfg.heads, d = H / A, B = b->batch;
    float scale = 1.0f / sqrtf((float)d);
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

/* ---- forward ---- */

/* y = a + b over n floats (y may alias a or b): the pre-LN residual sums.
 * Elementwise, so the bits do not depend on the thread count. */
static void residual_add(float *y, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* Where layer l writes its output in the forward pass: the next layer's
 * input, or for a pre-LN model's last layer x_last, which the final
 * LayerNorm reads. */
static float *layer_output(cz_model *m, int l) {
    return m->pre_ln && l == m->cfg.layers - 1 ? m->x_last : m->x[l + 1];
}

/* The GELU output as the FFN's second product and its weight gradient
 * read it: in bf16 mode written and read in bf16 (ly->g's first half). */
static cz_mat ffn_act(const cz_model *m, const layer *ly) {
    int I = m->cfg.intermediate;
    return m->act16 ? cz_mat_bf16((const uint16_t *)ly->g, I) : cz_mat_f32(ly->g, I);
}

/* u += b1, g = GELU(u), tmp_h = g W2^T + b2 */
static void ffn_gelu_out(cz_model *m, layer *ly, int n) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, I = c->intermediate;
    if (m->act16)
        PHASE(elementwise, cz_bias_gelu_forward_bf16((uint16_t *)ly->g, ly->u, PARAM(ly->ffn_in.b),
                                                     n, I, c->gelu_tanh));
    else
        PHASE(elementwise,
              cz_bias_gelu_forward(ly->g, ly->u, PARAM(ly->ffn_in.b), n, I, c->gelu_tanh));
    model_lin_forward_mat(m, &ly->ffn_out, ffn_act(m, ly), n, m->tmp_h, H);
}

/* GPT-2's block (model.layout = pre_ln): x[l] -> out, keeping h1 = LN1(x),
 * r1 = x + Drop(Attn(h1)), r2 = LN2(r1) and the FFN's u and g. */
static void layer_forward_pre_ln(cz_model *m, int l, const cz_batch *b, float *out) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
    const float *x = m->x[l];
    PHASE(elementwise, cz_layernorm_forward(ly->h1, ly->mean1, ly->rstd1, x, PARAM(ly->ln1_g),
                                            PARAM(ly->ln1_b), n, H, c->layer_norm_eps));
    model_lin_forward(m, &ly->qkv, ly->h1, H, n, ly->qkv_act, 3 * H);
    attention_forward(m, ly, l, b);
    model_lin_forward(m, &ly->attn_out, ly->ctx, H, n, m->tmp_h, H);
    PHASE(elementwise,
          model_dropout_rows(b, c->hidden_dropout, l, SITE_ATTN_OUT, m->tmp_h, m->tmp_h, H));
    /* r1 = x + branch and r2 = LN2(r1) in one pass */
    PHASE(elementwise,
          cz_add_layernorm_forward(ly->r2, ly->r1, ly->mean2, ly->rstd2, x, m->tmp_h,
                                   PARAM(ly->ln2_g), PARAM(ly->ln2_b), n, H, c->layer_norm_eps));
    model_lin_map(m, &ly->ffn_in, ly->r2, H, n, ly->u, I);
    ffn_gelu_out(m, ly, n);
    PHASE(elementwise,
          model_dropout_rows(b, c->hidden_dropout, l, SITE_FFN_OUT, m->tmp_h, m->tmp_h, H));
    PHASE(elementwise, residual_add(out, ly->r1, m->tmp_h, (size_t)n * H));
}

/* x[l] -> out (x[l+1] in the forward pass), keeping layer l's activations. */
static void layer_forward(cz_model *m, int l, const cz_batch *b, float *out) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
    const float *x = m->x[l];
    m->scratch_layer = l;
    if (m->pre_ln) {
        layer_forward_pre_ln(m, l, b, out);
        return;
    }
    model_lin_forward(m, &ly->qkv, x, H, n, ly->qkv_act, 3 * H);
    attention_forward(m, ly, l, b);
    model_lin_forward(m, &ly->attn_out, ly->ctx, H, n, m->tmp_h, H);
    PHASE(elementwise,
          model_dropout_rows(b, c->hidden_dropout, l, SITE_ATTN_OUT, m->tmp_h, m->tmp_h, H));
    PHASE(elementwise,
          cz_add_layernorm_forward(ly->h1, ly->r1, ly->mean1, ly->rstd1, x, m->tmp_h,
                                   PARAM(ly->ln1_g), PARAM(ly->ln1_b), n, H, c->layer_norm_eps));
    /* W1 h without bias, then bias + GELU in one pass */
    model_lin_map(m, &ly->ffn_in, ly->h1, H, n, ly->u, I);
    ffn_gelu_out(m, ly, n);
    PHASE(elementwise,
          model_dropout_rows(b, c->hidden_dropout, l, SITE_FFN_OUT, m->tmp_h, m->tmp_h, H));
    PHASE(elementwise,
          cz_add_layernorm_forward(out, ly->r2, ly->mean2, ly->rstd2, ly->h1, m->tmp_h,
                                   PARAM(ly->ln2_g), PARAM(ly->ln2_b), n, H, c->layer_norm_eps));
}

static void embeddings_forward(cz_model *m, const cz_batch *b) {
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden;
    int bert = c->arch == CZ_ARCH_BERT;
    PHASE(embeddings,
          cz_embedding_forward(m->emb_sum, b->tokens, b->segments, PARAM(m->wte), PARAM(m->wpe),
                               bert ? PARAM(m->wtt) : NULL, n, b->seq, H));
    const float *pre = m->emb_sum;
    if (bert) {
        PHASE(elementwise,
              cz_layernorm_forward(m->emb_ln, m->emb_mean, m->emb_rstd, m->emb_sum, PARAM(m->lne_g),
                                   PARAM(m->lne_b), n, H, c->layer_norm_eps));
        pre = m->emb_ln;
    }
    PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, 0, SITE_EMBED, m->x[0], pre, H));
}

/* MLM: transform (dense + GELU + LN) of the hidden states at the masked
 * positions, decoder tied to the word embeddings plus an output bias;
 * NSP: pooler (dense + tanh) of [CLS], then a 2-way classifier. */
static void bert_heads_forward(cz_model *m, const cz_batch *b, cz_losses *out) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, V = c->vocab_size, T = b->seq, P = b->max_pred, B = b->batch;
    int rows = B * P;
    const float *xf = m->x[c->layers];
    for (int r = 0; r < rows; r++) {
        int s = r / P;
        memcpy(m->mlm_h + (size_t)r * H, xf + ((size_t)s * T + b->mlm_positions[r]) * H,
               H * sizeof(float));
        m->row_label[r] = b->mlm_weights[r] > 0.0f ? b->mlm_labels[r] : -1;
    }
    model_lin_forward(m, &m->mlm_dense, m->mlm_h, H, rows, m->mlm_u, H);
    PHASE(elementwise, cz_gelu_forward(m->mlm_g, m->mlm_u, (size_t)rows * H, c->gelu_tanh));
    PHASE(elementwise,
          cz_layernorm_forward(m->mlm_z, m->mlm_mean, m->mlm_rstd, m->mlm_g, PARAM(m->mlm_ln_g),
                               PARAM(m->mlm_ln_b), rows, H, c->layer_norm_eps));
    model_gemm_weight(m, 0, 1, rows, V, H, 1.0f, m->mlm_z, H, PARAM(m->wte), H, 0.0f, m->logits, V);
    cz_add_bias(m->logits, PARAM(m->mlm_bias), rows, V, V);
    PHASE(loss, cz_xent_forward(m->logits, m->row_loss, m->row_argmax, m->row_label, rows, V));
    double wsum = 0, lsum = 0;
    long correct = 0, count = 0;
    for (int r = 0; r < rows; r++) {
        if (m->row_label[r] < 0) continue;
        double w = b->mlm_weights[r];
        wsum += w;
        lsum += w * m->row_loss[r];
        count++;
        correct += m->row_argmax[r] == m->row_label[r];
    }
    out->mlm_loss = wsum > 0 ? lsum / wsum : 0.0;
    out->mlm_correct = correct;
    out->mlm_count = count;
    for (int r = 0; r < rows; r++)
        m->row_scale[r] = wsum > 0 && m->row_label[r] >= 0 ? (float)(b->mlm_weights[r] / wsum) : 0;

    for (int s = 0; s < B; s++)
        memcpy(m->cls + (size_t)s * H, xf + (size_t)s * T * H, H * sizeof(float));
    model_lin_forward(m, &m->pooler, m->cls, H, B, m->pooled, H);
    for (size_t i = 0; i < (size_t)B * H; i++) m->pooled[i] = tanhf(m->pooled[i]);
    model_lin_forward(m, &m->nsp, m->pooled, H, B, m->nsp_logits, 2);
    PHASE(loss, cz_xent_forward(m->nsp_logits, m->nsp_loss, m->nsp_argmax, b->nsp_labels, B, 2));
    double nsum = 0;
    long ncorrect = 0;
    for (int s = 0; s < B; s++) {
        nsum += m->nsp_loss[s];
        ncorrect += m->nsp_argmax[s] == b->nsp_labels[s];
        m->nsp_scale[s] = 1.0f / (float)B;
    }
    out->nsp_loss = nsum / B;
    out->nsp_correct = ncorrect;
    out->nsp_count = B;
    out->loss = out->mlm_loss + out->nsp_loss;
}

/* The LM head's product runs over all vrows rows of the word embedding
 * (model.vocab_pad_to: a round width for the GEMM); the padding columns are
 * then dropped, so the softmax and the loss see the vocab_size real ones:
 * [n, vrows] rows become [n, V] rows in place (row i moves down, never
 * over a row not yet moved). */
static void drop_padding_columns(float *a, int n, int v, int vrows) {
    if (v == vrows) return;
    for (int i = 1; i < n; i++)
        memmove(a + (size_t)i * v, a + (size_t)i * vrows, (size_t)v * sizeof *a);
}

/* Back to [n, vrows] rows with zero padding columns: the padding rows of the
 * word embedding get exactly 0 gradient. */
static void restore_padding_columns(float *a, int n, int v, int vrows) {
    if (v == vrows) return;
    for (int i = n - 1; i >= 0; i--) {
        memmove(a + (size_t)i * vrows, a + (size_t)i * v, (size_t)v * sizeof *a);
        memset(a + (size_t)i * vrows + v, 0, (size_t)(vrows - v) * sizeof *a);
    }
}

static void gpt_head_forward(cz_model *m, const cz_batch *b, cz_losses *out) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, V = c->vocab_size, VR = m->vrows, n = b->batch * b->seq;
    model_gemm_weight(m, 0, 1, n, VR, H, 1.0f, m->x[c->layers], H, PARAM(m->lm_head), H, 0.0f,
                      m->logits, VR);
    PHASE(loss, drop_padding_columns(m->logits, n, V, VR));
    PHASE(loss, cz_xent_forward(m->logits, m->row_loss, m->row_argmax, b->targets, n, V));
    double lsum = 0;
    long count = 0;
    for (int i = 0; i < n; i++)
        if (b->targets[i] >= 0) {
            lsum += m->row_loss[i];
            count++;
        }
    for (int i = 0; i < n; i++) m->row_scale[i] = count ? 1.0f / (float)count : 0.0f;
    out->lm_loss = count ? lsum / count : 0.0;
    out->lm_count = count;
    out->loss = out->lm_loss;
}

static int check_batch(const cz_model *m, const cz_batch *b, cz_error *err) {
    const cz_model_config *c = &m->cfg;
    if (b->batch < 1 || b->batch > m->max_b || b->seq < 1 || b->seq > m->max_t)
        return cz_fail(err, "model: batch %dx%d exceeds the planned %dx%d", b->batch, b->seq,
                       m->max_b, m->max_t);
    int n = b->batch * b->seq;
    for (int i = 0; i < n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= c->vocab_size)
            return cz_fail(err, "model: token %d at %d outside vocab %d", b->tokens[i], i,
                           c->vocab_size);
        if (c->arch == CZ_ARCH_BERT && b->segments &&
            (b->segments[i] < 0 || b->segments[i] >= c->type_vocab_size))
            return cz_fail(err, "model: segment %d at %d outside [0,%d)", b->segments[i], i,
                           c->type_vocab_size);
        if (c->arch == CZ_ARCH_GPT && b->targets && b->targets[i] >= c->vocab_size)
            return cz_fail(err, "model: target %d at %d outside vocab", b->targets[i], i);
    }
    if (c->head != CZ_HEAD_PRETRAIN) {
        if (c->arch == CZ_ARCH_BERT && !b->segments)
            return cz_fail(err, "model: BERT batch lacks segments");
        return model_check_task_batch(m, b, err);
    }
    if (c->arch == CZ_ARCH_BERT) {
        if (!b->segments || !b->mlm_positions || !b->mlm_labels || !b->mlm_weights ||
            !b->nsp_labels)
            return cz_fail(err, "model: BERT batch lacks segments, MLM or NSP arrays");
        if (b->max_pred < 1 || b->max_pred > m->max_p)
            return cz_fail(err, "model: max_pred %d exceeds the planned %d", b->max_pred, m->max_p);
        for (int r = 0; r < b->batch * b->max_pred; r++) {
            if (b->mlm_positions[r] < 0 || b->mlm_positions[r] >= b->seq ||
                (b->mlm_weights[r] > 0 &&
                 (b->mlm_labels[r] < 0 || b->mlm_labels[r] >= c->vocab_size)))
                return cz_fail(err, "model: MLM slot %d: position %d / label %d out of range", r,
                               b->mlm_positions[r], b->mlm_labels[r]);
        }
        for (int s = 0; s < b->batch; s++)
            if (b->nsp_labels[s] < 0 || b->nsp_labels[s] > 1)
                return cz_fail(err, "model: NSP label %d of sequence %d", b->nsp_labels[s], s);
    } else if (!b->targets) {
        return cz_fail(err, "model: GPT batch lacks targets");
    }
    return 0;
}

int cz_model_forward(cz_model *m, const cz_batch *b, cz_losses *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    if (check_batch(m, b, err)) return -1;
    double t0 = m->profiling ? cz_now() : 0.0;
    int n = b->batch * b->seq;
    m->act16 = !m->no_bf16_inputs && m->gemm && cz_gemm_is_bf16(m->gemm);
    if (b->attn_mask)
        for (int i = 0; i < n; i++) m->key_bias[i] = b->attn_mask[i] ? 0.0f : PAD_KEY_BIAS;
    embeddings_forward(m, b);
    for (int l = 0; l < m->cfg.layers; l++) layer_forward(m, l, b, layer_output(m, l));
    if (m->pre_ln) /* GPT-2 Sec. 2.3: a LayerNorm after the final block */
        PHASE(elementwise, cz_layernorm_forward(m->x[m->cfg.layers], m->lnf_mean, m->lnf_rstd,
                                                m->x_last, PARAM(m->lnf_g), PARAM(m->lnf_b), n,
                                                m->cfg.hidden, m->cfg.layer_norm_eps));
    if (m->cfg.head != CZ_HEAD_PRETRAIN) {
        if (m->cfg.head != CZ_HEAD_NONE && m->cfg.lm_weight > 0)
            gpt_head_forward(m, b, out); /* GPT's auxiliary LM loss (GPT-1 eq. 5) */
        model_task_head_forward(m, b, out);
    } else if (m->cfg.arch == CZ_ARCH_BERT)
        bert_heads_forward(m, b, out);
    else
        gpt_head_forward(m, b, out);
    if (m->profiling) {
        m->prof.total += cz_now() - t0;
        m->prof.forwards++;
    }
    return 0;
}

/* ---- backward ---- */

static void grad_ready(cz_model *m, size_t begin, size_t end) {
    if (m->hook && end > begin) m->hook(m->hook_ctx, begin, end - begin);
}

/* Heads backward: leaves d(encoder output) in m->dy. */
static void bert_heads_backward(cz_model *m, const cz_batch *b, float grad_scale) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, V = c->vocab_size, T = b->seq, P = b->max_pred, B = b->batch;
    int rows = B * P, n = B * T;
    for (int r = 0; r < rows; r++) m->row_scale[r] *= grad_scale;
    /* logits -> dlogits */
    cz_mat dl = cz_mat_f32(m->logits, V);
    if (m->act16) {
        /* the bias gradient from the probabilities, then each row's
         * dlogits in bf16 in the first half of the row: the same bits as
         * below, and the two products read half the bytes */
        PHASE(elementwise, cz_xent_bias_backward(GRAD(m->mlm_bias), m->logits, m->row_label,
                                                 m->row_scale, rows, V));
        PHASE(loss, cz_xent_backward_bf16(m->logits, m->row_label, m->row_scale, rows, V));
        dl = cz_mat_bf16((const uint16_t *)m->logits, 2 * V);
    } else {
        PHASE(loss, cz_xent_backward(m->logits, m->row_label, m->row_scale, rows, V));
        PHASE(elementwise, cz_bias_backward(GRAD(m->mlm_bias), m->logits, rows, V, V));
    }
    model_gemm_mat(m, 1, 0, V, H, rows, 1.0f, dl, cz_mat_f32(m->mlm_z, H), 0, 1.0f, GRAD(m->wte),
                   H);
    model_gemm_mat(m, 0, 0, rows, H, V, 1.0f, dl, cz_mat_f32(PARAM(m->wte), H), 1, 0.0f, m->dmlm,
                   H);
    PHASE(elementwise,
          cz_layernorm_backward(m->dmlm2, GRAD(m->mlm_ln_g), GRAD(m->mlm_ln_b), m->dmlm, m->mlm_g,
                                m->mlm_mean, m->mlm_rstd, PARAM(m->mlm_ln_g), rows, H));
    PHASE(elementwise,
          cz_gelu_backward(m->dmlm2, m->mlm_u, m->dmlm2, (size_t)rows * H, c->gelu_tanh));
    model_lin_backward(m, &m->mlm_dense, m->dmlm2, H, m->mlm_h, H, rows, m->dmlm, H, 0.0f);
    memset(m->dy, 0, (size_t)n * H * sizeof(float));
    for (int r = 0; r < rows; r++) { /* sequential: a position may repeat */
        int s = r / P;
        float *d = m->dy + ((size_t)s * T + b->mlm_positions[r]) * H;
        const float *g = m->dmlm + (size_t)r * H;
        for (int j = 0; j < H; j++) d[j] += g[j];
    }

    for (int s = 0; s < B; s++) m->nsp_scale[s] *= grad_scale;
    PHASE(loss, cz_xent_backward(m->nsp_logits, b->nsp_labels, m->nsp_scale, B, 2));
    model_lin_backward(m, &m->nsp, m->nsp_logits, 2, m->pooled, H, B, m->dcls, H, 0.0f);
    for (size_t i = 0; i < (size_t)B * H; i++) /* tanh' = 1 - tanh^2 */
        m->dcls[i] *= 1.0f - m->pooled[i] * m->pooled[i];
    model_lin_backward(m, &m->pooler, m->dcls, H, m->cls, H, B, m->pooled, H, 0.0f);
    for (int s = 0; s < B; s++) {
        float *d = m->dy + (size_t)s * T * H;
        for (int j = 0; j < H; j++) d[j] += m->pooled[(size_t)s * H + j];
    }
}

static void gpt_head_backward(cz_model *m, const cz_batch *b, float grad_scale) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, V = c->vocab_size, VR = m->vrows, n = b->batch * b->seq;
    for (int i = 0; i < n; i++) m->row_scale[i] *= grad_scale;
    PHASE(loss, cz_xent_backward(m->logits, b->targets, m->row_scale, n, V));
    PHASE(loss, restore_padding_columns(m->logits, n, V, VR));
    model_gemm(m, 1, 0, VR, H, n, 1.0f, m->logits, VR, m->x[c->layers], H, 1.0f, GRAD(m->lm_head),
               H);
    model_gemm_weight(m, 0, 0, n, H, VR, 1.0f, m->logits, VR, PARAM(m->lm_head), H, 0.0f, m->dy, H);
}

/* GPT-2's block backward: d(layer output) in m->dy -> d(layer input) in
 * m->dx. Each residual sum passes its gradient on unchanged and adds the
 * branch's: d r1 = dy + LN2'(d through the FFN), dx = d r1 + LN1'(d through
 * attention). */
static void layer_backward_pre_ln(cz_model *m, int l, const cz_batch *b) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
    size_t nh = (size_t)n * H;
    PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, l, SITE_FFN_OUT, m->df, m->dy, H));
    model_lin_backward_mat(m, &ly->ffn_out, m->df, H, ffn_act(m, ly), n, m->di, I, 0.0f);
    PHASE(elementwise, cz_gelu_backward(m->di, ly->u, m->di, (size_t)n * I, c->gelu_tanh));
    model_lin_backward(m, &ly->ffn_in, m->di, I, ly->r2, H, n, m->dh1, H, 0.0f);
    PHASE(elementwise, cz_layernorm_backward(m->dr, GRAD(ly->ln2_g), GRAD(ly->ln2_b), m->dh1,
                                             ly->r1, ly->mean2, ly->rstd2, PARAM(ly->ln2_g), n, H));
    PHASE(elementwise, residual_add(m->dy, m->dy, m->dr, nh)); /* d r1 */
    PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, l, SITE_ATTN_OUT, m->df, m->dy, H));
    model_lin_backward(m, &ly->attn_out, m->df, H, ly->ctx, H, n, m->dctx, H, 0.0f);
    attention_backward(m, ly, l, b);
    model_lin_backward(m, &ly->qkv, m->dqkv, 3 * H, ly->h1, H, n, m->dh1, H, 0.0f);
    PHASE(elementwise,
          cz_layernorm_backward(m->dr, GRAD(ly->ln1_g), GRAD(ly->ln1_b), m->dh1, m->x[l], ly->mean1,
                                ly->rstd1, PARAM(ly->ln1_g), n, H));
    PHASE(elementwise, residual_add(m->dx, m->dy, m->dr, nh));
}

/* d(layer output) in m->dy -> d(layer input) in m->dx; then swaps them. */
static void layer_backward(cz_model *m, int l, const cz_batch *b) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
    /* recomputation: refill the shared scratch with layer l's activations.
     * The layer output is not needed (backward reads r2 and the LN2
     * statistics), so it goes to m->dx, which is free until LN1's backward
     * overwrites it below; x[l+1] is left untouched. */
    if (c->recompute == CZ_RECOMPUTE_LAYERS && m->scratch_layer != l) {
        double t0 = m->profiling ? cz_now() : 0.0;
        layer_forward(m, l, b, m->dx);
        if (m->profiling) m->prof.recompute += cz_now() - t0;
    }
    if (m->pre_ln) {
        layer_backward_pre_ln(m, l, b);
        float *t = m->dx;
        m->dx = m->dy;
        m->dy = t;
        return;
    }
    /* d(LN2 input) goes straight into dh1: it is the residual branch's
     * gradient, to which the FFN input's gradient is added below */
    PHASE(elementwise, cz_layernorm_backward(m->dh1, GRAD(ly->ln2_g), GRAD(ly->ln2_b), m->dy,
                                             ly->r2, ly->mean2, ly->rstd2, PARAM(ly->ln2_g), n, H));
    PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, l, SITE_FFN_OUT, m->df, m->dh1, H));
    model_lin_backward_mat(m, &ly->ffn_out, m->df, H, ffn_act(m, ly), n, m->di, I, 0.0f);
    PHASE(elementwise, cz_gelu_backward(m->di, ly->u, m->di, (size_t)n * I, c->gelu_tanh));
    model_lin_backward(m, &ly->ffn_in, m->di, I, ly->h1, H, n, m->dh1, H, 1.0f);
    /* likewise d(LN1 input) into dx, to which the Q/K/V gradients are added */
    PHASE(elementwise, cz_layernorm_backward(m->dx, GRAD(ly->ln1_g), GRAD(ly->ln1_b), m->dh1,
                                             ly->r1, ly->mean1, ly->rstd1, PARAM(ly->ln1_g), n, H));
    PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, l, SITE_ATTN_OUT, m->df, m->dx, H));
    model_lin_backward(m, &ly->attn_out, m->df, H, ly->ctx, H, n, m->dctx, H, 0.0f);
    attention_backward(m, ly, l, b);
    model_lin_backward(m, &ly->qkv, m->dqkv, 3 * H, m->x[l], H, n, m->dx, H, 1.0f);
    float *t = m->dx;
    m->dx = m->dy;
    m->dy = t;
}

static void embeddings_backward(cz_model *m, const cz_batch *b) {
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden;
    int bert = c->arch == CZ_ARCH_BERT;
    PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, 0, SITE_EMBED, m->dx, m->dy, H));
    float *d = m->dx;
    if (bert) {
        PHASE(elementwise,
              cz_layernorm_backward(m->dr, GRAD(m->lne_g), GRAD(m->lne_b), m->dx, m->emb_sum,
                                    m->emb_mean, m->emb_rstd, PARAM(m->lne_g), n, H));
        d = m->dr;
    }
    if (!m->rows_hook) {
        PHASE(embeddings,
              cz_embedding_backward(GRAD(m->wte), GRAD(m->wpe), bert ? GRAD(m->wtt) : NULL, d,
                                    b->tokens, b->segments, n, b->seq, H));
        return;
    }
    /* the lookup's rows apart: the batch's distinct ids in ascending order,
     * each token's slot among them, then the same kernel (the same sums, in
     * token order) into the compact rows */
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!m->row_of[b->tokens[i]]) m->row_of[b->tokens[i]] = 1, k++;
    for (int v = 0, s = 0; s < k; v++)
        if (m->row_of[v]) m->row_ids[s] = v, m->row_of[v] = ++s;
    for (int i = 0; i < n; i++) m->tok_slot[i] = m->row_of[b->tokens[i]] - 1;
    memset(m->row_vals, 0, (size_t)k * H * sizeof *m->row_vals);
    PHASE(embeddings, cz_embedding_backward(m->row_vals, GRAD(m->wpe), bert ? GRAD(m->wtt) : NULL,
                                            d, m->tok_slot, b->segments, n, b->seq, H));
    for (int i = 0; i < k; i++) m->row_of[m->row_ids[i]] = 0;
    cz_grad_rows r = {m->wte, (size_t)H, (size_t)m->vrows, (size_t)k, m->row_ids, m->row_vals};
    m->rows_hook(m->rows_ctx, &r);
}

void cz_model_backward(cz_model *m, const cz_batch *b, float grad_scale) {
    double t0 = m->profiling ? cz_now() : 0.0;
    if (m->cfg.head != CZ_HEAD_PRETRAIN) {
        if (m->cfg.head != CZ_HEAD_NONE && m->cfg.lm_weight > 0)
            gpt_head_backward(m, b, grad_scale * m->cfg.lm_weight); /* sets dy */
        else
            memset(m->dy, 0, (size_t)b->batch * b->seq * m->cfg.hidden * sizeof(float));
        model_task_head_backward(m, b, grad_scale);
    } else if (m->cfg.arch == CZ_ARCH_BERT)
        bert_heads_backward(m, b, grad_scale);
    else
        gpt_head_backward(m, b, grad_scale);
    if (m->pre_ln) { /* the final LayerNorm: d(last layer's output) into dy */
        int n = b->batch * b->seq;
        PHASE(elementwise,
              cz_layernorm_backward(m->dx, GRAD(m->lnf_g), GRAD(m->lnf_b), m->dy, m->x_last,
                                    m->lnf_mean, m->lnf_rstd, PARAM(m->lnf_g), n, m->cfg.hidden));
        float *t = m->dx;
        m->dx = m->dy;
        m->dy = t;
    }
    /* the word embedding's range is final now only if the lookup's rows go
     * to the rows hook; else it is final last, reported after the others */
    size_t wte_end = m->wte + (size_t)m->vrows * m->cfg.hidden;
    grad_ready(m, m->rows_hook ? m->wte : m->heads_begin, m->heads_end);
    for (int l = m->cfg.layers - 1; l >= 0; l--) {
        layer_backward(m, l, b);
        grad_ready(m, m->layers[l].begin, m->layers[l].end);
    }
    embeddings_backward(m, b);
    grad_ready(m, m->emb_begin, m->emb_end);
    if (!m->rows_hook) grad_ready(m, m->wte, wte_end);
    if (m->profiling) {
        m->prof.total += cz_now() - t0;
        m->prof.backwards++;
    }
}

static void table_free(cz_model *m) {
    if (!m) return;
    cz_free(m->layers);
    cz_free(m->tensor_kind);
    cz_free(m->tensor_key);
    cz_free(m->tensors);
    cz_free(m);
}

static cz_model *table_only(const cz_model_config *cfg, cz_error *err);

/* ---- FLOPs ---- */

/* Matrix products of one forward pass over one sequence, 2 FLOPs per
 * multiply-add: per layer T (8 H^2 + 4 H I) for the Q, K, V, output and FFN
 * maps, plus 4 T^2 H for Q K^T and P V (full T x T, also when causal, since
 * that is what the GEMMs compute); heads: BERT P (2 H^2 + 2 H V) for the MLM
 * transform and decoder plus 2 H^2 + 4 H for pooler and NSP; GPT 2 T H V (V the
 * padded rows, model.vocab_pad_to). The LayerNorms (pre-LN: two per layer and the
 * final one) are elementwise, O(T H), and not counted. */
static double layer_flops(const cz_model_config *c, int seq) {
    double H = c->hidden, I = c->intermediate, T = seq;
    return T * (8.0 * H * H + 4.0 * H * I) + 4.0 * T * T * H;
}

static double heads_flops(const cz_model_config *c, int seq, int max_pred) {
    /* GPT's LM product runs over the padded rows (model.vocab_pad_to) */
    double H = c->hidden, V = c->arch == CZ_ARCH_BERT ? c->vocab_size : cz_model_vocab_rows(c),
           T = seq, P = max_pred;
    if (c->head != CZ_HEAD_PRETRAIN) /* the fine-tuning head's, GPT's LM head with lm_weight */
        return model_task_head_flops(c, seq, c->lm_weight > 0 ? 2.0 * T * H * V : 0.0);
    return c->arch == CZ_ARCH_BERT ? P * (2.0 * H * H + 2.0 * H * V) + 2.0 * H * H + 4.0 * H
                                   : 2.0 * T * H * V;
}

double cz_model_forward_flops(const cz_model_config *c, int seq, int max_pred) {
    return c->layers * layer_flops(c, seq) + heads_flops(c, seq, max_pred);
}

/* Backward of a matrix product is two products of the same size (the
 * input's gradient and the weight's), so a stage's backward is twice its
 * forward FLOPs, three times for a layer whose forward backward runs again
 * (model.recompute). The stages and their ends are the buffer layout's
 * (build_bert_table / build_gpt_table), in the order cz_model_backward
 * reports them. */
int cz_model_grad_stages(const cz_model_config *cfg, int seq, int max_pred, cz_grad_stage *out,
                         int max, cz_error *err) {
    if (max < cfg->layers + 2)
        return cz_fail(err, "model: %d gradient stages need room for %d", max, cfg->layers + 2);
    if (check_config(cfg, 1, seq, max_pred, err)) return -1;
    cz_model *m = table_only(cfg, err);
    if (!m) return -1;
    double per_layer = (cfg->recompute == CZ_RECOMPUTE_LAYERS ? 3.0 : 2.0) * layer_flops(cfg, seq);
    int n = 0;
    out[n++] = (cz_grad_stage){m->heads_end, 2.0 * heads_flops(cfg, seq, max_pred)};
    for (int l = cfg->layers - 1; l >= 0; l--)
        out[n++] = (cz_grad_stage){m->layers[l].end, per_layer};
    out[n++] = (cz_grad_stage){m->emb_end, 0.0};
    table_free(m);
    return n;
}

const float *cz_model_hidden_states(const cz_model *m, int l) {
    return l >= 0 && l <= m->cfg.layers ? m->x[l] : NULL;
}

/* ---- parameter counts ---- */

static size_t numel_at(const cz_model *m, size_t offset) {
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].offset == offset) return m->tensors[i].numel;
    return 0;
}

/* The tensor table of cfg without parameters or activations (counts,
 * stages); freed by table_free. */
static cz_model *table_only(const cz_model_config *cfg, cz_error *err) {
    if (cfg->layers * 16 + 16 > MAX_TENSORS) {
        cz_fail(err, "model: %d layers exceed the tensor table", cfg->layers);
        return NULL;
    }
    cz_model *m = cz_alloc(sizeof *m, err);
    if (!m) return NULL;
    m->cfg = *cfg;
    m->tensors = cz_alloc(MAX_TENSORS * sizeof *m->tensors, err);
    m->tensor_kind = cz_alloc(MAX_TENSORS * sizeof *m->tensor_kind, err);
    m->tensor_key = cz_alloc(MAX_TENSORS * sizeof *m->tensor_key, err);
    m->layers = cz_alloc((size_t)(cfg->layers > 0 ? cfg->layers : 1) * sizeof *m->layers, err);
    if (!m->tensors || !m->tensor_kind || !m->tensor_key || !m->layers) {
        table_free(m);
        return NULL;
    }
    if (cfg->arch == CZ_ARCH_BERT)
        build_bert_table(m);
    else
        build_gpt_table(m);
    return m;
}

int cz_model_count_params(const cz_model_config *cfg, cz_model_param_counts *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    if (check_config(cfg, 1, 1, 1, err)) return -1;
    cz_model *m = table_only(cfg, err);
    if (!m) return -1;
    int bert = cfg->arch == CZ_ARCH_BERT;
    size_t emb = numel_at(m, m->wte) + numel_at(m, m->wpe);
    if (bert) {
        const cz_tensor_info *bias = cz_model_find_tensor(m, "cls.predictions.bias");
        emb += numel_at(m, m->wtt) + (bias ? bias->numel : 0);
    }
    out->total = m->n_params;
    out->non_embedding = m->n_params - emb;
    table_free(m);
    return 0;
}
