/* cz_skinny_gemm against cz_gemm (BLIS) on a decoding step's products: ROWS
 * rows times GPT-2 small's MLP weight (768 x 3072, Conv1D layout), the
 * weight and rows random. Best of 5 timings of 50 products each.
 *   usage: bench-skinny_bench THREADS ROWS */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cloze/kernels.h"
#include "cloze/rng.h"

static void fill(float *x, size_t n, uint64_t key) {
    cz_rng_stream s = cz_rng_stream_make(key, CZ_RNG_TEST, 0, 0, 0);
    for (size_t i = 0; i < n; i++) x[i] = cz_rng_uniform(&s, i) - 0.5f;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench-skinny_bench THREADS ROWS\n");
        return 2;
    }
    int threads = atoi(argv[1]), m = atoi(argv[2]), K = 768, N = 3072, R = 50;
    if (threads < 1 || m < 1) {
        fprintf(stderr, "bench-skinny_bench: THREADS and ROWS must be >= 1\n");
        return 2;
    }
    cz_error err;
    omp_set_num_threads(threads);
    cz_gemm_ctx *g = cz_gemm_setup(CZ_GEMM_AUTO, threads, &err);
    float *a = malloc((size_t)m * K * 4), *w = malloc((size_t)K * N * 4),
          *c = malloc((size_t)m * N * 4);
    if (!g || !a || !w || !c) {
        fprintf(stderr, "bench-skinny_bench: %s\n", g ? "out of memory" : err.msg);
        return 1;
    }
    fill(a, (size_t)m * K, 1);
    fill(w, (size_t)K * N, 2);
    double best[2] = {1e9, 1e9};
    for (int rep = 0; rep < 5; rep++) {
        double t0 = cz_now();
        for (int i = 0; i < R; i++) cz_gemm(g, 0, 0, m, N, K, 1, a, K, w, N, 0, c, N);
        double t1 = cz_now();
        for (int i = 0; i < R; i++) cz_skinny_gemm(c, a, m, w, 0, K, N, NULL);
        double t2 = cz_now();
        best[0] = (t1 - t0) / R < best[0] ? (t1 - t0) / R : best[0];
        best[1] = (t2 - t1) / R < best[1] ? (t2 - t1) / R : best[1];
    }
    printf("threads %d, rows %d x 768 x 3072: cz_gemm (%s) %.3f ms, cz_skinny_gemm %.3f ms "
           "(best of 5 x %d)\n",
           threads, m, cz_gemm_kernel(g), best[0] * 1e3, best[1] * 1e3, R);
    free(a);
    free(w);
    free(c);
    cz_gemm_free(g);
    return 0;
}
