/* comm: gradient synchronisation in buckets, overlapped with backward.
 *
 * Choice: a communication thread (needs MPI_THREAD_MULTIPLE, because the
 * main thread may still call MPI, e.g. for the loss) on its own duplicated
 * communicator. The backward hook only counts floats made final per bucket
 * and wakes the thread; the thread reduces the buckets strictly in the
 * order they complete under the producer's cz_grad_order
 * (cz_layout_bucket_at), each once it is complete. Every rank therefore
 * issues the same message sequence whatever order the hook reports ranges
 * in (no deadlock), and each bucket's bits come from the fixed ring order.
 * Without MPI_THREAD_MULTIPLE, cz_grad_sync_finish reduces all buckets
 * itself, in the same order.
 *
 * Rows handed over apart (cz_grad_sync_rows: the word embedding lookup's)
 * are reduced in finish, after every bucket, on the caller's thread: the
 * union of the ranks' row ids as a bit mask (MPI_BOR), then one compact
 * block of the union's rows through the same algorithm. The block is small
 * (the batch's distinct tokens, against the whole vocabulary in the
 * buckets), so this is what backward cannot hide. */
#include "comm_private.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cz_grad_sync {
    cz_comm comm; /* the thread's own communicator */
    cz_sync_mode mode;
    cz_allreduce_algo algo;
    cz_grad_order order;
    cz_bucket_layout layout;
    float *grads;
    size_t *ready; /* floats reported final, per bucket */
    int next;      /* position in the order of the next bucket to reduce (thread) */
    int done;      /* buckets reduced this step */
    int active;    /* between begin and finish */
    int failed;
    cz_error err;
    int use_thread, quit, sync_ok;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double wait_seconds;
    double comm_seconds; /* this step's time inside reduce_bucket */
    float *scratch;      /* one chunk: ring receive buffer / MPI_Reduce_scatter output */
    cz_grad_rows rows;   /* this step's rows (has_rows) */
    int has_rows;
    uint64_t *mask; /* the union's bits, one per row of the rows' tensor */
    size_t mask_words;
    float *block; /* [union, width] */
    size_t block_cap, tail_rows;
};

static int bucket_complete(const cz_grad_sync *gs, int k) {
    size_t off, count;
    cz_bucket_range(&gs->layout, k, &off, &count);
    return gs->ready[k] >= count;
}

/* count floats at b, reduced as the mode says (the one place) */
static int reduce_range(cz_grad_sync *gs, float *b, size_t count, cz_error *err) {
    int rc = 0;
    switch (gs->mode) {
    case CZ_SYNC_ALLREDUCE:
        rc = cz_allreduce(&gs->comm, gs->algo, b, count, gs->scratch, err);
        break;
    case CZ_SYNC_REDUCE_SCATTER:
        rc = cz_reduce_scatter(&gs->comm, gs->algo, b, count, gs->scratch, err);
        break;
    case CZ_SYNC_REDUCE:
        rc = cz_reduce(&gs->comm, gs->algo, b, count, gs->scratch, err);
        break;
    }
    return rc;
}

static int reduce_bucket(cz_grad_sync *gs, int k, cz_error *err) {
    size_t off, count;
    cz_bucket_range(&gs->layout, k, &off, &count);
    if (reduce_range(gs, gs->grads + off, count, err) != 0)
        return cz_fail_prefix(err, "grad sync: bucket %d", k);
    return 0;
}

static int next_ready(const cz_grad_sync *gs) {
    return gs->active && gs->next < gs->layout.n_buckets &&
           bucket_complete(gs, cz_layout_bucket_at(&gs->layout, gs->order, gs->next));
}

static void *comm_thread(void *arg) {
    cz_grad_sync *gs = arg;
    pthread_mutex_lock(&gs->mu);
    for (;;) {
        while (!gs->quit && !next_ready(gs)) pthread_cond_wait(&gs->cv, &gs->mu);
        if (gs->quit) break;
        int k = cz_layout_bucket_at(&gs->layout, gs->order, gs->next++);
        int failed = gs->failed;
        pthread_mutex_unlock(&gs->mu);
        cz_error e;
        /* after a failure keep counting buckets but stop communicating */
        double t0 = cz_now();
        int rc = failed ? 0 : reduce_bucket(gs, k, &e);
        double busy = cz_now() - t0;
        pthread_mutex_lock(&gs->mu);
        gs->comm_seconds += busy;
        if (rc != 0 && !gs->failed) {
            gs->failed = 1;
            gs->err = e;
        }
        gs->done++;
        pthread_cond_broadcast(&gs->cv);
    }
    pthread_mutex_unlock(&gs->mu);
    return NULL;
}

/* dist.bucket_mb = 0: 1/16 of the gradient, within [1, 25] MiB. Buckets
 * must be small enough that the first ones are final early in backward
 * (each bucket waits for its last float), and large enough that each
 * ring's 2(p-1) message latencies stay small beside its transfer; 25 MiB is
 * the size that earlier runs used (and PyTorch DDP's default), kept for
 * models of 400 MiB of gradients and more, so that their bits do not change
 * (docs/distributed-design.md, "Bucket layout and gradient sync"). */
static int ensure(void **p, size_t *cap, size_t want, size_t elem, cz_error *err) {
    if (want <= *cap) return 0;
    void *q = realloc(*p, want * elem);
    if (!q) return cz_fail(err, "grad sync: out of memory for %zu rows' block", want);
    *p = q;
    *cap = want;
    return 0;
}

/* Rows too many for a block (more than half the tensor's: its all-reduce
 * would carry more than the tensor's reduce-scatter): the rows scattered
 * into a zeroed copy of the buckets that hold the tensor, reduced bucket by
 * bucket as the buckets were, added where the tensor lies. */
static int reduce_rows_dense(cz_grad_sync *gs, cz_error *err) {
    const cz_grad_rows *r = &gs->rows;
    const cz_bucket_layout *l = &gs->layout;
    size_t lo = r->offset, hi = r->offset + r->height * r->width, w = r->width;
    int k_lo = (int)((l->n - hi) / l->bucket), k_hi = (int)((l->n - 1 - lo) / l->bucket);
    size_t s_lo, s_hi, off, count;
    cz_bucket_range(l, k_hi, &s_lo, &count);
    cz_bucket_range(l, k_lo, &off, &count);
    s_hi = off + count;
    if (ensure((void **)&gs->block, &gs->block_cap, s_hi - s_lo, sizeof(float), err) != 0)
        return -1;
    float *d = gs->block; /* d[i]: buffer offset s_lo + i */
    memset(d, 0, (s_hi - s_lo) * sizeof(float));
    for (size_t i = 0; i < r->n; i++)
        memcpy(d + lo - s_lo + (size_t)r->rows[i] * w, r->vals + i * w, w * sizeof(float));
    for (int k = k_hi; k >= k_lo; k--) {
        cz_bucket_range(l, k, &off, &count);
        if (gs->comm.size > 1 && reduce_range(gs, d + off - s_lo, count, err) != 0)
            return cz_fail_prefix(err, "grad sync: the rows in bucket %d", k);
    }
    for (size_t i = lo; i < hi; i++) gs->grads[i] += d[i - s_lo];
    return 0;
}

/* The rows' union, its block all-reduced, added to the reduced buffer. */
static int reduce_rows(cz_grad_sync *gs, cz_error *err) {
    const cz_grad_rows *r = &gs->rows;
    size_t words = (r->height + 63) / 64, w = r->width;
    if (ensure((void **)&gs->mask, &gs->mask_words, words, sizeof *gs->mask, err) != 0) return -1;
    memset(gs->mask, 0, words * sizeof *gs->mask);
    for (size_t i = 0; i < r->n; i++) gs->mask[r->rows[i] / 64] |= 1ull << (r->rows[i] % 64);
    if (gs->comm.size > 1 && words > (size_t)INT_MAX)
        return cz_fail(err, "grad sync: %zu rows exceed MPI's int counts", r->height);
    if (gs->comm.size > 1 && cz_comm_allreduce_u64(&gs->comm, gs->mask, (int)words, CZ_OP_BOR, err))
        return cz_fail_prefix(err, "grad sync: the union of %zu rows", r->n);
    size_t u = 0;
    for (size_t k = 0; k < words; k++) u += (size_t)__builtin_popcountll(gs->mask[k]);
    gs->tail_rows = u;
    if (!cz_grad_rows_as_block((double)u, (double)r->height)) return reduce_rows_dense(gs, err);
    if (ensure((void **)&gs->block, &gs->block_cap, u * w + 1, sizeof(float), err) != 0) return -1;
    memset(gs->block, 0, u * w * sizeof(float));
    /* slot of a row = how many union rows lie below it; both lists ascend */
    size_t slot = 0, mine = 0;
    for (size_t k = 0; k < words && mine < r->n; k++)
        for (uint64_t bits = gs->mask[k]; bits && mine < r->n; bits &= bits - 1, slot++)
            if (k * 64 + (size_t)__builtin_ctzll(bits) == (size_t)r->rows[mine])
                memcpy(gs->block + slot * w, r->vals + mine++ * w, w * sizeof(float));
    if (gs->comm.size > 1 && u * w > 0 &&
        cz_allreduce(&gs->comm, gs->algo, gs->block, u * w, NULL, err) != 0)
        return cz_fail_prefix(err, "grad sync: the block of %zu rows", u);
    slot = 0;
    for (size_t k = 0; k < words; k++)
        for (uint64_t bits = gs->mask[k]; bits; bits &= bits - 1, slot++) {
            float *g = gs->grads + r->offset + (k * 64 + (size_t)__builtin_ctzll(bits)) * w;
            const float *b = gs->block + slot * w;
            for (size_t j = 0; j < w; j++) g[j] += b[j];
        }
    return 0;
}

double cz_grad_bucket_bytes(const cz_comm_config *cfg, size_t n) {
    const double mib = 1024.0 * 1024.0;
    if (cfg->bucket_mb > 0) return cfg->bucket_mb * mib;
    double b = (double)n * sizeof(float) / 16;
    return b < mib ? mib : b > 25 * mib ? 25 * mib : b;
}

int cz_grad_sync_create(cz_grad_sync **out, const cz_comm *c, const cz_comm_config *cfg, size_t n,
                        cz_sync_mode mode, cz_grad_order order, cz_error *err) {
    *out = NULL;
    if (cfg->grad_wire == CZ_WIRE_BF16 && cfg->allreduce == CZ_ALLREDUCE_MPI)
        return cz_fail(err, "dist.grad_wire = \"bf16\" needs one of our all-reduce algorithms "
                            "(dist.allreduce = ring, hierarchical, torus2d or auto), not \"mpi\"");
    cz_grad_sync *gs = calloc(1, sizeof *gs);
    if (!gs) return cz_fail(err, "grad sync: out of memory");
    gs->mode = mode;
    gs->algo = cfg->allreduce;
    gs->order = order;
    cz_bucket_layout_make(&gs->layout, n, cz_grad_bucket_bytes(cfg, n), c->size);
    if (gs->layout.bucket > (size_t)INT_MAX) {
        free(gs);
        return cz_fail(err, "dist.bucket_mb: buckets of %zu floats exceed MPI's int counts",
                       (size_t)INT_MAX);
    }
    gs->ready = calloc((size_t)gs->layout.n_buckets + 1, sizeof *gs->ready);
    size_t max_chunk, dummy;
    cz_comm_chunk(gs->layout.bucket, c->size, 0, &dummy, &max_chunk);
    gs->scratch = cz_alloc((max_chunk + 1) * sizeof(float), err);
    if (!gs->ready || !gs->scratch) {
        cz_grad_sync_free(gs);
        return cz_fail(err, "grad sync: out of memory");
    }
    if (cz_comm_dup(c, &gs->comm, err) != 0) {
        cz_grad_sync_free(gs);
        return cz_fail_prefix(err, "grad sync");
    }
    /* the thread's algorithm as a context of its own (auto: chosen for one
     * bucket); its waits are bounded by dist.timeout_s */
    cz_coll_opts o;
    if (cz_coll_opts_from_config(&o, cfg, (double)gs->layout.bucket * sizeof(float), err) != 0 ||
        (c->size > 1 && cz_comm_attach_coll(&gs->comm, &o, err) != 0)) {
        cz_grad_sync_free(gs);
        return cz_fail_prefix(err, "grad sync");
    }
    if (gs->comm.impl->coll) gs->algo = cz_coll_algo(gs->comm.impl->coll);
    /* the rows' union mask is a small collective on this communicator: its
     * wait is bounded like the algorithm's (a lost host, one line) */
    gs->comm.impl->watch = gs->comm.impl->coll;
    pthread_mutex_init(&gs->mu, NULL);
    pthread_cond_init(&gs->cv, NULL);
    gs->sync_ok = 1;
    gs->use_thread = cfg->overlap && cz_comm_threads_ok(c) && c->size > 1;
    if (c->rank == 0 && c->size > 1)
        cz_info("gradient all-reduce: %s; %d bucket(s) of %.2f MiB (%s), %s, gradients on the "
                "wire: %s",
                gs->comm.impl->coll ? cz_coll_describe(gs->comm.impl->coll)
                                    : "mpi (Open MPI's own collectives)",
                gs->layout.n_buckets, (double)gs->layout.bucket * sizeof(float) / (1024.0 * 1024.0),
                cfg->bucket_mb > 0 ? "dist.bucket_mb" : "sized from the model",
                gs->use_thread  ? "overlapped with backward"
                : !cfg->overlap ? "after backward (dist.overlap = false)"
                                : "after backward (no MPI_THREAD_MULTIPLE)",
                cfg->grad_wire == CZ_WIRE_BF16 ? "bf16" : "fp32");
    if (gs->use_thread && pthread_create(&gs->thread, NULL, comm_thread, gs) != 0)
        gs->use_thread = 0; /* still correct, just not overlapped */
    *out = gs;
    return 0;
}

void cz_grad_sync_free(cz_grad_sync *gs) {
    if (!gs) return;
    if (gs->use_thread) {
        pthread_mutex_lock(&gs->mu);
        gs->quit = 1;
        pthread_cond_broadcast(&gs->cv);
        pthread_mutex_unlock(&gs->mu);
        pthread_join(gs->thread, NULL);
    }
    if (gs->sync_ok) {
        pthread_mutex_destroy(&gs->mu);
        pthread_cond_destroy(&gs->cv);
    }
    cz_comm_finalize(&gs->comm);
    free(gs->ready);
    free(gs->mask);
    free(gs->block);
    cz_free(gs->scratch);
    free(gs);
}

const cz_bucket_layout *cz_grad_sync_layout(const cz_grad_sync *gs) {
    return &gs->layout;
}

int cz_grad_sync_overlaps(const cz_grad_sync *gs) {
    return gs->use_thread;
}

cz_sync_mode cz_grad_sync_mode(const cz_grad_sync *gs) {
    return gs->mode;
}

cz_allreduce_algo cz_grad_sync_algo(const cz_grad_sync *gs) {
    return gs->algo;
}

const cz_comm *cz_grad_sync_comm(const cz_grad_sync *gs) {
    return &gs->comm;
}

void cz_comm_watch(cz_comm *c, const cz_grad_sync *gs) {
    c->impl->watch = gs ? gs->comm.impl->coll : NULL;
}

void cz_grad_sync_begin(cz_grad_sync *gs, float *grads) {
    pthread_mutex_lock(&gs->mu);
    gs->grads = grads;
    memset(gs->ready, 0, (size_t)gs->layout.n_buckets * sizeof *gs->ready);
    gs->next = 0;
    gs->done = 0;
    gs->comm_seconds = 0;
    gs->failed = 0;
    gs->has_rows = 0;
    gs->tail_rows = 0;
    gs->active = 1;
    pthread_mutex_unlock(&gs->mu);
}

void cz_grad_sync_ready(void *ctx, size_t offset, size_t count) {
    cz_grad_sync *gs = ctx;
    const cz_bucket_layout *l = &gs->layout;
    if (count == 0 || offset >= l->n) return;
    if (count > l->n - offset) count = l->n - offset;
    pthread_mutex_lock(&gs->mu);
    if (gs->active) {
        /* bucket k covers [n-(k+1)B, n-kB): the range touches buckets
         * (n-end)/B .. (n-1-offset)/B */
        int k_lo = (int)((l->n - (offset + count)) / l->bucket);
        int k_hi = (int)((l->n - 1 - offset) / l->bucket);
        for (int k = k_lo; k <= k_hi && k < l->n_buckets; k++) {
            size_t boff, bcount;
            cz_bucket_range(l, k, &boff, &bcount);
            size_t lo = offset > boff ? offset : boff;
            size_t hi = offset + count < boff + bcount ? offset + count : boff + bcount;
            if (hi > lo) gs->ready[k] += hi - lo;
        }
        if (gs->use_thread) pthread_cond_broadcast(&gs->cv);
    }
    pthread_mutex_unlock(&gs->mu);
}

void cz_grad_sync_rows(void *ctx, const cz_grad_rows *r) {
    cz_grad_sync *gs = ctx;
    pthread_mutex_lock(&gs->mu);
    if (gs->active) {
        gs->rows = *r;
        gs->has_rows = 1;
    }
    pthread_mutex_unlock(&gs->mu);
}

size_t cz_grad_sync_tail_rows(const cz_grad_sync *gs) {
    return gs->tail_rows;
}

int cz_grad_sync_finish(cz_grad_sync *gs, cz_error *err) {
    double t0 = cz_now();
    const cz_bucket_layout *l = &gs->layout;
    pthread_mutex_lock(&gs->mu);
    if (!gs->active) {
        pthread_mutex_unlock(&gs->mu);
        return cz_fail(err, "grad sync: finish without begin");
    }
    /* backward is over: whatever was not reported is final now */
    for (int k = 0; k < l->n_buckets; k++) {
        size_t off, count;
        cz_bucket_range(l, k, &off, &count);
        gs->ready[k] = count;
    }
    if (gs->use_thread) {
        pthread_cond_broadcast(&gs->cv);
        while (gs->done < l->n_buckets) pthread_cond_wait(&gs->cv, &gs->mu);
    } else {
        for (int i = 0; i < l->n_buckets; i++) {
            int k = cz_layout_bucket_at(l, gs->order, i);
            double t1 = cz_now();
            if (!gs->failed && reduce_bucket(gs, k, &gs->err) != 0) gs->failed = 1;
            gs->comm_seconds += cz_now() - t1;
            gs->done++;
        }
    }
    if (gs->has_rows && !gs->failed) {
        double t1 = cz_now();
        if (reduce_rows(gs, &gs->err) != 0) gs->failed = 1;
        gs->comm_seconds += cz_now() - t1;
    }
    gs->active = 0;
    int failed = gs->failed;
    if (failed && err) *err = gs->err;
    pthread_mutex_unlock(&gs->mu);
    gs->wait_seconds = cz_now() - t0;
    return failed ? -1 : 0;
}

double cz_grad_sync_wait_seconds(const cz_grad_sync *gs) {
    return gs->wait_seconds;
}

double cz_grad_sync_comm_seconds(const cz_grad_sync *gs) {
    return gs->comm_seconds;
}

int cz_grad_sync_buckets_done(cz_grad_sync *gs) {
    pthread_mutex_lock(&gs->mu);
    int done = gs->done;
    pthread_mutex_unlock(&gs->mu);
    return done;
}
