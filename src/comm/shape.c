/* comm: how a buffer and the ranks are cut, shared by every collective and
 * by the cost model, so that what is modelled is what runs: the chunks of a
 * buffer (one per rank), the two-level shape of the ranks (comm_private.h),
 * the algorithms' names. Calls nothing else of comm. */
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
