/* sweep: least-squares fits for the report.
 *
 * Power laws are fitted as straight lines in log-log space (Kaplan et al.
 * 2020, "Scaling Laws for Neural Language Models", Sec. 3: L(N) =
 * (N_c/N)^alpha_N, L(C_min) = (C_c/C_min)^alpha_C), which weighs each point's
 * relative error equally. The IsoFLOP minimum is the vertex of a parabola in
 * ln N fitted to one budget's losses (Hoffmann et al. 2022, "Training
 * Compute-Optimal Large Language Models", Sec. 3.2, approach 2). */
#include "sweep_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* y = a + b x by ordinary least squares, with the parameters' variances
 * and covariance from the residual variance on n - 2 degrees of freedom
 * (NaN when n = 2: a line through two points has no error estimate). */
typedef struct line_fit {
    double a, b, var_a, var_b, cov_ab, ssr, syy;
} line_fit;

static int fit_line(const double *x, const double *y, int n, line_fit *f) {
    memset(f, 0, sizeof *f);
    if (n < 2) return -1;
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= n;
    my /= n;
    double sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (!(sxx > 0)) return -1;
    f->b = sxy / sxx;
    f->a = my - f->b * mx;
    for (int i = 0; i < n; i++) {
        double e = y[i] - (f->a + f->b * x[i]);
        f->ssr += e * e;
    }
    f->syy = syy;
    double s2 = n > 2 ? f->ssr / (n - 2) : NAN;
    f->var_b = s2 / sxx;
    f->var_a = s2 * (1.0 / n + mx * mx / sxx);
    f->cov_ab = -mx * s2 / sxx;
    return 0;
}

static int logs(const double *x, const double *y, int n, double *lx, double *ly) {
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0) || !(y[i] > 0) || !isfinite(x[i]) || !isfinite(y[i])) return -1;
        lx[i] = log(x[i]);
        ly[i] = log(y[i]);
    }
    return 0;
}

#define FIT_MAX 4096

/* the line through (ln x, ln y) */
static int fit_log_line(const double *x, const double *y, int n, line_fit *f) {
    if (n < 2 || n > FIT_MAX) return -1;
    double *lx = malloc(2 * (size_t)n * sizeof *lx), *ly = lx + n;
    int rc = !lx || logs(x, y, n, lx, ly) != 0 ? -1 : fit_line(lx, ly, n, f);
    free(lx);
    return rc;
}

int cz_fit_power_law(const double *x, const double *y, int n, cz_power_fit *out) {
    memset(out, 0, sizeof *out);
    out->n = n;
    line_fit f;
    if (fit_log_line(x, y, n, &f) != 0 || f.b == 0) return -1;
    /* ln y = alpha ln x_c - alpha ln x: b = -alpha, a = alpha ln x_c */
    out->alpha = -f.b;
    out->alpha_err = sqrt(f.var_b);
    double ln_xc = -f.a / f.b;
    out->x_c = exp(ln_xc);
    /* delta method on ln x_c = -a / b */
    double b2 = f.b * f.b;
    double var_ln =
        f.var_a / b2 + f.a * f.a * f.var_b / (b2 * b2) - 2 * f.a * f.cov_ab / (b2 * f.b);
    out->x_c_factor = var_ln >= 0 ? exp(sqrt(var_ln)) : NAN;
    out->rms = sqrt(f.ssr / n);
    out->r2 = f.syy > 0 ? 1 - f.ssr / f.syy : 1;
    return 0;
}

int cz_fit_growth(const double *x, const double *y, int n, cz_growth_fit *out) {
    memset(out, 0, sizeof *out);
    out->n = n;
    line_fit f;
    if (fit_log_line(x, y, n, &f) != 0) return -1;
    out->e = f.b;
    out->e_err = sqrt(f.var_b);
    out->k = exp(f.a);
    return 0;
}

/* Solves the 3x3 system m z = r by Gaussian elimination with pivoting. */
static int solve3(double m[3][3], double r[3], double z[3]) {
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int i = c + 1; i < 3; i++)
            if (fabs(m[i][c]) > fabs(m[p][c])) p = i;
        if (fabs(m[p][c]) < 1e-300) return -1;
        for (int k = 0; k < 3; k++) {
            double t = m[c][k];
            m[c][k] = m[p][k];
            m[p][k] = t;
        }
        double t = r[c];
        r[c] = r[p];
        r[p] = t;
        for (int i = c + 1; i < 3; i++) {
            double f = m[i][c] / m[c][c];
            for (int k = c; k < 3; k++) m[i][k] -= f * m[c][k];
            r[i] -= f * r[c];
        }
    }
    for (int c = 2; c >= 0; c--) {
        double s = r[c];
        for (int k = c + 1; k < 3; k++) s -= m[c][k] * z[k];
        z[c] = s / m[c][c];
    }
    return 0;
}

int cz_fit_parabola_log(const double *x, const double *y, int n, cz_parabola_fit *out) {
    memset(out, 0, sizeof *out);
    out->n = n;
    out->x_min = out->y_min = NAN;
    if (n < 3 || n > FIT_MAX) return -1;
    double mu = 0;
    for (int i = 0; i < n; i++) {
        if (!(x[i] > 0) || !isfinite(y[i])) return -1;
        mu += log(x[i]);
    }
    mu /= n;
    /* centred: y = A v^2 + B v + C with v = u - mean(u), for conditioning */
    double s[5] = {0}, r[3] = {0};
    for (int i = 0; i < n; i++) {
        double v = log(x[i]) - mu, p = 1;
        for (int k = 0; k < 5; k++, p *= v) s[k] += p;
        r[0] += y[i] * v * v;
        r[1] += y[i] * v;
        r[2] += y[i];
    }
    double m[3][3] = {{s[4], s[3], s[2]}, {s[3], s[2], s[1]}, {s[2], s[1], s[0]}}, z[3];
    if (solve3(m, r, z) != 0) return -1;
    double A = z[0], B = z[1], C = z[2];
    /* back to u: A (u - mu)^2 + B (u - mu) + C */
    out->a = A;
    out->b = B - 2 * A * mu;
    out->c = A * mu * mu - B * mu + C;
    double ssr = 0;
    for (int i = 0; i < n; i++) {
        double v = log(x[i]) - mu, e = y[i] - (A * v * v + B * v + C);
        ssr += e * e;
    }
    out->rms = sqrt(ssr / n);
    if (A > 0) {
        double v = -B / (2 * A);
        out->x_min = exp(mu + v);
        out->y_min = A * v * v + B * v + C;
    }
    return 0;
}
