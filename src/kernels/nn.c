/* Transformer kernels other than GEMM: LayerNorm, GELU, bias, attention
 * softmax, dropout, embeddings, cross-entropy.
 *
 * Each kernel is written once as a per-row (or per-column) function; `*_ref`
 * runs it in a plain loop, the fast path runs the same function under OpenMP
 * over independent rows or columns. Reductions across rows (bias, gamma,
 * embedding gradients) are parallel over columns with a sequential row loop,
 * so every sum has one fixed order whatever the thread count. */
#include "cloze/kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "cloze/rng.h"
#include "cloze/cpu.h"
#include "nn_isa.h"

/* The copy of nn_vec.c for the instruction set cz_cpu_kernel_isa() picked
 * (decided once per process), NULL for the scalar loops below. */
static const cz_nn_ops *vec_ops(void) {
    switch (cz_cpu_kernel_isa()) {
#if CZ_HAVE_X86_ISAS
    case CZ_ISA_AVX512:
        return &cz_nn_ops_avx512;
    case CZ_ISA_AVX2:
        return &cz_nn_ops_avx2;
#endif
    case CZ_ISA_BASELINE:
        return &cz_nn_ops_baseline;
    default:
        return NULL;
    }
}

/* Runs the vector copy's `fn` and returns, unless the scalar loops are chosen. */
#define VEC(fn, ...)                                                                               \
    do {                                                                                           \
        const cz_nn_ops *ops_ = vec_ops();                                                         \
        if (ops_) {                                                                                \
            ops_->fn(__VA_ARGS__);                                                                 \
            return;                                                                                \
        }                                                                                          \
    } while (0)

const char *cz_kernels_describe(void) {
    return cz_cpu_kernel_isa_note();
}

/* ---- LayerNorm (Ba, Kiros & Hinton 2016; BERT/GPT post-LN) ---- */

static void layernorm_row(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                          const float *beta, int c, float eps) {
    double s = 0;
    for (int j = 0; j < c; j++) s += x[j];
    double m = s / c;
    double v = 0;
    for (int j = 0; j < c; j++) v += (x[j] - m) * (x[j] - m);
    v /= c;
    double r = 1.0 / sqrt(v + eps);
    for (int j = 0; j < c; j++) y[j] = (float)((x[j] - m) * r) * gamma[j] + beta[j];
    *mean = (float)m;
    *rstd = (float)r;
}

void cz_layernorm_forward_ref(float *y, float *mean, float *rstd, const float *x,
                              const float *gamma, const float *beta, int n, int c, float eps) {
    for (int i = 0; i < n; i++)
        layernorm_row(y + (size_t)i * c, mean + i, rstd + i, x + (size_t)i * c, gamma, beta, c,
                      eps);
}

void cz_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                          const float *beta, int n, int c, float eps) {
    VEC(layernorm_forward, y, NULL, mean, rstd, x, NULL, gamma, beta, n, c, eps);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        layernorm_row(y + (size_t)i * c, mean + i, rstd + i, x + (size_t)i * c, gamma, beta, c,
                      eps);
}

void cz_add_layernorm_forward_ref(float *y, float *sum, float *mean, float *rstd, const float *x,
                                  const float *r, const float *gamma, const float *beta, int n,
                                  int c, float eps) {
    for (size_t i = 0; i < (size_t)n * c; i++) sum[i] = x[i] + r[i];
    cz_layernorm_forward_ref(y, mean, rstd, sum, gamma, beta, n, c, eps);
}

void cz_add_layernorm_forward(float *y, float *sum, float *mean, float *rstd, const float *x,
                              const float *r, const float *gamma, const float *beta, int n, int c,
                              float eps) {
    VEC(layernorm_forward, y, sum, mean, rstd, x, r, gamma, beta, n, c, eps);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * c;
        for (int j = 0; j < c; j++) sum[o + j] = x[o + j] + r[o + j];
        layernorm_row(y + o, mean + i, rstd + i, sum + o, gamma, beta, c, eps);
    }
}

static void layernorm_dx_row(float *dx, const float *dy, const float *x, float mean, float rstd,
                             const float *gamma, int c) {
    double sg = 0, sgx = 0;
    for (int j = 0; j < c; j++) {
        double xhat = (x[j] - mean) * rstd;
        double g = (double)dy[j] * gamma[j];
        sg += g;
        sgx += g * xhat;
    }
    sg /= c;
    sgx /= c;
    for (int j = 0; j < c; j++) {
        double xhat = (x[j] - mean) * rstd;
        double g = (double)dy[j] * gamma[j];
        dx[j] = (float)(rstd * (g - sg - xhat * sgx));
    }
}

static void layernorm_dparam_col(float *dgamma, float *dbeta, const float *dy, const float *x,
                                 const float *mean, const float *rstd, int n, int c, int j) {
    double dg = 0, db = 0;
    for (int i = 0; i < n; i++) {
        float d = dy[(size_t)i * c + j];
        dg += (double)d * ((x[(size_t)i * c + j] - mean[i]) * rstd[i]);
        db += d;
    }
    dgamma[j] += (float)dg;
    dbeta[j] += (float)db;
}

void cz_layernorm_backward_ref(float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *rstd,
                               const float *gamma, int n, int c) {
    for (int i = 0; i < n; i++)
        layernorm_dx_row(dx + (size_t)i * c, dy + (size_t)i * c, x + (size_t)i * c, mean[i],
                         rstd[i], gamma, c);
    for (int j = 0; j < c; j++) layernorm_dparam_col(dgamma, dbeta, dy, x, mean, rstd, n, c, j);
}

void cz_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                           const float *mean, const float *rstd, const float *gamma, int n, int c) {
    VEC(layernorm_backward, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++)
            layernorm_dx_row(dx + (size_t)i * c, dy + (size_t)i * c, x + (size_t)i * c, mean[i],
                             rstd[i], gamma, c);
#pragma omp for schedule(static)
        for (int j = 0; j < c; j++) layernorm_dparam_col(dgamma, dbeta, dy, x, mean, rstd, n, c, j);
    }
}

/* ---- GELU ---- */

#define CZ_SQRT_2_OVER_PI 0.7978845608028654
#define CZ_INV_SQRT_2 0.7071067811865476
#define CZ_INV_SQRT_2PI 0.3989422804014327

static inline float gelu(float xf, int tanh_form) {
    double x = xf;
    if (tanh_form)
        return (float)(0.5 * x * (1.0 + tanh(CZ_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))));
    /* Phi(x) = erfc(-x/sqrt2)/2 = (1 + erf(x/sqrt2))/2, written with erfc
     * because 1 + erf cancels for x < -5 (0 instead of ~1e-16 below -8.5) */
    return (float)(0.5 * x * erfc(-x * CZ_INV_SQRT_2));
}

static inline float gelu_grad(float xf, int tanh_form) {
    double x = xf;
    if (tanh_form) {
        double u = CZ_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
        double th = tanh(u);
        double du = CZ_SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x);
        return (float)(0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du);
    }
    /* d/dx [x Phi(x)] = Phi(x) + x phi(x) */
    return (float)(0.5 * erfc(-x * CZ_INV_SQRT_2) + x * CZ_INV_SQRT_2PI * exp(-0.5 * x * x));
}

void cz_gelu_forward_ref(float *y, const float *x, size_t n, int tanh_form) {
    for (size_t i = 0; i < n; i++) y[i] = gelu(x[i], tanh_form);
}

void cz_gelu_forward(float *y, const float *x, size_t n, int tanh_form) {
    VEC(gelu_forward, y, NULL, (float *)x, NULL, n, 1, tanh_form); /* x is only read */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = gelu(x[i], tanh_form);
}

void cz_gelu_backward_ref(float *dx, const float *x, const float *dy, size_t n, int tanh_form) {
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * gelu_grad(x[i], tanh_form);
}

void cz_gelu_backward(float *dx, const float *x, const float *dy, size_t n, int tanh_form) {
    VEC(gelu_backward, dx, x, dy, n, tanh_form);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * gelu_grad(x[i], tanh_form);
}

void cz_bias_gelu_forward_ref(float *g, float *u, const float *bias, int n, int c, int tanh_form) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c; j++) u[(size_t)i * c + j] += bias[j];
    cz_gelu_forward_ref(g, u, (size_t)n * c, tanh_form);
}

/* u += bias, then g = gelu(u) to g or, when g16, as bf16 to g16 */
static void bias_gelu(float *g, uint16_t *g16, float *u, const float *bias, int n, int c,
                      int tanh_form) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c; j++) {
            size_t k = (size_t)i * c + j;
            u[k] += bias[j];
            float y = gelu(u[k], tanh_form);
            if (g16)
                cz_bf16_store_n_ref(&g16[k], &y, 1);
            else
                g[k] = y;
        }
}

void cz_bias_gelu_forward(float *g, float *u, const float *bias, int n, int c, int tanh_form) {
    VEC(gelu_forward, g, NULL, u, bias, (size_t)n, c, tanh_form);
    bias_gelu(g, NULL, u, bias, n, c, tanh_form);
}

void cz_bias_gelu_forward_bf16(uint16_t *g, float *u, const float *bias, int n, int c,
                               int tanh_form) {
    VEC(gelu_forward, NULL, g, u, bias, (size_t)n, c, tanh_form);
    bias_gelu(NULL, g, u, bias, n, c, tanh_form);
}

/* ---- bias ---- */

/* omp simd: without it gcc -O2 keeps this scalar (y and bias might alias);
 * each element is one float add either way, so the bits do not change. */
void cz_add_bias(float *y, const float *bias, int n, int c, int ld) {
    VEC(add_bias, y, bias, n, c, ld);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *restrict row = y + (size_t)i * ld;
#pragma omp simd
        for (int j = 0; j < c; j++) row[j] += bias[j];
    }
}

static void bias_col(float *db, const float *dy, int n, int ld, int j) {
    double s = 0;
    for (int i = 0; i < n; i++) s += dy[(size_t)i * ld + j];
    db[j] += (float)s;
}

/* The dlogits cz_xent_backward writes, from the probabilities */
static float xent_dlogit(const float *probs, const int32_t *labels, const float *scale, int v,
                         int i, int j) {
    if (labels[i] < 0 || scale[i] == 0.0f) return 0.0f;
    float d = probs[(size_t)i * v + j] * scale[i];
    return j == labels[i] ? d - scale[i] : d;
}

static void xent_bias_col(float *db, const float *probs, const int32_t *labels, const float *scale,
                          int n, int v, int j) {
    double s = 0;
    for (int i = 0; i < n; i++) s += xent_dlogit(probs, labels, scale, v, i, j);
    db[j] += (float)s;
}

void cz_xent_bias_backward_ref(float *db, const float *probs, const int32_t *labels,
                               const float *scale, int n, int v) {
    for (int j = 0; j < v; j++) xent_bias_col(db, probs, labels, scale, n, v, j);
}

void cz_xent_bias_backward(float *db, const float *probs, const int32_t *labels, const float *scale,
                           int n, int v) {
    VEC(xent_bias_backward, db, probs, labels, scale, n, v);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < v; j++) xent_bias_col(db, probs, labels, scale, n, v, j);
}

void cz_bias_backward_ref(float *db, const float *dy, int n, int c, int ld) {
    for (int j = 0; j < c; j++) bias_col(db, dy, n, ld, j);
}

void cz_bias_backward(float *db, const float *dy, int n, int c, int ld) {
    VEC(bias_backward, db, dy, n, c, ld);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < c; j++) bias_col(db, dy, n, ld, j);
}

/* ---- attention softmax ---- */

static void attn_softmax_row(float *s, int i, int t, const float *key_bias, int causal) {
    int end = causal ? i + 1 : t; /* keys j >= end are excluded */
    float mx = -FLT_MAX;
    for (int j = 0; j < end; j++) {
        if (key_bias) s[j] += key_bias[j];
        if (s[j] > mx) mx = s[j];
    }
    double sum = 0;
    for (int j = 0; j < end; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < end; j++) s[j] *= inv;
    for (int j = end; j < t; j++) s[j] = 0.0f;
}

void cz_attn_softmax_ref(float *s, int t, const float *key_bias, int causal) {
    for (int i = 0; i < t; i++) attn_softmax_row(s + (size_t)i * t, i, t, key_bias, causal);
}

void cz_attn_softmax(float *s, int t, const float *key_bias, int causal) {
    VEC(attn_softmax, s, t, 1, t, key_bias, causal);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < t; i++) attn_softmax_row(s + (size_t)i * t, i, t, key_bias, causal);
}

void cz_attn_softmax_batch_ref(float *s, int nseq, int heads, int t, const float *key_bias,
                               int causal) {
    for (int q = 0; q < nseq * heads; q++)
        cz_attn_softmax_ref(s + (size_t)q * t * t, t,
                            key_bias ? key_bias + (size_t)(q / heads) * t : NULL, causal);
}

void cz_attn_softmax_batch(float *s, int nseq, int heads, int t, const float *key_bias,
                           int causal) {
    VEC(attn_softmax, s, nseq * heads * t, heads, t, key_bias, causal);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < nseq * heads * t; i++)
        attn_softmax_row(s + (size_t)i * t, i % t, t,
                         key_bias ? key_bias + (size_t)(i / (heads * t)) * t : NULL, causal);
}

static void softmax_backward_row(float *ds, const float *p, const float *dp, int cols) {
    double dot = 0;
    for (int j = 0; j < cols; j++) dot += (double)dp[j] * p[j];
    for (int j = 0; j < cols; j++) ds[j] = (float)(p[j] * (dp[j] - dot));
}

void cz_softmax_backward_ref(float *ds, const float *p, const float *dp, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        softmax_backward_row(ds + (size_t)i * cols, p + (size_t)i * cols, dp + (size_t)i * cols,
                             cols);
}

void cz_softmax_backward(float *ds, const float *p, const float *dp, int rows, int cols) {
    VEC(softmax_backward, ds, p, dp, rows, cols);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++)
        softmax_backward_row(ds + (size_t)i * cols, p + (size_t)i * cols, dp + (size_t)i * cols,
                             cols);
}

/* ---- dropout (Srivastava et al. 2014, inverted scaling) ---- */

void cz_dropout_ref(float *y, const float *x, size_t n, float p, const cz_rng_stream *s,
                    uint64_t first) {
    float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    for (size_t i = 0; i < n; i++) {
        int keep = p <= 0.0f || cz_rng_uniform(s, first + i) >= p;
        y[i] = keep ? x[i] * scale : 0.0f;
    }
}

/* Same mask as the reference, one Philox block (4 words) per 4 elements
 * instead of one block per element. */
void cz_dropout(float *y, const float *x, size_t n, float p, const cz_rng_stream *s,
                uint64_t first) {
    if (p <= 0.0f) {
        if (y != x) memcpy(y, x, n * sizeof *y);
        return;
    }
    VEC(dropout, y, x, n, p, s, first);
    float scale = 1.0f / (1.0f - p);
    /* blocks covering element indices [first, first + n) */
    uint64_t b0 = first >> 2, b1 = (first + n + 3) >> 2;
#pragma omp parallel for schedule(static)
    for (uint64_t b = b0; b < b1; b++) {
        uint32_t w[4];
        cz_philox4x32(s, b, w);
        for (int k = 0; k < 4; k++) {
            uint64_t idx = 4 * b + (uint64_t)k;
            if (idx < first || idx >= first + n) continue;
            size_t i = (size_t)(idx - first);
            float u = (float)(w[k] >> 8) * (1.0f / 16777216.0f);
            y[i] = u >= p ? x[i] * scale : 0.0f;
        }
    }
}

void cz_dropout_rows_ref(float *y, const float *x, int rows, int cols, uint64_t stride, float p,
                         const cz_rng_stream *s, uint64_t first) {
    for (int r = 0; r < rows; r++)
        cz_dropout_ref(y + (size_t)r * cols, x + (size_t)r * cols, (size_t)cols, p, s,
                       first + (uint64_t)r * stride);
}

void cz_dropout_rows(float *y, const float *x, int rows, int cols, uint64_t stride, float p,
                     const cz_rng_stream *s, uint64_t first) {
    if (p <= 0.0f) {
        if (y != x) memcpy(y, x, (size_t)rows * (size_t)cols * sizeof *y);
        return;
    }
    VEC(dropout_rows, y, x, rows, cols, stride, p, s, first);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        cz_dropout_ref(y + (size_t)r * cols, x + (size_t)r * cols, (size_t)cols, p, s,
                       first + (uint64_t)r * stride);
}

/* ---- embeddings ---- */

void cz_embedding_forward(float *out, const int32_t *ids, const int32_t *segs, const float *tok,
                          const float *pos, const float *seg, int n, int t, int c) {
    VEC(embedding_forward, out, ids, segs, tok, pos, seg, n, t, c);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *te = tok + (size_t)ids[i] * c;
        const float *pe = pos + (size_t)(i % t) * c;
        float *o = out + (size_t)i * c;
        for (int j = 0; j < c; j++) o[j] = te[j] + pe[j];
        if (seg) {
            const float *se = seg + (size_t)segs[i] * c;
            for (int j = 0; j < c; j++) o[j] += se[j];
        }
    }
}

static void embedding_backward_col(float *dtok, float *dpos, float *dseg, const float *dout,
                                   const int32_t *ids, const int32_t *segs, int n, int t, int c,
                                   int j) {
    for (int i = 0; i < n; i++) {
        float d = dout[(size_t)i * c + j];
        dtok[(size_t)ids[i] * c + j] += d;
        dpos[(size_t)(i % t) * c + j] += d;
        if (dseg) dseg[(size_t)segs[i] * c + j] += d;
    }
}

void cz_embedding_backward_ref(float *dtok, float *dpos, float *dseg, const float *dout,
                               const int32_t *ids, const int32_t *segs, int n, int t, int c) {
    for (int j = 0; j < c; j++)
        embedding_backward_col(dtok, dpos, dseg, dout, ids, segs, n, t, c, j);
}

void cz_embedding_backward(float *dtok, float *dpos, float *dseg, const float *dout,
                           const int32_t *ids, const int32_t *segs, int n, int t, int c) {
    VEC(embedding_backward, dtok, dpos, dseg, dout, ids, segs, n, t, c);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < c; j++)
        embedding_backward_col(dtok, dpos, dseg, dout, ids, segs, n, t, c, j);
}

/* ---- softmax cross-entropy ---- */

static void xent_row(float *z, double *loss, int32_t *argmax, int32_t label, int v) {
    float mx = z[0];
    int am = 0;
    for (int j = 1; j < v; j++)
        if (z[j] > mx) {
            mx = z[j];
            am = j;
        }
    double sum = 0;
    for (int j = 0; j < v; j++) sum += exp((double)z[j] - mx);
    double logsum = log(sum);
    *loss = label >= 0 ? logsum - ((double)z[label] - mx) : 0.0;
    *argmax = am;
    for (int j = 0; j < v; j++) z[j] = (float)exp((double)z[j] - mx - logsum);
}

void cz_xent_forward_ref(float *logits, double *loss, int32_t *argmax, const int32_t *labels, int n,
                         int v) {
    for (int i = 0; i < n; i++)
        xent_row(logits + (size_t)i * v, loss + i, argmax + i, labels[i], v);
}

void cz_xent_forward(float *logits, double *loss, int32_t *argmax, const int32_t *labels, int n,
                     int v) {
    VEC(xent_forward, logits, loss, argmax, labels, n, v);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        xent_row(logits + (size_t)i * v, loss + i, argmax + i, labels[i], v);
}

static void xent_backward_row(float *p, int32_t label, float scale, int v) {
    if (label < 0 || scale == 0.0f) {
        memset(p, 0, (size_t)v * sizeof *p);
        return;
    }
    for (int j = 0; j < v; j++) p[j] *= scale;
    p[label] -= scale;
}

void cz_xent_backward_ref(float *probs, const int32_t *labels, const float *scale, int n, int v) {
    for (int i = 0; i < n; i++) xent_backward_row(probs + (size_t)i * v, labels[i], scale[i], v);
}

void cz_xent_backward(float *probs, const int32_t *labels, const float *scale, int n, int v) {
    VEC(xent_backward, probs, labels, scale, n, v, 0);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) xent_backward_row(probs + (size_t)i * v, labels[i], scale[i], v);
}

/* Row by row: the row's fp32 result, then its bf16 bits to the row's first
 * v halves, in ascending order (element j's halves lie on float j / 2,
 * already read). */
void cz_xent_backward_bf16(float *probs, const int32_t *labels, const float *scale, int n, int v) {
    VEC(xent_backward, probs, labels, scale, n, v, 1);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *p = probs + (size_t)i * v;
        xent_backward_row(p, labels[i], scale[i], v);
        for (int j = 0; j < v; j++) {
            float x = p[j];
            uint16_t h;
            cz_bf16_store_n_ref(&h, &x, 1);
            memcpy((uint16_t *)p + j, &h, sizeof h);
        }
    }
}

/* ---- bf16 rounding ---- */

void cz_bf16_round_n_ref(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = cz_bf16_round(x[i]);
}

void cz_bf16_round_n(float *y, const float *x, size_t n) {
    VEC(bf16_round, y, x, n);
    cz_bf16_round_n_ref(y, x, n);
}

void cz_bf16_store_n_ref(uint16_t *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float r = cz_bf16_round(x[i]);
        uint32_t u;
        memcpy(&u, &r, 4);
        y[i] = (uint16_t)(u >> 16);
    }
}

void cz_bf16_store_n(uint16_t *y, const float *x, size_t n) {
    VEC(bf16_store, y, x, n);
    cz_bf16_store_n_ref(y, x, n);
}

void cz_bf16_load_n(float *y, const uint16_t *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)x[i] << 16;
        memcpy(&y[i], &u, 4);
    }
}

/* ---- products of a few rows (decoding) ---- */

static float skinny_out(const float *x, int r, const float *w, int trans, int k, int n, int j,
                        const float *bias) {
    double s = bias ? bias[j] : 0.0;
    for (int i = 0; i < k; i++)
        s += (double)x[(size_t)r * k + i] * (trans ? w[(size_t)j * k + i] : w[(size_t)i * n + j]);
    return (float)s;
}

void cz_skinny_gemm_ref(float *y, const float *x, int m, const float *w, int trans, int k, int n,
                        const float *bias) {
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++)
            y[(size_t)r * n + j] = skinny_out(x, r, w, trans, k, n, j, bias);
}

void cz_skinny_gemm(float *y, const float *x, int m, const float *w, int trans, int k, int n,
                    const float *bias) {
    VEC(skinny_gemm, y, x, m, w, trans, k, n, bias);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < n; j++)
        for (int r = 0; r < m; r++)
            y[(size_t)r * n + j] = skinny_out(x, r, w, trans, k, n, j, bias);
}
