/* allreduce_bench: our all-reduce algorithms against MPI_Allreduce, with the
 * alpha-beta model beside every measurement.
 *
 *   mpirun -np P build/bench/bench-allreduce_bench [MAX_MIB] [options]
 *     sizes 4 KiB, x4, ... up to MAX_MIB (default 64)
 *   --min-mib M --factor F   sizes M, M*F, ... MAX_MIB (MiB)
 *   --floats N               one size only (a model's gradient), no overlap
 *   --algos LIST             of ring,hierarchical,torus2d,mpi (default: all
 *                            that apply; hierarchical needs >= 2 hosts);
 *                            mpi_ring, mpi_rabenseifner: one forced MPI alone
 *   --grid XxY               torus2d's grid (default: the most square)
 *   --topology star|XxY      the network the hosts sit on (the model's routes;
 *                            XxY: a torus of hosts, as cloze-netsim builds it)
 *   --net ALPHA_US,GBIT      model parameters between hosts, instead of calibrating
 *   --shm ALPHA_US,GBYTES    ... inside a host
 *   --reps R                 repetitions per size, interleaved (default 5; median)
 *   --no-overlap             skip the final overlap measurement
 *   --model HOSTSxRANKS      no measurement: model times for a cluster that is
 *                            not here (one process; give --net and --shm)
 *
 * Columns: `bytes`, then per algorithm `<algo>_ms` (median over ranks' max)
 * and `<algo>_GB/s`, the bus bandwidth 2(p-1)/p * bytes / time (p ranks:
 * the bytes each rank moves in a bandwidth-optimal all-reduce, NCCL-tests'
 * definition); `mpi` is MPI_Allreduce with Open MPI's defaults, and under
 * `--mca coll_tuned_use_dynamic_rules 1` also `mpi_ring` and `mpi_rabenseifner`
 * (coll_tuned_allreduce_algorithm 4 and 6, set through MPI_T on their own
 * communicators, so all run in the same process, interleaved). Then per own
 * algorithm `<algo>_model_ms` and `<algo>_x` (measured / model), the
 * bound (cz_model_bound) as `bound_ms` and `bound_GB/s`, `best/bound` (how
 * close the best own algorithm gets: bound time / its time), `best/mpi`
 * (best MPI time / best own time), and `auto` (what dist.allreduce = auto
 * would pick at that size under the calibrated model). Last, per algorithm,
 * how the machine's cores spent the time it ran (/proc/stat: user, system,
 * softirq, steal, idle): on a simulated cluster every host shares them. */
#include "cloze/comm.h"

#include "../src/comm/comm_internal.h" /* comm's inside: cz_coll, host layouts, the cost model */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_ALGOS = 8 };

typedef struct algo {
    char name[24];
    cz_coll *coll;   /* own algorithms and "mpi" */
    MPI_Comm forced; /* mpi_ring / mpi_rabenseifner: MPI_Allreduce here */
    int own;         /* ours: modelled */
    cz_allreduce_algo model;
    double t[64];  /* this size's repetitions */
    double cpu[5]; /* machine-wide CPU seconds while it ran (cpu_now) */
} algo;

typedef struct bench {
    cz_comm d;
    cz_host_layout hosts;
    cz_net_model net;
    cz_net_topology topo;
    int grid_x;
    algo a[MAX_ALGOS];
    int n_algos;
    int reps;
} bench;

/* ---- calibration: ping-pong (alpha) and streaming (beta) ---- */

/* Half the round trip of an 8-byte message between a and b: median of 9
 * batches of 200. */
static double pingpong(const bench *B, int a, int b) {
    MPI_Comm comm = cz_comm_mpi(&B->d);
    double batch[9] = {0};
    char msg[8] = {0};
    if (B->d.rank == a || B->d.rank == b) {
        int peer = B->d.rank == a ? b : a;
        for (int k = -1; k < 9; k++) {
            double t0 = cz_now();
            for (int i = 0; i < 200; i++) {
                if (B->d.rank == a) {
                    MPI_Send(msg, 8, MPI_BYTE, peer, 1, comm);
                    MPI_Recv(msg, 8, MPI_BYTE, peer, 1, comm, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(msg, 8, MPI_BYTE, peer, 1, comm, MPI_STATUS_IGNORE);
                    MPI_Send(msg, 8, MPI_BYTE, peer, 1, comm);
                }
            }
            if (k >= 0) batch[k] = (cz_now() - t0) / 400;
        }
    }
    cz_comm_quiet_barrier(comm);
    double alpha = cz_median(batch, 9);
    MPI_Bcast(&alpha, 1, MPI_DOUBLE, a, comm);
    return alpha;
}

/* Seconds per byte when every rank sends `bytes` to to[rank] and receives
 * from the rank that sends to it, all at once (to[r] < 0: r takes no part),
 * in messages of the ring's largest piece (CZ_RING_PIECE_MAX_BYTES), which cz_comm_init
 * lets Open MPI send eagerly: one message of all the bytes would go by
 * rendezvous, which a pair sending both ways over one TCP connection runs
 * at about half the link's rate (docs/distributed-design.md, "Eager pieces over
 * TCP"); best of 3, each timed as the slowest rank. */
static double stream(const bench *B, const int *to, size_t bytes, char *buf) {
    MPI_Comm comm = cz_comm_mpi(&B->d);
    int me = B->d.rank, from = -1;
    for (int r = 0; r < B->d.size; r++)
        if (to[r] == me) from = r;
    enum { MAX_MSGS = 64 };
    MPI_Request q[2 * MAX_MSGS];
    size_t msg =
        bytes / MAX_MSGS > CZ_RING_PIECE_MAX_BYTES ? bytes / MAX_MSGS : CZ_RING_PIECE_MAX_BYTES;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        cz_comm_quiet_barrier(comm);
        double t0 = cz_now();
        int nq = 0;
        for (size_t off = 0; off < bytes; off += msg) {
            int len = (int)(bytes - off < msg ? bytes - off : msg);
            if (from >= 0) MPI_Irecv(buf + bytes + off, len, MPI_BYTE, from, 2, comm, &q[nq++]);
            if (to[me] >= 0) MPI_Isend(buf + off, len, MPI_BYTE, to[me], 2, comm, &q[nq++]);
        }
        MPI_Waitall(nq, q, MPI_STATUSES_IGNORE);
        double t = nq ? cz_now() - t0 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (t < best) best = t;
    }
    return best / (double)bytes;
}

/* Rank with local index i on host h, or -1. */
static int rank_at(const cz_host_layout *l, int h, int i) {
    for (int r = 0; r < l->p; r++)
        if (l->host_of[r] == h && l->local_of[r] == i) return r;
    return -1;
}

static void calibrate(bench *B, int want_net, int want_shm) {
    const cz_host_layout *l = &B->hosts;
    int p = l->p, rph = l->ranks_per_host, me = B->d.rank;
    size_t bytes = 32u << 20;
    char *buf = malloc(2 * bytes);
    int *to = malloc((size_t)p * sizeof(int));
    if (!buf || !to) MPI_Abort(cz_comm_mpi(&B->d), 1);
    memset(buf, 1, 2 * bytes);
    if (want_net && l->n_hosts > 1) {
        int b = rank_at(l, 1, 0);
        double alpha = pingpong(B, 0, b);
        for (int r = 0; r < p; r++) to[r] = r == 0 ? b : -1;
        double pair = stream(B, to, bytes, buf);
        /* every rank to the rank with its index on the next host: the
         * concurrency of an outer ring phase (all of a host's ranks share its link) */
        for (int r = 0; r < p; r++)
            to[r] = rph ? rank_at(l, (l->host_of[r] + 1) % l->n_hosts, l->local_of[r]) : -1;
        double all = stream(B, to, bytes, buf) / (rph ? rph : 1);
        B->net.alpha_net = alpha;
        B->net.beta_net = all;
        if (me == 0)
            printf("calibration between hosts: alpha %.1f us (ping-pong, 8 B), %.3f Gbit/s one "
                   "stream, %.3f Gbit/s per host link with every host sending (%d streams per "
                   "link): the model uses the last\n",
                   alpha * 1e6, 8e-9 / pair, 8e-9 / all, rph ? rph : 1);
    }
    if (want_shm && rph >= 2) {
        int b = rank_at(l, 0, 1);
        double alpha = pingpong(B, 0, b);
        for (int r = 0; r < p; r++) to[r] = r == 0 ? b : -1;
        double pair = stream(B, to, bytes, buf);
        for (int r = 0; r < p; r++) to[r] = rank_at(l, l->host_of[r], (l->local_of[r] + 1) % rph);
        /* every host's ranks in a ring at once: copies share the memory (and
         * here the machine's cores, which all simulated hosts share) */
        double all = stream(B, to, bytes, buf) / rph;
        B->net.alpha_shm = alpha;
        B->net.beta_shm = all;
        if (me == 0)
            printf("calibration inside a host: alpha %.1f us, %.2f GB/s one stream, %.2f GB/s per "
                   "host with every rank copying: the model uses the last\n",
                   alpha * 1e6, 1e-9 / pair, 1e-9 / all);
    }
    free(buf);
    free(to);
}

/* ---- the measured operations ---- */

/* The machine's CPU time so far (Linux /proc/stat, all cores): user + nice,
 * system, irq + softirq, steal (the hypervisor's), idle + iowait, in
 * seconds; 0 where unreadable. The simulated hosts share this machine, so
 * rank 0's reading covers them all. */
enum { CPU_KINDS = 5 };
static void cpu_now(double out[CPU_KINDS]) {
    unsigned long long v[8] = {0};
    for (int k = 0; k < CPU_KINDS; k++) out[k] = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got != 8) return;
    double hz = (double)sysconf(_SC_CLK_TCK);
    out[0] = (double)(v[0] + v[1]) / hz;
    out[1] = (double)v[2] / hz;
    out[2] = (double)(v[5] + v[6]) / hz;
    out[3] = (double)v[7] / hz;
    out[4] = (double)(v[3] + v[4]) / hz;
}

static double time_one(bench *B, algo *a, float *buf, size_t n, int iters) {
    cz_error err;
    MPI_Barrier(cz_comm_mpi(&B->d));
    double c0[CPU_KINDS], c1[CPU_KINDS];
    if (B->d.rank == 0) cpu_now(c0);
    double t0 = cz_now();
    for (int i = 0; i < iters; i++) {
        int rc = a->coll ? cz_coll_allreduce(a->coll, buf, n, &err)
                         : (MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                          a->forced) == MPI_SUCCESS
                                ? 0
                                : cz_fail(&err, "MPI_Allreduce failed"));
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n", a->name, err.msg);
            MPI_Abort(cz_comm_mpi(&B->d), 1);
        }
    }
    double t = (cz_now() - t0) / iters;
    if (B->d.rank == 0) {
        cpu_now(c1);
        for (int k = 0; k < CPU_KINDS; k++) a->cpu[k] += c1[k] - c0[k];
    }
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, cz_comm_mpi(&B->d));
    return t;
}

static int set_cvar(const char *name, int value) {
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) return -1;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return -1;
    int rc = MPI_T_cvar_write(h, &value);
    MPI_T_cvar_handle_free(&h);
    return rc == MPI_SUCCESS ? 0 : -1;
}

static int get_cvar(const char *name) {
    int idx, count, value = 0; /* a bool variable fills only its first byte */
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) return -1;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) return -1;
    MPI_T_cvar_read(h, &value);
    MPI_T_cvar_handle_free(&h);
    return value;
}

static void add_own(bench *B, cz_allreduce_algo which) {
    cz_coll_opts o;
    cz_coll_opts_default(&o);
    o.algo = which;
    o.grid_x = B->grid_x;
    cz_error err;
    algo *a = &B->a[B->n_algos];
    memset(a, 0, sizeof *a);
    if (cz_coll_create(&a->coll, cz_comm_mpi(&B->d), &o, &err) != 0) {
        if (B->d.rank == 0)
            fprintf(stderr, "skipping %s: %s\n", cz_allreduce_algo_name(which), err.msg);
        return;
    }
    snprintf(a->name, sizeof a->name, "%s", cz_allreduce_algo_name(which));
    a->model = which;
    a->own = 1;
    if (B->d.rank == 0) printf("# %s\n", cz_coll_describe(a->coll));
    B->n_algos++;
}

/* MPI_Allreduce on a communicator of its own: Open MPI's choice
 * (tuned_algorithm < 0) or the coll/tuned algorithm given. */
static void add_forced(bench *B, const char *name, int tuned_algorithm) {
    algo *a = &B->a[B->n_algos];
    memset(a, 0, sizeof *a);
    /* coll/tuned reads the forced algorithm when a communicator is created */
    if ((tuned_algorithm >= 0 &&
         set_cvar("coll_tuned_allreduce_algorithm", tuned_algorithm) != 0) ||
        MPI_Comm_dup(cz_comm_mpi(&B->d), &a->forced) != MPI_SUCCESS) {
        if (B->d.rank == 0) fprintf(stderr, "skipping %s: cannot force it through MPI_T\n", name);
        return;
    }
    if (tuned_algorithm >= 0) set_cvar("coll_tuned_allreduce_algorithm", 0);
    snprintf(a->name, sizeof a->name, "%s", name);
    B->n_algos++;
}

static int has_algo(const char *list, const char *name) {
    if (!list) return 1;
    size_t len = strlen(name);
    for (const char *s = list; (s = strstr(s, name)) != NULL; s += len)
        if ((s == list || s[-1] == ',') && (s[len] == ',' || s[len] == 0)) return 1;
    return 0;
}

/* What dist.allreduce = auto would pick for `bytes` under this model. */
static const char *auto_pick(const bench *B, double bytes, char *out, size_t len) {
    cz_coll_opts o;
    cz_coll_opts_default(&o);
    o.net = B->net;
    o.topo = B->topo;
    o.bytes = bytes;
    int gx;
    cz_allreduce_algo a = cz_allreduce_choose(&o, &B->hosts, &gx, NULL, 0);
    if (a == CZ_ALLREDUCE_TORUS2D)
        snprintf(out, len, "torus2d:%dx%d", gx, B->hosts.p / gx);
    else
        snprintf(out, len, "%s", cz_allreduce_algo_name(a));
    return out;
}

/* ---- the overlap measurement (bucketed gradient sync vs a simulated backward) ---- */

/* Stand-in for backward compute between two hook calls (no MPI, no sleep:
 * a busy core like a real backward). */
static void busy(double seconds) {
    double t0 = cz_now();
    while (cz_now() - t0 < seconds) {
    }
}

/* Overlap: backward of `n` floats reported in 64 ranges from the end with
 * `compute` seconds of work in between; how long does finish still wait? */
static void overlap(const cz_comm *d, size_t n, double bucket_mib, double compute) {
    cz_error err;
    cz_grad_sync *gs;
    float *g = cz_alloc(n * sizeof(float), &err);
    cz_comm_config cfg = {0};
    cfg.allreduce = CZ_ALLREDUCE_RING;
    cfg.bucket_mb = bucket_mib;
    cfg.overlap = 1;
    if (!g ||
        cz_grad_sync_create(&gs, d, &cfg, n, CZ_SYNC_ALLREDUCE, CZ_GRAD_DESCENDING, &err) != 0)
        MPI_Abort(cz_comm_mpi(d), 1);
    double plain = 0, total = 0, wait = 0;
    for (int rep = 0; rep < 3; rep++) {
        MPI_Barrier(cz_comm_mpi(d));
        double t0 = cz_now();
        cz_ring_allreduce(d, g, n, NULL, &err);
        plain += cz_now() - t0;
        MPI_Barrier(cz_comm_mpi(d));
        t0 = cz_now();
        cz_grad_sync_begin(gs, g);
        size_t piece = n / 64;
        for (int j = 0; j < 64; j++) {
            busy(compute / 64);
            size_t hi = n - (size_t)j * piece, lo = j == 63 ? 0 : hi - piece;
            cz_grad_sync_ready(gs, lo, hi - lo);
        }
        double t1 = cz_now();
        if (cz_grad_sync_finish(gs, &err) != 0) MPI_Abort(cz_comm_mpi(d), 1);
        wait += cz_now() - t1;
        total += cz_now() - t0;
    }
    if (d->rank == 0)
        printf(
            "overlap: %zu bytes, buckets of %.1f MiB, backward %.1f ms: plain all-reduce %.1f ms, "
            "step with sync %.1f ms, finish waited %.1f ms (thread level %d)\n",
            n * sizeof(float), bucket_mib, compute * 1e3, plain / 3 * 1e3, total / 3 * 1e3,
            wait / 3 * 1e3, cz_comm_thread_level(d));
    cz_grad_sync_free(gs);
    cz_free(g);
}

/* ---- model only ---- */

static int model_only(bench *B, const char *shape, const size_t *sizes, int ns) {
    int h, r;
    cz_error err;
    if (sscanf(shape, "%dx%d", &h, &r) != 2 || cz_host_layout_make(&B->hosts, h, r, 0, &err) != 0) {
        fprintf(stderr, "--model HOSTSxRANKS, e.g. 64x2\n");
        return 2;
    }
    int p = h * r, gx = B->grid_x;
    if (gx <= 0)
        for (int x = 1; x * x <= p; x++)
            if (p % x == 0) gx = x;
    printf("model: %d hosts x %d ranks, %s; between hosts %.1f us, %.3f Gbit/s; inside %.1f us, "
           "%.2f GB/s\n",
           h, r, B->topo.torus ? "torus" : "star", B->net.alpha_net * 1e6, 8e-9 / B->net.beta_net,
           B->net.alpha_shm * 1e6, 1e-9 / B->net.beta_shm);
    printf("%12s %14s %14s %14s %12s %s\n", "bytes", "ring_model_ms", "hier_model_ms",
           "torus2d_model_ms", "bound_ms", "auto");
    for (int k = 0; k < ns; k++) {
        double b = (double)sizes[k] * sizeof(float);
        char pick[48];
        printf("%12.0f %14.3f %14.3f %14.3f %12.3f %s\n", b,
               1e3 * cz_net_allreduce_time(&B->net, &B->topo, &B->hosts, CZ_ALLREDUCE_RING, 0, b),
               r > 1 ? 1e3 * cz_net_allreduce_time(&B->net, &B->topo, &B->hosts,
                                                   CZ_ALLREDUCE_HIERARCHICAL, 0, b)
                     : NAN,
               1e3 *
                   cz_net_allreduce_time(&B->net, &B->topo, &B->hosts, CZ_ALLREDUCE_TORUS2D, gx, b),
               1e3 * cz_model_bound(&B->net, &B->hosts, b), auto_pick(B, b, pick, sizeof pick));
    }
    cz_host_layout_free(&B->hosts);
    return 0;
}

int main(int argc, char **argv) {
    static bench B;
    cz_error err;
    int provided;
    /* after cz_comm_init, which sets MCA defaults that MPI_T would read first */
    if (cz_comm_init(&B.d, &argc, &argv, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided);
    cz_comm *d = &B.d;
    double max_mib = 64, min_mib = 0, factor = 4;
    size_t one = 0;
    int do_overlap = 1, have_net = 0, have_shm = 0;
    const char *algos = NULL, *model_shape = NULL;
    B.reps = 5;
    cz_net_model_default(&B.net);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x, y;
        int gx, gy;
        if (!strcmp(a, "--floats") && v)
            one = (size_t)atol(v), i++;
        else if (!strcmp(a, "--min-mib") && v)
            min_mib = atof(v), i++;
        else if (!strcmp(a, "--factor") && v)
            factor = atof(v), i++;
        else if (!strcmp(a, "--algos") && v)
            algos = v, i++;
        else if (!strcmp(a, "--reps") && v)
            B.reps = atoi(v), i++;
        else if (!strcmp(a, "--model") && v)
            model_shape = v, i++;
        else if (!strcmp(a, "--no-overlap"))
            do_overlap = 0;
        else if (!strcmp(a, "--grid") && v && sscanf(v, "%dx%d", &gx, &gy) == 2)
            B.grid_x = gx, i++;
        else if (!strcmp(a, "--topology") && v) {
            if (sscanf(v, "%dx%d", &gx, &gy) == 2) B.topo.torus = 1, B.topo.tx = gx, B.topo.ty = gy;
            i++;
        } else if (!strcmp(a, "--net") && v && sscanf(v, "%lf,%lf", &x, &y) == 2) {
            B.net.alpha_net = x * 1e-6, B.net.beta_net = 8 / (y * 1e9), have_net = 1, i++;
        } else if (!strcmp(a, "--shm") && v && sscanf(v, "%lf,%lf", &x, &y) == 2) {
            B.net.alpha_shm = x * 1e-6, B.net.beta_shm = 1 / (y * 1e9), have_shm = 1, i++;
        } else if (a[0] != '-' && atof(a) > 0)
            max_mib = atof(a);
        else {
            if (d->rank == 0)
                fprintf(stderr, "allreduce_bench: unknown option %s (see the source's head)\n", a);
            cz_comm_finalize(d);
            return 2;
        }
    }
    if (B.reps < 1 || B.reps > 64) B.reps = 5;
    size_t sizes[64];
    int ns = 0;
    if (one)
        sizes[ns++] = one;
    else
        for (double b = min_mib > 0 ? min_mib * 1048576 : 4096;
             b <= max_mib * 1048576 * 1.0001 && ns < 64; b *= factor)
            sizes[ns++] = (size_t)(b / sizeof(float));
    if (model_shape) {
        int rc = d->rank == 0 ? model_only(&B, model_shape, sizes, ns) : 0;
        MPI_T_finalize();
        cz_comm_finalize(d);
        return rc;
    }
    if (cz_host_layout_get(cz_comm_mpi(d), &B.hosts, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        MPI_Abort(cz_comm_mpi(d), 1);
    }
    int p = d->size;
    if (B.topo.torus && B.topo.tx * B.topo.ty != B.hosts.n_hosts) {
        if (d->rank == 0)
            fprintf(stderr, "--topology %dx%d: the job has %d hosts\n", B.topo.tx, B.topo.ty,
                    B.hosts.n_hosts);
        MPI_Abort(cz_comm_mpi(d), 2);
    }
    if (d->rank == 0)
        printf("%d ranks on %d hosts (%d per host); busbw = 2(p-1)/p * bytes / time\n", p,
               B.hosts.n_hosts, B.hosts.ranks_per_host);
    calibrate(&B, !have_net, !have_shm);
    if (B.grid_x <= 0)
        for (int x = 1; x * x <= p; x++)
            if (p % x == 0) B.grid_x = x;
    if (has_algo(algos, "ring")) add_own(&B, CZ_ALLREDUCE_RING);
    if (has_algo(algos, "hierarchical") && B.hosts.n_hosts > 1 && B.hosts.ranks_per_host > 1)
        add_own(&B, CZ_ALLREDUCE_HIERARCHICAL);
    if (has_algo(algos, "torus2d") && B.grid_x > 1 && B.grid_x < p)
        add_own(&B, CZ_ALLREDUCE_TORUS2D);
    if (has_algo(algos, "mpi")) add_forced(&B, "mpi", -1);
    if (has_algo(algos, "mpi") || has_algo(algos, "mpi_ring") ||
        has_algo(algos, "mpi_rabenseifner")) {
        if (get_cvar("coll_tuned_use_dynamic_rules") > 0) {
            if (has_algo(algos, "mpi") || has_algo(algos, "mpi_ring"))
                add_forced(&B, "mpi_ring", 4);
            if (has_algo(algos, "mpi") || has_algo(algos, "mpi_rabenseifner"))
                add_forced(&B, "mpi_rabenseifner", 6);
        } else if (d->rank == 0) {
            printf("# mpi_ring, mpi_rabenseifner: run with --mca coll_tuned_use_dynamic_rules 1\n");
        }
    }
    if (d->rank == 0) {
        printf(
            "# model: between hosts %.1f us + bytes / %.3f Gbit/s, inside %.1f us + bytes / %.2f "
            "GB/s, %s\n",
            B.net.alpha_net * 1e6, 8e-9 / B.net.beta_net, B.net.alpha_shm * 1e6,
            1e-9 / B.net.beta_shm, B.topo.torus ? "torus" : "star");
        char col[64];
        printf("%12s", "bytes");
        for (int k = 0; k < B.n_algos; k++) {
            snprintf(col, sizeof col, "%s_ms", B.a[k].name);
            printf(" %12s", col);
            snprintf(col, sizeof col, "%s_GB/s", B.a[k].name);
            printf(" %12s", col);
        }
        for (int k = 0; k < B.n_algos; k++) {
            if (!B.a[k].own) continue;
            snprintf(col, sizeof col, "%s_model_ms", B.a[k].name);
            printf(" %12s", col);
            snprintf(col, sizeof col, "%s_x", B.a[k].name);
            printf(" %8s", col);
        }
        printf(" %12s %12s %10s %8s %s\n", "bound_ms", "bound_GB/s", "best/bound", "best/mpi",
               "auto");
    }
    size_t max_n = 0;
    for (int k = 0; k < ns; k++) max_n = sizes[k] > max_n ? sizes[k] : max_n;
    float *buf = cz_alloc((max_n + 1) * sizeof(float), &err);
    if (!buf) MPI_Abort(cz_comm_mpi(d), 1);
    for (int s = 0; s < ns; s++) {
        size_t n = sizes[s], bytes = n * sizeof(float);
        int iters = bytes < (1 << 20) ? 20 : bytes < (16 << 20) ? 3 : 1;
        for (int rep = 0; rep < B.reps; rep++)
            for (int k = 0; k < B.n_algos; k++) {
                for (size_t i = 0; i < n; i++) buf[i] = 1e-3f * (float)(i % 1000);
                B.a[k].t[rep] = time_one(&B, &B.a[k], buf, n, iters);
            }
        if (d->rank != 0) continue;
        double f = p > 1 ? 2.0 * (p - 1) / p * (double)bytes / 1e9 : 0;
        double t[MAX_ALGOS], best_own = 1e30, best_mpi = 1e30;
        printf("%12zu", bytes);
        for (int k = 0; k < B.n_algos; k++) {
            t[k] = cz_median(B.a[k].t, B.reps);
            printf(" %12.3f %12.3f", t[k] * 1e3, f / t[k]);
            if (!B.a[k].own)
                best_mpi = t[k] < best_mpi ? t[k] : best_mpi;
            else
                best_own = t[k] < best_own ? t[k] : best_own;
        }
        for (int k = 0; k < B.n_algos; k++) {
            if (!B.a[k].own) continue;
            double m = cz_net_allreduce_time(&B.net, &B.topo, &B.hosts, B.a[k].model, B.grid_x,
                                             (double)bytes);
            printf(" %12.3f %8.2f", m * 1e3, t[k] / m);
        }
        double bound = cz_model_bound(&B.net, &B.hosts, (double)bytes);
        char pick[48];
        printf(" %12.3f %12.3f %10.2f %8.2f %s\n", bound * 1e3, f / bound, bound / best_own,
               best_mpi < 1e30 ? best_mpi / best_own : NAN,
               auto_pick(&B, (double)bytes, pick, sizeof pick));
        fflush(stdout);
    }
    cz_free(buf);
    if (d->rank == 0) {
        printf("# machine CPU while each algorithm ran (all sizes, %ld cores, /proc/stat), %% of "
               "the cores' time: user, system, irq+softirq, steal, idle\n",
               sysconf(_SC_NPROCESSORS_ONLN));
        for (int k = 0; k < B.n_algos; k++) {
            const double *c = B.a[k].cpu;
            double all = 0;
            for (int j = 0; j < CPU_KINDS; j++) all += c[j];
            if (all > 0)
                printf("# cpu %-16s user %5.1f  system %5.1f  softirq %5.1f  steal %5.1f  idle "
                       "%5.1f  (%.1f core-s)\n",
                       B.a[k].name, 100 * c[0] / all, 100 * c[1] / all, 100 * c[2] / all,
                       100 * c[3] / all, 100 * c[4] / all, all);
        }
    }
    for (int k = 0; k < B.n_algos; k++) {
        cz_coll_free(B.a[k].coll);
        if (B.a[k].forced != MPI_COMM_NULL && B.a[k].forced != 0) MPI_Comm_free(&B.a[k].forced);
    }
    if (!one && do_overlap) overlap(d, (size_t)4 << 20, 2.0, 0.05);
    cz_host_layout_free(&B.hosts);
    MPI_T_finalize();
    cz_comm_finalize(d);
    return 0;
}
