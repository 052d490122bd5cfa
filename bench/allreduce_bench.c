/* allreduce_bench: our ring all-reduce against MPI_Allreduce.
 *   mpirun -np 2 build/bench/bench-allreduce_bench [max_mib]
 *   mpirun -np 2 build/bench/bench-allreduce_bench --floats N   (one size only,
 *   e.g. a model's gradient; no overlap measurement)
 * Prints, per size, time and bus bandwidth 2(p-1)/p * bytes / time (the
 * bytes each rank must move in a bandwidth-optimal all-reduce; NCCL-tests'
 * definition), best of a few repetitions. Then one overlap measurement of
 * the bucketed gradient sync against a simulated backward. */
#include "cloze/comm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Stand-in for backward compute between two hook calls (no MPI, no sleep:
 * a busy core like a real backward). */
static void busy(double seconds) {
    double t0 = cz_now();
    while (cz_now() - t0 < seconds) {
    }
}

/* Overlap: backward of `n` floats reported in 64 ranges from the end with
 * `compute` seconds of work in between; how long does finish still wait? */
static void overlap(const cz_comm *d, size_t n, double bucket_mib, double compute) {
    cz_error err;
    cz_grad_sync *gs;
    float *g = cz_alloc(n * sizeof(float), &err);
    cz_comm_config cfg = {CZ_ALLREDUCE_RING, bucket_mib};
    if (!g ||
        cz_grad_sync_create(&gs, d, &cfg, n, CZ_SYNC_ALLREDUCE, CZ_GRAD_DESCENDING, &err) != 0)
        MPI_Abort(d->mpi, 1);
    double plain = 0, total = 0, wait = 0;
    for (int rep = 0; rep < 3; rep++) {
        MPI_Barrier(d->mpi);
        double t0 = cz_now();
        cz_ring_allreduce(d, g, n, NULL, &err);
        plain += cz_now() - t0;
        MPI_Barrier(d->mpi);
        t0 = cz_now();
        cz_grad_sync_begin(gs, g);
        size_t piece = n / 64;
        for (int j = 0; j < 64; j++) {
            busy(compute / 64);
            size_t hi = n - (size_t)j * piece, lo = j == 63 ? 0 : hi - piece;
            cz_grad_sync_ready(gs, lo, hi - lo);
        }
        double t1 = cz_now();
        if (cz_grad_sync_finish(gs, &err) != 0) MPI_Abort(d->mpi, 1);
        wait += cz_now() - t1;
        total += cz_now() - t0;
    }
    if (d->rank == 0)
        printf(
            "overlap: %zu bytes, buckets of %.1f MiB, backward %.1f ms: plain all-reduce %.1f ms, "
            "step with sync %.1f ms, finish waited %.1f ms (thread level %d)\n",
            n * sizeof(float), bucket_mib, compute * 1e3, plain / 3 * 1e3, total / 3 * 1e3,
            wait / 3 * 1e3, d->thread_level);
    cz_grad_sync_free(gs);
    cz_free(g);
}

static double time_one(const cz_comm *d, int ring, float *buf, size_t n, int iters) {
    cz_error err;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        MPI_Barrier(d->mpi);
        double t0 = cz_now();
        for (int i = 0; i < iters; i++) {
            if (ring) {
                if (cz_ring_allreduce(d, buf, n, NULL, &err) != 0) {
                    fprintf(stderr, "%s\n", err.msg);
                    MPI_Abort(d->mpi, 1);
                }
            } else {
                MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, d->mpi);
            }
        }
        double t = (cz_now() - t0) / iters;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, d->mpi);
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    cz_comm d;
    cz_error err;
    if (cz_comm_init(&d, &argc, &argv, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    /* --floats N: time exactly one size (a model's gradient) */
    int one_size = argc > 2 && !strcmp(argv[1], "--floats");
    double max_mib = one_size ? 0 : argc > 1 ? atof(argv[1]) : 64;
    size_t max_n =
        one_size ? (size_t)atol(argv[2]) : (size_t)(max_mib * 1024 * 1024 / sizeof(float));
    float *buf = cz_alloc(max_n * sizeof(float), &err);
    if (!buf) MPI_Abort(d.mpi, 1);
    for (size_t i = 0; i < max_n; i++) buf[i] = 1e-3f * (float)(i % 1000);
    int p = d.size;
    if (d.rank == 0)
        printf("%d ranks; busbw = 2(p-1)/p * bytes / time\n%12s %12s %12s %12s %12s\n", p, "bytes",
               "ring_ms", "ring_GB/s", "mpi_ms", "mpi_GB/s");
    for (size_t n = one_size ? max_n : 1024; n <= max_n; n *= 4) {
        size_t bytes = n * sizeof(float);
        int iters = bytes < (1 << 20) ? 50 : bytes < (16 << 20) ? 10 : 3;
        double tr = time_one(&d, 1, buf, n, iters), tm = time_one(&d, 0, buf, n, iters);
        double f = p > 1 ? 2.0 * (p - 1) / p * (double)bytes / 1e9 : 0;
        if (d.rank == 0)
            printf("%12zu %12.3f %12.2f %12.3f %12.2f\n", bytes, tr * 1e3, f / tr, tm * 1e3,
                   f / tm);
    }
    cz_free(buf);
    if (!one_size) overlap(&d, (size_t)4 << 20, 2.0, 0.05);
    cz_comm_finalize(&d);
    return 0;
}
