/* The optimizer's per-block arithmetic, private to src/optim.
 *
 * adamw.c holds the scalar definitions; adamw_avx512.c the same operations
 * on 16 floats at a time. Both must give the same bits on every element
 * (placements, resume and thread counts all compare weights bitwise), so:
 *   - every float operation of the scalar code is one vector operation of
 *     the same kind in the same order (IEEE mul, add, div and sqrt are
 *     correctly rounded, lane by lane, like their scalar forms);
 *   - no FMA contraction on either side (src/optim is built with
 *     -ffp-contract=off; the AVX-512 target leaves out "fma");
 *   - sums of squares accumulate in 16 double lanes, element i of a block
 *     in lane i % 16, lanes added 0..15 at the end. A float squared is exact
 *     in double (24 + 24 < 53 significant bits), so only the additions
 *     round, and they happen in the same order in both codes. */
#ifndef CLOZE_OPTIM_SIMD_H
#define CLOZE_OPTIM_SIMD_H

#include "cloze/optim.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CZ_OPTIM_SIMD 1
#else
#define CZ_OPTIM_SIMD 0
#endif

#define CZ_OPTIM_LANES 16

/* The blocks placement.c runs in parallel (adamw.c): fast = 1 takes the
 * AVX-512 body when the CPU has it, 0 the scalar definition. The sums of
 * squares are over one block (n <= CZ_OPTIM_BLOCK), lanes added in order. */
void cz_optim_adamw_block(const cz_adam_coef *k, float pre, float wd, float *params,
                          const float *grads, float *m, float *v, size_t n, int fast);
double cz_optim_sumsq_block(const float *x, float pre, size_t n, int fast);
void cz_optim_lamb_block(const cz_adam_coef *k, float pre, float wd, const float *params,
                         const float *grads, float *m, float *v, float *u, size_t n, int fast,
                         double *w_sq, double *u_sq);
void cz_optim_lamb_apply_block(float lr_trust, float *params, const float *u, size_t n, int fast);

/* 1 when the CPU has AVX-512F (asked once; CLOZE_KERNELS=scalar says 0) */
int cz_optim_have_avx512(void);

/* AdamW on n elements: g = (grads[i] * pre) * k->gscale, then the rule of
 * optim.h with decay wd (0 for no_decay tensors). */
void optim512_adamw(const cz_adam_coef *k, float pre, float wd, float *params, const float *grads,
                    float *m, float *v, size_t n);
/* lanes[l] = sum of (double)y * y over i = l (mod 16), in order of i,
 * y = x[i] * pre (float) */
void optim512_sumsq(const float *x, float pre, size_t n, double lanes[CZ_OPTIM_LANES]);
/* LAMB's direction on n elements into u; lanes of w^2 and u^2 as above */
void optim512_lamb(const cz_adam_coef *k, float pre, float wd, const float *params,
                   const float *grads, float *m, float *v, float *u, size_t n,
                   double wlanes[CZ_OPTIM_LANES], double ulanes[CZ_OPTIM_LANES]);
void optim512_axpy(float a, float *params, const float *u, size_t n); /* params -= a * u */

#endif
