/* The fast bodies of the Transformer kernels, one table per instruction set,
 * private to src/kernels. nn_vec.c is compiled once per set (CMakeLists.txt:
 * AVX-512, AVX2 + FMA, the portable baseline) and each copy defines one
 * table; nn.c picks the table of cz_cpu_kernel_isa() (cloze/cpu.h) and runs
 * its own scalar loops for CZ_ISA_SCALAR. Every function has the semantics
 * of its public counterpart in cloze/kernels.h and runs its own OpenMP loop
 * (static schedule; every reduction in one fixed order). */
#ifndef CLOZE_NN_ISA_H
#define CLOZE_NN_ISA_H

#include <stddef.h>
#include <stdint.h>

struct cz_rng_stream;

typedef struct cz_nn_ops {
    /* r == NULL: y = LN(x); otherwise sum = x + r and y = LN(sum) */
    void (*layernorm_forward)(float *y, float *sum, float *mean, float *rstd, const float *x,
                              const float *r, const float *gamma, const float *beta, int n, int c,
                              float eps);
    void (*layernorm_backward)(float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *rstd,
                               const float *gamma, int n, int c);
    /* bias == NULL: y = gelu(x) over rows * c elements; otherwise x[i,:] +=
     * bias in place first (x is then written); y16 != NULL: y16 gets the
     * values in bf16 instead (y unused) */
    void (*gelu_forward)(float *y, uint16_t *y16, float *x, const float *bias, size_t rows, int c,
                         int tanh_form);
    void (*gelu_backward)(float *dx, const float *x, const float *dy, size_t n, int tanh_form);
    void (*add_bias)(float *y, const float *bias, int n, int c, int ld);
    void (*bias_backward)(float *db, const float *dy, int n, int c, int ld);
    /* rows of t scores; row i belongs to sequence i / (heads * t), query i % t */
    void (*attn_softmax)(float *s, int rows, int heads, int t, const float *key_bias, int causal);
    void (*softmax_backward)(float *ds, const float *p, const float *dp, int rows, int cols);
    void (*dropout)(float *y, const float *x, size_t n, float p, const struct cz_rng_stream *s,
                    uint64_t first);
    void (*dropout_rows)(float *y, const float *x, int rows, int cols, uint64_t stride, float p,
                         const struct cz_rng_stream *s, uint64_t first);
    void (*embedding_forward)(float *out, const int32_t *ids, const int32_t *segs, const float *tok,
                              const float *pos, const float *seg, int n, int t, int c);
    void (*embedding_backward)(float *dtok, float *dpos, float *dseg, const float *dout,
                               const int32_t *ids, const int32_t *segs, int n, int t, int c);
    void (*xent_forward)(float *logits, double *loss, int32_t *argmax, const int32_t *labels, int n,
                         int v);
    /* bf16: each row's result in bf16 in the first half of its memory */
    void (*xent_backward)(float *probs, const int32_t *labels, const float *scale, int n, int v,
                          int bf16);
    void (*bf16_round)(float *y, const float *x, size_t n);
    void (*bf16_store)(uint16_t *y, const float *x, size_t n);
    void (*xent_bias_backward)(float *db, const float *probs, const int32_t *labels,
                               const float *scale, int n, int v);
    void (*skinny_gemm)(float *y, const float *x, int m, const float *w, int trans, int k, int n,
                        const float *bias);
} cz_nn_ops;

/* Defined where the build has them (x86-64 for the first two). */
extern const cz_nn_ops cz_nn_ops_avx512, cz_nn_ops_avx2, cz_nn_ops_baseline;

#endif
