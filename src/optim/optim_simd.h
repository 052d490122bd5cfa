/* The optimizer's per-block arithmetic, private to src/optim.
 *
 * adamw_vec.c holds the loops, written once over plain floats, with the
 * element rule below; the build compiles it once per instruction set
 * (CMakeLists.txt: AVX-512, AVX2, the portable baseline), each copy with
 * `#pragma omp simd` loops of its vector width. Every copy must give the
 * same bits on every element (placements, resume and thread counts all
 * compare weights bitwise, and a run may resume on another CPU), so:
 *   - each element sees the same IEEE operations in the same order whatever
 *     the width (IEEE mul, add, div and sqrt are correctly rounded, lane by
 *     lane, like their scalar forms);
 *   - no FMA contraction anywhere: src/optim and these objects are built
 *     with -ffp-contract=off (an AVX2 or AVX-512 copy would otherwise fuse
 *     b1 * m + (1 - b1) * g into one rounding, and its bits would differ
 *     from the baseline's), and -fno-math-errno so that sqrtf is one
 *     instruction that vectorises;
 *   - sums of squares accumulate in CZ_OPTIM_LANES double lanes, element i
 *     of a block in lane i % 16, lanes added 0..15 at the end. A float
 *     squared is exact in double (24 + 24 < 53 significant bits), so only
 *     the additions round, and they happen in the same order in every copy.
 * The baseline copy is the reference (`*_ref` calls, CLOZE_KERNELS=scalar):
 * tests/test_optim_fast.c checks it against the rule written out element by
 * element, and every other copy against it bit for bit. */
#ifndef CLOZE_OPTIM_SIMD_H
#define CLOZE_OPTIM_SIMD_H

#include <math.h>

#include "cloze/optim.h"

#define CZ_OPTIM_LANES 16

/* The blocks placement.c runs in parallel (adamw.c): fast = 1 takes the copy
 * for this CPU (cz_cpu_kernel_isa), 0 the baseline copy (the reference).
 * The sums of squares are over one block (n <= CZ_OPTIM_BLOCK), lanes added
 * in order. */
void cz_optim_adamw_block(const cz_adam_coef *k, float pre, float wd, float *params,
                          const float *grads, float *m, float *v, size_t n, int fast);
double cz_optim_sumsq_block(const float *x, float pre, size_t n, int fast);
void cz_optim_lamb_block(const cz_adam_coef *k, float pre, float wd, const float *params,
                         const float *grads, float *m, float *v, float *u, size_t n, int fast,
                         double *w_sq, double *u_sq);
void cz_optim_lamb_apply_block(float lr_trust, float *params, const float *u, size_t n, int fast);

/* One copy of the loops (adamw_vec.c). */
typedef struct cz_optim_ops {
    /* AdamW on n elements: g = (grads[i] * pre) * k->gscale, then the rule
     * of optim.h with decay wd (0 for no_decay tensors) */
    void (*adamw)(const cz_adam_coef *k, float pre, float wd, float *params, const float *grads,
                  float *m, float *v, size_t n);
    /* lanes[l] = sum of (double)y * y over i = l (mod 16), in order of i,
     * y = x[i] * pre (float) */
    void (*sumsq)(const float *x, float pre, size_t n, double lanes[CZ_OPTIM_LANES]);
    /* LAMB's direction on n elements into u; lanes of w^2 and u^2 as above */
    void (*lamb)(const cz_adam_coef *k, float pre, float wd, const float *params,
                 const float *grads, float *m, float *v, float *u, size_t n,
                 double wlanes[CZ_OPTIM_LANES], double ulanes[CZ_OPTIM_LANES]);
    void (*axpy)(float a, float *params, const float *u, size_t n); /* params -= a * u */
} cz_optim_ops;

extern const cz_optim_ops cz_optim_ops_avx512, cz_optim_ops_avx2, cz_optim_ops_baseline;

/* The element rule, in one place so that every copy and every placement
 * runs the very same float operations on an element (Loshchilov & Hutter
 * 2019, Algorithm 2, with Adam's bias corrections c1, c2; Kingma & Ba 2015):
 *   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
 *   direction = (m / c1) / (sqrt(v / c2) + eps). */
static inline float cz_adam_direction(const cz_adam_coef *k, float g, float *m, float *v) {
    float mi = k->beta1 * *m + (1.0f - k->beta1) * g;
    float vi = k->beta2 * *v + (1.0f - k->beta2) * (g * g);
    *m = mi;
    *v = vi;
    return (mi / k->c1) / (sqrtf(vi / k->c2) + k->eps);
}

/* Scaled gradient: micro-batch averaging (pre) and clipping (k->gscale) as
 * two float products. pre = 1 is exact, so the public calls without it
 * give the bits of the one-product form. */
static inline float cz_adam_scaled_grad(const cz_adam_coef *k, float pre, float g) {
    return (g * pre) * k->gscale;
}

#endif
