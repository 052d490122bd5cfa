/* comm: the ring reduce-scatter, all-gather and all-reduce over MPI
 * point-to-point (Patarasuk & Yuan 2009; the bandwidth-optimal ring: each
 * rank sends 2(p-1)/p of the buffer in an all-reduce).
 *
 * Reduce-scatter: at step s (0..p-2) rank r sends chunk (r-1-s) mod p to
 * r+1 and receives chunk (r-2-s) mod p from r-1, adding its own values.
 * So chunk c starts at rank c+1 and ends, complete, at its owner c after
 * p-1 additions in the order ((g[c+1] + g[c+2]) + ...) + g[c]. The order is
 * fixed by (c, p) alone, so the bits never depend on timing.
 * All-gather: at step s rank r sends chunk (r-s) mod p to r+1; each chunk
 * is copied, never recomputed, so every rank ends with the owner's bits.
 *
 * The ring is the one-level case of the two-level rings in twolevel.c
 * (inner group = every rank, one block = one chunk); these entry points run
 * it on a context made for the call. A communicator with a context attached
 * (cz_comm_attach_coll: the gradient thread's) runs the same code with its
 * scratch kept and its waits bounded. */
#include "cloze/comm.h"

int cz_ring_reduce_scatter(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err) {
    (void)scratch; /* the streamed ring keeps two blocks in flight: its own scratch */
    return cz_coll_ring_once(c->mpi, CZ_COLL_REDUCE_SCATTER, buf, n, err);
}

int cz_ring_allgather(const cz_comm *c, float *buf, size_t n, cz_error *err) {
    return cz_coll_ring_once(c->mpi, CZ_COLL_ALLGATHER, buf, n, err);
}

int cz_ring_allreduce(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err) {
    (void)scratch;
    return cz_coll_ring_once(c->mpi, CZ_COLL_ALLREDUCE, buf, n, err);
}
