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

/* standard: 1/sqrt(d); µP: sqrt(d0)/d with d0 = mup_base_width / heads, the
 * head size at the base width (model.h says why) */
float cz_model_attn_scale(const cz_model_config *c) {
    double d = (double)c->hidden / c->heads;
    if (c->parametrization != CZ_PARAM_MUP || c->mup_base_width < 1) return (float)(1.0 / sqrt(d));
    double d0 = (double)c->mup_base_width / c->heads;
    return (float)(sqrt(d0) / d);
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
