/* The fast Transformer kernels, written once on portable vectors (vec.h) and
 * compiled for each instruction set (nn_isa.h). The definitions are the
 * `*_ref` loops of nn.c; how far each kernel may be from them:
 *   exp: vexp (vec.h), ~2 ulp.
 *   erf GELU: Phi(x) = erfc(-x/sqrt2)/2 with erfc from Numerical Recipes'
 *        erfcc (Chebyshev fit, fractional error < 1.2e-7 everywhere), its
 *        exponent -z^2 + P(t) formed in double and carried as float hi + lo,
 *        because float rounding of z^2 alone costs z^2 2^-24 relative
 *        (1e-6 at x = -6).
 *   tanh GELU: 0.5 x (1 + tanh u) = x sigmoid(2u), no cancellation for x < 0.
 *   Row reductions (LayerNorm moments, cross-entropy sum) accumulate in
 *   double, as the reference does, in VL lanes added in lane order; column
 *   reductions (bias, gamma, embedding gradients) run the reference's exact
 *   sequence of additions, so they are bitwise equal to it; dropout masks
 *   and the bf16 rounding are bitwise equal to the reference.
 * Results differ between instruction sets only by those roundings (the lane
 * count changes the order of the row sums) and never with the thread count:
 * threads split independent rows or columns (kernels.h). */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cloze/rng.h"
#include "nn_isa.h"
#include "vec.h"

/* ---- LayerNorm (Ba et al. 2016) ---- */

static void ln_row(float *y, float *sum, float *mean, float *rstd, const float *x, const float *r,
                   const float *gamma, const float *beta, int c, float eps) {
    vd acc = vd_zero();
    if (r)
        VLOOP(j, k, c, {
            vf v = vload_n(x + j, k) + vload_n(r + j, k);
            vstore_n(sum + j, v, k);
            acc = vd_add(acc, vwiden(v)); /* lanes past c load 0 */
        });
    else
        VLOOP(j, k, c, acc = vd_add(acc, vwiden(vload_n(x + j, k))););
    const float *s = r ? sum : x;
    double m = vsum_d(acc) / c;
    vd vacc = vd_zero();
    VLOOP(j, k, c, {
        vd d = vd_sub_s(vwiden(vload_n(s + j, k)), m);
        if (k < VL) d = vd_keep(d, k); /* lanes past c hold -m */
        vacc = vd_add(vacc, vd_mul(d, d));
    });
    double var = vsum_d(vacc) / c;
    double rs = 1.0 / sqrt(var + eps);
    *mean = (float)m;
    *rstd = (float)rs;
    float mf = (float)m, rf = (float)rs;
    VLOOP(j, k, c, {
        vf xh = (vload_n(s + j, k) - mf) * rf;
        vstore_n(y + j, xh * vload_n(gamma + j, k) + vload_n(beta + j, k), k);
    });
}

static void CZ_ISA_FN(layernorm_forward)(float *y, float *sum, float *mean, float *rstd,
                                         const float *x, const float *r, const float *gamma,
                                         const float *beta, int n, int c, float eps) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * c;
        ln_row(y + o, r ? sum + o : NULL, mean + i, rstd + i, x + o, r ? r + o : NULL, gamma, beta,
               c, eps);
    }
}

/* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma */
static void ln_dx_row(float *dx, const float *dy, const float *x, float mean, float rstd,
                      const float *gamma, int c) {
    vd sg = vd_zero(), sgx = vd_zero();
    VLOOP(j, k, c, {
        vf xh = (vload_n(x + j, k) - mean) * rstd;
        vf g = vload_n(dy + j, k) * vload_n(gamma + j, k); /* 0 past c */
        sg = vd_add(sg, vwiden(g));
        sgx = vd_add(sgx, vwiden(g * xh));
    });
    float a = (float)(vsum_d(sg) / c), b = (float)(vsum_d(sgx) / c);
    VLOOP(j, k, c, {
        vf xh = (vload_n(x + j, k) - mean) * rstd;
        vf g = vload_n(dy + j, k) * vload_n(gamma + j, k);
        vstore_n(dx + j, ((g - a) - xh * b) * rstd, k);
    });
}

/* dgamma, dbeta over VL columns from j0: the reference's additions in the
 * reference's order (double sums of exact double products) */
static inline void ln_dparam_cols(float *dgamma, float *dbeta, const float *dy, const float *x,
                                  const float *mean, const float *rstd, int n, int c, int j0,
                                  int k) {
    vd g = vd_zero(), b = vd_zero();
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * c + j0;
        vd d = vwiden(vload_n(dy + o, k));
        vf xh = (vload_n(x + o, k) - mean[i]) * rstd[i];
        g = vd_add(g, vd_mul(d, vwiden(xh)));
        b = vd_add(b, d);
    }
    vstore_n(dgamma + j0, vload_n(dgamma + j0, k) + vnarrow(g), k);
    vstore_n(dbeta + j0, vload_n(dbeta + j0, k) + vnarrow(b), k);
}

static void CZ_ISA_FN(layernorm_backward)(float *dx, float *dgamma, float *dbeta, const float *dy,
                                          const float *x, const float *mean, const float *rstd,
                                          const float *gamma, int n, int c) {
    int blocks = (c + VL - 1) / VL;
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int b = 0; b < blocks; b++) {
            if (c - VL * b >= VL) /* whole blocks with a constant lane count */
                ln_dparam_cols(dgamma, dbeta, dy, x, mean, rstd, n, c, VL * b, VL);
            else
                ln_dparam_cols(dgamma, dbeta, dy, x, mean, rstd, n, c, VL * b, c - VL * b);
        }
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)
            ln_dx_row(dx + (size_t)i * c, dy + (size_t)i * c, x + (size_t)i * c, mean[i], rstd[i],
                      gamma, c);
    }
}

/* flat elementwise loops run in chunks of CHUNK floats (whole vectors, one
 * tail per chunk at most) */
#define CHUNK 4096

/* ---- GELU (Hendrycks & Gimpel 2016) ---- */

/* Phi(x) = erfc(-x/sqrt2)/2: 1 - erfc(z)/2 for x >= 0, erfc(z)/2 below,
 * z = |x|/sqrt2. erfc(z) = t exp(-z^2 + P(t)), t = 1/(1 + z/2) (Numerical
 * Recipes, 2nd ed., erfcc). The exponent needs z^2 = x^2/2 to more than
 * float precision (float rounding alone costs x^2/2 2^-24 relative, 1e-6
 * at x = -6), so it is carried as hi + lo without FMA (which the baseline
 * lacks): x = xh + xl with xh the top 12 significant bits (Dekker 1971,
 * Veltkamp splitting by masking), so xh^2 and xh xl are exact in float and
 * x^2 = xh^2 + (2 xh xl + xl^2) to ~2^-46; the exponent P - x^2/2 is then
 * a float plus its rounding error lo (Fast2Sum and TwoSum, Knuth TAOCP
 * 4.2.2), and e^lo ~ 1 + lo. */
static inline vf phi_cdf(vf x) {
    static const float c[10] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                                0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    vf ax = vabs(x);
    vf t = 1.0f / (ax * (0.5f * 0.70710678118654752f) + 1.0f);
    vf p = vsplat(c[9]);
#pragma GCC unroll 9
    for (int i = 8; i >= 0; i--) p = p * t + c[i];
    vf xh = (vf)((vi)ax & (int32_t)0xfffff000), xl = ax - xh;
    /* -x^2/2 = q_hi + q_lo: the exact -xh^2/2 plus the small rest, then
     * renormalised (Fast2Sum, |q_hi| >= |q_lo|) so that q_lo is only the
     * rounding error of q */
    vf q_hi = xh * xh * -0.5f, q_lo = (xh * xl + xl * xl * 0.5f) * -1.0f;
    vf q = q_hi + q_lo;
    q_lo = q_lo - (q - q_hi);
    vf arg = p + q, bb = arg - p;
    vf lo = (p - (arg - bb)) + (q - bb) + q_lo; /* TwoSum error of p + q */
    vf e = vexp(arg);
    vf h = t * (e + e * lo) * 0.5f;
    return vsel(x >= 0.0f, 1.0f - h, h);
}

/* sigmoid(2u), 2u clamped to [-80, 80] (exp stays finite; the result is 0
 * or 1 to float precision there); also returns 1 - sigmoid */
static inline vf sigmoid2(vf u, vf *one_minus) {
    vf a = u * -2.0f;
    a = vmin(vmax(a, vsplat(-80.0f)), vsplat(80.0f));
    vf e = vexp(a);
    vf s = 1.0f / (1.0f + e);
    *one_minus = e * s;
    return s;
}

static inline vf tanh_arg(vf x) { /* sqrt(2/pi) (x + 0.044715 x^3) */
    return (x * x * 0.044715f * x + x) * 0.79788456080286536f;
}

static inline vf gelu_v(vf x, int tanh_form) {
    vf om;
    return tanh_form ? x * sigmoid2(tanh_arg(x), &om) : x * phi_cdf(x);
}

static inline vf gelu_grad_v(vf x, int tanh_form) {
    if (tanh_form) {
        /* 0.5 (1 + th) = s, 0.5 x (1 - th^2) du = 2 x s (1 - s) du */
        vf om, s = sigmoid2(tanh_arg(x), &om);
        vf du = (x * x * (3.0f * 0.044715f) + 1.0f) * 0.79788456080286536f;
        return s + ((x + x) * s) * (om * du);
    }
    /* Phi(x) + x phi(x) */
    vf pdf = vexp(x * x * -0.5f) * 0.39894228040143268f;
    return x * pdf + phi_cdf(x);
}

static void CZ_ISA_FN(gelu_forward)(float *y, float *x, const float *bias, size_t rows, int c,
                                    int tanh_form) {
    if (!bias) { /* one flat row, cut into chunks of CHUNK */
        size_t n = rows * (size_t)c, nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
        for (size_t q = 0; q < nc; q++) {
            float *xq = x + CHUNK * q, *yq = y + CHUNK * q;
            int len = n - CHUNK * q >= CHUNK ? CHUNK : (int)(n - CHUNK * q);
            VLOOP(j, k, len, vstore_n(yq + j, gelu_v(vload_n(xq + j, k), tanh_form), k););
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; i++) {
        float *xr = x + i * c, *yr = y + i * c;
        VLOOP(j, k, c, {
            vf u = vload_n(xr + j, k) + vload_n(bias + j, k);
            vstore_n(xr + j, u, k);
            vstore_n(yr + j, gelu_v(u, tanh_form), k);
        });
    }
}

static void CZ_ISA_FN(gelu_backward)(float *dx, const float *x, const float *dy, size_t n,
                                     int tanh_form) {
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < nc; q++) {
        size_t o = CHUNK * q;
        int len = n - o >= CHUNK ? CHUNK : (int)(n - o);
        VLOOP(j, k, len, {
            vf g = gelu_grad_v(vload_n(x + o + j, k), tanh_form);
            vstore_n(dx + o + j, vload_n(dy + o + j, k) * g, k);
        });
    }
}

/* ---- bias ---- */

static void CZ_ISA_FN(add_bias)(float *y, const float *bias, int n, int c, int ld) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *row = y + (size_t)i * ld;
        VLOOP(j, k, c, vstore_n(row + j, vload_n(row + j, k) + vload_n(bias + j, k), k););
    }
}

/* Column sums as the reference: each column in double, rows in order, by
 * one thread. A thread owns a contiguous range of VL-column blocks. It
 * takes the rows BIAS_ROWS at a time and, block after block, adds those rows
 * into the block's double accumulator: the chunk's rows stay in cache and in
 * the TLB while the blocks move right (walking one block down all rows
 * touches a new page per row when rows are 4 KiB or more apart; measured
 * faster, docs/performance.md, "Design decisions"). Accumulators live in memory
 * between chunks, for BIAS_GROUP blocks at a time. */
#define BIAS_GROUP (1024 / VL)
#define BIAS_ROWS 8
static void CZ_ISA_FN(bias_backward)(float *db, const float *dy, int n, int c, int ld) {
    int blocks = (c + VL - 1) / VL;
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int b_lo = (int)((long)blocks * id / nt), b_hi = (int)((long)blocks * (id + 1) / nt);
        for (int g0 = b_lo; g0 < b_hi; g0 += BIAS_GROUP) {
            int g1 = g0 + BIAS_GROUP < b_hi ? g0 + BIAS_GROUP : b_hi;
            vd acc[BIAS_GROUP];
            for (int b = g0; b < g1; b++) acc[b - g0] = vd_zero();
            for (int i0 = 0; i0 < n; i0 += BIAS_ROWS) {
                int i1 = i0 + BIAS_ROWS < n ? i0 + BIAS_ROWS : n;
                for (int b = g0; b < g1; b++) {
                    const float *col = dy + VL * b;
                    vd a = acc[b - g0];
                    if (c - VL * b >= VL) /* a whole block: plain vector loads */
                        for (int i = i0; i < i1; i++)
                            a = vd_add(a, vwiden(vload(col + (size_t)i * ld)));
                    else
                        for (int i = i0; i < i1; i++)
                            a = vd_add(a, vwiden(vload_n(col + (size_t)i * ld, c - VL * b)));
                    acc[b - g0] = a;
                }
            }
            for (int b = g0; b < g1; b++) {
                float *out = db + VL * b;
                int k = c - VL * b;
                vstore_n(out, vload_n(out, k) + vnarrow(acc[b - g0]), k);
            }
        }
    }
}

/* ---- attention softmax ---- */

/* z[0:k] = exp(z - m) (k lanes, k >= VL meaning all), returned with the
 * lanes past k at 0 so that sums can take it as it is */
static inline vf exp_minus_in_place(float *z, int k, float m) {
    vf e = vexp(vload_n(z, k) - m);
    if (k < VL) e = vsel(vmask_n(k), e, (vf){0});
    vstore_n(z, e, k);
    return e;
}

/* keys [0, end) of a row of t scores; keys past end get probability 0 */
static void softmax_row(float *s, int end, int t, const float *kb) {
    vf mx = vsplat(-FLT_MAX);
    VLOOP(j, k, end, {
        vf v = vload_n(s + j, k);
        if (kb) {
            v += vload_n(kb + j, k);
            vstore_n(s + j, v, k);
        }
        if (k < VL) v = vsel(vmask_n(k), v, vsplat(-FLT_MAX));
        mx = vmax(mx, v);
    });
    float m = vhmax(mx);
    vf acc = {0};
    VLOOP(j, k, end, acc += exp_minus_in_place(s + j, k, m););
    float inv = 1.0f / vsum(acc);
    VLOOP(j, k, end, vstore_n(s + j, vload_n(s + j, k) * inv, k););
    if (end < t) memset(s + end, 0, (size_t)(t - end) * sizeof *s);
}

static void CZ_ISA_FN(attn_softmax)(float *s, int rows, int heads, int t, const float *key_bias,
                                    int causal) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++) {
        int q = i % t, seq = i / (heads * t);
        softmax_row(s + (size_t)i * t, causal ? q + 1 : t, t,
                    key_bias ? key_bias + (size_t)seq * t : NULL);
    }
}

static void CZ_ISA_FN(softmax_backward)(float *ds, const float *p, const float *dp, int rows,
                                        int cols) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++) {
        size_t o = (size_t)i * cols;
        vf acc = {0};
        VLOOP(j, k, cols, acc += vload_n(dp + o + j, k) * vload_n(p + o + j, k););
        float dot = vsum(acc);
        VLOOP(j, k, cols,
              vstore_n(ds + o + j, vload_n(p + o + j, k) * (vload_n(dp + o + j, k) - dot), k););
    }
}

/* ---- dropout: VL Philox blocks (4 VL elements) per step ---- */

/* hi and lo 32-bit halves of a * m, lane by lane: written as the scalar
 * 32 x 32 -> 64 product so that the vectoriser uses its widening multiply
 * (vpmuludq on even and odd lanes); a product of 64-bit vector lanes would
 * become a full 64 x 64 multiply (vpmullq, or three vpmuludq on AVX2) */
static inline void mulhilo(vu a, uint32_t m, vu *hi, vu *lo) {
    uint32_t x[VL], h[VL], l[VL];
    memcpy(x, &a, sizeof x);
#pragma omp simd
    for (int i = 0; i < VL; i++) {
        uint64_t p = (uint64_t)x[i] * m;
        h[i] = (uint32_t)(p >> 32);
        l[i] = (uint32_t)p;
    }
    memcpy(hi, h, sizeof h);
    memcpy(lo, l, sizeof l);
}

/* Lane indices that transpose four vectors of words (w_k[b] = word k of
 * block b) into element order (element 4b + k): first the words 0,1 and 2,3
 * are interleaved (IL_*: lanes of the low or high half of two vectors, one
 * from each in turn), then the pairs (PR_*). */
#if VL == 16
#define IL_LO 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define IL_HI 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
#define PR_LO 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23
#define PR_HI 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31
#elif VL == 8
#define IL_LO 0, 8, 1, 9, 2, 10, 3, 11
#define IL_HI 4, 12, 5, 13, 6, 14, 7, 15
#define PR_LO 0, 1, 8, 9, 2, 3, 10, 11
#define PR_HI 4, 5, 12, 13, 6, 7, 14, 15
#else
#define IL_LO 0, 4, 1, 5
#define IL_HI 2, 6, 3, 7
#define PR_LO 0, 1, 4, 5
#define PR_HI 2, 3, 6, 7
#endif

/* Philox4x32-10 (Salmon et al. 2011) of blocks base .. base + VL - 1, the
 * same rounds and key schedule as cz_philox4x32 (src/core/rng.c); the caller
 * guarantees that the high 32 bits of the block number are the same for all.
 * e[q] = stream elements 4 base + q VL .. + VL - 1 (element 4b + k = word k
 * of block base + b). */
static void philox_v(const cz_rng_stream *s, uint64_t base, vu e[4]) {
    vu c0 = (vu)viota() + (uint32_t)base, c1 = (vu){0} + (uint32_t)(base >> 32);
    vu c2 = (vu){0} + (uint32_t)s->stream, c3 = (vu){0} + (uint32_t)(s->stream >> 32);
    uint32_t k0 = s->key[0], k1 = s->key[1];
    for (int round = 0; round < 10; round++) {
        vu hi0, lo0, hi1, lo1;
        mulhilo(c0, 0xD2511F53u, &hi0, &lo0);
        mulhilo(c2, 0xCD9E8D57u, &hi1, &lo1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    vu a = __builtin_shufflevector(c0, c1, IL_LO), b = __builtin_shufflevector(c2, c3, IL_LO);
    vu c = __builtin_shufflevector(c0, c1, IL_HI), d = __builtin_shufflevector(c2, c3, IL_HI);
    e[0] = __builtin_shufflevector(a, b, PR_LO);
    e[1] = __builtin_shufflevector(a, b, PR_HI);
    e[2] = __builtin_shufflevector(c, d, PR_LO);
    e[3] = __builtin_shufflevector(c, d, PR_HI);
}

/* elements [lo, hi) (stream indices) one at a time, as the reference */
static void dropout_one_by_one(float *y, const float *x, float p, float scale,
                               const cz_rng_stream *s, uint64_t first, uint64_t lo, uint64_t hi) {
    for (uint64_t idx = lo; idx < hi; idx++) {
        size_t i = (size_t)(idx - first);
        y[i] = cz_rng_uniform(s, idx) >= p ? x[i] * scale : 0.0f;
    }
}

static void CZ_ISA_FN(dropout)(float *y, const float *x, size_t n, float p, const cz_rng_stream *s,
                               uint64_t first) {
    const int G = 4 * VL; /* elements per group */
    float scale = 1.0f / (1.0f - p);
    uint64_t end = first + n;
    uint64_t g0 = (first + G - 1) / G, g1 = end / G; /* whole groups inside */
    if (g0 >= g1) {
        dropout_one_by_one(y, x, p, scale, s, first, first, end);
        return;
    }
    dropout_one_by_one(y, x, p, scale, s, first, first, G * g0);
    dropout_one_by_one(y, x, p, scale, s, first, G * g1, end);
    /* keep iff (w >> 8) 2^-24 >= p, i.e. (float)(w >> 8) >= p 2^24 (exact) */
    const float thr = p * 16777216.0f;
#pragma omp parallel for schedule(static)
    for (uint64_t g = g0; g < g1; g++) {
        uint64_t base = VL * g; /* first block */
        size_t i0 = (size_t)(G * g - first);
        if ((base >> 32) != ((base + VL - 1) >> 32)) { /* counter carry inside the group */
            dropout_one_by_one(y, x, p, scale, s, first, G * g, G * g + G);
            continue;
        }
        vu e[4];
        philox_v(s, base, e);
        for (int q = 0; q < 4; q++) {
            vf uf = __builtin_convertvector((vi)(e[q] >> 8), vf); /* < 2^24: exact */
            vf v = vload(x + i0 + VL * q) * scale;
            vstore(y + i0 + VL * q, vsel(uf >= thr, v, (vf){0}));
        }
    }
}

/* ---- embeddings ---- */

static void CZ_ISA_FN(embedding_forward)(float *out, const int32_t *ids, const int32_t *segs,
                                         const float *tok, const float *pos, const float *seg,
                                         int n, int t, int c) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *te = tok + (size_t)ids[i] * c, *pe = pos + (size_t)(i % t) * c;
        const float *se = seg ? seg + (size_t)segs[i] * c : NULL;
        float *o = out + (size_t)i * c;
        VLOOP(j, k, c, {
            vf v = vload_n(te + j, k) + vload_n(pe + j, k);
            if (se) v += vload_n(se + j, k);
            vstore_n(o + j, v, k);
        });
    }
}

/* VL columns per task, tokens in order (as the reference) */
static void CZ_ISA_FN(embedding_backward)(float *dtok, float *dpos, float *dseg, const float *dout,
                                          const int32_t *ids, const int32_t *segs, int n, int t,
                                          int c) {
    int blocks = (c + VL - 1) / VL;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < blocks; b++) {
        int j0 = VL * b, k = c - j0 < VL ? c - j0 : VL;
        for (int i = 0; i < n; i++) {
            vf d = vload_n(dout + (size_t)i * c + j0, k);
            float *pt = dtok + (size_t)ids[i] * c + j0, *pp = dpos + (size_t)(i % t) * c + j0;
            vstore_n(pt, vload_n(pt, k) + d, k);
            vstore_n(pp, vload_n(pp, k) + d, k);
            if (dseg) {
                float *ps = dseg + (size_t)segs[i] * c + j0;
                vstore_n(ps, vload_n(ps, k) + d, k);
            }
        }
    }
}

/* ---- softmax cross-entropy ---- */

static void xent_row(float *z, double *loss, int32_t *argmax, int32_t label, int v) {
    vf mx = vsplat(-INFINITY);
    vi am = {0}, idx = viota();
    VLOOP(j, k, v, {
        vf x = vload_n(z + j, k);
        if (k < VL) x = vsel(vmask_n(k), x, vsplat(-INFINITY));
        vi gt = x > mx; /* the first maximum per lane */
        mx = vsel(gt, x, mx);
        am = vseli(gt, idx, am);
        idx += VL;
    });
    float m = vhmax(mx);
    /* the smallest index among lanes holding the maximum = the first maximum */
    int32_t first = INT32_MAX;
    for (int l = 0; l < VL; l++)
        if (mx[l] == m && am[l] < first) first = am[l];
    *argmax = first;
    double zl = label >= 0 ? z[label] : 0.0;
    vd acc = vd_zero();
    VLOOP(j, k, v, acc = vd_add(acc, vwiden(exp_minus_in_place(z + j, k, m))););
    double sum = vsum_d(acc);
    *loss = label >= 0 ? log(sum) - (zl - m) : 0.0;
    float inv = (float)(1.0 / sum);
    VLOOP(j, k, v, vstore_n(z + j, vload_n(z + j, k) * inv, k););
}

static void CZ_ISA_FN(xent_forward)(float *logits, double *loss, int32_t *argmax,
                                    const int32_t *labels, int n, int v) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        xent_row(logits + (size_t)i * v, loss + i, argmax + i, labels[i], v);
}

static void CZ_ISA_FN(xent_backward)(float *probs, const int32_t *labels, const float *scale, int n,
                                     int v) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *p = probs + (size_t)i * v;
        if (labels[i] < 0 || scale[i] == 0.0f) {
            memset(p, 0, (size_t)v * sizeof *p);
            continue;
        }
        VLOOP(j, k, v, vstore_n(p + j, vload_n(p + j, k) * scale[i], k););
        p[labels[i]] -= scale[i];
    }
}

/* ---- bf16 rounding: cz_bf16_round (gemm_bf16.c) on VL lanes ---- */

static inline void bf16_round_v(float *y, const float *x, int k) {
    vu u = (vu)vload_n(x, k);
    vi zero = (vi)((u & 0x7f800000u) == 0);         /* zero or subnormal: signed zero */
    vi nan = (vi)((u & 0x7fffffffu) > 0x7f800000u); /* NaN: stays a quiet NaN */
    vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    vu quiet = (u | 0x00400000u) & 0xffff0000u;
    vu r = (vu)vseli(nan, (vi)quiet, (vi)rounded);
    r = (vu)vseli(zero, (vi)(u & 0x80000000u), (vi)r);
    vstore_n(y, (vf)r, k);
}

static void CZ_ISA_FN(bf16_round)(float *y, const float *x, size_t n) {
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < nc; q++) {
        size_t o = CHUNK * q;
        int len = n - o >= CHUNK ? CHUNK : (int)(n - o);
        VLOOP(j, k, len, bf16_round_v(y + o + j, x + o + j, k););
    }
}

const cz_nn_ops CZ_CAT(cz_nn_ops_, CZ_ISA_SUFFIX) = {
    CZ_ISA_FN(layernorm_forward), CZ_ISA_FN(layernorm_backward), CZ_ISA_FN(gelu_forward),
    CZ_ISA_FN(gelu_backward),     CZ_ISA_FN(add_bias),           CZ_ISA_FN(bias_backward),
    CZ_ISA_FN(attn_softmax),      CZ_ISA_FN(softmax_backward),   CZ_ISA_FN(dropout),
    CZ_ISA_FN(embedding_forward), CZ_ISA_FN(embedding_backward), CZ_ISA_FN(xent_forward),
    CZ_ISA_FN(xent_backward),     CZ_ISA_FN(bf16_round),
};
