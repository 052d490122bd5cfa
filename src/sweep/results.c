/* sweep: results.csv (written through csv.c) and results.jsonl, one row per
 * finished (done or failed) point in spec order, rebuilt from the point directories each time
 * a point ends, so that a rerun or another array task can never leave a
 * stale or duplicated row. The columns are described in docs/sweeps.md. */
#include "sweep_internal.h"

#include "cloze/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Columns that measure time rather than results: two runs of one sweep
 * differ only there. */
const char *const cz_sweep_timing_columns[] = {"wall_s", "train_s", "tokens_per_s", "mfu", NULL};

#define MAX_COLS 96
#define CELL 1200

typedef struct row {
    int n;
    char name[MAX_COLS][CZ_SWEEP_KEY];
    char value[MAX_COLS][CELL];
    int is_text[MAX_COLS];
} row;

static void put(row *r, const char *name, int is_text, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(row *r, const char *name, int is_text, const char *fmt, ...) {
    if (r->n == MAX_COLS) return;
    snprintf(r->name[r->n], CZ_SWEEP_KEY, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->value[r->n], CELL, fmt, ap);
    va_end(ap);
    r->is_text[r->n] = is_text;
    r->n++;
}

static void put_num(row *r, const char *name, double v) {
    if (isfinite(v))
        put(r, name, 0, "%.10g", v);
    else
        put(r, name, 0, "%s", "");
}

/* The value an axis assigned to key, if any. */
static const char *assigned(const cz_sweep_point *p, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < p->n_assign; i++)
        if (!strncmp(p->assign[i], key, n) && p->assign[i][n] == '=') return p->assign[i] + n + 1;
    return NULL;
}

static void put_key(row *r, const cz_sweep_point *p, const char *key, const char *fmt_value) {
    const char *a = assigned(p, key);
    if (p->invalid)
        put(r, key, 0, "%s", a ? a : "");
    else
        put(r, key, 0, "%s", fmt_value);
}

static void put_key_int(row *r, const cz_sweep_point *p, const char *key, long long v) {
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    put_key(r, p, key, text);
}

/* The row of point p in state st (why: a failed point's reason); -1 with
 * err when its metrics cannot be read. */
static int build_row(const cz_sweep *s, const cz_sweep_point *p, cz_point_state st, const char *why,
                     row *r, cz_error *err) {
    const cz_config *c = &p->cfg;
    char v[64];
    r->n = 0;
    put(r, "point", 0, "%d", p->index);
    put(r, "name", 1, "%s", p->name);
    put(r, "status", 1, "%s", st == CZ_POINT_DONE ? "done" : "failed");
    put_key_int(r, p, "model.layers", c->model.layers);
    put_key_int(r, p, "model.hidden", c->model.hidden);
    put_key_int(r, p, "model.heads", c->model.heads);
    put_key_int(r, p, "model.intermediate", c->model.intermediate);
    put_key_int(r, p, "data.seq", c->data.seq);
    put_key_int(r, p, "train.global_batch", c->train.global_batch);
    sw_format_number(c->optim.lr, v, sizeof v);
    put_key(r, p, "optim.lr", v);
    put_key_int(r, p, "train.seed", (long long)c->train.seed);
    for (int e = 0; e < s->n_extra; e++) {
        const char *a = assigned(p, s->extra[e]);
        put(r, s->extra[e], 1, "%s", a ? a : "");
    }
    static const char *const kinds[] = {"", "steps", "tokens", "flops"};
    put(r, "budget_kind", 1, "%s", kinds[s->budget_kind]);
    if (p->budget > 0)
        put_num(r, "budget", p->budget);
    else
        put(r, "budget", 0, "%s", "");
    int valid = !p->invalid;
    put(r, "arch", 1, "%s", valid ? (c->model.arch == CZ_ARCH_GPT ? "gpt" : "bert") : "");
    if (valid) {
        put(r, "params", 0, "%zu", p->params);
        put(r, "params_nonemb", 0, "%zu", p->params_nonemb);
        put_num(r, "flops_per_token", p->flops_per_token);
        put_num(r, "flops_total", p->flops_total);
        put_num(r, "tokens", p->tokens);
        put(r, "steps", 0, "%ld", c->train.steps);
    } else {
        const char *cols[] = {"params",      "params_nonemb", "flops_per_token",
                              "flops_total", "tokens",        "steps"};
        for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++) put(r, cols[k], 0, "%s", "");
    }
    cz_point_metrics m;
    int rc = valid && st == CZ_POINT_DONE ? cz_point_read_metrics(p, &m, err) : 1;
    if (rc < 0) return -1;
    int have = rc == 0;
    if (!have) {
        memset(&m, 0, sizeof m);
        m.eval_loss = m.eval_mlm_acc = m.eval_nsp_acc = m.mfu = m.train_s = NAN;
    }
    put_num(r, "wall_s", have ? cz_point_wall_seconds(p) : NAN);
    put_num(r, "train_s", m.train_s);
    put_num(r, "tokens_per_s", have && m.train_s > 0 ? p->tokens / m.train_s : NAN);
    put_num(r, "mfu", m.mfu);
    put_num(r, "eval_loss", m.eval_loss);
    put_num(r, "eval_ppl", isfinite(m.eval_loss) ? exp(m.eval_loss) : NAN);
    put_num(r, "eval_mlm_acc", m.eval_mlm_acc);
    put_num(r, "eval_nsp_acc", m.eval_nsp_acc);
    /* fine-tuning dev scores (percent): the selected configuration's mean
     * and sample std over its restarts, and the restarts (finetune.c) */
    char ft_errors[CZ_ERROR_MAX] = "";
    for (int k = 0; k < s->n_finetune; k++) {
        cz_ft_summary f = {.state = CZ_FT_PENDING};
        int ok = valid && st == CZ_POINT_DONE && cz_sweep_ft_read(s, p, k, &f) == CZ_FT_DONE;
        if (valid && st == CZ_POINT_DONE && !ok && f.state == CZ_FT_FAILED) {
            size_t o = strlen(ft_errors);
            snprintf(ft_errors + o, sizeof ft_errors - o, "%sfine-tuning %s: %s", o ? "; " : "",
                     s->finetune[k].name, f.error);
        }
        char col[CZ_SWEEP_KEY + 16];
        snprintf(col, sizeof col, "ft_%s", s->finetune[k].name);
        put_num(r, col, ok ? f.mean : NAN);
        snprintf(col, sizeof col, "ft_%s_std", s->finetune[k].name);
        put_num(r, col, ok ? f.std : NAN);
        snprintf(col, sizeof col, "ft_%s_n", s->finetune[k].name);
        put_num(r, col, ok ? f.n : NAN);
    }
    put(r, "error", 1, "%s", st == CZ_POINT_DONE ? ft_errors : why);
    return 0;
}

static void json_field(FILE *f, const row *r, int k) {
    fprintf(f, "%s\"%s\":", k ? "," : "", r->name[k]);
    const char *v = r->value[k];
    if (!v[0]) {
        fputs("null", f);
        return;
    }
    if (!r->is_text[k]) {
        char *end;
        strtod(v, &end);
        if (!*end) {
            fputs(v, f);
            return;
        }
    }
    cz_json_write_string(f, v);
}

static int flush_to(const char *path, char *text, size_t size, cz_error *err) {
    int rc = cz_write_file_atomic(path, text, size, err);
    free(text);
    return rc;
}

int cz_sweep_write_results(const cz_sweep *s, cz_error *err) {
    char lock_path[CZ_PATH_MAX + 32], csv[CZ_PATH_MAX + 32], jsonl[CZ_PATH_MAX + 32];
    sw_join(lock_path, sizeof lock_path, s->dir, ".results.lock");
    sw_join(csv, sizeof csv, s->dir, "results.csv");
    sw_join(jsonl, sizeof jsonl, s->dir, "results.jsonl");
    if (cz_make_dirs(s->dir, err) != 0) return -1;
    int lock = sw_lock(lock_path, 1);
    if (lock < 0) return cz_fail(err, "%s: cannot lock", lock_path);
    row *r = malloc(sizeof *r);
    char *ctext = NULL, *jtext = NULL;
    size_t csize = 0, jsize = 0;
    FILE *c = open_memstream(&ctext, &csize), *j = open_memstream(&jtext, &jsize);
    if (!r || !c || !j) {
        free(r);
        if (c) fclose(c);
        if (j) fclose(j);
        free(ctext);
        free(jtext);
        sw_unlock(lock);
        return cz_fail(err, "out of memory");
    }
    int header = 0, rc = 0;
    for (int i = 0; i < s->n_points && rc == 0; i++) {
        const cz_sweep_point *p = &s->points[i];
        char why[CZ_ERROR_MAX];
        cz_point_state st = cz_point_get_state(p, why, sizeof why);
        if (!header) {
            /* the header from any row: every row has the same columns */
            if ((rc = build_row(s, p, CZ_POINT_DONE, "", r, err)) != 0) break;
            for (int k = 0; k < r->n; k++) cz_sweep_csv_field(c, r->name[k], k == 0);
            fputc('\n', c);
            header = 1;
        }
        if (st != CZ_POINT_DONE && st != CZ_POINT_FAILED && st != CZ_POINT_INVALID) continue;
        if ((rc = build_row(s, p, st, why, r, err)) != 0) break;
        for (int k = 0; k < r->n; k++) cz_sweep_csv_field(c, r->value[k], k == 0);
        fputc('\n', c);
        fputc('{', j);
        for (int k = 0; k < r->n; k++) json_field(j, r, k);
        fputs("}\n", j);
    }
    free(r);
    /* a memory stream's last flush happens here, and can run out of memory */
    int closed = (fclose(c) == 0) & (fclose(j) == 0);
    if (rc == 0 && !closed) rc = cz_fail(err, "%s: out of memory", csv);
    if (rc == 0)
        rc = flush_to(csv, ctext, csize, err);
    else
        free(ctext);
    if (rc == 0)
        rc = flush_to(jsonl, jtext, jsize, err);
    else
        free(jtext);
    sw_unlock(lock);
    return rc;
}
