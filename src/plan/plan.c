/* plan: the step time of a configuration on N hosts (include/cloze/plan.h;
 * docs/distributed.md, "Planning a cluster"). */
#include "cloze/plan.h"

#include "cloze/json.h"
#include "cloze/kernels.h"
#include "cloze/model.h"
#include "cloze/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* distinct_tokens below: Heaps' law constants */
#define HEAPS_K 0.78
#define HEAPS_B 0.815

/* The gradient sync's buckets, as cz_grad_sync_create cuts them: the one
 * place the planner learns the layout, so a change of the cut in comm
 * reaches the plan. */
static void sync_layout(cz_bucket_layout *l, size_t n, double bucket_mb, int p) {
    cz_comm_config c = {.bucket_mb = bucket_mb}; /* 0: sized from the model */
    cz_bucket_layout_make(l, n, cz_grad_bucket_bytes(&c, n), p);
}

/* FLOPs of one sequence: forward (cz_model_forward_flops) and backward (the
 * stages'), and the stages themselves. */
typedef struct plan_model {
    size_t n;
    double fwd, bwd;
    cz_grad_stage *st;
    int n_st;
    int seq, max_pred, micro;
} plan_model;

static int plan_model_make(const cz_config *cfg, plan_model *pm, cz_error *err) {
    memset(pm, 0, sizeof *pm);
    pm->seq = cfg->data.seq;
    pm->max_pred = cfg->model.arch == CZ_ARCH_GPT ? 0 : cfg->data.max_pred;
    pm->micro = cfg->train.micro_batch;
    cz_model_param_counts pc;
    if (cz_model_count_params(&cfg->model, &pc, err) != 0) return -1;
    pm->n = pc.total;
    int max = cfg->model.layers + 2;
    pm->st = cz_alloc(sizeof *pm->st * (size_t)max, err);
    if (!pm->st) return -1;
    pm->n_st = cz_model_grad_stages(&cfg->model, pm->seq, pm->max_pred, pm->st, max, err);
    if (pm->n_st < 0) {
        cz_free(pm->st);
        return -1;
    }
    pm->fwd = cz_model_forward_flops(&cfg->model, pm->seq, pm->max_pred);
    for (int i = 0; i < pm->n_st; i++) pm->bwd += pm->st[i].flops;
    return 0;
}

/* Small allreduces of a step (the step's statistics, the stop flag, the
 * sharded norm): recursive doubling, ceil(log2) rounds per level, both ways. */
static double control_seconds(const cz_net_model *m, int hosts, int rph) {
    double one =
        2.0 * (ceil(log2((double)hosts)) * m->alpha_net + ceil(log2((double)rph)) * m->alpha_shm);
    return 3.0 * one;
}

/* Distinct ids among n tokens of text over a vocabulary of v: the word
 * embedding rows the ranks' union holds after backward (cz_grad_sync_rows).
 * Heaps' law, k n^b (Heaps 1978), capped by n and v; k and b fitted to
 * the union counts of training runs (docs/distributed-design.md, "The
 * word embedding's rows"). */
static double distinct_tokens(double n, int v) {
    double u = HEAPS_K * pow(n, HEAPS_B);
    if (u > n) u = n;
    return u < v ? u : v;
}

typedef struct sync_cost {
    double reduce, exposed, gather;
} sync_cost;

/* The gradient sync of one step with `algo` and buckets of bucket_mb MiB:
 * stage i of backward ends at backward * (FLOPs so far / all). */
static sync_cost sync_cost_of(const cz_config *cfg, const cz_plan_cluster *cl, const plan_model *pm,
                              int hosts, cz_allreduce_algo algo, int gx, double bucket_mb,
                              double backward) {
    int rph = cl->ranks_per_host, p = hosts * rph;
    double ready[pm->n_st], at[pm->n_st], acc = 0;
    for (int i = 0; i < pm->n_st; i++) {
        acc += pm->st[i].flops;
        ready[i] = (double)pm->st[i].end;
        /* dist.overlap = false: every bucket starts after backward */
        at[i] = pm->bwd > 0 && cfg->dist.overlap ? backward * acc / pm->bwd : backward;
    }
    cz_bucket_layout l;
    sync_layout(&l, pm->n, bucket_mb, p);
    cz_sync_prediction pr;
    int V = cfg->model.vocab_size;
    cz_rows_tail rows = {p > 1 ? distinct_tokens((double)p * pm->micro * pm->seq, V) : 0, V,
                         cfg->model.hidden};
    cz_sync_scenario sc = {.net = &cl->net,
                           .hosts = hosts,
                           .ranks_per_host = rph,
                           .algo = algo,
                           .grid_x = gx,
                           .layout = &l,
                           .order = CZ_GRAD_ASCENDING,
                           .mode = cz_placement_sync_mode(cfg->optim.placement),
                           .ready = ready,
                           .ready_t = at,
                           .n_ready = pm->n_st,
                           .backward_s = backward,
                           .rows = rows};
    cz_sync_predict(&sc, &pr);
    sync_cost c = {pr.total, pr.exposed, pr.gather};
    if (cfg->optim.placement == CZ_PLACE_REPLICATED) c.gather = 0;
    return c;
}

/* dist.exact: the step's micro-batch gradients summed as int64 (8 bytes a
 * value, twice fp32's), in one all-reduce of the whole buffer once backward
 * has ended (comm's exact sums: nothing overlaps), so all of it is
 * exposed; the weights come back as the placement sends them. The
 * conversions to and from int64 (a pass over the gradient per micro-batch)
 * are not priced. */
static double exact_exposed(const cz_config *cfg, const cz_plan_cluster *cl, const plan_model *pm,
                            int hosts, cz_allreduce_algo algo, int gx, double backward) {
    int rph = cl->ranks_per_host, p = hosts * rph;
    if (p == 1) return 0;
    size_t n2 = 2 * pm->n; /* int64 as two floats' bytes */
    cz_bucket_layout l;
    sync_layout(&l, n2, (double)n2 * 4 / 1048576.0 + 1, p); /* one bucket */
    double ready = (double)n2, at = backward;
    cz_sync_scenario sc = {.net = &cl->net,
                           .hosts = hosts,
                           .ranks_per_host = rph,
                           .algo = algo,
                           .grid_x = gx,
                           .layout = &l,
                           .order = CZ_GRAD_ASCENDING,
                           .mode = CZ_SYNC_ALLREDUCE,
                           .ready = &ready,
                           .ready_t = &at,
                           .n_ready = 1,
                           .backward_s = backward,
                           .rows = (cz_rows_tail){0, cfg->model.vocab_size, cfg->model.hidden}};
    cz_sync_prediction pr;
    cz_sync_predict(&sc, &pr);
    return pr.exposed;
}

static const cz_allreduce_algo plan_algo[CZ_PLAN_ALGOS] = {
    CZ_ALLREDUCE_RING, CZ_ALLREDUCE_HIERARCHICAL, CZ_ALLREDUCE_TORUS2D};

static int algo_applies(int k, int hosts, int rph) {
    int p = hosts * rph;
    if (k == CZ_PLAN_HIER) return hosts > 1 && rph > 1;
    if (k == CZ_PLAN_TORUS) return p >= 4 && cz_comm_grid_square(p) > 1;
    return p > 1;
}

/* Activations kept for backward per sequence, in floats: per layer the
 * input, q/k/v, context, attention output and its LayerNorm input and
 * output (8 T H), the FFN's input and GELU output (2 T I) and the attention
 * probabilities before and after dropout (2 A T^2); one set with
 * recomputation plus every layer's input. An estimate (the model's own
 * plan is logged by cloze-train: "memory plan per rank"). */
static double activation_floats(const cz_model_config *m, int seq) {
    double T = seq, H = m->hidden, I = m->intermediate, A = m->heads;
    double layer = 8 * T * H + 2 * T * I + 2 * A * T * T;
    double sets = m->recompute == CZ_RECOMPUTE_LAYERS ? 1 : m->layers;
    return sets * layer + (m->layers + 1) * T * H + 2.0 * T * m->vocab_size / 8;
}

int cz_plan_row_make(const cz_config *cfg, const cz_plan_cluster *cl, int hosts, int accum,
                     double one_host_tokens_per_s, cz_plan_row *row, cz_error *err) {
    memset(row, 0, sizeof *row);
    if (hosts < 1 || cl->ranks_per_host < 1 || accum < 1)
        return cz_fail(err, "plan: %d host(s) x %d rank(s), accumulation %d", hosts,
                       cl->ranks_per_host, accum);
    if (!(cl->compute.gflops > 0))
        return cz_fail(err, "plan: no compute rate (give --gflops, --compute-from or probe)");
    plan_model pm;
    if (plan_model_make(cfg, &pm, err) != 0) return -1;
    int rph = cl->ranks_per_host, p = hosts * rph;
    row->hosts = hosts;
    row->ranks = p;
    row->accum = accum;
    row->global_batch = pm.micro * accum * p;
    double micro_s = pm.micro * (pm.fwd + pm.bwd) / (cl->compute.gflops * 1e9);
    row->compute = accum * micro_s;
    row->backward = micro_s * cl->compute.backward_share;
    row->grid_x = cz_comm_grid_square(p);
    cz_placement place = cfg->optim.placement;
    double updated = place == CZ_PLACE_SHARDED ? (double)pm.n / p : (double)pm.n;
    row->optim = updated * cl->compute.optim_ns * 1e-9;
    row->control = p > 1 ? control_seconds(&cl->net, hosts, rph) : 0;
    for (int k = 0; k < CZ_PLAN_ALGOS; k++) {
        row->reduce[k] = row->exposed[k] = INFINITY;
        if (!algo_applies(k, hosts, rph)) continue;
        sync_cost c =
            sync_cost_of(cfg, cl, &pm, hosts, plan_algo[k], k == CZ_PLAN_TORUS ? row->grid_x : 0,
                         cfg->dist.bucket_mb, row->backward);
        row->reduce[k] = c.reduce;
        row->exposed[k] = c.exposed;
    }
    if (p == 1) row->reduce[CZ_PLAN_RING] = row->exposed[CZ_PLAN_RING] = 0;
    /* the configured algorithm; auto: what cz_grad_sync_create would pick */
    cz_allreduce_algo a = cfg->dist.allreduce;
    int gx = row->grid_x;
    if (a == CZ_ALLREDUCE_AUTO || a == CZ_ALLREDUCE_MPI) {
        cz_bucket_layout l;
        sync_layout(&l, pm.n, cfg->dist.bucket_mb, p);
        a = a == CZ_ALLREDUCE_MPI
                ? CZ_ALLREDUCE_RING
                : cz_net_choose(&cl->net, hosts, rph, (double)l.bucket * sizeof(float), &gx);
    }
    if (a == CZ_ALLREDUCE_TORUS2D && gx <= 1) gx = row->grid_x;
    row->algo = p > 1 ? a : CZ_ALLREDUCE_RING;
    sync_cost c = p > 1
                      ? sync_cost_of(cfg, cl, &pm, hosts, a, gx, cfg->dist.bucket_mb, row->backward)
                      : (sync_cost){0, 0, 0};
    row->gather = c.gather;
    row->step = row->compute + c.exposed + row->optim + c.gather + row->control;
    row->exact_exposed = exact_exposed(cfg, cl, &pm, hosts, row->algo, gx, row->backward);
    row->exact_step = row->compute + row->exact_exposed + row->optim + c.gather + row->control;
    double default_step = row->step;
    if (cfg->dist.exact) row->step = row->exact_step;
    /* the planner's choice: every algorithm that applies, bucket sizes from
     * 1 MiB up to one bucket */
    static const double buckets[] = {1, 2, 4, 8, 16, 25, 50, 100, 200, 0};
    /* (of the fp32 sums: exact sums do not depend on the buckets) */
    row->default_step = default_step;
    row->best_step = default_step;
    row->best_algo = row->algo;
    row->best_bucket_mb = cz_grad_bucket_bytes(&cfg->dist, pm.n) / 1048576.0;
    for (int k = 0; k < CZ_PLAN_ALGOS && p > 1; k++) {
        if (!algo_applies(k, hosts, rph)) continue;
        for (int b = 0; b < (int)(sizeof buckets / sizeof *buckets); b++) {
            double mb = buckets[b] > 0 ? buckets[b] : (double)pm.n * 4 / 1048576.0 + 1;
            sync_cost s = sync_cost_of(cfg, cl, &pm, hosts, plan_algo[k],
                                       k == CZ_PLAN_TORUS ? row->grid_x : 0, mb, row->backward);
            double t = row->compute + s.exposed + row->optim + s.gather + row->control;
            /* a later candidate must win by more than 1 % (auto's rule) */
            if (t < 0.99 * row->best_step) {
                row->best_step = t;
                row->best_algo = plan_algo[k];
                row->best_bucket_mb = mb;
            }
        }
    }
    double tokens = (double)row->global_batch * pm.seq;
    row->tokens_per_s = tokens / row->step;
    if (one_host_tokens_per_s <= 0 && hosts == 1) one_host_tokens_per_s = row->tokens_per_s;
    if (one_host_tokens_per_s <= 0) {
        cz_plan_row one;
        if (cz_plan_row_make(cfg, cl, 1, accum, 0, &one, err) != 0) {
            cz_free(pm.st);
            return -1;
        }
        one_host_tokens_per_s = one.tokens_per_s;
    }
    row->efficiency = row->tokens_per_s / (hosts * one_host_tokens_per_s);
    /* weights and gradients (fp32), Adam's two moments where this rank
     * keeps them (sharded: 1/p; coordinator: rank 0's whole set), the
     * micro-batch's activations */
    double moments = place == CZ_PLACE_SHARDED ? 8.0 * pm.n / p : 8.0 * pm.n;
    row->mem_mib =
        (8.0 * pm.n + moments + 4.0 * pm.micro * activation_floats(&cfg->model, pm.seq)) /
        1048576.0;
    cz_free(pm.st);
    return 0;
}

/* ---- the compute rate ---- */

int cz_plan_compute_from_metrics(const cz_config *cfg, const char *path, int ranks,
                                 cz_plan_compute *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f)
        return cz_fail(err, "%s: cannot open (--compute-from wants a run's metrics.jsonl)", path);
    enum { MAXS = 100000 };
    double *comp = malloc(MAXS * sizeof *comp), *bwd = malloc(MAXS * sizeof *bwd),
           *opt = malloc(MAXS * sizeof *opt);
    int n = 0, ln = 0, rc = 0, seen = 0;
    char line[8192];
    while (rc == 0 && comp && bwd && opt && n < MAXS && fgets(line, sizeof line, f)) {
        ln++;
        cz_json *j = NULL;
        if (cz_json_parse(line, strlen(line), &j, err) != 0) {
            rc = cz_fail_prefix(err, "%s:%d", path, ln);
            break;
        }
        double c = cz_json_get_number(j, "compute_seconds", -1);
        double b = cz_json_get_number(j, "backward_seconds", -1);
        double o = cz_json_get_number(j, "optim_seconds", -1);
        double g = cz_json_get_number(j, "gather_seconds", 0);
        if (cz_json_get(j, "step_seconds")) {
            seen++;
            if (c > 0 && b > 0 && o >= 0 && seen > 2) { /* steps 1-2: warm-up */
                comp[n] = c;
                bwd[n] = b;
                opt[n] = o - g > 0 ? o - g : 0;
                n++;
            }
        }
        cz_json_free(j);
    }
    fclose(f);
    if (rc == 0 && (!comp || !bwd || !opt)) rc = cz_fail(err, "plan: out of memory");
    if (rc == 0 && n == 0)
        rc = cz_fail(err,
                     "%s: no step after the first two has compute_seconds and "
                     "backward_seconds (a metrics.jsonl of cloze-train with at least 3 steps)",
                     path);
    plan_model pm;
    if (rc == 0) rc = plan_model_make(cfg, &pm, err);
    if (rc == 0) {
        double c = cz_median(comp, n), b = cz_median(bwd, n), o = cz_median(opt, n);
        int accum = cfg->train.global_batch / (cfg->train.micro_batch * ranks);
        if (accum < 1) accum = 1;
        double micro_s = c / accum;
        out->gflops = pm.micro * (pm.fwd + pm.bwd) / micro_s / 1e9;
        out->backward_share = b / micro_s;
        double updated =
            cfg->optim.placement == CZ_PLACE_SHARDED ? (double)pm.n / ranks : (double)pm.n;
        out->optim_ns = o / updated * 1e9;
        snprintf(out->source, sizeof out->source,
                 "%s: medians of %d steps: compute %.4g s, backward %.4g s, update %.4g s", path, n,
                 c, b, o);
        cz_free(pm.st);
    }
    free(comp);
    free(bwd);
    free(opt);
    return rc;
}

/* A synthetic sequence for the probe: tokens, segments and prediction
 * slots spread over the vocabulary (the time does not depend on values). */
typedef struct probe_batch {
    int32_t *tok, *seg, *pos, *lab, *nsp, *tgt;
    float *w;
    uint64_t *ids;
} probe_batch;

static int probe_model(const cz_config *cfg, int threads, double *fwd_bwd, double *bwd,
                       cz_error *err) {
    const cz_model_config *mc = &cfg->model;
    int T = cfg->data.seq, P = mc->arch == CZ_ARCH_GPT ? 0 : cfg->data.max_pred;
    cz_gemm_ctx *g = cz_model_gemm_setup(CZ_GEMM_AUTO, threads, mc->matmul_bf16, err);
    if (!g) return -1;
    cz_model *m = NULL;
    if (cz_model_create(&m, mc, 1, T, P > 0 ? P : 1, g, err) != 0) {
        cz_gemm_free(g);
        return -1;
    }
    cz_model_init_weights(m, 1);
    probe_batch pb = {0};
    pb.tok = calloc((size_t)T, 4), pb.seg = calloc((size_t)T, 4), pb.tgt = calloc((size_t)T, 4);
    pb.pos = calloc((size_t)P + 1, 4), pb.lab = calloc((size_t)P + 1, 4);
    pb.nsp = calloc(1, 4), pb.w = calloc((size_t)P + 1, 4), pb.ids = calloc(1, 8);
    int rc = pb.tok && pb.seg && pb.tgt && pb.pos && pb.lab && pb.nsp && pb.w && pb.ids
                 ? 0
                 : cz_fail(err, "plan: out of memory");
    for (int t = 0; rc == 0 && t < T; t++) {
        pb.tok[t] = (int32_t)((t * 7919) % mc->vocab_size);
        pb.tgt[t] = (int32_t)((t * 104729 + 1) % mc->vocab_size);
    }
    for (int k = 0; rc == 0 && k < P; k++) {
        pb.pos[k] = k * T / P;
        pb.lab[k] = (int32_t)((k * 31 + 5) % mc->vocab_size);
        pb.w[k] = 1;
    }
    cz_batch b = {.batch = 1,
                  .seq = T,
                  .tokens = pb.tok,
                  .max_pred = P,
                  .train = 1,
                  .seed = 1,
                  .sample_ids = pb.ids};
    if (mc->arch == CZ_ARCH_BERT) {
        b.segments = pb.seg;
        b.mlm_positions = pb.pos;
        b.mlm_labels = pb.lab;
        b.mlm_weights = pb.w;
        b.nsp_labels = pb.nsp;
    } else {
        b.targets = pb.tgt;
    }
    for (int rep = 0; rc == 0 && rep < 2; rep++) {
        cz_losses l;
        double t0 = cz_now();
        rc = cz_model_forward(m, &b, &l, err);
        double t1 = cz_now();
        if (rc == 0) cz_model_backward(m, &b, 1.0f);
        double t2 = cz_now();
        *fwd_bwd = t2 - t0;
        *bwd = t2 - t1;
    }
    free(pb.tok), free(pb.seg), free(pb.tgt), free(pb.pos), free(pb.lab), free(pb.nsp);
    free(pb.w), free(pb.ids);
    cz_model_free(m);
    cz_gemm_free(g);
    return rc;
}

/* One AdamW update and the norm's sum of squares over 4 Mi floats (the
 * optimizer step's memory-bound part; its cost is per parameter). */
static double probe_optim_ns(void) {
    size_t n = (size_t)4 << 20;
    float *buf = calloc(4 * n, sizeof *buf);
    if (!buf) return 0;
    cz_param_range r = {0, n, 0};
    cz_adam_coef k = {1e-4f, 0.9f, 0.999f, 1e-6f, 0.01f, 1, 1, 1};
    double best = INFINITY; /* the best of 7: a busy machine only adds time */
    for (int rep = 0; rep < 7; rep++) {
        double t0 = cz_now();
        volatile double s = cz_optim_sumsq(buf + n, 1.0f, n);
        (void)s;
        cz_adamw_update(&k, &r, 1, buf, buf + n, buf + 2 * n, buf + 3 * n, 0, n);
        double t = cz_now() - t0;
        if (t < best) best = t;
    }
    free(buf);
    return best / (double)n * 1e9;
}

int cz_plan_compute_given(const cz_config *cfg, double gflops, cz_plan_compute *out,
                          cz_error *err) {
    memset(out, 0, sizeof *out);
    plan_model pm;
    if (plan_model_make(cfg, &pm, err) != 0) return -1;
    out->gflops = gflops;
    out->backward_share = pm.bwd / (pm.fwd + pm.bwd);
    out->optim_ns = probe_optim_ns();
    snprintf(out->source, sizeof out->source,
             "--gflops %g; backward's share from the FLOPs; optimizer probed here", gflops);
    cz_free(pm.st);
    return 0;
}

int cz_plan_compute_probe(const cz_config *cfg, int threads, cz_plan_compute *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    plan_model pm;
    if (plan_model_make(cfg, &pm, err) != 0) return -1;
    double fb = 0, b = 0;
    int rc = probe_model(cfg, threads, &fb, &b, err);
    if (rc == 0) {
        out->gflops = (pm.fwd + pm.bwd) / fb / 1e9;
        out->backward_share = b / fb;
        out->optim_ns = probe_optim_ns();
        snprintf(out->source, sizeof out->source,
                 "probe here: one sequence forward + backward in %.4g s on %d thread(s), "
                 "optimizer %.3g ns per parameter",
                 fb, threads, out->optim_ns);
    }
    cz_free(pm.st);
    return rc;
}
