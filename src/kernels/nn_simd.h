/* AVX-512 bodies of the Transformer kernels (nn_avx512.c), private to
 * src/kernels. nn.c calls them when the CPU has AVX-512F/BW/VL (checked once
 * at run time), so the library still runs on CPUs without it. Each function
 * has the semantics of its public counterpart in cloze/kernels.h and runs
 * its own OpenMP loop (static schedule, one fixed order per reduction). */
#ifndef CLOZE_NN_SIMD_H
#define CLOZE_NN_SIMD_H

#include <stddef.h>
#include <stdint.h>

struct cz_rng_stream;

/* 1 where nn_avx512.c has the AVX-512 bodies (x86-64, GCC or Clang) */
#if defined(__x86_64__) && defined(__GNUC__)
#define CZ_NN_SIMD 1
#else
#define CZ_NN_SIMD 0
#endif

int cz_nn_have_avx512(void);

/* r == NULL: y = LN(x); otherwise sum = x + r and y = LN(sum) */
void nn512_layernorm_forward(float *y, float *sum, float *mean, float *rstd, const float *x,
                             const float *r, const float *gamma, const float *beta, int n, int c,
                             float eps);
void nn512_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                              const float *x, const float *mean, const float *rstd,
                              const float *gamma, int n, int c);
/* bias == NULL: y = gelu(x) over n = rows * c elements; otherwise x[i,:] +=
 * bias in place first (x is then written) */
void nn512_gelu_forward(float *y, float *x, const float *bias, size_t rows, int c, int tanh_form);
void nn512_gelu_backward(float *dx, const float *x, const float *dy, size_t n, int tanh_form);
void nn512_bias_backward(float *db, const float *dy, int n, int c, int ld);
/* rows of t scores; row i belongs to sequence i / (heads * t), query i % t */
void nn512_attn_softmax(float *s, int rows, int heads, int t, const float *key_bias, int causal);
void nn512_softmax_backward(float *ds, const float *p, const float *dp, int rows, int cols);
void nn512_dropout(float *y, const float *x, size_t n, float p, const struct cz_rng_stream *s,
                   uint64_t first);
void nn512_embedding_backward(float *dtok, float *dpos, float *dseg, const float *dout,
                              const int32_t *ids, const int32_t *segs, int n, int t, int c);
void nn512_xent_forward(float *logits, double *loss, int32_t *argmax, const int32_t *labels, int n,
                        int v);

#endif
