/* train: the step loop. Builds batches, runs forward/backward, synchronises
 * gradients, steps the optimizer, evaluates, logs, checkpoints, and stops
 * cleanly on SIGTERM/SIGUSR1 (what Slurm sends before preemption).
 *
 * One step, as data flows (docs/architecture.md, "How a batch flows"):
 *   data (samples base .. base+G-1) -> micro-batch m = a*ranks + rank
 *   -> forward/backward, the last micro-batch's backward hooked to the grad
 *      sync, which reduces each bucket while backward continues
 *   -> grad sync finished -> placement step (clip, AdamW/LAMB, schedule)
 *   -> next step
 * train owns the cz_grad_sync: it creates, begins, hooks and finishes it;
 * the optimizer only reads its layout. */
#ifndef CLOZE_TRAIN_H
#define CLOZE_TRAIN_H

#include "cloze/ckpt.h"
#include "cloze/comm.h"
#include "cloze/config.h"
#include "cloze/core.h"
#include "cloze/data.h"
#include "cloze/model.h"
#include "cloze/tfevents.h"

typedef struct cz_train_options {
    const char *resume;      /* NULL: fresh run (refuses a run dir with checkpoints);
                                "auto": newest checkpoint that verifies, else fresh;
                                a path: that checkpoint */
    int quiet;               /* 1: no progress lines (tests) */
    int start_fresh;         /* 1: step 0 even where train.run_dir holds checkpoints
                                (cloze-train --start-fresh) */
    int allow_config_change; /* 1: resume even where keys that change what the run
                                means (seed, global batch, schedule, model, data)
                                differ from the checkpoint's; warned. 0: refused */
} cz_train_options;

/* What cz_train_run returns for an error every rank has reached with the
 * same message (rank 0's), before training started: a configuration check,
 * the run directory's lock, the choice of checkpoint. The caller can end
 * with MPI_Finalize and exit(1) instead of MPI_Abort. Other errors: -1. */
#define CZ_TRAIN_ERR_ALL_RANKS CZ_COMM_ERR_ALL_RANKS

/* Runs the whole training job on the ranks of `world` (cz_comm_init), on a
 * communicator of its own. Returns 0 on success (also when stopped by a
 * signal after checkpointing), -1 with err filled otherwise. */
int cz_train_run(const cz_comm *world, const cz_config *cfg, const cz_train_options *opt,
                 cz_error *err);

/* A task that brings its own samples, model initialisation and evaluation
 * (cloze-finetune): the run keeps everything else of cz_train_run (ranks,
 * the sample-to-rank mapping, gradient sync, optimizer and schedule,
 * checkpoints, --resume, signals, metrics.jsonl). cfg->model carries the
 * task's head; data.seq is the task's sequence length; data.*_manifest are
 * not read. */
typedef struct cz_train_task {
    void *ctx;
    /* Builds global sample g into slot `slot` of buf. Any rank may build any
     * sample, so a sample must be a function of g alone. */
    int (*build)(void *ctx, cz_batch_buf *buf, int slot, uint64_t g, cz_error *err);
    /* Called on every rank once the model has its default initialisation
     * (before any checkpoint is resumed), e.g. to load pre-trained weights. */
    int (*init_model)(void *ctx, cz_model *m, cz_error *err);
    /* Evaluation at step 0 of a fresh run, every train.eval_every steps and
     * after the last step (final = 1); called on every rank. */
    int (*evaluate)(void *ctx, cz_model *m, const cz_comm *comm, long step, int final,
                    cz_error *err);
    /* Extra blobs written into every checkpoint (task, labels, vocabulary). */
    const cz_blob *blobs;
    int n_blobs;
    /* 1: each micro-batch is padded to its longest sequence, not to data.seq
     * (cz_batch_view_packed): the same function, fewer operations */
    int pad_to_longest;
    /* Rank 0, after each evaluate: its figures for the run's TensorBoard
     * events (train.tensorboard), at most max into v (tags that stay valid
     * until the next call); returns how many. NULL: none. */
    int (*eval_scalars)(void *ctx, cz_scalar *v, int max);
} cz_train_task;

/* The compute set-up of one rank as cz_train_run makes it, for programs
 * that run the model outside it (cloze-finetune predict and features):
 * threads per rank (threads > 0 as given; 0 = this rank's allowed CPUs
 * shared among the node's ranks, logged by rank 0, with a warning when the
 * node's ranks oversubscribe it), OpenMP set to them, and the GEMM context
 * (cz_model_gemm_setup: train.gemm's choice, in bf16 where
 * model.matmul_precision = "bf16"). Collective over comm. Free *gemm_out
 * with cz_gemm_free. */
int cz_train_compute_setup(const cz_comm *comm, int threads, cz_gemm_choice gemm, int bf16,
                           int *threads_out, cz_gemm_ctx **gemm_out, cz_error *err);

/* From here on SIGTERM and SIGUSR1 (Slurm's warning before a time limit)
 * ask the next run for a checkpoint and a clean exit, instead of ending the
 * process. cz_train_run_task calls it; a program calls it first thing in
 * main() too, so that a signal during start-up (MPI_Init, reading the
 * configuration or the task's files) is kept for the run, not fatal. */
void cz_train_catch_signals(void);

int cz_train_run_task(const cz_comm *world, const cz_config *cfg, const cz_train_options *opt,
                      const cz_train_task *task, cz_error *err);

/* cloze-train plot: a run's loss, accuracy (a GPT: perplexity) and
 * learning-rate curves, training and held-out, from RUN_DIR/metrics.jsonl
 * (the last attempt at each step) and a fine-tuning run's results.jsonl,
 * drawn by gnuplot into OUT.png and OUT.svg with the script OUT.gp (its
 * data inline). Fails in one line when the file has no step records. */
typedef struct cz_plot_options {
    const char *run_dir;
    const char *out;     /* NULL: RUN_DIR/curves */
    const char *gnuplot; /* NULL: gnuplot on PATH */
} cz_plot_options;
int cz_train_plot(const cz_plot_options *o, cz_error *err);

/* The divergence watch of the step loop: warns when a finite loss blows up
 * (optim.lr far too high) long before the non-finite check would fire.
 * Single-batch losses are noisy (near convergence a small batch's loss can
 * be several times the last one's), so it watches their exponential moving average,
 *   ema_n = b * ema_{n-1} + (1 - b) * loss_n,  smoothed = ema_n / (1 - b^n)
 * (b = 0.9, about 10 steps; the division removes the zero start's bias, as
 * in Adam), against that average's running minimum. An alarm starts when
 * the smoothed loss is above 4x its minimum and at least ln 2 above it (the
 * right answers' mean probability has at least halved: near-zero losses
 * make a ratio alone meaningless), and ends once it is back below twice the
 * minimum. Zero-initialise. */
typedef struct cz_loss_watch {
    double ema;      /* the average before bias correction */
    long n;          /* losses added */
    double smoothed; /* the bias-corrected average after the last add */
    double min;      /* its running minimum ... */
    long min_step;   /* ... and the step (1-based) it was reached at */
    int alarm;
} cz_loss_watch;

/* Adds step `step`'s (1-based) finite loss; returns 1 when this step starts
 * an alarm, 0 otherwise. */
int cz_loss_watch_add(cz_loss_watch *w, long step, double loss);

#endif
