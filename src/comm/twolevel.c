/* comm: ring, hierarchical and torus2d all-reduce, reduce-scatter and
 * all-gather on one code path: rings over groups of ranks whose "blocks"
 * are sets of chunks (include/cloze/comm.h, "two-level all-reduce").
 *
 * A ring of q members over blocks B_0..B_(q-1) (Patarasuk & Yuan 2009):
 * reduce-scatter step s (0..q-2): member m sends block (m-1-s) mod q to m+1
 * and adds block (m-2-s) mod q arriving from m-1 to its own, so block b
 * ends, complete, at member b in the order ((x_(b+1) + x_(b+2)) + ...) + x_b.
 * All-gather step s: member m sends block (m-s) mod q to m+1; blocks are
 * copied, never recomputed. In the inner ring block i is every chunk owned
 * by a rank (., i) (one per outer group); in the outer ring of the ranks
 * (., i) block o is the chunk of rank (o, i). Every message is cut into
 * pieces (ring_piece), all receives of a step are posted first, and each
 * piece is added as soon as it has arrived. */
#include "comm_internal.h"

#include <stdlib.h>
#include <string.h>

enum { LEVEL_INNER = 0, LEVEL_OUTER = 1 };

struct cz_coll {
    cz_allreduce_algo algo; /* never AUTO */
    MPI_Comm comm;          /* duplicate of the caller's */
    MPI_Comm inner, outer;  /* our rings' communicators (ours: split from comm) */
    MPI_Comm alive;         /* liveness pings when a wait times out */
    double timeout;         /* seconds a wait may last; <= 0: forever */
    char (*host)[64];       /* [p]: every rank's host name, for messages */
    int p, rank;
    comm_shape shape;
    int me_i, me_o; /* this rank's (o, i) */
    float *tmp;     /* receive buffer of one block */
    size_t tmp_len;
    MPI_Request *req;
    size_t req_len;
    struct piece *pieces;
    size_t pieces_len;
    size_t piece; /* floats per message of the current call (ring_piece) */
    char why[768];
};

/* Floats per piece for chunks of up to max_chunk floats: about 1/32 of a
 * chunk, at least CZ_RING_PIPE and at most 16 times that. Pipelining only
 * needs a few pieces in flight per step (the fill costs one piece per
 * phase, <= 1/32 of a step); every further piece is one more message, each
 * with its own rendezvous and request, and on the simulated cluster 128
 * pieces a step ran slower than 32 (docs/distributed.md, "Piece size"). Both
 * ends compute it from (n, p), so they cut blocks alike; the bits do not
 * depend on it (the order of additions is per element). */
static size_t ring_piece(size_t max_chunk) {
    size_t want = (max_chunk / 32 + 1023) & ~(size_t)1023;
    return want < CZ_RING_PIPE ? CZ_RING_PIPE : want > 16 * CZ_RING_PIPE ? 16 * CZ_RING_PIPE : want;
}

static size_t n_pieces(size_t count, size_t piece) {
    return (count + piece - 1) / piece;
}

/* One message of a block: buf[off, off + len), packed at tmp[packed]. */
typedef struct piece {
    size_t off, packed;
    int len;
} piece;

/* Block b of a ring at `level` as its pieces, in the order both ends use.
 * An inner block is the chunks of the ranks (0, b), (1, b), ...; an outer
 * block is the chunk of rank (b, i) for this rank's i. */
static int block_pieces(const cz_coll *c, int level, int b, size_t n, piece *out) {
    const comm_shape *s = &c->shape;
    int k = 0, chunks = level == LEVEL_INNER ? s->outer : 1;
    size_t packed = 0;
    for (int j = 0; j < chunks; j++) {
        int owner =
            level == LEVEL_INNER ? s->member[j * s->inner + b] : s->member[b * s->inner + c->me_i];
        size_t off, cnt;
        cz_comm_chunk(n, c->p, owner, &off, &cnt);
        for (size_t lo = 0; lo < cnt; lo += c->piece, k++) {
            out[k].off = off + lo;
            out[k].packed = packed + lo;
            out[k].len = (int)(cnt - lo < c->piece ? cnt - lo : c->piece);
        }
        packed += cnt;
    }
    return k;
}

/* Scratch for a ring of q members over n floats: two receive buffers of a
 * block, the pieces of two blocks and a request per message of the phase;
 * sets the call's piece size. */
static int ensure_space(cz_coll *c, int q, size_t n, cz_error *err) {
    size_t max_chunk = (n + (size_t)c->p - 1) / (size_t)c->p;
    size_t block = max_chunk * (size_t)c->shape.outer;
    c->piece = ring_piece(max_chunk);
    size_t pieces = (size_t)c->shape.outer * (n_pieces(max_chunk, c->piece) + 1);
    size_t reqs = (size_t)(2 * q + 2) * pieces;
    if (2 * block > c->tmp_len) {
        cz_free(c->tmp);
        c->tmp = cz_alloc((2 * block + 1) * sizeof(float), err);
        c->tmp_len = c->tmp ? 2 * block : 0;
        if (!c->tmp) return -1;
    }
    if (reqs > c->req_len || 2 * pieces > c->pieces_len) {
        free(c->req);
        free(c->pieces);
        c->req = malloc(reqs * sizeof *c->req);
        c->pieces = malloc(2 * pieces * sizeof *c->pieces);
        c->req_len = c->pieces_len = 0;
        if (!c->req || !c->pieces) return cz_fail(err, "comm: out of memory (%zu requests)", reqs);
        c->req_len = reqs;
        c->pieces_len = 2 * pieces;
    }
    return 0;
}

static const char *level_name(int level) {
    return level == LEVEL_INNER ? "inner" : "outer";
}

typedef struct ring {
    MPI_Comm comm;
    int q, m, next, prev;
} ring;

static ring ring_at(const cz_coll *c, int level) {
    ring r;
    r.comm = level == LEVEL_INNER ? c->inner : c->outer;
    r.q = level == LEVEL_INNER ? c->shape.inner : c->shape.outer;
    r.m = level == LEVEL_INNER ? c->me_i : c->me_o;
    r.next = (r.m + 1) % r.q;
    r.prev = (r.m + r.q - 1) % r.q;
    return r;
}

/* The rank (in c->comm) of member k of this rank's ring at `level`. */
static int member_rank(const cz_coll *c, int level, int k) {
    const comm_shape *s = &c->shape;
    return level == LEVEL_INNER ? s->member[c->me_o * s->inner + k]
                                : s->member[k * s->inner + c->me_i];
}

static int fail_step(cz_coll *c, int level, const char *what, int s, int peer, cz_error *err) {
    int r = member_rank(c, level, peer);
    return cz_fail(err, "comm: rank %d: %s %s %s step %d: exchange with rank %d (host %s) failed",
                   c->rank, cz_allreduce_algo_name(c->algo), level_name(level), what, s, r,
                   c->host ? c->host[r] : "?");
}

/* Step 0 of a ring sends a block this member already holds: its pieces go
 * out through a window of RING_WINDOW messages, one more as each piece of
 * step 0 arrives, the rest when step 0 is over. Posted all at once, the
 * pieces would share the link and all arrive at the end of the step (a
 * TCP peer interleaves its messages), so nothing could be forwarded before;
 * in the window they arrive in order and step 1 starts behind the first.
 * No deadlock: a member waiting for piece j of its predecessor has itself
 * sent at least RING_WINDOW + (pieces it received) of its own. */
enum { RING_WINDOW = 16 };

static int send_window(cz_coll *c, int level, const ring *r, const float *buf, const piece *pc,
                       int k, int *sent, int upto, MPI_Request *sreq, long *ns, const char *what,
                       cz_error *err) {
    for (; *sent < k && *sent < upto; (*sent)++)
        if (MPI_Isend(buf + pc[*sent].off, pc[*sent].len, MPI_FLOAT, r->next, 0, r->comm,
                      &sreq[(*ns)++]) != MPI_SUCCESS)
            return fail_step(c, level, what, 0, r->next, err);
    return 0;
}

/* ---- bounded waits: a peer that sends nothing for dist.timeout_s ----
 * A host whose link is down sends nothing and TCP reports nothing for many
 * minutes, so every wait here has a deadline. When it passes, this rank
 * pings every rank on c->alive and waits a few seconds for answers: ranks
 * waiting here answer (they poll for pings), so the ones that do not are the
 * ones whose host, link or process is gone, and the message names them and
 * their hosts. */
enum { TAG_PING = 1, TAG_PONG = 2 };

static void answer_pings(cz_coll *c) {
    for (;;) {
        int flag = 0, x;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, c->alive, &flag, &st);
        if (!flag) return;
        MPI_Recv(&x, 1, MPI_INT, st.MPI_SOURCE, TAG_PING, c->alive, MPI_STATUS_IGNORE);
        MPI_Send(&x, 1, MPI_INT, st.MPI_SOURCE, TAG_PONG, c->alive); /* eager: never blocks */
    }
}

/* The probe after a wait of `waited` s in `where` (peer: the rank waited
 * for, or -1 for a collective of everyone): the one-line verdict. */
static int stalled(cz_coll *c, const char *where, int peer, double waited, cz_error *err) {
    int p = c->p, me = c->rank, x = me, missing = 0;
    int *ok = calloc((size_t)p, sizeof(int));
    MPI_Request *rq = calloc((size_t)p, sizeof *rq);
    char who[512] = "";
    if (ok && rq) {
        for (int r = 0; r < p; r++)
            if (r != me) MPI_Isend(&x, 1, MPI_INT, r, TAG_PING, c->alive, &rq[r]);
        ok[me] = 1;
        double t0 = cz_now(), probe = c->timeout < 5 ? c->timeout : 5;
        int answered = 1;
        while (answered < p && cz_now() - t0 < probe) {
            answer_pings(c);
            int flag = 0, y;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_PONG, c->alive, &flag, &st);
            if (!flag) continue;
            MPI_Recv(&y, 1, MPI_INT, st.MPI_SOURCE, TAG_PONG, c->alive, MPI_STATUS_IGNORE);
            if (!ok[st.MPI_SOURCE]) ok[st.MPI_SOURCE] = 1, answered++;
        }
        size_t len = 0;
        for (int r = 0; r < p; r++) {
            if (ok[r]) continue;
            if (missing++ < 8 && len < sizeof who - 100)
                len += (size_t)snprintf(who + len, sizeof who - len, "%s%d (%s)", len ? ", " : "",
                                        r, c->host[r]);
        }
        if (missing > 8) snprintf(who + len, sizeof who - len, " and %d more", missing - 8);
        for (int r = 0; r < p; r++)
            if (r != me && ok[r]) MPI_Wait(&rq[r], MPI_STATUS_IGNORE); /* delivered: answered */
    }
    free(ok);
    free(rq); /* requests to ranks that never answered end with the process (cz_comm_abort) */
    char whom[128] = "";
    if (peer >= 0) snprintf(whom, sizeof whom, " for rank %d (host %s)", peer, c->host[peer]);
    if (missing)
        return cz_fail(err,
                       "comm: rank %d (host %s) waited %.0f s%s in %s (dist.timeout_s); no answer "
                       "from rank(s) %s: host, link or process down",
                       me, c->host[me], waited, whom, where, who);
    return cz_fail(err,
                   "comm: rank %d (host %s) waited %.0f s%s in %s (dist.timeout_s); every rank "
                   "answers: a rank is stuck elsewhere or far slower",
                   me, c->host[me], waited, whom, where);
}

/* MPI_Testall until the requests are done (0), an MPI error (-1) or the
 * deadline (1, *waited set), answering pings meanwhile. */
static int poll_deadline(cz_coll *c, int n, MPI_Request *req, double *waited) {
    double t0 = cz_now(), polled = t0;
    for (unsigned it = 1;; it++) {
        int done = 0;
        if (MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return -1;
        if (done) return 0;
        if (it % 64 == 0) {
            double now = cz_now();
            if (now - polled > 1e-3) answer_pings(c), polled = now;
            if (now - t0 > c->timeout) {
                *waited = now - t0;
                return 1;
            }
        }
    }
}

/* MPI_Waitall with the deadline; peer: the ring member these requests talk to. */
static int wait_bounded(cz_coll *c, int n, MPI_Request *req, int level, const char *what, int step,
                        int peer, cz_error *err) {
    double waited = 0;
    int rc = c->timeout > 0 ? poll_deadline(c, n, req, &waited)
             : MPI_Waitall(n, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS ? 0
                                                                       : -1;
    if (rc == 0) return 0;
    if (rc < 0) return fail_step(c, level, what, step, peer, err);
    char where[128];
    snprintf(where, sizeof where, "%s %s %s step %d", cz_allreduce_algo_name(c->algo),
             level_name(level), what, step);
    return stalled(c, where, member_rank(c, level, peer), waited, err);
}

int cz_coll_wait(cz_coll *c, MPI_Request *req, const char *what, cz_error *err) {
    double waited = 0;
    int rc = c->timeout > 0                                    ? poll_deadline(c, 1, req, &waited)
             : MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0
                                                               : -1;
    if (rc == 0) return 0;
    if (rc < 0)
        return cz_fail(err, "comm: rank %d (host %s): %s failed", c->rank, c->host[c->rank], what);
    return stalled(c, what, -1, waited, err);
}

/* Reduce-scatter, streamed: a piece of step s is forwarded (as step s+1)
 * as soon as it has been added, so the steps overlap instead of waiting for
 * each other. Receives of step s land in tmp half s % 2; step s+2's are
 * posted there once step s has been added. */
static int ring_reduce_scatter(cz_coll *c, int level, float *buf, size_t n, cz_error *err) {
    ring r = ring_at(c, level);
    if (r.q == 1 || n == 0) return 0;
    if (ensure_space(c, r.q, n, err) != 0) return -1;
    int q = r.q, m = r.m, steps = q - 1;
    size_t half = c->tmp_len / 2, per = c->pieces_len / 2;
    piece *pr = c->pieces, *ps = c->pieces + per;
    MPI_Request *rreq = c->req, *sreq = c->req + 2 * per; /* rreq: 2 halves of `per` */
    long ns = 0;
    /* receives of steps 0 and 1 */
    for (int s = 0; s < 2 && s < steps; s++) {
        int rb = ((m - 2 - s) % q + 2 * q) % q, k = block_pieces(c, level, rb, n, pr);
        float *t = c->tmp + (size_t)(s % 2) * half;
        for (int j = 0; j < k; j++)
            if (MPI_Irecv(t + pr[j].packed, pr[j].len, MPI_FLOAT, r.prev, s, r.comm,
                          &rreq[(size_t)(s % 2) * per + j]) != MPI_SUCCESS)
                return fail_step(c, level, "reduce-scatter", s, r.prev, err);
    }
    /* step 0 sends this member's own values of block m-1, in a window */
    int k0 = block_pieces(c, level, ((m - 1) % q + q) % q, n, ps), sent0 = 0;
    const char *rs = "reduce-scatter";
    if (send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW, sreq, &ns, rs, err) != 0)
        return -1;
    for (int s = 0; s < steps; s++) {
        int rb = ((m - 2 - s) % q + 2 * q) % q, k = block_pieces(c, level, rb, n, pr);
        float *t = c->tmp + (size_t)(s % 2) * half;
        for (int j = 0; j < k; j++) {
            if (wait_bounded(c, 1, &rreq[(size_t)(s % 2) * per + j], level, "reduce-scatter", s,
                             r.prev, err) != 0)
                return -1;
            float *acc = buf + pr[j].off;
            const float *in = t + pr[j].packed;
            for (int e = 0; e < pr[j].len; e++) acc[e] = in[e] + acc[e];
            /* block rb is what step s+1 sends */
            if (s + 1 < steps && MPI_Isend(acc, pr[j].len, MPI_FLOAT, r.next, s + 1, r.comm,
                                           &sreq[ns++]) != MPI_SUCCESS)
                return fail_step(c, level, "reduce-scatter", s + 1, r.next, err);
            if (s == 0 && send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW + j + 1, sreq,
                                      &ns, rs, err) != 0)
                return -1;
        }
        if (s == 0 && send_window(c, level, &r, buf, ps, k0, &sent0, k0, sreq, &ns, rs, err) != 0)
            return -1;
        if (s + 2 < steps) {
            int rb2 = ((m - 4 - s) % q + 4 * q) % q, k2 = block_pieces(c, level, rb2, n, pr);
            for (int j = 0; j < k2; j++)
                if (MPI_Irecv(t + pr[j].packed, pr[j].len, MPI_FLOAT, r.prev, s + 2, r.comm,
                              &rreq[(size_t)(s % 2) * per + j]) != MPI_SUCCESS)
                    return fail_step(c, level, "reduce-scatter", s + 2, r.prev, err);
        }
    }
    if (wait_bounded(c, (int)ns, sreq, level, "reduce-scatter", steps - 1, r.next, err) != 0)
        return -1;
    return 0;
}

/* All-gather, streamed: every receive goes to its place in buf, so all are
 * posted at once, and each arriving piece is forwarded at once. */
static int ring_allgather(cz_coll *c, int level, float *buf, size_t n, cz_error *err) {
    ring r = ring_at(c, level);
    if (r.q == 1 || n == 0) return 0;
    if (ensure_space(c, r.q, n, err) != 0) return -1;
    int q = r.q, m = r.m, steps = q - 1;
    size_t per = c->pieces_len / 2;
    piece *pc = c->pieces, *ps = c->pieces + per;
    MPI_Request *rreq = c->req, *sreq = c->req + (size_t)steps * per;
    long ns = 0;
    for (int s = 0; s < steps; s++) {
        int k = block_pieces(c, level, ((m - s - 1) % q + q) % q, n, pc);
        for (int j = 0; j < k; j++)
            if (MPI_Irecv(buf + pc[j].off, pc[j].len, MPI_FLOAT, r.prev, s, r.comm,
                          &rreq[(size_t)s * per + j]) != MPI_SUCCESS)
                return fail_step(c, level, "all-gather", s, r.prev, err);
    }
    /* step 0 sends this member's own block, in a window */
    int k0 = block_pieces(c, level, m, n, ps), sent0 = 0;
    const char *ag = "all-gather";
    if (send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW, sreq, &ns, ag, err) != 0)
        return -1;
    for (int s = 0; s < steps; s++) {
        int k = block_pieces(c, level, ((m - s - 1) % q + q) % q, n, pc);
        for (int j = 0; j < k; j++) {
            if (wait_bounded(c, 1, &rreq[(size_t)s * per + j], level, "all-gather", s, r.prev,
                             err) != 0)
                return -1;
            if (s + 1 < steps && MPI_Isend(buf + pc[j].off, pc[j].len, MPI_FLOAT, r.next, s + 1,
                                           r.comm, &sreq[ns++]) != MPI_SUCCESS)
                return fail_step(c, level, "all-gather", s + 1, r.next, err);
            if (s == 0 && send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW + j + 1, sreq,
                                      &ns, ag, err) != 0)
                return -1;
        }
        if (s == 0 && send_window(c, level, &r, buf, ps, k0, &sent0, k0, sreq, &ns, ag, err) != 0)
            return -1;
    }
    if (wait_bounded(c, (int)ns, sreq, level, "all-gather", steps - 1, r.next, err) != 0) return -1;
    return 0;
}

/* ---- entry points ---- */

int cz_coll_reduce_scatter(cz_coll *c, float *buf, size_t n, cz_error *err) {
    if (c->p == 1 || n == 0) return 0;
    if (ring_reduce_scatter(c, LEVEL_INNER, buf, n, err) != 0) return -1;
    return ring_reduce_scatter(c, LEVEL_OUTER, buf, n, err);
}

int cz_coll_allgather(cz_coll *c, float *buf, size_t n, cz_error *err) {
    if (c->p == 1 || n == 0) return 0;
    if (ring_allgather(c, LEVEL_OUTER, buf, n, err) != 0) return -1;
    return ring_allgather(c, LEVEL_INNER, buf, n, err);
}

int cz_coll_allreduce(cz_coll *c, float *buf, size_t n, cz_error *err) {
    if (cz_coll_reduce_scatter(c, buf, n, err) != 0) return -1;
    return cz_coll_allgather(c, buf, n, err);
}

/* The flat ring on a borrowed communicator, for one call: no deadline, no
 * host names (ring.c's cz_ring_* entry points). */
int cz_coll_ring_once(MPI_Comm comm, int what, float *buf, size_t n, cz_error *err) {
    cz_coll t;
    memset(&t, 0, sizeof t);
    t.algo = CZ_ALLREDUCE_RING;
    t.comm = t.inner = comm;
    t.outer = t.alive = MPI_COMM_NULL;
    MPI_Comm_rank(comm, &t.rank);
    MPI_Comm_size(comm, &t.p);
    if (t.p == 1 || n == 0) return 0;
    t.shape.inner = t.p;
    t.shape.outer = 1;
    t.shape.member = malloc((size_t)t.p * sizeof(int));
    if (!t.shape.member) return cz_fail(err, "comm: out of memory");
    for (int r = 0; r < t.p; r++) t.shape.member[r] = r;
    t.me_i = t.rank;
    int rc = 0;
    if (what & CZ_COLL_REDUCE_SCATTER) rc = ring_reduce_scatter(&t, LEVEL_INNER, buf, n, err);
    if (rc == 0 && (what & CZ_COLL_ALLGATHER)) rc = ring_allgather(&t, LEVEL_INNER, buf, n, err);
    free(t.shape.member);
    cz_free(t.tmp);
    free(t.req);
    free(t.pieces);
    return rc;
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

/* ---- creation ---- */

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

void cz_coll_opts_default(cz_coll_opts *o) {
    memset(o, 0, sizeof *o);
    o->algo = CZ_ALLREDUCE_RING;
    o->bytes = 25.0 * 1024 * 1024;
    cz_net_model_default(&o->net);
}

int cz_comm_grid_parse(const char *s, int *x, int *y, cz_error *err) {
    *x = *y = 0;
    if (!s[0]) return 0;
    char tail;
    if (sscanf(s, "%dx%d%c", x, y, &tail) != 2 || *x < 1 || *y < 1)
        return cz_fail(err, "\"%s\" is not XxY (X ranks per row), e.g. \"2x4\"", s);
    return 0;
}

int cz_coll_opts_from_config(cz_coll_opts *o, const cz_comm_config *cfg, double bytes,
                             cz_error *err) {
    cz_coll_opts_default(o);
    o->algo = cfg->allreduce;
    o->bytes = bytes;
    if (cz_comm_grid_parse(cfg->grid, &o->grid_x, &o->grid_y, err) != 0) return -1;
    if (cfg->link_gbit > 0) o->net.beta_net = 8.0 / (cfg->link_gbit * 1e9);
    if (cfg->link_latency_us > 0) o->net.alpha_net = cfg->link_latency_us * 1e-6;
    o->timeout_s = cfg->timeout_s;
    return 0;
}

/* Most square X x Y = p with X <= Y (torus2d when no grid is given). */
static int square_grid(int p) {
    int best = 1;
    for (int x = 1; x * x <= p; x++)
        if (p % x == 0) best = x;
    return best;
}

/* AUTO: the cheapest of ring, hierarchical and torus2d (every grid, or
 * o->grid_x when given) for o->bytes under the model; a later candidate must
 * win by more than 1 % (equal costs keep the simpler algorithm). */
cz_allreduce_algo cz_allreduce_choose(const cz_coll_opts *o, const cz_host_layout *l, int *gx,
                                      char *why, size_t why_len) {
    double best = cz_net_allreduce_time(&o->net, &o->topo, l, CZ_ALLREDUCE_RING, 0, o->bytes);
    cz_allreduce_algo algo = CZ_ALLREDUCE_RING;
    *gx = 0;
    char list[512];
    int len = snprintf(list, sizeof list, "ring %.3g ms", best * 1e3);
    if (l->ranks_per_host > 1 && l->n_hosts > 1) {
        double t =
            cz_net_allreduce_time(&o->net, &o->topo, l, CZ_ALLREDUCE_HIERARCHICAL, 0, o->bytes);
        len += snprintf(list + len, sizeof list - (size_t)len, ", hierarchical %.3g ms", t * 1e3);
        if (t < 0.99 * best) best = t, algo = CZ_ALLREDUCE_HIERARCHICAL;
    }
    for (int x = 2; x <= l->p / 2; x++) {
        if (l->p % x != 0 || (o->grid_x > 0 && x != o->grid_x)) continue;
        double t = cz_net_allreduce_time(&o->net, &o->topo, l, CZ_ALLREDUCE_TORUS2D, x, o->bytes);
        if (len < (int)sizeof list - 40)
            len += snprintf(list + len, sizeof list - (size_t)len, ", torus2d %dx%d %.3g ms", x,
                            l->p / x, t * 1e3);
        if (t < 0.99 * best) best = t, algo = CZ_ALLREDUCE_TORUS2D, *gx = x;
    }
    if (why)
        snprintf(why, why_len,
                 "picked by the alpha-beta model for %.3g MB messages (%.3g Gbit/s links, %.3g us "
                 "per message; %.3g GB/s, %.3g us inside a host): %s",
                 o->bytes / 1e6, 8e-9 / o->net.beta_net, o->net.alpha_net * 1e6,
                 1e-9 / o->net.beta_shm, o->net.alpha_shm * 1e6, list);
    return algo;
}

int cz_coll_create(cz_coll **out, MPI_Comm comm, const cz_coll_opts *o, cz_error *err) {
    *out = NULL;
    cz_coll *c = calloc(1, sizeof *c);
    if (!c) return cz_fail(err, "comm: out of memory");
    c->comm = c->inner = c->outer = c->alive = MPI_COMM_NULL;
    cz_host_layout l = {0};
    if (MPI_Comm_dup(comm, &c->comm) != MPI_SUCCESS) {
        cz_fail(err, "comm: MPI_Comm_dup failed");
        goto fail;
    }
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->p);
    if (o->hosts) {
        if (o->hosts->p != c->p) {
            cz_fail(err, "comm: a host layout of %d ranks for a job of %d", o->hosts->p, c->p);
            goto fail;
        }
        if (cz_host_layout_copy(&l, o->hosts, err) != 0) goto fail;
    } else if (cz_host_layout_get(c->comm, &l, err) != 0) {
        goto fail;
    }
    cz_allreduce_algo algo = o->algo;
    int gx = o->grid_x;
    if (algo == CZ_ALLREDUCE_MPI) {
        cz_fail(err, "comm: \"mpi\" is the library's collectives, not a context of ours");
        goto fail;
    }
    char why[640] = "";
    if (algo == CZ_ALLREDUCE_AUTO) {
        algo = cz_allreduce_choose(o, &l, &gx, why, sizeof why);
    } else if (algo == CZ_ALLREDUCE_TORUS2D) {
        if (gx <= 0) gx = square_grid(c->p);
        if (o->grid_y > 0 && gx * o->grid_y != c->p) {
            cz_fail(err, "dist.grid = %dx%d has %d ranks, the job has %d", gx, o->grid_y,
                    gx * o->grid_y, c->p);
            goto fail;
        }
        snprintf(why, sizeof why, "as configured");
    } else {
        snprintf(why, sizeof why, "as configured");
    }
    c->algo = algo;
    if (comm_shape_make(&c->shape, &l, algo, gx, err) != 0) goto fail;
    for (int k = 0; k < c->p; k++)
        if (c->shape.member[k] == c->rank)
            c->me_o = k / c->shape.inner, c->me_i = k % c->shape.inner;
    /* inner ring: same o, ordered by i; outer ring: same i, ordered by o */
    if (MPI_Comm_split(c->comm, c->me_o, c->me_i, &c->inner) != MPI_SUCCESS ||
        MPI_Comm_split(c->comm, c->me_i, c->me_o, &c->outer) != MPI_SUCCESS) {
        cz_fail(err, "comm: MPI_Comm_split for the %s rings failed", cz_allreduce_algo_name(algo));
        goto fail;
    }
    c->timeout = o->timeout_s;
    c->host = calloc((size_t)c->p, sizeof *c->host);
    char name[MPI_MAX_PROCESSOR_NAME + 1] = "";
    int name_len = 0;
    MPI_Get_processor_name(name, &name_len);
    if (!c->host || MPI_Comm_dup(c->comm, &c->alive) != MPI_SUCCESS) {
        cz_fail(err, "comm: out of memory or MPI_Comm_dup failed");
        goto fail;
    }
    snprintf(c->host[c->rank], sizeof c->host[0], "%s", name);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->host, (int)sizeof c->host[0], MPI_CHAR,
                  c->comm);
    char shape[96] = "";
    if (algo == CZ_ALLREDUCE_HIERARCHICAL)
        snprintf(shape, sizeof shape, " (%d hosts x %d ranks)", c->shape.outer, c->shape.inner);
    else if (algo == CZ_ALLREDUCE_TORUS2D)
        snprintf(shape, sizeof shape, " %dx%d", c->shape.inner, c->shape.outer);
    snprintf(c->why, sizeof c->why, "%s%s on %d ranks, %d host%s%s: %s",
             cz_allreduce_algo_name(algo), shape, c->p, l.n_hosts, l.n_hosts == 1 ? "" : "s",
             l.ranks_per_host ? "" : " (uneven)", why);
    cz_host_layout_free(&l);
    *out = c;
    return 0;
fail:
    cz_host_layout_free(&l);
    cz_coll_free(c);
    return -1;
}

int cz_comm_attach_coll(cz_comm *c, const cz_coll_opts *o, cz_error *err) {
    cz_coll_free(c->coll);
    c->coll = NULL;
    if (o->algo == CZ_ALLREDUCE_MPI) return 0;
    return cz_coll_create(&c->coll, c->mpi, o, err);
}

void cz_coll_free(cz_coll *c) {
    if (!c) return;
    if (c->inner != MPI_COMM_NULL) MPI_Comm_free(&c->inner);
    if (c->outer != MPI_COMM_NULL) MPI_Comm_free(&c->outer);
    if (c->alive != MPI_COMM_NULL) MPI_Comm_free(&c->alive);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->host);
    comm_shape_free(&c->shape);
    cz_free(c->tmp);
    free(c->req);
    free(c->pieces);
    free(c);
}

cz_allreduce_algo cz_coll_algo(const cz_coll *c) {
    return c->algo;
}

const char *cz_coll_describe(const cz_coll *c) {
    return c->why;
}
