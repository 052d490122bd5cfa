/* comm: ring all-reduce / reduce-scatter / all-gather and the bucketed
 * gradient sync, as real MPI jobs (1..5 ranks).
 * References are computed independently on every rank: each rank can
 * regenerate every other rank's input from the RNG keyed by that rank.
 *  - integer-valued floats: sums are exact, so any order must match exactly;
 *  - random floats: the documented ring order (((g[c+1] + g[c+2]) + ...) + g[c])
 *    recomputed here must match bit for bit, and a double sum within rounding;
 *  - every rank must hold the same bits (hashes gathered and compared). */
#include "cloze/comm.h"
#include "cloze/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int rank_ = 0;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL rank %d %s:%d: ", rank_, __FILE__, __LINE__);                    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Input of rank r, element i, trial t. */
static float input(int integer, int r, size_t i, int t) {
    if (integer) return (float)((long)((r * 7919 + (long)i * 31 + t * 17) % 2001) - 1000);
    cz_rng_stream s = cz_rng_stream_make(42, CZ_RNG_TEST, (uint64_t)r, (uint64_t)t, 0);
    return (float)cz_rng_normal(&s, i);
}

/* The documented ring order for an element in chunk c. */
static float ring_order_sum(int integer, int p, int c, size_t i, int t) {
    float acc = input(integer, (c + 1) % p, i, t);
    for (int j = 2; j <= p; j++) acc = acc + input(integer, (c + j) % p, i, t);
    return acc;
}

static void fill(float *buf, size_t n, int integer, int r, int t) {
    for (size_t i = 0; i < n; i++) buf[i] = input(integer, r, i, t);
}

static int same_on_all_ranks(const cz_comm *d, const float *buf, size_t n) {
    uint64_t h = cz_fnv1a64(buf, n * sizeof(float), CZ_FNV_SEED);
    uint64_t *all = calloc((size_t)d->size, sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->mpi);
    int ok = 1;
    for (int r = 0; r < d->size; r++) ok &= all[r] == h;
    free(all);
    return ok;
}

/* Element i's chunk within a single bucket of length n. */
static int chunk_of(size_t n, int p, size_t i) {
    for (int c = 0; c < p; c++) {
        size_t off, cnt;
        cz_comm_chunk(n, p, c, &off, &cnt);
        if (i >= off && i < off + cnt) return c;
    }
    return -1;
}

static void test_allreduce(const cz_comm *d, size_t n, int t) {
    int p = d->size;
    float *buf = malloc((n + 1) * sizeof(float));
    cz_error err;
    for (int integer = 1; integer >= 0; integer--) {
        fill(buf, n, integer, d->rank, t);
        CHECK(cz_ring_allreduce(d, buf, n, &err) == 0, "%s", err.msg);
        size_t bad = 0, bad_order = 0;
        for (size_t i = 0; i < n; i++) {
            double ref = 0, mag = 0;
            for (int r = 0; r < p; r++) {
                ref += input(integer, r, i, t);
                mag += fabs(input(integer, r, i, t));
            }
            if (integer ? buf[i] != (float)ref : fabs(buf[i] - ref) > 1e-6 * p * mag + 1e-30) bad++;
            if (buf[i] != ring_order_sum(integer, p, chunk_of(n, p, i), i, t)) bad_order++;
        }
        CHECK(bad == 0, "allreduce n=%zu integer=%d: %zu elements off the reference", n, integer,
              bad);
        CHECK(bad_order == 0, "allreduce n=%zu: %zu elements not in ring order", n, bad_order);
        CHECK(same_on_all_ranks(d, buf, n), "allreduce n=%zu: ranks differ", n);
    }
    /* "mpi" path: the library's order, within rounding of the double sum */
    fill(buf, n, 0, d->rank, t);
    CHECK(cz_allreduce(d, CZ_ALLREDUCE_MPI, buf, n, &err) == 0, "%s", err.msg);
    size_t bad_mpi = 0;
    for (size_t i = 0; i < n; i++) {
        double ref = 0, mag = 0;
        for (int r = 0; r < p; r++) {
            ref += input(0, r, i, t);
            mag += fabs(input(0, r, i, t));
        }
        bad_mpi += fabs(buf[i] - ref) > 1e-6 * p * mag + 1e-30;
    }
    CHECK(bad_mpi == 0, "mpi allreduce n=%zu: %zu off", n, bad_mpi);
    /* reduce-scatter alone: my chunk is the sum */
    fill(buf, n, 0, d->rank, t);
    CHECK(cz_ring_reduce_scatter(d, buf, n, &err) == 0, "%s", err.msg);
    size_t off, cnt, bad = 0;
    cz_comm_chunk(n, p, d->rank, &off, &cnt);
    for (size_t i = off; i < off + cnt; i++) bad += buf[i] != ring_order_sum(0, p, d->rank, i, t);
    CHECK(bad == 0, "reduce-scatter n=%zu: %zu wrong", n, bad);
    /* all-gather alone: each rank contributes its chunk of rank-keyed values */
    memset(buf, 0, (n + 1) * sizeof(float));
    for (size_t i = off; i < off + cnt; i++) buf[i] = input(0, d->rank, i, t);
    CHECK(cz_ring_allgather(d, buf, n, &err) == 0, "%s", err.msg);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += buf[i] != input(0, chunk_of(n, p, i), i, t);
    CHECK(bad == 0, "all-gather n=%zu: %zu wrong", n, bad);
    free(buf);
}

/* Tensor-like ranges over n floats, reported from the end like backward. */
static void feed_backward(cz_grad_sync *gs, size_t n, int scramble, int rank) {
    size_t sizes[] = {1, 300, 17, 2048, 5, 999, 64};
    size_t hi = n;
    int j = 0;
    while (hi > 0) {
        size_t len = sizes[j++ % 7];
        if (len > hi) len = hi;
        /* scrambled: rank-dependent split into two reports, second half first */
        if (scramble && len > 2 && (rank + j) % 2) {
            cz_grad_sync_ready(gs, hi - len / 2, len / 2);
            cz_grad_sync_ready(gs, hi - len, len - len / 2);
        } else if (!(scramble && j % 5 == 0)) { /* some ranges never reported */
            cz_grad_sync_ready(gs, hi - len, len);
        }
        hi -= len;
    }
}

static void test_grad_sync(const cz_comm *d, cz_allreduce_algo algo) {
    const size_t n = 10007;
    int p = d->size;
    cz_error err;
    float *g = malloc(n * sizeof(float));
    float *plain = malloc(n * sizeof(float));
    for (int mode = 0; mode < 3; mode++) {
        cz_grad_sync *gs;
        if (cz_grad_sync_create(&gs, d, n, 4000.0, (cz_sync_mode)mode, algo, &err) != 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        const cz_bucket_layout *l = cz_grad_sync_layout(gs);
        CHECK(l->n_buckets == 11, "buckets %d", l->n_buckets);
        for (int t = 0; t < 3; t++) {
            for (int integer = 1; integer >= 0; integer--) {
                fill(g, n, integer, d->rank, t);
                cz_grad_sync_begin(gs, g);
                feed_backward(gs, n, t == 2, d->rank);
                CHECK(cz_grad_sync_finish(gs, &err) == 0, "%s", err.msg);
                fill(plain, n, integer, d->rank, t);
                cz_ring_allreduce(d, plain, n, &err);
                /* which elements must this rank hold? */
                size_t bad = 0, bad_order = 0, checked = 0;
                for (int k = 0; k < l->n_buckets; k++)
                    for (int c = 0; c < p; c++) {
                        size_t off, cnt;
                        cz_piece_range(l, k, c, &off, &cnt);
                        int hold = mode == CZ_SYNC_ALLREDUCE ||
                                   (mode == CZ_SYNC_REDUCE_SCATTER && c == d->rank) ||
                                   (mode == CZ_SYNC_REDUCE && d->rank == 0);
                        if (!hold) continue;
                        for (size_t i = off; i < off + cnt; i++) {
                            checked++;
                            /* integers: exact in any order; else within rounding */
                            if (integer ? g[i] != plain[i]
                                        : fabsf(g[i] - plain[i]) > 1e-5f * (1 + fabsf(plain[i])))
                                bad++;
                            /* ring: the documented order, bit for bit (so the
                             * coordinator's and the sharded bits equal these) */
                            if (algo == CZ_ALLREDUCE_RING &&
                                g[i] != ring_order_sum(integer, p, c, i, t))
                                bad_order++;
                        }
                    }
                CHECK(checked > 0 || (mode != CZ_SYNC_ALLREDUCE && d->rank != 0),
                      "nothing checked");
                CHECK(bad == 0, "grad sync mode %d algo %d t %d integer %d: %zu differ from plain",
                      mode, algo, t, integer, bad);
                CHECK(bad_order == 0, "grad sync mode %d: %zu not in bucket ring order", mode,
                      bad_order);
                if (mode == CZ_SYNC_ALLREDUCE && algo == CZ_ALLREDUCE_RING)
                    CHECK(same_on_all_ranks(d, g, n), "grad sync: ranks differ");
            }
        }
        cz_grad_sync_free(gs);
    }
    free(g);
    free(plain);
}

int main(int argc, char **argv) {
    cz_comm d;
    cz_error err;
    if (cz_comm_init(&d, &argc, &argv, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    rank_ = d.rank;
    cz_log_setup(d.rank, CZ_LOG_WARN);
    size_t p = (size_t)d.size;
    size_t sizes[] = {0, 1, 2, 3, p - 1, p, p + 1, 7, 1000, 1001, 2 * CZ_RING_PIPE + 17};
    for (int i = 0; i < 11; i++) test_allreduce(&d, sizes[i], i);
    test_grad_sync(&d, CZ_ALLREDUCE_RING);
    test_grad_sync(&d, CZ_ALLREDUCE_MPI);
    int local = failures, total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, d.mpi);
    if (d.rank == 0 && total == 0)
        printf("ok (%d ranks, thread level %d)\n", d.size, d.thread_level);
    cz_comm_finalize(&d);
    return total ? 1 : 0;
}
