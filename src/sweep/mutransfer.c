/* The report's µTransfer figure and table (sweep_internal.h): for a sweep
 * over the learning rate (optim.lr) and the width (model.hidden), held-out
 * loss against log2(learning rate), one line per width, one panel per
 * model.parametrization (standard, mup), and each width's best learning
 * rate with its drift across widths in factors of 2 (Yang et al. 2022,
 * Fig. 1: under µP the optimum stays put as the width grows; under the
 * standard parametrization it moves). A cell is the mean over seeds; the
 * table gives the seed spread (sample std) at each best point. */
#include "sweep_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MT_MAX 512

typedef struct mt_cell {
    char param[16];
    int width;
    double lr;
    double sum, sumsq;
    int n;
} mt_cell;

typedef struct mt {
    mt_cell cell[MT_MAX];
    int n;
    char params[2][16];
    int n_params;
    int widths[CZ_SWEEP_MAX_VALUES];
    int n_widths;
    double lrs[CZ_SWEEP_MAX_VALUES];
    int n_lrs;
} mt;

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}
static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cell_num(const cz_sweep_csv *c, int r, int k) {
    if (k < 0 || !c->cell[r][k][0]) return NAN;
    char *end;
    double v = strtod(c->cell[r][k], &end);
    return *end ? NAN : v;
}

/* The done rows grouped by (parametrization, width, lr): 1 when the sweep
 * varies both the learning rate and the width, else 0. */
static int gather(const cz_sweep_csv *c, mt *t) {
    memset(t, 0, sizeof *t);
    int k_lr = cz_sweep_csv_col(c, "optim.lr"), k_h = cz_sweep_csv_col(c, "model.hidden"),
        k_p = cz_sweep_csv_col(c, "model.parametrization"),
        k_loss = cz_sweep_csv_col(c, "eval_loss"), k_st = cz_sweep_csv_col(c, "status");
    if (k_lr < 0 || k_h < 0 || k_loss < 0 || k_st < 0) return 0;
    for (int r = 0; r < c->nrow; r++) {
        double lr = cell_num(c, r, k_lr), w = cell_num(c, r, k_h), loss = cell_num(c, r, k_loss);
        if (strcmp(c->cell[r][k_st], "done") || !(lr > 0) || !(w > 0) || !isfinite(loss)) continue;
        const char *p = k_p >= 0 && c->cell[r][k_p][0] ? c->cell[r][k_p] : "standard";
        int i = 0;
        while (i < t->n &&
               !(t->cell[i].width == (int)w && t->cell[i].lr == lr && !strcmp(t->cell[i].param, p)))
            i++;
        if (i == t->n) {
            if (t->n == MT_MAX) continue;
            t->n++;
            snprintf(t->cell[i].param, sizeof t->cell[i].param, "%s", p);
            t->cell[i].width = (int)w;
            t->cell[i].lr = lr;
        }
        t->cell[i].sum += loss;
        t->cell[i].sumsq += loss * loss;
        t->cell[i].n++;
    }
    for (int i = 0; i < t->n; i++) {
        const mt_cell *x = &t->cell[i];
        int seen = 0;
        for (int j = 0; j < t->n_params; j++) seen |= !strcmp(t->params[j], x->param);
        if (!seen && t->n_params < 2) snprintf(t->params[t->n_params++], 16, "%s", x->param);
        seen = 0;
        for (int j = 0; j < t->n_widths; j++) seen |= t->widths[j] == x->width;
        if (!seen && t->n_widths < CZ_SWEEP_MAX_VALUES) t->widths[t->n_widths++] = x->width;
        seen = 0;
        for (int j = 0; j < t->n_lrs; j++) seen |= t->lrs[j] == x->lr;
        if (!seen && t->n_lrs < CZ_SWEEP_MAX_VALUES) t->lrs[t->n_lrs++] = x->lr;
    }
    qsort(t->widths, (size_t)t->n_widths, sizeof t->widths[0], cmp_int);
    qsort(t->lrs, (size_t)t->n_lrs, sizeof t->lrs[0], cmp_dbl);
    /* standard first, then mup */
    if (t->n_params == 2 && !strcmp(t->params[0], "mup")) {
        char tmp[16];
        memcpy(tmp, t->params[0], 16);
        memcpy(t->params[0], t->params[1], 16);
        memcpy(t->params[1], tmp, 16);
    }
    return t->n_lrs >= 2 && t->n_widths >= 2;
}

static const mt_cell *find(const mt *t, const char *p, int w, double lr) {
    for (int i = 0; i < t->n; i++)
        if (t->cell[i].width == w && t->cell[i].lr == lr && !strcmp(t->cell[i].param, p))
            return &t->cell[i];
    return NULL;
}

static double mean(const mt_cell *x) {
    return x->sum / x->n;
}
static double sd(const mt_cell *x) {
    if (x->n < 2) return NAN;
    double m = mean(x), v = (x->sumsq - x->n * m * m) / (x->n - 1);
    return v > 0 ? sqrt(v) : 0;
}

/* the best (lowest mean loss) cell of parametrization p at width w */
static const mt_cell *best(const mt *t, const char *p, int w) {
    const mt_cell *b = NULL;
    for (int i = 0; i < t->n; i++) {
        const mt_cell *x = &t->cell[i];
        if (x->width == w && !strcmp(x->param, p) && (!b || mean(x) < mean(b))) b = x;
    }
    return b;
}

int sw_mutransfer_figure(const cz_sweep_csv *c, const char *out_dir, FILE *gp, cz_error *err) {
    mt *t = malloc(sizeof *t);
    if (!t) return cz_fail(err, "report: out of memory");
    if (!gather(c, t)) {
        free(t);
        return 0;
    }
    char path[CZ_PATH_MAX + 64];
    sw_join(path, sizeof path, out_dir, "mutransfer.dat");
    FILE *dat = fopen(path, "w");
    if (!dat) {
        free(t);
        return cz_fail(err, "%s: cannot write: %s", path, strerror(errno));
    }
    /* index p * n_widths + w: x = log2(lr), y = mean loss, std */
    for (int p = 0; p < t->n_params; p++)
        for (int w = 0; w < t->n_widths; w++) {
            fprintf(dat, "# %s width %d\n", t->params[p], t->widths[w]);
            for (int l = 0; l < t->n_lrs; l++) {
                const mt_cell *x = find(t, t->params[p], t->widths[w], t->lrs[l]);
                if (x) fprintf(dat, "%.6g %.6g %.6g\n", log2(x->lr), mean(x), x->n > 1 ? sd(x) : 0);
            }
            fprintf(dat, "\n\n");
        }
    int ok = fclose(dat) == 0;
    fprintf(gp, "\n# ---- mutransfer ----\nreset\n");
    for (int term = 0; term < 2; term++) {
        fprintf(gp,
                "set terminal %s size %d,500 noenhanced font \"DejaVu Sans,11\"\n"
                "set output \"mutransfer.%s\"\nset multiplot layout 1,%d\n"
                "set xlabel \"log2(learning rate)\"\nset ylabel \"held-out loss (nats)\"\n"
                "set key top right\nset grid\n",
                term ? "svg" : "pngcairo", 600 * t->n_params, term ? "svg" : "png", t->n_params);
        for (int p = 0; p < t->n_params; p++) {
            fprintf(gp, "set title \"%s\"\nplot ",
                    !strcmp(t->params[p], "mup") ? "µP (model.parametrization = mup)"
                                                 : "standard parametrization");
            for (int w = 0; w < t->n_widths; w++)
                fprintf(gp,
                        "%s'mutransfer.dat' index %d using 1:2 with linespoints lw 2 title "
                        "\"width %d\"",
                        w ? ", \\\n     " : "", p * t->n_widths + w, t->widths[w]);
            fprintf(gp, "\n");
        }
        fprintf(gp, "unset multiplot\nunset output\n");
    }
    free(t);
    return ok ? 1 : cz_fail(err, "%s: cannot write", path);
}

void sw_mutransfer_text(const cz_sweep_csv *c, FILE *md, int plotted) {
    mt *t = malloc(sizeof *t);
    if (!t) return;
    if (!gather(c, t)) {
        free(t);
        return;
    }
    fprintf(md, "\n## Learning-rate transfer across width (µTransfer)\n\n");
    if (plotted)
        fprintf(md,
                "![Held-out loss against log2(learning rate), a line per width](mutransfer.png) "
                "([SVG](mutransfer.svg))\n\n");
    fprintf(md, "Each width's best learning rate (the lowest held-out loss, mean over seeds; "
                "± the seeds' sample standard deviation at that point), and its drift: how many "
                "factors of 2 the best rate moves across the widths.\n");
    for (int p = 0; p < t->n_params; p++) {
        fprintf(md,
                "\n**%s**\n\n| width | best lr | log2 | held-out loss | seeds |\n"
                "|---:|---:|---:|---:|---:|\n",
                t->params[p]);
        double lo = INFINITY, hi = -INFINITY;
        for (int w = 0; w < t->n_widths; w++) {
            const mt_cell *b = best(t, t->params[p], t->widths[w]);
            if (!b) continue;
            double l2 = log2(b->lr);
            lo = fmin(lo, l2);
            hi = fmax(hi, l2);
            char spread[32] = "";
            if (b->n > 1) snprintf(spread, sizeof spread, " ± %.4f", sd(b));
            fprintf(md, "| %d | %.3g | %.2f | %.4f%s | %d |\n", t->widths[w], b->lr, l2, mean(b),
                    spread, b->n);
        }
        if (isfinite(lo))
            fprintf(md,
                    "\nDrift of the best learning rate across widths %d ... %d: %.3g "
                    "factor(s) of 2.\n",
                    t->widths[0], t->widths[t->n_widths - 1], hi - lo);
    }
    free(t);
}
