/* kernels: the compute primitives of a Transformer step.
 *
 * Two paths for every kernel: a readable scalar reference (`*_ref`, plain
 * loops, used by the tests as the definition) and the fast path that the model
 * calls. Buffers are row-major, [rows x cols], fp32.
 *
 * Determinism rule: every reduction runs in a fixed order that does not depend
 * on the number of threads (parallelise over independent outputs, never split
 * one sum across threads).
 *
 * Owners: gemm.c (the matrix products: fp32 through BLIS, bf16 through
 * gemm_bf16.c's loops and its kernels, gemm_bf16_avx512.c and
 * gemm_bf16_amx*.c) and the elementwise/attention kernels in their own
 * files. Which instruction set each family runs is decided in core, once
 * (cloze/cpu.h: cz_cpu_kernel_isa, cz_cpu_blis_config, and cz_cpu_choose
 * over the bf16 kernels' table); the kernels run what was decided. */
#ifndef CLOZE_KERNELS_H
#define CLOZE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"
#include "cloze/cpu.h"

/* ---- GEMM ----
 * C[m x n] = alpha * op(A) * op(B) + beta * C, row-major, with leading
 * dimensions lda/ldb/ldc in elements (row strides). op(X) = X or X^T.
 * All matrix products of the model go through this one call. In fp32 it
 * runs BLIS with the configuration chosen at start-up (cz_gemm_setup); in
 * bf16 mode (cz_gemm_set_bf16) cloze's own bf16 kernel, vdpbf16ps or AMX
 * tiles, chosen once per process (cz_bf16_kernel_chosen). */
typedef struct cz_gemm_ctx cz_gemm_ctx;

typedef enum {
    CZ_GEMM_AUTO = 0,
    CZ_GEMM_BLIS_DEFAULT = 1,
    CZ_GEMM_REFERENCE = 2,
    CZ_GEMM_AVX512 = 3 /* BLIS's skx kernels wherever AVX-512 is usable */
} cz_gemm_choice;

/* Starts BLIS on the configuration core picks for this CPU
 * (cz_cpu_blis_config) and the thread count it uses (threads <= 0: one).
 * Logs what runs. Returns NULL and fills err on
 * failure. AUTO: BLIS's AVX-512 "skx" kernels where the CPU and OS allow
 * AVX-512 at full width, its AVX2/FMA kernels on CPUs without AVX-512 and on
 * AMD family 0x19 (Zen 3/Zen 4: 256-bit units, measured no faster with skx,
 * docs/performance.md, "Design decisions"), BLIS's default where nothing better is known.
 * BLIS_DEFAULT: BLIS's own CPUID choice. AVX512: skx wherever AVX-512 is
 * usable. REFERENCE: the loops of cz_gemm_ref. Call it before anything else
 * uses BLIS. */
cz_gemm_ctx *cz_gemm_setup(cz_gemm_choice choice, int threads, cz_error *err);
void cz_gemm_free(cz_gemm_ctx *g);
/* What runs the products and how it was chosen, e.g. "blis skx (AVX-512,
 * chosen from CPUID; ...), 2 thread(s)" or in bf16 mode "bf16 amx (the
 * best this CPU has), 32x32 C in 4 tiles, ..." */
const char *cz_gemm_describe(const cz_gemm_ctx *g);
/* The kernel that runs the products: in fp32 the BLIS configuration
 * ("skx", "zen3", ...) or "reference" for the loops; in bf16 mode the bf16
 * kernel ("vdpbf16ps", "amx", "amx-emulated", or "bf16 reference"). BLIS
 * keeps one configuration per process: the first setup (AUTO, AVX512 or
 * BLIS_DEFAULT) decides it for all later ones. */
const char *cz_gemm_kernel(const cz_gemm_ctx *g);

void cz_gemm(const cz_gemm_ctx *g, int trans_a, int trans_b, int m, int n, int k, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* Weights: operands that stay the same for a while (a training step's
 * forward and backward products, an evaluation). cz_gemm_weight is cz_gemm
 * with op(B) declared such a weight. Between cz_gemm_weights_begin and
 * cz_gemm_weights_end the caller promises that no weight passed to
 * cz_gemm_weight changes; in bf16 mode each weight (per orientation) is
 * then packed once, at its first product in the scope, shared by g's
 * threads and reused by its later products (kept across scopes, re-packed
 * in each: 2 bytes per element and orientation). Results are bitwise
 * cz_gemm's. Outside a scope, in fp32, or when the packed copy cannot be
 * allocated, cz_gemm_weight runs cz_gemm. */
void cz_gemm_weights_begin(cz_gemm_ctx *g);
void cz_gemm_weights_end(cz_gemm_ctx *g);
void cz_gemm_weight(const cz_gemm_ctx *g, int trans_a, int trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                    float *c, int ldc);
/* ---- operands in bf16 ----
 * A matrix that a kernel wrote rounded to bf16 (cz_bf16_store_n: the
 * upper 16 bits of cz_bf16_round's fp32, 2 bytes an element) is an
 * operand as it is: a bf16 product reads half the bytes and skips the
 * rounding it would do while packing, with the same bits as the same
 * product on the fp32 values (their rounding is exact). cz_mat names
 * either kind; cz_gemm_mat is cz_gemm (b_weight 0) or cz_gemm_weight
 * (b_weight 1) on them. In fp32 mode (BLIS, the reference loops) bf16
 * operands are widened to fp32 for the product (exact). */
typedef struct cz_mat {
    const void *p; /* const float *, or const uint16_t * when bf16 */
    int ld;        /* row stride, in elements */
    int bf16;
} cz_mat;
static inline cz_mat cz_mat_f32(const float *p, int ld) {
    cz_mat x = {p, ld, 0};
    return x;
}
static inline cz_mat cz_mat_bf16(const uint16_t *p, int ld) {
    cz_mat x = {p, ld, 1};
    return x;
}
void cz_gemm_mat(const cz_gemm_ctx *g, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 cz_mat a, cz_mat b, int b_weight, float beta, float *c, int ldc);
/* The definition: triple loop, double accumulation. */
void cz_gemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* ---- products of a few rows (token-by-token decoding) ----
 * y[m, n] = x[m, k] op(W) (+ bias[n]; NULL = none), W row-major: [k, n]
 * with trans = 0 (y = x W, GPT's Conv1D layout), [n, k] with trans = 1
 * (y = x W^T, a Linear or the tied LM head). For m of a few rows (a
 * decoder's batch), where a GEMM library's packing of W costs more than
 * the product: every element of W is read from memory once for all m rows,
 * W's rows contiguously, and the threads split the n outputs (each output's
 * sum in one thread, in a fixed order). The reference sums in double. */
void cz_skinny_gemm(float *y, const float *x, int m, const float *w, int trans, int k, int n,
                    const float *bias);
void cz_skinny_gemm_ref(float *y, const float *x, int m, const float *w, int trans, int k, int n,
                        const float *bias);

/* ---- the MFU denominator ----
 * The peak arithmetic rate of one rank running g's products on g's
 * threads, stated with where it came from. In order of preference:
 *   1. given > 0 (train.peak_gflops): taken as it is;
 *   2. fp32 on a CPU whose clock and FMA width are known
 *      (cz_cpu_peak_gflops_per_core x threads): the theoretical peak, an
 *      upper bound, so MFU stays below 100%;
 *   3. otherwise (virtual machines without cpufreq, bf16 mode): the best of
 *      CZ_PEAK_PROBES products of 1024 x 1024 x 1024 through g, the rate
 *      g's kernel (BLIS, or the bf16 kernel) reaches on this machine. A
 *      busy machine lowers a probe, never raises it, so the best of
 *      several is the most stable reading; MFU can still pass 100% when
 *      all of them ran beside other work, and cz_format_mfu then says so.
 * Returns -1 with err only when the probe buffers cannot be allocated. */
#define CZ_PEAK_PROBES 8
typedef struct cz_peak {
    double gflops;                /* per rank */
    int measured;                 /* 1: probed on this machine (case 3) */
    double probe[CZ_PEAK_PROBES]; /* case 3: each product's rate, in run order */
    char source[192];
} cz_peak;
int cz_gemm_peak(const cz_gemm_ctx *g, double given, cz_peak *out, cz_error *err);

/* ---- the bf16 kernels: one table (src/kernels/gemm_bf16.c) ----
 * Each bf16 micro-kernel is one descriptor (src/kernels/gemm_bf16.h) with
 * its name, the CPU features it needs, its preference rank and its
 * functions; the table lists the descriptors this build has, and an index
 * into it is a kernel's id. Today: "amx" (AMX tiles, tdpbf16ps; rank 2),
 * "vdpbf16ps" (AVX512_BF16; rank 1) and "amx-emulated" (the AMX kernel with
 * the tiles in scalar C; rank 0: only when forced, for tests). */
int cz_bf16_kernel_count(void);
/* The name of entry i, as CLOZE_BF16_KERNEL spells it; NULL outside. */
const char *cz_bf16_kernel_name(int i);
/* The entry of a name; -1 for "auto", -2 for a name not in the table. */
int cz_bf16_kernel_parse(const char *name);
/* The entry core's rule picks for cpu with no CLOZE_BF16_KERNEL, before
 * any permission or check (cz_cpu_best_choice); -1 for none. */
int cz_bf16_kernel_best(const cz_cpu *cpu);
/* The kernel bf16 products run, decided once per process by core's rule
 * (cz_cpu_choose: CPUID, CLOZE_BF16_KERNEL, AMX's permission) over the
 * table: its entry, or -1 where none runs (bf16 mode is then refused).
 * Before a kernel is chosen it checks itself: a product of small integers
 * (every sum exact in fp32, so any order of additions gives the same bits)
 * against cz_gemm_bf16_ref, bit for bit, inside core's fault guard; a
 * mismatch, a fault (a tile instruction the CPU or OS refuses) or a refused
 * permission is logged in one line and the next kernel by rank is tried. */
int cz_bf16_kernel_chosen(void);
/* How, e.g. "amx (the best this CPU has)" or "vdpbf16ps (the best this CPU
 * has; amx not used: ...)" */
const char *cz_bf16_kernel_note(void);
/* 1 when CLOZE_BF16_KERNEL forced a kernel this CPU cannot run */
int cz_bf16_kernel_refused(void);
/* 1 when a kernel was passed over (its check failed or faulted, or the OS
 * refused its permission) */
int cz_bf16_kernel_failed(void);

/* ---- bf16 mode (src/kernels/gemm_bf16.c) ----
 * on = 1: every later cz_gemm on g rounds the elements of op(A) and op(B) to
 * bfloat16 (round to nearest even) and accumulates in fp32 on the kernel
 * core chose (cz_bf16_kernel_chosen: AMX's tdpbf16ps, AVX512_BF16's
 * vdpbf16ps, or their emulation when forced with CLOZE_BF16_KERNEL); C,
 * alpha, beta and everything outside the products stay fp32 (fp32 master
 * weights). The kernels add the same exact products in different orders:
 * results differ between kernels in the last bits, never between thread
 * counts. All products take this path, attention ones
 * included (faster there too; they run on one thread, as in fp32:
 * docs/performance.md, "Design decisions"). Results do not depend on the thread
 * count. The context then owns packing buffers, so it runs one
 * product at a time (the model's products are sequential). With
 * CZ_GEMM_REFERENCE the products run cz_gemm_bf16_ref. Fails (-1, err)
 * where core chose no kernel (the CPU has neither AVX512_BF16 nor AMX);
 * on = 0 returns to fp32. Logs the kernel. */
int cz_gemm_set_bf16(cz_gemm_ctx *g, int on, cz_error *err);
int cz_gemm_is_bf16(const cz_gemm_ctx *g);
/* A copy of g that runs every product on one thread, with its own bf16
 * packing buffers when g is in bf16 mode: for callers that run independent
 * products side by side, one per thread (the model's per-(sequence, head)
 * attention products). The path per shape is g's, and the results are
 * bitwise g's (thread-count independence above). A copy does not follow a
 * later cz_gemm_set_bf16 on g. Free with cz_gemm_free. */
cz_gemm_ctx *cz_gemm_single_thread(const cz_gemm_ctx *g, cz_error *err);
/* x rounded to the nearest bfloat16 (ties to even), as a float; subnormals
 * become signed zeros, as vcvtneps2bf16 does (it treats them as zero). */
float cz_bf16_round(float x);
/* y[i] = cz_bf16_round(x[i]) (may alias), bit for bit on every path. */
void cz_bf16_round_n(float *y, const float *x, size_t n);
void cz_bf16_round_n_ref(float *y, const float *x, size_t n);
/* y[i] = the bf16 bits of x[i] (the upper half of cz_bf16_round(x[i])'s),
 * bit for bit on every path; cz_bf16_load_n widens them back (exact). */
void cz_bf16_store_n(uint16_t *y, const float *x, size_t n);
void cz_bf16_store_n_ref(uint16_t *y, const float *x, size_t n);
void cz_bf16_load_n(float *y, const uint16_t *x, size_t n);
/* The definition of the bf16 mode: inputs rounded by cz_bf16_round, the
 * products summed in double, then C = alpha sum + beta C as cz_gemm_ref. */
void cz_gemm_bf16_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                      int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* ---- Transformer kernels (src/kernels/nn.c) ----
 * Each kernel has a scalar reference `*_ref` (the definition, used by tests)
 * and the fast path without suffix: one vector source (src/kernels/nn_vec.c)
 * compiled for AVX-512, AVX2 + FMA and a portable baseline (SSE2, NEON), the
 * copy chosen once per process by cz_cpu_kernel_isa (cloze/cpu.h;
 * CLOZE_KERNELS=scalar|baseline|avx2|avx512 forces one, scalar being the
 * plain loops of nn.c). All run OpenMP over independent rows or columns;
 * same results up to float rounding (tests/test_kernels.c states the bound
 * per kernel). Reductions over rows (bias, gamma, embedding gradients) run
 * parallel over columns and sequentially over rows, so results never depend
 * on the thread count. "+=" in a comment means the kernel accumulates into
 * that output. */

/* How the fast kernels' path was chosen, e.g. "avx512 (the widest this CPU
 * has)". */
const char *cz_kernels_describe(void);

/* y[n,:] = (x[n,:] - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps),
 * var the biased (population) variance over C columns (Ba et al. 2016).
 * mean/rstd [N] are saved for the backward pass. */
void cz_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                          const float *beta, int n, int c, float eps);
void cz_layernorm_forward_ref(float *y, float *mean, float *rstd, const float *x,
                              const float *gamma, const float *beta, int n, int c, float eps);
/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma
 * (dx is written, not accumulated); dgamma += sum_n dy*xhat, dbeta += sum_n dy. */
void cz_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                           const float *mean, const float *rstd, const float *gamma, int n, int c);
void cz_layernorm_backward_ref(float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *rstd,
                               const float *gamma, int n, int c);

/* The post-LN residual in one pass: sum = x + r (written, backward needs
 * it), y = LN(sum) as cz_layernorm_forward. */
void cz_add_layernorm_forward(float *y, float *sum, float *mean, float *rstd, const float *x,
                              const float *r, const float *gamma, const float *beta, int n, int c,
                              float eps);
void cz_add_layernorm_forward_ref(float *y, float *sum, float *mean, float *rstd, const float *x,
                                  const float *r, const float *gamma, const float *beta, int n,
                                  int c, float eps);

/* GELU (Hendrycks & Gimpel 2016). tanh_form = 0: x * Phi(x) with the exact
 * erf (BERT); 1: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-1). */
void cz_gelu_forward(float *y, const float *x, size_t n, int tanh_form);
void cz_gelu_forward_ref(float *y, const float *x, size_t n, int tanh_form);
/* Bias + GELU in one pass over [n x c]: u[i,:] += bias (in place, backward
 * needs u), g = gelu(u). */
void cz_bias_gelu_forward(float *g, float *u, const float *bias, int n, int c, int tanh_form);
void cz_bias_gelu_forward_ref(float *g, float *u, const float *bias, int n, int c, int tanh_form);
/* The same with g written in bf16 (2 bytes an element, as cz_bf16_store_n
 * of what cz_bias_gelu_forward writes, bit for bit): the FFN's second
 * product reads it as it is (cz_mat_bf16). */
void cz_bias_gelu_forward_bf16(uint16_t *g, float *u, const float *bias, int n, int c,
                               int tanh_form);
/* dx = dy * gelu'(x) (written). */
void cz_gelu_backward(float *dx, const float *x, const float *dy, size_t n, int tanh_form);
void cz_gelu_backward_ref(float *dx, const float *x, const float *dy, size_t n, int tanh_form);

/* y[i, 0:c] += bias; db += sum_i dy[i, 0:c]; rows are ld floats apart. */
void cz_add_bias(float *y, const float *bias, int n, int c, int ld);
void cz_bias_backward(float *db, const float *dy, int n, int c, int ld);
void cz_bias_backward_ref(float *db, const float *dy, int n, int c, int ld);

/* Attention softmax over a [t x t] score matrix in place (rows = queries,
 * columns = keys): s[i,j] + key_bias[j] (NULL = none; BERT padding uses
 * -10000, as Hugging Face BERT), and with causal = 1 keys j > i are excluded
 * (probability exactly 0, GPT). */
void cz_attn_softmax(float *s, int t, const float *key_bias, int causal);
void cz_attn_softmax_ref(float *s, int t, const float *key_bias, int causal);
/* The same over all heads of nseq sequences at once: s is [nseq, heads, t, t]
 * and key_bias [nseq, t] (row i uses the bias of sequence i / (heads t)). */
void cz_attn_softmax_batch(float *s, int nseq, int heads, int t, const float *key_bias, int causal);
void cz_attn_softmax_batch_ref(float *s, int nseq, int heads, int t, const float *key_bias,
                               int causal);
/* Softmax backward over rows: ds = p * (dp - sum_j dp*p) (written; may alias dp). */
void cz_softmax_backward(float *ds, const float *p, const float *dp, int rows, int cols);
void cz_softmax_backward_ref(float *ds, const float *p, const float *dp, int rows, int cols);

/* Inverted dropout keyed by a Philox stream: element i is kept iff
 * cz_rng_uniform(s, first + i) >= p, kept values scaled by 1/(1-p).
 * p = 0 copies. y may alias x. The backward applies the same mask to dy. */
struct cz_rng_stream;
void cz_dropout(float *y, const float *x, size_t n, float p, const struct cz_rng_stream *s,
                uint64_t first);
void cz_dropout_ref(float *y, const float *x, size_t n, float p, const struct cz_rng_stream *s,
                    uint64_t first);
/* The same over `rows` rows of `cols` contiguous elements, row r keyed by
 * stream elements [first + r * stride, + cols) (cols <= stride): a
 * [rows, cols] block cut from a [rows, stride] grid has the grid's mask
 * whatever cols is (attention probabilities of a batch padded to fewer
 * than max_positions tokens). Threads split the rows. */
void cz_dropout_rows(float *y, const float *x, int rows, int cols, uint64_t stride, float p,
                     const struct cz_rng_stream *s, uint64_t first);
void cz_dropout_rows_ref(float *y, const float *x, int rows, int cols, uint64_t stride, float p,
                         const struct cz_rng_stream *s, uint64_t first);

/* out[i,:] = tok[ids[i]] + pos[i % t] (+ seg[segs[i]] when seg != NULL),
 * for n = rows tokens of sequences of length t. */
void cz_embedding_forward(float *out, const int32_t *ids, const int32_t *segs, const float *tok,
                          const float *pos, const float *seg, int n, int t, int c);
/* dtok[ids[i]] += dout[i], dpos[i % t] += dout[i], dseg[segs[i]] += dout[i];
 * parallel over columns, sequential over tokens (deterministic). */
void cz_embedding_backward(float *dtok, float *dpos, float *dseg, const float *dout,
                           const int32_t *ids, const int32_t *segs, int n, int t, int c);
void cz_embedding_backward_ref(float *dtok, float *dpos, float *dseg, const float *dout,
                               const int32_t *ids, const int32_t *segs, int n, int t, int c);

/* Softmax cross-entropy over rows of [n x v] logits, in place: logits become
 * probabilities. loss[i] = -log p[label] (0 for label < 0), argmax[i] = the
 * predicted class. Sums in double. */
void cz_xent_forward(float *logits, double *loss, int32_t *argmax, const int32_t *labels, int n,
                     int v);
void cz_xent_forward_ref(float *logits, double *loss, int32_t *argmax, const int32_t *labels, int n,
                         int v);
/* In place: probabilities become dlogits = (p - onehot(label)) * scale[i]
 * (rows with label < 0 or scale 0 become 0). */
void cz_xent_backward(float *probs, const int32_t *labels, const float *scale, int n, int v);
void cz_xent_backward_ref(float *probs, const int32_t *labels, const float *scale, int n, int v);
/* db[j] += sum_i dlogits[i][j], the dlogits as cz_xent_backward would
 * write them, made from the probabilities on the fly (probs is only read):
 * cz_xent_backward then cz_bias_backward, bit for bit, but without
 * needing the fp32 dlogits afterwards (the MLM bias in bf16 mode). */
void cz_xent_bias_backward(float *db, const float *probs, const int32_t *labels, const float *scale,
                           int n, int v);
void cz_xent_bias_backward_ref(float *db, const float *probs, const int32_t *labels,
                               const float *scale, int n, int v);
/* The same, each row's dlogits then stored in bf16 (cz_bf16_store_n of
 * cz_xent_backward's, bit for bit) in the first v halves of the row's own
 * memory: the products read them as cz_mat_bf16((uint16_t *)probs, 2 * v).
 * Half the bytes for the two products of dlogits, and no second buffer. */
void cz_xent_backward_bf16(float *probs, const int32_t *labels, const float *scale, int n, int v);

#endif
