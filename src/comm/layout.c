/* comm: the collectives over a whole bucket layout (include/cloze/comm.h):
 * bucket by bucket, all-gather, and the owned pieces gathered to and
 * scattered from rank 0. The layout's arithmetic is shape.c's. */
#include "comm_private.h"

#include <stdlib.h>

int cz_layout_allgather(const cz_comm *c, cz_allreduce_algo algo, const cz_bucket_layout *l,
                        float *buf, cz_error *err) {
    for (int k = 0; k < l->n_buckets; k++) {
        size_t off, count;
        cz_bucket_range(l, k, &off, &count);
        if (cz_allgather(c, algo, buf + off, count, err) != 0)
            return cz_fail_prefix(err, "bucket %d of %d", k, l->n_buckets);
    }
    return 0;
}

/* Owned pieces <-> full buffer on rank 0, bucket by bucket: this rank's
 * piece of bucket k sits in `owned` after its pieces of buckets 0..k-1. */
static int move_owned(const cz_comm *c, const cz_bucket_layout *l, float *owned, float *full,
                      int gather, cz_error *err) {
    int p = c->size;
    int *counts = calloc((size_t)p, sizeof(int)), *displs = calloc((size_t)p, sizeof(int));
    int rc = counts && displs ? 0 : cz_fail(err, "comm: out of memory");
    size_t packed = 0;
    for (int k = 0; rc == 0 && k < l->n_buckets; k++) {
        size_t boff, bcount;
        cz_bucket_range(l, k, &boff, &bcount);
        cz_comm_chunk_table(bcount, p, counts, displs);
        float *root = c->rank == 0 ? full + boff : NULL;
        float *mine = owned + packed;
        MPI_Request req;
        int r = gather ? MPI_Igatherv(mine, counts[c->rank], MPI_FLOAT, root, counts, displs,
                                      MPI_FLOAT, 0, c->impl->mpi, &req)
                       : MPI_Iscatterv(root, counts, displs, MPI_FLOAT, mine, counts[c->rank],
                                       MPI_FLOAT, 0, c->impl->mpi, &req);
        char what[64];
        snprintf(what, sizeof what,
                 gather ? "gather of bucket %d to rank 0" : "scatter of bucket %d from rank 0", k);
        if (r != MPI_SUCCESS)
            rc = cz_fail(err, "comm: rank %d: %s failed", c->rank, what);
        else
            rc = comm_wait(c, &req, what, err);
        packed += (size_t)counts[c->rank];
    }
    free(counts);
    free(displs);
    return rc;
}

int cz_layout_gather(const cz_comm *c, const cz_bucket_layout *l, const float *owned, float *full,
                     cz_error *err) {
    return move_owned(c, l, (float *)owned, full, 1, err);
}

int cz_layout_scatter(const cz_comm *c, const cz_bucket_layout *l, const float *full, float *owned,
                      cz_error *err) {
    return move_owned(c, l, owned, (float *)full, 0, err);
}
