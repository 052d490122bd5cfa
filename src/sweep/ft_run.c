/* sweep: running a point's fine-tuning tasks, each one `cloze-finetune grid`
 * (src/finetune/grid.c: BERT's grid, restarts and selection on dev) on the
 * point's final checkpoint through launch/cloze-mpirun, resumed where a
 * signal stopped it; ft_state.c reads what it leaves behind. */
#define _GNU_SOURCE
#include "sweep_internal.h"

#include "cloze/ckpt.h"
#include "cloze/finetune.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The cloze-finetune argument vector of task ft on checkpoint ckpt:
 * launch/cloze-mpirun -n R [-t T] cloze-finetune grid --init CKPT --task TASK
 * --train F --dev F --out DIR --restarts N [--lr L,..] [--batch B,..]
 * [--epochs E,..] [--threads T] [--exact] ARGS... --resume auto; --exact when the
 * point pre-trained with dist.exact = true: its fine-tuning is then exact too,
 * the same results on any rank count (docs/finetune.md) */
typedef struct ft_argv {
    char ranks[16], threads[16], restarts[16];
    char lists[CZ_SWEEP_MAX_GRID][16 * 33];
    char *argv[48 + CZ_SWEEP_MAX_GRID * 2];
    int n;
} ft_argv;

static void build_argv(ft_argv *a, const cz_sweep *s, const cz_sweep_tools *t,
                       const cz_sweep_finetune *ft, int exact, char *ckpt, char *dir) {
    int n = sw_launcher_argv(a->argv, a->ranks, a->threads, s, t);
    snprintf(a->restarts, sizeof a->restarts, "%d", ft->restarts);
    a->argv[n++] = (char *)t->finetune;
    a->argv[n++] = "grid";
    a->argv[n++] = "--init";
    a->argv[n++] = ckpt;
    a->argv[n++] = "--task";
    a->argv[n++] = (char *)ft->task;
    a->argv[n++] = "--train";
    a->argv[n++] = (char *)ft->train;
    a->argv[n++] = "--dev";
    a->argv[n++] = (char *)ft->dev;
    a->argv[n++] = "--out";
    a->argv[n++] = dir;
    a->argv[n++] = "--restarts";
    a->argv[n++] = a->restarts;
    for (int g = 0; g < ft->n_grid; g++) {
        const cz_sweep_grid_param *gp = &ft->grid[g];
        size_t o = 0;
        for (int v = 0; v < gp->n; v++)
            o += (size_t)snprintf(a->lists[g] + o, sizeof a->lists[g] - o, "%s%s", v ? "," : "",
                                  gp->values[v]);
        static char opt[3][12] = {"--lr", "--batch", "--epochs"};
        a->argv[n++] = !strcmp(gp->name, "lr")      ? opt[0]
                       : !strcmp(gp->name, "batch") ? opt[1]
                                                    : opt[2];
        a->argv[n++] = a->lists[g];
    }
    if (s->threads > 0) {
        a->argv[n++] = "--threads";
        a->argv[n++] = a->threads;
    }
    if (exact) a->argv[n++] = "--exact";
    for (int k = 0; k < ft->n_args; k++) a->argv[n++] = (char *)ft->args[k];
    a->argv[n++] = "--resume";
    a->argv[n++] = "auto";
    a->argv[n] = NULL;
    a->n = n;
}

/* The arguments that decide the results (everything after the launcher's
 * -n/-t and the program's path), one per line. */
static char *args_text(const ft_argv *a) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    int start = 0;
    while (start < a->n && strcmp(a->argv[start], "grid")) start++;
    for (int k = start; k < a->n; k++)
        if (strcmp(a->argv[k], "--threads") && (k == 0 || strcmp(a->argv[k - 1], "--threads")))
            fprintf(f, "%s\n", a->argv[k]);
    fclose(f);
    return text;
}

static int write_state(const char *dir, const char *error, cz_error *err) {
    char path[CZ_PATH_MAX + 192], esc[2 * CZ_ERROR_MAX], text[2 * CZ_ERROR_MAX + 64];
    sw_join(path, sizeof path, dir, "state.json");
    if (error) {
        sw_json_escape(error, esc, sizeof esc);
        snprintf(text, sizeof text, "{\"status\":\"failed\",\"error\":\"%s\"}\n", esc);
    } else {
        snprintf(text, sizeof text, "{\"status\":\"done\"}\n");
    }
    return cz_write_file_atomic(path, text, strlen(text), err);
}

/* One task on one point: 0 done or failed (recorded), 1 interrupted. */
static int run_task(cz_sweep *s, cz_sweep_point *p, int k, const cz_sweep_tools *t,
                    const cz_run_options *o, char *ckpt) {
    const cz_sweep_finetune *ft = &s->finetune[k];
    char dir[CZ_PATH_MAX + 128], path[CZ_PATH_MAX + 192], log[CZ_PATH_MAX + 192];
    sw_ft_task_dir(p, ft, dir, sizeof dir);
    sw_join(log, sizeof log, dir, "finetune.log");
    cz_error err = {{0}};
    char why[CZ_ERROR_MAX + 256];
    ft_argv a;
    build_argv(&a, s, t, ft, p->cfg.dist.exact, ckpt, dir);
    char *want = args_text(&a);
    if (!want) return write_state(dir, "out of memory", &err), 0;
    if (cz_make_dirs(dir, &err) != 0) {
        free(want);
        fprintf(stderr, "cloze-sweep: %s\n", err.msg);
        return 0;
    }
    /* a task run with other arguments (the spec changed) is not continued */
    sw_join(path, sizeof path, dir, "args.txt");
    char *have = sw_slurp(path);
    if (have && strcmp(have, want)) {
        snprintf(why, sizeof why,
                 "%s: fine-tuning %s ran with other arguments (the spec's finetune changed); "
                 "remove %s to run it afresh",
                 path, ft->name, dir);
        cz_free(have);
        free(want);
        write_state(dir, why, &err);
        return 0;
    }
    cz_free(have);
    int rc = cz_write_file_atomic(path, want, strlen(want), &err);
    free(want);
    if (rc != 0) return write_state(dir, err.msg, &err), 0;
    if (!t->finetune[0] || !sw_executable(t->finetune)) {
        write_state(dir, "no cloze-finetune beside cloze-sweep (set CLOZE_FINETUNE)", &err);
        return 0;
    }
    if (!sw_executable(t->mpirun)) {
        write_state(dir, "cannot find launch/cloze-mpirun (set CLOZE_MPIRUN)", &err);
        return 0;
    }
    /* a selection left by an earlier, complete grid must not be taken for
     * this run's: the grid rewrites grid.jsonl from all its points */
    sw_join(path, sizeof path, dir, "grid.jsonl");
    unlink(path);
    double t0 = cz_now();
    pid_t pid = sw_spawn(a.argv, log, NULL, NULL, &err);
    if (pid < 0) return write_state(dir, err.msg, &err), 0;
    cz_run_options quiet = *o;
    quiet.progress_s = 0; /* the point's progress line would be pre-training's */
    int forwarded = 0;
    int status = sw_wait_child(pid, p, &quiet, t0, &forwarded);
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    cz_ft_grid_selection sel;
    int selected = cz_ft_grid_read(dir, &sel, &err) == 0;
    if (exit_code == 0 && selected) {
        write_state(dir, NULL, &err);
        return 0;
    }
    if (forwarded || (exit_code == 0 && !selected)) return 1; /* stopped with a checkpoint */
    char last[1024];
    sw_last_error_line(log, last, sizeof last);
    if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "cloze-finetune killed by signal %d; %s (log: %s)",
                 WTERMSIG(status), last, log);
    else
        snprintf(why, sizeof why, "cloze-finetune exit %d; %s (log: %s)", exit_code, last, log);
    write_state(dir, why, &err);
    return 0;
}

cz_run_outcome cz_sweep_finetune_point(cz_sweep *s, int i, const cz_sweep_tools *t,
                                       const cz_run_options *o, int *ran, cz_error *err) {
    cz_sweep_point *p = &s->points[i];
    *ran = 0;
    if (s->n_finetune == 0) return CZ_RUN_DONE;
    char lock[CZ_PATH_MAX + 32], why[CZ_ERROR_MAX];
    sw_join(lock, sizeof lock, p->dir, ".lock");
    int lock_fd = sw_lock(lock, 0);
    if (lock_fd < 0) return CZ_RUN_BUSY;
    if (cz_point_get_state(p, why, sizeof why) != CZ_POINT_DONE) {
        sw_unlock(lock_fd);
        cz_fail(err, "%s: pre-training has not finished", p->name);
        return CZ_RUN_FAILED;
    }
    char ckpt[CZ_PATH_MAX + 32];
    cz_ckpt_path(ckpt, sizeof ckpt, p->dir, p->cfg.train.steps);
    if (!sw_file_exists(ckpt)) {
        sw_unlock(lock_fd);
        cz_fail(err, "%s: no final checkpoint to fine-tune", ckpt);
        return CZ_RUN_FAILED;
    }
    cz_run_outcome out = CZ_RUN_DONE;
    for (int k = 0; k < s->n_finetune && !cz_sweep_stop_requested(); k++) {
        cz_ft_summary f;
        cz_ft_state st = cz_sweep_ft_read(s, p, k, &f);
        if (st == CZ_FT_DONE) continue;
        if (!o->quiet) {
            printf("  fine-tuning %s: %s, %d cloze-finetune run(s)\n", s->finetune[k].name,
                   st == CZ_FT_INTERRUPTED ? "resuming"
                   : st == CZ_FT_FAILED    ? "retrying"
                                           : "starting",
                   cz_sweep_ft_runs(&s->finetune[k]));
            fflush(stdout);
        }
        if (st == CZ_FT_FAILED) {
            char dir[CZ_PATH_MAX + 128], state[CZ_PATH_MAX + 192];
            sw_ft_task_dir(p, &s->finetune[k], dir, sizeof dir);
            sw_join(state, sizeof state, dir, "state.json");
            unlink(state); /* a rerun retries it */
        }
        (*ran)++;
        if (run_task(s, p, k, t, o, ckpt)) {
            out = CZ_RUN_INTERRUPTED;
            if (!o->quiet)
                printf("  fine-tuning %s: interrupted (checkpointed)\n", s->finetune[k].name);
            break;
        }
        st = cz_sweep_ft_read(s, p, k, &f);
        if (!o->quiet) {
            if (st == CZ_FT_DONE)
                printf("  fine-tuning %s: dev %s %.2f ± %.2f (%d restarts of the selected "
                       "configuration)\n",
                       s->finetune[k].name, f.metric[0] ? f.metric : "score", f.mean, f.std, f.n);
            else
                printf("  fine-tuning %s FAILED: %s\n", s->finetune[k].name, f.error);
            fflush(stdout);
        }
    }
    if (cz_sweep_stop_requested() && out == CZ_RUN_DONE) {
        int done;
        if (cz_sweep_ft_finished(s, p, &done) < s->n_finetune) out = CZ_RUN_INTERRUPTED;
    }
    sw_unlock(lock_fd);
    cz_error e2;
    if (cz_sweep_write_results(s, &e2) != 0 && !o->quiet)
        fprintf(stderr, "cloze-sweep: warning: %s\n", e2.msg);
    return out;
}
