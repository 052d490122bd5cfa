/* comm: ring, hierarchical and torus2d all-reduce / reduce-scatter /
 * all-gather (src/comm/collectives.c) as real MPI jobs.
 *
 *   test_comm_algos                      every host layout of p ranks given by
 *                                        hand (block and round robin), every
 *                                        algorithm and grid: one machine
 *   test_comm_algos --real-hosts H [--grid XxY]
 *                                        the layout MPI reports, which must have
 *                                        H hosts (the simulated cluster's test)
 *
 * For each algorithm and size (odd sizes drawn at random from a printed seed,
 * sizes smaller than the rank count among them), integer-valued and random
 * floats, checked independently of the library:
 *  - the documented summation order (include/cloze/comm.h) recomputed here,
 *    bit for bit, from a shape built here from the host layout;
 *  - within 1e-6 of a float64 sum, relative to the sum of magnitudes
 *    (integer-valued inputs: exactly);
 *  - every rank holds the same bits (hashes compared), and a second run
 *    gives the same bits;
 *  - reduce-scatter alone leaves each rank its chunk of the sum, all-gather
 *    alone copies every rank's chunk to all;
 *  - with bf16 on the wire (dist.grad_wire): the same order recomputed here
 *    with every sent partial sum rounded to bf16 (nearest even, rounded here
 *    by bit arithmetic, not by the library) and fp32 additions, bit for bit;
 *    the all-reduce ends with that sum in bf16 on every rank, the
 *    reduce-scatter with it in fp32; it differs from the fp32 result (so the
 *    wire really is bf16) and a plain all-gather still copies fp32. */
#include "cloze/comm.h"

#include "../src/comm/comm_internal.h" /* comm's inside: cz_coll, host layouts */
#include "cloze/rng.h"

#include "mpi_main.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static float input(int integer, int r, size_t i, int t) {
    if (integer) return (float)((long)((r * 7919 + (long)i * 31 + t * 17) % 2001) - 1000);
    cz_rng_stream s = cz_rng_stream_make(7, CZ_RNG_TEST, (uint64_t)r, (uint64_t)t, 0);
    return (float)cz_rng_normal(&s, i);
}

/* Every rank's inputs, computed once per (size index, integer): x[r * n + i]. */
typedef struct inputs {
    size_t n;
    float *x[16][2];
} inputs;
static inputs in_;

static float X(int integer, int r, size_t i, int t) {
    return in_.x[t][integer][(size_t)r * in_.n + i];
}

/* The shape as documented, built here: member[o * inner + i] is rank (o, i). */
typedef struct shape {
    int inner, outer;
    int member[4096];
    int o_of[4096], i_of[4096]; /* rank r = member[o_of[r] * inner + i_of[r]] */
} shape;

static void shape_index(shape *s) {
    for (int k = 0; k < s->inner * s->outer; k++) {
        s->o_of[s->member[k]] = k / s->inner;
        s->i_of[s->member[k]] = k % s->inner;
    }
}

static void shape_of(shape *s, cz_allreduce_algo algo, int p, int grid_x, const int *host_of) {
    if (algo == CZ_ALLREDUCE_RING) {
        s->inner = p, s->outer = 1;
        for (int r = 0; r < p; r++) s->member[r] = r;
    } else if (algo == CZ_ALLREDUCE_TORUS2D) {
        s->inner = grid_x, s->outer = p / grid_x;
        for (int r = 0; r < p; r++) s->member[(r / grid_x) * grid_x + r % grid_x] = r;
    } else { /* hosts numbered by lowest rank; i = position among the host's ranks */
        int hosts = 0, id[4096], seen[4096];
        for (int r = 0; r < p; r++) id[r] = -1, seen[r] = 0;
        for (int r = 0; r < p; r++)
            if (id[host_of[r]] < 0) id[host_of[r]] = hosts++;
        s->outer = hosts, s->inner = p / hosts;
        for (int r = 0; r < p; r++) {
            int o = id[host_of[r]];
            s->member[o * s->inner + seen[o]++] = r;
        }
    }
}

/* Element i of the chunk owned by rank c, summed in the documented order. */
static float order_sum(const shape *s, int integer, int c, size_t i, int t) {
    int oc = s->o_of[c], ic = s->i_of[c];
    float outer_acc = 0;
    for (int j = 1; j <= s->outer; j++) {
        int o = (oc + j) % s->outer;
        float acc = X(integer, s->member[o * s->inner + (ic + 1) % s->inner], i, t);
        for (int k = 2; k <= s->inner; k++)
            acc = acc + X(integer, s->member[o * s->inner + (ic + k) % s->inner], i, t);
        outer_acc = j == 1 ? acc : outer_acc + acc;
    }
    return outer_acc;
}

/* bfloat16, round to nearest even (finite inputs) */
static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* order_sum with bf16 on the wire: what a member sends (its own value at a
 * ring's first step, its partial sum later) is rounded; what it adds is not. */
static float order_sum_bf16(const shape *s, int c, size_t i, int t) {
    int oc = s->o_of[c], ic = s->i_of[c];
    float outer_acc = 0;
    for (int j = 1; j <= s->outer; j++) {
        int o = (oc + j) % s->outer;
        float acc = X(0, s->member[o * s->inner + (ic + 1) % s->inner], i, t);
        for (int k = 2; k <= s->inner; k++)
            acc = bf16(acc) + X(0, s->member[o * s->inner + (ic + k) % s->inner], i, t);
        outer_acc = j == 1 ? acc : bf16(outer_acc) + acc;
    }
    return outer_acc;
}

static void fill(float *b, size_t n, int integer, int r, int t) {
    for (size_t i = 0; i < n; i++) b[i] = input(integer, r, i, t);
}

/* A case's context options and the order's shape, built here. */
static void case_setup(cz_coll_opts *o, shape *s, cz_allreduce_algo algo, int grid_x,
                       const cz_host_layout *hosts, const int *host_of, int p) {
    cz_coll_opts_default(o);
    o->algo = algo;
    o->grid_x = grid_x;
    o->hosts = hosts;
    shape_of(s, algo, p, grid_x, host_of);
    shape_index(s);
}

static size_t max_size(const size_t *sizes, int n_sizes) {
    size_t max_n = 0;
    for (int k = 0; k < n_sizes; k++) max_n = sizes[k] > max_n ? sizes[k] : max_n;
    return max_n;
}

/* All-gather alone: each rank provides its chunk, the rest is garbage;
 * afterwards every chunk is its owner's input, copied bit for bit. */
static void check_allgather(cz_coll *c, float *buf, size_t n, int p, int rank, int k,
                            const char *label) {
    size_t off, cnt, bad = 0;
    cz_error err;
    cz_comm_chunk(n, p, rank, &off, &cnt);
    for (size_t i = 0; i < n; i++) buf[i] = NAN;
    for (size_t i = off; i < off + cnt; i++) buf[i] = input(0, rank, i, k);
    CHECK(cz_coll_allgather(c, buf, n, &err) == 0, "%s: %s", label, err.msg);
    for (size_t i = 0; i < n; i++) bad += buf[i] != input(0, mpi_test_chunk_owner(n, p, i), i, k);
    CHECK(bad == 0, "%s all-gather n=%zu: %zu wrong", label, n, bad);
}

/* One algorithm on one layout, every size. */
static void run_case(const cz_comm *world, cz_allreduce_algo algo, int grid_x,
                     const cz_host_layout *hosts, const int *host_of, const size_t *sizes,
                     int n_sizes, const char *label) {
    int p = world->size, rank = world->rank;
    cz_coll_opts o;
    shape s;
    case_setup(&o, &s, algo, grid_x, hosts, host_of, p);
    cz_coll *c;
    cz_error err;
    /* the dispatch entry points on a communicator with the context attached */
    cz_comm bound;
    if (cz_comm_dup(world, &bound, &err) != 0 || cz_comm_attach_coll(&bound, &o, &err) != 0) {
        CHECK(0, "%s: attach: %s", label, err.msg);
        return;
    }
    c = cz_comm_coll(&bound); /* the context itself, and the dispatch on it (cz_allreduce) */
    CHECK(cz_coll_algo(c) == algo, "%s: got %s", label, cz_allreduce_algo_name(cz_coll_algo(c)));
    size_t max_n = max_size(sizes, n_sizes);
    float *buf = malloc((max_n + 1) * sizeof(float)), *again = malloc((max_n + 1) * sizeof(float));
    for (int k = 0; k < n_sizes; k++) {
        size_t n = sizes[k];
        for (int integer = 1; integer >= 0; integer--) {
            fill(buf, n, integer, rank, k);
            CHECK(cz_coll_allreduce(c, buf, n, &err) == 0, "%s n=%zu: %s", label, n, err.msg);
            size_t bad_ref = 0, bad_order = 0;
            for (size_t i = 0; i < n; i++) {
                double ref = 0, mag = 0;
                for (int r = 0; r < p; r++) {
                    ref += X(integer, r, i, k);
                    mag += fabs(X(integer, r, i, k));
                }
                if (integer ? buf[i] != (float)ref : fabs(buf[i] - ref) > 1e-6 * mag) bad_ref++;
                if (buf[i] != order_sum(&s, integer, mpi_test_chunk_owner(n, p, i), i, k))
                    bad_order++;
            }
            CHECK(bad_ref == 0, "%s n=%zu integer=%d: %zu elements off the float64 sum", label, n,
                  integer, bad_ref);
            CHECK(bad_order == 0, "%s n=%zu integer=%d: %zu elements not in the documented order",
                  label, n, integer, bad_order);
            CHECK(mpi_test_same_on_all_ranks(world, buf, n * sizeof(float)),
                  "%s n=%zu: ranks hold different bits", label, n);
            /* a second run, through the dispatch on the communicator: same bits */
            fill(again, n, integer, rank, k);
            CHECK(cz_allreduce(&bound, algo, again, n, NULL, &err) == 0, "%s: %s", label, err.msg);
            CHECK(!memcmp(again, buf, n * sizeof(float)),
                  "%s n=%zu: a second run (cz_allreduce) gave other bits", label, n);
        }
        /* reduce-scatter: my chunk is the sum (same bits as the all-reduce) */
        fill(buf, n, 0, rank, k);
        CHECK(cz_coll_reduce_scatter(c, buf, n, &err) == 0, "%s: %s", label, err.msg);
        size_t off, cnt, bad = 0;
        cz_comm_chunk(n, p, rank, &off, &cnt);
        for (size_t i = off; i < off + cnt; i++) bad += buf[i] != order_sum(&s, 0, rank, i, k);
        CHECK(bad == 0, "%s reduce-scatter n=%zu: %zu wrong", label, n, bad);
        check_allgather(c, buf, n, p, rank, k, label);
    }
    free(buf);
    free(again);
    cz_comm_finalize(&bound);
}

/* bf16 on the wire: one algorithm on one layout, every size, random floats. */
static void run_bf16(const cz_comm *world, cz_allreduce_algo algo, int grid_x,
                     const cz_host_layout *hosts, const int *host_of, const size_t *sizes,
                     int n_sizes, const char *label) {
    int p = world->size, rank = world->rank;
    cz_coll_opts o;
    shape s;
    case_setup(&o, &s, algo, grid_x, hosts, host_of, p);
    o.wire_bf16 = 1;
    cz_coll *c;
    cz_error err;
    if (cz_coll_create(&c, cz_comm_mpi(world), &o, &err) != 0) {
        CHECK(0, "%s bf16: create: %s", label, err.msg);
        return;
    }
    size_t max_n = max_size(sizes, n_sizes), differs = 0, total = 0;
    float *buf = malloc((max_n + 1) * sizeof(float));
    for (int k = 0; k < n_sizes; k++) {
        size_t n = sizes[k], bad = 0;
        fill(buf, n, 0, rank, k);
        CHECK(cz_coll_allreduce(c, buf, n, &err) == 0, "%s bf16 n=%zu: %s", label, n, err.msg);
        for (size_t i = 0; i < n; i++) {
            int owner = mpi_test_chunk_owner(n, p, i);
            float want = order_sum_bf16(&s, owner, i, k);
            bad += buf[i] != (p > 1 ? bf16(want) : want);
            differs += buf[i] != order_sum(&s, 0, owner, i, k);
            total++;
        }
        CHECK(bad == 0, "%s bf16 all-reduce n=%zu: %zu elements not the bf16-wire order", label, n,
              bad);
        CHECK(mpi_test_same_on_all_ranks(world, buf, n * sizeof(float)),
              "%s bf16 n=%zu: ranks hold different bits", label, n);
        /* reduce-scatter: my chunk, the last addition in fp32 */
        fill(buf, n, 0, rank, k);
        CHECK(cz_coll_reduce_scatter(c, buf, n, &err) == 0, "%s: %s", label, err.msg);
        size_t off, cnt;
        cz_comm_chunk(n, p, rank, &off, &cnt);
        bad = 0;
        for (size_t i = off; i < off + cnt; i++) bad += buf[i] != order_sum_bf16(&s, rank, i, k);
        CHECK(bad == 0, "%s bf16 reduce-scatter n=%zu: %zu wrong", label, n, bad);
        /* a plain all-gather (the optimizer's weights) copies fp32 */
        check_allgather(c, buf, n, p, rank, k, label);
    }
    /* most sums of random floats are not bf16 numbers: the wire must show */
    if (p > 1)
        CHECK(differs > total / 2, "%s bf16: only %zu of %zu elements differ from fp32's", label,
              differs, total);
    free(buf);
    cz_coll_free(c);
}

/* "mpi" keeps the chunk ownership: reduce-scatter and all-gather semantics
 * and the all-reduce within rounding (its order is the library's). */
static void run_mpi(const cz_comm *world, const size_t *sizes, int n_sizes) {
    int p = world->size, rank = world->rank;
    cz_error err;
    for (int k = 0; k < n_sizes; k++) {
        size_t n = sizes[k], off, cnt, bad = 0;
        float *buf = malloc((n + 1) * sizeof(float));
        fill(buf, n, 1, rank, k);
        CHECK(cz_allreduce(world, CZ_ALLREDUCE_MPI, buf, n, NULL, &err) == 0, "mpi: %s", err.msg);
        for (size_t i = 0; i < n; i++) {
            double ref = 0;
            for (int r = 0; r < p; r++) ref += input(1, r, i, k);
            bad += buf[i] != (float)ref;
        }
        fill(buf, n, 1, rank, k);
        CHECK(cz_reduce_scatter(world, CZ_ALLREDUCE_MPI, buf, n, NULL, &err) == 0, "mpi: %s",
              err.msg);
        cz_comm_chunk(n, p, rank, &off, &cnt);
        for (size_t i = off; i < off + cnt; i++) {
            double ref = 0;
            for (int r = 0; r < p; r++) ref += input(1, r, i, k);
            bad += buf[i] != (float)ref;
        }
        for (size_t i = 0; i < n; i++)
            buf[i] = i >= off && i < off + cnt ? input(1, rank, i, k) : NAN;
        CHECK(cz_allgather(world, CZ_ALLREDUCE_MPI, buf, n, &err) == 0, "mpi: %s", err.msg);
        for (size_t i = 0; i < n; i++)
            bad += buf[i] != input(1, mpi_test_chunk_owner(n, p, i), i, k);
        CHECK(bad == 0, "mpi n=%zu: %zu wrong", n, bad);
        free(buf);
    }
}

int main(int argc, char **argv) {
    cz_comm d;
    cz_error err;
    mpi_test_begin(&d, &argc, &argv);
    int p = d.size, real_hosts = 0, gx = 0, gy = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--real-hosts") && a + 1 < argc)
            real_hosts = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--grid") && a + 1 < argc &&
                 sscanf(argv[++a], "%dx%d", &gx, &gy) == 2) {
        } else {
            if (d.rank == 0)
                fprintf(stderr, "usage: test_comm_algos [--real-hosts H [--grid XxY]]\n");
            cz_comm_finalize(&d);
            return 2;
        }
    }
    if (p > 4096) return 77;
    /* sizes: the edge cases, then odd sizes at random (seed printed) */
    unsigned seed = 20261201u;
    const char *env = getenv("CLOZE_TEST_SEED");
    if (env) seed = (unsigned)strtoul(env, NULL, 10);
    cz_rng_stream rs = cz_rng_stream_make(seed, CZ_RNG_TEST, 1, 2, 3);
    size_t sizes[16];
    int ns = 0;
    sizes[ns++] = 0;
    sizes[ns++] = 1;
    sizes[ns++] = (size_t)(p > 2 ? p - 1 : 3) | 1;
    sizes[ns++] = (size_t)p + 1;
    /* below the rank count (odd), a few hundred, across the pipeline pieces */
    sizes[ns++] = (1 + 2 * (size_t)(cz_rng_uniform(&rs, 0) * (p / 2.0))) | 1;
    sizes[ns++] = (101 + 2 * (size_t)(cz_rng_uniform(&rs, 1) * 900)) | 1;
    sizes[ns++] =
        (2 * CZ_RING_PIPE * (size_t)p / 3 + 2 * (size_t)(cz_rng_uniform(&rs, 2) * 5000)) | 1;
    if (d.rank == 0) {
        printf("seed %u (CLOZE_TEST_SEED), sizes", seed);
        for (int k = 0; k < ns; k++) printf(" %zu", sizes[k]);
        printf("\n");
    }
    in_.n = sizes[ns - 1];
    for (int k = 0; k < ns; k++)
        for (int integer = 0; integer < 2; integer++) {
            in_.x[k][integer] = malloc(((size_t)p * in_.n + 1) * sizeof(float));
            for (int r = 0; r < p; r++)
                for (size_t i = 0; i < sizes[k]; i++)
                    in_.x[k][integer][(size_t)r * in_.n + i] = input(integer, r, i, k);
        }
    char label[128];
    if (real_hosts > 0) {
        cz_host_layout l;
        if (cz_host_layout_get(cz_comm_mpi(&d), &l, &err) != 0) {
            CHECK(0, "%s", err.msg);
        } else {
            CHECK(l.n_hosts == real_hosts, "MPI reports %d hosts, expected %d", l.n_hosts,
                  real_hosts);
            /* the simulated cluster places ranks host by host */
            int block = l.ranks_per_host == p / real_hosts;
            for (int r = 0; r < p; r++) block &= l.host_of[r] == r / (p / real_hosts);
            CHECK(block, "ranks are not placed host by host (%d ranks per host)", p / real_hosts);
            if (d.rank == 0) printf("hosts: %d x %d ranks\n", l.n_hosts, l.ranks_per_host);
            run_case(&d, CZ_ALLREDUCE_RING, 0, NULL, l.host_of, sizes, ns, "ring");
            run_case(&d, CZ_ALLREDUCE_HIERARCHICAL, 0, NULL, l.host_of, sizes, ns, "hierarchical");
            if (gx > 0) {
                snprintf(label, sizeof label, "torus2d %dx%d", gx, gy);
                CHECK(gx * gy == p, "--grid %dx%d for %d ranks", gx, gy, p);
                run_case(&d, CZ_ALLREDUCE_TORUS2D, gx, NULL, l.host_of, sizes, ns, label);
            }
            cz_host_layout_free(&l);
        }
    } else {
        /* every layout of p ranks as h hosts of p/h, block and round robin */
        for (int h = 1; h <= p; h++) {
            if (p % h) continue;
            for (int rr = 0; rr <= (h > 1 && h < p); rr++) {
                cz_host_layout l;
                if (cz_host_layout_make(&l, h, p / h, rr, &err) != 0) {
                    CHECK(0, "%s", err.msg);
                    continue;
                }
                snprintf(label, sizeof label, "hierarchical %dx%d%s", h, p / h, rr ? " rr" : "");
                run_case(&d, CZ_ALLREDUCE_HIERARCHICAL, 0, &l, l.host_of, sizes, ns, label);
                /* bf16: the two-level rings once per shape (torus2d and round
                 * robin run the same rings on other members) */
                if (!rr && h > 1 && h < p)
                    run_bf16(&d, CZ_ALLREDUCE_HIERARCHICAL, 0, &l, l.host_of, sizes, ns, label);
                cz_host_layout_free(&l);
            }
        }
        run_case(&d, CZ_ALLREDUCE_RING, 0, NULL, NULL, sizes, ns, "ring");
        run_bf16(&d, CZ_ALLREDUCE_RING, 0, NULL, NULL, sizes, ns, "ring");
        for (int x = 1; x <= p; x++) {
            if (p % x) continue;
            snprintf(label, sizeof label, "torus2d %dx%d", x, p / x);
            run_case(&d, CZ_ALLREDUCE_TORUS2D, x, NULL, NULL, sizes, ns, label);
        }
        run_mpi(&d, sizes, ns);
    }
    for (int k = 0; k < ns; k++) free(in_.x[k][0]), free(in_.x[k][1]);
    return mpi_test_end(&d);
}
