/* sweep: child processes. Finding the programs a sweep runs, starting one
 * in its own process group with its output in a log, waiting for it while
 * forwarding the sweep's stop signals, and the line of a log that says why
 * a run failed. Used by the runs of points (exec.c) and of their
 * fine-tuning (ft_run.c). */
#define _GNU_SOURCE
#include "sweep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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

static void print_progress(const cz_sweep_point *p, double elapsed) {
    cz_point_metrics m;
    cz_error e; /* a progress line is skipped when the metrics cannot be read */
    if (cz_point_read_metrics(p, &m, &e) != 0 || m.last_step == 0) return;
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
