/* train: state shared by the files of the step loop (not a public header). */
#ifndef CLOZE_TRAIN_INTERNAL_H
#define CLOZE_TRAIN_INTERNAL_H

#include "cloze/ckpt.h"
#include "cloze/config.h"
#include "cloze/data.h"
#include "cloze/comm.h"
#include "cloze/kernels.h"
#include "cloze/model.h"
#include "cloze/optim.h"
#include "cloze/tfevents.h"
#include "cloze/train.h"

/* The shape of a step in one phase of the length curriculum. */
typedef struct cz_phase {
    int seq, max_pred;
    int global_batch, micro_batch;
    int accum;         /* micro-batches per rank per step, at most (ranks may run one less) */
    int micro_batches; /* over all ranks: global_batch / micro_batch */
} cz_phase;

typedef struct cz_run {
    cz_config cfg;
    const cz_train_task *task; /* NULL: pre-training on data.train_manifest */
    cz_comm comm;              /* this run's own context over the job's ranks */
    int comm_ok;
    int threads;
    int quiet;
    cz_gemm_ctx *gemm;
    cz_model *model;
    size_t n_params;
    cz_param_range *ranges;
    int n_ranges;
    int has_mult;     /* µP: the optimizer has per-tensor multipliers (cz_run_set_multipliers) */
    double *mult;     /* their checkpoint blob (malloc), (lr, wd) per tensor */
    cz_grad_sync *gs; /* owned here: begun, hooked and finished by train_step */
    /* the cost model's view of this job, for metrics.jsonl's predictions:
     * hosts x ranks per host, and backward's stages per phase (FLOPs and
     * the gradient floats final after each, cz_model_grad_stages) */
    int hosts, ranks_per_host;
    cz_grad_stage *stages[2];
    int n_stages[2];
    cz_optimizer *opt;
    /* dist.exact: the int64 sums, and each micro-batch's figures by its
     * global index (CZ_STAT_FIELDS doubles each), summed in that order */
    cz_exact *exact;
    double *slots;
    cz_ckpt_writer *ckpt_writer; /* rank 0: writes the checkpoints */
    int ckpt_background;         /* ... in a thread of its own (train.ckpt_writer) */
    cz_data *train_data, *eval_data;
    cz_batch_buf buf[2]; /* one per phase: a buffer's row stride is its seq */
    cz_phase phase[2];
    long phase2_start; /* first step of phase 2 (== steps when there is none) */
    FILE *metrics;
    cz_tfevents tb; /* rank 0: TensorBoard's copy of metrics.jsonl (train.tensorboard) */
    int lock_fd;    /* rank 0: the run directory's lock, held while the run lives */
    /* rank 0, what claiming the run directory created, so that a run that
     * fails before it starts leaves nothing behind (cz_run_unclaim_dir): the
     * topmost directory made ("" = none, train.run_dir existed) and whether
     * run.lock is new */
    char created_top[CZ_PATH_MAX];
    int created_lock;
    int err_shared; /* the error being returned is every rank's (CZ_TRAIN_ERR_ALL_RANKS) */
    int start_fresh;
    int allow_config_change;  /* --allow-config-change: resume despite REFUSED keys */
    cz_loss_watch loss_watch; /* warns when the loss explodes (run_loop) */
    cz_peak peak;             /* the MFU denominator per rank (kernels.h) */
    /* position: everything a resume needs besides weights and moments */
    long step;             /* next step to run */
    uint64_t samples_done; /* next global sample index */
    long bad_in_row, bad_total;
    const char *inject_nan_steps; /* CLOZE_INJECT_NAN_STEPS, read once (tests) */
    /* progress */
    long first_step;
    double elapsed;

    /* rank 0: train.sample_every's decoder and tokenizer (sample.c) */
    struct cz_run_sampler *sampler;
} cz_run;

typedef struct cz_step_stats {
    long step;
    int seq;
    double loss, mlm_loss, nsp_loss, lm_loss, task_loss;
    long mlm_correct, mlm_count, nsp_correct, nsp_count, task_correct, task_count;
    double lr, grad_norm;
    int skipped;
    double seconds, comm_wait, tokens, flops;
    double optim_seconds;    /* optimizer step without the all-reduce wait */
    double compute_seconds;  /* forward + backward of every micro-batch */
    double backward_seconds; /* the last backward, which the gradient sync overlaps */
    double grad_comm_seconds, gather_seconds; /* measured: buckets' reductions, weights back */
    cz_sync_prediction pred;                  /* the cost model's for the same */
    double grad_rows; /* word-embedding rows reduced after backward (the ranks' union) */
    uint64_t samples_done;
} cz_step_stats;

/* dist.exact: a checkpoint's scales of the exact sums (cz_exact_scales) */
#define CZ_BLOB_EXACT "exact.exponents"
enum { CZ_STAT_FIELDS = 13 };

typedef struct cz_eval_stats {
    double mlm_loss_sum, lm_loss_sum; /* summed over counted positions */
    long mlm_correct, mlm_count, nsp_correct, nsp_count, lm_count, samples;
} cz_eval_stats;

/* resumed: the run continues from a checkpoint at r->step (the event files
 * are cut to the steps before the ones it redoes) */
void cz_metrics_open(cz_run *r, int resumed);
void cz_metrics_close(cz_run *r);
void cz_metrics_resumed(cz_run *r);
void cz_metrics_step(cz_run *r, const cz_step_stats *s);
void cz_metrics_eval(cz_run *r, long step, const cz_eval_stats *e);
/* TensorBoard only: a task's figures at step, peak memory (report_peak_memory) */
void cz_metrics_scalars(cz_run *r, long step, const cz_scalar *v, int n);
void cz_metrics_memory(cz_run *r, const char *key, double max_mib, double mean_mib);

/* run_state.c: what a run's checkpoint holds and how a run resumes from one */
/* Rank 0's verdict `rc` on a step it took for all (a checkpoint written or
 * read, the run directory claimed) to every rank: 0, or -1 with rank 0's
 * message in every rank's err and the failure marked every rank's
 * (err_shared), so that it is said once and the job ends without abort. */
int cz_run_verdict(cz_run *r, int rc, cz_error *err);
int cz_run_save_checkpoint(cz_run *r, cz_error *err);
/* Waits for the checkpoint being written; every rank learns its verdict. */
int cz_run_checkpoint_wait(cz_run *r, cz_error *err);
/* Returns 1 when resumed, 0 when there was nothing to resume from. */
int cz_run_resume(cz_run *r, const char *resume, cz_error *err);
/* Rank 0, at set-up: creates train.run_dir and takes its lock (a second job
 * is refused, naming the holder's host and pid); a fresh run (no --resume,
 * no --start-fresh) is refused where checkpoints exist. */
int cz_run_claim_dir(cz_run *r, const char *resume, cz_error *err);
void cz_run_release_dir(cz_run *r);
/* Rank 0, when the run fails before its first step (a --resume that cannot
 * be read): removes what cz_run_claim_dir created (run.lock if it was new,
 * the directories it made while they are empty) and releases the lock. */
void cz_run_unclaim_dir(cz_run *r);
/* model.init_from: the weights of a cloze checkpoint or a Hugging Face
 * directory into the freshly initialised model (every rank reads them). */
int cz_run_init_from(cz_run *r, cz_error *err);
/* µP (model.parametrization = mup): the optimizer's per-tensor learning-rate
 * and weight-decay multipliers, mup.MuAdamW's (run_state.c: checkpoints
 * keep them, CZ_BLOB_MULTIPLIERS, and resume checks them) */
int cz_run_set_multipliers(cz_run *r, cz_error *err);

/* sample.c: train.sample_every's samples (rank 0). open: every rank
 * learns rank 0's verdict; sample: after step r->step when it is a multiple
 * of train.sample_every (a failure is a warning, never the run's end). */
typedef struct cz_run_sampler cz_run_sampler;
int cz_run_sample_open(cz_run *r, cz_error *err);
void cz_run_sample(cz_run *r);
void cz_run_sample_close(cz_run *r);

/* signals.c: SIGTERM / SIGUSR1 ask for checkpoint-and-exit (installed by
 * cz_train_catch_signals, train.h) */
int cz_signals_pending(void);

#endif
