/* comm: exact gradient sums (src/comm/exact.c, dist.exact) as real MPI jobs.
 *
 * M = 12 micro-batch "gradients" of planted values spanning fp32's range,
 * in tensors of their own:
 *   tiny       subnormals and the smallest normals (k 2^-149)
 *   huge       k 2^100
 *   cancel     random floats near 1e3 that cancel pairwise, and two
 *              micro-batches of k 2^-20
 *   mixed      random values with exponents from 2^-30 to 2^30
 *   zeros      all zero
 *   overflow   2^126 each: the sum exceeds fp32 (+inf, every rank alike)
 *   tie        1 + j 2^-20, 2^-24 (a tie) and 2^-53 (which breaks it): the
 *              exact sum rounds up; a sum in double (53 bits) would lose
 *              the last term and round to even
 * Micro-batch m is added on rank m % p (the training loop's dealing: 3
 * ranks run 4, 4 and 4; 5 ranks run 3, 3, 2, 2, 2). Checked, for every
 * algorithm the rank count has (ring; hierarchical on every host layout
 * given by hand, block and round robin; torus2d on every grid; mpi):
 *  - the result is bitwise the one-rank result of the same history (the
 *    first step's scales from its own maxima, the second's predicted),
 *    computed on every rank on a job of one (cz_comm_self) with the micro-batches
 *    added in reverse order;
 *  - every rank holds the same bits;
 *  - tiny, huge, cancel and zeros equal the correctly rounded exact sum
 *    (computed here in double, where these sums are exact), and so do
 *    overflow (+inf) and tie (known); mixed is within 2^-40 of its largest value of a
 *    double sum;
 *  - a run's first finish asks for a retry (no scales yet), the retry
 *    fits; values grown 2^10-fold outgrow the predicted scale and ask
 *    again; a NaN or an infinity on any one rank makes every rank's result
 *    all NaN and keeps the scales.
 * Not vacuous: the fp32 sums of the same values in the two orders differ. */
#include "cloze/comm.h"

#include "../src/comm/comm_internal.h" /* comm's inside: contexts, host layouts */
#include "cloze/rng.h"

#include "mpi_main.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { M = 12, T = 7, PER = 1000 };
static const char *names[T] = {"tiny", "huge", "cancel", "mixed", "zeros", "overflow", "tie"};
#define N ((size_t)T * PER)

/* Value i of micro-batch m (scaled by 2^grow). */
static float planted(int m, size_t i, int grow) {
    int t = (int)(i / PER);
    size_t j = i % PER;
    cz_rng_stream s = cz_rng_stream_make(11, CZ_RNG_TEST, (uint64_t)t, (uint64_t)(m / 2), 0);
    double u = cz_rng_normal(&s, j);
    long k = (long)((m * 7919 + (long)j * 31) % 2001) - 1000;
    float v = 0;
    switch (t) {
    case 0:
        v = (float)ldexp((double)k, -149);
        break; /* subnormal or small normal */
    case 1:
        v = (float)ldexp((double)k, 100);
        break;
    case 2: /* +x on even m, -x on odd m (pairs cancel), the last two k 2^-20 */
        v = m >= M - 2 ? (float)ldexp((double)k, -20) : (float)(1000.0 * u);
        v = m < M - 2 && m % 2 ? -v : v;
        break;
    case 3: {
        cz_rng_stream e = cz_rng_stream_make(12, CZ_RNG_TEST, (uint64_t)m, 0, 0);
        v = (float)ldexp(u, (int)(cz_rng_uniform(&e, j) * 60) - 30);
        break;
    }
    case 4:
        v = 0;
        break;
    case 5:
        v = (float)ldexp(1.0, 126);
        break;
    case 6: /* x = 1 + j 2^-20, then half its ulp, then 2^-53: a tie that
             * only the last term breaks (upwards); the three terms span 54
             * bits, one more than a double holds */
        v = m == 0   ? (float)(1.0 + ldexp((double)j, -20))
            : m == 1 ? (float)ldexp(1.0, -24)
            : m == 2 ? (float)ldexp(1.0, -53)
                     : 0.0f;
        v = j % 2 ? -v : v;
        break;
    }
    return t == 0 || t == 5 ? v : (float)ldexp(v, grow);
}

static void fill(float *g, int m, int grow) {
    for (size_t i = 0; i < N; i++) g[i] = planted(m, i, grow);
}

/* The one-rank result on a job of one (cz_comm_self), micro-batches in reverse. */
static int one_rank(cz_exact *x, const cz_comm *self, float *g, float *out, int grow, int *retry) {
    cz_error err;
    cz_exact_begin(x, M);
    for (int m = M - 1; m >= 0; m--) {
        fill(g, m, grow);
        cz_exact_add(x, g);
    }
    int rc = cz_exact_finish(x, self, CZ_ALLREDUCE_RING, out, retry, &err);
    CHECK(rc == 0, "one rank: %s", err.msg);
    return rc;
}

/* This rank's micro-batches m = rank, rank + p, ...; poison: the micro-batch
 * whose value 3 becomes NaN (-1: none). */
static int dealt(cz_exact *x, const cz_comm *c, cz_allreduce_algo algo, float *g, float *out,
                 int grow, int poison, int *retry, const char *label) {
    cz_error err;
    cz_exact_begin(x, M);
    for (int m = c->rank; m < M; m += c->size) {
        fill(g, m, grow);
        if (m == poison) g[3] = m % 2 ? INFINITY : NAN;
        cz_exact_add(x, g);
    }
    int rc = cz_exact_finish(x, c, algo, out, retry, &err);
    CHECK(rc == 0, "%s: %s", label, err.msg);
    return rc;
}

static size_t offs[T];

static cz_exact *make(void) {
    cz_exact *x = NULL;
    cz_error err;
    for (int t = 0; t < T; t++) offs[t] = (size_t)t * PER;
    CHECK(cz_exact_create(&x, N, offs, T, &err) == 0, "create: %s", err.msg);
    return x;
}

/* The exact sums where double holds them exactly, rounded once to float. */
static void check_reference(const float *out, const char *label) {
    size_t bad[T] = {0};
    double worst = 0;
    for (size_t i = 0; i < N; i++) {
        int t = (int)(i / PER);
        double ref = 0, big = 0;
        /* in m's order every partial sum of tiny, huge, cancel (x - x
         * pair by pair, then the small terms) and overflow is exact */
        for (int m = 0; m < M; m++) {
            ref += planted(m, i, 0);
            big = fmax(big, fabs(planted(m, i, 0)));
        }
        float want = (float)ref; /* one rounding of an exact double */
        if (t == 6) {            /* not exact in double: the rounded sum, known */
            size_t j = i % PER;
            want = (float)(1.0 + ldexp((double)j, -20) + ldexp(1.0, -23));
            want = j % 2 ? -want : want;
        }
        if (t == 3) {
            double d = fabs((double)out[i] - ref);
            worst = fmax(worst, d / fmax(big, 1e-300));
            bad[t] += d > ldexp(big, -40) + ldexp(fabs(ref), -24);
        } else if (memcmp(&want, &out[i], sizeof want)) {
            bad[t]++;
        }
    }
    for (int t = 0; t < T; t++)
        CHECK(bad[t] == 0, "%s: tensor %s: %zu elements off the reference sum", label, names[t],
              bad[t]);
}

/* One algorithm on one communicator: discovery, the sums, growth, NaN. */
static void run_algo(const cz_comm *c, cz_allreduce_algo algo, const float *want,
                     const float *want2, const char *label) {
    cz_exact *x = make();
    float *g = malloc(N * sizeof(float)), *out = malloc(N * sizeof(float));
    int retry = 0;
    if (!x || !g || !out) {
        CHECK(0, "%s: out of memory", label);
        goto end;
    }
    if (dealt(x, c, algo, g, out, 0, -1, &retry, label) != 0) goto end;
    CHECK(retry == 1, "%s: the first finish (no scales yet) did not ask for a retry", label);
    if (dealt(x, c, algo, g, out, 0, -1, &retry, label) != 0) goto end;
    CHECK(retry == 0, "%s: the retry with this step's scales did not fit", label);
    CHECK(!memcmp(out, want, N * sizeof(float)), "%s: not the one-rank bits", label);
    CHECK(mpi_test_same_on_all_ranks(c, out, N * sizeof(float)), "%s: ranks differ", label);
    check_reference(out, label);
    /* the same values again: the predicted scales (4 bits coarser) fit,
     * and give the one-rank bits of the same history */
    if (dealt(x, c, algo, g, out, 0, -1, &retry, label) != 0) goto end;
    CHECK(retry == 0 && !memcmp(out, want2, N * sizeof(float)),
          "%s: the second step (predicted scales) differs from one rank's (retry %d)", label,
          retry);
    check_reference(out, label);
    /* grown 2^10-fold: past the 2^4 headroom, one retry, then it fits */
    if (dealt(x, c, algo, g, out, 10, -1, &retry, label) != 0) goto end;
    CHECK(retry == 1, "%s: values 2^10 larger did not ask for a retry", label);
    if (dealt(x, c, algo, g, out, 10, -1, &retry, label) != 0) goto end;
    CHECK(retry == 0, "%s: the grown step's retry did not fit", label);
    /* a NaN (even m) or an infinity (odd m) on one rank: all NaN everywhere */
    for (int poison = 4; poison <= 5; poison++) {
        int32_t before[T];
        memcpy(before, cz_exact_scales(x), sizeof before);
        if (dealt(x, c, algo, g, out, 10, poison, &retry, label) != 0) goto end;
        size_t nan = 0;
        for (size_t i = 0; i < N; i++) nan += isnan(out[i]) != 0;
        CHECK(retry == 0 && nan == N, "%s: poisoned micro-batch %d: %zu of %zu NaN (retry %d)",
              label, poison, nan, N, retry);
        CHECK(!memcmp(before, cz_exact_scales(x), sizeof before),
              "%s: a non-finite step changed the scales", label);
    }
end:
    free(g);
    free(out);
    cz_exact_free(x);
}

/* An algorithm's context attached to a duplicate of world (as the gradient
 * sync attaches one), hosts given by hand or NULL. */
static void run_attached(const cz_comm *world, cz_allreduce_algo algo, int grid_x,
                         const cz_host_layout *hosts, const float *want, const float *want2,
                         const char *label) {
    cz_coll_opts o;
    cz_coll_opts_default(&o);
    o.algo = algo;
    o.grid_x = grid_x;
    o.hosts = hosts;
    cz_comm bound;
    cz_error err;
    if (cz_comm_dup(world, &bound, &err) != 0 || cz_comm_attach_coll(&bound, &o, &err) != 0) {
        CHECK(0, "%s: attach: %s", label, err.msg);
        return;
    }
    run_algo(&bound, algo, want, want2, label);
    cz_comm_finalize(&bound);
}

int main(int argc, char **argv) {
    cz_comm d, self;
    cz_error err;
    mpi_test_begin(&d, &argc, &argv);
    int p = d.size;
    if (cz_comm_self(&self, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    /* the one-rank result, every rank for itself */
    cz_exact *x = make();
    float *g = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
    float *want2 = malloc(N * sizeof(float));
    int retry = 0;
    one_rank(x, &self, g, want, 0, &retry);
    CHECK(retry == 1, "one rank: no retry on the first finish");
    one_rank(x, &self, g, want, 0, &retry);
    CHECK(retry == 0, "one rank: the retry did not fit");
    check_reference(want, "one rank");
    one_rank(x, &self, g, want2, 0, &retry); /* a second step: the predicted scales */
    CHECK(retry == 0, "one rank: the predicted scales did not fit");
    check_reference(want2, "one rank, second step");
    cz_exact_free(x);
    /* not vacuous: fp32 sums of these values in two orders differ */
    size_t differ = 0;
    for (size_t i = 2 * PER; i < 4 * PER; i++) {
        float up = 0, down = 0;
        for (int m = 0; m < M; m++) up += planted(m, i, 0);
        for (int m = M - 1; m >= 0; m--) down += planted(m, i, 0);
        differ += up != down;
    }
    CHECK(differ > 100, "only %zu of %d fp32 sums depend on the order: the data tests nothing",
          differ, 2 * PER);
    if (d.rank == 0) printf("%zu of %d fp32 sums depend on their order\n", differ, 2 * PER);
    char label[96];
    run_attached(&d, CZ_ALLREDUCE_RING, 0, NULL, want, want2, "ring");
    run_algo(&d, CZ_ALLREDUCE_RING, want, want2, "ring (a context per call)");
    run_algo(&d, CZ_ALLREDUCE_MPI, want, want2, "mpi");
    for (int h = 1; h <= p; h++) {
        if (p % h) continue;
        for (int rr = 0; rr <= (h > 1 && h < p); rr++) {
            cz_host_layout l;
            if (cz_host_layout_make(&l, h, p / h, rr, &err) != 0) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            snprintf(label, sizeof label, "hierarchical %dx%d%s", h, p / h, rr ? " rr" : "");
            run_attached(&d, CZ_ALLREDUCE_HIERARCHICAL, 0, &l, want, want2, label);
            cz_host_layout_free(&l);
        }
    }
    for (int gx = 1; gx <= p; gx++) {
        if (p % gx) continue;
        snprintf(label, sizeof label, "torus2d %dx%d", gx, p / gx);
        run_attached(&d, CZ_ALLREDUCE_TORUS2D, gx, NULL, want, want2, label);
    }
    free(g);
    free(want);
    free(want2);
    cz_comm_finalize(&self);
    return mpi_test_end(&d);
}
