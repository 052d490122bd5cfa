/* Kernels: each fast path against its scalar reference, and each backward
 * against central finite differences of its forward.
 *
 * The fast path is the copy of src/kernels/nn_vec.c that cz_cpu_kernel_isa
 * picks; ctest runs this program once per path with CLOZE_KERNELS=scalar,
 * baseline, avx2, avx512 (tests/kernels.cmake), and a path the CPU cannot
 * run exits 77 (skipped). Every path is also run at 1, 2 and 3 threads and
 * must give the same bits (test_threads).
 *
 * Finite differences run on the float kernels with an objective
 * f = sum_i w_i out_i (w random) accumulated in double. Inputs are O(1) and
 * h = 1e-2: rounding of the float outputs puts ~1e-6 noise on f, i.e. ~5e-5
 * on (f(x+h) - f(x-h)) / 2h, and the truncation error is O(h^2 f''') ~ 1e-4,
 * hence the tolerance 1e-3 + 1e-2 |analytic|. A wrong formula (a missing
 * term, a wrong sign or factor) is off by O(|analytic|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "cloze/cpu.h"
#include "cloze/kernels.h"
#include "cloze/rng.h"

/* How far the vector exp (src/kernels/vec.h, vexp) may be from expf, in
 * units of 2^-24 relative: ~2 ulp from the polynomial and the reduction,
 * doubled for the baseline copy, which has no FMA (each step rounds). */
#define EXP_ULPS 4.0

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void fill_normal(float *x, size_t n, uint64_t key, float scale) {
    cz_rng_stream s = cz_rng_stream_make(7, CZ_RNG_TEST, key, 0, 0);
    for (size_t i = 0; i < n; i++) x[i] = scale * (float)cz_rng_normal(&s, i);
}

static double max_rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, mx = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
    }
    return d / mx;
}

/* the objective and its finite difference in one input element */
typedef double (*objective_fn)(void *ctx);

static void fd_check(const char *what, objective_fn f, void *ctx, float *x, size_t n,
                     const float *analytic) {
    const float h = 1e-2f;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + h;
        double fp = f(ctx);
        x[i] = keep - h;
        double fm = f(ctx);
        x[i] = keep;
        double num = (fp - fm) / (2.0 * h);
        double tol = 1e-3 + 1e-2 * fabs(analytic[i]);
        double e = fabs(num - analytic[i]) / tol;
        if (e > worst) worst = e;
        if (e > 1)
            fprintf(stderr, "%s[%zu]: numeric %.6g analytic %.6g\n", what, i, num, analytic[i]);
        CHECK(e <= 1);
    }
    printf("%-28s fd ok (%zu elements, worst error/tolerance %.3f)\n", what, n, worst);
}

static double weighted(const float *out, const float *w, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * out[i];
    return s;
}

/* ---- LayerNorm ---- */

enum { LN_N = 4, LN_C = 12 };
typedef struct ln_ctx {
    float x[LN_N * LN_C], g[LN_C], b[LN_C], w[LN_N * LN_C];
    float y[LN_N * LN_C], mean[LN_N], rstd[LN_N];
} ln_ctx;

static double ln_obj(void *p) {
    ln_ctx *c = p;
    cz_layernorm_forward_ref(c->y, c->mean, c->rstd, c->x, c->g, c->b, LN_N, LN_C, 1e-5f);
    return weighted(c->y, c->w, LN_N * LN_C);
}

static void test_layernorm(void) {
    static ln_ctx c;
    fill_normal(c.x, LN_N * LN_C, 1, 2.0f);
    for (int i = 0; i < LN_C; i++) c.x[i] += 3.0f; /* a row with a large mean */
    fill_normal(c.g, LN_C, 2, 1.0f);
    fill_normal(c.b, LN_C, 3, 1.0f);
    fill_normal(c.w, LN_N * LN_C, 4, 1.0f);
    float dx[LN_N * LN_C], dg[LN_C] = {0}, db[LN_C] = {0};
    ln_obj(&c);
    cz_layernorm_backward_ref(dx, dg, db, c.w, c.x, c.mean, c.rstd, c.g, LN_N, LN_C);
    fd_check("layernorm dx", ln_obj, &c, c.x, LN_N * LN_C, dx);
    fd_check("layernorm dgamma", ln_obj, &c, c.g, LN_C, dg);
    fd_check("layernorm dbeta", ln_obj, &c, c.b, LN_C, db);

    /* fast vs reference on a larger shape */
    enum { N = 67, C = 96 };
    static float x[N * C], g[C], b[C], y1[N * C], y2[N * C], m1[N], m2[N], r1[N], r2[N];
    static float dy[N * C], dx1[N * C], dx2[N * C], dg1[C], dg2[C], db1[C], db2[C];
    fill_normal(x, N * C, 5, 1.5f);
    fill_normal(g, C, 6, 1.0f);
    fill_normal(b, C, 7, 1.0f);
    fill_normal(dy, N * C, 8, 1.0f);
    cz_layernorm_forward_ref(y1, m1, r1, x, g, b, N, C, 1e-12f);
    cz_layernorm_forward(y2, m2, r2, x, g, b, N, C, 1e-12f);
    CHECK(max_rel_diff(y2, y1, N * C) < 1e-6 && max_rel_diff(r2, r1, N) < 1e-6);
    cz_layernorm_backward_ref(dx1, dg1, db1, dy, x, m1, r1, g, N, C);
    cz_layernorm_backward(dx2, dg2, db2, dy, x, m1, r1, g, N, C);
    CHECK(max_rel_diff(dx2, dx1, N * C) < 1e-6 && max_rel_diff(dg2, dg1, C) < 1e-6 &&
          max_rel_diff(db2, db1, C) < 1e-6);
    printf("%-28s fast == ref\n", "layernorm");
}

/* ---- GELU ---- */

enum { GE_N = 64 };
typedef struct gelu_ctx {
    float x[GE_N], y[GE_N], w[GE_N];
    int tanh_form;
} gelu_ctx;

static double gelu_obj(void *p) {
    gelu_ctx *c = p;
    cz_gelu_forward_ref(c->y, c->x, GE_N, c->tanh_form);
    return weighted(c->y, c->w, GE_N);
}

static void test_gelu(void) {
    for (int form = 0; form < 2; form++) {
        static gelu_ctx c;
        c.tanh_form = form;
        fill_normal(c.x, GE_N, 10, 2.0f);
        fill_normal(c.w, GE_N, 11, 1.0f);
        float dx[GE_N];
        cz_gelu_backward_ref(dx, c.x, c.w, GE_N, form);
        fd_check(form ? "gelu (tanh) dx" : "gelu (erf) dx", gelu_obj, &c, c.x, GE_N, dx);
        /* known values: gelu(1) = Phi(1) = 0.8413447; tanh form 0.8411920 */
        float one = 1.0f, y;
        cz_gelu_forward_ref(&y, &one, 1, form);
        CHECK(fabs(y - (form ? 0.8411920f : 0.8413447f)) < 1e-6);
        enum { N = 10007 };
        static float x[N], y1[N], y2[N], dy[N], d1[N], d2[N];
        fill_normal(x, N, 12, 3.0f);
        fill_normal(dy, N, 13, 1.0f);
        cz_gelu_forward_ref(y1, x, N, form);
        cz_gelu_forward(y2, x, N, form);
        cz_gelu_backward_ref(d1, x, dy, N, form);
        cz_gelu_backward(d2, x, dy, N, form);
        CHECK(max_rel_diff(y2, y1, N) < 1e-6 && max_rel_diff(d2, d1, N) < 1e-6);
    }
    printf("%-28s fast == ref\n", "gelu");
}

/* ---- attention softmax with padding and causal masks ---- */

enum { SM_T = 6 };
typedef struct sm_ctx {
    float s[SM_T * SM_T], p[SM_T * SM_T], w[SM_T * SM_T], key_bias[SM_T];
    int causal, use_bias;
} sm_ctx;

static double sm_obj(void *p) {
    sm_ctx *c = p;
    memcpy(c->p, c->s, sizeof c->s);
    cz_attn_softmax_ref(c->p, SM_T, c->use_bias ? c->key_bias : NULL, c->causal);
    return weighted(c->p, c->w, SM_T * SM_T);
}

static void test_softmax(void) {
    for (int mode = 0; mode < 3; mode++) {
        static sm_ctx c;
        c.causal = mode == 2;
        c.use_bias = mode == 1;
        fill_normal(c.s, SM_T * SM_T, 20, 2.0f);
        fill_normal(c.w, SM_T * SM_T, 21, 1.0f);
        for (int j = 0; j < SM_T; j++) c.key_bias[j] = j >= SM_T - 2 ? -10000.0f : 0.0f;
        sm_obj(&c);
        /* masks: padded keys and future keys get probability 0, rows sum to 1 */
        for (int i = 0; i < SM_T; i++) {
            double sum = 0;
            for (int j = 0; j < SM_T; j++) {
                float pij = c.p[i * SM_T + j];
                sum += pij;
                if ((c.use_bias && j >= SM_T - 2) || (c.causal && j > i)) CHECK(pij == 0.0f);
            }
            CHECK(fabs(sum - 1) < 1e-6);
        }
        float ds[SM_T * SM_T];
        cz_softmax_backward_ref(ds, c.p, c.w, SM_T, SM_T);
        const char *names[3] = {"softmax dscores", "softmax dscores (padding)",
                                "softmax dscores (causal)"};
        fd_check(names[mode], sm_obj, &c, c.s, SM_T * SM_T, ds);

        enum { T = 53 };
        static float s1[T * T], s2[T * T], kb[T], dp[T * T], d1[T * T], d2[T * T];
        fill_normal(s1, T * T, 22, 3.0f);
        memcpy(s2, s1, sizeof s1);
        for (int j = 0; j < T; j++) kb[j] = j % 7 == 3 ? -10000.0f : 0.0f;
        cz_attn_softmax_ref(s1, T, c.use_bias ? kb : NULL, c.causal);
        cz_attn_softmax(s2, T, c.use_bias ? kb : NULL, c.causal);
        CHECK(max_rel_diff(s2, s1, T * T) < 1e-6);
        fill_normal(dp, T * T, 23, 1.0f);
        cz_softmax_backward_ref(d1, s1, dp, T, T);
        cz_softmax_backward(d2, s1, dp, T, T);
        CHECK(max_rel_diff(d2, d1, T * T) < 1e-6);
    }
    printf("%-28s fast == ref\n", "softmax");
}

/* ---- dropout ---- */

static void test_dropout(void) {
    enum { N = 1 << 20 };
    static float x[N], y1[N], y2[N], y3[N];
    for (size_t i = 0; i < N; i++) x[i] = 1.0f + (float)(i % 13);
    const float p = 0.1f;
    cz_rng_stream s = cz_rng_stream_make(1, CZ_RNG_DROPOUT, 3, 17, 2 << 8 | 1);
    cz_dropout_ref(y1, x, N, p, &s, 0);
    cz_dropout(y2, x, N, p, &s, 0);
    CHECK(memcmp(y1, y2, sizeof y1) == 0); /* the same mask, bit for bit */
    /* rate: dropped fraction within 5 sigma of p; kept values scaled by 1/(1-p) */
    size_t dropped = 0;
    for (size_t i = 0; i < N; i++) {
        if (y1[i] == 0.0f)
            dropped++;
        else
            CHECK(fabsf(y1[i] - x[i] / (1.0f - p)) <= 1e-6f * y1[i]);
    }
    double rate = (double)dropped / N, sigma = sqrt(p * (1 - p) / N);
    printf("%-28s rate %.5f (p %.2f, sigma %.5f)\n", "dropout", rate, p, sigma);
    CHECK(fabs(rate - p) < 5 * sigma);
    /* a sub-range with an unaligned first index gets the same mask elements */
    const size_t k = 4093;
    cz_dropout(y3, x + k, N - k, p, &s, k);
    CHECK(memcmp(y3, y1 + k, (N - k) * sizeof *y3) == 0);
    /* another stream (other sample) gives another mask; in place works */
    cz_rng_stream s2 = cz_rng_stream_make(1, CZ_RNG_DROPOUT, 3, 18, 2 << 8 | 1);
    memcpy(y3, x, sizeof x);
    cz_dropout(y3, y3, N, p, &s2, 0);
    size_t same = 0;
    for (size_t i = 0; i < N; i++) same += (y3[i] == 0.0f) == (y1[i] == 0.0f);
    CHECK(same < N - N / 20);
    /* p = 0 is the identity */
    cz_dropout(y3, x, N, 0.0f, &s, 0);
    CHECK(memcmp(y3, x, sizeof x) == 0);
    /* rows cut from a wider grid (attention probabilities of a batch padded
     * to fewer positions): row r of a [R, C] block is the first C elements
     * of row r of the [R, W] grid's mask, bit for bit, and the same as the
     * reference rows; a row length that is no multiple of the vector width
     * and a grid offset past 2^32 blocks too */
    const int R = 37, W = 512, Cs[3] = {512, 45, 130};
    const uint64_t offs[2] = {3 * (uint64_t)W * W, (1ULL << 34) + 3};
    for (int t = 0; t < 6; t++) {
        int C = Cs[t % 3];
        uint64_t first = offs[t / 3];
        cz_dropout_rows(y2, x, R, C, W, p, &s, first);
        cz_dropout_rows_ref(y1, x, R, C, W, p, &s, first);
        CHECK(memcmp(y1, y2, (size_t)R * C * sizeof *y1) == 0);
        cz_dropout_ref(y3, x, (size_t)R * W, p, &s, first); /* the whole grid, x row-major */
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                float want =
                    y3[(size_t)r * W + c] == 0.0f ? 0.0f : x[(size_t)r * C + c] / (1.0f - p);
                CHECK(fabsf(y2[(size_t)r * C + c] - want) <= 1e-6f * want);
            }
    }
}

/* ---- embeddings ---- */

enum { EM_V = 7, EM_T = 4, EM_S = 2, EM_C = 5, EM_N = 8 };
typedef struct emb_ctx {
    float tok[EM_V * EM_C], pos[EM_T * EM_C], seg[EM_S * EM_C], out[EM_N * EM_C], w[EM_N * EM_C];
    int32_t ids[EM_N], segs[EM_N];
} emb_ctx;

static double emb_obj(void *p) {
    emb_ctx *c = p;
    cz_embedding_forward(c->out, c->ids, c->segs, c->tok, c->pos, c->seg, EM_N, EM_T, EM_C);
    return weighted(c->out, c->w, EM_N * EM_C);
}

static void test_embedding(void) {
    static emb_ctx c;
    fill_normal(c.tok, sizeof c.tok / 4, 30, 1.0f);
    fill_normal(c.pos, sizeof c.pos / 4, 31, 1.0f);
    fill_normal(c.seg, sizeof c.seg / 4, 32, 1.0f);
    fill_normal(c.w, sizeof c.w / 4, 33, 1.0f);
    const int32_t ids[EM_N] = {3, 1, 3, 6, 0, 3, 2, 1}; /* repeated ids accumulate */
    for (int i = 0; i < EM_N; i++) {
        c.ids[i] = ids[i];
        c.segs[i] = (i % EM_T) >= 2;
    }
    float dtok[EM_V * EM_C] = {0}, dpos[EM_T * EM_C] = {0}, dseg[EM_S * EM_C] = {0};
    cz_embedding_backward_ref(dtok, dpos, dseg, c.w, c.ids, c.segs, EM_N, EM_T, EM_C);
    fd_check("embedding dtok", emb_obj, &c, c.tok, EM_V * EM_C, dtok);
    fd_check("embedding dpos", emb_obj, &c, c.pos, EM_T * EM_C, dpos);
    fd_check("embedding dseg", emb_obj, &c, c.seg, EM_S * EM_C, dseg);
    float dtok2[EM_V * EM_C] = {0}, dpos2[EM_T * EM_C] = {0}, dseg2[EM_S * EM_C] = {0};
    cz_embedding_backward(dtok2, dpos2, dseg2, c.w, c.ids, c.segs, EM_N, EM_T, EM_C);
    CHECK(memcmp(dtok, dtok2, sizeof dtok) == 0 && memcmp(dpos, dpos2, sizeof dpos) == 0 &&
          memcmp(dseg, dseg2, sizeof dseg) == 0);
    printf("%-28s fast == ref\n", "embedding backward");
}

/* ---- cross-entropy ---- */

enum { CE_N = 5, CE_V = 9 };
typedef struct ce_ctx {
    float z[CE_N * CE_V], p[CE_N * CE_V], scale[CE_N];
    double loss[CE_N];
    int32_t labels[CE_N], am[CE_N];
} ce_ctx;

static double ce_obj(void *p) {
    ce_ctx *c = p;
    memcpy(c->p, c->z, sizeof c->z);
    cz_xent_forward_ref(c->p, c->loss, c->am, c->labels, CE_N, CE_V);
    double s = 0;
    for (int i = 0; i < CE_N; i++) s += c->scale[i] * c->loss[i];
    return s;
}

static void test_xent(void) {
    static ce_ctx c;
    fill_normal(c.z, CE_N * CE_V, 40, 2.0f);
    const int32_t labels[CE_N] = {0, 8, -1, 4, 4};
    const float scale[CE_N] = {0.5f, 1.0f, 1.0f, 0.0f, 2.0f};
    memcpy(c.labels, labels, sizeof labels);
    memcpy(c.scale, scale, sizeof scale);
    ce_obj(&c);
    /* loss = logsumexp(z) - z[label], computed independently here in double */
    for (int i = 0; i < CE_N; i++) {
        if (labels[i] < 0) {
            CHECK(c.loss[i] == 0);
            continue;
        }
        double mx = -1e30, s = 0;
        int am = 0;
        for (int j = 0; j < CE_V; j++)
            if (c.z[i * CE_V + j] > mx) mx = c.z[i * CE_V + j], am = j;
        for (int j = 0; j < CE_V; j++) s += exp(c.z[i * CE_V + j] - mx);
        CHECK(fabs(c.loss[i] - (mx + log(s) - c.z[i * CE_V + labels[i]])) < 1e-6);
        CHECK(c.am[i] == am);
    }
    float d[CE_N * CE_V];
    memcpy(d, c.p, sizeof d);
    cz_xent_backward_ref(d, c.labels, c.scale, CE_N, CE_V);
    fd_check("cross-entropy dlogits", ce_obj, &c, c.z, CE_N * CE_V, d);

    enum { N = 37, V = 1001 };
    static float z1[N * V], z2[N * V], sc[N];
    static double l1[N], l2[N];
    static int32_t lab[N], a1[N], a2[N];
    fill_normal(z1, N * V, 41, 3.0f);
    memcpy(z2, z1, sizeof z1);
    for (int i = 0; i < N; i++) lab[i] = i % 5 == 2 ? -1 : (i * 37) % V, sc[i] = 0.1f * i;
    cz_xent_forward_ref(z1, l1, a1, lab, N, V);
    cz_xent_forward(z2, l2, a2, lab, N, V);
    CHECK(max_rel_diff(z2, z1, N * V) < 1e-6 && memcmp(a1, a2, sizeof a1) == 0);
    /* loss = log(sum of exps) - (z[label] - max): the fast exp is within
     * EXP_ULPS ulp of the reference's per term, so log(sum) within as many
     * 2^-24 in absolute terms; the double sum itself adds ~1e-16 */
    double worst = 0;
    for (int i = 0; i < N; i++)
        if (fabs(l1[i] - l2[i]) > worst) worst = fabs(l1[i] - l2[i]);
    printf("%-28s loss max |fast - ref| = %.2e (tolerance %.1e)\n", "cross-entropy", worst,
           EXP_ULPS * 0x1p-24);
    CHECK(worst <= EXP_ULPS * 0x1p-24);
    cz_xent_backward_ref(z1, lab, sc, N, V);
    cz_xent_backward(z2, lab, sc, N, V);
    CHECK(max_rel_diff(z2, z1, N * V) < 1e-6);
    printf("%-28s fast == ref\n", "cross-entropy");
}

/* ---- bias ---- */

/* column sums of dy: fast == reference bits, and within 1e-5 of a double sum */
static void check_bias_backward(int n, int c, int ld) {
    float *dy = malloc(sizeof(float) * n * ld), *db1 = calloc(c, 4), *db2 = calloc(c, 4);
    fill_normal(dy, n * ld, 50, 1.0f);
    cz_bias_backward_ref(db1, dy, n, c, ld);
    cz_bias_backward(db2, dy, n, c, ld);
    CHECK(memcmp(db1, db2, sizeof(float) * c) == 0);
    for (int j = 0; j < c; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += dy[(size_t)i * ld + j];
        CHECK(fabs(db1[j] - s) < 1e-5 * (1 + fabs(s)));
    }
    free(dy);
    free(db1);
    free(db2);
}

static void test_bias(void) {
    enum { N = 300, C = 17, LD = 40 };
    check_bias_backward(N, C, LD);
    /* 132 blocks of 16 columns: over BIAS_GROUP (64) per thread at 1 and 2
     * threads, so a thread's range takes two groups */
    check_bias_backward(70, 2100, 2104);
    static float y[N * LD], y0[N * LD], db[C];
    fill_normal(db, C, 52, 1.0f);
    fill_normal(y0, N * LD, 51, 1.0f);
    memcpy(y, y0, sizeof y);
    cz_add_bias(y, db, N, C, LD);
    int bad = 0; /* one float add per element; columns past c untouched */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < LD; j++)
            bad += y[i * LD + j] != (j < C ? y0[i * LD + j] + db[j] : y0[i * LD + j]);
    CHECK(bad == 0);
    printf("%-28s ok\n", "bias");
}

/* ---- fused kernels and the AVX-512 paths ----
 * Tolerances, fast vs ref (relative to the largest |ref| of the array, as
 * max_rel_diff): the AVX-512 exp is within ~2 ulp (Cody-Waite + degree-7
 * Taylor), erfc within 1.2e-7 relative (Numerical Recipes' erfcc), float
 * sums of <= 1024 terms add ~1e-7; so 1e-6 leaves a margin of ~4 over the
 * worst case while a wrong formula (a dropped term, a wrong mask or bias
 * column) is off by O(1). Kernels whose fast path repeats the reference's
 * additions in the same order are compared bit for bit. */

static void check_close(const char *what, const float *fast, const float *ref, size_t n,
                        double tol) {
    double d = max_rel_diff(fast, ref, n);
    printf("%-28s fast vs ref: max diff / max |ref| = %.2e (tolerance %.0e)\n", what, d, tol);
    CHECK(d < tol);
}

static void test_fused(void) {
    enum { N = 67, C = 100 }; /* C not a multiple of 16: masked tails */
    static float x[N * C], r[N * C], g[C], b[C], y1[N * C], y2[N * C], s1[N * C], s2[N * C];
    static float m1[N], m2[N], q1[N], q2[N];
    fill_normal(x, N * C, 60, 1.5f);
    fill_normal(r, N * C, 61, 1.0f);
    for (int i = 0; i < C; i++) x[i] += 5.0f; /* a row with a large mean */
    fill_normal(g, C, 62, 1.0f);
    fill_normal(b, C, 63, 1.0f);
    cz_add_layernorm_forward_ref(y1, s1, m1, q1, x, r, g, b, N, C, 1e-12f);
    cz_add_layernorm_forward(y2, s2, m2, q2, x, r, g, b, N, C, 1e-12f);
    CHECK(memcmp(s1, s2, sizeof s1) == 0); /* the sum is one float add */
    check_close("add+layernorm y", y2, y1, N * C, 1e-6);
    check_close("add+layernorm rstd", q2, q1, N, 1e-6);
    static float dy[N * C], dx1[N * C], dx2[N * C], dg1[C], dg2[C], db1[C], db2[C];
    fill_normal(dy, N * C, 64, 1.0f);
    cz_layernorm_backward_ref(dx1, dg1, db1, dy, s1, m1, q1, g, N, C);
    cz_layernorm_backward(dx2, dg2, db2, dy, s1, m1, q1, g, N, C);
    check_close("layernorm dx (C=100)", dx2, dx1, N * C, 1e-6);
    CHECK(memcmp(dg1, dg2, sizeof dg1) == 0 && memcmp(db1, db2, sizeof db1) == 0);

    for (int form = 0; form < 2; form++) {
        enum { R = 33, I = 200 };
        static float u1[R * I], u2[R * I], bias[I], g1[R * I], g2[R * I];
        fill_normal(u1, R * I, 65, 3.0f);
        memcpy(u2, u1, sizeof u1);
        fill_normal(bias, I, 66, 1.0f);
        cz_bias_gelu_forward_ref(g1, u1, bias, R, I, form);
        cz_bias_gelu_forward(g2, u2, bias, R, I, form);
        CHECK(memcmp(u1, u2, sizeof u1) == 0);
        check_close(form ? "bias+gelu (tanh)" : "bias+gelu (erf)", g2, g1, R * I, 1e-6);
        /* element by element over [-12, 12]: relative error of gelu for
         * |x| <= 3 below 1e-6; for 3 < |x| <= 6 below 1e-5, because there
         * float rounding of the exp argument (x^2/2 for erf, where the fast
         * path compensates it; 2u ~ 1.6 x^3/20 for tanh, where it does not)
         * costs |argument| 2^-24 relative on values below 1e-3; beyond 6
         * the absolute error (values < 1e-8). The gradient against 1 + |x|
         * (its scale). */
        enum { K = 4801 };
        static float xs[K], f1[K], f2[K], ones[K], d1[K], d2[K];
        for (int i = 0; i < K; i++) xs[i] = -12.0f + 24.0f * i / (K - 1), ones[i] = 1.0f;
        cz_gelu_forward_ref(f1, xs, K, form);
        cz_gelu_forward(f2, xs, K, form);
        cz_gelu_backward_ref(d1, xs, ones, K, form);
        cz_gelu_backward(d2, xs, ones, K, form);
        double wf = 0, wd = 0;
        for (int i = 0; i < K; i++) {
            double ef = fabs((double)f2[i] - f1[i]), ax = fabsf(xs[i]);
            if (ax <= 6.0 && f1[i] != 0.0f) ef /= fabs(f1[i]);
            if (ax > 3.0 && ax <= 6.0) ef *= 0.1; /* 1e-5 */
            if (ef > wf) wf = ef;
            double e = fabs((double)d2[i] - d1[i]) / (1 + fabs(xs[i]));
            if (e > wd) wd = e;
        }
        printf("%-28s pointwise error/tolerance %.2e, gradient %.2e\n",
               form ? "gelu (tanh) on [-12,12]" : "gelu (erf) on [-12,12]", wf, wd);
        CHECK(wf < 1e-6 && wd < 1e-6);
    }

    for (int causal = 0; causal < 2; causal++) {
        enum { S = 3, A = 2, T = 37 };
        static float p1[S * A * T * T], p2[S * A * T * T], kb[S * T];
        fill_normal(p1, S * A * T * T, 67, 3.0f);
        memcpy(p2, p1, sizeof p1);
        for (int i = 0; i < S * T; i++) kb[i] = (i % T) >= T - 3 * (i / T) ? -10000.0f : 0.0f;
        cz_attn_softmax_batch_ref(p1, S, A, T, kb, causal);
        cz_attn_softmax_batch(p2, S, A, T, kb, causal);
        check_close(causal ? "softmax batch (causal)" : "softmax batch (padding)", p2, p1,
                    S * A * T * T, 1e-6);
        for (size_t i = 0; i < sizeof p1 / sizeof *p1; i++) CHECK((p1[i] == 0) == (p2[i] == 0));
    }

    /* dropout: short ranges, and counters past 2^32 blocks (high word 1) */
    enum { D = 3000 };
    static float dx_[D], dy1[D], dy2[D];
    for (int i = 0; i < D; i++) dx_[i] = 1.0f + (float)(i % 5);
    cz_rng_stream st = cz_rng_stream_make(5, CZ_RNG_DROPOUT, 1, 2, 3);
    const uint64_t firsts[4] = {0, 61, (1ULL << 34) - 1000, (1ULL << 34) + 7};
    const size_t lens[4] = {D, 50, D, 1};
    for (int t = 0; t < 4; t++) {
        cz_dropout_ref(dy1, dx_, lens[t], 0.25f, &st, firsts[t]);
        cz_dropout(dy2, dx_, lens[t], 0.25f, &st, firsts[t]);
        CHECK(memcmp(dy1, dy2, lens[t] * sizeof *dy1) == 0);
    }
    /* the keep threshold at its edge: p equal to an element's uniform keeps
     * it (u >= p), the next float above drops it (the fast path compares
     * the raw word against 256 ceil(p 2^24)) */
    for (int t = 0; t < 2; t++) {
        const size_t at = 1000 + 7 * (size_t)t;
        float u = cz_rng_uniform(&st, at);
        float p = t ? nextafterf(u, 1.0f) : u;
        cz_dropout_ref(dy1, dx_, D, p, &st, 0);
        cz_dropout(dy2, dx_, D, p, &st, 0);
        CHECK((dy1[at] != 0.0f) == (t == 0));
        CHECK(memcmp(dy1, dy2, sizeof dy1) == 0);
    }

    /* cross-entropy: ties pick the first maximum, also across vector lanes */
    enum { V = 70 };
    static float z1[3 * V], z2[3 * V];
    double l1[3], l2[3];
    int32_t lab[3] = {3, 69, -1}, a1[3], a2[3];
    for (int i = 0; i < 3 * V; i++) z1[i] = (float)((i * 7) % 11) * 0.1f;
    z1[V + 40] = z1[V + 5] = 2.0f; /* two maxima in different lanes, earlier one wins */
    memcpy(z2, z1, sizeof z1);
    cz_xent_forward_ref(z1, l1, a1, lab, 3, V);
    cz_xent_forward(z2, l2, a2, lab, 3, V);
    CHECK(memcmp(a1, a2, sizeof a1) == 0 && a1[1] == 5);
    for (int i = 0; i < 3; i++) CHECK(fabs(l1[i] - l2[i]) <= 1e-6);
    check_close("cross-entropy probs (ties)", z2, z1, 3 * V, 1e-6);
}

/* ---- bf16 rounding ---- */

static void test_bf16_round(void) {
    enum { N = 4099 };
    static float x[N], y1[N], y2[N];
    fill_normal(x, N, 70, 100.0f);
    const float special[] = {0.0f,       -0.0f,    1e-41f,
                             -1e-41f,    INFINITY, -INFINITY,
                             NAN,        3.4e38f,  1.00390625f /* tie: 1 + 2^-8 */,
                             1.01171875f /* tie, odd */};
    memcpy(x, special, sizeof special);
    cz_bf16_round_n_ref(y1, x, N);
    cz_bf16_round_n(y2, x, N);
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    CHECK(y1[8] == 1.0f && y1[9] == 1.015625f && y1[2] == 0.0f && signbit(y1[3]));
    CHECK(isinf(y1[7])); /* 3.4e38 rounds up past the largest bf16 */
    /* stored as bf16: the upper halves of the rounded floats, and back */
    static uint16_t h1[N], h2[N];
    static float back[N];
    cz_bf16_store_n_ref(h1, x, N);
    cz_bf16_store_n(h2, x, N);
    CHECK(memcmp(h1, h2, sizeof h1) == 0);
    cz_bf16_load_n(back, h2, N);
    CHECK(memcmp(back, y1, sizeof back) == 0);
    printf("%-28s fast == ref\n", "bf16 rounding and storing");
}

/* ---- kernels that write bf16 for the products ----
 * Each writes, bit for bit, cz_bf16_store_n of what its fp32 form writes
 * on the same path: the model's bf16 mode then gives the same bits whether
 * a product rounds the floats while packing or reads the bf16. */
static void test_bf16_producers(void) {
    enum { N = 37, C = 300, V = 1301 }; /* V: two 512-value blocks and a tail */
    static float u1[N * C], u2[N * C], bias[C], g[N * C], p1[N * V], p2[N * V];
    static uint16_t g16[N * C], want[N * V];
    static int32_t lab[N];
    static float scale[N];
    for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
        fill_normal(u1, N * C, 90, 3.0f);
        fill_normal(bias, C, 91, 0.5f);
        memcpy(u2, u1, sizeof u1);
        cz_bias_gelu_forward(g, u1, bias, N, C, tanh_form);
        cz_bias_gelu_forward_bf16(g16, u2, bias, N, C, tanh_form);
        cz_bf16_store_n(want, g, N * C);
        CHECK(memcmp(g16, want, sizeof g16) == 0);
        CHECK(memcmp(u1, u2, sizeof u1) == 0); /* u += bias, kept for backward */
    }
    fill_normal(p1, N * V, 92, 1.0f);
    for (int i = 0; i < N; i++) {
        /* labels in the first block, on a block edge, in the tail; one row
         * ignored (label -1) and one with scale 0 */
        lab[i] = i == 3 ? -1 : (int32_t)((i * 577) % V);
        if (i == 5) lab[i] = 511;
        if (i == 6) lab[i] = 512;
        if (i == 7) lab[i] = V - 1;
        scale[i] = i == 4 ? 0.0f : 1.0f / (float)(i + 2);
    }
    memcpy(p2, p1, sizeof p1);
    /* the MLM bias gradient from the probabilities, as from the dlogits */
    static float db1[V], db2[V], db3[V], db4[V], pr[N * V];
    fill_normal(db1, V, 93, 1.0f);
    memcpy(db2, db1, sizeof db1);
    memcpy(db3, db1, sizeof db1);
    memcpy(db4, db1, sizeof db1);
    memcpy(pr, p1, sizeof p1);
    cz_xent_bias_backward(db2, p1, lab, scale, N, V);
    cz_xent_bias_backward_ref(db4, p1, lab, scale, N, V);
    cz_xent_backward_ref(pr, lab, scale, N, V);
    cz_bias_backward_ref(db3, pr, N, V, V);
    CHECK(memcmp(db3, db4, sizeof db3) == 0);
    cz_xent_backward(p1, lab, scale, N, V);
    cz_bias_backward(db1, p1, N, V, V);
    CHECK(memcmp(db1, db2, sizeof db1) == 0);
    cz_xent_backward_bf16(p2, lab, scale, N, V);
    long diff = 0;
    for (int i = 0; i < N; i++) {
        cz_bf16_store_n(want, p1 + (size_t)i * V, V);
        diff += memcmp((uint16_t *)(p2 + (size_t)i * V), want, V * sizeof(uint16_t)) != 0;
    }
    CHECK(diff == 0);
    printf("%-28s bf16 == fp32 stored as bf16\n", "bf16 GELU, dlogits, bias");
}

/* ---- the same bits at 1, 2 and 3 threads ---- */

#define SAME_BITS(a, b) CHECK(memcmp((a), (b), sizeof(a)) == 0)

static void run_all_kernels(int threads, float *out, size_t cap) {
    enum { N = 67, C = 100, T = 37, V = 301 };
    static float x[N * C], r[N * C], g[C], b[C], dy[N * C], s[2 * 3 * T * T], z[N * V];
    static int32_t ids[N], segs[N], lab[N], am[N];
    static double loss[N];
    static float tok[50 * C], pos[T * C], seg[2 * C];
    omp_set_num_threads(threads);
    fill_normal(x, N * C, 80, 1.5f);
    fill_normal(r, N * C, 81, 1.0f);
    fill_normal(g, C, 82, 1.0f);
    fill_normal(b, C, 83, 1.0f);
    fill_normal(dy, N * C, 84, 1.0f);
    fill_normal(s, 2 * 3 * T * T, 85, 3.0f);
    fill_normal(z, N * V, 86, 3.0f);
    for (int i = 0; i < N; i++) ids[i] = (i * 7) % 50, segs[i] = i % 2, lab[i] = (i * 13) % V;
    size_t o = 0;
#define TAKE(p, n)                                                                                 \
    do {                                                                                           \
        CHECK(o + (n) <= cap);                                                                     \
        memcpy(out + o, (p), (n) * sizeof(float));                                                 \
        o += (n);                                                                                  \
    } while (0)
    static float y[N * C], sum[N * C], mean[N], rstd[N], dx[N * C], dg[C], db[C];
    cz_add_layernorm_forward(y, sum, mean, rstd, x, r, g, b, N, C, 1e-12f);
    TAKE(y, N * C);
    TAKE(rstd, N);
    memset(dg, 0, sizeof dg), memset(db, 0, sizeof db);
    cz_layernorm_backward(dx, dg, db, dy, sum, mean, rstd, g, N, C);
    TAKE(dx, N * C);
    TAKE(dg, C);
    TAKE(db, C);
    for (int form = 0; form < 2; form++) {
        static float u[N * C];
        memcpy(u, x, sizeof u);
        cz_bias_gelu_forward(y, u, b, N, C, form);
        TAKE(y, N * C);
        cz_gelu_backward(dx, u, dy, (size_t)N * C, form);
        TAKE(dx, N * C);
    }
    memset(db, 0, sizeof db);
    cz_bias_backward(db, dy, N, C, C);
    TAKE(db, C);
    static float kb[3 * T];
    for (int i = 0; i < 3 * T; i++) kb[i] = i % 5 == 0 ? -10000.0f : 0.0f;
    cz_attn_softmax_batch(s, 3, 2, T, kb, 0);
    TAKE(s, 2 * 3 * T * T);
    static float ds[2 * 3 * T * T];
    cz_softmax_backward(ds, s, s, 2 * 3 * T, T);
    TAKE(ds, 2 * 3 * T * T);
    cz_rng_stream st = cz_rng_stream_make(9, CZ_RNG_DROPOUT, 1, 2, 3);
    cz_dropout(y, x, (size_t)N * C, 0.1f, &st, 5);
    TAKE(y, N * C);
    fill_normal(tok, 50 * C, 87, 1.0f);
    fill_normal(pos, T * C, 88, 1.0f);
    fill_normal(seg, 2 * C, 89, 1.0f);
    cz_embedding_forward(y, ids, segs, tok, pos, seg, N, T, C);
    TAKE(y, N * C);
    memset(tok, 0, sizeof tok), memset(pos, 0, sizeof pos), memset(seg, 0, sizeof seg);
    cz_embedding_backward(tok, pos, seg, dy, ids, segs, N, T, C);
    TAKE(tok, 50 * C);
    TAKE(pos, T * C);
    cz_xent_forward(z, loss, am, lab, N, V);
    TAKE(z, N * V);
    for (int i = 0; i < N; i++) {
        float lf = (float)loss[i];
        TAKE(&lf, 1);
    }
#undef TAKE
}

/* cz_skinny_gemm against its reference: both layouts, with and without a
 * bias, row counts across the groups of 4, k and n off the vector width
 * and the 4-row passes. Float sums of k <= 301 terms: 1e-5. */
static void test_skinny(void) {
    static float x[9 * 301], w[301 * 133], bias[133], y[9 * 133], yr[9 * 133];
    fill_normal(x, 9 * 301, 61, 1.0f);
    fill_normal(w, 301 * 133, 62, 1.0f);
    fill_normal(bias, 133, 63, 1.0f);
    int ms[] = {1, 3, 8, 9}, ks[] = {301, 7, 1};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int trans = 0; trans < 2; trans++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    int m = ms[a], k = ks[b], n = 133;
                    const float *bb = with_bias ? bias : NULL;
                    cz_skinny_gemm(y, x, m, w, trans, k, n, bb);
                    cz_skinny_gemm_ref(yr, x, m, w, trans, k, n, bb);
                    double d = max_rel_diff(y, yr, (size_t)m * n);
                    if (!(d < 1e-5))
                        printf("skinny m %d k %d trans %d bias %d: %.2e\n", m, k, trans, with_bias,
                               d);
                    CHECK(d < 1e-5);
                }
    printf("%-28s ok\n", "skinny gemm");
}

static void test_threads(void) {
    enum { CAP = 1 << 18 };
    static float a[CAP], b[CAP];
    int keep = omp_get_max_threads();
    run_all_kernels(1, a, CAP);
    for (int t = 2; t <= 3; t++) {
        memset(b, 0, sizeof b);
        run_all_kernels(t, b, CAP);
        SAME_BITS(a, b);
    }
    omp_set_num_threads(keep);
    printf("%-28s the same bits at 1, 2 and 3 threads\n", "all fast kernels");
}

int main(void) {
    printf("fast kernels: %s\n", cz_kernels_describe());
    if (cz_cpu_kernel_isa_refused()) {
        printf("skipped: this CPU cannot run the path CLOZE_KERNELS asks for\n");
        return 77;
    }
    test_layernorm();
    test_gelu();
    test_softmax();
    test_dropout();
    test_embedding();
    test_xent();
    test_bias();
    test_fused();
    test_bf16_round();
    test_bf16_producers();
    test_skinny();
    test_threads();
    printf("ok\n");
    return 0;
}
