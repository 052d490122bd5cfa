/* sweep: scaling-study sweeps (cloze-sweep). A spec (libconfig, conf/sweeps/)
 * names a base training configuration and axes over any configuration key
 * (model.layers, model.hidden, optim.lr, ...), seeds, and a budget per point
 * in steps, tokens or FLOPs; each point of the grid is one cloze-train run in
 * its own directory. Results (one row per point) go to results.csv and
 * results.jsonl; the report (Markdown table in the layout of BERT's Table 6,
 * gnuplot figures, power-law and IsoFLOP fits) is made from results.csv only.
 *
 * The module sits above config and model: it builds each point's complete
 * configuration with the config module's loader (base file + --set
 * assignments), counts parameters and FLOPs with the model's own functions
 * (cz_model_count_params, cz_model_forward_flops: the count MFU uses), and
 * runs points as child processes (launch/cloze-mpirun locally,
 * launch/cloze.sbatch inside a Slurm array task). docs/sweeps.md is the
 * user's reference. */
#ifndef CLOZE_SWEEP_H
#define CLOZE_SWEEP_H

#include <stddef.h>
#include <stdio.h>

#include "cloze/config.h"
#include "cloze/core.h"

#define CZ_SWEEP_MAX_AXES 8
#define CZ_SWEEP_MAX_KEYS 4 /* keys set together by one axis (L/H/A triples) */
#define CZ_SWEEP_MAX_VALUES 64
#define CZ_SWEEP_MAX_SET 64
#define CZ_SWEEP_MAX_TASKS 8
#define CZ_SWEEP_MAX_GRID 8
#define CZ_SWEEP_KEY 64
#define CZ_SWEEP_TEXT 256
/* an axis value (a path, say): key=value must fit CZ_SWEEP_TEXT */
#define CZ_SWEEP_VALUE (CZ_SWEEP_TEXT - CZ_SWEEP_KEY - 1)

typedef enum {
    CZ_BUDGET_NONE = 0, /* train.steps of the configuration */
    CZ_BUDGET_STEPS = 1,
    CZ_BUDGET_TOKENS = 2, /* steps = tokens / (global_batch x seq) */
    CZ_BUDGET_FLOPS = 3   /* steps = FLOPs / training FLOPs per step: compute-matched */
} cz_budget_kind;

/* One axis: a key and its values, or several keys set together (a tuple per
 * value, e.g. BERT Table 6's L/H/A rows). Values are kept as --set text. */
typedef struct cz_sweep_axis {
    int n_keys;
    char keys[CZ_SWEEP_MAX_KEYS][CZ_SWEEP_KEY];
    int n_values;
    char values[CZ_SWEEP_MAX_VALUES][CZ_SWEEP_MAX_KEYS][CZ_SWEEP_VALUE];
    int line; /* in the spec, for messages */
} cz_sweep_axis;

/* A fine-tuning task run on each point's final checkpoint by cloze-finetune. */
typedef struct cz_sweep_grid_param {
    char name[32];
    int n;
    char values[16][32];
} cz_sweep_grid_param;

typedef struct cz_sweep_finetune {
    char name[CZ_SWEEP_KEY]; /* columns ft_NAME..., directory finetune/NAME; default: task */
    char task[CZ_SWEEP_KEY]; /* cloze-finetune --task */
    char data[CZ_PATH_MAX];  /* a directory holding train.tsv and dev.tsv */
    char train[CZ_PATH_MAX]; /* the files; "" = data/train.tsv, data/dev.tsv */
    char dev[CZ_PATH_MAX];
    int restarts;
    int n_grid; /* lr, batch, epochs: cloze-finetune grid's lists */
    cz_sweep_grid_param grid[CZ_SWEEP_MAX_GRID];
    int n_args; /* more cloze-finetune options, verbatim */
    char args[16][CZ_SWEEP_TEXT];
} cz_sweep_finetune;

typedef struct cz_sweep_point {
    int index;
    char name[160];
    char dir[CZ_PATH_MAX]; /* absolute: SWEEP_DIR/points/NAME */
    int n_assign;          /* the axis, seed and derived assignments, "key=value" */
    char assign[CZ_SWEEP_MAX_AXES * CZ_SWEEP_MAX_KEYS + 8][CZ_SWEEP_TEXT];
    double budget; /* nominal value of the point's budget (0: none) */
    int invalid;   /* the configuration does not load: error says why */
    char error[CZ_ERROR_MAX];
    cz_config cfg; /* complete configuration of the run (when valid) */
    /* costs, from the model's own formulas */
    size_t params, params_nonemb;
    double flops_per_token; /* training FLOPs (3 x forward) per token */
    double flops_total, tokens;
} cz_sweep_point;

typedef struct cz_sweep {
    char spec[CZ_PATH_MAX]; /* absolute path of the spec file */
    char name[CZ_SWEEP_KEY];
    char base[CZ_PATH_MAX]; /* base configuration, absolute */
    char dir[CZ_PATH_MAX];  /* sweep directory, absolute */
    int n_set, n_cli_set;   /* assignments for every point: the spec's, then the command line's */
    char set[CZ_SWEEP_MAX_SET][CZ_SWEEP_TEXT];
    int n_axes;
    cz_sweep_axis *axes;
    cz_budget_kind budget_kind;
    int n_budgets;
    double budgets[CZ_SWEEP_MAX_VALUES];
    int n_seeds;
    long long seeds[CZ_SWEEP_MAX_VALUES];
    char eval_manifest[CZ_PATH_MAX]; /* "" = the configuration's data.heldout_manifest */
    int eval_batches, eval_every;    /* -1 = the configuration's */
    int ranks, threads;              /* threads 0 = cores / ranks */
    int nodes, ranks_per_node;       /* a Slurm task's nodes; ranks = nodes x ranks_per_node */
    int slurm_max_parallel;
    int n_slurm_args;
    char slurm_args[16][CZ_SWEEP_TEXT];
    int n_finetune;
    cz_sweep_finetune finetune[CZ_SWEEP_MAX_TASKS];
    /* extra columns of results.csv: keys of the axes beyond the fixed ones */
    int n_extra;
    char extra[CZ_SWEEP_MAX_AXES * CZ_SWEEP_MAX_KEYS][CZ_SWEEP_KEY];
    int n_points;
    cz_sweep_point *points;
} cz_sweep;

/* What the command line adds to a spec. */
typedef struct cz_sweep_cli {
    const char *dir;        /* NULL: the spec's */
    const char *const *set; /* --set assignments for every point */
    int n_set;
    int ranks, threads; /* 0: the spec's */
} cz_sweep_cli;

/* Reads the spec, reconciles the command line's --set with the ones the sweep
 * directory recorded (DIR/overrides.txt: later commands without --set reuse
 * them; different ones are refused), and expands and resolves every point.
 * A point whose configuration does not load is kept with invalid = 1. */
int cz_sweep_load(cz_sweep **out, const char *spec_path, const cz_sweep_cli *cli, cz_error *err);
void cz_sweep_free(cz_sweep *s);

/* Creates the sweep directory, records the --set assignments and writes
 * each valid point's point.cfg; refuses a point whose directory holds a run
 * of a different configuration (the spec changed under it). */
int cz_sweep_materialize(cz_sweep *s, cz_error *err);
/* The same for point i alone (an array task). */
int cz_sweep_prepare_point(cz_sweep *s, int i, cz_error *err);

/* Index of the point named or numbered `which`, or -1. */
int cz_sweep_find_point(const cz_sweep *s, const char *which);

/* ---- a point's state, from its directory ---- */
typedef enum {
    CZ_POINT_PENDING = 0,
    CZ_POINT_RUNNING,     /* its lock is held (a run or an array task) */
    CZ_POINT_INTERRUPTED, /* checkpoints but no result: resumed next time */
    CZ_POINT_DONE,
    CZ_POINT_FAILED,
    CZ_POINT_INVALID /* its configuration does not load */
} cz_point_state;

const char *cz_point_state_name(cz_point_state st);

/* What metrics.jsonl says of a run (the last record of each step counts:
 * a resumed run repeats the steps after its checkpoint). */
typedef struct cz_point_metrics {
    long last_step; /* highest step recorded */
    int complete;   /* final evaluation at train.steps, then the end-of-run record */
    int have_eval;
    double eval_loss; /* BERT: held-out MLM loss; GPT: LM loss */
    double eval_mlm_acc, eval_nsp_acc;
    double train_s; /* sum of step_seconds over steps 1..steps */
    double mfu;     /* time-weighted over the steps */
    double last_step_seconds;
} cz_point_metrics;

/* 0 with m filled, 1 when the point has no metrics.jsonl yet, -1 with err
 * when memory runs out. */
int cz_point_read_metrics(const cz_sweep_point *p, cz_point_metrics *m, cz_error *err);
cz_point_state cz_point_get_state(const cz_sweep_point *p, char *why, size_t len);
/* Wall seconds of the invocations recorded in attempts.jsonl. */
double cz_point_wall_seconds(const cz_sweep_point *p);

/* ---- running ---- */

/* Programs a sweep runs, found beside cloze-sweep (or from the environment:
 * CLOZE_TRAIN, CLOZE_MPIRUN, CLOZE_SBATCH, CLOZE_FINETUNE). */
typedef struct cz_sweep_tools {
    char train[CZ_PATH_MAX];
    char mpirun[CZ_PATH_MAX];   /* launch/cloze-mpirun */
    char sbatch[CZ_PATH_MAX];   /* launch/cloze.sbatch */
    char finetune[CZ_PATH_MAX]; /* "" when this build has no cloze-finetune */
    char self[CZ_PATH_MAX];     /* cloze-sweep itself */
} cz_sweep_tools;

int cz_sweep_find_tools(cz_sweep_tools *t, cz_error *err);

typedef enum { CZ_LAUNCH_MPIRUN = 0, CZ_LAUNCH_SBATCH = 1 } cz_launch;

typedef struct cz_run_options {
    cz_launch launch;
    double progress_s; /* seconds between progress lines; 0 = none */
    int quiet;
} cz_run_options;

/* Outcome of cz_sweep_run_point. */
typedef enum {
    CZ_RUN_DONE = 0,
    CZ_RUN_FAILED = 1,
    CZ_RUN_INTERRUPTED = 2, /* a signal stopped it: resumed next time */
    CZ_RUN_BUSY = 3,        /* another process holds the point */
    CZ_RUN_SKIPPED = 4      /* already done */
} cz_run_outcome;

/* Runs (or resumes) one point and records the result; then rewrites
 * results.csv / results.jsonl. SIGINT, SIGTERM, SIGUSR1 and SIGHUP received
 * meanwhile are forwarded (as SIGUSR1: checkpoint and stop) and reported as
 * CZ_RUN_INTERRUPTED. */
cz_run_outcome cz_sweep_run_point(cz_sweep *s, int i, const cz_sweep_tools *t,
                                  const cz_run_options *o, cz_error *err);

/* Installs the handlers cz_sweep_run_point relies on; returns the signal
 * that asked the sweep to stop so far (0: none). */
void cz_sweep_signals_install(void);
int cz_sweep_stop_requested(void);

/* Measured seconds per step of a point's shape (a short cloze-train probe,
 * cached in DIR/probe.tsv), and the start-up seconds around the steps.
 * Returns 0, or -1 (err) when the probe run fails. */
int cz_sweep_probe(cz_sweep *s, int i, const cz_sweep_tools *t, int steps, double *step_s,
                   double *startup_s, cz_error *err);
/* Cached probe figures only (no run): 1 found, 0 not. */
int cz_sweep_probe_cached(const cz_sweep *s, int i, double *step_s, double *startup_s);

/* ---- fine-tuning per point ----
 * After a point's pre-training, each task of the spec runs as one
 * `cloze-finetune grid` (BERT's protocol: the grid, `restarts` seeds per
 * configuration, selection on the dev mean) on the point's final checkpoint,
 * through launch/cloze-mpirun with the point's ranks and threads, in
 *   DIR/points/POINT/finetune/NAME/  (--out: grid.jsonl, one run per point)
 *   .../NAME/args.txt                 the cloze-finetune arguments it ran with
 *   .../NAME/finetune.log             its output
 *   .../NAME/state.json               {"status":"done"} or failed with the error */
typedef enum {
    CZ_FT_PENDING = 0,
    CZ_FT_INTERRUPTED, /* started (a run directory exists), no result yet */
    CZ_FT_DONE,
    CZ_FT_FAILED
} cz_ft_state;

typedef struct cz_ft_summary {
    cz_ft_state state;
    double mean, std; /* the selected configuration's dev score over restarts (percent) */
    int n;            /* restarts behind mean and std */
    char metric[32];  /* accuracy, f1, mcc, ... */
    char error[CZ_ERROR_MAX];
} cz_ft_summary;

/* cloze-finetune runs one task costs per point: grid size x restarts. */
int cz_sweep_ft_runs(const cz_sweep_finetune *ft);
/* What point p's directory says of task k. */
cz_ft_state cz_sweep_ft_read(const cz_sweep *s, const cz_sweep_point *p, int k, cz_ft_summary *out);
/* Tasks of point p done or failed (k counts both; *done the done ones). */
int cz_sweep_ft_finished(const cz_sweep *s, const cz_sweep_point *p, int *done);
/* Fine-tuning tasks point p still needs (pending, interrupted or failed: a
 * failed one is retried), or -1 when p, in state st, is not pre-trained. A
 * point is complete, for `run` and for `submit` alike, when this is 0. */
int cz_sweep_ft_left(const cz_sweep *s, const cz_sweep_point *p, cz_point_state st);

/* Runs (or resumes) the fine-tuning tasks of point i that have no result:
 * CZ_RUN_DONE when every task is done or failed (a failure is recorded in
 * the task's state.json and the next run retries it), CZ_RUN_INTERRUPTED when
 * a signal stopped one (the next run resumes it), CZ_RUN_BUSY when another
 * process holds the point, CZ_RUN_FAILED when the point has no final
 * checkpoint. *ran: tasks started. Then rewrites results.csv / .jsonl. */
cz_run_outcome cz_sweep_finetune_point(cz_sweep *s, int i, const cz_sweep_tools *t,
                                       const cz_run_options *o, int *ran, cz_error *err);

/* ---- results ---- */

/* Rewrites DIR/results.csv and DIR/results.jsonl from the point directories
 * (done and failed points, in spec order), atomically, under a lock. */
int cz_sweep_write_results(const cz_sweep *s, cz_error *err);

/* The timing columns, which differ between two runs of the same sweep. */
extern const char *const cz_sweep_timing_columns[];

/* results.csv as text (RFC 4180 quoting; csv.c): the one writer and reader
 * of the file. A table of strings, cell[row][column], the header apart. */
typedef struct cz_sweep_csv {
    int ncol, nrow;
    char **head;
    char ***cell;
} cz_sweep_csv;

/* Parses text (name: the file, for messages). 0; -1 with err "name:line:
 * ..." for an empty text, a quoted field not closed, a row whose field
 * count is not the header's, or memory running out (c is then empty). */
int cz_sweep_csv_parse(const char *text, const char *name, cz_sweep_csv *c, cz_error *err);
int cz_sweep_csv_read(const char *path, cz_sweep_csv *c, cz_error *err);
void cz_sweep_csv_free(cz_sweep_csv *c);
/* The index of the column named name, or -1. */
int cz_sweep_csv_col(const cz_sweep_csv *c, const char *name);
/* Appends one field (quoted when it holds a comma, quote or line break; a
 * line break inside becomes a space), preceded by a comma unless first. */
void cz_sweep_csv_field(FILE *f, const char *text, int first);

/* ---- Slurm ---- */
typedef struct cz_submit_options {
    int max_parallel;         /* the %K of --array; 0: the spec's */
    const char *const *extra; /* more sbatch arguments */
    int n_extra;
    const char *sbatch; /* the sbatch program; NULL: "sbatch" on PATH */
    int dry_run;        /* write the scripts, print the commands */
} cz_submit_options;

int cz_sweep_submit(cz_sweep *s, const cz_sweep_tools *t, const cz_submit_options *o,
                    cz_error *err);

/* ---- fits (least squares) ---- */

/* y = (x_c / x)^alpha, fitted as ln y = a + b ln x (b = -alpha). Standard
 * errors from the regression's residual variance (n - 2 degrees of
 * freedom); x_c's error as a factor: x_c is known to within x_c_factor^+-1. */
typedef struct cz_power_fit {
    int n;
    double alpha, alpha_err;
    double x_c, x_c_factor;
    double rms; /* of the residuals of ln y */
    double r2;
} cz_power_fit;

int cz_fit_power_law(const double *x, const double *y, int n, cz_power_fit *out);

/* y = a (ln x)^2 + b ln x + c, least squares; the minimum is at
 * x = exp(-b / 2a) (Hoffmann et al. 2022, "Chinchilla", approach 2). */
typedef struct cz_parabola_fit {
    int n;
    double a, b, c;
    double x_min, y_min; /* valid when a > 0 */
    double rms;
} cz_parabola_fit;

int cz_fit_parabola_log(const double *x, const double *y, int n, cz_parabola_fit *out);

/* y = k x^e (a power law with a positive exponent, e.g. N_opt = k C^e). */
typedef struct cz_growth_fit {
    int n;
    double k, e, e_err;
} cz_growth_fit;

int cz_fit_growth(const double *x, const double *y, int n, cz_growth_fit *out);

/* ---- report ---- */
typedef struct cz_report_options {
    const char *results; /* results.csv */
    const char *out_dir; /* report.md, PNG, SVG, data and the gnuplot script */
    const char *title;
    const char *gnuplot; /* NULL: "gnuplot" on PATH */
} cz_report_options;

/* Writes the report from results.csv alone. Returns 0; -1 with err when
 * results.csv cannot be read or a file cannot be written. Missing gnuplot is
 * not an error: the report says the plots were skipped and why. */
int cz_sweep_report(const cz_report_options *o, cz_error *err);

/* ---- coordinate check (cloze-sweep coordcheck; coordcheck.c) ----
 * µP's diagnostic: each width of `model` (hidden = widths[i], intermediate
 * in proportion, heads as given, dropout off; model.arch = gpt) trains
 * `steps` AdamW steps (optim's lr, betas, eps, weight decay; µP's
 * per-tensor multipliers under mup) on synthetic bigram batches of
 * batch x seq tokens, under the standard parametrization and under µP on
 * base_width; log gets each width's mean |activation| of the embeddings,
 * each block's attention and FFN outputs and the logits after the steps
 * (cz_model_coord_stats, mean over `seeds` seeds), out_dir (when given) coordcheck.csv, the
 * figure's data, its gnuplot script and coordcheck.png / .svg.
 * fault_output_mult > 0 plants a fault: the readouts' multiplier forced to
 * it (1: "left at 1"), for the test that the check catches it. */
#define CZ_COORDCHECK_MAX_WIDTHS 16
typedef struct cz_coordcheck_options {
    cz_model_config model;
    cz_optim_config optim;
    const int *widths;
    int n_widths;
    int base_width;
    int steps, batch, seq, threads;
    uint64_t seed;
    int seeds; /* the statistics are means over seeds seed, seed + 1, ... */
    const char *out_dir;
    const char *gnuplot; /* NULL: gnuplot on PATH */
    float fault_output_mult;
    /* depth_axis: widths[] are depths (model.layers) at the configured
     * width instead; the sites are then the embeddings, the mean over the
     * blocks of their attention and of their FFN outputs, and the logits */
    int depth_axis;
} cz_coordcheck_options;

/* The verdict's numbers: under µP the largest max / min across widths of
 * any site (and which), both parametrizations' logits growth from the
 * first width to the last. */
typedef struct cz_coordcheck_verdict {
    int n_sites;
    double mup_worst;
    char mup_worst_site[32];
    double standard_logits_growth, mup_logits_growth;
} cz_coordcheck_verdict;

int cz_sweep_coordcheck(const cz_coordcheck_options *o, cz_coordcheck_verdict *v, FILE *log,
                        cz_error *err);

/* 1530000 -> "1.53M", 2.4e13 -> "24T" (tables and listings). */
const char *cz_sweep_format_count(double v, char *buf, size_t len);

#endif
