/* kernels: the compute primitives of a Transformer step.
 *
 * Two paths for every kernel: a readable scalar reference (`*_ref`, plain
 * loops, used by the tests as the definition) and the fast path that the model
 * calls. Buffers are row-major, [rows x cols], fp32.
 *
 * Determinism rule: every reduction runs in a fixed order that does not depend
 * on the number of threads (parallelise over independent outputs, never split
 * one sum across threads).
 *
 * Owners: gemm.c (matrix products through BLIS, CPU-specific micro-kernel
 * selection) and the elementwise/attention kernels in their own files. */
#ifndef CLOZE_KERNELS_H
#define CLOZE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"

/* ---- GEMM ----
 * C[m x n] = alpha * op(A) * op(B) + beta * C, row-major, with leading
 * dimensions lda/ldb/ldc in elements (row strides). op(X) = X or X^T.
 * All matrix products of the model go through this one call, which runs a
 * BLIS micro-kernel chosen once at start-up (cz_gemm_setup). */
typedef struct cz_gemm_ctx cz_gemm_ctx;

typedef enum {
    CZ_GEMM_AUTO = 0,
    CZ_GEMM_BLIS_DEFAULT = 1,
    CZ_GEMM_REFERENCE = 2,
    CZ_GEMM_AVX512 = 3 /* BLIS's skx kernels wherever AVX-512 is usable */
} cz_gemm_choice;

/* Picks the micro-kernel for this CPU (CPUID) and the thread count BLIS uses
 * (threads <= 0: one). Logs what it chose. Returns NULL and fills err on
 * failure. AUTO: BLIS's AVX-512 "skx" kernels where the CPU and OS allow
 * AVX-512 at full width, its AVX2/FMA kernels on CPUs without AVX-512 and on
 * AMD family 0x19 (Zen 3/Zen 4: 256-bit units, measured no faster with skx,
 * see docs/performance.md), BLIS's default where nothing better is known.
 * BLIS_DEFAULT: BLIS's own CPUID choice. AVX512: skx wherever AVX-512 is
 * usable. REFERENCE: the loops of cz_gemm_ref. Call it before anything else
 * uses BLIS. */
cz_gemm_ctx *cz_gemm_setup(cz_gemm_choice choice, int threads, cz_error *err);
void cz_gemm_free(cz_gemm_ctx *g);
const char *cz_gemm_describe(const cz_gemm_ctx *g); /* e.g. "blis skx (AVX-512)" */
/* The BLIS configuration that runs the products ("skx", "zen3", ...), or
 * "reference" for the loops. BLIS keeps one configuration per process: the
 * first setup (AUTO, AVX512 or BLIS_DEFAULT) decides it for all later ones. */
const char *cz_gemm_kernel(const cz_gemm_ctx *g);

void cz_gemm(const cz_gemm_ctx *g, int trans_a, int trans_b, int m, int n, int k, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* The definition: triple loop, double accumulation. */
void cz_gemm_ref(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
