/* sweep: the report, made from results.csv alone (so that it can be remade
 * anywhere, and from a results.csv edited or merged by hand):
 *
 *   report.md            tables in the layout of BERT Table 6 (one per budget),
 *                        the fitted laws with their errors, the figures
 *   fits.json            the fitted constants, for programs
 *   *.dat, plots.gp      the figures' data and the gnuplot script
 *   *.png, *.svg         loss_vs_params, loss_vs_compute, isoflop, optimal_size
 *
 * Figures: held-out loss against non-embedding parameters N (a line per
 * depth, dashed a line per width; the largest budget's points) with the fit
 * L(N) = (N_c/N)^alpha; loss against training compute C (a line per model
 * across budgets) with the compute frontier and L(C) = (C_c/C)^beta; the
 * IsoFLOP curves (loss against N, one per FLOPs budget) with each budget's
 * parabola in ln N; the compute-optimal N per budget with N_opt = k C^a. */
#define _GNU_SOURCE
#include "sweep_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- results.csv (read by csv.c) ---- */

typedef cz_sweep_csv csv;

static int col(const csv *c, const char *name) {
    return cz_sweep_csv_col(c, name);
}

static double num(const csv *c, int r, int k) {
    if (k < 0 || !c->cell[r][k][0]) return NAN;
    char *end;
    double v = strtod(c->cell[r][k], &end);
    return *end ? NAN : v;
}

static const char *text(const csv *c, int r, int k) {
    return k >= 0 ? c->cell[r][k] : "";
}

/* ---- rows of the report ---- */

#define MAX_FT 8

typedef struct rrow {
    int csv_row;
    int layers, hidden, heads;
    double n, params, flops, tokens, steps, loss, ppl, mlm, nsp, budget;
    double ft[MAX_FT], ft_std[MAX_FT]; /* mean and std over fine-tuning restarts */
    int bert;
    char key[512];  /* the configuration keys but the seed: rows that average together */
    char model[64]; /* L/H/A: the model, whatever the budget */
} rrow;

typedef struct report {
    csv c;
    int n;
    rrow *r;
    int n_ft;
    char ft[MAX_FT][CZ_SWEEP_KEY];
    int ft_col[MAX_FT], ft_std_col[MAX_FT]; /* -1: no _std column */
    int n_failed;
    int n_vary;
    int vary_col[16]; /* key columns (other than L, H, A, seed) whose values vary */
    char budget_kind[16];
    int n_budgets;
    double budgets[CZ_SWEEP_MAX_VALUES];
} report;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int load_report(report *R, const char *path, cz_error *err) {
    memset(R, 0, sizeof *R);
    if (cz_sweep_csv_read(path, &R->c, err) != 0) return -1;
    csv *c = &R->c;
    const char *need[] = {"status", "params_nonemb", "eval_loss"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (col(c, need[i]) < 0)
            return cz_fail(err, "%s: no column %s (is it a cloze-sweep results.csv?)", path,
                           need[i]);
    int k_status = col(c, "status"), k_l = col(c, "model.layers"), k_h = col(c, "model.hidden"),
        k_a = col(c, "model.heads"), k_n = col(c, "params_nonemb"), k_p = col(c, "params"),
        k_f = col(c, "flops_total"), k_t = col(c, "tokens"), k_s = col(c, "steps"),
        k_loss = col(c, "eval_loss"), k_mlm = col(c, "eval_mlm_acc"),
        k_nsp = col(c, "eval_nsp_acc"), k_b = col(c, "budget"), k_arch = col(c, "arch"),
        k_kind = col(c, "budget_kind"), k_seed = col(c, "train.seed");
    for (int k = 0; k < c->ncol && R->n_ft < MAX_FT; k++) {
        const char *h = c->head[k];
        size_t n = strlen(h);
        if (strncmp(h, "ft_", 3) || (n > 4 && !strcmp(h + n - 4, "_std")) ||
            (n > 2 && !strcmp(h + n - 2, "_n")))
            continue;
        snprintf(R->ft[R->n_ft], CZ_SWEEP_KEY, "%s", h + 3);
        char std_name[CZ_SWEEP_KEY + 8];
        snprintf(std_name, sizeof std_name, "%s_std", h);
        R->ft_std_col[R->n_ft] = col(c, std_name);
        R->ft_col[R->n_ft++] = k;
    }
    /* key columns that vary, besides L, H, A and the seed */
    for (int k = 0; k < c->ncol && R->n_vary < 16; k++) {
        if (!strchr(c->head[k], '.') || k == k_l || k == k_h || k == k_a || k == k_seed) continue;
        int varies = 0, four_h = !strcmp(c->head[k], "model.intermediate");
        for (int r = 1; r < c->nrow && !varies; r++) varies = strcmp(c->cell[r][k], c->cell[0][k]);
        /* a width sweep's FFN size is 4 H: no column of its own then */
        for (int r = 0; r < c->nrow && four_h; r++)
            four_h = num(c, r, k) == 4 * num(c, r, k_h) || !c->cell[r][k][0];
        if (four_h) continue;
        if (varies) R->vary_col[R->n_vary++] = k;
    }
    R->r = calloc((size_t)(c->nrow ? c->nrow : 1), sizeof *R->r);
    if (!R->r) return cz_fail(err, "%s: out of memory for %d rows", path, c->nrow);
    for (int r = 0; r < c->nrow; r++) {
        if (strcmp(text(c, r, k_status), "done") != 0) {
            R->n_failed++;
            continue;
        }
        rrow *x = &R->r[R->n];
        x->csv_row = r;
        x->layers = (int)num(c, r, k_l);
        x->hidden = (int)num(c, r, k_h);
        x->heads = (int)num(c, r, k_a);
        x->n = num(c, r, k_n);
        x->params = num(c, r, k_p);
        x->flops = num(c, r, k_f);
        x->tokens = num(c, r, k_t);
        x->steps = num(c, r, k_s);
        x->loss = num(c, r, k_loss);
        x->ppl = exp(x->loss);
        x->mlm = num(c, r, k_mlm);
        x->nsp = num(c, r, k_nsp);
        x->budget = num(c, r, k_b);
        x->bert = strcmp(text(c, r, k_arch), "gpt") != 0;
        for (int f = 0; f < R->n_ft; f++) {
            x->ft[f] = num(c, r, R->ft_col[f]);
            x->ft_std[f] = R->ft_std_col[f] >= 0 ? num(c, r, R->ft_std_col[f]) : NAN;
        }
        if (!isfinite(x->loss) || !(x->n > 0)) {
            R->n_failed++;
            continue;
        }
        snprintf(x->model, sizeof x->model, "L=%d H=%d A=%d", x->layers, x->hidden, x->heads);
        size_t o = 0;
        for (int k = 0; k < c->ncol; k++)
            if (strchr(c->head[k], '.') && k != k_seed && o + 1 < sizeof x->key)
                o += (size_t)snprintf(x->key + o, sizeof x->key - o, "%s|", c->cell[r][k]);
        if (k_kind >= 0) snprintf(R->budget_kind, sizeof R->budget_kind, "%s", text(c, r, k_kind));
        int seen = 0;
        for (int b = 0; b < R->n_budgets; b++) seen |= R->budgets[b] == x->budget;
        if (!seen && isfinite(x->budget) && R->n_budgets < CZ_SWEEP_MAX_VALUES)
            R->budgets[R->n_budgets++] = x->budget;
        R->n++;
    }
    qsort(R->budgets, (size_t)R->n_budgets, sizeof R->budgets[0], cmp_double);
    return 0;
}

static void free_report(report *R) {
    cz_sweep_csv_free(&R->c);
    free(R->r);
}

/* rows of budget b (all rows when the sweep has no budget) */
static int in_budget(const report *R, const rrow *x, int b) {
    return R->n_budgets == 0 || x->budget == R->budgets[b];
}

/* ---- formatting ---- */

const char *cz_sweep_format_count(double v, char *buf, size_t len) {
    if (!isfinite(v)) return snprintf(buf, len, "–"), buf;
    const char *u[] = {"", "K", "M", "G", "T", "P", "E"};
    int i = 0;
    double a = fabs(v);
    while (a >= 1000 && i < 6) a /= 1000, v /= 1000, i++;
    snprintf(buf, len, a >= 100 || i == 0 ? "%.0f%s" : "%.3g%s", v, u[i]);
    return buf;
}

static const char *sci(double v, char *buf, size_t len) {
    if (!isfinite(v)) return snprintf(buf, len, "–"), buf;
    snprintf(buf, len, "%.3g", v);
    return buf;
}

/* mean (± std over seeds) of field values vals[0..n) */
static const char *mean_std(const double *vals, int n, const char *fmt, char *buf, size_t len) {
    double s = 0, ss = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(vals[i])) s += vals[i], m++;
    if (m == 0) return snprintf(buf, len, "–"), buf;
    double mean = s / m;
    for (int i = 0; i < n; i++)
        if (isfinite(vals[i])) ss += (vals[i] - mean) * (vals[i] - mean);
    char a[32], b[32];
    snprintf(a, sizeof a, fmt, mean);
    if (m > 1) {
        snprintf(b, sizeof b, fmt, sqrt(ss / (m - 1)));
        snprintf(buf, len, "%s ± %s", a, b);
    } else {
        snprintf(buf, len, "%s", a);
    }
    return buf;
}

static const char *budget_label(const report *R, double b, char *buf, size_t len) {
    char v[32];
    sw_format_number(b, v, sizeof v);
    const char *unit = !strcmp(R->budget_kind, "flops")    ? " FLOPs"
                       : !strcmp(R->budget_kind, "tokens") ? " tokens"
                                                           : " steps";
    snprintf(buf, len, "%s%s", v, unit);
    return buf;
}

/* ---- the tables ---- */

static int write_tables(FILE *md, const report *R, cz_error *err) {
    const csv *c = &R->c;
    int any_bert = 0;
    for (int i = 0; i < R->n; i++) any_bert |= R->r[i].bert;
    int nb = R->n_budgets ? R->n_budgets : 1;
    double *vals = malloc(sizeof *vals * (size_t)(R->n + 1));
    int *done = calloc((size_t)R->n + 1, sizeof *done);
    if (!vals || !done) return free(vals), free(done), cz_fail(err, "report: out of memory");
    for (int b = 0; b < nb; b++) {
        char buf[64];
        if (R->n_budgets)
            fprintf(md, "\n### Budget: %s\n", budget_label(R, R->budgets[b], buf, sizeof buf));
        fprintf(md, "\n| #L | #H | #A |");
        for (int v = 0; v < R->n_vary; v++) fprintf(md, " %s |", c->head[R->vary_col[v]]);
        fprintf(md, " N (non-emb.) | params | steps | tokens | FLOPs | held-out loss | LM (ppl) |");
        if (any_bert) fprintf(md, " MLM acc | NSP acc |");
        for (int f = 0; f < R->n_ft; f++) fprintf(md, " %s |", R->ft[f]);
        fprintf(md, "\n|---:|---:|---:|");
        for (int v = 0; v < R->n_vary; v++) fprintf(md, "---|");
        fprintf(md, "---:|---:|---:|---:|---:|---:|---:|");
        if (any_bert) fprintf(md, "---:|---:|");
        for (int f = 0; f < R->n_ft; f++) fprintf(md, "---:|");
        fprintf(md, "\n");
        memset(done, 0, sizeof *done * (size_t)(R->n + 1));
        for (int i = 0; i < R->n; i++) {
            const rrow *x = &R->r[i];
            if (!in_budget(R, x, b) || done[i]) continue;
            /* the rows of this configuration: one per seed */
            int idx[CZ_SWEEP_MAX_VALUES], m = 0;
            for (int j = i; j < R->n && m < CZ_SWEEP_MAX_VALUES; j++)
                if (!done[j] && in_budget(R, &R->r[j], b) && !strcmp(R->r[j].key, x->key)) {
                    idx[m++] = j;
                    done[j] = 1;
                }
            char s1[32], s2[32], s3[32], s4[32], s5[32];
            fprintf(md, "| %d | %d | %d |", x->layers, x->hidden, x->heads);
            for (int v = 0; v < R->n_vary; v++)
                fprintf(md, " %s |", text(c, x->csv_row, R->vary_col[v]));
            fprintf(md, " %s | %s | %s | %s | %s |", cz_sweep_format_count(x->n, s1, sizeof s1),
                    cz_sweep_format_count(x->params, s2, sizeof s2),
                    cz_sweep_format_count(x->steps, s3, sizeof s3),
                    cz_sweep_format_count(x->tokens, s4, sizeof s4), sci(x->flops, s5, sizeof s5));
            char cell[96];
#define CELLS(field, fmt)                                                                          \
    do {                                                                                           \
        for (int q = 0; q < m; q++) vals[q] = R->r[idx[q]].field;                                  \
        fprintf(md, " %s |", mean_std(vals, m, fmt, cell, sizeof cell));                           \
    } while (0)
            CELLS(loss, "%.4f");
            CELLS(ppl, "%.2f");
            if (any_bert) {
                CELLS(mlm, "%.4f");
                CELLS(nsp, "%.4f");
            }
            /* one seed: the std over fine-tuning restarts; several: over seeds */
            for (int f = 0; f < R->n_ft; f++)
                if (m == 1 && isfinite(x->ft[f]) && isfinite(x->ft_std[f]))
                    fprintf(md, " %.2f ± %.2f |", x->ft[f], x->ft_std[f]);
                else
                    CELLS(ft[f], "%.2f");
#undef CELLS
            fprintf(md, "\n");
        }
    }
    free(vals);
    free(done);
    return 0;
}

/* ---- fits ---- */

typedef struct fits {
    int have_ln, have_lc, have_growth;
    cz_power_fit ln, lc;
    double ln_budget;
    int n_iso;
    double iso_budget[CZ_SWEEP_MAX_VALUES];
    cz_parabola_fit iso[CZ_SWEEP_MAX_VALUES];
    int iso_ok[CZ_SWEEP_MAX_VALUES];
    cz_growth_fit growth;
    int n_front;
    double front_c[CZ_SWEEP_MAX_VALUES * 64], front_l[CZ_SWEEP_MAX_VALUES * 64];
} fits;

static int cmp_flops(const void *a, const void *b) {
    const rrow *x = a, *y = b;
    return x->flops < y->flops ? -1 : x->flops > y->flops;
}

static int compute_fits(const report *R, fits *F, cz_error *err) {
    memset(F, 0, sizeof *F);
    int nb = R->n_budgets;
    double *x = malloc(sizeof *x * (size_t)(R->n + 1)), *y = malloc(sizeof *y * (size_t)(R->n + 1));
    rrow *s = malloc(sizeof *s * (size_t)(R->n + 1));
    if (!x || !y || !s) return free(x), free(y), free(s), cz_fail(err, "report: out of memory");
    /* L(N): the largest budget's points */
    int m = 0;
    for (int i = 0; i < R->n; i++)
        if (!nb || R->r[i].budget == R->budgets[nb - 1]) x[m] = R->r[i].n, y[m++] = R->r[i].loss;
    F->ln_budget = nb ? R->budgets[nb - 1] : NAN;
    F->have_ln = cz_fit_power_law(x, y, m, &F->ln) == 0;
    /* L(C): the compute frontier. FLOPs budgets: each budget's lowest loss;
     * otherwise the points no cheaper point beats */
    if (!strcmp(R->budget_kind, "flops") && nb > 0) {
        for (int b = 0; b < nb; b++) {
            int best = -1;
            for (int i = 0; i < R->n; i++)
                if (R->r[i].budget == R->budgets[b] && (best < 0 || R->r[i].loss < R->r[best].loss))
                    best = i;
            if (best >= 0) {
                F->front_c[F->n_front] = R->r[best].flops;
                F->front_l[F->n_front++] = R->r[best].loss;
            }
        }
    } else {
        memcpy(s, R->r, sizeof *s * (size_t)R->n);
        qsort(s, (size_t)R->n, sizeof *s, cmp_flops);
        double best = INFINITY;
        for (int i = 0; i < R->n && F->n_front < (int)(sizeof F->front_c / sizeof F->front_c[0]);
             i++)
            if (s[i].loss < best) {
                best = s[i].loss;
                F->front_c[F->n_front] = s[i].flops;
                F->front_l[F->n_front++] = s[i].loss;
            }
    }
    free(s);
    F->have_lc = cz_fit_power_law(F->front_c, F->front_l, F->n_front, &F->lc) == 0;
    /* IsoFLOP parabolas and the compute-optimal size */
    if (!strcmp(R->budget_kind, "flops")) {
        double oc[CZ_SWEEP_MAX_VALUES], on[CZ_SWEEP_MAX_VALUES];
        int no = 0;
        for (int b = 0; b < nb; b++) {
            m = 0;
            for (int i = 0; i < R->n; i++)
                if (R->r[i].budget == R->budgets[b]) x[m] = R->r[i].n, y[m++] = R->r[i].loss;
            F->iso_budget[F->n_iso] = R->budgets[b];
            int ok = cz_fit_parabola_log(x, y, m, &F->iso[F->n_iso]) == 0 && F->iso[F->n_iso].a > 0;
            F->iso_ok[F->n_iso] = ok;
            if (ok) oc[no] = R->budgets[b], on[no++] = F->iso[F->n_iso].x_min;
            F->n_iso++;
        }
        F->have_growth = cz_fit_growth(oc, on, no, &F->growth) == 0;
    }
    free(x);
    free(y);
    return 0;
}

static void json_num(FILE *f, const char *key, double v, int comma) {
    if (isfinite(v))
        fprintf(f, "\"%s\":%.10g%s", key, v, comma ? "," : "");
    else
        fprintf(f, "\"%s\":null%s", key, comma ? "," : "");
}

/* {"alpha":..,"alpha_err":..,"N_c":..,"N_c_factor":..,"rms_ln_loss":..,"n":..}
 * with the exponent's and the constant's names given (alpha / N_c, beta / C_c) */
static void json_power(FILE *f, int have, const cz_power_fit *p, const char *exp, const char *cst) {
    if (!have) {
        fprintf(f, "null");
        return;
    }
    char k[64];
    fprintf(f, "{");
    json_num(f, exp, p->alpha, 1);
    snprintf(k, sizeof k, "%s_err", exp);
    json_num(f, k, p->alpha_err, 1);
    json_num(f, cst, p->x_c, 1);
    snprintf(k, sizeof k, "%s_factor", cst);
    json_num(f, k, p->x_c_factor, 1);
    json_num(f, "rms_ln_loss", p->rms, 1);
    fprintf(f, "\"n\":%d}", p->n);
}

static void write_fits_json(FILE *f, const fits *F) {
    fprintf(f, "{");
    json_num(f, "L_N_budget", F->ln_budget, 1); /* the budget whose points L(N) fits */
    fprintf(f, "\"L_N\":");
    json_power(f, F->have_ln, &F->ln, "alpha", "N_c");
    fprintf(f, ",\"L_C\":");
    json_power(f, F->have_lc, &F->lc, "beta", "C_c");
    fprintf(f, ",\"isoflop\":[");
    for (int i = 0; i < F->n_iso; i++) {
        fprintf(f, "%s{", i ? "," : "");
        json_num(f, "budget", F->iso_budget[i], 1);
        json_num(f, "N_opt", F->iso_ok[i] ? F->iso[i].x_min : NAN, 1);
        json_num(f, "loss_min", F->iso_ok[i] ? F->iso[i].y_min : NAN, 1);
        json_num(f, "a", F->iso[i].a, 1);
        json_num(f, "b", F->iso[i].b, 1);
        json_num(f, "c", F->iso[i].c, 1);
        fprintf(f, "\"n\":%d}", F->iso[i].n);
    }
    fprintf(f, "],\"N_opt_C\":");
    if (F->have_growth) {
        fprintf(f, "{");
        json_num(f, "exponent", F->growth.e, 1);
        json_num(f, "exponent_err", F->growth.e_err, 1);
        json_num(f, "k", F->growth.k, 1);
        fprintf(f, "\"n\":%d}", F->growth.n);
    } else {
        fprintf(f, "null");
    }
    fprintf(f, "}\n");
}

static const char *pm(double v, double e, char *buf, size_t len) {
    if (isfinite(e))
        snprintf(buf, len, "%.4g ± %.2g", v, e);
    else
        snprintf(buf, len, "%.4g (no error estimate from %s)", v, "2 points");
    return buf;
}

/* ---- figures ---- */

/* Distinct integer values of a field among the rows, ascending. */
static int distinct(const report *R, int which, int *out, int max) {
    int n = 0;
    for (int i = 0; i < R->n; i++) {
        int v = which == 0 ? R->r[i].layers : R->r[i].hidden, seen = 0;
        for (int k = 0; k < n; k++) seen |= out[k] == v;
        if (!seen && n < max) out[n++] = v;
    }
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && out[k - 1] > out[k]; k--) {
            int t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    return n;
}

typedef struct series_writer {
    FILE *dat;
    FILE *plot; /* the plot command being built */
    int index, count;
} series_writer;

/* Starts data block `title` (x y pairs follow) and its plot clause. */
static void series(series_writer *w, const char *dat_name, const char *title, const char *style) {
    if (w->index > 0) fprintf(w->dat, "\n\n");
    fprintf(w->dat, "# %s\n", title);
    fprintf(w->plot, "%s'%s' index %d using 1:2 %s title \"%s\"", w->count ? ", \\\n     " : "",
            dat_name, w->index, style, title);
    w->index++;
    w->count++;
}

static int cmp_xy(const void *a, const void *b) {
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Points of rows matching (layers or hidden or model or budget), averaged
 * over rows of one key, sorted by x. */
static int collect(const report *R, double *xy, int max, int (*match)(const rrow *, const void *),
                   const void *arg, int x_is_flops) {
    int n = 0;
    for (int i = 0; i < R->n && n < max; i++) {
        const rrow *r = &R->r[i];
        if (!match(r, arg)) continue;
        double x = x_is_flops ? r->flops : r->n;
        int k;
        for (k = 0; k < n; k++)
            if (xy[3 * k] == x) break;
        if (k == n) xy[3 * n] = x, xy[3 * n + 1] = 0, xy[3 * n + 2] = 0, n++;
        xy[3 * k + 1] += r->loss;
        xy[3 * k + 2] += 1;
    }
    for (int k = 0; k < n; k++) xy[3 * k + 1] /= xy[3 * k + 2];
    qsort(xy, (size_t)n, 3 * sizeof *xy, cmp_xy);
    return n;
}

typedef struct match_arg {
    const report *R;
    int layers, hidden;
    double budget;
    const char *model;
} match_arg;

static int budget_ok(const match_arg *a, const rrow *r) {
    return !isfinite(a->budget) || r->budget == a->budget;
}
static int m_layers(const rrow *r, const void *p) {
    const match_arg *a = p;
    return r->layers == a->layers && budget_ok(a, r);
}
static int m_hidden(const rrow *r, const void *p) {
    const match_arg *a = p;
    return r->hidden == a->hidden && budget_ok(a, r);
}
static int m_model(const rrow *r, const void *p) {
    const match_arg *a = p;
    return !strcmp(r->model, a->model);
}
static int m_budget(const rrow *r, const void *p) {
    return budget_ok(p, r);
}

static void write_points(FILE *dat, const double *xy, int n) {
    for (int k = 0; k < n; k++) fprintf(dat, "%.10g %.10g\n", xy[3 * k], xy[3 * k + 1]);
}

/* A fitted curve sampled on a log grid between lo and hi. */
typedef double (*curve_fn)(double x, const void *arg);
static void write_curve(FILE *dat, double lo, double hi, curve_fn f, const void *arg) {
    for (int i = 0; i <= 60; i++) {
        double x = exp(log(lo) + (log(hi) - log(lo)) * i / 60.0);
        fprintf(dat, "%.10g %.10g\n", x, f(x, arg));
    }
}
static double power_curve(double x, const void *p) {
    const cz_power_fit *f = p;
    return pow(f->x_c / x, f->alpha);
}
static double parabola_curve(double x, const void *p) {
    const cz_parabola_fit *f = p;
    double u = log(x);
    return f->a * u * u + f->b * u + f->c;
}
static double growth_curve(double x, const void *p) {
    const cz_growth_fit *f = p;
    return f->k * pow(x, f->e);
}

/* The fitted power law as a black line: "fit (x_c/X)^alpha". */
static void fit_series(series_writer *w, const char *dat_name, const char *x, const cz_power_fit *f,
                       double lo, double hi) {
    char title[96];
    snprintf(title, sizeof title, "fit (%.3g/%s)^%.4f", f->x_c, x, f->alpha);
    series(w, dat_name, title, "with lines lw 2 lc rgb \"black\"");
    write_curve(w->dat, lo, hi, power_curve, f);
}

static void range_of(const report *R, int flops, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = 0;
    for (int i = 0; i < R->n; i++) {
        double v = flops ? R->r[i].flops : R->r[i].n;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
    *lo /= 1.3;
    *hi *= 1.3;
}

/* Emits one figure: its settings and plot command, for PNG and SVG. */
static void emit_plot(FILE *gp, const char *name, const char *settings, const char *plot) {
    fprintf(gp,
            "\n# ---- %s ----\nreset\n%s"
            "set terminal pngcairo size 900,600 noenhanced font \"DejaVu Sans,11\"\n"
            "set output \"%s.png\"\nplot %s\n"
            "set terminal svg size 900,600 noenhanced font \"DejaVu Sans,11\"\n"
            "set output \"%s.svg\"\n"
            "replot\nunset output\n",
            name, settings, name, plot, name);
}

/* A figure being written: its data file (x y blocks) and its plot command. */
typedef struct figure {
    const char *name; /* NAME.dat, NAME.png, NAME.svg */
    char dat_name[64];
    FILE *dat, *plot;
    char *plot_text;
    size_t plot_len;
    series_writer w;
} figure;

static int figure_open(figure *g, const char *out_dir, const char *name, cz_error *err) {
    memset(g, 0, sizeof *g);
    g->name = name;
    snprintf(g->dat_name, sizeof g->dat_name, "%s.dat", name);
    char path[CZ_PATH_MAX + 64];
    sw_join(path, sizeof path, out_dir, g->dat_name);
    g->dat = fopen(path, "w");
    if (!g->dat) return cz_fail(err, "%s: cannot write: %s", path, strerror(errno));
    g->plot = open_memstream(&g->plot_text, &g->plot_len);
    if (!g->plot) {
        fclose(g->dat);
        return cz_fail(err, "%s: out of memory", name);
    }
    g->w = (series_writer){g->dat, g->plot, 0, 0};
    return 0;
}

/* Starts data block `title` and its plot clause with style. */
static void figure_series(figure *g, const char *title, const char *style) {
    series(&g->w, g->dat_name, title, style);
}

/* Ends the figure; its settings and plot command go to the gnuplot script
 * when it has a series. */
static int figure_close(figure *g, FILE *gp, const char *settings, cz_error *err) {
    int ok = (fclose(g->dat) == 0) & (fclose(g->plot) == 0);
    if (ok && g->w.count) emit_plot(gp, g->name, settings, g->plot_text);
    free(g->plot_text);
    return ok ? 0 : cz_fail(err, "%s: cannot write its data", g->name);
}

static const char loss_label[] = "held-out loss (nats per predicted token)";

/* Loss against N: a line per depth, a dashed line per width (the largest
 * budget's points), and the fitted L(N). */
static int figure_loss_vs_params(const report *R, const fits *F, const char *out_dir, FILE *gp,
                                 double *xy, cz_error *err) {
    int ls[64], hs[64];
    int nl = distinct(R, 0, ls, 64), nh = distinct(R, 1, hs, 64);
    double nlo, nhi;
    range_of(R, 0, &nlo, &nhi);
    figure g;
    if (figure_open(&g, out_dir, "loss_vs_params", err)) return -1;
    char title[160];
    match_arg a = {R, 0, 0, F->ln_budget, NULL};
    for (int which = 0; which < 2; which++) /* depth lines, then width lines */
        for (int i = 0; i < (which ? nh : nl); i++) {
            if (which)
                a.hidden = hs[i];
            else
                a.layers = ls[i];
            int n = collect(R, xy, R->n, which ? m_hidden : m_layers, &a, 0);
            if (n == 0) continue;
            snprintf(title, sizeof title, "%s=%d", which ? "H" : "L", which ? hs[i] : ls[i]);
            figure_series(&g, title,
                          which ? "with linespoints lw 1 dt 2 pt 6 ps 1.2"
                                : "with linespoints lw 2 pt 7 ps 1.2");
            write_points(g.dat, xy, n);
        }
    if (F->have_ln) fit_series(&g.w, g.dat_name, "N", &F->ln, nlo, nhi);
    char settings[1024], bl[64] = "";
    if (isfinite(F->ln_budget)) budget_label(R, F->ln_budget, bl, sizeof bl);
    snprintf(settings, sizeof settings,
             "set title \"Held-out loss against non-embedding parameters%s%s\"\n"
             "set xlabel \"non-embedding parameters N\"\nset ylabel \"%s\"\n"
             "set logscale xy\nset grid\nset key outside right\nset format x \"%%.0s%%c\"\n",
             bl[0] ? ", budget " : "", bl, loss_label);
    return figure_close(&g, gp, settings, err);
}

/* Loss against compute: a line per model across budgets, the compute
 * frontier, and the fitted L(C). */
static int figure_loss_vs_compute(const report *R, const fits *F, const char *out_dir, FILE *gp,
                                  double *xy, cz_error *err) {
    double clo, chi;
    range_of(R, 1, &clo, &chi);
    figure g;
    if (figure_open(&g, out_dir, "loss_vs_compute", err)) return -1;
    for (int i = 0; i < R->n; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++) first = strcmp(R->r[j].model, R->r[i].model) != 0;
        if (!first) continue;
        match_arg b = {R, 0, 0, NAN, R->r[i].model};
        int n = collect(R, xy, R->n, m_model, &b, 1);
        figure_series(&g, R->r[i].model, "with linespoints lw 2 pt 7 ps 1.2");
        write_points(g.dat, xy, n);
    }
    if (F->n_front > 0) {
        figure_series(&g, "compute frontier", "with points pt 4 ps 2.5 lw 2 lc rgb \"black\"");
        for (int k = 0; k < F->n_front; k++)
            fprintf(g.dat, "%.10g %.10g\n", F->front_c[k], F->front_l[k]);
    }
    if (F->have_lc) fit_series(&g.w, g.dat_name, "C", &F->lc, clo, chi);
    char settings[1024];
    snprintf(settings, sizeof settings,
             "set title \"Held-out loss against training compute\"\n"
             "set xlabel \"training compute C (FLOPs, 3 x forward)\"\nset ylabel \"%s\"\n"
             "set logscale xy\nset grid\nset key outside right\nset format x \"%%.0e\"\n",
             loss_label);
    return figure_close(&g, gp, settings, err);
}

/* IsoFLOP: loss against N per FLOPs budget, with each budget's parabola. */
static int figure_isoflop(const report *R, const fits *F, const char *out_dir, FILE *gp, double *xy,
                          cz_error *err) {
    if (F->n_iso == 0) return 0;
    figure g;
    if (figure_open(&g, out_dir, "isoflop", err)) return -1;
    char title[160], style[96], bl[64];
    for (int b = 0; b < F->n_iso; b++) {
        match_arg c = {R, 0, 0, F->iso_budget[b], NULL};
        int n = collect(R, xy, R->n, m_budget, &c, 0);
        snprintf(title, sizeof title, "C = %s", budget_label(R, F->iso_budget[b], bl, sizeof bl));
        snprintf(style, sizeof style, "with points pt 7 ps 1.4 lc %d", b + 1);
        figure_series(&g, title, style);
        write_points(g.dat, xy, n);
        if (F->iso_ok[b]) {
            snprintf(style, sizeof style, "with lines lw 2 lc %d", b + 1);
            snprintf(title, sizeof title, "parabola, N_opt = %.3g", F->iso[b].x_min);
            figure_series(&g, title, style);
            write_curve(g.dat, xy[0] / 1.2, xy[3 * (n - 1)] * 1.2, parabola_curve, &F->iso[b]);
        }
    }
    char settings[1024];
    snprintf(settings, sizeof settings,
             "set title \"IsoFLOP curves (Chinchilla approach 2)\"\n"
             "set xlabel \"non-embedding parameters N\"\nset ylabel \"%s\"\n"
             "set logscale x\nset grid\nset key outside right\nset format x \"%%.0s%%c\"\n",
             loss_label);
    return figure_close(&g, gp, settings, err);
}

/* The compute-optimal size per budget, and the fitted N_opt = k C^a. */
static int figure_optimal_size(const report *R, const fits *F, const char *out_dir, FILE *gp,
                               cz_error *err) {
    int n_opt = 0;
    for (int b = 0; b < F->n_iso; b++) n_opt += F->iso_ok[b];
    if (n_opt == 0) return 0;
    figure g;
    if (figure_open(&g, out_dir, "optimal_size", err)) return -1;
    figure_series(&g, "N_opt (parabola minimum)", "with points pt 7 ps 1.6");
    double lo = INFINITY, hi = 0;
    for (int b = 0; b < F->n_iso; b++)
        if (F->iso_ok[b]) {
            fprintf(g.dat, "%.10g %.10g\n", F->iso_budget[b], F->iso[b].x_min);
            if (F->iso_budget[b] < lo) lo = F->iso_budget[b];
            if (F->iso_budget[b] > hi) hi = F->iso_budget[b];
        }
    if (F->have_growth) {
        char title[160];
        snprintf(title, sizeof title, "fit N_opt = %.3g C^%.3f", F->growth.k, F->growth.e);
        figure_series(&g, title, "with lines lw 2 lc rgb \"black\"");
        write_curve(g.dat, lo / 1.5, hi * 1.5, growth_curve, &F->growth);
    }
    return figure_close(&g, gp,
                        "set title \"Compute-optimal model size per budget\"\n"
                        "set xlabel \"training compute C (FLOPs)\"\nset ylabel \"N_opt "
                        "(non-embedding)\"\n"
                        "set logscale xy\nset grid\nset key top left\nset format x \"%.0e\"\n"
                        "set format y \"%.0s%c\"\n",
                        err);
}

/* The four figures: data files, and their commands in the gnuplot script. */
static int write_figures(const report *R, const fits *F, const char *out_dir, FILE *gp,
                         cz_error *err) {
    double *xy = malloc(sizeof *xy * 3 * (size_t)(R->n + 1));
    if (!xy) return cz_fail(err, "report: out of memory");
    int rc = figure_loss_vs_params(R, F, out_dir, gp, xy, err);
    if (rc == 0) rc = figure_loss_vs_compute(R, F, out_dir, gp, xy, err);
    if (rc == 0) rc = figure_isoflop(R, F, out_dir, gp, xy, err);
    if (rc == 0) rc = figure_optimal_size(R, F, out_dir, gp, err);
    free(xy);
    return rc;
}

/* ---- gnuplot ---- */

static int find_on_path(const char *prog, char *out, size_t len) {
    if (strchr(prog, '/')) {
        snprintf(out, len, "%s", prog);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(out, len, "%.*s/%s", (int)n, path, prog);
        if (access(out, X_OK) == 0) return 1;
        path += n + (colon ? 1 : 0);
    }
    return 0;
}

/* Runs gnuplot on the script inside out_dir; its messages go to gnuplot.log. */
static int run_gnuplot(const char *gnuplot, const char *out_dir, char *why, size_t len) {
    pid_t pid = fork();
    if (pid < 0) return snprintf(why, len, "fork: %s", strerror(errno)), -1;
    if (pid == 0) {
        if (chdir(out_dir) != 0) _exit(126);
        int fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(gnuplot, gnuplot, "plots.gp", (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return snprintf(why, len, "gnuplot failed (exit %d); see %s/gnuplot.log",
                        WIFEXITED(st) ? WEXITSTATUS(st) : -1, out_dir),
               -1;
    return 0;
}

/* ---- the report ---- */

static void write_fit_text(FILE *md, const report *R, const fits *F, const char *figure) {
    char b1[96], b2[96], b3[64];
    if (!strcmp(figure, "loss_vs_params")) {
        if (F->have_ln)
            fprintf(md,
                    "\nL(N) = (N_c / N)^α fitted to %d point(s)%s%s: **α = %s**, N_c = %.4g "
                    "(within a factor %.3g), RMS residual of ln L %.3g, R² %.4f.\n",
                    F->ln.n, isfinite(F->ln_budget) ? " of the largest budget, " : "",
                    isfinite(F->ln_budget) ? budget_label(R, F->ln_budget, b3, sizeof b3) : "",
                    pm(F->ln.alpha, F->ln.alpha_err, b1, sizeof b1), F->ln.x_c, F->ln.x_c_factor,
                    F->ln.rms, F->ln.r2);
        if (F->have_ln && F->ln.alpha <= 0)
            fprintf(md, "The loss does not fall with N here (α <= 0): at this budget the larger "
                        "models are undertrained, and no power law in N describes the points.\n");
        if (!F->have_ln) fprintf(md, "\nL(N): not enough points with distinct N to fit.\n");
    } else if (!strcmp(figure, "loss_vs_compute")) {
        if (F->have_lc)
            fprintf(md,
                    "\nL(C) = (C_c / C)^β fitted to the %d point(s) of the compute frontier: "
                    "**β = %s**, C_c = %.4g (within a factor %.3g), RMS residual of ln L %.3g.\n",
                    F->lc.n, pm(F->lc.alpha, F->lc.alpha_err, b2, sizeof b2), F->lc.x_c,
                    F->lc.x_c_factor, F->lc.rms);
        else
            fprintf(md, "\nL(C): the compute frontier has fewer than 2 points; no fit.\n");
    } else if (!strcmp(figure, "isoflop")) {
        fprintf(md, "\n| budget | points | parabola in ln N | N_opt | loss at N_opt |\n"
                    "|---:|---:|---|---:|---:|\n");
        for (int b = 0; b < F->n_iso; b++) {
            const cz_parabola_fit *p = &F->iso[b];
            if (F->iso_ok[b])
                fprintf(md, "| %s | %d | %.4g u² %+.4g u %+.4g | %.4g | %.4f |\n",
                        budget_label(R, F->iso_budget[b], b3, sizeof b3), p->n, p->a, p->b, p->c,
                        p->x_min, p->y_min);
            else
                fprintf(md, "| %s | %d | %s | – | – |\n",
                        budget_label(R, F->iso_budget[b], b3, sizeof b3), p->n,
                        p->n < 3
                            ? "fewer than 3 sizes: no parabola"
                            : "no minimum (curvature <= 0): the optimum lies outside the grid");
        }
    } else if (!strcmp(figure, "optimal_size")) {
        if (F->have_growth)
            fprintf(md, "\nN_opt = k C^a over %d budget(s): **a = %s**, k = %.4g.\n", F->growth.n,
                    pm(F->growth.e, F->growth.e_err, b1, sizeof b1), F->growth.k);
        else
            fprintf(md, "\nN_opt(C): fewer than 2 budgets with a parabola minimum; no fit.\n");
    }
}

/* fits.json, then the gnuplot script with the figures' data files. */
static int write_fits_and_figures(const cz_report_options *o, const report *R, const fits *F,
                                  cz_error *err) {
    char path[CZ_PATH_MAX + 64];
    sw_join(path, sizeof path, o->out_dir, "fits.json");
    FILE *fj = fopen(path, "w");
    if (!fj) return cz_fail(err, "%s: cannot write: %s", path, strerror(errno));
    write_fits_json(fj, F);
    fclose(fj);
    sw_join(path, sizeof path, o->out_dir, "plots.gp");
    FILE *gp = fopen(path, "w");
    if (!gp) return cz_fail(err, "%s: cannot write: %s", path, strerror(errno));
    fprintf(gp,
            "# Figures of the sweep report, from results.csv (%s);\n"
            "# written by cloze-sweep report. Run: gnuplot plots.gp\n",
            o->results);
    int rc = R->n > 0 ? write_figures(R, F, o->out_dir, gp, err) : 0;
    /* a learning-rate x width sweep: the µTransfer figure (mutransfer.c) */
    if (rc == 0 && R->n > 0 && sw_mutransfer_figure(&R->c, o->out_dir, gp, err) < 0) rc = -1;
    fclose(gp);
    return rc;
}

/* Draws the figures with gnuplot: 1, or 0 with why (not found, failed). */
static int draw_figures(const cz_report_options *o, char *why, size_t len) {
    char gnuplot[CZ_PATH_MAX];
    if (!find_on_path(o->gnuplot ? o->gnuplot : "gnuplot", gnuplot, sizeof gnuplot)) {
        snprintf(why, len,
                 "gnuplot not found: plots skipped (Debian: apt-get install gnuplot-nox), "
                 "then run `gnuplot plots.gp` in %s",
                 o->out_dir);
        return 0;
    }
    return run_gnuplot(gnuplot, o->out_dir, why, len) == 0;
}

/* report.md's sections after the tables: the scaling laws, a figure each
 * (embedded when drawn) with its fitted law. */
static void write_laws(FILE *md, const cz_report_options *o, const report *R, const fits *F,
                       int plotted, const char *plots_why) {
    fprintf(md, "\n## Scaling laws\n");
    if (!plotted) fprintf(md, "\n*Figures not drawn: %s.*\n", plots_why);
    const char *figs[] = {"loss_vs_params", "loss_vs_compute", "isoflop", "optimal_size"};
    const char *caps[] = {"Held-out loss against non-embedding parameters",
                          "Held-out loss against training compute", "IsoFLOP curves",
                          "Compute-optimal model size"};
    for (int i = 0; i < 4; i++) {
        char dat_name[64], dat[CZ_PATH_MAX + 64];
        snprintf(dat_name, sizeof dat_name, "%s.dat", figs[i]);
        sw_join(dat, sizeof dat, o->out_dir, dat_name);
        if (!sw_file_exists(dat)) {
            if (i == 2)
                fprintf(md,
                        "\n### %s\n\nNot drawn: IsoFLOP curves need a budget in "
                        "FLOPs (`budget = { flops = [...]; }`).\n",
                        caps[i]);
            continue;
        }
        fprintf(md, "\n### %s\n", caps[i]);
        if (plotted) fprintf(md, "\n![%s](%s.png) ([SVG](%s.svg))\n", caps[i], figs[i], figs[i]);
        write_fit_text(md, R, F, figs[i]);
    }
}

/* report.md, written atomically. */
static int write_markdown(const cz_report_options *o, const report *R, const fits *F, int plotted,
                          const char *plots_why, cz_error *err) {
    char path[CZ_PATH_MAX + 64];
    sw_join(path, sizeof path, o->out_dir, "report.md");
    char *md_text = NULL;
    size_t md_len = 0;
    FILE *md = open_memstream(&md_text, &md_len);
    if (!md) return cz_fail(err, "%s: out of memory", path);
    fprintf(md, "# Sweep report: %s\n\n", o->title ? o->title : "sweep");
    fprintf(md,
            "Made by `cloze-sweep report` from `%s` alone: %d point(s) done, %d failed or "
            "invalid. Held-out loss is the MLM loss for BERT and the LM loss for GPT (nats); "
            "LM (ppl) is its exponential. N counts parameters without the token, position and "
            "segment embeddings and the vocabulary-sized output bias; FLOPs are training "
            "FLOPs (3 x forward matrix products, the count MFU uses). With several seeds a "
            "cell is mean ± standard deviation.\n",
            o->results, R->n, R->n_failed);
    fprintf(md, "\n## Results (the layout of BERT's Table 6)\n");
    int rc = 0;
    if (R->n > 0)
        rc = write_tables(md, R, err);
    else
        fprintf(md, "\nNo point has finished yet.\n");
    if (R->n_failed > 0) {
        fprintf(md, "\nFailed or invalid points:\n\n");
        int k_name = col(&R->c, "name"), k_err = col(&R->c, "error"),
            k_status = col(&R->c, "status");
        for (int r = 0; r < R->c.nrow; r++)
            if (strcmp(text(&R->c, r, k_status), "done"))
                fprintf(md, "- `%s`: %s\n", text(&R->c, r, k_name), text(&R->c, r, k_err));
    }
    if (R->n > 0) write_laws(md, o, R, F, plotted, plots_why);
    if (R->n > 0) sw_mutransfer_text(&R->c, md, plotted);
    if (fclose(md) != 0 && rc == 0) rc = cz_fail(err, "%s: out of memory", path);
    if (rc == 0) rc = cz_write_file_atomic(path, md_text, md_len, err);
    free(md_text);
    return rc;
}

int cz_sweep_report(const cz_report_options *o, cz_error *err) {
    report R;
    if (load_report(&R, o->results, err) != 0) {
        free_report(&R);
        return -1;
    }
    if (cz_make_dirs(o->out_dir, err) != 0) {
        free_report(&R);
        return -1;
    }
    fits *F = calloc(1, sizeof *F);
    if (!F || compute_fits(&R, F, err) != 0) {
        if (!F) cz_fail(err, "report: out of memory");
        free(F);
        free_report(&R);
        return -1;
    }
    char plots_why[CZ_ERROR_MAX] = "";
    int rc = write_fits_and_figures(o, &R, F, err), plotted = 0;
    if (rc == 0 && R.n > 0) plotted = draw_figures(o, plots_why, sizeof plots_why);
    if (rc == 0) rc = write_markdown(o, &R, F, plotted, plots_why, err);
    if (rc == 0 && !plotted && plots_why[0])
        fprintf(stderr, "cloze-sweep: warning: %s\n", plots_why);
    free(F);
    free_report(&R);
    return rc;
}
