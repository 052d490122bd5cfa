/* comm: the MPI world and collectives on flat float buffers. Knows no layer
 * names: it moves and sums ranges of floats.
 *
 * Determinism. Every sum produced here by the "ring" algorithm is computed in
 * one fixed order that does not depend on timing or threads, and every rank
 * ends with the same bits: a chunk is reduced once, travelling around the
 * ring, and the finished chunk is then copied (all-gather) to everyone.
 *
 * Layout ("pieces"). A buffer of n floats is cut into buckets of B floats
 * counted from the END of the buffer (backward produces the last parameters
 * first): bucket k = [max(0, n-(k+1)B), n-kB). Each bucket is cut into p
 * chunks (cz_comm_chunk), chunk c owned by rank c. The sum of an element in
 * chunk c is ((g[c+1] + g[c+2]) + ...) + g[c] (ranks mod p). The same layout
 * serves the all-reduce, ZeRO-1 sharding (rank r updates chunk r of every
 * bucket) and the fixed-order norms, so all optimizer placements see the
 * same gradient bits. A plain cz_ring_allreduce is the one-bucket case. */
#ifndef CLOZE_COMM_H
#define CLOZE_COMM_H

#include "cloze/core.h"
#include "cloze/model.h" /* cz_grad_ready_fn */

#include <mpi.h>

typedef struct cz_comm {
    MPI_Comm mpi; /* duplicate of the world communicator (ours to use) */
    int rank, size;
    int thread_level; /* MPI_THREAD_* actually provided */
    int owns_mpi;     /* 1: cz_comm_init called MPI_Init_thread, finalize ends MPI */
} cz_comm;

/* MPI_Init_thread asking for MPI_THREAD_MULTIPLE (the gradient thread needs
 * it to overlap with backward; with less, grad sync runs without overlap).
 * Also sets up logging's rank tag. */
int cz_comm_init(cz_comm *d, int *argc, char ***argv, cz_error *err);
/* Wraps an existing communicator (tests, MPI already initialised). */
int cz_comm_from_mpi(cz_comm *d, MPI_Comm comm, cz_error *err);
void cz_comm_finalize(cz_comm *d);

/* Chunk c of p of a length-n range: [*off, *off + *count). The first n % p
 * chunks are one longer; chunks are empty when n < p. */
void cz_comm_chunk(size_t n, int p, int c, size_t *off, size_t *count);

/* ---- ring collectives over MPI point-to-point (one bucket = whole buffer) ----
 * Pipelined: each ring step moves its chunk in pieces of at most
 * CZ_RING_PIPE floats so that sending one piece overlaps adding the last. */
#define CZ_RING_PIPE (1 << 16)
/* In place sum over ranks; identical bits on every rank. Any n (0, < p). */
int cz_ring_allreduce(const cz_comm *d, float *buf, size_t n, cz_error *err);
/* In place: afterwards chunk `rank` (cz_comm_chunk(n, size, rank)) of buf
 * holds the sum; the rest of buf is scratch. */
int cz_ring_reduce_scatter(const cz_comm *d, float *buf, size_t n, cz_error *err);
/* In place: each rank provides chunk `rank` of buf; afterwards all of buf. */
int cz_ring_allgather(const cz_comm *d, float *buf, size_t n, cz_error *err);
/* Same collectives on an explicit communicator (the grad-sync thread uses
 * its own duplicate so its messages never meet the main thread's). */
/* tmp: scratch of at least ceil(n / p) floats, or NULL (allocated per call). */
int cz_ring_reduce_scatter_comm(MPI_Comm comm, float *buf, size_t n, float *tmp, cz_error *err);
int cz_ring_allgather_comm(MPI_Comm comm, float *buf, size_t n, cz_error *err);

/* dist.allreduce: "ring" (ours, deterministic) or "mpi" (MPI_Allreduce,
 * MPI_Reduce_scatter, MPI_Reduce: for comparison; bitwise agreement across
 * placements is only promised for "ring"). */
typedef enum { CZ_ALLREDUCE_RING = 0, CZ_ALLREDUCE_MPI = 1 } cz_allreduce_algo;
int cz_allreduce_algo_parse(const char *name, cz_allreduce_algo *out, cz_error *err);
/* Whole-buffer sum over ranks with the chosen algorithm (ring: identical
 * bits on every rank; mpi: MPI_Allreduce in pieces of at most 2^28 floats). */
int cz_allreduce(const cz_comm *d, cz_allreduce_algo algo, float *buf, size_t n, cz_error *err);

/* ---- the bucket layout ---- */
typedef struct cz_bucket_layout {
    size_t n;      /* floats in the buffer */
    size_t bucket; /* floats per bucket (the first bucket of the buffer may be shorter) */
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

/* ---- gradient synchronisation in buckets, overlapped with backward ----
 * Mode says what each bucket ends as:
 *   ALLREDUCE       every rank holds the whole sum            (replicated)
 *   REDUCE_SCATTER  rank r holds the sum of its pieces only   (sharded)
 *   REDUCE          rank 0 holds the whole sum                (coordinator)
 * REDUCE is the ring reduce-scatter followed by a gather of the chunks to
 * rank 0, so rank 0's bits equal those of ALLREDUCE.
 *
 * Overlap: with MPI_THREAD_MULTIPLE a communication thread (on its own
 * communicator) reduces bucket 0, 1, 2, ... strictly in index order, each as
 * soon as all of its floats were reported final by cz_grad_sync_ready. The
 * fixed order keeps every rank's message sequence identical (no deadlock
 * whatever the hook's range order). Without MPI_THREAD_MULTIPLE all buckets
 * are reduced in cz_grad_sync_finish (no overlap, same bits). */
typedef enum { CZ_SYNC_ALLREDUCE = 0, CZ_SYNC_REDUCE_SCATTER = 1, CZ_SYNC_REDUCE = 2 } cz_sync_mode;

typedef struct cz_grad_sync cz_grad_sync;

int cz_grad_sync_create(cz_grad_sync **out, const cz_comm *d, size_t n, double bucket_bytes,
                        cz_sync_mode mode, cz_allreduce_algo algo, cz_error *err);
void cz_grad_sync_free(cz_grad_sync *gs);
const cz_bucket_layout *cz_grad_sync_layout(const cz_grad_sync *gs);
/* Starts one step over `grads` (length n; must stay valid until finish). */
void cz_grad_sync_begin(cz_grad_sync *gs, float *grads);
/* Backward hook (cz_grad_ready_fn-compatible: pass gs as ctx): the range is
 * final on this rank; every bucket that became complete is started. */
void cz_grad_sync_ready(void *gs, size_t offset, size_t count);
/* Marks everything final (ranges never reported are taken as done), waits
 * until every bucket is reduced. Returns the first communication error. */
int cz_grad_sync_finish(cz_grad_sync *gs, cz_error *err);
/* Seconds the last step spent waiting in finish (communication not hidden). */
double cz_grad_sync_wait_seconds(const cz_grad_sync *gs);

#endif
