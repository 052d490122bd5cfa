/* The whole training path learns: a tiny BERT and a tiny GPT memorise one
 * fixed batch of random tokens (loss from ~ln V to near zero, every masked
 * token, NSP label and next token predicted) with plain Adam. A broken
 * gradient anywhere (sign, missing term, wrong layout) stalls this. */
#include "test_model_fixture.h"

static void adam(float *p, const float *g, float *m, float *v, size_t n, int t, float lr) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

static void overfit(cz_arch arch, const char *label, const cz_gemm_ctx *gemm) {
    const int B = 4, T = 16, P = 4, steps = 300;
    cz_model_config c = tiny_config(arch, 64, 32, 2, 2, 32);
    cz_model *m;
    cz_error err;
    CHECK(cz_model_create(&m, &c, B, T, P, gemm, &err) == 0);
    cz_model_init_weights(m, 3);
    static test_batch tb;
    make_batch(&tb, &c, B, T, P, 3, NULL, 9);
    size_t n = cz_model_num_params(m);
    float *mo = calloc(n, sizeof *mo), *ve = calloc(n, sizeof *ve);
    cz_losses l, first = {0};
    double t0 = cz_now();
    for (int step = 1; step <= steps; step++) {
        cz_model_zero_grads(m);
        CHECK(cz_model_forward(m, &tb.b, &l, &err) == 0);
        if (step == 1) first = l;
        cz_model_backward(m, &tb.b, 1.0f);
        adam(cz_model_params(m), cz_model_grads(m), mo, ve, n, step, 3e-3f);
    }
    CHECK(cz_model_forward(m, &tb.b, &l, &err) == 0);
    printf("%s: loss %.4f -> %.5f in %d Adam steps (%.2f s)", label, first.loss, l.loss, steps,
           cz_now() - t0);
    if (arch == CZ_ARCH_BERT)
        printf(", MLM %ld/%ld, NSP %ld/%ld correct\n", l.mlm_correct, l.mlm_count, l.nsp_correct,
               l.nsp_count);
    else
        printf(", %ld targets\n", l.lm_count);
    CHECK(first.loss > 3.0);
    CHECK(l.loss < 0.05);
    if (arch == CZ_ARCH_BERT) {
        CHECK(l.mlm_count == B * (P - 1) && l.mlm_correct == l.mlm_count);
        CHECK(l.nsp_count == B && l.nsp_correct == B);
    }
    free(mo);
    free(ve);
    cz_model_free(m);
}

int main(void) {
    cz_error err;
    cz_gemm_ctx *gemm = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    CHECK(gemm);
    overfit(CZ_ARCH_BERT, "bert", gemm);
    overfit(CZ_ARCH_GPT, "gpt", gemm);
    cz_gemm_free(gemm);
    printf("ok\n");
    return 0;
}
