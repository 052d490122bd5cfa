/* comm: ring, hierarchical and torus2d all-reduce, reduce-scatter and
 * all-gather as one context (cz_coll): rings over groups of ranks
 * (comm_internal.h, "hosts"; the ring itself is ring.c). Reduce-scatter is
 * the inner ring's, then the outer ring's; all-gather the outer's, then the
 * inner's; the flat ring is the shape with one outer group. Creation finds
 * the hosts (hosts.c), resolves "auto" by the cost model (cost_model.c),
 * splits the rings' communicators and learns every rank's host name for
 * the bounded waits' messages (deadline.c). */
#include "comm_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the two levels ---- */

int cz_coll_reduce_scatter(cz_coll *c, float *buf, size_t n, cz_error *err) {
    if (c->p == 1 || n == 0) return 0;
    if (comm_ring_reduce_scatter(c, COMM_LEVEL_INNER, buf, n, err) != 0) return -1;
    return comm_ring_reduce_scatter(c, COMM_LEVEL_OUTER, buf, n, err);
}

/* bf16: the gradient all-reduce's second half on a bf16 wire; an
 * all-gather of its own (the optimizer's weights) stays fp32 */
static int allgather(cz_coll *c, float *buf, size_t n, int bf16, cz_error *err) {
    if (c->p == 1 || n == 0) return 0;
    if (comm_ring_allgather(c, COMM_LEVEL_OUTER, buf, n, bf16, err) != 0) return -1;
    return comm_ring_allgather(c, COMM_LEVEL_INNER, buf, n, bf16, err);
}

int cz_coll_allgather(cz_coll *c, float *buf, size_t n, cz_error *err) {
    return allgather(c, buf, n, 0, err);
}

int cz_coll_allreduce(cz_coll *c, float *buf, size_t n, cz_error *err) {
    if (cz_coll_reduce_scatter(c, buf, n, err) != 0) return -1;
    return allgather(c, buf, n, 1, err);
}

/* The exact sum (exact.c): the same rings and pieces over int64 elements,
 * added as integers, never bf16 on the wire. */
int cz_coll_allreduce_i64(cz_coll *c, int64_t *buf, size_t n, cz_error *err) {
    c->i64 = 1;
    float *b = (float *)(void *)buf;
    int rc = cz_coll_reduce_scatter(c, b, n, err);
    if (rc == 0) rc = allgather(c, b, n, 0, err);
    c->i64 = 0;
    return rc;
}

/* ---- creation ---- */

int cz_coll_opts_from_config(cz_coll_opts *o, const cz_comm_config *cfg, double bytes,
                             cz_error *err) {
    cz_coll_opts_default(o);
    o->algo = cfg->allreduce;
    o->bytes = bytes;
    if (cz_comm_grid_parse(cfg->grid, &o->grid_x, &o->grid_y, err) != 0) return -1;
    cz_comm_config_net(cfg, &o->net); /* measured or read when known, else the keys */
    o->timeout_s = cfg->timeout_s;
    o->wire_bf16 = cfg->grad_wire == CZ_WIRE_BF16;
    return 0;
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
        if (gx <= 0) gx = cz_comm_grid_square(c->p);
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
    c->wire_bf16 = o->wire_bf16;
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

void cz_coll_free(cz_coll *c) {
    if (!c) return;
    if (c->inner != MPI_COMM_NULL) MPI_Comm_free(&c->inner);
    if (c->outer != MPI_COMM_NULL) MPI_Comm_free(&c->outer);
    if (c->alive != MPI_COMM_NULL) MPI_Comm_free(&c->alive);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->host);
    comm_shape_free(&c->shape);
    cz_free(c->tmp);
    cz_free(c->wire);
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
