/* optim: the weight-decay name rule and the per-element AdamW arithmetic
 * (the learning-rate schedules are in schedule.c). */
#include "cloze/optim.h"

#include <math.h>
#include <string.h>

#include "cloze/cpu.h"
#include "optim_simd.h"

int cz_optim_name_no_decay(const cz_optim_config *cfg, const char *name) {
    for (int i = 0; i < cfg->n_no_decay; i++)
        if (cfg->no_decay[i][0] && strstr(name, cfg->no_decay[i])) return 1;
    return 0;
}

int cz_optim_ranges_from_tensors(const cz_tensor_info *t, int n, const cz_optim_config *cfg,
                                 cz_param_range *ranges, cz_error *err) {
    for (int i = 0; i < n; i++) {
        if (i > 0 && t[i].offset < t[i - 1].offset + t[i - 1].numel)
            return cz_fail(err, "optim: tensor %d (%s): offset %zu overlaps or is out of order", i,
                           t[i].name, t[i].offset);
        ranges[i].offset = t[i].offset;
        ranges[i].numel = t[i].numel;
        ranges[i].no_decay = cz_optim_name_no_decay(cfg, t[i].name);
    }
    return 0;
}

int cz_optim_model_multipliers(const cz_model *m, double *lr_mult, double *wd_mult) {
    int any = 0;
    for (int i = 0; i < cz_model_num_tensors(m); i++) {
        cz_tensor_mup t;
        cz_model_tensor_mup(m, i, &t);
        lr_mult[i] = t.lr_mult;
        wd_mult[i] = t.wd_mult;
        any |= t.lr_mult != 1.0 || t.wd_mult != 1.0;
    }
    return any;
}

/* The copy of the loops for this CPU (optim_simd.h): fast = 0 and
 * CLOZE_KERNELS=scalar take the baseline copy, the reference. */
static const cz_optim_ops *ops(int fast) {
    if (!fast) return &cz_optim_ops_baseline;
    switch (cz_cpu_kernel_isa()) {
#if CZ_HAVE_X86_ISAS
    case CZ_ISA_AVX512:
        return &cz_optim_ops_avx512;
    case CZ_ISA_AVX2:
        return &cz_optim_ops_avx2;
#endif
    default:
        return &cz_optim_ops_baseline;
    }
}

static double lanes_total(const double lanes[CZ_OPTIM_LANES]) {
    double s = 0;
    for (int l = 0; l < CZ_OPTIM_LANES; l++) s += lanes[l];
    return s;
}

void cz_optim_adamw_block(const cz_adam_coef *k, float pre, float wd, float *params,
                          const float *grads, float *m, float *v, size_t n, int fast) {
    ops(fast)->adamw(k, pre, wd, params, grads, m, v, n);
}

double cz_optim_sumsq_block(const float *x, float pre, size_t n, int fast) {
    double lanes[CZ_OPTIM_LANES];
    ops(fast)->sumsq(x, pre, n, lanes);
    return lanes_total(lanes);
}

void cz_optim_lamb_block(const cz_adam_coef *k, float pre, float wd, const float *params,
                         const float *grads, float *m, float *v, float *u, size_t n, int fast,
                         double *w_sq, double *u_sq) {
    double wl[CZ_OPTIM_LANES], ul[CZ_OPTIM_LANES];
    ops(fast)->lamb(k, pre, wd, params, grads, m, v, u, n, wl, ul);
    *w_sq = lanes_total(wl);
    *u_sq = lanes_total(ul);
}

void cz_optim_lamb_apply_block(float lr_trust, float *params, const float *u, size_t n, int fast) {
    ops(fast)->axpy(lr_trust, params, u, n);
}

/* ---- the public per-slice calls: blocks of CZ_OPTIM_BLOCK, in order ---- */

static double sumsq(const float *x, float pre, size_t n, int fast) {
    double s = 0;
    for (size_t b = 0; b < n; b += CZ_OPTIM_BLOCK)
        s +=
            cz_optim_sumsq_block(x + b, pre, n - b < CZ_OPTIM_BLOCK ? n - b : CZ_OPTIM_BLOCK, fast);
    return s;
}
double cz_optim_sumsq(const float *x, float pre, size_t n) {
    return sumsq(x, pre, n, 1);
}
double cz_optim_sumsq_ref(const float *x, float pre, size_t n) {
    return sumsq(x, pre, n, 0);
}

static void adamw_update(const cz_adam_coef *k, const cz_param_range *ranges, int n_ranges,
                         float *params, const float *grads, float *m, float *v, size_t lo,
                         size_t hi, int fast) {
    for (int r = 0; r < n_ranges; r++) {
        size_t a = ranges[r].offset, b = ranges[r].offset + ranges[r].numel;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (b <= a) continue;
        float wd = ranges[r].no_decay ? 0.0f : k->wd;
        cz_optim_adamw_block(k, 1.0f, wd, params + a, grads + a, m + (a - lo), v + (a - lo), b - a,
                             fast);
    }
}
void cz_adamw_update(const cz_adam_coef *k, const cz_param_range *ranges, int n_ranges,
                     float *params, const float *grads, float *m, float *v, size_t lo, size_t hi) {
    adamw_update(k, ranges, n_ranges, params, grads, m, v, lo, hi, 1);
}
void cz_adamw_update_ref(const cz_adam_coef *k, const cz_param_range *ranges, int n_ranges,
                         float *params, const float *grads, float *m, float *v, size_t lo,
                         size_t hi) {
    adamw_update(k, ranges, n_ranges, params, grads, m, v, lo, hi, 0);
}

static void lamb_direction(const cz_adam_coef *k, int no_decay, const float *params,
                           const float *grads, float *m, float *v, float *u, size_t count,
                           double *w_sq, double *u_sq, int fast) {
    float wd = no_decay ? 0.0f : k->wd;
    double ws = 0, us = 0;
    for (size_t b = 0; b < count; b += CZ_OPTIM_BLOCK) {
        size_t n = count - b < CZ_OPTIM_BLOCK ? count - b : CZ_OPTIM_BLOCK;
        double bw, bu;
        cz_optim_lamb_block(k, 1.0f, wd, params + b, grads + b, m + b, v + b, u + b, n, fast, &bw,
                            &bu);
        ws += bw;
        us += bu;
    }
    *w_sq = ws;
    *u_sq = us;
}
void cz_lamb_direction(const cz_adam_coef *k, int no_decay, const float *params, const float *grads,
                       float *m, float *v, float *u, size_t count, double *w_sq, double *u_sq) {
    lamb_direction(k, no_decay, params, grads, m, v, u, count, w_sq, u_sq, 1);
}
void cz_lamb_direction_ref(const cz_adam_coef *k, int no_decay, const float *params,
                           const float *grads, float *m, float *v, float *u, size_t count,
                           double *w_sq, double *u_sq) {
    lamb_direction(k, no_decay, params, grads, m, v, u, count, w_sq, u_sq, 0);
}

void cz_lamb_apply(float lr_trust, float *params, const float *u, size_t count) {
    cz_optim_lamb_apply_block(lr_trust, params, u, count, 1);
}
