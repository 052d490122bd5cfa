/* optim: AdamW and LAMB on flat float buffers, learning-rate schedules,
 * gradient-norm clipping, and the optimizer placement across ranks
 * (coordinator / sharded / replicated) behind one call per step.
 *
 * Names stay out of comm: the weight-decay rule is turned into a list of
 * (offset, numel, no_decay) ranges here, once, from the model's tensors. */
#ifndef CLOZE_OPTIM_H
#define CLOZE_OPTIM_H

#include "cloze/comm.h"
#include "cloze/core.h"
#include "cloze/model.h"

/* Enums of the word-valued keys: the value order is the word order of the
 * *_WORDS list beside each (the config table stores a word as its index). */
typedef enum { CZ_OPT_ADAMW = 0, CZ_OPT_LAMB = 1 } cz_optim_kind; /* optim.name */
#define CZ_OPTIM_KIND_WORDS "adamw|lamb"
typedef enum {
    CZ_SCHEDULE_LINEAR = 0,
    CZ_SCHEDULE_COSINE = 1,
    CZ_SCHEDULE_CONSTANT = 2
} cz_schedule; /* optim.schedule */
#define CZ_SCHEDULE_WORDS "linear|cosine|constant"
/* dist.placement; what each means is described with cz_optimizer_step */
typedef enum {
    CZ_PLACE_COORDINATOR = 0,
    CZ_PLACE_SHARDED = 1,
    CZ_PLACE_REPLICATED = 2
} cz_placement;
#define CZ_PLACEMENT_WORDS "coordinator|sharded|replicated"

#define CZ_MAX_PATTERNS 16

/* The optim section of the configuration, and dist.placement (keys in
 * docs/config.md). */
typedef struct cz_optim_config {
    cz_optim_kind kind; /* optim.name */
    double lr;          /* peak learning rate */
    double beta1, beta2, eps;
    double weight_decay; /* decoupled (Loshchilov & Hutter) */
    int bias_correction; /* original BERT AdamWeightDecayOptimizer: 0 */
    int n_no_decay;
    char no_decay[CZ_MAX_PATTERNS][64]; /* substrings of tensor names excluded from decay */
    double clip_norm;                   /* global gradient-norm clipping; 0 = off */
    cz_schedule schedule;
    long warmup_steps; /* used when warmup_fraction == 0 */
    double warmup_fraction;
    double min_lr_ratio;    /* floor of cosine/linear decay, fraction of lr */
    cz_placement placement; /* dist.placement */
} cz_optim_config;

/* One tensor of the flat buffer: LAMB's trust ratio is per range, weight
 * decay is skipped where no_decay. Ranges must be sorted by offset, disjoint,
 * and cover [0, n). */
typedef struct cz_param_range {
    size_t offset, numel;
    int no_decay;
} cz_param_range;

/* 1 when `name` contains one of cfg->no_decay patterns (plain substring:
 * "LayerNorm" matches ...attention.output.LayerNorm.weight; "bias" matches
 * every bias). */
int cz_optim_name_no_decay(const cz_optim_config *cfg, const char *name);
/* Fills ranges[0..n) from the model's tensor table (sorted by offset). */
int cz_optim_ranges_from_tensors(const cz_tensor_info *t, int n, const cz_optim_config *cfg,
                                 cz_param_range *ranges, cz_error *err);

/* ---- schedules ----
 * step counts from 0 (the first update uses step 0). warmup = warmup_steps,
 * or warmup_fraction * total_steps when warmup_fraction > 0.
 *   warmup:   lr * (step + 1) / warmup          for step < warmup
 *   linear:   lr * max(min_lr_ratio, (total - step) / (total - warmup))   (BERT)
 *   cosine:   lr * (min + (1 - min) * 0.5 * (1 + cos(pi * progress)))     (GPT)
 *   constant: lr
 * (warmup applies to every schedule) with progress = (step - warmup) / (total - warmup) in [0, 1].
 */
long cz_lr_warmup_steps(const cz_optim_config *cfg, long total_steps);
double cz_lr_at(const cz_optim_config *cfg, long step, long total_steps);

/* ---- the update rule on one slice ---- */

/* Per-element AdamW (Loshchilov & Hutter 2019, Alg. 2; BERT's
 * AdamWeightDecayOptimizer when bias_correction = 0), all in float:
 *   g = grad * gscale
 *   m = b1 m + (1-b1) g ;  v = b2 v + (1-b2) g^2
 *   u = (m / c1) / (sqrt(v / c2) + eps)   (c1 = 1-b1^t, c2 = 1-b2^t, or 1)
 *   u += wd * w         unless no_decay   (decoupled: not added to g)
 *   w -= lr * u                           (LAMB: lr * trust(tensor) * u) */
typedef struct cz_adam_coef {
    float lr, beta1, beta2, eps, wd;
    float c1, c2; /* bias corrections, 1 when off */
    float gscale; /* micro-batch averaging * clipping */
} cz_adam_coef;

/* Fast paths and references: each call below runs AVX-512 code when the CPU
 * has AVX-512F (CLOZE_KERNELS=scalar forces the scalar code); `*_ref` is
 * the scalar definition. Both give the same bits on every element: the
 * same IEEE operations in the same order, no FMA contraction
 * (src/optim/optim_simd.h). The calls here are single-threaded; the
 * optimizer step runs the same blocks under OpenMP.
 *
 * Sums of squares (global norm, LAMB norms) have one fixed order, whatever
 * the path or thread count: the slice is cut into blocks of CZ_OPTIM_BLOCK
 * elements from its start; in a block, element i goes to double lane i % 16
 * (squares of floats are exact in double); a block's sum adds lanes 0..15 in
 * order; the slice's sum adds block sums in order. */
#define CZ_OPTIM_BLOCK ((size_t)16384)

/* AdamW on [lo, hi) of the buffers; m, v point at the moments of element lo.
 * Ranges give no_decay per element. */
void cz_adamw_update(const cz_adam_coef *k, const cz_param_range *ranges, int n_ranges,
                     float *params, const float *grads, float *m, float *v, size_t lo, size_t hi);
void cz_adamw_update_ref(const cz_adam_coef *k, const cz_param_range *ranges, int n_ranges,
                         float *params, const float *grads, float *m, float *v, size_t lo,
                         size_t hi);

/* sum of (double)y^2 over y = x[i] * pre (float product), in the order above */
double cz_optim_sumsq(const float *x, float pre, size_t n);
double cz_optim_sumsq_ref(const float *x, float pre, size_t n);

/* LAMB (You et al. 2019, Alg. 2), two passes per tensor:
 * direction: u = AdamW's u (moments updated, weight decay added), stored in
 *            u[0..count), returns sum(w^2), sum(u^2) in double, in the
 *            order above;
 * apply:     w -= (lr * trust) * u, trust = ||w|| / ||u|| (1 if either is 0). */
void cz_lamb_direction(const cz_adam_coef *k, int no_decay, const float *params, const float *grads,
                       float *m, float *v, float *u, size_t count, double *w_sq, double *u_sq);
void cz_lamb_direction_ref(const cz_adam_coef *k, int no_decay, const float *params,
                           const float *grads, float *m, float *v, float *u, size_t count,
                           double *w_sq, double *u_sq);
void cz_lamb_apply(float lr_trust, float *params, const float *u, size_t count);

/* ---- optimizer placement: the one call after the gradient sync ----
 * coordinator: gradients reduced to rank 0 (ring reduce-scatter + gather),
 *              rank 0 keeps the moments, updates, broadcasts the weights.
 * sharded:     ZeRO-1 (Rajbhandari et al. 2020, Pos): ring reduce-scatter,
 *              rank r updates its pieces (chunk r of every bucket) with its
 *              slice of the moments, ring all-gather of the weights.
 * replicated:  ring all-reduce, every rank updates everything.
 * All three give bitwise-identical weights with allreduce = "ring": the
 * gradient sums come from the same ring reduce-scatter, the norms from the
 * same fixed decomposition (one double partial per piece and tensor, summed
 * in piece order; inside a partial, the block order above), and each
 * element's update is the same float arithmetic. The step is OpenMP-parallel
 * over those blocks, with the calling thread's team size (cloze-train sets
 * it to train.threads with omp_set_num_threads); no sum crosses a block, so
 * the bits do not depend on the thread count.
 * LAMB's per-tensor norms in sharded mode: each rank computes its pieces'
 * partials, the partial table is exchanged (each entry is non-zero on one
 * rank only, so the exchange adds exact zeros), then summed in piece order. */

typedef struct cz_optimizer cz_optimizer;

/* What the gradient sync must leave for a placement (comm.h): coordinator
 * REDUCE, sharded REDUCE_SCATTER, replicated ALLREDUCE. */
cz_sync_mode cz_placement_sync_mode(cz_placement place);

/* The optimizer for the gradients that `gs` synchronises (its owner, the
 * train loop, created it with cz_placement_sync_mode(cfg->placement)): the
 * segments follow gs's bucket layout, the weights travel back with gs's
 * algorithm (both copied: gs is only read during this call). ranges as
 * above (copied), covering the layout's n floats. */
int cz_optimizer_create(cz_optimizer **out, const cz_comm *c, const cz_optim_config *cfg,
                        const cz_grad_sync *gs, const cz_param_range *ranges, int n_ranges,
                        cz_error *err);
void cz_optimizer_free(cz_optimizer *o);
/* dist.exact = on (train calls it once the gradient sync leaves the whole
 * exactly summed gradient on every rank): the global norm is computed on
 * every rank in one fixed order of the whole buffer, so it does not depend
 * on the rank count, buckets or placement. AdamW only (LAMB's per-tensor
 * norms follow the layout: refused). */
int cz_optimizer_set_exact(cz_optimizer *o, cz_error *err);

typedef struct cz_step_report {
    double grad_norm;  /* global norm of the averaged gradient, before clipping */
    double clip_scale; /* factor applied (1 when not clipped) */
    int skipped;       /* 1: non-finite norm; weights, moments, step count untouched */
    double lr;
    double gather_seconds; /* the new weights sent to every rank (sharded, coordinator) */
} cz_step_report;

/* After cz_grad_sync_finish: grads holds the sum over ranks where the
 * placement needs it. Scales the sum by 1/micro_batches (the number of
 * micro-batches summed over ALL ranks), takes the global norm, clips to
 * clip_norm, applies the update with learning rate lr, and leaves the new
 * weights in params on every rank. grads is scratch afterwards. Same report
 * on every rank. */
int cz_optimizer_step(cz_optimizer *o, float *params, float *grads, int micro_batches, double lr,
                      cz_step_report *rep, cz_error *err);

/* Per-tensor multipliers of the learning rate and the weight decay, one
 * pair per range (copied; NULL: 1): tensor r is updated with learning rate
 * lr x lr_mult[r] and weight decay weight_decay x wd_mult[r], so its
 * decoupled decay per step is lr x weight_decay x lr_mult[r] x wd_mult[r].
 * µP (model.h, cz_parametrization) sets them as mup.MuAdamW does:
 * cz_optim_model_multipliers. A range whose multipliers are both 1 is
 * updated with the very bits it had without them. AdamW only: with LAMB
 * (whose trust ratio rescales each tensor's step) it refuses, naming
 * optim.name. Every rank calls it with the same values. */
int cz_optimizer_set_multipliers(cz_optimizer *o, const double *lr_mult, const double *wd_mult,
                                 cz_error *err);
/* The multipliers m's tensors take (cz_model_tensor_mup), n = its tensor
 * count each; returns 1 when any is not 1 (µP), 0 when all are. */
int cz_optim_model_multipliers(const cz_model *m, double *lr_mult, double *wd_mult);
/* The multipliers in effect (n_ranges each; 1 where none were set). */
const double *cz_optimizer_lr_mults(const cz_optimizer *o);
const double *cz_optimizer_wd_mults(const cz_optimizer *o);

/* Number of updates applied so far (the t of bias correction). */
long cz_optimizer_steps_done(const cz_optimizer *o);
void cz_optimizer_set_steps_done(cz_optimizer *o, long t);

/* Checkpoints: collective. Gathers the full moments (n floats each) to rank 0
 * into m_out, v_out (only rank 0's pointers are used). */
int cz_optimizer_gather_moments(cz_optimizer *o, float *m_out, float *v_out, cz_error *err);
/* Collective: rank 0's full moments are distributed to their owners. */
int cz_optimizer_scatter_moments(cz_optimizer *o, const float *m_in, const float *v_in,
                                 cz_error *err);

#endif
