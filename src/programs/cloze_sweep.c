/* cloze-sweep: scaling-study sweeps over depth, width and any other key.
 * A thin main: arguments -> cz_sweep_load -> one command of the sweep module.
 * docs/sweeps.md is the reference. */
#include "cloze/core.h"
#include "cloze/sweep.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ARGS 64

static void usage(FILE *out) {
    fprintf(out,
            "usage: cloze-sweep COMMAND SPEC [options]\n"
            "\n"
            "Runs a scaling-study sweep: the points of the grid a spec describes (a\n"
            "libconfig file, see conf/sweeps/ and docs/sweeps.md), each one cloze-train\n"
            "run in its own directory DIR/points/NAME, one row each in DIR/results.csv\n"
            "and DIR/results.jsonl.\n"
            "\n"
            "commands:\n"
            "  plan SPEC      the points with parameters, FLOPs, tokens and an estimated time\n"
            "                 (from a short probe run of each model shape)\n"
            "  run SPEC       run the points one after another through launch/cloze-mpirun,\n"
            "                 then the spec's fine-tuning tasks (cloze-finetune grid) on each\n"
            "                 point's final checkpoint; finished points and fine-tunings are\n"
            "                 skipped, interrupted ones resumed exactly, failed ones recorded\n"
            "                 (and retried by the next run)\n"
            "  submit SPEC    a Slurm job array, one task per unfinished point (sbatch\n"
            "                 --array=LIST%%K, --resume auto, requeue on preemption), and a\n"
            "                 report job after it (--dependency=afterany)\n"
            "  status SPEC    points done / running / interrupted / failed / pending, with ETA\n"
            "  report SPEC    rewrite results.csv, then DIR/report/: report.md (tables in the\n"
            "                 layout of BERT's Table 6, fitted laws), PNG and SVG figures\n"
            "  report --results FILE.csv --out DIR   the report of any results.csv\n"
            "  coordcheck CONFIG   µP's coordinate check: the GPT model of a cloze-train\n"
            "                 configuration at each of --widths, --steps AdamW steps under\n"
            "                 the standard parametrization and under µP (base --base-width),\n"
            "                 mean |activation| of the embeddings, each block's attention\n"
            "                 and FFN outputs and the logits against width; exit 1 unless\n"
            "                 every µP scale stays within a factor 2 across the widths and\n"
            "                 the standard logits grow by more (docs/sweeps.md)"
            "  task SPEC --index I   inside a Slurm array task: run point I through\n"
            "                 launch/cloze.sbatch, then its fine-tuning (what submit's array\n"
            "                 script calls)\n"
            "\n"
            "options:\n"
            "  --dir DIR          sweep directory (default: the spec's sweep.dir, else\n"
            "                     runs/sweeps/NAME)\n"
            "  --set KEY=VALUE    set a configuration key for every point (repeatable);\n"
            "                     recorded in DIR/overrides.txt, which later commands given\n"
            "                     no --set reuse\n"
            "  -n, --ranks N      MPI ranks per point (default: the spec's ranks, else 1)\n"
            "  -t, --threads T    threads per rank (default: the spec's, else cores / ranks)\n"
            "  --only WHICH       run: only this point, by index or name (repeatable)\n"
            "  --progress SEC     run: a progress line every SEC seconds (default 60; 0: none)\n"
            "  --probe STEPS      plan: time STEPS steps per model shape (default 3; 0: no probe)\n"
            "  --max-parallel K   submit: at most K array tasks at a time (default: the spec's\n"
            "                     slurm.max_parallel, else no limit)\n"
            "  --sbatch-arg ARG   submit: one more sbatch argument (repeatable), e.g.\n"
            "                     --sbatch-arg=--time=04:00:00\n"
            "  --dry-run          submit: write the scripts and print the sbatch commands\n"
            "  --results FILE     report: read this results.csv\n"
            "  --out DIR          report: write the report here (default DIR/report);\n"
            "                     coordcheck: coordcheck.csv and its figure here\n"
            "  --widths LIST      coordcheck: widths (model.hidden), comma-separated\n"
            "                     (default 64,128,256,512)\n"
            "  --depths LIST      coordcheck: depths (model.layers) at the configured width\n"
            "                     instead; the blocks' mean scales, no verdict\n"
            "  --base-width N     coordcheck: µP's base width (default: model.mup_base_width,\n"
            "                     else the first width)\n"
            "  --steps N          coordcheck: AdamW steps per width (default 3)\n"
            "  --seeds N          coordcheck: average over N seeds (default 3)"
            "  --quiet            fewer lines\n"
            "  --help             this text\n"
            "\n"
            "Exit status: 0 when every point is done; 1 when a point failed or is invalid;\n"
            "2 for usage errors; 128 + the signal when a signal stopped the sweep (rerun the\n"
            "same command to resume).\n");
}

typedef struct args {
    const char *command, *spec;
    const char *set[MAX_ARGS];
    int n_set;
    const char *only[MAX_ARGS];
    int n_only;
    const char *sbatch_args[MAX_ARGS];
    int n_sbatch_args;
    cz_sweep_cli cli;
    double progress;
    int probe;
    int max_parallel, dry_run, quiet;
    int index;
    const char *results, *out;
    const char *widths, *depths;
    int base_width, steps, seeds;
} args;

static int parse_int(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > 1 << 30) return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->progress = 60;
    a->probe = 3;
    a->index = -1;
    a->steps = 3;
    a->seeds = 3;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(s, name) && v && (i++, 1))
#define OPT_EQ(name) (!strncmp(s, name "=", strlen(name) + 1) && (v = s + strlen(name) + 1, 1))
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            usage(stdout);
            exit(0);
        } else if (OPT("--set") || OPT_EQ("--set")) {
            if (a->n_set == MAX_ARGS) return fprintf(stderr, "cloze-sweep: too many --set\n"), -1;
            a->set[a->n_set++] = v;
        } else if (OPT("--dir") || OPT_EQ("--dir")) {
            a->cli.dir = v;
        } else if (OPT("-n") || OPT("--ranks") || OPT_EQ("--ranks")) {
            if (parse_int(v, &a->cli.ranks) || a->cli.ranks < 1)
                return fprintf(stderr, "cloze-sweep: --ranks %s: a positive integer\n", v), -1;
        } else if (OPT("-t") || OPT("--threads") || OPT_EQ("--threads")) {
            if (parse_int(v, &a->cli.threads))
                return fprintf(stderr, "cloze-sweep: --threads %s: an integer >= 0\n", v), -1;
        } else if (OPT("--only") || OPT_EQ("--only")) {
            if (a->n_only == MAX_ARGS) return fprintf(stderr, "cloze-sweep: too many --only\n"), -1;
            a->only[a->n_only++] = v;
        } else if (OPT("--progress") || OPT_EQ("--progress")) {
            char *end;
            a->progress = strtod(v, &end);
            if (*end || a->progress < 0)
                return fprintf(stderr, "cloze-sweep: --progress %s: seconds >= 0\n", v), -1;
        } else if (OPT("--probe") || OPT_EQ("--probe")) {
            if (parse_int(v, &a->probe) || a->probe > 1000)
                return fprintf(stderr, "cloze-sweep: --probe %s: steps in [0, 1000]\n", v), -1;
        } else if (OPT("--max-parallel") || OPT_EQ("--max-parallel")) {
            if (parse_int(v, &a->max_parallel) || a->max_parallel < 1)
                return fprintf(stderr, "cloze-sweep: --max-parallel %s: a positive integer\n", v),
                       -1;
        } else if (OPT("--sbatch-arg") || OPT_EQ("--sbatch-arg")) {
            if (a->n_sbatch_args == MAX_ARGS)
                return fprintf(stderr, "cloze-sweep: too many --sbatch-arg\n"), -1;
            a->sbatch_args[a->n_sbatch_args++] = v;
        } else if (OPT("--index") || OPT_EQ("--index")) {
            if (parse_int(v, &a->index))
                return fprintf(stderr, "cloze-sweep: --index %s: an integer >= 0\n", v), -1;
        } else if (OPT("--results") || OPT_EQ("--results")) {
            a->results = v;
        } else if (OPT("--out") || OPT_EQ("--out")) {
            a->out = v;
        } else if (OPT("--widths") || OPT_EQ("--widths")) {
            a->widths = v;
        } else if (OPT("--depths") || OPT_EQ("--depths")) {
            a->depths = v;
        } else if (OPT("--base-width") || OPT_EQ("--base-width")) {
            if (parse_int(v, &a->base_width) || a->base_width < 1)
                return fprintf(stderr, "cloze-sweep: --base-width %s: a positive integer\n", v), -1;
        } else if (OPT("--seeds") || OPT_EQ("--seeds")) {
            if (parse_int(v, &a->seeds) || a->seeds < 1 || a->seeds > 100)
                return fprintf(stderr, "cloze-sweep: --seeds %s: in [1, 100]\n", v), -1;
        } else if (OPT("--steps") || OPT_EQ("--steps")) {
            if (parse_int(v, &a->steps) || a->steps < 1 || a->steps > 1000)
                return fprintf(stderr, "cloze-sweep: --steps %s: in [1, 1000]\n", v), -1;
        } else if (!strcmp(s, "--dry-run")) {
            a->dry_run = 1;
        } else if (!strcmp(s, "--quiet")) {
            a->quiet = 1;
        } else if (s[0] == '-') {
            static const char *const with_value[] = {
                "--set",        "--dir",   "-n",         "--ranks", "-t",
                "--threads",    "--only",  "--progress", "--probe", "--max-parallel",
                "--sbatch-arg", "--index", "--results",  "--out",   "--widths",
                "--base-width", "--steps", "--seeds",    "--depths"};
            for (size_t k = 0; !v && k < sizeof with_value / sizeof *with_value; k++)
                if (!strcmp(s, with_value[k]))
                    return fprintf(stderr, "cloze-sweep: %s: needs a value (try --help)\n", s), -1;
            return fprintf(stderr, "cloze-sweep: unknown option '%s' (try --help)\n", s), -1;
        } else if (!a->command) {
            a->command = s;
        } else if (!a->spec) {
            a->spec = s;
        } else {
            return fprintf(stderr, "cloze-sweep: unexpected argument '%s' (try --help)\n", s), -1;
        }
#undef OPT
#undef OPT_EQ
    }
    a->cli.set = a->set;
    a->cli.n_set = a->n_set;
    return 0;
}

/* ---- shared printing ---- */

static void print_header(const cz_sweep *s, const char *what) {
    int invalid = 0;
    for (int i = 0; i < s->n_points; i++) invalid += s->points[i].invalid;
    printf("sweep %s: %d point(s)%s in %s\n", s->name, s->n_points, what, s->dir);
    printf("  spec %s, base %s; %d rank(s) x ", s->spec, s->base, s->ranks);
    if (s->threads > 0)
        printf("%d thread(s) per point\n", s->threads);
    else
        printf("(cores / ranks) thread(s) per point\n");
    if (s->n_cli_set > 0) {
        printf("  --set for every point:");
        for (int i = s->n_set - s->n_cli_set; i < s->n_set; i++) printf(" %s", s->set[i]);
        printf("\n");
    }
    if (invalid) printf("  %d point(s) invalid: listed with the reason\n", invalid);
}

/* The fine-tuning tasks and their cost: cloze-finetune runs per point. */
static void print_finetune_note(const cz_sweep *s, const cz_sweep_tools *t) {
    if (s->n_finetune == 0) return;
    int per_point = 0, valid = 0;
    for (int i = 0; i < s->n_points; i++) valid += !s->points[i].invalid;
    printf("  fine-tuning per point (cloze-finetune grid on the final checkpoint): ");
    for (int k = 0; k < s->n_finetune; k++) {
        int n = cz_sweep_ft_runs(&s->finetune[k]);
        per_point += n;
        printf("%s%s %d configuration(s) x %d restart(s)", k ? ", " : "", s->finetune[k].name,
               n / s->finetune[k].restarts, s->finetune[k].restarts);
    }
    printf("; %d run(s) per point, %d in all\n", per_point, per_point * valid);
    if (!t->finetune[0])
        printf("  WARNING: no cloze-finetune beside cloze-sweep (or CLOZE_FINETUNE): the "
               "fine-tuning tasks will fail\n");
}

static const char *budget_text(const cz_sweep *s, const cz_sweep_point *p, char *buf, size_t len) {
    static const char *const kind[] = {"-", "steps", "tokens", "FLOPs"};
    if (s->budget_kind == CZ_BUDGET_NONE) return snprintf(buf, len, "-"), buf;
    char v[32];
    cz_sweep_format_count(p->budget, v, sizeof v);
    snprintf(buf, len, "%s %s", v, kind[s->budget_kind]);
    return buf;
}

/* ---- plan ---- */

static int cmd_plan(cz_sweep *s, const cz_sweep_tools *t, const args *a) {
    print_header(s, "");
    print_finetune_note(s, t);
    double total_flops = 0, total_tokens = 0, total_time = 0;
    int timed = 0, valid = 0;
    printf("\n %3s  %-28s %3s %5s %3s %10s %8s %9s %13s %8s %8s %9s  %s\n", "#", "point", "L", "H",
           "A", "N(non-emb)", "params", "FLOPs/tok", "budget", "steps", "tokens", "FLOPs",
           "est. time");
    for (int i = 0; i < s->n_points; i++) {
        cz_sweep_point *p = &s->points[i];
        if (p->invalid) {
            printf(" %3d  %-28s invalid: %s\n", i, p->name, p->error);
            continue;
        }
        valid++;
        double step_s = 0, startup_s = 0;
        int have = cz_sweep_probe_cached(s, i, &step_s, &startup_s);
        if (!have && a->probe > 0) {
            cz_error err = {{0}};
            if (!a->quiet)
                fprintf(stderr, "cloze-sweep: probing %s (%d steps)...\n", p->name, a->probe);
            have = cz_sweep_probe(s, i, t, a->probe, &step_s, &startup_s, &err) == 0;
            if (!have)
                fprintf(stderr, "cloze-sweep: warning: %s\n", err.msg); /* not fatal: no estimate */
        }
        char b1[16], b2[16], b3[16], b4[32], b5[16], b6[16], est[32];
        if (have) {
            double sec = startup_s + step_s * (double)p->cfg.train.steps;
            cz_format_duration(sec, est, sizeof est);
            total_time += sec;
            timed++;
        } else {
            snprintf(est, sizeof est, "-");
        }
        printf(" %3d  %-28s %3d %5d %3d %10s %8s %9s %13s %8ld %8s %9.3g  %s\n", i, p->name,
               p->cfg.model.layers, p->cfg.model.hidden, p->cfg.model.heads,
               cz_sweep_format_count((double)p->params_nonemb, b1, sizeof b1),
               cz_sweep_format_count((double)p->params, b2, sizeof b2),
               cz_sweep_format_count(p->flops_per_token, b3, sizeof b3),
               budget_text(s, p, b4, sizeof b4), p->cfg.train.steps,
               cz_sweep_format_count(p->tokens, b5, sizeof b5), p->flops_total, est);
        (void)b6;
        total_flops += p->flops_total;
        total_tokens += p->tokens;
    }
    char b1[16], est[32];
    printf("\ntotal: %d valid point(s), %.3g training FLOPs, %s tokens", valid, total_flops,
           cz_sweep_format_count(total_tokens, b1, sizeof b1));
    if (timed)
        printf("; estimated %s one after another on this machine (%d point(s) timed by a probe "
               "of %d step(s) per model shape%s)\n",
               cz_format_duration(total_time, est, sizeof est), timed, a->probe,
               timed < valid ? "; the others not" : "");
    else if (a->probe == 0)
        printf("; no time estimate (--probe 0)\n");
    else
        printf("; no time estimate (the probes failed)\n");
    return valid == s->n_points ? 0 : 1;
}

/* ---- run ---- */

static void print_point_result(const cz_sweep_point *p, double wall) {
    cz_point_metrics m;
    cz_error e; /* the summary line is left out when the metrics cannot be read */
    if (cz_point_read_metrics(p, &m, &e) != 0) return;
    char w[32];
    printf("  done in %s: held-out loss %.4f (ppl %.2f)", cz_format_duration(wall, w, sizeof w),
           m.eval_loss, exp(m.eval_loss));
    if (isfinite(m.eval_mlm_acc))
        printf(", MLM acc %.4f, NSP acc %.4f", m.eval_mlm_acc, m.eval_nsp_acc);
    printf(", MFU %.1f%%\n", 100 * m.mfu);
}

static int selected(const cz_sweep *s, const args *a, int i, int *bad) {
    if (a->n_only == 0) return 1;
    for (int k = 0; k < a->n_only; k++) {
        int j = cz_sweep_find_point(s, a->only[k]);
        if (j < 0) *bad = k;
        if (j == i) return 1;
    }
    return 0;
}

/* Fine-tunes point i after its pre-training; prints what became of it. */
static cz_run_outcome run_finetune(cz_sweep *s, int i, const cz_sweep_tools *t,
                                   const cz_run_options *o) {
    cz_error err = {{0}};
    int ran = 0;
    cz_run_outcome out = cz_sweep_finetune_point(s, i, t, o, &ran, &err);
    if (out == CZ_RUN_FAILED) {
        printf("  fine-tuning FAILED: %s\n", err.msg);
    } else if (out == CZ_RUN_BUSY) {
        printf("  running in another process (its lock is held): fine-tuning skipped\n");
    } else if (out == CZ_RUN_DONE) {
        int done, finished = cz_sweep_ft_finished(s, &s->points[i], &done);
        if (done < finished) {
            printf("  %d of %d fine-tuning task(s) FAILED (results.csv's error column says why; "
                   "a rerun retries them)\n",
                   finished - done, s->n_finetune);
            out = CZ_RUN_FAILED;
        }
    } else if (out == CZ_RUN_INTERRUPTED) {
        printf("  interrupted while fine-tuning: checkpointed; rerun the same command to "
               "resume\n");
    }
    fflush(stdout);
    return out;
}

static void tally(cz_run_outcome out, int *done, int *failed, int *busy) {
    if (out == CZ_RUN_DONE || out == CZ_RUN_SKIPPED) (*done)++;
    if (out == CZ_RUN_FAILED) (*failed)++;
    if (out == CZ_RUN_BUSY) (*busy)++;
}

static int cmd_run(cz_sweep *s, const cz_sweep_tools *t, const args *a) {
    cz_error err = {{0}};
    int bad = -1;
    for (int i = 0; i < s->n_points; i++) selected(s, a, i, &bad);
    if (bad >= 0) {
        fprintf(stderr, "cloze-sweep: --only %s: no such point (cloze-sweep plan lists them)\n",
                a->only[bad]);
        return 2;
    }
    if (cz_sweep_materialize(s, &err) != 0 || cz_sweep_write_results(s, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    cz_sweep_signals_install();
    print_header(s, "");
    print_finetune_note(s, t);
    fflush(stdout);
    cz_run_options o = {CZ_LAUNCH_MPIRUN, a->progress, a->quiet};
    int failed = 0, done = 0, todo = 0, busy = 0;
    for (int i = 0; i < s->n_points; i++) todo += selected(s, a, i, &bad);
    int k = 0;
    for (int i = 0; i < s->n_points && !cz_sweep_stop_requested(); i++) {
        if (!selected(s, a, i, &bad)) continue;
        cz_sweep_point *p = &s->points[i];
        k++;
        char why[CZ_ERROR_MAX];
        cz_point_state st = cz_point_get_state(p, why, sizeof why);
        int ft_left = cz_sweep_ft_left(s, p, st);
        if (ft_left == 0) {
            done++;
            if (!a->quiet) printf("[%d/%d] %s: done already, skipped\n", k, todo, p->name);
            continue;
        }
        if (ft_left > 0) {
            printf("[%d/%d] %s: pre-trained already; fine-tuning %d of %d task(s) left\n", k, todo,
                   p->name, ft_left, s->n_finetune);
            fflush(stdout);
            tally(run_finetune(s, i, t, &o), &done, &failed, &busy);
            continue;
        }
        if (st == CZ_POINT_INVALID) {
            failed++;
            printf("[%d/%d] %s: invalid: %s\n", k, todo, p->name, p->error);
            continue;
        }
        char fl[16], tok[16];
        printf("[%d/%d] %s: %s, %ld steps, %s tokens, %.3g FLOPs\n", k, todo, p->name,
               st == CZ_POINT_INTERRUPTED ? "resuming"
               : st == CZ_POINT_FAILED    ? "retrying"
                                          : "starting",
               p->cfg.train.steps, cz_sweep_format_count(p->tokens, tok, sizeof tok),
               p->flops_total);
        (void)fl;
        fflush(stdout);
        double t0 = cz_now();
        cz_run_outcome out = cz_sweep_run_point(s, i, t, &o, &err);
        switch (out) {
        case CZ_RUN_DONE:
            print_point_result(p, cz_now() - t0);
            if (s->n_finetune)
                tally(run_finetune(s, i, t, &o), &done, &failed, &busy);
            else
                done++;
            break;
        case CZ_RUN_SKIPPED:
            done++;
            printf("  done already (by another process)\n");
            break;
        case CZ_RUN_FAILED:
            failed++;
            printf("  FAILED: %s\n", err.msg);
            break;
        case CZ_RUN_INTERRUPTED:
            printf("  interrupted: checkpointed; rerun the same command to resume\n");
            break;
        case CZ_RUN_BUSY:
            busy++;
            printf("  running in another process (its lock is held): skipped\n");
            break;
        }
        fflush(stdout);
    }
    if (cz_sweep_write_results(s, &err) != 0) fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
    int sig = cz_sweep_stop_requested();
    printf("sweep %s: %d of %d point(s) done, %d failed%s; results in %s/results.csv\n", s->name,
           done, todo, failed, busy ? ", some running elsewhere" : "", s->dir);
    if (sig) {
        printf("stopped by signal %d: rerun the same command to resume\n", sig);
        return 128 + sig;
    }
    return failed ? 1 : 0;
}

/* ---- status ---- */

/* What status reads of every point: its state (and why), its metrics, and
 * the counts; the measured rate of finished points prices the others. */
typedef struct status_table {
    cz_point_state *st;
    cz_point_metrics *m;
    char (*why)[CZ_ERROR_MAX];
    int count[CZ_POINT_INVALID + 1], ft_count[CZ_FT_FAILED + 1];
    double rate, eta; /* FLOP/s of the finished points; seconds left in all */
    int eta_known;
} status_table;

static void status_free(status_table *tb) {
    free(tb->st);
    free(tb->m);
    free(tb->why);
}

static int status_read(const cz_sweep *s, status_table *tb) {
    memset(tb, 0, sizeof *tb);
    tb->eta_known = 1;
    double done_flops = 0, done_s = 0;
    tb->st = calloc((size_t)s->n_points, sizeof *tb->st);
    tb->m = calloc((size_t)s->n_points, sizeof *tb->m);
    tb->why = calloc((size_t)s->n_points, sizeof *tb->why);
    if (!tb->st || !tb->m || !tb->why) {
        fprintf(stderr, "cloze-sweep: error: out of memory for %d points\n", s->n_points);
        return 1;
    }
    for (int i = 0; i < s->n_points; i++) {
        tb->st[i] = cz_point_get_state(&s->points[i], tb->why[i], sizeof tb->why[i]);
        tb->count[tb->st[i]]++;
        cz_error e;
        if (cz_point_read_metrics(&s->points[i], &tb->m[i], &e) < 0) {
            fprintf(stderr, "cloze-sweep: error: %s\n", e.msg);
            return 1;
        }
        if (tb->st[i] == CZ_POINT_DONE && tb->m[i].train_s > 0) {
            done_flops += s->points[i].flops_total;
            done_s += tb->m[i].train_s;
        }
    }
    tb->rate = done_s > 0 ? done_flops / done_s : 0;
    return 0;
}

/* Point i's time (done) or ETA (to run: from its own steps, its probe, or
 * the finished points' rate), added to the table's ETA. */
static void status_time(const cz_sweep *s, int i, status_table *tb, char *tm, size_t len) {
    const cz_sweep_point *p = &s->points[i];
    const cz_point_metrics *m = &tb->m[i];
    char d[32];
    if (tb->st[i] == CZ_POINT_DONE) {
        snprintf(tm, len, "%s", cz_format_duration(cz_point_wall_seconds(p), d, sizeof d));
    } else if (tb->st[i] != CZ_POINT_INVALID && tb->st[i] != CZ_POINT_FAILED) {
        long left = p->cfg.train.steps - m->last_step;
        double sec = -1, step_s, startup;
        if (m->last_step > 0 && m->train_s > 0)
            sec = m->train_s / (double)m->last_step * (double)left;
        else if (cz_sweep_probe_cached(s, i, &step_s, &startup))
            sec = startup + step_s * (double)left;
        else if (tb->rate > 0)
            sec = p->flops_total / tb->rate;
        if (sec >= 0) {
            tb->eta += sec;
            snprintf(tm, len, "ETA %s", cz_format_duration(sec, d, sizeof d));
        } else {
            tb->eta_known = 0;
            snprintf(tm, len, "ETA unknown");
        }
    }
}

/* Point i's row: state, steps, loss, time, why, its fine-tuning tasks. */
static void status_row(const cz_sweep *s, int i, status_table *tb) {
    const cz_sweep_point *p = &s->points[i];
    cz_point_state st = tb->st[i];
    char steps[40] = "", loss[16] = "", ppl[16] = "", tm[64] = "";
    if (!p->invalid)
        snprintf(steps, sizeof steps, "%ld/%ld",
                 st == CZ_POINT_DONE ? p->cfg.train.steps : tb->m[i].last_step, p->cfg.train.steps);
    if (st == CZ_POINT_DONE) {
        snprintf(loss, sizeof loss, "%.4f", tb->m[i].eval_loss);
        snprintf(ppl, sizeof ppl, "%.2f", exp(tb->m[i].eval_loss));
    }
    status_time(s, i, tb, tm, sizeof tm);
    printf(" %3d  %-28s %-11s %15s %9s %8s  %s", i, p->name, cz_point_state_name(st), steps, loss,
           ppl, tm);
    if (tb->why[i][0]) printf("  %s", tb->why[i]);
    for (int k = 0; k < s->n_finetune && !p->invalid; k++) {
        cz_ft_summary f;
        static const char *const names[] = {"pending", "interrupted", "done", "failed"};
        cz_ft_state fs = st == CZ_POINT_DONE ? cz_sweep_ft_read(s, p, k, &f) : CZ_FT_PENDING;
        tb->ft_count[fs]++;
        printf("%s%s %s", k ? "; " : "  fine-tuning: ", s->finetune[k].name, names[fs]);
        if (fs == CZ_FT_DONE) printf(" %.2f ± %.2f (n=%d)", f.mean, f.std, f.n);
        if (fs == CZ_FT_FAILED) printf(" (%s)", f.error);
    }
    printf("\n");
}

/* The counts, the ETA of what is left, and where Slurm's jobs are listed. */
static void status_totals(const cz_sweep *s, const status_table *tb) {
    const int *count = tb->count, *ft_count = tb->ft_count;
    char d[32];
    printf("\n%d done, %d running, %d interrupted, %d failed, %d invalid, %d pending",
           count[CZ_POINT_DONE], count[CZ_POINT_RUNNING], count[CZ_POINT_INTERRUPTED],
           count[CZ_POINT_FAILED], count[CZ_POINT_INVALID], count[CZ_POINT_PENDING]);
    if (s->n_finetune)
        printf("; fine-tuning tasks: %d done, %d interrupted, %d failed, %d pending",
               ft_count[CZ_FT_DONE], ft_count[CZ_FT_INTERRUPTED], ft_count[CZ_FT_FAILED],
               ft_count[CZ_FT_PENDING]);
    int left = count[CZ_POINT_RUNNING] + count[CZ_POINT_INTERRUPTED] + count[CZ_POINT_PENDING];
    if (left)
        printf("; ETA %s%s for the rest, one after another%s\n", tb->eta_known ? "" : "at least ",
               cz_format_duration(tb->eta, d, sizeof d),
               tb->rate > 0 ? " (priced at the finished points' measured FLOP/s where not timed)"
                            : "");
    else
        printf("\n");
    char jobs[CZ_PATH_MAX + 32];
    snprintf(jobs, sizeof jobs, "%s/slurm/jobs.txt", s->dir);
    if (access(jobs, R_OK) == 0) printf("Slurm jobs submitted for this sweep: %s\n", jobs);
}

static int cmd_status(cz_sweep *s, const cz_sweep_tools *t, const args *a) {
    (void)a;
    print_header(s, "");
    print_finetune_note(s, t);
    status_table tb;
    if (status_read(s, &tb) != 0) {
        status_free(&tb);
        return 1;
    }
    printf("\n %3s  %-28s %-11s %15s %9s %8s  %s\n", "#", "point", "state", "steps", "loss", "ppl",
           "time / ETA");
    for (int i = 0; i < s->n_points; i++) status_row(s, i, &tb);
    status_totals(s, &tb);
    int rc = tb.count[CZ_POINT_FAILED] + tb.count[CZ_POINT_INVALID] ? 1 : 0;
    status_free(&tb);
    return rc;
}

/* ---- report, submit, task ---- */

static int cmd_report(cz_sweep *s, const args *a) {
    cz_error err = {{0}};
    char results[CZ_PATH_MAX + 32], out[CZ_PATH_MAX + 32];
    if (s) {
        if (cz_sweep_write_results(s, &err) != 0) {
            fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
            return 1;
        }
        snprintf(results, sizeof results, "%s/results.csv", s->dir);
        snprintf(out, sizeof out, "%s/report", s->dir);
    }
    if (a->results) snprintf(results, sizeof results, "%s", a->results);
    if (a->out) snprintf(out, sizeof out, "%s", a->out);
    cz_report_options o = {results, out, s ? s->name : "results", NULL};
    if (cz_sweep_report(&o, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    printf("report: %s/report.md (from %s)\n", out, results);
    return 0;
}

/* µP's coordinate check of a cloze-train configuration's model (the
 * configuration's keys and --set; CLOZE_COORDCHECK_FAULT=output_mult_1
 * plants the fault its test must catch: the readouts' multiplier at 1). */
static int cmd_coordcheck(const args *a) {
    cz_error err = {{0}};
    cz_config cfg;
    if (cz_config_load(&cfg, a->spec, a->set, a->n_set, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    int widths[CZ_COORDCHECK_MAX_WIDTHS], n = 0;
    if (a->widths && a->depths) {
        fprintf(stderr, "cloze-sweep coordcheck: give --widths or --depths, not both\n");
        return 2;
    }
    const char *list = a->depths ? a->depths : a->widths ? a->widths : "64,128,256,512";
    for (const char *p = list; *p;) {
        char *end;
        long w = strtol(p, &end, 10);
        if (end == p || w < 1 || w > 65536 || (*end && *end != ',') ||
            n == CZ_COORDCHECK_MAX_WIDTHS) {
            fprintf(stderr, "cloze-sweep: --%s %s: up to %d positive integers, comma-separated\n",
                    a->depths ? "depths" : "widths", list, CZ_COORDCHECK_MAX_WIDTHS);
            return 2;
        }
        widths[n++] = (int)w;
        p = *end ? end + 1 : end;
    }
    const char *fault = getenv("CLOZE_COORDCHECK_FAULT");
    if (fault && *fault && strcmp(fault, "output_mult_1")) {
        fprintf(stderr, "cloze-sweep: CLOZE_COORDCHECK_FAULT=%s: the one fault is output_mult_1\n",
                fault);
        return 2;
    }
    cz_coordcheck_options o = {0};
    o.model = cfg.model;
    if (!o.model.intermediate) o.model.intermediate = 4 * o.model.hidden;
    o.optim = cfg.optim;
    o.widths = widths;
    o.n_widths = n;
    o.base_width = a->base_width              ? a->base_width
                   : cfg.model.mup_base_width ? cfg.model.mup_base_width
                   : a->depths                ? cfg.model.hidden
                                              : widths[0];
    o.steps = a->steps;
    o.batch = cfg.train.micro_batch;
    o.seq = cfg.data.seq;
    o.threads = a->cli.threads > 0 ? a->cli.threads : 1;
    o.seed = cfg.train.seed;
    o.seeds = a->seeds;
    o.out_dir = a->out;
    o.fault_output_mult = fault && *fault ? 1.0f : 0.0f;
    o.depth_axis = a->depths != NULL;
    if (a->out && mkdir(a->out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cloze-sweep: error: --out %s: %s\n", a->out, strerror(errno));
        return 1;
    }
    printf("coordcheck: %s, %s %d, heads %d, %s %s, base width %d, %d AdamW steps at lr "
           "%g, batch %d x %d tokens, mean of %d seed(s)%s\n",
           cfg.model.arch == CZ_ARCH_GPT ? (cfg.model.layout ? "GPT-2 layout" : "GPT-1") : "BERT",
           a->depths ? "hidden" : "layers", a->depths ? cfg.model.hidden : cfg.model.layers,
           cfg.model.heads, a->depths ? "depths" : "widths", list, o.base_width, o.steps,
           cfg.optim.lr, o.batch, o.seq, o.seeds,
           fault && *fault ? " (PLANTED FAULT: readout multiplier 1)" : "");
    cz_coordcheck_verdict v;
    if (cz_sweep_coordcheck(&o, &v, stdout, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    if (o.depth_axis) { /* a diagnostic across depth: no verdict (docs/sweeps.md) */
        printf("coordcheck: depths %s at width %d: µP's largest spread across depths x %.3g "
               "(%s); logits x %.3g (standard) and x %.3g (µP) from %d to %d layers\n",
               list, cfg.model.hidden, v.mup_worst, v.mup_worst_site, v.standard_logits_growth,
               v.mup_logits_growth, widths[0], widths[n - 1]);
        if (a->out)
            printf("coordcheck: %s/coordcheck.csv, coordcheck.png, coordcheck.svg\n", a->out);
        return 0;
    }
    int ok = v.mup_worst <= 2.0 && v.standard_logits_growth > v.mup_logits_growth &&
             v.standard_logits_growth > 2.0;
    printf("coordcheck: µP: every scale within a factor %.3g across the widths (worst: %s; limit "
           "2); standard: logits x %.3g from width %d to %d (µP x %.3g): %s\n",
           v.mup_worst, v.mup_worst_site, v.standard_logits_growth, widths[0], widths[n - 1],
           v.mup_logits_growth, ok ? "ok" : "FAILED");
    if (a->out) printf("coordcheck: %s/coordcheck.csv, coordcheck.png, coordcheck.svg\n", a->out);
    return ok ? 0 : 1;
}

static int cmd_submit(cz_sweep *s, const cz_sweep_tools *t, const args *a) {
    cz_error err = {{0}};
    if (cz_sweep_materialize(s, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    cz_submit_options o = {a->max_parallel, a->sbatch_args, a->n_sbatch_args, NULL, a->dry_run};
    if (cz_sweep_submit(s, t, &o, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int cmd_task(cz_sweep *s, const cz_sweep_tools *t, const args *a) {
    cz_error err = {{0}};
    int i = a->index;
    const char *env = getenv("SLURM_ARRAY_TASK_ID");
    if (i < 0 && env) i = atoi(env);
    if (i < 0 || i >= s->n_points) {
        fprintf(stderr, "cloze-sweep task: --index %d: the sweep has points 0..%d\n", i,
                s->n_points - 1);
        return 2;
    }
    cz_sweep_signals_install();
    if (cz_sweep_prepare_point(s, i, &err) != 0) {
        fprintf(stderr, "cloze-sweep task: error: %s\n", err.msg);
        return 1;
    }
    cz_sweep_point *p = &s->points[i];
    printf("cloze-sweep task: point %d %s (job %s, restart %s)\n", i, p->name,
           getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "-",
           getenv("SLURM_RESTART_COUNT") ? getenv("SLURM_RESTART_COUNT") : "0");
    fflush(stdout);
    cz_run_options o = {CZ_LAUNCH_SBATCH, a->progress, a->quiet};
    double t0 = cz_now();
    cz_run_outcome out = cz_sweep_run_point(s, i, t, &o, &err);
    switch (out) {
    case CZ_RUN_DONE:
    case CZ_RUN_SKIPPED:
        if (out == CZ_RUN_DONE)
            print_point_result(p, cz_now() - t0);
        else
            printf("  pre-trained already\n");
        if (!s->n_finetune) return 0;
        {
            /* fine-tuning inside the same allocation: mpirun over its tasks */
            cz_run_options fo = {CZ_LAUNCH_MPIRUN, a->progress, a->quiet};
            out = run_finetune(s, i, t, &fo);
            const char *job = getenv("SLURM_JOB_ID");
            if (out == CZ_RUN_INTERRUPTED && job && atol(job) > 0) {
                /* as cloze.sbatch does once the ranks have checkpointed */
                char cmd[64];
                snprintf(cmd, sizeof cmd, "scontrol requeue %ld", atol(job));
                printf("  requeueing job %ld to resume the fine-tuning\n", atol(job));
                fflush(stdout);
                if (system(cmd) != 0) printf("  %s failed: rerun the task by hand\n", cmd);
            }
        }
        return out == CZ_RUN_FAILED ? 1 : 0;
    case CZ_RUN_INTERRUPTED:
        printf("  interrupted: checkpointed; the requeued task resumes it\n");
        return 0;
    case CZ_RUN_BUSY:
        printf("  another process holds this point: nothing to do\n");
        return 0;
    case CZ_RUN_FAILED:
        printf("  FAILED: %s\n", err.msg);
        return 1;
    }
    return 1;
}

int main(int argc, char **argv) {
    args a;
    if (parse_args(argc, argv, &a) != 0) return 2;
    if (!a.command) {
        fprintf(stderr, "cloze-sweep: no command: cloze-sweep COMMAND SPEC [options], COMMAND "
                        "one of plan, run, submit, status, report, task (try --help)\n");
        return 2;
    }
    static const char *const commands[] = {"plan",   "run",  "submit",    "status",
                                           "report", "task", "coordcheck"};
    int known = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        known |= !strcmp(a.command, commands[i]);
    if (!known) {
        fprintf(stderr,
                "cloze-sweep: unknown command '%s' (plan, run, submit, status, report, task, "
                "coordcheck)\n",
                a.command);
        return 2;
    }
    cz_log_setup(0, CZ_LOG_INFO);
    if (!strcmp(a.command, "report") && !a.spec) {
        if (!a.results) {
            fprintf(stderr, "cloze-sweep report: give SPEC, or --results FILE.csv --out DIR\n");
            return 2;
        }
        if (!a.out) {
            fprintf(stderr, "cloze-sweep report --results: give --out DIR too\n");
            return 2;
        }
        return cmd_report(NULL, &a);
    }
    if (!a.spec) {
        fprintf(stderr, "cloze-sweep %s: no SPEC given (try --help)\n", a.command);
        return 2;
    }
    if (!strcmp(a.command, "coordcheck")) return cmd_coordcheck(&a);
    cz_error err = {{0}};
    cz_sweep *s;
    if (cz_sweep_load(&s, a.spec, &a.cli, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        return 1;
    }
    cz_sweep_tools tools;
    if (cz_sweep_find_tools(&tools, &err) != 0) {
        fprintf(stderr, "cloze-sweep: error: %s\n", err.msg);
        cz_sweep_free(s);
        return 1;
    }
    int rc;
    if (!strcmp(a.command, "plan"))
        rc = cmd_plan(s, &tools, &a);
    else if (!strcmp(a.command, "run"))
        rc = cmd_run(s, &tools, &a);
    else if (!strcmp(a.command, "submit"))
        rc = cmd_submit(s, &tools, &a);
    else if (!strcmp(a.command, "status"))
        rc = cmd_status(s, &tools, &a);
    else if (!strcmp(a.command, "task"))
        rc = cmd_task(s, &tools, &a);
    else
        rc = cmd_report(s, &a);
    cz_sweep_free(s);
    return rc;
}
