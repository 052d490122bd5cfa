/* One training step (forward + backward) of a BERT or GPT model of a given
 * shape on a random batch: tokens/s, GFLOP/s (3 x cz_model_forward_flops per
 * sequence) and the per-phase profile (cz_model_profile).
 *
 *   bench-model_step_bench [--arch bert|gpt] [--layers L] [--hidden H]
 *       [--heads A] [--inter I] [--vocab V] [--seq T] [--batch B] [--pred P]
 *       [--threads N] [--steps N] [--gemm auto|blis|ref]
 *       [--recompute none|layers]
 *       [--precision fp32|bf16] [--bf16-inputs 1|0]
 *
 * The first step is a warm-up (page faults, BLIS buffers) and is not counted;
 * the step time is the median of the others. Dropout is on (0.1), as in
 * pre-training. --bf16-inputs 0 keeps the product inputs that kernels
 * write in bf16 in fp32 (cz_model_set_bf16_inputs), for A/B. Also prints the planned activation
 * bytes (cz_model_get_memory) and the process's peak resident memory (getrusage). */
#include <omp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/model.h"
#include "cloze/rng.h"

typedef struct options {
    cz_arch arch;
    int layers, hidden, heads, inter, vocab, seq, batch, pred, threads, steps;
    cz_gemm_choice gemm;
    int recompute;
    int bf16; /* --precision bf16: products through cz_gemm_set_bf16 */
    int bf16_inputs;
} options;

static int parse(options *o, int argc, char **argv) {
    *o = (options){CZ_ARCH_BERT,      4, 256, 4, 0, 30522, 128, 16, 20, 1, 5, CZ_GEMM_AUTO,
                   CZ_RECOMPUTE_NONE, 0, 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        int x = atoi(v);
        if (!strcmp(k, "--arch"))
            o->arch = strcmp(v, "gpt") ? CZ_ARCH_BERT : CZ_ARCH_GPT;
        else if (!strcmp(k, "--layers"))
            o->layers = x;
        else if (!strcmp(k, "--hidden"))
            o->hidden = x;
        else if (!strcmp(k, "--heads"))
            o->heads = x;
        else if (!strcmp(k, "--inter"))
            o->inter = x;
        else if (!strcmp(k, "--vocab"))
            o->vocab = x;
        else if (!strcmp(k, "--seq"))
            o->seq = x;
        else if (!strcmp(k, "--batch"))
            o->batch = x;
        else if (!strcmp(k, "--pred"))
            o->pred = x;
        else if (!strcmp(k, "--threads"))
            o->threads = x;
        else if (!strcmp(k, "--steps"))
            o->steps = x;
        else if (!strcmp(k, "--gemm"))
            o->gemm = !strcmp(v, "ref")    ? CZ_GEMM_REFERENCE
                      : !strcmp(v, "blis") ? CZ_GEMM_BLIS_DEFAULT
                                           : CZ_GEMM_AUTO;
        else if (!strcmp(k, "--recompute"))
            o->recompute = !strcmp(v, "layers") ? CZ_RECOMPUTE_LAYERS : CZ_RECOMPUTE_NONE;
        else if (!strcmp(k, "--precision"))
            o->bf16 = !strcmp(v, "bf16");
        else if (!strcmp(k, "--bf16-inputs"))
            o->bf16_inputs = x != 0;
        else {
            fprintf(stderr, "model_step_bench: unknown option %s\n", k);
            return -1;
        }
    }
    if (!o->inter) o->inter = 4 * o->hidden;
    if (o->pred > o->seq) o->pred = o->seq;
    if (o->steps < 1) o->steps = 1;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    options o;
    if (parse(&o, argc, argv)) return 2;
    omp_set_num_threads(o.threads);
    cz_error err = {0};
    cz_gemm_ctx *g = cz_model_gemm_setup(o.gemm, o.threads, o.bf16, &err);
    if (!g) {
        fprintf(stderr, "model_step_bench: %s\n", err.msg);
        return 1;
    }
    int bert = o.arch == CZ_ARCH_BERT;
    cz_model_config c = {o.arch,
                         o.vocab,
                         o.hidden,
                         o.layers,
                         o.heads,
                         o.inter,
                         512,
                         bert ? 2 : 0,
                         bert ? 1e-12f : 1e-5f,
                         !bert,
                         0.1f,
                         0.1f,
                         0.02f,
                         o.recompute,
                         o.bf16,
                         .head = CZ_HEAD_PRETRAIN};
    if (c.max_positions < o.seq) c.max_positions = o.seq;
    cz_model *m;
    if (cz_model_create(&m, &c, o.batch, o.seq, bert ? o.pred : 0, g, &err)) {
        fprintf(stderr, "model_step_bench: %s\n", err.msg);
        return 1;
    }
    cz_model_set_bf16_inputs(m, o.bf16_inputs);
    cz_model_init_weights(m, 1);

    /* random batch: sequence s keeps its last s*3 tokens as padding */
    int B = o.batch, T = o.seq, P = o.pred, n = B * T;
    int32_t *tok = malloc(n * sizeof *tok), *seg = malloc(n * sizeof *seg);
    int32_t *tgt = malloc(n * sizeof *tgt), *pos = malloc(B * P * sizeof *pos);
    int32_t *lab = malloc(B * P * sizeof *lab), *nsp = malloc(B * sizeof *nsp);
    float *w = malloc(B * P * sizeof *w);
    uint8_t *mask = malloc(n);
    uint64_t *ids = malloc(B * sizeof *ids);
    cz_rng_stream r = cz_rng_stream_make(3, CZ_RNG_TEST, 0, 0, 0);
    for (int s = 0; s < B; s++) {
        int len = T - (s * 3) % (T / 2 + 1);
        ids[s] = (uint64_t)s;
        nsp[s] = s & 1;
        for (int t = 0; t < T; t++) {
            int i = s * T + t;
            tok[i] = (int32_t)cz_rng_below(&r, 2 * (uint64_t)i, (uint64_t)o.vocab);
            seg[i] = t >= T / 2;
            mask[i] = t < len;
        }
        for (int t = 0; t < T; t++) tgt[s * T + t] = t + 1 < len ? tok[s * T + t + 1] : -1;
        for (int p = 0; p < P; p++) {
            pos[s * P + p] = 1 + (p * 5) % (len - 1);
            lab[s * P + p] = tok[s * T + pos[s * P + p]];
            w[s * P + p] = 1.0f;
        }
    }
    cz_batch b = {B, T, tok, bert ? seg : NULL, mask, bert ? P : 0, pos, lab, w, nsp, tgt, 1,
                  7, 0, ids, .labels = NULL};

    double *times = malloc((o.steps + 1) * sizeof *times);
    cz_model_profile sum = {0};
    for (int step = 0; step <= o.steps; step++) {
        b.step = (uint64_t)step;
        cz_model_set_profiling(m, 1);
        double t0 = cz_now();
        cz_losses l;
        cz_gemm_weights_begin(g); /* as cloze-train's step: weights packed once */
        if (cz_model_forward(m, &b, &l, &err)) {
            fprintf(stderr, "model_step_bench: %s\n", err.msg);
            return 1;
        }
        cz_model_backward(m, &b, 1.0f);
        cz_gemm_weights_end(g);
        times[step] = cz_now() - t0;
        cz_model_profile p;
        cz_model_get_profile(m, &p);
        if (step > 0) {
            sum.gemm += p.gemm;
            sum.attention += p.attention;
            sum.elementwise += p.elementwise;
            sum.embeddings += p.embeddings;
            sum.loss += p.loss;
            sum.total += p.total;
            sum.recompute += p.recompute;
        }
        fprintf(stderr, "step %d: %.3f s, loss %.4f\n", step, times[step], l.loss);
    }
    qsort(times + 1, o.steps, sizeof *times, cmp_double);
    const double *ts = times + 1; /* sorted timed steps */
    double med = o.steps % 2 ? ts[o.steps / 2] : 0.5 * (ts[o.steps / 2 - 1] + ts[o.steps / 2]);
    double flops = 3.0 * cz_model_forward_flops(&c, T, bert ? P : 0) * B;
    printf("%s L%d H%d A%d I%d V%d T%d B%d P%d threads %d gemm '%s'\n", bert ? "bert" : "gpt",
           o.layers, o.hidden, o.heads, o.inter, o.vocab, T, B, bert ? P : 0, o.threads,
           cz_gemm_describe(g));
    printf("step median %.4f s over %d steps (min %.4f max %.4f): %.0f tokens/s, %.2f GFLOP/s\n",
           med, o.steps, times[1], times[o.steps], n / med, flops / med * 1e-9);
    cz_model_memory mem;
    cz_model_get_memory(m, &mem);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("recompute %s: planned activations %.1f MiB (layer inputs %.1f, layer activations "
           "%.1f, other %.1f), parameters + gradients %.1f MiB; peak RSS %.1f MiB; recompute "
           "%.4f s per step\n",
           o.recompute ? "layers" : "none", mem.activations / 1048576.0,
           mem.layer_inputs / 1048576.0, mem.layer_acts / 1048576.0, mem.other / 1048576.0,
           mem.params / 1048576.0, ru.ru_maxrss / 1024.0, sum.recompute / o.steps);
    double k = 1.0 / o.steps, other = sum.total - sum.gemm - sum.attention - sum.elementwise -
                                      sum.embeddings - sum.loss;
    printf("profile per step (mean): gemm %.4f s (%.1f%%), attention %.4f s (%.1f%%), "
           "elementwise %.4f s (%.1f%%), embeddings %.4f s (%.1f%%), loss %.4f s (%.1f%%), "
           "other %.4f s (%.1f%%), total %.4f s\n",
           sum.gemm * k, 100 * sum.gemm / sum.total, sum.attention * k,
           100 * sum.attention / sum.total, sum.elementwise * k, 100 * sum.elementwise / sum.total,
           sum.embeddings * k, 100 * sum.embeddings / sum.total, sum.loss * k,
           100 * sum.loss / sum.total, other * k, 100 * other / sum.total, sum.total * k);
    cz_model_free(m);
    cz_gemm_free(g);
    free(times);
    free(tok);
    free(seg);
    free(tgt);
    free(pos);
    free(lab);
    free(nsp);
    free(w);
    free(mask);
    free(ids);
    return 0;
}
