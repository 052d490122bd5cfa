/* model_bf16: a tiny BERT (and GPT, both layouts) with every matrix product in bf16 mode
 * (cz_gemm_set_bf16) against the same model in fp32 and against the bf16
 * definition (cz_gemm_bf16_ref loops: inputs rounded to bf16, double sums).
 * Same weights, same batch, dropout on (keyed, identical in all runs).
 *
 * What must hold, and why the bounds:
 * 1. bf16 fast vs bf16 reference loops: both round every product input to
 *    bf16 identically; they differ only by fp32 vs double accumulation
 *    (relative ~ k 2^-24 per product, k <= 256 here: < 2e-5) carried through
 *    the network. But an activation that the two compute 1e-7 apart and
 *    that lies that close to a bf16 rounding boundary rounds to neighbouring
 *    bf16 values in the next product (2^-8 apart): rare, and then it moves
 *    the gradient far more than the sums do. Measured over five dropout
 *    mask patterns: 7e-8 to 4e-7 BERT and 4e-6 to 9e-6 GPT, and 1.0e-4 BERT
 *    for one pattern (the attention masks keyed on a 64-position grid).
 *    Bound 1e-3 relative on the gradient (L2), 1e-4 on the loss, and 10x
 *    below what bf16 rounding itself moves (check 2, measured 2e-3 to
 *    3e-3), so a product that skipped or double-rounded its inputs, or took
 *    the fp32 path, fails.
 * 2. bf16 vs fp32: each product input carries a relative error of at most
 *    u_b = 2^-8 (bf16 unit roundoff), i.e. ~2^-8/sqrt(3) RMS for
 *    round-to-nearest, zero-mean and independent. A gradient is a chain of
 *    D ~ 2L + 4 = 8 products (forward and backward through 2 layers and the
 *    heads), so its relative error is about sqrt(D) 2^-8 ~ 1e-2 in RMS;
 *    bound 0.05 (5x). The loss (~ln V = 5.3) moves by the logits' error,
 *    ~ 2^-8 |logit| ~ 1e-3 absolute with 0.02-std weights; bound 0.02.
 *    And the two must differ (> 1e-5): the bf16 path really runs.
 * 3. The product inputs that kernels write in bf16 (cz_model_set_bf16_inputs)
 *    against the same kept in fp32: bit for bit, loss and every gradient.
 * Kalamkar et al. 2019 (bf16 with fp32 accumulation trains as fp32) is why
 * errors of this size are acceptable; the learning-curve test checks that. */
#include <math.h>
#include <stdio.h>

#include "cloze/cpu.h"
#include "cloze/kernels.h"
#include "test_model_fixture.h"

typedef struct result {
    double loss, mlm, nsp;
    float *grads;
    size_t n;
} result;

static result run_as(const cz_model_config *c, cz_gemm_ctx *g, const cz_batch *b, int B, int T,
                     int P, int bf16_inputs) {
    cz_error err;
    cz_model *m;
    CHECK(cz_model_create(&m, c, B, T, P, g, &err) == 0);
    cz_model_set_bf16_inputs(m, bf16_inputs);
    cz_model_init_weights(m, 7);
    cz_losses l;
    CHECK(cz_model_forward(m, b, &l, &err) == 0);
    cz_model_zero_grads(m);
    cz_model_backward(m, b, 1.0f);
    result r = {l.loss, l.mlm_loss, l.nsp_loss, NULL, cz_model_num_params(m)};
    r.grads = malloc(r.n * sizeof *r.grads);
    memcpy(r.grads, cz_model_grads(m), r.n * sizeof *r.grads);
    cz_model_free(m);
    return r;
}

static result run(const cz_model_config *c, cz_gemm_ctx *g, const cz_batch *b, int B, int T,
                  int P) {
    return run_as(c, g, b, B, T, P, 1);
}

/* ||x - y|| / ||y|| */
static double rel_l2(const result *x, const result *y) {
    double d = 0, n = 0;
    for (size_t i = 0; i < y->n; i++) {
        double e = (double)x->grads[i] - y->grads[i];
        d += e * e;
        n += (double)y->grads[i] * y->grads[i];
    }
    return sqrt(d / n);
}

static void compare(cz_arch arch, int layout, const char *label, cz_gemm_ctx *g32, cz_gemm_ctx *gb,
                    cz_gemm_ctx *gr) {
    cz_model_config c = tiny_config(arch, 200, 64, 2, 2, 64);
    c.layout = layout;
    if (layout == CZ_LAYOUT_PRE_LN) c.vocab_pad_to = 64; /* 200 -> 256 rows */
    int B = 4, T = 32, P = arch == CZ_ARCH_BERT ? 5 : 0;
    static test_batch tb;
    make_batch(&tb, &c, B, T, P, 7, NULL, 99);
    tb.b.train = 1;         /* dropout too: its masks are keyed, the same in every run */
    cz_model_config cb = c; /* the same model in bf16 (model.matmul_precision) */
    cb.matmul_bf16 = 1;
    result r32 = run(&c, g32, &tb.b, B, T, P);
    result rb = run(&cb, gb, &tb.b, B, T, P);
    result rr = run(&cb, gr, &tb.b, B, T, P);
    double fast_vs_def = rel_l2(&rb, &rr), bf16_vs_fp32 = rel_l2(&rb, &r32);
    printf("%s: loss fp32 %.6f bf16 %.6f bf16-ref %.6f; grad rel L2: bf16 vs bf16-ref %.2e, "
           "bf16 vs fp32 %.2e\n",
           label, r32.loss, rb.loss, rr.loss, fast_vs_def, bf16_vs_fp32);
    CHECK(fabs(rb.loss - rr.loss) <= 1e-4 * fabs(rr.loss));
    CHECK(fast_vs_def <= 1e-3);
    CHECK(fabs(rb.loss - r32.loss) <= 0.02);
    CHECK(bf16_vs_fp32 <= 0.05);
    CHECK(bf16_vs_fp32 > 1e-5);
    CHECK(fast_vs_def < bf16_vs_fp32 / 10);
    /* 3. the GELU output and the MLM dlogits written in bf16 for their
     * products (the default) against the same kept in fp32 and rounded
     * while packing: the same bits */
    result rf = run_as(&cb, gb, &tb.b, B, T, P, 0);
    CHECK(rf.loss == rb.loss && memcmp(rf.grads, rb.grads, rb.n * sizeof *rb.grads) == 0);
    free(rf.grads);
    free(r32.grads);
    free(rb.grads);
    free(rr.grads);
}

/* 4. The precision is the model's own (model.matmul_precision): a context
 * in the other mode is refused, naming the key, either way; the context
 * cz_model_gemm_setup makes for the configuration is taken. */
static void check_precision(cz_gemm_ctx *g32, cz_gemm_ctx *gb) {
    cz_model_config c = tiny_config(CZ_ARCH_BERT, 200, 64, 2, 2, 64);
    cz_error err;
    cz_model *m = NULL;
    CHECK(cz_model_create(&m, &c, 1, 8, 2, gb, &err) == -1 &&
          strstr(err.msg, "model.matmul_precision is fp32"));
    c.matmul_bf16 = 1;
    CHECK(cz_model_create(&m, &c, 1, 8, 2, g32, &err) == -1 &&
          strstr(err.msg, "model.matmul_precision is bf16"));
    cz_gemm_ctx *g = cz_model_gemm_setup(CZ_GEMM_AUTO, 1, c.matmul_bf16, &err);
    CHECK(g && cz_gemm_is_bf16(g));
    CHECK(cz_model_create(&m, &c, 1, 8, 2, g, &err) == 0);
    cz_model_free(m);
    cz_gemm_free(g);
}

int main(void) {
    cz_cpu cpu;
    cz_cpu_detect(&cpu);
    if (!cpu.avx512_bf16) {
        printf("SKIP: no AVX512_BF16 on this CPU\n");
        return 77;
    }
    cz_error err;
    cz_gemm_ctx *g32 = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    cz_gemm_ctx *gb = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    cz_gemm_ctx *gr = cz_gemm_setup(CZ_GEMM_REFERENCE, 1, &err);
    CHECK(g32 && gb && gr);
    CHECK(cz_gemm_set_bf16(gb, 1, &err) == 0);
    CHECK(cz_gemm_set_bf16(gr, 1, &err) == 0);
    check_precision(g32, gb);
    compare(CZ_ARCH_BERT, CZ_LAYOUT_POST_LN, "bert", g32, gb, gr);
    compare(CZ_ARCH_GPT, CZ_LAYOUT_POST_LN, "gpt", g32, gb, gr);
    compare(CZ_ARCH_GPT, CZ_LAYOUT_PRE_LN, "gpt pre_ln", g32, gb, gr);
    cz_gemm_free(g32);
    cz_gemm_free(gb);
    cz_gemm_free(gr);
    printf("ok\n");
    return 0;
}
