/* comm: how a buffer and the ranks are cut, shared by every collective and
 * by the cost model, so that what is modelled is what runs: the chunks of a
 * buffer (one per rank), the bucket layout's arithmetic (buckets, each
 * rank's pieces, the order buckets complete in; its collectives are
 * layout.c's), the two-level shape of the ranks (comm_private.h), the
 * algorithms' names. Calls nothing else of comm. */
#include "comm_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- chunks ---- */

void cz_comm_chunk(size_t n, int p, int c, size_t *off, size_t *count) {
    size_t base = n / (size_t)p, extra = n % (size_t)p, uc = (size_t)c;
    *off = uc * base + (uc < extra ? uc : extra);
    *count = base + (uc < extra ? 1 : 0);
}

void cz_comm_chunk_table(size_t n, int p, int *counts, int *displs) {
    for (int c = 0; c < p; c++) {
        size_t off, count;
        cz_comm_chunk(n, p, c, &off, &count);
        counts[c] = (int)count;
        displs[c] = (int)off;
    }
}

/* ---- the bucket layout ---- */

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

/* ---- shapes ---- */

int comm_shape_make(comm_shape *s, const cz_host_layout *l, cz_allreduce_algo algo, int grid_x,
                    cz_error *err) {
    int p = l->p;
    memset(s, 0, sizeof *s);
    s->member = malloc(((size_t)p + 1) * sizeof(int));
    if (!s->member) return cz_fail(err, "comm: out of memory");
    if (algo == CZ_ALLREDUCE_HIERARCHICAL) {
        if (l->ranks_per_host == 0) {
            comm_shape_free(s);
            return cz_fail(err,
                           "dist.allreduce = hierarchical needs the same number of ranks on "
                           "every host (%d ranks on %d hosts)",
                           p, l->n_hosts);
        }
        s->inner = l->ranks_per_host;
        s->outer = l->n_hosts;
        for (int r = 0; r < p; r++) s->member[l->host_of[r] * s->inner + l->local_of[r]] = r;
    } else if (algo == CZ_ALLREDUCE_TORUS2D) {
        if (grid_x < 1 || p % grid_x != 0) {
            comm_shape_free(s);
            return cz_fail(err, "dist.grid: %d columns do not divide %d ranks into a grid", grid_x,
                           p);
        }
        s->inner = grid_x;
        s->outer = p / grid_x;
        s->grid_x = grid_x;
        for (int r = 0; r < p; r++) s->member[r] = r; /* (y, x) = (r / X, r % X) */
    } else {
        s->inner = p;
        s->outer = 1;
        for (int r = 0; r < p; r++) s->member[r] = r;
    }
    return 0;
}

void comm_shape_free(comm_shape *s) {
    free(s->member);
    s->member = NULL;
}

/* ---- names and settings ---- */

const char *cz_allreduce_algo_name(cz_allreduce_algo a) {
    switch (a) {
    case CZ_ALLREDUCE_RING:
        return "ring";
    case CZ_ALLREDUCE_MPI:
        return "mpi";
    case CZ_ALLREDUCE_HIERARCHICAL:
        return "hierarchical";
    case CZ_ALLREDUCE_TORUS2D:
        return "torus2d";
    case CZ_ALLREDUCE_AUTO:
        return "auto";
    }
    return "?";
}

int cz_comm_grid_parse(const char *s, int *x, int *y, cz_error *err) {
    *x = *y = 0;
    if (!s[0]) return 0;
    char tail;
    if (sscanf(s, "%dx%d%c", x, y, &tail) != 2 || *x < 1 || *y < 1)
        return cz_fail(err, "\"%s\" is not XxY (X ranks per row), e.g. \"2x4\"", s);
    return 0;
}

int cz_comm_grid_square(int p) {
    int best = 1;
    for (int x = 1; x * x <= p; x++)
        if (p % x == 0) best = x;
    return best;
}
