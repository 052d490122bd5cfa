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

/* -x^2/2 = q + *lo exactly (vmul_err; -x/2 is exact) */
static inline vf neg_half_square(vf x, vf *lo) {
    vf h = x * -0.5f;
    vf q = h * x;
    *lo = vmul_err(h, x, q);
    return q;
}

/* Phi(x) = erfc(-x/sqrt2)/2: 1 - erfc(z)/2 for x >= 0, erfc(z)/2 below,
 * z = |x|/sqrt2. erfc(z) = t exp(-z^2 + P(t)), t = 1/(1 + z/2) (Numerical
 * Recipes, 2nd ed., erfcc). The exponent needs -z^2 = -x^2/2 to more than
 * float precision (float rounding alone costs x^2/2 2^-24 relative, 1e-6
 * at x = -6), so it is carried as q + q_lo exactly, and exp's reduction
 * (vec.h) takes the parts one at a time, largest first:
 *   r = ((q - n ln2_hi) + P) - n ln2_lo + q_lo,
 * where q - n ln2_hi is exact once |q| > 2.6 (Sterbenz: n ln2 is then within
 * a factor 2 of q, as |P| < 1.27) and otherwise rounds by at most 6e-8, and
 * each later sum is below 0.4 in magnitude and rounds by at most 1.5e-8.
 * |x| is clamped at 16, where Phi is 0 or 1 in float, so that x^2 stays
 * finite. Also returns q, q_lo for the density (gelu_grad_v). */
static inline vf phi_cdf(vf x, vf *q_out, vf *q_lo_out) {
    static const float c[10] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                                0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    vf ax = vmin(vabs(x), vsplat(16.0f));
    vf t = 1.0f / (ax * (0.5f * 0.70710678118654752f) + 1.0f);
    vf p = vsplat(c[9]);
#pragma GCC unroll 9
    for (int i = 8; i >= 0; i--) p = p * t + c[i];
    vf q_lo, q = neg_half_square(ax, &q_lo);
    vf n = vexp_n(q + p);
    vf r = (q - n * CZ_LN2_HI) + p;
    r = (r - n * CZ_LN2_LO) + q_lo;
    vf h = t * vexp_finish(r, n) * 0.5f;
    *q_out = q;
    *q_lo_out = q_lo;
    return vsel(x >= 0.0f, 1.0f - h, h);
}

/* sigmoid(2u), 2u clamped to [-80, 80] (exp stays finite; the result is 0
 * or 1 to float precision there); also returns 1 - sigmoid */
static inline vf sigmoid2(vf u, vf *one_minus) {
    vf a = u * -2.0f;
    a = vmin(vmax(a, vsplat(-80.0f)), vsplat(80.0f));
    vf e = vexp_in_range(a);
    vf s = 1.0f / (1.0f + e);
    *one_minus = e * s;
    return s;
}

static inline vf tanh_arg(vf x) { /* sqrt(2/pi) (x + 0.044715 x^3) */
    return (x * x * 0.044715f * x + x) * 0.79788456080286536f;
}

static inline vf gelu_v(vf x, int tanh_form) {
    vf om, q, q_lo;
    return tanh_form ? x * sigmoid2(tanh_arg(x), &om) : x * phi_cdf(x, &q, &q_lo);
}

static inline vf gelu_grad_v(vf x, int tanh_form) {
    if (tanh_form) {
        /* 0.5 (1 + th) = s, 0.5 x (1 - th^2) du = 2 x s (1 - s) du */
        vf om, s = sigmoid2(tanh_arg(x), &om);
        vf du = (x * x * (3.0f * 0.044715f) + 1.0f) * 0.79788456080286536f;
        return s + ((x + x) * s) * (om * du);
    }
    /* Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi) from the same
     * exact q + q_lo as Phi's exponent (phi_cdf) */
    vf q, q_lo, cdf = phi_cdf(x, &q, &q_lo);
    vf n = vexp_n(q);
    vf r = (q - n * CZ_LN2_HI - n * CZ_LN2_LO) + q_lo;
    vf pdf = vexp_finish(r, n) * 0.39894228040143268f;
    return x * pdf + cdf;
}

/* x += bias (when not NULL, written back: backward needs it), then
 * g = gelu(x) over len values to y, or with y16 through a block of floats
 * in L1 to bf16 (one loop doing both measured 1.7x slower than the two:
 * log, "bf16: kernels that write bf16") */
#define GELU_BLOCK 1024
static inline void gelu_span(float *y, uint16_t *y16, float *x, const float *bias, int len,
                             int tanh_form) {
    float t[GELU_BLOCK];
    for (int j0 = 0; j0 < len; j0 += GELU_BLOCK) {
        int n = len - j0 < GELU_BLOCK ? len - j0 : GELU_BLOCK;
        float *out = y16 ? t : y + j0, *xb = x + j0;
        if (bias)
            VLOOP(j, k, n, {
                vf u = vload_n(xb + j, k) + vload_n(bias + j0 + j, k);
                vstore_n(xb + j, u, k);
                vstore_n(out + j, gelu_v(u, tanh_form), k);
            });
        else
            VLOOP(j, k, n, vstore_n(out + j, gelu_v(vload_n(xb + j, k), tanh_form), k););
        if (y16) VLOOP(j, k, n, vstore_bf16_n(y16 + j0 + j, vload_n(t + j, k), k););
    }
}

static void CZ_ISA_FN(gelu_forward)(float *y, uint16_t *y16, float *x, const float *bias,
                                    size_t rows, int c, int tanh_form) {
    if (!bias) { /* one flat row, cut into chunks of CHUNK */
        size_t n = rows * (size_t)c, nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
        for (size_t q = 0; q < nc; q++) {
            size_t o = CHUNK * q;
            int len = n - o >= CHUNK ? CHUNK : (int)(n - o);
            gelu_span(y16 ? NULL : y + o, y16 ? y16 + o : NULL, x + o, NULL, len, tanh_form);
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; i++)
        gelu_span(y16 ? NULL : y + i * c, y16 ? y16 + i * c : NULL, x + i * c, bias, c, tanh_form);
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
/* Row i's values as cz_xent_backward leaves them (labels != NULL: dy holds
 * probabilities; d = p * scale, minus scale at the label, 0 for an ignored
 * row), or dy's as they are; VL columns from col, k of them */
static inline vf bias_row(const float *col, int j0, int i, int k, const int32_t *labels,
                          const float *scale) {
    vf x = vload_n(col, k);
    if (!labels) return x;
    if (labels[i] < 0 || scale[i] == 0.0f) return vsplat(0.0f);
    x = x * scale[i];
    int at = labels[i] - j0;
    if (at >= 0 && at < k) x[at] -= scale[i];
    return x;
}

/* cz_bias_backward, or with labels (cz_xent_bias_backward) the sums of the
 * dlogits that cz_xent_backward would write, made on the fly */
static void bias_backward_of(float *db, const float *dy, int n, int c, int ld,
                             const int32_t *labels, const float *scale) {
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
                            a = vd_add(a, vwiden(bias_row(col + (size_t)i * ld, VL * b, i, VL,
                                                          labels, scale)));
                    else
                        for (int i = i0; i < i1; i++)
                            a = vd_add(a, vwiden(bias_row(col + (size_t)i * ld, VL * b, i,
                                                          c - VL * b, labels, scale)));
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

static void CZ_ISA_FN(bias_backward)(float *db, const float *dy, int n, int c, int ld) {
    bias_backward_of(db, dy, n, c, ld, NULL, NULL);
}

static void CZ_ISA_FN(xent_bias_backward)(float *db, const float *probs, const int32_t *labels,
                                          const float *scale, int n, int v) {
    bias_backward_of(db, probs, n, v, v, labels, scale);
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

/* Philox4x32-10 (Salmon et al. 2011), the same rounds and key schedule as
 * cz_philox4x32 (src/core/rng.c), on VL blocks at a time. A block's four
 * words sit in the low halves of 64-bit lanes, one block per lane, so
 * VL / 2 blocks per vector and two vectors (h = 0, 1) per word: the 32 x 32
 * -> 64-bit multiply (vmul_wide_u32) then leaves a product's high word one shift
 * away and its low word in place (the high halves of the lanes are never
 * read: the multiply ignores them, and so do the XORs' low halves and the
 * final shuffle). */
#define PHILOX_ROUNDS 10
typedef struct philox_keys { /* 64-bit so that a XOR can take its key from memory */
    uint64_t k0[PHILOX_ROUNDS], k1[PHILOX_ROUNDS];
} philox_keys;

static philox_keys philox_schedule(const cz_rng_stream *s) {
    philox_keys k;
    uint32_t k0 = s->key[0], k1 = s->key[1];
    for (int round = 0; round < PHILOX_ROUNDS; round++) {
        k.k0[round] = k0;
        k.k1[round] = k1;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return k;
}

/* Lane indices for the transpose into element order (element 4b + k = word
 * k of block b): PAIR_W takes the low words of two vectors in turn (words
 * 0 and 1, or 2 and 3, of each block side by side); Q_LO and Q_HI then
 * interleave those pairs as 64-bit lanes, for the first and the second half
 * of the blocks. */
#if VL == 16
#define PAIR_W 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define Q_LO 0, 8, 1, 9, 2, 10, 3, 11
#define Q_HI 4, 12, 5, 13, 6, 14, 7, 15
#elif VL == 8
#define PAIR_W 0, 8, 2, 10, 4, 12, 6, 14
#define Q_LO 0, 4, 1, 5
#define Q_HI 2, 6, 3, 7
#else
#define PAIR_W 0, 4, 2, 6
#define Q_LO 0, 2
#define Q_HI 1, 3
#endif

typedef struct philox_words {
    vq c0, c1, c2, c3;
} philox_words;

static inline philox_words philox_start(const cz_rng_stream *s, uint64_t base, int first) {
    philox_words w;
    for (int l = 0; l < VL / 2; l++) w.c0[l] = (uint32_t)base + (uint32_t)(first + l);
    w.c1 = (vq){0} + (uint32_t)(base >> 32);
    w.c2 = (vq){0} + (uint32_t)s->stream;
    w.c3 = (vq){0} + (uint32_t)(s->stream >> 32);
    return w;
}

static inline void philox_round(philox_words *w, uint64_t k0, uint64_t k1) {
    vq p0 = vmul_wide_u32(w->c0, 0xD2511F53u), p1 = vmul_wide_u32(w->c2, 0xCD9E8D57u);
    w->c0 = (p1 >> 32) ^ w->c1 ^ k0;
    w->c1 = p1;
    w->c2 = (p0 >> 32) ^ w->c3 ^ k1;
    w->c3 = p0;
}

/* element order: the VL elements of the first and of the second half of
 * the VL / 2 blocks */
static inline void philox_elements(const philox_words *w, vu *e0, vu *e1) {
    vq w01 = (vq)__builtin_shufflevector((vu)w->c0, (vu)w->c1, PAIR_W);
    vq w23 = (vq)__builtin_shufflevector((vu)w->c2, (vu)w->c3, PAIR_W);
    *e0 = (vu)__builtin_shufflevector(w01, w23, Q_LO);
    *e1 = (vu)__builtin_shufflevector(w01, w23, Q_HI);
}

/* blocks base .. base + VL - 1 (the caller guarantees that the high 32 bits
 * of the block number are the same for all): e[q] = stream elements
 * 4 base + q VL .. + VL - 1 */
static inline void philox_v(const cz_rng_stream *s, const philox_keys *k, uint64_t base, vu e[4]) {
    philox_words a = philox_start(s, base, 0), b = philox_start(s, base, VL / 2);
#pragma GCC unroll 10
    for (int round = 0; round < PHILOX_ROUNDS; round++) {
        philox_round(&a, k->k0[round], k->k1[round]);
        philox_round(&b, k->k0[round], k->k1[round]);
    }
    philox_elements(&a, &e[0], &e[1]);
    philox_elements(&b, &e[2], &e[3]);
}

/* elements [lo, hi) (stream indices) one at a time, as the reference */
static void dropout_one_by_one(float *y, const float *x, float p, float scale,
                               const cz_rng_stream *s, uint64_t first, uint64_t lo, uint64_t hi) {
    for (uint64_t idx = lo; idx < hi; idx++) {
        size_t i = (size_t)(idx - first);
        y[i] = cz_rng_uniform(s, idx) >= p ? x[i] * scale : 0.0f;
    }
}

/* one group g of G = 4 VL whole elements inside [first, first + n) */
static inline void dropout_group(float *y, const float *x, float p, float scale, uint32_t thr,
                                 const cz_rng_stream *s, const philox_keys *keys, uint64_t first,
                                 uint64_t g) {
    const int G = 4 * VL;
    uint64_t base = VL * g; /* first block */
    size_t i0 = (size_t)(G * g - first);
    if ((base >> 32) != ((base + VL - 1) >> 32)) { /* counter carry inside the group */
        dropout_one_by_one(y, x, p, scale, s, first, G * g, G * g + G);
        return;
    }
    vu e[4];
    philox_v(s, keys, base, e);
    for (int q = 0; q < 4; q++) {
        vf v = vload(x + i0 + VL * q) * scale;
        vstore(y + i0 + VL * q, vsel(e[q] >= thr, v, (vf){0}));
    }
}

/* elements [first, first + n) of the stream; threads split the groups
 * when par (one call over a large block), else this thread does all (one
 * row of many, the caller's threads split the rows) */
static void dropout_span(float *y, const float *x, size_t n, float p, const cz_rng_stream *s,
                         uint64_t first, int par) {
    const int G = 4 * VL; /* elements per group */
    float scale = 1.0f / (1.0f - p);
    uint64_t end = first + n;
    uint64_t g0 = (first + G - 1) / G, g1 = end / G; /* whole groups inside */
    /* keep iff (w >> 8) 2^-24 >= p (cz_rng_uniform), i.e. for the integer
     * w >> 8 >= ceil(p 2^24), i.e. w >= 256 ceil(p 2^24) (p 2^24 is exact) */
    double need = ceil((double)p * 16777216.0);
    if (g0 >= g1 || !(need < 16777216.0)) { /* short, or p so close to 1 that none is kept */
        dropout_one_by_one(y, x, p, scale, s, first, first, end);
        return;
    }
    const uint32_t thr = need > 0 ? 256u * (uint32_t)need : 0u;
    dropout_one_by_one(y, x, p, scale, s, first, first, G * g0);
    dropout_one_by_one(y, x, p, scale, s, first, G * g1, end);
    const philox_keys keys = philox_schedule(s);
    if (!par) {
        for (uint64_t g = g0; g < g1; g++) dropout_group(y, x, p, scale, thr, s, &keys, first, g);
        return;
    }
#pragma omp parallel for schedule(static)
    for (uint64_t g = g0; g < g1; g++) dropout_group(y, x, p, scale, thr, s, &keys, first, g);
}

static void CZ_ISA_FN(dropout)(float *y, const float *x, size_t n, float p, const cz_rng_stream *s,
                               uint64_t first) {
    dropout_span(y, x, n, p, s, first, 1);
}

static void CZ_ISA_FN(dropout_rows)(float *y, const float *x, int rows, int cols, uint64_t stride,
                                    float p, const cz_rng_stream *s, uint64_t first) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        dropout_span(y + (size_t)r * cols, x + (size_t)r * cols, (size_t)cols, p, s,
                     first + (uint64_t)r * stride, 0);
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

/* Row p of v values: dlogits = p * scale, minus scale at the label, in
 * place; with bf16 written instead as bf16 to the first v halves of the
 * row's memory, a block at a time through h: block [j0, j0 + XB) lands on
 * the floats [j0 / 2, j0 / 2 + XB / 2), all read before (this block or an
 * earlier one), so the row needs no second buffer. */
#define XB 512
static void CZ_ISA_FN(xent_backward)(float *probs, const int32_t *labels, const float *scale, int n,
                                     int v, int bf16) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *p = probs + (size_t)i * v;
        if (labels[i] < 0 || scale[i] == 0.0f) {
            memset(p, 0, (size_t)v * sizeof *p);
            continue;
        }
        if (!bf16) {
            VLOOP(j, k, v, vstore_n(p + j, vload_n(p + j, k) * scale[i], k););
            p[labels[i]] -= scale[i];
            continue;
        }
        uint16_t h[XB];
        const vf s = vsplat(scale[i]);
        for (int j0 = 0; j0 < v; j0 += XB) {
            int len = v - j0 < XB ? v - j0 : XB, at = labels[i] - j0;
            VLOOP(j, k, len, {
                vf d = vload_n(p + j0 + j, k) * s;
                if (at >= j && at < j + k) d[at - j] -= scale[i];
                vstore_bf16_n(h + j, d, k);
            });
            memcpy((uint16_t *)p + j0, h, (size_t)len * sizeof *h);
        }
    }
}

/* ---- bf16 rounding: cz_bf16_round (gemm_bf16.c) on VL lanes ---- */

/* y = cz_bf16_round(x), or with y16 the bf16 bits (cz_bf16_store_n) */
static void bf16_convert(float *y, uint16_t *y16, const float *x, size_t n) {
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < nc; q++) {
        size_t o = CHUNK * q;
        int len = n - o >= CHUNK ? CHUNK : (int)(n - o);
        if (y16)
            VLOOP(j, k, len, vstore_bf16_n(y16 + o + j, vload_n(x + o + j, k), k););
        else
            VLOOP(j, k, len, vstore_n(y + o + j, (vf)vbf16_upper(vload_n(x + o + j, k)), k););
    }
}

static void CZ_ISA_FN(bf16_round)(float *y, const float *x, size_t n) {
    bf16_convert(y, NULL, x, n);
}

static void CZ_ISA_FN(bf16_store)(uint16_t *y, const float *x, size_t n) {
    bf16_convert(NULL, y, x, n);
}

/* ---- products of a few rows (cz_skinny_gemm) ---- */

/* y rows r += x[r, i..i+3] W[i..i+3, j..j+kk) (q = 4 rows of W) or one row
 * (q = 1): four W rows per pass quarter the traffic of the m output rows,
 * which stay in L1 */
static inline void skinny_rows(float *y, const float *x, int m, const float *w, int i, int q, int k,
                               int n, int j, int kk) {
    vf w0 = vload_n(w + (size_t)i * n + j, kk), w1 = w0, w2 = w0, w3 = w0;
    if (q == 4) {
        w1 = vload_n(w + (size_t)(i + 1) * n + j, kk);
        w2 = vload_n(w + (size_t)(i + 2) * n + j, kk);
        w3 = vload_n(w + (size_t)(i + 3) * n + j, kk);
    }
    for (int r = 0; r < m; r++) {
        const float *xr = x + (size_t)r * k + i;
        float *yr = y + (size_t)r * n + j;
        vf s = vsplat(xr[0]) * w0;
        if (q == 4) s += vsplat(xr[1]) * w1 + vsplat(xr[2]) * w2 + vsplat(xr[3]) * w3;
        vstore_n(yr, vload_n(yr, kk) + s, kk);
    }
}

static void CZ_ISA_FN(skinny_gemm)(float *y, const float *x, int m, const float *w, int trans,
                                   int k, int n, const float *bias) {
    if (trans) { /* y[r, v] = x[r] . W[v]: W's row v once, for 4 rows of x at a time */
#pragma omp parallel for schedule(static)
        for (int v = 0; v < n; v++) {
            const float *wv = w + (size_t)v * k;
            for (int r0 = 0; r0 < m; r0 += 4) {
                int rn = m - r0 < 4 ? m - r0 : 4;
                vf a[4] = {vsplat(0.0f), vsplat(0.0f), vsplat(0.0f), vsplat(0.0f)};
                VLOOP(i, kk, k, {
                    vf wi = vload_n(wv + i, kk);
                    for (int r = 0; r < rn; r++)
                        a[r] += vload_n(x + (size_t)(r0 + r) * k + i, kk) * wi;
                });
                for (int r = 0; r < rn; r++)
                    y[(size_t)(r0 + r) * n + v] = vsum(a[r]) + (bias ? bias[v] : 0.0f);
            }
        }
        return;
    }
#pragma omp parallel
    { /* each thread a contiguous range of VL-column blocks */
        int nt = omp_get_num_threads(), id = omp_get_thread_num(), blocks = (n + VL - 1) / VL;
        int j0 = (int)((long)blocks * id / nt) * VL, j1 = (int)((long)blocks * (id + 1) / nt) * VL;
        j1 = j1 < n ? j1 : n;
        for (int r = 0; r < m; r++)
            for (int j = j0; j < j1; j++) y[(size_t)r * n + j] = bias ? bias[j] : 0.0f;
        int i = 0;
        for (; i + 4 <= k; i += 4)
            for (int j = j0; j < j1; j += VL) skinny_rows(y, x, m, w, i, 4, k, n, j, j1 - j);
        for (; i < k; i++)
            for (int j = j0; j < j1; j += VL) skinny_rows(y, x, m, w, i, 1, k, n, j, j1 - j);
    }
}

const cz_nn_ops CZ_CAT(cz_nn_ops_, CZ_ISA_SUFFIX) = {
    CZ_ISA_FN(layernorm_forward), CZ_ISA_FN(layernorm_backward), CZ_ISA_FN(gelu_forward),
    CZ_ISA_FN(gelu_backward),     CZ_ISA_FN(add_bias),           CZ_ISA_FN(bias_backward),
    CZ_ISA_FN(attn_softmax),      CZ_ISA_FN(softmax_backward),   CZ_ISA_FN(dropout),
    CZ_ISA_FN(dropout_rows),      CZ_ISA_FN(embedding_forward),  CZ_ISA_FN(embedding_backward),
    CZ_ISA_FN(xent_forward),      CZ_ISA_FN(xent_backward),      CZ_ISA_FN(bf16_round),
    CZ_ISA_FN(bf16_store),        CZ_ISA_FN(xent_bias_backward), CZ_ISA_FN(skinny_gemm),
};
