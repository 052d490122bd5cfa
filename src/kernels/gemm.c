/* GEMM through BLIS. Row-major buffers are passed to BLIS with explicit
 * row/column strides (rs = ld, cs = 1), so no copies or transposes are made
 * here; BLIS packs panels for its micro-kernel itself. */
#include "cloze/kernels.h"

#include <blis.h>
#include <stdlib.h>
#include <string.h>

struct cz_gemm_ctx {
    cz_gemm_choice choice;
    int threads;
    rntm_t rntm;
    char description[128];
};

cz_gemm_ctx *cz_gemm_setup(cz_gemm_choice choice, int threads, cz_error *err) {
    cz_gemm_ctx *g = cz_alloc(sizeof *g, err);
    if (!g) return NULL;
    g->choice = choice;
    g->threads = threads > 0 ? threads : 1;
    bli_rntm_init(&g->rntm);
    /* an rntm_t without a thread count runs single-threaded whatever
     * BLIS_NUM_THREADS says: set it explicitly */
    bli_rntm_set_num_threads(g->threads, &g->rntm);
    snprintf(g->description, sizeof g->description, "%s, %d thread(s)",
             choice == CZ_GEMM_REFERENCE ? "reference loops" : "blis default context", g->threads);
    return g;
}

void cz_gemm_free(cz_gemm_ctx *g) { cz_free(g); }

const char *cz_gemm_describe(const cz_gemm_ctx *g) { return g->description; }

void cz_gemm_ref(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                acc += av * bv;
            }
            float *cij = &c[(size_t)i * ldc + j];
            *cij = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *cij));
        }
    }
}

void cz_gemm(const cz_gemm_ctx *g, int ta, int tb, int m, int n, int k, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m == 0 || n == 0) return;
    if (!g || g->choice == CZ_GEMM_REFERENCE) {
        cz_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    /* op(A) is m x k: stored row-major as [m x k] (rs=lda, cs=1) or, when
     * transposed, as [k x m] which BLIS reads through the transpose flag. */
    rntm_t rntm = g->rntm;
    bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 m, n, k, &alpha, (float *)a, lda, 1, (float *)b, ldb, 1, &beta, c, ldc, 1, NULL,
                 &rntm);
}
