/* BERT (Devlin et al. 2018) and GPT-1 (Radford et al. 2018): post-LN
 * Transformer blocks (Vaswani et al. 2017); GPT-2's pre-LN decoder (Radford
 * et al. 2019, Sec. 2.3): the passes through the whole model, forward and
 * backward, and its FLOPs. The parts are files of their own, each named
 * for what it holds, in the order model_private.h lists: the tensor tables
 * (tensor_table.c), the memory (memory.c), attention (attention.c), the
 * blocks (layers.c), the pre-training heads (pretrain_heads.c) and the
 * fine-tuning heads (task_heads.c).
 *
 * Forward: embeddings, the L blocks, (pre-LN: the final LayerNorm, GPT-2
 * Sec. 2.3), the heads. Activations are row-major [tokens x features],
 * token n = b*T + t.
 *
 * Backward walks the parameter buffer from its start: tensors lie in the
 * order backward finishes them (tensor_table.c): the tied word embedding,
 * heads, layer L-1, ..., layer 0, the other embeddings. The word
 * embedding's gradient has two parts: the LM decoder's (dense, every
 * vocabulary row, done at the start of backward) and the embedding
 * lookup's (only the rows of the batch's tokens, done at the very end).
 * With a rows hook (cz_model_set_grad_rows_hook) the lookup's rows go to
 * the hook instead of the buffer, so the word embedding's range is final
 * with the heads and its all-reduce can run under the whole encoder's
 * backward; the few rows follow after backward (Goyal et al. 2017 and
 * PyTorch DDP bucket the same way: reduce what is final first). The
 * gradient buffer has the same layout; backward calls the grad hook with
 * each finished range, in buffer order.
 *
 * Recomputation (cfg.recompute = CZ_RECOMPUTE_LAYERS; memory.c): forward
 * keeps only the layer inputs x[l]; backward runs layer l's forward again
 * from x[l] just before layer l's backward. The layer forward is a pure
 * function of x[l], the parameters and the dropout keys, and the kernels
 * are deterministic for a given thread count, so the scratch then holds
 * bitwise the activations a full forward would have kept. */
#include "cloze/model.h"

#include <string.h>

#include "model_private.h"

/* Additive score for padded keys, as Hugging Face BERT (extended attention
 * mask (1 - mask) * -10000): exp underflows to exactly 0 in fp32. */
#define PAD_KEY_BIAS (-10000.0f)

/* ---- precision ---- */

cz_gemm_ctx *cz_model_gemm_setup(cz_gemm_choice choice, int threads, int matmul_bf16,
                                 cz_error *err) {
    cz_gemm_ctx *g = cz_gemm_setup(choice, threads, err);
    if (!g) return NULL;
    /* model.matmul_precision = "bf16": every product of the model in bf16 */
    if (matmul_bf16 && cz_gemm_set_bf16(g, 1, err) != 0) {
        cz_gemm_free(g);
        return NULL;
    }
    return g;
}

void cz_model_set_bf16_inputs(cz_model *m, int on) {
    m->no_bf16_inputs = !on;
}

/* ---- forward ---- */

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

/* Where layer l writes its output in the forward pass: the next layer's
 * input, or for a pre-LN model's last layer x_last, which the final
 * LayerNorm reads. */
static float *layer_output(cz_model *m, int l) {
    return m->pre_ln && l == m->cfg.layers - 1 ? m->x_last : m->x[l + 1];
}

/* Layer l's forward (the block cz_model_create chose), its activations
 * then in the scratch (recomputation). */
static void layer_forward(cz_model *m, int l, const cz_batch *b, float *out) {
    m->scratch_layer = l;
    m->layer->forward(m, l, b, out);
}

int cz_model_forward(cz_model *m, const cz_batch *b, cz_losses *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    if (check_batch(m, b, err)) return -1;
    double t0 = m->profiling ? cz_now() : 0.0;
    int n = b->batch * b->seq;
    /* bf16 products round their inputs anyway: kernels may write them so */
    m->act16 = m->bf16 && !m->no_bf16_inputs;
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
            model_gpt_head_forward(m, b, out); /* GPT's auxiliary LM loss (GPT-1 eq. 5) */
        model_task_head_forward(m, b, out);
    } else if (m->cfg.arch == CZ_ARCH_BERT)
        model_bert_heads_forward(m, b, out);
    else
        model_gpt_head_forward(m, b, out);
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

/* What a stage wrote into dx (d(its input)) becomes the dy of the stage
 * below it. */
static void swap_dx_dy(cz_model *m) {
    float *t = m->dx;
    m->dx = m->dy;
    m->dy = t;
}

/* d(layer output) in m->dy -> d(layer input), in m->dy once swapped, for
 * the layer below. With recomputation the shared scratch is first refilled
 * with layer l's activations; that forward's output is not needed (neither
 * block's backward reads it), so it goes to m->dx, which is free until the
 * layer's backward writes it; x[l+1] is left untouched. */
static void layer_backward(cz_model *m, int l, const cz_batch *b) {
    if (m->cfg.recompute == CZ_RECOMPUTE_LAYERS && m->scratch_layer != l) {
        double t0 = m->profiling ? cz_now() : 0.0;
        layer_forward(m, l, b, m->dx);
        if (m->profiling) m->prof.recompute += cz_now() - t0;
    }
    m->layer->backward(m, l, b);
    swap_dx_dy(m);
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
            model_gpt_head_backward(m, b, grad_scale * m->cfg.lm_weight); /* sets dy */
        else
            memset(m->dy, 0, (size_t)b->batch * b->seq * m->cfg.hidden * sizeof(float));
        model_task_head_backward(m, b, grad_scale);
    } else if (m->cfg.arch == CZ_ARCH_BERT)
        model_bert_heads_backward(m, b, grad_scale);
    else
        model_gpt_head_backward(m, b, grad_scale);
    if (m->pre_ln) { /* the final LayerNorm: d(last layer's output) into dy */
        int n = b->batch * b->seq;
        PHASE(elementwise,
              cz_layernorm_backward(m->dx, GRAD(m->lnf_g), GRAD(m->lnf_b), m->dy, m->x_last,
                                    m->lnf_mean, m->lnf_rstd, PARAM(m->lnf_g), n, m->cfg.hidden));
        swap_dx_dy(m);
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

void cz_model_set_grad_hook(cz_model *m, cz_grad_ready_fn fn, void *ctx) {
    m->hook = fn;
    m->hook_ctx = ctx;
}

void cz_model_set_grad_rows_hook(cz_model *m, cz_grad_rows_fn fn, void *ctx) {
    m->rows_hook = fn;
    m->rows_ctx = ctx;
}

/* ---- profiling ---- */

void cz_model_set_profiling(cz_model *m, int on) {
    if (on) memset(&m->prof, 0, sizeof m->prof);
    m->profiling = on;
}

void cz_model_get_profile(const cz_model *m, cz_model_profile *out) {
    *out = m->prof;
}

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
 * (model_build_table), in the order cz_model_backward
 * reports them. */
int cz_model_grad_stages(const cz_model_config *cfg, int seq, int max_pred, cz_grad_stage *out,
                         int max, cz_error *err) {
    if (max < cfg->layers + 2)
        return cz_fail(err, "model: %d gradient stages need room for %d", max, cfg->layers + 2);
    if (model_check_create(cfg, 1, seq, max_pred, err)) return -1;
    cz_model *m = model_table_only(cfg, err);
    if (!m) return -1;
    double per_layer = (cfg->recompute == CZ_RECOMPUTE_LAYERS ? 3.0 : 2.0) * layer_flops(cfg, seq);
    int n = 0;
    out[n++] = (cz_grad_stage){m->heads_end, 2.0 * heads_flops(cfg, seq, max_pred)};
    for (int l = cfg->layers - 1; l >= 0; l--)
        out[n++] = (cz_grad_stage){m->layers[l].end, per_layer};
    out[n++] = (cz_grad_stage){m->emb_end, 0.0};
    model_table_free(m);
    return n;
}
