/* Optimizer placements as real MPI jobs (1..5 ranks): coordinator, sharded
 * (ZeRO-1) and replicated must leave bitwise-identical weights on every
 * rank, step after step, for AdamW and LAMB, through gradient averaging,
 * clipping and a skipped non-finite step; and agree with an independent
 * double-precision reference of the whole step. Moments gathered from the
 * sharded placement equal the replicated ones; scattered into a fresh
 * optimizer they continue the run bit for bit. The same with per-tensor
 * learning-rate and weight-decay multipliers (µP's, cz_optimizer_set_multipliers),
 * which LAMB refuses. */
#include "cloze/optim.h"
#include "cloze/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_main.h"

#define NT 7
static const size_t tsize[NT] = {1000, 7, 2000, 3, 1500, 1, 492};
static const int tnodecay[NT] = {0, 1, 0, 1, 0, 1, 0};
#define N 5003
#define STEPS 6
#define CLIP_STEP 2
#define NAN_STEP 4
static cz_param_range ranges[NT];
/* µP-like multipliers (lr / w, wd x w on "matrix-like" tensors), or none */
static const double mult_lr[NT] = {0.25, 1, 0.25, 1, 0.5, 1, 1};
static const double mult_wd[NT] = {4, 1, 4, 1, 2, 1, 1};
static int use_mult;

static float grad_of(int r, int s, size_t i) {
    if (s == NAN_STEP && i == 17 && r == 0) return NAN;
    cz_rng_stream st = cz_rng_stream_make(5, CZ_RNG_TEST, (uint64_t)r, (uint64_t)s, 0);
    return (float)cz_rng_normal(&st, i) * (s == CLIP_STEP ? 0.5f : 0.005f);
}

static float init_of(size_t i) {
    cz_rng_stream st = cz_rng_stream_make(5, CZ_RNG_TEST, 1000, 0, 0);
    return (float)cz_rng_normal(&st, i) * 0.5f;
}

static cz_optim_config ocfg(const char *name) {
    cz_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = strcmp(name, "lamb") == 0 ? CZ_OPT_LAMB : CZ_OPT_ADAMW;
    c.lr = 1e-2;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-6;
    c.weight_decay = 0.01;
    c.bias_correction = 1;
    c.clip_norm = 1.0;
    c.schedule = CZ_SCHEDULE_LINEAR;
    c.warmup_steps = 2;
    return c;
}

/* Independent reference in double: sums over ranks, averaging, norm,
 * clipping, AdamW or LAMB. Returns the norms per step. */
static void reference(const cz_optim_config *c, int lamb, int p, int mb, double *w, double *norms) {
    double *m = calloc(N, sizeof(double)), *v = calloc(N, sizeof(double));
    double *u = calloc(N, sizeof(double)), *g = calloc(N, sizeof(double));
    for (size_t i = 0; i < N; i++) w[i] = init_of(i);
    int t = 0;
    for (int s = 0; s < STEPS; s++) {
        double sq = 0;
        for (size_t i = 0; i < N; i++) {
            g[i] = 0;
            for (int r = 0; r < p; r++) g[i] += grad_of(r, s, i);
            g[i] /= mb;
            sq += g[i] * g[i];
        }
        norms[s] = sqrt(sq);
        if (!isfinite(norms[s])) continue;
        double clip = norms[s] > c->clip_norm ? c->clip_norm / norms[s] : 1;
        t++;
        double lr0 = cz_lr_at(c, s, STEPS);
        double c1 = 1 - pow(c->beta1, t), c2 = 1 - pow(c->beta2, t);
        for (int k = 0; k < NT; k++) {
            double wn = 0, un = 0;
            double lr = lr0 * (use_mult ? mult_lr[k] : 1);
            double wd = c->weight_decay * (use_mult ? mult_wd[k] : 1);
            for (size_t i = ranges[k].offset; i < ranges[k].offset + ranges[k].numel; i++) {
                double gi = g[i] * clip;
                m[i] = c->beta1 * m[i] + (1 - c->beta1) * gi;
                v[i] = c->beta2 * v[i] + (1 - c->beta2) * gi * gi;
                u[i] =
                    (m[i] / c1) / (sqrt(v[i] / c2) + c->eps) + (ranges[k].no_decay ? 0 : wd * w[i]);
                wn += w[i] * w[i];
                un += u[i] * u[i];
            }
            double trust = lamb && wn > 0 && un > 0 ? sqrt(wn / un) : 1;
            for (size_t i = ranges[k].offset; i < ranges[k].offset + ranges[k].numel; i++)
                w[i] -= lr * trust * u[i];
        }
    }
    free(m);
    free(v);
    free(u);
    free(g);
}

/* One training step of one placement as the train loop runs it: local
 * grads, the sync begun, hook calls in the order a backward makes them
 * (first tensor first), the sync finished, then the optimizer step. */
static int do_step(const cz_comm *d, cz_grad_sync *gs, cz_optimizer *o, const cz_optim_config *c,
                   float *w, float *g, int s, int mb, cz_step_report *rep, cz_error *err) {
    for (size_t i = 0; i < N; i++) g[i] = grad_of(d->rank, s, i);
    cz_grad_sync_begin(gs, g);
    for (int k = 0; k < NT; k++) cz_grad_sync_ready(gs, ranges[k].offset, ranges[k].numel);
    if (cz_grad_sync_finish(gs, err) != 0) return -1;
    return cz_optimizer_step(o, w, g, mb, cz_lr_at(c, s, STEPS), rep, err);
}

/* The grad sync a placement needs, and its optimizer. */
static int make(const cz_comm *d, const cz_optim_config *c, const cz_comm_config *dc,
                cz_grad_sync **gs, cz_optimizer **o, cz_error *err) {
    *o = NULL;
    if (cz_grad_sync_create(gs, d, dc, N, cz_placement_sync_mode(c->placement), CZ_GRAD_ASCENDING,
                            err) != 0)
        return -1;
    if (cz_optimizer_create(o, d, c, *gs, ranges, NT, err) != 0) return -1;
    return use_mult ? cz_optimizer_set_multipliers(*o, mult_lr, mult_wd, err) : 0;
}

static void run(const cz_comm *d, const char *opt, const char *algo) {
    static const char *places[3] = {"coordinator", "sharded", "replicated"};
    static const cz_placement place_of[3] = {CZ_PLACE_COORDINATOR, CZ_PLACE_SHARDED,
                                             CZ_PLACE_REPLICATED};
    cz_optim_config c = ocfg(opt);
    cz_error err;
    cz_optimizer *o[3] = {0};
    cz_grad_sync *gs[3] = {0};
    float *w[3], *g = malloc(N * sizeof(float));
    int mb = 2 * d->size; /* two micro-batches per rank */
    for (int j = 0; j < 3; j++) {
        cz_comm_config dc;
        memset(&dc, 0, sizeof dc);
        dc.allreduce = strcmp(algo, "ring") == 0 ? CZ_ALLREDUCE_RING : CZ_ALLREDUCE_MPI;
        c.placement = place_of[j];
        dc.bucket_mb = 1200.0 * 4 / (1024 * 1024); /* 1200 floats: 5 buckets */
        dc.overlap = 1;
        if (make(d, &c, &dc, &gs[j], &o[j], &err) != 0) {
            CHECK(0, "%s", err.msg);
            return;
        }
        w[j] = malloc(N * sizeof(float));
        for (size_t i = 0; i < N; i++) w[j][i] = init_of(i);
    }
    int ring = strcmp(algo, "ring") == 0;
    double ref[N], norms[STEPS];
    reference(&c, strcmp(opt, "lamb") == 0, d->size, mb, ref, norms);
    float *before = malloc(N * sizeof(float));
    for (int s = 0; s < STEPS; s++) {
        cz_step_report rep[3];
        memcpy(before, w[0], N * sizeof(float));
        for (int j = 0; j < 3; j++)
            CHECK(do_step(d, gs[j], o[j], &c, w[j], g, s, mb, &rep[j], &err) == 0, "%s: %s",
                  places[j], err.msg);
        for (int j = 0; j < 3; j++) {
            if (ring) {
                CHECK(memcmp(w[j], w[0], N * sizeof(float)) == 0,
                      "%s %s step %d: %s weights differ from coordinator", opt, algo, s, places[j]);
                CHECK(rep[j].grad_norm == rep[0].grad_norm ||
                          (isnan(rep[j].grad_norm) && isnan(rep[0].grad_norm)),
                      "%s step %d: norm bits differ", places[j], s);
            }
            CHECK(mpi_test_same_on_all_ranks(d, w[j], N * sizeof(float)),
                  "%s %s step %d: ranks differ", opt, places[j], s);
            CHECK(rep[j].skipped == (s == NAN_STEP), "%s step %d: skipped=%d", places[j], s,
                  rep[j].skipped);
            if (s != NAN_STEP)
                CHECK(fabs(rep[j].grad_norm - norms[s]) <= 1e-5 * norms[s], "norm %g vs %g",
                      rep[j].grad_norm, norms[s]);
            CHECK((s == CLIP_STEP) == (rep[j].clip_scale < 1), "step %d: clip scale %g", s,
                  rep[j].clip_scale);
        }
        if (s == NAN_STEP) {
            CHECK(memcmp(before, w[0], N * sizeof(float)) == 0, "skipped step changed weights");
            for (int j = 0; j < 3; j++)
                CHECK(cz_optimizer_steps_done(o[j]) == s, "skipped step counted");
        }
    }
    double worst = 0;
    for (size_t i = 0; i < N; i++) {
        double e = fabs(w[0][i] - ref[i]) / (c.lr * STEPS);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-4, "%s %s: weights off the double reference by %g (of lr*steps)", opt, algo,
          worst);
    /* moments: gathered from each placement, equal on rank 0 */
    float *mm[3], *vv[3];
    for (int j = 0; j < 3; j++) {
        mm[j] = calloc(N, sizeof(float));
        vv[j] = calloc(N, sizeof(float));
        CHECK(cz_optimizer_gather_moments(o[j], mm[j], vv[j], &err) == 0, "%s", err.msg);
        if (d->rank == 0 && ring)
            CHECK(memcmp(mm[j], mm[0], N * sizeof(float)) == 0 &&
                      memcmp(vv[j], vv[0], N * sizeof(float)) == 0,
                  "%s moments differ", places[j]);
    }
    /* resume: a fresh sharded optimizer gets the moments scattered and the
     * step count, and continues exactly like the original */
    cz_optimizer *fresh;
    cz_grad_sync *fresh_gs;
    cz_comm_config dc;
    memset(&dc, 0, sizeof dc);
    dc.allreduce = strcmp(algo, "ring") == 0 ? CZ_ALLREDUCE_RING : CZ_ALLREDUCE_MPI;
    c.placement = CZ_PLACE_SHARDED;
    dc.bucket_mb = 1200.0 * 4 / (1024 * 1024);
    dc.overlap = 1;
    if (make(d, &c, &dc, &fresh_gs, &fresh, &err) == 0) {
        CHECK(cz_optimizer_scatter_moments(fresh, mm[1], vv[1], &err) == 0, "%s", err.msg);
        cz_optimizer_set_steps_done(fresh, cz_optimizer_steps_done(o[1]));
        float *w2 = malloc(N * sizeof(float));
        memcpy(w2, w[1], N * sizeof(float));
        cz_step_report r1, r2;
        do_step(d, gs[1], o[1], &c, w[1], g, STEPS - 1, mb, &r1, &err);
        do_step(d, fresh_gs, fresh, &c, w2, g, STEPS - 1, mb, &r2, &err);
        CHECK(memcmp(w2, w[1], N * sizeof(float)) == 0, "resumed sharded optimizer diverges");
        free(w2);
        cz_optimizer_free(fresh);
        cz_grad_sync_free(fresh_gs);
    } else {
        CHECK(0, "%s", err.msg);
    }
    for (int j = 0; j < 3; j++) {
        cz_optimizer_free(o[j]);
        cz_grad_sync_free(gs[j]);
        free(w[j]);
        free(mm[j]);
        free(vv[j]);
    }
    free(g);
    free(before);
}

int main(int argc, char **argv) {
    cz_comm d;
    mpi_test_begin(&d, &argc, &argv);
    size_t off = 0;
    for (int k = 0; k < NT; k++) {
        ranges[k] = (cz_param_range){off, tsize[k], tnodecay[k]};
        off += tsize[k];
    }
    if (off != N) return 1;
    run(&d, "adamw", "ring");
    run(&d, "lamb", "ring");
    run(&d, "adamw", "mpi");
    use_mult = 1;
    run(&d, "adamw", "ring");
    /* LAMB's trust ratio and µP's multipliers: refused, naming the key */
    cz_optim_config c = ocfg("lamb");
    cz_comm_config dc;
    memset(&dc, 0, sizeof dc);
    dc.allreduce = CZ_ALLREDUCE_RING;
    cz_grad_sync *gs;
    cz_optimizer *o;
    cz_error err;
    CHECK(make(&d, &c, &dc, &gs, &o, &err) != 0 && strstr(err.msg, "optim.name = lamb"),
          "LAMB took multipliers");
    cz_optimizer_free(o);
    cz_grad_sync_free(gs);
    return mpi_test_end(&d);
}
