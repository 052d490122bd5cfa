/* cloze-plan: how fast a training configuration runs on 1 ... 512 hosts,
 * and what to set (include/cloze/plan.h); `calibrate` measures a cluster's
 * network into a file that cloze-train (dist.cluster_file) and the plan
 * read. A thin main: arguments -> config, cluster, compute rate -> rows. */
#include "cloze/comm.h"
#include "cloze/config.h"
#include "cloze/core.h"
#include "cloze/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OVERRIDES 256
#define MAX_HOSTS 64

static void usage(FILE *out) {
    fprintf(out,
            "usage: cloze-plan CONFIG [--set section.key=value]... [options]\n"
            "       mpirun ... cloze-plan calibrate --out FILE [--seconds S]\n"
            "\n"
            "Predicts one optimizer step of the training configuration CONFIG (a\n"
            "libconfig file, as for cloze-train) on 1, 2, 4, ... 512 hosts with the same\n"
            "work per rank (weak scaling): compute, the gradient all-reduce of each\n"
            "algorithm (ring, hierarchical, torus2d) with the part backward hides (from\n"
            "when each bucket is final in backward), the optimizer update, the weights'\n"
            "all-gather, exposed communication, memory per rank, tokens/s, efficiency\n"
            "against one host, and the algorithm and bucket size it would choose.\n"
            "\n"
            "cluster (default: CONFIG's dist.cluster_file, else dist.link_gbit and\n"
            "dist.link_latency_us):\n"
            "  --hosts LIST          host counts, e.g. 2,4,8 (default 1,2,4,...,512)\n"
            "  --ranks-per-host R    ranks on each host (default 1)\n"
            "  --cluster-file FILE   a calibration written by `cloze-plan calibrate`\n"
            "  --link-gbit G         each host's link, Gbit/s each way\n"
            "  --latency-us L        one message between hosts, us\n"
            "  --shm-gbyte B         copies inside a host, GB/s per host (default 10)\n"
            "  --shm-latency-us A    one message inside a host, us (default 2)\n"
            "compute per rank (one of; default: --probe):\n"
            "  --gflops G            FLOPs per second of forward + backward, in GFLOP/s\n"
            "  --compute-from FILE   a run's metrics.jsonl: its measured compute, backward\n"
            "                        and update times (its run directory's config.cfg is read\n"
            "                        when present, else CONFIG describes that run)\n"
            "  --from-ranks P        ranks of that run (default: its global batch / micro-batch)\n"
            "  --probe               measure here: one sequence forward + backward and one\n"
            "                        optimizer update (--threads N, default 1)\n"
            "  --backward-share S    with --gflops: backward's share of compute (default: FLOPs')\n"
            "  --optim-ns N          with --gflops: update time per parameter (default: probed)\n"
            "output:\n"
            "  --accum A             micro-batches per rank per step (default 1)\n"
            "  --json                one JSON object per host count instead of the table\n"
            "  --help                this text\n"
            "\n"
            "calibrate (under mpirun, at least one rank on each of 2 hosts for the network\n"
            "between hosts, 2 ranks on a host for inside): measures latency (8-byte\n"
            "ping-pong) and bandwidth (streams of a few sizes, every host sending at once,\n"
            "alpha and beta fitted) within about S seconds (default 5) and writes FILE.\n"
            "Seconds in the table are per optimizer step.\n");
}

static int calibrate_main(int argc, char **argv) {
    const char *out = NULL;
    double seconds = 5;
    FILE *errs = cz_launch_rank() == 0 ? stderr : NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds >= 0.1 && seconds <= 600)) {
                if (errs)
                    fprintf(errs, "cloze-plan calibrate: --seconds %s: want 0.1 .. 600\n", argv[i]);
                return cz_comm_end_early(&argc, &argv, 2);
            }
        } else {
            if (errs)
                fprintf(errs,
                        "cloze-plan calibrate: unknown or incomplete option '%s' (try "
                        "--help)\n",
                        argv[i]);
            return cz_comm_end_early(&argc, &argv, 2);
        }
    }
    if (!out) {
        if (errs) fprintf(errs, "cloze-plan calibrate: --out FILE is required\n");
        return cz_comm_end_early(&argc, &argv, 2);
    }
    cz_comm c;
    cz_error err;
    if (cz_comm_init(&c, &argc, &argv, &err) != 0) {
        fprintf(stderr, "cloze-plan calibrate: %s\n", err.msg);
        return 1;
    }
    cz_log_setup(c.rank, CZ_LOG_INFO);
    cz_net_model m;
    cz_net_model_default(&m);
    int hosts = 0, rph = 0;
    double t0 = cz_now();
    int rc = cz_comm_calibrate(&c, seconds, &m, &hosts, &rph, &err);
    if (rc == 0 && c.rank == 0) rc = cz_net_model_write(out, &m, hosts, rph, &err);
    rc = cz_comm_share_verdict(&c, 0, rc, &err);
    if (rc == 0 && c.rank == 0)
        printf("%s: %d host(s) x %d rank(s) in %.2f s: between hosts alpha %.1f us, %.4g "
               "Gbit/s per link%s; inside a host alpha %.1f us, %.3g GB/s%s\n",
               out, hosts, rph, cz_now() - t0, m.alpha_net * 1e6, 8e-9 / m.beta_net,
               hosts > 1 ? "" : " (default: one host)", m.alpha_shm * 1e6, 1e-9 / m.beta_shm,
               rph > 1 ? "" : " (default: one rank per host)");
    else if (rc != 0 && c.rank == 0)
        fprintf(stderr, "cloze-plan calibrate: %s\n", err.msg);
    cz_comm_finalize(&c);
    return rc == 0 ? 0 : 1;
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *v) {
    char *end;
    *v = strtod(s, &end);
    if (end == s || *end || !(*v >= lo && *v <= hi)) {
        fprintf(stderr, "cloze-plan: %s %s: want a number in [%g, %g]\n", opt, s, lo, hi);
        return -1;
    }
    return 0;
}

static int parse_hosts(const char *s, int *h, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1000000 || *n == MAX_HOSTS || (*end && *end != ',')) {
            fprintf(stderr,
                    "cloze-plan: --hosts %s: want a comma-separated list of host "
                    "counts >= 1 (at most %d)\n",
                    s, MAX_HOSTS);
            return -1;
        }
        h[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n > 0 ? 0 : -1;
}

static const char *algo_name(cz_allreduce_algo a) {
    static const char *names[] = {"ring", "mpi", "hierarchical", "torus2d", "auto"};
    return (int)a >= 0 && (int)a < 5 ? names[a] : "?";
}

static void print_time(char *buf, size_t cap, double t, double exposed) {
    if (!isfinite(t))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.3f (%.3f)", t, exposed);
}

static void print_table(const cz_config *cfg, const cz_plan_cluster *cl, const cz_plan_row *rows,
                        int n) {
    printf("# %s x%d layers, hidden %d, micro-batch %d x seq %d per rank, accumulation %d, "
           "dist.allreduce %s, dist.bucket_mb %g, dist.placement %s\n",
           cfg->model.arch == CZ_ARCH_BERT ? "BERT" : "GPT", cfg->model.layers, cfg->model.hidden,
           cfg->train.micro_batch, cfg->data.seq, rows[0].accum, algo_name(cfg->dist.allreduce),
           cfg->dist.bucket_mb,
           cfg->optim.placement == 0   ? "coordinator"
           : cfg->optim.placement == 1 ? "sharded"
                                       : "replicated");
    printf("# network: between hosts alpha %.1f us, %.4g Gbit/s per link; inside a host alpha "
           "%.1f us, %.3g GB/s; %d rank(s) per host\n",
           cl->net.alpha_net * 1e6, 8e-9 / cl->net.beta_net, cl->net.alpha_shm * 1e6,
           1e-9 / cl->net.beta_shm, cl->ranks_per_host);
    printf("# compute per rank: %.4g GFLOP/s, backward %.0f %% of it, update %.3g ns per "
           "parameter (%s)\n",
           cl->compute.gflops, 100 * cl->compute.backward_share, cl->compute.optim_ns,
           cl->compute.source);
    printf("# seconds per step; all-reduce columns: reduction time (exposed after backward); "
           "step: %s; fp32/exact: the step with fp32 sums and with dist.exact's int64 sums "
           "(2x the bytes, after backward), exact/fp32 their ratio\n",
           cfg->dist.exact ? "exact sums (dist.exact)" : "fp32 sums");
    printf("%6s %6s %9s %17s %17s %17s %8s %8s %8s %9s %9s %9s %7s %9s %11s %5s  %s\n", "hosts",
           "ranks", "compute", "ring", "hierarchical", "torus2d", "optim", "gather", "exposed",
           "step", "fp32", "exact", "ratio", "mem_MiB", "tokens/s", "eff", "choice (step s)");
    for (int i = 0; i < n; i++) {
        const cz_plan_row *r = &rows[i];
        char t[3][40];
        for (int k = 0; k < CZ_PLAN_ALGOS; k++)
            print_time(t[k], sizeof t[k], r->reduce[k], r->exposed[k]);
        int k = r->algo == CZ_ALLREDUCE_HIERARCHICAL ? CZ_PLAN_HIER
                : r->algo == CZ_ALLREDUCE_TORUS2D    ? CZ_PLAN_TORUS
                                                     : CZ_PLAN_RING;
        printf("%6d %6d %9.3f %17s %17s %17s %8.3f %8.3f %8.3f %9.3f %9.3f %9.3f %7.3f %9.0f "
               "%11.0f %5.2f  %s %g MiB (%.3f)\n",
               r->hosts, r->ranks, r->compute, t[0], t[1], t[2], r->optim, r->gather,
               r->ranks > 1 ? r->exposed[k] : 0.0, r->step, r->default_step, r->exact_step,
               r->exact_step / r->default_step, r->mem_mib, r->tokens_per_s, r->efficiency,
               algo_name(r->best_algo), r->best_bucket_mb, r->best_step);
    }
}

static void json_time(const char *key, double v) {
    if (isfinite(v))
        printf(",\"%s\":%.9g", key, v);
    else
        printf(",\"%s\":null", key);
}

static void print_json(const cz_plan_row *rows, int n) {
    static const char *keys[CZ_PLAN_ALGOS] = {"ring", "hierarchical", "torus2d"};
    for (int i = 0; i < n; i++) {
        const cz_plan_row *r = &rows[i];
        int k = r->algo == CZ_ALLREDUCE_HIERARCHICAL ? CZ_PLAN_HIER
                : r->algo == CZ_ALLREDUCE_TORUS2D    ? CZ_PLAN_TORUS
                                                     : CZ_PLAN_RING;
        printf("{\"hosts\":%d,\"ranks\":%d,\"global_batch\":%d", r->hosts, r->ranks,
               r->global_batch);
        json_time("compute", r->compute);
        json_time("backward", r->backward);
        for (int a = 0; a < CZ_PLAN_ALGOS; a++) {
            char key[40];
            snprintf(key, sizeof key, "%s_reduce", keys[a]);
            json_time(key, r->reduce[a]);
            snprintf(key, sizeof key, "%s_exposed", keys[a]);
            json_time(key, r->exposed[a]);
        }
        json_time("optim", r->optim);
        json_time("gather", r->gather);
        json_time("control", r->control);
        printf(",\"algo\":\"%s\"", algo_name(r->algo));
        json_time("exposed", r->ranks > 1 ? r->exposed[k] : 0.0);
        json_time("step", r->step);
        json_time("default_step", r->default_step);
        json_time("exact_step", r->exact_step);
        json_time("exact_exposed", r->exact_exposed);
        json_time("tokens_per_s", r->tokens_per_s);
        json_time("efficiency", r->efficiency);
        json_time("mem_mib", r->mem_mib);
        printf(",\"best_algo\":\"%s\",\"best_bucket_mb\":%g", algo_name(r->best_algo),
               r->best_bucket_mb);
        json_time("best_step", r->best_step);
        printf("}\n");
    }
}

/* RUN_DIR/config.cfg beside a metrics.jsonl, when there is one. */
static int run_config(const char *metrics, cz_config *out, int *found, cz_error *err) {
    char dir[CZ_PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", metrics);
    char *slash = strrchr(dir, '/');
    if (slash)
        strcpy(slash + 1, "config.cfg");
    else
        snprintf(dir, sizeof dir, "config.cfg");
    FILE *f = fopen(dir, "r");
    *found = f != NULL;
    if (!f) return 0;
    fclose(f);
    return cz_config_load(out, dir, NULL, 0, err);
}

/* The command line of a plan (usage). */
typedef struct plan_args {
    const char *config_path, *overrides[MAX_OVERRIDES], *cluster_file, *compute_from;
    int n_overrides, hosts[MAX_HOSTS], n_hosts, json, probe;
    double rph, link, lat, shm_gb, shm_lat, gflops, bshare, optim_ns, from_ranks, threads, accum;
} plan_args;

/* An option that takes a number in a range: 1 when opt is none of them,
 * else 0, or -1 when s is not such a number (said). */
static int number_option(plan_args *a, const char *opt, const char *s) {
    const struct {
        const char *name;
        double lo, hi, *v;
    } nums[] = {{"--ranks-per-host", 1, 4096, &a->rph},
                {"--link-gbit", 1e-6, 1e6, &a->link},
                {"--latency-us", 0, 1e6, &a->lat},
                {"--shm-gbyte", 1e-6, 1e6, &a->shm_gb},
                {"--shm-latency-us", 0, 1e6, &a->shm_lat},
                {"--gflops", 1e-6, 1e9, &a->gflops},
                {"--backward-share", 0.01, 0.99, &a->bshare},
                {"--optim-ns", 0, 1e6, &a->optim_ns},
                {"--from-ranks", 1, 1e6, &a->from_ranks},
                {"--threads", 1, 1024, &a->threads},
                {"--accum", 1, 1e6, &a->accum}};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
        if (!strcmp(opt, nums[k].name)) return parse_num(opt, s, nums[k].lo, nums[k].hi, nums[k].v);
    return 1;
}

/* -1 to go on, or the exit status (--help: 0, a usage error: 2). */
static int parse_args(int argc, char **argv, plan_args *a) {
    memset(a, 0, sizeof *a);
    a->rph = a->threads = a->accum = 1;
    a->lat = a->shm_lat = -1;
    for (int h = 1; h <= 512; h *= 2) a->hosts[a->n_hosts++] = h;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int more = i + 1 < argc, r;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o, "--set") && more) {
            if (a->n_overrides == MAX_OVERRIDES) {
                fprintf(stderr, "cloze-plan: more than %d --set options\n", MAX_OVERRIDES);
                return 2;
            }
            a->overrides[a->n_overrides++] = argv[++i];
        } else if (!strcmp(o, "--hosts") && more) {
            if (parse_hosts(argv[++i], a->hosts, &a->n_hosts) != 0) return 2;
        } else if (more && (r = number_option(a, o, argv[i + 1])) <= 0) {
            if (r < 0) return 2;
            i++;
        } else if (!strcmp(o, "--cluster-file") && more) {
            a->cluster_file = argv[++i];
        } else if (!strcmp(o, "--compute-from") && more) {
            a->compute_from = argv[++i];
        } else if (!strcmp(o, "--probe")) {
            a->probe = 1;
        } else if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (o[0] == '-') {
            fprintf(stderr, "cloze-plan: unknown or incomplete option '%s' (try --help)\n", o);
            return 2;
        } else if (!a->config_path) {
            a->config_path = o;
        } else {
            fprintf(stderr, "cloze-plan: one CONFIG only ('%s' and '%s')\n", a->config_path, o);
            return 2;
        }
    }
    if (!a->config_path) {
        fprintf(stderr, "cloze-plan: CONFIG is required (try --help)\n");
        return 2;
    }
    if ((a->gflops > 0) + (a->compute_from != NULL) + a->probe > 1) {
        fprintf(stderr, "cloze-plan: give one of --gflops, --compute-from, --probe\n");
        return 2;
    }
    return -1;
}

/* The cluster's network: --cluster-file (or dist.cluster_file), else the
 * dist.* keys; then the options that override a figure. */
static int cluster_of(const plan_args *a, const cz_config *cfg, cz_plan_cluster *cl,
                      cz_error *err) {
    memset(cl, 0, sizeof *cl);
    cl->ranks_per_host = (int)a->rph;
    const char *cluster_file = a->cluster_file;
    if (!cluster_file && cfg->dist.cluster_file[0]) cluster_file = cfg->dist.cluster_file;
    int ch = 0, crph = 0;
    if (cluster_file) {
        if (cz_net_model_read(cluster_file, &cl->net, &ch, &crph, err) != 0) return -1;
    } else {
        cz_comm_config_net(&cfg->dist, &cl->net);
    }
    if (a->link > 0) cl->net.beta_net = 8.0 / (a->link * 1e9);
    if (a->lat >= 0) cl->net.alpha_net = a->lat * 1e-6;
    if (a->shm_gb > 0) cl->net.beta_shm = 1.0 / (a->shm_gb * 1e9);
    if (a->shm_lat >= 0) cl->net.alpha_shm = a->shm_lat * 1e-6;
    return 0;
}

/* The compute rate: from a run's metrics.jsonl, given, or probed here. */
static int compute_of(const plan_args *a, const cz_config *cfg, cz_plan_cluster *cl,
                      cz_error *err) {
    int rc = 0;
    if (a->compute_from) {
        cz_config run = *cfg;
        int found = 0;
        rc = run_config(a->compute_from, &run, &found, err);
        int ranks =
            a->from_ranks > 0 ? (int)a->from_ranks : run.train.global_batch / run.train.micro_batch;
        if (rc == 0)
            rc = cz_plan_compute_from_metrics(&run, a->compute_from, ranks, &cl->compute, err);
    } else if (a->gflops > 0) {
        rc = cz_plan_compute_given(cfg, a->gflops, &cl->compute, err);
    } else {
        fprintf(stderr, "cloze-plan: measuring this machine's compute rate (one sequence; "
                        "--gflops or --compute-from skip it)...\n");
        rc = cz_plan_compute_probe(cfg, (int)a->threads, &cl->compute, err);
    }
    if (rc == 0 && a->bshare > 0) cl->compute.backward_share = a->bshare;
    if (rc == 0 && a->optim_ns > 0) cl->compute.optim_ns = a->optim_ns;
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "calibrate")) {
        for (int i = 2; i < argc; i++)
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                usage(stdout);
                return 0;
            }
        return calibrate_main(argc, argv);
    }
    static plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    cz_config cfg;
    cz_plan_cluster cl;
    cz_error err;
    if (cz_config_load(&cfg, a.config_path, a.overrides, a.n_overrides, &err) != 0 ||
        cluster_of(&a, &cfg, &cl, &err) != 0 || compute_of(&a, &cfg, &cl, &err) != 0) {
        fprintf(stderr, "cloze-plan: %s\n", err.msg);
        return 1;
    }
    cz_plan_row rows[MAX_HOSTS];
    double one = 0;
    for (int i = 0; i < a.n_hosts; i++) {
        if (cz_plan_row_make(&cfg, &cl, a.hosts[i], (int)a.accum, one, &rows[i], &err) != 0) {
            fprintf(stderr, "cloze-plan: %s\n", err.msg);
            return 1;
        }
        if (a.hosts[i] == 1) one = rows[i].tokens_per_s;
    }
    if (a.json)
        print_json(rows, a.n_hosts);
    else
        print_table(&cfg, &cl, rows, a.n_hosts);
    return 0;
}
