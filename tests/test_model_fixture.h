/* Shared by the model tests: tiny configurations and synthetic batches. */
#ifndef CLOZE_TEST_MODEL_FIXTURE_H
#define CLOZE_TEST_MODEL_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/model.h"
#include "cloze/rng.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Moves the no-decay parameters (LayerNorm gains and biases, every bias)
 * away from their 1 / 0 initialisation by scale * N(0, 1), one Philox
 * stream per tensor keyed by (seed, k, sub), so that their gradient paths
 * count in a test. */
static inline void perturb_no_decay(cz_model *m, uint64_t seed, uint64_t sub, float scale) {
    for (int k = 0; k < cz_model_num_tensors(m); k++) {
        const cz_tensor_info *t = cz_model_tensor(m, k);
        if (!t->no_decay) continue;
        cz_rng_stream r = cz_rng_stream_make(seed, CZ_RNG_TEST, (uint64_t)k, sub, 0);
        for (size_t i = 0; i < t->numel; i++)
            cz_model_params(m)[t->offset + i] += scale * (float)cz_rng_normal(&r, i);
    }
}

static inline double max_abs(const float *a, size_t n) {
    double mx = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i]) > mx) mx = fabs(a[i]);
    return mx;
}

static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double mx = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > mx) mx = fabs((double)a[i] - b[i]);
    return mx;
}

static inline cz_model_config tiny_config(cz_arch arch, int vocab, int hidden, int layers,
                                          int heads, int positions) {
    cz_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.vocab_size = vocab;
    c.hidden = hidden;
    c.layers = layers;
    c.heads = heads;
    c.intermediate = 4 * hidden;
    c.max_positions = positions;
    c.type_vocab_size = arch == CZ_ARCH_BERT ? 2 : 0;
    c.layer_norm_eps = arch == CZ_ARCH_BERT ? 1e-12f : 1e-5f;
    c.gelu_tanh = arch == CZ_ARCH_GPT;
    c.hidden_dropout = 0.1f;
    c.attn_dropout = 0.1f;
    c.init_range = 0.02f;
    return c;
}

/* Storage of one synthetic batch. */
typedef struct test_batch {
    int32_t tokens[4096], segments[4096], targets[4096];
    uint8_t mask[4096];
    int32_t mlm_pos[1024], mlm_lab[1024], nsp[64];
    float mlm_w[1024];
    uint64_t ids[64];
    cz_batch b;
} test_batch;

/* B sequences of T tokens; sequence s has its last `pad` tokens padded when
 * s is odd; BERT: P slots per sequence, the last one unused (weight 0), so
 * every sequence has P-1 real slots. GPT: next-token targets, -1 at the end
 * and on padding. Contents are a function of (seed, sample id) only, so a
 * sequence is the same whichever batch it sits in. */
static inline void make_batch(test_batch *tb, const cz_model_config *c, int B, int T, int P,
                              int pad, const uint64_t *sample_ids, uint64_t seed) {
    memset(tb, 0, sizeof *tb);
    for (int s = 0; s < B; s++) {
        uint64_t id = sample_ids ? sample_ids[s] : (uint64_t)s;
        tb->ids[s] = id;
        cz_rng_stream r = cz_rng_stream_make(seed, CZ_RNG_TEST, id, 0, 0);
        int len = (id % 2) ? T - pad : T;
        for (int t = 0; t < T; t++) {
            int i = s * T + t;
            tb->tokens[i] = (int32_t)cz_rng_below(&r, 2 * (uint64_t)t, (uint64_t)c->vocab_size);
            tb->segments[i] = t >= T / 2;
            tb->mask[i] = t < len;
        }
        for (int t = 0; t < T; t++) {
            int i = s * T + t;
            tb->targets[i] = (t + 1 < len) ? tb->tokens[i + 1] : -1;
        }
        for (int p = 0; p < P; p++) {
            int k = s * P + p;
            tb->mlm_pos[k] = 1 + (int)((p * 3 + id) % (uint64_t)(len - 1));
            tb->mlm_lab[k] =
                (int32_t)cz_rng_below(&r, 1000 + 2 * (uint64_t)p, (uint64_t)c->vocab_size);
            tb->mlm_w[k] = p < P - 1 ? 1.0f : 0.0f;
        }
        tb->nsp[s] = (int32_t)(id % 2);
    }
    cz_batch *b = &tb->b;
    b->batch = B;
    b->seq = T;
    b->tokens = tb->tokens;
    b->attn_mask = tb->mask;
    if (c->arch == CZ_ARCH_BERT) {
        b->segments = tb->segments;
        b->max_pred = P;
        b->mlm_positions = tb->mlm_pos;
        b->mlm_labels = tb->mlm_lab;
        b->mlm_weights = tb->mlm_w;
        b->nsp_labels = tb->nsp;
    } else {
        b->targets = tb->targets;
    }
    b->train = 0;
    b->seed = 1234;
    b->step = 5;
    b->sample_ids = tb->ids;
}

static inline double loss_of(cz_model *m, const cz_batch *b) {
    cz_losses l;
    cz_error err;
    CHECK(cz_model_forward(m, b, &l, &err) == 0);
    return l.loss;
}

/* For each tensor: the derivative along d = g/|g| + r (r a random unit
 * vector inside the tensor) from central differences must match g . d.
 * The g/|g| part checks the size of g, the random part its direction. Float
 * forward: loss rounding ~1e-6 over 2h = 2e-2 gives ~5e-5 noise; truncation
 * error O(h^2). Tolerance 2e-4 + 2e-2 |g.d|. */
static inline void gradcheck(cz_model *m, const cz_batch *b, const char *label) {
    size_t np = cz_model_num_params(m);
    float *w = cz_model_params(m), *g = cz_model_grads(m);
    cz_losses l;
    cz_error err;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, b, &l, &err) == 0);
    cz_model_backward(m, b, 1.0f);
    float *gcopy = malloc(np * sizeof *gcopy), *dir = malloc(np * sizeof *dir);
    memcpy(gcopy, g, np * sizeof *g);
    double worst = 0;
    for (int k = 0; k < cz_model_num_tensors(m); k++) {
        const cz_tensor_info *t = cz_model_tensor(m, k);
        cz_rng_stream r = cz_rng_stream_make(99, CZ_RNG_TEST, (uint64_t)k, 0, 0);
        double gn = 0, rn = 0;
        for (size_t i = 0; i < t->numel; i++) {
            gn += (double)gcopy[t->offset + i] * gcopy[t->offset + i];
            dir[i] = (float)cz_rng_normal(&r, i);
            rn += (double)dir[i] * dir[i];
        }
        gn = sqrt(gn);
        rn = sqrt(rn);
        double ana = 0;
        for (size_t i = 0; i < t->numel; i++) {
            dir[i] = (float)(dir[i] / rn + (gn > 0 ? gcopy[t->offset + i] / gn : 0));
            ana += (double)dir[i] * gcopy[t->offset + i];
        }
        const float h = 1e-2f;
        for (size_t i = 0; i < t->numel; i++) w[t->offset + i] += h * dir[i];
        double lp = loss_of(m, b);
        for (size_t i = 0; i < t->numel; i++) w[t->offset + i] -= 2 * h * dir[i];
        double lm = loss_of(m, b);
        for (size_t i = 0; i < t->numel; i++) w[t->offset + i] += h * dir[i];
        double num = (lp - lm) / (2 * h);
        double diff = fabs(num - ana), tol = 2e-4 + 2e-2 * fabs(ana);
        if (diff / tol > worst) worst = diff / tol;
        if (diff > tol)
            fprintf(stderr, "%s: %s: |g| %.3g numeric %.6g analytic %.6g\n", label, t->name, gn,
                    num, ana);
        CHECK(diff <= tol);
    }
    printf("%s: %d tensors, worst error / tolerance %.3f, loss %.6f\n", label,
           cz_model_num_tensors(m), worst, l.loss);
    free(gcopy);
    free(dir);
}

#endif
