/* The non-GEMM kernels one by one at the shapes of a BERT step: milliseconds
 * per call (median of --reps calls after one warm-up) of the path that
 * CLOZE_KERNELS picks (cloze/cpu.h), so paths are compared by running this
 * once per value, alternated (bench/README.md).
 *
 *   bench-kernels_bench [--model mini|base] [--threads N] [--reps N]
 *
 * mini: 32 sequences of 128 (4096 tokens), H 256, FFN 1024, 4 heads;
 * base: 8 sequences of 128 (1024 tokens), H 768, FFN 3072, 12 heads. Both
 * with 20 MLM positions per sequence against 30522 words. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/kernels.h"
#include "cloze/rng.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *buf(size_t n, uint64_t key) {
    float *x = malloc(n * sizeof *x);
    cz_rng_stream s = cz_rng_stream_make(5, CZ_RNG_TEST, key, 0, 0);
    for (size_t i = 0; i < n; i++) x[i] = (float)cz_rng_normal(&s, i);
    return x;
}

#define TIME(name, call)                                                                           \
    do {                                                                                           \
        double t[64];                                                                              \
        call;                                                                                      \
        for (int rep_ = 0; rep_ < reps; rep_++) {                                                  \
            double t0 = cz_now();                                                                  \
            call;                                                                                  \
            t[rep_] = cz_now() - t0;                                                               \
        }                                                                                          \
        qsort(t, (size_t)reps, sizeof *t, cmp);                                                    \
        printf("%-26s %8.3f ms\n", name, 1e3 * t[reps / 2]);                                       \
    } while (0)

int main(int argc, char **argv) {
    int base = 0, threads = 1, reps = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            base = !strcmp(argv[i + 1], "base");
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    omp_set_num_threads(threads);
    const int S = base ? 8 : 32, T = 128, H = base ? 768 : 256, A = base ? 12 : 4, I = 4 * H;
    const int N = S * T, P = 20 * S, V = 30522;
    float *x = buf((size_t)N * I, 1), *r = buf((size_t)N * H, 2), *g = buf((size_t)I, 3);
    float *b = buf((size_t)I, 4), *y = buf((size_t)N * I, 5), *u = buf((size_t)N * I, 6);
    float *sum = buf((size_t)N * H, 7), *mean = buf(N, 8), *rstd = buf(N, 9);
    float *dy = buf((size_t)N * I, 10), *s = buf((size_t)S * A * T * T, 11);
    float *z = buf((size_t)P * V, 12), *db = calloc(I, sizeof *db), *dg = calloc(H, sizeof *dg);
    double *loss = malloc(P * sizeof *loss);
    int32_t *lab = malloc(P * sizeof *lab), *am = malloc(P * sizeof *am);
    for (int i = 0; i < P; i++) lab[i] = (i * 37) % V;
    cz_rng_stream st = cz_rng_stream_make(1, CZ_RNG_DROPOUT, 1, 2, 3);
    printf("kernels: %s; %s shapes, %d thread(s), median of %d calls\n", cz_kernels_describe(),
           base ? "BERT-base" : "BERT-mini", threads, reps);
    TIME("add+layernorm fwd",
         cz_add_layernorm_forward(y, sum, mean, rstd, x, r, g, b, N, H, 1e-12f));
    TIME("layernorm bwd", cz_layernorm_backward(u, dg, db, dy, sum, mean, rstd, g, N, H));
    TIME("bias+gelu fwd (erf)", cz_bias_gelu_forward(y, u, b, N, I, 0));
    TIME("gelu bwd (erf)", cz_gelu_backward(y, u, dy, (size_t)N * I, 0));
    TIME("bias bwd", cz_bias_backward(db, dy, N, I, I));
    TIME("softmax fwd (padding)", cz_attn_softmax_batch(s, S, A, T, r, 0));
    TIME("softmax bwd", cz_softmax_backward(y, s, dy, S * A * T, T));
    TIME("dropout (probs)", cz_dropout(y, s, (size_t)S * A * T * T, 0.1f, &st, 0));
    TIME("dropout (hidden)", cz_dropout(y, r, (size_t)N * H, 0.1f, &st, 7));
    TIME("cross-entropy fwd", cz_xent_forward(z, loss, am, lab, P, V));
    return 0;
}
