/* finetune: supervised fine-tuning of a pre-trained (or imported) model, as
 * both papers end: BERT Sec. 4 (sentence and pair classification on [CLS],
 * span question answering, token tagging; App. A.3's grid, restarts and
 * dev-set selection) and GPT-1 Sec. 3.2-3.3 (the last token's state into a
 * linear classifier, the auxiliary LM loss, the input transformations).
 *
 * This header has four parts, bottom up:
 *   tasks     readers of the task files (GLUE-style TSV with named columns,
 *             SQuAD v1.1 JSON, CoNLL BIO columns, multiple-choice JSON
 *             lines) into examples;
 *   features  examples -> fixed-length model inputs (WordPiece / BPE ids,
 *             segments, labels; SQuAD windows with a document stride);
 *   metrics   accuracy, F1, Matthews correlation, SQuAD EM/F1 with the
 *             official answer normalisation, conlleval's entity F1;
 *   runs      one fine-tuning run on MPI ranks (the train runtime),
 *             predictions on a test file, feature extraction (run.c);
 *   grid      BERT App. A.3's grid of runs and its file grid.jsonl, written
 *             and read back in one place (grid.c).
 * The tokenizer is the text module's (cloze/text.h). */
#ifndef CLOZE_FINETUNE_H
#define CLOZE_FINETUNE_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/comm.h"
#include "cloze/core.h"
#include "cloze/model.h"

struct cz_tokenizer;

/* ---- tasks ---- */

typedef enum { CZ_FT_CLASSIFY = 0, CZ_FT_SPAN = 1, CZ_FT_TAG = 2, CZ_FT_CHOICE = 3 } cz_ft_kind;

/* The dev-set figure a task is selected by (BERT App. A.3; GLUE's choice
 * per task: accuracy, F1 for MRPC, Matthews correlation for CoLA). */
typedef enum {
    CZ_FT_ACCURACY = 0,
    CZ_FT_F1 = 1,  /* binary F1 of class 1 */
    CZ_FT_MCC = 2, /* Matthews correlation */
    CZ_FT_SQUAD = 3,
    CZ_FT_ENTITY_F1 = 4
} cz_ft_metric;

#define CZ_FT_MAX_LABELS 64

/* Where a task's fields are and what they mean. A preset (sst2, mrpc, rte,
 * cola, squad, wnut17 / conll) fills everything from the task's name; "tsv"
 * takes the columns given. Columns are header names or 0-based indices. */
typedef struct cz_ft_task {
    char name[32];
    cz_ft_kind kind;
    cz_ft_metric metric;
    /* TSV */
    int header;                             /* 1: the first line names the columns */
    char text_a[64], text_b[64], label[64]; /* text_b "": single sentences */
    /* labels in class order; n_labels 0 = collect them from the training file
     * (sorted; CoNLL: "O" first) */
    int n_labels;
    char labels[CZ_FT_MAX_LABELS][32];
    /* GPT-1 Sec. 3.3 "Textual similarity": a pair has no inherent order, so
     * both orderings are run and their extract states added (pair
     * classification only; GPT models) */
    int similarity;
} cz_ft_task;

/* Fills t for a known task name; -1 with a message listing the names. */
int cz_ft_task_preset(cz_ft_task *t, const char *name, cz_error *err);
/* Overrides the preset's TSV columns (a header name or a 0-based index;
 * NULL or "" keeps the preset's) and header line (no_header: none). A label
 * column named for a preset other than "tsv" drops the preset's labels:
 * they are collected from the training file. */
void cz_ft_task_columns(cz_ft_task *t, const char *text_a, const char *text_b, const char *label,
                        int no_header);

/* One SQuAD answer: its text and its character offset in the context. */
typedef struct cz_ft_answer {
    char *text;
    int start;
} cz_ft_answer;

/* An example, as read. Classification: a (b), label. Tagging: words with
 * their tags. Span: id, question, context, answers. Choice: a the context
 * (and question), words the n_words candidate endings, label the right
 * one's index. */
typedef struct cz_ft_example {
    char *a, *b;
    int label;
    int n_words;
    char **words;
    int *tags;
    char *id, *question, *context;
    int n_answers;
    cz_ft_answer *answers;
    int *word_start, *word_end; /* SPAN: the context's whitespace words, byte offsets */
} cz_ft_example;

typedef struct cz_ft_dataset {
    cz_ft_kind kind;
    int labelled; /* 0: a file read with CZ_FT_MAY_LACK_LABELS had none (labels 0) */
    int n;
    cz_ft_example *ex;
    char path[1024];
} cz_ft_dataset;

/* cz_ft_read's flags */
enum {
    CZ_FT_COLLECT = 1,        /* a training file: t->n_labels == 0 collects the labels seen */
    CZ_FT_MAY_LACK_LABELS = 2 /* a test file: no label column, tags, answers or "label" */
};

/* Reads a task file. Labels not in t->labels are an error naming the file
 * and line, except when t->n_labels == 0 and flags has CZ_FT_COLLECT: then
 * the set of labels seen is stored in t (a training file). With
 * CZ_FT_MAY_LACK_LABELS a file without them (a TSV whose header lacks the
 * label column, CoNLL lines of tokens alone, SQuAD questions without
 * answers, choice lines without "label") reads with labels 0 and
 * d->labelled = 0. Choice files (JSON lines,
 * docs/finetune.md): every example has the same number K of endings, which
 * becomes t->n_labels (labels "0".."K-1"); a file with another K is an
 * error. */
int cz_ft_read(cz_ft_dataset *d, cz_ft_task *t, const char *path, int flags, cz_error *err);
void cz_ft_dataset_free(cz_ft_dataset *d);
/* Keeps the first n examples (a stated subset of a training file). */
void cz_ft_dataset_truncate(cz_ft_dataset *d, int n);

/* ---- features ---- */

typedef struct cz_ft_feature_config {
    int max_seq;                   /* tokens per sequence, [CLS] and [SEP] included: 128 */
    int doc_stride;                /* SQuAD: tokens between window starts: 128 */
    int max_query;                 /* SQuAD: question tokens kept: 64 */
    int gpt;                       /* GPT input transformation (GPT-1 Sec. 3.3) */
    int32_t cls, sep, pad;         /* BERT special ids */
    int32_t start, delim, extract; /* GPT: the three added tokens (vocab_size + 0, 1, 2) */
    int lower_case;                /* for the SQuAD answer projection */
    int similarity;                /* GPT pairs: both orderings (cz_ft_task.similarity) */
} cz_ft_feature_config;

/* Model inputs of a dataset: n sequences of T tokens, row-major. */
typedef struct cz_ft_features {
    int n, T;
    /* sequences per example: 1; 2 for similarity (a $ b, then b $ a); K for
     * choice (one per ending). Example e owns rows group*e .. group*e+group-1,
     * each carrying its label. */
    int group;
    int32_t *tokens, *segments;
    uint8_t *mask;
    int32_t *label;       /* [n] CLASSIFY */
    int32_t *cls_index;   /* [n] GPT: position of the extract token */
    int32_t *targets;     /* [n*T] GPT: next token (auxiliary LM loss), -1 = none */
    int32_t *start, *end; /* [n] SPAN (training: the answer, or 0 = [CLS] outside) */
    int32_t *token_label; /* [n*T] TAG: the word's tag on its first piece, -1 elsewhere */
    int32_t *example;     /* [n] the example a feature comes from */
    /* SPAN, for predictions: the context word of each token (-1 outside the
     * context) and whether this window is the token's best context (most
     * context on its shorter side, BERT's _check_is_max_context) */
    int32_t *word_of;
    uint8_t *max_context;
    /* TAG, for predictions: the token of each word's first piece, -1 when
     * the sentence was cut at max_seq */
    int32_t *first_piece; /* [total words], indexed by word_base[example] + word */
    int32_t *word_base;   /* [examples] */
    /* what truncation lost: CLASSIFY / CHOICE / TAG examples cut to max_seq
     * (SPAN: questions cut to max_query), TAG words after the cut (they get
     * no logits and count as class 0), SPAN questions whose (first) answer
     * lies in no window whole (the model cannot point at it) */
    int truncated, words_lost, answers_lost;
} cz_ft_features;

/* One clause saying what truncation cut in f (of dataset d), e.g. "66 of
 * 1287 sentences cut to 64 tokens: 991 of 23394 words (4.2%) lost", or
 * "nothing cut". */
void cz_ft_truncation_text(const cz_ft_features *f, const cz_ft_dataset *d, int max_query,
                           char *buf, size_t cap);

/* Tokenizes every example. Classification: [CLS] a [SEP] b [SEP] with
 * segments 0/1, the longer text truncated first (BERT's
 * _truncate_seq_pair); GPT: <start> a <delim> b <extract>, with
 * similarity also <start> b <delim> a <extract>. Choice: one such pair
 * sequence per ending (context, ending). Span: one
 * feature per window of the context (stride doc_stride), [CLS] question
 * [SEP] window [SEP]. Tag: [CLS] pieces [SEP], the tag on each word's first
 * piece. */
int cz_ft_featurize(cz_ft_features *f, const cz_ft_dataset *d, const struct cz_tokenizer *tok,
                    const cz_ft_feature_config *c, cz_error *err);
void cz_ft_features_free(cz_ft_features *f);

/* ---- metrics ---- */

typedef struct cz_ft_scores {
    double accuracy, f1, mcc;            /* classification (f1: class 1 positive) */
    double exact, squad_f1;              /* SQuAD, in percent */
    double precision, recall, entity_f1; /* conlleval, in percent */
    long n;
} cz_ft_scores;

/* Classification figures of predictions against gold labels. */
void cz_ft_classify_scores(const int *gold, const int *pred, long n, cz_ft_scores *s);

/* SQuAD v1.1's answer normalisation: lower-case, punctuation removed (ASCII
 * string.punctuation), articles a/an/the removed, whitespace collapsed.
 * Returns a malloc'ed string. */
char *cz_ft_squad_normalize(const char *s);
/* Max over the gold answers of exact match and token F1 of one prediction
 * (the official evaluate-v1.1.py), each 0 or 1 / in [0, 1]. */
void cz_ft_squad_score(const char *pred, char *const *gold, int n_gold, double *em, double *f1);

/* conlleval's chunk F1: chunks from IOB/BIO tags (a chunk starts at B-X, or
 * at I-X after O or another type; "O" and tags without a prefix end it),
 * precision and recall over exact (type, begin, end) matches. tags index
 * names[] (e.g. "B-person"). */
void cz_ft_entity_scores(const int *gold, const int *pred, const int *sentence_len, int n_sentences,
                         char (*names)[32], cz_ft_scores *s);

/* ---- predictions ---- */

/* SQuAD: the best valid span of one example over its windows (start <= end,
 * both in the context, length <= max_answer tokens, the start token's max
 * context window; score = start + end logit), and its text cut from the
 * original context (the words the span covers, cut to where the predicted
 * pieces' characters begin and end, as BERT's get_final_text). logits:
 * [features, T, 2] as cz_model_head_logits lays
 * them out for consecutive features. Returns a malloc'ed string. */
char *cz_ft_squad_answer(const cz_ft_features *f, const cz_ft_dataset *d,
                         const struct cz_tokenizer *tok, int example, const float *logits,
                         int first_feature, int n_features, int max_answer, int n_best);

/* ---- runs ---- */

/* One fine-tuning run (cloze-finetune run): the recipe's knobs. */
typedef struct cz_ft_options {
    char init[1024]; /* a cloze checkpoint (.lz4) or a Hugging Face directory */
    int random_init; /* 1: the architecture and vocabulary of init, not its weights */
    cz_ft_task task;
    char train_path[1024], dev_path[1024];
    char test_path[1024];                   /* run --test, predict --input; "" = none */
    int train_limit, dev_limit, test_limit; /* > 0: only the first N examples */
    int max_seq, doc_stride, max_query, max_answer, n_best;
    double lr, warmup_fraction, weight_decay;
    int batch;       /* examples per optimizer step, over all ranks */
    int micro_batch; /* per forward on one rank; 0 = batch / ranks, with exact the largest
                      * divisor of batch up to 4 (the same on any rank count) */
    int epochs;
    unsigned long long seed; /* data order, head initialisation, dropout */
    float lm_weight;         /* GPT: lambda of the auxiliary LM loss */
    float dropout;           /* >= 0: hidden and attention dropout; < 0: the model's own */
    int threads;             /* per rank; 0 = cores / ranks */
    int pad_max;             /* 1: batches padded to max_seq; 0: to their longest sequence */
    int eval_epochs;         /* 1: dev scores after every epoch, not only the last */
    int exact;               /* 1: dist.exact: the same bits on any allocation */
    long stop_after;         /* > 0: stop with a checkpoint after N steps (time slices) */
    char out_dir[1024];
    const char *resume;      /* NULL, "auto" or a checkpoint */
    int allow_config_change; /* resume although the recipe changed (cz_train_options) */
    int quiet;
    int no_tensorboard; /* 1: train.tensorboard = false (no event files in out_dir) */
    char label[128];    /* names the run in results.jsonl (the grid's point) */
} cz_ft_options;

void cz_ft_options_default(cz_ft_options *o);

typedef struct cz_ft_result {
    double score; /* the task's selection figure on dev, in percent */
    cz_ft_scores dev;
    cz_ft_scores test; /* --test (rank 0), predict's --input */
    long steps;
    double seconds;
    int finished; /* 0: stopped early (--stop-after, a signal): continue with --resume auto */
} cz_ft_result;

/* Runs on the ranks of world (cz_comm_init): writes OUT/results.jsonl
 * (a line per evaluation), OUT/metrics.jsonl and checkpoints (the train
 * runtime's), OUT/vocab/, and for SQuAD OUT/predictions.json. Returns 0,
 * CZ_TRAIN_ERR_ALL_RANKS when every rank holds the same error (a bad option,
 * model or task file: say it once and end without MPI_Abort), or -1 for an
 * error of this rank alone (end the job). */
int cz_ft_run(const cz_comm *world, const cz_ft_options *o, cz_ft_result *res, cz_error *err);

/* cloze-finetune predict: the fine-tuned checkpoint o->init (a run's
 * ckpt-*.lz4: its head, task and label order) on the file o->test_path,
 * labelled or not. Writes OUT/predictions.txt (a label per line:
 * classification, choice), OUT/predictions.conll (token<TAB>tag, a blank
 * line after each sentence) or OUT/predictions.json (SQuAD's official
 * {id: answer}), OUT/vocab/, and for a labelled file OUT/scores.json with
 * the figures run reports on a dev file. o->max_seq 0: the fine-tuning
 * run's. res->test holds the scores, res->score the task's figure (NaN
 * without labels). Returns as cz_ft_run. */
int cz_ft_predict(const cz_comm *world, const cz_ft_options *o, cz_ft_result *res, cz_error *err);

/* Feature extraction (BERT Sec. 5.3, the feature-based approach): the
 * per-token states of the chosen layers (negative = from the top: -1 is the
 * last layer, 0 the embeddings), concatenated, for every sequence of
 * o->dev_path read as o->task (classification layouts, or [CLS] pieces
 * [SEP] for tagging). Writes out_path (safetensors): "features" [N*T,
 * k*H], "mask" [N*T], "tokens" [N*T], and for tagging "first_piece_of_word"
 * [N*T] (the word index at each word's first piece, -1 elsewhere), all F32.
 * Ranks split the sequences; rank 0 writes. */
int cz_ft_extract(const cz_comm *world, const cz_ft_options *o, const int *layers, int n_layers,
                  const char *out_path, cz_error *err);

/* ---- the grid (grid.c): BERT App. A.3, and its file grid.jsonl ---- */

/* cloze-finetune grid: every lr x batch x epochs configuration, restarts
 * with seeds o->seed .. o->seed + restarts - 1, each run in
 * OUT/lr<X>-b<N>-e<N>-s<N>/ (resumed there: a finished run is kept). */
typedef struct cz_ft_grid {
    const double *lr;
    const int *batch, *epochs;
    int n_lr, n_batch, n_epochs;
    int restarts; /* <= 0: 1 */
} cz_ft_grid;

/* One run of the grid: a "point" record of grid.jsonl. */
typedef struct cz_ft_grid_point {
    double lr;
    int batch, epochs;
    unsigned long long seed;
    double score; /* the run's final dev score (percent) */
    char dir[CZ_PATH_MAX + 64];
} cz_ft_grid_point;

/* Runs the grid on the ranks of world, then rank 0 prints the table and
 * writes OUT/grid.jsonl: a "point" record per run, a "config" record per
 * configuration (mean and sample std over its restarts) and the "selected"
 * configuration (best dev mean; docs/finetune.md). A grid stopped by a
 * signal returns 0 without grid.jsonl: the same call resumes it. Returns as
 * cz_ft_run. */
int cz_ft_grid_run(const cz_comm *world, const cz_ft_options *o, const cz_ft_grid *g,
                   cz_error *err);

/* What grid.jsonl says of the selected configuration. */
typedef struct cz_ft_grid_selection {
    double mean, std; /* dev score (percent): mean and sample std over its restarts */
    int restarts;
    char metric[32]; /* the task's selection figure: accuracy, f1, mcc, ... */
} cz_ft_grid_selection;

/* Reads DIR/grid.jsonl: 0 with the selection, 1 when the grid has not
 * finished (no grid.jsonl, or no selected configuration in it), -1 with
 * err when memory runs out. */
int cz_ft_grid_read(const char *dir, cz_ft_grid_selection *out, cz_error *err);

#endif
