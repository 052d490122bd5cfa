/* optim: the weight-decay name rule, learning-rate schedules and the
 * per-element AdamW arithmetic. */
#include "cloze/optim.h"

#include <math.h>
#include <string.h>

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

int cz_optim_kind_parse(const char *name, cz_optim_kind *out, cz_error *err) {
    if (strcmp(name, "adamw") == 0)
        *out = CZ_OPT_ADAMW;
    else if (strcmp(name, "lamb") == 0)
        *out = CZ_OPT_LAMB;
    else
        return cz_fail(err, "optim.name: \"%s\" is not one of adamw, lamb", name);
    return 0;
}

long cz_lr_warmup_steps(const cz_optim_config *cfg, long total_steps) {
    /* BERT's run_pretraining.py: int(num_train_steps * warmup_proportion) */
    if (cfg->warmup_fraction > 0) return (long)(cfg->warmup_fraction * (double)total_steps);
    return cfg->warmup_steps;
}

double cz_lr_at(const cz_optim_config *cfg, long step, long total_steps) {
    long warmup = cz_lr_warmup_steps(cfg, total_steps);
    if (step < warmup) return cfg->lr * (double)(step + 1) / (double)warmup;
    if (strcmp(cfg->schedule, "constant") == 0) return cfg->lr;
    double span = (double)(total_steps - warmup);
    double progress = span > 0 ? (double)(step - warmup) / span : 1.0;
    if (progress > 1) progress = 1;
    double floor_ = cfg->min_lr_ratio;
    if (strcmp(cfg->schedule, "cosine") == 0)
        return cfg->lr * (floor_ + (1 - floor_) * 0.5 * (1 + cos(M_PI * progress)));
    /* linear (BERT's polynomial_decay with power 1 after warmup) */
    double f = 1 - progress;
    return cfg->lr * (f > floor_ ? f : floor_);
}

/* One element of AdamW; kept in one place so every placement runs the very
 * same float operations on an element (bitwise agreement). */
static inline float adam_direction(const cz_adam_coef *k, float g, float *m, float *v) {
    float mi = k->beta1 * *m + (1.0f - k->beta1) * g;
    float vi = k->beta2 * *v + (1.0f - k->beta2) * (g * g);
    *m = mi;
    *v = vi;
    return (mi / k->c1) / (sqrtf(vi / k->c2) + k->eps);
}

void cz_adamw_update(const cz_adam_coef *k, const cz_param_range *ranges, int n_ranges,
                     float *params, const float *grads, float *m, float *v, size_t lo, size_t hi) {
    for (int r = 0; r < n_ranges; r++) {
        size_t a = ranges[r].offset, b = ranges[r].offset + ranges[r].numel;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (b <= a) continue;
        float wd = ranges[r].no_decay ? 0.0f : k->wd;
        for (size_t i = a; i < b; i++) {
            float u = adam_direction(k, grads[i] * k->gscale, &m[i - lo], &v[i - lo]);
            u += wd * params[i];
            params[i] -= k->lr * u;
        }
    }
}

void cz_lamb_direction(const cz_adam_coef *k, int no_decay, const float *params, const float *grads,
                       float *m, float *v, float *u, size_t count, double *w_sq, double *u_sq) {
    float wd = no_decay ? 0.0f : k->wd;
    double ws = 0, us = 0;
    for (size_t i = 0; i < count; i++) {
        float ui = adam_direction(k, grads[i] * k->gscale, &m[i], &v[i]);
        ui += wd * params[i];
        u[i] = ui;
        ws += (double)params[i] * params[i];
        us += (double)ui * ui;
    }
    *w_sq = ws;
    *u_sq = us;
}

void cz_lamb_apply(float lr_trust, float *params, const float *u, size_t count) {
    for (size_t i = 0; i < count; i++) params[i] -= lr_trust * u[i];
}
