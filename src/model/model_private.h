/* model: what its sources share (not a public header; no test or benchmark
 * includes it): the struct behind cz_model, its parameter table's building
 * blocks, and each file's entry points.
 *
 * Three meanings of "head", three names: the attention's heads (attn_head_*,
 * attn_per_head in attention.c: one (sequence, head) pair's products), the
 * pre-training heads (model_bert_heads_*, model_gpt_head_*: MLM and NSP,
 * the LM; the "heads" range of the buffer, heads_begin..heads_end) and the
 * fine-tuning task heads (model_task_head_*: classify, span, tag, similar,
 * choice).
 *
 * The files, each calling only the ones above it in this list:
 *   model_config.c    the configuration's rules (cz_model_config_check)
 *                     and the shapes a model is made for
 *   mup.c             the Maximal Update Parametrization's multipliers
 *                     (model.h, cz_parametrization), from the table
 *   blocks.c          the parameter table's entries, the buffers, the one
 *                     product path (bf16 or fp32), linear maps, dropout
 *                     streams
 *   task_heads.c      the fine-tuning heads: parameters, buffers, batch
 *                     checks, forward, backward, FLOPs
 *   tensor_table.c    the tensor tables of the three layouts from their
 *                     name lists, counts, initial values
 *   attention.c       multi-head self-attention, forward and backward
 *   layers.c          the blocks: post-LN (BERT, GPT-1) and pre-LN (GPT-2)
 *   memory.c          creation: every buffer, the precision, the block
 *   pretrain_heads.c  BERT's MLM and NSP heads, GPT's LM head
 *   model.c           the passes: embeddings, forward, backward, FLOPs */
#ifndef CLOZE_MODEL_INTERNAL_H
#define CLOZE_MODEL_INTERNAL_H

#include "cloze/model.h"

#include "cloze/rng.h"

#define MAX_TENSORS 1024
#define MAX_ALLOCS 1024 /* 12 per layer + ~60: room for the 63 layers the tensor table allows */

/* dropout sites: the c of the dropout stream is layer << 8 | site */
enum { SITE_EMBED = 0, SITE_ATTN_PROBS = 1, SITE_ATTN_OUT = 2, SITE_FFN_OUT = 3 };
/* the fine-tuning heads' dropout (task_heads.c): layer index L, site 4 */
enum { SITE_TASK_HEAD = 4 };

/* KIND_RESID_WEIGHT: a weight that writes into the residual stream of a
 * pre-LN decoder (attn.c_proj, mlp.c_proj), initialised with std
 * init_range / sqrt(2L) (GPT-2 Sec. 2.3: "scale the weights of residual
 * layers at initialization by a factor of 1/sqrt(N) where N is the number of
 * residual layers", two per block). */
enum { KIND_WEIGHT, KIND_BIAS, KIND_LN_GAMMA, KIND_LN_BETA, KIND_RESID_WEIGHT };

/* A linear map y = x W^T + b (torch Linear, W [out,in]) or y = x W + b
 * (Hugging Face Conv1D used by GPT, W [in,out]); w and b are float offsets. */
#define NO_BIAS ((size_t)-1) /* lin.b of a map without bias (GPT's score, W_y) */
typedef struct lin {
    size_t w, b;
    int in, out, conv1d;
} lin;

typedef struct layer {
    lin qkv; /* query, key, value as one map with 3H outputs (add_qkv; GPT's c_attn) */
    lin attn_out, ffn_in, ffn_out;
    size_t ln1_g, ln1_b, ln2_g, ln2_b;
    size_t begin, end; /* range in the flat buffer */
    /* activations (max sizes) */
    float *qkv_act; /* [N, 3H] */
    float *probs;   /* [B, A, T, T] softmax output before dropout */
    float *ctx;     /* [N, H] */
    float *r1, *h1; /* [N, H] residual sum before LN1, LN1 output (pre-LN: the
                       residual sum after attention, LN1(x)) */
    float *mean1, *rstd1, *mean2, *rstd2;
    float *u;  /* [N, I] FFN pre-activation */
    float *g;  /* [N, I] GELU output; in bf16 mode (m->act16) its first half
                * holds it in bf16 [N, I], what the FFN's second product
                * and its weight gradient read */
    float *r2; /* [N, H] residual sum before LN2 (pre-LN: LN2(r1), the FFN input) */
} layer;

/* The fine-tuning head (cfg.head >= CZ_HEAD_CLASSIFY; task_heads.c): its
 * linear map, its input after dropout, raw logits, the cross-entropy's rows
 * (probabilities, then dlogits), re-interleaved SPAN dlogits, and d(head
 * input). */
typedef struct task_head {
    lin map; /* classifier, qa_outputs or score (cfg.head) */
    float *drop, *logits, *probs, *dlogits, *dinput;
    double *loss;
    int32_t *label, *argmax;
    float *scale;
    int rows, width; /* rows and classes of the last forward's cross-entropy */
} task_head;

struct cz_model {
    cz_model_config cfg;
    int max_b, max_t, max_p;
    const cz_gemm_ctx *gemm;
    /* the readouts' output multiplier: 1, or 1 / w under µP (mup.c) */
    float out_mult;
    /* products in bf16: the configuration's model.matmul_precision, which
     * the context runs (memory.c checks it); 0 without a context */
    int bf16;
    const struct layer_ops *layer; /* the block, post-LN or pre-LN (layers.c) */
    /* one single-thread copy of gemm per OpenMP thread: the attention
     * products of different (sequence, head) pairs run side by side, each
     * on one thread (cz_gemm_single_thread; the same bits as gemm) */
    cz_gemm_ctx **attn_gemm;
    int n_attn_gemm;
    cz_tensor_info *tensors;
    int n_tensors;
    int *tensor_kind;
    int *tensor_key; /* the tensor's place in the order of creation: keys its initial values */
    size_t n_params;
    float *params, *grads;
    cz_grad_ready_fn hook;
    void *hook_ctx;
    cz_grad_rows_fn rows_hook;
    void *rows_ctx;
    /* the lookup's word-embedding rows (rows hook): row_of[v] is v's slot
     * + 1 while backward builds them (0: absent), row_ids[slot] the id,
     * tok_slot[n] token n's slot, row_vals [slots, H] */
    int32_t *row_of, *row_ids, *tok_slot;
    float *row_vals;

    /* parameter offsets */
    size_t wte, wpe, wtt, lne_g, lne_b; /* embeddings (wtt, lne only BERT) */
    int vrows;                          /* the word embedding's rows (cz_model_vocab_rows) */
    int pre_ln;                         /* cfg.layout == CZ_LAYOUT_PRE_LN */
    size_t lnf_g, lnf_b;                /* pre-LN: the final LayerNorm */
    size_t lm_head; /* GPT's LM head: wte when tied, else lm_head.weight's offset */
    size_t emb_begin, emb_end, heads_begin, heads_end;
    lin mlm_dense, pooler, nsp;
    task_head task; /* the fine-tuning head (task_heads.c) */
    size_t mlm_ln_g, mlm_ln_b, mlm_bias;
    layer *layers;

    /* activations */
    float **x;     /* [L+1] layer inputs [N, H]; x[L] = encoder output */
    float *x_last; /* pre-LN: the last layer's output [N, H]; x[L] = LN_f(x_last) */
    float *lnf_mean, *lnf_rstd;
    float *emb_sum; /* [N, H] token + position (+ segment) */
    float *emb_ln;  /* [N, H] BERT: LayerNorm of emb_sum before dropout */
    float *emb_mean, *emb_rstd;
    float *key_bias;            /* [B*T] */
    float *probs_drop, *dprobs; /* [B, A, T, T], shared by the layers */
    float *tmp_h;               /* [N, H] */
    /* BERT's pre-training heads (MLM, NSP) */
    float *mlm_h, *mlm_u, *mlm_g, *mlm_z, *mlm_mean, *mlm_rstd; /* [BP, H] / [BP] */
    float *cls, *pooled, *nsp_logits;                           /* [B, H], [B, 2] */
    /* loss rows: BERT MLM (BP rows) or GPT LM (N rows); NSP (B rows) */
    float *logits; /* [rows, V] */
    double *row_loss, *nsp_loss;
    int32_t *row_label, *row_argmax, *nsp_argmax;
    float *row_scale, *nsp_scale;
    /* gradient scratch */
    float *dx, *dy, *dr, *df, *dh1, *dctx, *di, *dqkv, *dmlm, *dmlm2, *dcls;

    /* this pass writes product inputs in bf16 where only products read
     * them (the GELU output, the MLM dlogits): the products are in bf16,
     * and round them anyway, so the bits are the same. Set at each forward
     * from bf16, unless cz_model_set_bf16_inputs turned it off. */
    int act16, no_bf16_inputs;

    int profiling;
    cz_model_profile prof;

    /* recomputation: which layer's activations the shared scratch holds
     * (-1: none); the last layer's survive the forward, so its backward needs
     * no recomputation */
    int scratch_layer;

    /* memory plan: model_take() adds each buffer's bytes to mem_plan[mem_slot] */
    size_t mem_plan[4];
    int mem_slot;

    void *allocs[MAX_ALLOCS];
    int n_allocs;
};

enum { MEM_PARAMS, MEM_LAYER_INPUTS, MEM_LAYER_ACTS, MEM_OTHER };

/* count elements for ptr from model_take(), or -1 from the function that asks
 * (cz_model_create then frees what was taken) */
#define TAKE(ptr, count)                                                                           \
    do {                                                                                           \
        if (!((ptr) = model_take(m, (size_t)(count) * sizeof *(ptr), err))) return -1;             \
    } while (0)

/* Runs stmt and, when profiling, adds its wall time to m->prof.slot. The
 * kernels are synchronous (OpenMP regions end with a barrier), so wall time
 * around a call is the time of that phase. */
#define PHASE(slot, stmt)                                                                          \
    do {                                                                                           \
        double t0_ = m->profiling ? cz_now() : 0.0;                                                \
        stmt;                                                                                      \
        if (m->profiling) m->prof.slot += cz_now() - t0_;                                          \
    } while (0)

#define PARAM(off) (m->params + (off))
#define GRAD(off) (m->grads + (off))

/* ---- model_config.c ---- */

/* cz_model_create's checks of its configuration and shapes; -1 with err */
int model_check_create(const cz_model_config *c, int max_b, int max_t, int max_p, cz_error *err);

/* ---- mup.c ---- */
/* the std of tensor k's initial normal (before the 2-std truncation) */
double model_init_std(const cz_model *m, int k);
/* the readouts' output multiplier of a configuration: 1 / w (1 standard) */
float cz_model_output_mult_of(const cz_model_config *c);

/* ---- blocks.c ---- */

/* A tensor at `offset` (SIZE_MAX: the next free offset), its place in the
 * table; returns its offset. */
size_t model_place_tensor(cz_model *m, const char *name, int s0, int s1, int kind, size_t offset);
size_t model_add_tensor(cz_model *m, const char *name, int s0, int s1, int kind);
/* prefix.weight (of kind wkind) and prefix.bias of a linear map */
lin model_add_lin_kind(cz_model *m, const char *prefix, int in, int out, int conv1d, int wkind);
lin model_add_lin(cz_model *m, const char *prefix, int in, int out, int conv1d);
/* bytes from the heap, counted in m->mem_plan[m->mem_slot] and freed with m */
void *model_take(cz_model *m, size_t bytes, cz_error *err);
/* C = alpha op(A) op(B) + beta C on context g: the one path of every
 * product, operands fp32 or bf16 (cz_mat) */
void model_product(const cz_gemm_ctx *g, int ta, int tb, int mm, int n, int k, float alpha,
                   cz_mat a, cz_mat b, int b_weight, float beta, float *c, int ldc);
/* the same on m's GEMM context, profiled as gemm */
void model_gemm(const cz_model *m, int ta, int tb, int mm, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void model_gemm_weight(const cz_model *m, int ta, int tb, int mm, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc);
/* the same with operands of either kind (cz_mat; bf16 ones from the
 * kernels that write them, in bf16 mode) */
void model_gemm_mat(const cz_model *m, int ta, int tb, int mm, int n, int k, float alpha, cz_mat a,
                    cz_mat b, int b_weight, float beta, float *c, int ldc);
void model_lin_map(cz_model *m, const lin *l, const float *x, int ldx, int n, float *y, int ldy);
void model_lin_forward(cz_model *m, const lin *l, const float *x, int ldx, int n, float *y,
                       int ldy);
void model_lin_backward(cz_model *m, const lin *l, const float *dy, int ldy, const float *x,
                        int ldx, int n, float *dx, int lddx, float dx_beta);
/* model_lin_forward and model_lin_backward with the input x as a cz_mat */
void model_lin_forward_mat(cz_model *m, const lin *l, cz_mat x, int n, float *y, int ldy);
void model_lin_backward_mat(cz_model *m, const lin *l, const float *dy, int ldy, cz_mat x, int n,
                            float *dx, int lddx, float dx_beta);
cz_rng_stream model_dropout_stream(const cz_batch *b, int seq, int layer_idx, int site);
void model_dropout_groups(const cz_batch *b, float p, int layer_idx, int site, float *y,
                          const float *x, size_t per, int n, int every);
void model_dropout_rows(const cz_batch *b, float p, int layer_idx, int site, float *y,
                        const float *x, int cols);

/* ---- task_heads.c ---- */

/* cfg.head's parameters (none for CZ_HEAD_NONE), after the pre-training
 * range's other tensors */
void model_build_task_head(cz_model *m);
/* its buffers (none for the pre-training heads); -1 with err set */
int model_alloc_task_head(cz_model *m, cz_error *err);
/* the batch's task arrays (labels, spans, token labels, cls_index) */
int model_check_task_batch(const cz_model *m, const cz_batch *b, cz_error *err);
/* the head's loss into out (task_loss, task_count, task_correct, loss with
 * lm_weight times out->lm_loss, which the caller's LM head has set); with
 * no labels, only the logits */
void model_task_head_forward(cz_model *m, const cz_batch *b, cz_losses *out);
/* d(loss)/d(last layer) into m->dy: SPAN and TAG write it, the others add
 * to what the caller set there (the LM head's gradient, or zeros) */
void model_task_head_backward(cz_model *m, const cz_batch *b, float grad_scale);
/* forward FLOPs of one sequence through cfg.head's maps; lm: those of the
 * auxiliary LM head, counted where the head has one */
double model_task_head_flops(const cz_model_config *c, int seq, double lm);

/* ---- tensor_table.c ---- */

/* m's tensor table for its configuration (m->cfg; layers, tensors and
 * their kinds and keys allocated), and the offsets in m */
void model_build_table(cz_model *m);
/* a model holding only cfg's table (counts, stages); -1 with err */
cz_model *model_table_only(const cz_model_config *cfg, cz_error *err);
void model_table_free(cz_model *m);

/* ---- attention.c ---- */

/* layer l's attention: qkv_act [N, 3H] -> ctx [N, H], keeping probs */
void model_attention_forward(cz_model *m, layer *ly, int l, const cz_batch *b);
/* m->dctx [N, H] -> m->dqkv [N, 3H] */
void model_attention_backward(cz_model *m, layer *ly, int l, const cz_batch *b);

/* ---- layers.c ---- */

/* A block: forward x[l] -> out, keeping its activations; backward d(its
 * output) in m->dy -> d(its input) in m->dx, adding its parameters'
 * gradients. */
typedef struct layer_ops {
    void (*forward)(cz_model *m, int l, const cz_batch *b, float *out);
    void (*backward)(cz_model *m, int l, const cz_batch *b);
} layer_ops;
extern const layer_ops model_post_ln_layer, model_pre_ln_layer;

/* ---- pretrain_heads.c ---- */

/* the losses of x[L] into out; backward leaves d(x[L]) in m->dy */
void model_bert_heads_forward(cz_model *m, const cz_batch *b, cz_losses *out);
void model_bert_heads_backward(cz_model *m, const cz_batch *b, float grad_scale);
void model_gpt_head_forward(cz_model *m, const cz_batch *b, cz_losses *out);
void model_gpt_head_backward(cz_model *m, const cz_batch *b, float grad_scale);

#endif
