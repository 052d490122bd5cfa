/* comm: the alpha-beta cost model of the all-reduce algorithms
 * (comm_internal.h; figures and calibration in docs/distributed-design.md).
 *
 * Hockney's model: a message of m bytes takes alpha + m*beta. An algorithm
 * here is a sequence of ring phases (comm_shape: reduce-scatter inside the
 * inner groups, then across the outer groups, and the all-gathers back), and
 * in a phase every member of every ring sends one block to its successor at
 * each of q-1 steps, all at once. A step lasts as long as its slowest part:
 *   inside a host:  alpha_shm + (bytes copied in the busiest host) * beta_shm
 *   between hosts:  alpha_net + (links after the first) * alpha_hop
 *                   + (bytes on the busiest link direction) * beta_net
 * so rings that share a host's link share its bandwidth, which is what makes
 * a flat ring over many ranks per host slow and the hierarchical one fast.
 * Links: on a star every host has one full-duplex link to the switch; on a
 * torus a message follows the dimension-order route (X first, the shorter
 * way round, + on a tie; an axis of 2 has one link), as launch/cloze-netsim
 * builds it. auto's choice is the cheapest algorithm under the model
 * (cz_allreduce_choose). Calls only shape.c (shapes, chunks, the bucket
 * layout) and hosts.c (host layouts). */
#include "comm_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cz_net_model_default(cz_net_model *m) {
    /* 10 Gbit/s Ethernet under TCP; shared memory of a current server */
    m->alpha_net = 30e-6;
    m->alpha_hop = 5e-6;
    m->beta_net = 8.0 / 10e9;
    m->alpha_shm = 2e-6;
    m->beta_shm = 1.0 / 10e9;
}

/* The options of a context (comm_internal.h) are what auto's choice reads
 * (cz_allreduce_choose): their defaults sit beside the model's. */
void cz_coll_opts_default(cz_coll_opts *o) {
    memset(o, 0, sizeof *o);
    o->algo = CZ_ALLREDUCE_RING;
    o->bytes = 25.0 * 1024 * 1024;
    cz_net_model_default(&o->net);
}

/* Link directions: star: 2h = host h's uplink, 2h+1 its downlink. torus:
 * 4h + d, d = 0 x+, 1 x-, 2 y+, 3 y- leaving host h. */
static int n_links(const cz_net_topology *t, int hosts) {
    return t->torus ? 4 * hosts : 2 * hosts;
}

/* Adds `bytes` to every link of the route a -> b; returns the route's length. */
static int route(const cz_net_topology *t, int a, int b, double bytes, double *load) {
    if (!t->torus) {
        load[2 * a] += bytes;
        load[2 * b + 1] += bytes;
        return 2;
    }
    int hops = 0, cur = a;
    for (int axis = 0; axis < 2; axis++) {
        int n = axis == 0 ? t->tx : t->ty;
        for (;;) {
            int cx = cur % t->tx, cy = cur / t->tx, c = axis == 0 ? cx : cy;
            int goal = axis == 0 ? b % t->tx : b / t->tx;
            if (c == goal) break;
            int d = ((goal - c) % n + n) % n, plus;
            if (n == 2)
                plus = c == 0;
            else
                plus = 2 * d <= n;
            load[4 * cur + 2 * axis + (plus ? 0 : 1)] += bytes;
            int nc = plus ? (c + 1) % n : (c + n - 1) % n;
            cur = axis == 0 ? nc + cy * t->tx : cx + nc * t->tx;
            hops++;
        }
    }
    return hops;
}

/* One ring phase: groups of q members (member(g, k)), q-1 steps of `bytes`
 * per message. */
typedef struct phase_ctx {
    const cz_net_model *m;
    const cz_net_topology *t;
    const cz_host_layout *l;
    const comm_shape *s;
    double *shm, *link;
} phase_ctx;

static double phase_seconds(const phase_ctx *x, int inner_level, double bytes) {
    const comm_shape *s = x->s;
    int q = inner_level ? s->inner : s->outer, groups = inner_level ? s->outer : s->inner;
    if (q < 2) return 0;
    int hosts = x->l->n_hosts;
    memset(x->shm, 0, (size_t)hosts * sizeof(double));
    memset(x->link, 0, (size_t)n_links(x->t, hosts) * sizeof(double));
    int any_shm = 0, max_hops = 0;
    for (int g = 0; g < groups; g++)
        for (int k = 0; k < q; k++) {
            int a = inner_level ? s->member[g * s->inner + k] : s->member[k * s->inner + g];
            int kn = (k + 1) % q;
            int b = inner_level ? s->member[g * s->inner + kn] : s->member[kn * s->inner + g];
            int ha = x->l->host_of[a], hb = x->l->host_of[b];
            if (ha == hb) {
                x->shm[ha] += bytes;
                any_shm = 1;
            } else {
                int h = route(x->t, ha, hb, bytes, x->link);
                if (h > max_hops) max_hops = h;
            }
        }
    double step = 0;
    if (any_shm) {
        double top = 0;
        for (int h = 0; h < hosts; h++) top = x->shm[h] > top ? x->shm[h] : top;
        step = x->m->alpha_shm + top * x->m->beta_shm;
    }
    if (max_hops > 0) {
        double top = 0;
        for (int k = 0; k < n_links(x->t, hosts); k++) top = x->link[k] > top ? x->link[k] : top;
        int extra = x->t->torus ? max_hops - 1 : 0;
        double net = x->m->alpha_net + extra * x->m->alpha_hop + top * x->m->beta_net;
        step = net > step ? net : step;
    }
    return (q - 1) * step;
}

double cz_net_allreduce_time(const cz_net_model *m, const cz_net_topology *t,
                             const cz_host_layout *l, cz_allreduce_algo algo, int grid_x,
                             double bytes) {
    if (l->p < 2) return 0;
    cz_net_topology star = {0};
    if (!t || (t->torus && t->tx * t->ty != l->n_hosts)) t = &star;
    comm_shape s;
    cz_error err;
    if (comm_shape_make(
            &s, l, algo == CZ_ALLREDUCE_AUTO || algo == CZ_ALLREDUCE_MPI ? CZ_ALLREDUCE_RING : algo,
            grid_x, &err) != 0)
        return INFINITY;
    double *shm = calloc((size_t)l->n_hosts + 1, sizeof(double));
    double *link = calloc((size_t)n_links(t, l->n_hosts) + 1, sizeof(double));
    double total = INFINITY;
    if (shm && link) {
        phase_ctx x = {m, t, l, &s, shm, link};
        /* blocks: an inner block is `outer` chunks of bytes/p; an outer one is one chunk */
        double inner_block = bytes / s.inner, outer_block = bytes / l->p;
        total = 2 * phase_seconds(&x, 1, inner_block) + 2 * phase_seconds(&x, 0, outer_block);
    }
    free(shm);
    free(link);
    comm_shape_free(&s);
    return total;
}

double cz_model_bound(const cz_net_model *m, const cz_host_layout *l, double bytes) {
    int h = l->n_hosts;
    if (h < 2) {
        int r = l->p;
        return r < 2 ? 0 : 2.0 * (r - 1) / r * bytes * m->beta_shm + ceil(log2(r)) * m->alpha_shm;
    }
    return 2.0 * (h - 1) / h * bytes * m->beta_net + ceil(log2(h)) * m->alpha_net;
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

/* ---- prediction without MPI: the planner's side of the same model ---- */

void cz_comm_config_net(const cz_comm_config *cfg, cz_net_model *m) {
    if (cfg->net_known) {
        *m = cfg->net;
        return;
    }
    cz_net_model_default(m);
    if (cfg->link_gbit > 0) m->beta_net = 8.0 / (cfg->link_gbit * 1e9);
    if (cfg->link_latency_us > 0) m->alpha_net = cfg->link_latency_us * 1e-6;
}

cz_allreduce_algo cz_net_choose(const cz_net_model *m, int hosts, int ranks_per_host, double bytes,
                                int *grid_x) {
    cz_host_layout l;
    cz_error err;
    *grid_x = 0;
    if (cz_host_layout_make(&l, hosts, ranks_per_host, 0, &err) != 0) return CZ_ALLREDUCE_RING;
    cz_coll_opts o;
    cz_coll_opts_default(&o);
    o.algo = CZ_ALLREDUCE_AUTO;
    o.net = *m;
    o.bytes = bytes;
    cz_allreduce_algo a = cz_allreduce_choose(&o, &l, grid_x, NULL, 0);
    cz_host_layout_free(&l);
    return a;
}

/* When bucket k is complete: the time of the first ready point whose count
 * covers the bucket's far end (counted from the end that finishes first). */
static double bucket_ready(const cz_bucket_layout *l, cz_grad_order order, int k,
                           const double *ready, const double *ready_t, int n_ready) {
    size_t off, count;
    cz_bucket_range(l, k, &off, &count);
    double need = order == CZ_GRAD_ASCENDING ? (double)(off + count) : (double)(l->n - off);
    for (int i = 0; i < n_ready; i++)
        if (ready[i] >= need) return ready_t[i];
    return n_ready > 0 ? ready_t[n_ready - 1] : 0;
}

/* A block all-reduce of u rows moves about 2u rows per rank, the
 * tensor's reduce-scatter about `height`: the block while it is no more. */
int cz_grad_rows_as_block(double union_rows, double height) {
    return 2 * union_rows <= height;
}

void cz_sync_predict(const cz_sync_scenario *s, cz_sync_prediction *out) {
    const cz_net_model *m = s->net;
    const cz_bucket_layout *l = s->layout;
    const cz_rows_tail *rows = &s->rows;
    int hosts = s->hosts, ranks_per_host = s->ranks_per_host, grid_x = s->grid_x;
    cz_allreduce_algo algo = s->algo;
    cz_grad_order order = s->order;
    cz_sync_mode mode = s->mode;
    double backward_s = s->backward_s;
    memset(out, 0, sizeof *out);
    if (hosts * ranks_per_host < 2 || l->n_buckets == 0) return;
    cz_host_layout hl;
    cz_error err;
    if (algo == CZ_ALLREDUCE_TORUS2D && grid_x <= 0)
        grid_x = cz_comm_grid_square(hosts * ranks_per_host);
    if (cz_host_layout_make(&hl, hosts, ranks_per_host, 0, &err) != 0) return;
    /* a reduce-scatter is the first half of the phases of an all-reduce,
     * an all-gather the second (cz_net_allreduce_time: 2 x each phase) */
    double share = mode == CZ_SYNC_ALLREDUCE ? 1.0 : 0.5;
    double end = 0;
    for (int i = 0; i < l->n_buckets; i++) {
        int k = cz_layout_bucket_at(l, order, i);
        size_t off, count;
        cz_bucket_range(l, k, &off, &count);
        double t = cz_net_allreduce_time(m, NULL, &hl, algo, grid_x, (double)count * sizeof(float));
        double start = bucket_ready(l, order, k, s->ready, s->ready_t, s->n_ready);
        if (start < end) start = end;
        end = start + share * t;
        out->total += share * t;
        if (mode != CZ_SYNC_ALLREDUCE) out->gather += 0.5 * t;
    }
    if (rows->union_rows > 0) { /* after both (cz_grad_sync_finish) */
        double mask = 8.0 * ceil(rows->height / 64), t = 0;
        t = cz_net_allreduce_time(m, NULL, &hl, algo, grid_x, mask);
        if (cz_grad_rows_as_block(rows->union_rows, rows->height)) {
            t += cz_net_allreduce_time(m, NULL, &hl, algo, grid_x,
                                       rows->union_rows * rows->width * sizeof(float));
        } else { /* the tensor's buckets again, as the mode reduces them */
            size_t hi = (size_t)(rows->height * rows->width);
            for (int k = 0; k < l->n_buckets; k++) {
                size_t off, count;
                cz_bucket_range(l, k, &off, &count);
                if (off < hi)
                    t += share * cz_net_allreduce_time(m, NULL, &hl, algo, grid_x,
                                                       (double)count * sizeof(float));
            }
        }
        end = (end > backward_s ? end : backward_s) + t;
        out->total += t;
    }
    out->exposed = end > backward_s ? end - backward_s : 0;
    cz_host_layout_free(&hl);
}
