/* sweep: running points as child processes, forwarding signals, recording
 * outcomes, and the short probe runs that price a plan. */
#define _GNU_SOURCE
#include "sweep_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- tools ---- */

int sw_executable(const char *path) {
    return path[0] && access(path, X_OK) == 0;
}

/* env, else the first of the candidates that is executable, else "". */
static void find_tool(char *out, const char *env, const char *bindir, const char *const *names) {
    const char *e = getenv(env);
    out[0] = 0;
    if (e && e[0]) {
        snprintf(out, CZ_PATH_MAX, "%s", e);
        return;
    }
    for (; *names; names++) {
        char path[CZ_PATH_MAX];
        sw_join(path, sizeof path, bindir, *names);
        if (sw_executable(path)) {
            char real[PATH_MAX];
            snprintf(out, CZ_PATH_MAX, "%s", realpath(path, real) ? real : path);
            return;
        }
    }
}

int cz_sweep_find_tools(cz_sweep_tools *t, cz_error *err) {
    memset(t, 0, sizeof *t);
    ssize_t n = readlink("/proc/self/exe", t->self, sizeof t->self - 1);
    if (n <= 0) return cz_fail(err, "/proc/self/exe: cannot read: %s", strerror(errno));
    t->self[n] = 0;
    char copy[CZ_PATH_MAX], bindir[CZ_PATH_MAX];
    snprintf(copy, sizeof copy, "%s", t->self);
    snprintf(bindir, sizeof bindir, "%s", dirname(copy));
    /* beside cloze-sweep (a user's own copy wins), an install's
     * PREFIX/share/cloze/launch next to its bin/, then the launch/ of the
     * source tree this build was configured from (CZ_SOURCE_LAUNCH_DIR, set
     * by CMakeLists.txt): a build directory can be anywhere */
    static const char *const train[] = {"cloze-train", NULL};
    static const char *const mpirun[] = {"cloze-mpirun", "../share/cloze/launch/cloze-mpirun",
                                         CZ_SOURCE_LAUNCH_DIR "/cloze-mpirun", NULL};
    static const char *const sbatch[] = {"cloze.sbatch", "../share/cloze/launch/cloze.sbatch",
                                         CZ_SOURCE_LAUNCH_DIR "/cloze.sbatch", NULL};
    static const char *const finetune[] = {"cloze-finetune", NULL};
    find_tool(t->train, "CLOZE_TRAIN", bindir, train);
    find_tool(t->mpirun, "CLOZE_MPIRUN", bindir, mpirun);
    find_tool(t->sbatch, "CLOZE_SBATCH", bindir, sbatch);
    find_tool(t->finetune, "CLOZE_FINETUNE", bindir, finetune);
    return 0;
}

/* ---- signals ---- */

static volatile sig_atomic_t stop_signal, stop_count;

static void on_signal(int sig) {
    stop_signal = sig;
    stop_count++;
}

void cz_sweep_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}

int cz_sweep_stop_requested(void) {
    return stop_signal;
}

/* ---- child processes ---- */

/* Starts argv with stdout and stderr appended to log, in its own process
 * group (so that a terminal's Ctrl-C reaches only the sweep, which then asks
 * the run to checkpoint), and asked to stop (SIGTERM) if the sweep dies. */
pid_t sw_spawn(char *const argv[], const char *log, const char *env_name, const char *env_value,
               cz_error *err) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        cz_fail(err, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (fd < 0 || in < 0) _exit(126);
        dup2(in, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
        if (env_name) setenv(env_name, env_value, 1);
        execv(argv[0], argv);
        dprintf(2, "cloze-sweep: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL); /* a signal ends it early: fine, the caller loops */
}

/* The last line of the log that reports an error: cloze-train's "program:
 * error (rank r): ..." first (mpirun's help text after it mentions "error"
 * too), else any line with "error", else the last non-empty line. */
void sw_last_error_line(const char *log, char *buf, size_t len) {
    buf[0] = 0;
    FILE *f = fopen(log, "r");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 65536 ? size - 65536 : 0, SEEK_SET);
    char line[2048], last[2048] = "", err_line[2048] = "", cloze_line[2048] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        snprintf(last, sizeof last, "%s", line);
        if (strstr(line, ": error"))
            snprintf(cloze_line, sizeof cloze_line, "%s", line);
        else if (strstr(line, "error") || strstr(line, "Error"))
            snprintf(err_line, sizeof err_line, "%s", line);
    }
    fclose(f);
    snprintf(buf, len, "%s", cloze_line[0] ? cloze_line : err_line[0] ? err_line : last);
}

void sw_json_escape(const char *s, char *buf, size_t len) {
    size_t o = 0;
    for (; *s && o + 7 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(buf + o, len - o, "\\u%04x", c);
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = 0;
}

int sw_append_line(const char *path, const char *line) {
    FILE *f = fopen(path, "a");
    if (!f) return -1;
    fprintf(f, "%s\n", line);
    return fclose(f);
}

static void print_progress(const cz_sweep_point *p, double elapsed) {
    cz_point_metrics m;
    if (cz_point_read_metrics(p, &m) != 0 || m.last_step == 0) return;
    long steps = p->cfg.train.steps;
    char eta[32], el[32];
    double per = m.train_s / (double)m.last_step;
    cz_format_duration(per * (double)(steps - m.last_step), eta, sizeof eta);
    cz_format_duration(elapsed, el, sizeof el);
    fprintf(stderr, "cloze-sweep:   %s: step %ld/%ld (%.0f%%) after %s, ETA %s\n", p->name,
            m.last_step, steps, 100.0 * (double)m.last_step / (double)steps, el, eta);
}

/* Waits for the child, forwarding the sweep's stop requests: the first as
 * SIGUSR1 (checkpoint and exit), a third as SIGKILL to its process group. */
int sw_wait_child(pid_t pid, const cz_sweep_point *p, const cz_run_options *o, double t0,
                  int *forwarded) {
    int status = 0, sent = 0;
    double next_progress = t0 + (o->progress_s > 0 ? o->progress_s : 1e300);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) {
            status = 0x7f00; /* unknown: treat as failed */
            break;
        }
        if (stop_count > sent) {
            if (sent == 0) {
                kill(pid, o->launch == CZ_LAUNCH_SBATCH ? stop_signal : SIGUSR1);
                if (!o->quiet)
                    fprintf(stderr,
                            "cloze-sweep: signal %d: asking %s to checkpoint and stop (send it "
                            "twice more to kill it)\n",
                            (int)stop_signal, p->name);
            } else if (stop_count >= 3) {
                kill(-pid, SIGKILL);
            }
            sent = stop_count;
            *forwarded = 1;
        }
        double now = cz_now();
        if (now >= next_progress && !o->quiet) {
            print_progress(p, now - t0);
            next_progress = now + o->progress_s;
        }
        sleep_s(0.1);
    }
    return status;
}

/* launch/cloze-mpirun -n RANKS [-t THREADS] cloze-train CONFIG OPTION...:
 * "--resume" (auto: a point) or "--quiet" (a probe) */
typedef struct launch_argv {
    char ranks[16], threads[16];
    char *argv[16];
} launch_argv;

int sw_launcher_argv(char **argv, char *ranks, char *threads, const cz_sweep *s,
                     const cz_sweep_tools *t) {
    int n = 0;
    snprintf(ranks, 16, "%d", s->ranks);
    snprintf(threads, 16, "%d", s->threads);
    argv[n++] = (char *)t->mpirun;
    argv[n++] = "-n";
    argv[n++] = ranks;
    if (s->threads > 0) {
        argv[n++] = "-t";
        argv[n++] = threads;
    }
    return n;
}

static void mpirun_argv(launch_argv *a, const cz_sweep *s, const cz_sweep_tools *t, char *cfg,
                        const char *option) {
    int n = sw_launcher_argv(a->argv, a->ranks, a->threads, s, t);
    a->argv[n++] = (char *)t->train;
    a->argv[n++] = cfg;
    a->argv[n++] = (char *)option;
    if (!strcmp(option, "--resume")) a->argv[n++] = "auto";
    a->argv[n] = NULL;
}

cz_run_outcome cz_sweep_run_point(cz_sweep *s, int i, const cz_sweep_tools *t,
                                  const cz_run_options *o, cz_error *err) {
    cz_sweep_point *p = &s->points[i];
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
    char lock[CZ_PATH_MAX + 32], cfg[CZ_PATH_MAX + 32], log[CZ_PATH_MAX + 32],
        state[CZ_PATH_MAX + 32], attempts[CZ_PATH_MAX + 32];
    sw_join(lock, sizeof lock, p->dir, ".lock");
    sw_join(cfg, sizeof cfg, p->dir, "point.cfg");
    sw_join(log, sizeof log, p->dir, "train.log");
    sw_join(state, sizeof state, p->dir, "state.json");
    sw_join(attempts, sizeof attempts, p->dir, "attempts.jsonl");
    int lock_fd = sw_lock(lock, 0);
    if (lock_fd < 0) return CZ_RUN_BUSY;
    /* another process may have finished it between the look and the lock */
    st = cz_point_get_state(p, why, sizeof why);
    if (st == CZ_POINT_DONE) {
        sw_unlock(lock_fd);
        return CZ_RUN_SKIPPED;
    }
    if (st == CZ_POINT_FAILED) unlink(state); /* a rerun retries it */

    launch_argv a;
    if (o->launch == CZ_LAUNCH_MPIRUN) {
        mpirun_argv(&a, s, t, cfg, "--resume");
    } else {
        /* cloze.sbatch: ranks and threads from the allocation, --resume auto,
         * SIGUSR1 forwarded to the ranks, requeue after they checkpoint */
        a.argv[0] = (char *)t->sbatch;
        a.argv[1] = cfg;
        a.argv[2] = NULL;
    }
    char **argv = a.argv;
    double t0 = cz_now();
    time_t started = time(NULL);
    pid_t pid =
        sw_spawn(argv, log, o->launch == CZ_LAUNCH_SBATCH ? "CLOZE_TRAIN" : NULL, t->train, err);
    if (pid < 0) {
        sw_unlock(lock_fd);
        return CZ_RUN_FAILED;
    }
    int forwarded = 0;
    int status = sw_wait_child(pid, p, o, t0, &forwarded);
    double wall = cz_now() - t0;
    cz_point_metrics m;
    int have = cz_point_read_metrics(p, &m) == 0;
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    cz_run_outcome out;
    char reason[CZ_ERROR_MAX] = "";
    if (exit_code == 0 && have && m.complete)
        out = CZ_RUN_DONE;
    else if (forwarded || (exit_code == 0 && have && m.last_step < p->cfg.train.steps))
        out = CZ_RUN_INTERRUPTED; /* stopped by a signal after a checkpoint */
    else
        out = CZ_RUN_FAILED;
    if (out == CZ_RUN_FAILED) {
        char last[1024];
        sw_last_error_line(log, last, sizeof last);
        if (WIFSIGNALED(status))
            snprintf(reason, sizeof reason, "killed by signal %d; %s", WTERMSIG(status), last);
        else
            snprintf(reason, sizeof reason, "exit %d; %s", exit_code, last);
    }
    static const char *const names[] = {"done", "failed", "interrupted"};
    char line[2 * CZ_ERROR_MAX + 256], esc[2 * CZ_ERROR_MAX];
    sw_json_escape(reason, esc, sizeof esc);
    snprintf(
        line, sizeof line,
        "{\"started\":%lld,\"wall_s\":%.3f,\"exit\":%d,\"outcome\":\"%s\",\"last_step\":%ld%s%s%s}",
        (long long)started, wall, exit_code, names[out], have ? m.last_step : 0L,
        reason[0] ? ",\"error\":\"" : "", esc, reason[0] ? "\"" : "");
    sw_append_line(attempts, line);
    if (out == CZ_RUN_DONE || out == CZ_RUN_FAILED) {
        char text[2 * CZ_ERROR_MAX + 64];
        if (out == CZ_RUN_DONE)
            snprintf(text, sizeof text, "{\"status\":\"done\"}\n");
        else
            snprintf(text, sizeof text, "{\"status\":\"failed\",\"error\":\"%s\"}\n", esc);
        cz_error e2;
        if (cz_write_file_atomic(state, text, strlen(text), &e2) != 0) {
            sw_unlock(lock_fd);
            cz_fail(err, "%s", e2.msg);
            return CZ_RUN_FAILED;
        }
    }
    sw_unlock(lock_fd);
    if (out == CZ_RUN_FAILED) cz_fail(err, "%s (log: %s)", reason, log);
    cz_error e3;
    if (cz_sweep_write_results(s, &e3) != 0 && !o->quiet)
        fprintf(stderr, "cloze-sweep: warning: %s\n", e3.msg);
    return out;
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
