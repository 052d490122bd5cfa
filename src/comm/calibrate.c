/* comm: the network measured at start-up, and the cluster file that keeps a
 * measurement (include/cloze/comm.h, "calibration"; docs/distributed-design.md,
 * "Calibration").
 *
 * Hockney's alpha-beta model needs two figures per level, fitted here to
 * the operation the model prices: our ring all-reduce, timed at a few sizes
 * on the hosts' first ranks (one per host: t = 2(h-1)(alpha + S/h beta_net))
 * and on every host's ranks at once (t = 2(r-1)(alpha + S beta_shm)). beta
 * is the least-squares slope of t against S over the formula's factor, so
 * the ring's own protocol (pipelined pieces, both directions of a link at
 * once) is in it while constant costs (a shaped link's burst allowance)
 * stay out. alpha is half the round trip of an 8-byte ping-pong (Hockney
 * 1994: a message's start-up time): the fit's intercept was tried and
 * swung with the load of a shared machine far more than the ping-pong.
 * Sizes grow by 4 while the next size still fits in the time left, decided
 * on the slowest rank's time (allreduced), so every rank takes the same
 * decisions. */
#include "comm_private.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cz_comm_quiet_barrier(MPI_Comm comm) {
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(comm, &r);
    while (!done) {
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done) usleep(200);
    }
}

/* Half the round trip of 8 bytes between ranks a and b, on every rank: a
 * warm-up batch of 5 round trips sizes five batches to `budget` seconds
 * (1 to 200 round trips each); the median batch. */
static double pingpong(MPI_Comm comm, int me, int a, int b, double budget) {
    double alpha = 0;
    if (me == a || me == b) {
        int peer = me == a ? b : a;
        double msg = 0, per[5];
        long n = 5;
        for (int k = -1; k < 5; k++) {
            double t0 = cz_now();
            for (long i = 0; i < n; i++) {
                if (me == a) {
                    MPI_Send(&msg, 1, MPI_DOUBLE, peer, 1, comm);
                    MPI_Recv(&msg, 1, MPI_DOUBLE, peer, 1, comm, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(&msg, 1, MPI_DOUBLE, peer, 1, comm, MPI_STATUS_IGNORE);
                    MPI_Send(&msg, 1, MPI_DOUBLE, peer, 1, comm);
                }
            }
            double rt = (cz_now() - t0) / (double)n;
            if (k < 0) { /* a says how long the batches are */
                double want = budget / 5 / (rt > 1e-7 ? rt : 1e-7);
                msg = want < 1 ? 1 : want > 200 ? 200 : floor(want);
                if (me == a)
                    MPI_Send(&msg, 1, MPI_DOUBLE, peer, 2, comm);
                else
                    MPI_Recv(&msg, 1, MPI_DOUBLE, peer, 2, comm, MPI_STATUS_IGNORE);
                n = (long)msg;
            } else {
                per[k] = rt / 2;
            }
        }
        alpha = cz_median(per, 5);
    }
    cz_comm_quiet_barrier(comm);
    MPI_Bcast(&alpha, 1, MPI_DOUBLE, a, comm);
    return alpha;
}

/* Seconds of our ring all-reduce of `floats` on sub (this rank's group;
 * sub NULL: this rank takes no part), every group at once: the slowest
 * rank's time, the mean of CAL_REPS: training pays the sum of its
 * transfers, so their expected time is what predicts it (with Open MPI's
 * rendezvous over TCP, before world.c raised the eager limit, transfers
 * ran at either the link's rate or half of it, and a median of 3 took one
 * mode or the other from one start-up to the next). */
#define CAL_REPS 5
static double ring_time(MPI_Comm comm, const cz_comm *sub, float *buf, size_t floats) {
    double sum = 0;
    for (int rep = 0; rep < CAL_REPS; rep++) {
        cz_comm_quiet_barrier(comm);
        double t0 = cz_now();
        cz_error e;
        if (sub && cz_ring_allreduce(sub, buf, floats, NULL, &e) != 0) t0 = -INFINITY;
        double t = sub ? cz_now() - t0 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
        sum += t;
    }
    return sum / CAL_REPS;
}

/* The slope of the ring's time against its bytes: sizes 256 KiB, 1 MiB,
 * ... (at most CAL_MAX) while the next one fits in `budget` seconds, the
 * least-squares slope (the largest size's time over its bytes when noise
 * makes the slope meaningless). After one untimed small call (a TCP
 * transport connects on first use). */
#define CAL_MIN ((size_t)256 << 10)
#define CAL_MAX ((size_t)16 << 20)
static double ring_slope(MPI_Comm comm, const cz_comm *sub, double budget, float *buf) {
    double xs[8], ts[8], spent = 0;
    int n = 0;
    ring_time(comm, sub, buf, 1024);
    for (size_t bytes = CAL_MIN; bytes <= CAL_MAX && n < 8; bytes *= 4) {
        double t0 = cz_now();
        xs[n] = (double)bytes;
        ts[n] = ring_time(comm, sub, buf, bytes / sizeof(float));
        n++;
        /* every rank agrees: the elapsed time is the slowest rank's */
        double took = cz_now() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &took, 1, MPI_DOUBLE, MPI_MAX, comm);
        spent += took;
        /* two sizes make a slope; a starved machine may allow only one */
        if ((n >= 2 || spent > budget) && spent + 4 * took > budget) break;
    }
    double mx = 0, mt = 0;
    for (int i = 0; i < n; i++) mx += xs[i] / n, mt += ts[i] / n;
    double sxx = 0, sxt = 0;
    for (int i = 0; i < n; i++) {
        sxx += (xs[i] - mx) * (xs[i] - mx);
        sxt += (xs[i] - mx) * (ts[i] - mt);
    }
    double slope = sxx > 0 ? sxt / sxx : 0;
    if (!(slope > 0)) slope = ts[n - 1] / xs[n - 1];
    return slope;
}

/* Rank with local index i on host h, or -1. */
static int rank_at(const cz_host_layout *l, int h, int i) {
    for (int r = 0; r < l->p; r++)
        if (l->host_of[r] == h && l->local_of[r] == i) return r;
    return -1;
}

/* This rank's group of a split (color < 0: none) as a cz_comm. */
static int group(MPI_Comm comm, int color, int key, cz_comm *out, int *in, cz_error *err) {
    MPI_Comm g;
    *in = 0;
    memset(out, 0, sizeof *out);
    if (MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &g) != MPI_SUCCESS)
        return cz_fail(err, "comm: MPI_Comm_split failed (calibration)");
    if (g == MPI_COMM_NULL) return 0;
    int rc = cz_comm_from_mpi(out, g, err);
    MPI_Comm_free(&g);
    *in = rc == 0;
    return rc;
}

int cz_comm_calibrate(const cz_comm *c, double budget_s, cz_net_model *out, int *hosts,
                      int *ranks_per_host, cz_error *err) {
    MPI_Comm comm = cz_comm_mpi(c);
    cz_host_layout l;
    if (cz_host_layout_get(comm, &l, err) != 0) return -1;
    int me = c->rank, rph = l.ranks_per_host, h = l.n_hosts;
    *hosts = h;
    *ranks_per_host = rph;
    float *buf = calloc(CAL_MAX / sizeof(float), sizeof(float));
    if (!buf) {
        cz_host_layout_free(&l);
        return cz_fail(err, "comm: out of memory (calibration buffers)");
    }
    /* between hosts 60 % of the budget (the slower level, bigger times),
     * inside 40 %; a ping-pong at most a sixth of its part, the ring what
     * the ping-pong leaves */
    int net = h > 1, shm = rph >= 2, rc = 0;
    double b_net = budget_s * (shm ? 0.6 : 1.0), b_shm = budget_s * (net ? 0.4 : 1.0);
    cz_comm sub;
    int in = 0;
    if (net) {
        double t0 = cz_now();
        out->alpha_net = pingpong(comm, me, rank_at(&l, 0, 0), rank_at(&l, 1, 0), b_net / 6);
        double left = b_net - (cz_now() - t0);
        /* every rank takes the same decisions: the slowest rank's clock */
        MPI_Allreduce(MPI_IN_PLACE, &left, 1, MPI_DOUBLE, MPI_MIN, comm);
        /* the hosts' first ranks in a ring, one per host: 2(h-1) steps of
         * S/h bytes on every link, t = 2(h-1)(alpha + S/h beta) */
        rc = group(comm, l.local_of[me] == 0 ? 0 : -1, me, &sub, &in, err);
        if (rc == 0) {
            double slope = ring_slope(comm, in ? &sub : NULL, left, buf);
            out->beta_net = slope * h / (2.0 * (h - 1));
        }
        if (in) cz_comm_finalize(&sub);
    }
    if (rc == 0 && shm) {
        out->alpha_shm = pingpong(comm, me, rank_at(&l, 0, 0), rank_at(&l, 0, 1), b_shm / 6);
        /* every host's ranks in a ring, all hosts at once: 2(r-1) steps in
         * which the host's r ranks copy S/r bytes each, t = 2(r-1)(alpha +
         * S beta) */
        rc = group(comm, l.host_of[me], me, &sub, &in, err);
        if (rc == 0) {
            double slope = ring_slope(comm, in ? &sub : NULL, b_shm * 5 / 6, buf);
            out->beta_shm = slope / (2.0 * (rph - 1));
        }
        if (in) cz_comm_finalize(&sub);
    }
    free(buf);
    cz_host_layout_free(&l);
    return rc;
}

/* ---- the cluster file ---- */

int cz_net_model_write(const char *path, const cz_net_model *m, int hosts, int ranks_per_host,
                       cz_error *err) {
    char text[1024];
    snprintf(text, sizeof text,
             "# cloze cluster calibration (cloze-plan calibrate; docs/distributed.md)\n"
             "hosts %d\nranks_per_host %d\nalpha_net_us %.6g\nnet_gbit %.6g\nalpha_hop_us %.6g\n"
             "alpha_shm_us %.6g\nshm_gbyte %.6g\n",
             hosts, ranks_per_host, m->alpha_net * 1e6, 8e-9 / m->beta_net, m->alpha_hop * 1e6,
             m->alpha_shm * 1e6, 1e-9 / m->beta_shm);
    return cz_write_file_atomic(path, text, strlen(text), err);
}

int cz_net_model_read(const char *path, cz_net_model *m, int *hosts, int *ranks_per_host,
                      cz_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return cz_fail(err, "%s: %s", path, strerror(errno));
    cz_net_model_default(m);
    *hosts = *ranks_per_host = 0;
    char line[256];
    int ln = 0, seen = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ln++;
        char key[64];
        double v;
        char *s = line + strspn(line, " \t");
        if (*s == '#' || *s == '\n' || *s == 0) continue;
        int n = sscanf(s, "%63s %lf", key, &v);
        if (n != 2 || !isfinite(v) || v < 0) {
            rc = cz_fail(err, "%s:%d: expected \"key value\" with a value >= 0", path, ln);
            break;
        }
        int positive = 1;
        if (!strcmp(key, "hosts"))
            *hosts = (int)v, positive = 0;
        else if (!strcmp(key, "ranks_per_host"))
            *ranks_per_host = (int)v, positive = 0;
        else if (!strcmp(key, "alpha_net_us"))
            m->alpha_net = v * 1e-6, seen |= 1, positive = 0;
        else if (!strcmp(key, "net_gbit"))
            m->beta_net = v > 0 ? 8.0 / (v * 1e9) : 0, seen |= 2;
        else if (!strcmp(key, "alpha_hop_us"))
            m->alpha_hop = v * 1e-6, positive = 0;
        else if (!strcmp(key, "alpha_shm_us"))
            m->alpha_shm = v * 1e-6, positive = 0;
        else if (!strcmp(key, "shm_gbyte"))
            m->beta_shm = v > 0 ? 1.0 / (v * 1e9) : 0;
        else
            rc = cz_fail(err,
                         "%s:%d: unknown key \"%s\" (alpha_net_us, net_gbit, alpha_hop_us, "
                         "alpha_shm_us, shm_gbyte, hosts, ranks_per_host)",
                         path, ln, key);
        if (rc == 0 && positive && v <= 0)
            rc = cz_fail(err, "%s:%d: %s must be > 0", path, ln, key);
    }
    fclose(f);
    if (rc == 0 && seen != 3)
        rc = cz_fail(err, "%s: %s missing (a calibration has alpha_net_us and net_gbit)", path,
                     seen & 1 ? "net_gbit" : "alpha_net_us");
    return rc;
}

/* ---- at start-up ---- */

int cz_comm_net_setup(const cz_comm *c, cz_comm_config *cfg, cz_error *err) {
    cz_net_model m;
    cz_comm_config_net(cfg, &m);
    int hosts = 0, rph = 0;
    double t0 = cz_now();
    const char *how;
    if (cfg->cluster_file[0]) {
        /* rank 0 reads, every rank gets its verdict and its figures */
        int rc = c->rank == 0 ? cz_net_model_read(cfg->cluster_file, &m, &hosts, &rph, err) : 0;
        if (cz_comm_share_verdict(c, 0, rc, err) != 0)
            return cz_fail_prefix(err, "dist.cluster_file");
        if (cz_comm_bcast(c, &m, sizeof m, 0, err) != 0) return -1;
        how = "read from dist.cluster_file";
    } else if (cfg->calibrate && c->size > 1) {
        if (cz_comm_calibrate(c, cfg->calibrate_s, &m, &hosts, &rph, err) != 0) return -1;
        how = "measured";
    } else {
        return 0; /* the keys' model: cz_comm_config_net */
    }
    cfg->net = m;
    cfg->net_known = 1;
    if (c->rank != 0) return 0;
    if (cfg->cluster_file[0])
        cz_info("network model read from %s (calibrated on %d host(s) x %d rank(s)): between "
                "hosts alpha %.1f us, %.4g Gbit/s per host link; inside a host alpha %.1f us, "
                "%.3g GB/s",
                cfg->cluster_file, hosts, rph, m.alpha_net * 1e6, 8e-9 / m.beta_net,
                m.alpha_shm * 1e6, 1e-9 / m.beta_shm);
    else {
        double took = cz_now() - t0;
        if (hosts > 1)
            cz_info("network between hosts %s in %.2f s (%d hosts, our ring all-reduce at "
                    "a few sizes, fitted): alpha %.1f us, %.4g Gbit/s per host link",
                    how, took, hosts, m.alpha_net * 1e6, 8e-9 / m.beta_net);
        else
            cz_info("network between hosts: one host here, the model keeps dist.link_gbit "
                    "%.4g Gbit/s and dist.link_latency_us %.1f us",
                    8e-9 / m.beta_net, m.alpha_net * 1e6);
        if (rph >= 2)
            cz_info("network inside a host %s (%d ranks per host): alpha %.1f us, %.3g GB/s per "
                    "host",
                    how, rph, m.alpha_shm * 1e6, 1e-9 / m.beta_shm);
        else
            cz_info("network inside a host: one rank per host here, the model keeps alpha "
                    "%.1f us, %.3g GB/s",
                    m.alpha_shm * 1e6, 1e-9 / m.beta_shm);
    }
    return 0;
}
