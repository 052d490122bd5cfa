/* Fine-tuning's evaluation (include/cloze/finetune.h): the head's logits of
 * every feature of one file across the ranks, the scores, the predictions
 * and results files, and the dev-set evaluation the train runtime calls
 * (ft_evaluate, the task's evaluate). The lowest of the run's files
 * (finetune_private.h): the run (run.c) and the extraction (extract.c) use
 * it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "finetune_private.h"

/* Feature i of f into slot `slot` of a batch as global sequence g: the
 * training samples, the evaluation batches and the extraction's. */
void ft_copy_feature(const cz_ft_features *f, int i, cz_batch_buf *buf, int slot, uint64_t g) {
    size_t T = (size_t)f->T, o = (size_t)i * T, d = (size_t)slot * T;
    memcpy(buf->tokens + d, f->tokens + o, T * sizeof(int32_t));
    memcpy(buf->segments + d, f->segments + o, T * sizeof(int32_t));
    memcpy(buf->attn_mask + d, f->mask + o, T);
    memcpy(buf->targets + d, f->targets + o, T * sizeof(int32_t));
    memcpy(buf->token_labels + d, f->token_label + o, T * sizeof(int32_t));
    buf->labels[slot] = f->label[i];
    buf->cls_index[slot] = f->cls_index[i];
    buf->start_positions[slot] = f->start[i];
    buf->end_positions[slot] = f->end[i];
    buf->sample_ids[slot] = g;
}

static const char *split_name(ft_split s) {
    static const char *names[] = {"dev", "test", "input"};
    return names[s];
}

/* Per-row width of the head's logits for features of T tokens. */
static size_t logit_width(const cz_ft_task *t, int T) {
    if (t->kind == CZ_FT_CLASSIFY || t->kind == CZ_FT_CHOICE)
        return (size_t)t->n_labels; /* one row per example */
    if (t->kind == CZ_FT_SPAN) return (size_t)T * 2;
    return (size_t)T * (size_t)t->n_labels;
}

static int argmax(const float *z, int n) {
    int k = 0;
    for (int i = 1; i < n; i++)
        if (z[i] > z[k]) k = i;
    return k;
}

/* The files a split's predictions go to, in OUT: the task's own format
 * (a label per line, CoNLL token<TAB>tag, SQuAD's predictions.json) and,
 * for dev, the JSON lines with logits (docs/finetune.md). */
typedef struct ft_outputs {
    FILE *plain, *jsonl;
    char plain_path[1200], jsonl_path[1200];
} ft_outputs;

static FILE *open_output(const char *dir, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) cz_warn("%s: cannot write predictions: %s", path, strerror(errno));
    return f;
}

static void open_outputs(ft_outputs *o, const char *dir, const cz_ft_task *t, ft_split s) {
    static const char *ext[] = {"txt", "json", "conll", "txt"}; /* by cz_ft_kind */
    memset(o, 0, sizeof *o);
    char name[64];
    if (s == FT_DEV) { /* (the names of earlier releases) */
        if (t->kind == CZ_FT_SPAN)
            o->plain = open_output(dir, "predictions.json", o->plain_path, sizeof o->plain_path);
        else
            o->jsonl =
                open_output(dir, "dev_predictions.jsonl", o->jsonl_path, sizeof o->jsonl_path);
        return;
    }
    snprintf(name, sizeof name, "%spredictions.%s", s == FT_TEST ? "test_" : "", ext[t->kind]);
    o->plain = open_output(dir, name, o->plain_path, sizeof o->plain_path);
}

static void close_outputs(ft_outputs *o) {
    if (o->plain && fclose(o->plain) != 0) cz_warn("%s: %s", o->plain_path, strerror(errno));
    if (o->jsonl && fclose(o->jsonl) != 0) cz_warn("%s: %s", o->jsonl_path, strerror(errno));
    o->plain = o->jsonl = NULL;
}

/* One line of dev_predictions.jsonl: the predicted and gold label names
 * and the logits they come from (format: docs/finetune.md). */
static void put_prediction(FILE *pf, const cz_ft_task *t, int pred, int gold, const float *z) {
    fputs("{\"pred\":", pf);
    cz_json_write_string(pf, t->labels[pred]);
    fputs(",\"gold\":", pf);
    cz_json_write_string(pf, t->labels[gold]);
    fputs(",\"logits\":[", pf);
    for (int c = 0; c < t->n_labels; c++) fprintf(pf, "%s%.9g", c ? "," : "", (double)z[c]);
    fputs("]}", pf);
}

static int score_classes(const cz_ft_task *t, const cz_ft_features *f, const float *logits,
                         size_t w, ft_outputs *out, cz_ft_scores *s, cz_error *err) {
    int n = f->n / f->group; /* examples: one row of logits each */
    int *gold = malloc((size_t)n * sizeof *gold), *pred = malloc((size_t)n * sizeof *pred);
    if (!gold || !pred) return free(gold), free(pred), cz_fail(err, "out of memory");
    for (int i = 0; i < n; i++) {
        gold[i] = f->label[(size_t)i * f->group];
        pred[i] = argmax(logits + (size_t)i * w, t->n_labels);
        if (out->jsonl) {
            put_prediction(out->jsonl, t, pred[i], gold[i], logits + (size_t)i * w);
            fputc('\n', out->jsonl);
        }
        if (out->plain) fprintf(out->plain, "%s\n", t->labels[pred[i]]);
    }
    cz_ft_classify_scores(gold, pred, n, s);
    free(gold);
    free(pred);
    return 0;
}

/* Tagging: each word is scored at its first piece; words cut at max_seq (or
 * empty) are predicted O (class 0), with null logits in the predictions. */
static int score_tags(const cz_ft_task *tk, const cz_ft_dataset *d, const cz_ft_features *f,
                      const float *logits, size_t w, ft_outputs *out, cz_ft_scores *s,
                      cz_error *err) {
    long total = 0;
    for (int e = 0; e < d->n; e++) total += d->ex[e].n_words;
    int *gold = malloc((size_t)total * sizeof *gold), *pred = malloc((size_t)total * sizeof *pred);
    int *len = malloc((size_t)d->n * sizeof *len);
    if (!gold || !pred || !len)
        return free(gold), free(pred), free(len), cz_fail(err, "out of memory");
    long k = 0;
    int C = tk->n_labels;
    FILE *pf = out->jsonl, *tf = out->plain;
    for (int e = 0; e < d->n; e++) {
        len[e] = d->ex[e].n_words;
        if (pf) fputs("{\"words\":[", pf);
        for (int wd = 0; wd < d->ex[e].n_words; wd++, k++) {
            int t = f->first_piece[f->word_base[e] + wd];
            const float *z = t < 0 ? NULL : logits + (size_t)e * w + (size_t)t * C;
            gold[k] = d->ex[e].tags[wd];
            pred[k] = z ? argmax(z, C) : 0;
            if (tf) fprintf(tf, "%s\t%s\n", d->ex[e].words[wd], tk->labels[pred[k]]);
            if (!pf) continue;
            if (wd) fputc(',', pf);
            if (z) {
                put_prediction(pf, tk, pred[k], gold[k], z);
            } else {
                fputs("{\"pred\":", pf);
                cz_json_write_string(pf, tk->labels[0]);
                fputs(",\"gold\":", pf);
                cz_json_write_string(pf, tk->labels[gold[k]]);
                fputs(",\"logits\":null}", pf);
            }
        }
        if (pf) fputs("]}\n", pf);
        if (tf) fputc('\n', tf); /* CoNLL: a blank line ends a sentence */
    }
    cz_ft_entity_scores(gold, pred, len, d->n, (char(*)[32])tk->labels, s);
    free(gold);
    free(pred);
    free(len);
    return 0;
}

/* SQuAD: the best answer of each question over its windows, written as the
 * official predictions.json ({id: answer}). */
static int score_spans(const ft_run *r, const cz_ft_dataset *d, const cz_ft_features *f,
                       const float *logits, size_t w, ft_outputs *out, cz_ft_scores *s) {
    FILE *pf = out->plain;
    if (pf) fputc('{', pf);
    double em_sum = 0, f1_sum = 0;
    int first = 0;
    for (int e = 0; e < d->n; e++) {
        int count = 0;
        while (first + count < f->n && f->example[first + count] == e) count++;
        char *ans = cz_ft_squad_answer(f, d, r->tok, e, logits + (size_t)first * w, first, count,
                                       r->o->max_answer, r->o->n_best);
        char *gold[64];
        int ng = d->ex[e].n_answers < 64 ? d->ex[e].n_answers : 64;
        for (int a = 0; a < ng; a++) gold[a] = d->ex[e].answers[a].text;
        double em = 0, f1 = 0;
        if (ng) cz_ft_squad_score(ans ? ans : "", gold, ng, &em, &f1);
        em_sum += em;
        f1_sum += f1;
        if (pf) {
            if (e) fputc(',', pf);
            cz_json_write_string(pf, d->ex[e].id);
            fputc(':', pf);
            cz_json_write_string(pf, ans ? ans : "");
        }
        free(ans);
        first += count;
    }
    if (pf) fputs("}\n", pf);
    s->exact = 100.0 * em_sum / d->n;
    s->squad_f1 = 100.0 * f1_sum / d->n;
    return 0;
}

/* The scores of one file from the logits of all its features (rank 0), and
 * when write is set its predictions (open_outputs). An unlabelled file
 * (d->labelled == 0) gets predictions; its scores are meaningless. */
int ft_score_split(const ft_run *r, ft_split split, const cz_ft_dataset *d, const cz_ft_features *f,
                   const float *logits, int write, cz_ft_scores *s, char *written, size_t cap,
                   cz_error *err) {
    size_t w = logit_width(&r->task, f->T);
    memset(s, 0, sizeof *s);
    ft_outputs out;
    memset(&out, 0, sizeof out);
    if (write) open_outputs(&out, r->o->out_dir, &r->task, split);
    int rc = r->task.kind == CZ_FT_SPAN  ? score_spans(r, d, f, logits, w, &out, s)
             : r->task.kind == CZ_FT_TAG ? score_tags(&r->task, d, f, logits, w, &out, s, err)
                                         : score_classes(&r->task, f, logits, w, &out, s, err);
    s->n = d->n;
    if (written && cap)
        snprintf(written, cap, "%s", out.plain ? out.plain_path : out.jsonl ? out.jsonl_path : "");
    close_outputs(&out);
    return rc;
}

const char *ft_metric_name(cz_ft_metric m) {
    static const char *names[] = {"accuracy", "f1", "mcc", "squad_f1", "entity_f1"};
    return names[m];
}

/* The selection figure, in percent. */
double ft_score_of(cz_ft_metric m, const cz_ft_scores *s) {
    switch (m) {
    case CZ_FT_ACCURACY:
        return 100 * s->accuracy;
    case CZ_FT_F1:
        return 100 * s->f1;
    case CZ_FT_MCC:
        return 100 * s->mcc;
    case CZ_FT_SQUAD:
        return s->squad_f1;
    default:
        return s->entity_f1;
    }
}

/* A split's figures as a JSON object (results.jsonl's "dev" and "test",
 * predict's scores.json): the task kind's scores and the example count. */
static void put_scores(FILE *f, const cz_ft_task *t, const cz_ft_scores *s) {
    fputc('{', f);
    if (t->kind == CZ_FT_CLASSIFY || t->kind == CZ_FT_CHOICE)
        fprintf(f, "\"accuracy\":%.6f,\"f1\":%.6f,\"mcc\":%.6f", 100 * s->accuracy, 100 * s->f1,
                100 * s->mcc);
    else if (t->kind == CZ_FT_SPAN)
        fprintf(f, "\"exact\":%.6f,\"f1\":%.6f", s->exact, s->squad_f1);
    else
        fprintf(f, "\"precision\":%.6f,\"recall\":%.6f,\"f1\":%.6f", s->precision, s->recall,
                s->entity_f1);
    fprintf(f, ",\"examples\":%ld}", s->n);
}

/* One line of results.jsonl (format: docs/finetune.md). */
static void write_result(ft_run *r, long step, int final, const cz_ft_scores *s, int ranks) {
    if (!r->results) return;
    FILE *f = r->results;
    const cz_ft_options *o = r->o;
    fprintf(f, "{\"kind\":\"eval\",\"final\":%s,\"task\":", final ? "true" : "false");
    cz_json_write_string(f, r->task.name);
    fprintf(f, ",\"label\":");
    cz_json_write_string(f, o->label[0] ? o->label : r->task.name);
    fprintf(f, ",\"metric\":\"%s\",\"score\":%.6f,\"step\":%ld,\"steps\":%ld,\"epoch\":%.4f,",
            ft_metric_name(r->task.metric), ft_score_of(r->task.metric, s), step, r->steps,
            r->steps_per_epoch ? (double)step / (double)r->steps_per_epoch : 0.0);
    fprintf(f, "\"dev\":");
    put_scores(f, &r->task, s);
    fprintf(f, ",\"lr\":%.9g,\"batch\":%d,\"epochs\":%d,\"seed\":%llu,", o->lr, o->batch, o->epochs,
            o->seed);
    fprintf(f, "\"max_seq\":%d,\"train_examples\":%d,\"train_features\":%d,\"ranks\":%d,",
            o->max_seq, r->train.n, r->ftrain.n, ranks);
    fprintf(f, "\"init\":");
    cz_json_write_string(f, o->random_init ? "random" : o->init);
    fprintf(f, ",\"seconds\":%.1f}\n", cz_now() - r->t0);
    fflush(f);
}

/* A scored test or input file as one JSON object (results.jsonl's "test"
 * line after the last step, predict's scores.json): scores are null for a
 * file without labels. */
void ft_put_split_result(FILE *f, const ft_run *r, ft_split split, const cz_ft_dataset *d,
                         const cz_ft_features *fe, const cz_ft_scores *s, long step,
                         const char *written) {
    char cut[256];
    cz_ft_truncation_text(fe, d, r->o->max_query, cut, sizeof cut);
    fprintf(f, "{\"kind\":\"%s\",\"task\":", split_name(split));
    cz_json_write_string(f, r->task.name);
    fputs(",\"file\":", f);
    cz_json_write_string(f, d->path);
    fprintf(f, ",\"metric\":\"%s\",\"score\":", ft_metric_name(r->task.metric));
    if (d->labelled) {
        fprintf(f, "%.6f,\"%s\":", ft_score_of(r->task.metric, s), split_name(split));
        put_scores(f, &r->task, s);
    } else {
        fprintf(f, "null,\"%s\":{\"examples\":%ld}", split_name(split), s->n);
    }
    if (split == FT_TEST) fprintf(f, ",\"step\":%ld", step);
    fprintf(f,
            ",\"max_seq\":%d,\"truncated\":%d,\"words_lost\":%d,"
            "\"answers_lost\":%d,\"truncation\":",
            fe->T, fe->truncated, fe->words_lost, fe->answers_lost);
    cz_json_write_string(f, cut);
    fputs(",\"predictions\":", f);
    cz_json_write_string(f, written);
    fputs(",\"init\":", f);
    cz_json_write_string(f, r->o->init);
    fputs("}\n", f);
}

/* Every rank learns whether any rank failed (a rank that fails alone must
 * not leave the others waiting in the next collective). */
int ft_any_failed(const cz_comm *comm, int rc, const char *what, cz_error *err) {
    double bad = rc != 0;
    cz_error e2;
    if (cz_comm_allreduce_doubles(comm, &bad, 1, CZ_OP_MAX, &e2)) return -1;
    if (bad && rc == 0) cz_fail(err, "%s failed on another rank", what);
    return bad != 0;
}

/* Every rank's rows into every rank's buf: each row was filled by exactly
 * one rank, zeros elsewhere. Summed as floats that is exact but for the
 * sign of a zero (-0 + +0 = +0 in round to nearest: a -0 logit would stay
 * -0 on one rank and print as 0 on two), so the rows travel as their bit
 * patterns, added as integers: x + 0 = x for any pattern, on any rank
 * count, as train.c moves its reported figures (dist.exact). */
static int gather_rows(const cz_comm *comm, float *buf, size_t n, cz_error *err) {
    if (comm->size == 1) return 0;
    int64_t *bits = malloc((n + 1) * sizeof *bits);
    if (!bits) return cz_fail(err, "out of memory for %zu logits", n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, buf + i, sizeof u);
        bits[i] = (int64_t)u;
    }
    int rc = cz_allreduce_i64(comm, CZ_ALLREDUCE_RING, bits, n, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint32_t u = (uint32_t)bits[i];
        memcpy(buf + i, &u, sizeof u);
    }
    free(bits);
    return rc;
}

/* The head's logits of every feature of f on every rank: each rank runs
 * every ranks-th micro-batch of r->micro sequences (whole examples), the
 * rows are summed over ranks. Rows: one per example for classification,
 * similarity and choice, one per feature for tagging and spans. */
float *ft_split_logits(ft_run *r, cz_model *m, const cz_comm *comm, const cz_ft_features *f,
                       cz_error *err) {
    size_t w = logit_width(&r->task, f->T);
    int G = r->task.kind == CZ_FT_TAG || r->task.kind == CZ_FT_SPAN ? 1 : f->group;
    size_t n_rows = (size_t)(f->n / G);
    float *logits = calloc(n_rows * w + 1, sizeof *logits);
    if (!logits) {
        cz_fail(err, "out of memory for %d logits", f->n);
        return NULL;
    }
    int batches = (f->n + r->micro - 1) / r->micro, rc = 0;
    for (int k = comm->rank; k < batches && rc == 0; k += comm->size) {
        int first = k * r->micro, n = f->n - first < r->micro ? f->n - first : r->micro;
        for (int j = 0; j < n; j++)
            ft_copy_feature(f, first + j, &r->buf, j, (uint64_t)(first + j));
        cz_batch b = r->o->pad_max ? cz_batch_view(&r->buf, n) : cz_batch_view_packed(&r->buf, n);
        b.train = 0;
        cz_losses l;
        if (cz_model_forward(m, &b, &l, err)) {
            rc = -1;
            break;
        }
        const float *z = cz_model_head_logits(m);
        if (G > 1 || r->task.kind == CZ_FT_CLASSIFY || r->task.kind == CZ_FT_CHOICE) {
            memcpy(logits + (size_t)(first / G) * w, z, (size_t)(n / G) * w * sizeof(float));
            continue;
        }
        /* per-token rows of b.seq tokens into the file's rows of f->T (the
         * padding cut off keeps zeros: no word or answer is there) */
        size_t wb = w / (size_t)f->T * (size_t)b.seq;
        for (int j = 0; j < n; j++)
            memcpy(logits + (size_t)(first + j) * w, z + (size_t)j * wb, wb * sizeof(float));
    }
    if (ft_any_failed(comm, rc, "evaluation", err) || gather_rows(comm, logits, n_rows * w, err)) {
        free(logits);
        return NULL;
    }
    return logits;
}

/* The test file of a run (--test) after the last step: predictions and a
 * "test" line in results.jsonl. Rank 0 writes; every rank computes. */
static int evaluate_test(ft_run *r, cz_model *m, const cz_comm *comm, long step, cz_error *err) {
    float *logits = ft_split_logits(r, m, comm, &r->ftest, err);
    if (!logits) return -1;
    int rc = 0;
    if (comm->rank == 0) {
        cz_ft_scores s;
        char written[1200];
        rc = ft_score_split(r, FT_TEST, &r->test, &r->ftest, logits, 1, &s, written, sizeof written,
                            err);
        if (rc == 0 && r->results) {
            ft_put_split_result(r->results, r, FT_TEST, &r->test, &r->ftest, &s, step, written);
            fflush(r->results);
        }
        if (rc == 0 && !r->o->quiet && r->test.labelled)
            cz_info("test %s: %s %.2f over %ld examples; predictions in %s", r->test.path,
                    ft_metric_name(r->task.metric), ft_score_of(r->task.metric, &s), s.n, written);
        else if (rc == 0 && !r->o->quiet)
            cz_info("test %s: %ld examples without labels; predictions in %s", r->test.path, s.n,
                    written);
        if (rc == 0 && r->res) r->res->test = s;
    }
    free(logits);
    return cz_comm_share_verdict(comm, 0, rc, err) < 0 ? -1 : 0;
}

int ft_evaluate(void *ctx, cz_model *m, const cz_comm *comm, long step, int final, cz_error *err) {
    ft_run *r = ctx;
    if (step == 0 && !final) return 0; /* nothing learnt yet */
    float *logits = ft_split_logits(r, m, comm, &r->fdev, err);
    if (!logits) return -1;
    int rc = 0;
    if (comm->rank == 0) {
        cz_ft_scores s;
        rc = ft_score_split(r, FT_DEV, &r->dev, &r->fdev, logits, final, &s, NULL, 0, err);
        if (rc == 0) {
            double sc = ft_score_of(r->task.metric, &s);
            write_result(r, step, final, &s, comm->size);
            r->dev_last = s;
            r->dev_new = 1;
            if (!r->o->quiet)
                cz_info("dev @ step %ld (epoch %.2f): %s %.2f over %ld examples", step,
                        (double)step / (double)r->steps_per_epoch, ft_metric_name(r->task.metric),
                        sc, s.n);
            if (final && r->res) {
                r->res->score = sc;
                r->res->dev = s;
                r->res->finished = 1;
            }
        }
    }
    free(logits);
    if (cz_comm_share_verdict(comm, 0, rc, err) < 0) return -1;
    if (r->res && final) {
        if (cz_comm_bcast(comm, &r->res->score, sizeof r->res->score, 0, err)) return -1;
        r->res->finished = 1;
    }
    if (final && r->o->test_path[0]) return evaluate_test(r, m, comm, step, err);
    return 0;
}

/* The dev figures just written to results.jsonl as TensorBoard scalars
 * "dev/<name>": the numbers of its line (printed as put_scores does and
 * read back), so that both files say the same to a float32. */
static int dev_scalar(ft_run *r, cz_scalar *v, int k, const char *name, double x) {
    char num[64];
    snprintf(num, sizeof num, "%.6f", x);
    snprintf(r->dev_tags[k], sizeof r->dev_tags[0], "dev/%s", name);
    v[k] = (cz_scalar){r->dev_tags[k], strtod(num, NULL)};
    return k + 1;
}

int ft_eval_scalars(void *ctx, cz_scalar *v, int max) {
    ft_run *r = ctx;
    if (!r->dev_new || max < 5) return 0;
    r->dev_new = 0;
    const cz_ft_scores *s = &r->dev_last;
    int k = dev_scalar(r, v, 0, "score", ft_score_of(r->task.metric, s));
    if (r->task.kind == CZ_FT_CLASSIFY || r->task.kind == CZ_FT_CHOICE) {
        k = dev_scalar(r, v, k, "accuracy", 100 * s->accuracy);
        k = dev_scalar(r, v, k, "f1", 100 * s->f1);
        k = dev_scalar(r, v, k, "mcc", 100 * s->mcc);
    } else if (r->task.kind == CZ_FT_SPAN) {
        k = dev_scalar(r, v, k, "exact", s->exact);
        k = dev_scalar(r, v, k, "f1", s->squad_f1);
    } else {
        k = dev_scalar(r, v, k, "precision", s->precision);
        k = dev_scalar(r, v, k, "recall", s->recall);
        k = dev_scalar(r, v, k, "f1", s->entity_f1);
    }
    return k;
}
