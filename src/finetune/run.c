/* One fine-tuning run (include/cloze/finetune.h, "runs") on the train
 * runtime: cz_train_run_task with this file's sample builder, model
 * initialisation and dev-set evaluation. Everything else (ranks and the
 * sample-to-rank mapping, gradient sync, AdamW and the schedule,
 * checkpoints, --resume, signals, metrics.jsonl) is the train module's, so
 * a fine-tuning run gives the same numbers on any rank layout and resumes
 * like a pre-training run.
 *
 * Samples: the runtime's samples are sequences; an example is `group`
 * consecutive ones (similarity: its two orderings; multiple choice: its K
 * candidates), so a step of --batch examples is group x batch sequences and
 * a micro-batch always holds whole examples. Global sequence g belongs to
 * example x = g / group, which is training example
 * cz_data_permute(seed, x / n, n, x % n) of the n: each epoch a fresh order
 * keyed by the seed (BERT App. A.3's restarts differ in the data order and
 * the head's initialisation, both from the seed). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloze/ckpt.h"
#include "cloze/comm.h"
#include "cloze/config.h"
#include "cloze/data.h"
#include "cloze/finetune.h"
#include "cloze/hf.h"
#include "cloze/json.h"
#include "cloze/safetensors.h"
#include "cloze/text.h"
#include "cloze/train.h"

void cz_ft_options_default(cz_ft_options *o) {
    memset(o, 0, sizeof *o);
    o->max_seq = 128;
    o->doc_stride = 128;
    o->max_query = 64;
    o->max_answer = 30;
    o->n_best = 20;
    o->lr = 2e-5;
    o->batch = 32;
    o->epochs = 3;
    o->seed = 1;
    o->warmup_fraction = 0.1;
    o->weight_decay = 0.01;
    o->lm_weight = 0.5f;
    o->dropout = -1.0f;
}

/* ---- the pre-trained model ---- */

/* What a run starts from: the model of a cloze checkpoint (cloze-train's,
 * cloze-ckpt import-hf's, or a fine-tuned one) or of a Hugging Face
 * directory, and the vocabulary it was trained with. */
typedef struct ft_base {
    cz_model_config mc;
    cz_model *m; /* its parameters, looked up by name */
    cz_hf_vocab vocab;
    int has_vocab;
    cz_ckpt *ck; /* vocab may point into it */
    int seq;     /* a cloze checkpoint: the data.seq it was trained at */
} ft_base;

static void base_free(ft_base *b) {
    if (b->vocab.owned[0] || b->vocab.owned[1]) cz_hf_vocab_free(&b->vocab);
    cz_model_free(b->m);
    cz_ckpt_free(b->ck);
    memset(b, 0, sizeof *b);
}

static int base_load(ft_base *b, const char *init, cz_error *err) {
    memset(b, 0, sizeof *b);
    struct stat st;
    if (stat(init, &st) != 0) return cz_fail(err, "%s: %s (--init)", init, strerror(errno));
    if (S_ISDIR(st.st_mode)) { /* a Hugging Face directory */
        cz_hf_load_report rep;
        if (cz_hf_read_config(init, &b->mc, NULL, 0, err) ||
            cz_model_create(&b->m, &b->mc, 1, 1, 1, NULL, err))
            return -1;
        cz_model_init_weights(b->m, 0);
        if (cz_hf_load(b->m, init, &rep, err)) return -1;
        b->has_vocab = cz_hf_vocab_read_dir(&b->vocab, init, err);
        return b->has_vocab < 0 ? -1 : 0;
    }
    if (cz_ckpt_read(init, &b->ck, err)) return -1;
    size_t n = 0;
    const char *text = cz_ckpt_get(b->ck, CZ_BLOB_CONFIG, &n);
    if (!text) return cz_fail(err, "%s: no config blob: not a cloze checkpoint", init);
    char *t = strndup(text, n);
    cz_config cfg;
    int rc = t ? cz_config_from_string(&cfg, t, init, err) : cz_fail(err, "out of memory");
    free(t);
    if (rc) return -1;
    b->mc = cfg.model;
    b->seq = cfg.data.seq;
    cz_hf_head_from_ckpt(b->ck, &b->mc); /* a fine-tuned checkpoint: its head */
    if (cz_model_create(&b->m, &b->mc, 1, 1, 1, NULL, err) ||
        cz_ckpt_get_params(b->ck, init, CZ_BLOB_PARAMS, b->m, cz_model_params(b->m), err))
        return cz_fail_prefix(err, "%s", init);
    b->has_vocab = cz_hf_vocab_from_ckpt(&b->vocab, b->ck, err);
    if (b->has_vocab < 0) return cz_fail_prefix(err, "%s", init);
    if (!b->has_vocab && cfg.data.train_manifest[0]) { /* older checkpoints: the manifest's */
        cz_manifest man;
        if (cz_manifest_load(&man, cfg.data.train_manifest, err) == 0) {
            const char *mer = man.vocab_files[CZ_VOCAB_FILE_MERGES].path;
            int bpe = !strcmp(man.vocab_kind, "bpe");
            b->has_vocab = cz_hf_vocab_read(&b->vocab, man.vocab_kind, man.vocab_path,
                                            bpe && mer[0] ? mer : NULL, -1, err) == 0;
            cz_manifest_free(&man);
        }
    }
    return 0;
}

/* Copies every tensor of the base model into the fine-tuning model's tensor
 * of the same name and shape; the word embedding (offset 0) of a model with
 * more tokens (GPT's three added tokens) gets the base's vocab_size rows,
 * not its padding rows (model.vocab_pad_to), where the new tokens' rows may
 * lie: those keep their initialisation. The rest (the new head) keeps its
 * initialisation. Returns the number of fresh tensors. */
static int copy_tensors(cz_model *dst, const ft_base *b, char *fresh, size_t cap) {
    int n_fresh = 0;
    fresh[0] = 0;
    size_t base_vocab = (size_t)cz_model_get_config(b->m)->vocab_size;
    size_t dst_vocab = (size_t)cz_model_get_config(dst)->vocab_size;
    for (int i = 0; i < cz_model_num_tensors(dst); i++) {
        const cz_tensor_info *t = cz_model_tensor(dst, i);
        const cz_tensor_info *s = cz_model_find_tensor(b->m, t->name);
        int rows = s && s->ndim == 2 && t->ndim == 2 && s->shape[1] == t->shape[1] &&
                   s->offset == 0 && t->offset == 0 && base_vocab < dst_vocab;
        int same = !rows && s && s->ndim == t->ndim && s->shape[0] == t->shape[0] &&
                   s->shape[1] == t->shape[1];
        if (same || rows) {
            memcpy(cz_model_params(dst) + t->offset, cz_model_params(b->m) + s->offset,
                   (same ? s->numel : base_vocab * (size_t)s->shape[1]) * sizeof(float));
            if (same) continue;
        }
        size_t l = strlen(fresh);
        snprintf(fresh + l, cap - l, "%s%s%s", l ? ", " : "", t->name, rows ? " (new rows)" : "");
        n_fresh++;
    }
    return n_fresh;
}

/* ---- the tokenizer of the base model ---- */

static int write_bytes(const char *dir, const char *name, const void *data, size_t len, char *path,
                       size_t cap, cz_error *err) {
    snprintf(path, cap, "%s/%s", dir, name);
    return cz_write_file_atomic(path, data, len, err);
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* What rank 0's set-up created: OUT, OUT/vocab (made[0], made[1]). A
 * set-up that fails later (a bad task file) takes them away again, so that
 * a failed run leaves nothing behind that it made. */
/* The files of OUT/vocab/: WordPiece's, or BPE's encoder and merges. */
#define VOCAB_WORDPIECE "vocab.txt"
#define VOCAB_ENCODER "encoder.json"
#define VOCAB_MERGES "vocab.bpe"

static void undo_made(const char *out, const int made[2]) {
    char path[1200];
    static const char *files[] = {VOCAB_WORDPIECE, VOCAB_ENCODER, VOCAB_MERGES};
    if (made[1]) {
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "%s/vocab/%s", out, files[i]);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/vocab", out);
        rmdir(path);
    }
    if (made[0]) rmdir(out); /* only when empty */
}

/* The vocabulary goes into OUT/vocab/ (the run's record of it) and the
 * tokenizer is loaded from there. Rank 0 writes (made: undo_made), every
 * rank reads. */
static int load_tokenizer(const cz_comm *world, const ft_base *b, const char *out,
                          cz_tokenizer **tok, int made[2], cz_error *err) {
    if (!b->has_vocab)
        return cz_fail(err, "the model carries no vocabulary and names no manifest that has one");
    char dir[1100], vp[1200], mp[1200];
    snprintf(dir, sizeof dir, "%s/vocab", out);
    int bpe = !strcmp(b->vocab.kind, "bpe");
    int rc = 0;
    if (world->rank == 0) {
        made[0] = !is_dir(out);
        made[1] = !is_dir(dir);
        rc = cz_make_dirs(dir, err);
        if (rc == 0)
            rc = write_bytes(dir, bpe ? VOCAB_ENCODER : VOCAB_WORDPIECE, b->vocab.vocab,
                             b->vocab.vocab_len, vp, sizeof vp, err);
        if (rc == 0 && bpe)
            rc = write_bytes(dir, VOCAB_MERGES, b->vocab.merges, b->vocab.merges_len, mp, sizeof mp,
                             err);
    }
    if (cz_comm_share_verdict(world, 0, rc, err) < 0) return -1;
    snprintf(vp, sizeof vp, "%s/%s", dir, bpe ? VOCAB_ENCODER : VOCAB_WORDPIECE);
    snprintf(mp, sizeof mp, "%s/%s", dir, VOCAB_MERGES);
    if (bpe) return cz_tokenizer_load_bpe(tok, vp, mp, err);
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    o.lower_case = b->vocab.lower_case;
    return cz_tokenizer_load_wordpiece(tok, vp, &o, err);
}

/* ---- the run ---- */

typedef struct ft_run {
    const cz_comm *world;
    const cz_ft_options *o;
    cz_ft_task task;
    ft_base base;
    cz_tokenizer *tok;
    cz_ft_dataset train, dev, test; /* test: --test, or predict's --input */
    cz_ft_features ftrain, fdev, ftest;
    cz_model_config mc;
    int micro;        /* sequences per forward: whole examples of `group` sequences */
    int group;        /* sequences per example (cz_ft_features.group) */
    cz_batch_buf buf; /* evaluation batches */
    int buf_ok;
    long steps, steps_per_epoch;
    double t0;
    cz_ft_result *res;
    char head_blob[128], task_blob[4096];
    cz_blob blobs[2];
    FILE *results;
    int made[2]; /* rank 0's set-up created OUT, OUT/vocab (undo_made) */
} ft_run;

static void copy_feature(const cz_ft_features *f, int i, cz_batch_buf *buf, int slot, uint64_t g) {
    size_t T = (size_t)f->T, o = (size_t)i * T, d = (size_t)slot * T;
    memcpy(buf->tokens + d, f->tokens + o, T * sizeof(int32_t));
    memcpy(buf->segments + d, f->segments + o, T * sizeof(int32_t));
    memcpy(buf->attn_mask + d, f->mask + o, T);
    memcpy(buf->targets + d, f->targets + o, T * sizeof(int32_t));
    memcpy(buf->token_labels + d, f->token_label + o, T * sizeof(int32_t));
    buf->labels[slot] = f->label[i];
    buf->cls_index[slot] = f->cls_index[i];
    buf->start_positions[slot] = f->start[i];
    buf->end_positions[slot] = f->end[i];
    buf->sample_ids[slot] = g;
}

static int build_sample(void *ctx, cz_batch_buf *buf, int slot, uint64_t g, cz_error *err) {
    ft_run *r = ctx;
    uint64_t G = (uint64_t)r->group, n = (uint64_t)r->ftrain.n / G, x = g / G;
    uint64_t i = cz_data_permute(r->o->seed, x / n, n, x % n);
    (void)err;
    copy_feature(&r->ftrain, (int)(i * G + g % G), buf, slot, g);
    return 0;
}

static int init_model(void *ctx, cz_model *m, cz_error *err) {
    ft_run *r = ctx;
    (void)err;
    if (r->o->random_init) { /* the architecture only: the runtime's initialisation stays */
        if (r->world->rank == 0 && !r->o->quiet)
            cz_info("random initialisation (seed %llu), the architecture of %s", r->o->seed,
                    r->o->init);
        return 0;
    }
    char fresh[512];
    int n = copy_tensors(m, &r->base, fresh, sizeof fresh);
    if (r->world->rank == 0 && !r->o->quiet)
        cz_info("initialised from %s; %d tensor(s) fresh (seed %llu): %s", r->o->init, n,
                r->o->seed, fresh);
    return 0;
}

/* ---- evaluation: logits, scores and predictions of one file ---- */

/* A file the model is scored on or predicts: the dev file of a run, its
 * --test file, or predict's --input. */
typedef enum { FT_DEV = 0, FT_TEST = 1, FT_INPUT = 2 } ft_split;

static const char *split_name(ft_split s) {
    static const char *names[] = {"dev", "test", "input"};
    return names[s];
}

/* Per-row width of the head's logits for features of T tokens. */
static size_t logit_width(const cz_ft_task *t, int T) {
    if (t->kind == CZ_FT_CLASSIFY || t->kind == CZ_FT_CHOICE)
        return (size_t)t->n_labels; /* one row per example */
    if (t->kind == CZ_FT_SPAN) return (size_t)T * 2;
    return (size_t)T * (size_t)t->n_labels;
}

static int argmax(const float *z, int n) {
    int k = 0;
    for (int i = 1; i < n; i++)
        if (z[i] > z[k]) k = i;
    return k;
}

/* The files a split's predictions go to, in OUT: the task's own format
 * (a label per line, CoNLL token<TAB>tag, SQuAD's predictions.json) and,
 * for dev, the JSON lines with logits (docs/finetune.md). */
typedef struct ft_outputs {
    FILE *plain, *jsonl;
    char plain_path[1200], jsonl_path[1200];
} ft_outputs;

static FILE *open_output(const char *dir, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) cz_warn("%s: cannot write predictions: %s", path, strerror(errno));
    return f;
}

static void open_outputs(ft_outputs *o, const char *dir, const cz_ft_task *t, ft_split s) {
    static const char *ext[] = {"txt", "json", "conll", "txt"}; /* by cz_ft_kind */
    memset(o, 0, sizeof *o);
    char name[64];
    if (s == FT_DEV) { /* (the names of earlier releases) */
        if (t->kind == CZ_FT_SPAN)
            o->plain = open_output(dir, "predictions.json", o->plain_path, sizeof o->plain_path);
        else
            o->jsonl =
                open_output(dir, "dev_predictions.jsonl", o->jsonl_path, sizeof o->jsonl_path);
        return;
    }
    snprintf(name, sizeof name, "%spredictions.%s", s == FT_TEST ? "test_" : "", ext[t->kind]);
    o->plain = open_output(dir, name, o->plain_path, sizeof o->plain_path);
}

static void close_outputs(ft_outputs *o) {
    if (o->plain && fclose(o->plain) != 0) cz_warn("%s: %s", o->plain_path, strerror(errno));
    if (o->jsonl && fclose(o->jsonl) != 0) cz_warn("%s: %s", o->jsonl_path, strerror(errno));
    o->plain = o->jsonl = NULL;
}

/* One line of dev_predictions.jsonl: the predicted and gold label names
 * and the logits they come from (format: docs/finetune.md). */
static void put_prediction(FILE *pf, const cz_ft_task *t, int pred, int gold, const float *z) {
    fputs("{\"pred\":", pf);
    cz_json_write_string(pf, t->labels[pred]);
    fputs(",\"gold\":", pf);
    cz_json_write_string(pf, t->labels[gold]);
    fputs(",\"logits\":[", pf);
    for (int c = 0; c < t->n_labels; c++) fprintf(pf, "%s%.9g", c ? "," : "", (double)z[c]);
    fputs("]}", pf);
}

static int score_classes(const cz_ft_task *t, const cz_ft_features *f, const float *logits,
                         size_t w, ft_outputs *out, cz_ft_scores *s, cz_error *err) {
    int n = f->n / f->group; /* examples: one row of logits each */
    int *gold = malloc((size_t)n * sizeof *gold), *pred = malloc((size_t)n * sizeof *pred);
    if (!gold || !pred) return free(gold), free(pred), cz_fail(err, "out of memory");
    for (int i = 0; i < n; i++) {
        gold[i] = f->label[(size_t)i * f->group];
        pred[i] = argmax(logits + (size_t)i * w, t->n_labels);
        if (out->jsonl) {
            put_prediction(out->jsonl, t, pred[i], gold[i], logits + (size_t)i * w);
            fputc('\n', out->jsonl);
        }
        if (out->plain) fprintf(out->plain, "%s\n", t->labels[pred[i]]);
    }
    cz_ft_classify_scores(gold, pred, n, s);
    free(gold);
    free(pred);
    return 0;
}

/* Tagging: each word is scored at its first piece; words cut at max_seq (or
 * empty) are predicted O (class 0), with null logits in the predictions. */
static int score_tags(const cz_ft_task *tk, const cz_ft_dataset *d, const cz_ft_features *f,
                      const float *logits, size_t w, ft_outputs *out, cz_ft_scores *s,
                      cz_error *err) {
    long total = 0;
    for (int e = 0; e < d->n; e++) total += d->ex[e].n_words;
    int *gold = malloc((size_t)total * sizeof *gold), *pred = malloc((size_t)total * sizeof *pred);
    int *len = malloc((size_t)d->n * sizeof *len);
    if (!gold || !pred || !len)
        return free(gold), free(pred), free(len), cz_fail(err, "out of memory");
    long k = 0;
    int C = tk->n_labels;
    FILE *pf = out->jsonl, *tf = out->plain;
    for (int e = 0; e < d->n; e++) {
        len[e] = d->ex[e].n_words;
        if (pf) fputs("{\"words\":[", pf);
        for (int wd = 0; wd < d->ex[e].n_words; wd++, k++) {
            int t = f->first_piece[f->word_base[e] + wd];
            const float *z = t < 0 ? NULL : logits + (size_t)e * w + (size_t)t * C;
            gold[k] = d->ex[e].tags[wd];
            pred[k] = z ? argmax(z, C) : 0;
            if (tf) fprintf(tf, "%s\t%s\n", d->ex[e].words[wd], tk->labels[pred[k]]);
            if (!pf) continue;
            if (wd) fputc(',', pf);
            if (z) {
                put_prediction(pf, tk, pred[k], gold[k], z);
            } else {
                fputs("{\"pred\":", pf);
                cz_json_write_string(pf, tk->labels[0]);
                fputs(",\"gold\":", pf);
                cz_json_write_string(pf, tk->labels[gold[k]]);
                fputs(",\"logits\":null}", pf);
            }
        }
        if (pf) fputs("]}\n", pf);
        if (tf) fputc('\n', tf); /* CoNLL: a blank line ends a sentence */
    }
    cz_ft_entity_scores(gold, pred, len, d->n, (char(*)[32])tk->labels, s);
    free(gold);
    free(pred);
    free(len);
    return 0;
}

/* SQuAD: the best answer of each question over its windows, written as the
 * official predictions.json ({id: answer}). */
static int score_spans(const ft_run *r, const cz_ft_dataset *d, const cz_ft_features *f,
                       const float *logits, size_t w, ft_outputs *out, cz_ft_scores *s) {
    FILE *pf = out->plain;
    if (pf) fputc('{', pf);
    double em_sum = 0, f1_sum = 0;
    int first = 0;
    for (int e = 0; e < d->n; e++) {
        int count = 0;
        while (first + count < f->n && f->example[first + count] == e) count++;
        char *ans = cz_ft_squad_answer(f, d, r->tok, e, logits + (size_t)first * w, first, count,
                                       r->o->max_answer, r->o->n_best);
        char *gold[64];
        int ng = d->ex[e].n_answers < 64 ? d->ex[e].n_answers : 64;
        for (int a = 0; a < ng; a++) gold[a] = d->ex[e].answers[a].text;
        double em = 0, f1 = 0;
        if (ng) cz_ft_squad_score(ans ? ans : "", gold, ng, &em, &f1);
        em_sum += em;
        f1_sum += f1;
        if (pf) {
            if (e) fputc(',', pf);
            cz_json_write_string(pf, d->ex[e].id);
            fputc(':', pf);
            cz_json_write_string(pf, ans ? ans : "");
        }
        free(ans);
        first += count;
    }
    if (pf) fputs("}\n", pf);
    s->exact = 100.0 * em_sum / d->n;
    s->squad_f1 = 100.0 * f1_sum / d->n;
    return 0;
}

/* The scores of one file from the logits of all its features (rank 0), and
 * when write is set its predictions (open_outputs). An unlabelled file
 * (d->labelled == 0) gets predictions; its scores are meaningless. */
static int score_split(const ft_run *r, ft_split split, const cz_ft_dataset *d,
                       const cz_ft_features *f, const float *logits, int write, cz_ft_scores *s,
                       char *written, size_t cap, cz_error *err) {
    size_t w = logit_width(&r->task, f->T);
    memset(s, 0, sizeof *s);
    ft_outputs out;
    memset(&out, 0, sizeof out);
    if (write) open_outputs(&out, r->o->out_dir, &r->task, split);
    int rc = r->task.kind == CZ_FT_SPAN  ? score_spans(r, d, f, logits, w, &out, s)
             : r->task.kind == CZ_FT_TAG ? score_tags(&r->task, d, f, logits, w, &out, s, err)
                                         : score_classes(&r->task, f, logits, w, &out, s, err);
    s->n = d->n;
    if (written && cap)
        snprintf(written, cap, "%s", out.plain ? out.plain_path : out.jsonl ? out.jsonl_path : "");
    close_outputs(&out);
    return rc;
}

static const char *metric_name(cz_ft_metric m) {
    static const char *names[] = {"accuracy", "f1", "mcc", "squad_f1", "entity_f1"};
    return names[m];
}

/* The selection figure, in percent. */
static double score_of(cz_ft_metric m, const cz_ft_scores *s) {
    switch (m) {
    case CZ_FT_ACCURACY:
        return 100 * s->accuracy;
    case CZ_FT_F1:
        return 100 * s->f1;
    case CZ_FT_MCC:
        return 100 * s->mcc;
    case CZ_FT_SQUAD:
        return s->squad_f1;
    default:
        return s->entity_f1;
    }
}

/* A split's figures as a JSON object (results.jsonl's "dev" and "test",
 * predict's scores.json): the task kind's scores and the example count. */
static void put_scores(FILE *f, const cz_ft_task *t, const cz_ft_scores *s) {
    fputc('{', f);
    if (t->kind == CZ_FT_CLASSIFY || t->kind == CZ_FT_CHOICE)
        fprintf(f, "\"accuracy\":%.6f,\"f1\":%.6f,\"mcc\":%.6f", 100 * s->accuracy, 100 * s->f1,
                100 * s->mcc);
    else if (t->kind == CZ_FT_SPAN)
        fprintf(f, "\"exact\":%.6f,\"f1\":%.6f", s->exact, s->squad_f1);
    else
        fprintf(f, "\"precision\":%.6f,\"recall\":%.6f,\"f1\":%.6f", s->precision, s->recall,
                s->entity_f1);
    fprintf(f, ",\"examples\":%ld}", s->n);
}

/* One line of results.jsonl (format: docs/finetune.md). */
static void write_result(ft_run *r, long step, int final, const cz_ft_scores *s, int ranks) {
    if (!r->results) return;
    FILE *f = r->results;
    const cz_ft_options *o = r->o;
    fprintf(f, "{\"kind\":\"eval\",\"final\":%s,\"task\":", final ? "true" : "false");
    cz_json_write_string(f, r->task.name);
    fprintf(f, ",\"label\":");
    cz_json_write_string(f, o->label[0] ? o->label : r->task.name);
    fprintf(f, ",\"metric\":\"%s\",\"score\":%.6f,\"step\":%ld,\"steps\":%ld,\"epoch\":%.4f,",
            metric_name(r->task.metric), score_of(r->task.metric, s), step, r->steps,
            r->steps_per_epoch ? (double)step / (double)r->steps_per_epoch : 0.0);
    fprintf(f, "\"dev\":");
    put_scores(f, &r->task, s);
    fprintf(f, ",\"lr\":%.9g,\"batch\":%d,\"epochs\":%d,\"seed\":%llu,", o->lr, o->batch, o->epochs,
            o->seed);
    fprintf(f, "\"max_seq\":%d,\"train_examples\":%d,\"train_features\":%d,\"ranks\":%d,",
            o->max_seq, r->train.n, r->ftrain.n, ranks);
    fprintf(f, "\"init\":");
    cz_json_write_string(f, o->random_init ? "random" : o->init);
    fprintf(f, ",\"seconds\":%.1f}\n", cz_now() - r->t0);
    fflush(f);
}

/* A scored test or input file as one JSON object (results.jsonl's "test"
 * line after the last step, predict's scores.json): scores are null for a
 * file without labels. */
static void put_split_result(FILE *f, const ft_run *r, ft_split split, const cz_ft_dataset *d,
                             const cz_ft_features *fe, const cz_ft_scores *s, long step,
                             const char *written) {
    char cut[256];
    cz_ft_truncation_text(fe, d, r->o->max_query, cut, sizeof cut);
    fprintf(f, "{\"kind\":\"%s\",\"task\":", split_name(split));
    cz_json_write_string(f, r->task.name);
    fputs(",\"file\":", f);
    cz_json_write_string(f, d->path);
    fprintf(f, ",\"metric\":\"%s\",\"score\":", metric_name(r->task.metric));
    if (d->labelled) {
        fprintf(f, "%.6f,\"%s\":", score_of(r->task.metric, s), split_name(split));
        put_scores(f, &r->task, s);
    } else {
        fprintf(f, "null,\"%s\":{\"examples\":%ld}", split_name(split), s->n);
    }
    if (split == FT_TEST) fprintf(f, ",\"step\":%ld", step);
    fprintf(f,
            ",\"max_seq\":%d,\"truncated\":%d,\"words_lost\":%d,"
            "\"answers_lost\":%d,\"truncation\":",
            fe->T, fe->truncated, fe->words_lost, fe->answers_lost);
    cz_json_write_string(f, cut);
    fputs(",\"predictions\":", f);
    cz_json_write_string(f, written);
    fputs(",\"init\":", f);
    cz_json_write_string(f, r->o->init);
    fputs("}\n", f);
}

/* Every rank learns whether any rank failed (a rank that fails alone must
 * not leave the others waiting in the next collective). */
static int any_failed(const cz_comm *comm, int rc, const char *what, cz_error *err) {
    double bad = rc != 0;
    cz_error e2;
    if (cz_comm_allreduce_doubles(comm, &bad, 1, CZ_OP_MAX, &e2)) return -1;
    if (bad && rc == 0) cz_fail(err, "%s failed on another rank", what);
    return bad != 0;
}

/* The head's logits of every feature of f on every rank: each rank runs
 * every ranks-th micro-batch of r->micro sequences (whole examples), the
 * rows are summed over ranks. Rows: one per example for classification,
 * similarity and choice, one per feature for tagging and spans. */
static float *split_logits(ft_run *r, cz_model *m, const cz_comm *comm, const cz_ft_features *f,
                           cz_error *err) {
    size_t w = logit_width(&r->task, f->T);
    int G = r->task.kind == CZ_FT_TAG || r->task.kind == CZ_FT_SPAN ? 1 : f->group;
    size_t n_rows = (size_t)(f->n / G);
    float *logits = calloc(n_rows * w + 1, sizeof *logits);
    if (!logits) {
        cz_fail(err, "out of memory for %d logits", f->n);
        return NULL;
    }
    int batches = (f->n + r->micro - 1) / r->micro, rc = 0;
    for (int k = comm->rank; k < batches && rc == 0; k += comm->size) {
        int first = k * r->micro, n = f->n - first < r->micro ? f->n - first : r->micro;
        for (int j = 0; j < n; j++) copy_feature(f, first + j, &r->buf, j, (uint64_t)(first + j));
        cz_batch b = r->o->pad_max ? cz_batch_view(&r->buf, n) : cz_batch_view_packed(&r->buf, n);
        b.train = 0;
        cz_losses l;
        if (cz_model_forward(m, &b, &l, err)) {
            rc = -1;
            break;
        }
        const float *z = cz_model_head_logits(m);
        if (G > 1 || r->task.kind == CZ_FT_CLASSIFY || r->task.kind == CZ_FT_CHOICE) {
            memcpy(logits + (size_t)(first / G) * w, z, (size_t)(n / G) * w * sizeof(float));
            continue;
        }
        /* per-token rows of b.seq tokens into the file's rows of f->T (the
         * padding cut off keeps zeros: no word or answer is there) */
        size_t wb = w / (size_t)f->T * (size_t)b.seq;
        for (int j = 0; j < n; j++)
            memcpy(logits + (size_t)(first + j) * w, z + (size_t)j * wb, wb * sizeof(float));
    }
    /* every row was filled by exactly one rank, zeros elsewhere: the sum is exact */
    if (any_failed(comm, rc, "evaluation", err) ||
        cz_reduce(comm, CZ_ALLREDUCE_RING, logits, n_rows * w, NULL, err)) {
        free(logits);
        return NULL;
    }
    return logits;
}

/* The test file of a run (--test) after the last step: predictions and a
 * "test" line in results.jsonl. Rank 0 writes; every rank computes. */
static int evaluate_test(ft_run *r, cz_model *m, const cz_comm *comm, long step, cz_error *err) {
    float *logits = split_logits(r, m, comm, &r->ftest, err);
    if (!logits) return -1;
    int rc = 0;
    if (comm->rank == 0) {
        cz_ft_scores s;
        char written[1200];
        rc = score_split(r, FT_TEST, &r->test, &r->ftest, logits, 1, &s, written, sizeof written,
                         err);
        if (rc == 0 && r->results) {
            put_split_result(r->results, r, FT_TEST, &r->test, &r->ftest, &s, step, written);
            fflush(r->results);
        }
        if (rc == 0 && !r->o->quiet && r->test.labelled)
            cz_info("test %s: %s %.2f over %ld examples; predictions in %s", r->test.path,
                    metric_name(r->task.metric), score_of(r->task.metric, &s), s.n, written);
        else if (rc == 0 && !r->o->quiet)
            cz_info("test %s: %ld examples without labels; predictions in %s", r->test.path, s.n,
                    written);
        if (rc == 0 && r->res) r->res->test = s;
    }
    free(logits);
    return cz_comm_share_verdict(comm, 0, rc, err) < 0 ? -1 : 0;
}

static int evaluate(void *ctx, cz_model *m, const cz_comm *comm, long step, int final,
                    cz_error *err) {
    ft_run *r = ctx;
    if (step == 0 && !final) return 0; /* nothing learnt yet */
    float *logits = split_logits(r, m, comm, &r->fdev, err);
    if (!logits) return -1;
    int rc = 0;
    if (comm->rank == 0) {
        cz_ft_scores s;
        rc = score_split(r, FT_DEV, &r->dev, &r->fdev, logits, final, &s, NULL, 0, err);
        if (rc == 0) {
            double sc = score_of(r->task.metric, &s);
            write_result(r, step, final, &s, comm->size);
            if (!r->o->quiet)
                cz_info("dev @ step %ld (epoch %.2f): %s %.2f over %ld examples", step,
                        (double)step / (double)r->steps_per_epoch, metric_name(r->task.metric), sc,
                        s.n);
            if (final && r->res) {
                r->res->score = sc;
                r->res->dev = s;
                r->res->finished = 1;
            }
        }
    }
    free(logits);
    if (cz_comm_share_verdict(comm, 0, rc, err) < 0) return -1;
    if (r->res && final) {
        if (cz_comm_bcast(comm, &r->res->score, sizeof r->res->score, 0, err)) return -1;
        r->res->finished = 1;
    }
    if (final && r->o->test_path[0]) return evaluate_test(r, m, comm, step, err);
    return 0;
}

/* The run's train configuration: the architecture's defaults, the
 * fine-tuning model, and the recipe (docs/finetune.md). */
static int make_config(ft_run *r, int ranks, cz_config *cfg, cz_error *err) {
    const cz_ft_options *o = r->o;
    char ov[24][CZ_PATH_MAX + 32];
    int n = 0;
    int gpt = r->mc.arch == CZ_ARCH_GPT;
    snprintf(ov[n++], sizeof ov[0], "model.arch=%s", gpt ? "gpt" : "bert");
    snprintf(ov[n++], sizeof ov[0], "data.seq=%d", o->max_seq);
    snprintf(ov[n++], sizeof ov[0], "data.max_pred=%d", gpt ? 0 : 1);
    snprintf(ov[n++], sizeof ov[0], "train.steps=%ld", r->steps);
    snprintf(ov[n++], sizeof ov[0], "train.global_batch=%d", o->batch * r->group);
    snprintf(ov[n++], sizeof ov[0], "train.micro_batch=%d", r->micro);
    snprintf(ov[n++], sizeof ov[0], "train.seed=%llu", o->seed);
    snprintf(ov[n++], sizeof ov[0], "train.threads=%d", o->threads);
    snprintf(ov[n++], sizeof ov[0], "train.log_every=%ld", r->steps / 20 > 0 ? r->steps / 20 : 1);
    snprintf(ov[n++], sizeof ov[0], "train.eval_every=%ld",
             o->eval_epochs ? r->steps_per_epoch : 0L);
    snprintf(ov[n++], sizeof ov[0], "train.ckpt_every=%ld", r->steps_per_epoch);
    snprintf(ov[n++], sizeof ov[0], "train.keep_last=1");
    snprintf(ov[n++], sizeof ov[0], "train.stop_after_steps=%ld", o->stop_after);
    snprintf(ov[n++], sizeof ov[0], "train.run_dir=%s", o->out_dir);
    const char *ovp[24];
    for (int i = 0; i < n; i++) ovp[i] = ov[i];
    if (cz_config_load(cfg, NULL, ovp, n, err)) return -1;
    cfg->model = r->mc;
    /* the recipe: AdamW with bias correction, BERT's eps, decay 0.01 but on
     * biases and LayerNorm, linear warm-up and decay, clipping at 1 */
    cfg->optim.lr = o->lr;
    cfg->optim.eps = 1e-6;
    cfg->optim.beta1 = 0.9;
    cfg->optim.beta2 = 0.999;
    cfg->optim.weight_decay = o->weight_decay;
    cfg->optim.bias_correction = 1;
    cfg->optim.clip_norm = 1.0;
    cfg->optim.schedule = CZ_SCHEDULE_LINEAR;
    cfg->optim.warmup_steps = 0;
    cfg->optim.warmup_fraction = o->warmup_fraction;
    cfg->optim.min_lr_ratio = 0;
    snprintf(cfg->source, sizeof cfg->source, "cloze-finetune %s", r->task.name);
    (void)ranks;
    return cz_config_validate(cfg, err);
}

static void run_free(ft_run *r) {
    if (r->tok) cz_tokenizer_free(r->tok);
    cz_ft_features_free(&r->ftrain);
    cz_ft_features_free(&r->fdev);
    cz_ft_features_free(&r->ftest);
    cz_ft_dataset_free(&r->train);
    cz_ft_dataset_free(&r->dev);
    cz_ft_dataset_free(&r->test);
    if (r->buf_ok) cz_batch_buf_free(&r->buf);
    if (r->results) fclose(r->results);
    base_free(&r->base);
}

/* The feature set-up of the model r->mc and tokenizer r->tok. */
static int feature_config(const ft_run *r, cz_ft_feature_config *fc, cz_error *err) {
    const cz_ft_options *o = r->o;
    int gpt = r->mc.arch == CZ_ARCH_GPT;
    *fc = (cz_ft_feature_config){.max_seq = o->max_seq,
                                 .doc_stride = o->doc_stride,
                                 .max_query = o->max_query,
                                 .gpt = gpt,
                                 .lower_case = r->base.vocab.lower_case,
                                 .similarity = r->task.similarity};
    if (gpt) { /* GPT-1 Sec. 3.3: start, delimiter and extract tokens, the last three ids */
        fc->start = r->mc.vocab_size - 3;
        fc->delim = fc->start + 1;
        fc->extract = fc->start + 2;
        fc->pad = 0;
        return 0;
    }
    fc->cls = cz_tokenizer_token_id(r->tok, "[CLS]");
    fc->sep = cz_tokenizer_token_id(r->tok, "[SEP]");
    fc->pad = cz_tokenizer_token_id(r->tok, "[PAD]");
    if (fc->cls < 0 || fc->sep < 0 || fc->pad < 0)
        return cz_fail(err, "the vocabulary lacks [CLS], [SEP] or [PAD]");
    return 0;
}

/* Reads and tokenizes a test file (--test, predict's --input): labels are
 * optional there. */
static int prepare_test(ft_run *r, const cz_ft_feature_config *fc, cz_error *err) {
    const cz_ft_options *o = r->o;
    if (cz_ft_read(&r->test, &r->task, o->test_path, CZ_FT_MAY_LACK_LABELS, err)) return -1;
    if (o->test_limit > 0) cz_ft_dataset_truncate(&r->test, o->test_limit);
    return cz_ft_featurize(&r->ftest, &r->test, r->tok, fc, err);
}

/* Reads and tokenizes the files (every rank: any rank builds any sample). */
static int prepare_data(ft_run *r, cz_error *err) {
    const cz_ft_options *o = r->o;
    if (cz_ft_read(&r->train, &r->task, o->train_path, CZ_FT_COLLECT, err) ||
        cz_ft_read(&r->dev, &r->task, o->dev_path, 0, err))
        return -1;
    if (o->train_limit > 0) cz_ft_dataset_truncate(&r->train, o->train_limit);
    if (o->dev_limit > 0) cz_ft_dataset_truncate(&r->dev, o->dev_limit);
    cz_ft_feature_config fc;
    if (feature_config(r, &fc, err) || cz_ft_featurize(&r->ftrain, &r->train, r->tok, &fc, err) ||
        cz_ft_featurize(&r->fdev, &r->dev, r->tok, &fc, err))
        return -1;
    if (o->test_path[0] && prepare_test(r, &fc, err)) return -1;
    r->group = r->ftrain.group;
    return 0;
}

/* An option that becomes a key of the train configuration is checked by
 * that key's own range (the key table, src/config/keys.c), the message
 * naming the option the user typed. */
static int check_as_key(const char *option, const char *key, double v, cz_error *err) {
    char range[128];
    if (cz_config_check_number(key, v, range, sizeof range) == 0) return 0;
    return cz_fail(err, "%s %g: must be %s", option, v, range);
}

/* The recipe's options, checked before anything is read or written, each
 * named as the user typed it. */
static int check_options(const cz_ft_options *o, int ranks, cz_error *err) {
    if (check_as_key("--lr", "optim.lr", o->lr, err) ||
        check_as_key("--warmup", "optim.warmup_fraction", o->warmup_fraction, err) ||
        check_as_key("--weight-decay", "optim.weight_decay", o->weight_decay, err))
        return -1;
    if (o->batch < 1) return cz_fail(err, "--batch %d: must be at least 1", o->batch);
    if (o->epochs < 1) return cz_fail(err, "--epochs %d: must be at least 1", o->epochs);
    if (o->dropout >= 1) return cz_fail(err, "--dropout %g must be in [0, 1)", (double)o->dropout);
    if (!(o->lm_weight >= 0))
        return cz_fail(err, "--lm-weight %g: must be at least 0", (double)o->lm_weight);
    if (o->micro_batch < 0 || o->threads < 0 || o->train_limit < 0 || o->dev_limit < 0 ||
        o->test_limit < 0 || o->stop_after < 0)
        return cz_fail(err, "--micro-batch, --threads, --stop-after and the limits must not be "
                            "negative");
    if (o->doc_stride < 1 || o->max_query < 1 || o->max_answer < 1)
        return cz_fail(err, "--doc-stride, --max-query and --max-answer must be at least 1");
    if (o->batch % ranks)
        return cz_fail(err, "--batch %d is not a multiple of the %d ranks", o->batch, ranks);
    int micro = o->micro_batch > 0 ? o->micro_batch : o->batch / ranks;
    if ((o->batch / ranks) % micro)
        return cz_fail(err, "--micro-batch %d does not divide batch / ranks = %d", micro,
                       o->batch / ranks);
    return 0;
}

/* The set-up every rank does alike before the first collective: the
 * options' checks and the model read. Nothing is written yet. */
static int setup_base(ft_run *r, cz_error *err) {
    const cz_ft_options *o = r->o;
    int ranks = r->world->size;
    if (check_options(o, ranks, err)) return -1;
    r->micro = o->micro_batch > 0 ? o->micro_batch : o->batch / ranks;
    return base_load(&r->base, o->init, err);
}

/* The rest of the set-up: the tokenizer (rank 0 writes the vocabulary),
 * the fine-tuning model's configuration, the task's data and the train
 * runtime's configuration. */
static int setup_data(ft_run *r, cz_config *cfg, cz_error *err) {
    const cz_ft_options *o = r->o;
    if (load_tokenizer(r->world, &r->base, o->out_dir, &r->tok, r->made, err)) return -1;
    /* the fine-tuning model: the base architecture with the task's head */
    r->mc = r->base.mc;
    r->mc.head = r->task.kind == CZ_FT_CHOICE ? CZ_HEAD_CHOICE
                 : r->task.kind == CZ_FT_SPAN ? CZ_HEAD_SPAN
                 : r->task.kind == CZ_FT_TAG  ? CZ_HEAD_TAG
                 : r->task.similarity         ? CZ_HEAD_SIMILAR
                                              : CZ_HEAD_CLASSIFY;
    r->mc.lm_weight = 0;
    r->mc.recompute = 0;
    if (o->dropout >= 0) r->mc.hidden_dropout = r->mc.attn_dropout = o->dropout;
    if (r->mc.arch == CZ_ARCH_GPT) {
        if (r->base.mc.head == CZ_HEAD_PRETRAIN || r->base.mc.head == CZ_HEAD_NONE)
            r->mc.vocab_size = r->base.mc.vocab_size + 3; /* <s> $ <e> */
        r->mc.lm_weight = o->lm_weight;
    }
    if (prepare_data(r, err)) return -1;
    r->mc.num_labels = r->task.kind == CZ_FT_SPAN ? 0 : r->task.n_labels;
    if (o->max_seq > r->mc.max_positions)
        return cz_fail(err, "--max-seq %d exceeds the model's %d positions", o->max_seq,
                       r->mc.max_positions);
    r->micro *= r->group; /* whole examples */
    int n_ex = r->ftrain.n / r->group;
    r->steps_per_epoch = (n_ex + o->batch - 1) / o->batch;
    r->steps = (long)ceil((double)o->epochs * n_ex / o->batch);
    if (make_config(r, r->world->size, cfg, err)) return -1;
    if (cz_batch_buf_alloc(&r->buf, r->micro, o->max_seq, 1, err)) return -1;
    r->buf_ok = 1;
    return 0;
}

/* One line per file: what truncation cut (examples, words, answers), or
 * that nothing was. */
static void log_truncation(const ft_run *r, const char *what, const cz_ft_dataset *d,
                           const cz_ft_features *f) {
    char cut[256];
    cz_ft_truncation_text(f, d, r->o->max_query, cut, sizeof cut);
    int train = !strcmp(what, "train");
    const char *means = !f->words_lost && !f->answers_lost ? ""
                        : d->kind == CZ_FT_TAG
                            ? (train ? " (no loss on them)" : " (predicted as class 0)")
                            : (train ? " (trained as no answer)" : " (not found)");
    if (f->truncated || f->answers_lost) /* said even with --quiet */
        cz_warn("%s file %s: %s%s; raise --max-seq%s to keep them", what, d->path, cut, means,
                d->kind == CZ_FT_SPAN ? " or --max-query" : "");
    else if (!r->o->quiet)
        cz_info("%s file %s: %d examples, %s at %d tokens", what, d->path, d->n, cut, f->T);
}

/* cz_ft_run after the agreed set-up: rank 0 opens results.jsonl and says
 * what the run will do, then the train runtime runs the task with the
 * fine-tuning blobs in its checkpoints. */
static int ft_train(ft_run *r, cz_config *cfg, cz_error *err) {
    const cz_ft_options *o = r->o;
    if (r->world->rank == 0) {
        char path[1200];
        snprintf(path, sizeof path, "%s/results.jsonl", o->out_dir);
        r->results = fopen(path, "a");
        if (!o->quiet)
            cz_info("%s: %d training examples -> %d features, %d dev examples -> %d features%s; "
                    "%ld steps of %d (%ld per epoch), lr %g",
                    r->task.name, r->train.n, r->ftrain.n, r->dev.n, r->fdev.n,
                    o->test_path[0] ? ", and a test file" : "", r->steps, o->batch,
                    r->steps_per_epoch, o->lr);
        log_truncation(r, "train", &r->train, &r->ftrain);
        log_truncation(r, "dev", &r->dev, &r->fdev);
        if (o->test_path[0]) log_truncation(r, "test", &r->test, &r->ftest);
    }
    /* what a checkpoint of this run holds beside the train runtime's blobs:
     * its head (so that it can be exported or fine-tuned further) */
    cz_hf_head_text(&r->mc, r->head_blob, sizeof r->head_blob);
    cz_hf_task_text(r->task.name, r->task.labels, r->task.n_labels, r->task_blob,
                    sizeof r->task_blob);
    r->blobs[0] = (cz_blob){CZ_BLOB_FT_HEAD, r->head_blob, strlen(r->head_blob)};
    r->blobs[1] = (cz_blob){CZ_BLOB_FT_TASK, r->task_blob, strlen(r->task_blob)};
    cz_blob all[5] = {r->blobs[0], r->blobs[1]};
    char meta[1400];
    int nb = 2;
    if (r->base.has_vocab) nb += cz_hf_vocab_blobs(&r->base.vocab, meta, sizeof meta, all + 2);
    cz_train_task task = {r, build_sample, init_model, evaluate, all, nb, !o->pad_max};
    cz_train_options to = {
        .resume = o->resume, .quiet = o->quiet, .allow_config_change = o->allow_config_change};
    int rc = cz_train_run_task(r->world, cfg, &to, &task, err);
    if (r->res) {
        r->res->steps = r->steps;
        r->res->seconds = cz_now() - r->t0;
    }
    return rc;
}

int cz_ft_run(const cz_comm *world, const cz_ft_options *o, cz_ft_result *res, cz_error *err) {
    ft_run r;
    memset(&r, 0, sizeof r);
    r.world = world;
    r.o = o;
    r.res = res;
    r.t0 = cz_now();
    if (res) memset(res, 0, sizeof *res);
    r.task = o->task;
    /* every rank reads the same model and files and decides alike: a
     * failure is every rank's, said once (cz_comm_agree_setup), not an
     * MPI_Abort, and rank 0 removes what the failed set-up made */
    cz_config cfg;
    int rc = cz_comm_agree_setup(world, setup_base(&r, err), err);
    if (rc == 0) rc = cz_comm_agree_setup(world, setup_data(&r, &cfg, err), err);
    if (rc != 0 && world->rank == 0) undo_made(o->out_dir, r.made);
    if (rc == 0) rc = ft_train(&r, &cfg, err);
    run_free(&r);
    return rc;
}

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
    run_free(&x->r);
}

/* The extraction's set-up after the model is read and the GEMM made: the
 * tokenizer (its vocabulary into dir), the file's features, the layers,
 * the model with the checkpoint's weights and the output buffers. */
static int extract_prepare(ft_extract *x, const char *dir, const int *layers, cz_error *err) {
    ft_run *r = &x->r;
    const cz_ft_options *o = r->o;
    if (load_tokenizer(r->world, &r->base, dir, &r->tok, r->made, err)) return -1;
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
    copy_tensors(x->m, &r->base, fresh, sizeof fresh);
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
    int rc = cz_comm_agree_setup(world, base_load(&x->r.base, x->r.o->init, err), err);
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
            copy_feature(&r->fdev, first + j, &r->buf, j, (uint64_t)(first + j));
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
    if (any_failed(world, rc, "feature extraction", err) ||
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

/* ---- predictions on a file ---- */

/* The task a fine-tuned checkpoint was trained for and its classes in
 * their order ("finetune.task": "task NAME\nlabels A B ...", cz_ft_run's
 * blob): the logits' columns mean these labels, whatever order a new
 * reading of a training file would give. */
static int task_from_ckpt(const ft_base *b, cz_ft_task *t, const char *init, cz_error *err) {
    char name[CZ_HF_LABEL_LEN];
    int k = b->ck ? cz_hf_task_from_ckpt(b->ck, name, t->labels, CZ_FT_MAX_LABELS) : -1;
    if (k < 0)
        return cz_fail(err,
                       "%s: not a fine-tuned checkpoint (no finetune.task blob); predict takes "
                       "the checkpoint of a cloze-finetune run (--init)",
                       init);
    if (strcmp(name, t->name))
        return cz_fail(err, "--task %s, but %s was fine-tuned on %s", t->name, init, name);
    if (t->kind != CZ_FT_SPAN && k < 2)
        return cz_fail(err, "%s: finetune.task: %d label(s)", init, k);
    t->n_labels = k;
    return 0;
}

/* predict's set-up after the model is read: the tokenizer, the input's
 * features, the model with the checkpoint's weights. */
static int predict_setup(ft_run *r, cz_gemm_ctx *gemm, cz_model **m, cz_error *err) {
    const cz_ft_options *o = r->o;
    if (load_tokenizer(r->world, &r->base, o->out_dir, &r->tok, r->made, err)) return -1;
    r->mc = r->base.mc;
    cz_ft_feature_config fc;
    if (feature_config(r, &fc, err) || prepare_test(r, &fc, err)) return -1;
    if (o->max_seq > r->mc.max_positions)
        return cz_fail(err, "--max-seq %d exceeds the model's %d positions", o->max_seq,
                       r->mc.max_positions);
    r->group = r->ftest.group;
    r->micro = (o->micro_batch > 0 ? o->micro_batch : 16) * r->group;
    if (cz_model_create(m, &r->mc, r->micro, o->max_seq, 1, gemm, err)) return -1;
    char fresh[512];
    if (copy_tensors(*m, &r->base, fresh, sizeof fresh) > 0)
        return cz_fail(err, "%s: the checkpoint lacks %s", o->init, fresh);
    if (cz_batch_buf_alloc(&r->buf, r->micro, o->max_seq, 1, err)) return -1;
    r->buf_ok = 1;
    return 0;
}

/* predict's scores.json: the figures run reports, for a labelled input. */
static int write_scores(const ft_run *r, const cz_ft_scores *s, const char *written,
                        cz_error *err) {
    char path[1200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/scores.json", r->o->out_dir);
    FILE *f = open_memstream(&text, &len);
    if (!f) return cz_fail(err, "out of memory");
    put_split_result(f, r, FT_INPUT, &r->test, &r->ftest, s, 0, written);
    fclose(f);
    int rc = cz_write_file_atomic(path, text, len, err);
    free(text);
    return rc;
}

/* predict's set-up, agreed as cz_ft_run's: every rank alike, a failure
 * said once, nothing left behind that the failed set-up made. */
static int predict_agreed_setup(ft_run *r, cz_ft_options *o, cz_gemm_ctx **gemm, cz_model **m,
                                cz_error *err) {
    const cz_comm *world = r->world;
    int setup = o->test_limit < 0 || o->micro_batch < 0 || o->threads < 0 || o->max_seq < 0
                    ? cz_fail(err, "--limit, --micro-batch, --threads and --max-seq must not be "
                                   "negative")
                    : base_load(&r->base, o->init, err);
    if (setup == 0) setup = task_from_ckpt(&r->base, &r->task, o->init, err);
    if (setup == 0 && !o->max_seq) o->max_seq = r->base.seq; /* the fine-tuning run's */
    int threads = 0, rc = cz_comm_agree_setup(world, setup, err);
    if (rc == 0)
        rc =
            cz_comm_agree_setup(world,
                                cz_train_compute_setup(world, o->threads, CZ_GEMM_AUTO,
                                                       r->base.mc.matmul_bf16, &threads, gemm, err),
                                err);
    if (rc == 0) rc = cz_comm_agree_setup(world, predict_setup(r, *gemm, m, err), err);
    if (rc != 0 && world->rank == 0) undo_made(o->out_dir, r->made);
    return rc;
}

/* The input's logits on every rank; rank 0 scores them, writes the
 * predictions (and scores.json for a labelled input) and fills r->res,
 * which every rank then receives. */
static int predict_input(ft_run *r, cz_model *m, cz_error *err) {
    const cz_comm *world = r->world;
    const cz_ft_options *o = r->o;
    cz_ft_result *res = r->res;
    if (world->rank == 0) log_truncation(r, "input", &r->test, &r->ftest);
    float *logits = split_logits(r, m, world, &r->ftest, err);
    int rc = logits ? 0 : -1;
    if (rc == 0 && world->rank == 0) {
        cz_ft_scores s;
        char written[1200];
        rc = score_split(r, FT_INPUT, &r->test, &r->ftest, logits, 1, &s, written, sizeof written,
                         err);
        if (rc == 0 && r->test.labelled) rc = write_scores(r, &s, written, err);
        if (rc == 0 && res) {
            res->test = s;
            res->score = r->test.labelled ? score_of(r->task.metric, &s) : NAN;
            res->finished = 1;
            res->seconds = cz_now() - r->t0;
        }
        if (rc == 0 && !o->quiet && r->test.labelled)
            cz_info("%s: %s %.2f over %ld examples; predictions in %s, scores in %s/scores.json",
                    r->test.path, metric_name(r->task.metric), score_of(r->task.metric, &s), s.n,
                    written, o->out_dir);
        else if (rc == 0 && !o->quiet)
            cz_info("%s: %ld examples without labels; predictions in %s", r->test.path, s.n,
                    written);
    }
    if (cz_comm_share_verdict(world, 0, rc, err) < 0) rc = -1;
    if (rc == 0 && res && cz_comm_bcast(world, res, sizeof *res, 0, err)) rc = -1;
    free(logits);
    return rc;
}

int cz_ft_predict(const cz_comm *world, const cz_ft_options *opt, cz_ft_result *res,
                  cz_error *err) {
    cz_ft_options o = *opt;
    ft_run r;
    memset(&r, 0, sizeof r);
    r.world = world;
    r.o = &o;
    r.res = res;
    r.t0 = cz_now();
    r.task = o.task;
    if (res) memset(res, 0, sizeof *res);
    cz_model *m = NULL;
    cz_gemm_ctx *gemm = NULL;
    int rc = predict_agreed_setup(&r, &o, &gemm, &m, err);
    if (rc == 0) rc = predict_input(&r, m, err);
    cz_model_free(m);
    if (gemm) cz_gemm_free(gemm);
    run_free(&r);
    return rc;
}
