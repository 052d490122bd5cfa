/* comm: exact, order-independent gradient sums (dist.exact = on;
 * docs/distributed-design.md, "Exact sums").
 *
 * A step's gradient is the sum of M micro-batch gradients, dealt to the
 * ranks in a way that depends on the allocation. Floating-point addition is
 * not associative, so any fp32 order shows in the bits. Here each value
 * g of tensor t is turned into the integer k = rne(g 2^s_t) (one rounding
 * per value, the same wherever the value is computed) and the k are added
 * as int64. With B = 62 - ceil(log2 M) and |g| 2^s_t < 2^B (so |k| <= 2^B)
 * for every value of every micro-batch, any partial sum of any subset is at
 * most M 2^B <= 2^62 in size: no order overflows, and integer addition is
 * associative, so the sum is the same for every dealing, order, algorithm,
 * bucket and placement. It is turned back into fp32 once, with one
 * correct rounding of k 2^-s_t.
 *
 * The scale of tensor t is one power of two for the whole tensor (never
 * per bucket: buckets depend on dist.bucket_mb). It is predicted from the
 * previous step's maximum |g| of the tensor over every micro-batch (a max
 * is exact in any order), with HEADROOM_BITS bits to grow; a value over
 * the bound sets a flag, the flags and maxima are max-reduced (every rank
 * sees the same), and the step is computed again with the scales of this
 * step's maxima, which fit by construction. The first step of a run (the
 * scales unknown) is such a discovery pass. */
#include "comm_private.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The predicted scale leaves a tensor's maximum room to grow 16-fold
 * before a step must be recomputed; the precision this leaves is 62 -
 * ceil(log2 M) - 4 bits below the maximum, far above fp32's 24. */
enum { HEADROOM_BITS = 4 };

struct cz_exact {
    size_t n;
    int n_tensors;
    size_t *off;    /* [n_tensors + 1] */
    int32_t *scale; /* [n_tensors]: e_t, values expected below 2^e_t, so that
                       s_t = B - e_t; INT32_MIN: unknown. Kept apart from B,
                       which follows the step's M (a phase 2 may change it) */
    float *mx;      /* [n_tensors]: this rank's max |g| this step (finite values) */
    double *v;      /* [n_tensors + 2]: the maxima and flags, max-reduced */
    int64_t *acc;   /* [n] */
    int bound_bits; /* B = 62 - ceil(log2 M) */
    int over;       /* a value reached the bound, or a scale was unknown */
    int nonfinite;  /* a NaN or an infinity */
};

int cz_exact_create(cz_exact **out, size_t n, const size_t *tensor_off, int n_tensors,
                    cz_error *err) {
    *out = NULL;
    if (n_tensors < 1 || tensor_off[0] != 0)
        return cz_fail(err, "comm: exact sums: %d tensors, the first at %zu", n_tensors,
                       n_tensors > 0 ? tensor_off[0] : 0);
    cz_exact *x = calloc(1, sizeof *x);
    if (!x) return cz_fail(err, "comm: out of memory");
    x->n = n;
    x->n_tensors = n_tensors;
    x->off = malloc(((size_t)n_tensors + 1) * sizeof *x->off);
    x->scale = malloc((size_t)n_tensors * sizeof *x->scale);
    x->mx = malloc((size_t)n_tensors * sizeof *x->mx);
    x->v = malloc(((size_t)n_tensors + 2) * sizeof *x->v);
    x->acc = cz_alloc((n + 1) * sizeof *x->acc, err);
    if (!x->off || !x->scale || !x->mx || !x->v || !x->acc) {
        cz_exact_free(x);
        return cz_fail(err, "comm: out of memory (exact sums of %zu floats)", n);
    }
    for (int t = 0; t < n_tensors; t++) {
        x->off[t] = tensor_off[t];
        x->scale[t] = INT32_MIN;
        if (t > 0 && tensor_off[t] < tensor_off[t - 1]) {
            cz_exact_free(x);
            return cz_fail(err, "comm: exact sums: tensor %d starts before tensor %d", t, t - 1);
        }
    }
    x->off[n_tensors] = n;
    cz_exact_begin(x, 1);
    *out = x;
    return 0;
}

void cz_exact_free(cz_exact *x) {
    if (!x) return;
    free(x->off);
    free(x->scale);
    free(x->mx);
    free(x->v);
    cz_free(x->acc);
    free(x);
}

int cz_exact_n_tensors(const cz_exact *x) {
    return x->n_tensors;
}

int32_t *cz_exact_scales(cz_exact *x) {
    return x->scale;
}

void cz_exact_begin(cz_exact *x, int micro_batches) {
    int l = 0;
    while ((1L << l) < (long)micro_batches) l++; /* ceil(log2 M) */
    x->bound_bits = 62 - l;
    x->over = x->nonfinite = 0;
    memset(x->acc, 0, x->n * sizeof *x->acc);
    for (int t = 0; t < x->n_tensors; t++) x->mx[t] = 0;
}

/* y rounded to the nearest integer, ties to even, without a library call
 * per value: below 2^52 in size, adding and subtracting 2^52 (with y's
 * sign) rounds in the FPU's default mode, to nearest even, exactly as
 * llrint would; from 2^52 on every double is an integer already. */
static inline int64_t rne(double y) {
    const double two52 = 4503599627370496.0;
    if (fabs(y) >= two52) return (int64_t)y;
    double c = copysign(two52, y);
    return (int64_t)((y + c) - c);
}

void cz_exact_add(cz_exact *x, const float *g) {
    const double lim = ldexp(1.0, x->bound_bits);
    int over = 0, nonfinite = 0;
    for (int t = 0; t < x->n_tensors; t++) {
        size_t a = x->off[t], b = x->off[t + 1];
        int known = x->scale[t] != INT32_MIN;
        const double sc = known ? ldexp(1.0, x->bound_bits - x->scale[t]) : 0.0;
        float mx = x->mx[t];
        int64_t *acc = x->acc;
        over |= !known;
        /* per value: no bit depends on the thread count */
#pragma omp parallel for schedule(static) reduction(max                                            \
                                                    : mx)                                          \
    reduction(|                                                                                    \
              : over, nonfinite) if (b - a > 65536)
        for (size_t i = a; i < b; i++) {
            float gv = g[i], av = fabsf(gv);
            if (!(av <= FLT_MAX)) { /* NaN or infinity */
                nonfinite = 1;
                continue;
            }
            mx = av > mx ? av : mx;
            double y = (double)gv * sc; /* exact: a power of two in double's range */
            if (fabs(y) >= lim) {
                over = 1;
                continue;
            }
            acc[i] += rne(y);
        }
        x->mx[t] = mx;
    }
    x->over |= over;
    x->nonfinite |= nonfinite;
}

/* The exponent for a tensor whose largest |g| is m: m < 2^e (frexp), so
 * the scale s = B - (e + headroom) gives m 2^s < 2^(B - headroom). A tensor
 * of zeros takes the exponent of m = 2^-20 (a later step above it is
 * recomputed). */
static int32_t exponent_for(double m, int headroom) {
    int e = -20;
    if (m > 0) frexp(m, &e);
    return e + headroom;
}

/* k 2^-s rounded once to fp32. (float)k rounds k once to 24 bits (the
 * conversion rounds to nearest even), and scaling by a power of two
 * commutes with that rounding while the result is a normal float or
 * overflows (to infinity, as the exact value would): the product in double
 * is exact. A subnormal result rounds on a coarser grid: there k 2^-s is
 * taken exactly (in double when |k| <= 2^53; else in long double, whose
 * significand holds any int64: 64 bits on x86, 113 on AArch64) and rounded
 * once. */
static float to_float(int64_t k, double inv, int s) {
    double y = (double)(float)k * inv;
    if (fabs(y) >= 0x1p-126 || k == 0) return (float)y;
    if (k <= (1LL << 53) && k >= -(1LL << 53)) return (float)((double)k * inv);
    return (float)ldexpl((long double)k, -s);
}

int cz_exact_finish(cz_exact *x, const cz_comm *c, cz_allreduce_algo algo, float *out, int *retry,
                    cz_error *err) {
    int T = x->n_tensors;
    *retry = 0;
    for (int t = 0; t < T; t++) x->v[t] = x->mx[t];
    x->v[T] = x->over;
    x->v[T + 1] = x->nonfinite;
    /* a maximum is exact in any order: every rank gets the same maxima */
    if (cz_comm_allreduce_doubles(c, x->v, T + 2, CZ_OP_MAX, err) != 0)
        return cz_fail_prefix(err, "exact sums: maxima");
    if (x->v[T + 1] > 0) { /* the non-finite rule: the optimizer skips the step */
        for (size_t i = 0; i < x->n; i++) out[i] = NAN;
        return 0;
    }
    if (x->v[T] > 0) { /* recompute with the scales of this step's maxima */
        for (int t = 0; t < T; t++) x->scale[t] = exponent_for(x->v[t], 0);
        *retry = 1;
        return 0;
    }
    if (cz_allreduce_i64(c, algo, x->acc, x->n, err) != 0) return cz_fail_prefix(err, "exact sums");
    for (int t = 0; t < T; t++) {
        int s = x->bound_bits - x->scale[t];
        double inv = ldexp(1.0, -s);
        size_t a = x->off[t], b = x->off[t + 1];
        const int64_t *acc = x->acc;
#pragma omp parallel for schedule(static) if (b - a > 65536)
        for (size_t i = a; i < b; i++) out[i] = to_float(acc[i], inv, s);
        /* the next step's, from this step's maximum, with room to grow */
        x->scale[t] = exponent_for(x->v[t], HEADROOM_BITS);
    }
    return 0;
}
