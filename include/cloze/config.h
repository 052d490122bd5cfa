/* config: the run configuration, loaded from a libconfig file, validated key
 * by key, with `--set section.key=value` overrides from the command line.
 *
 * config sits above the modules it configures and aggregates their own
 * structs: cz_model_config (model.h), cz_data_config (data.h),
 * cz_optim_config (optim.h), cz_comm_config (comm.h). Only the train
 * section is defined here, because train, the one reader of the whole
 * aggregate, sits above config. The file's sections are model, data, train,
 * optim and dist; dist.allreduce and dist.bucket_mb fill cz_comm_config,
 * dist.placement fills cz_optim_config.placement (the optimizer decides
 * where it runs).
 *
 * One table in src/config/ holds every key: its type, default, range and
 * meaning; docs/config.md is written from the same facts. An unknown key, a
 * wrong type or an impossible value stops with "file:line: message". */
#ifndef CLOZE_CONFIG_H
#define CLOZE_CONFIG_H

#include "cloze/comm.h"
#include "cloze/core.h"
#include "cloze/data.h"
#include "cloze/kernels.h"
#include "cloze/model.h"
#include "cloze/optim.h"

/* train.ckpt_writer: who writes rank 0's checkpoints. THREAD: a background
 * thread on a snapshot, training goes on; INLINE: the training thread,
 * which waits for the write; AUTO: the thread only when the threads of the
 * node's ranks leave one of rank 0's allowed CPUs free (with none free, the
 * thread's compression slows the steps more than the write it hides;
 * docs/checkpoints.md). */
typedef enum {
    CZ_CKPT_WRITER_AUTO = 0,
    CZ_CKPT_WRITER_THREAD,
    CZ_CKPT_WRITER_INLINE
} cz_ckpt_writer_choice;
#define CZ_CKPT_WRITER_WORDS "auto|thread|inline"

typedef struct cz_train_config {
    long steps;       /* total optimizer steps */
    int global_batch; /* sequences per optimizer step, over all ranks */
    int micro_batch;  /* sequences per forward/backward on one rank */
    unsigned long long seed;
    int threads; /* threads per rank (BLIS + our kernels); 0 = cores / ranks on this node */
    int log_every;
    int tensorboard;       /* train.tensorboard: event files beside metrics.jsonl */
    int eval_every;        /* 0 = only at the end */
    int eval_batches;      /* held-out micro-batches per evaluation */
    int ckpt_every;        /* 0 = only at the end */
    int keep_last;         /* checkpoints kept */
    int max_bad_steps;     /* non-finite steps in a row before the run stops */
    long stop_after_steps; /* stop (with a checkpoint) after this many steps of this
                              invocation; 0 = run to train.steps (time-sliced jobs) */
    char run_dir[CZ_PATH_MAX];
    char init_from[CZ_PATH_MAX]; /* model.init_from: weights to start from ("" = initialise) */
    cz_gemm_choice gemm;         /* train.gemm: auto | blis | reference (CZ_GEMM_AUTO ..) */
    double peak_gflops;          /* per rank, for MFU; 0 = measure at start-up */

    cz_ckpt_writer_choice ckpt_writer; /* train.ckpt_writer */
    /* a GPT's samples during training (src/train/sample.c) */
    int sample_every;                /* 0 = none */
    int sample_tokens;               /* new tokens per sample */
    char sample_prompt[CZ_PATH_MAX]; /* "" = the end-of-text token */
} cz_train_config;

typedef struct cz_config {
    char source[CZ_PATH_MAX]; /* the file it was loaded from */
    cz_model_config model;
    cz_data_config data;
    cz_train_config train;
    cz_optim_config optim;
    cz_comm_config dist; /* the "dist" section */
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

/* Whether v keeps the range of numeric key `key` ("optim.lr"): 0, or -1
 * with `range` its rule in words ("in (0, 10]"; "not a key" when there is
 * no such numeric key). For a program whose options become keys
 * (cloze-finetune's --lr), so that the range lives in the key table alone
 * and the message can name the option the user typed. */
int cz_config_check_number(const char *key, double v, char *range, size_t cap);

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

/* Resuming from a checkpoint written with configuration `old`: the keys
 * whose value differs in `now`, of one class of the key table (docs/config.md,
 * column "on resume"): refused = 1, the keys that change what the run means
 * (seed, global batch, schedule, model, data; a key not yet classified counts
 * here), or refused = 0, the others (log and checkpoint intervals, threads,
 * ranks' micro-batch, run_dir, dist.*). Writes them to buf as
 * "train.seed 1 -> 7, optim.lr 0.001 -> 0.002" (long values shortened);
 * returns how many. */
int cz_config_resume_diff(const cz_config *old, const cz_config *now, int refused, char *buf,
                          size_t len);

/* Prints every key with its default and meaning (cloze-train --help-config). */
void cz_config_print_keys(FILE *out);
/* The key reference of docs/config.md (markdown tables, one per section),
 * from the same table; test_config checks the doc against it. */
void cz_config_write_docs(FILE *out);

#endif
