/* finetune: the grid of BERT App. A.3 (cloze-finetune grid) and its file,
 * grid.jsonl, written and read here alone: the program calls cz_ft_grid_run,
 * the sweep reads a finished grid back with cz_ft_grid_read. The records
 * (docs/finetune.md) are one JSON object a line:
 *   {"kind":"point", lr, batch, epochs, seed, score, dir}   every run
 *   {"kind":"config", lr, batch, epochs, restarts, mean, std} every configuration
 *   {"kind":"selected", task, metric_mean, lr, batch, epochs, best_seed,
 *    best_score, best_dir}                                   the best dev mean
 * Selection on the dev mean over restarts with different seeds is BERT's
 * protocol (Devlin et al. 2018, Sec. 4.1 and 5.2). */
#include "cloze/finetune.h"
#include "cloze/json.h"
#include "cloze/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- reading a run's results.jsonl ---- */

/* The whole file as a NUL-terminated string (cz_read_file ends it with a
 * NUL; free it with cz_free), or NULL when it cannot be read. */
static char *slurp(const char *path) {
    void *data = NULL;
    size_t len = 0;
    cz_error e;
    return cz_read_file(path, &data, &len, &e) == 0 ? data : NULL;
}

/* The next line of a NUL-terminated text, cut off at its newline, and
 * *cur moved past it; NULL at the end (or for a NULL text). */
static char *take_line(char **cur) {
    char *line = *cur;
    if (!line || !*line) return NULL;
    char *nl = strchr(line, '\n');
    *cur = nl ? (*nl = 0, nl + 1) : line + strlen(line);
    return line;
}

/* Calls each(v, arg) for every line of path that parses as JSON; 0, or -1
 * when the file cannot be read. */
static int each_record(const char *path, void (*each)(const cz_json *, void *), void *arg) {
    char *text = slurp(path);
    if (!text) return -1;
    for (char *cur = text, *line; (line = take_line(&cur));) {
        cz_json *v = NULL;
        cz_error e;
        if (!line[0] || cz_json_parse(line, strlen(line), &v, &e) != 0) continue;
        each(v, arg);
        cz_json_free(v);
    }
    cz_free(text);
    return 0;
}

static void final_score(const cz_json *v, void *arg) {
    const cz_json *fin = cz_json_get(v, "final");
    if (fin && fin->type == CZ_JSON_BOOL && fin->boolean)
        *(double *)arg = cz_json_get_number(v, "score", NAN);
}

/* The final score of a run already made (its results.jsonl), or NAN. */
static double finished_score(const char *dir) {
    char path[CZ_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    double score = NAN;
    each_record(path, final_score, &score);
    return score;
}

typedef struct metric_name {
    char *buf;
    size_t len;
} metric_name;

static void last_metric(const cz_json *v, void *arg) {
    metric_name *m = arg;
    const char *name = cz_json_get_string(v, "metric");
    if (name && strlen(name) < m->len) snprintf(m->buf, m->len, "%s", name);
}

/* ---- grid.jsonl: writing ---- */

static void write_point(FILE *f, const cz_ft_grid_point *p) {
    fprintf(f,
            "{\"kind\":\"point\",\"lr\":%.9g,\"batch\":%d,\"epochs\":%d,"
            "\"seed\":%llu,\"score\":%.6f,\"dir\":",
            p->lr, p->batch, p->epochs, p->seed, p->score);
    cz_json_write_string(f, p->dir);
    fputs("}\n", f);
}

static void write_config(FILE *f, const cz_ft_grid_point *p, int restarts, double mean, double sd) {
    fprintf(f,
            "{\"kind\":\"config\",\"lr\":%.9g,\"batch\":%d,\"epochs\":%d,"
            "\"restarts\":%d,\"mean\":%.6f,\"std\":%.6f}\n",
            p->lr, p->batch, p->epochs, restarts, mean, sd);
}

static void write_selected(FILE *f, const char *task, double mean, const cz_ft_grid_point *c,
                           const cz_ft_grid_point *best) {
    fputs("{\"kind\":\"selected\",\"task\":", f);
    cz_json_write_string(f, task);
    fprintf(f,
            ",\"metric_mean\":%.6f,\"lr\":%.9g,\"batch\":%d,\"epochs\":%d,"
            "\"best_seed\":%llu,\"best_score\":%.6f,\"best_dir\":",
            mean, c->lr, c->batch, c->epochs, best->seed, best->score);
    cz_json_write_string(f, best->dir);
    fputs("}\n", f);
}

/* ---- grid.jsonl: reading ---- */

typedef struct grid_records {
    cz_ft_grid_selection *out;
    int have_selected;
    double sel_lr, sel_batch, sel_epochs;
    int n_cfg, cap_cfg;
    double (*cfg)[5]; /* lr, batch, epochs, std, restarts */
    int out_of_memory;
} grid_records;

static void grid_record(const cz_json *v, void *arg) {
    grid_records *g = arg;
    const char *kind = cz_json_get_string(v, "kind");
    if (!kind) return;
    if (!strcmp(kind, "selected") && !g->have_selected) {
        g->have_selected = 1;
        g->out->mean = cz_json_get_number(v, "metric_mean", NAN);
        g->sel_lr = cz_json_get_number(v, "lr", NAN);
        g->sel_batch = cz_json_get_number(v, "batch", NAN);
        g->sel_epochs = cz_json_get_number(v, "epochs", NAN);
    } else if (!strcmp(kind, "config")) {
        if (g->n_cfg == g->cap_cfg) {
            int cap = g->cap_cfg ? 2 * g->cap_cfg : 16;
            double(*c)[5] = realloc(g->cfg, sizeof *c * (size_t)cap);
            if (!c) {
                g->out_of_memory = 1;
                return;
            }
            g->cfg = c;
            g->cap_cfg = cap;
        }
        double *c = g->cfg[g->n_cfg++];
        c[0] = cz_json_get_number(v, "lr", NAN);
        c[1] = cz_json_get_number(v, "batch", NAN);
        c[2] = cz_json_get_number(v, "epochs", NAN);
        c[3] = cz_json_get_number(v, "std", NAN);
        c[4] = cz_json_get_number(v, "restarts", 0);
    } else if (!strcmp(kind, "point") && !g->out->metric[0]) {
        const char *run = cz_json_get_string(v, "dir");
        if (!run) return;
        char path[CZ_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/results.jsonl", run);
        metric_name m = {g->out->metric, sizeof g->out->metric};
        each_record(path, last_metric, &m);
    }
}

int cz_ft_grid_read(const char *dir, cz_ft_grid_selection *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    out->mean = out->std = NAN;
    char path[CZ_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/grid.jsonl", dir);
    grid_records g = {.out = out};
    int rc = 1;
    if (each_record(path, grid_record, &g) != 0)
        rc = 1; /* no grid.jsonl yet: the grid has not finished */
    else if (g.out_of_memory)
        rc = cz_fail(err, "%s: out of memory", path);
    for (int k = 0; rc == 1 && g.have_selected && k < g.n_cfg; k++) {
        const double *c = g.cfg[k];
        if (c[0] == g.sel_lr && c[1] == g.sel_batch && c[2] == g.sel_epochs) {
            out->std = c[3];
            out->restarts = (int)c[4];
            rc = 0;
        }
    }
    free(g.cfg);
    return rc;
}

/* ---- running the grid ---- */

/* The grid's runs, configuration by configuration (lr, then batch, then
 * epochs), restarts innermost with seeds seed..seed+restarts-1. */
static cz_ft_grid_point *grid_points(const cz_ft_options *base, const cz_ft_grid *g, int restarts,
                                     int *n_out) {
    int n = g->n_lr * g->n_batch * g->n_epochs * restarts;
    cz_ft_grid_point *pts = calloc((size_t)n, sizeof *pts);
    if (!pts) return NULL;
    int k = 0;
    for (int i = 0; i < g->n_lr; i++)
        for (int j = 0; j < g->n_batch; j++)
            for (int e = 0; e < g->n_epochs; e++)
                for (int s = 0; s < restarts; s++, k++) {
                    cz_ft_grid_point *p = &pts[k];
                    p->lr = g->lr[i];
                    p->batch = g->batch[j];
                    p->epochs = g->epochs[e];
                    p->seed = base->seed + (unsigned long long)s;
                    snprintf(p->dir, sizeof p->dir, "%s/lr%g-b%d-e%d-s%llu", base->out_dir, p->lr,
                             p->batch, p->epochs, p->seed);
                }
    *n_out = n;
    return pts;
}

/* Runs point k of n unless an earlier call finished it. 0 done, 1 stopped by
 * a signal (the grid resumes later), else cz_ft_run's error. */
static int run_point(const cz_comm *world, const cz_ft_options *base, cz_ft_grid_point *p, int k,
                     int n, cz_error *err) {
    int rank = world->rank;
    p->score = finished_score(p->dir);
    if (!isnan(p->score)) {
        if (rank == 0)
            cz_info("grid point %d/%d %s: done before (%g), kept", k + 1, n, p->dir, p->score);
        return 0;
    }
    cz_ft_options o = *base;
    o.lr = p->lr;
    o.batch = p->batch;
    o.epochs = p->epochs;
    o.seed = p->seed;
    o.resume = "auto"; /* a point stopped half-way continues */
    snprintf(o.out_dir, sizeof o.out_dir, "%s", p->dir);
    snprintf(o.label, sizeof o.label, "lr%g-b%d-e%d", p->lr, p->batch, p->epochs);
    if (rank == 0)
        cz_info("grid point %d/%d: lr %g, batch %d, epochs %d, seed %llu", k + 1, n, p->lr,
                p->batch, p->epochs, p->seed);
    cz_ft_result res;
    int rc = cz_ft_run(world, &o, &res, err);
    if (rc != 0) {
        cz_fail_prefix(err, "grid point %s", p->dir);
        return rc;
    }
    if (!res.finished) {
        if (rank == 0)
            cz_info("grid stopped at point %s; run the same command again to continue", p->dir);
        return 1;
    }
    /* the grid's figures are what each point's results.jsonl says (6
     * decimals), for a point run now as for one kept from an earlier,
     * interrupted call: an interrupted grid writes the grid.jsonl of an
     * uninterrupted one. Rank 0 wrote and closed it; only rank 0 writes the
     * figures */
    p->score = rank == 0 ? finished_score(p->dir) : res.score;
    return 0;
}

/* Rank 0: the table on stdout and grid.jsonl (f may be NULL: the table
 * alone) from the finished points; the configuration with the best dev mean
 * is selected. */
static int write_summary(FILE *f, const cz_ft_grid_point *pts, int n, int restarts,
                         const char *task, cz_error *err) {
    printf("%-10s %5s %6s | %-28s | %8s %6s\n", "lr", "batch", "epochs", "dev scores (seeds)",
           "mean", "std");
    double best = -INFINITY;
    int best_c = -1;
    for (int c = 0; c < n; c += restarts) {
        double sum = 0, sq = 0;
        char list[256] = "";
        for (int s = 0; s < restarts; s++) {
            const cz_ft_grid_point *p = &pts[c + s];
            sum += p->score;
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.2f", s ? " " : "",
                     p->score);
            if (f) write_point(f, p);
        }
        double mean = sum / restarts;
        for (int s = 0; s < restarts; s++)
            sq += (pts[c + s].score - mean) * (pts[c + s].score - mean);
        /* the sample standard deviation over the restarts */
        double sd = restarts > 1 ? sqrt(sq / (restarts - 1)) : 0.0;
        printf("%-10g %5d %6d | %-28s | %8.2f %6.2f\n", pts[c].lr, pts[c].batch, pts[c].epochs,
               list, mean, sd);
        if (f) write_config(f, &pts[c], restarts, mean, sd);
        if (mean > best) {
            best = mean;
            best_c = c;
        }
    }
    if (best_c < 0) /* every configuration's mean is NaN: nothing to select */
        return cz_fail(err, "grid: no configuration has a dev score to select on");
    int best_run = best_c;
    for (int s = 1; s < restarts; s++)
        if (pts[best_c + s].score > pts[best_run].score) best_run = best_c + s;
    printf("selected (best dev mean): lr %g, batch %d, epochs %d: %.2f; its best restart: seed "
           "%llu %.2f (%s)\n",
           pts[best_c].lr, pts[best_c].batch, pts[best_c].epochs, best, pts[best_run].seed,
           pts[best_run].score, pts[best_run].dir);
    if (f) write_selected(f, task, best, &pts[best_c], &pts[best_run]);
    return 0;
}

int cz_ft_grid_run(const cz_comm *world, const cz_ft_options *base, const cz_ft_grid *g,
                   cz_error *err) {
    int restarts = g->restarts > 0 ? g->restarts : 1, n = 0;
    cz_ft_grid_point *pts = grid_points(base, g, restarts, &n);
    if (!pts) return cz_fail(err, "out of memory");
    if (world->rank == 0) mkdir(base->out_dir, 0755);
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) rc = run_point(world, base, &pts[k], k, n, err);
    if (rc == 0 && world->rank == 0) {
        char path[CZ_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/grid.jsonl", base->out_dir);
        FILE *f = fopen(path, "w");
        rc = write_summary(f, pts, n, restarts, base->task.name, err);
        if (f) fclose(f);
    }
    free(pts);
    return rc == 1 ? 0 : rc; /* stopped by a signal: not an error */
}
