/* The tensor tables (model_private.h): which tensors a layout has, their
 * Hugging Face names, their place in the flat buffer, and their initial
 * values. One builder for every layout: a layout is its names (table_names
 * below), the per-layer ones a list in creation order.
 *
 * Parameter layout: one flat buffer, tensors in the order backward finishes
 * them: the tied word embedding, heads, layer L-1, ..., layer 0, the other
 * embeddings (model.c says why). The table stays in buffer order; each
 * tensor's creation order keys its initial values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_private.h"

/* The parts of a layer, each one tensor group of layer (model_private.h). */
enum { PART_QKV, PART_ATTN_OUT, PART_LN1, PART_FFN_IN, PART_FFN_OUT, PART_LN2, N_PARTS };

typedef struct layer_part {
    int part;
    const char *name; /* after "<layer>.<l>." */
    int wkind;        /* the weight's kind (KIND_WEIGHT or KIND_RESID_WEIGHT) */
} layer_part;

/* A layout's names. The per-layer list is in creation order, which keys the
 * initial values (cz_model_init_weights): each layout keeps the order of its
 * Hugging Face state dict. */
typedef struct table_names {
    const char *layer; /* layer l's tensors are "<layer>.<l>.<part name>" */
    int conv1d;        /* Hugging Face Conv1D maps (W [in, out]) or Linear ones (W [out, in]) */
    layer_part parts[N_PARTS];
    const char *lnf;       /* pre-LN: the final LayerNorm (with the heads), or NULL */
    const char *wte, *wpe; /* word and position embeddings */
    const char *wtt, *lne; /* BERT: segment embeddings and their LayerNorm, or NULL */
} table_names;

/* BERT (BertForPreTraining's state dict) */
static const table_names bert_names = {
    "bert.encoder.layer",
    0,
    {{PART_QKV, "attention.self", KIND_WEIGHT},
     {PART_ATTN_OUT, "attention.output.dense", KIND_WEIGHT},
     {PART_LN1, "attention.output.LayerNorm", 0},
     {PART_FFN_IN, "intermediate.dense", KIND_WEIGHT},
     {PART_FFN_OUT, "output.dense", KIND_WEIGHT},
     {PART_LN2, "output.LayerNorm", 0}},
    NULL,
    "bert.embeddings.word_embeddings.weight",
    "bert.embeddings.position_embeddings.weight",
    "bert.embeddings.token_type_embeddings.weight",
    "bert.embeddings.LayerNorm",
};

/* GPT-1 (OpenAIGPTLMHeadModel's state dict): post-LN, as BERT */
static const table_names gpt_names = {
    "transformer.h",
    1,
    {{PART_QKV, "attn.c_attn", KIND_WEIGHT},
     {PART_ATTN_OUT, "attn.c_proj", KIND_WEIGHT},
     {PART_LN1, "ln_1", 0},
     {PART_FFN_IN, "mlp.c_fc", KIND_WEIGHT},
     {PART_FFN_OUT, "mlp.c_proj", KIND_WEIGHT},
     {PART_LN2, "ln_2", 0}},
    NULL,
    "transformer.tokens_embed.weight",
    "transformer.positions_embed.weight",
    NULL,
    NULL,
};

/* GPT-2 (GPT2LMHeadModel's state dict): the LayerNorms first in their
 * sub-blocks, the residual projections scaled at init, and the final
 * LayerNorm, whose backward runs right after the head's: it lies with the
 * heads and is final with them (the range backward reports first). */
static const table_names gpt2_names = {
    "transformer.h",
    1,
    {{PART_LN1, "ln_1", 0},
     {PART_QKV, "attn.c_attn", KIND_WEIGHT},
     {PART_ATTN_OUT, "attn.c_proj", KIND_RESID_WEIGHT},
     {PART_LN2, "ln_2", 0},
     {PART_FFN_IN, "mlp.c_fc", KIND_WEIGHT},
     {PART_FFN_OUT, "mlp.c_proj", KIND_RESID_WEIGHT}},
    "transformer.ln_f",
    "transformer.wte.weight",
    "transformer.wpe.weight",
    NULL,
    NULL,
};

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

/* BERT's pre-training heads: the MLM transform and output bias (its
 * decoder is the tied word embedding), the pooler and the NSP classifier */
static void add_bert_heads(cz_model *m) {
    int h = m->cfg.hidden;
    m->mlm_dense = model_add_lin(m, "cls.predictions.transform.dense", h, h, 0);
    add_ln(m, "cls.predictions.transform.LayerNorm", &m->mlm_ln_g, &m->mlm_ln_b);
    m->mlm_bias = model_add_tensor(m, "cls.predictions.bias", m->cfg.vocab_size, 0, KIND_BIAS);
    m->pooler = model_add_lin(m, "bert.pooler.dense", h, h, 0);
    m->nsp = model_add_lin(m, "cls.seq_relationship", h, 2, 0);
}

static void add_layer(cz_model *m, const table_names *t, int l) {
    int h = m->cfg.hidden, in = m->cfg.intermediate, c1 = t->conv1d;
    layer *ly = &m->layers[l];
    char p[96];
    ly->begin = m->n_params;
    for (int i = 0; i < N_PARTS; i++) {
        const layer_part *q = &t->parts[i];
        snprintf(p, sizeof p, "%s.%d.%s", t->layer, l, q->name);
        switch (q->part) {
        case PART_QKV: /* GPT's fused c_attn, or BERT's three maps stored as one */
            ly->qkv = c1 ? model_add_lin_kind(m, p, h, 3 * h, 1, q->wkind) : add_qkv(m, p, h);
            break;
        case PART_ATTN_OUT:
            ly->attn_out = model_add_lin_kind(m, p, h, h, c1, q->wkind);
            break;
        case PART_LN1:
            add_ln(m, p, &ly->ln1_g, &ly->ln1_b);
            break;
        case PART_FFN_IN:
            ly->ffn_in = model_add_lin_kind(m, p, h, in, c1, q->wkind);
            break;
        case PART_FFN_OUT:
            ly->ffn_out = model_add_lin_kind(m, p, in, h, c1, q->wkind);
            break;
        case PART_LN2:
            add_ln(m, p, &ly->ln2_g, &ly->ln2_b);
            break;
        }
    }
    ly->end = m->n_params;
}

void model_build_table(cz_model *m) {
    const cz_model_config *c = &m->cfg;
    int bert = c->arch == CZ_ARCH_BERT, h = c->hidden;
    m->pre_ln = c->layout == CZ_LAYOUT_PRE_LN;
    const table_names *t = bert ? &bert_names : m->pre_ln ? &gpt2_names : &gpt_names;
    /* The tied word embedding goes first in the buffer but keeps its place
     * in the table, after the layers, so that the initial values stay
     * those of the layout it had before. */
    m->wte = 0;
    m->lm_head = 0;
    m->vrows = cz_model_vocab_rows(c);
    m->n_params = (size_t)m->vrows * (size_t)h;
    m->heads_begin = m->n_params;
    /* model.lm_head = untied (GPT only): the LM head as a matrix of its own,
     * with the word embedding's rows (padding included, so the head's
     * product keeps its round width), named as Hugging Face's untied head */
    if (c->untied_head)
        m->lm_head = model_add_tensor(m, "lm_head.weight", m->vrows, h, KIND_WEIGHT);
    if (c->head != CZ_HEAD_PRETRAIN)
        model_build_task_head(m);
    else if (bert)
        add_bert_heads(m); /* GPT's LM head is the tied embedding, or lm_head */
    if (t->lnf) add_ln(m, t->lnf, &m->lnf_g, &m->lnf_b);
    m->heads_end = m->n_params;
    for (int l = c->layers - 1; l >= 0; l--) add_layer(m, t, l);
    m->emb_begin = m->n_params;
    model_place_tensor(m, t->wte, m->vrows, h, KIND_WEIGHT, m->wte);
    m->wpe = model_add_tensor(m, t->wpe, c->max_positions, h, KIND_WEIGHT);
    if (t->wtt) m->wtt = model_add_tensor(m, t->wtt, c->type_vocab_size, h, KIND_WEIGHT);
    if (t->lne) add_ln(m, t->lne, &m->lne_g, &m->lne_b);
    m->emb_end = m->n_params;
}

/* ---- a table alone: counts and stages without the buffers ---- */

void model_table_free(cz_model *m) {
    if (!m) return;
    cz_free(m->layers);
    cz_free(m->tensor_kind);
    cz_free(m->tensor_key);
    cz_free(m->tensors);
    cz_free(m);
}

cz_model *model_table_only(const cz_model_config *cfg, cz_error *err) {
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
        model_table_free(m);
        return NULL;
    }
    model_build_table(m);
    return m;
}

static size_t numel_at(const cz_model *m, size_t offset) {
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].offset == offset) return m->tensors[i].numel;
    return 0;
}

int cz_model_count_params(const cz_model_config *cfg, cz_model_param_counts *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    if (model_check_create(cfg, 1, 1, 1, err)) return -1;
    cz_model *m = model_table_only(cfg, err);
    if (!m) return -1;
    int bert = cfg->arch == CZ_ARCH_BERT;
    size_t emb = numel_at(m, m->wte) + numel_at(m, m->wpe);
    if (bert) {
        const cz_tensor_info *bias = cz_model_find_tensor(m, "cls.predictions.bias");
        emb += numel_at(m, m->wtt) + (bias ? bias->numel : 0);
    }
    out->total = m->n_params;
    out->non_embedding = m->n_params - emb;
    model_table_free(m);
    return 0;
}

/* ---- the table's public views ---- */

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

size_t cz_model_embeddings_begin(const cz_model *m) {
    return m->emb_begin;
}

/* model_build_table lays tensors out in the order backward finishes them
 * (top of the file), and cz_model_backward reports each range as it
 * finishes: from offset 0 upwards. */
cz_grad_order cz_model_grad_order(const cz_model *m) {
    (void)m;
    return CZ_GRAD_ASCENDING;
}

/* ---- initial values ---- */

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
        float std = (float)model_init_std(m, k);
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
