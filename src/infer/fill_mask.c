/* infer: BERT's fill-mask (infer.h): the encoder through cz_model_forward,
 * the masked-LM head here on the tensors it reads by name. */
#include <math.h>
#include <string.h>

#include "cloze/infer.h"

static const float *tensor(cz_model *m, const char *name, size_t numel, cz_error *err) {
    const cz_tensor_info *t = cz_model_find_tensor(m, name);
    if (!t || t->numel != numel) {
        cz_fail(err, "the model has no tensor %s of %zu elements", name, numel);
        return NULL;
    }
    return cz_model_params(m) + t->offset;
}

int cz_fill_mask(cz_model *m, const cz_gemm_ctx *g, const int32_t *ids, int n, int32_t mask_id,
                 int top_k, cz_fill_result *out, int max_out, cz_error *err) {
    const cz_model_config *c = cz_model_get_config(m);
    if (c->arch != CZ_ARCH_BERT)
        return cz_fail(err, "fill-mask needs a BERT model (model.arch = bert), this one is GPT");
    if (c->head != CZ_HEAD_PRETRAIN)
        return cz_fail(err, "fill-mask needs BERT's masked-LM head (a pre-training checkpoint), "
                            "this one has a fine-tuning head");
    if (top_k < 1 || top_k > 64) return cz_fail(err, "top-k %d: must be in [1, 64]", top_k);
    int H = c->hidden, V = c->vocab_size, P = 0;
    for (int i = 0; i < n; i++) P += ids[i] == mask_id;
    if (P == 0) return cz_fail(err, "the text has no [MASK] token (id %d) to fill", mask_id);
    const float *dw, *db, *lg, *lb, *bias, *wte;
    size_t h = (size_t)H;
    if (!(dw = tensor(m, "cls.predictions.transform.dense.weight", h * h, err)) ||
        !(db = tensor(m, "cls.predictions.transform.dense.bias", h, err)) ||
        !(lg = tensor(m, "cls.predictions.transform.LayerNorm.weight", h, err)) ||
        !(lb = tensor(m, "cls.predictions.transform.LayerNorm.bias", h, err)) ||
        !(bias = tensor(m, "cls.predictions.bias", (size_t)V, err)) ||
        !(wte = tensor(m, "bert.embeddings.word_embeddings.weight", (size_t)V * h, err)))
        return -1;
    /* one sequence, segment 0, every token real, dropout off; the
     * pre-training heads' slots at the masks (their loss is not used) */
    size_t pn = (size_t)P;
    int32_t *seg = cz_alloc((size_t)n * sizeof *seg, err);
    int32_t *pos = seg ? cz_alloc(pn * sizeof *pos, err) : NULL;
    int32_t *lab = pos ? cz_alloc(pn * sizeof *lab, err) : NULL;
    float *wt = lab ? cz_alloc(pn * sizeof *wt, err) : NULL;
    float *x = wt ? cz_alloc(pn * h * sizeof *x, err) : NULL;
    float *y = x ? cz_alloc(pn * h * sizeof *y, err) : NULL;
    float *stats = y ? cz_alloc(2 * pn * sizeof *stats, err) : NULL;
    float *logits = stats ? cz_alloc(pn * (size_t)V * sizeof *logits, err) : NULL;
    int rc = logits ? 0 : -1;
    int32_t nsp = 0;
    for (int i = 0, k = 0; rc == 0 && i < n; i++)
        if (ids[i] == mask_id) pos[k] = i, lab[k] = mask_id, wt[k++] = 1.0f;
    if (rc == 0) {
        cz_batch b;
        memset(&b, 0, sizeof b);
        b.batch = 1;
        b.seq = n;
        b.tokens = ids;
        b.segments = seg;
        b.max_pred = P;
        b.mlm_positions = pos;
        b.mlm_labels = lab;
        b.mlm_weights = wt;
        b.nsp_labels = &nsp;
        cz_losses l;
        rc = cz_model_forward(m, &b, &l, err);
    }
    if (rc == 0) {
        const float *hs = cz_model_hidden_states(m, c->layers);
        for (int k = 0; k < P; k++)
            memcpy(x + (size_t)k * h, hs + (size_t)pos[k] * h, h * sizeof *x);
        /* transform: LN(act(x W^T + b)); the decoder: y wte^T + bias */
        cz_gemm(g, 0, 1, P, H, H, 1.0f, x, H, dw, H, 0.0f, y, H);
        cz_bias_gelu_forward(x, y, db, P, H, c->gelu_tanh);
        cz_layernorm_forward(y, stats, stats + pn, x, lg, lb, P, H, c->layer_norm_eps);
        cz_gemm(g, 0, 1, P, V, H, 1.0f, y, H, wte, H, 0.0f, logits, V);
        cz_add_bias(logits, bias, P, V, V);
        for (int k = 0; k < P && k < max_out; k++) {
            const float *z = logits + (size_t)k * V;
            float zmax = z[0];
            for (int t = 1; t < V; t++) zmax = z[t] > zmax ? z[t] : zmax;
            double sum = 0;
            for (int t = 0; t < V; t++) sum += exp((double)z[t] - zmax);
            cz_fill_result *r = &out[k];
            r->position = pos[k];
            int kk = top_k < V ? top_k : V;
            /* insertion into the sorted top list: top_k <= 64 */
            int have = 0;
            for (int32_t t = 0; t < V; t++) {
                int at = have;
                while (at > 0 && z[t] > z[r->ids[at - 1]]) at--;
                if (at >= kk) continue;
                if (have < kk) have++;
                for (int j = have - 1; j > at; j--) r->ids[j] = r->ids[j - 1];
                r->ids[at] = t;
            }
            for (int j = 0; j < kk; j++) r->probs[j] = exp((double)z[r->ids[j]] - zmax) / sum;
        }
    }
    float *bufs[] = {wt, x, y, stats, logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cz_free(bufs[i]);
    cz_free(seg);
    cz_free(pos);
    cz_free(lab);
    return rc == 0 ? P : -1;
}
