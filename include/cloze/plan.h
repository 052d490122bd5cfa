/* plan: the step time of a training configuration on N hosts, predicted
 * (cloze-plan; docs/distributed.md, "Planning a cluster").
 *
 * One step on every rank = compute (forward and backward of its
 * micro-batches at the rank's measured rate) + the gradient sync's exposed
 * part + the optimizer's update + the weights' exchange + the step's small
 * collectives. The gradient sync is the schedule comm predicts
 * (cz_sync_predict): buckets of the gradient sync's layout become final as
 * backward's stages end (cz_model_grad_stages, each stage's time its share
 * of backward's FLOPs), are reduced one after the other, each priced by the
 * alpha-beta model; what runs past backward's end is exposed. Because the
 * stages are fractions of the measured backward, the overlap follows the
 * compute speed: a slower rank hides more. */
#ifndef CLOZE_PLAN_H
#define CLOZE_PLAN_H

#include "cloze/comm.h"
#include "cloze/config.h"

/* How fast one rank computes, and where that came from. */
typedef struct cz_plan_compute {
    double gflops;         /* forward + backward FLOPs (cz_model_grad_stages' and the
                              forward's) per second of one rank */
    double backward_share; /* backward's share of a micro-batch's compute time */
    double optim_ns;       /* optimizer update, ns per parameter a rank updates */
    char source[160];
} cz_plan_compute;

/* The cluster: hosts of ranks_per_host ranks on a non-blocking switch. */
typedef struct cz_plan_cluster {
    cz_net_model net;
    int ranks_per_host;
    cz_plan_compute compute;
} cz_plan_cluster;

enum { CZ_PLAN_RING = 0, CZ_PLAN_HIER = 1, CZ_PLAN_TORUS = 2, CZ_PLAN_ALGOS = 3 };

/* One host count. Seconds per optimizer step; INFINITY where an algorithm
 * does not apply (hierarchical with one rank per host or one host,
 * torus2d with fewer than 4 ranks or a prime count). */
typedef struct cz_plan_row {
    int hosts, ranks, accum, global_batch;
    double compute;                /* forward + backward of every micro-batch */
    double backward;               /* the last one's backward, which the sync overlaps */
    double reduce[CZ_PLAN_ALGOS];  /* gradient reduction, hidden or not */
    double exposed[CZ_PLAN_ALGOS]; /* ... of it after backward's end */
    int grid_x;                    /* torus2d's grid X (most square) */
    double optim, gather, control; /* update, weights back, small collectives */
    /* with dist.allreduce (auto: auto's pick for one bucket) and dist.bucket_mb */
    cz_allreduce_algo algo;
    double step, tokens_per_s, efficiency; /* efficiency: against 1 host x the same rph */
    /* dist.exact = true's step with the same algorithm (int64 sums: twice the
     * bytes, one all-reduce after backward, all exposed); step is this one
     * when the configuration sets dist.exact, default_step the fp32 sum's */
    double exact_step, exact_exposed, default_step;
    double mem_mib; /* per rank: weights, gradients, moments, activations */
    /* the planner's choice: the fastest step over algorithms and bucket sizes */
    cz_allreduce_algo best_algo;
    double best_bucket_mb, best_step;
} cz_plan_row;

/* The row for `hosts` hosts; accum micro-batches per rank per step (weak
 * scaling: the global batch grows with the ranks); one_host_tokens_per_s:
 * the 1-host row's, for the efficiency (0: computed here). */
int cz_plan_row_make(const cz_config *cfg, const cz_plan_cluster *cl, int hosts, int accum,
                     double one_host_tokens_per_s, cz_plan_row *row, cz_error *err);

/* The compute rate from a run's metrics.jsonl (the medians over its steps
 * after the first two of compute_seconds, backward_seconds and
 * optim_seconds - gather_seconds); cfg is that run's configuration and
 * ranks its rank count. Errors name the file and line. */
int cz_plan_compute_from_metrics(const cz_config *cfg, const char *path, int ranks,
                                 cz_plan_compute *out, cz_error *err);
/* A given rate (GFLOP/s per rank): backward's share from the FLOPs,
 * the optimizer's update measured here. */
int cz_plan_compute_given(const cz_config *cfg, double gflops, cz_plan_compute *out, cz_error *err);
/* The compute rate measured here: forward and backward of one sequence of
 * cfg's model (data.seq, data.max_pred) on `threads` threads, the second of
 * two; and one optimizer update over the model's parameters. Takes
 * seconds (about 3 x one sequence's step). */
int cz_plan_compute_probe(const cz_config *cfg, int threads, cz_plan_compute *out, cz_error *err);

#endif
