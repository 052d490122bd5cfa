/* comm: the ring reduce-scatter, all-gather and all-reduce over MPI
 * point-to-point (Patarasuk & Yuan 2009; the bandwidth-optimal ring: each
 * rank sends 2(p-1)/p of the buffer in an all-reduce), over a group of
 * ranks whose "blocks" are sets of chunks.
 *
 * A ring of q members over blocks B_0..B_(q-1): reduce-scatter step s
 * (0..q-2): member m sends block (m-1-s) mod q to m+1 and adds block
 * (m-2-s) mod q arriving from m-1 to its own, so block b ends, complete, at
 * member b in the order ((x_(b+1) + x_(b+2)) + ...) + x_b. The order is
 * fixed by (b, q) alone, so the bits never depend on timing. All-gather
 * step s: member m sends block (m-s) mod q to m+1; blocks are copied, never
 * recomputed, so every member ends with the owner's bits. In the flat ring
 * (inner group = every rank) a block is one chunk; in the two-level
 * algorithms (twolevel.c) block i of the inner ring is every chunk owned by
 * a rank (., i) (one per outer group), and in the outer ring of the ranks
 * (., i) block o is the chunk of rank (o, i). Every message is cut into
 * pieces (ring_piece), all receives of a step are posted first, and each
 * piece is added as soon as it has arrived.
 *
 * bf16 on the wire (dist.grad_wire, c->wire_bf16): every partial sum a
 * member sends is rounded to bfloat16 (round to nearest even, the kernels'
 * cz_bf16_round) and the receiver adds it to its own fp32 values in fp32,
 * so block b ends at member b as
 *   x_b + bf16(x_(b-1) + bf16(... + bf16(x_(b+2) + bf16(x_(b+1)))))
 * fixed by the layout alone, like the fp32 order. An all-gather in bf16
 * (the gradient all-reduce's second half) first rounds the owner's block in
 * place, so every member ends with the same bits. Half the bytes of fp32.
 *
 * cz_ring_* run the flat ring on a context made for the call; a
 * communicator with a context attached (cz_comm_attach_coll: the gradient
 * thread's) runs the same code through twolevel.c, with its scratch kept
 * and its waits bounded (deadline.c). */
#include "comm_private.h"

#include "cloze/kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Elements per piece for chunks of up to max_chunk elements: about 1/32 of
 * a chunk, at least CZ_RING_PIPE and at most CZ_RING_PIECE_MAX_BYTES of
 * them (CZ_RING_PIECE_MAX floats, half as many int64 values of dist.exact's
 * sums): a larger piece passes Open MPI's TCP eager limit (world.c sets it
 * just above that size) and goes by rendezvous, which ran BERT-base's int64
 * all-reduce at half the link's rate (docs/distributed-design.md, "Eager
 * pieces over TCP"). Pipelining only
 * needs a few pieces in flight per step (the fill costs one piece per
 * phase, <= 1/32 of a step); every further piece is one more message, each
 * with its own rendezvous and request, and on the simulated cluster 128
 * pieces a step ran slower than 32 (docs/distributed-design.md, "Piece size"). Both
 * ends compute it from (n, p), so they cut blocks alike; the bits do not
 * depend on it (the order of additions is per element). */
static size_t ring_piece(size_t max_chunk, size_t elem_bytes) {
    size_t most = CZ_RING_PIECE_MAX_BYTES / elem_bytes;
    size_t want = (max_chunk / 32 + 1023) & ~(size_t)1023;
    return want < CZ_RING_PIPE ? CZ_RING_PIPE : want > most ? most : want;
}

static size_t n_pieces(size_t count, size_t piece) {
    return (count + piece - 1) / piece;
}

/* Block b of a ring at `level` as its pieces, in the order both ends use.
 * An inner block is the chunks of the ranks (0, b), (1, b), ...; an outer
 * block is the chunk of rank (b, i) for this rank's i. */
static int block_pieces(const cz_coll *c, int level, int b, size_t n, comm_piece *out) {
    const comm_shape *s = &c->shape;
    int k = 0, chunks = level == COMM_LEVEL_INNER ? s->outer : 1;
    size_t packed = 0;
    for (int j = 0; j < chunks; j++) {
        int owner = level == COMM_LEVEL_INNER ? s->member[j * s->inner + b]
                                              : s->member[b * s->inner + c->me_i];
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
    /* an int64 element (c->i64) takes the room of two floats */
    size_t block = max_chunk * (size_t)c->shape.outer * (c->i64 ? 2 : 1);
    block = (block + 1) & ~(size_t)1; /* the second half stays 8-byte aligned */
    c->piece = ring_piece(max_chunk, c->i64 ? sizeof(int64_t) : sizeof(float));
    size_t pieces = (size_t)c->shape.outer * (n_pieces(max_chunk, c->piece) + 1);
    size_t reqs = (size_t)(2 * q + 2) * pieces;
    if (2 * block > c->tmp_len) {
        cz_free(c->tmp);
        c->tmp = cz_alloc((2 * block + 1) * sizeof(float), err);
        c->tmp_len = c->tmp ? 2 * block : 0;
        if (!c->tmp) return -1;
    }
    if (c->wire_bf16 && n > c->wire_len) {
        cz_free(c->wire);
        c->wire = cz_alloc((n + 1) * sizeof(uint16_t), err);
        c->wire_len = c->wire ? n : 0;
        if (!c->wire) return -1;
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
    return level == COMM_LEVEL_INNER ? "inner" : "outer";
}

/* x[0..len) rounded to bf16 in place (the kernels' vector path), and their
 * upper halves into w: the bf16 bits. */
static void to_wire(uint16_t *w, float *x, int len) {
    cz_bf16_round_n(x, x, (size_t)len);
    for (int e = 0; e < len; e++) {
        uint32_t u;
        memcpy(&u, &x[e], sizeof u);
        w[e] = (uint16_t)(u >> 16);
    }
}

static float from_wire(uint16_t w) {
    uint32_t u = (uint32_t)w << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Where a piece packed at `packed` lands in a receive buffer of fp32, bf16
 * or int64 (c->i64). */
static void *recv_at(const cz_coll *c, float *t, size_t packed, int bf16) {
    return c->i64 ? (void *)((int64_t *)(void *)t + packed)
           : bf16 ? (void *)((uint16_t *)t + packed)
                  : (void *)(t + packed);
}

/* Element `off` of the caller's buffer, whose elements are int64 on an
 * exact sum (c->i64), else floats. */
static void *elem_at(const cz_coll *c, float *buf, size_t off) {
    return c->i64 ? (void *)((int64_t *)(void *)buf + off) : (void *)(buf + off);
}

static MPI_Datatype elem_type(const cz_coll *c, int bf16) {
    return c->i64 ? MPI_INT64_T : bf16 ? MPI_UINT16_T : MPI_FLOAT;
}

/* One piece out: fp32 as it is, or rounded to bf16 (x is then rounded in
 * place: what is sent is what stays). */
static int send_piece(cz_coll *c, float *buf, const comm_piece *pc, int bf16, int dest, int tag,
                      MPI_Comm comm, MPI_Request *req) {
    if (!bf16)
        return MPI_Isend(elem_at(c, buf, pc->off), pc->len, elem_type(c, 0), dest, tag, comm, req);
    to_wire(c->wire + pc->off, buf + pc->off, pc->len);
    return MPI_Isend(c->wire + pc->off, pc->len, MPI_UINT16_T, dest, tag, comm, req);
}

typedef struct ring {
    MPI_Comm comm;
    int q, m, next, prev;
} ring;

static ring ring_at(const cz_coll *c, int level) {
    ring r;
    r.comm = level == COMM_LEVEL_INNER ? c->inner : c->outer;
    r.q = level == COMM_LEVEL_INNER ? c->shape.inner : c->shape.outer;
    r.m = level == COMM_LEVEL_INNER ? c->me_i : c->me_o;
    r.next = (r.m + 1) % r.q;
    r.prev = (r.m + r.q - 1) % r.q;
    return r;
}

/* The rank (in c->comm) of member k of this rank's ring at `level`. */
static int member_rank(const cz_coll *c, int level, int k) {
    const comm_shape *s = &c->shape;
    return level == COMM_LEVEL_INNER ? s->member[c->me_o * s->inner + k]
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

static int send_window(cz_coll *c, int level, const ring *r, float *buf, const comm_piece *pc,
                       int k, int *sent, int upto, int bf16, MPI_Request *sreq, long *ns,
                       const char *what, cz_error *err) {
    for (; *sent < k && *sent < upto; (*sent)++)
        if (send_piece(c, buf, &pc[*sent], bf16, r->next, 0, r->comm, &sreq[(*ns)++]) !=
            MPI_SUCCESS)
            return fail_step(c, level, what, 0, r->next, err);
    return 0;
}

/* MPI_Waitall with the deadline; peer: the ring member these requests talk to. */
static int wait_bounded(cz_coll *c, int n, MPI_Request *req, int level, const char *what, int step,
                        int peer, cz_error *err) {
    double waited = 0;
    int rc = c->timeout > 0 ? comm_poll_deadline(c, n, req, &waited)
             : MPI_Waitall(n, req, MPI_STATUSES_IGNORE) == MPI_SUCCESS ? 0
                                                                       : -1;
    if (rc == 0) return 0;
    if (rc < 0) return fail_step(c, level, what, step, peer, err);
    char where[128];
    snprintf(where, sizeof where, "%s %s %s step %d", cz_allreduce_algo_name(c->algo),
             level_name(level), what, step);
    return comm_stalled(c, where, member_rank(c, level, peer), waited, err);
}

/* Reduce-scatter, streamed: a piece of step s is forwarded (as step s+1)
 * as soon as it has been added, so the steps overlap instead of waiting for
 * each other. Receives of step s land in tmp half s % 2; step s+2's are
 * posted there once step s has been added. */
int comm_ring_reduce_scatter(cz_coll *c, int level, float *buf, size_t n, cz_error *err) {
    ring r = ring_at(c, level);
    if (r.q == 1 || n == 0) return 0;
    if (ensure_space(c, r.q, n, err) != 0) return -1;
    int q = r.q, m = r.m, steps = q - 1, bf16 = c->wire_bf16 && !c->i64;
    MPI_Datatype type = elem_type(c, bf16);
    size_t half = c->tmp_len / 2, per = c->pieces_len / 2;
    comm_piece *pr = c->pieces, *ps = c->pieces + per;
    MPI_Request *rreq = c->req, *sreq = c->req + 2 * per; /* rreq: 2 halves of `per` */
    long ns = 0;
    /* receives of steps 0 and 1 */
    for (int s = 0; s < 2 && s < steps; s++) {
        int rb = ((m - 2 - s) % q + 2 * q) % q, k = block_pieces(c, level, rb, n, pr);
        float *t = c->tmp + (size_t)(s % 2) * half;
        for (int j = 0; j < k; j++)
            if (MPI_Irecv(recv_at(c, t, pr[j].packed, bf16), pr[j].len, type, r.prev, s, r.comm,
                          &rreq[(size_t)(s % 2) * per + j]) != MPI_SUCCESS)
                return fail_step(c, level, "reduce-scatter", s, r.prev, err);
    }
    /* step 0 sends this member's own values of block m-1, in a window */
    int k0 = block_pieces(c, level, ((m - 1) % q + q) % q, n, ps), sent0 = 0;
    const char *rs = "reduce-scatter";
    if (send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW, bf16, sreq, &ns, rs, err) != 0)
        return -1;
    for (int s = 0; s < steps; s++) {
        int rb = ((m - 2 - s) % q + 2 * q) % q, k = block_pieces(c, level, rb, n, pr);
        float *t = c->tmp + (size_t)(s % 2) * half;
        for (int j = 0; j < k; j++) {
            if (wait_bounded(c, 1, &rreq[(size_t)(s % 2) * per + j], level, "reduce-scatter", s,
                             r.prev, err) != 0)
                return -1;
            float *acc = buf + pr[j].off;
            if (c->i64) {
                /* exact sums: integer addition is associative, so the
                 * order above no longer shows in the bits (unsigned: the
                 * caller's bound keeps every partial sum in range) */
                uint64_t *a = (uint64_t *)elem_at(c, buf, pr[j].off);
                const uint64_t *in = (const uint64_t *)recv_at(c, t, pr[j].packed, 0);
                for (int e = 0; e < pr[j].len; e++) a[e] += in[e];
            } else if (bf16) {
                const uint16_t *in = (const uint16_t *)t + pr[j].packed;
                for (int e = 0; e < pr[j].len; e++) acc[e] = from_wire(in[e]) + acc[e];
            } else {
                const float *in = t + pr[j].packed;
                for (int e = 0; e < pr[j].len; e++) acc[e] = in[e] + acc[e];
            }
            /* block rb is what step s+1 sends */
            if (s + 1 < steps &&
                send_piece(c, buf, &pr[j], bf16, r.next, s + 1, r.comm, &sreq[ns++]) != MPI_SUCCESS)
                return fail_step(c, level, "reduce-scatter", s + 1, r.next, err);
            if (s == 0 && send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW + j + 1, bf16,
                                      sreq, &ns, rs, err) != 0)
                return -1;
        }
        if (s == 0 &&
            send_window(c, level, &r, buf, ps, k0, &sent0, k0, bf16, sreq, &ns, rs, err) != 0)
            return -1;
        if (s + 2 < steps) {
            int rb2 = ((m - 4 - s) % q + 4 * q) % q, k2 = block_pieces(c, level, rb2, n, pr);
            for (int j = 0; j < k2; j++)
                if (MPI_Irecv(recv_at(c, t, pr[j].packed, bf16), pr[j].len, type, r.prev, s + 2,
                              r.comm, &rreq[(size_t)(s % 2) * per + j]) != MPI_SUCCESS)
                    return fail_step(c, level, "reduce-scatter", s + 2, r.prev, err);
        }
    }
    if (wait_bounded(c, (int)ns, sreq, level, "reduce-scatter", steps - 1, r.next, err) != 0)
        return -1;
    return 0;
}

/* All-gather, streamed: every receive goes to its place in buf, so all are
 * posted at once, and each arriving piece is forwarded at once. */
int comm_ring_allgather(cz_coll *c, int level, float *buf, size_t n, int bf16, cz_error *err) {
    ring r = ring_at(c, level);
    if (r.q == 1 || n == 0) return 0;
    bf16 = bf16 && c->wire_bf16 && !c->i64;
    if (ensure_space(c, r.q, n, err) != 0) return -1;
    int q = r.q, m = r.m, steps = q - 1;
    size_t per = c->pieces_len / 2;
    comm_piece *pc = c->pieces, *ps = c->pieces + per;
    MPI_Request *rreq = c->req, *sreq = c->req + (size_t)steps * per;
    MPI_Datatype type = elem_type(c, bf16);
    long ns = 0;
    /* bf16: pieces arrive in the wire buffer at their offsets, are forwarded
     * from there as they are, and widened into buf at the end */
    for (int s = 0; s < steps; s++) {
        int k = block_pieces(c, level, ((m - s - 1) % q + q) % q, n, pc);
        for (int j = 0; j < k; j++)
            if (MPI_Irecv(bf16 ? (void *)(c->wire + pc[j].off) : elem_at(c, buf, pc[j].off),
                          pc[j].len, type, r.prev, s, r.comm,
                          &rreq[(size_t)s * per + j]) != MPI_SUCCESS)
                return fail_step(c, level, "all-gather", s, r.prev, err);
    }
    /* step 0 sends this member's own block, in a window */
    int k0 = block_pieces(c, level, m, n, ps), sent0 = 0;
    const char *ag = "all-gather";
    if (send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW, bf16, sreq, &ns, ag, err) != 0)
        return -1;
    for (int s = 0; s < steps; s++) {
        int k = block_pieces(c, level, ((m - s - 1) % q + q) % q, n, pc);
        for (int j = 0; j < k; j++) {
            if (wait_bounded(c, 1, &rreq[(size_t)s * per + j], level, "all-gather", s, r.prev,
                             err) != 0)
                return -1;
            void *fwd = bf16 ? (void *)(c->wire + pc[j].off) : elem_at(c, buf, pc[j].off);
            if (s + 1 < steps &&
                MPI_Isend(fwd, pc[j].len, type, r.next, s + 1, r.comm, &sreq[ns++]) != MPI_SUCCESS)
                return fail_step(c, level, "all-gather", s + 1, r.next, err);
            if (s == 0 && send_window(c, level, &r, buf, ps, k0, &sent0, RING_WINDOW + j + 1, bf16,
                                      sreq, &ns, ag, err) != 0)
                return -1;
        }
        if (s == 0 &&
            send_window(c, level, &r, buf, ps, k0, &sent0, k0, bf16, sreq, &ns, ag, err) != 0)
            return -1;
    }
    if (wait_bounded(c, (int)ns, sreq, level, "all-gather", steps - 1, r.next, err) != 0) return -1;
    for (int s = 0; bf16 && s < steps; s++) {
        int k = block_pieces(c, level, ((m - s - 1) % q + q) % q, n, pc);
        for (int j = 0; j < k; j++)
            for (int e = 0; e < pc[j].len; e++)
                buf[pc[j].off + e] = from_wire(c->wire[pc[j].off + e]);
    }
    return 0;
}

/* ---- the flat ring for one call ---- */

enum { ONCE_REDUCE_SCATTER = 1, ONCE_ALLGATHER = 2, ONCE_ALLREDUCE = 3 };

/* The flat ring on a borrowed communicator, for one call: no deadline, no
 * host names. */
static int ring_once(MPI_Comm comm, int what, float *buf, size_t n, int i64, cz_error *err) {
    cz_coll t;
    memset(&t, 0, sizeof t);
    t.i64 = i64;
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
    if (what & ONCE_REDUCE_SCATTER)
        rc = comm_ring_reduce_scatter(&t, COMM_LEVEL_INNER, buf, n, err);
    if (rc == 0 && (what & ONCE_ALLGATHER))
        rc = comm_ring_allgather(&t, COMM_LEVEL_INNER, buf, n, 0, err);
    free(t.shape.member);
    cz_free(t.tmp);
    cz_free(t.wire);
    free(t.req);
    free(t.pieces);
    return rc;
}

int cz_ring_reduce_scatter(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err) {
    (void)scratch; /* the streamed ring keeps two blocks in flight: its own scratch */
    return ring_once(c->impl->mpi, ONCE_REDUCE_SCATTER, buf, n, 0, err);
}

int cz_ring_allgather(const cz_comm *c, float *buf, size_t n, cz_error *err) {
    return ring_once(c->impl->mpi, ONCE_ALLGATHER, buf, n, 0, err);
}

int cz_ring_allreduce(const cz_comm *c, float *buf, size_t n, float *scratch, cz_error *err) {
    (void)scratch;
    return ring_once(c->impl->mpi, ONCE_ALLREDUCE, buf, n, 0, err);
}

int cz_ring_allreduce_i64(const cz_comm *c, int64_t *buf, size_t n, cz_error *err) {
    return ring_once(c->impl->mpi, ONCE_ALLREDUCE, (float *)(void *)buf, n, 1, err);
}
