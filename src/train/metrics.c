/* Progress lines on rank 0 and metrics.jsonl: the same figures twice, for a
 * person and for a program; and the loss's divergence watch (train.h). */
#include "train_internal.h"

#include "cloze/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cz_metrics_open(cz_run *r, int resumed) {
    if (r->comm.rank != 0) return;
    char path[CZ_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->cfg.train.run_dir);
    r->metrics = fopen(path, "a");
    if (!r->metrics) cz_warn("%s: cannot open for appending; metrics go to the log only", path);
    if (!r->cfg.train.tensorboard) return;
    /* the first step this process records: a resumed run's step records
     * start after its checkpoint's step (whose evaluation it keeps), a fresh
     * run's evaluation at step 0 */
    cz_error err;
    if (cz_tfevents_open(&r->tb, r->cfg.train.run_dir, resumed ? r->step + 1 : r->step, resumed,
                         &err) != 0)
        cz_warn("%s; no TensorBoard events (train.tensorboard)", err.msg);
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
    cz_tfevents_close(&r->tb);
}

/* One record's figures twice: `"key":value` in the metrics.jsonl line and a
 * TensorBoard scalar "group/name". The scalar is the number the line holds
 * (its text read back), so that both files say the same to a float32. */
typedef struct record {
    char line[2048];
    size_t n;
    cz_scalar sc[48];
    char tags[48][48];
    int ns;
} record;

static void put(record *o, const char *group, const char *key, const char *fmt, double v) {
    if (o->n >= sizeof o->line) return;
    char num[64];
    snprintf(num, sizeof num, fmt, v);
    /* JSON has no NaN or infinity, so those become null (a skipped step's loss) */
    o->n += (size_t)snprintf(o->line + o->n, sizeof o->line - o->n, ",\"%s\":%s", key,
                             isfinite(v) ? num : "null");
    if (o->ns == 48) return;
    /* the eval_ prefix says "held-out" in metrics.jsonl; the group does in TensorBoard */
    const char *name = !strncmp(key, "eval_", 5) ? key + 5 : key;
    snprintf(o->tags[o->ns], sizeof o->tags[0], "%s/%s", group, name);
    o->sc[o->ns] = (cz_scalar){o->tags[o->ns], isfinite(v) ? strtod(num, NULL) : v};
    o->ns++;
}

static void put_events(cz_run *r, long step, const record *o) {
    cz_error err;
    if (r->tb.f && cz_tfevents_scalars(&r->tb, step, o->sc, o->ns, &err) != 0)
        cz_warn("%s; no more TensorBoard events in this run", err.msg);
}

/* A caller's figures (a task's evaluation) as scalars at step. */
void cz_metrics_scalars(cz_run *r, long step, const cz_scalar *v, int n) {
    if (r->comm.rank != 0 || !r->tb.f) return;
    cz_error err;
    if (cz_tfevents_scalars(&r->tb, step, v, n, &err) != 0)
        cz_warn("%s; no more TensorBoard events in this run", err.msg);
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
    /* %.9g prints a float's exact value back */
    record o;
    o.n = (size_t)snprintf(o.line, sizeof o.line, "{\"step\":%ld", s->step + 1);
    o.ns = 0;
    const char *g = "%.9g";
    put(&o, "train", "loss", g, s->loss);
    put(&o, "train", "mlm_loss", g, s->mlm_loss);
    put(&o, "train", "nsp_loss", g, s->nsp_loss);
    put(&o, "train", "mlm_acc", g, ratio(s->mlm_correct, s->mlm_count));
    put(&o, "train", "nsp_acc", g, ratio(s->nsp_correct, s->nsp_count));
    put(&o, "train", "lm_loss", g, s->lm_loss);
    if (r->task) {
        put(&o, "train", "task_loss", g, s->task_loss);
        put(&o, "train", "task_acc", g, ratio(s->task_correct, s->task_count));
    }
    put(&o, "train", "lr", g, s->lr);
    put(&o, "train", "grad_norm", g, s->grad_norm);
    put(&o, "train", "skipped", g, s->skipped);
    put(&o, "train", "seq", g, s->seq);
    put(&o, "perf", "tokens_per_s", g, tokens_per_s);
    put(&o, "perf", "mfu", g, mfu);
    put(&o, "perf", "step_seconds", g, s->seconds);
    put(&o, "perf", "comm_wait_seconds", g, s->comm_wait);
    put(&o, "perf", "optim_seconds", g, s->optim_seconds);
    put(&o, "perf", "compute_seconds", g, s->compute_seconds);
    put(&o, "perf", "backward_seconds", g, s->backward_seconds);
    put(&o, "perf", "grad_comm_seconds", g, s->grad_comm_seconds);
    put(&o, "perf", "gather_seconds", g, s->gather_seconds);
    put(&o, "perf", "grad_rows", g, s->grad_rows);
    put(&o, "perf", "pred_grad_comm_seconds", g, s->pred.total);
    put(&o, "perf", "pred_exposed_seconds", g, s->pred.exposed);
    put(&o, "perf", "pred_gather_seconds", g, s->pred.gather);
    put(&o, "train", "samples", g, (double)s->samples_done);
    if (r->metrics) {
        fprintf(r->metrics, "%s}\n", o.line);
        fflush(r->metrics);
    }
    put_events(r, s->step + 1, &o);
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
    record o;
    o.n = (size_t)snprintf(o.line, sizeof o.line, "{\"step\":%ld", step);
    o.ns = 0;
    if (bert) {
        put(&o, "eval", "eval_mlm_loss", "%.9g", mlm_loss);
        put(&o, "eval", "eval_mlm_acc", "%.6f", ratio(e->mlm_correct, e->mlm_count));
        put(&o, "eval", "eval_nsp_acc", "%.6f", ratio(e->nsp_correct, e->nsp_count));
    } else {
        put(&o, "eval", "eval_lm_loss", "%.9g", lm_loss);
        put(&o, "eval", "eval_ppl", "%.6g", exp(lm_loss));
    }
    put(&o, "eval", "eval_samples", "%.0f", (double)e->samples);
    if (r->metrics) {
        fprintf(r->metrics, "%s}\n", o.line);
        fflush(r->metrics);
    }
    put_events(r, step, &o);
    if (r->quiet) return;
    if (bert)
        cz_info("eval @ step %ld | held-out MLM loss %.4f acc %.4f | NSP acc %.4f | %ld samples",
                step, mlm_loss, ratio(e->mlm_correct, e->mlm_count),
                ratio(e->nsp_correct, e->nsp_count), e->samples);
    else
        cz_info("eval @ step %ld | held-out LM loss %.4f | perplexity %.2f | %ld samples", step,
                lm_loss, exp(lm_loss), e->samples);
}

void cz_metrics_memory(cz_run *r, const char *key, double max_mib, double mean_mib) {
    if (r->comm.rank != 0) return;
    record o;
    o.n = o.ns = 0;
    char k[2][64];
    snprintf(k[0], sizeof k[0], "%s_mib_max", key);
    snprintf(k[1], sizeof k[1], "%s_mib_mean", key);
    put(&o, "memory", k[0], "%.1f", max_mib);
    put(&o, "memory", k[1], "%.1f", mean_mib);
    put_events(r, r->step, &o);
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
