/* infer (include/cloze/infer.h): the sampler on planted distributions, and
 * generation on cloze's own GPT models (both layouts, random weights):
 * the key-value cache gives the tokens of recomputing the whole prefix at
 * every step, a seed repeats a sample, temperature 0 is greedy, an
 * end-of-text id stops a sequence right after it; a BERT is
 * refused by the decoder and a GPT by fill-mask. transformers' generate()
 * and BertForMaskedLM are the references of tests/scripts/test_generate_hf.sh. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "cloze/infer.h"

enum { V = 1000, DRAWS = 4000 };

/* The planted distribution: p(7) = .4, p(3) = .25, p(900) = .15, p(11) =
 * .1, p(500) = .05, the other 995 tokens share .05. */
static void planted(float *logits) {
    for (int t = 0; t < V; t++) logits[t] = logf(0.05f / (V - 5));
    logits[7] = logf(0.4f);
    logits[3] = logf(0.25f);
    logits[900] = logf(0.15f);
    logits[11] = logf(0.1f);
    logits[500] = logf(0.05f);
}

/* DRAWS stratified draws u = (i + 1/2) / DRAWS: each token's count is
 * DRAWS x its renormalised probability within 1 (the inverse of the
 * cumulative sum), so frequencies are checked exactly, not statistically. */
static void draw(cz_sampler *s, const float *logits, cz_sample_params p, int *count, int *kept) {
    memset(count, 0, V * sizeof *count);
    for (int i = 0; i < DRAWS; i++) {
        int32_t t = cz_sample_token(s, logits, &p, (i + 0.5) / DRAWS, kept);
        count[t]++;
    }
}

/* Only the tokens `allowed` (n of them) were drawn, each with probability
 * want[k] (renormalised) within 2 draws. */
static void expect(const char *what, const int *count, const int32_t *allowed, const double *want,
                   int n) {
    int inside = 0;
    for (int k = 0; k < n; k++) {
        inside += count[allowed[k]];
        CHECK(fabs(count[allowed[k]] - want[k] * DRAWS) <= 2.0,
              "%s: token %d drawn %d times, %.1f expected", what, allowed[k], count[allowed[k]],
              want[k] * DRAWS);
    }
    CHECK(inside == DRAWS, "%s: %d of %d draws outside the allowed set", what, DRAWS - inside,
          DRAWS);
}

static void test_sampler(void) {
    cz_error err;
    cz_sampler s;
    if (cz_sampler_init(&s, V, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    static float logits[V];
    static int count[V];
    int kept;
    planted(logits);
    /* greedy: temperature 0 and top-k 1, whatever u */
    for (double u = 0; u < 1; u += 0.125) {
        cz_sample_params g = {0.0f, 0, 1.0f}, k1 = {1.0f, 1, 1.0f};
        CHECK(cz_sample_token(&s, logits, &g, u, &kept) == 7 && kept == 1,
              "temperature 0: not the argmax");
        CHECK(cz_sample_token(&s, logits, &k1, u, NULL) == 7, "top-k 1: not the argmax");
    }
    /* top-k 3: {7, 3, 900} renormalised over their .8 */
    draw(&s, logits, (cz_sample_params){1.0f, 3, 1.0f}, count, &kept);
    expect("top-k 3", count, (int32_t[]){7, 3, 900}, (double[]){.5, .3125, .1875}, 3);
    CHECK(kept == 3, "top-k 3 kept %d", kept);
    /* top-p .7: .4 + .25 = .65 < .7, with 900: .8 >= .7 */
    draw(&s, logits, (cz_sample_params){1.0f, 0, 0.7f}, count, &kept);
    expect("top-p 0.7", count, (int32_t[]){7, 3, 900}, (double[]){.5, .3125, .1875}, 3);
    /* top-p .6 keeps two */
    draw(&s, logits, (cz_sample_params){1.0f, 0, 0.6f}, count, &kept);
    expect("top-p 0.6", count, (int32_t[]){7, 3}, (double[]){.4 / .65, .25 / .65}, 2);
    /* top-k 4 then top-p .7 of what is left (.9): .63 is reached by {7, 3} */
    draw(&s, logits, (cz_sample_params){1.0f, 4, 0.7f}, count, &kept);
    expect("top-k 4 + top-p 0.7", count, (int32_t[]){7, 3}, (double[]){.4 / .65, .25 / .65}, 2);
    /* temperature 0.5 squares the probabilities (then renormalised) */
    draw(&s, logits, (cz_sample_params){0.5f, 2, 1.0f}, count, &kept);
    expect("temperature 0.5, top-k 2", count, (int32_t[]){7, 3},
           (double[]){.16 / (.16 + .0625), .0625 / (.16 + .0625)}, 2);
    /* no filter: every token can come, the rare ones too */
    draw(&s, logits, (cz_sample_params){1.0f, 0, 1.0f}, count, &kept);
    CHECK(kept == V, "no filter kept %d of %d", kept, V);
    CHECK(fabs(count[7] - 0.4 * DRAWS) <= 2.0, "no filter: token 7 drawn %d times", count[7]);
    /* ties: the lower id first (greedy, and top-k at the boundary) */
    for (int t = 0; t < V; t++) logits[t] = 0.0f;
    logits[42] = logits[17] = 1.0f;
    cz_sample_params g = {0.0f, 0, 1.0f};
    CHECK(cz_sample_token(&s, logits, &g, 0.5, NULL) == 17, "greedy tie: not the lower id");
    draw(&s, logits, (cz_sample_params){1.0f, 3, 1.0f}, count, &kept);
    CHECK(count[17] + count[42] + count[0] == DRAWS && count[0] > 0,
          "top-k 3 over a tie of zeros: not tokens 17, 42 and 0");
    cz_sampler_free(&s);
}

static cz_model *gpt(int layout, cz_error *err) {
    cz_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = CZ_ARCH_GPT;
    c.layout = layout;
    c.vocab_size = 97;
    c.vocab_pad_to = 64;
    c.hidden = 32;
    c.layers = 2;
    c.heads = 4;
    c.intermediate = 128;
    c.max_positions = 48;
    c.layer_norm_eps = 1e-5f;
    c.gelu_tanh = 1;
    c.init_range = 0.3f; /* not 0.02: logits far from uniform, so greedy varies */
    cz_model *m = NULL;
    if (cz_model_create(&m, &c, 1, 1, 1, NULL, err)) return NULL;
    cz_model_init_weights(m, 11 + layout);
    return m;
}

static void test_generation(int layout, cz_gemm_ctx *g) {
    cz_error err;
    const char *name = layout ? "pre_ln" : "post_ln";
    cz_model *m = gpt(layout, &err);
    cz_decoder *d = NULL;
    if (!m || cz_decoder_create(&d, m, 3, 40, g, &err)) {
        CHECK(0, "%s: %s", name, err.msg);
        cz_model_free(m);
        return;
    }
    int32_t prompt[5] = {5, 17, 90, 42, 3};
    int32_t buf[4][3][40];
    int32_t *out[4][3];
    int lens[4][3];
    for (int r = 0; r < 4; r++)
        for (int b = 0; b < 3; b++) out[r][b] = buf[r][b];
    /* r = 0: cached, 1: recomputed, 2: cached again, 3: another seed */
    cz_generate_params p = {30, {1.0f, 0, 1.0f}, 1234, -1, 0};
    for (int r = 0; r < 4; r++) {
        p.no_cache = r == 1;
        p.seed = r == 3 ? 99 : 1234;
        if (cz_generate(d, prompt, 5, &p, out[r], lens[r], NULL, NULL, &err)) {
            CHECK(0, "%s: %s", name, err.msg);
            goto done;
        }
    }
    for (int b = 0; b < 3; b++) {
        CHECK(lens[0][b] == 35, "%s: sequence %d has %d tokens", name, b, lens[0][b]);
        CHECK(!memcmp(buf[0][b], buf[1][b], 35 * sizeof(int32_t)),
              "%s: sampled sequence %d with the cache differs from recomputing the prefix", name,
              b);
        CHECK(!memcmp(buf[0][b], buf[2][b], 35 * sizeof(int32_t)),
              "%s: sequence %d differs between two runs with the same seed", name, b);
    }
    CHECK(memcmp(buf[0][0], buf[0][1], 35 * sizeof(int32_t)),
          "%s: the batch's sequences are the same sample", name);
    CHECK(memcmp(buf[0][0], buf[3][0], 35 * sizeof(int32_t)), "%s: another seed, the same sample",
          name);
    /* greedy, with and without the cache, and temperature 0 = top-k 1 */
    cz_generate_params gp = {30, {0.0f, 0, 1.0f}, 5, -1, 0};
    cz_generate(d, prompt, 5, &gp, out[0], lens[0], NULL, NULL, &err);
    gp.no_cache = 1;
    cz_generate(d, prompt, 5, &gp, out[1], lens[1], NULL, NULL, &err);
    gp.no_cache = 0;
    gp.sample = (cz_sample_params){1.0f, 1, 1.0f};
    cz_generate(d, prompt, 5, &gp, out[2], lens[2], NULL, NULL, &err);
    int distinct = 0;
    for (int i = 5; i < 35; i++) {
        int seen = 0;
        for (int j = 5; j < i; j++) seen |= buf[0][0][j] == buf[0][0][i];
        distinct += !seen;
    }
    CHECK(distinct >= 3, "%s: the greedy continuation has %d distinct tokens", name, distinct);
    CHECK(!memcmp(buf[0][0], buf[1][0], 35 * sizeof(int32_t)),
          "%s: greedy with the cache differs from recomputing the prefix", name);
    CHECK(!memcmp(buf[0][0], buf[2][0], 35 * sizeof(int32_t)), "%s: temperature 0 != top-k 1",
          name);
    CHECK(!memcmp(buf[0][0], buf[0][2], 35 * sizeof(int32_t)),
          "%s: greedy sequences of one batch differ", name);
    /* an end-of-text id stops a sequence right after it: the greedy
     * continuation's 8th new token taken as the end of text */
    int32_t eos = buf[0][0][12];
    int first = 5;
    while (buf[0][0][first] != eos) first++;
    gp = (cz_generate_params){30, {0.0f, 0, 1.0f}, 5, eos, 0};
    cz_generate(d, prompt, 5, &gp, out[1], lens[1], NULL, NULL, &err);
    CHECK(lens[1][0] == first + 1 && buf[1][0][first] == eos,
          "%s: end-of-text id %d (first at %d): the sequence has %d tokens", name, eos, first,
          lens[1][0]);
    /* the logits too: one position at a time against the prefix at once */
    const float *lg;
    static float inc[97];
    cz_decoder_reset(d);
    int32_t three[3 * 35];
    for (int i = 0; i < 35; i++) {
        for (int b = 0; b < 3; b++) three[b] = buf[0][0][i];
        cz_decoder_step(d, three, 1, &lg, &err);
    }
    memcpy(inc, lg, sizeof inc);
    cz_decoder_reset(d);
    for (int b = 0; b < 3; b++) memcpy(three + b * 35, buf[0][0], 35 * sizeof(int32_t));
    cz_decoder_step(d, three, 35, &lg, &err);
    float worst = 0;
    for (int t = 0; t < 97; t++) worst = fmaxf(worst, fabsf(inc[t] - lg[t]));
    CHECK(worst < 1e-4f, "%s: logits after 35 single steps differ from one block by %g", name,
          worst);
    /* room: a prompt as long as the decoder's room is refused */
    int32_t longp[40] = {0};
    CHECK(cz_generate(d, longp, 40, &p, out[0], lens[0], NULL, NULL, &err) != 0 &&
              strstr(err.msg, "prompt"),
          "%s: a prompt of 40 tokens in 40 positions was not refused", name);
    CHECK(cz_decoder_step(d, (int32_t[]){97, 97, 97}, 1, &lg, &err) != 0 && strstr(err.msg, "97"),
          "%s: token id 97 of a 97-token vocabulary was not refused", name);
    /* a GPT given to fill-mask */
    cz_fill_result fr;
    CHECK(cz_fill_mask(m, g, prompt, 5, 3, 5, &fr, 1, &err) < 0 && strstr(err.msg, "BERT"),
          "%s: fill-mask accepted a GPT", name);
done:
    cz_decoder_free(d);
    cz_model_free(m);
}

static void test_bert_refused(cz_gemm_ctx *g) {
    cz_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = CZ_ARCH_BERT;
    c.vocab_size = 50;
    c.hidden = 16;
    c.layers = 1;
    c.heads = 2;
    c.intermediate = 32;
    c.max_positions = 16;
    c.type_vocab_size = 2;
    c.layer_norm_eps = 1e-12f;
    cz_error err;
    cz_model *m = NULL;
    cz_decoder *d = NULL;
    if (cz_model_create(&m, &c, 1, 8, 2, NULL, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    CHECK(cz_decoder_create(&d, m, 1, 8, g, &err) != 0 && strstr(err.msg, "GPT"),
          "the decoder accepted a BERT");
    cz_decoder_free(d);
    cz_model_free(m);
}

int main(void) {
    cz_error err;
    cz_gemm_ctx *g = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    if (!g) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    test_sampler();
    test_generation(CZ_LAYOUT_POST_LN, g);
    test_generation(CZ_LAYOUT_PRE_LN, g);
    test_bert_refused(g);
    cz_gemm_free(g);
    return check_finish(NULL);
}
