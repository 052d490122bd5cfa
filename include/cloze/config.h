/* config: the run configuration, loaded from a libconfig file, validated key
 * by key, with `--set section.key=value` overrides from the command line.
 *
 * One table in src/config/ holds every key: its type, default, range and
 * meaning; docs/config.md is written from the same facts. An unknown key, a
 * wrong type or an impossible value stops with "file:line: message". */
#ifndef CLOZE_CONFIG_H
#define CLOZE_CONFIG_H

#include "cloze/core.h"
#include "cloze/model.h"

#define CZ_PATH_MAX 1024
#define CZ_MAX_PATTERNS 16

typedef struct cz_data_config {
    char train_manifest[CZ_PATH_MAX];   /* shards manifest written by cloze-prep */
    char heldout_manifest[CZ_PATH_MAX]; /* "" = no evaluation */
    int seq;                            /* max_seq_length (BERT 128 / GPT 512) */
    int max_pred;                       /* max_predictions_per_seq (20 at 128) */
    float masked_lm_prob;               /* 0.15 */
    float short_seq_prob;               /* 0.1 */
    int whole_word_mask;                /* 0/1 */
    /* second phase of the BERT length curriculum; phase2_fraction = 0: off */
    float phase2_fraction;   /* e.g. 0.1: last 10% of steps */
    int phase2_seq;          /* 512 */
    int phase2_max_pred;     /* 80 */
    int phase2_global_batch; /* 0 = same as train.global_batch */
    int phase2_micro_batch;  /* 0 = same as train.micro_batch */
} cz_data_config;

typedef struct cz_train_config {
    long steps;       /* total optimizer steps */
    int global_batch; /* sequences per optimizer step, over all ranks */
    int micro_batch;  /* sequences per forward/backward on one rank */
    unsigned long long seed;
    int threads; /* threads per rank (BLIS + our kernels); 0 = cores / ranks on this node */
    int log_every;
    int eval_every;        /* 0 = only at the end */
    int eval_batches;      /* held-out micro-batches per evaluation */
    int ckpt_every;        /* 0 = only at the end */
    int keep_last;         /* checkpoints kept */
    int max_bad_steps;     /* non-finite steps in a row before the run stops */
    long stop_after_steps; /* stop (with a checkpoint) after this many steps of this
                              invocation; 0 = run to train.steps (time-sliced jobs) */
    char run_dir[CZ_PATH_MAX];
    char gemm[16];      /* "auto", "blis", "reference" */
    double peak_gflops; /* per rank, for MFU; 0 = measure at start-up */
} cz_train_config;

typedef struct cz_optim_config {
    char name[16]; /* "adamw" | "lamb" */
    double lr;     /* peak learning rate */
    double beta1, beta2, eps;
    double weight_decay; /* decoupled (Loshchilov & Hutter) */
    int bias_correction; /* original BERT AdamWeightDecayOptimizer: 0 */
    int n_no_decay;
    char no_decay[CZ_MAX_PATTERNS][64]; /* substrings of tensor names excluded from decay */
    double clip_norm;                   /* global gradient-norm clipping; 0 = off */
    char schedule[16];                  /* "linear" | "cosine" | "constant" */
    long warmup_steps;                  /* used when warmup_fraction == 0 */
    double warmup_fraction;
    double min_lr_ratio; /* floor of cosine/linear decay, fraction of lr */
} cz_optim_config;

typedef struct cz_dist_config {
    char allreduce[16]; /* "ring" | "mpi" */
    double bucket_mb;   /* gradient bucket size */
    char placement[16]; /* "coordinator" | "sharded" | "replicated" */
} cz_dist_config;

typedef struct cz_config {
    char source[CZ_PATH_MAX]; /* the file it was loaded from */
    cz_model_config model;
    cz_data_config data;
    cz_train_config train;
    cz_optim_config optim;
    cz_dist_config dist;
} cz_config;

/* Fills every field with its documented default (a BERT-base-like model). */
void cz_config_defaults(cz_config *c);

/* Loads `path` over the defaults, then applies overrides ("model.layers=6"),
 * then validates everything. Messages: "path:line: model.heads: ..." or
 * "--set model.layers=x: ...". path NULL: defaults + overrides only.
 * After the file and overrides: keys not given take their GPT default when
 * model.arch = gpt, intermediate 0 becomes 4 * hidden, and a warmup_steps
 * given without warmup_fraction sets the fraction to 0 (docs/config.md). */
int cz_config_load(cz_config *c, const char *path, const char *const *overrides, int n_overrides,
                   cz_error *err);

/* Applies one "section.key=value" override: type and range of that key are
 * checked, cross-field rules and arch-dependent defaults are not. */
int cz_config_set(cz_config *c, const char *assignment, cz_error *err);

/* Cross-field checks (hidden % heads, seq <= max_positions, ...). */
int cz_config_validate(const cz_config *c, cz_error *err);

/* Writes the complete effective configuration as a libconfig file that
 * cz_config_load reads back to an identical struct (run dir, checkpoints). */
int cz_config_write(const cz_config *c, const char *path, cz_error *err);
/* Same, into a malloc'ed string (checkpoints embed it). Caller frees. */
char *cz_config_to_string(const cz_config *c);
/* Parses a string written by cz_config_to_string. */
int cz_config_from_string(cz_config *c, const char *text, const char *name, cz_error *err);

/* Prints every key with its default and meaning (cloze-train --help-config). */
void cz_config_print_keys(FILE *out);
/* The key reference of docs/config.md (markdown tables, one per section),
 * from the same table; test_config checks the doc against it. */
void cz_config_write_docs(FILE *out);

#endif
