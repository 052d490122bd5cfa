/* AVX-512 Transformer kernels (see nn_simd.h). Compiled for any x86-64 CPU:
 * only these functions carry the AVX-512 target attribute, and nn.c calls
 * them after a run-time CPU check.
 *
 * Accuracy against the `*_ref` definitions in nn.c:
 *   exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, Taylor degree 7
 *        (truncation r^8/8! < 6e-9 relative), 2^n by vscalefps: ~1-2 ulp.
 *   erf GELU: erfc by Numerical Recipes' erfcc (Chebyshev fit, fractional
 *        error < 1.2e-7 everywhere), Phi(x) = erfc(-x/sqrt2)/2.
 *   tanh GELU: 0.5 x (1 + tanh u) = x sigmoid(2u), no cancellation for x < 0.
 *   Row reductions (LayerNorm moments, cross-entropy sum) accumulate in
 *   double as the reference does; column reductions (bias, gamma, embedding
 *   gradients) run the reference's exact sequence of additions, so they are
 *   bitwise equal to it; dropout masks are bitwise equal to the reference. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/rng.h"
#include "nn_simd.h"

#if CZ_NN_SIMD
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

/* CLOZE_KERNELS=scalar forces the scalar path (tests run both paths on
 * one machine). Decided once per process. */
int cz_nn_have_avx512(void) {
    static int have = -1;
    if (have < 0) {
        const char *force = getenv("CLOZE_KERNELS");
        __builtin_cpu_init();
        have = !(force && !strcmp(force, "scalar")) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    }
    return have;
}

/* lanes [0, k) of a 16-lane vector */
AVX512 static inline __mmask16 head_mask(int k) {
    return k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << k) - 1u);
}

AVX512 static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln2 split: hi has 16 significant bits, so n * hi is exact for |n| < 2^8 */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* sum of 16 floats in double: two halves of 8 */
AVX512 static inline __m512d add_pd16(__m512d acc, __m512 v) {
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(
        acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* ---- LayerNorm ---- */

AVX512 static void ln_row(float *y, float *sum, float *mean, float *rstd, const float *x,
                          const float *r, const float *gamma, const float *beta, int c, float eps) {
    const float *s = x;
    __m512d acc = _mm512_setzero_pd();
    for (int j = 0; j < c; j += 16) {
        __mmask16 k = head_mask(c - j);
        __m512 v = _mm512_maskz_loadu_ps(k, x + j);
        if (r) {
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, r + j));
            _mm512_mask_storeu_ps(sum + j, k, v);
        }
        acc = add_pd16(acc, v);
    }
    if (r) s = sum;
    double m = _mm512_reduce_add_pd(acc) / c;
    __m512d md = _mm512_set1_pd(m), vacc = _mm512_setzero_pd();
    for (int j = 0; j < c; j += 16) {
        __mmask16 k = head_mask(c - j);
        __m512 v = _mm512_maskz_loadu_ps(k, s + j);
        __m512d lo = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), md);
        __m512d hi = _mm512_sub_pd(
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), md);
        /* masked-out lanes hold 0 - m: drop them */
        lo = _mm512_maskz_mov_pd((__mmask8)(k & 0xFF), lo);
        hi = _mm512_maskz_mov_pd((__mmask8)(k >> 8), hi);
        vacc = _mm512_fmadd_pd(lo, lo, vacc);
        vacc = _mm512_fmadd_pd(hi, hi, vacc);
    }
    double var = _mm512_reduce_add_pd(vacc) / c;
    double rs = 1.0 / sqrt(var + eps);
    *mean = (float)m;
    *rstd = (float)rs;
    __m512 mf = _mm512_set1_ps((float)m), rf = _mm512_set1_ps((float)rs);
    for (int j = 0; j < c; j += 16) {
        __mmask16 k = head_mask(c - j);
        __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mf), rf);
        __m512 out = _mm512_fmadd_ps(xh, _mm512_maskz_loadu_ps(k, gamma + j),
                                     _mm512_maskz_loadu_ps(k, beta + j));
        _mm512_mask_storeu_ps(y + j, k, out);
    }
}

AVX512 void nn512_layernorm_forward(float *y, float *sum, float *mean, float *rstd, const float *x,
                                    const float *r, const float *gamma, const float *beta, int n,
                                    int c, float eps) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * c;
        ln_row(y + o, r ? sum + o : NULL, mean + i, rstd + i, x + o, r ? r + o : NULL, gamma, beta,
               c, eps);
    }
}

AVX512 static void ln_dx_row(float *dx, const float *dy, const float *x, float mean, float rstd,
                             const float *gamma, int c) {
    __m512 mf = _mm512_set1_ps(mean), rf = _mm512_set1_ps(rstd);
    __m512d sg = _mm512_setzero_pd(), sgx = _mm512_setzero_pd();
    for (int j = 0; j < c; j += 16) {
        __mmask16 k = head_mask(c - j);
        __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mf), rf);
        __m512 g =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + j), _mm512_maskz_loadu_ps(k, gamma + j));
        xh = _mm512_maskz_mov_ps(k, xh);
        sg = add_pd16(sg, g);
        sgx = add_pd16(sgx, _mm512_mul_ps(g, xh));
    }
    __m512 a = _mm512_set1_ps((float)(_mm512_reduce_add_pd(sg) / c));
    __m512 b = _mm512_set1_ps((float)(_mm512_reduce_add_pd(sgx) / c));
    for (int j = 0; j < c; j += 16) {
        __mmask16 k = head_mask(c - j);
        __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mf), rf);
        __m512 g =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + j), _mm512_maskz_loadu_ps(k, gamma + j));
        __m512 d = _mm512_fnmadd_ps(xh, b, _mm512_sub_ps(g, a));
        _mm512_mask_storeu_ps(dx + j, k, _mm512_mul_ps(d, rf));
    }
}

/* dgamma, dbeta over 16 columns [j0, j0+16): the reference's additions in
 * the reference's order (double sums of exact double products). */
AVX512 static void ln_dparam_cols(float *dgamma, float *dbeta, const float *dy, const float *x,
                                  const float *mean, const float *rstd, int n, int c, int j0) {
    __mmask16 k = head_mask(c - j0);
    __m512d g0 = _mm512_setzero_pd(), g1 = g0, b0 = g0, b1 = g0;
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * c + j0;
        __m512 d = _mm512_maskz_loadu_ps(k, dy + o);
        __m512 xh =
            _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + o), _mm512_set1_ps(mean[i])),
                          _mm512_set1_ps(rstd[i]));
        __m512d dlo = _mm512_cvtps_pd(_mm512_castps512_ps256(d));
        __m512d dhi =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1)));
        __m512d xlo = _mm512_cvtps_pd(_mm512_castps512_ps256(xh));
        __m512d xhi =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xh), 1)));
        g0 = _mm512_add_pd(g0, _mm512_mul_pd(dlo, xlo));
        g1 = _mm512_add_pd(g1, _mm512_mul_pd(dhi, xhi));
        b0 = _mm512_add_pd(b0, dlo);
        b1 = _mm512_add_pd(b1, dhi);
    }
    __m512 gsum =
        _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(g0)), _mm512_cvtpd_ps(g1), 1);
    __m512 bsum =
        _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(b0)), _mm512_cvtpd_ps(b1), 1);
    _mm512_mask_storeu_ps(dgamma + j0, k,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(k, dgamma + j0), gsum));
    _mm512_mask_storeu_ps(dbeta + j0, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dbeta + j0), bsum));
}

AVX512 void nn512_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                                     const float *x, const float *mean, const float *rstd,
                                     const float *gamma, int n, int c) {
    int blocks = (c + 15) / 16;
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int b = 0; b < blocks; b++)
            ln_dparam_cols(dgamma, dbeta, dy, x, mean, rstd, n, c, 16 * b);
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)
            ln_dx_row(dx + (size_t)i * c, dy + (size_t)i * c, x + (size_t)i * c, mean[i], rstd[i],
                      gamma, c);
    }
}

/* ---- GELU ---- */

/* erfc(z) for z >= 0, Numerical Recipes (2nd ed.) erfcc: t = 1/(1 + z/2),
 * erfc = t exp(-z^2 + P(t)), fractional error < 1.2e-7. z = z_hi + z_lo
 * (z_lo the rounding error of x/sqrt2); z^2 is carried as hi + lo with an
 * FMA, because float rounding of z^2 alone would cost z^2 2^-24 relative
 * (3e-6 at x = -6); the small part enters as exp(-lo) ~ 1 - lo. */
AVX512 static inline __m512 erfc_pos(__m512 z, __m512 z_lo) {
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                             _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)));
    static const float c[10] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                                0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    __m512 p = _mm512_set1_ps(c[9]);
    for (int i = 8; i >= 0; i--) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
    __m512 z2 = _mm512_mul_ps(z, z);
    __m512 z2_lo = _mm512_fmsub_ps(z, z, z2);                  /* z*z - z2 exactly */
    z2_lo = _mm512_fmadd_ps(_mm512_add_ps(z, z), z_lo, z2_lo); /* + 2 z z_lo */
    /* arg = p - z2 with its rounding error err (TwoSum, Knuth) */
    __m512 nz2 = _mm512_sub_ps(_mm512_setzero_ps(), z2);
    __m512 arg = _mm512_add_ps(p, nz2), bb = _mm512_sub_ps(arg, p);
    __m512 err = _mm512_add_ps(_mm512_sub_ps(p, _mm512_sub_ps(arg, bb)), _mm512_sub_ps(nz2, bb));
    __m512 lo = _mm512_sub_ps(z2_lo, err);
    __m512 e = exp512(arg);
    return _mm512_mul_ps(t, _mm512_fnmadd_ps(e, lo, e)); /* e (1 - lo) */
}

/* Phi(x) = erfc(-x/sqrt2)/2: 1 - erfc(|z|)/2 for x >= 0, erfc(|z|)/2 below */
AVX512 static inline __m512 phi_cdf(__m512 x) {
    const __m512 c_hi = _mm512_set1_ps(0.70710678118654752f);
    const __m512 c_lo = _mm512_set1_ps(1.2101617e-08f); /* 1/sqrt2 - c_hi */
    __m512 ax = _mm512_abs_ps(x);
    __m512 z = _mm512_mul_ps(ax, c_hi);
    __m512 z_lo = _mm512_fmadd_ps(ax, c_lo, _mm512_fmsub_ps(ax, c_hi, z));
    __m512 h = _mm512_mul_ps(erfc_pos(z, z_lo), _mm512_set1_ps(0.5f));
    __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mask_sub_ps(h, pos, _mm512_set1_ps(1.0f), h);
}

/* sigmoid(2u) with 2u clamped to [-80, 80] (exp stays finite, the result
 * is 0 or 1 to float precision there); also returns 1 - sigmoid */
AVX512 static inline __m512 sigmoid2(__m512 u, __m512 *one_minus) {
    __m512 a = _mm512_mul_ps(u, _mm512_set1_ps(-2.0f));
    a = _mm512_min_ps(_mm512_max_ps(a, _mm512_set1_ps(-80.0f)), _mm512_set1_ps(80.0f));
    __m512 e = exp512(a);
    __m512 s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    *one_minus = _mm512_mul_ps(e, s);
    return s;
}

AVX512 static inline __m512 tanh_arg(__m512 x) { /* sqrt(2/pi) (x + 0.044715 x^3) */
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 in = _mm512_fmadd_ps(_mm512_mul_ps(x2, _mm512_set1_ps(0.044715f)), x, x);
    return _mm512_mul_ps(in, _mm512_set1_ps(0.79788456080286536f));
}

AVX512 static inline __m512 gelu512(__m512 x, int tanh_form) {
    if (tanh_form) {
        __m512 om;
        return _mm512_mul_ps(x, sigmoid2(tanh_arg(x), &om));
    }
    return _mm512_mul_ps(x, phi_cdf(x));
}

AVX512 static inline __m512 gelu_grad512(__m512 x, int tanh_form) {
    if (tanh_form) {
        /* 0.5 (1 + th) = s, 0.5 x (1 - th^2) du = 2 x s (1 - s) du */
        __m512 om, s = sigmoid2(tanh_arg(x), &om);
        __m512 du =
            _mm512_mul_ps(_mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(3.0f * 0.044715f),
                                          _mm512_set1_ps(1.0f)),
                          _mm512_set1_ps(0.79788456080286536f));
        __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(x, x), s), _mm512_mul_ps(om, du));
        return _mm512_add_ps(s, t);
    }
    /* Phi(x) + x phi(x) */
    __m512 pdf = _mm512_mul_ps(exp512(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.5f))),
                               _mm512_set1_ps(0.39894228040143268f));
    return _mm512_fmadd_ps(x, pdf, phi_cdf(x));
}

AVX512 void nn512_gelu_forward(float *y, float *x, const float *bias, size_t rows, int c,
                               int tanh_form) {
    if (!bias) { /* one flat row, cut into chunks of 16 */
        size_t n = rows * (size_t)c, nv = (n + 15) / 16;
#pragma omp parallel for schedule(static)
        for (size_t v = 0; v < nv; v++) {
            size_t j = 16 * v;
            __mmask16 k = head_mask(n - j >= 16 ? 16 : (int)(n - j));
            _mm512_mask_storeu_ps(y + j, k, gelu512(_mm512_maskz_loadu_ps(k, x + j), tanh_form));
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; i++) {
        float *xr = x + i * c, *yr = y + i * c;
        for (int j = 0; j < c; j += 16) {
            __mmask16 k = head_mask(c - j);
            __m512 u =
                _mm512_add_ps(_mm512_maskz_loadu_ps(k, xr + j), _mm512_maskz_loadu_ps(k, bias + j));
            _mm512_mask_storeu_ps(xr + j, k, u);
            _mm512_mask_storeu_ps(yr + j, k, gelu512(u, tanh_form));
        }
    }
}

AVX512 void nn512_gelu_backward(float *dx, const float *x, const float *dy, size_t n,
                                int tanh_form) {
    size_t nv = (n + 15) / 16;
#pragma omp parallel for schedule(static)
    for (size_t v = 0; v < nv; v++) {
        size_t j = 16 * v;
        __mmask16 k = head_mask(n - j >= 16 ? 16 : (int)(n - j));
        __m512 g = gelu_grad512(_mm512_maskz_loadu_ps(k, x + j), tanh_form);
        _mm512_mask_storeu_ps(dx + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dy + j), g));
    }
}

/* ---- bias ---- */

/* Column sums as the reference: each column in double, rows in order, by
 * one thread. A thread owns a contiguous range of 16-column blocks. It takes
 * the rows BIAS_ROWS at a time and, block after block, adds those rows into
 * the block's two double accumulators (held in registers for the chunk):
 * the chunk's rows stay in cache and in the TLB while the blocks move right.
 * Walking one block down all rows instead touched a new page per row when
 * rows are 4 KiB or more apart: 4096 x 1024 took 2.0 ms, now 0.4-0.8 ms on
 * 2 threads (docs/performance.md). Accumulators live in memory between
 * chunks, for BIAS_GROUP blocks at a time. */
#define BIAS_GROUP 64
#define BIAS_ROWS 8
AVX512 void nn512_bias_backward(float *db, const float *dy, int n, int c, int ld) {
    int blocks = (c + 15) / 16;
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int b_lo = (int)((long)blocks * id / nt), b_hi = (int)((long)blocks * (id + 1) / nt);
        for (int g0 = b_lo; g0 < b_hi; g0 += BIAS_GROUP) {
            int g1 = g0 + BIAS_GROUP < b_hi ? g0 + BIAS_GROUP : b_hi;
            __m512d acc[BIAS_GROUP][2];
            for (int b = g0; b < g1; b++) acc[b - g0][0] = acc[b - g0][1] = _mm512_setzero_pd();
            for (int i0 = 0; i0 < n; i0 += BIAS_ROWS) {
                int i1 = i0 + BIAS_ROWS < n ? i0 + BIAS_ROWS : n;
                for (int b = g0; b < g1; b++) {
                    __mmask16 k = head_mask(c - 16 * b);
                    __m512d a0 = acc[b - g0][0], a1 = acc[b - g0][1];
                    for (int i = i0; i < i1; i++) {
                        __m512 d = _mm512_maskz_loadu_ps(k, dy + (size_t)i * ld + 16 * b);
                        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(d)));
                        a1 =
                            _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(
                                                  _mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))));
                    }
                    acc[b - g0][0] = a0;
                    acc[b - g0][1] = a1;
                }
            }
            for (int b = g0; b < g1; b++) {
                __mmask16 k = head_mask(c - 16 * b);
                __m512 s =
                    _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(acc[b - g0][0])),
                                       _mm512_cvtpd_ps(acc[b - g0][1]), 1);
                float *out = db + 16 * b;
                _mm512_mask_storeu_ps(out, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, out), s));
            }
        }
    }
}

/* ---- attention softmax ---- */

AVX512 static void softmax_row(float *s, int end, int t, const float *kb) {
    __m512 mx = _mm512_set1_ps(-FLT_MAX);
    for (int j = 0; j < end; j += 16) {
        __mmask16 k = head_mask(end - j);
        __m512 v = _mm512_maskz_loadu_ps(k, s + j);
        if (kb) {
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, kb + j));
            _mm512_mask_storeu_ps(s + j, k, v);
        }
        mx = _mm512_mask_max_ps(mx, k, mx, v);
    }
    __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < end; j += 16) {
        __mmask16 k = head_mask(end - j);
        __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m));
        e = _mm512_maskz_mov_ps(k, e);
        _mm512_mask_storeu_ps(s + j, k, e);
        acc = _mm512_add_ps(acc, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(acc));
    for (int j = 0; j < end; j += 16) {
        __mmask16 k = head_mask(end - j);
        _mm512_mask_storeu_ps(s + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), inv));
    }
    if (end < t) memset(s + end, 0, (size_t)(t - end) * sizeof *s);
}

AVX512 void nn512_attn_softmax(float *s, int rows, int heads, int t, const float *key_bias,
                               int causal) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++) {
        int q = i % t, seq = i / (heads * t);
        softmax_row(s + (size_t)i * t, causal ? q + 1 : t, t,
                    key_bias ? key_bias + (size_t)seq * t : NULL);
    }
}

AVX512 void nn512_softmax_backward(float *ds, const float *p, const float *dp, int rows, int cols) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++) {
        size_t o = (size_t)i * cols;
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < cols; j += 16) {
            __mmask16 k = head_mask(cols - j);
            acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, dp + o + j),
                                  _mm512_maskz_loadu_ps(k, p + o + j), acc);
        }
        __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
        for (int j = 0; j < cols; j += 16) {
            __mmask16 k = head_mask(cols - j);
            __m512 pv = _mm512_maskz_loadu_ps(k, p + o + j);
            __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + o + j), dot);
            _mm512_mask_storeu_ps(ds + o + j, k, _mm512_mul_ps(pv, d));
        }
    }
}

/* ---- dropout: 16 Philox blocks (64 elements) per iteration ---- */

/* hi and lo 32-bit halves of a[i] * m in each of 16 lanes */
AVX512 static inline void mulhilo(__m512i a, uint32_t m, __m512i *hi, __m512i *lo) {
    __m512i mv = _mm512_set1_epi32((int)m);
    __m512i even = _mm512_mul_epu32(a, mv);
    __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), mv);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

/* Philox4x32-10 of blocks base .. base+15 (same low/high 32-bit split as
 * cz_philox4x32; the caller guarantees the high half is the same for all 16) */
AVX512 static void philox16(const cz_rng_stream *s, uint64_t base, __m512i w[4]) {
    __m512i c0 =
        _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)base),
                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i c1 = _mm512_set1_epi32((int)(uint32_t)(base >> 32));
    __m512i c2 = _mm512_set1_epi32((int)(uint32_t)s->stream);
    __m512i c3 = _mm512_set1_epi32((int)(uint32_t)(s->stream >> 32));
    uint32_t k0 = s->key[0], k1 = s->key[1];
    for (int round = 0; round < 10; round++) {
        __m512i hi0, lo0, hi1, lo1;
        mulhilo(c0, 0xD2511F53u, &hi0, &lo0);
        mulhilo(c2, 0xCD9E8D57u, &hi1, &lo1);
        c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
        c1 = lo1;
        c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    /* transpose to element order: element 4b + k = word k of block b */
    const __m512i lo32 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi32 =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i lo64 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i hi64 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    __m512i a = _mm512_permutex2var_epi32(c0, lo32, c1),
            b = _mm512_permutex2var_epi32(c0, hi32, c1);
    __m512i c = _mm512_permutex2var_epi32(c2, lo32, c3),
            d = _mm512_permutex2var_epi32(c2, hi32, c3);
    w[0] = _mm512_permutex2var_epi64(a, lo64, c);
    w[1] = _mm512_permutex2var_epi64(a, hi64, c);
    w[2] = _mm512_permutex2var_epi64(b, lo64, d);
    w[3] = _mm512_permutex2var_epi64(b, hi64, d);
}

/* elements [lo, hi) (stream indices) one block at a time, as the reference */
static void dropout_scalar(float *y, const float *x, float p, float scale, const cz_rng_stream *s,
                           uint64_t first, uint64_t lo, uint64_t hi) {
    for (uint64_t idx = lo; idx < hi; idx++) {
        size_t i = (size_t)(idx - first);
        y[i] = cz_rng_uniform(s, idx) >= p ? x[i] * scale : 0.0f;
    }
}

AVX512 void nn512_dropout(float *y, const float *x, size_t n, float p, const cz_rng_stream *s,
                          uint64_t first) {
    float scale = 1.0f / (1.0f - p);
    uint64_t end = first + n;
    uint64_t g0 = (first + 63) / 64, g1 = end / 64; /* whole groups of 64 inside */
    if (g0 >= g1) {
        dropout_scalar(y, x, p, scale, s, first, first, end);
        return;
    }
    dropout_scalar(y, x, p, scale, s, first, first, 64 * g0);
    dropout_scalar(y, x, p, scale, s, first, 64 * g1, end);
    /* keep iff (w >> 8) * 2^-24 >= p, i.e. (float)(w >> 8) >= p * 2^24 (exact) */
    const __m512 thr = _mm512_set1_ps(p * 16777216.0f), sc = _mm512_set1_ps(scale);
#pragma omp parallel for schedule(static)
    for (uint64_t g = g0; g < g1; g++) {
        uint64_t base = 16 * g;
        size_t i0 = (size_t)(64 * g - first);
        if ((base >> 32) != ((base + 15) >> 32)) { /* counter carry inside the group */
            dropout_scalar(y, x, p, scale, s, first, 64 * g, 64 * g + 64);
            continue;
        }
        __m512i w[4];
        philox16(s, base, w);
        for (int q = 0; q < 4; q++) {
            __m512 u = _mm512_cvtepu32_ps(_mm512_srli_epi32(w[q], 8));
            __mmask16 keep = _mm512_cmp_ps_mask(u, thr, _CMP_GE_OQ);
            __m512 v = _mm512_loadu_ps(x + i0 + 16 * q);
            _mm512_storeu_ps(y + i0 + 16 * q, _mm512_maskz_mul_ps(keep, v, sc));
        }
    }
}

/* ---- embeddings: 16 columns per task, tokens in order (as the reference) ---- */

AVX512 void nn512_embedding_backward(float *dtok, float *dpos, float *dseg, const float *dout,
                                     const int32_t *ids, const int32_t *segs, int n, int t, int c) {
    int blocks = (c + 15) / 16;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < blocks; b++) {
        int j0 = 16 * b;
        __mmask16 k = head_mask(c - j0);
        for (int i = 0; i < n; i++) {
            __m512 d = _mm512_maskz_loadu_ps(k, dout + (size_t)i * c + j0);
            float *pt = dtok + (size_t)ids[i] * c + j0, *pp = dpos + (size_t)(i % t) * c + j0;
            _mm512_mask_storeu_ps(pt, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, pt), d));
            _mm512_mask_storeu_ps(pp, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, pp), d));
            if (dseg) {
                float *ps = dseg + (size_t)segs[i] * c + j0;
                _mm512_mask_storeu_ps(ps, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, ps), d));
            }
        }
    }
}

/* ---- cross-entropy ---- */

AVX512 static void xent_row(float *z, double *loss, int32_t *argmax, int32_t label, int v) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    __m512i am = _mm512_setzero_si512(),
            idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    for (int j = 0; j < v; j += 16) {
        __mmask16 k = head_mask(v - j);
        __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, z + j);
        __mmask16 gt = _mm512_cmp_ps_mask(x, mx, _CMP_GT_OQ); /* first maximum per lane */
        mx = _mm512_mask_mov_ps(mx, gt, x);
        am = _mm512_mask_mov_epi32(am, gt, idx);
        idx = _mm512_add_epi32(idx, step);
    }
    float m = _mm512_reduce_max_ps(mx);
    /* the first index among lanes holding the maximum = the first maximum */
    *argmax =
        _mm512_mask_reduce_min_epi32(_mm512_cmp_ps_mask(mx, _mm512_set1_ps(m), _CMP_EQ_OQ), am);
    double zl = label >= 0 ? z[label] : 0.0;
    __m512 mv = _mm512_set1_ps(m);
    __m512d acc = _mm512_setzero_pd();
    for (int j = 0; j < v; j += 16) {
        __mmask16 k = head_mask(v - j);
        __m512 e =
            _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, z + j), mv)));
        _mm512_mask_storeu_ps(z + j, k, e);
        acc = add_pd16(acc, e);
    }
    double sum = _mm512_reduce_add_pd(acc);
    *loss = label >= 0 ? log(sum) - (zl - m) : 0.0;
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (int j = 0; j < v; j += 16) {
        __mmask16 k = head_mask(v - j);
        _mm512_mask_storeu_ps(z + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, z + j), inv));
    }
}

AVX512 void nn512_xent_forward(float *logits, double *loss, int32_t *argmax, const int32_t *labels,
                               int n, int v) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        xent_row(logits + (size_t)i * v, loss + i, argmax + i, labels[i], v);
}

#else /* not x86-64 with GCC/Clang: never selected */

int cz_nn_have_avx512(void) {
    return 0;
}

#endif
