/* Progress lines on rank 0 and metrics.jsonl: the same figures twice, for a
 * person and for a program; and the loss's divergence watch (train.h). */
#include "train_internal.h"

#include "cloze/cpu.h"

#include <math.h>
#include <string.h>

void cz_metrics_open(cz_run *r) {
    if (r->comm.rank != 0) return;
    char path[CZ_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->cfg.train.run_dir);
    r->metrics = fopen(path, "a");
    if (!r->metrics) cz_warn("%s: cannot open for appending; metrics go to the log only", path);
}

/* A resumed run appends to metrics.jsonl from its checkpoint's step: this
 * record marks where, so that the steps after it that repeat those of the
 * interrupted run (written after its last checkpoint) read as a new
 * attempt, not duplicates. */
void cz_metrics_resumed(cz_run *r) {
    if (r->comm.rank != 0 || !r->metrics) return;
    fprintf(r->metrics, "{\"resumed\":true,\"step\":%ld,\"samples_done\":%llu,\"ranks\":%d}\n",
            r->step, (unsigned long long)r->samples_done, r->comm.size);
    fflush(r->metrics);
}

void cz_metrics_close(cz_run *r) {
    if (r->metrics) fclose(r->metrics);
    r->metrics = NULL;
}

/* Appends ,"key":value; JSON has no NaN or infinity, so those become null
 * (a skipped step's loss). %.9g prints a float's exact value back. */
static void json_num(char *line, size_t *n, size_t cap, const char *key, double v) {
    if (*n >= cap) return;
    if (isfinite(v))
        *n += (size_t)snprintf(line + *n, cap - *n, ",\"%s\":%.9g", key, v);
    else
        *n += (size_t)snprintf(line + *n, cap - *n, ",\"%s\":null", key);
}

static double ratio(long num, long den) {
    return den > 0 ? (double)num / (double)den : 0.0;
}

void cz_metrics_step(cz_run *r, const cz_step_stats *s) {
    if (r->comm.rank != 0) return;
    const int bert = r->cfg.model.arch == CZ_ARCH_BERT;
    double tokens_per_s = s->tokens / s->seconds;
    double mfu = s->flops / s->seconds / (r->peak.gflops * 1e9 * r->comm.size);
    double done = (double)(s->step + 1 - r->first_step);
    double eta = done > 0 ? r->elapsed / done * (double)(r->cfg.train.steps - s->step - 1) : 0;
    if (r->metrics) {
        char line[2048];
        size_t n = (size_t)snprintf(line, sizeof line, "{\"step\":%ld", s->step + 1);
        json_num(line, &n, sizeof line, "loss", s->loss);
        json_num(line, &n, sizeof line, "mlm_loss", s->mlm_loss);
        json_num(line, &n, sizeof line, "nsp_loss", s->nsp_loss);
        json_num(line, &n, sizeof line, "mlm_acc", ratio(s->mlm_correct, s->mlm_count));
        json_num(line, &n, sizeof line, "nsp_acc", ratio(s->nsp_correct, s->nsp_count));
        json_num(line, &n, sizeof line, "lm_loss", s->lm_loss);
        if (r->task) {
            json_num(line, &n, sizeof line, "task_loss", s->task_loss);
            json_num(line, &n, sizeof line, "task_acc", ratio(s->task_correct, s->task_count));
        }
        json_num(line, &n, sizeof line, "lr", s->lr);
        json_num(line, &n, sizeof line, "grad_norm", s->grad_norm);
        json_num(line, &n, sizeof line, "skipped", s->skipped);
        json_num(line, &n, sizeof line, "seq", s->seq);
        json_num(line, &n, sizeof line, "tokens_per_s", tokens_per_s);
        json_num(line, &n, sizeof line, "mfu", mfu);
        json_num(line, &n, sizeof line, "step_seconds", s->seconds);
        json_num(line, &n, sizeof line, "comm_wait_seconds", s->comm_wait);
        json_num(line, &n, sizeof line, "optim_seconds", s->optim_seconds);
        json_num(line, &n, sizeof line, "compute_seconds", s->compute_seconds);
        json_num(line, &n, sizeof line, "backward_seconds", s->backward_seconds);
        json_num(line, &n, sizeof line, "grad_comm_seconds", s->grad_comm_seconds);
        json_num(line, &n, sizeof line, "gather_seconds", s->gather_seconds);
        json_num(line, &n, sizeof line, "grad_rows", s->grad_rows);
        json_num(line, &n, sizeof line, "pred_grad_comm_seconds", s->pred.total);
        json_num(line, &n, sizeof line, "pred_exposed_seconds", s->pred.exposed);
        json_num(line, &n, sizeof line, "pred_gather_seconds", s->pred.gather);
        json_num(line, &n, sizeof line, "samples", (double)s->samples_done);
        fprintf(r->metrics, "%s}\n", line);
        fflush(r->metrics);
    }
    if (r->quiet) return;
    long every = r->cfg.train.log_every > 0 ? r->cfg.train.log_every : 1;
    if ((s->step + 1) % every != 0 && s->step + 1 != r->cfg.train.steps && !s->skipped) return;
    char eta_buf[32], head[160], mfu_buf[320];
    cz_format_mfu(mfu, r->peak.source, r->peak.measured, mfu_buf, sizeof mfu_buf);
    snprintf(head, sizeof head, "step %ld/%ld | loss %.4f", s->step + 1, r->cfg.train.steps,
             s->loss);
    if (r->task)
        cz_info("%s | task %.4f acc %.3f | lr %.3g | gnorm %.3f%s | %.0f tok/s | ETA %s", head,
                s->task_loss, ratio(s->task_correct, s->task_count), s->lr, s->grad_norm,
                s->skipped ? " (SKIPPED: non-finite)" : "", tokens_per_s,
                cz_format_duration(eta, eta_buf, sizeof eta_buf));
    else if (bert)
        cz_info("%s | mlm %.4f acc %.3f | nsp acc %.3f | lr %.3g | gnorm %.3f%s | %.0f tok/s | "
                "%s | ETA %s",
                head, s->mlm_loss, ratio(s->mlm_correct, s->mlm_count),
                ratio(s->nsp_correct, s->nsp_count), s->lr, s->grad_norm,
                s->skipped ? " (SKIPPED: non-finite)" : "", tokens_per_s, mfu_buf,
                cz_format_duration(eta, eta_buf, sizeof eta_buf));
    else
        cz_info("%s | ppl %.2f | lr %.3g | gnorm %.3f%s | %.0f tok/s | %s | ETA %s", head,
                exp(s->lm_loss), s->lr, s->grad_norm, s->skipped ? " (SKIPPED: non-finite)" : "",
                tokens_per_s, mfu_buf, cz_format_duration(eta, eta_buf, sizeof eta_buf));
}

void cz_metrics_eval(cz_run *r, long step, const cz_eval_stats *e) {
    if (r->comm.rank != 0) return;
    const int bert = r->cfg.model.arch == CZ_ARCH_BERT;
    double mlm_loss = e->mlm_count ? e->mlm_loss_sum / (double)e->mlm_count : 0;
    double lm_loss = e->lm_count ? e->lm_loss_sum / (double)e->lm_count : 0;
    if (r->metrics) {
        if (bert)
            fprintf(r->metrics,
                    "{\"step\":%ld,\"eval_mlm_loss\":%.9g,\"eval_mlm_acc\":%.6f,"
                    "\"eval_nsp_acc\":%.6f,\"eval_samples\":%ld}\n",
                    step, mlm_loss, ratio(e->mlm_correct, e->mlm_count),
                    ratio(e->nsp_correct, e->nsp_count), e->samples);
        else
            fprintf(r->metrics,
                    "{\"step\":%ld,\"eval_lm_loss\":%.9g,\"eval_ppl\":%.6g,\"eval_samples\":%ld}\n",
                    step, lm_loss, exp(lm_loss), e->samples);
        fflush(r->metrics);
    }
    if (r->quiet) return;
    if (bert)
        cz_info("eval @ step %ld | held-out MLM loss %.4f acc %.4f | NSP acc %.4f | %ld samples",
                step, mlm_loss, ratio(e->mlm_correct, e->mlm_count),
                ratio(e->nsp_correct, e->nsp_count), e->samples);
    else
        cz_info("eval @ step %ld | held-out LM loss %.4f | perplexity %.2f | %ld samples", step,
                lm_loss, exp(lm_loss), e->samples);
}

int cz_loss_watch_add(cz_loss_watch *w, long step, double loss) {
    const double b = 0.9;
    w->n++;
    w->ema = b * w->ema + (1 - b) * loss;
    w->smoothed = w->ema / (1 - pow(b, (double)w->n));
    if (w->n == 1 || w->smoothed < w->min) {
        w->min = w->smoothed;
        w->min_step = step;
    }
    if (w->alarm && w->smoothed < 2 * w->min) w->alarm = 0;
    if (w->alarm || !(w->smoothed > 4 * w->min && w->smoothed - w->min >= log(2.0))) return 0;
    w->alarm = 1;
    return 1;
}
