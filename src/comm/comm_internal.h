/* comm's inside, with MPI's types: what comm's sources share with its own
 * tests (tests/) and the benchmarks (bench/), and nobody else may include
 * (tests/check_layering.py). The library's users have include/cloze/comm.h,
 * which carries no MPI type; train, optim and the programs reach the other
 * ranks only through it.
 *
 * Here: the raw communicator of a cz_comm, the ring and the two-level
 * algorithms as contexts of their own (cz_coll), which ranks share a host,
 * and the alpha-beta cost model that "auto" chooses with. The details the
 * sources alone share (the structs behind cz_comm_impl and cz_coll) are in
 * comm_private.h. */
#ifndef CLOZE_COMM_INTERNAL_H
#define CLOZE_COMM_INTERNAL_H

#include "cloze/comm.h"

#include <mpi.h>

/* ---- the MPI side of a cz_comm ---- */

/* Wraps an existing communicator (tests, MPI already initialised); freed by
 * cz_comm_finalize, which then does not end MPI. */
int cz_comm_from_mpi(cz_comm *c, MPI_Comm comm, cz_error *err);
/* c's own duplicate communicator (our messages never meet the caller's). */
MPI_Comm cz_comm_mpi(const cz_comm *c);
/* MPI_THREAD_* that MPI provided to c. */
int cz_comm_thread_level(const cz_comm *c);
/* From now on c reports MPI_THREAD_SINGLE (a test's synchronous path: a
 * gradient sync made on c then runs without its thread). c must be a
 * context of its own (cz_comm_dup), not a copy of one in use. */
void cz_comm_set_single_thread(cz_comm *c);
/* All p chunks of n (cz_comm_chunk) as MPI count and displacement tables
 * (p entries each). */
void cz_comm_chunk_table(size_t n, int p, int *counts, int *displs);
/* Open MPI's btl_tcp_eager_limit as the library reads it (MPI_T), in bytes;
 * -1 where there is no such variable (another MPI, or no TCP transport).
 * cz_comm_init raises it above the ring's largest piece unless the
 * environment set it (world.c). */
long cz_comm_tcp_eager_limit(void);

/* ---- the ring over MPI point-to-point (Patarasuk & Yuan 2009; ring.c) ----
 * Pipelined: each ring step moves its chunk in pieces so that sending one
 * piece overlaps adding the last: about 1/32 of a chunk, at least
 * CZ_RING_PIPE floats, at most CZ_RING_PIECE_MAX. These run on a flat ring
 * made for the call (no deadline); scratch is unused (the streamed ring
 * keeps its own two blocks in flight). */
#define CZ_RING_PIPE (1 << 16)
#define CZ_RING_PIECE_MAX (16 * CZ_RING_PIPE)
/* Its bytes in fp32: Open MPI sends messages up to this eagerly (world.c). */
#define CZ_RING_PIECE_MAX_BYTES ((size_t)CZ_RING_PIECE_MAX * sizeof(float))
int cz_ring_allreduce(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err);
int cz_ring_reduce_scatter(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err);
int cz_ring_allgather(const cz_comm *c, float *buf, size_t n, cz_error *err);
/* The ring's all-reduce of int64 elements (the exact sum, exact.c). */
int cz_ring_allreduce_i64(const cz_comm *c, int64_t *buf, size_t n, cz_error *err);

/* A barrier that waits without spinning (MPI_Ibarrier and short sleeps),
 * so that the ranks being measured get the cores (calibrate.c). */
void cz_comm_quiet_barrier(MPI_Comm comm);

/* ---- hosts (hosts.c) ----
 * Every algorithm keeps the chunk ownership of comm.h: after a
 * reduce-scatter, rank c holds chunk c (cz_comm_chunk(n, p, c)) of the sum,
 * so placements and norms do not depend on the algorithm. The two-level
 * algorithms (twolevel.c) arrange the p ranks as `outer` groups of `inner`
 * ranks, rank (o, i):
 *   hierarchical  inner = the ranks of one host (MPI_Comm_split_type
 *                 shared; i = index in the host, o = host), outer = the
 *                 ranks with the same i on every host (Horovod's
 *                 hierarchical all-reduce);
 *   torus2d XxY   rank g at (x, y) = (g % X, g / X); inner = a row (same
 *                 y, X ranks), outer = a column (same x, Y ranks) (the
 *                 TPU v3 pod's 2-D all-reduce, Ying et al. 2018, sec. 3).
 * All-reduce = ring reduce-scatter inside the inner groups (member i ends
 * with the inner sum of the chunks owned by (., i)), ring reduce-scatter of
 * those across the outer group (rank (o, i) ends with its own chunk, summed
 * everywhere), ring all-gather across the outer group, ring all-gather
 * inside the inner group. Summation order of chunk c, owned by (o, i):
 *   S_o' = ((g(o',i+1) + g(o',i+2)) + ...) + g(o',i)     inner, indices mod inner
 *   sum  = ((S_(o+1) + S_(o+2)) + ...) + S_o             outer, indices mod outer
 * fixed by the layout alone: the same bits on every rank and every run. The
 * flat ring is the case inner = p, outer = 1. */

/* Which ranks share a host. Hosts are numbered by their lowest rank. */
typedef struct cz_host_layout {
    int p, n_hosts;
    int ranks_per_host; /* 0 when hosts have different numbers of ranks */
    int *host_of;       /* [p]: host of each rank */
    int *local_of;      /* [p]: index of each rank among its host's ranks (by rank) */
} cz_host_layout;
/* Collective over comm (MPI_Comm_split_type MPI_COMM_TYPE_SHARED). */
int cz_host_layout_get(MPI_Comm comm, cz_host_layout *l, cz_error *err);
/* A layout given by hand (models of clusters that are not here): hosts of
 * r ranks each, ranks placed host by host (block) or round robin. */
int cz_host_layout_make(cz_host_layout *l, int n_hosts, int ranks_per_host, int round_robin,
                        cz_error *err);
int cz_host_layout_copy(cz_host_layout *dst, const cz_host_layout *src, cz_error *err);
void cz_host_layout_free(cz_host_layout *l);

/* ---- the cost model (cost_model.c; docs/distributed-design.md) ----
 * cz_net_model (the alpha-beta parameters) is public (comm.h): the planner
 * and the calibration file use it. */
/* The network the hosts sit on: a non-blocking switch (star) or a 2-D torus
 * of tx*ty hosts, host h at (h % tx, h / tx), routed X first then Y. */
typedef struct cz_net_topology {
    int torus; /* 0: star */
    int tx, ty;
} cz_net_topology;

/* Model time of one all-reduce of `bytes` (grid_x used by torus2d). */
double cz_net_allreduce_time(const cz_net_model *m, const cz_net_topology *t,
                             const cz_host_layout *l, cz_allreduce_algo algo, int grid_x,
                             double bytes);
/* Lower bound of any all-reduce across the hosts' links: every host must
 * send and receive 2(h-1)/h of the data (Patarasuk & Yuan 2009) and the
 * result needs ceil(log2 h) message latencies. */
double cz_model_bound(const cz_net_model *m, const cz_host_layout *l, double bytes);

/* ---- an algorithm bound to a communicator (twolevel.c) ----
 * One of our all-reduce algorithms (ring, hierarchical, torus2d) with its
 * sub-communicators, scratch, every rank's host name and the deadline of
 * its waits. */
typedef struct cz_coll cz_coll;
typedef struct cz_coll_opts {
    cz_allreduce_algo algo; /* AUTO: chosen by the model for `bytes`; not MPI */
    int grid_x, grid_y;     /* torus2d shape; 0: the most square (torus2d), every grid (auto) */
    double bytes;           /* typical message (a bucket), for AUTO */
    cz_net_model net;
    cz_net_topology topo; /* for AUTO's model; star unless known */
    /* NULL: the hosts MPI reports (MPI_Comm_split_type). Else a layout given
     * by hand, p ranks: tests run two-level shapes on one machine. */
    const cz_host_layout *hosts;
    /* A wait for a peer longer than this fails with a message naming the
     * ranks (and hosts) that no longer answer; <= 0: wait forever. */
    double timeout_s;
    /* 1: reduce-scatter and all-reduce send bf16 and add in fp32 at each hop
     * (dist.grad_wire = "bf16", ring.c); a plain all-gather stays fp32 */
    int wire_bf16;
} cz_coll_opts;
/* The defaults: ring, 25 MiB, the default network (cost_model.c). */
void cz_coll_opts_default(cz_coll_opts *o);
/* Options from the configuration, for messages of `bytes` (a bucket). */
int cz_coll_opts_from_config(cz_coll_opts *o, const cz_comm_config *cfg, double bytes,
                             cz_error *err);
/* AUTO's rule (cost_model.c): the cheapest algorithm under the model for
 * o->bytes on layout l (ties keep the simpler one); *grid_x for torus2d;
 * `why` (may be NULL) gets every candidate's model time. */
cz_allreduce_algo cz_allreduce_choose(const cz_coll_opts *o, const cz_host_layout *l, int *grid_x,
                                      char *why, size_t why_len);
/* Collective over comm (duplicated: the context has its own messages).
 * describe() says what was chosen and why. */
int cz_coll_create(cz_coll **out, MPI_Comm comm, const cz_coll_opts *o, cz_error *err);
/* Collective: a new context for c, which cz_allreduce & co. then run on
 * (world.c; "mpi": nothing to attach). Freed by cz_comm_finalize. */
int cz_comm_attach_coll(cz_comm *c, const cz_coll_opts *o, cz_error *err);
/* c's attached context, or NULL. */
cz_coll *cz_comm_coll(const cz_comm *c);
void cz_coll_free(cz_coll *c);
cz_allreduce_algo cz_coll_algo(const cz_coll *c);
const char *cz_coll_describe(const cz_coll *c);
const char *cz_allreduce_algo_name(cz_allreduce_algo a);
/* In place, any n (0, < p): */
int cz_coll_allreduce(cz_coll *c, float *buf, size_t n, cz_error *err);
/* afterwards rank c's chunk c (cz_comm_chunk(n, p, c)) holds the sum */
int cz_coll_reduce_scatter(cz_coll *c, float *buf, size_t n, cz_error *err);
/* each rank provides its chunk; afterwards all of buf */
int cz_coll_allgather(cz_coll *c, float *buf, size_t n, cz_error *err);
/* In place, int64 elements added as integers (exact.c): any order of
 * additions gives the same bits */
int cz_coll_allreduce_i64(cz_coll *c, int64_t *buf, size_t n, cz_error *err);
/* Waits for one request at most the context's deadline (dist.timeout_s);
 * past it, the liveness probe's verdict, `what` naming the wait
 * (deadline.c). */
int cz_coll_wait(cz_coll *c, MPI_Request *req, const char *what, cz_error *err);

#endif
