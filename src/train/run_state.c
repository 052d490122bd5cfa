/* What a run's checkpoint holds, and resuming from one. Rank 0 reads and
 * writes the file; every rank learns its verdict through comm.
 *
 * Blobs (container in include/cloze/ckpt.h), in file order:
 *   step     the step as a little-endian int64 (what cloze-ckpt info shows)
 *   config   the effective configuration (libconfig text)
 *   state    cz_run_state below: step, data position, optimizer step count
 *   params   the flat parameter buffer (n floats, model layout)
 *   adam_m, adam_v   the optimizer moments, gathered from their owners
 *   multipliers   µP runs: the per-tensor learning-rate and
 *            weight-decay multipliers (resume refuses a run whose differ)
 * There is no generator state to save: every random number is a function of
 * (seed, step, sample index) (include/cloze/rng.h), so step + data position
 * + seed restore it exactly. */
#include "train_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloze/hf.h"

/* 3: the tied word embedding lies first in the flat buffer (so that its
 * gradient can be reduced under the encoder's backward: src/model/model.c),
 * and the file says so (CZ_BLOB_LAYOUT); versions 1 and 2 had it after the
 * layers, and are read by moving it (cz_ckpt_get_params). A cloze that
 * reads only 2 refuses 3, rather than load the new layout as the old.
 * 2: BERT's query, key and value weights lie one after the other in the
 * flat buffer, then their biases (add_qkv in src/model/tensor_table.c); version 1
 * interleaved weight and bias per map, and is refused for BERT. GPT's
 * layout is the same in 1 and 2. */
#define CZ_RUN_STATE_VERSION 3

typedef struct cz_run_state {
    uint64_t version;
    uint64_t step;         /* steps completed */
    uint64_t samples_done; /* next global sample index */
    uint64_t optimizer_steps;
    uint64_t bad_total;
    uint64_t seed;
    uint64_t n_params;
    uint64_t world_size; /* informational: resuming on another size is fine */
} cz_run_state;

int cz_run_verdict(cz_run *r, int rc, cz_error *err) {
    if (cz_comm_share_verdict(&r->comm, 0, rc, err) >= 0) return 0;
    r->err_shared = 1;
    return -1;
}

/* The optimizer's multipliers as CZ_BLOB_MULTIPLIERS lays them out: (lr,
 * wd) per tensor, in r->mult (owned by r) */
static double *multipliers_blob(cz_run *r) {
    if (!r->mult) r->mult = malloc(2 * sizeof(double) * (size_t)(r->n_ranges + 1));
    if (!r->mult) return NULL;
    const double *a = cz_optimizer_lr_mults(r->opt), *d = cz_optimizer_wd_mults(r->opt);
    for (int i = 0; i < r->n_ranges; i++) {
        r->mult[2 * i] = a[i];
        r->mult[2 * i + 1] = d[i];
    }
    return r->mult;
}

int cz_run_set_multipliers(cz_run *r, cz_error *err) {
    int nt = cz_model_num_tensors(r->model);
    double *a = cz_alloc(2 * sizeof(double) * (size_t)(nt + 1), err);
    if (!a) return -1;
    r->has_mult = cz_optim_model_multipliers(r->model, a, a + nt);
    int rc = r->has_mult ? cz_optimizer_set_multipliers(r->opt, a, a + nt, err) : 0;
    cz_free(a);
    return rc;
}

/* A µP checkpoint's multipliers against the run's (the same rule, so they
 * differ only when the rule changed between the two clozes): a resumed run
 * must keep the learning rates it was trained with. */
static int check_multipliers(cz_run *r, const cz_ckpt *c, const char *path, cz_error *err) {
    size_t n = 0;
    const double *saved = cz_ckpt_get(c, CZ_BLOB_MULTIPLIERS, &n);
    if (!saved && !r->has_mult) return 0;
    if (!saved)
        return cz_fail(err,
                       "%s: %s: absent, but this run (model.parametrization = mup) has per-tensor "
                       "learning-rate multipliers",
                       path, CZ_BLOB_MULTIPLIERS);
    if (n != 2 * sizeof(double) * (size_t)r->n_ranges)
        return cz_fail(err, "%s: %s: %zu bytes, this run's %d tensors need %zu", path,
                       CZ_BLOB_MULTIPLIERS, n, r->n_ranges,
                       2 * sizeof(double) * (size_t)r->n_ranges);
    const double *now = multipliers_blob(r);
    if (!now) return cz_fail(err, "%s: out of memory", path);
    for (int i = 0; i < r->n_ranges; i++)
        if (memcmp(&saved[2 * i], &now[2 * i], 2 * sizeof(double)))
            return cz_fail(err,
                           "%s: %s: tensor %s: saved lr x %g, wd x %g; this run's lr x %g, wd x "
                           "%g",
                           path, CZ_BLOB_MULTIPLIERS, cz_model_tensor(r->model, i)->name,
                           saved[2 * i], saved[2 * i + 1], now[2 * i], now[2 * i + 1]);
    return 0;
}

/* µP's weights compute another function under the standard
 * parametrization (and at another base width): no --allow-config-change
 * loads them into such a run. */
static int same_parametrization(const char *what, const cz_model_config *old,
                                const cz_model_config *now, cz_error *err) {
    static const char *const words[] = {"standard", "mup"};
    if (old->parametrization != now->parametrization)
        return cz_fail(err,
                       "%s: model.parametrization: the checkpoint's run is %s, this run %s; its "
                       "weights (initial scales, readout and attention multipliers) mean another "
                       "model here",
                       what, words[old->parametrization & 1], words[now->parametrization & 1]);
    if (now->parametrization == CZ_PARAM_MUP && old->mup_base_width != now->mup_base_width)
        return cz_fail(err,
                       "%s: model.mup_base_width: the checkpoint's run has %d, this run %d; "
                       "its multipliers differ",
                       what, old->mup_base_width, now->mup_base_width);
    if (now->parametrization == CZ_PARAM_MUP &&
        cz_model_attn_scale(old) != cz_model_attn_scale(now))
        return cz_fail(err,
                       "%s: model.mup_attn_mult: the checkpoint's run scales attention logits by "
                       "%g, this run by %g",
                       what, (double)cz_model_attn_scale(old), (double)cz_model_attn_scale(now));
    return 0;
}

int cz_run_save_checkpoint(cz_run *r, cz_error *err) {
    float *m = NULL, *v = NULL;
    int rc = 0;
    if (r->comm.rank == 0) {
        m = cz_alloc(sizeof(float) * r->n_params, err);
        v = m ? cz_alloc(sizeof(float) * r->n_params, err) : NULL;
        if (!v) rc = -1;
    }
    if (cz_run_verdict(r, rc, err) != 0) {
        cz_free(m);
        cz_free(v);
        return -1;
    }
    rc = cz_optimizer_gather_moments(r->opt, m, v, err);
    if (rc == 0 && r->comm.rank == 0) {
        cz_run_state st = {CZ_RUN_STATE_VERSION,
                           (uint64_t)r->step,
                           r->samples_done,
                           (uint64_t)cz_optimizer_steps_done(r->opt),
                           (uint64_t)r->bad_total,
                           r->cfg.train.seed,
                           r->n_params,
                           (uint64_t)r->comm.size};
        char *config_text = cz_config_to_string(&r->cfg);
        size_t bytes = sizeof(float) * r->n_params;
        int64_t step_le = r->step; /* little-endian hosts only (see shard.h) */
        enum { MAX_TASK_BLOBS = 8 };
        cz_blob blobs[9 + MAX_TASK_BLOBS] = {
            {CZ_BLOB_STEP, &step_le, sizeof step_le},
            {CZ_BLOB_CONFIG, config_text, config_text ? strlen(config_text) : 0},
            {CZ_BLOB_STATE, &st, sizeof st},
            {CZ_BLOB_PARAMS, cz_model_params(r->model), bytes},
            {CZ_BLOB_ADAM_M, m, bytes},
            {CZ_BLOB_ADAM_V, v, bytes},
            {CZ_BLOB_LAYOUT, CZ_PARAMS_LAYOUT, strlen(CZ_PARAMS_LAYOUT)},
        };
        int nb = 7;
        /* dist.exact: the next step's scales, without which a resumed run
         * would quantise its next gradients differently */
        if (r->exact)
            blobs[nb++] = (cz_blob){CZ_BLOB_EXACT, cz_exact_scales(r->exact),
                                    sizeof(int32_t) * (size_t)cz_exact_n_tensors(r->exact)};
        double *mult = multipliers_blob(r);
        if (r->has_mult && mult)
            blobs[nb++] = (cz_blob){CZ_BLOB_MULTIPLIERS, mult, 2 * sizeof(double) * r->n_ranges};
        /* and what a task keeps beside them (cz_train_task.blobs) */
        for (int i = 0; r->task && i < r->task->n_blobs && i < MAX_TASK_BLOBS; i++)
            blobs[nb++] = r->task->blobs[i];
        char path[CZ_PATH_MAX + 32];
        cz_ckpt_path(path, sizeof path, r->cfg.train.run_dir, r->step);
        /* written off the critical path where a core is free for it
         * (r->ckpt_background): the writer snapshots the blobs (takes
         * adam_m and adam_v over, copies the rest) and writes and prunes in
         * its thread; this waits for the write before it first and returns
         * its result. Otherwise the writer writes before it returns
         * (docs/checkpoints.md). */
        double t0 = cz_now();
        int take[9 + MAX_TASK_BLOBS] = {0}; /* the moments: this copy is not needed after */
        for (int i = 0; i < nb; i++)
            take[i] = blobs[i].data && (blobs[i].data == m || blobs[i].data == v);
        if (!r->ckpt_writer &&
            !(r->ckpt_writer = cz_ckpt_writer_create(!r->quiet, r->ckpt_background, err)))
            rc = -1;
        if (rc == 0) {
            rc = cz_ckpt_writer_start(r->ckpt_writer, path, blobs, nb, take, r->cfg.train.run_dir,
                                      r->cfg.train.keep_last, err);
            m = v = NULL; /* the writer's now */
        }
        free(config_text);
        if (rc == 0 && !r->quiet)
            cz_info("checkpoint %s: training waited %.2fs (%s)", path, cz_now() - t0,
                    r->ckpt_background ? "the previous write and the snapshot" : "the write");
    }
    cz_free(m);
    cz_free(v);
    /* every rank learns whether the coordinator's write worked */
    return cz_run_verdict(r, rc, err);
}

/* ---- the run directory: one job at a time ---- */

/* An fcntl lock on RUN_DIR/run.lock, held until the process ends: the
 * kernel (or NFS's lock manager) drops it when the holder dies, however it
 * dies, so a stale file never blocks. The file says who holds it, for the
 * refusal message. (fcntl, not flock: flock is local to a host on some
 * network filesystems.) */
/* The first prefix of dir (at a '/' or the whole) that does not exist
 * into out (""; none): the topmost directory cz_make_dirs will create. */
static void first_missing(const char *dir, char *out, size_t len) {
    char buf[CZ_PATH_MAX];
    struct stat st;
    out[0] = 0;
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (stat(buf, &st) != 0 && errno == ENOENT) {
            snprintf(out, len, "%s", buf);
            return;
        }
        *p = c;
        if (!c) return;
    }
}

void cz_run_unclaim_dir(cz_run *r) {
    char path[CZ_PATH_MAX + 32];
    if (r->lock_fd >= 0 && r->created_lock) {
        snprintf(path, sizeof path, "%s/run.lock", r->cfg.train.run_dir);
        unlink(path);
    }
    cz_run_release_dir(r);
    if (!r->created_top[0]) return;
    /* train.run_dir, then its parents up to the topmost one made here,
     * each only while empty (rmdir refuses otherwise) */
    snprintf(path, sizeof path, "%s", r->cfg.train.run_dir);
    for (;;) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') path[--n] = 0;
        if (rmdir(path) != 0 || !strcmp(path, r->created_top)) break;
        char *slash = strrchr(path, '/');
        if (!slash || slash == path) break;
        *slash = 0;
    }
    r->created_top[0] = 0;
}

int cz_run_claim_dir(cz_run *r, const char *resume, cz_error *err) {
    const char *dir = r->cfg.train.run_dir;
    if (!dir[0])
        return cz_fail(err, "train.run_dir is not set: name the run directory in the "
                            "configuration or with --set train.run_dir=DIR");
    first_missing(dir, r->created_top, sizeof r->created_top);
    if (cz_make_dirs(dir, err) != 0) {
        cz_run_unclaim_dir(r);
        return -1;
    }
    char path[CZ_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/run.lock", dir);
    r->created_lock = access(path, F_OK) != 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        cz_fail(err, "%s: cannot open the run directory's lock: %s", path, strerror(errno));
        cz_run_unclaim_dir(r);
        return -1;
    }
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        char holder[256];
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        close(fd); /* (another job's lock: its run.lock, our directories are none) */
        if (e == EACCES || e == EAGAIN)
            return cz_fail(err,
                           "%s: another cloze-train job (%s) is using this run directory: wait for "
                           "it to end, or choose another train.run_dir",
                           dir, holder[0] ? holder : "holder not yet recorded");
        return cz_fail(err, "%s: cannot lock: %s", path, strerror(e));
    }
    char host[256] = "?", line[512];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    int n = snprintf(line, sizeof line, "host %s, pid %ld\n", host, (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n)
        cz_warn("%s: cannot record the holder: %s", path, strerror(errno));
    r->lock_fd = fd;
    if (resume || r->start_fresh) return 0;
    /* a fresh run must not mix its files with an earlier run's */
    long *steps = NULL;
    int count = 0;
    if (cz_ckpt_list(dir, &steps, &count, err) != 0) {
        cz_run_unclaim_dir(r);
        return -1;
    }
    free(steps);
    if (count > 0) {
        cz_fail(err,
                "%s already holds %d checkpoint(s): continue it with --resume auto, start "
                "a new run there on purpose with --start-fresh, or choose another "
                "train.run_dir",
                dir, count);
        cz_run_unclaim_dir(r);
        return -1;
    }
    return 0;
}

void cz_run_release_dir(cz_run *r) {
    if (r->lock_fd >= 0) close(r->lock_fd); /* (closing drops the lock) */
    r->lock_fd = -1;
}

/* --resume auto found checkpoints but none that verifies: an error that
 * lists them (each one's reason was warned above), never a silent restart
 * (launch/cloze.sbatch always resumes with auto). */
static int none_readable(const char *dir, cz_error *err) {
    long *steps = NULL;
    int n = 0;
    cz_error e;
    if (cz_ckpt_list(dir, &steps, &n, &e) != 0 || n == 0) {
        free(steps);
        return 0;
    }
    char names[512] = "";
    size_t at = 0;
    for (int i = n - 1; i >= 0 && at < sizeof names; i--) {
        char p[CZ_PATH_MAX + 32];
        cz_ckpt_path(p, sizeof p, dir, steps[i]);
        const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i == n - 1 ? "" : ", ", base);
    }
    free(steps);
    return cz_fail(err,
                   "%s: --resume auto: none of its %d checkpoint(s) is readable (%s; reasons "
                   "above): repair or move them away, or start a new run there on purpose with "
                   "--start-fresh",
                   dir, n, names);
}

int cz_run_checkpoint_wait(cz_run *r, cz_error *err) {
    int rc = r->comm.rank == 0 && r->ckpt_writer ? cz_ckpt_writer_wait(r->ckpt_writer, err) : 0;
    return cz_run_verdict(r, rc, err);
}

/* Rank 0 decides which file to resume from: 1 = found, 0 = none, -1 = error. */
static int choose_checkpoint(cz_run *r, const char *resume, char *path, size_t len, cz_error *err) {
    const char *dir = r->cfg.train.run_dir;
    if (!resume || r->start_fresh) return 0; /* (cz_run_claim_dir checked the directory) */
    if (!strcmp(resume, "auto")) {
        long step;
        int found = cz_ckpt_find_latest(dir, path, len, &step, err);
        if (found < 0) return -1;
        /* the decision in one line either way (a requeued job's log says
         * what it continued from; a mistyped train.run_dir shows as new) */
        if (!found) {
            if (none_readable(dir, err) != 0) return -1;
            cz_info("--resume auto: no checkpoint in %s, starting fresh at step 0 (%s)", dir,
                    r->created_top[0] ? "it did not exist: created now; a mistyped train.run_dir?"
                                      : "it holds none");
        }
        return found;
    }
    snprintf(path, len, "%s", resume);
    return cz_ckpt_verify(path, err) == 0 ? 1 : -1;
}

/* The first key of the model section whose value differs between a (the
 * file's) and b (this run's): 0 when none, else its name (e.g. "layout",
 * for model.layout) and both values as words into key / va / vb. The word
 * embedding's padding rows (model.vocab_pad_to) are not compared: a
 * Hugging Face directory has none, and cz_hf_load fills a padded table. */
static int model_diff(const cz_model_config *a, const cz_model_config *b, const char **key,
                      char *va, char *vb, size_t cap) {
    static const char *const arch[] = {"bert", "gpt"}, *const layout[] = {"post_ln", "pre_ln"},
                             *const head[] = {"tied", "untied"};
    const struct {
        const char *name;
        int a, b;
        const char *const *words; /* NULL: a number */
    } k[] = {{"arch", (int)a->arch, (int)b->arch, arch},
             {"layout", a->layout, b->layout, layout},
             {"vocab_size", a->vocab_size, b->vocab_size, NULL},
             {"hidden", a->hidden, b->hidden, NULL},
             {"layers", a->layers, b->layers, NULL},
             {"heads", a->heads, b->heads, NULL},
             {"intermediate", a->intermediate, b->intermediate, NULL},
             {"max_positions", a->max_positions, b->max_positions, NULL},
             {"type_vocab_size", a->type_vocab_size, b->type_vocab_size, NULL},
             {"lm_head", a->untied_head, b->untied_head, head}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (k[i].a == k[i].b) continue;
        *key = k[i].name;
        int in = k[i].words && k[i].a >= 0 && k[i].a <= 1 && k[i].b >= 0 && k[i].b <= 1;
        if (in) {
            snprintf(va, cap, "%s", k[i].words[k[i].a]);
            snprintf(vb, cap, "%s", k[i].words[k[i].b]);
        } else {
            snprintf(va, cap, "%d", k[i].a);
            snprintf(vb, cap, "%d", k[i].b);
        }
        return 1;
    }
    return 0;
}

/* The checkpoint's configuration against this run's: a key that changes
 * what the run means (seed, global batch, schedule, model, data: the
 * REFUSED class of the key table) must keep its value unless the user said
 * --allow-config-change; the other changes are accepted and logged. The
 * model's shape must match in any case: the weights would not fit. */
static int check_config(cz_run *r, const char *path, const char *saved, size_t saved_len,
                        cz_error *err) {
    cz_config old;
    char *text = strndup(saved, saved_len);
    if (!text) return cz_fail(err, "%s: config: out of memory", path);
    cz_error perr;
    int parsed = cz_config_from_string(&old, text, path, &perr);
    free(text);
    if (parsed != 0) {
        if (!r->allow_config_change)
            return cz_fail(err,
                           "%s: config: the checkpoint's configuration does not load here (%s); "
                           "pass --allow-config-change to resume without comparing it",
                           path, perr.msg);
        cz_warn("%s: --allow-config-change: the checkpoint's configuration does not load here "
                "(%s); not compared",
                path, perr.msg);
        return 0;
    }
    char diff[CZ_ERROR_MAX];
    int n = cz_config_resume_diff(&old, &r->cfg, 1, diff, sizeof diff);
    if (n > 0) {
        if (!r->allow_config_change)
            return cz_fail(err,
                           "%s: config: %s %s from the checkpoint's run; resume with the "
                           "checkpoint's values or pass --allow-config-change",
                           path, diff, n == 1 ? "differs" : "differ");
        cz_warn("%s: --allow-config-change: continuing as another run: %s %s from the "
                "checkpoint's",
                path, diff, n == 1 ? "differs" : "differ");
    }
    const char *key;
    char va[32], vb[32];
    if (model_diff(&old.model, &r->cfg.model, &key, va, vb, sizeof va))
        return cz_fail(err,
                       "%s: config: model.%s = %s in the checkpoint, %s here: the model's shape "
                       "differs, and --allow-config-change cannot load its weights into another "
                       "shape",
                       path, key, va, vb);
    if (same_parametrization(path, &old.model, &r->cfg.model, err) != 0) return -1;
    if (cz_config_resume_diff(&old, &r->cfg, 0, diff, sizeof diff) > 0)
        cz_info("%s: accepted changes from the checkpoint's run: %s%s", path, diff,
                old.train.steps != r->cfg.train.steps
                    ? " (the schedule's warm-up, decay and phase 2 follow the new train.steps)"
                    : "");
    return 0;
}

static int load_on_coordinator(cz_run *r, const char *path, cz_run_state *st, float **m, float **v,
                               int32_t *exact, cz_error *err) {
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(path, &c, err) != 0) return -1;
    int rc = cz_ckpt_get_exact(c, CZ_BLOB_STATE, st, sizeof *st, err);
    /* GPT's layout did not change with version 2 */
    if (rc == 0 && st->version != CZ_RUN_STATE_VERSION && st->version != 2 &&
        !(st->version == 1 && r->cfg.model.arch == CZ_ARCH_GPT))
        rc = cz_fail(err,
                     "%s: state: version %llu, this cloze reads 2 and %d (BERT parameters are "
                     "laid out differently since version 2)",
                     path, (unsigned long long)st->version, CZ_RUN_STATE_VERSION);
    size_t saved_len = 0;
    const char *saved = rc == 0 ? cz_ckpt_get(c, CZ_BLOB_CONFIG, &saved_len) : NULL;
    /* a model of another shape (e.g. model.layout pre_ln vs post_ln) has
     * another parameter count: the key that differs says more than the count */
    if (rc == 0 && saved && st->n_params != r->n_params)
        rc = check_config(r, path, saved, saved_len, err);
    if (rc == 0 && st->n_params != r->n_params)
        rc = cz_fail(err,
                     "%s: params: %llu parameters, but the configured model has %zu; resume "
                     "with the model configuration the checkpoint was written with",
                     path, (unsigned long long)st->n_params, r->n_params);
    if (rc == 0 && saved) rc = check_config(r, path, saved, saved_len, err);
    if (rc == 0) rc = check_multipliers(r, c, path, err);
    size_t bytes = sizeof(float) * r->n_params;
    if (rc == 0)
        rc = cz_ckpt_get_params(c, path, CZ_BLOB_PARAMS, r->model, cz_model_params(r->model), err);
    if (rc == 0) {
        *m = cz_alloc(bytes, err);
        *v = *m ? cz_alloc(bytes, err) : NULL;
        if (!*v) rc = -1;
    }
    if (rc == 0) rc = cz_ckpt_get_params(c, path, CZ_BLOB_ADAM_M, r->model, *m, err);
    if (rc == 0) rc = cz_ckpt_get_params(c, path, CZ_BLOB_ADAM_V, r->model, *v, err);
    /* dist.exact's scales, when the checkpoint has them for this model's
     * tensors; else the first step finds them (a discovery pass) */
    size_t xlen = 0;
    const void *x = rc == 0 && exact ? cz_ckpt_get(c, CZ_BLOB_EXACT, &xlen) : NULL;
    if (x && xlen == sizeof(int32_t) * (size_t)cz_exact_n_tensors(r->exact)) memcpy(exact, x, xlen);
    cz_ckpt_free(c);
    return rc;
}

int cz_run_resume(cz_run *r, const char *resume, cz_error *err) {
    char path[CZ_PATH_MAX + 64] = {0};
    int found = 0;
    cz_run_state st;
    memset(&st, 0, sizeof st);
    float *m = NULL, *v = NULL;
    int32_t *exact = r->exact ? cz_exact_scales(r->exact) : NULL;
    if (r->comm.rank == 0) {
        found = choose_checkpoint(r, resume, path, sizeof path, err);
        if (found == 1 && load_on_coordinator(r, path, &st, &m, &v, exact, err) != 0) found = -1;
    }
    found = cz_comm_share_verdict(&r->comm, 0, found, err);
    if (found < 0) r->err_shared = 1;
    if (found <= 0) {
        cz_free(m);
        cz_free(v);
        return found;
    }
    int rc = cz_comm_bcast(&r->comm, &st, sizeof st, 0, err);
    if (rc == 0)
        rc =
            cz_comm_bcast(&r->comm, cz_model_params(r->model), sizeof(float) * r->n_params, 0, err);
    if (rc == 0 && exact)
        rc = cz_comm_bcast(&r->comm, exact, sizeof(int32_t) * (size_t)cz_exact_n_tensors(r->exact),
                           0, err);
    if (rc == 0) rc = cz_optimizer_scatter_moments(r->opt, m, v, err);
    cz_free(m);
    cz_free(v);
    if (rc != 0) return -1;
    cz_optimizer_set_steps_done(r->opt, (long)st.optimizer_steps);
    r->step = (long)st.step;
    r->samples_done = st.samples_done;
    r->bad_total = (long)st.bad_total;
    if (r->comm.rank == 0)
        cz_info("resumed from %s: step %ld, sample %llu (written by %llu rank(s), now %d)", path,
                r->step, (unsigned long long)r->samples_done, (unsigned long long)st.world_size,
                r->comm.size);
    return 1;
}

/* model.init_from. A directory is read as Hugging Face's (config.json must
 * describe the configured model; heads the file lacks keep their fresh
 * initialisation); a file as a cloze checkpoint (its config's model section
 * must match, its params blob is taken whole). */
int cz_run_init_from(cz_run *r, cz_error *err) {
    const char *from = r->cfg.train.init_from;
    struct stat st;
    const char *key;
    char va[32], vb[32];
    if (stat(from, &st) != 0)
        return cz_fail(err, "model.init_from = %s: %s", from, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        cz_model_config hc;
        cz_hf_load_report rep;
        if (cz_hf_read_config(from, &hc, NULL, 0, err) != 0) return -1;
        if (model_diff(&hc, &r->cfg.model, &key, va, vb, sizeof va)) {
            const char *field = cz_hf_config_field(&hc, key);
            return cz_fail(err,
                           "model.init_from = %s: its config.json%s%s describes model.%s = %s, "
                           "this run's is %s; set model.%s to match",
                           from, field ? "'s " : "", field ? field : "", key, va, vb, key);
        }
        if (r->cfg.model.parametrization == CZ_PARAM_MUP)
            return cz_fail(err,
                           "model.init_from = %s: a Hugging Face model is in the standard "
                           "parametrization; model.parametrization = mup would compute another "
                           "function with its weights",
                           from);
        if (cz_hf_check_weights(from, &hc, err) != 0 || cz_hf_load(r->model, from, &rep, err) != 0)
            return cz_fail_prefix(err, "model.init_from = %s", from);
        if (r->comm.rank == 0)
            cz_info("model.init_from %s: %d tensors loaded%s%s", from, rep.loaded,
                    rep.fresh ? "; fresh: " : "", rep.fresh_list);
        return 0;
    }
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(from, &c, err) != 0) return cz_fail_prefix(err, "model.init_from");
    size_t n = 0;
    const char *text = cz_ckpt_get(c, CZ_BLOB_CONFIG, &n);
    int rc = 0;
    if (text) {
        cz_config old;
        char *t = strndup(text, n);
        if (!t || cz_config_from_string(&old, t, from, err) != 0)
            rc = -1;
        else if (model_diff(&old.model, &r->cfg.model, &key, va, vb, sizeof va))
            rc = cz_fail(err,
                         "model.init_from = %s: its model.%s = %s, this run's is %s; set "
                         "model.%s to match",
                         from, key, va, vb, key);
        else if (same_parametrization(from, &old.model, &r->cfg.model, err) != 0)
            rc = -1;
        else if (cz_model_vocab_rows(&old.model) != cz_model_vocab_rows(&r->cfg.model))
            rc = cz_fail(err,
                         "model.init_from = %s: its word embedding has %d rows "
                         "(model.vocab_pad_to = %d), this run's %d: set model.vocab_pad_to to "
                         "match, or start from a Hugging Face export of it (cloze-ckpt export-hf)",
                         from, cz_model_vocab_rows(&old.model), old.model.vocab_pad_to,
                         cz_model_vocab_rows(&r->cfg.model));
        free(t);
    }
    if (rc == 0)
        rc = cz_ckpt_get_params(c, from, CZ_BLOB_PARAMS, r->model, cz_model_params(r->model), err);
    cz_ckpt_free(c);
    /* a NaN or an infinity in the weights makes every step non-finite: say
     * which tensor, not (steps later) the learning rate or the data */
    const float *p = cz_model_params(r->model);
    for (int i = 0; rc == 0 && i < cz_model_num_tensors(r->model); i++) {
        const cz_tensor_info *ti = cz_model_tensor(r->model, i);
        for (size_t k = 0; k < ti->numel; k++)
            if (!isfinite(p[ti->offset + k])) {
                rc = cz_fail(err, "model.init_from = %s: params: tensor %s: element %zu is %s",
                             from, ti->name, k, isnan(p[ti->offset + k]) ? "NaN" : "infinite");
                break;
            }
    }
    if (rc == 0 && r->comm.rank == 0) cz_info("model.init_from %s: parameters loaded", from);
    return rc;
}
