/* sweep: a point's directory: its configuration, state, metrics and the
 * record of its invocations.
 *
 *   DIR/points/NAME/point.cfg       the complete configuration cloze-train runs
 *   DIR/points/NAME/metrics.jsonl   written by cloze-train (appended on resume)
 *   DIR/points/NAME/ckpt-*.lz4      its checkpoints (--resume auto)
 *   DIR/points/NAME/train.log       cloze-train's output
 *   DIR/points/NAME/attempts.jsonl  one line per invocation: wall time, exit, outcome
 *   DIR/points/NAME/state.json      {"status":"done"} or {"status":"failed","error":...}
 *   DIR/points/NAME/.lock           flock held while a process runs the point */
#include "sweep_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int sw_lock(const char *path, int wait) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void sw_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing releases the flock */
}

double sw_json_number(const char *line, const char *key, int *found) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (found) *found = p != NULL;
    if (!p) return 0;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (!strncmp(p, "null", 4)) return NAN;
    return strtod(p, NULL);
}

/* ---- configuration on disk ---- */

/* The configuration as text, without its "loaded from" comment: two configs
 * are the same run when these texts are equal (comments and key order are
 * those of this build's writer on both sides). */
static char *canonical_text(const cz_config *c) {
    cz_config *tmp = malloc(sizeof *tmp);
    if (!tmp) return NULL;
    *tmp = *c;
    tmp->source[0] = 0;
    char *text = cz_config_to_string(tmp);
    free(tmp);
    return text;
}

/* Whether dir holds a checkpoint ckpt-*.lz4 (or, any_run: also a
 * metrics.jsonl, i.e. a run has started there). */
static int has_run(const char *dir, int any_run) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        found = (!strncmp(e->d_name, "ckpt-", 5) && n > 4 && !strcmp(e->d_name + n - 4, ".lz4")) ||
                (any_run && !strcmp(e->d_name, "metrics.jsonl"));
    }
    closedir(d);
    return found;
}

static int write_point_config(const cz_sweep_point *p, cz_error *err) {
    char path[CZ_PATH_MAX + 32];
    sw_join(path, sizeof path, p->dir, "point.cfg");
    char *want = canonical_text(&p->cfg);
    if (!want) return cz_fail(err, "out of memory");
    int rc = 0;
    if (sw_file_exists(path)) {
        cz_config *old = malloc(sizeof *old);
        if (!old) {
            free(want);
            return cz_fail(err, "%s: out of memory", path);
        }
        cz_error e = {{0}};
        int loaded = cz_config_load(old, path, NULL, 0, &e) == 0;
        char *have = loaded ? canonical_text(old) : NULL;
        free(old);
        if (loaded && !have) {
            free(want);
            return cz_fail(err, "%s: out of memory", path);
        }
        int same = have && !strcmp(have, want);
        free(have);
        if (!same && has_run(p->dir, 1))
            rc = cz_fail(err,
                         "%s: this point was run with another configuration (the spec, the base "
                         "configuration or --set changed since); restore them, or remove %s to "
                         "run it afresh",
                         path, p->dir);
        else if (same) {
            free(want);
            return 0;
        }
    }
    if (rc == 0) {
        /* written with the base's path as provenance */
        char *text = cz_config_to_string(&p->cfg);
        rc = text ? cz_write_file_atomic(path, text, strlen(text), err)
                  : cz_fail(err, "out of memory");
        free(text);
    }
    free(want);
    return rc;
}

int cz_sweep_materialize(cz_sweep *s, cz_error *err) {
    char path[CZ_PATH_MAX + 32];
    sw_join(path, sizeof path, s->dir, "points");
    if (cz_make_dirs(path, err) != 0) return -1;
    /* the command line's --set, reused by later commands given none */
    sw_join(path, sizeof path, s->dir, "overrides.txt");
    char *text = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&text, &size);
    if (!m) return cz_fail(err, "out of memory");
    for (int i = s->n_set - s->n_cli_set; i < s->n_set; i++) fprintf(m, "%s\n", s->set[i]);
    fclose(m);
    int rc = cz_write_file_atomic(path, text, size, err);
    free(text);
    if (rc != 0) return -1;
    for (int i = 0; i < s->n_points; i++)
        if (cz_sweep_prepare_point(s, i, err) != 0) return -1;
    return 0;
}

int cz_sweep_prepare_point(cz_sweep *s, int i, cz_error *err) {
    cz_sweep_point *p = &s->points[i];
    if (p->invalid) return 0;
    if (cz_make_dirs(p->dir, err) != 0 || write_point_config(p, err) != 0) return -1;
    return 0;
}

/* ---- state ---- */

const char *cz_point_state_name(cz_point_state st) {
    static const char *const n[] = {"pending", "running", "interrupted",
                                    "done",    "failed",  "invalid"};
    return st >= 0 && st <= CZ_POINT_INVALID ? n[st] : "?";
}

/* The string value of "key" in a flat JSON object, unescaped (\" \\ \n). */
static void json_string(const char *line, const char *key, char *buf, size_t len) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    buf[0] = 0;
    const char *p = strstr(line, pat);
    if (!p) return;
    p += strlen(pat);
    size_t o = 0;
    for (; *p && *p != '"' && o + 1 < len; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            buf[o++] = *p == 'n' ? ' ' : *p;
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = 0;
}

cz_point_state cz_point_get_state(const cz_sweep_point *p, char *why, size_t len) {
    if (why && len) why[0] = 0;
    if (p->invalid) {
        if (why) snprintf(why, len, "%s", p->error);
        return CZ_POINT_INVALID;
    }
    char path[CZ_PATH_MAX + 32];
    struct stat st;
    if (stat(p->dir, &st) != 0) return CZ_POINT_PENDING;
    sw_join(path, sizeof path, p->dir, "state.json");
    void *data = NULL;
    size_t n = 0;
    cz_error e;
    if (cz_read_file(path, &data, &n, &e) == 0) {
        char status[32], error[CZ_ERROR_MAX];
        json_string(data, "status", status, sizeof status);
        json_string(data, "error", error, sizeof error);
        cz_free(data);
        if (!strcmp(status, "done")) return CZ_POINT_DONE;
        if (!strcmp(status, "failed")) {
            if (why) snprintf(why, len, "%s", error);
            return CZ_POINT_FAILED;
        }
    }
    sw_join(path, sizeof path, p->dir, ".lock");
    if (sw_file_exists(path)) {
        int fd = sw_lock(path, 0);
        if (fd < 0) return CZ_POINT_RUNNING;
        sw_unlock(fd);
    }
    return has_run(p->dir, 0) ? CZ_POINT_INTERRUPTED : CZ_POINT_PENDING;
}

/* ---- metrics.jsonl ---- */

/* A whole record: one object on its line. A run killed while writing leaves
 * a partial line, which the next run's first record then continues. */
static int whole_record(const char *line) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    return n >= 2 && line[0] == '{' && line[n - 1] == '}' && !strchr(line + 1, '{');
}

int cz_point_read_metrics(const cz_sweep_point *p, cz_point_metrics *m, cz_error *err) {
    memset(m, 0, sizeof *m);
    m->eval_loss = m->eval_mlm_acc = m->eval_nsp_acc = NAN;
    char path[CZ_PATH_MAX + 32];
    sw_join(path, sizeof path, p->dir, "metrics.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    long steps = p->cfg.train.steps;
    double *sec = calloc((size_t)steps + 1, sizeof *sec);
    double *mfu = calloc((size_t)steps + 1, sizeof *mfu);
    if (!sec || !mfu) {
        free(sec);
        free(mfu);
        fclose(f);
        return cz_fail(err, "%s: out of memory for %ld steps", path, steps);
    }
    for (long i = 0; i <= steps; i++) sec[i] = NAN;
    int final_eval = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (!whole_record(line)) continue;
        int has_step, has_mlm, has_lm, has_loss, has_end;
        long step = (long)sw_json_number(line, "step", &has_step);
        double mlm = sw_json_number(line, "eval_mlm_loss", &has_mlm);
        double lm = sw_json_number(line, "eval_lm_loss", &has_lm);
        sw_json_number(line, "loss", &has_loss);
        sw_json_number(line, "peak_rss_mib_max", &has_end);
        if (has_step && (has_mlm || has_lm)) {
            if (step == steps) {
                m->have_eval = 1;
                m->eval_loss = has_mlm ? mlm : lm;
                m->eval_mlm_acc = sw_json_number(line, "eval_mlm_acc", &has_mlm);
                if (!has_mlm) m->eval_mlm_acc = NAN;
                int has_nsp;
                m->eval_nsp_acc = sw_json_number(line, "eval_nsp_acc", &has_nsp);
                if (!has_nsp) m->eval_nsp_acc = NAN;
                final_eval = 1;
                m->complete = 0;
            }
        } else if (has_end) {
            if (final_eval) m->complete = 1;
        } else if (has_step && has_loss && step >= 1 && step <= steps) {
            /* the last record of a step wins: a resumed run repeats steps */
            sec[step] = sw_json_number(line, "step_seconds", NULL);
            mfu[step] = sw_json_number(line, "mfu", NULL);
            if (step > m->last_step) m->last_step = step;
            m->last_step_seconds = sec[step];
        }
    }
    fclose(f);
    double weighted = 0;
    for (long i = 1; i <= steps; i++) {
        if (!isfinite(sec[i])) continue;
        m->train_s += sec[i];
        if (isfinite(mfu[i])) weighted += sec[i] * mfu[i];
    }
    /* MFU of the whole run: sum(flops) / (sum(seconds) x peak) is the
     * time-weighted mean of the per-step MFU */
    m->mfu = m->train_s > 0 ? weighted / m->train_s : NAN;
    free(sec);
    free(mfu);
    return 0;
}

double cz_point_wall_seconds(const cz_sweep_point *p) {
    char path[CZ_PATH_MAX + 32];
    sw_join(path, sizeof path, p->dir, "attempts.jsonl");
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    double total = 0;
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        if (!whole_record(line)) continue;
        int found;
        double w = sw_json_number(line, "wall_s", &found);
        if (found && isfinite(w)) total += w;
    }
    fclose(f);
    return total;
}
