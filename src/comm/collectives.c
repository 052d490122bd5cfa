/* comm: the collectives on one float buffer, dispatched by algorithm. Grad
 * sync and the optimizer call only these entry points; an algorithm added
 * to cz_allreduce_algo gets a case in each (include/cloze/comm.h states
 * what each must leave where). */
#include "comm_private.h"

#include <stdlib.h>
#include <string.h>

/* MPI counts are int: the library's collectives take pieces of this many
 * floats (our ring pipelines its own pieces, CZ_RING_PIPE). */
#define MPI_PIECE (CZ_COMM_PIECE / sizeof(float))

/* Our algorithms run on the communicator's context when it has one for
 * `algo` (attached by the gradient sync: sub-communicators, bounded waits). */
static cz_coll *bound(const cz_comm *c, cz_allreduce_algo algo) {
    return c->impl->coll && cz_coll_algo(c->impl->coll) == algo ? c->impl->coll : NULL;
}

static int no_context(const cz_comm *c, cz_allreduce_algo algo, cz_error *err) {
    if (algo == CZ_ALLREDUCE_AUTO)
        return cz_fail(err, "comm: rank %d: \"auto\" is resolved when the gradient sync is made",
                       c->rank);
    return cz_fail(err, "comm: rank %d: %s needs its context (cz_comm_attach_coll)", c->rank,
                   cz_allreduce_algo_name(algo));
}

static int mpi_failed(const cz_comm *c, const char *what, cz_error *err) {
    return cz_fail(err, "comm: rank %d: %s failed", c->rank, what);
}

/* The chunk tables of n over the ranks, or NULL (out of memory). */
static int *chunk_tables(const cz_comm *c, size_t n, int **displs) {
    int *counts = calloc(2 * (size_t)c->size, sizeof(int));
    if (!counts) return NULL;
    *displs = counts + c->size;
    cz_comm_chunk_table(n, c->size, counts, *displs);
    return counts;
}

/* After a reduce-scatter: the chunks gathered to rank 0. */
static int gather_chunks(const cz_comm *c, float *buf, size_t n, cz_error *err) {
    int *displs, *counts = chunk_tables(c, n, &displs);
    if (!counts) return cz_fail(err, "comm: out of memory");
    void *send = c->rank == 0 ? MPI_IN_PLACE : (void *)(buf + displs[c->rank]);
    const char *what = "gather of the reduced chunks to rank 0";
    MPI_Request req;
    int rc = MPI_Igatherv(send, counts[c->rank], MPI_FLOAT, buf, counts, displs, MPI_FLOAT, 0,
                          c->impl->mpi, &req) == MPI_SUCCESS
                 ? comm_wait(c, &req, what, err)
                 : mpi_failed(c, what, err);
    free(counts);
    return rc;
}

static int mpi_reduce_scatter(const cz_comm *c, float *buf, size_t n, float *scratch,
                              cz_error *err) {
    int *displs, *counts = chunk_tables(c, n, &displs);
    size_t mine = counts ? (size_t)counts[c->rank] : 0;
    float *out = scratch ? scratch : cz_alloc((mine + 1) * sizeof(float), err);
    int rc = 0;
    if (!counts || !out)
        rc = cz_fail(err, "comm: out of memory");
    else if (MPI_Reduce_scatter(buf, out, counts, MPI_FLOAT, MPI_SUM, c->impl->mpi) != MPI_SUCCESS)
        rc = mpi_failed(c, "MPI_Reduce_scatter", err);
    else
        memcpy(buf + displs[c->rank], out, mine * sizeof(float));
    if (!scratch) cz_free(out);
    free(counts);
    return rc;
}

int cz_reduce_scatter(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n,
                      float *scratch, cz_error *err) {
    if (c->size == 1 || n == 0) return 0;
    if (bound(c, algo)) return cz_coll_reduce_scatter(bound(c, algo), buf, n, err);
    switch (algo) {
    case CZ_ALLREDUCE_RING:
        return cz_ring_reduce_scatter(c, buf, n, scratch, err);
    case CZ_ALLREDUCE_MPI:
        return mpi_reduce_scatter(c, buf, n, scratch, err);
    case CZ_ALLREDUCE_HIERARCHICAL:
    case CZ_ALLREDUCE_TORUS2D:
    case CZ_ALLREDUCE_AUTO:
        return no_context(c, algo, err);
    }
    return cz_fail(err, "comm: unknown all-reduce algorithm %d", (int)algo);
}

int cz_allgather(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n, cz_error *err) {
    if (c->size == 1 || n == 0) return 0;
    if (bound(c, algo)) return cz_coll_allgather(bound(c, algo), buf, n, err);
    switch (algo) {
    case CZ_ALLREDUCE_RING:
    case CZ_ALLREDUCE_HIERARCHICAL: /* without a context: an all-gather copies, any */
    case CZ_ALLREDUCE_TORUS2D:      /* order of copies gives the same bits */
        return cz_ring_allgather(c, buf, n, err);
    case CZ_ALLREDUCE_AUTO:
        return no_context(c, algo, err);
    case CZ_ALLREDUCE_MPI: {
        int *displs, *counts = chunk_tables(c, n, &displs);
        if (!counts) return cz_fail(err, "comm: out of memory");
        int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, counts, displs, MPI_FLOAT,
                                c->impl->mpi) == MPI_SUCCESS
                     ? 0
                     : mpi_failed(c, "MPI_Allgatherv", err);
        free(counts);
        return rc;
    }
    }
    return cz_fail(err, "comm: unknown all-reduce algorithm %d", (int)algo);
}

/* MPI_Allreduce (root < 0) or MPI_Reduce to root, in place, in pieces. */
static int mpi_sum_pieces(const cz_comm *c, float *buf, size_t n, int root, cz_error *err) {
    for (size_t off = 0; off < n; off += MPI_PIECE) {
        int len = (int)(n - off < MPI_PIECE ? n - off : MPI_PIECE);
        void *send = root < 0 || c->rank == root ? MPI_IN_PLACE : (void *)(buf + off);
        int rc = root < 0
                     ? MPI_Allreduce(MPI_IN_PLACE, buf + off, len, MPI_FLOAT, MPI_SUM, c->impl->mpi)
                     : MPI_Reduce(send, buf + off, len, MPI_FLOAT, MPI_SUM, root, c->impl->mpi);
        if (rc != MPI_SUCCESS)
            return cz_fail(err, "comm: rank %d: %s failed at offset %zu", c->rank,
                           root < 0 ? "MPI_Allreduce" : "MPI_Reduce", off);
    }
    return 0;
}

int cz_allreduce(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n, float *scratch,
                 cz_error *err) {
    if (c->size == 1 || n == 0) return 0;
    if (bound(c, algo)) return cz_coll_allreduce(bound(c, algo), buf, n, err);
    switch (algo) {
    case CZ_ALLREDUCE_HIERARCHICAL:
    case CZ_ALLREDUCE_TORUS2D:
    case CZ_ALLREDUCE_AUTO:
        return no_context(c, algo, err);
    case CZ_ALLREDUCE_RING:
        return cz_ring_allreduce(c, buf, n, scratch, err);
    case CZ_ALLREDUCE_MPI:
        return mpi_sum_pieces(c, buf, n, -1, err);
    }
    return cz_fail(err, "comm: unknown all-reduce algorithm %d", (int)algo);
}

int cz_reduce(const cz_comm *c, cz_allreduce_algo algo, float *buf, size_t n, float *scratch,
              cz_error *err) {
    if (c->size == 1 || n == 0) return 0;
    switch (algo) {
    case CZ_ALLREDUCE_RING:
    case CZ_ALLREDUCE_HIERARCHICAL:
    case CZ_ALLREDUCE_TORUS2D:
    case CZ_ALLREDUCE_AUTO:
        if (cz_reduce_scatter(c, algo, buf, n, scratch, err) != 0) return -1;
        return gather_chunks(c, buf, n, err);
    case CZ_ALLREDUCE_MPI:
        return mpi_sum_pieces(c, buf, n, 0, err);
    }
    return cz_fail(err, "comm: unknown all-reduce algorithm %d", (int)algo);
}

/* The exact sum's all-reduce (exact.c): int64 elements, added as integers,
 * so every algorithm, piece size and order gives the same bits. */
int cz_allreduce_i64(const cz_comm *c, cz_allreduce_algo algo, int64_t *buf, size_t n,
                     cz_error *err) {
    if (c->size == 1 || n == 0) return 0;
    cz_coll *b = bound(c, algo);
    if (b) return cz_coll_allreduce_i64(b, buf, n, err);
    switch (algo) {
    case CZ_ALLREDUCE_HIERARCHICAL:
    case CZ_ALLREDUCE_TORUS2D:
    case CZ_ALLREDUCE_AUTO:
        return no_context(c, algo, err);
    case CZ_ALLREDUCE_RING:
        return cz_ring_allreduce_i64(c, buf, n, err);
    case CZ_ALLREDUCE_MPI:
        for (size_t off = 0; off < n; off += MPI_PIECE) {
            int len = (int)(n - off < MPI_PIECE ? n - off : MPI_PIECE);
            if (MPI_Allreduce(MPI_IN_PLACE, buf + off, len, MPI_INT64_T, MPI_SUM, c->impl->mpi) !=
                MPI_SUCCESS)
                return cz_fail(err, "comm: rank %d: MPI_Allreduce (int64) failed at offset %zu",
                               c->rank, off);
        }
        return 0;
    }
    return cz_fail(err, "comm: unknown all-reduce algorithm %d", (int)algo);
}
