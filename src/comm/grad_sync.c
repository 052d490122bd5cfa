/* comm: gradient synchronisation in buckets, overlapped with backward.
 *
 * Choice: a communication thread (needs MPI_THREAD_MULTIPLE, because the
 * main thread may still call MPI, e.g. for the loss) on its own duplicated
 * communicator. The backward hook only counts floats made final per bucket
 * and wakes the thread; the thread reduces bucket 0, 1, 2, ... strictly in
 * index order, each once it is complete. Every rank therefore issues the
 * same message sequence whatever order the hook reports ranges in (no
 * deadlock), and each bucket's bits come from the fixed ring order. Without
 * MPI_THREAD_MULTIPLE, cz_grad_sync_finish reduces all buckets itself. */
#include "cloze/comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cz_grad_sync {
    MPI_Comm comm;
    int rank, p;
    cz_sync_mode mode;
    cz_allreduce_algo algo;
    cz_bucket_layout layout;
    float *grads;
    size_t *ready; /* floats reported final, per bucket */
    int next;      /* next bucket to reduce (thread) */
    int done;      /* buckets reduced this step */
    int active;    /* between begin and finish */
    int failed;
    cz_error err;
    int use_thread, quit;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double wait_seconds;
    int *counts, *displs; /* gather table (p entries) */
    cz_coll *coll;        /* the all-reduce algorithm (its own communicators) */
};

static int bucket_complete(const cz_grad_sync *gs, int k) {
    size_t off, count;
    cz_bucket_range(&gs->layout, k, &off, &count);
    return gs->ready[k] >= count;
}

/* Ring reduce-scatter, then gather of the chunks to rank 0 (REDUCE). */
static int gather_to_root(cz_grad_sync *gs, float *b, size_t count, cz_error *err) {
    for (int c = 0; c < gs->p; c++) {
        size_t off, cnt;
        cz_comm_chunk(count, gs->p, c, &off, &cnt);
        gs->counts[c] = (int)cnt;
        gs->displs[c] = (int)off;
    }
    void *send = gs->rank == 0 ? MPI_IN_PLACE : (void *)(b + gs->displs[gs->rank]);
    if (MPI_Gatherv(send, gs->counts[gs->rank], MPI_FLOAT, b, gs->counts, gs->displs, MPI_FLOAT, 0,
                    gs->comm) != MPI_SUCCESS)
        return cz_fail(err, "grad sync: gather to rank 0 failed");
    return 0;
}

/* Every algorithm (cz_coll) leaves rank c chunk c of the bucket after a
 * reduce-scatter, so the three modes are the same for all of them. */
static int reduce_bucket(cz_grad_sync *gs, int k, cz_error *err) {
    size_t off, count;
    cz_bucket_range(&gs->layout, k, &off, &count);
    float *b = gs->grads + off;
    if (gs->p == 1) return 0;
    if (gs->mode == CZ_SYNC_ALLREDUCE) return cz_coll_allreduce(gs->coll, b, count, err);
    if (gs->mode == CZ_SYNC_REDUCE && gs->algo == CZ_ALLREDUCE_MPI) {
        /* "mpi": the library's own reduction, for comparison */
        void *send = gs->rank == 0 ? MPI_IN_PLACE : (void *)b;
        if (MPI_Reduce(send, b, (int)count, MPI_FLOAT, MPI_SUM, 0, gs->comm) != MPI_SUCCESS)
            return cz_fail(err, "grad sync: bucket %d: MPI_Reduce failed", k);
        return 0;
    }
    if (cz_coll_reduce_scatter(gs->coll, b, count, err) != 0) return -1;
    return gs->mode == CZ_SYNC_REDUCE ? gather_to_root(gs, b, count, err) : 0;
}

static void *comm_thread(void *arg) {
    cz_grad_sync *gs = arg;
    pthread_mutex_lock(&gs->mu);
    for (;;) {
        while (!gs->quit &&
               !(gs->active && gs->next < gs->layout.n_buckets && bucket_complete(gs, gs->next)))
            pthread_cond_wait(&gs->cv, &gs->mu);
        if (gs->quit) break;
        int k = gs->next++;
        int failed = gs->failed;
        pthread_mutex_unlock(&gs->mu);
        cz_error e;
        /* after a failure keep counting buckets but stop communicating */
        int rc = failed ? 0 : reduce_bucket(gs, k, &e);
        pthread_mutex_lock(&gs->mu);
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

int cz_grad_sync_create(cz_grad_sync **out, const cz_comm *d, size_t n, double bucket_bytes,
                        cz_sync_mode mode, cz_allreduce_algo algo, cz_error *err) {
    cz_coll_opts o;
    cz_coll_opts_default(&o);
    o.algo = algo;
    return cz_grad_sync_create_opts(out, d, n, bucket_bytes, mode, &o, err);
}

int cz_grad_sync_create_opts(cz_grad_sync **out, const cz_comm *d, size_t n, double bucket_bytes,
                             cz_sync_mode mode, const cz_coll_opts *opts, cz_error *err) {
    *out = NULL;
    cz_grad_sync *gs = calloc(1, sizeof *gs);
    if (!gs) return cz_fail(err, "grad sync: out of memory");
    gs->rank = d->rank;
    gs->p = d->size;
    gs->mode = mode;
    cz_bucket_layout_make(&gs->layout, n, bucket_bytes, d->size);
    gs->ready = calloc((size_t)gs->layout.n_buckets + 1, sizeof *gs->ready);
    gs->counts = calloc((size_t)d->size, sizeof(int));
    gs->displs = calloc((size_t)d->size, sizeof(int));
    if (!gs->ready || !gs->counts || !gs->displs) {
        cz_grad_sync_free(gs);
        return cz_fail(err, "grad sync: out of memory");
    }
    if (MPI_Comm_dup(d->mpi, &gs->comm) != MPI_SUCCESS) {
        gs->comm = MPI_COMM_NULL;
        cz_grad_sync_free(gs);
        return cz_fail(err, "grad sync: MPI_Comm_dup failed");
    }
    /* the algorithm, chosen for one bucket's size under auto */
    cz_coll_opts o = *opts;
    o.bytes = (double)gs->layout.bucket * sizeof(float);
    if (cz_coll_create(&gs->coll, d->mpi, &o, err) != 0) {
        cz_grad_sync_free(gs);
        return -1;
    }
    gs->algo = cz_coll_algo(gs->coll);
    if (d->rank == 0 && d->size > 1) cz_info("gradient all-reduce: %s", cz_coll_describe(gs->coll));
    pthread_mutex_init(&gs->mu, NULL);
    pthread_cond_init(&gs->cv, NULL);
    gs->use_thread = d->thread_level >= MPI_THREAD_MULTIPLE && d->size > 1;
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
    if (gs->comm != MPI_COMM_NULL && gs->comm != 0) {
        MPI_Comm_free(&gs->comm);
        pthread_mutex_destroy(&gs->mu);
        pthread_cond_destroy(&gs->cv);
    }
    free(gs->ready);
    free(gs->counts);
    free(gs->displs);
    cz_coll_free(gs->coll);
    free(gs);
}

const cz_bucket_layout *cz_grad_sync_layout(const cz_grad_sync *gs) {
    return &gs->layout;
}

void cz_grad_sync_begin(cz_grad_sync *gs, float *grads) {
    pthread_mutex_lock(&gs->mu);
    gs->grads = grads;
    memset(gs->ready, 0, (size_t)gs->layout.n_buckets * sizeof *gs->ready);
    gs->next = 0;
    gs->done = 0;
    gs->failed = 0;
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
        for (int k = 0; k < l->n_buckets; k++) {
            if (!gs->failed && reduce_bucket(gs, k, &gs->err) != 0) gs->failed = 1;
            gs->done++;
        }
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
