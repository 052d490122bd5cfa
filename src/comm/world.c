/* comm: MPI world setup and the bucket/chunk layout shared by every
 * collective and every optimizer placement (see include/cloze/comm.h). */
#include "cloze/comm.h"

#include <string.h>

int cz_comm_from_mpi(cz_comm *d, MPI_Comm comm, cz_error *err) {
    memset(d, 0, sizeof *d);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    d->thread_level = provided;
    /* our own duplicate: our tags can never match the caller's messages */
    if (MPI_Comm_dup(comm, &d->mpi) != MPI_SUCCESS)
        return cz_fail(err, "comm: MPI_Comm_dup failed");
    MPI_Comm_rank(d->mpi, &d->rank);
    MPI_Comm_size(d->mpi, &d->size);
    return 0;
}

int cz_comm_init(cz_comm *d, int *argc, char ***argv, cz_error *err) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return cz_fail(err, "comm: MPI_Init_thread failed");
    /* errors come back as return codes, so that they carry our message */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (cz_comm_from_mpi(d, MPI_COMM_WORLD, err) != 0) return -1;
    d->owns_mpi = 1;
    return 0;
}

void cz_comm_finalize(cz_comm *d) {
    if (d->mpi != MPI_COMM_NULL && d->mpi != 0) MPI_Comm_free(&d->mpi);
    if (d->owns_mpi) MPI_Finalize();
    d->owns_mpi = 0;
}

void cz_comm_chunk(size_t n, int p, int c, size_t *off, size_t *count) {
    size_t base = n / (size_t)p, extra = n % (size_t)p, uc = (size_t)c;
    *off = uc * base + (uc < extra ? uc : extra);
    *count = base + (uc < extra ? 1 : 0);
}

void cz_bucket_layout_make(cz_bucket_layout *l, size_t n, double bucket_bytes, int p) {
    l->n = n;
    l->p = p;
    size_t b = bucket_bytes > 0 ? (size_t)(bucket_bytes / sizeof(float)) : n;
    if (b == 0) b = 1;
    if (b > n) b = n;
    l->bucket = b;
    l->n_buckets = n == 0 ? 0 : (int)((n + b - 1) / b);
}

/* Buckets are counted from the end: backward finishes the last parameters
 * first, so bucket 0 is ready first. */
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
