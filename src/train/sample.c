/* train: a short sample of the GPT being trained every train.sample_every
 * steps (as nanoGPT and llm.c print during training), on rank 0: from
 * train.sample_prompt, train.sample_tokens new tokens drawn at temperature
 * 1 among the 200 most probable (nanoGPT sample.py's top_k) with the run's
 * seed, the same draws at every sample, so that two samples differ by what
 * the model learned in between. Printed and appended to
 * RUN_DIR/samples.jsonl. It only reads the parameters, between two steps,
 * with its own buffers and random stream: the run's numbers are those of a
 * run without it. */
#include <stdlib.h>
#include <string.h>

#include "cloze/infer.h"
#include "cloze/json.h"
#include "cloze/text.h"
#include "train_internal.h"

#define EOT "<|endoftext|>"

struct cz_run_sampler {
    cz_tokenizer *tok;
    cz_decoder *dec;
    int32_t *prompt, *out;
    int n, len;
};

void cz_run_sample_close(cz_run *r) {
    cz_run_sampler *s = r->sampler;
    if (!s) return;
    cz_decoder_free(s->dec);
    cz_tokenizer_free(s->tok);
    free(s->prompt);
    free(s->out);
    free(s);
    r->sampler = NULL;
}

/* Rank 0's part of cz_run_sample_open. */
static int sample_open(cz_run *r, cz_error *err) {
    const cz_config *c = &r->cfg;
    if (c->model.arch != CZ_ARCH_GPT)
        return cz_fail(err,
                       "train.sample_every = %d: samples need a GPT (model.arch = gpt); set "
                       "train.sample_every = 0",
                       c->train.sample_every);
    const cz_manifest *m = cz_data_manifest(r->train_data);
    const char *vocab = m->vocab_files[CZ_VOCAB_FILE_VOCAB].path[0]
                            ? m->vocab_files[CZ_VOCAB_FILE_VOCAB].path
                            : m->vocab_path;
    const char *merges = m->vocab_files[CZ_VOCAB_FILE_MERGES].path;
    if (strcmp(m->vocab_kind, "bpe") || !merges[0])
        return cz_fail(err,
                       "train.sample_every: %s records no byte-level BPE vocabulary files to "
                       "decode samples with",
                       c->data.train_manifest);
    cz_run_sampler *s = calloc(1, sizeof *s);
    if (!s) return cz_fail(err, "out of memory");
    r->sampler = s;
    if (cz_tokenizer_load_bpe(&s->tok, vocab, merges, err))
        return cz_fail_prefix(err, "train.sample_every");
    cz_ids ids = {0};
    const char *p = c->train.sample_prompt;
    int rc = p[0]             ? cz_tokenizer_encode(s->tok, p, strlen(p), &ids, err)
             : m->eot_id >= 0 ? cz_ids_push(&ids, (uint32_t)m->eot_id, err)
                              : cz_tokenizer_encode(s->tok, "\n", 1, &ids, err);
    int P = c->model.max_positions;
    if (rc == 0 && (ids.n == 0 || (int)ids.n >= P))
        rc = cz_fail(
            err, "train.sample_prompt is %zu tokens: it must be 1 to %d (model.max_positions - 1)",
            ids.n, P - 1);
    if (rc == 0) {
        s->n = (int)ids.n;
        s->len = s->n + c->train.sample_tokens < P ? s->n + c->train.sample_tokens : P;
        s->prompt = malloc(ids.n * sizeof *s->prompt);
        s->out = malloc((size_t)s->len * sizeof *s->out);
        if (!s->prompt || !s->out) rc = cz_fail(err, "out of memory");
    }
    for (int i = 0; rc == 0 && i < s->n; i++) s->prompt[i] = (int32_t)ids.ids[i];
    cz_ids_free(&ids);
    if (rc == 0) rc = cz_decoder_create(&s->dec, r->model, 1, s->len, r->gemm, err);
    return rc;
}

int cz_run_sample_open(cz_run *r, cz_error *err) {
    if (r->cfg.train.sample_every <= 0 || r->task) return 0;
    int rc = r->comm.rank == 0 ? sample_open(r, err) : 0;
    if (rc) cz_run_sample_close(r);
    return cz_run_verdict(r, rc, err);
}

/* text as valid UTF-8, a byte that starts no valid sequence becoming
 * U+FFFD (as Hugging Face's decode does by default): a young model's bytes
 * need not be UTF-8, a JSON line and a terminal need them to be. NULL when
 * out of memory. */
static char *valid_utf8(const char *text, size_t n) {
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        size_t ok = cz_utf8_invalid_at((const unsigned char *)text + i, n - i);
        memcpy(o, text + i, ok);
        o += ok;
        i += ok;
        if (i < n) {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    return out;
}

void cz_run_sample(cz_run *r) {
    cz_run_sampler *s = r->sampler;
    if (!s || r->step % r->cfg.train.sample_every != 0) return;
    cz_error err;
    int32_t *out[1] = {s->out};
    int len = 0;
    cz_generate_params p = {s->len - s->n, {1.0f, 200, 1.0f}, r->cfg.train.seed, -1, 0};
    if (cz_generate(s->dec, s->prompt, s->n, &p, out, &len, NULL, NULL, &err)) {
        cz_warn("step %ld: no sample: %s", r->step, err.msg);
        return;
    }
    size_t n;
    char *raw = cz_tokenizer_decode(s->tok, (const uint32_t *)s->out, (size_t)len, &n);
    char *text = raw ? valid_utf8(raw, n) : NULL;
    free(raw);
    if (!text) return;
    if (!r->quiet) cz_info("step %ld sample: %s", r->step, text);
    char path[CZ_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/samples.jsonl", r->cfg.train.run_dir);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "{\"step\":%ld,\"text\":", r->step);
        cz_json_write_string(f, text);
        fprintf(f, "}\n");
        if (fclose(f) != 0) cz_warn("%s: the sample of step %ld was not written", path, r->step);
    } else {
        cz_warn("%s: cannot append the sample of step %ld", path, r->step);
    }
    free(text);
}
