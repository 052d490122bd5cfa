/* sweep: the spec file (libconfig), its expansion into points, and each
 * point's complete configuration and costs. docs/sweeps.md describes the
 * format; conf/sweeps/ has examples. */
#include "sweep_internal.h"

#include "cloze/model.h"

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The shortest "%.{p}g" text that reads back to v. */
static void shortest_g(double v, char *buf, size_t len) {
    char t[64];
    buf[0] = 0;
    for (int p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) == v && (!buf[0] || strlen(t) < strlen(buf)))
            snprintf(buf, len, "%s", t);
    }
    if (!buf[0]) snprintf(buf, len, "%.17g", v);
}

/* An absolute path for `path`, relative to `dir` (or the working directory
 * when dir is NULL); the file need not exist. */
static void absolute(char *buf, size_t len, const char *dir, const char *path) {
    char cwd[CZ_PATH_MAX];
    if (path[0] == '/') {
        snprintf(buf, len, "%s", path);
        return;
    }
    if (!dir) {
        if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
        dir = cwd;
    }
    /* "./x" -> "x" keeps the recorded paths tidy */
    while (path[0] == '.' && path[1] == '/') path += 2;
    sw_join(buf, len, dir, path);
}

/* ---- reading the spec ----
 * Training keys are not read here as settings: sweep.set and the axes'
 * keys and values are kept as "key=value" text and go through the config
 * module's key table (cz_config_set in check_keys, cz_config_load for each
 * point), which owns their names, types, ranges and messages. What is read
 * here are the sweep's own keys (the axes' shape, budget, seeds, eval,
 * ranks, threads, slurm, finetune), which the key table has no place for,
 * through the few checked helpers below: each one either fills its field or
 * says "spec:line: setting: what is wrong". */

static int line_of(const config_setting_t *v) {
    return (int)config_setting_source_line(v);
}

/* cz_fail with the "spec:line: " of setting at in front. */
static int bad(const char *spec, const config_setting_t *at, cz_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(const char *spec, const config_setting_t *at, cz_error *err, const char *fmt, ...) {
    char msg[CZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cz_fail(err, "%s:%d: %s", spec, line_of(at), msg);
}

static int is_list(const config_setting_t *v) {
    int t = config_setting_type(v);
    return t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST;
}

/* Number of elements of a scalar-or-list setting, with element i. */
static int count_of(const config_setting_t *v) {
    return is_list(v) ? config_setting_length(v) : 1;
}
static config_setting_t *elem_of(config_setting_t *v, int i) {
    return is_list(v) ? config_setting_get_elem(v, (unsigned)i) : v;
}

/* A scalar setting as --set text: 12, 1e-3, true, text. */
static int scalar_text(const config_setting_t *v, char *buf, size_t len) {
    switch (config_setting_type(v)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        snprintf(buf, len, "%lld", config_setting_get_int64(v));
        return 0;
    case CONFIG_TYPE_FLOAT:
        shortest_g(config_setting_get_float(v), buf, len);
        return 0;
    case CONFIG_TYPE_BOOL:
        snprintf(buf, len, "%s", config_setting_get_bool(v) ? "true" : "false");
        return 0;
    case CONFIG_TYPE_STRING:
        if (strlen(config_setting_get_string(v)) >= len) return -1;
        snprintf(buf, len, "%s", config_setting_get_string(v));
        return 0;
    }
    return -1;
}

static int read_number(const config_setting_t *v, double *out) {
    int t = config_setting_type(v);
    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
        *out = (double)config_setting_get_int64(v);
    else if (t == CONFIG_TYPE_FLOAT)
        *out = config_setting_get_float(v);
    else
        return -1;
    return 0;
}

/* Member name of group grp, when given, into *out (NULL when absent);
 * -1 with err "WHAT: expected SHAPE" (shape: the message) when it is given
 * but is not a group. */
static int opt_group(const char *spec, config_setting_t *grp, const char *name, const char *shape,
                     config_setting_t **out, cz_error *err) {
    *out = config_setting_get_member(grp, name);
    if (*out && !config_setting_is_group(*out)) return bad(spec, *out, err, "%s", shape);
    return 0;
}

/* String member name of grp into dst (cap bytes): 1 given, 0 absent, -1
 * with err when it is not a string or does not fit. what names it. */
static int opt_string(const char *spec, config_setting_t *grp, const char *name, const char *what,
                      char *dst, size_t cap, cz_error *err) {
    config_setting_t *v = config_setting_get_member(grp, name);
    if (!v) return 0;
    const char *str = config_setting_get_string(v);
    if (!str || strlen(str) >= cap)
        return bad(spec, v, err, "%s: a string of fewer than %zu characters", what, cap);
    snprintf(dst, cap, "%s", str);
    return 1;
}

/* A path member, made absolute against dir (NULL: the working directory):
 * as opt_string. */
static int opt_path(const char *spec, config_setting_t *grp, const char *name, const char *what,
                    const char *dir, char *dst, size_t cap, cz_error *err) {
    char rel[CZ_PATH_MAX];
    int rc = opt_string(spec, grp, name, what, rel, sizeof rel, err);
    if (rc == 1 && rel[0]) absolute(dst, cap, dir, rel);
    return rc;
}

/* An integer member in [lo, hi] into *out, untouched when absent. */
static int opt_int(const char *spec, config_setting_t *grp, const char *name, int lo, int hi,
                   int *out, cz_error *err) {
    config_setting_t *v = config_setting_get_member(grp, name);
    if (!v) return 0;
    double d;
    if (read_number(v, &d) != 0 || d != floor(d) || d < lo || d > hi)
        return bad(spec, v, err, "%s: an integer in [%d, %d]", name, lo, hi);
    *out = (int)d;
    return 0;
}

/* "sweep.set" style lists of strings, appended to dst[*n..max). */
static int opt_strings(const char *spec, config_setting_t *v, const char *what, int max,
                       char (*dst)[CZ_SWEEP_TEXT], int *n, cz_error *err) {
    if (!v) return 0;
    for (int i = 0; i < count_of(v); i++) {
        config_setting_t *e = elem_of(v, i);
        if (config_setting_type(e) != CONFIG_TYPE_STRING)
            return bad(spec, e, err, "sweep.%s: element %d is not a string", what, i);
        if (*n == max) return bad(spec, e, err, "sweep.%s: more than %d entries", what, max);
        const char *str = config_setting_get_string(e);
        if (strlen(str) >= CZ_SWEEP_TEXT)
            return bad(spec, e, err, "sweep.%s: \"%.40s...\" is too long", what, str);
        snprintf(dst[(*n)++], CZ_SWEEP_TEXT, "%s", str);
    }
    return 0;
}

/* The first member of group grp whose name is not one of names[0..n). */
static config_setting_t *unknown_member(config_setting_t *grp, const char *const *names, size_t n) {
    for (int i = 0; i < config_setting_length(grp); i++) {
        config_setting_t *m = config_setting_get_elem(grp, (unsigned)i);
        int ok = 0;
        for (size_t k = 0; k < n; k++) ok |= !strcmp(config_setting_name(m), names[k]);
        if (!ok) return m;
    }
    return NULL;
}

/* A key the sweep itself sets for every point: not for axes or --set. */
static const char *reserved_key(const char *assignment_or_key) {
    static const char *const keys[] = {"train.run_dir"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        size_t n = strlen(keys[i]);
        if (!strncmp(assignment_or_key, keys[i], n) &&
            (assignment_or_key[n] == 0 || assignment_or_key[n] == '=' ||
             assignment_or_key[n] == ' '))
            return keys[i];
    }
    return NULL;
}

/* ---- the axes ---- */

/* The keys of axis idx (key = "..." or keys = [...]) into ax: strings
 * naming no reserved key and no key of an earlier axis. */
static int parse_axis_keys(const cz_sweep *s, config_setting_t *kl, int idx, cz_sweep_axis *ax,
                           cz_error *err) {
    const char *spec = s->spec;
    ax->n_keys = count_of(kl);
    if (ax->n_keys < 1 || ax->n_keys > CZ_SWEEP_MAX_KEYS)
        return cz_fail(err, "%s:%d: sweep.axes[%d]: 1 to %d keys", spec, ax->line, idx,
                       CZ_SWEEP_MAX_KEYS);
    for (int k = 0; k < ax->n_keys; k++) {
        config_setting_t *e = elem_of(kl, k);
        if (config_setting_type(e) != CONFIG_TYPE_STRING ||
            strlen(config_setting_get_string(e)) >= CZ_SWEEP_KEY)
            return bad(spec, e, err, "sweep.axes[%d]: keys are strings like \"model.layers\"", idx);
        snprintf(ax->keys[k], CZ_SWEEP_KEY, "%s", config_setting_get_string(e));
        if (reserved_key(ax->keys[k]))
            return bad(spec, e, err, "sweep.axes[%d]: %s is set by the sweep for each point", idx,
                       ax->keys[k]);
        for (int b = 0; b < s->n_axes; b++)
            for (int bk = 0; bk < s->axes[b].n_keys; bk++)
                if (!strcmp(s->axes[b].keys[bk], ax->keys[k]))
                    return bad(spec, e, err, "sweep.axes[%d]: %s is already an axis", idx,
                               ax->keys[k]);
    }
    return 0;
}

/* The values of axis idx as --set text: a scalar per value, or a list of
 * one per key when the axis has several keys. */
static int parse_axis_values(const char *spec, config_setting_t *values, int idx, cz_sweep_axis *ax,
                             cz_error *err) {
    ax->n_values = config_setting_length(values);
    if (ax->n_values > CZ_SWEEP_MAX_VALUES)
        return bad(spec, values, err, "sweep.axes[%d]: more than %d values", idx,
                   CZ_SWEEP_MAX_VALUES);
    for (int v = 0; v < ax->n_values; v++) {
        config_setting_t *e = config_setting_get_elem(values, (unsigned)v);
        if (ax->n_keys > 1 && (!is_list(e) || config_setting_length(e) != ax->n_keys))
            return bad(spec, e, err,
                       "sweep.axes[%d]: value %d must be a list of %d values (one per key)", idx, v,
                       ax->n_keys);
        for (int k = 0; k < ax->n_keys; k++) {
            config_setting_t *x = ax->n_keys > 1 ? config_setting_get_elem(e, (unsigned)k) : e;
            if (scalar_text(x, ax->values[v][k], CZ_SWEEP_VALUE) != 0)
                return bad(spec, x, err,
                           "sweep.axes[%d]: value %d: expected a number, string or boolean (of "
                           "fewer than %d characters)",
                           idx, v, CZ_SWEEP_VALUE);
        }
    }
    return 0;
}

static int parse_axis(cz_sweep *s, config_setting_t *a, int idx, cz_error *err) {
    const char *spec = s->spec;
    cz_sweep_axis *ax = &s->axes[s->n_axes];
    memset(ax, 0, sizeof *ax);
    ax->line = line_of(a);
    if (!config_setting_is_group(a))
        return bad(spec, a, err, "sweep.axes[%d]: expected { key = \"...\"; values = [...]; }",
                   idx);
    config_setting_t *key = config_setting_get_member(a, "key");
    config_setting_t *keys = config_setting_get_member(a, "keys");
    config_setting_t *values = config_setting_get_member(a, "values");
    if (!!key == !!keys)
        return bad(spec, a, err,
                   "sweep.axes[%d]: give either key = \"section.key\" or keys = [\"...\", ...]",
                   idx);
    if (!values || !is_list(values) || config_setting_length(values) < 1)
        return bad(spec, a, err, "sweep.axes[%d]: values must be a non-empty list", idx);
    if (parse_axis_keys(s, key ? key : keys, idx, ax, err) ||
        parse_axis_values(spec, values, idx, ax, err))
        return -1;
    s->n_axes++;
    return 0;
}

static int parse_axes(cz_sweep *s, config_setting_t *axes, cz_error *err) {
    if (!axes) return 0;
    if (!is_list(axes))
        return bad(s->spec, axes, err,
                   "sweep.axes: expected ( { key = ...; values = [...]; }, ... )");
    if (config_setting_length(axes) > CZ_SWEEP_MAX_AXES)
        return bad(s->spec, axes, err, "sweep.axes: at most %d axes", CZ_SWEEP_MAX_AXES);
    for (int i = 0; i < config_setting_length(axes); i++)
        if (parse_axis(s, config_setting_get_elem(axes, (unsigned)i), i, err)) return -1;
    return 0;
}

/* ---- budget and seeds ---- */

static int parse_budget(cz_sweep *s, config_setting_t *b, cz_error *err) {
    static const char *const names[] = {"", "steps", "tokens", "flops"};
    if (!b) return 0;
    if (!config_setting_is_group(b))
        return bad(s->spec, b, err, "sweep.budget: expected { flops = [...]; } (or steps, tokens)");
    for (int k = 1; k <= 3; k++) {
        config_setting_t *v = config_setting_get_member(b, names[k]);
        if (!v) continue;
        if (s->budget_kind)
            return bad(s->spec, v, err, "sweep.budget: give one of steps, tokens, flops");
        s->budget_kind = (cz_budget_kind)k;
        s->n_budgets = count_of(v);
        if (s->n_budgets < 1 || s->n_budgets > CZ_SWEEP_MAX_VALUES)
            return bad(s->spec, v, err, "sweep.budget.%s: 1 to %d values", names[k],
                       CZ_SWEEP_MAX_VALUES);
        for (int i = 0; i < s->n_budgets; i++) {
            config_setting_t *e = elem_of(v, i);
            if (read_number(e, &s->budgets[i]) != 0 || !(s->budgets[i] >= 1) ||
                !isfinite(s->budgets[i]))
                return bad(s->spec, e, err, "sweep.budget.%s: value %d must be a number >= 1",
                           names[k], i);
        }
    }
    config_setting_t *m = unknown_member(b, names + 1, 3);
    if (m)
        return bad(s->spec, m, err, "sweep.budget.%s: unknown (steps, tokens or flops)",
                   config_setting_name(m));
    return 0;
}

static int parse_seeds(cz_sweep *s, config_setting_t *seeds, cz_error *err) {
    if (!seeds) return 0;
    s->n_seeds = count_of(seeds);
    if (s->n_seeds > CZ_SWEEP_MAX_VALUES)
        return bad(s->spec, seeds, err, "sweep.seeds: at most %d", CZ_SWEEP_MAX_VALUES);
    for (int i = 0; i < s->n_seeds; i++) {
        config_setting_t *e = elem_of(seeds, i);
        int t = config_setting_type(e);
        if ((t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) || config_setting_get_int64(e) < 0)
            return bad(s->spec, e, err, "sweep.seeds: non-negative integers");
        s->seeds[i] = config_setting_get_int64(e);
    }
    for (int a = 0; a < s->n_axes; a++)
        for (int k = 0; k < s->axes[a].n_keys; k++)
            if (!strcmp(s->axes[a].keys[k], "train.seed"))
                return bad(s->spec, seeds, err, "sweep.seeds and an axis on train.seed: give one");
    return 0;
}

/* ---- fine-tuning tasks ---- */

/* task, and name (default: the task): letters, digits, - and _. */
static int parse_ft_names(const char *spec, config_setting_t *t, int i, cz_sweep_finetune *ft,
                          cz_error *err) {
    const char *task = NULL;
    if (!config_setting_is_group(t) || !config_setting_lookup_string(t, "task", &task) ||
        !task[0] || strlen(task) >= sizeof ft->task)
        return bad(spec, t, err, "sweep.finetune[%d]: needs task = \"name\" (e.g. \"sst2\")", i);
    snprintf(ft->task, sizeof ft->task, "%s", task);
    const char *name = task;
    if (config_setting_lookup_string(t, "name", &name) &&
        (!name[0] || strlen(name) >= sizeof ft->name))
        return bad(spec, t, err, "sweep.finetune[%d].name: 1 to %d characters", i,
                   (int)sizeof ft->name - 1);
    snprintf(ft->name, sizeof ft->name, "%s", name);
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_'))
            return bad(spec, t, err,
                       "sweep.finetune[%d].%s: letters, digits, - and _ only (it names columns "
                       "and a directory)",
                       i, name == task ? "task" : "name");
    return 0;
}

/* data = DIR (DIR/train.tsv, DIR/dev.tsv), or train and dev files. */
static int parse_ft_files(const char *spec, config_setting_t *t, int i, cz_sweep_finetune *ft,
                          cz_error *err) {
    char what[64];
    snprintf(what, sizeof what, "sweep.finetune[%d].data", i);
    int data = opt_path(spec, t, "data", what, NULL, ft->data, sizeof ft->data, err);
    snprintf(what, sizeof what, "sweep.finetune[%d].train", i);
    int train = opt_path(spec, t, "train", what, NULL, ft->train, sizeof ft->train, err);
    snprintf(what, sizeof what, "sweep.finetune[%d].dev", i);
    int dev = opt_path(spec, t, "dev", what, NULL, ft->dev, sizeof ft->dev, err);
    if (data < 0 || train < 0 || dev < 0) return -1;
    if (!train && ft->data[0]) absolute(ft->train, sizeof ft->train, ft->data, "train.tsv");
    if (!dev && ft->data[0]) absolute(ft->dev, sizeof ft->dev, ft->data, "dev.tsv");
    if (!ft->train[0] || !ft->dev[0])
        return bad(spec, t, err,
                   "sweep.finetune[%d]: needs data = \"DIR\" (DIR/train.tsv, DIR/dev.tsv) or "
                   "train = \"FILE\"; dev = \"FILE\"",
                   i);
    return 0;
}

/* More cloze-finetune options, verbatim, none of those the sweep gives. */
static int parse_ft_args(const char *spec, config_setting_t *xa, int i, cz_sweep_finetune *ft,
                         cz_error *err) {
    if (!xa) return 0;
    if (!is_list(xa) || config_setting_length(xa) > 16)
        return bad(spec, xa, err,
                   "sweep.finetune[%d].args: a list of at most 16 strings (cloze-finetune "
                   "options)",
                   i);
    static const char *const owned[] = {"--init",     "--task", "--train", "--dev",    "--out",
                                        "--restarts", "--lr",   "--batch", "--epochs", "--resume"};
    for (int j = 0; j < config_setting_length(xa); j++) {
        config_setting_t *e = config_setting_get_elem(xa, (unsigned)j);
        if (scalar_text(e, ft->args[j], sizeof ft->args[j]) != 0)
            return bad(spec, e, err, "sweep.finetune[%d].args: strings or numbers", i);
        for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
            if (!strcmp(ft->args[j], owned[k]))
                return bad(spec, e, err,
                           "sweep.finetune[%d].args: %s is the sweep's (task, data, grid, "
                           "restarts)",
                           i, owned[k]);
    }
    ft->n_args = config_setting_length(xa);
    return 0;
}

/* restarts (1 to 100), and the grid's lists: lr, batch, epochs. */
static int parse_ft_grid(const char *spec, config_setting_t *t, int i, cz_sweep_finetune *ft,
                         cz_error *err) {
    ft->restarts = 1;
    config_setting_t *r = config_setting_get_member(t, "restarts");
    if (r) {
        double v;
        if (read_number(r, &v) != 0 || v < 1 || v > 100 || v != floor(v))
            return bad(spec, r, err, "sweep.finetune[%d].restarts: an integer in [1, 100]", i);
        ft->restarts = (int)v;
    }
    char shape[96];
    snprintf(shape, sizeof shape, "sweep.finetune[%d].grid: expected { lr = [...]; ... }", i);
    config_setting_t *g;
    if (opt_group(spec, t, "grid", shape, &g, err)) return -1;
    for (int j = 0; g && j < config_setting_length(g); j++) {
        config_setting_t *p = config_setting_get_elem(g, (unsigned)j);
        const char *gn = config_setting_name(p);
        if (ft->n_grid == CZ_SWEEP_MAX_GRID || count_of(p) > 16 ||
            strlen(gn) >= sizeof ft->grid[0].name)
            return bad(spec, p, err, "sweep.finetune[%d].grid: at most %d parameters of 16 values",
                       i, CZ_SWEEP_MAX_GRID);
        if (strcmp(gn, "lr") && strcmp(gn, "batch") && strcmp(gn, "epochs"))
            return bad(spec, p, err,
                       "sweep.finetune[%d].grid.%s: unknown (lr, batch, epochs: cloze-finetune "
                       "grid's lists)",
                       i, gn);
        cz_sweep_grid_param *gp = &ft->grid[ft->n_grid++];
        snprintf(gp->name, sizeof gp->name, "%s", gn);
        gp->n = count_of(p);
        for (int k = 0; k < gp->n; k++) {
            double v;
            if (read_number(elem_of(p, k), &v) != 0 ||
                scalar_text(elem_of(p, k), gp->values[k], sizeof gp->values[k]) != 0)
                return bad(spec, p, err, "sweep.finetune[%d].grid.%s: numbers only", i, gp->name);
        }
    }
    return 0;
}

static int parse_ft_task(cz_sweep *s, config_setting_t *t, int i, cz_error *err) {
    const char *spec = s->spec;
    if (s->n_finetune == CZ_SWEEP_MAX_TASKS)
        return bad(spec, t, err, "sweep.finetune: more than %d tasks", CZ_SWEEP_MAX_TASKS);
    cz_sweep_finetune *ft = &s->finetune[s->n_finetune];
    memset(ft, 0, sizeof *ft);
    if (parse_ft_names(spec, t, i, ft, err)) return -1;
    static const char *const members[] = {"name", "task",     "data", "train",
                                          "dev",  "restarts", "grid", "args"};
    config_setting_t *m = unknown_member(t, members, sizeof members / sizeof members[0]);
    if (m)
        return bad(spec, m, err,
                   "sweep.finetune[%d].%s: unknown (name, task, data, train, dev, restarts, "
                   "grid, args)",
                   i, config_setting_name(m));
    if (parse_ft_files(spec, t, i, ft, err) ||
        parse_ft_args(spec, config_setting_get_member(t, "args"), i, ft, err) ||
        parse_ft_grid(spec, t, i, ft, err))
        return -1;
    for (int j = 0; j < s->n_finetune; j++)
        if (!strcmp(s->finetune[j].name, ft->name))
            return bad(spec, t, err,
                       "sweep.finetune[%d]: %s is listed twice (give the runs of one task "
                       "different names)",
                       i, ft->name);
    s->n_finetune++;
    return 0;
}

static int parse_finetune(cz_sweep *s, config_setting_t *list, cz_error *err) {
    if (!list) return 0;
    if (!is_list(list))
        return bad(s->spec, list, err, "sweep.finetune: expected ( { task = ...; }, ... )");
    for (int i = 0; i < config_setting_length(list); i++)
        if (parse_ft_task(s, config_setting_get_elem(list, (unsigned)i), i, err)) return -1;
    return 0;
}

/* ---- the sweep group ---- */

static const char *const known_members[] = {
    "name", "base",  "dir",     "set",   "axes",           "budget", "seeds",
    "eval", "ranks", "threads", "nodes", "ranks_per_node", "slurm",  "finetune"};

/* sweep.base, relative to the spec's folder, resolved to a real path. */
static int parse_base(cz_sweep *s, config_setting_t *sw, cz_error *err) {
    const char *spec = s->spec;
    const char *str;
    if (!config_setting_lookup_string(sw, "base", &str))
        return cz_fail(err,
                       "%s: sweep.base: missing (the training configuration every point "
                       "starts from, relative to the spec)",
                       spec);
    char spec_dir[CZ_PATH_MAX];
    snprintf(spec_dir, sizeof spec_dir, "%s", spec);
    char *slash = strrchr(spec_dir, '/');
    if (slash) *slash = 0;
    absolute(s->base, sizeof s->base, spec_dir, str);
    char real[PATH_MAX];
    if (!realpath(s->base, real))
        return cz_fail(err, "%s: sweep.base: %s: %s", spec, s->base, strerror(errno));
    snprintf(s->base, sizeof s->base, "%s", real);
    return 0;
}

/* eval = { manifest, batches, every }. */
static int parse_eval(cz_sweep *s, config_setting_t *sw, cz_error *err) {
    const char *spec = s->spec;
    config_setting_t *ev;
    if (opt_group(spec, sw, "eval", "sweep.eval: expected { manifest = ...; batches = N; }", &ev,
                  err))
        return -1;
    if (!ev) return 0;
    if (opt_path(spec, ev, "manifest", "sweep.eval.manifest", NULL, s->eval_manifest,
                 sizeof s->eval_manifest, err) < 0 ||
        opt_int(spec, ev, "batches", 1, 1 << 20, &s->eval_batches, err) ||
        opt_int(spec, ev, "every", 0, INT_MAX, &s->eval_every, err))
        return -1;
    return 0;
}

/* slurm = { max_parallel, args }. */
static int parse_slurm(cz_sweep *s, config_setting_t *sw, cz_error *err) {
    const char *spec = s->spec;
    config_setting_t *sl;
    if (opt_group(spec, sw, "slurm", "sweep.slurm: expected { max_parallel = K; args = [...]; }",
                  &sl, err))
        return -1;
    if (!sl) return 0;
    if (opt_int(spec, sl, "max_parallel", 1, 1 << 20, &s->slurm_max_parallel, err) ||
        opt_strings(spec, config_setting_get_member(sl, "args"), "slurm.args", 16, s->slurm_args,
                    &s->n_slurm_args, err))
        return -1;
    return 0;
}

static int parse_spec(cz_sweep *s, config_t *cfg, cz_error *err) {
    const char *spec = s->spec;
    config_setting_t *sw = config_lookup(cfg, "sweep");
    if (!sw || !config_setting_is_group(sw))
        return cz_fail(err,
                       "%s: no sweep: { ... } group (is this a training configuration? "
                       "cloze-sweep takes a sweep spec, see conf/sweeps/)",
                       spec);
    config_setting_t *m =
        unknown_member(sw, known_members, sizeof known_members / sizeof known_members[0]);
    if (m)
        return bad(spec, m, err, "sweep.%s: unknown setting (docs/sweeps.md lists them)",
                   config_setting_name(m));
    if (opt_string(spec, sw, "name", "sweep.name", s->name, sizeof s->name, err) < 0 ||
        parse_base(s, sw, err) ||
        opt_path(spec, sw, "dir", "sweep.dir", NULL, s->dir, sizeof s->dir, err) < 0 ||
        opt_strings(spec, config_setting_get_member(sw, "set"), "set", CZ_SWEEP_MAX_SET, s->set,
                    &s->n_set, err) ||
        parse_axes(s, config_setting_get_member(sw, "axes"), err) ||
        parse_budget(s, config_setting_get_member(sw, "budget"), err) ||
        parse_seeds(s, config_setting_get_member(sw, "seeds"), err) || parse_eval(s, sw, err) ||
        opt_int(spec, sw, "ranks", 1, 1 << 16, &s->ranks, err) ||
        opt_int(spec, sw, "threads", 0, 1024, &s->threads, err) ||
        opt_int(spec, sw, "nodes", 1, 1 << 16, &s->nodes, err) ||
        opt_int(spec, sw, "ranks_per_node", 1, 1 << 16, &s->ranks_per_node, err) ||
        parse_slurm(s, sw, err) ||
        parse_finetune(s, config_setting_get_member(sw, "finetune"), err))
        return -1;
    /* ranks_per_node without ranks gives the ranks; with both they must agree */
    if (s->ranks_per_node > 0) {
        config_setting_t *r = config_setting_get_member(sw, "ranks");
        if (r && s->ranks != s->nodes * s->ranks_per_node)
            return bad(spec, r, err, "ranks = %d, but nodes x ranks_per_node = %d x %d", s->ranks,
                       s->nodes, s->ranks_per_node);
        s->ranks = s->nodes * s->ranks_per_node;
    }
    return 0;
}

/* ---- the command line's --set, recorded in the sweep directory ---- */

static int reconcile_overrides(cz_sweep *s, const cz_sweep_cli *cli, cz_error *err) {
    char path[CZ_PATH_MAX + 32];
    sw_join(path, sizeof path, s->dir, "overrides.txt");
    char stored[CZ_SWEEP_MAX_SET][CZ_SWEEP_TEXT];
    int n_stored = -1;
    FILE *f = fopen(path, "r");
    if (f) {
        n_stored = 0;
        char line[CZ_SWEEP_TEXT + 2];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            if (!line[0]) continue;
            if (n_stored == CZ_SWEEP_MAX_SET) break;
            snprintf(stored[n_stored++], CZ_SWEEP_TEXT, "%s", line);
        }
        fclose(f);
    }
    int n = cli ? cli->n_set : 0;
    if (n > 0 && n_stored >= 0) {
        int same = n == n_stored;
        for (int i = 0; same && i < n; i++) same = !strcmp(cli->set[i], stored[i]);
        if (!same)
            return cz_fail(err,
                           "%s: this sweep was started with other --set assignments (%d recorded "
                           "there); give the same ones, none (to reuse them), or another --dir",
                           path, n_stored);
    }
    if (n == 0 && n_stored > 0) {
        for (int i = 0; i < n_stored; i++) {
            if (s->n_set == CZ_SWEEP_MAX_SET) return cz_fail(err, "%s: too many --set", path);
            snprintf(s->set[s->n_set++], CZ_SWEEP_TEXT, "%s", stored[i]);
        }
        s->n_cli_set = n_stored;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (s->n_set == CZ_SWEEP_MAX_SET)
            return cz_fail(err, "more than %d --set assignments in all", CZ_SWEEP_MAX_SET);
        if (strlen(cli->set[i]) >= CZ_SWEEP_TEXT)
            return cz_fail(err, "--set %.40s...: too long", cli->set[i]);
        snprintf(s->set[s->n_set++], CZ_SWEEP_TEXT, "%s", cli->set[i]);
    }
    s->n_cli_set = n;
    return 0;
}

/* ---- points ---- */

static int axis_has_key(const cz_sweep *s, const char *key) {
    for (int a = 0; a < s->n_axes; a++)
        for (int k = 0; k < s->axes[a].n_keys; k++)
            if (!strcmp(s->axes[a].keys[k], key)) return 1;
    return 0;
}

static int set_has_key(const cz_sweep *s, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < s->n_set; i++) {
        const char *a = s->set[i];
        while (*a == ' ') a++;
        if (!strncmp(a, key, n) && (a[n] == '=' || a[n] == ' ')) return 1;
    }
    return 0;
}

/* The short name of a key in point names: L, H, A, I, or the key's last part;
 * model.layout none (its values, post-ln / pre-ln, say what they are). */
static const char *key_label(const char *key) {
    static const char *const map[][2] = {{"model.layers", "L"},       {"model.hidden", "H"},
                                         {"model.heads", "A"},        {"model.intermediate", "I"},
                                         {"train.global_batch", "B"}, {"data.seq", "T"},
                                         {"train.seed", "seed"},      {"model.layout", ""}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i][0], key)) return map[i][1];
    const char *dot = strrchr(key, '.');
    return dot ? dot + 1 : key;
}

static void value_label(const char *text, char *buf, size_t len) {
    char *end;
    double v = strtod(text, &end);
    if (end != text && !*end) {
        sw_format_number(v, buf, len);
        return;
    }
    /* a path: its file name without the extension */
    const char *slash = strrchr(text, '/');
    char base[CZ_SWEEP_KEY];
    snprintf(base, sizeof base, "%s", slash && slash[1] ? slash + 1 : text);
    char *dot = strrchr(base, '.');
    if (slash && dot && dot != base) *dot = 0;
    text = base;
    size_t o = 0;
    for (const char *c = text; *c && o + 1 < len; c++)
        buf[o++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '.' || *c == '-')
                       ? *c
                       : '-';
    buf[o] = 0;
}

static void append_name(char *name, size_t len, const char *label, const char *value) {
    size_t n = strlen(name);
    snprintf(name + n, len - n, "%s%s%s", n ? "_" : "", label, value);
}

static const char *const fixed_keys[] = {"model.layers",       "model.hidden", "model.heads",
                                         "model.intermediate", "data.seq",     "train.global_batch",
                                         "optim.lr",           "train.seed"};

static void collect_extra_columns(cz_sweep *s) {
    for (int a = 0; a < s->n_axes; a++)
        for (int k = 0; k < s->axes[a].n_keys; k++) {
            int fixed = 0;
            for (size_t f = 0; f < sizeof fixed_keys / sizeof fixed_keys[0]; f++)
                fixed |= !strcmp(fixed_keys[f], s->axes[a].keys[k]);
            if (!fixed) snprintf(s->extra[s->n_extra++], CZ_SWEEP_KEY, "%s", s->axes[a].keys[k]);
        }
}

double sw_flops_per_step(const cz_config *c) {
    int max_pred = c->model.arch == CZ_ARCH_GPT ? 0 : c->data.max_pred;
    return 3.0 * cz_model_forward_flops(&c->model, c->data.seq, max_pred) *
           (double)c->train.global_batch;
}

/* Steps, tokens and FLOPs of the whole run, phase 2 of the BERT length
 * curriculum included (its steps as the train loop counts them). */
static void run_costs(cz_sweep_point *p) {
    const cz_config *c = &p->cfg;
    long steps = c->train.steps;
    long s2 = (long)llround(c->data.phase2_fraction * (double)steps);
    double g1 = c->train.global_batch;
    p->tokens = (double)(steps - s2) * g1 * c->data.seq;
    p->flops_total = (double)(steps - s2) * sw_flops_per_step(c);
    if (s2 > 0) {
        double g2 = c->data.phase2_global_batch > 0 ? c->data.phase2_global_batch : g1;
        int mp2 = c->model.arch == CZ_ARCH_GPT ? 0 : c->data.phase2_max_pred;
        p->tokens += (double)s2 * g2 * c->data.phase2_seq;
        p->flops_total +=
            (double)s2 * 3.0 * cz_model_forward_flops(&c->model, c->data.phase2_seq, mp2) * g2;
    }
    p->flops_per_token = p->tokens > 0 ? p->flops_total / p->tokens : 0;
}

static int load_point_config(const cz_sweep *s, cz_sweep_point *p, const char *extra,
                             cz_error *err) {
    const char *ov[CZ_SWEEP_MAX_SET + CZ_SWEEP_MAX_AXES * CZ_SWEEP_MAX_KEYS + 16];
    int n = 0;
    char eval_m[CZ_PATH_MAX + 32], eval_b[64], eval_e[64], run_dir[CZ_PATH_MAX + 32];
    for (int i = 0; i < s->n_set; i++) ov[n++] = s->set[i];
    if (s->eval_manifest[0]) {
        snprintf(eval_m, sizeof eval_m, "data.heldout_manifest=%s", s->eval_manifest);
        ov[n++] = eval_m;
    }
    if (s->eval_batches > 0) {
        snprintf(eval_b, sizeof eval_b, "train.eval_batches=%d", s->eval_batches);
        ov[n++] = eval_b;
    }
    if (s->eval_every >= 0) {
        snprintf(eval_e, sizeof eval_e, "train.eval_every=%d", s->eval_every);
        ov[n++] = eval_e;
    }
    for (int i = 0; i < p->n_assign; i++) ov[n++] = p->assign[i];
    snprintf(run_dir, sizeof run_dir, "train.run_dir=%s", p->dir);
    ov[n++] = run_dir;
    if (extra) ov[n++] = extra;
    return cz_config_load(&p->cfg, s->base, ov, n, err);
}

static void make_absolute_field(char *field, size_t len) {
    if (!field[0] || field[0] == '/') return;
    char tmp[CZ_PATH_MAX];
    absolute(tmp, sizeof tmp, NULL, field);
    snprintf(field, len, "%s", tmp);
}

/* The point's configuration (base + assignments), its budget's steps and its
 * costs; a point that cannot be configured is marked invalid with the reason. */
static void resolve_point(const cz_sweep *s, cz_sweep_point *p) {
    cz_error err = {{0}};
    p->invalid = 1;
    if (load_point_config(s, p, NULL, &err) != 0) {
        snprintf(p->error, sizeof p->error, "%s", err.msg);
        return;
    }
    cz_config *c = &p->cfg;
    if (s->budget_kind != CZ_BUDGET_NONE) {
        if (s->budget_kind != CZ_BUDGET_STEPS && c->data.phase2_fraction > 0) {
            snprintf(p->error, sizeof p->error,
                     "budgets in tokens or FLOPs need a single phase: set data.phase2_fraction=0 "
                     "or give the budget in steps");
            return;
        }
        double per_step = s->budget_kind == CZ_BUDGET_FLOPS
                              ? sw_flops_per_step(c)
                              : (double)c->train.global_batch * c->data.seq;
        double steps = s->budget_kind == CZ_BUDGET_STEPS ? p->budget : round(p->budget / per_step);
        if (steps < 1) {
            char b[32], st[32];
            sw_format_number(p->budget, b, sizeof b);
            sw_format_number(per_step, st, sizeof st);
            snprintf(p->error, sizeof p->error, "budget %s %s is less than one step (%s)", b,
                     s->budget_kind == CZ_BUDGET_FLOPS ? "FLOPs" : "tokens", st);
            return;
        }
        char steps_set[64];
        snprintf(steps_set, sizeof steps_set, "train.steps=%.0f", steps);
        if (load_point_config(s, p, steps_set, &err) != 0) {
            snprintf(p->error, sizeof p->error, "%s", err.msg);
            return;
        }
    }
    /* cloze-train's rule: micro-batches dealt one per rank in turn, at
     * least one per rank (counts may differ by one) */
    if (c->train.global_batch % c->train.micro_batch != 0 ||
        c->train.global_batch / c->train.micro_batch < s->ranks) {
        snprintf(p->error, sizeof p->error,
                 "train.global_batch=%d / train.micro_batch=%d is not a whole number of "
                 "micro-batches, at least one per rank (%d ranks)",
                 c->train.global_batch, c->train.micro_batch, s->ranks);
        return;
    }
    make_absolute_field(c->data.train_manifest, sizeof c->data.train_manifest);
    make_absolute_field(c->data.heldout_manifest, sizeof c->data.heldout_manifest);
    if (!c->data.heldout_manifest[0]) {
        snprintf(p->error, sizeof p->error,
                 "no held-out data: a scaling study compares held-out loss; give sweep.eval."
                 "manifest or --set data.heldout_manifest=...");
        return;
    }
    cz_model_param_counts pc;
    if (cz_model_count_params(&c->model, &pc, &err) != 0) {
        snprintf(p->error, sizeof p->error, "%s", err.msg);
        return;
    }
    p->params = pc.total;
    p->params_nonemb = pc.non_embedding;
    run_costs(p);
    p->invalid = 0;
    p->error[0] = 0;
}

/* Budget (outermost), seed, then the axes in spec order (first outermost). */
static int expand(cz_sweep *s, cz_error *err) {
    long total = s->n_budgets > 0 ? s->n_budgets : 1;
    total *= s->n_seeds > 0 ? s->n_seeds : 1;
    for (int a = 0; a < s->n_axes; a++) total *= s->axes[a].n_values;
    if (total > 100000) return cz_fail(err, "%s: %ld points: too many", s->spec, total);
    s->points = calloc((size_t)total, sizeof *s->points);
    if (!s->points) return cz_fail(err, "out of memory for %ld points", total);
    s->n_points = (int)total;
    int hidden_swept = axis_has_key(s, "model.hidden");
    int heads_given = axis_has_key(s, "model.heads") || set_has_key(s, "model.heads");
    int inter_given = axis_has_key(s, "model.intermediate") || set_has_key(s, "model.intermediate");
    for (long i = 0; i < total; i++) {
        cz_sweep_point *p = &s->points[i];
        p->index = (int)i;
        long rest = i;
        int idx[CZ_SWEEP_MAX_AXES];
        for (int a = s->n_axes - 1; a >= 0; a--) {
            idx[a] = (int)(rest % s->axes[a].n_values);
            rest /= s->axes[a].n_values;
        }
        int seed_i = s->n_seeds > 0 ? (int)(rest % s->n_seeds) : -1;
        if (s->n_seeds > 0) rest /= s->n_seeds;
        int budget_i = s->n_budgets > 0 ? (int)rest : -1;
        char label[64];
        if (budget_i >= 0) {
            static const char *const b[] = {"", "S", "D", "C"};
            p->budget = s->budgets[budget_i];
            sw_format_number(p->budget, label, sizeof label);
            append_name(p->name, sizeof p->name, b[s->budget_kind], label);
        }
        if (seed_i >= 0) {
            snprintf(p->assign[p->n_assign++], CZ_SWEEP_TEXT, "train.seed=%lld", s->seeds[seed_i]);
            snprintf(label, sizeof label, "%lld", s->seeds[seed_i]);
            append_name(p->name, sizeof p->name, "seed", label);
        }
        long hidden = 0;
        for (int a = 0; a < s->n_axes; a++)
            for (int k = 0; k < s->axes[a].n_keys; k++) {
                const char *key = s->axes[a].keys[k], *val = s->axes[a].values[idx[a]][k];
                snprintf(p->assign[p->n_assign++], CZ_SWEEP_TEXT, "%s=%s", key, val);
                value_label(val, label, sizeof label);
                append_name(p->name, sizeof p->name, key_label(key), label);
                if (!strcmp(key, "model.hidden")) hidden = strtol(val, NULL, 10);
            }
        /* width sweeps: heads = hidden / 64 and FFN = 4 x hidden unless given */
        if (hidden_swept && hidden > 0 && !heads_given)
            snprintf(p->assign[p->n_assign++], CZ_SWEEP_TEXT, "model.heads=%ld",
                     hidden >= 128 ? hidden / 64 : 1);
        if (hidden_swept && hidden > 0 && !inter_given)
            snprintf(p->assign[p->n_assign++], CZ_SWEEP_TEXT, "model.intermediate=%ld", 4 * hidden);
        if (!p->name[0]) snprintf(p->name, sizeof p->name, "base");
        char points_dir[CZ_PATH_MAX + 16];
        sw_join(points_dir, sizeof points_dir, s->dir, "points");
        sw_join(p->dir, sizeof p->dir, points_dir, p->name);
        for (long j = 0; j < i; j++)
            if (!strcmp(s->points[j].name, p->name))
                return cz_fail(err,
                               "%s: points %ld and %ld are both named %s (two axis values "
                               "that print the same?)",
                               s->spec, j, i, p->name);
        resolve_point(s, p);
    }
    return 0;
}

/* Every key of the axes and of --set names a real configuration key:
 * checked once here, so that a typo is one error, not one per point. */
static int check_keys(const cz_sweep *s, cz_error *err) {
    cz_config *tmp = malloc(sizeof *tmp);
    if (!tmp) return cz_fail(err, "out of memory");
    cz_config_defaults(tmp);
    int rc = 0;
    cz_error e = {{0}};
    for (int i = 0; i < s->n_set && !rc; i++) {
        if (reserved_key(s->set[i]))
            rc = cz_fail(err, "%s: --set %s: the sweep sets train.run_dir for each point", s->spec,
                         s->set[i]);
        else if (cz_config_set(tmp, s->set[i], &e) != 0)
            rc = cz_fail(err, "%s: %s", s->spec, e.msg);
        for (int a = 0; a < s->n_axes && !rc; a++)
            for (int k = 0; k < s->axes[a].n_keys && !rc; k++) {
                size_t n = strlen(s->axes[a].keys[k]);
                const char *x = s->set[i];
                if (i >= s->n_set - s->n_cli_set && !strncmp(x, s->axes[a].keys[k], n) &&
                    x[n] == '=')
                    rc = cz_fail(err, "--set %s: %s is an axis of this sweep", x,
                                 s->axes[a].keys[k]);
            }
    }
    for (int a = 0; a < s->n_axes && !rc; a++)
        for (int v = 0; v < s->axes[a].n_values && !rc; v++)
            for (int k = 0; k < s->axes[a].n_keys && !rc; k++) {
                char as[CZ_SWEEP_TEXT];
                snprintf(as, sizeof as, "%s=%s", s->axes[a].keys[k], s->axes[a].values[v][k]);
                if (cz_config_set(tmp, as, &e) != 0)
                    rc = cz_fail(err, "%s:%d: axis %s: %s", s->spec, s->axes[a].line,
                                 s->axes[a].keys[k], e.msg);
            }
    free(tmp);
    return rc;
}

int cz_sweep_load(cz_sweep **out, const char *spec_path, const cz_sweep_cli *cli, cz_error *err) {
    *out = NULL;
    cz_sweep *s = calloc(1, sizeof *s);
    if (!s) return cz_fail(err, "out of memory");
    s->axes = calloc(CZ_SWEEP_MAX_AXES, sizeof *s->axes);
    if (!s->axes) {
        free(s);
        return cz_fail(err, "out of memory");
    }
    s->ranks = 1;
    s->nodes = 1;
    s->eval_every = -1;
    s->slurm_max_parallel = 0;
    char real[PATH_MAX];
    if (!realpath(spec_path, real)) {
        cz_fail(err, "%s: cannot open: %s", spec_path, strerror(errno));
        cz_sweep_free(s);
        return -1;
    }
    snprintf(s->spec, sizeof s->spec, "%s", real);
    struct stat st;
    if (stat(real, &st) == 0 && S_ISDIR(st.st_mode)) {
        cz_fail(err, "%s: a directory, not a sweep spec (conf/sweeps/ has examples)", spec_path);
        cz_sweep_free(s);
        return -1;
    }
    config_t cfg;
    config_init(&cfg);
    int rc = 0;
    if (config_read_file(&cfg, s->spec) != CONFIG_TRUE)
        rc = cz_fail(err, "%s:%d: %s", spec_path, config_error_line(&cfg), config_error_text(&cfg));
    else
        rc = parse_spec(s, &cfg, err);
    config_destroy(&cfg);
    if (rc == 0) {
        if (!s->name[0]) {
            const char *b = strrchr(s->spec, '/');
            snprintf(s->name, sizeof s->name, "%s", b ? b + 1 : s->spec);
            char *dot = strrchr(s->name, '.');
            if (dot && dot != s->name) *dot = 0;
        }
        if (cli && cli->dir) absolute(s->dir, sizeof s->dir, NULL, cli->dir);
        if (!s->dir[0]) {
            char d[CZ_PATH_MAX];
            snprintf(d, sizeof d, "runs/sweeps/%s", s->name);
            absolute(s->dir, sizeof s->dir, NULL, d);
        }
        if (cli && cli->ranks > 0) s->ranks = cli->ranks;
        if (cli && cli->threads > 0) s->threads = cli->threads;
        /* every node of a task runs the same number of ranks */
        if (s->ranks % s->nodes != 0)
            rc = cz_fail(err, "%s: %d rank(s) do not divide into nodes = %d", s->spec, s->ranks,
                         s->nodes);
        s->ranks_per_node = s->ranks / s->nodes;
    }
    if (rc == 0) {
        rc = reconcile_overrides(s, cli, err);
    }
    if (rc == 0) rc = check_keys(s, err);
    if (rc == 0) {
        collect_extra_columns(s);
        rc = expand(s, err);
    }
    if (rc != 0) {
        cz_sweep_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void cz_sweep_free(cz_sweep *s) {
    if (!s) return;
    free(s->points);
    free(s->axes);
    free(s);
}

int cz_sweep_find_point(const cz_sweep *s, const char *which) {
    char *end;
    long i = strtol(which, &end, 10);
    if (end != which && !*end) return i >= 0 && i < s->n_points ? (int)i : -1;
    for (int j = 0; j < s->n_points; j++)
        if (!strcmp(s->points[j].name, which)) return j;
    return -1;
}
