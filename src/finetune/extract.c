/* Feature extraction (include/cloze/finetune.h, cz_ft_extract): every
 * layer's hidden states of a file's tokens from a checkpoint, on the run's
 * set-up (run.c) and evaluation batches (eval.c). The top of the run's
 * files (finetune_private.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "finetune_private.h"

/* ---- feature extraction ---- */

/* cz_ft_extract's state: the run's model and file, the layers asked for,
 * and the features gathered (rows of n_layers x H floats per token). */
typedef struct ft_extract {
    ft_run r;
    cz_gemm_ctx *gemm;
    cz_model *m;
    int n_layers, which[64]; /* the layers asked for, counted from 0 (embeddings) */
    int L, H, T, N, micro;   /* layers, width, tokens per sequence, sequences, per forward */
    size_t row, nt;          /* floats per token's row; tokens in all (N x T) */
    float *out, *mask, *toks, *words;
} ft_extract;

static void extract_free(ft_extract *x) {
    free(x->out);
    free(x->mask);
    free(x->toks);
    free(x->words);
    cz_model_free(x->m);
    if (x->gemm) cz_gemm_free(x->gemm);
    ft_run_free(&x->r);
}

/* The extraction's set-up after the model is read and the GEMM made: the
 * tokenizer (its vocabulary into dir), the file's features, the layers,
 * the model with the checkpoint's weights and the output buffers. */
static int extract_prepare(ft_extract *x, const char *dir, const int *layers, cz_error *err) {
    ft_run *r = &x->r;
    const cz_ft_options *o = r->o;
    if (ft_load_tokenizer(r->world, &r->base, dir, &r->tok, r->made, err)) return -1;
    r->mc = r->base.mc;
    r->mc.head = CZ_HEAD_NONE;
    r->mc.lm_weight = 0;
    /* the file to extract from is read like a dev file */
    if (cz_ft_read(&r->dev, &r->task, o->dev_path, 1, err)) return -1;
    if (o->dev_limit > 0) cz_ft_dataset_truncate(&r->dev, o->dev_limit);
    if (r->mc.arch == CZ_ARCH_GPT)
        return cz_fail(err, "features: BERT models only (GPT's states are causal; use its LM)");
    cz_ft_feature_config fc = {
        .max_seq = o->max_seq, .doc_stride = o->doc_stride, .max_query = o->max_query, .gpt = 0};
    fc.cls = cz_tokenizer_token_id(r->tok, "[CLS]");
    fc.sep = cz_tokenizer_token_id(r->tok, "[SEP]");
    fc.pad = cz_tokenizer_token_id(r->tok, "[PAD]");
    if (cz_ft_featurize(&r->fdev, &r->dev, r->tok, &fc, err)) return -1;
    x->L = r->mc.layers, x->H = r->mc.hidden, x->N = r->fdev.n;
    for (int k = 0; k < x->n_layers; k++) {
        x->which[k] = layers[k] < 0 ? x->L + 1 + layers[k] : layers[k];
        if (x->which[k] < 0 || x->which[k] > x->L)
            return cz_fail(err, "--layers: %d is outside [-%d, %d] for a %d-layer model", layers[k],
                           x->L + 1, x->L, x->L);
    }
    x->micro = o->micro_batch > 0 ? o->micro_batch : 16;
    if (cz_model_create(&x->m, &r->mc, x->micro, x->T, 1, x->gemm, err)) return -1;
    char fresh[512];
    ft_copy_tensors(x->m, &r->base, fresh, sizeof fresh);
    if (cz_batch_buf_alloc(&r->buf, x->micro, x->T, 1, err)) return -1;
    r->buf_ok = 1;
    x->row = (size_t)x->n_layers * x->H, x->nt = (size_t)x->N * x->T;
    x->out = calloc(x->nt * x->row + 1, sizeof *x->out);
    x->mask = calloc(x->nt + 1, sizeof *x->mask);
    x->toks = calloc(x->nt + 1, sizeof *x->toks);
    x->words = malloc((x->nt + 1) * sizeof *x->words);
    if (!x->out || !x->mask || !x->toks || !x->words)
        return cz_fail(err, "out of memory for %zu x %zu features", x->nt, x->row);
    return 0;
}

/* The set-up as cz_ft_run's: every rank alike, a failure said once; the
 * first agreement comes before load_tokenizer's collective. */
static int extract_setup(ft_extract *x, const char *dir, const int *layers, cz_error *err) {
    const cz_comm *world = x->r.world;
    int rc = cz_comm_agree_setup(world, ft_base_load(&x->r.base, x->r.o->init, err), err);
    /* training's thread plan and GEMM (collective: every rank comes here) */
    int threads = 0;
    if (rc == 0)
        rc = cz_comm_agree_setup(world,
                                 cz_train_compute_setup(world, x->r.o->threads, CZ_GEMM_AUTO,
                                                        x->r.base.mc.matmul_bf16, &threads,
                                                        &x->gemm, err),
                                 err);
    if (rc == 0) rc = cz_comm_agree_setup(world, extract_prepare(x, dir, layers, err), err);
    return rc;
}

/* Every rank runs every ranks-th micro-batch and copies the asked layers'
 * states into its rows of x->out; the rows are then summed over ranks
 * (each filled by exactly one rank, zeros elsewhere: the sum is exact). */
static int extract_forward(ft_extract *x, cz_error *err) {
    ft_run *r = &x->r;
    const cz_comm *world = r->world;
    int batches = (x->N + x->micro - 1) / x->micro, T = x->T, H = x->H, rc = 0;
    for (int k = world->rank; k < batches && rc == 0; k += world->size) {
        int first = k * x->micro, n = x->N - first < x->micro ? x->N - first : x->micro;
        for (int j = 0; j < n; j++)
            ft_copy_feature(&r->fdev, first + j, &r->buf, j, (uint64_t)(first + j));
        cz_batch b = cz_batch_view(&r->buf, n);
        cz_losses l;
        if (cz_model_forward(x->m, &b, &l, err)) {
            rc = -1;
            break;
        }
        for (int li = 0; li < x->n_layers; li++) {
            const float *h = cz_model_hidden_states(x->m, x->which[li]);
            for (size_t t = 0; t < (size_t)n * T; t++)
                memcpy(x->out + ((size_t)first * T + t) * x->row + (size_t)li * H, h + t * H,
                       (size_t)H * sizeof(float));
        }
    }
    if (ft_any_failed(world, rc, "feature extraction", err) ||
        cz_reduce(world, CZ_ALLREDUCE_RING, x->out, x->nt * x->row, NULL, err))
        return -1;
    return 0;
}

/* Rank 0's safetensors file: the features, the attention mask, the token
 * ids and (tagging tasks) each token's word. */
static int extract_write(ft_extract *x, const char *out_path, cz_error *err) {
    const ft_run *r = &x->r;
    size_t nt = x->nt, row = x->row;
    int T = x->T;
    for (size_t t = 0; t < nt; t++) {
        x->mask[t] = r->fdev.mask[t];
        x->toks[t] = (float)r->fdev.tokens[t];
        x->words[t] = -1;
    }
    int has_words = r->task.kind == CZ_FT_TAG;
    for (int e = 0; has_words && e < r->dev.n; e++)
        for (int w = 0; w < r->dev.ex[e].n_words; w++) {
            int t = r->fdev.first_piece[r->fdev.word_base[e] + w];
            if (t >= 0) x->words[(size_t)e * T + (size_t)t] = (float)w;
        }
    size_t total = nt * row + 3 * nt;
    float *base = malloc(total * sizeof *base);
    if (!base) return cz_fail(err, "out of memory");
    memcpy(base, x->out, nt * row * sizeof *base);
    memcpy(base + nt * row, x->mask, nt * sizeof *base);
    memcpy(base + nt * row + nt, x->toks, nt * sizeof *base);
    memcpy(base + nt * row + 2 * nt, x->words, nt * sizeof *base);
    cz_tensor_info ti[4] = {
        {.name = "features",
         .offset = 0,
         .numel = nt * row,
         .ndim = 2,
         .shape = {(int)nt, (int)row}},
        {.name = "mask", .offset = nt * row, .numel = nt, .ndim = 1, .shape = {(int)nt, 0}},
        {.name = "tokens", .offset = nt * row + nt, .numel = nt, .ndim = 1, .shape = {(int)nt, 0}},
        {.name = "first_piece_of_word",
         .offset = nt * row + 2 * nt,
         .numel = nt,
         .ndim = 1,
         .shape = {(int)nt, 0}}};
    char lay[256] = "", seqs[32], seqlen[32];
    for (int k = 0; k < x->n_layers; k++)
        snprintf(lay + strlen(lay), sizeof lay - strlen(lay), "%s%d", k ? "," : "", x->which[k]);
    snprintf(seqs, sizeof seqs, "%d", x->N);
    snprintf(seqlen, sizeof seqlen, "%d", T);
    const char *meta[] = {"format", "pt",  "producer",  "cloze-finetune features",
                          "layers", lay,   "sequences", seqs,
                          "seq",    seqlen};
    int rc = cz_safetensors_write(out_path, ti, has_words ? 4 : 3, base, meta, 5, err);
    free(base);
    if (rc == 0 && !r->o->quiet)
        cz_info("%s: %d sequences x %d tokens, layers %s (%d x %d features per token)", out_path,
                x->N, T, lay, x->n_layers, x->H);
    return rc;
}

int cz_ft_extract(const cz_comm *world, const cz_ft_options *o, const int *layers, int n_layers,
                  const char *out_path, cz_error *err) {
    ft_extract x;
    memset(&x, 0, sizeof x);
    x.r.world = world;
    x.r.o = o;
    x.r.task = o->task;
    x.T = o->max_seq;
    x.n_layers = n_layers;
    /* the vocabulary goes beside the output file */
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", out_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    int rc = extract_setup(&x, dir, layers, err);
    if (rc == 0) rc = extract_forward(&x, err);
    if (rc == 0) {
        rc = world->rank == 0 ? extract_write(&x, out_path, err) : 0;
        rc = cz_comm_share_verdict(world, 0, rc, err) < 0 ? -1 : 0;
    }
    extract_free(&x);
    return rc;
}
