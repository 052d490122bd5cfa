/* The step loop. See include/cloze/train.h for the flow of one step. */
#include "train_internal.h"

#include "cloze/cpu.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- set-up ---- */

/* This rank's allowed CPUs: its affinity mask, widened by the OpenMP
 * runtime's places. When OMP_PROC_BIND or OMP_PLACES is set (cloze-mpirun
 * sets OMP_PROC_BIND=close), libgomp builds its places from the process's
 * mask as it loads, before main, and binds the calling thread to the first
 * place: the main thread's mask then holds one place (one CPU) while the
 * team's threads run on every place. The places' union is the CPUs our
 * threads may run on; with no binding there are no places and the mask is
 * the whole answer (OpenMP 5.2, sections 6.4.6-6.4.8 and 18.3). */
static void allowed_cpus(cz_cpu_set *set) {
    cz_cpu_allowed(set);
    int places = omp_get_num_places();
    for (int p = 0; p < places; p++) {
        int ids[64 * CZ_CPU_SET_WORDS], n = omp_get_place_num_procs(p);
        if (n <= 0 || n > 64 * CZ_CPU_SET_WORDS) continue; /* past our set: the mask alone */
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < 64 * CZ_CPU_SET_WORDS)
                set->bits[ids[i] / 64] |= 1ULL << (ids[i] % 64);
    }
}

/* Threads per rank: the configured number (requested > 0), or this rank's
 * allowed CPUs (allowed_cpus) shared among the node's ranks whose sets
 * overlap it, so that BLIS and our kernels never start more threads than
 * they may run. Collective over the node's ranks; logged by rank 0 (and a
 * warning by the node's first rank when its ranks oversubscribe it). own:
 * this rank's allowed CPUs; local: the node's ranks. */
static int node_thread_plan(const cz_comm *comm, int requested, cz_thread_plan *p, int *own,
                            int *local, cz_error *err) {
    *local = 1;
    if (cz_comm_node_ranks(comm, local, err) != 0) return -1;
    cz_cpu_set mine, *masks = cz_alloc(sizeof *masks * (size_t)*local, err);
    if (!masks) return -1;
    allowed_cpus(&mine);
    int me = 0;
    if (cz_comm_node_allgather(comm, &mine, sizeof mine, masks, &me, err) != 0) {
        cz_free(masks);
        return -1;
    }
    double quota = cz_cpu_quota(); /* a cgroup's cpu.max, shared by the node's ranks */
    cz_cpu_plan_threads(masks, *local, me, requested, quota, p);
    cz_free(masks);
    *own = cz_cpu_set_count(&mine);
    /* train.threads=0 is advice only when the user fixed a count: with 0
     * already, every rank has one thread and only fewer ranks can help */
    if (me == 0 && p->demand > p->cpus)
        cz_warn("%d rank(s) on this node x %d thread(s) = %d threads, but they may run on %d "
                "CPU(s) (%s): threads wait for each other; %s (docs/performance.md, "
                "\"Threads per rank\")",
                *local, p->threads, p->demand, p->cpus,
                quota > 0 ? "affinity mask and cgroup cpu.max quota" : "affinity mask",
                requested > 0 ? "set train.threads=0 or bind fewer ranks"
                              : "start fewer ranks on this node or give it more CPUs");
    if (comm->rank == 0 && requested <= 0 && quota > 0)
        cz_info("threads per rank: %d (%d allowed CPU(s) shared by %d rank(s) of this node; "
                "cgroup cpu.max quota %.2f CPU(s) for the node's %d rank(s))",
                p->threads, *own, p->sharers, quota, *local);
    else if (comm->rank == 0 && requested <= 0)
        cz_info("threads per rank: %d (%d allowed CPU(s) shared by %d rank(s) of this node)",
                p->threads, *own, p->sharers);
    return 0;
}

int cz_train_compute_setup(const cz_comm *comm, int threads, cz_gemm_choice gemm, int bf16,
                           int *threads_out, cz_gemm_ctx **gemm_out, cz_error *err) {
    cz_thread_plan p;
    int own = 0, local = 1;
    *gemm_out = NULL;
    if (node_thread_plan(comm, threads, &p, &own, &local, err) != 0) return -1;
    *threads_out = p.threads;
    omp_set_num_threads(p.threads);
    *gemm_out = cz_model_gemm_setup(gemm, p.threads, bf16, err);
    return *gemm_out ? 0 : -1;
}

/* And whether rank 0's checkpoints get a writer thread (train.ckpt_writer):
 * thread by default; with auto, only when the threads of the node's ranks
 * leave one of rank 0's allowed CPUs free, for nodes where the thread's LZ4
 * and checksums must not take a training thread's CPU. Quiet runs with no
 * CPU free did not show the thread slowing a run (docs/checkpoints.md). */
static int threads_per_rank(const cz_run *r, int *threads, int *ckpt_background, cz_error *err) {
    cz_thread_plan p;
    int own = 0, local = 1;
    if (node_thread_plan(&r->comm, r->cfg.train.threads, &p, &own, &local, err) != 0) return -1;
    *threads = p.threads;
    /* free: the node's ranks leave a CPU over, and one of them is rank 0's */
    int free_cpu = p.cpus > p.demand && own > p.sharers * p.threads;
    cz_ckpt_writer_choice w = r->cfg.train.ckpt_writer;
    *ckpt_background = w == CZ_CKPT_WRITER_THREAD || (w == CZ_CKPT_WRITER_AUTO && free_cpu);
    const char *how = *ckpt_background ? "by a background thread" : "inline, training waits";
    if (r->comm.rank == 0 && w != CZ_CKPT_WRITER_AUTO)
        cz_info("checkpoints written %s (train.ckpt_writer=%s)", how,
                w == CZ_CKPT_WRITER_THREAD ? "thread" : "inline");
    else if (r->comm.rank == 0)
        cz_info("checkpoints written %s (train.ckpt_writer=auto: %d rank(s) x %d thread(s) on %d "
                "allowed CPU(s) of this node: %s)",
                how, local, p.threads, p.cpus, free_cpu ? "one is free" : "none is free");
    return 0;
}

static int make_phase(const cz_run *r, int which, cz_phase *ph, cz_error *err) {
    const cz_data_config *d = &r->cfg.data;
    const cz_train_config *t = &r->cfg.train;
    ph->seq = which == 0 ? d->seq : d->phase2_seq;
    ph->max_pred = which == 0 ? d->max_pred : d->phase2_max_pred;
    ph->global_batch =
        which == 1 && d->phase2_global_batch > 0 ? d->phase2_global_batch : t->global_batch;
    ph->micro_batch =
        which == 1 && d->phase2_micro_batch > 0 ? d->phase2_micro_batch : t->micro_batch;
    if (r->cfg.model.arch == CZ_ARCH_GPT) ph->max_pred = 0;
    const char *pre = which ? "data.phase2_" : "train.";
    if (ph->global_batch % ph->micro_batch != 0)
        return cz_fail(err, "%sglobal_batch=%d is not a multiple of %smicro_batch=%d", pre,
                       ph->global_batch, pre, ph->micro_batch);
    /* micro-batches are dealt m = r, r + p, ...: ranks may run one fewer
     * than others (8 on 3 ranks: 3, 3, 2), but each must run one */
    ph->micro_batches = ph->global_batch / ph->micro_batch;
    if (ph->micro_batches < r->comm.size)
        return cz_fail(err,
                       "%sglobal_batch / %smicro_batch = %d / %d = %d micro-batches a step, "
                       "fewer than the %d ranks: run at most %d ranks, or lower %smicro_batch",
                       pre, pre, ph->global_batch, ph->micro_batch, ph->micro_batches, r->comm.size,
                       ph->micro_batches, pre);
    ph->accum = (ph->micro_batches + r->comm.size - 1) / r->comm.size;
    return 0;
}

static const cz_phase *phase_at(const cz_run *r, long step) {
    return step >= r->phase2_start ? &r->phase[1] : &r->phase[0];
}

static int open_data(cz_run *r, cz_error *err) {
    const cz_config *c = &r->cfg;
    if (!c->data.train_manifest[0])
        return cz_fail(err,
                       "%s: data.train_manifest is empty: give the manifest written by "
                       "cloze-prep shards (--set data.train_manifest=DIR/train.manifest)",
                       c->source);
    if (cz_data_open(&r->train_data, c->data.train_manifest, c->model.arch, &c->data, c->train.seed,
                     err) != 0)
        return -1;
    const cz_manifest *m = cz_data_manifest(r->train_data);
    if ((int)m->vocab_size != c->model.vocab_size)
        return cz_fail(err,
                       "model.vocab_size=%d but %s has a vocabulary of %u tokens; set "
                       "model.vocab_size=%u",
                       c->model.vocab_size, c->data.train_manifest, m->vocab_size, m->vocab_size);
    if (c->data.heldout_manifest[0]) {
        if (cz_data_open(&r->eval_data, c->data.heldout_manifest, c->model.arch, &c->data,
                         c->train.seed, err) != 0)
            return -1;
        const cz_manifest *h = cz_data_manifest(r->eval_data);
        if (h->vocab_fingerprint != m->vocab_fingerprint)
            return cz_fail(err, "%s: vocabulary fingerprint differs from %s's",
                           c->data.heldout_manifest, c->data.train_manifest);
    }
    return 0;
}

/* The model's memory plan (made once for the largest micro-batch) per rank;
 * the optimizer's state comes on top (docs/performance.md). */
static void log_memory_plan(const cz_run *r, int max_b, int max_t) {
    cz_model_memory mem;
    cz_model_get_memory(r->model, &mem);
    const double mib = 1.0 / 1048576.0;
    cz_info("memory plan per rank (micro-batch %d x seq %d, recompute %s): activations %.1f MiB "
            "(layer inputs %.1f, layer activations %.1f, heads and gradient scratch %.1f), "
            "parameters + gradients %.1f MiB",
            max_b, max_t, r->cfg.model.recompute == CZ_RECOMPUTE_LAYERS ? "layers" : "none",
            (double)mem.activations * mib, (double)mem.layer_inputs * mib,
            (double)mem.layer_acts * mib, (double)mem.other * mib, (double)mem.params * mib);
}

/* What metrics.jsonl's predictions need: the host layout (ranks per node
 * from comm; hosts assumed alike) and backward's stages of each phase. */
static int prediction_setup(cz_run *r, cz_error *err) {
    int n = 1;
    if (cz_comm_node_ranks(&r->comm, &n, err) != 0) return -1;
    r->ranks_per_host = n > 0 ? n : 1;
    r->hosts = r->comm.size / r->ranks_per_host;
    if (r->hosts < 1) r->hosts = 1;
    for (int ph = 0; ph < 2; ph++) {
        int max = r->cfg.model.layers + 2;
        r->stages[ph] = cz_alloc(sizeof *r->stages[ph] * (size_t)max, err);
        if (!r->stages[ph]) return -1;
        r->n_stages[ph] = cz_model_grad_stages(&r->cfg.model, r->phase[ph].seq,
                                               r->phase[ph].max_pred, r->stages[ph], max, err);
        if (r->n_stages[ph] < 0) return -1;
    }
    return 0;
}

/* The shards both phases read, opened on every rank, with their sample
 * indexes built now (reads only boundary tables): the first step's time
 * then measures training, and a bad shard fails here. */
static int setup_data(cz_run *r, cz_error *err) {
    int rc = r->task ? 0 : open_data(r, err);
    for (int ph = 0; ph < 2 && !r->task && rc == 0; ph++) {
        rc = cz_data_prepare(r->train_data, r->phase[ph].seq, err);
        if (rc == 0 && r->eval_data) rc = cz_data_prepare(r->eval_data, r->phase[ph].seq, err);
    }
    /* every rank opened the same manifests: a missing or empty manifest, a
     * vocabulary mismatch or a bad shard is said once, by the lowest rank
     * that found it, and every rank ends alike */
    if ((rc = cz_comm_agree_setup(&r->comm, rc, err)) != 0) {
        r->err_shared = rc == CZ_COMM_ERR_ALL_RANKS;
        return -1;
    }
    return 0;
}

/* The cost model's gradient sync and weight exchange for this step: the
 * buckets final as backward's stages end, each stage's share of the last
 * backward's measured time its share of backward's FLOPs. */
static void predict_step(const cz_run *r, int ph, cz_step_stats *s) {
    cz_net_model net;
    cz_comm_config_net(&r->cfg.dist, &net);
    int n = r->n_stages[ph], gx = 0, gy = 0;
    double ready[n > 0 ? n : 1], at[n > 0 ? n : 1], total = 0, acc = 0;
    for (int i = 0; i < n; i++) total += r->stages[ph][i].flops;
    for (int i = 0; i < n; i++) {
        acc += r->stages[ph][i].flops;
        ready[i] = (double)r->stages[ph][i].end;
        /* without overlap (dist.overlap = false, one rank, no
         * MPI_THREAD_MULTIPLE) every bucket starts after backward */
        at[i] = total > 0 && cz_grad_sync_overlaps(r->gs) ? s->backward_seconds * acc / total
                                                          : s->backward_seconds;
    }
    cz_error e;
    if (cz_comm_grid_parse(r->cfg.dist.grid, &gx, &gy, &e) != 0) gx = 0;
    /* the word embedding's rows (at offset 0): the union this step reduced */
    cz_rows_tail rows = {(double)cz_grad_sync_tail_rows(r->gs), r->cfg.model.vocab_size,
                         r->cfg.model.hidden};
    cz_sync_scenario sc = {.net = &net,
                           .hosts = r->hosts,
                           .ranks_per_host = r->ranks_per_host,
                           .algo = cz_grad_sync_algo(r->gs),
                           .grid_x = gx,
                           .layout = cz_grad_sync_layout(r->gs),
                           .order = cz_model_grad_order(r->model),
                           .mode = cz_grad_sync_mode(r->gs),
                           .ready = ready,
                           .ready_t = at,
                           .n_ready = n,
                           .backward_s = s->backward_seconds,
                           .rows = rows};
    cz_sync_predict(&sc, &s->pred);
    if (r->cfg.optim.placement == CZ_PLACE_REPLICATED) s->pred.gather = 0;
}

/* The model for micro-batches up to max_b x max_t, a batch buffer per
 * phase, and the first weights: the seed's, then the task's
 * (fine-tuning), then train.init_from's. */
static int setup_model(cz_run *r, int max_b, int max_t, cz_error *err) {
    int max_p =
        r->phase[0].max_pred > r->phase[1].max_pred ? r->phase[0].max_pred : r->phase[1].max_pred;
    if (cz_model_create(&r->model, &r->cfg.model, max_b, max_t, max_p, r->gemm, err) != 0)
        return -1;
    for (int ph = 0; ph < 2; ph++)
        if (cz_batch_buf_alloc(&r->buf[ph], r->phase[ph].micro_batch, r->phase[ph].seq,
                               r->phase[ph].max_pred, err) != 0)
            return -1;
    cz_model_init_weights(r->model, r->cfg.train.seed);
    if (r->task && r->task->init_model && r->task->init_model(r->task->ctx, r->model, err) != 0)
        return -1;
    /* every rank reads model.init_from and reaches the same verdict: said
     * once, by the lowest rank that failed, without a rank prefix */
    if (r->cfg.train.init_from[0]) {
        int rc = cz_comm_agree_setup(&r->comm, cz_run_init_from(r, err), err);
        if (rc != 0) {
            r->err_shared = rc == CZ_COMM_ERR_ALL_RANKS;
            return -1;
        }
    }
    r->n_params = cz_model_num_params(r->model);
    return 0;
}

/* The optimizer's ranges (one per tensor), the network auto prices with,
 * the gradient sync and the optimizer over them. */
static int setup_optimizer(cz_run *r, cz_error *err) {
    int nt = cz_model_num_tensors(r->model);
    r->ranges = cz_alloc(sizeof *r->ranges * (size_t)nt, err);
    if (!r->ranges) return -1;
    const cz_tensor_info *t0 = cz_model_tensor(r->model, 0);
    if (cz_optim_ranges_from_tensors(t0, nt, &r->cfg.optim, r->ranges, err) != 0) return -1;
    r->n_ranges = nt;
    /* the network auto prices with: measured now, read from
     * dist.cluster_file, or the dist.link_* keys (logged by rank 0) */
    if (cz_comm_net_setup(&r->comm, &r->cfg.dist, err) != 0) {
        r->err_shared = r->cfg.dist.cluster_file[0] != 0; /* rank 0's verdict, every rank's */
        return -1;
    }
    if (prediction_setup(r, err) != 0) return -1;
    /* the gradient sync belongs to the step loop: the optimizer's placement
     * says what it must leave where, the model says in which order backward
     * finishes the gradients */
    if (cz_grad_sync_create(&r->gs, &r->comm, &r->cfg.dist, r->n_params,
                            cz_placement_sync_mode(r->cfg.optim.placement),
                            cz_model_grad_order(r->model), err) != 0)
        return -1;
    /* the run's other collectives wait no longer than the sync's (dist.timeout_s) */
    cz_comm_watch(&r->comm, r->gs);
    if (cz_optimizer_create(&r->opt, &r->comm, &r->cfg.optim, r->gs, r->ranges, r->n_ranges, err) !=
        0)
        return -1;
    if (r->cfg.dist.exact) {
        /* one scale per tensor of the model's table (never per bucket) */
        size_t *off = malloc((size_t)nt * sizeof *off);
        if (!off) return cz_fail(err, "train: out of memory");
        for (int i = 0; i < nt; i++) off[i] = r->ranges[i].offset;
        int rc = cz_exact_create(&r->exact, r->n_params, off, nt, err);
        free(off);
        int most = r->phase[0].micro_batches > r->phase[1].micro_batches
                       ? r->phase[0].micro_batches
                       : r->phase[1].micro_batches;
        r->slots = rc == 0 ? calloc((size_t)most * CZ_STAT_FIELDS, sizeof(double)) : NULL;
        if (rc != 0 || !r->slots || cz_optimizer_set_exact(r->opt, err) != 0)
            return rc != 0 ? -1 : r->slots ? -1 : cz_fail(err, "train: out of memory");
    }
    return cz_run_set_multipliers(r, err);
}

static int setup(cz_run *r, const cz_comm *world, const cz_config *cfg, const cz_train_options *opt,
                 const cz_train_task *task, cz_error *err) {
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->task = task;
    r->quiet = opt->quiet;
    r->lock_fd = -1;
    r->start_fresh = opt->start_fresh;
    r->allow_config_change = opt->allow_config_change;
    r->inject_nan_steps = getenv("CLOZE_INJECT_NAN_STEPS");
    if (cz_comm_dup(world, &r->comm, err) != 0) return -1;
    r->comm_ok = 1;
    if (threads_per_rank(r, &r->threads, &r->ckpt_background, err) != 0) return -1;
    omp_set_num_threads(r->threads);

    const cz_train_config *t = &r->cfg.train;
    long phase2_steps = (long)llround(r->cfg.data.phase2_fraction * (double)t->steps);
    r->phase2_start = t->steps - phase2_steps;
    /* (the same verdict on every rank, from the configuration alone) */
    r->err_shared = 1;
    if (make_phase(r, 0, &r->phase[0], err) != 0) return -1;
    r->phase[1] = r->phase[0];
    if (phase2_steps > 0 && make_phase(r, 1, &r->phase[1], err) != 0) return -1;
    r->err_shared = 0;

    r->gemm = cz_model_gemm_setup(t->gemm, r->threads, r->cfg.model.matmul_bf16, err);
    if (!r->gemm) return -1;
    if (setup_data(r, err) != 0) return -1;
    /* the model is made once, for the larger micro-batch and sequence of
     * the two phases */
    int max_b = r->phase[0].micro_batch > r->phase[1].micro_batch ? r->phase[0].micro_batch
                                                                  : r->phase[1].micro_batch;
    int max_t = r->phase[0].seq > r->phase[1].seq ? r->phase[0].seq : r->phase[1].seq;
    if (setup_model(r, max_b, max_t, err) != 0 || setup_optimizer(r, err) != 0) return -1;
    if (cz_gemm_peak(r->gemm, t->peak_gflops, &r->peak, err) != 0) return -1;

    /* the run directory is this job's from here on (config.cfg is written
     * once the checkpoint to resume from is chosen) */
    int rc = r->comm.rank == 0 ? cz_run_claim_dir(r, opt->resume, err) : 0;
    if (cz_run_verdict(r, rc, err) != 0) return -1;
    if (r->comm.rank == 0) {
        cz_info("%s: %s L=%d H=%d A=%d, %.2fM parameters; %d rank(s) x %d thread(s); gemm: %s; "
                "other kernels: %s",
                r->cfg.source, r->cfg.model.arch == CZ_ARCH_BERT ? "BERT" : "GPT",
                r->cfg.model.layers, r->cfg.model.hidden, r->cfg.model.heads,
                (double)r->n_params / 1e6, r->comm.size, r->threads, cz_gemm_describe(r->gemm),
                cz_kernels_describe());
        cz_info("MFU denominator per rank: %s", r->peak.source);
        cz_info("batch: global %d = micro %d x %d micro-batch(es) on %d rank(s) (up to %d each), "
                "seq %d, %ld steps%s",
                r->phase[0].global_batch, r->phase[0].micro_batch, r->phase[0].micro_batches,
                r->comm.size, r->phase[0].accum, r->phase[0].seq, t->steps,
                r->exact ? "; exact sums (dist.exact): the same bits on any allocation" : "");
        if (r->phase2_start < t->steps)
            cz_info("phase 2 from step %ld: seq %d, max_pred %d, global batch %d",
                    r->phase2_start + 1, r->phase[1].seq, r->phase[1].max_pred,
                    r->phase[1].global_batch);
        log_memory_plan(r, max_b, max_t);
    }
    return cz_comm_barrier(&r->comm, err);
}

static void teardown(cz_run *r) {
    cz_ckpt_writer_free(r->ckpt_writer); /* a write still running ends first */
    cz_run_sample_close(r);
    cz_metrics_close(r);
    cz_run_release_dir(r);
    cz_optimizer_free(r->opt);
    cz_exact_free(r->exact);
    free(r->slots);
    cz_comm_watch(&r->comm, NULL);
    cz_grad_sync_free(r->gs);
    cz_free(r->stages[0]);
    cz_free(r->stages[1]);
    cz_free(r->ranges);
    free(r->mult);
    cz_batch_buf_free(&r->buf[0]);
    cz_batch_buf_free(&r->buf[1]);
    cz_model_free(r->model);
    if (r->eval_data) cz_data_close(r->eval_data);
    if (r->train_data) cz_data_close(r->train_data);
    if (r->gemm) cz_gemm_free(r->gemm);
    if (r->comm_ok) cz_comm_finalize(&r->comm);
}

/* ---- one micro-batch ---- */

/* Samples first_sample .. + n-1 into buf: from the shards, or from the
 * task's own builder. */
static int build_micro_batch(const cz_run *r, cz_batch_buf *buf, cz_data *data,
                             uint64_t first_sample, int n, int seq, int max_pred, cz_error *err) {
    for (int j = 0; j < n; j++) {
        uint64_t g = first_sample + (uint64_t)j;
        int rc = r->task ? r->task->build(r->task->ctx, buf, j, g, err)
                         : cz_data_build(data, buf, j, g, seq, max_pred, err);
        if (rc != 0) return -1;
    }
    return 0;
}

static void add_losses(cz_step_stats *s, const cz_losses *l) {
    s->loss += l->loss;
    s->mlm_loss += l->mlm_loss;
    s->nsp_loss += l->nsp_loss;
    s->lm_loss += l->lm_loss;
    s->mlm_correct += l->mlm_correct;
    s->mlm_count += l->mlm_count;
    s->nsp_correct += l->nsp_correct;
    s->nsp_count += l->nsp_count;
    s->task_loss += l->task_loss;
    s->task_correct += l->task_correct;
    s->task_count += l->task_count;
}

/* Sums the step's figures over ranks (same result on every rank: the
 * non-finite verdict must be shared). Losses are means over micro-batches. */
static int reduce_step_stats(cz_run *r, cz_step_stats *s, int micro_batches, cz_error *err) {
    double v[CZ_STAT_FIELDS] = {s->loss,
                                s->mlm_loss,
                                s->nsp_loss,
                                s->lm_loss,
                                (double)s->mlm_correct,
                                (double)s->mlm_count,
                                (double)s->nsp_correct,
                                (double)s->nsp_count,
                                s->task_loss,
                                (double)s->task_correct,
                                (double)s->task_count,
                                s->tokens,
                                s->flops};
    if (r->exact) {
        /* each slot is one rank's: a sum of bit patterns and zeros moves
         * it whole; then the micro-batches in their global order, as one
         * rank alone adds them */
        uint64_t *u = (uint64_t *)(void *)r->slots;
        if (cz_comm_allreduce_u64(&r->comm, u, micro_batches * CZ_STAT_FIELDS, CZ_OP_SUM, err) != 0)
            return -1;
        memset(v, 0, sizeof v);
        for (int m = 0; m < micro_batches; m++)
            for (int j = 0; j < CZ_STAT_FIELDS; j++) v[j] += r->slots[m * CZ_STAT_FIELDS + j];
    } else if (cz_comm_allreduce_doubles(&r->comm, v, CZ_STAT_FIELDS, CZ_OP_SUM, err) != 0) {
        return -1;
    }
    s->loss = v[0] / micro_batches;
    s->mlm_loss = v[1] / micro_batches;
    s->nsp_loss = v[2] / micro_batches;
    s->lm_loss = v[3] / micro_batches;
    s->mlm_correct = (long)v[4];
    s->mlm_count = (long)v[5];
    s->nsp_correct = (long)v[6];
    s->nsp_count = (long)v[7];
    s->task_loss = v[8] / micro_batches;
    s->task_correct = (long)v[9];
    s->task_count = (long)v[10];
    s->tokens = v[11]; /* over all ranks: global batch x seq, or less when padded to the longest */
    s->flops = v[12];
    return 0;
}

/* Fault injection for tests (documented in docs/user-guide.md): poison this
 * rank's gradients at the given steps to exercise the non-finite path. */
static int nan_injected_at(const char *s, long step) {
    if (!s) return 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v == step + 1) return 1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* This rank's micro-batches of the step: m = rank, rank + p, ... < M (the
 * same micro-batches whatever the rank count: 1 rank x accumulation 2 ==
 * 2 ranks x 1; 8 on 3 ranks: 3, 3, 2). Without dist.exact the gradients
 * add up in grads and the sync reduces them from the last backward on;
 * with it each micro-batch's gradient goes alone into the exact sums and
 * its figures into its slot. */
static int run_micro_batches(cz_run *r, const cz_phase *ph, cz_batch_buf *buf, cz_step_stats *s,
                             float *grads, cz_error *err) {
    int p = r->comm.size, M = ph->micro_batches;
    cz_grad_sync *gs = r->gs;
    for (int m = r->comm.rank; m < M; m += p) {
        uint64_t first = r->samples_done + (uint64_t)m * (uint64_t)ph->micro_batch;
        if (build_micro_batch(r, buf, r->train_data, first, ph->micro_batch, ph->seq, ph->max_pred,
                              err) != 0)
            return -1;
        cz_batch b = r->task && r->task->pad_to_longest ? cz_batch_view_packed(buf, ph->micro_batch)
                                                        : cz_batch_view(buf, ph->micro_batch);
        b.max_pred = ph->max_pred;
        b.train = 1;
        b.seed = r->cfg.train.seed;
        b.step = (uint64_t)r->step;
        cz_losses l;
        if (cz_model_forward(r->model, &b, &l, err) != 0) return -1;
        /* what this micro-batch computed: b.seq is the padded length, less
         * than ph->seq for a task padded to its longest sequence */
        double tokens = (double)b.batch * b.seq;
        double flops = 3.0 * cz_model_forward_flops(&r->cfg.model, b.seq, ph->max_pred) * b.batch;
        int last = m + p >= M;
        if (r->exact) {
            double *v = r->slots + (size_t)m * CZ_STAT_FIELDS;
            double f[CZ_STAT_FIELDS] = {l.loss,
                                        l.mlm_loss,
                                        l.nsp_loss,
                                        l.lm_loss,
                                        (double)l.mlm_correct,
                                        (double)l.mlm_count,
                                        (double)l.nsp_correct,
                                        (double)l.nsp_count,
                                        l.task_loss,
                                        (double)l.task_correct,
                                        (double)l.task_count,
                                        tokens,
                                        flops};
            memcpy(v, f, sizeof f);
            s->tokens += tokens; /* this rank's, for its own progress line */
            s->flops += flops;
            /* the micro-batch's own gradient, alone */
            cz_model_zero_grads(r->model);
            if (last && nan_injected_at(r->inject_nan_steps, r->step)) grads[0] = NAN;
            double t_bwd = cz_now();
            cz_model_backward(r->model, &b, 1.0f);
            if (last) s->backward_seconds = cz_now() - t_bwd;
            cz_exact_add(r->exact, grads);
            continue;
        }
        add_losses(s, &l);
        s->tokens += tokens;
        s->flops += flops;
        /* only the last micro-batch finishes gradients: overlap starts there */
        if (last) {
            /* poisoned before the backward that adds to it, so the NaN is
             * there before the sync can reduce its bucket */
            if (nan_injected_at(r->inject_nan_steps, r->step)) grads[0] = NAN;
            cz_grad_sync_begin(gs, grads);
            cz_model_set_grad_hook(r->model, cz_grad_sync_ready, gs);
            cz_model_set_grad_rows_hook(r->model, cz_grad_sync_rows, gs);
        } else {
            cz_model_set_grad_hook(r->model, NULL, NULL);
            cz_model_set_grad_rows_hook(r->model, NULL, NULL);
        }
        double t_bwd = cz_now();
        cz_model_backward(r->model, &b, 1.0f);
        if (last) s->backward_seconds = cz_now() - t_bwd;
    }
    return 0;
}

/* ---- one optimizer step ---- */

static int train_step(cz_run *r, cz_step_stats *s, cz_error *err) {
    const cz_phase *ph = phase_at(r, r->step);
    cz_batch_buf *buf = &r->buf[ph != &r->phase[0]];
    double t0 = cz_now();
    memset(s, 0, sizeof *s);
    s->step = r->step;
    s->seq = ph->seq;
    float *grads = cz_model_grads(r->model);
    cz_model_zero_grads(r->model);
    cz_grad_sync *gs = r->gs;
    /* the weights stay as they are until the optimizer: in bf16 mode each
     * is packed once for all the products of the micro-batches (an error
     * below ends the run; the next scope would re-pack anyway) */
    cz_gemm_weights_begin(r->gemm);
    int M = ph->micro_batches;
    double summing = 0; /* dist.exact: the sums' finish, not compute */
    for (int attempt = 0;; attempt++) {
        int unknown = r->exact && cz_exact_scales(r->exact)[0] == INT32_MIN;
        if (r->exact) {
            cz_exact_begin(r->exact, M);
            memset(r->slots, 0, (size_t)M * CZ_STAT_FIELDS * sizeof(double));
        }
        if (run_micro_batches(r, ph, buf, s, grads, err) != 0) return -1;
        if (!r->exact) break;
        /* the sum over every rank's micro-batches, into grads on every rank */
        int retry = 0;
        double t_sum = cz_now();
        if (cz_exact_finish(r->exact, cz_grad_sync_comm(gs), cz_grad_sync_algo(gs), grads, &retry,
                            err) != 0)
            return -1;
        s->grad_comm_seconds = cz_now() - t_sum;
        summing += s->grad_comm_seconds;
        if (!retry) break;
        if (attempt > 0)
            return cz_fail(err,
                           "step %ld: exact sums: the recomputed step still exceeds its "
                           "scales (a gradient that is not a function of the step alone)",
                           r->step);
        if (r->comm.rank == 0 && !r->quiet)
            cz_info("step %ld: exact sums: %s; the step is computed again with this step's scales",
                    r->step + 1,
                    unknown ? "no scales yet (a run's first step)"
                            : "a gradient outgrew its predicted scale");
        s->tokens = s->flops = 0;
    }
    cz_gemm_weights_end(r->gemm);
    cz_model_set_grad_hook(r->model, NULL, NULL);
    cz_model_set_grad_rows_hook(r->model, NULL, NULL);
    s->compute_seconds = cz_now() - t0 - summing;
    if (!r->exact) {
        if (cz_grad_sync_finish(gs, err) != 0) return -1;
        s->grad_comm_seconds = cz_grad_sync_comm_seconds(gs);
        s->grad_rows = (double)cz_grad_sync_tail_rows(gs);
    }
    double lr = cz_lr_at(&r->cfg.optim, r->step, r->cfg.train.steps);
    cz_step_report rep;
    double t_opt = cz_now();
    if (cz_optimizer_step(r->opt, cz_model_params(r->model), grads, ph->micro_batches, lr, &rep,
                          err) != 0)
        return -1;
    /* the norm, clipping, the AdamW/LAMB update and any weight exchange */
    s->optim_seconds = cz_now() - t_opt;
    s->gather_seconds = rep.gather_seconds;
    predict_step(r, ph != &r->phase[0], s);
    if (reduce_step_stats(r, s, ph->micro_batches, err) != 0) return -1;
    s->lr = lr;
    s->grad_norm = rep.grad_norm;
    s->skipped = rep.skipped; /* the truth: weights untouched this step */
    s->seconds = cz_now() - t0;
    /* what the step waited for the communication backward did not hide */
    s->comm_wait = cz_grad_sync_wait_seconds(gs);
    if (r->exact) s->comm_wait = s->grad_comm_seconds; /* after backward: all exposed */
    r->samples_done += (uint64_t)ph->global_batch;
    s->samples_done = r->samples_done;
    return 0;
}

/* ---- evaluation on the held-out manifest: a fixed set of samples ---- */

static int evaluate(cz_run *r, cz_error *err) {
    if (r->task) {
        if (!r->task->evaluate || r->task->evaluate(r->task->ctx, r->model, &r->comm, r->step,
                                                    r->step >= r->cfg.train.steps, err) != 0)
            return r->task->evaluate ? -1 : 0;
        cz_scalar v[16];
        if (r->comm.rank == 0 && r->task->eval_scalars)
            cz_metrics_scalars(r, r->step, v, r->task->eval_scalars(r->task->ctx, v, 16));
        return 0;
    }
    if (!r->eval_data) return 0;
    const cz_phase *ph = phase_at(r, r->step > 0 ? r->step - 1 : 0);
    cz_batch_buf *buf = &r->buf[ph != &r->phase[0]];
    cz_eval_stats e;
    memset(&e, 0, sizeof e);
    int batches = r->cfg.train.eval_batches > 0 ? r->cfg.train.eval_batches : 1;
    /* dist.exact: each batch's figures in its slot, summed in batch order */
    enum { EVAL_FIELDS = 8 };
    double *slot = r->exact ? calloc((size_t)batches * EVAL_FIELDS, sizeof(double)) : NULL;
    if (r->exact && !slot) return cz_fail(err, "evaluation: out of memory");
    cz_gemm_weights_begin(r->gemm); /* the same weights for every batch */
    for (int m = r->comm.rank; m < batches; m += r->comm.size) {
        uint64_t first = (uint64_t)m * (uint64_t)ph->micro_batch;
        cz_losses l;
        cz_batch b;
        int rc = build_micro_batch(r, buf, r->eval_data, first, ph->micro_batch, ph->seq,
                                   ph->max_pred, err);
        if (rc == 0) {
            b = cz_batch_view(buf, ph->micro_batch);
            b.max_pred = ph->max_pred;
            b.train = 0;
            rc = cz_model_forward(r->model, &b, &l, err);
        }
        if (rc != 0) {
            free(slot);
            return -1;
        }
        if (slot) {
            double f[EVAL_FIELDS] = {l.mlm_loss * (double)l.mlm_count,
                                     l.lm_loss * (double)l.lm_count,
                                     (double)l.mlm_correct,
                                     (double)l.mlm_count,
                                     (double)l.nsp_correct,
                                     (double)l.nsp_count,
                                     (double)l.lm_count,
                                     (double)ph->micro_batch};
            memcpy(slot + (size_t)m * EVAL_FIELDS, f, sizeof f);
            continue;
        }
        e.mlm_loss_sum += l.mlm_loss * (double)l.mlm_count;
        e.lm_loss_sum += l.lm_loss * (double)l.lm_count;
        e.mlm_correct += l.mlm_correct;
        e.mlm_count += l.mlm_count;
        e.nsp_correct += l.nsp_correct;
        e.nsp_count += l.nsp_count;
        e.lm_count += l.lm_count;
        e.samples += ph->micro_batch;
    }
    cz_gemm_weights_end(r->gemm);
    double v[8] = {e.mlm_loss_sum,      e.lm_loss_sum,         (double)e.mlm_correct,
                   (double)e.mlm_count, (double)e.nsp_correct, (double)e.nsp_count,
                   (double)e.lm_count,  (double)e.samples};
    if (slot) {
        int rc = cz_comm_allreduce_u64(&r->comm, (uint64_t *)(void *)slot, batches * EVAL_FIELDS,
                                       CZ_OP_SUM, err);
        memset(v, 0, sizeof v);
        for (int m = 0; rc == 0 && m < batches; m++)
            for (int j = 0; j < EVAL_FIELDS; j++) v[j] += slot[(size_t)m * EVAL_FIELDS + j];
        free(slot);
        if (rc != 0) return -1;
    } else if (cz_comm_allreduce_doubles(&r->comm, v, 8, CZ_OP_SUM, err) != 0) {
        return -1;
    }
    e.mlm_loss_sum = v[0];
    e.lm_loss_sum = v[1];
    e.mlm_correct = (long)v[2];
    e.mlm_count = (long)v[3];
    e.nsp_correct = (long)v[4];
    e.nsp_count = (long)v[5];
    e.lm_count = (long)v[6];
    e.samples = (long)v[7];
    cz_metrics_eval(r, r->step, &e);
    return 0;
}

/* ---- the loop ---- */

/* 1 when any rank was asked to stop, 0 if none, -1 on a failure. */
static int stop_requested_everywhere(cz_run *r, cz_error *err) {
    double flag = cz_signals_pending();
    if (cz_comm_allreduce_doubles(&r->comm, &flag, 1, CZ_OP_MAX, err) != 0) return -1;
    return flag > 0;
}

/* Peak resident memory of every rank (getrusage), printed by rank 0 and kept
 * in metrics.jsonl under "<key>_mib_max"/"_mean": what a user sizes a node
 * by. Taken twice: "peak_rss_train" after the last step, before the final
 * checkpoint (whose gathered Adam moments add 8 bytes per parameter on rank
 * 0), and "peak_rss" at the very end. */
static void report_peak_memory(cz_run *r, const char *key, const char *what) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double mib = (double)ru.ru_maxrss / 1024.0, max_mib = mib, sum_mib = mib;
    cz_error err;
    if (cz_comm_allreduce_doubles(&r->comm, &max_mib, 1, CZ_OP_MAX, &err) != 0 ||
        cz_comm_allreduce_doubles(&r->comm, &sum_mib, 1, CZ_OP_SUM, &err) != 0) {
        cz_warn("peak memory not reported: %s", err.msg);
        return;
    }
    if (r->comm.rank != 0) return;
    cz_info("peak memory per rank%s: max %.0f MiB, mean %.0f MiB", what, max_mib,
            sum_mib / r->comm.size);
    if (r->metrics) {
        fprintf(r->metrics, "{\"%s_mib_max\":%.1f,\"%s_mib_mean\":%.1f}\n", key, max_mib, key,
                sum_mib / r->comm.size);
        fflush(r->metrics);
    }
    cz_metrics_memory(r, key, max_mib, sum_mib / r->comm.size);
}

static void watch_loss(cz_run *r, const cz_step_stats *s) {
    if (!isfinite(s->loss) || s->skipped) return;
    cz_loss_watch *w = &r->loss_watch;
    if (cz_loss_watch_add(w, s->step + 1, s->loss) && r->comm.rank == 0)
        /* no ratio in the message: the minimum may be 0 */
        cz_warn("step %ld: loss %.4g (averaged over about 10 steps: %.4g) rose from the "
                "average's minimum %.4g (step %ld): the run is diverging; lower optim.lr or "
                "raise optim.warmup_steps, and resume from a checkpoint before the rise",
                s->step + 1, s->loss, w->smoothed, w->min, w->min_step);
}

static int run_loop(cz_run *r, cz_error *err) {
    const cz_train_config *t = &r->cfg.train;
    r->first_step = r->step;
    double loop_start = cz_now();
    long last_ckpt = r->step;
    while (r->step < t->steps) {
        if (r->step == r->phase2_start && r->step > 0 && r->comm.rank == 0)
            cz_info("step %ld: entering phase 2 (seq %d)", r->step + 1, r->phase[1].seq);
        cz_step_stats s;
        if (train_step(r, &s, err) != 0) return -1;
        r->step++;
        r->elapsed = cz_now() - loop_start;
        cz_metrics_step(r, &s);
        cz_run_sample(r); /* train.sample_every */
        watch_loss(r, &s);
        /* a non-finite loss counts towards divergence even when the
         * gradients stayed finite and the update was applied */
        if (s.skipped || !isfinite(s.loss)) {
            r->bad_in_row++;
            r->bad_total++;
            if (r->bad_in_row >= t->max_bad_steps)
                return cz_fail(err,
                               "%ld non-finite steps in a row (up to step %ld; last loss %g, "
                               "gradient norm %g): the run is diverging or the data is bad; "
                               "lower optim.lr, raise optim.warmup_steps, or check the shards. "
                               "Resume from the last checkpoint with --resume auto",
                               r->bad_in_row, r->step, s.loss, s.grad_norm);
        } else {
            r->bad_in_row = 0;
        }
        if (t->eval_every > 0 && r->step % t->eval_every == 0 && r->step < t->steps &&
            evaluate(r, err) != 0)
            return -1;
        int stop = stop_requested_everywhere(r, err);
        if (stop < 0) return -1;
        int sliced = t->stop_after_steps > 0 && r->step - r->first_step >= t->stop_after_steps &&
                     r->step < t->steps;
        if ((t->ckpt_every > 0 && r->step % t->ckpt_every == 0) || stop || sliced) {
            if (cz_run_save_checkpoint(r, err) != 0) return -1;
            last_ckpt = r->step;
        }
        if (stop) {
            if (r->comm.rank == 0)
                cz_info("stop requested by signal: checkpoint at step %ld written, exiting; "
                        "continue with --resume auto",
                        r->step);
            return 0;
        }
        if (sliced) {
            if (r->comm.rank == 0)
                cz_info("train.stop_after_steps=%ld reached: checkpoint at step %ld written; "
                        "continue with --resume auto",
                        t->stop_after_steps, r->step);
            return 0;
        }
    }
    report_peak_memory(r, "peak_rss_train", " (training steps)");
    if (evaluate(r, err) != 0) return -1;
    if (last_ckpt != r->step && cz_run_save_checkpoint(r, err) != 0) return -1;
    if (r->comm.rank == 0) {
        char buf[32];
        cz_info("done: %ld steps in %s (%ld non-finite)", t->steps,
                cz_format_duration(r->elapsed, buf, sizeof buf), r->bad_total);
    }
    report_peak_memory(r, "peak_rss", "");
    return 0;
}

/* RUN_DIR/config.cfg: the effective configuration of the job now using the
 * directory, and RUN_DIR/network.txt: the network measured or read at
 * start-up (a cluster file) (after the lock and the choice of checkpoint: a refused job
 * leaves the holder's file alone). */
static int write_run_config(cz_run *r, cz_error *err) {
    int rc = 0;
    if (r->comm.rank == 0) {
        char path[CZ_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/config.cfg", r->cfg.train.run_dir);
        rc = cz_config_write(&r->cfg, path, err);
        /* the network auto decided with, for cloze-plan --cluster-file */
        snprintf(path, sizeof path, "%s/network.txt", r->cfg.train.run_dir);
        if (rc == 0 && r->cfg.dist.net_known)
            rc = cz_net_model_write(path, &r->cfg.dist.net, r->hosts, r->ranks_per_host, err);
    }
    return cz_run_verdict(r, rc, err);
}

int cz_train_run(const cz_comm *world, const cz_config *cfg, const cz_train_options *opt,
                 cz_error *err) {
    return cz_train_run_task(world, cfg, opt, NULL, err);
}

int cz_train_run_task(const cz_comm *world, const cz_config *cfg, const cz_train_options *opt,
                      const cz_train_task *task, cz_error *err) {
    cz_run *r = calloc(1, sizeof *r);
    if (!r) return cz_fail(err, "out of memory");
    cz_train_catch_signals();
    int rc = setup(r, world, cfg, opt, task, err);
    if (rc == 0) {
        int resumed = cz_run_resume(r, opt->resume, err);
        rc = resumed < 0 ? -1 : 0;
        if (rc == 0) rc = cz_run_sample_open(r, err); /* train.sample_every */
        /* failed before it started: it leaves no trace (no run.lock, no
         * run directory that it made) */
        if (rc != 0 && r->comm.rank == 0) cz_run_unclaim_dir(r);
        if (rc == 0) rc = write_run_config(r, err);
        if (rc == 0) {
            cz_metrics_open(r, resumed);
            if (resumed) cz_metrics_resumed(r);
            if (!resumed && r->step == 0) rc = evaluate(r, err); /* the starting point */
            if (rc == 0) rc = run_loop(r, err);
            if (rc == 0) rc = cz_run_checkpoint_wait(r, err); /* the last one is on disk */
        }
    }
    int shared = r->err_shared;
    teardown(r);
    free(r);
    return rc == 0 ? 0 : shared ? CZ_TRAIN_ERR_ALL_RANKS : -1;
}
