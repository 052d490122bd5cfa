/* The Maximal Update Parametrization (model.h, cz_parametrization): which
 * tensors are matrix-like, their initial std, their learning-rate and
 * weight-decay multipliers, the readouts' output multiplier and the
 * attention logits' scale, all from the width multiplier
 * w = hidden / mup_base_width.
 *
 * mup (Microsoft's package, 1.0) classifies a tensor by how many of its
 * dimensions grow with width ("infinite" dimensions, set_base_shapes):
 * two make it matrix-like (mup.init: std x w^-1/2; MuAdam: lr / w,
 * weight_decay x w), fewer vector-like (unchanged). In cloze's tables the
 * matrix-like tensors are exactly the 2-D tensors inside a layer (q, k, v,
 * attention output, FFN in and out) and BERT's MLM transform and pooler;
 * the embeddings ([vocab or positions or segments, H]), the NSP classifier
 * ([2, H]) and every bias and LayerNorm have at most one width dimension.
 * Every matrix-like tensor's fan-in grows as H does (intermediate and 3H
 * are fixed multiples of H in the base model), so all share one w. */
#include <math.h>

#include "model_private.h"

double cz_model_width_mult(const cz_model_config *c) {
    if (c->parametrization != CZ_PARAM_MUP || c->mup_base_width < 1) return 1.0;
    return (double)c->hidden / (double)c->mup_base_width;
}

/* mup.MuReadout.forward: output_mult x h / width_mult(), output_mult 1 */
float cz_model_output_mult_of(const cz_model_config *c) {
    return (float)(1.0 / cz_model_width_mult(c));
}

float cz_model_output_mult(const cz_model *m) {
    return m->out_mult;
}

void cz_model_set_output_mult(cz_model *m, float mult) {
    m->out_mult = mult;
}

/* standard: 1/sqrt(d); µP: a/d with a = mup_attn_mult, by default
 * sqrt(mup_base_width / heads), the head size at the base width (model.h) */
float cz_model_attn_scale(const cz_model_config *c) {
    double d = (double)c->hidden / c->heads;
    if (c->parametrization != CZ_PARAM_MUP || c->mup_base_width < 1) return (float)(1.0 / sqrt(d));
    double a = c->mup_attn_mult > 0 ? (double)c->mup_attn_mult
                                    : sqrt((double)c->mup_base_width / c->heads);
    return (float)(a / d);
}

static int matrix_like(const cz_model *m, int k) {
    const cz_tensor_info *t = &m->tensors[k];
    if (t->ndim != 2) return 0;
    for (int l = 0; l < m->cfg.layers; l++)
        if (t->offset >= m->layers[l].begin && t->offset < m->layers[l].end) return 1;
    int bert_heads = m->cfg.arch == CZ_ARCH_BERT && m->cfg.head == CZ_HEAD_PRETRAIN;
    return bert_heads && (t->offset == m->mlm_dense.w || t->offset == m->pooler.w);
}

double model_init_std(const cz_model *m, int k) {
    double std = m->cfg.init_range;
    /* GPT-2 Sec. 2.3: residual projections at 1/sqrt(N), N = 2L residual layers */
    if (m->tensor_kind[k] == KIND_RESID_WEIGHT) std /= sqrt(2.0 * m->cfg.layers);
    if (matrix_like(m, k)) std /= sqrt(cz_model_width_mult(&m->cfg));
    return std;
}

void cz_model_tensor_mup(const cz_model *m, int i, cz_tensor_mup *out) {
    /* the table is in buffer order; the initial values go by creation order */
    int kind = m->tensor_kind[i];
    int weight = kind == KIND_WEIGHT || kind == KIND_RESID_WEIGHT;
    double w = cz_model_width_mult(&m->cfg);
    out->matrix_like = m->cfg.parametrization == CZ_PARAM_MUP && matrix_like(m, i);
    out->init_std = weight ? model_init_std(m, i) : 0.0;
    out->lr_mult = out->matrix_like ? 1.0 / w : 1.0;
    out->wd_mult = out->matrix_like ? w : 1.0;
}

/* mean |a - b| over n floats (b NULL: mean |a|) */
static double mean_abs_diff(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs((double)a[i] - (b ? (double)b[i] : 0.0));
    return n ? s / (double)n : 0.0;
}

int cz_model_coord_stats(const cz_model *m, const cz_batch *b, double *out, int max) {
    const cz_model_config *c = &m->cfg;
    int L = c->layers;
    if (max < 2 * L + 2 || c->recompute != CZ_RECOMPUTE_NONE || c->arch != CZ_ARCH_GPT ||
        c->head != CZ_HEAD_PRETRAIN)
        return -1;
    size_t H = (size_t)c->hidden, n = (size_t)b->batch * (size_t)b->seq;
    out[0] = mean_abs_diff(m->x[0], NULL, n * H);
    for (int l = 0; l < L; l++) {
        const layer *ly = &m->layers[l];
        /* r1 = x + Attn (pre-LN: Attn(LN1(x))); post-LN r2 = LN1(r1) + FFN,
         * pre-LN the layer's output = r1 + FFN(LN2(r1)) */
        out[1 + 2 * l] = mean_abs_diff(ly->r1, m->x[l], n * H);
        if (m->pre_ln)
            out[2 + 2 * l] = mean_abs_diff(l + 1 < L ? m->x[l + 1] : m->x_last, ly->r1, n * H);
        else
            out[2 + 2 * l] = mean_abs_diff(ly->r2, ly->h1, n * H);
    }
    /* the logits out_mult x h W_e^T again (the forward's buffer holds the
     * softmax by now), in plain loops: a diagnostic, not a hot path */
    const float *h = m->x[L], *we = m->params + m->wte;
    size_t V = (size_t)c->vocab_size;
    double s = 0;
    long rows = 0;
#pragma omp parallel for reduction(+ : s, rows) schedule(static)
    for (size_t i = 0; i < n; i++) {
        if (b->targets[i] < 0) continue;
        double r = 0;
        for (size_t v = 0; v < V; v++) {
            double z = 0;
            for (size_t j = 0; j < H; j++) z += (double)h[i * H + j] * we[v * H + j];
            r += fabs(z * m->out_mult);
        }
        s += r / (double)V;
        rows++;
    }
    out[2 * L + 1] = rows ? s / (double)rows : 0.0;
    return 2 * L + 2;
}
