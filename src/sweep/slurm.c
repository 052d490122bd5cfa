/* sweep: `cloze-sweep submit`, a Slurm job array with one task per
 * unfinished point (`sbatch --array=LIST%K`) and a report job that runs when
 * the array has ended, however its tasks ended (`--dependency=afterany`).
 *
 * Each task runs `cloze-sweep task SPEC --index $SLURM_ARRAY_TASK_ID`, which
 * runs the point through launch/cloze.sbatch: --resume auto, SIGUSR1 before
 * the time limit or on preemption forwarded to the ranks, which checkpoint,
 * and the task requeues itself; the requeued task resumes. Then, in the same
 * allocation, it runs the point's fine-tuning tasks (ft_run.c). */
#include "sweep_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* 'text' for a shell script (single quotes, ' as '\'') */
static void shell_quote(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* The scripts' last line: cloze-sweep COMMAND SPEC --dir DIR TAIL. */
static void exec_line(FILE *f, const cz_sweep_tools *t, const cz_sweep *s, const char *command,
                      const char *tail) {
    shell_quote(f, t->self);
    fprintf(f, " %s ", command);
    shell_quote(f, s->spec);
    fprintf(f, " --dir ");
    shell_quote(f, s->dir);
    fprintf(f, "%s\n", tail);
}

/* Runs argv, its stdout into out (stderr passes through); exit status. */
static int run_capture(char *const argv[], char *out, size_t len, cz_error *err) {
    int fds[2];
    if (pipe(fds) != 0) return cz_fail(err, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return cz_fail(err, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        execvp(argv[0], argv);
        dprintf(2, "cloze-sweep: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(fds[0], out + n, len - 1 - n)) != 0) {
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        n += (size_t)r;
    }
    out[n] = 0;
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Writes the script path: its #SBATCH header (header, a printf format of
 * the sweep's name twice, the tasks' lines, then the rest of args in order),
 * then `exec cloze-sweep COMMAND ...TAIL`. */
static int write_script(const char *path, const cz_sweep *s, const cz_sweep_tools *t,
                        const char *command, const char *tail, const char *header,
                        const char *tasks, int cpus, const char *dir, cz_error *err) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return cz_fail(err, "%s: out of memory", path);
    fprintf(f, header, s->name, s->name, tasks, cpus, dir);
    fputs("exec ", f);
    exec_line(f, t, s, command, tail);
    int rc = fclose(f) == 0 ? cz_write_file_atomic(path, text, size, err)
                            : cz_fail(err, "%s: out of memory", path);
    free(text);
    return rc;
}

/* "0-3,5,7-9" */
static void index_list(const int *idx, int n, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 24 < len;) {
        int j = i;
        while (j + 1 < n && idx[j + 1] == idx[j] + 1) j++;
        if (j > i)
            o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", idx[i], idx[j]);
        else
            o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", idx[i]);
        i = j + 1;
    }
}

static void print_command(char *const argv[]) {
    fprintf(stderr, "cloze-sweep: $");
    for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
}

/* sbatch --parsable FIRST [slurm.args] [--sbatch-arg...] SCRIPT; the job id
 * (--parsable prints "id" or "id;cluster") into id. --dry-run prints the
 * command and returns a placeholder id. */
static int sbatch_job(const cz_sweep *s, const cz_submit_options *o, char *first, char *script,
                      char *id, size_t len, cz_error *err) {
    char *argv[64];
    int a = 0;
    argv[a++] = (char *)(o->sbatch ? o->sbatch : "sbatch");
    argv[a++] = "--parsable";
    argv[a++] = first;
    for (int i = 0; i < s->n_slurm_args && a < 40; i++) argv[a++] = (char *)s->slurm_args[i];
    for (int i = 0; i < o->n_extra && a < 60; i++) argv[a++] = (char *)o->extra[i];
    argv[a++] = script;
    argv[a] = NULL;
    char out[256] = "";
    if (o->dry_run) {
        print_command(argv);
        snprintf(out, sizeof out, "%s", strstr(first, "array") ? "ARRAY_JOB" : "REPORT_JOB");
    } else {
        int st = run_capture(argv, out, sizeof out, err);
        if (st != 0) return cz_fail(err, "exit %d", st);
    }
    out[strcspn(out, ";\r\n")] = 0;
    snprintf(id, len, "%s", out);
    return 0;
}

/* The points the array is to run, ascending, into idx: pending, interrupted
 * or failed ones, and done ones with fine-tuning left. Returns their count;
 * *invalid counts the points that cannot run. */
static int points_to_submit(const cz_sweep *s, int *idx, int *invalid) {
    int n = 0;
    *invalid = 0;
    for (int i = 0; i < s->n_points; i++) {
        cz_point_state st = cz_point_get_state(&s->points[i], NULL, 0);
        if (st == CZ_POINT_INVALID) {
            (*invalid)++;
            continue;
        }
        /* a pre-trained point with fine-tuning left is the task's to run (it
         * skips the pre-training) */
        if (cz_sweep_ft_left(s, &s->points[i], st) != 0) idx[n++] = i;
    }
    return n;
}

/* The array job's script (each task runs its point, resumed and requeued
 * on SIGUSR1) and the report job's, in dir. */
static int write_scripts(const cz_sweep *s, const cz_sweep_tools *t, const char *dir,
                         const char *array_path, const char *report_path, cz_error *err) {
    int threads = s->threads > 0 ? s->threads : 1;
    static const char array_header[] =
        "#!/usr/bin/env bash\n"
        "# Sweep %s: array task i runs point i of the spec (cloze-sweep task), resuming\n"
        "# from its newest checkpoint; SIGUSR1 (120 s before the time limit, or on\n"
        "# preemption) makes the point checkpoint and the task requeue itself.\n"
        "# Written by cloze-sweep submit.\n"
        "#SBATCH --job-name=%s\n%s#SBATCH --cpus-per-task=%d\n"
        "#SBATCH --requeue\n#SBATCH --open-mode=append\n#SBATCH --signal=B:USR1@120\n"
        "#SBATCH --output=%s/task-%%A_%%a.out\n";
    static const char report_header[] =
        "#!/usr/bin/env bash\n"
        "# Sweep %s: results.csv and the report, once the array has ended.\n"
        "#SBATCH --job-name=%s-report\n%s#SBATCH --cpus-per-task=%d\n"
        "#SBATCH --output=%s/report-%%j.out\n";
    /* a point across nodes: the same ranks on each (cloze.sbatch runs
     * mpirun over the allocation's nodes) */
    char tasks[96];
    if (s->nodes > 1)
        snprintf(tasks, sizeof tasks, "#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=%d\n",
                 s->nodes, s->ranks_per_node);
    else
        snprintf(tasks, sizeof tasks, "#SBATCH --ntasks=%d\n", s->ranks);
    if (write_script(array_path, s, t, "task", " --index \"$SLURM_ARRAY_TASK_ID\"", array_header,
                     tasks, threads, dir, err) != 0)
        return -1;
    return write_script(report_path, s, t, "report", "", report_header, "#SBATCH --ntasks=1\n", 1, dir,
                        err);
}

/* The array (at most k tasks at a time) and the report job after it; their
 * ids into array_id and report_id, recorded in dir/jobs.txt. */
static int submit_jobs(const cz_sweep *s, const cz_submit_options *o, const char *dir,
                       char *array_path, char *report_path, const char *list, int k, char *array_id,
                       char *report_id, size_t id_len, cz_error *err) {
    char array_arg[8300];
    snprintf(array_arg, sizeof array_arg, "--array=%s%%%d", list, k);
    const char *sbatch = o->sbatch ? o->sbatch : "sbatch";
    if (sbatch_job(s, o, array_arg, array_path, array_id, id_len, err) != 0)
        return cz_fail_prefix(err, "%s %s (is Slurm reachable? SLURM_CONF=%s)", sbatch, array_arg,
                              getenv("SLURM_CONF") ? getenv("SLURM_CONF") : "unset");
    char dep[96];
    snprintf(dep, sizeof dep, "--dependency=afterany:%s", array_id);
    if (sbatch_job(s, o, dep, report_path, report_id, id_len, err) != 0)
        return cz_fail_prefix(err,
                              "%s %s (the array job %s is queued; `cloze-sweep report` "
                              "makes the report by hand)",
                              sbatch, dep, array_id);
    if (!o->dry_run) {
        char jobs[CZ_PATH_MAX + 32], line[9000];
        sw_join(jobs, sizeof jobs, dir, "jobs.txt");
        FILE *j = fopen(jobs, "a");
        if (j) {
            snprintf(line, sizeof line, "array %s %s\nreport %s\n", array_id, list, report_id);
            fputs(line, j);
            fclose(j);
        }
    }
    return 0;
}

int cz_sweep_submit(cz_sweep *s, const cz_sweep_tools *t, const cz_submit_options *o,
                    cz_error *err) {
    char dir[CZ_PATH_MAX + 16];
    sw_join(dir, sizeof dir, s->dir, "slurm");
    if (cz_make_dirs(dir, err) != 0) return -1;
    int *idx = malloc(sizeof *idx * (size_t)(s->n_points + 1));
    if (!idx) return cz_fail(err, "out of memory for %d points", s->n_points);
    int invalid, n = points_to_submit(s, idx, &invalid);
    if (invalid > 0)
        fprintf(stderr,
                "cloze-sweep: %d point(s) are invalid and not submitted (see `cloze-sweep "
                "plan`); results.csv records why\n",
                invalid);
    if (cz_sweep_write_results(s, err) != 0) {
        free(idx);
        return -1;
    }
    if (n == 0) {
        free(idx);
        fprintf(stderr,
                "cloze-sweep: every point is done or invalid: nothing to submit (`cloze-sweep "
                "report` writes the report)\n");
        return 0;
    }
    int k = o->max_parallel > 0         ? o->max_parallel
            : s->slurm_max_parallel > 0 ? s->slurm_max_parallel
                                        : n;
    char array_path[CZ_PATH_MAX + 48], report_path[CZ_PATH_MAX + 48];
    sw_join(array_path, sizeof array_path, dir, "array.sbatch");
    sw_join(report_path, sizeof report_path, dir, "report.sbatch");
    char list[8192], array_id[64], report_id[64];
    index_list(idx, n, list, sizeof list);
    free(idx);
    if (write_scripts(s, t, dir, array_path, report_path, err) != 0 ||
        submit_jobs(s, o, dir, array_path, report_path, list, k, array_id, report_id,
                    sizeof array_id, err) != 0)
        return -1;
    printf("submitted array job %s (%d task(s): points %s, at most %d at a time) and report job "
           "%s (after the array); task logs in %s\n",
           array_id, n, list, k, report_id, dir);
    return 0;
}
