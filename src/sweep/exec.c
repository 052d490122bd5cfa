/* sweep: running a point (cloze-train through launch/cloze-mpirun or
 * launch/cloze.sbatch), recording its outcome and rewriting the results,
 * and the short probe runs that price a plan. */
#define _GNU_SOURCE
#include "sweep_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* launch/cloze-mpirun -n RANKS [-t THREADS] cloze-train CONFIG OPTION...:
 * "--resume" (auto: a point) or "--quiet" (a probe) */
typedef struct launch_argv {
    char ranks[16], threads[16];
    char *argv[16];
} launch_argv;

static void mpirun_argv(launch_argv *a, const cz_sweep *s, const cz_sweep_tools *t, char *cfg,
                        const char *option) {
    int n = sw_launcher_argv(a->argv, a->ranks, a->threads, s, t);
    a->argv[n++] = (char *)t->train;
    a->argv[n++] = cfg;
    a->argv[n++] = (char *)option;
    if (!strcmp(option, "--resume")) a->argv[n++] = "auto";
    a->argv[n] = NULL;
}

/* Whether point p can be started now: CZ_RUN_DONE (yes), or the outcome
 * that stands for it (skipped, busy, failed with err). */
static cz_run_outcome check_runnable(const cz_sweep_point *p, const cz_sweep_tools *t,
                                     const cz_run_options *o, cz_error *err) {
    char why[CZ_ERROR_MAX];
    cz_point_state st = cz_point_get_state(p, why, sizeof why);
    if (st == CZ_POINT_DONE) return CZ_RUN_SKIPPED;
    if (st == CZ_POINT_INVALID) {
        cz_fail(err, "%s", p->error);
        return CZ_RUN_FAILED;
    }
    if (st == CZ_POINT_RUNNING) return CZ_RUN_BUSY;
    if (o->launch == CZ_LAUNCH_MPIRUN && (!sw_executable(t->mpirun) || !sw_executable(t->train))) {
        cz_fail(err, "cannot find %s (set CLOZE_MPIRUN / CLOZE_TRAIN)",
                sw_executable(t->mpirun) ? "cloze-train" : "launch/cloze-mpirun");
        return CZ_RUN_FAILED;
    }
    if (o->launch == CZ_LAUNCH_SBATCH && !sw_executable(t->sbatch)) {
        cz_fail(err, "cannot find launch/cloze.sbatch (set CLOZE_SBATCH)");
        return CZ_RUN_FAILED;
    }
    return CZ_RUN_DONE;
}

/* The files of a point's directory that a run reads and writes. */
typedef struct point_files {
    char lock[CZ_PATH_MAX + 32], cfg[CZ_PATH_MAX + 32], log[CZ_PATH_MAX + 32],
        state[CZ_PATH_MAX + 32], attempts[CZ_PATH_MAX + 32];
} point_files;

static void point_files_of(const cz_sweep_point *p, point_files *f) {
    sw_join(f->lock, sizeof f->lock, p->dir, ".lock");
    sw_join(f->cfg, sizeof f->cfg, p->dir, "point.cfg");
    sw_join(f->log, sizeof f->log, p->dir, "train.log");
    sw_join(f->state, sizeof f->state, p->dir, "state.json");
    sw_join(f->attempts, sizeof f->attempts, p->dir, "attempts.jsonl");
}

/* How one invocation ended. */
typedef struct attempt {
    time_t started;
    double wall;
    int status, exit_code, forwarded;
    int have; /* metrics.jsonl was read: m holds it */
    cz_point_metrics m;
    cz_run_outcome out;
    char reason[CZ_ERROR_MAX];
} attempt;

/* Done: the run exited 0 with its final evaluation; interrupted: a signal
 * stopped it after a checkpoint; else failed, with the log's error line. */
static void judge(const cz_sweep_point *p, const char *log, attempt *a) {
    a->exit_code = WIFEXITED(a->status) ? WEXITSTATUS(a->status) : -1;
    a->reason[0] = 0;
    if (a->exit_code == 0 && a->have && a->m.complete)
        a->out = CZ_RUN_DONE;
    else if (a->forwarded || (a->exit_code == 0 && a->have && a->m.last_step < p->cfg.train.steps))
        a->out = CZ_RUN_INTERRUPTED;
    else
        a->out = CZ_RUN_FAILED;
    if (a->out != CZ_RUN_FAILED) return;
    char last[1024];
    sw_last_error_line(log, last, sizeof last);
    if (WIFSIGNALED(a->status))
        snprintf(a->reason, sizeof a->reason, "killed by signal %d; %s", WTERMSIG(a->status), last);
    else
        snprintf(a->reason, sizeof a->reason, "exit %d; %s", a->exit_code, last);
}

/* A line in attempts.jsonl, and state.json for a done or failed run. */
static int record(const point_files *f, const attempt *a, cz_error *err) {
    static const char *const names[] = {"done", "failed", "interrupted"};
    char line[2 * CZ_ERROR_MAX + 256], esc[2 * CZ_ERROR_MAX];
    sw_json_escape(a->reason, esc, sizeof esc);
    snprintf(
        line, sizeof line,
        "{\"started\":%lld,\"wall_s\":%.3f,\"exit\":%d,\"outcome\":\"%s\",\"last_step\":%ld%s%s%s}",
        (long long)a->started, a->wall, a->exit_code, names[a->out], a->have ? a->m.last_step : 0L,
        a->reason[0] ? ",\"error\":\"" : "", esc, a->reason[0] ? "\"" : "");
    sw_append_line(f->attempts, line);
    if (a->out != CZ_RUN_DONE && a->out != CZ_RUN_FAILED) return 0;
    char text[2 * CZ_ERROR_MAX + 64];
    if (a->out == CZ_RUN_DONE)
        snprintf(text, sizeof text, "{\"status\":\"done\"}\n");
    else
        snprintf(text, sizeof text, "{\"status\":\"failed\",\"error\":\"%s\"}\n", esc);
    return cz_write_file_atomic(f->state, text, strlen(text), err);
}

/* Starts the point's cloze-train and waits for it: 0, or -1 with err when
 * it cannot be started or its metrics cannot be read. */
static int run_once(const cz_sweep *s, const cz_sweep_point *p, const cz_sweep_tools *t,
                    const cz_run_options *o, point_files *f, attempt *a, cz_error *err) {
    launch_argv la;
    if (o->launch == CZ_LAUNCH_MPIRUN) {
        mpirun_argv(&la, s, t, f->cfg, "--resume");
    } else {
        /* cloze.sbatch: ranks and threads from the allocation, --resume auto,
         * SIGUSR1 forwarded to the ranks, requeue after they checkpoint */
        la.argv[0] = (char *)t->sbatch;
        la.argv[1] = f->cfg;
        la.argv[2] = NULL;
    }
    double t0 = cz_now();
    a->started = time(NULL);
    pid_t pid = sw_spawn(la.argv, f->log, o->launch == CZ_LAUNCH_SBATCH ? "CLOZE_TRAIN" : NULL,
                         t->train, err);
    if (pid < 0) return -1;
    a->forwarded = 0;
    a->status = sw_wait_child(pid, p, o, t0, &a->forwarded);
    a->wall = cz_now() - t0;
    int rc = cz_point_read_metrics(p, &a->m, err);
    a->have = rc == 0;
    return rc < 0 ? -1 : 0;
}

cz_run_outcome cz_sweep_run_point(cz_sweep *s, int i, const cz_sweep_tools *t,
                                  const cz_run_options *o, cz_error *err) {
    cz_sweep_point *p = &s->points[i];
    cz_run_outcome ready = check_runnable(p, t, o, err);
    if (ready != CZ_RUN_DONE) return ready;
    point_files f;
    point_files_of(p, &f);
    int lock_fd = sw_lock(f.lock, 0);
    if (lock_fd < 0) return CZ_RUN_BUSY;
    /* another process may have finished it between the look and the lock */
    char why[CZ_ERROR_MAX];
    cz_point_state st = cz_point_get_state(p, why, sizeof why);
    if (st == CZ_POINT_DONE) {
        sw_unlock(lock_fd);
        return CZ_RUN_SKIPPED;
    }
    if (st == CZ_POINT_FAILED) unlink(f.state); /* a rerun retries it */
    attempt a;
    memset(&a, 0, sizeof a);
    if (run_once(s, p, t, o, &f, &a, err) != 0) {
        sw_unlock(lock_fd);
        return CZ_RUN_FAILED;
    }
    judge(p, f.log, &a);
    cz_error e2;
    if (record(&f, &a, &e2) != 0) {
        sw_unlock(lock_fd);
        cz_fail(err, "%s", e2.msg);
        return CZ_RUN_FAILED;
    }
    sw_unlock(lock_fd);
    if (a.out == CZ_RUN_FAILED) cz_fail(err, "%s (log: %s)", a.reason, f.log);
    cz_error e3;
    if (cz_sweep_write_results(s, &e3) != 0 && !o->quiet)
        fprintf(stderr, "cloze-sweep: warning: %s\n", e3.msg);
    return a.out;
}

/* ---- probes ---- */

/* What a step's time depends on. */
static void shape_key(const cz_sweep *s, const cz_sweep_point *p, char *buf, size_t len) {
    const cz_config *c = &p->cfg;
    snprintf(buf, len, "%d:%d:%d:%d:%d:%d:%d:%d:%d:%d:%d:%d:%d:%d", (int)c->model.arch,
             c->model.layers, c->model.hidden, c->model.heads, c->model.intermediate,
             c->model.vocab_size, c->data.seq, c->data.max_pred, c->train.global_batch,
             c->train.micro_batch, s->ranks, s->threads, c->model.matmul_bf16, c->model.recompute);
}

int cz_sweep_probe_cached(const cz_sweep *s, int i, double *step_s, double *startup_s) {
    char path[CZ_PATH_MAX + 32], key[256];
    sw_join(path, sizeof path, s->dir, "probe.tsv");
    shape_key(s, &s->points[i], key, sizeof key);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char k[256];
        double a, b;
        if (sscanf(line, "%255s %lf %lf", k, &a, &b) == 3 && !strcmp(k, key)) {
            *step_s = a;
            *startup_s = b;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void remove_dir_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[CZ_PATH_MAX + 300];
        sw_join(path, sizeof path, dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cz_sweep_probe(cz_sweep *s, int i, const cz_sweep_tools *t, int steps, double *step_s,
                   double *startup_s, cz_error *err) {
    if (cz_sweep_probe_cached(s, i, step_s, startup_s)) return 0;
    cz_sweep_point *p = &s->points[i];
    if (!sw_executable(t->mpirun) || !sw_executable(t->train))
        return cz_fail(err, "probe: cannot find cloze-train or launch/cloze-mpirun");
    char dir[CZ_PATH_MAX + 64], cfg_path[CZ_PATH_MAX + 96], log[CZ_PATH_MAX + 96];
    sw_join(dir, sizeof dir, s->dir, "probe");
    char sub[CZ_PATH_MAX + 200];
    sw_join(sub, sizeof sub, dir, p->name);
    remove_dir_files(sub);
    if (cz_make_dirs(sub, err) != 0) return -1;
    sw_join(cfg_path, sizeof cfg_path, sub, "probe.cfg");
    sw_join(log, sizeof log, sub, "train.log");
    /* the point's configuration for a few steps, without evaluation */
    cz_sweep_point probe = *p;
    snprintf(probe.dir, sizeof probe.dir, "%s", sub);
    char a_steps[64], a_dir[CZ_PATH_MAX + 32];
    snprintf(a_steps, sizeof a_steps, "train.steps=%d", steps + 1);
    snprintf(a_dir, sizeof a_dir, "train.run_dir=%s", sub);
    const char *sets[] = {a_steps,
                          a_dir,
                          "data.heldout_manifest=",
                          "train.ckpt_every=0",
                          "train.log_every=1",
                          "optim.warmup_steps=0",
                          "optim.warmup_fraction=0.5"};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++)
        if (cz_config_set(&probe.cfg, sets[k], err) != 0) return -1;
    if (cz_config_write(&probe.cfg, cfg_path, err) != 0) return -1;
    launch_argv a;
    mpirun_argv(&a, s, t, cfg_path, "--quiet");
    double t0 = cz_now();
    pid_t pid = sw_spawn(a.argv, log, NULL, NULL, err);
    if (pid < 0) return -1;
    cz_run_options o = {CZ_LAUNCH_MPIRUN, 0, 1};
    int forwarded = 0;
    int status = sw_wait_child(pid, &probe, &o, t0, &forwarded);
    double wall = cz_now() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char last[1024];
        sw_last_error_line(log, last, sizeof last);
        return cz_fail(err, "probe of %s failed: %s (log: %s)", p->name, last, log);
    }
    /* median seconds of steps 2.. (the first pays for warm-up) */
    probe.cfg.train.steps = steps + 1;
    char mpath[CZ_PATH_MAX + 96];
    sw_join(mpath, sizeof mpath, sub, "metrics.jsonl");
    FILE *f = fopen(mpath, "r");
    double sec[1024], all = 0;
    int ns = 0;
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f)) {
            int has_step, has_sec;
            long step = (long)sw_json_number(line, "step", &has_step);
            double v = sw_json_number(line, "step_seconds", &has_sec);
            if (!has_step || !has_sec || !isfinite(v)) continue;
            all += v;
            if (step >= 2 && ns < 1024) sec[ns++] = v;
        }
        fclose(f);
    }
    if (ns == 0) return cz_fail(err, "probe of %s: no step times in %s", p->name, mpath);
    qsort(sec, (size_t)ns, sizeof sec[0], cmp_double);
    *step_s = sec[ns / 2];
    *startup_s = wall - all > 0 ? wall - all : 0;
    char tsv[CZ_PATH_MAX + 32], key[256], line[512];
    sw_join(tsv, sizeof tsv, s->dir, "probe.tsv");
    shape_key(s, p, key, sizeof key);
    snprintf(line, sizeof line, "%s\t%.6f\t%.3f\t%s", key, *step_s, *startup_s, p->name);
    sw_append_line(tsv, line);
    remove_dir_files(sub);
    rmdir(dir);
    return 0;
}
