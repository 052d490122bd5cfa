/* The pre-training heads (model_private.h): BERT's MLM and NSP (BERT Sec.
 * 3.1, Hugging Face's BertPreTrainingHeads) and GPT's LM head (GPT-1 Sec.
 * 3.1; also GPT's auxiliary LM loss while fine-tuning, GPT-1 eq. 5), both
 * decoders tied to the word embedding. Forward reads the encoder output
 * x[L] and sets the losses; backward leaves d(encoder output) in m->dy. */
#include <math.h>
#include <string.h>

#include "model_private.h"

/* NSP's classifier, a readout under µP (mup.MuReadout: logits =
 * (pooled x out_mult) W^T + b); out_mult = 1 is the plain linear map. */
static void nsp_forward(cz_model *m, int B) {
    int H = m->cfg.hidden;
    if (m->out_mult == 1.0f) {
        model_lin_forward(m, &m->nsp, m->pooled, H, B, m->nsp_logits, 2);
        return;
    }
    model_gemm_weight(m, 0, 1, B, 2, H, m->out_mult, m->pooled, H, PARAM(m->nsp.w), H, 0.0f,
                      m->nsp_logits, 2);
    cz_add_bias(m->nsp_logits, PARAM(m->nsp.b), B, 2, 2);
}

/* d(nsp_logits) -> dW, db, d(pooled) into m->dcls */
static void nsp_backward(cz_model *m, int B) {
    int H = m->cfg.hidden;
    if (m->out_mult == 1.0f) {
        model_lin_backward(m, &m->nsp, m->nsp_logits, 2, m->pooled, H, B, m->dcls, H, 0.0f);
        return;
    }
    cz_bias_backward(GRAD(m->nsp.b), m->nsp_logits, B, 2, 2);
    model_gemm(m, 1, 0, 2, H, B, m->out_mult, m->nsp_logits, 2, m->pooled, H, 1.0f, GRAD(m->nsp.w),
               H);
    model_gemm_weight(m, 0, 0, B, H, 2, m->out_mult, m->nsp_logits, 2, PARAM(m->nsp.w), H, 0.0f,
                      m->dcls, H);
}

/* MLM: transform (dense + GELU + LN) of the hidden states at the masked
 * positions, decoder tied to the word embeddings plus an output bias;
 * NSP: pooler (dense + tanh) of [CLS], then a 2-way classifier. */
void model_bert_heads_forward(cz_model *m, const cz_batch *b, cz_losses *out) {
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
    /* µP's MuSharedReadout: logits = (z x out_mult) W_e^T + bias (model.h) */
    model_gemm_weight(m, 0, 1, rows, V, H, m->out_mult, m->mlm_z, H, PARAM(m->wte), H, 0.0f,
                      m->logits, V);
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
    nsp_forward(m, B);
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

void model_bert_heads_backward(cz_model *m, const cz_batch *b, float grad_scale) {
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
    model_gemm_mat(m, 1, 0, V, H, rows, m->out_mult, dl, cz_mat_f32(m->mlm_z, H), 0, 1.0f,
                   GRAD(m->wte), H);
    model_gemm_mat(m, 0, 0, rows, H, V, m->out_mult, dl, cz_mat_f32(PARAM(m->wte), H), 1, 0.0f,
                   m->dmlm, H);
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
    nsp_backward(m, B);
    for (size_t i = 0; i < (size_t)B * H; i++) /* tanh' = 1 - tanh^2 */
        m->dcls[i] *= 1.0f - m->pooled[i] * m->pooled[i];
    model_lin_backward(m, &m->pooler, m->dcls, H, m->cls, H, B, m->pooled, H, 0.0f);
    for (int s = 0; s < B; s++) {
        float *d = m->dy + (size_t)s * T * H;
        for (int j = 0; j < H; j++) d[j] += m->pooled[(size_t)s * H + j];
    }
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

/* Next-token cross-entropy over the positions with a target (>= 0). */
void model_gpt_head_forward(cz_model *m, const cz_batch *b, cz_losses *out) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, V = c->vocab_size, VR = m->vrows, n = b->batch * b->seq;
    /* µP's MuSharedReadout: logits = (h x out_mult) W_e^T (model.h) */
    model_gemm_weight(m, 0, 1, n, VR, H, m->out_mult, m->x[c->layers], H, PARAM(m->lm_head), H, 0.0f,
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

void model_gpt_head_backward(cz_model *m, const cz_batch *b, float grad_scale) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, V = c->vocab_size, VR = m->vrows, n = b->batch * b->seq;
    for (int i = 0; i < n; i++) m->row_scale[i] *= grad_scale;
    PHASE(loss, cz_xent_backward(m->logits, b->targets, m->row_scale, n, V));
    PHASE(loss, restore_padding_columns(m->logits, n, V, VR));
    model_gemm(m, 1, 0, VR, H, n, m->out_mult, m->logits, VR, m->x[c->layers], H, 1.0f,
               GRAD(m->lm_head), H);
    model_gemm_weight(m, 0, 0, n, H, VR, m->out_mult, m->logits, VR, PARAM(m->lm_head), H, 0.0f, m->dy,
                      H);
}
