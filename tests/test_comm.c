/* comm: ring all-reduce / reduce-scatter / all-gather, the collectives by
 * algorithm, the layout-wide gather / scatter / all-gather, the verdict
 * broadcast and the bucketed gradient sync, as real MPI jobs (1..5 ranks).
 * References are computed independently on every rank: each rank can
 * regenerate every other rank's input from the RNG keyed by that rank.
 *  - integer-valued floats: sums are exact, so any order must match exactly;
 *  - random floats: the documented ring order (((g[c+1] + g[c+2]) + ...) + g[c])
 *    recomputed here must match bit for bit, and a double sum within rounding;
 *  - every rank must hold the same bits (hashes gathered and compared). */
#include "cloze/comm.h"

#include "../src/comm/comm_internal.h" /* comm's inside: cz_ring_*, CZ_RING_PIPE */
#include "cloze/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_main.h"

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
    return mpi_test_same_on_all_ranks(d, buf, n * sizeof(float));
}

static void test_allreduce(const cz_comm *d, size_t n, int t) {
    int p = d->size;
    float *buf = malloc((n + 1) * sizeof(float));
    cz_error err;
    for (int integer = 1; integer >= 0; integer--) {
        fill(buf, n, integer, d->rank, t);
        CHECK(cz_ring_allreduce(d, buf, n, NULL, &err) == 0, "%s", err.msg);
        size_t bad = 0, bad_order = 0;
        for (size_t i = 0; i < n; i++) {
            double ref = 0, mag = 0;
            for (int r = 0; r < p; r++) {
                ref += input(integer, r, i, t);
                mag += fabs(input(integer, r, i, t));
            }
            if (integer ? buf[i] != (float)ref : fabs(buf[i] - ref) > 1e-6 * p * mag + 1e-30) bad++;
            if (buf[i] != ring_order_sum(integer, p, mpi_test_chunk_owner(n, p, i), i, t))
                bad_order++;
        }
        CHECK(bad == 0, "allreduce n=%zu integer=%d: %zu elements off the reference", n, integer,
              bad);
        CHECK(bad_order == 0, "allreduce n=%zu: %zu elements not in ring order", n, bad_order);
        CHECK(same_on_all_ranks(d, buf, n), "allreduce n=%zu: ranks differ", n);
    }
    /* "mpi" path: the library's order, within rounding of the double sum */
    fill(buf, n, 0, d->rank, t);
    CHECK(cz_allreduce(d, CZ_ALLREDUCE_MPI, buf, n, NULL, &err) == 0, "%s", err.msg);
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
    CHECK(cz_ring_reduce_scatter(d, buf, n, NULL, &err) == 0, "%s", err.msg);
    size_t off, cnt, bad = 0;
    cz_comm_chunk(n, p, d->rank, &off, &cnt);
    for (size_t i = off; i < off + cnt; i++) bad += buf[i] != ring_order_sum(0, p, d->rank, i, t);
    CHECK(bad == 0, "reduce-scatter n=%zu: %zu wrong", n, bad);
    /* all-gather alone: each rank contributes its chunk of rank-keyed values */
    memset(buf, 0, (n + 1) * sizeof(float));
    for (size_t i = off; i < off + cnt; i++) buf[i] = input(0, d->rank, i, t);
    CHECK(cz_ring_allgather(d, buf, n, &err) == 0, "%s", err.msg);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += buf[i] != input(0, mpi_test_chunk_owner(n, p, i), i, t);
    CHECK(bad == 0, "all-gather n=%zu: %zu wrong", n, bad);
    /* the same by algorithm: "mpi" must leave the same chunks where "ring"
     * does (copies are exact; sums within rounding) */
    for (int algo = 0; algo < 2; algo++) {
        fill(buf, n, 1, d->rank, t); /* integers: every order is exact */
        CHECK(cz_reduce_scatter(d, (cz_allreduce_algo)algo, buf, n, NULL, &err) == 0, "%s",
              err.msg);
        bad = 0;
        for (size_t i = off; i < off + cnt; i++)
            bad += buf[i] != ring_order_sum(1, p, d->rank, i, t);
        CHECK(bad == 0, "reduce-scatter algo %d n=%zu: %zu wrong", algo, n, bad);
        memset(buf, 0, (n + 1) * sizeof(float));
        for (size_t i = off; i < off + cnt; i++) buf[i] = input(0, d->rank, i, t);
        CHECK(cz_allgather(d, (cz_allreduce_algo)algo, buf, n, &err) == 0, "%s", err.msg);
        bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += buf[i] != input(0, mpi_test_chunk_owner(n, p, i), i, t);
        CHECK(bad == 0, "all-gather algo %d n=%zu: %zu wrong", algo, n, bad);
        fill(buf, n, 1, d->rank, t);
        CHECK(cz_reduce(d, (cz_allreduce_algo)algo, buf, n, NULL, &err) == 0, "%s", err.msg);
        bad = 0;
        if (d->rank == 0)
            for (size_t i = 0; i < n; i++)
                bad += buf[i] != ring_order_sum(1, p, mpi_test_chunk_owner(n, p, i), i, t);
        CHECK(bad == 0, "reduce algo %d n=%zu: %zu wrong on rank 0", algo, n, bad);
    }
    free(buf);
}

/* Owned pieces -> rank 0 -> owned pieces, and the layout-wide all-gather. */
static void test_layout_moves(const cz_comm *d) {
    const size_t n = 5003;
    cz_bucket_layout l;
    cz_bucket_layout_make(&l, n, 700 * sizeof(float), d->size);
    size_t mine = cz_layout_owned(&l, d->rank);
    float *owned = calloc(mine + 1, sizeof(float)), *full = calloc(n, sizeof(float));
    float *back = calloc(mine + 1, sizeof(float));
    size_t j = 0;
    for (int k = 0; k < l.n_buckets; k++) {
        size_t off, cnt;
        cz_piece_range(&l, k, d->rank, &off, &cnt);
        for (size_t i = off; i < off + cnt; i++) owned[j++] = (float)i;
    }
    CHECK(j == mine, "owned %zu, pieces %zu", mine, j);
    cz_error err;
    CHECK(cz_layout_gather(d, &l, owned, full, &err) == 0, "%s", err.msg);
    size_t bad = 0;
    if (d->rank == 0)
        for (size_t i = 0; i < n; i++) bad += full[i] != (float)i;
    CHECK(bad == 0, "layout gather: %zu wrong on rank 0", bad);
    CHECK(cz_layout_scatter(d, &l, full, back, &err) == 0, "%s", err.msg);
    CHECK(memcmp(back, owned, mine * sizeof(float)) == 0, "layout scatter: pieces differ");
    for (int algo = 0; algo < 2; algo++) {
        for (size_t i = 0; i < n; i++) full[i] = -1;
        for (int k = 0; k < l.n_buckets; k++) {
            size_t off, cnt;
            cz_piece_range(&l, k, d->rank, &off, &cnt);
            for (size_t i = off; i < off + cnt; i++) full[i] = (float)i;
        }
        CHECK(cz_layout_allgather(d, (cz_allreduce_algo)algo, &l, full, &err) == 0, "%s", err.msg);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += full[i] != (float)i;
        CHECK(bad == 0, "layout all-gather algo %d: %zu wrong", algo, bad);
    }
    free(owned), free(full), free(back);
}

/* Rank 0's verdict, message included, reaches every rank; big broadcasts
 * arrive whole. */
static void test_verdict(const cz_comm *d) {
    cz_error err = {{0}};
    int rc = d->rank == 0 ? cz_fail(&err, "file.lz4: blob 'params': checksum mismatch") : 0;
    CHECK(cz_comm_share_verdict(d, 0, rc, &err) == -1 && !strcmp(err.msg, "file.lz4: blob "
                                                                          "'params': checksum "
                                                                          "mismatch"),
          "verdict: [%s]", err.msg);
    CHECK(cz_comm_share_verdict(d, 0, d->rank == 0 ? 1 : -1, &err) == 1, "verdict 1");
    size_t bytes = 3 * 1000 * 1000 + 7;
    unsigned char *b = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) b[i] = d->rank == 0 ? (unsigned char)(i * 31) : 0;
    CHECK(cz_comm_bcast(d, b, bytes, 0, &err) == 0, "%s", err.msg);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += b[i] != (unsigned char)(i * 31);
    CHECK(bad == 0, "broadcast: %zu bytes wrong", bad);
    free(b);
}

/* Tensor-like ranges over n floats, reported in `order` as a backward
 * would; scrambled: rank-dependent splits reported out of order, and some
 * ranges never reported (finish takes them as final). */
static void feed_backward(cz_grad_sync *gs, size_t n, cz_grad_order order, int scramble, int rank) {
    size_t sizes[] = {1, 300, 17, 2048, 5, 999, 64};
    size_t done = 0;
    int j = 0;
    while (done < n) {
        size_t len = sizes[j++ % 7];
        if (len > n - done) len = n - done;
        size_t lo = order == CZ_GRAD_ASCENDING ? done : n - done - len;
        if (scramble && len > 2 && (rank + j) % 2) {
            cz_grad_sync_ready(gs, lo + len / 2, len - len / 2);
            cz_grad_sync_ready(gs, lo, len / 2);
        } else if (!(scramble && j % 5 == 0)) {
            cz_grad_sync_ready(gs, lo, len);
        }
        done += len;
    }
}

static void test_grad_sync(const cz_comm *d, cz_allreduce_algo algo, cz_grad_order order) {
    const size_t n = 10007;
    int p = d->size;
    cz_error err;
    float *g = malloc(n * sizeof(float));
    float *plain = malloc(n * sizeof(float));
    cz_comm_config cfg = {.allreduce = algo,
                          .bucket_mb = 4000.0 / (1024 * 1024), /* 1000 floats per bucket */
                          .overlap = 1};
    for (int mode = 0; mode < 3; mode++) {
        cz_grad_sync *gs;
        if (cz_grad_sync_create(&gs, d, &cfg, n, (cz_sync_mode)mode, order, &err) != 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        const cz_bucket_layout *l = cz_grad_sync_layout(gs);
        CHECK(l->n_buckets == 11, "buckets %d", l->n_buckets);
        for (int t = 0; t < 3; t++) {
            for (int integer = 1; integer >= 0; integer--) {
                fill(g, n, integer, d->rank, t);
                cz_grad_sync_begin(gs, g);
                feed_backward(gs, n, order, t == 2, d->rank);
                CHECK(cz_grad_sync_finish(gs, &err) == 0, "%s", err.msg);
                CHECK(cz_grad_sync_buckets_done(gs) == l->n_buckets, "buckets done %d",
                      cz_grad_sync_buckets_done(gs));
                fill(plain, n, integer, d->rank, t);
                cz_ring_allreduce(d, plain, n, NULL, &err);
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

/* The order of use: every bucket once, the one ending the buffer first
 * when ranges become final from the end, the one holding offset 0 first
 * when they become final from the start. */
static void test_bucket_order(void) {
    cz_bucket_layout l;
    cz_bucket_layout_make(&l, 10007, 4000.0, 3);
    int seen[16] = {0};
    for (int i = 0; i < l.n_buckets; i++) {
        seen[cz_layout_bucket_at(&l, CZ_GRAD_ASCENDING, i)]++;
        seen[cz_layout_bucket_at(&l, CZ_GRAD_DESCENDING, i)]++;
    }
    for (int k = 0; k < l.n_buckets; k++)
        CHECK(seen[k] == 2, "bucket %d used %d times", k, seen[k]);
    size_t off, cnt;
    cz_bucket_range(&l, cz_layout_bucket_at(&l, CZ_GRAD_ASCENDING, 0), &off, &cnt);
    CHECK(off == 0, "ascending: first bucket starts at %zu", off);
    cz_bucket_range(&l, cz_layout_bucket_at(&l, CZ_GRAD_DESCENDING, 0), &off, &cnt);
    CHECK(off + cnt == l.n, "descending: first bucket ends at %zu", off + cnt);
}

/* The schedule's times: the i-th bucket to complete is complete exactly
 * when the floats counted in the order reach its far end (checked against
 * the buckets' ranges, float by float), increasing, the last one at n; and
 * the default bucket size from the model. */
static void test_bucket_schedule(const cz_comm *d) {
    cz_bucket_layout l;
    cz_bucket_layout_make(&l, 10007, 4000.0, 3);
    for (int order = 0; order < 2; order++) {
        size_t prev = 0;
        for (int i = 0; i < l.n_buckets; i++) {
            size_t at = cz_layout_ready_after(&l, (cz_grad_order)order, i), off, cnt;
            cz_bucket_range(&l, cz_layout_bucket_at(&l, (cz_grad_order)order, i), &off, &cnt);
            /* floats final after `at` in this order: [0, at) or [n - at, n) */
            size_t lo = order == CZ_GRAD_ASCENDING ? 0 : l.n - at;
            size_t hi = order == CZ_GRAD_ASCENDING ? at : l.n;
            CHECK(off >= lo && off + cnt <= hi, "order %d bucket #%d: not complete at %zu", order,
                  i, at);
            size_t lo1 = order == CZ_GRAD_ASCENDING ? 0 : l.n - (at - 1);
            size_t hi1 = order == CZ_GRAD_ASCENDING ? at - 1 : l.n;
            CHECK(!(off >= lo1 && off + cnt <= hi1), "order %d bucket #%d: complete before %zu",
                  order, i, at);
            CHECK(at > prev, "order %d bucket #%d: at %zu after %zu", order, i, at, prev);
            prev = at;
        }
        CHECK(prev == l.n, "order %d: the last bucket is complete at %zu of %zu", order, prev, l.n);
    }
    const double mib = 1024.0 * 1024.0;
    cz_comm_config cfg = {.bucket_mb = 0};
    CHECK(cz_grad_bucket_bytes(&cfg, 11270000) == 11270000 * 4.0 / 16, "BERT-mini: %.0f",
          cz_grad_bucket_bytes(&cfg, 11270000));
    CHECK(cz_grad_bucket_bytes(&cfg, 1000) == mib, "tiny: %.0f", cz_grad_bucket_bytes(&cfg, 1000));
    CHECK(cz_grad_bucket_bytes(&cfg, 110000000) == 25 * mib, "BERT-base: %.0f",
          cz_grad_bucket_bytes(&cfg, 110000000));
    /* bf16 on the wire is ours alone: with "mpi" a one-line refusal */
    cz_comm_config mpi_bf16 = {.allreduce = CZ_ALLREDUCE_MPI, .grad_wire = CZ_WIRE_BF16};
    cz_grad_sync *gs = NULL;
    cz_error err = {{0}};
    CHECK(cz_grad_sync_create(&gs, d, &mpi_bf16, 1000, CZ_SYNC_ALLREDUCE, CZ_GRAD_ASCENDING,
                              &err) != 0 &&
              strstr(err.msg, "dist.grad_wire") != NULL,
          "mpi with bf16 on the wire: accepted (%s)", err.msg);
    cz_grad_sync_free(gs);
    cfg.bucket_mb = 3;
    CHECK(cz_grad_bucket_bytes(&cfg, 110000000) == 3 * mib, "dist.bucket_mb = 3: %.0f",
          cz_grad_bucket_bytes(&cfg, 110000000));
}

/* Chunks over 32 * CZ_RING_PIPE floats are cut into pieces longer than
 * CZ_RING_PIPE, the last one short: integer values, so the sum is exact
 * whatever the order (2 ranks: 17 MiB; the cheap input keeps it fast). */
static void test_long_pieces(const cz_comm *d) {
    size_t n = 2 * 33 * (size_t)CZ_RING_PIPE + 4097, bad = 0;
    float *buf = malloc(n * sizeof(float));
    cz_error err;
    CHECK(buf != NULL, "out of memory");
    for (size_t i = 0; i < n; i++) buf[i] = (float)((i * 31 + (size_t)d->rank * 7919) % 2001);
    CHECK(cz_ring_allreduce(d, buf, n, NULL, &err) == 0, "%s", err.msg);
    for (size_t i = 0; i < n; i++) {
        size_t want = 0;
        for (int r = 0; r < d->size; r++) want += (i * 31 + (size_t)r * 7919) % 2001;
        bad += buf[i] != (float)want;
    }
    CHECK(bad == 0, "allreduce n=%zu (long pieces): %zu elements wrong", n, bad);
    CHECK(same_on_all_ranks(d, buf, n), "allreduce n=%zu (long pieces): ranks differ", n);
    free(buf);
}

/* Open MPI's TCP eager limit as the library reads it, after cz_comm_init:
 * above our largest piece (so that no piece goes by rendezvous,
 * src/comm/world.c), or `preset` when the environment set it before the
 * job (the user's choice wins); nothing to check without the variable
 * (another MPI). */
static void test_tcp_eager(long preset) {
    long v = cz_comm_tcp_eager_limit();
    if (v < 0) {
        CHECK(preset == 0, "btl_tcp_eager_limit set in the environment but not visible "
                           "through MPI_T");
        return;
    }
    if (preset > 0)
        CHECK(v == preset, "btl_tcp_eager_limit %ld, the environment set %ld", v, preset);
    else
        CHECK(v >= (long)CZ_RING_PIECE_MAX_BYTES,
              "btl_tcp_eager_limit %ld is below the largest ring piece (%zu bytes)", v,
              CZ_RING_PIECE_MAX_BYTES);
}

int main(int argc, char **argv) {
    cz_comm d;
    mpi_test_begin(&d, &argc, &argv);
    /* --eager-preset N: the job was started with the limit set to N */
    long preset = argc == 3 && !strcmp(argv[1], "--eager-preset") ? atol(argv[2]) : 0;
    test_tcp_eager(preset);
    if (preset > 0) return mpi_test_end(&d);
    size_t p = (size_t)d.size;
    size_t sizes[] = {0, 1, 2, 3, p - 1, p, p + 1, 7, 1000, 1001, 2 * CZ_RING_PIPE + 17};
    for (int i = 0; i < 11; i++) test_allreduce(&d, sizes[i], i);
    if (p == 2) test_long_pieces(&d);
    test_layout_moves(&d);
    test_verdict(&d);
    test_bucket_order();
    test_bucket_schedule(&d);
    for (int order = 0; order < 2; order++) {
        test_grad_sync(&d, CZ_ALLREDUCE_RING, (cz_grad_order)order);
        test_grad_sync(&d, CZ_ALLREDUCE_MPI, (cz_grad_order)order);
    }
    return mpi_test_end(&d);
}
