/* The optimizer's loops (optim_simd.h), compiled once per instruction set:
 * CZ_ISA_SUFFIX names the copy, and `#pragma omp simd` lets GCC run each
 * loop at the copy's vector width. Why every copy gives the same bits:
 * optim_simd.h. */
#include <stddef.h>

#include "optim_simd.h"

/* The copy's names, as in the kernels' copies: CZ_ISA_FN(adamw) is
 * adamw_avx512 in the AVX-512 object. (These loops use no explicit vectors:
 * `#pragma omp simd` gives them the copy's width.) */
#ifndef CZ_ISA_SUFFIX
#error "adamw_vec.c: compile with -DCZ_ISA_SUFFIX=name (see CMakeLists.txt)"
#endif
#define CZ_CAT2(a, b) a##b
#define CZ_CAT(a, b) CZ_CAT2(a, b)
#define CZ_ISA_FN(name) CZ_CAT(CZ_CAT(name, _), CZ_ISA_SUFFIX)

static void CZ_ISA_FN(adamw)(const cz_adam_coef *k, float pre, float wd, float *params,
                             const float *grads, float *m, float *v, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float u = cz_adam_direction(k, cz_adam_scaled_grad(k, pre, grads[i]), &m[i], &v[i]);
        u += wd * params[i];
        params[i] -= k->lr * u;
    }
}

/* lanes[l] += y_i^2 for i = i0 + l, l < count (in double: exact squares) */
static inline void add_squares(double lanes[CZ_OPTIM_LANES], const float *y, int count) {
#pragma omp simd
    for (int l = 0; l < count; l++) lanes[l] += (double)y[l] * y[l];
}

static void CZ_ISA_FN(sumsq)(const float *x, float pre, size_t n, double lanes[CZ_OPTIM_LANES]) {
    for (int l = 0; l < CZ_OPTIM_LANES; l++) lanes[l] = 0;
    for (size_t i = 0; i < n; i += CZ_OPTIM_LANES) {
        int count = n - i < CZ_OPTIM_LANES ? (int)(n - i) : CZ_OPTIM_LANES;
        float y[CZ_OPTIM_LANES];
#pragma omp simd
        for (int l = 0; l < count; l++) y[l] = x[i + l] * pre;
        add_squares(lanes, y, count);
    }
}

static void CZ_ISA_FN(lamb)(const cz_adam_coef *k, float pre, float wd, const float *params,
                            const float *grads, float *m, float *v, float *u, size_t n,
                            double wlanes[CZ_OPTIM_LANES], double ulanes[CZ_OPTIM_LANES]) {
    for (int l = 0; l < CZ_OPTIM_LANES; l++) wlanes[l] = ulanes[l] = 0;
    for (size_t i = 0; i < n; i += CZ_OPTIM_LANES) {
        int count = n - i < CZ_OPTIM_LANES ? (int)(n - i) : CZ_OPTIM_LANES;
#pragma omp simd
        for (int l = 0; l < count; l++) {
            size_t j = i + (size_t)l;
            float uj = cz_adam_direction(k, cz_adam_scaled_grad(k, pre, grads[j]), &m[j], &v[j]);
            u[j] = uj + wd * params[j];
        }
        add_squares(wlanes, params + i, count);
        add_squares(ulanes, u + i, count);
    }
}

static void CZ_ISA_FN(axpy)(float a, float *params, const float *u, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) params[i] -= a * u[i];
}

const cz_optim_ops CZ_CAT(cz_optim_ops_, CZ_ISA_SUFFIX) = {CZ_ISA_FN(adamw), CZ_ISA_FN(sumsq),
                                                           CZ_ISA_FN(lamb), CZ_ISA_FN(axpy)};
