/* The optimizer's fast paths against their definitions (1-rank MPI job):
 *   - AdamW and LAMB's direction, the copy of src/optim/adamw_vec.c for
 *     this CPU or for CLOZE_KERNELS (ctest runs one test per path; a path
 *     the CPU lacks exits 77) vs the baseline copy, `*_ref` (and AdamW's against the rule written
 * out here, one element at a time): the same bits in weights, moments, direction and sums, on
 * random data with signed zeros and subnormals, ranges whose boundaries are not multiples of the
 * vector width, decay and no-decay;
 *   - sums of squares: the same bits on both paths, and within rounding of a
 *     plain double sum;
 *   - cz_optimizer_step (every placement, AdamW and LAMB) with 1, 2 and 3
 *     OpenMP threads: the same weights and norm bits; AdamW's step equals
 *     the old two-pass form (average written back as floats, then the
 *     scalar update with the clip factor) bit for bit, and its norm is
 *     within rounding of a double reference. */
#include "cloze/cpu.h"
#include "cloze/kernels.h"
#include "cloze/optim.h"
#include "cloze/rng.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_main.h"

static float *floats(size_t n) {
    return calloc(n + 1, sizeof(float));
}

/* normal * scale, with a few signed zeros and subnormals mixed in */
static void fill(float *x, size_t n, uint64_t seed, float scale, int positive) {
    cz_rng_stream st = cz_rng_stream_make(11, CZ_RNG_TEST, seed, 0, 0);
    for (size_t i = 0; i < n; i++) {
        float y = (float)cz_rng_normal(&st, i) * scale;
        if (i % 97 == 3) y = 0.0f;
        if (i % 89 == 5) y = -0.0f;
        if (i % 83 == 7) y = 1e-41f;
        if (positive) y = fabsf(y);
        x[i] = y;
    }
}

static double plain_sumsq(const float *x, float pre, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        float y = x[i] * pre;
        s += (double)y * y;
    }
    return s;
}

static cz_adam_coef coef(int t, float gscale) {
    cz_adam_coef k = {1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 1.0f, gscale};
    k.c1 = (float)(1 - pow(0.9, t));
    k.c2 = (float)(1 - pow(0.999, t));
    return k;
}

#define SAME(a, b, n) (memcmp((a), (b), (n) * sizeof(float)) == 0)

/* optim.h's AdamW rule written out here, one element at a time, in float
 * (this file is built with -ffp-contract=off, tests/optim.cmake, as
 * src/optim is: no FMA contraction, also where FMA is baseline, aarch64) */
static void adamw_plain(const cz_adam_coef *k, const cz_param_range *r, int nr, float *w,
                        const float *g, float *m, float *v, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i++) {
        int nd = 0;
        for (int j = 0; j < nr; j++)
            if (i >= r[j].offset && i < r[j].offset + r[j].numel) nd = r[j].no_decay;
        float gi = g[i] * k->gscale;
        float mi = k->beta1 * m[i - lo] + (1.0f - k->beta1) * gi;
        float vi = k->beta2 * v[i - lo] + (1.0f - k->beta2) * (gi * gi);
        m[i - lo] = mi;
        v[i - lo] = vi;
        float u = (mi / k->c1) / (sqrtf(vi / k->c2) + k->eps);
        u += (nd ? 0.0f : k->wd) * w[i];
        w[i] -= k->lr * u;
    }
}

static void test_rules(void) {
    const size_t n = 2 * CZ_OPTIM_BLOCK + 37, lo = 5, hi = n - 3;
    /* boundaries at 3, 20, 16404: not multiples of 16 */
    cz_param_range r[4] = {{0, 3, 0}, {3, 17, 1}, {20, CZ_OPTIM_BLOCK, 0}, {0, 0, 1}};
    r[3].offset = 20 + CZ_OPTIM_BLOCK;
    r[3].numel = n - r[3].offset;
    float *w[3], *m[3], *v[3], *u[3], *g = floats(n);
    for (int j = 0; j < 3; j++) {
        w[j] = floats(n), m[j] = floats(n), v[j] = floats(n), u[j] = floats(n);
        fill(w[j], n, 1, 0.5f, 0);
        fill(m[j], n, 2, 0.01f, 0);
        fill(v[j], n, 3, 1e-4f, 1);
    }
    for (int t = 1; t <= 3; t++) {
        fill(g, n, 10 + (uint64_t)t, 0.01f, 0);
        cz_adam_coef k = coef(t, t == 2 ? 0.37f : 1.0f);
        cz_adamw_update(&k, r, 4, w[0], g, m[0] + lo, v[0] + lo, lo, hi);
        cz_adamw_update_ref(&k, r, 4, w[1], g, m[1] + lo, v[1] + lo, lo, hi);
        adamw_plain(&k, r, 4, w[2], g, m[2] + lo, v[2] + lo, lo, hi);
        CHECK(SAME(w[0], w[1], n) && SAME(m[0], m[1], n) && SAME(v[0], v[1], n),
              "AdamW step %d: fast path differs from the scalar definition", t);
        CHECK(SAME(w[2], w[1], n) && SAME(m[2], m[1], n) && SAME(v[2], v[1], n),
              "AdamW step %d: cz_adamw_update_ref differs from the rule written out", t);
    }
    /* not vacuous: the weights inside [lo, hi) moved, those outside did not */
    float *w0 = floats(n);
    fill(w0, n, 1, 0.5f, 0);
    size_t moved = 0;
    for (size_t i = lo; i < hi; i++) moved += w[0][i] != w0[i];
    CHECK(moved > (hi - lo) * 9 / 10, "AdamW moved only %zu weights", moved);
    CHECK(SAME(w[0], w0, lo) && SAME(w[0] + hi, w0 + hi, n - hi), "AdamW wrote outside [lo, hi)");
    free(w0);
    for (int t = 1; t <= 2; t++) {
        fill(g, n, 20 + (uint64_t)t, 0.01f, 0);
        cz_adam_coef k = coef(t, 0.61f);
        double ws[2], us[2];
        cz_lamb_direction(&k, t == 2, w[0] + lo, g + lo, m[0] + lo, v[0] + lo, u[0] + lo, hi - lo,
                          &ws[0], &us[0]);
        cz_lamb_direction_ref(&k, t == 2, w[1] + lo, g + lo, m[1] + lo, v[1] + lo, u[1] + lo,
                              hi - lo, &ws[1], &us[1]);
        CHECK(SAME(u[0], u[1], n) && SAME(m[0], m[1], n) && SAME(v[0], v[1], n),
              "LAMB direction %d: fast path differs from the scalar definition", t);
        CHECK(ws[0] == ws[1] && us[0] == us[1], "LAMB sums %d: %.17g %.17g vs %.17g %.17g", t,
              ws[0], us[0], ws[1], us[1]);
        double pw = plain_sumsq(w[1] + lo, 1.0f, hi - lo),
               pu = plain_sumsq(u[1] + lo, 1.0f, hi - lo);
        CHECK(fabs(ws[0] - pw) <= 1e-12 * pw && fabs(us[0] - pu) <= 1e-12 * pu && pu > 0,
              "LAMB sums %d off the plain double sums", t);
        cz_lamb_apply(0.002f, w[0] + lo, u[0] + lo, hi - lo);
        for (size_t i = lo; i < hi; i++) w[1][i] -= 0.002f * u[1][i];
        CHECK(SAME(w[0], w[1], n), "LAMB apply %d differs", t);
    }
    static const size_t sizes[] = {0, 1, 15, 16, 17, 1000, CZ_OPTIM_BLOCK, CZ_OPTIM_BLOCK + 1, n};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const float pre = 1.0f / 3;
        double a = cz_optim_sumsq(g, pre, sizes[s]), b = cz_optim_sumsq_ref(g, pre, sizes[s]);
        double p = plain_sumsq(g, pre, sizes[s]);
        CHECK(a == b, "sumsq n=%zu: %.17g vs %.17g", sizes[s], a, b);
        CHECK(fabs(a - p) <= 1e-12 * p, "sumsq n=%zu: %.17g vs plain %.17g", sizes[s], a, p);
    }
    for (int j = 0; j < 3; j++) free(w[j]), free(m[j]), free(v[j]), free(u[j]);
    free(g);
}

/* ---- the whole step, 1 rank ---- */
#define NT 6
static const size_t tsize[NT] = {40000, 7, 2 * CZ_OPTIM_BLOCK + 5, 768, 20001, 1};
static const int tnodecay[NT] = {0, 1, 0, 1, 0, 1};
#define STEPS 4
#define CLIP_STEP 1
#define MB 3

static void step_grads(float *g, size_t n, int s) {
    fill(g, n, 100 + (uint64_t)s, s == CLIP_STEP ? 0.1f : 0.001f, 0);
}

/* Runs STEPS steps with `threads` OpenMP threads; weights into w, norms
 * and clip factors per step into norm[], clip[]. */
static int run_steps(const cz_comm *d, const char *opt, const char *place, int threads,
                     const cz_param_range *ranges, size_t n, float *w, double *norm, double *clip) {
    cz_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = strcmp(opt, "lamb") == 0 ? CZ_OPT_LAMB : CZ_OPT_ADAMW;
    c.lr = 1e-3, c.beta1 = 0.9, c.beta2 = 0.999, c.eps = 1e-6, c.weight_decay = 0.01;
    c.bias_correction = 1, c.clip_norm = 1.0;
    c.placement = !strcmp(place, "coordinator") ? CZ_PLACE_COORDINATOR
                  : !strcmp(place, "sharded")   ? CZ_PLACE_SHARDED
                                                : CZ_PLACE_REPLICATED;
    cz_comm_config dc;
    memset(&dc, 0, sizeof dc);
    dc.allreduce = CZ_ALLREDUCE_RING;
    dc.bucket_mb = 30000.0 * 4 / (1024 * 1024); /* buckets cut tensors into pieces */
    cz_error err;
    cz_optimizer *o = NULL;
    cz_grad_sync *gs = NULL;
    if (cz_grad_sync_create(&gs, d, &dc, n, cz_placement_sync_mode(c.placement), CZ_GRAD_ASCENDING,
                            &err) != 0 ||
        cz_optimizer_create(&o, d, &c, gs, ranges, NT, &err) != 0) {
        CHECK(0, "%s", err.msg);
        cz_grad_sync_free(gs);
        return -1;
    }
    float *g = floats(n);
    fill(w, n, 1, 0.5f, 0);
    omp_set_num_threads(threads);
    int rc = 0;
    for (int s = 0; s < STEPS && rc == 0; s++) {
        step_grads(g, n, s);
        cz_grad_sync_begin(gs, g);
        for (int k = 0; k < NT; k++) cz_grad_sync_ready(gs, ranges[k].offset, ranges[k].numel);
        cz_step_report rep;
        rc = cz_grad_sync_finish(gs, &err);
        if (rc == 0) rc = cz_optimizer_step(o, w, g, MB, 1e-3 * (s + 1), &rep, &err);
        CHECK(rc == 0, "%s", err.msg);
        norm[s] = rep.grad_norm;
        clip[s] = rep.clip_scale;
    }
    omp_set_num_threads(1);
    free(g);
    cz_optimizer_free(o);
    cz_grad_sync_free(gs);
    return rc;
}

/* The step as it was written before the fast path: average written back as
 * floats, then the scalar AdamW with the clip factor as gscale. */
static void old_form(const cz_param_range *ranges, size_t n, float *w, const double *clip) {
    float *g = floats(n), *m = floats(n), *v = floats(n);
    fill(w, n, 1, 0.5f, 0);
    for (int s = 0; s < STEPS; s++) {
        step_grads(g, n, s);
        for (size_t i = 0; i < n; i++) g[i] = g[i] * (float)(1.0 / MB);
        cz_adam_coef k = coef(s + 1, (float)clip[s]);
        k.lr = (float)(1e-3 * (s + 1));
        cz_adamw_update_ref(&k, ranges, NT, w, g, m, v, 0, n);
    }
    free(g), free(m), free(v);
}

static void test_step(const cz_comm *d) {
    cz_param_range ranges[NT];
    size_t n = 0;
    for (int k = 0; k < NT; k++) {
        ranges[k] = (cz_param_range){n, tsize[k], tnodecay[k]};
        n += tsize[k];
    }
    static const char *places[3] = {"sharded", "replicated", "coordinator"};
    static const char *opts[2] = {"adamw", "lamb"};
    float *w1 = floats(n), *wt = floats(n), *wold = floats(n), *g = floats(n);
    for (int o = 0; o < 2; o++)
        for (int p = 0; p < 3; p++) {
            double n1[STEPS], c1[STEPS], nt[STEPS], ct[STEPS];
            if (run_steps(d, opts[o], places[p], 1, ranges, n, w1, n1, c1) != 0) continue;
            for (int t = 2; t <= 3; t++) {
                if (run_steps(d, opts[o], places[p], t, ranges, n, wt, nt, ct) != 0) continue;
                CHECK(SAME(w1, wt, n), "%s %s: weights differ between 1 and %d threads", opts[o],
                      places[p], t);
                CHECK(memcmp(n1, nt, sizeof n1) == 0,
                      "%s %s: norms differ between 1 and %d threads", opts[o], places[p], t);
            }
            CHECK(c1[CLIP_STEP] < 1 && c1[0] == 1, "%s: clipping not exercised (%g, %g)", opts[o],
                  c1[0], c1[CLIP_STEP]);
            if (o != 0) continue;
            old_form(ranges, n, wold, c1);
            CHECK(SAME(w1, wold, n), "adamw %s: weights differ from the two-pass scalar form",
                  places[p]);
            for (int s = 0; s < STEPS; s++) {
                step_grads(g, n, s);
                double ref = sqrt(plain_sumsq(g, (float)(1.0 / MB), n));
                CHECK(fabs(n1[s] - ref) <= 1e-12 * ref, "step %d: norm %.17g vs double %.17g", s,
                      n1[s], ref);
            }
        }
    free(w1), free(wt), free(wold), free(g);
}

int main(int argc, char **argv) {
    cz_comm d;
    mpi_test_begin(&d, &argc, &argv);
    printf("kernel path: %s\n", cz_kernels_describe());
    if (cz_cpu_kernel_isa_refused()) {
        printf("skipped: this CPU cannot run the path CLOZE_KERNELS asks for\n");
        cz_comm_finalize(&d);
        return 77;
    }
    test_rules();
    test_step(&d);
    return mpi_test_end(&d);
}
