/* sweep: helpers shared by the files of the module (not a public header).
 *
 * The files call one way, each only the ones before it (and util.c, csv.c,
 * which call none):
 *
 *   spec.c      the spec file, its points, each point's configuration and costs
 *   point.c     a point's directory: point.cfg, state, metrics.jsonl, attempts
 *   proc.c      child processes: the tools, spawning, waiting, stop signals
 *   ft_state.c  what a point's fine-tuning directories say (grid.jsonl read
 *               through finetune's cz_ft_grid_read)
 *   results.c   results.csv and results.jsonl from the point directories
 *   exec.c      running a point and its probe, then rewriting the results
 *   ft_run.c    running a point's fine-tuning, then rewriting the results
 *   slurm.c     the job array and the report job
 *   fit.c       least-squares fits
 *   mutransfer.c  the report's µTransfer figure and table (lr x width)
 *   report.c    report.md, fits.json and the figures from results.csv alone
 *   coordcheck.c  µP's coordinate check (cloze-sweep coordcheck): calls none
 *
 * Every allocation is checked: running out of memory is a cz_error that
 * travels up to cloze-sweep's main like any other. */
#ifndef CLOZE_SWEEP_INTERNAL_H
#define CLOZE_SWEEP_INTERNAL_H

#include "cloze/sweep.h"

#include <stddef.h>
#include <sys/types.h>

/* DIR/name into buf (truncation is an error the callers cannot meet: every
 * buffer is CZ_PATH_MAX + a margin and paths are checked when read). */
void sw_join(char *buf, size_t len, const char *dir, const char *name);
int sw_file_exists(const char *path);

/* "1e13", "0.0003", "128": the shortest %g text that reads back to v, with
 * the exponent's '+' and leading zeros dropped (point names, tables). */
void sw_format_number(double v, char *buf, size_t len);

/* The number after "key": in a flat one-line JSON object; NaN for null;
 * 0 and *found = 0 when the key is absent. */
double sw_json_number(const char *line, const char *key, int *found);

/* Takes an exclusive flock on path (created); returns the fd, or -1 when
 * another process holds it (wait = 0) or on error. */
int sw_lock(const char *path, int wait);
void sw_unlock(int fd);

/* Training FLOPs (3 x forward, cz_model_forward_flops) of one step of the
 * configuration's first phase: what MFU counts. */
double sw_flops_per_step(const cz_config *c);

void sw_json_escape(const char *s, char *buf, size_t len);
int sw_append_line(const char *path, const char *line);

/* The whole file as a NUL-terminated string (free it with cz_free), or
 * NULL when it cannot be read. */
char *sw_slurp(const char *path);

/* DIR/points/NAME/finetune/TASK: where task ft of point p runs. */
void sw_ft_task_dir(const cz_sweep_point *p, const cz_sweep_finetune *ft, char *buf, size_t len);

/* ---- child processes (proc.c) ---- */
int sw_executable(const char *path);
/* Starts argv with stdout and stderr appended to log, in its own process
 * group, env_name=env_value set when env_name is not NULL. */
pid_t sw_spawn(char *const argv[], const char *log, const char *env_name, const char *env_value,
               cz_error *err);
/* Waits for the child, forwarding the sweep's stop requests (the first as
 * SIGUSR1: checkpoint and exit; a third as SIGKILL); *forwarded = 1 once one
 * was. Progress lines of point p every o->progress_s seconds. */
int sw_wait_child(pid_t pid, const cz_sweep_point *p, const cz_run_options *o, double t0,
                  int *forwarded);
/* launch/cloze-mpirun -n RANKS [-t THREADS] into argv (ranks and threads:
 * 16-byte buffers that argv points into); returns the count. */
int sw_launcher_argv(char **argv, char *ranks, char *threads, const cz_sweep *s,
                     const cz_sweep_tools *t);
/* The line of log that best says why a run failed. */
void sw_last_error_line(const char *log, char *buf, size_t len);

/* ---- mutransfer.c ---- */
/* A learning-rate x width sweep (optim.lr and model.hidden each with 2 or
 * more values among the done rows): mutransfer.dat in out_dir and its
 * figure's commands in gp (held-out loss against log2(lr), a line per
 * width, a panel per model.parametrization); 1 when written, 0 when the
 * results are no such sweep, -1 with err. */
int sw_mutransfer_figure(const cz_sweep_csv *c, const char *out_dir, FILE *gp, cz_error *err);
/* report.md's section of it: the figure, each width's best learning rate
 * (seed spread) and its drift in factors of 2; nothing when no such sweep. */
void sw_mutransfer_text(const cz_sweep_csv *c, FILE *md, int plotted);

#endif
