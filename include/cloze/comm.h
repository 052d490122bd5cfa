/* comm: the communication layer, the one module of cloze that calls MPI.
 * It knows no layer names: it moves and sums ranges of floats, and carries
 * the few small messages the train loop needs (statistics, verdicts).
 *
 * Determinism. Every sum produced here by the "ring" algorithm is computed in
 * one fixed order that does not depend on timing or threads, and every rank
 * ends with the same bits: a chunk is reduced once, travelling around the
 * ring, and the finished chunk is then copied (all-gather) to everyone.
 *
 * Layout ("pieces"). A buffer of n floats is cut into buckets of B floats
 * counted from the END of the buffer: bucket k = [max(0, n-(k+1)B), n-kB),
 * so the bucket holding offset 0 may be shorter. Each bucket is cut into p
 * chunks (cz_comm_chunk), chunk c owned by rank c. The sum of an element in
 * chunk c is ((g[c+1] + g[c+2]) + ...) + g[c] (ranks mod p). The same layout
 * serves the all-reduce, ZeRO-1 sharding (rank r updates chunk r of every
 * bucket) and the fixed-order norms, so all optimizer placements see the
 * same gradient bits. The boundaries are a fixed convention, independent of
 * who fills the buffer; only the order in which buckets are reduced follows
 * the producer (cz_grad_order, grads.h). */
#ifndef CLOZE_COMM_H
#define CLOZE_COMM_H

#include "cloze/core.h"
#include "cloze/grads.h"

/* One context over a set of ranks. rank and size are this process's place
 * in it; everything else (the MPI communicator, the thread level, the
 * attached algorithm, the watch) is comm's own, behind impl
 * (src/comm/comm_internal.h): no MPI type reaches a user of this header. A
 * copy of the struct is the same context (it shares impl); only the one
 * made by cz_comm_init or cz_comm_dup is given to cz_comm_finalize. */
typedef struct cz_comm_impl cz_comm_impl;
typedef struct cz_comm {
    int rank, size;
    cz_comm_impl *impl; /* NULL before init or dup and after finalize */
} cz_comm;

/* MPI_Init_thread asking for MPI_THREAD_MULTIPLE (the gradient thread needs
 * it to overlap with backward; with less, grad sync runs without overlap),
 * and MPI_ERRORS_RETURN on the world, so that every failed call comes back
 * as a return code and then as a one-line cz_error. The caller sets up
 * logging (cz_log_setup) with c->rank. */
int cz_comm_init(cz_comm *c, int *argc, char ***argv, cz_error *err);
/* A second context over the same ranks with its own message space (the
 * gradient thread's, a training run's inside a program). */
int cz_comm_dup(const cz_comm *c, cz_comm *out, cz_error *err);
/* Frees the communicator; ends MPI when cz_comm_init started it. */
/* This rank alone as a job of one (MPI started already): what a one-rank
 * run would compute, e.g. a test's reference for exact sums. Freed by
 * cz_comm_finalize. */
int cz_comm_self(cz_comm *c, cz_error *err);
void cz_comm_finalize(cz_comm *c);
/* 1 when comm may be called from a second thread while this one calls it
 * too (MPI_THREAD_MULTIPLE): the gradient sync then overlaps backward. */
int cz_comm_threads_ok(const cz_comm *c);
/* Ends every rank of the job now, after an error this rank alone found (a
 * rank that fails alone must not leave the others waiting in a collective):
 * the caller prints its one line first; this process then exits with `code`
 * without MPI_Finalize, and mpirun ends the other ranks (its default on a
 * non-zero exit), printing only its short note, not MPI_Abort's banner.
 * Under a launcher that leaves the others running, only the waits bounded
 * by dist.timeout_s (cz_comm_watch) end. Errors every rank finds alike are agreed instead
 * (cz_comm_agree) and end with cz_comm_finalize. */
void cz_comm_abort(const cz_comm *c, int code);
/* A rank or host lost (its link cut, its host down, its process gone): a
 * bounded wait (dist.timeout_s) ran out and the liveness probe found ranks
 * that do not answer. No collective can finish any more, so comm ends the
 * process itself with this status (EX_TEMPFAIL of sysexits.h: try again
 * later, which launch/cloze.sbatch takes as "requeue"): the lowest rank
 * that answered says one line naming the lost hosts and their ranks, the
 * others end silently, and a launcher that asked for it (CLOZE_LAUNCHER_PID,
 * launch/cloze-mpirun) is told to end mpirun at once (docs/reliability.md). */
#define CZ_EXIT_HOST_LOST 75

/* Ranks of c that share this rank's node (memory), this one included. */
int cz_comm_node_ranks(const cz_comm *c, int *ranks, cz_error *err);
/* Gathers `bytes` from every rank of this rank's node into all[] (the node's
 * ranks in rank order; all holds bytes x cz_comm_node_ranks); *index is this
 * rank's place among them. */
int cz_comm_node_allgather(const cz_comm *c, const void *mine, size_t bytes, void *all, int *index,
                           cz_error *err);

/* ---- small collectives for control and statistics (every rank calls) ---- */
int cz_comm_barrier(const cz_comm *c, cz_error *err);
typedef enum { CZ_OP_SUM = 0, CZ_OP_MAX = 1, CZ_OP_BOR = 2 /* u64 only */ } cz_reduce_op;
/* In place over n doubles; every rank gets the result (MPI_Allreduce). */
int cz_comm_allreduce_doubles(const cz_comm *c, double *v, int n, cz_reduce_op op, cz_error *err);
/* The same over n unsigned 64-bit counts (exact, where doubles stop at 2^53). */
int cz_comm_allreduce_u64(const cz_comm *c, uint64_t *v, int n, cz_reduce_op op, cz_error *err);
/* Root's `bytes` bytes at buf to every rank, in pieces of CZ_COMM_PIECE
 * bytes (MPI counts are int: a BERT-large parameter buffer is > 2^31 B). */
#define CZ_COMM_PIECE ((size_t)1 << 30) /* 2^28 floats */
int cz_comm_bcast(const cz_comm *c, void *buf, size_t bytes, int root, cz_error *err);
/* Root's verdict to every rank: returns root's `rc`, and when it is < 0
 * every rank's err holds root's message. For decisions one rank takes for
 * all (rank 0 reads or writes a checkpoint). */
int cz_comm_share_verdict(const cz_comm *c, int root, int rc, cz_error *err);
/* Every rank's verdict on a step all of them took (each loaded the same
 * configuration or file): 0 when rc == 0 on every rank; 1 when some rank's
 * rc != 0, and then every rank's err holds the message of the lowest such
 * rank and *who (when not NULL) that rank, so that one rank can say it and
 * all end alike (without MPI_Abort); -1 when the collective itself failed
 * (err says why). */
int cz_comm_agree(const cz_comm *c, int rc, int *who, cz_error *err);
/* What cz_comm_agree_setup returns when some rank failed: an error every
 * rank holds alike (callers above pass it on as their own code). */
#define CZ_COMM_ERR_ALL_RANKS (-2)
/* The set-up-failure rule in one call, for a step every rank took alike
 * (each read the same configuration, model or files): 0 when rc == 0 on
 * every rank; CZ_COMM_ERR_ALL_RANKS when some rank's rc != 0, and then err
 * holds, on every rank, the message of the lowest such rank, led by
 * "rank N: " when N is not 0, so that rank 0 alone says it and every rank
 * ends alike (cz_comm_finalize); -1 when the agreement itself failed (err
 * says why; this rank's alone: cz_comm_abort). A call site is then one line
 * and an ordinary early return. */
int cz_comm_agree_setup(const cz_comm *c, int rc, cz_error *err);
/* The end of a program that found an error before MPI_Init on every rank
 * (an argument) and let rank 0 say it: under a launcher (mpirun's
 * environment) every rank joins MPI and meets the others at a barrier
 * before it returns `code`, so that no rank's early exit makes the launcher
 * end rank 0 before it has spoken. Without a launcher: code at once. */
int cz_comm_end_early(int *argc, char ***argv, int code);

/* Chunk c of p of a length-n range: [*off, *off + *count). The first n % p
 * chunks are one longer; chunks are empty when n < p. */
void cz_comm_chunk(size_t n, int p, int c, size_t *off, size_t *count);

/* ---- collectives on one float buffer, by algorithm ----
 * dist.allreduce: "ring" (ours, deterministic), "mpi" (MPI_Allreduce,
 * MPI_Reduce_scatter, MPI_Reduce, MPI_Allgatherv: for comparison; bitwise
 * agreement across placements is only promised for our own algorithms),
 * "hierarchical" and "torus2d" (two-level: inner groups, then outer;
 * src/comm/twolevel.c), "auto" (one of ours,
 * picked by the alpha-beta model when the gradient sync is created). The
 * value order is the word order of CZ_ALLREDUCE_WORDS (the config table
 * stores the word's index). A new algorithm adds a value here and a case to
 * each entry point below (src/comm/collectives.c); grad sync and the
 * optimizer call only these. Every algorithm must leave chunk c
 * (cz_comm_chunk) of a reduce-scatter on rank c. */
typedef enum {
    CZ_ALLREDUCE_RING = 0,
    CZ_ALLREDUCE_MPI = 1,
    CZ_ALLREDUCE_HIERARCHICAL = 2,
    CZ_ALLREDUCE_TORUS2D = 3,
    CZ_ALLREDUCE_AUTO = 4
} cz_allreduce_algo;
#define CZ_ALLREDUCE_WORDS "ring|mpi|hierarchical|torus2d|auto"

/* dist.grad_wire: the gradients' format on the wire in our algorithms. bf16:
 * every partial sum sent is rounded to bfloat16 (nearest even) and added in
 * fp32 by the receiver, half the bytes; the weight all-gather stays fp32.
 * Order in CZ_WIRE_WORDS. */
typedef enum { CZ_WIRE_FP32 = 0, CZ_WIRE_BF16 = 1 } cz_grad_wire;
#define CZ_WIRE_WORDS "fp32|bf16"

/* ---- the network as the cost model sees it ----
 * The alpha-beta model (Hockney): a message of m bytes costs alpha + m*beta.
 * Inside a host copies share the host's memory (beta_shm per byte copied by
 * all its ranks together); between hosts every message crosses its path's
 * links, each link direction carries beta_net per byte, shared by the
 * messages crossing it at once, plus alpha_hop per link after the first
 * (src/comm/cost_model.c; docs/distributed-design.md). */
typedef struct cz_net_model {
    double alpha_net; /* seconds per message between hosts (software + first hop) */
    double alpha_hop; /* seconds per further link on the path (torus forwarding) */
    double beta_net;  /* seconds per byte on one direction of one link */
    double alpha_shm; /* seconds per message inside a host */
    double beta_shm;  /* seconds per byte copied inside a host */
} cz_net_model;
/* Defaults: a 10 Gbit/s Ethernet cluster over TCP (docs/distributed-design.md,
 * "Cost model"). */
void cz_net_model_default(cz_net_model *m);

/* The dist section of the configuration that belongs to comm (keys
 * dist.allreduce, dist.bucket_mb, dist.grid, dist.link_gbit,
 * dist.link_latency_us, dist.timeout_s, dist.grad_wire, dist.overlap,
 * dist.calibrate, dist.calibrate_s, dist.cluster_file; docs/config.md). */
typedef struct cz_comm_config {
    cz_allreduce_algo allreduce;
    double bucket_mb;       /* gradient bucket size in MiB */
    char grid[16];          /* torus2d: "XxY" (X ranks per row); "" = the most square */
    double link_gbit;       /* auto's model: one host's network link, Gbit/s per direction */
    double link_latency_us; /* auto's model: one message between hosts */
    double timeout_s;       /* longest wait for a peer before the job stops */
    cz_grad_wire grad_wire; /* gradients on the wire: fp32 or bf16 */
    int overlap;            /* 1: buckets reduced while backward runs; 0: after it */
    int exact;              /* 1: exact gradient sums (cz_exact), dist.exact */
    int calibrate;          /* measure the network at start-up (cz_comm_calibrate) */
    double calibrate_s;     /* ... within about this many seconds */
    char cluster_file[CZ_PATH_MAX]; /* a calibration written before ("": none) */
    /* Set by cz_comm_net_setup, not a key: the network auto prices with. */
    int net_known;
    cz_net_model net;
} cz_comm_config;

/* The model's parameters from the configuration: the measured or read
 * network when cfg->net_known, else the defaults with dist.link_gbit and
 * dist.link_latency_us. */
void cz_comm_config_net(const cz_comm_config *cfg, cz_net_model *m);

/* ---- calibration (calibrate.c) ----
 * Collective. Measures, within about budget_s seconds, the latency (half
 * the round trip of 8-byte ping-pongs) and the per-byte time (our ring
 * all-reduce at a few sizes, fitted to the model's formula) between host
 * leaders, and the same among the ranks of each host. Parts that do not
 * apply (one host; one rank per host) keep what *out holds. Every rank gets
 * the same model; hosts and ranks_per_host say where it was measured. */
int cz_comm_calibrate(const cz_comm *c, double budget_s, cz_net_model *out, int *hosts,
                      int *ranks_per_host, cz_error *err);
/* Fills cfg->net (net_known = 1) from dist.cluster_file, or by measuring
 * (dist.calibrate, more than one rank), and logs it on rank 0 (one line
 * per part); with neither, leaves the defaults. Collective. */
int cz_comm_net_setup(const cz_comm *c, cz_comm_config *cfg, cz_error *err);
/* The cluster file: "key value" lines (# comments): alpha_net_us,
 * net_gbit, alpha_shm_us, shm_gbyte, alpha_hop_us, hosts, ranks_per_host.
 * Errors name the file and line. */
int cz_net_model_write(const char *path, const cz_net_model *m, int hosts, int ranks_per_host,
                       cz_error *err);
int cz_net_model_read(const char *path, cz_net_model *m, int *hosts, int *ranks_per_host,
                      cz_error *err);

/* ---- prediction, without MPI (cost_model.c): the planner's arithmetic ----
 * Hosts of ranks_per_host ranks each, ranks placed host by host, on a
 * non-blocking switch. */
/* auto's choice for messages of `bytes` (cz_allreduce_choose): the
 * algorithm and *grid_x. */
cz_allreduce_algo cz_net_choose(const cz_net_model *m, int hosts, int ranks_per_host, double bytes,
                                int *grid_x);

/* dist.grid: "" (0 x 0) or "XxY" with X, Y >= 1. */
int cz_comm_grid_parse(const char *s, int *x, int *y, cz_error *err);
/* X of the most square grid X x Y = p, X <= Y (torus2d without dist.grid). */
int cz_comm_grid_square(int p);

/* scratch: at least ceil(n / p) floats, or NULL (allocated per call).
 * ring, hierarchical and torus2d run on the algorithm's context when one
 * was attached to c (the gradient sync's communicator, cz_grad_sync_comm:
 * sub-communicators, bounded waits); without it ring runs on a context
 * made for the call, and the two-level algorithms can only all-gather (as
 * a ring: an all-gather copies, so the bits are the same). The algorithms
 * themselves, their contexts, the host layouts and the cost model behind
 * "auto" are comm's inside (src/comm/comm_internal.h; its tests and the
 * benchmarks reach them there). */
/* In place sum over ranks; identical bits on every rank with "ring". Any n. */
int cz_allreduce(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n, float *scratch,
                 cz_error *err);
/* In place: afterwards chunk `rank` of buf holds the sum; the rest is scratch. */
int cz_reduce_scatter(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n,
                      float *scratch, cz_error *err);
/* In place: each rank provides chunk `rank` of buf; afterwards all of buf. */
int cz_allgather(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n, cz_error *err);
/* In place: rank 0 ends with the whole sum (ring: reduce-scatter, then the
 * chunks gathered, so rank 0's bits equal cz_allreduce's); others: scratch. */
int cz_reduce(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n, float *scratch,
              cz_error *err);

/* In place int64 sum over ranks (the exact sum below): integer addition is
 * associative, so every algorithm gives the same bits (ring, hierarchical,
 * torus2d on their contexts as above; mpi: MPI_Allreduce). */
int cz_allreduce_i64(const cz_comm *c, cz_allreduce_algo algo, int64_t *buf, size_t n,
                     cz_error *err);

/* ---- exact, order-independent gradient sums (exact.c; dist.exact) ----
 * Every micro-batch's fp32 gradient is added as int64 fixed point with one
 * power-of-two scale 2^s per tensor, chosen so that |g| 2^s < 2^(62 -
 * ceil(log2 M)) for each of the step's M micro-batches: no partial sum of
 * any order overflows, so the sum does not depend on how the micro-batches
 * were dealt to ranks, in what order they were added, nor on the
 * algorithm, buckets or placement (docs/distributed-design.md, "Exact
 * sums"). The scale of a step is predicted from the previous step's exact
 * maximum; a value over the bound is detected per value, every rank learns
 * it, and the caller recomputes the step with the scale of this step's
 * maximum (cz_exact_finish's *retry). */
typedef struct cz_exact cz_exact;
/* n floats in tensors starting at tensor_off[0] = 0 < ... < n (sorted). */
int cz_exact_create(cz_exact **out, size_t n, const size_t *tensor_off, int n_tensors,
                    cz_error *err);
void cz_exact_free(cz_exact *x);
/* A step of `micro_batches` micro-batches over all ranks begins. */
void cz_exact_begin(cz_exact *x, int micro_batches);
/* Adds one micro-batch's gradient g[0..n) (this rank's). */
void cz_exact_add(cz_exact *x, const float *g);
/* Collective: the sum over every rank's micro-batches into out[0..n), the
 * same bits on every rank. *retry = 1: a value exceeded the bound
 * somewhere (or the scales were unknown): nothing was summed; begin again
 * and add the same micro-batches (the scales now fit them). A NaN or an
 * infinity anywhere: out is all NaN (the optimizer's non-finite rule skips
 * the step) and the scales stay. */
int cz_exact_finish(cz_exact *x, const cz_comm *c, cz_allreduce_algo algo, float *out, int *retry,
                    cz_error *err);
/* The next step's scales as one int32 exponent per tensor (values are
 * expected below 2^e; INT32_MIN: unknown), for checkpoints: what a resumed
 * run must use to continue bit for bit. */
int cz_exact_n_tensors(const cz_exact *x);
int32_t *cz_exact_scales(cz_exact *x);

/* ---- the bucket layout ---- */
typedef struct cz_bucket_layout {
    size_t n;      /* floats in the buffer */
    size_t bucket; /* floats per bucket (the bucket holding offset 0 may be shorter) */
    int n_buckets; /* ceil(n / bucket), 0 when n == 0 */
    int p;         /* ranks */
} cz_bucket_layout;

/* bucket_bytes <= 0 or >= 4n: one bucket. */
void cz_bucket_layout_make(cz_bucket_layout *l, size_t n, double bucket_bytes, int p);
/* Bucket k: [*off, *off + *count) of the buffer. */
void cz_bucket_range(const cz_bucket_layout *l, int k, size_t *off, size_t *count);
/* Piece (bucket k, chunk c): [*off, *off + *count) of the buffer. */
void cz_piece_range(const cz_bucket_layout *l, int k, int c, size_t *off, size_t *count);
/* Floats owned by rank c (sum of its chunk in every bucket). */
size_t cz_layout_owned(const cz_bucket_layout *l, int c);
/* The bucket schedule (what the gradient sync does, and what a model of it
 * needs): buckets are reduced strictly in the order they complete, one at a
 * time on the communication thread. The i-th bucket to complete when ranges
 * become final in `order` (i = 0 .. n_buckets-1): */
int cz_layout_bucket_at(const cz_bucket_layout *l, cz_grad_order order, int i);
/* ... and when: it is complete once this many floats of the buffer, counted
 * in `order` (from offset 0 upwards for ASCENDING, from the end downwards for
 * DESCENDING), are final. Its reduction starts then, or when the (i-1)-th
 * one's ends, whichever is later. Increasing in i; the last is n. */
size_t cz_layout_ready_after(const cz_bucket_layout *l, cz_grad_order order, int i);
/* The gradient sync's bucket size in bytes for n floats of gradients:
 * dist.bucket_mb, or with 0 (the default) 1/16 of the gradient within
 * [1, 25] MiB. cz_bucket_layout_make(l, n, cz_grad_bucket_bytes(cfg, n), p)
 * is the gradient sync's layout. */
double cz_grad_bucket_bytes(const cz_comm_config *cfg, size_t n);

/* Collectives over a whole layout, bucket by bucket. "Owned" arrays hold a
 * rank's pieces packed in bucket order (cz_layout_owned(l, rank) floats).
 * allgather: each rank provides its pieces of buf; afterwards all of buf.
 * gather:    every rank's owned pieces into full (n floats) on rank 0.
 * scatter:   rank 0's full buffer out to every rank's owned pieces. */
int cz_layout_allgather(const cz_comm *c, cz_allreduce_algo algo, const cz_bucket_layout *l,
                        float *buf, cz_error *err);
int cz_layout_gather(const cz_comm *c, const cz_bucket_layout *l, const float *owned, float *full,
                     cz_error *err);
int cz_layout_scatter(const cz_comm *c, const cz_bucket_layout *l, const float *full, float *owned,
                      cz_error *err);

/* ---- gradient synchronisation in buckets, overlapped with backward ----
 * Mode says what each bucket ends as:
 *   ALLREDUCE       every rank holds the whole sum            (replicated)
 *   REDUCE_SCATTER  rank r holds the sum of its pieces only   (sharded)
 *   REDUCE          rank 0 holds the whole sum                (coordinator)
 *
 * One step: cz_grad_sync_begin before the backward that finishes the
 * gradients, cz_grad_sync_ready as that backward's hook (model.h:
 * cz_model_set_grad_hook(m, cz_grad_sync_ready, gs)), cz_grad_sync_finish
 * after it. The owner of the step (train) makes these three calls.
 *
 * Overlap: with MPI_THREAD_MULTIPLE a communication thread (on its own
 * communicator) reduces the buckets in the order they complete under
 * `order` (cz_layout_bucket_at), each as soon as all of its floats were
 * reported final. That order is the same on every rank, so every rank's
 * message sequence is identical (no deadlock); ranges reported in another
 * order are still correct, only less overlapped. Without
 * MPI_THREAD_MULTIPLE all buckets are reduced in cz_grad_sync_finish (no
 * overlap, same bits: the order of buckets never changes a sum). */
typedef enum { CZ_SYNC_ALLREDUCE = 0, CZ_SYNC_REDUCE_SCATTER = 1, CZ_SYNC_REDUCE = 2 } cz_sync_mode;

typedef struct cz_grad_sync cz_grad_sync;

/* n floats of gradients; buckets of cfg->bucket_mb MiB, cfg->allreduce
 * (auto: chosen here for one bucket; cz_grad_sync_algo says which). The
 * gradient thread's communicator gets its own context of that algorithm
 * (grid, dist.timeout_s);
 * rank 0 logs which algorithm runs and why. */
int cz_grad_sync_create(cz_grad_sync **out, const cz_comm *c, const cz_comm_config *cfg, size_t n,
                        cz_sync_mode mode, cz_grad_order order, cz_error *err);
void cz_grad_sync_free(cz_grad_sync *gs);
const cz_bucket_layout *cz_grad_sync_layout(const cz_grad_sync *gs);
cz_sync_mode cz_grad_sync_mode(const cz_grad_sync *gs);
/* 1 when buckets are reduced by the communication thread while backward
 * runs (dist.overlap, MPI_THREAD_MULTIPLE, more than one rank): a second
 * thread may then use cz_grad_sync_comm between finish and the next begin
 * (the sharded optimizer's weight all-gather, overlapped with its update). */
int cz_grad_sync_overlaps(const cz_grad_sync *gs);
cz_allreduce_algo cz_grad_sync_algo(const cz_grad_sync *gs);
/* The gradient thread's communicator, with its algorithm's context (the
 * two-level rings, waits bounded by dist.timeout_s). It is idle between
 * cz_grad_sync_finish and the next begin: the optimizer's weight
 * all-gather runs on it there, so that it is two-level and bounded too. */
const cz_comm *cz_grad_sync_comm(const cz_grad_sync *gs);
/* From now on the small collectives of c (statistics, verdicts, broadcasts,
 * the layout gather/scatter of checkpoints) wait at most dist.timeout_s,
 * probed through gs's context, so that a host lost while the ranks are
 * there ends the job with the same one-line verdict as in the gradient
 * sync. gs must outlive those calls (cz_comm_watch(c, NULL) ends it). */
void cz_comm_watch(cz_comm *c, const cz_grad_sync *gs);
/* Starts one step over `grads` (length n; must stay valid until finish). */
void cz_grad_sync_begin(cz_grad_sync *gs, float *grads);
/* Backward hook (a cz_grad_ready_fn: pass gs as ctx): the range is final on
 * this rank; every bucket that became complete is started. */
void cz_grad_sync_ready(void *gs, size_t offset, size_t count);
/* Backward's rows hook (a cz_grad_rows_fn, model.h
 * cz_model_set_grad_rows_hook: pass gs as ctx): rows backward kept out of
 * the buffer, added after the buckets in cz_grad_sync_finish. There the
 * ranks first agree on the union of their row ids (a bit per row, OR-ed),
 * then all-reduce one compact [union, width] block with the sync's
 * algorithm and add it to every union row of the reduced buffer; when the
 * union holds more than half the tensor's rows (that block's all-reduce
 * would carry more than the tensor's reduction), they reduce the rows
 * scattered into the tensor's buckets instead, bucket by bucket as the
 * mode says. Either way the sum of a row differs from one reduction of
 * (buffer + rows) only in rounding: (sum of buffers) + (sum of rows), the
 * same on every rank and in every mode for a given layout. r must stay
 * valid until finish. */
void cz_grad_sync_rows(void *gs, const cz_grad_rows *r);
/* Rows in the last step's union (0 without rows). */
size_t cz_grad_sync_tail_rows(const cz_grad_sync *gs);
/* Which way those rows went: a block when 2 x union <= the tensor's rows,
 * else scattered into its buckets (the rule above, one place). */
int cz_grad_rows_as_block(double union_rows, double height);
/* Marks everything final (ranges never reported are taken as done), waits
 * until every bucket is reduced. Returns the first communication error. */
int cz_grad_sync_finish(cz_grad_sync *gs, cz_error *err);
/* Seconds the last step spent waiting in finish (communication not hidden). */
double cz_grad_sync_wait_seconds(const cz_grad_sync *gs);
/* Buckets reduced so far in this step (any thread may ask; tests). */
int cz_grad_sync_buckets_done(cz_grad_sync *gs);
/* Seconds the last step's buckets spent being reduced (the communication
 * thread's busy time, hidden or not). */
double cz_grad_sync_comm_seconds(const cz_grad_sync *gs);

/* ---- the gradient sync's schedule, predicted (cost_model.c) ----
 * What cz_grad_sync does, in model time: backward makes ranges final in
 * `order` (grads.h), ready[i] floats of them (counted from the end that
 * finishes first) by ready_t[i] seconds after that backward began (both
 * ascending, the last count n); the buckets are reduced one after the
 * other in the order they complete (cz_layout_bucket_at), each once it is
 * complete, each taking the model's time for its bytes (ALLREDUCE: an
 * all-reduce; REDUCE_SCATTER, REDUCE: its reduce-scatter half). After the
 * update, a sharded placement all-gathers the weights bucket by bucket and
 * a coordinator broadcasts them (priced as that all-gather). rows: the
 * rows handed over apart (cz_grad_sync_rows, a tensor at offset 0 of
 * `height` rows of `width`; union 0 for none), reduced after both the
 * buckets and backward: the union's bit mask, then the block's all-reduce
 * or, by cz_grad_rows_as_block, the tensor's buckets again. So the
 * prediction follows whatever the layout's buckets are. */
typedef struct cz_rows_tail {
    double union_rows, height, width;
} cz_rows_tail;
/* What is predicted: the cluster, the algorithm, the layout and when
 * backward makes its ranges final. */
typedef struct cz_sync_scenario {
    const cz_net_model *net;
    int hosts, ranks_per_host; /* ranks placed host by host */
    cz_allreduce_algo algo;
    int grid_x; /* torus2d's columns; <= 0: the most square grid */
    const cz_bucket_layout *layout;
    cz_grad_order order;
    cz_sync_mode mode;
    const double *ready, *ready_t; /* [n_ready], both ascending */
    int n_ready;
    double backward_s;
    cz_rows_tail rows; /* union_rows 0: no rows apart */
} cz_sync_scenario;
typedef struct cz_sync_prediction {
    double total;   /* the buckets' (and rows') reductions, hidden or not */
    double exposed; /* the last bucket's end after backward's end (>= 0) */
    double gather;  /* the weights back to every rank after the update */
} cz_sync_prediction;
void cz_sync_predict(const cz_sync_scenario *s, cz_sync_prediction *out);

#endif
