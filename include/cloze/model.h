/* model: BERT (post-LN encoder, MLM + NSP heads), GPT-1 (post-LN causal
 * decoder, tied LM head) and GPT-2's layout of the decoder (pre-LN, a final
 * LayerNorm), forward and backward in fp32.
 *
 * The model knows no MPI, no files and no config parser: it takes plain
 * structs. All parameters live in ONE contiguous buffer (and gradients in a
 * second buffer of the same layout), so that the optimizer, the all-reduce and
 * checkpoints handle flat float arrays; named views describe the tensors.
 * Memory for activations is planned once for (max_batch, max_seq, max_pred):
 * nothing is allocated inside a step. */
#ifndef CLOZE_MODEL_H
#define CLOZE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/batch.h"
#include "cloze/core.h"
#include "cloze/grads.h"
#include "cloze/kernels.h"

/* What sits on top of the encoder (cz_model_config.head). The fine-tuning
 * heads replace the pre-training ones; their tensors carry the names of the
 * Hugging Face task models, so an export loads there unchanged.
 *   PRETRAIN  BERT: MLM + NSP; GPT: LM tied to the token embedding.
 *   NONE      the encoder alone: hidden states (features), loss 0.
 *   CLASSIFY  BERT (paper Sec. 4.1, BertForSequenceClassification): the
 *             pooler (dense + tanh) of [CLS], dropout, "classifier" [C, H].
 *             GPT (GPT-1 Sec. 3.2, eq. 3-5): the last layer's state at the
 *             extract token (cz_batch.cls_index), dropout, "score" [C, H]
 *             without bias (W_y), plus lm_weight x the LM loss (eq. 5).
 *   SPAN      BERT (Sec. 4.2, BertForQuestionAnswering): "qa_outputs"
 *             [2, H] gives every token a start and an end logit; the loss is
 *             the mean of the start and end cross-entropies over positions.
 *   TAG       BERT (Sec. 4.3, BertForTokenClassification): dropout,
 *             "classifier" [C, H] per token; mean cross-entropy over the
 *             tokens whose label is >= 0 (the first WordPiece of a word).
 *   SIMILAR   GPT (GPT-1 Sec. 3.3, "Textual similarity"): an example is two
 *             consecutive sequences (text1 $ text2 and text2 $ text1); their
 *             extract-token states are added element-wise, then dropout and
 *             "score" [C, H] as CLASSIFY, plus lm_weight x the LM loss over
 *             both sequences. The batch holds B = 2 x examples sequences;
 *             labels[2e] is example e's label.
 *   CHOICE    multiple choice, num_labels = K candidates per example, K
 *             consecutive sequences each. GPT (GPT-1 Sec. 3.3, "Question
 *             Answering and Commonsense Reasoning"): each candidate's
 *             extract-token state, dropout, "score" [1, H] (no bias) gives
 *             one score; softmax over the K scores, cross-entropy, plus
 *             lm_weight x the LM loss. BERT (Sec. 4.4, SWAG;
 *             BertForMultipleChoice): the pooled [CLS] of each candidate,
 *             dropout, "classifier" [1, H] + bias. labels[K e] is example
 *             e's answer in [0, K). */
typedef enum {
    CZ_HEAD_PRETRAIN = 0,
    CZ_HEAD_NONE = 1,
    CZ_HEAD_CLASSIFY = 2,
    CZ_HEAD_SPAN = 3,
    CZ_HEAD_TAG = 4,
    CZ_HEAD_SIMILAR = 5,
    CZ_HEAD_CHOICE = 6
} cz_head;

/* model.layout: where the LayerNorms sit in a block; the value order is the
 * word order of CZ_LAYOUT_WORDS (the config table reads the word as the
 * enum's index).
 *   POST_LN  BERT and GPT-1 (Vaswani et al. 2017): h = LN(x + Drop(Attn(x))),
 *            y = LN(h + Drop(MLP(h))).
 *   PRE_LN   GPT-2 (Radford et al. 2019, Sec. 2.3), GPT only: "layer
 *            normalization was moved to the input of each sub-block" and
 *            "an additional layer normalization was added after the final
 *            self-attention block": x = x + Drop(Attn(LN1(x))),
 *            x = x + Drop(MLP(LN2(x))), the heads read LN_f(x_L). The
 *            residual projections (attn.c_proj, mlp.c_proj) start with std
 *            init_range / sqrt(2L), "1/sqrt(N) where N is the number of
 *            residual layers". Tensors carry GPT-2's names (transformer.wte,
 *            transformer.h.N.ln_1, transformer.ln_f, ...). */
typedef enum { CZ_LAYOUT_POST_LN = 0, CZ_LAYOUT_PRE_LN = 1 } cz_layout;
#define CZ_LAYOUT_WORDS "post_ln|pre_ln"

typedef struct cz_model_config {
    cz_arch arch;
    int vocab_size;       /* real tokens: ids the data may hold and the softmax runs over */
    int hidden;           /* H */
    int layers;           /* L */
    int heads;            /* A; hidden % heads == 0 */
    int intermediate;     /* FFN inner size, 4H by default */
    int max_positions;    /* learned absolute position table size */
    int type_vocab_size;  /* BERT segments: 2; GPT: 0 */
    float layer_norm_eps; /* BERT 1e-12, GPT-1 1e-5 */
    int gelu_tanh;        /* 0: exact erf GELU (BERT), 1: tanh approximation (GPT-1) */
    float hidden_dropout; /* embeddings, attention output, FFN output: 0.1 */
    float attn_dropout;   /* attention probabilities: 0.1 */
    float init_range;     /* truncated normal std: 0.02 */
    /* Activation recomputation (gradient checkpointing, Chen et al. 2016,
     * "Training Deep Nets with Sublinear Memory Cost"): CZ_RECOMPUTE_LAYERS
     * keeps only each layer's input from the forward pass and runs the
     * layer's forward again just before its backward, into one layer's worth
     * of scratch. Dropout masks are pure functions of (seed, step, sample,
     * layer, site), so the recomputed activations and hence the gradients are
     * bitwise those of CZ_RECOMPUTE_NONE; the cost is one extra layer forward
     * per layer (about +1/3 of a step's matrix FLOPs). */
    int recompute;   /* cz_recompute */
    int matmul_bf16; /* model.matmul_precision: 0 fp32, 1 bf16 inputs (cz_model_gemm_setup) */
    /* fine-tuning (cz_head above); all zero = pre-training */
    int head;        /* cz_head */
    int num_labels;  /* C for CLASSIFY, SIMILAR and TAG; K candidates for CHOICE */
    float lm_weight; /* GPT CLASSIFY, SIMILAR, CHOICE: lambda of the auxiliary LM loss (GPT-1: 0.5);
                        0 = none */
    /* added last, so that positional initialisers of the fields above stay valid */
    /* GPT: the word embedding has vocab_size rounded up to a multiple of
     * vocab_pad_to rows (0 or 1: no padding), so that the LM head's product
     * has a round output width (GPT-2's 50257 -> 50304 with 64). The
     * padding rows start at 0, never reach the softmax or the loss (the
     * logits of the padding columns are dropped before it), so their
     * gradient is exactly 0. cz_model_vocab_rows gives the row count. */
    int vocab_pad_to;
    int layout; /* cz_layout */
    /* model.lm_head: 0 = tied (the LM head is the word embedding, GPT-1
     * Sec. 3.1's W_e^T; BERT's MLM decoder), 1 = untied, GPT only: an own
     * [vocab rows, H] matrix "lm_head.weight" (Hugging Face's
     * tie_word_embeddings = false), in the heads' range of the buffer, its
     * padding rows 0 as the word embedding's. */
    int untied_head;
    /* model.parametrization (cz_parametrization) and model.mup_base_width:
     * the Maximal Update Parametrization below */
    int parametrization;
    int mup_base_width;
    float mup_attn_mult; /* model.mup_attn_mult: sqrt(d0) below; 0 = auto */
} cz_model_config;

/* model.parametrization: how initialisation, learning rates and two
 * forward multipliers depend on the width H.
 *   STANDARD  as the papers (BERT, GPT-1, GPT-2): every weight at std
 *             init_range, one learning rate, logits = h W_e^T, attention
 *             logits q.k / sqrt(d_head).
 *   MUP       the Maximal Update Parametrization (Yang et al. 2022,
 *             "Tensor Programs V", Table 8 for Adam), as Microsoft's `mup`
 *             package (1.0) applies it with base shapes at hidden =
 *             mup_base_width (intermediate and heads scaled in
 *             proportion), width multiplier w = hidden / mup_base_width:
 *             - matrix-like tensors (both dimensions grow with width: every
 *               layer's q/k/v, attention output and FFN maps, BERT's MLM
 *               transform and pooler): init std init_range / sqrt(w)
 *               (mup.init: variance proportional to 1 / fan_in), learning
 *               rate lr / w and weight decay wd x w (mup.MuAdamW; the decay
 *               per step lr x wd stays that of the base width);
 *             - vector-like tensors (embeddings, biases, LayerNorms, the
 *               NSP classifier, BERT's MLM bias): std init_range, lr, wd;
 *             - the readouts (GPT's tied LM head, BERT's tied MLM decoder
 *               and its NSP classifier) are mup.MuReadout /
 *               MuSharedReadout with output_mult 1: logits = (h / w) W^T
 *               + b (the bias outside the multiplier);
 *             - attention logits q.k x a / d_head (mup's rule: 1/d_head,
 *               not 1/sqrt(d_head)), a = model.mup_attn_mult, by default
 *               (0) sqrt(mup_base_width / heads): the standard
 *               1/sqrt(d_head) at the base width when the head count is
 *               fixed across widths. When heads grow with the width at a
 *               fixed d_head, give a = sqrt(d_head) (mup's examples: 8,
 *               for d_head 64): d_head does not change, and neither does
 *               the scale.
 *             At hidden == mup_base_width every multiplier is 1 and the
 *             model is bitwise the standard one. Pre-training and feature
 *             heads only; AdamW only (optim.h). */
typedef enum { CZ_PARAM_STANDARD = 0, CZ_PARAM_MUP = 1 } cz_parametrization;
#define CZ_PARAMETRIZATION_WORDS "standard|mup"

typedef enum { CZ_RECOMPUTE_NONE = 0, CZ_RECOMPUTE_LAYERS = 1 } cz_recompute;

/* Losses and counts of one forward pass. The loss that backward
 * differentiates is `loss`:
 *   BERT: mean CE over real masked slots (sum w*CE / sum w) + mean NSP CE over B
 *   GPT:  mean next-token CE over positions with target >= 0 */
typedef struct cz_losses {
    double loss;
    double mlm_loss, nsp_loss, lm_loss;
    long mlm_correct, mlm_count; /* argmax == label over real slots */
    long nsp_correct, nsp_count;
    long lm_count;
    double task_loss;              /* fine-tuning heads: the head's cross-entropy */
    long task_correct, task_count; /* argmax == label (SPAN: start and end both right) */
} cz_losses;

/* A named tensor inside the flat parameter buffer. Names are Hugging Face's
 * (bert.encoder.layer.0.attention.self.query.weight, transformer.h.0.attn...),
 * shapes are as PyTorch stores them (Linear weight = [out, in]). */
typedef struct cz_tensor_info {
    char name[96];
    size_t offset; /* in floats */
    size_t numel;
    int ndim;
    int shape[2];
    int no_decay; /* 1 for LayerNorm parameters and biases */
} cz_tensor_info;

typedef struct cz_model cz_model;

/* The rules of a model configuration, in one place: cz_model_create checks
 * its struct with them, config checks a file with them (and names the line
 * that set *key). 0, or -1 with *key (may be NULL) the field to change, as
 * its key in the model section ("heads"), and err saying why in
 * configuration terms ("model.hidden = 100 is not a multiple of
 * model.heads = 3"). */
int cz_model_config_check(const cz_model_config *c, const char **key, cz_error *err);

/* Whether the model can run sequences of `seq` tokens with `max_pred`
 * prediction slots: seq in [1, max_positions]; BERT's pre-training heads
 * also max_pred in [1, seq]. Returns the bound broken, so that each caller
 * words it with its own names (data.seq, data.phase2_max_pred, max_seq). */
enum { CZ_SHAPE_OK = 0, CZ_SHAPE_SEQ = 1, CZ_SHAPE_PRED = 2 };
int cz_model_shape_rule(const cz_model_config *c, int seq, int max_pred);
/* Rows of the word embedding: vocab_size rounded up to vocab_pad_to. */
int cz_model_vocab_rows(const cz_model_config *c);

/* The GEMM context a model of precision matmul_bf16 (cz_model_config's,
 * model.matmul_precision) runs on: cz_gemm_setup(choice, threads), in bf16
 * mode when matmul_bf16. NULL with err on failure. Training, planning and
 * fine-tuning make theirs with it. */
cz_gemm_ctx *cz_model_gemm_setup(cz_gemm_choice choice, int threads, int matmul_bf16,
                                 cz_error *err);

/* A model for batches of up to max_batch x max_seq (max_pred prediction
 * slots: BERT's pre-training heads). Its products run on gemm, whose mode
 * must be its configuration's precision (matmul_bf16; cz_model_gemm_setup
 * makes such a context), or without a context (NULL) on the fp32
 * reference loops. */
int cz_model_create(cz_model **out, const cz_model_config *cfg, int max_batch, int max_seq,
                    int max_pred, const cz_gemm_ctx *gemm, cz_error *err);
void cz_model_free(cz_model *m);

const cz_model_config *cz_model_get_config(const cz_model *m);
size_t cz_model_num_params(const cz_model *m);
float *cz_model_params(cz_model *m);
float *cz_model_grads(cz_model *m);
int cz_model_num_tensors(const cz_model *m);
const cz_tensor_info *cz_model_tensor(const cz_model *m, int i);
const cz_tensor_info *cz_model_find_tensor(const cz_model *m, const char *name);

/* BERT init: truncated normal (std init_range, cut at 2 std), zero biases,
 * LayerNorm gamma = 1, beta = 0; keyed by (seed, tensor index). Pre-LN:
 * the residual projections at std init_range / sqrt(2L) (GPT-2 Sec. 2.3);
 * the word embedding's padding rows (vocab_pad_to) 0. */
void cz_model_init_weights(cz_model *m, uint64_t seed);

/* µP (cz_parametrization) of tensor i of m's table: whether it is
 * matrix-like, the std of its initial normal before the 2-std truncation,
 * and the multipliers of the learning rate and the weight decay (all 1 and
 * std init_range, or init_range / sqrt(2L) for GPT-2's residual
 * projections, under STANDARD). */
typedef struct cz_tensor_mup {
    int matrix_like;
    double init_std;
    double lr_mult, wd_mult;
} cz_tensor_mup;
void cz_model_tensor_mup(const cz_model *m, int i, cz_tensor_mup *out);
/* w = hidden / mup_base_width under MUP, 1 under STANDARD */
double cz_model_width_mult(const cz_model_config *c);
/* The readouts' output multiplier (1 / w) and the attention logits' scale */
float cz_model_output_mult(const cz_model *m);
float cz_model_attn_scale(const cz_model_config *c);
/* Overrides the readouts' output multiplier: the coordinate check's planted
 * fault (cloze-sweep coordcheck, CLOZE_COORDCHECK_FAULT), nothing else. */
void cz_model_set_output_mult(cz_model *m, float mult);

/* µP's coordinate check (Yang et al. 2022, Sec. D.1; mup's coord_check):
 * after a forward of batch b (dropout off, recompute none), the mean
 * absolute value of out[0] the embeddings' output (the first layer's
 * input), out[1 + 2l] layer l's attention output and out[2 + 2l] its FFN
 * output (what each adds to the residual stream: post-LN the sum before
 * its LayerNorm minus the sub-layer's input), out[2L + 1] the logits over
 * the rows with a target (GPT). Returns the count (2L + 2), -1 when max is
 * too small, the model recomputes or is not GPT's pre-training model. */
int cz_model_coord_stats(const cz_model *m, const cz_batch *b, double *out, int max);

/* The memory plan made by cz_model_create, in bytes. */
typedef struct cz_model_memory {
    size_t params;       /* parameters + gradients */
    size_t layer_inputs; /* x[0..L]: each layer's input and the encoder output */
    size_t layer_acts;   /* what backward needs inside the layers: L sets, or one
                            set of scratch with recomputation */
    size_t other;        /* embeddings, heads and logits, gradient scratch */
    size_t activations;  /* layer_inputs + layer_acts + other */
} cz_model_memory;

void cz_model_get_memory(const cz_model *m, cz_model_memory *out);

/* Backward calls fn(ctx, offset, count) each time a contiguous range of the
 * gradient buffer is final (grads.h), in the order it produces them: the
 * tied word embedding with the heads (pre-LN: and the final LayerNorm),
 * last layer ... first layer, the other embeddings. The flat layout puts
 * them in that order, so ranges become final from offset 0 upwards:
 * cz_model_grad_order says so, and the gradient sync reduces buckets in
 * that order while backward continues. fn NULL: no calls.
 * The word embedding is final with the heads only when a rows hook takes
 * the embedding lookup's rows (cz_model_set_grad_rows_hook: called once at
 * the end of backward, before the last range is reported; the buffer then
 * lacks those rows' lookup part). Without one, the lookup adds to the
 * buffer as always and the word embedding's range is reported last, out of
 * order. */
void cz_model_set_grad_hook(cz_model *m, cz_grad_ready_fn fn, void *ctx);
void cz_model_set_grad_rows_hook(cz_model *m, cz_grad_rows_fn fn, void *ctx);
/* Where the embeddings other than the word embedding begin in the flat
 * layout (positions, token types, BERT's embedding LayerNorm): the last
 * range backward finishes, after the last layer's. */
size_t cz_model_embeddings_begin(const cz_model *m);
cz_grad_order cz_model_grad_order(const cz_model *m);

/* Forward pass; keeps the activations that backward needs. */
int cz_model_forward(cz_model *m, const cz_batch *b, cz_losses *out, cz_error *err);
/* Backward of the last forward: ADDS grad_scale * d(loss)/d(params) to the
 * gradient buffer (so micro-batches accumulate). */
void cz_model_backward(cz_model *m, const cz_batch *b, float grad_scale);
void cz_model_zero_grads(cz_model *m);

/* After a forward pass: the head's raw logits (before softmax), row-major:
 *   CLASSIFY [B, C]; SPAN [B*T, 2] (start, end of each token); TAG [B*T, C];
 *   SIMILAR [B/2, C] (one row per pair of sequences); CHOICE [B/K, K] (row
 *   e: the scores of example e's K candidates);
 * NULL for PRETRAIN and NONE. Valid until the next forward. */
const float *cz_model_head_logits(const cz_model *m);
/* After a forward pass: hidden states [B*T, H] of layer l in [0, L]; 0 is
 * the embeddings' output, l the output of layer l (Hugging Face's
 * hidden_states[l]). NULL when l is out of range. */
const float *cz_model_hidden_states(const cz_model *m, int l);

/* Forward FLOPs of one sequence of T tokens with P prediction slots (matrix
 * products only, 2 FLOPs per multiply-add), the one home of the FLOPs formula
 * used for MFU: train step = 3x forward. */
double cz_model_forward_flops(const cz_model_config *cfg, int seq, int max_pred);

/* Backward's stages, in the order it finishes them (heads, layer L-1 ...
 * layer 0, embeddings), as the planner and metrics.jsonl's predictions
 * need them to know when each gradient bucket is final: after stage i the
 * buffer's floats [0, end) are final (cz_model_grad_order: ascending; with
 * a rows hook, so the word embedding is final with the heads), and
 * the stage's backward took `flops` for one sequence of seq tokens and
 * max_pred prediction slots. Without allocating the model. Returns the
 * number of stages (layers + 2; max must allow it), -1 on error. */
typedef struct cz_grad_stage {
    size_t end;
    double flops;
} cz_grad_stage;
int cz_model_grad_stages(const cz_model_config *cfg, int seq, int max_pred, cz_grad_stage *out,
                         int max, cz_error *err);

/* Parameter counts of the model cfg describes, from the same tensor table
 * as cz_model_create but without allocating parameters or activations (a
 * scaling-study planner counts BERT-large on a login node). non_embedding is
 * the N of scaling laws (Kaplan et al. 2020, Sec. 2.1: all parameters but
 * the vocabulary and position embeddings): total minus the token, position
 * and segment tables and BERT's vocabulary-sized MLM output bias. */
typedef struct cz_model_param_counts {
    size_t total, non_embedding;
} cz_model_param_counts;
int cz_model_count_params(const cz_model_config *cfg, cz_model_param_counts *out, cz_error *err);

/* Per-phase wall-clock seconds of forward + backward, accumulated while
 * profiling is on. Cheap when off (one branch per kernel call). Phases:
 *   gemm        every matrix product (linear maps, Q K^T, P V, heads)
 *   attention   attention softmax, its dropout, mask and backward (not GEMM)
 *   elementwise bias, GELU, LayerNorm, residual adds, hidden dropout
 *   embeddings  token/position/segment lookup and its scatter-add
 *   loss        heads outside GEMM: gathers, cross-entropy, pooler tanh
 * total is the wall time inside cz_model_forward and cz_model_backward;
 * total minus the phases is bookkeeping (the model's copies and loops).
 * recompute is the wall time of the layer forwards that backward runs again
 * (cfg.recompute); their kernels also count in the phases above. */
typedef struct cz_model_profile {
    double gemm, attention, elementwise, embeddings, loss;
    double total;
    double recompute;
    long forwards, backwards;
} cz_model_profile;

/* In bf16 (matmul_bf16) the kernels whose output only products
 * read write it in bf16 (the GELU output, the MLM dlogits), and those
 * products read it as it is: the same bits, fewer bytes. On by default;
 * off (0) keeps them fp32, for comparison (test_model_bf16, benchmarks). */
void cz_model_set_bf16_inputs(cz_model *m, int on);

/* on = 1 starts profiling from zero; on = 0 stops (figures are kept). */
void cz_model_set_profiling(cz_model *m, int on);
void cz_model_get_profile(const cz_model *m, cz_model_profile *out);

#endif
