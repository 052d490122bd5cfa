/* comm: the MPI world (cz_comm and what is behind it, comm_private.h), the
 * small collectives of the control path, and attaching an algorithm's
 * context (twolevel.c) to a communicator (see include/cloze/comm.h). */
#include "comm_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* c from a fresh impl over a duplicate of comm. */
static int wrap(cz_comm *c, MPI_Comm comm, cz_error *err) {
    memset(c, 0, sizeof *c);
    cz_comm_impl *m = calloc(1, sizeof *m);
    if (!m) return cz_fail(err, "comm: out of memory");
    m->mpi = MPI_COMM_NULL;
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    m->thread_level = provided;
    /* our own duplicate: our tags can never match the caller's messages */
    if (MPI_Comm_dup(comm, &m->mpi) != MPI_SUCCESS) {
        free(m);
        return cz_fail(err, "comm: MPI_Comm_dup failed");
    }
    MPI_Comm_rank(m->mpi, &c->rank);
    MPI_Comm_size(m->mpi, &c->size);
    c->impl = m;
    return 0;
}

int cz_comm_from_mpi(cz_comm *c, MPI_Comm comm, cz_error *err) {
    return wrap(c, comm, err);
}

int cz_comm_self(cz_comm *c, cz_error *err) {
    return cz_comm_from_mpi(c, MPI_COMM_SELF, err);
}

int cz_comm_dup(const cz_comm *c, cz_comm *out, cz_error *err) {
    if (wrap(out, c->impl->mpi, err) != 0) return -1;
    out->impl->thread_level = c->impl->thread_level; /* a test may have lowered it */
    return 0;
}

/* Open MPI's TCP transport sends a message above btl_tcp_eager_limit
 * (64 KiB by default) by rendezvous: the receiver's go-ahead travels back on
 * the same connection. Where a connection carries pieces both ways at once
 * (a ring of two members: two hosts, or the two-level algorithms' rings
 * between two hosts) those go-aheads wait behind the other direction's data,
 * and whole runs went at about half the link's rate; with every piece sent
 * eagerly they ran at the link's rate (docs/distributed-design.md, "Eager
 * pieces over TCP"). So the limit is raised above our largest piece, before
 * MPI_Init reads it, unless the environment already sets one of the three
 * (the user's choice wins; other MPIs ignore these names). */
static void tcp_eager_default(void) {
    static const char *const keys[] = {"OMPI_MCA_btl_tcp_eager_limit",
                                       "OMPI_MCA_btl_tcp_rndv_eager_limit",
                                       "OMPI_MCA_btl_tcp_max_send_size"};
    for (int i = 0; i < 3; i++)
        if (getenv(keys[i])) return;
    char v[32]; /* the largest piece and room for the headers */
    snprintf(v, sizeof v, "%zu", CZ_RING_PIECE_MAX_BYTES + 4096);
    for (int i = 0; i < 3; i++) setenv(keys[i], v, 0);
}

long cz_comm_tcp_eager_limit(void) {
    int provided, idx, count = 0;
    long v = -1;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
    if (MPI_T_cvar_get_index("btl_tcp_eager_limit", &idx) == MPI_SUCCESS) {
        MPI_T_cvar_handle h;
        unsigned long long u = 0; /* a size_t variable: 8 bytes here, room to spare */
        if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
            if (count == 1 && MPI_T_cvar_read(h, &u) == MPI_SUCCESS) v = (long)u;
            MPI_T_cvar_handle_free(&h);
        }
    }
    MPI_T_finalize();
    return v;
}

int cz_comm_init(cz_comm *c, int *argc, char ***argv, cz_error *err) {
    memset(c, 0, sizeof *c);
    tcp_eager_default();
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return cz_fail(err, "comm: MPI_Init_thread failed");
    /* errors come back as return codes, so that they carry our message;
     * communicators duplicated from the world inherit the handler */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (wrap(c, MPI_COMM_WORLD, err) != 0) return -1;
    c->impl->owns_mpi = 1;
    return 0;
}

void cz_comm_finalize(cz_comm *c) {
    cz_comm_impl *m = c->impl;
    if (!m) return;
    cz_coll_free(m->coll);
    if (m->mpi != MPI_COMM_NULL) MPI_Comm_free(&m->mpi);
    if (m->owns_mpi) MPI_Finalize();
    free(m);
    c->impl = NULL;
}

int cz_comm_threads_ok(const cz_comm *c) {
    return c->impl->thread_level >= MPI_THREAD_MULTIPLE;
}

MPI_Comm cz_comm_mpi(const cz_comm *c) {
    return c->impl->mpi;
}

int cz_comm_thread_level(const cz_comm *c) {
    return c->impl->thread_level;
}

void cz_comm_set_single_thread(cz_comm *c) {
    c->impl->thread_level = MPI_THREAD_SINGLE;
}

int cz_comm_attach_coll(cz_comm *c, const cz_coll_opts *o, cz_error *err) {
    cz_comm_impl *m = c->impl;
    cz_coll_free(m->coll);
    m->coll = NULL;
    if (o->algo == CZ_ALLREDUCE_MPI) return 0;
    return cz_coll_create(&m->coll, m->mpi, o, err);
}

cz_coll *cz_comm_coll(const cz_comm *c) {
    return c->impl->coll;
}

void cz_comm_abort(const cz_comm *c, int code) {
    (void)c;
    /* The caller has said its one line. MPI_Abort would add Open MPI's
     * banner for the aborting rank (and, with stderr closed, an ORTE error
     * line instead); a process that ends with a non-zero status makes mpirun
     * end every other rank of the job (its default), with only its short
     * note. _exit: no MPI_Finalize, whose synchronisation the other ranks,
     * blocked in a collective with this one, would never join. */
    fflush(stdout);
    fflush(stderr);
    _exit(code != 0 ? code : 1);
}

int cz_comm_node_ranks(const cz_comm *c, int *ranks, cz_error *err) {
    MPI_Comm node;
    *ranks = 1;
    if (MPI_Comm_split_type(c->impl->mpi, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return cz_fail(err, "comm: rank %d: cannot group the ranks of its node", c->rank);
    MPI_Comm_size(node, ranks);
    MPI_Comm_free(&node);
    return 0;
}

int cz_comm_node_allgather(const cz_comm *c, const void *mine, size_t bytes, void *all, int *index,
                           cz_error *err) {
    MPI_Comm node;
    if (MPI_Comm_split_type(c->impl->mpi, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return cz_fail(err, "comm: rank %d: cannot group the ranks of its node", c->rank);
    MPI_Comm_rank(node, index);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS)
        return cz_fail(err, "comm: rank %d: all-gather of %zu bytes on its node failed", c->rank,
                       bytes);
    return 0;
}

/* ---- small collectives ----
 * Started non-blocking and finished by comm_wait, so that with a watch
 * (cz_comm_watch) no wait outlasts dist.timeout_s. */

int comm_wait(const cz_comm *c, MPI_Request *req, const char *what, cz_error *err) {
    if (c->impl->watch) return cz_coll_wait(c->impl->watch, req, what, err);
    if (MPI_Wait(req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return cz_fail(err, "comm: rank %d: %s failed", c->rank, what);
    return 0;
}

static int started(const cz_comm *c, int rc, MPI_Request *req, const char *what, cz_error *err) {
    if (rc != MPI_SUCCESS) return cz_fail(err, "comm: rank %d: %s failed", c->rank, what);
    return comm_wait(c, req, what, err);
}

int cz_comm_barrier(const cz_comm *c, cz_error *err) {
    MPI_Request r;
    return started(c, MPI_Ibarrier(c->impl->mpi, &r), &r, "barrier", err);
}

static int allreduce(const cz_comm *c, void *v, int n, MPI_Datatype type, cz_reduce_op op,
                     const char *what, cz_error *err) {
    MPI_Request r;
    char w[64];
    snprintf(w, sizeof w, "all-reduce of %d %s", n, what);
    return started(c,
                   MPI_Iallreduce(MPI_IN_PLACE, v, n, type,
                                  op == CZ_OP_MAX   ? MPI_MAX
                                  : op == CZ_OP_BOR ? MPI_BOR
                                                    : MPI_SUM,
                                  c->impl->mpi, &r),
                   &r, w, err);
}

int cz_comm_allreduce_doubles(const cz_comm *c, double *v, int n, cz_reduce_op op, cz_error *err) {
    return allreduce(c, v, n, MPI_DOUBLE, op, "numbers", err);
}

int cz_comm_allreduce_u64(const cz_comm *c, uint64_t *v, int n, cz_reduce_op op, cz_error *err) {
    return allreduce(c, v, n, MPI_UINT64_T, op, "counts", err);
}

int cz_comm_end_early(int *argc, char ***argv, int code) {
    if (cz_launch_size() == 0) return code;
    cz_comm c;
    cz_error e;
    if (cz_comm_init(&c, argc, argv, &e) == 0) {
        cz_comm_barrier(&c, &e);
        cz_comm_finalize(&c);
    }
    return code;
}

static int bcast_bytes(const cz_comm *c, void *buf, int len, int root, const char *what,
                       cz_error *err) {
    MPI_Request r;
    return started(c, MPI_Ibcast(buf, len, MPI_BYTE, root, c->impl->mpi, &r), &r, what, err);
}

int cz_comm_bcast(const cz_comm *c, void *buf, size_t bytes, int root, cz_error *err) {
    for (size_t off = 0; off < bytes; off += CZ_COMM_PIECE) {
        size_t len = bytes - off < CZ_COMM_PIECE ? bytes - off : CZ_COMM_PIECE;
        char what[96];
        snprintf(what, sizeof what, "broadcast from rank %d at byte %zu", root, off);
        if (bcast_bytes(c, (char *)buf + off, (int)len, root, what, err) != 0) return -1;
    }
    return 0;
}

int cz_comm_share_verdict(const cz_comm *c, int root, int rc, cz_error *err) {
    char msg[CZ_ERROR_MAX] = {0}, what[64];
    if (c->rank == root && rc < 0 && err) snprintf(msg, sizeof msg, "%s", err->msg);
    snprintf(what, sizeof what, "broadcast of rank %d's verdict", root);
    cz_error e;
    if (bcast_bytes(c, &rc, (int)sizeof rc, root, what, &e) != 0) {
        if (err) *err = e;
        return -1;
    }
    if (rc >= 0) return rc;
    snprintf(what, sizeof what, "broadcast of rank %d's error", root);
    if (bcast_bytes(c, msg, (int)sizeof msg, root, what, &e) != 0) {
        if (err) *err = e;
        return -1;
    }
    cz_fail(err, "%s", msg);
    return rc;
}

int cz_comm_agree(const cz_comm *c, int rc, int *who, cz_error *err) {
    /* the lowest failing rank r as the largest size - r */
    double first = rc != 0 ? c->size - c->rank : 0;
    cz_error e;
    if (cz_comm_allreduce_doubles(c, &first, 1, CZ_OP_MAX, &e) != 0) {
        if (err) *err = e;
        return -1;
    }
    if (first == 0) return 0;
    int root = c->size - (int)first;
    if (cz_comm_share_verdict(c, root, -1, err) != -1) return -1;
    if (who) *who = root;
    return 1;
}

int cz_comm_agree_setup(const cz_comm *c, int rc, cz_error *err) {
    int who = 0, agreed = cz_comm_agree(c, rc, &who, err);
    if (agreed <= 0) return agreed;
    if (who != 0) cz_fail_prefix(err, "rank %d", who); /* (rank 0's: no prefix) */
    return CZ_COMM_ERR_ALL_RANKS;
}
