/* The model's building blocks (model_private.h): the parameter table's
 * entries, the buffers, the one product path, linear maps and the dropout
 * streams, which every other file of the model is made of. */
#include <stdio.h>
#include <string.h>

#include "model_private.h"

/* ---- the parameter table ---- */

/* A tensor at `offset` (SIZE_MAX: the next free offset). The table stays
 * in buffer order (the optimizer and the exports walk it so); each
 * tensor's creation order keys its initial values (cz_model_init_weights),
 * so that a tensor placed out of turn keeps the values it had. */
size_t model_place_tensor(cz_model *m, const char *name, int s0, int s1, int kind, size_t offset) {
    int at = m->n_tensors;
    if (offset != SIZE_MAX)
        while (at > 0 && m->tensors[at - 1].offset > offset) at--;
    memmove(m->tensors + at + 1, m->tensors + at, (size_t)(m->n_tensors - at) * sizeof *m->tensors);
    memmove(m->tensor_kind + at + 1, m->tensor_kind + at,
            (size_t)(m->n_tensors - at) * sizeof *m->tensor_kind);
    memmove(m->tensor_key + at + 1, m->tensor_key + at,
            (size_t)(m->n_tensors - at) * sizeof *m->tensor_key);
    m->tensor_key[at] = m->n_tensors;
    cz_tensor_info *t = &m->tensors[at];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = offset == SIZE_MAX ? m->n_params : offset;
    t->ndim = s1 > 0 ? 2 : 1;
    t->shape[0] = s0;
    t->shape[1] = s1 > 0 ? s1 : 0;
    t->numel = (size_t)s0 * (size_t)(s1 > 0 ? s1 : 1);
    t->no_decay = kind != KIND_WEIGHT && kind != KIND_RESID_WEIGHT;
    m->tensor_kind[at] = kind;
    m->n_tensors++;
    if (offset == SIZE_MAX) m->n_params += t->numel;
    return t->offset;
}

size_t model_add_tensor(cz_model *m, const char *name, int s0, int s1, int kind) {
    return model_place_tensor(m, name, s0, s1, kind, SIZE_MAX);
}

/* prefix.weight (of kind wkind) and prefix.bias of a linear map */
lin model_add_lin_kind(cz_model *m, const char *prefix, int in, int out, int conv1d, int wkind) {
    char name[96];
    lin l = {0, 0, in, out, conv1d};
    snprintf(name, sizeof name, "%s.weight", prefix);
    l.w = conv1d ? model_add_tensor(m, name, in, out, wkind)
                 : model_add_tensor(m, name, out, in, wkind);
    snprintf(name, sizeof name, "%s.bias", prefix);
    l.b = model_add_tensor(m, name, out, 0, KIND_BIAS);
    return l;
}

lin model_add_lin(cz_model *m, const char *prefix, int in, int out, int conv1d) {
    return model_add_lin_kind(m, prefix, in, out, conv1d, KIND_WEIGHT);
}

void *model_take(cz_model *m, size_t bytes, cz_error *err) {
    if (m->n_allocs == MAX_ALLOCS) {
        cz_fail(err, "model: too many buffers");
        return NULL;
    }
    void *p = cz_alloc(bytes ? bytes : 64, err);
    if (p) {
        m->allocs[m->n_allocs++] = p;
        m->mem_plan[m->mem_slot] += bytes;
    }
    return p;
}

/* Every matrix product of the model goes through here: operands of either
 * kind (fp32, or bf16 as the kernels that write them in bf16 mode left
 * them), on context g (m->gemm, or an attention thread's single-thread
 * copy of it), whose mode (model.matmul_precision) rounds them or not. */
void model_product(const cz_gemm_ctx *g, int ta, int tb, int mm, int n, int k, float alpha,
                   cz_mat a, cz_mat b, int b_weight, float beta, float *c, int ldc) {
    cz_gemm_mat(g, ta, tb, mm, n, k, alpha, a, b, b_weight, beta, c, ldc);
}

/* A product on m's context, profiled as gemm (the attention's products,
 * which run side by side on threads, are profiled around all of them). */
void model_gemm_mat(const cz_model *cm, int ta, int tb, int mm, int n, int k, float alpha, cz_mat a,
                    cz_mat b, int b_weight, float beta, float *c, int ldc) {
    cz_model *m = (cz_model *)cm; /* the profile is bookkeeping, not model state */
    PHASE(gemm, model_product(m->gemm, ta, tb, mm, n, k, alpha, a, b, b_weight, beta, c, ldc));
}

void model_gemm(const cz_model *m, int ta, int tb, int mm, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    model_gemm_mat(m, ta, tb, mm, n, k, alpha, cz_mat_f32(a, lda), cz_mat_f32(b, ldb), 0, beta, c,
                   ldc);
}

/* A product whose op(B) is one of the model's weights (cz_gemm_weight: in
 * bf16 mode packed once per weights scope, cz_gemm_weights_begin). */
void model_gemm_weight(const cz_model *m, int ta, int tb, int mm, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc) {
    model_gemm_mat(m, ta, tb, mm, n, k, alpha, cz_mat_f32(a, lda), cz_mat_f32(b, ldb), 1, beta, c,
                   ldc);
}

/* y[:, 0:out] (row stride ldy) = x W^T, or x W for Conv1D (no bias) */
static void lin_map(cz_model *m, const lin *l, cz_mat x, int n, float *y, int ldy) {
    const float *w = m->params + l->w;
    if (l->conv1d)
        model_gemm_mat(m, 0, 0, n, l->out, l->in, 1.0f, x, cz_mat_f32(w, l->out), 1, 0.0f, y, ldy);
    else
        model_gemm_mat(m, 0, 1, n, l->out, l->in, 1.0f, x, cz_mat_f32(w, l->in), 1, 0.0f, y, ldy);
}

void model_lin_map(cz_model *m, const lin *l, const float *x, int ldx, int n, float *y, int ldy) {
    lin_map(m, l, cz_mat_f32(x, ldx), n, y, ldy);
}

/* y = x W^T + b, or x W + b for Conv1D */
void model_lin_forward_mat(cz_model *m, const lin *l, cz_mat x, int n, float *y, int ldy) {
    lin_map(m, l, x, n, y, ldy);
    if (l->b != NO_BIAS) PHASE(elementwise, cz_add_bias(y, m->params + l->b, n, l->out, ldy));
}

void model_lin_forward(cz_model *m, const lin *l, const float *x, int ldx, int n, float *y,
                       int ldy) {
    model_lin_forward_mat(m, l, cz_mat_f32(x, ldx), n, y, ldy);
}

/* dW += dy^T x (Linear) or x^T dy (Conv1D); db += column sums of dy;
 * dx = dx_beta * dx + dy W (Linear) or dy W^T (Conv1D); dx may be NULL. */
void model_lin_backward_mat(cz_model *m, const lin *l, const float *dy, int ldy, cz_mat x, int n,
                            float *dx, int lddx, float dx_beta) {
    const float *w = m->params + l->w;
    float *dw = m->grads + l->w;
    cz_mat d = cz_mat_f32(dy, ldy);
    if (l->conv1d) {
        model_gemm_mat(m, 1, 0, l->in, l->out, n, 1.0f, x, d, 0, 1.0f, dw, l->out);
        if (dx)
            model_gemm_weight(m, 0, 1, n, l->in, l->out, 1.0f, dy, ldy, w, l->out, dx_beta, dx,
                              lddx);
    } else {
        model_gemm_mat(m, 1, 0, l->out, l->in, n, 1.0f, d, x, 0, 1.0f, dw, l->in);
        if (dx)
            model_gemm_weight(m, 0, 0, n, l->in, l->out, 1.0f, dy, ldy, w, l->in, dx_beta, dx,
                              lddx);
    }
    if (l->b != NO_BIAS) PHASE(elementwise, cz_bias_backward(m->grads + l->b, dy, n, l->out, ldy));
}

void model_lin_backward(cz_model *m, const lin *l, const float *dy, int ldy, const float *x,
                        int ldx, int n, float *dx, int lddx, float dx_beta) {
    model_lin_backward_mat(m, l, dy, ldy, cz_mat_f32(x, ldx), n, dx, lddx, dx_beta);
}

cz_rng_stream model_dropout_stream(const cz_batch *b, int seq, int layer_idx, int site) {
    uint64_t sid = b->sample_ids ? b->sample_ids[seq] : (uint64_t)seq;
    return cz_rng_stream_make(b->seed, CZ_RNG_DROPOUT, b->step, sid,
                              ((uint64_t)layer_idx << 8) | (uint64_t)site);
}

/* Dropout of a [B, per] activation, one stream per sequence, element index
 * within the sequence's block of `per` values: the mask of a sequence does
 * not depend on which other sequences share its batch. Backward applies the
 * same call to the gradient. */
void model_dropout_groups(const cz_batch *b, float p, int layer_idx, int site, float *y,
                          const float *x, size_t per, int n, int every) {
    if (!b->train || p <= 0.0f) {
        if (y != x) memcpy(y, x, (size_t)n * per * sizeof *y);
        return;
    }
    for (int s = 0; s < n; s++) {
        cz_rng_stream st = model_dropout_stream(b, s * every, layer_idx, site);
        cz_dropout(y + s * per, x + s * per, per, p, &st, 0);
    }
}

static void dropout_blocks(const cz_batch *b, float p, int layer_idx, int site, float *y,
                           const float *x, size_t per) {
    model_dropout_groups(b, p, layer_idx, site, y, x, per, b->batch, 1);
}

/* [B*T, cols]: each sequence's [T, cols] block is one stream */
void model_dropout_rows(const cz_batch *b, float p, int layer_idx, int site, float *y,
                        const float *x, int cols) {
    dropout_blocks(b, p, layer_idx, site, y, x, (size_t)b->seq * cols);
}
