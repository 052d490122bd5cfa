/* bf16 GEMM (gemm_bf16.c), private to src/kernels: gemm.c owns the context
 * and routes products here when cz_gemm_set_bf16 turned the mode on. */
#ifndef CLOZE_GEMM_BF16_H
#define CLOZE_GEMM_BF16_H

#include <stdint.h>

#include "cloze/core.h"

/* Packing buffers of one context, one pair per thread (each thread packs
 * what its part of C needs). Sized for the cache blocking constants of
 * gemm_bf16.c, allocated once (cz_gemm_bf16_work_create). */
typedef struct cz_gemm_bf16_work {
    int threads;
    uint32_t *b_pack; /* KC/2 x NC pairs */
    uint32_t *a_pack; /* one MC x KC/2 block of pairs per thread */
} cz_gemm_bf16_work;

/* 1 where this build has the AVX512_BF16 code (x86-64, GCC or Clang). */
int cz_gemm_bf16_compiled(void);
cz_gemm_bf16_work *cz_gemm_bf16_work_create(int threads, cz_error *err);
void cz_gemm_bf16_work_free(cz_gemm_bf16_work *w);
/* The fast path: cz_gemm's contract with bf16-rounded inputs and fp32
 * accumulation. The CPU must have AVX512_BF16 (the caller checked). */
void cz_gemm_bf16_run(cz_gemm_bf16_work *w, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc);
/* A short name of the kernel, e.g. "vdpbf16ps micro-kernel 8x48, KC 256 ..." */
const char *cz_gemm_bf16_kernel_name(void);

#endif
