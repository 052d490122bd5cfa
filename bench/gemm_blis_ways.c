/* BLIS internals behind cz_gemm's choices, on BERT-base shapes: how the
 * thread split (rntm "ways": jc, ic, jr loops of the GotoBLAS algorithm) and
 * the "sup" small-matrix path change the speed of one configuration.
 *
 * Usage: [BLIS_ARCH_TYPE=<arch_t number, 0 = skx>] bench-gemm_blis_ways
 * Prints "<arch> <op> <m>x<n>x<k> <config>: <GFLOP/s>" (best of 5 runs of
 * >= 0.1 s). Row-major operands as cz_gemm passes them (rs = ld, cs = 1). */
#include "cloze/core.h"

#include <blis.h>
#include <stdio.h>

static double best_gflops(int ta, int tb, int m, int n, int k, const float *a, int lda,
                          const float *b, int ldb, float *c, rntm_t *rntm, cntx_t *cntx) {
    float one = 1.0f, zero = 0.0f;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        int iters = 0;
        double t0 = cz_now(), t;
        do {
            rntm_t r = *rntm;
            bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                         tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, &one, (float *)a, lda, 1,
                         (float *)b, ldb, 1, &zero, c, n, 1, cntx, &r);
            iters++;
            t = cz_now() - t0;
        } while (t < 0.1);
        if (t / iters < best) best = t / iters;
    }
    return 2.0 * m * n * k / best * 1e-9;
}

int main(void) {
    bli_init(); /* before the arch query: BLIS 0.9.0 aborts otherwise */
    const char *arch = bli_arch_string(bli_arch_query_id());
    cntx_t packed = *bli_gks_query_cntx(); /* sup thresholds 1: never sup */
    blksz_t th;
    bli_blksz_init_easy(&th, 1, 1, 1, 1);
    bli_cntx_set_l3_sup_thresh(3, BLIS_MT, &th, BLIS_NT, &th, BLIS_KT, &th, &packed);

    /* {ta, tb, m, n, k, ld of A and B (0 = dense)} */
    static const int shapes[][6] = {{0, 0, 1024, 768, 768, 0}, {0, 1, 1024, 768, 768, 0},
                                    {1, 0, 768, 768, 1024, 0}, {0, 0, 1024, 768, 3072, 0},
                                    {0, 1, 128, 128, 64, 768}, {0, 0, 128, 64, 128, 768},
                                    {1, 0, 128, 64, 128, 768}};
    size_t big = (size_t)3072 * 1024;
    float *a = cz_alloc(big * sizeof(float), NULL), *b = cz_alloc(big * sizeof(float), NULL);
    float *c = cz_alloc(big * sizeof(float), NULL);
    for (size_t i = 0; i < big; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
        int ta = shapes[s][0], tb = shapes[s][1], m = shapes[s][2], n = shapes[s][3];
        int k = shapes[s][4];
        int lda = shapes[s][5] ? shapes[s][5] : (ta ? m : k);
        int ldb = shapes[s][5] ? shapes[s][5] : (tb ? k : n);
        static const char *names[] = {"nt=1", "nt=2",        "ic=2",       "jc=2",
                                      "jr=2", "nt=1 packed", "nt=2 packed"};
        for (int cfg = 0; cfg < 7; cfg++) {
            rntm_t r;
            bli_rntm_init(&r);
            if (cfg == 0 || cfg == 5) bli_rntm_set_num_threads(1, &r);
            if (cfg == 1 || cfg == 6) bli_rntm_set_num_threads(2, &r);
            if (cfg == 2) bli_rntm_set_ways(1, 1, 2, 1, 1, &r);
            if (cfg == 3) bli_rntm_set_ways(2, 1, 1, 1, 1, &r);
            if (cfg == 4) bli_rntm_set_ways(1, 1, 1, 2, 1, &r);
            double gf =
                best_gflops(ta, tb, m, n, k, a, lda, b, ldb, c, &r, cfg >= 5 ? &packed : NULL);
            printf("%s %c%c %dx%dx%d %s: %.0f\n", arch, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
                   names[cfg], gf);
            fflush(stdout);
        }
    }
    cz_free(a);
    cz_free(b);
    cz_free(c);
    return 0;
}
