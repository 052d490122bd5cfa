/* sweep: what a point's fine-tuning directories say (ft_run.c runs them).
 * BERT's Table 6 reports, beside the held-out MLM perplexity, each model's
 * dev accuracy averaged over 5 random restarts of fine-tuning (Devlin et al.
 * 2018, Sec. 5.2), the hyperparameters chosen on dev from a small grid
 * (Sec. 4.1, App. A.3). cloze-finetune's `grid` command is that protocol;
 * the sweep runs it once per task on each point's final checkpoint and
 * reads its grid.jsonl back through finetune's cz_ft_grid_read: the
 * selected configuration's mean and sample std over its restarts become the
 * point's ft_NAME, ft_NAME_std and ft_NAME_n (NAME: the entry's name, else
 * its task). */
#include "sweep_internal.h"

#include "cloze/finetune.h"
#include "cloze/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sw_ft_task_dir(const cz_sweep_point *p, const cz_sweep_finetune *ft, char *buf, size_t len) {
    char sub[CZ_PATH_MAX + 16];
    sw_join(sub, sizeof sub, p->dir, "finetune");
    sw_join(buf, len, sub, ft->name);
}

int cz_sweep_ft_runs(const cz_sweep_finetune *ft) {
    int n = ft->restarts;
    int have[3] = {0, 0, 0}; /* cloze-finetune's defaults: BERT's 3 x 2 x 3 grid */
    static const char *const names[3] = {"lr", "batch", "epochs"};
    static const int defaults[3] = {3, 2, 3};
    for (int g = 0; g < ft->n_grid; g++)
        for (int k = 0; k < 3; k++)
            if (!strcmp(ft->grid[g].name, names[k])) have[k] = ft->grid[g].n;
    for (int k = 0; k < 3; k++) n *= have[k] ? have[k] : defaults[k];
    return n;
}

cz_ft_state cz_sweep_ft_read(const cz_sweep *s, const cz_sweep_point *p, int k,
                             cz_ft_summary *out) {
    const cz_sweep_finetune *ft = &s->finetune[k];
    memset(out, 0, sizeof *out);
    out->mean = out->std = NAN;
    char dir[CZ_PATH_MAX + 128], path[CZ_PATH_MAX + 192];
    sw_ft_task_dir(p, ft, dir, sizeof dir);
    sw_join(path, sizeof path, dir, "state.json");
    char *text = sw_slurp(path);
    if (!text) {
        struct stat st;
        out->state = stat(dir, &st) == 0 ? CZ_FT_INTERRUPTED : CZ_FT_PENDING;
        return out->state;
    }
    cz_json *v = NULL;
    cz_error e;
    out->state = CZ_FT_FAILED;
    if (cz_json_parse(text, strlen(text), &v, &e) != 0) {
        snprintf(out->error, sizeof out->error, "%s: %s", path, e.msg);
    } else {
        const char *status = cz_json_get_string(v, "status");
        const char *why = cz_json_get_string(v, "error");
        if (status && !strcmp(status, "done")) {
            cz_ft_grid_selection sel;
            int rc = cz_ft_grid_read(dir, &sel, &e);
            if (rc == 0) {
                out->state = CZ_FT_DONE;
                out->mean = sel.mean;
                out->std = sel.std;
                out->n = sel.restarts;
                snprintf(out->metric, sizeof out->metric, "%s", sel.metric);
            } else if (rc < 0) {
                snprintf(out->error, sizeof out->error, "%s", e.msg);
            } else {
                snprintf(out->error, sizeof out->error, "%s/grid.jsonl: no selected configuration",
                         dir);
            }
        } else {
            snprintf(out->error, sizeof out->error, "%s", why ? why : "failed");
        }
        cz_json_free(v);
    }
    cz_free(text);
    return out->state;
}

int cz_sweep_ft_finished(const cz_sweep *s, const cz_sweep_point *p, int *done) {
    int finished = 0;
    *done = 0;
    for (int k = 0; k < s->n_finetune; k++) {
        cz_ft_summary f;
        cz_ft_state st = cz_sweep_ft_read(s, p, k, &f);
        finished += st == CZ_FT_DONE || st == CZ_FT_FAILED;
        *done += st == CZ_FT_DONE;
    }
    return finished;
}

int cz_sweep_ft_left(const cz_sweep *s, const cz_sweep_point *p, cz_point_state st) {
    if (st != CZ_POINT_DONE) return -1;
    int done;
    cz_sweep_ft_finished(s, p, &done);
    return s->n_finetune - done;
}
