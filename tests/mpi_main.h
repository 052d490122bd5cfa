/* The opening and the end of every MPI test's main(), in one place: MPI
 * through comm (MPI_THREAD_MULTIPLE, MPI_ERRORS_RETURN, as cloze-train
 * gets it), rank-tagged logging at WARN, the rank in CHECK's messages, and
 * one verdict for the whole job (failures summed over ranks). */
#ifndef CLOZE_TESTS_MPI_MAIN_H
#define CLOZE_TESTS_MPI_MAIN_H

#include "cloze/comm.h"

#include "check.h"

/* Exits with status 1 when MPI cannot be started. */
static inline void mpi_test_begin(cz_comm *c, int *argc, char ***argv) {
    cz_error err;
    if (cz_comm_init(c, argc, argv, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    check_rank = c->rank;
    cz_log_setup(c->rank, CZ_LOG_WARN);
}

/* 1 when every rank holds the same bytes (FNV-1a fingerprints compared). */
static inline int mpi_test_same_on_all_ranks(const cz_comm *c, const void *data, size_t bytes) {
    /* the largest fingerprint, and the smallest as the largest complement */
    uint64_t h = cz_fnv1a64(data, bytes, CZ_FNV_SEED), v[2] = {h, ~h};
    cz_error err;
    if (cz_comm_allreduce_u64(c, v, 2, CZ_OP_MAX, &err) != 0) {
        fprintf(stderr, "rank %d: %s\n", c->rank, err.msg);
        return 0;
    }
    return v[0] == ~v[1];
}

/* Which of p chunks (cz_comm_chunk's split of a bucket of n floats) holds
   element i: the rank that owns it in a reduce-scatter. */
static inline int mpi_test_chunk_owner(size_t n, int p, size_t i) {
    for (int c = 0; c < p; c++) {
        size_t off, cnt;
        cz_comm_chunk(n, p, c, &off, &cnt);
        if (i >= off && i < off + cnt) return c;
    }
    return -1;
}

/* main's exit status: 0 when no rank failed a CHECK. */
static inline int mpi_test_end(cz_comm *c) {
    double total = failures;
    cz_error err;
    if (cz_comm_allreduce_doubles(c, &total, 1, CZ_OP_SUM, &err) != 0) {
        fprintf(stderr, "rank %d: %s\n", c->rank, err.msg);
        total = 1;
    }
    if (c->rank == 0 && total == 0)
        printf("ok (%d ranks, %s)\n", c->size,
               cz_comm_threads_ok(c) ? "MPI_THREAD_MULTIPLE" : "one thread at a time");
    if (c->rank == 0 && total > 0) fprintf(stderr, "%.0f failure(s)\n", total);
    cz_comm_finalize(c);
    return total > 0 ? 1 : 0;
}

#endif
