/* One fine-tuning run (include/cloze/finetune.h, "runs") on the train
 * runtime: cz_train_run_task with this file's sample builder and model
 * initialisation and eval.c's dev-set evaluation; and predictions on a
 * file from a fine-tuned checkpoint (cz_ft_predict). Everything else
 * (ranks and the sample-to-rank mapping, gradient sync, AdamW and the schedule,
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

#include "finetune_private.h"

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

static void base_free(ft_base *b) {
    if (b->vocab.owned[0] || b->vocab.owned[1]) cz_hf_vocab_free(&b->vocab);
    cz_model_free(b->m);
    cz_ckpt_free(b->ck);
    memset(b, 0, sizeof *b);
}

int ft_base_load(ft_base *b, const char *init, cz_error *err) {
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
int ft_copy_tensors(cz_model *dst, const ft_base *b, char *fresh, size_t cap) {
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
int ft_load_tokenizer(const cz_comm *world, const ft_base *b, const char *out, cz_tokenizer **tok,
                      int made[2], cz_error *err) {
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

static int build_sample(void *ctx, cz_batch_buf *buf, int slot, uint64_t g, cz_error *err) {
    ft_run *r = ctx;
    uint64_t G = (uint64_t)r->group, n = (uint64_t)r->ftrain.n / G, x = g / G;
    uint64_t i = cz_data_permute(r->o->seed, x / n, n, x % n);
    (void)err;
    ft_copy_feature(&r->ftrain, (int)(i * G + g % G), buf, slot, g);
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
    int n = ft_copy_tensors(m, &r->base, fresh, sizeof fresh);
    if (r->world->rank == 0 && !r->o->quiet)
        cz_info("initialised from %s; %d tensor(s) fresh (seed %llu): %s", r->o->init, n,
                r->o->seed, fresh);
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
    snprintf(ov[n++], sizeof ov[0], "train.tensorboard=%s", o->no_tensorboard ? "false" : "true");
    snprintf(ov[n++], sizeof ov[0], "dist.exact=%s", o->exact ? "true" : "false");
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

void ft_run_free(ft_run *r) {
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

/* Examples per forward: --micro-batch; else batch / ranks, or with --exact
 * the largest divisor of --batch up to FT_EXACT_MICRO. Exact sums need a
 * number that does not follow the rank count: the micro-batches are the
 * terms of the step's sums and the dev set's evaluation batches, so the
 * same ones must be formed on any allocation for the same bits
 * (docs/distributed-design.md, "Exact sums"). 4 examples let BERT's
 * batches of 32 and 16 run on up to 8 and 4 ranks, while the pass that
 * converts each micro-batch's gradient into the sums runs batch / 4 times
 * a step, not once per example. */
#define FT_EXACT_MICRO 4
static int ft_micro_batch(const cz_ft_options *o, int ranks) {
    if (o->micro_batch > 0) return o->micro_batch;
    if (!o->exact) return o->batch / ranks > 0 ? o->batch / ranks : 1;
    int m = o->batch < FT_EXACT_MICRO ? o->batch : FT_EXACT_MICRO;
    while (o->batch % m) m--;
    return m;
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
    if (o->micro_batch == 0 && !o->exact && o->batch % ranks)
        return cz_fail(err,
                       "--batch %d is not a multiple of the %d ranks: give --micro-batch N (a "
                       "divisor of --batch) or --exact to deal micro-batches unevenly",
                       o->batch, ranks);
    int micro = ft_micro_batch(o, ranks);
    if (o->batch % micro)
        return cz_fail(err, "--micro-batch %d does not divide --batch %d", micro, o->batch);
    /* the train runtime deals micro-batch m to rank m mod ranks: every
     * rank must get one (its own check would name train.* keys) */
    if (o->batch / micro < ranks)
        return cz_fail(err,
                       "--batch / --micro-batch = %d / %d = %d micro-batches a step, fewer than "
                       "the %d ranks: run at most %d ranks, or lower --micro-batch",
                       o->batch, micro, o->batch / micro, ranks, o->batch / micro);
    return 0;
}

/* The set-up every rank does alike before the first collective: the
 * options' checks and the model read. Nothing is written yet. */
static int setup_base(ft_run *r, cz_error *err) {
    const cz_ft_options *o = r->o;
    int ranks = r->world->size;
    if (check_options(o, ranks, err)) return -1;
    r->micro = ft_micro_batch(o, ranks);
    return ft_base_load(&r->base, o->init, err);
}

/* The rest of the set-up: the tokenizer (rank 0 writes the vocabulary),
 * the fine-tuning model's configuration, the task's data and the train
 * runtime's configuration. */
static int setup_data(ft_run *r, cz_config *cfg, cz_error *err) {
    const cz_ft_options *o = r->o;
    if (ft_load_tokenizer(r->world, &r->base, o->out_dir, &r->tok, r->made, err)) return -1;
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
    cz_train_task task = {r,   build_sample, init_model,  ft_evaluate,
                          all, nb,           !o->pad_max, ft_eval_scalars};
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
    ft_run_free(&r);
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
    if (ft_load_tokenizer(r->world, &r->base, o->out_dir, &r->tok, r->made, err)) return -1;
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
    if (ft_copy_tensors(*m, &r->base, fresh, sizeof fresh) > 0)
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
    ft_put_split_result(f, r, FT_INPUT, &r->test, &r->ftest, s, 0, written);
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
                    : ft_base_load(&r->base, o->init, err);
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
    float *logits = ft_split_logits(r, m, world, &r->ftest, err);
    int rc = logits ? 0 : -1;
    if (rc == 0 && world->rank == 0) {
        cz_ft_scores s;
        char written[1200];
        rc = ft_score_split(r, FT_INPUT, &r->test, &r->ftest, logits, 1, &s, written,
                            sizeof written, err);
        if (rc == 0 && r->test.labelled) rc = write_scores(r, &s, written, err);
        if (rc == 0 && res) {
            res->test = s;
            res->score = r->test.labelled ? ft_score_of(r->task.metric, &s) : NAN;
            res->finished = 1;
            res->seconds = cz_now() - r->t0;
        }
        if (rc == 0 && !o->quiet && r->test.labelled)
            cz_info("%s: %s %.2f over %ld examples; predictions in %s, scores in %s/scores.json",
                    r->test.path, ft_metric_name(r->task.metric), ft_score_of(r->task.metric, &s),
                    s.n, written, o->out_dir);
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
    ft_run_free(&r);
    return rc;
}
