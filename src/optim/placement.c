/* optim: where the optimizer runs (coordinator / sharded / replicated) and
 * the step that follows the gradient sync: average, global norm, clip,
 * update, bring the new weights to every rank. All communication goes
 * through comm (include/cloze/comm.h).
 *
 * Everything is organised by "segments": the intersections of the tensors
 * (cz_param_range) with the pieces of the bucket layout (bucket k, chunk c;
 * see comm.h). A segment belongs to one tensor and is owned by one rank.
 * Norms are one double partial per segment, summed in segment order, so the
 * same bits come out whether one rank computed every partial (coordinator,
 * replicated) or each rank its own (sharded: the partial table is summed
 * over ranks with each entry non-zero on exactly one rank, x + 0 = x, so
 * the exchange is exact in any order).
 *
 * The work of one rank is cut further into blocks: the segments it updates,
 * each in pieces of CZ_OPTIM_BLOCK elements from the segment's start. The
 * norm, the update and LAMB's passes are OpenMP loops over these blocks;
 * a segment's partial is the sum of its blocks' sums in block order, so
 * nothing depends on which thread ran which block. */
#include "cloze/optim.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "optim_simd.h"

typedef struct segment {
    size_t off, count; /* in the flat buffer */
    size_t moff;       /* in this rank's moment arrays (when it holds them) */
    int range;         /* tensor index */
    int owner;         /* chunk index = rank that owns it under sharding */
} segment;

/* A piece of a segment this rank updates: the unit of parallel work. */
typedef struct block {
    size_t off, moff, count; /* as in segment */
    int seg;
} block;

struct cz_optimizer {
    cz_comm comm;
    cz_comm sync_comm; /* the grad sync's (cz_grad_sync_comm): the weight all-gather's */
    cz_optim_config cfg;
    cz_optim_kind kind;
    cz_placement place;
    cz_allreduce_algo algo;
    int overlap; /* sharded AdamW: bucket k gathered while k+1 is updated */
    size_t n;
    cz_param_range *ranges;
    int n_ranges;
    cz_bucket_layout layout; /* the grad sync's */
    segment *seg;
    int n_seg;
    float *m, *v, *u; /* moments (and LAMB's direction) for the segments this rank updates */
    size_t n_moments;
    double *part, *part2; /* per-segment partial sums */
    block *blk;           /* this rank's blocks, in segment order */
    int n_blk;
    double *bsum, *bsum2;      /* per-block sums of squares */
    double *trust;             /* LAMB, per tensor */
    double *lr_mult, *wd_mult; /* per tensor (cz_optimizer_set_multipliers), 1 by default */
    int has_mult;              /* any multiplier not 1 */
    double lr_now;             /* the step's learning rate, before the multipliers */
    long t;
    /* dist.exact: the norm in one order that no layout decides (exact_norm) */
    int exact;
    double *xsum; /* [ceil(n / CZ_OPTIM_BLOCK)] */
};

/* Does this rank update segment s? */
static int mine(const cz_optimizer *o, const segment *s) {
    if (o->place == CZ_PLACE_REPLICATED) return 1;
    if (o->place == CZ_PLACE_COORDINATOR) return o->comm.rank == 0;
    return s->owner == o->comm.rank;
}

static int build_segments(cz_optimizer *o, cz_error *err) {
    const cz_bucket_layout *l = &o->layout;
    int cap = o->n_ranges + l->n_buckets * l->p + 1;
    o->seg = calloc((size_t)cap, sizeof *o->seg);
    if (!o->seg) return cz_fail(err, "optim: out of memory");
    size_t packed = 0;
    for (int k = 0; k < l->n_buckets; k++) {
        for (int c = 0; c < l->p; c++) {
            size_t poff, pcount;
            cz_piece_range(l, k, c, &poff, &pcount);
            if (pcount == 0) continue;
            /* first tensor that ends after poff (ranges are sorted) */
            int lo = 0, hi = o->n_ranges - 1;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (o->ranges[mid].offset + o->ranges[mid].numel <= poff)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (int r = lo; r < o->n_ranges && o->ranges[r].offset < poff + pcount; r++) {
                size_t a = o->ranges[r].offset > poff ? o->ranges[r].offset : poff;
                size_t b = o->ranges[r].offset + o->ranges[r].numel;
                if (b > poff + pcount) b = poff + pcount;
                if (b <= a) continue;
                if (o->n_seg == cap) return cz_fail(err, "optim: segment table overflow");
                segment *s = &o->seg[o->n_seg++];
                s->off = a;
                s->count = b - a;
                s->range = r;
                s->owner = c;
                s->moff = a;
                if (o->place == CZ_PLACE_SHARDED && c == o->comm.rank) {
                    s->moff = packed;
                    packed += s->count;
                }
            }
        }
    }
    /* the packing is comm's "owned" order (cz_layout_gather/scatter move it) */
    if (o->place == CZ_PLACE_SHARDED && packed != cz_layout_owned(l, o->comm.rank))
        return cz_fail(err, "optim: %zu sharded moments, the layout owns %zu", packed,
                       cz_layout_owned(l, o->comm.rank));
    if (o->place == CZ_PLACE_SHARDED)
        o->n_moments = packed;
    else if (o->place == CZ_PLACE_REPLICATED || o->comm.rank == 0)
        o->n_moments = o->n;
    else
        o->n_moments = 0;
    return 0;
}

static int build_blocks(cz_optimizer *o, cz_error *err) {
    size_t nb = 0;
    for (int i = 0; i < o->n_seg; i++)
        if (mine(o, &o->seg[i])) nb += (o->seg[i].count + CZ_OPTIM_BLOCK - 1) / CZ_OPTIM_BLOCK;
    if (nb > (size_t)0x7fffffff) return cz_fail(err, "optim: %zu blocks, too many", nb);
    o->blk = calloc(nb + 1, sizeof *o->blk);
    o->bsum = cz_alloc((nb + 1) * sizeof(double), err);
    o->bsum2 = o->bsum ? cz_alloc((nb + 1) * sizeof(double), err) : NULL;
    if (!o->blk || !o->bsum2) return cz_fail(err, "optim: out of memory");
    for (int i = 0; i < o->n_seg; i++) {
        const segment *s = &o->seg[i];
        if (!mine(o, s)) continue;
        for (size_t b = 0; b < s->count; b += CZ_OPTIM_BLOCK) {
            block *bl = &o->blk[o->n_blk++];
            bl->off = s->off + b;
            bl->moff = s->moff + b;
            bl->count = s->count - b < CZ_OPTIM_BLOCK ? s->count - b : CZ_OPTIM_BLOCK;
            bl->seg = i;
        }
    }
    return 0;
}

/* part[i] = sum of segment i's block sums, in block order (0 elsewhere) */
static void segment_sums(const cz_optimizer *o, const double *bsum, double *part) {
    memset(part, 0, (size_t)o->n_seg * sizeof(double));
    for (int b = 0; b < o->n_blk; b++) part[o->blk[b].seg] += bsum[b];
}

cz_sync_mode cz_placement_sync_mode(cz_placement place) {
    return place == CZ_PLACE_COORDINATOR ? CZ_SYNC_REDUCE
           : place == CZ_PLACE_SHARDED   ? CZ_SYNC_REDUCE_SCATTER
                                         : CZ_SYNC_ALLREDUCE;
}

int cz_optimizer_create(cz_optimizer **out, const cz_comm *c, const cz_optim_config *ocfg,
                        const cz_grad_sync *gs, const cz_param_range *ranges, int n_ranges,
                        cz_error *err) {
    *out = NULL;
    cz_optimizer *o = calloc(1, sizeof *o);
    if (!o) return cz_fail(err, "optim: out of memory");
    o->comm = *c;
    o->sync_comm = *cz_grad_sync_comm(gs);
    o->cfg = *ocfg;
    o->layout = *cz_grad_sync_layout(gs);
    o->n = o->layout.n;
    o->n_ranges = n_ranges;
    o->kind = ocfg->kind;
    o->place = ocfg->placement;
    o->algo = cz_grad_sync_algo(gs);
    /* the update of sharded AdamW overlaps the weight all-gather when the
     * grad sync overlaps backward (dist.overlap, MPI_THREAD_MULTIPLE) */
    o->overlap = o->place == CZ_PLACE_SHARDED && cz_grad_sync_overlaps(gs) && c->size > 1;
    size_t n = o->n;
    if (cz_grad_sync_mode(gs) != cz_placement_sync_mode(o->place) || o->layout.p != c->size) {
        cz_fail(err,
                "optim: the grad sync does not leave the gradients where placement %d needs "
                "them",
                (int)o->place);
        goto fail;
    }
    size_t expect = 0;
    for (int r = 0; r < n_ranges; r++) {
        if (ranges[r].offset != expect) {
            cz_fail(
                err,
                "optim: tensor range %d starts at %zu, expected %zu (ranges must tile the buffer)",
                r, ranges[r].offset, expect);
            goto fail;
        }
        expect += ranges[r].numel;
    }
    if (expect != n) {
        cz_fail(err, "optim: tensor ranges cover %zu floats, the buffer has %zu", expect, n);
        goto fail;
    }
    o->ranges = malloc(((size_t)n_ranges + 1) * sizeof *ranges);
    if (!o->ranges) {
        cz_fail(err, "optim: out of memory");
        goto fail;
    }
    memcpy(o->ranges, ranges, (size_t)n_ranges * sizeof *ranges);
    if (build_segments(o, err) != 0 || build_blocks(o, err) != 0) goto fail;
    size_t nm = o->n_moments + 1;
    o->m = cz_alloc(nm * sizeof(float), err);
    o->v = o->m ? cz_alloc(nm * sizeof(float), err) : NULL;
    o->u = o->v && o->kind == CZ_OPT_LAMB ? cz_alloc(nm * sizeof(float), err) : NULL;
    o->part = cz_alloc(((size_t)o->n_seg + 1) * sizeof(double), err);
    o->part2 = cz_alloc(((size_t)o->n_seg + 1) * sizeof(double), err);
    o->trust = cz_alloc(((size_t)n_ranges + 1) * sizeof(double), err);
    o->lr_mult = cz_alloc(((size_t)n_ranges + 1) * sizeof(double), err);
    o->wd_mult = cz_alloc(((size_t)n_ranges + 1) * sizeof(double), err);
    if (!o->v || (o->kind == CZ_OPT_LAMB && !o->u) || !o->part || !o->part2 || !o->trust ||
        !o->lr_mult || !o->wd_mult)
        goto fail;
    for (int r = 0; r < n_ranges; r++) o->lr_mult[r] = o->wd_mult[r] = 1.0;
    *out = o;
    return 0;
fail:
    cz_optimizer_free(o);
    return -1;
}

void cz_optimizer_free(cz_optimizer *o) {
    if (!o) return;
    free(o->ranges);
    free(o->seg);
    cz_free(o->m);
    cz_free(o->v);
    cz_free(o->u);
    cz_free(o->part);
    cz_free(o->part2);
    cz_free(o->trust);
    cz_free(o->xsum);
    cz_free(o->lr_mult);
    cz_free(o->wd_mult);
    free(o->blk);
    cz_free(o->bsum);
    cz_free(o->bsum2);
    free(o);
}

int cz_optimizer_set_multipliers(cz_optimizer *o, const double *lr_mult, const double *wd_mult,
                                 cz_error *err) {
    int any = 0;
    for (int r = 0; r < o->n_ranges; r++) {
        double a = lr_mult ? lr_mult[r] : 1.0, d = wd_mult ? wd_mult[r] : 1.0;
        if (!(a > 0 && isfinite(a) && d >= 0 && isfinite(d)))
            return cz_fail(err,
                           "optim: tensor %d: learning-rate multiplier %g, weight-decay "
                           "multiplier %g (need > 0 and >= 0, finite)",
                           r, a, d);
        any |= a != 1.0 || d != 1.0;
    }
    if (any && o->kind == CZ_OPT_LAMB)
        return cz_fail(err, "optim.name = lamb: per-tensor learning-rate multipliers (µP, "
                            "model.parametrization = mup) are defined for Adam(W) only");
    for (int r = 0; r < o->n_ranges; r++) {
        o->lr_mult[r] = lr_mult ? lr_mult[r] : 1.0;
        o->wd_mult[r] = wd_mult ? wd_mult[r] : 1.0;
    }
    o->has_mult = any;
    return 0;
}

const double *cz_optimizer_lr_mults(const cz_optimizer *o) {
    return o->lr_mult;
}
const double *cz_optimizer_wd_mults(const cz_optimizer *o) {
    return o->wd_mult;
}

long cz_optimizer_steps_done(const cz_optimizer *o) {
    return o->t;
}
void cz_optimizer_set_steps_done(cz_optimizer *o, long t) {
    o->t = t;
}

/* Makes the per-segment partials complete on every rank (see top). */
static int exchange_partials(cz_optimizer *o, double *part, cz_error *err) {
    if (o->comm.size == 1 || o->place == CZ_PLACE_REPLICATED) return 0;
    int rc = o->place == CZ_PLACE_SHARDED
                 ? cz_comm_allreduce_doubles(&o->comm, part, o->n_seg, CZ_OP_SUM, err)
                 : cz_comm_bcast(&o->comm, part, (size_t)o->n_seg * sizeof(double), 0, err);
    return rc == 0 ? 0 : cz_fail_prefix(err, "optim: exchange of norm partials");
}

int cz_optimizer_set_exact(cz_optimizer *o, cz_error *err) {
    if (o->kind == CZ_OPT_LAMB)
        return cz_fail(err, "optim.name = lamb with dist.exact = on: LAMB's per-tensor norms "
                            "follow the bucket layout; use adamw or dist.exact = off");
    size_t nb = (o->n + CZ_OPTIM_BLOCK - 1) / CZ_OPTIM_BLOCK;
    o->xsum = cz_alloc((nb + 1) * sizeof(double), err);
    if (!o->xsum) return -1;
    o->exact = 1;
    return 0;
}

/* dist.exact: every rank holds the whole summed gradient, so each computes
 * the norm itself over blocks of CZ_OPTIM_BLOCK from offset 0, the block
 * sums added in order: an order fixed by n alone, the same for every rank
 * count, bucket size and placement, with no exchange. */
static double exact_norm(cz_optimizer *o, const float *grads, float scale) {
    long nb = (long)((o->n + CZ_OPTIM_BLOCK - 1) / CZ_OPTIM_BLOCK);
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        size_t off = (size_t)b * CZ_OPTIM_BLOCK;
        size_t cnt = o->n - off < CZ_OPTIM_BLOCK ? o->n - off : CZ_OPTIM_BLOCK;
        o->xsum[b] = cz_optim_sumsq_block(grads + off, scale, cnt, 1);
    }
    double total = 0;
    for (long b = 0; b < nb; b++) total += o->xsum[b];
    return sqrt(total);
}

/* The global norm of the averaged gradient (g * scale, float). The average
 * is not written back: the update multiplies by scale again on the fly
 * (same float product), which saves a write pass over the gradients. */
static int global_norm(cz_optimizer *o, const float *grads, float scale, double *norm,
                       cz_error *err) {
    if (o->exact) {
        *norm = exact_norm(o, grads, scale);
        return 0;
    }
    const block *blk = o->blk;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < o->n_blk; b++)
        o->bsum[b] = cz_optim_sumsq_block(grads + blk[b].off, scale, blk[b].count, 1);
    segment_sums(o, o->bsum, o->part);
    if (exchange_partials(o, o->part, err) != 0) return -1;
    double total = 0;
    for (int i = 0; i < o->n_seg; i++) total += o->part[i];
    *norm = sqrt(total);
    return 0;
}

static void make_coef(const cz_optimizer *o, double lr, float clip, cz_adam_coef *k) {
    const cz_optim_config *c = &o->cfg;
    long t = o->t + 1; /* the update being made */
    k->lr = (float)lr;
    k->beta1 = (float)c->beta1;
    k->beta2 = (float)c->beta2;
    k->eps = (float)c->eps;
    k->wd = (float)c->weight_decay;
    k->c1 = c->bias_correction ? (float)(1.0 - pow(c->beta1, (double)t)) : 1.0f;
    k->c2 = c->bias_correction ? (float)(1.0 - pow(c->beta2, (double)t)) : 1.0f;
    k->gscale = clip;
}

static float decay_of(const cz_optimizer *o, const cz_adam_coef *k, const block *b) {
    int r = o->seg[b->seg].range;
    if (o->ranges[r].no_decay) return 0.0f;
    return o->wd_mult[r] == 1.0 ? k->wd : (float)(o->cfg.weight_decay * o->wd_mult[r]);
}

/* Block b's coefficients: k, with the learning rate times its tensor's
 * multiplier (the product in double, rounded once, as make_coef rounds lr) */
static const cz_adam_coef *coef_of(const cz_optimizer *o, const cz_adam_coef *k, const block *b,
                                   cz_adam_coef *kb) {
    double a = o->lr_mult[o->seg[b->seg].range];
    if (a == 1.0) return k;
    *kb = *k;
    kb->lr = (float)(o->lr_now * a);
    return kb;
}

static void adamw_update(cz_optimizer *o, const cz_adam_coef *k, float scale, float *params,
                         const float *grads) {
    const block *blk = o->blk;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < o->n_blk; b++) {
        cz_adam_coef kb;
        cz_optim_adamw_block(coef_of(o, k, &blk[b], &kb), scale, decay_of(o, k, &blk[b]),
                             params + blk[b].off, grads + blk[b].off, o->m + blk[b].moff,
                             o->v + blk[b].moff, blk[b].count, 1);
    }
}

static int lamb_update(cz_optimizer *o, const cz_adam_coef *k, float scale, float *params,
                       const float *grads, cz_error *err) {
    const block *blk = o->blk;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < o->n_blk; b++)
        cz_optim_lamb_block(k, scale, decay_of(o, k, &blk[b]), params + blk[b].off,
                            grads + blk[b].off, o->m + blk[b].moff, o->v + blk[b].moff,
                            o->u + blk[b].moff, blk[b].count, 1, &o->bsum[b], &o->bsum2[b]);
    segment_sums(o, o->bsum, o->part);
    segment_sums(o, o->bsum2, o->part2);
    if (o->place == CZ_PLACE_SHARDED &&
        (exchange_partials(o, o->part, err) != 0 || exchange_partials(o, o->part2, err) != 0))
        return -1;
    /* per tensor: sums over its segments in segment order */
    double *wsq = calloc((size_t)o->n_ranges + 1, sizeof(double));
    double *usq = calloc((size_t)o->n_ranges + 1, sizeof(double));
    if (!wsq || !usq) {
        free(wsq);
        free(usq);
        return cz_fail(err, "optim: out of memory");
    }
    for (int i = 0; i < o->n_seg; i++) {
        wsq[o->seg[i].range] += o->part[i];
        usq[o->seg[i].range] += o->part2[i];
    }
    for (int r = 0; r < o->n_ranges; r++) {
        double wn = sqrt(wsq[r]), un = sqrt(usq[r]);
        o->trust[r] = wn > 0 && un > 0 ? wn / un : 1.0;
    }
    free(wsq);
    free(usq);
#pragma omp parallel for schedule(static)
    for (int b = 0; b < o->n_blk; b++) {
        float lr_trust = (float)((double)k->lr * o->trust[o->seg[blk[b].seg].range]);
        cz_optim_lamb_apply_block(lr_trust, params + blk[b].off, o->u + blk[b].moff, blk[b].count,
                                  1);
    }
    return 0;
}

/* The sharded AdamW step with the weight all-gather overlapped (the grad
 * sync's thread model: a second thread on the grad sync's communicator,
 * idle between finish and the next begin): the main thread updates this
 * rank's blocks bucket by bucket (blocks are in bucket order, bucket 0
 * first), and a gather thread all-gathers bucket k as soon as it is
 * updated, while bucket k+1 is. The same calls in the same order as
 * cz_layout_allgather, so the same bits. */
typedef struct gather_job {
    cz_optimizer *o;
    float *params;
    int updated;    /* buckets whose blocks are updated */
    double seconds; /* in the all-gathers (metrics.jsonl's gather_seconds) */
    int rc;
    cz_error err;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} gather_job;

static void *gather_thread(void *arg) {
    gather_job *j = arg;
    const cz_bucket_layout *l = &j->o->layout;
    for (int k = 0; k < l->n_buckets && j->rc == 0; k++) {
        pthread_mutex_lock(&j->mu);
        while (j->updated <= k) pthread_cond_wait(&j->cv, &j->mu);
        pthread_mutex_unlock(&j->mu);
        size_t off, count;
        cz_bucket_range(l, k, &off, &count);
        double t0 = cz_now();
        if (cz_allgather(&j->o->sync_comm, j->o->algo, j->params + off, count, &j->err) != 0)
            j->rc = cz_fail_prefix(&j->err, "bucket %d of %d", k, l->n_buckets);
        j->seconds += cz_now() - t0;
    }
    return NULL;
}

static int adamw_update_gathered(cz_optimizer *o, const cz_adam_coef *k, float scale, float *params,
                                 const float *grads, double *gather_seconds, cz_error *err) {
    gather_job j = {.o = o, .params = params};
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, gather_thread, &j) != 0) {
        pthread_mutex_destroy(&j.mu);
        pthread_cond_destroy(&j.cv);
        adamw_update(o, k, scale, params, grads);
        double t0 = cz_now();
        int rc = cz_layout_allgather(&o->sync_comm, o->algo, &o->layout, params, err);
        *gather_seconds = cz_now() - t0;
        return rc;
    }
    const block *blk = o->blk;
    int b0 = 0;
    for (int kb = 0; kb < o->layout.n_buckets; kb++) {
        size_t off, count;
        cz_bucket_range(&o->layout, kb, &off, &count);
        int b1 = b0;
        while (b1 < o->n_blk && blk[b1].off >= off && blk[b1].off < off + count) b1++;
#pragma omp parallel for schedule(static)
        for (int b = b0; b < b1; b++) {
            cz_adam_coef kb;
            cz_optim_adamw_block(coef_of(o, k, &blk[b], &kb), scale, decay_of(o, k, &blk[b]),
                                 params + blk[b].off, grads + blk[b].off, o->m + blk[b].moff,
                                 o->v + blk[b].moff, blk[b].count, 1);
        }
        b0 = b1;
        pthread_mutex_lock(&j.mu);
        j.updated = kb + 1;
        pthread_cond_signal(&j.cv);
        pthread_mutex_unlock(&j.mu);
    }
    pthread_join(t, NULL);
    *gather_seconds = j.seconds;
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    if (b0 != o->n_blk)
        return cz_fail(err, "optim: %d of %d blocks outside the buckets", o->n_blk - b0, o->n_blk);
    if (j.rc != 0 && err) *err = j.err;
    return j.rc;
}

/* New weights from their updaters to every rank. */
static int distribute_params(cz_optimizer *o, float *params, cz_error *err) {
    if (o->comm.size == 1 || o->place == CZ_PLACE_REPLICATED) return 0;
    int rc = o->place == CZ_PLACE_COORDINATOR
                 ? cz_comm_bcast(&o->comm, params, o->n * sizeof(float), 0, err)
                 : cz_layout_allgather(&o->sync_comm, o->algo, &o->layout, params, err);
    return rc == 0 ? 0 : cz_fail_prefix(err, "optim: weights to every rank");
}

int cz_optimizer_step(cz_optimizer *o, float *params, float *grads, int micro_batches, double lr,
                      cz_step_report *rep, cz_error *err) {
    memset(rep, 0, sizeof *rep);
    rep->lr = lr;
    rep->clip_scale = 1;
    if (micro_batches < 1)
        return cz_fail(err, "optim: micro_batches = %d, need >= 1", micro_batches);
    double norm;
    float scale = (float)(1.0 / micro_batches);
    if (global_norm(o, grads, scale, &norm, err) != 0) return -1;
    rep->grad_norm = norm;
    if (!isfinite(norm)) {
        rep->skipped = 1; /* every rank saw the same norm: all skip together */
        return 0;
    }
    /* clip_by_global_norm (BERT optimization.py): g * c / max(norm, c) */
    double c = o->cfg.clip_norm;
    if (c > 0 && norm > c) rep->clip_scale = c / norm;
    cz_adam_coef k;
    make_coef(o, lr, (float)rep->clip_scale, &k);
    o->lr_now = lr;
    if (o->kind == CZ_OPT_LAMB) {
        if (lamb_update(o, &k, scale, params, grads, err) != 0) return -1;
    } else if (o->overlap) {
        o->t++;
        return adamw_update_gathered(o, &k, scale, params, grads, &rep->gather_seconds, err) == 0
                   ? 0
                   : cz_fail_prefix(err, "optim: weights to every rank");
    } else {
        adamw_update(o, &k, scale, params, grads);
    }
    o->t++;
    double t0 = cz_now();
    int rc = distribute_params(o, params, err);
    rep->gather_seconds = cz_now() - t0; /* metrics.jsonl: the weights' exchange alone */
    return rc;
}

int cz_optimizer_gather_moments(cz_optimizer *o, float *m_out, float *v_out, cz_error *err) {
    if (o->place == CZ_PLACE_SHARDED) /* packed in bucket order, even on 1 rank */
        return cz_layout_gather(&o->comm, &o->layout, o->m, m_out, err) != 0 ||
                       cz_layout_gather(&o->comm, &o->layout, o->v, v_out, err) != 0
                   ? cz_fail_prefix(err, "optim: moments to rank 0")
                   : 0;
    if (o->comm.rank == 0) {
        memcpy(m_out, o->m, o->n * sizeof(float));
        memcpy(v_out, o->v, o->n * sizeof(float));
    }
    return 0;
}

int cz_optimizer_scatter_moments(cz_optimizer *o, const float *m_in, const float *v_in,
                                 cz_error *err) {
    if (o->place == CZ_PLACE_SHARDED) /* packed in bucket order, even on 1 rank */
        return cz_layout_scatter(&o->comm, &o->layout, m_in, o->m, err) != 0 ||
                       cz_layout_scatter(&o->comm, &o->layout, v_in, o->v, err) != 0
                   ? cz_fail_prefix(err, "optim: moments from rank 0")
                   : 0;
    if (o->comm.rank == 0) {
        memcpy(o->m, m_in, o->n * sizeof(float));
        memcpy(o->v, v_in, o->n * sizeof(float));
    }
    if (o->place == CZ_PLACE_REPLICATED && o->comm.size > 1 &&
        (cz_comm_bcast(&o->comm, o->m, o->n * sizeof(float), 0, err) != 0 ||
         cz_comm_bcast(&o->comm, o->v, o->n * sizeof(float), 0, err) != 0))
        return cz_fail_prefix(err, "optim: moments from rank 0");
    return 0;
}
