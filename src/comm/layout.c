/* comm: the bucket/chunk layout shared by every bucketed collective and
 * every optimizer placement, and the collectives over a whole layout
 * (include/cloze/comm.h). */
#include "comm_private.h"

#include <stdlib.h>

void cz_bucket_layout_make(cz_bucket_layout *l, size_t n, double bucket_bytes, int p) {
    l->n = n;
    l->p = p;
    size_t b = bucket_bytes > 0 ? (size_t)(bucket_bytes / sizeof(float)) : n;
    if (b == 0) b = 1;
    if (b > n) b = n;
    l->bucket = b;
    l->n_buckets = n == 0 ? 0 : (int)((n + b - 1) / b);
}

/* Buckets are counted from the end of the buffer (comm.h: the boundaries
 * are a fixed convention; cz_layout_bucket_at gives the order of use). */
void cz_bucket_range(const cz_bucket_layout *l, int k, size_t *off, size_t *count) {
    size_t hi = l->n - (size_t)k * l->bucket;
    size_t lo = hi > l->bucket ? hi - l->bucket : 0;
    *off = lo;
    *count = hi - lo;
}

void cz_piece_range(const cz_bucket_layout *l, int k, int c, size_t *off, size_t *count) {
    size_t boff, bcount, coff;
    cz_bucket_range(l, k, &boff, &bcount);
    cz_comm_chunk(bcount, l->p, c, &coff, count);
    *off = boff + coff;
}

size_t cz_layout_owned(const cz_bucket_layout *l, int c) {
    size_t total = 0, off, count;
    for (int k = 0; k < l->n_buckets; k++) {
        cz_piece_range(l, k, c, &off, &count);
        total += count;
    }
    return total;
}

/* Bucket 0 ends the buffer: it completes first when ranges become final
 * from the end, last when they become final from offset 0. */
int cz_layout_bucket_at(const cz_bucket_layout *l, cz_grad_order order, int i) {
    return order == CZ_GRAD_DESCENDING ? i : l->n_buckets - 1 - i;
}

/* The i-th bucket to complete is complete once its float nearest the end
 * of the order is final. */
size_t cz_layout_ready_after(const cz_bucket_layout *l, cz_grad_order order, int i) {
    size_t off, count;
    cz_bucket_range(l, cz_layout_bucket_at(l, order, i), &off, &count);
    return order == CZ_GRAD_ASCENDING ? off + count : l->n - off;
}

/* ---- collectives over the layout ---- */

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
