/* comm: which ranks share a host (comm_internal.h, "hosts"). Calls nothing
 * else of comm.
 *
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the ranks that can share
 * memory, which is what a host is to the collectives: inside it messages are
 * memory copies, between hosts they cross the network. */
#include "comm_internal.h"

#include <stdlib.h>
#include <string.h>

static int layout_alloc(cz_host_layout *l, int p, cz_error *err) {
    memset(l, 0, sizeof *l);
    l->p = p;
    l->host_of = calloc((size_t)p + 1, sizeof(int));
    l->local_of = calloc((size_t)p + 1, sizeof(int));
    if (!l->host_of || !l->local_of) {
        cz_host_layout_free(l);
        return cz_fail(err, "comm: out of memory (host layout of %d ranks)", p);
    }
    return 0;
}

/* From host_of: hosts renumbered by lowest rank, local indices by rank,
 * ranks_per_host when uniform. */
static void layout_finish(cz_host_layout *l) {
    int p = l->p, n = 0;
    int *rename = malloc(((size_t)p + 1) * sizeof(int)),
        *count = calloc((size_t)p + 1, sizeof(int));
    if (!rename || !count) { /* tiny; cannot fail in practice, keep it safe */
        free(rename);
        free(count);
        return;
    }
    for (int h = 0; h <= p; h++) rename[h] = -1;
    for (int r = 0; r < p; r++) {
        int h = l->host_of[r];
        if (rename[h] < 0) rename[h] = n++;
        l->host_of[r] = rename[h];
        l->local_of[r] = count[l->host_of[r]]++;
    }
    l->n_hosts = n;
    l->ranks_per_host = n > 0 ? count[0] : 0;
    for (int h = 1; h < n; h++)
        if (count[h] != count[0]) l->ranks_per_host = 0;
    free(rename);
    free(count);
}

int cz_host_layout_get(MPI_Comm comm, cz_host_layout *l, cz_error *err) {
    int p, rank;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &rank);
    if (layout_alloc(l, p, err) != 0) return -1;
    MPI_Comm local;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) !=
        MPI_SUCCESS) {
        cz_host_layout_free(l);
        return cz_fail(err, "comm: MPI_Comm_split_type(shared) failed");
    }
    /* the host's name for now: its lowest rank (local rank 0's world rank) */
    int leader = rank;
    MPI_Bcast(&leader, 1, MPI_INT, 0, local);
    MPI_Comm_free(&local);
    if (MPI_Allgather(&leader, 1, MPI_INT, l->host_of, 1, MPI_INT, comm) != MPI_SUCCESS) {
        cz_host_layout_free(l);
        return cz_fail(err, "comm: exchanging host layouts failed");
    }
    layout_finish(l);
    return 0;
}

int cz_host_layout_make(cz_host_layout *l, int n_hosts, int ranks_per_host, int round_robin,
                        cz_error *err) {
    if (n_hosts < 1 || ranks_per_host < 1)
        return cz_fail(err, "comm: host layout of %d hosts x %d ranks", n_hosts, ranks_per_host);
    int p = n_hosts * ranks_per_host;
    if (layout_alloc(l, p, err) != 0) return -1;
    for (int r = 0; r < p; r++) l->host_of[r] = round_robin ? r % n_hosts : r / ranks_per_host;
    layout_finish(l);
    return 0;
}

int cz_host_layout_copy(cz_host_layout *dst, const cz_host_layout *src, cz_error *err) {
    if (layout_alloc(dst, src->p, err) != 0) return -1;
    memcpy(dst->host_of, src->host_of, (size_t)src->p * sizeof(int));
    layout_finish(dst);
    return 0;
}

void cz_host_layout_free(cz_host_layout *l) {
    free(l->host_of);
    free(l->local_of);
    l->host_of = l->local_of = NULL;
}
