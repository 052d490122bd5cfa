/* Activation recomputation (model.recompute = layers) must not change a single
 * bit: same losses and same gradients as keeping every layer's activations,
 * for BERT and GPT, with dropout on, padded sequences, accumulated
 * micro-batches of different shapes, and 1 or 2 threads. The memory plan must
 * shrink from L sets of layer activations to one. */
#include <omp.h>

#include "test_model_fixture.h"

typedef struct hook_log {
    size_t offsets[256], counts[256];
    int calls;
} hook_log;

static void hook(void *ctx, size_t offset, size_t count) {
    hook_log *h = ctx;
    CHECK(h->calls < 256);
    h->offsets[h->calls] = offset;
    h->counts[h->calls] = count;
    h->calls++;
}

static cz_model *make(const cz_model_config *c, int recompute, const cz_gemm_ctx *gemm) {
    cz_model_config rc = *c;
    rc.recompute = recompute;
    cz_model *m;
    cz_error err;
    CHECK(cz_model_create(&m, &rc, 3, 12, 4, gemm, &err) == 0);
    cz_model_init_weights(m, 21);
    /* non-trivial LayerNorm and bias parameters */
    perturb_no_decay(m, 5, 1, 0.1f);
    return m;
}

/* Two micro-batches accumulated into the gradients: a full 3 x 12 one with
 * padding and a smaller 2 x 9 one; every loss bit and the hook's ranges are
 * recorded. */
static void step(cz_model *m, const cz_model_config *c, int train, cz_losses out[2], hook_log *hl) {
    static test_batch tb;
    cz_error err;
    uint64_t ids[2][3] = {{7, 2, 9}, {4, 11, 0}};
    int shape[2][3] = {{3, 12, 4}, {2, 9, 3}}; /* B, T, P */
    memset(hl, 0, sizeof *hl);
    cz_model_set_grad_hook(m, hook, hl);
    cz_model_zero_grads(m);
    for (int k = 0; k < 2; k++) {
        make_batch(&tb, c, shape[k][0], shape[k][1], shape[k][2], 3, ids[k], 40 + (uint64_t)k);
        tb.b.train = train;
        tb.b.step = 17 + (uint64_t)k;
        CHECK(cz_model_forward(m, &tb.b, &out[k], &err) == 0);
        cz_model_backward(m, &tb.b, 0.5f);
    }
    cz_model_set_grad_hook(m, NULL, NULL);
}

static void check_same_losses(const cz_losses *a, const cz_losses *b) {
    CHECK(memcmp(&a->loss, &b->loss, sizeof a->loss) == 0);
    CHECK(memcmp(&a->mlm_loss, &b->mlm_loss, sizeof a->mlm_loss) == 0);
    CHECK(memcmp(&a->nsp_loss, &b->nsp_loss, sizeof a->nsp_loss) == 0);
    CHECK(memcmp(&a->lm_loss, &b->lm_loss, sizeof a->lm_loss) == 0);
    CHECK(a->mlm_correct == b->mlm_correct && a->nsp_correct == b->nsp_correct);
    CHECK(a->mlm_count == b->mlm_count && a->lm_count == b->lm_count);
}

static void run(cz_model_config c, const char *label, cz_gemm_ctx *const gemms[2]) {
    size_t np;
    /* the reference: every activation kept, 1 thread */
    omp_set_num_threads(1);
    cz_model *ref = make(&c, CZ_RECOMPUTE_NONE, gemms[0]);
    np = cz_model_num_params(ref);
    float *want = malloc(np * sizeof *want), *eval = malloc(np * sizeof *eval);
    cz_losses lw[2], lg[2];
    hook_log hw, hg;
    step(ref, &c, 1, lw, &hw);
    memcpy(want, cz_model_grads(ref), np * sizeof *want);
    /* dropout is really on: without it the gradients differ */
    step(ref, &c, 0, lg, &hg);
    memcpy(eval, cz_model_grads(ref), np * sizeof *eval);
    CHECK(memcmp(want, eval, np * sizeof *want) != 0);

    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        cz_model *m = make(&c, CZ_RECOMPUTE_LAYERS, gemms[t]);
        CHECK(cz_model_num_params(m) == np);
        CHECK(memcmp(cz_model_params(m), cz_model_params(ref), np * sizeof(float)) == 0);
        step(m, &c, 1, lg, &hg);
        for (int k = 0; k < 2; k++) check_same_losses(&lw[k], &lg[k]);
        CHECK(memcmp(want, cz_model_grads(m), np * sizeof *want) == 0);
        /* the grad hook reports the same ranges in the same order */
        CHECK(hg.calls == hw.calls);
        for (int i = 0; i < hw.calls; i++)
            CHECK(hg.offsets[i] == hw.offsets[i] && hg.counts[i] == hw.counts[i]);
        /* evaluation-mode steps (no dropout) agree too */
        step(m, &c, 0, lg, &hg);
        CHECK(memcmp(eval, cz_model_grads(m), np * sizeof *eval) == 0);
        printf("%s: recompute, %d thread(s): losses and gradients bit-identical\n", label, t + 1);

        /* memory: one set of layer activations instead of L, all else equal */
        cz_model_memory a, b;
        cz_model_get_memory(ref, &a);
        cz_model_get_memory(m, &b);
        CHECK(a.layer_acts > 0 && a.layer_acts == b.layer_acts * (size_t)c.layers);
        CHECK(a.layer_inputs == b.layer_inputs && a.other == b.other && a.params == b.params);
        CHECK(a.params == 2 * np * sizeof(float));
        CHECK(b.activations == b.layer_inputs + b.layer_acts + b.other);
        CHECK(b.activations < a.activations);
        if (t == 0)
            printf("%s: planned activations %zu -> %zu bytes (layer activations %zu -> %zu)\n",
                   label, a.activations, b.activations, a.layer_acts, b.layer_acts);
        cz_model_free(m);
    }
    omp_set_num_threads(1);
    cz_model_free(ref);
    free(want);
    free(eval);
}

int main(void) {
    cz_error err;
    cz_gemm_ctx *gemms[2];
    for (int t = 0; t < 2; t++) {
        gemms[t] = cz_gemm_setup(CZ_GEMM_AUTO, t + 1, &err);
        CHECK(gemms[t]);
    }
    /* BERT-tiny / GPT-mini shapes scaled down: 3 layers, so that a layer's
     * backward would see another layer's activations if recomputation were
     * skipped or wrong */
    cz_model_config bert = tiny_config(CZ_ARCH_BERT, 60, 32, 3, 2, 16);
    bert.init_range = 0.2f; /* large weights: the nonlinearities are exercised */
    run(bert, "bert", gemms);
    cz_model_config gpt = tiny_config(CZ_ARCH_GPT, 60, 32, 3, 4, 16);
    gpt.init_range = 0.2f;
    run(gpt, "gpt", gemms);
    cz_model_config gpt2 = gpt; /* GPT-2's layout: the final LayerNorm after the last layer */
    gpt2.layout = CZ_LAYOUT_PRE_LN;
    gpt2.vocab_pad_to = 32;
    run(gpt2, "gpt pre_ln", gemms);

    /* a bad value is refused */
    cz_model_config bad = bert;
    bad.recompute = 2;
    cz_model *m;
    CHECK(cz_model_create(&m, &bad, 1, 8, 2, gemms[0], &err) == -1);
    CHECK(strstr(err.msg, "recompute"));
    for (int t = 0; t < 2; t++) cz_gemm_free(gemms[t]);
    printf("ok\n");
    return 0;
}
