/* finetune: what the fine-tuning run's files share (not a public header):
 * the pre-trained model a run starts from, the run's state and the files
 * it is scored on.
 *
 * The files call one way, each only the ones above it:
 *   tasks.c     the task readers
 *   features.c  featurization
 *   metrics.c   the metrics
 *   eval.c      a file's logits across the ranks, scores, predictions, the
 *               dev-set evaluation the train runtime calls
 *   run.c       options, the pre-trained model and its tokenizer, the run,
 *               predictions on a file
 *   extract.c   feature extraction
 *   grid.c      the grid and its grid.jsonl */
#ifndef CLOZE_FINETUNE_PRIVATE_H
#define CLOZE_FINETUNE_PRIVATE_H

#include <stdio.h>

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

/* A run's state (cz_ft_run), and the same for predictions on a file
 * (cz_ft_predict) and an extraction (cz_ft_extract), which fill what they
 * use of it. */
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
    cz_ft_scores dev_last; /* rank 0: the last dev evaluation's, for ft_eval_scalars */
    int dev_new;
    char dev_tags[5][24];
    int made[2]; /* rank 0's set-up created OUT, OUT/vocab (undo_made) */
} ft_run;

/* A file the model is scored on or predicts: the dev file of a run, its
 * --test file, or predict's --input. */
typedef enum { FT_DEV = 0, FT_TEST = 1, FT_INPUT = 2 } ft_split;

/* ---- eval.c ---- */
void ft_copy_feature(const cz_ft_features *f, int i, cz_batch_buf *buf, int slot, uint64_t g);
/* Every rank learns whether any rank failed (a rank that fails alone must
 * not leave the others waiting in the next collective). */
int ft_any_failed(const cz_comm *comm, int rc, const char *what, cz_error *err);
/* The head's logits of every feature of f, summed over the ranks (every
 * rank holds them; NULL on failure). */
float *ft_split_logits(ft_run *r, cz_model *m, const cz_comm *comm, const cz_ft_features *f,
                       cz_error *err);
int ft_score_split(const ft_run *r, ft_split split, const cz_ft_dataset *d, const cz_ft_features *f,
                   const float *logits, int write, cz_ft_scores *s, char *written, size_t cap,
                   cz_error *err);
const char *ft_metric_name(cz_ft_metric m);
double ft_score_of(cz_ft_metric m, const cz_ft_scores *s);
void ft_put_split_result(FILE *f, const ft_run *r, ft_split split, const cz_ft_dataset *d,
                         const cz_ft_features *fe, const cz_ft_scores *s, long step,
                         const char *written);
/* The train runtime's evaluation of a run (cz_train_task.evaluate). */
int ft_evaluate(void *ctx, cz_model *m, const cz_comm *comm, long step, int final, cz_error *err);
/* Rank 0: the dev figures ft_evaluate just wrote, as TensorBoard scalars
 * (cz_train_task.eval_scalars); 0 when it scored nothing since the last call. */
int ft_eval_scalars(void *ctx, cz_scalar *v, int max);

/* ---- run.c ---- */
int ft_base_load(ft_base *b, const char *init, cz_error *err);
int ft_copy_tensors(cz_model *dst, const ft_base *b, char *fresh, size_t cap);
int ft_load_tokenizer(const cz_comm *world, const ft_base *b, const char *out, cz_tokenizer **tok,
                      int made[2], cz_error *err);
void ft_run_free(ft_run *r);

#endif
