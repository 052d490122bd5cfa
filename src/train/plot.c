/* cloze-train plot: a run's loss, accuracy and learning-rate curves,
 * training and held-out, drawn by gnuplot from its metrics.jsonl (and a
 * fine-tuning run's results.jsonl) into OUT.png and OUT.svg, with the
 * script OUT.gp that drew them (its data inline: `gnuplot OUT.gp` redraws). */
#include "cloze/json.h"
#include "cloze/train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The series the figure can show: metrics.jsonl's keys (dev_score: a
 * fine-tuning run's results.jsonl score, 0..100, shown as a fraction). */
enum {
    S_MLM_LOSS,
    S_NSP_LOSS,
    S_LM_LOSS,
    S_TASK_LOSS,
    S_MLM_ACC,
    S_NSP_ACC,
    S_TASK_ACC,
    S_LR,
    S_EVAL_MLM_LOSS,
    S_EVAL_LM_LOSS,
    S_EVAL_MLM_ACC,
    S_EVAL_NSP_ACC,
    S_EVAL_PPL,
    S_DEV_SCORE,
    S_N
};
static const char *const key_of[S_N] = {
    "mlm_loss",     "nsp_loss",     "lm_loss",  "task_loss",     "mlm_acc",
    "nsp_acc",      "task_acc",     "lr",       "eval_mlm_loss", "eval_lm_loss",
    "eval_mlm_acc", "eval_nsp_acc", "eval_ppl", "score"};
static const char *const title_of[S_N] = {
    "training MLM", "training NSP",  "training LM",   "training task",  "training MLM",
    "training NSP", "training task", "learning rate", "held-out MLM",   "held-out LM",
    "held-out MLM", "held-out NSP",  "held-out",      "dev score / 100"};

/* one colour per quantity, training and held-out alike (MLM blue, NSP
 * orange, LM green, the task red) */
static const char *const colour_of[S_N] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#1f77b4",
                                           "#ff7f0e", "#d62728", "#000000", "#1f77b4", "#2ca02c",
                                           "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};

/* value[s][step]: the last record's (a resumed run redoes the steps after
 * its checkpoint; the later attempt is the run's), NaN where none */
typedef struct curves {
    double *v[S_N];
    long n; /* steps 0 .. n-1 */
    long step_records;
    double span; /* the training curves' moving average: about `span` steps */
} curves;

static int grow(curves *c, long step, cz_error *err) {
    if (step < c->n) return 0;
    long n = c->n ? c->n : 64;
    while (n <= step) n *= 2;
    for (int s = 0; s < S_N; s++) {
        double *p = realloc(c->v[s], (size_t)n * sizeof *p);
        if (!p) return cz_fail(err, "out of memory for %ld steps", n);
        for (long i = c->n; i < n; i++) p[i] = NAN;
        c->v[s] = p;
    }
    c->n = n;
    return 0;
}

/* One JSON Lines file into c: the series in [first, last]. A final line
 * without its newline (a job killed while writing it) is ignored. */
static int read_lines(const char *path, curves *c, int first, int last, int from_results,
                      cz_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long no = 0;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        no++;
        cz_json *j = NULL;
        cz_error e;
        if (cz_json_parse(line, (size_t)len, &j, &e) != 0) {
            if (line[len - 1] != '\n') break;
            rc = cz_fail(err, "%s:%ld: %s", path, no, e.msg);
            break;
        }
        const cz_json *st = cz_json_get(j, "step");
        const cz_json *res = cz_json_get(j, "resumed");
        const char *kind = cz_json_get_string(j, "kind");
        int use = st && st->type == CZ_JSON_NUMBER && st->number >= 0 && st->number < 1e9 &&
                  !(res && res->type == CZ_JSON_BOOL && res->boolean) &&
                  (!from_results || (kind && !strcmp(kind, "eval")));
        if (use) {
            long step = (long)st->number;
            if (!from_results && cz_json_get(j, "loss")) c->step_records++;
            rc = grow(c, step, err);
            for (int s = first; rc == 0 && s <= last; s++) {
                const cz_json *v = cz_json_get(j, key_of[s]);
                if (v && v->type == CZ_JSON_NUMBER)
                    c->v[s][step] = s == S_DEV_SCORE ? v->number / 100 : v->number;
                else if (v && v->type == CZ_JSON_NULL)
                    c->v[s][step] = NAN;
            }
        }
        cz_json_free(j);
    }
    free(line);
    fclose(f);
    return rc;
}

/* Whether a series has a value other than 0 (a BERT's lm_loss is 0 in
 * every record, a GPT's mlm_loss too: not drawn). */
static int shown(const curves *c, int s) {
    for (long i = 0; i < c->n; i++)
        if (isfinite(c->v[s][i]) && c->v[s][i] != 0) return 1;
    return 0;
}

/* A datablock $NAME of "step value smoothed" lines of the series present.
 * A single step's loss or accuracy is noisy (one batch): beside it goes
 * its exponential moving average with bias correction, as the divergence
 * watch keeps (train.h), over about span = steps / 50 steps,
 *   ema_n = b ema_{n-1} + (1 - b) x_n,  smoothed_n = ema_n / (1 - b^n),
 *   b = 1 - 1 / span
 * (TensorBoard's smoothing slider is the same average). */
static void datablock(FILE *gp, const curves *c, int s) {
    double b = s < S_LR && c->span > 1 ? 1 - 1 / c->span : 0, ema = 0, bn = 1;
    fprintf(gp, "$s%d << EOD\n", s);
    for (long i = 0; i < c->n; i++) {
        double x = c->v[s][i];
        if (!isfinite(x)) continue;
        ema = b * ema + (1 - b) * x;
        bn *= b;
        fprintf(gp, "%ld %.9g %.9g\n", i, x, ema / (1 - bn));
    }
    fprintf(gp, "EOD\n");
}

/* One panel's plot command over the series in list that are shown;
 * training series as lines, held-out ones as lines with points. */
static int panel(FILE *gp, const curves *c, const int *list, int n, const char *settings) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        int s = list[i];
        if (!shown(c, s)) continue;
        int held = s >= S_EVAL_MLM_LOSS;
        fprintf(gp, "%s%s", k ? ", \\\n     " : settings, k ? "" : "plot ");
        if (held)
            fprintf(gp,
                    "$s%d using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb \"%s\" title \"%s\"",
                    s, colour_of[s], title_of[s]);
        else if (s < S_LR && c->span > 1) /* faint steps, the average over them */
            fprintf(gp,
                    "$s%d using 1:2 with lines lw 1 lc rgb \"#b0%s\" notitle, \\\n     "
                    "$s%d using 1:3 with lines lw 2 lc rgb \"%s\" title \"%s\"",
                    s, colour_of[s] + 1, s, colour_of[s], title_of[s]);
        else
            fprintf(gp, "$s%d using 1:2 with lines lw 1 lc rgb \"%s\" title \"%s\"", s,
                    colour_of[s], title_of[s]);
        k++;
    }
    if (k) fprintf(gp, "\n");
    return k;
}

static void figure(FILE *gp, const curves *c, const char *run_dir, int ppl) {
    static const int loss[] = {S_MLM_LOSS,  S_NSP_LOSS,      S_LM_LOSS,
                               S_TASK_LOSS, S_EVAL_MLM_LOSS, S_EVAL_LM_LOSS};
    static const int acc[] = {S_MLM_ACC,      S_NSP_ACC,      S_TASK_ACC,
                              S_EVAL_MLM_ACC, S_EVAL_NSP_ACC, S_DEV_SCORE};
    static const int lr[] = {S_LR};
    fprintf(gp,
            "set multiplot layout 3,1 title \"%s\"\nset grid\nset key outside right top\n"
            "set lmargin 12\nset rmargin 22\n",
            run_dir);
    panel(gp, c, loss, 6,
          "set title \"loss\"\nset ylabel \"nats per predicted token\"\nset xlabel \"\"\n");
    if (ppl) {
        /* a GPT has no accuracy: its perplexity, exp(loss), held-out and training */
        fprintf(
            gp,
            "set title \"perplexity\"\nset ylabel \"exp(loss)\"\nset logscale y\n"
            "plot $s%d using 1:(exp($3)) with lines lw 2 lc rgb \"#2ca02c\" title \"training LM\"",
            S_LM_LOSS);
        if (shown(c, S_EVAL_PPL))
            fprintf(gp,
                    ", \\\n     $s%d using 1:2 with linespoints pt 7 ps 0.8 lw 2 lc rgb "
                    "\"#2ca02c\" title \"held-out LM\"",
                    S_EVAL_PPL);
        fprintf(gp, "\nunset logscale y\n");
    } else if (!panel(gp, c, acc, 6,
                      "set title \"accuracy\"\nset ylabel \"fraction correct\"\n"
                      "set yrange [0:1]\n")) {
        fprintf(gp, "set multiplot next\n");
    }
    fprintf(gp, "set yrange [*:*]\n");
    panel(gp, c, lr, 1, "set title \"learning rate\"\nset ylabel \"lr\"\nset xlabel \"step\"\n");
    fprintf(gp, "unset multiplot\n");
}

/* Runs gnuplot on BASE.gp inside dir: the script names its images without
 * a directory, so that `gnuplot BASE.gp` redraws them where they are. */
static int run_gnuplot(const char *gnuplot, const char *dir, const char *script, cz_error *err) {
    pid_t pid = fork();
    if (pid < 0) return cz_fail(err, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        execlp(gnuplot, gnuplot, script, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 126)
        return cz_fail(err, "%s: gnuplot cannot work in this directory", dir);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return cz_fail(err, "%s: not found (Debian: apt-get install gnuplot-nox)", gnuplot);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return cz_fail(err, "%s failed on %s/%s (exit %d)", gnuplot, dir, script,
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}

static int non_empty(const char *path, cz_error *err) {
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0)
        return cz_fail(err, "%s: gnuplot wrote nothing", path);
    return 0;
}

int cz_train_plot(const cz_plot_options *o, cz_error *err) {
    char path[CZ_PATH_MAX + 64], out[CZ_PATH_MAX + 64], file[CZ_PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/metrics.jsonl", o->run_dir);
    if (o->out)
        snprintf(out, sizeof out, "%s", o->out);
    else
        snprintf(out, sizeof out, "%s/curves", o->run_dir);
    /* OUT = DIR/BASE: gnuplot runs in DIR */
    char dir[CZ_PATH_MAX + 64], base[CZ_PATH_MAX + 64];
    const char *slash = strrchr(out, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == out ? 1 : (int)(slash - out)) : 1,
             slash ? out : ".");
    snprintf(base, sizeof base, "%s", slash ? slash + 1 : out);
    curves c;
    memset(&c, 0, sizeof c);
    int rc = read_lines(path, &c, S_MLM_LOSS, S_EVAL_PPL, 0, err);
    snprintf(file, sizeof file, "%s/results.jsonl", o->run_dir);
    if (rc == 0 && access(file, R_OK) == 0)
        rc = read_lines(file, &c, S_DEV_SCORE, S_DEV_SCORE, 1, err);
    c.span = (double)c.step_records / 50;
    if (rc == 0 && c.step_records == 0)
        rc = cz_fail(err, "%s: no step records (the run has not finished a step): nothing to draw",
                     path);
    FILE *gp = NULL;
    if (rc == 0) {
        snprintf(file, sizeof file, "%s.gp", out);
        gp = fopen(file, "w");
        if (!gp) rc = cz_fail(err, "%s: cannot write: %s", file, strerror(errno));
    }
    if (rc == 0) {
        int ppl = !shown(&c, S_MLM_ACC) && !shown(&c, S_TASK_ACC) && shown(&c, S_LM_LOSS);
        fprintf(gp, "# written by cloze-train plot from %s; redraw: gnuplot %s.gp in %s\n", path,
                base, dir);
        for (int s = 0; s < S_N; s++)
            if (shown(&c, s)) datablock(gp, &c, s);
        for (int png = 1; png >= 0; png--) {
            fprintf(gp, "\nreset\n");
            if (png)
                fprintf(gp,
                        "set terminal pngcairo size 1000,1000 noenhanced font "
                        "\"DejaVu Sans,10\"\nset output \"%s.png\"\n",
                        base);
            else
                fprintf(gp,
                        "set terminal svg size 1000,1000 noenhanced font \"DejaVu Sans,10\"\n"
                        "set output \"%s.svg\"\n",
                        base);
            figure(gp, &c, o->run_dir, ppl);
            fprintf(gp, "unset output\n");
        }
        if (fclose(gp) != 0) rc = cz_fail(err, "%s: cannot write", file);
    }
    char script[CZ_PATH_MAX + 80];
    snprintf(script, sizeof script, "%s.gp", base);
    if (rc == 0) rc = run_gnuplot(o->gnuplot ? o->gnuplot : "gnuplot", dir, script, err);
    char img[CZ_PATH_MAX + 80];
    snprintf(img, sizeof img, "%s.png", out);
    if (rc == 0) rc = non_empty(img, err);
    snprintf(img, sizeof img, "%s.svg", out);
    if (rc == 0) rc = non_empty(img, err);
    for (int s = 0; s < S_N; s++) free(c.v[s]);
    return rc;
}
