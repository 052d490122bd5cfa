/* infer: the GPT decoder with a key-value cache, and generation on it
 * (infer.h). The model's tensors are found by name once; every step reads
 * them where the model keeps them. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "cloze/infer.h"
#include "cloze/rng.h"

typedef struct dec_layer {
    const float *ln1_g, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_g, *ln2_b;
    const float *fc_w, *fc_b, *out_w, *out_b;
} dec_layer;

struct cz_decoder {
    cz_model *m;
    const cz_gemm_ctx *g;
    cz_model_config c;
    int batch, max_len, len;
    dec_layer *ly;
    const float *wte, *wpe, *lnf_g, *lnf_b; /* lnf: pre-LN only */
    float *kc, *vc;                         /* [L][batch][max_len][H] */
    /* scratch for batch * max_len rows */
    float *x, *xn, *qkv, *ctx, *tmp, *u, *gl, *mean, *rstd;
    float *scores; /* [threads][max_len]; prompt blocks: [max_len][max_len] */
    int threads;
    float *last, *logits; /* [batch, H], [batch, vocab_size] */
};

static const float *find(cz_model *m, const char *name, size_t numel, cz_error *err) {
    const cz_tensor_info *t = cz_model_find_tensor(m, name);
    if (!t) {
        cz_fail(err, "the model has no tensor %s", name);
        return NULL;
    }
    if (numel && t->numel != numel) {
        cz_fail(err, "tensor %s has %zu elements, expected %zu", name, t->numel, numel);
        return NULL;
    }
    return cz_model_params(m) + t->offset;
}

static int find_layer(cz_model *m, int l, dec_layer *d, cz_error *err) {
    const cz_model_config *c = cz_model_get_config(m);
    size_t h = (size_t)c->hidden, in = (size_t)c->intermediate;
    struct {
        const float **p;
        const char *name;
        size_t numel;
    } t[] = {{&d->ln1_g, "ln_1.weight", h},
             {&d->ln1_b, "ln_1.bias", h},
             {&d->qkv_w, "attn.c_attn.weight", 3 * h * h},
             {&d->qkv_b, "attn.c_attn.bias", 3 * h},
             {&d->proj_w, "attn.c_proj.weight", h * h},
             {&d->proj_b, "attn.c_proj.bias", h},
             {&d->ln2_g, "ln_2.weight", h},
             {&d->ln2_b, "ln_2.bias", h},
             {&d->fc_w, "mlp.c_fc.weight", h * in},
             {&d->fc_b, "mlp.c_fc.bias", in},
             {&d->out_w, "mlp.c_proj.weight", in * h},
             {&d->out_b, "mlp.c_proj.bias", h}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "transformer.h.%d.%s", l, t[i].name);
        if (!(*t[i].p = find(m, name, t[i].numel, err))) return -1;
    }
    return 0;
}

void cz_decoder_free(cz_decoder *d) {
    if (!d) return;
    float *bufs[] = {d->kc, d->vc, d->x,    d->xn,   d->qkv,    d->ctx,  d->tmp,
                     d->u,  d->gl, d->mean, d->rstd, d->scores, d->last, d->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cz_free(bufs[i]);
    cz_free(d->ly);
    cz_free(d);
}

int cz_decoder_create(cz_decoder **out, cz_model *m, int batch, int max_len, const cz_gemm_ctx *g,
                      cz_error *err) {
    *out = NULL;
    const cz_model_config *c = cz_model_get_config(m);
    if (c->arch != CZ_ARCH_GPT)
        return cz_fail(err,
                       "text generation needs a GPT model (model.arch = gpt), this one is BERT");
    if (c->head != CZ_HEAD_PRETRAIN)
        return cz_fail(err, "text generation needs a GPT with its language-model head (a "
                            "pre-training checkpoint), this one has a fine-tuning head");
    if (batch < 1 || max_len < 1 || max_len > c->max_positions)
        return cz_fail(err,
                       "generation of %d position(s) in batches of %d: the model has %d "
                       "positions (model.max_positions)",
                       max_len, batch, c->max_positions);
    cz_decoder *d = cz_alloc(sizeof *d, err);
    if (!d) return -1;
    d->m = m;
    d->g = g;
    d->c = *c;
    d->batch = batch;
    d->max_len = max_len;
    size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, L = (size_t)c->layers;
    size_t V = (size_t)c->vocab_size, R = (size_t)batch * (size_t)max_len;
    int pre = c->layout == CZ_LAYOUT_PRE_LN;
    d->ly = cz_alloc(L * sizeof *d->ly, err);
    if (!d->ly) goto fail;
    for (int l = 0; l < c->layers; l++)
        if (find_layer(m, l, &d->ly[l], err)) goto fail;
    if (!(d->wte = find(m, pre ? "transformer.wte.weight" : "transformer.tokens_embed.weight", 0,
                        err)) ||
        !(d->wpe = find(m, pre ? "transformer.wpe.weight" : "transformer.positions_embed.weight",
                        (size_t)c->max_positions * H, err)))
        goto fail;
    if (pre && (!(d->lnf_g = find(m, "transformer.ln_f.weight", H, err)) ||
                !(d->lnf_b = find(m, "transformer.ln_f.bias", H, err))))
        goto fail;
    d->threads = omp_get_max_threads();
    size_t sc = (size_t)max_len * (size_t)(max_len > d->threads ? max_len : d->threads);
    struct {
        float **p;
        size_t n;
    } a[] = {{&d->kc, L * R * H},
             {&d->vc, L * R * H},
             {&d->x, R * H},
             {&d->xn, R * H},
             {&d->qkv, R * 3 * H},
             {&d->ctx, R * H},
             {&d->tmp, R * H},
             {&d->u, R * I},
             {&d->gl, R * I},
             {&d->mean, R},
             {&d->rstd, R},
             {&d->scores, sc},
             {&d->last, (size_t)batch * H},
             {&d->logits, (size_t)batch * V}};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if (!(*a[i].p = cz_alloc(a[i].n * sizeof(float), err))) {
            cz_fail_prefix(err, "generation buffers for %d x %d positions", batch, max_len);
            goto fail;
        }
    *out = d;
    return 0;
fail:
    cz_decoder_free(d);
    return -1;
}

void cz_decoder_reset(cz_decoder *d) {
    d->len = 0;
}
int cz_decoder_len(const cz_decoder *d) {
    return d->len;
}

/* Up to this many rows a product streams the weight once (cz_skinny_gemm):
 * a decoding step's rows are its batch, and a GEMM library would pack the
 * whole weight for them (docs/performance.md, "Text generation"). */
#define SKINNY_MAX_ROWS 16

/* y[rows, out] = x[rows, in] W[in, out] (+ b; NULL = none): GPT's Conv1D,
 * weight stored [in, out] */
static void conv1d(const cz_decoder *d, float *y, const float *x, const float *w, const float *b,
                   int rows, int in, int out) {
    if (rows <= SKINNY_MAX_ROWS) {
        int was = omp_get_max_threads();
        omp_set_num_threads(d->threads);
        cz_skinny_gemm(y, x, rows, w, 0, in, out, b);
        omp_set_num_threads(was);
        return;
    }
    cz_gemm(d->g, 0, 0, rows, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
    if (b) cz_add_bias(y, b, rows, out, out);
}

/* Attention of the n new positions of every sequence over the cache of
 * layer l, which already holds their keys and values: ctx[b*n + i, head]
 * = softmax_j<=len+i(q . k_j / sqrt(d)) v_j. One new position (decoding):
 * plain loops over (sequence, head) pairs in parallel; a block (the
 * prompt): two products per pair. */
static void attention(cz_decoder *d, int l, int n) {
    int H = d->c.hidden, A = d->c.heads, hd = H / A, T = d->len + n;
    float scale = 1.0f / sqrtf((float)hd);
    size_t lay = (size_t)l * d->batch * d->max_len * H;
    if (n == 1) {
        /* threads only where there is work for them: each parallel region
         * costs a wake-up and a barrier, which on a busy machine can wait for
         * a time slice (docs/performance.md, "Text generation") */
        int parallel = (long)d->batch * A * T * hd >= (1L << 18);
#pragma omp parallel for schedule(static) if (parallel) num_threads(d->threads)
        for (int pair = 0; pair < d->batch * A; pair++) {
            int b = pair / A, h = pair % A;
            float *s = d->scores + (size_t)omp_get_thread_num() * d->max_len;
            const float *q = d->qkv + (size_t)b * 3 * H + h * hd;
            const float *k = d->kc + lay + (size_t)b * d->max_len * H + h * hd;
            const float *v = d->vc + lay + (size_t)b * d->max_len * H + h * hd;
            float mx = -INFINITY;
            for (int j = 0; j < T; j++) {
                float dot = 0;
                for (int e = 0; e < hd; e++) dot += q[e] * k[(size_t)j * H + e];
                s[j] = dot * scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            float sum = 0;
            for (int j = 0; j < T; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            float *o = d->ctx + (size_t)b * H + h * hd;
            for (int e = 0; e < hd; e++) o[e] = 0;
            for (int j = 0; j < T; j++) {
                float p = s[j] / sum;
                for (int e = 0; e < hd; e++) o[e] += p * v[(size_t)j * H + e];
            }
        }
        return;
    }
    for (int b = 0; b < d->batch; b++)
        for (int h = 0; h < A; h++) {
            const float *q = d->qkv + (size_t)b * n * 3 * H + h * hd;
            const float *k = d->kc + lay + (size_t)b * d->max_len * H + h * hd;
            const float *v = d->vc + lay + (size_t)b * d->max_len * H + h * hd;
            float *s = d->scores; /* [n, T] */
            cz_gemm(d->g, 0, 1, n, T, hd, scale, q, 3 * H, k, H, 0.0f, s, T);
#pragma omp parallel for schedule(static)
            for (int i = 0; i < n; i++) { /* causal: keys j <= len + i */
                float *r = s + (size_t)i * T, mx = -INFINITY, sum = 0;
                int keys = d->len + i + 1;
                for (int j = 0; j < keys; j++) mx = r[j] > mx ? r[j] : mx;
                for (int j = 0; j < keys; j++) {
                    r[j] = expf(r[j] - mx);
                    sum += r[j];
                }
                for (int j = 0; j < keys; j++) r[j] /= sum;
                for (int j = keys; j < T; j++) r[j] = 0;
            }
            cz_gemm(d->g, 0, 0, n, hd, T, 1.0f, s, T, v, H, 0.0f,
                    d->ctx + (size_t)b * n * H + h * hd, H);
        }
}

int cz_decoder_step(cz_decoder *d, const int32_t *tokens, int n, const float **logits,
                    cz_error *err) {
    const cz_model_config *c = &d->c;
    int H = c->hidden, I = c->intermediate, B = d->batch, rows = B * n;
    int pre = c->layout == CZ_LAYOUT_PRE_LN;
    float eps = c->layer_norm_eps;
    if (n < 1 || d->len + n > d->max_len)
        return cz_fail(err, "%d more position(s) after %d: the generation has room for %d", n,
                       d->len, d->max_len);
    for (int r = 0; r < rows; r++)
        if (tokens[r] < 0 || tokens[r] >= c->vocab_size)
            return cz_fail(err, "token id %d is outside the vocabulary [0, %d)", tokens[r],
                           c->vocab_size);
    /* x = wte[token] + wpe[position] (GPT-1 Sec. 3.1, h_0 = U W_e + W_p) */
    for (int r = 0; r < rows; r++) {
        const float *e = d->wte + (size_t)tokens[r] * H;
        const float *p = d->wpe + (size_t)(d->len + r % n) * H;
        float *x = d->x + (size_t)r * H;
        for (int i = 0; i < H; i++) x[i] = e[i] + p[i];
    }
    /* A step of a few rows runs its elementwise kernels on one thread (the
     * products keep every thread, conv1d): a parallel region over a few rows
     * costs more in wake-ups and barriers than it saves, and on a busy
     * machine a barrier can wait for a time slice */
    if (rows <= SKINNY_MAX_ROWS) omp_set_num_threads(1);
    for (int l = 0; l < c->layers; l++) {
        const dec_layer *w = &d->ly[l];
        size_t lay = (size_t)l * B * d->max_len * H;
        /* pre-LN: attention reads LN1(x); post-LN: x itself */
        if (pre)
            cz_layernorm_forward(d->xn, d->mean, d->rstd, d->x, w->ln1_g, w->ln1_b, rows, H, eps);
        conv1d(d, d->qkv, pre ? d->xn : d->x, w->qkv_w, w->qkv_b, rows, H, 3 * H);
        for (int r = 0; r < rows; r++) { /* keys and values into the cache */
            int b = r / n, pos = d->len + r % n;
            size_t at = lay + ((size_t)b * d->max_len + pos) * H;
            memcpy(d->kc + at, d->qkv + (size_t)r * 3 * H + H, (size_t)H * sizeof(float));
            memcpy(d->vc + at, d->qkv + (size_t)r * 3 * H + 2 * H, (size_t)H * sizeof(float));
        }
        attention(d, l, n);
        conv1d(d, d->tmp, d->ctx, w->proj_w, w->proj_b, rows, H, H);
        if (pre) { /* x += attn; x += MLP(LN2(x)) */
            for (size_t i = 0; i < (size_t)rows * H; i++) d->x[i] += d->tmp[i];
            cz_layernorm_forward(d->xn, d->mean, d->rstd, d->x, w->ln2_g, w->ln2_b, rows, H, eps);
            conv1d(d, d->u, d->xn, w->fc_w, NULL, rows, H, I);
            cz_bias_gelu_forward(d->gl, d->u, w->fc_b, rows, I, c->gelu_tanh);
            conv1d(d, d->tmp, d->gl, w->out_w, w->out_b, rows, I, H);
            for (size_t i = 0; i < (size_t)rows * H; i++) d->x[i] += d->tmp[i];
        } else { /* h = LN1(x + attn); x = LN2(h + MLP(h)) */
            cz_add_layernorm_forward(d->xn, d->ctx, d->mean, d->rstd, d->x, d->tmp, w->ln1_g,
                                     w->ln1_b, rows, H, eps);
            conv1d(d, d->u, d->xn, w->fc_w, NULL, rows, H, I);
            cz_bias_gelu_forward(d->gl, d->u, w->fc_b, rows, I, c->gelu_tanh);
            conv1d(d, d->tmp, d->gl, w->out_w, w->out_b, rows, I, H);
            cz_add_layernorm_forward(d->x, d->ctx, d->mean, d->rstd, d->xn, d->tmp, w->ln2_g,
                                     w->ln2_b, rows, H, eps);
        }
    }
    /* the last new position of each sequence; pre-LN: through ln_f */
    for (int b = 0; b < B; b++)
        memcpy(d->last + (size_t)b * H, d->x + ((size_t)b * n + n - 1) * H,
               (size_t)H * sizeof(float));
    if (pre) {
        cz_layernorm_forward(d->xn, d->mean, d->rstd, d->last, d->lnf_g, d->lnf_b, B, H, eps);
        memcpy(d->last, d->xn, (size_t)B * H * sizeof(float));
    }
    omp_set_num_threads(d->threads);
    /* the tied head: logits = x wte^T over the real vocabulary rows */
    if (B <= SKINNY_MAX_ROWS)
        cz_skinny_gemm(d->logits, d->last, B, d->wte, 1, H, c->vocab_size, NULL);
    else
        cz_gemm(d->g, 0, 1, B, c->vocab_size, H, 1.0f, d->last, H, d->wte, H, 0.0f, d->logits,
                c->vocab_size);
    d->len += n;
    *logits = d->logits;
    return 0;
}

int cz_generate(cz_decoder *d, const int32_t *prompt, int n, const cz_generate_params *p,
                int32_t **out, int *lens, cz_token_fn fn, void *ctx, cz_error *err) {
    int B = d->batch, V = d->c.vocab_size;
    if (n < 1) return cz_fail(err, "an empty prompt: generation needs at least one token");
    if (n >= d->max_len)
        return cz_fail(err,
                       "the prompt has %d tokens, the generation room is %d positions "
                       "(model.max_positions %d): shorten the prompt",
                       n, d->max_len, d->c.max_positions);
    cz_sampler s;
    if (cz_sampler_init(&s, V, err)) return -1;
    int32_t *step_in = cz_alloc((size_t)B * d->max_len * sizeof *step_in, err);
    int *done = cz_alloc((size_t)B * sizeof *done, err);
    int rc = step_in && done ? 0 : -1;
    for (int b = 0; b < B; b++) {
        memcpy(out[b], prompt, (size_t)n * sizeof *prompt);
        lens[b] = n;
    }
    cz_decoder_reset(d);
    int total = n + (p->max_new_tokens < d->max_len - n ? p->max_new_tokens : d->max_len - n);
    /* step k feeds the prompt (k = 0) or the last new token; without the
     * cache, the whole prefix again */
    for (int len = n; rc == 0 && len < total; len++) {
        const float *logits;
        int feed_from = p->no_cache || len == n ? 0 : len - 1, m = len - feed_from;
        if (p->no_cache) cz_decoder_reset(d);
        for (int b = 0; b < B; b++)
            memcpy(step_in + (size_t)b * m, out[b] + feed_from, (size_t)m * sizeof *step_in);
        if (cz_decoder_step(d, step_in, m, &logits, err)) {
            rc = -1;
            break;
        }
        int all_done = 1;
        for (int b = 0; b < B; b++) {
            if (done[b]) {
                out[b][len] = out[b][len - 1]; /* keeps the batch's positions aligned */
                continue;
            }
            cz_rng_stream st = cz_rng_stream_make(p->seed, CZ_RNG_GENERATE, (uint64_t)b, 0, 0);
            double u = cz_rng_uniform_double(&st, (uint64_t)(len - n));
            int32_t t = cz_sample_token(&s, logits + (size_t)b * V, &p->sample, u, NULL);
            out[b][len] = t;
            lens[b] = len + 1;
            if (p->eos_id >= 0 && t == p->eos_id) done[b] = 1;
            if (fn && fn(ctx, b, out[b], lens[b])) {
                rc = cz_fail(err, "generation stopped by its caller");
                break;
            }
            all_done &= done[b];
        }
        if (all_done) break;
    }
    cz_free(step_in);
    cz_free(done);
    cz_sampler_free(&s);
    return rc;
}
