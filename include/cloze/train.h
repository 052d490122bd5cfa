/* train: the step loop. Builds batches, runs forward/backward, synchronises
 * gradients, steps the optimizer, evaluates, logs, checkpoints, and stops
 * cleanly on SIGTERM/SIGUSR1 (what Slurm sends before preemption).
 *
 * One step, as data flows (../shared/DESIGN.md):
 *   data (samples base .. base+G-1) -> micro-batch m = a*ranks + rank
 *   -> forward/backward (grad scale 1/(G/b)) -> grad sync per bucket
 *   -> placement step (clip, AdamW/LAMB, schedule) -> next step */
#ifndef CLOZE_TRAIN_H
#define CLOZE_TRAIN_H

#include "cloze/comm.h"
#include "cloze/config.h"
#include "cloze/core.h"

typedef struct cz_train_options {
    const char *resume; /* NULL: fresh run (refuses a run dir with checkpoints);
                           "auto": newest checkpoint that verifies, else fresh;
                           a path: that checkpoint */
    int quiet;          /* 1: no progress lines (tests) */
} cz_train_options;

/* Runs the whole training job on the ranks of `world` (cz_comm_init), on a
 * communicator of its own. Returns 0 on success (also when stopped by a
 * signal after checkpointing), -1 with err filled otherwise. */
int cz_train_run(const cz_comm *world, const cz_config *cfg, const cz_train_options *opt,
                 cz_error *err);

#endif
