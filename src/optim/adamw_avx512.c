/* AVX-512 bodies of the optimizer's per-block arithmetic (optim_simd.h).
 * Each function is the scalar code of adamw.c with 16 elements per
 * instruction and a masked tail; see optim_simd.h for why the bits match. */
#include <stdlib.h>
#include <string.h>

#include "optim_simd.h"

#if CZ_OPTIM_SIMD
#include <immintrin.h>

/* no "fma": the scalar reference has no fused operations either */
#define AVX512 __attribute__((target("avx512f")))

int cz_optim_have_avx512(void) {
    static int have = -1;
    if (have < 0) {
        const char *force = getenv("CLOZE_KERNELS");
        __builtin_cpu_init();
        have = !(force && !strcmp(force, "scalar")) && __builtin_cpu_supports("avx512f");
    }
    return have;
}

AVX512 static inline __mmask16 head_mask(size_t k) {
    return k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << k) - 1u);
}

/* adam_direction of adamw.c on 16 lanes: m, v updated in place */
AVX512 static inline __m512 direction(const cz_adam_coef *k, __m512 g, __m512 *m, __m512 *v) {
    const __m512 b1 = _mm512_set1_ps(k->beta1), b2 = _mm512_set1_ps(k->beta2);
    const __m512 ob1 = _mm512_set1_ps(1.0f - k->beta1), ob2 = _mm512_set1_ps(1.0f - k->beta2);
    __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, *m), _mm512_mul_ps(ob1, g));
    __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, *v), _mm512_mul_ps(ob2, _mm512_mul_ps(g, g)));
    *m = mi;
    *v = vi;
    __m512 num = _mm512_div_ps(mi, _mm512_set1_ps(k->c1));
    __m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_div_ps(vi, _mm512_set1_ps(k->c2))),
                               _mm512_set1_ps(k->eps));
    return _mm512_div_ps(num, den);
}

AVX512 static inline __m512 scaled_grad(const cz_adam_coef *k, float pre, const float *g,
                                        __mmask16 mask) {
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, g), _mm512_set1_ps(pre));
    return _mm512_mul_ps(x, _mm512_set1_ps(k->gscale));
}

/* lanes 0-7 and 8-15 of x squared, added to a0 / a1 (exact products) */
AVX512 static inline void add_squares(__m512 x, __m512d *a0, __m512d *a1) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    *a0 = _mm512_add_pd(*a0, _mm512_mul_pd(lo, lo));
    *a1 = _mm512_add_pd(*a1, _mm512_mul_pd(hi, hi));
}

AVX512 static inline void store_lanes(double lanes[CZ_OPTIM_LANES], __m512d a0, __m512d a1) {
    _mm512_storeu_pd(lanes, a0);
    _mm512_storeu_pd(lanes + 8, a1);
}

AVX512 void optim512_adamw(const cz_adam_coef *k, float pre, float wd, float *params,
                           const float *grads, float *m, float *v, size_t n) {
    const __m512 vwd = _mm512_set1_ps(wd), lr = _mm512_set1_ps(k->lr);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mask = head_mask(n - i);
        __m512 g = scaled_grad(k, pre, grads + i, mask);
        __m512 mi = _mm512_maskz_loadu_ps(mask, m + i), vi = _mm512_maskz_loadu_ps(mask, v + i);
        __m512 p = _mm512_maskz_loadu_ps(mask, params + i);
        __m512 u = direction(k, g, &mi, &vi);
        u = _mm512_add_ps(u, _mm512_mul_ps(vwd, p));
        p = _mm512_sub_ps(p, _mm512_mul_ps(lr, u));
        _mm512_mask_storeu_ps(m + i, mask, mi);
        _mm512_mask_storeu_ps(v + i, mask, vi);
        _mm512_mask_storeu_ps(params + i, mask, p);
    }
}

/* Masked-off lanes load 0: 0 * pre = 0 and lane + 0 * 0 = lane (lanes are
 * >= +0 or NaN), so the tail adds nothing, as in the scalar loop. */
AVX512 void optim512_sumsq(const float *x, float pre, size_t n, double lanes[CZ_OPTIM_LANES]) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    const __m512 vpre = _mm512_set1_ps(pre);
    for (size_t i = 0; i < n; i += 16) {
        __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(head_mask(n - i), x + i), vpre);
        add_squares(y, &a0, &a1);
    }
    store_lanes(lanes, a0, a1);
}

AVX512 void optim512_lamb(const cz_adam_coef *k, float pre, float wd, const float *params,
                          const float *grads, float *m, float *v, float *u, size_t n,
                          double wlanes[CZ_OPTIM_LANES], double ulanes[CZ_OPTIM_LANES]) {
    __m512d w0 = _mm512_setzero_pd(), w1 = _mm512_setzero_pd();
    __m512d u0 = _mm512_setzero_pd(), u1 = _mm512_setzero_pd();
    const __m512 vwd = _mm512_set1_ps(wd);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mask = head_mask(n - i);
        __m512 g = scaled_grad(k, pre, grads + i, mask);
        __m512 mi = _mm512_maskz_loadu_ps(mask, m + i), vi = _mm512_maskz_loadu_ps(mask, v + i);
        __m512 p = _mm512_maskz_loadu_ps(mask, params + i);
        __m512 ui = _mm512_add_ps(direction(k, g, &mi, &vi), _mm512_mul_ps(vwd, p));
        /* masked-off lanes: m = v = 0 give u = 0 / (0 + eps) = 0 */
        ui = _mm512_maskz_mov_ps(mask, ui);
        _mm512_mask_storeu_ps(m + i, mask, mi);
        _mm512_mask_storeu_ps(v + i, mask, vi);
        _mm512_mask_storeu_ps(u + i, mask, ui);
        add_squares(p, &w0, &w1);
        add_squares(ui, &u0, &u1);
    }
    store_lanes(wlanes, w0, w1);
    store_lanes(ulanes, u0, u1);
}

AVX512 void optim512_axpy(float a, float *params, const float *u, size_t n) {
    const __m512 va = _mm512_set1_ps(a);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mask = head_mask(n - i);
        __m512 p = _mm512_maskz_loadu_ps(mask, params + i);
        p = _mm512_sub_ps(p, _mm512_mul_ps(va, _mm512_maskz_loadu_ps(mask, u + i)));
        _mm512_mask_storeu_ps(params + i, mask, p);
    }
}

#else /* not x86-64 with GCC/Clang: never selected */

int cz_optim_have_avx512(void) {
    return 0;
}

#endif
