/* The Transformer blocks (model_private.h), two peers behind one layer_ops
 * that cz_model_create chooses once:
 *
 * Post-LN block (BERT Sec. 3, GPT-1 Sec. 3.1 and 4.1; Vaswani et al. Sec. 3):
 *   h = LN(x + Drop(Attn(x)))
 *   y = LN(h + Drop(W2 GELU(W1 h + b1) + b2))
 * Pre-LN block (model.layout = pre_ln; GPT-2 Sec. 2.3: LayerNorm "moved to
 * the input of each sub-block"):
 *   r = x + Drop(Attn(LN1(x)))
 *   y = r + Drop(W2 GELU(W1 LN2(r) + b1) + b2)
 * Forward: x[l] -> out, keeping layer l's activations. Backward: d(layer
 * output) in m->dy -> d(layer input) in m->dx (model.c swaps the two). A
 * layer's forward is a pure function of x[l], the parameters and the
 * dropout keys (seed, step, sample, layer, site), so running it again
 * (recomputation) refills its activations bit for bit. */
#include "model_private.h"

/* y = a + b over n floats (y may alias a or b): the pre-LN residual sums.
 * Elementwise, so the bits do not depend on the thread count. */
static void residual_add(float *y, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
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

/* ---- post-LN: BERT, GPT-1 ---- */

/* x[l] -> out (x[l+1] in the forward pass), keeping h1, r1 and r2 (the
 * residual sums before each LayerNorm) and the FFN's u and g. */
static void post_ln_forward(cz_model *m, int l, const cz_batch *b, float *out) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
    const float *x = m->x[l];
    model_lin_forward(m, &ly->qkv, x, H, n, ly->qkv_act, 3 * H);
    model_attention_forward(m, ly, l, b);
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

static void post_ln_backward(cz_model *m, int l, const cz_batch *b) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
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
    model_attention_backward(m, ly, l, b);
    model_lin_backward(m, &ly->qkv, m->dqkv, 3 * H, m->x[l], H, n, m->dx, H, 1.0f);
}

const layer_ops model_post_ln_layer = {post_ln_forward, post_ln_backward};

/* ---- pre-LN: GPT-2 ---- */

/* x[l] -> out, keeping h1 = LN1(x), r1 = x + Drop(Attn(h1)), r2 = LN2(r1)
 * and the FFN's u and g. */
static void pre_ln_forward(cz_model *m, int l, const cz_batch *b, float *out) {
    layer *ly = &m->layers[l];
    const cz_model_config *c = &m->cfg;
    int n = b->batch * b->seq, H = c->hidden, I = c->intermediate;
    const float *x = m->x[l];
    PHASE(elementwise, cz_layernorm_forward(ly->h1, ly->mean1, ly->rstd1, x, PARAM(ly->ln1_g),
                                            PARAM(ly->ln1_b), n, H, c->layer_norm_eps));
    model_lin_forward(m, &ly->qkv, ly->h1, H, n, ly->qkv_act, 3 * H);
    model_attention_forward(m, ly, l, b);
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

/* Each residual sum passes its gradient on unchanged and adds the branch's:
 * d r1 = dy + LN2'(d through the FFN), dx = d r1 + LN1'(d through
 * attention). */
static void pre_ln_backward(cz_model *m, int l, const cz_batch *b) {
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
    model_attention_backward(m, ly, l, b);
    model_lin_backward(m, &ly->qkv, m->dqkv, 3 * H, ly->h1, H, n, m->dh1, H, 0.0f);
    PHASE(elementwise,
          cz_layernorm_backward(m->dr, GRAD(ly->ln1_g), GRAD(ly->ln1_b), m->dh1, m->x[l], ly->mean1,
                                ly->rstd1, PARAM(ly->ln1_g), n, H));
    PHASE(elementwise, residual_add(m->dx, m->dy, m->dr, nh));
}

const layer_ops model_pre_ln_layer = {pre_ln_forward, pre_ln_backward};
