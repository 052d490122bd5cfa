/* comm: what its sources alone share (never its tests or benchmarks, who
 * have comm_internal.h): the structs behind cz_comm and cz_coll, the
 * two-level shape that the algorithms run and the cost model prices, and
 * the ring and the bounded waits the algorithms are made of.
 *
 * The files, each calling only the ones above it in this list:
 *   shape.c       chunks of a buffer, the bucket layout's arithmetic, the
 *                 two-level shape, algorithm names
 *   hosts.c       which ranks share a host
 *   cost_model.c  the alpha-beta model, auto's choice (on shapes) and the
 *                 options it reads (cz_coll_opts_default)
 *   deadline.c    bounded waits and the liveness probe (of a cz_coll)
 *   ring.c        the pipelined ring over a group of ranks; cz_ring_*
 *   twolevel.c    cz_coll: ring, hierarchical, torus2d as rings of rings
 *   world.c       cz_comm: the MPI world, small collectives, attaching a cz_coll
 *   collectives.c cz_allreduce & co. by algorithm
 *   layout.c      the collectives over a bucket layout
 *   grad_sync.c   the gradient sync
 *   exact.c       exact gradient sums: int64 fixed point, per-tensor scales
 *   calibrate.c   the network measured at start-up, the cluster file */
#ifndef CLOZE_COMM_PRIVATE_H
#define CLOZE_COMM_PRIVATE_H

#include "comm_internal.h"

struct cz_comm_impl {
    MPI_Comm mpi;     /* our own duplicate: our messages never meet the caller's */
    int thread_level; /* MPI_THREAD_* actually provided */
    int owns_mpi;     /* 1: cz_comm_init called MPI_Init_thread, finalize ends MPI */
    cz_coll *coll;    /* the algorithm bound to mpi (cz_comm_attach_coll), or NULL;
                         freed by cz_comm_finalize */
    cz_coll *watch;   /* borrowed (cz_comm_watch), or NULL: the context whose deadline
                         (dist.timeout_s) and liveness probe bound the waits of the
                         small collectives and the layout gather/scatter */
};

/* Ranks as `outer` groups of `inner`: member[o * inner + i] is the rank at
 * (o, i); it owns chunk member[o * inner + i] (its own rank) of a buffer.
 * ring: inner = p, outer = 1, member[i] = i. */
typedef struct comm_shape {
    int inner, outer;
    int grid_x; /* torus2d: X (= inner); 0 otherwise */
    int *member;
} comm_shape;

/* The shape of algo (RING, HIERARCHICAL, TORUS2D) on layout l; grid_x for
 * TORUS2D (must divide p). Fails with a message naming the setting
 * (shape.c). */
int comm_shape_make(comm_shape *s, const cz_host_layout *l, cz_allreduce_algo algo, int grid_x,
                    cz_error *err);
void comm_shape_free(comm_shape *s);

/* One message of a block: buf[off, off + len), packed at tmp[packed]. */
typedef struct comm_piece {
    size_t off, packed;
    int len;
} comm_piece;

/* A context: the rings of one algorithm over a communicator. The flat ring
 * of a single call (ring.c) fills only comm, inner, rank, p, shape, me_i. */
struct cz_coll {
    cz_allreduce_algo algo; /* never AUTO */
    MPI_Comm comm;          /* duplicate of the caller's */
    MPI_Comm inner, outer;  /* our rings' communicators (ours: split from comm) */
    MPI_Comm alive;         /* liveness pings when a wait times out */
    double timeout;         /* seconds a wait may last; <= 0: forever */
    char (*host)[64];       /* [p]: every rank's host name, for messages */
    int p, rank;
    comm_shape shape;
    int me_i, me_o; /* this rank's (o, i) */
    float *tmp;     /* receive buffer of one block */
    size_t tmp_len;
    MPI_Request *req;
    size_t req_len;
    comm_piece *pieces;
    size_t pieces_len;
    size_t piece;   /* floats per message of the current call (ring.c) */
    int wire_bf16;  /* reduce-scatter and the all-reduce send bf16 (dist.grad_wire) */
    uint16_t *wire; /* bf16 staging, indexed like the buffer (ring.c) */
    int i64;        /* during an exact sum (cz_coll_allreduce_i64): int64 elements */
    size_t wire_len;
    char why[768];
};

/* ---- deadline.c ---- */
/* MPI_Testall until the requests are done (0), an MPI error (-1) or c's
 * deadline (1, *waited set), answering liveness pings meanwhile. */
int comm_poll_deadline(cz_coll *c, int n, MPI_Request *req, double *waited);
/* The probe after a wait of `waited` s in `where` (peer: the rank waited
 * for, or -1 for a collective of everyone): when some rank does not answer,
 * the process ends (CZ_EXIT_HOST_LOST, comm.h) and this does not return;
 * when every rank answers, the one-line verdict (-1). */
int comm_stalled(cz_coll *c, const char *where, int peer, double waited, cz_error *err);

/* ---- ring.c: one ring of c at a level ---- */
enum { COMM_LEVEL_INNER = 0, COMM_LEVEL_OUTER = 1 };
/* The ring of this rank's group at `level` (inner: its row of the shape,
 * outer: its column) over n floats. Reduce-scatter leaves block b complete
 * at member b; all-gather copies every member's block to all. */
int comm_ring_reduce_scatter(cz_coll *c, int level, float *buf, size_t n, cz_error *err);
/* bf16: on a context with wire_bf16, the all-reduce's all-gather sends bf16
 * (the owner's block is rounded in place first, so all end alike); 0: fp32. */
int comm_ring_allgather(cz_coll *c, int level, float *buf, size_t n, int bf16, cz_error *err);

/* ---- world.c ---- */
/* A started collective of c (MPI_I...) to its end: bounded by c's watch
 * when set (cz_coll_wait), else MPI_Wait; `what` names it in the error. */
int comm_wait(const cz_comm *c, MPI_Request *req, const char *what, cz_error *err);

#endif
