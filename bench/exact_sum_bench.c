/* dist.exact's own costs, apart from a training run's noise: on N floats
 * (default 11.27 M, BERT-mini's gradient) in tensors of 64 Ki floats, the
 * conversion of one micro-batch's gradient into the int64 sums
 * (cz_exact_add) and the step's finish (the maxima's max-reduction, the
 * int64 all-reduce on the ring and the conversion back), against an fp32
 * ring all-reduce of the same floats. Median of REPS (default 5) after one
 * warm-up, on every rank's wall clock, printed by rank 0.
 *
 *   mpirun -np P build/bench/bench-exact_sum_bench [N] [REPS] */
#include "cloze/comm.h"
#include "cloze/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    cz_comm c;
    cz_error err;
    if (cz_comm_init(&c, &argc, &argv, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t n = argc > 1 ? (size_t)atof(argv[1]) : 11270000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > 99) reps = 5;
    int nt = (int)((n + 65535) / 65536);
    size_t *off = malloc((size_t)nt * sizeof *off);
    float *g = malloc(n * sizeof *g), *out = malloc(n * sizeof *out);
    cz_exact *x = NULL;
    if (!off || !g || !out) return 1;
    for (int t = 0; t < nt; t++) off[t] = (size_t)t * 65536;
    for (size_t i = 0; i < n; i++)
        g[i] = (float)((double)((i * 2654435761u) % 2001) - 1000) * 1e-6f;
    if (cz_exact_create(&x, n, off, nt, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double add[100], fin[100], f32[100];
    int retry;
    for (int r = -1; r < reps; r++) {
        cz_exact_begin(x, 8);
        cz_comm_barrier(&c, &err);
        double t0 = cz_now();
        cz_exact_add(x, g);
        double t1 = cz_now();
        cz_comm_barrier(&c, &err);
        double t2 = cz_now();
        if (cz_exact_finish(x, &c, CZ_ALLREDUCE_RING, out, &retry, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        double t3 = cz_now();
        if (retry) { /* the first: no scales yet */
            r--;
            continue;
        }
        memcpy(out, g, n * sizeof *g);
        cz_comm_barrier(&c, &err);
        double t4 = cz_now();
        if (cz_allreduce(&c, CZ_ALLREDUCE_RING, out, n, NULL, &err) != 0) return 1;
        double t5 = cz_now();
        if (r >= 0) add[r] = t1 - t0, fin[r] = t3 - t2, f32[r] = t5 - t4;
    }
    qsort(add, (size_t)reps, sizeof *add, cmp);
    qsort(fin, (size_t)reps, sizeof *fin, cmp);
    qsort(f32, (size_t)reps, sizeof *f32, cmp);
    if (c.rank == 0)
        printf("%zu floats, %d rank(s), median of %d: cz_exact_add %.4f s (%.2f ns/float), "
               "cz_exact_finish %.4f s, fp32 ring all-reduce %.4f s, finish / fp32 %.2f\n",
               n, c.size, reps, add[reps / 2], add[reps / 2] * 1e9 / (double)n, fin[reps / 2],
               f32[reps / 2], f32[reps / 2] > 0 ? fin[reps / 2] / f32[reps / 2] : 0.0);
    cz_exact_free(x);
    free(off);
    free(g);
    free(out);
    cz_comm_finalize(&c);
    return 0;
}
