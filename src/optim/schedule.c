/* optim: learning-rate schedules (formulas in include/cloze/optim.h):
 * linear decay after warm-up as in BERT (Devlin et al. 2018, App. A.2),
 * cosine as in GPT-1 (Radford et al. 2018, Sec. 4.1). */
#include "cloze/optim.h"

#include <math.h>

long cz_lr_warmup_steps(const cz_optim_config *cfg, long total_steps) {
    /* BERT's run_pretraining.py: int(num_train_steps * warmup_proportion) */
    if (cfg->warmup_fraction > 0) return (long)(cfg->warmup_fraction * (double)total_steps);
    return cfg->warmup_steps;
}

double cz_lr_at(const cz_optim_config *cfg, long step, long total_steps) {
    long warmup = cz_lr_warmup_steps(cfg, total_steps);
    if (step < warmup) return cfg->lr * (double)(step + 1) / (double)warmup;
    if (cfg->schedule == CZ_SCHEDULE_CONSTANT) return cfg->lr;
    double span = (double)(total_steps - warmup);
    double progress = span > 0 ? (double)(step - warmup) / span : 1.0;
    if (progress > 1) progress = 1;
    double floor_ = cfg->min_lr_ratio;
    if (cfg->schedule == CZ_SCHEDULE_COSINE)
        return cfg->lr * (floor_ + (1 - floor_) * 0.5 * (1 + cos(M_PI * progress)));
    /* linear (BERT's polynomial_decay with power 1 after warmup) */
    double f = 1 - progress;
    return cfg->lr * (f > floor_ ? f : floor_);
}
