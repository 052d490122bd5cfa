/* comm: ring reduce-scatter and all-gather over MPI point-to-point
 * (Patarasuk & Yuan 2009; the bandwidth-optimal ring: each rank sends
 * 2(p-1)/p of the buffer in an all-reduce).
 *
 * Reduce-scatter: at step s (0..p-2) rank r sends chunk (r-1-s) mod p to
 * r+1 and receives chunk (r-2-s) mod p from r-1, adding its own values.
 * So chunk c starts at rank c+1 and ends, complete, at its owner c after
 * p-1 additions in the order ((g[c+1] + g[c+2]) + ...) + g[c]. The order is
 * fixed by (c, p) alone, so the bits never depend on timing.
 * All-gather: at step s rank r sends chunk (r-s) mod p to r+1; each chunk
 * is copied, never recomputed, so every rank ends with the owner's bits.
 * Each step is pipelined in pieces of CZ_RING_PIPE floats: all receives
 * are posted first and each piece is added as soon as it has arrived. */
#include "cloze/comm.h"

#include <stdlib.h>
#include <string.h>

static size_t n_pieces(size_t count) {
    return (count + CZ_RING_PIPE - 1) / CZ_RING_PIPE;
}

static size_t piece_len(size_t count, size_t j) {
    size_t lo = j * CZ_RING_PIPE;
    return count - lo < CZ_RING_PIPE ? count - lo : CZ_RING_PIPE;
}

/* Posts the sends (send = 1) of `count` floats at buf to `peer`, or the
 * receives from it, in pieces: req[j] for piece j. */
static int post(MPI_Comm comm, float *buf, size_t count, int peer, int tag, MPI_Request *req,
                int send) {
    for (size_t j = 0; j < n_pieces(count); j++) {
        float *p = buf + j * CZ_RING_PIPE;
        int len = (int)piece_len(count, j);
        int rc = send ? MPI_Isend(p, len, MPI_FLOAT, peer, tag, comm, &req[j])
                      : MPI_Irecv(p, len, MPI_FLOAT, peer, tag, comm, &req[j]);
        if (rc != MPI_SUCCESS) return -1;
    }
    return 0;
}

int cz_ring_reduce_scatter(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err) {
    MPI_Comm comm = c->mpi;
    int rank = c->rank, p = c->size;
    if (p == 1 || n == 0) return 0;
    size_t max_chunk, dummy;
    cz_comm_chunk(n, p, 0, &dummy, &max_chunk);
    size_t np = n_pieces(max_chunk);
    float *tmp = scratch ? scratch : cz_alloc(max_chunk * sizeof(float), err);
    MPI_Request *sreq = calloc(np + 1, sizeof *sreq), *rreq = calloc(np + 1, sizeof *rreq);
    int rc = 0;
    if (!tmp || !sreq || !rreq) {
        rc = cz_fail(err, "ring reduce-scatter: out of memory (%zu floats)", max_chunk);
        goto out;
    }
    int next = (rank + 1) % p, prev = (rank + p - 1) % p;
    for (int s = 0; s < p - 1; s++) {
        int sc = ((rank - 1 - s) % p + 2 * p) % p, rc_ = ((rank - 2 - s) % p + 2 * p) % p;
        size_t soff, scount, roff, rcount;
        cz_comm_chunk(n, p, sc, &soff, &scount);
        cz_comm_chunk(n, p, rc_, &roff, &rcount);
        if (post(comm, tmp, rcount, prev, s, rreq, 0) != 0 ||
            post(comm, buf + soff, scount, next, s, sreq, 1) != 0) {
            rc = cz_fail(err, "ring reduce-scatter: step %d: MPI post failed", s);
            goto out;
        }
        float *acc = buf + roff;
        for (size_t j = 0; j < n_pieces(rcount); j++) {
            if (MPI_Wait(&rreq[j], MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                rc = cz_fail(err, "ring reduce-scatter: step %d: receive from rank %d failed", s,
                             prev);
                goto out;
            }
            size_t lo = j * CZ_RING_PIPE, len = piece_len(rcount, j);
            for (size_t i = lo; i < lo + len; i++) acc[i] = tmp[i] + acc[i];
        }
        if (MPI_Waitall((int)n_pieces(scount), sreq, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            rc = cz_fail(err, "ring reduce-scatter: step %d: send to rank %d failed", s, next);
            goto out;
        }
    }
out:
    if (!scratch) cz_free(tmp);
    free(sreq);
    free(rreq);
    return rc;
}

int cz_ring_allgather(const cz_comm *c, float *buf, size_t n, cz_error *err) {
    MPI_Comm comm = c->mpi;
    int rank = c->rank, p = c->size;
    if (p == 1 || n == 0) return 0;
    size_t max_chunk, dummy;
    cz_comm_chunk(n, p, 0, &dummy, &max_chunk);
    size_t np = n_pieces(max_chunk);
    MPI_Request *req = calloc(2 * np + 2, sizeof *req);
    if (!req) return cz_fail(err, "ring all-gather: out of memory");
    int next = (rank + 1) % p, prev = (rank + p - 1) % p, rc = 0;
    for (int s = 0; s < p - 1; s++) {
        int sc = ((rank - s) % p + p) % p, rc_ = ((rank - s - 1) % p + p) % p;
        size_t soff, scount, roff, rcount;
        cz_comm_chunk(n, p, sc, &soff, &scount);
        cz_comm_chunk(n, p, rc_, &roff, &rcount);
        size_t nr = n_pieces(rcount), ns = n_pieces(scount);
        if (post(comm, buf + roff, rcount, prev, s, req, 0) != 0 ||
            post(comm, buf + soff, scount, next, s, req + nr, 1) != 0 ||
            MPI_Waitall((int)(nr + ns), req, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            rc = cz_fail(err, "ring all-gather: step %d: exchange with ranks %d/%d failed", s, prev,
                         next);
            break;
        }
    }
    free(req);
    return rc;
}

int cz_ring_allreduce(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err) {
    if (cz_ring_reduce_scatter(c, buf, n, scratch, err) != 0) return -1;
    return cz_ring_allgather(c, buf, n, err);
}
