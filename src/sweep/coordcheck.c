/* cloze-sweep coordcheck: µP's coordinate check (include/cloze/sweep.h).
 *
 * For each parametrization (standard, µP) and each width, the configured
 * GPT model at that width (intermediate in proportion, heads as
 * configured, dropout off) takes `steps` AdamW steps (optim.h's update
 * kernel, each tensor with its µP multipliers) on synthetic batches, and
 * cz_model_coord_stats reports the mean |activation| of the embeddings,
 * each block's attention and FFN outputs and the logits at the forward of
 * every step. Under µP those stay O(1) as the width grows; under the
 * standard parametrization with one Adam learning rate the updates'
 * contributions grow with the width (Yang et al. 2022, Sec. 3 and Fig. 5;
 * mup's README, "Checking Correctness of Parametrization").
 *
 * The batches: token 0 uniform, then each next token is (7 t + 3) mod V
 * with probability 0.8, else uniform: a bigram the model can learn, so the
 * steps move the weights in a consistent direction, as real text does. */
#include "cloze/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cloze/optim.h"
#include "cloze/rng.h"

#define MAX_SITES (2 * 64 + 2)

static void site_name(int s, int layers, char *buf, size_t len) {
    if (layers == 0) { /* the depth axis: means over the blocks */
        static const char *const names[] = {"embeddings", "attn(mean)", "ffn(mean)", "logits"};
        snprintf(buf, len, "%s", names[s & 3]);
    } else if (s == 0)
        snprintf(buf, len, "embeddings");
    else if (s == 2 * layers + 1)
        snprintf(buf, len, "logits");
    else
        snprintf(buf, len, "layer%d.%s", (s - 1) / 2, (s - 1) % 2 ? "ffn" : "attn");
}

static void make_batch(int32_t *tok, int32_t *tgt, int B, int T, int V, uint64_t seed, int step) {
    for (int s = 0; s < B; s++) {
        cz_rng_stream r = cz_rng_stream_make(seed, CZ_RNG_INSTANCE, (uint64_t)step, (uint64_t)s, 7);
        int32_t *t = tok + (size_t)s * T;
        t[0] = (int32_t)cz_rng_below(&r, 0, (uint64_t)V);
        for (int i = 1; i < T; i++)
            t[i] = cz_rng_uniform(&r, 2 * (uint64_t)i) < 0.8f
                       ? (int32_t)((7 * (int64_t)t[i - 1] + 3) % V)
                       : (int32_t)cz_rng_below(&r, 2 * (uint64_t)i + 1, (uint64_t)V);
        for (int i = 0; i < T; i++) tgt[(size_t)s * T + i] = i + 1 < T ? t[i + 1] : -1;
    }
}

/* One width of one parametrization: stats[step][site] for steps 0..steps */
static int run_width(const cz_coordcheck_options *o, int param, int width, uint64_t seed,
                     double *stats, int *n_sites, cz_error *err) {
    cz_model_config c = o->model;
    if (o->depth_axis) {
        c.layers = width;
    } else {
        c.hidden = width;
        c.intermediate = (int)((long)o->model.intermediate * width / o->model.hidden);
    }
    c.hidden_dropout = c.attn_dropout = 0.0f;
    c.recompute = CZ_RECOMPUTE_NONE;
    c.parametrization = param;
    c.mup_base_width = o->base_width;
    const char *key;
    if (cz_model_config_check(&c, &key, err) != 0)
        return cz_fail_prefix(err, "coordcheck: %s %d", o->depth_axis ? "depth" : "width", width);
    int B = o->batch, T = o->seq, rc = -1;
    cz_gemm_ctx *gemm = cz_model_gemm_setup(CZ_GEMM_AUTO, o->threads, c.matmul_bf16, err);
    if (!gemm) return -1;
    cz_model *m = NULL;
    int32_t *tok = calloc((size_t)B * T, sizeof *tok), *tgt = calloc((size_t)B * T, sizeof *tgt);
    float *mo = NULL, *vo = NULL;
    double *lr_mult = NULL, *wd_mult = NULL;
    cz_param_range *ranges = NULL;
    if (!tok || !tgt) {
        cz_fail(err, "coordcheck: out of memory");
        goto out;
    }
    if (cz_model_create(&m, &c, B, T, 1, gemm, err) != 0) goto out;
    if (o->fault_output_mult > 0) cz_model_set_output_mult(m, o->fault_output_mult);
    cz_model_init_weights(m, seed);
    size_t np = cz_model_num_params(m);
    int nt = cz_model_num_tensors(m);
    mo = cz_alloc(np * sizeof *mo, err);
    vo = mo ? cz_alloc(np * sizeof *vo, err) : NULL;
    lr_mult = calloc((size_t)nt, sizeof *lr_mult);
    wd_mult = calloc((size_t)nt, sizeof *wd_mult);
    ranges = calloc((size_t)nt, sizeof *ranges);
    if (!vo || !lr_mult || !wd_mult || !ranges) {
        cz_fail(err, "coordcheck: out of memory");
        goto out;
    }
    if (cz_optim_ranges_from_tensors(cz_model_tensor(m, 0), nt, &o->optim, ranges, err) != 0)
        goto out;
    cz_optim_model_multipliers(m, lr_mult, wd_mult);
    cz_batch b;
    memset(&b, 0, sizeof b);
    b.batch = B;
    b.seq = T;
    b.tokens = tok;
    b.targets = tgt;
    for (int step = 0; step <= o->steps; step++) {
        make_batch(tok, tgt, B, T, c.vocab_size, seed, step);
        cz_losses l;
        cz_model_zero_grads(m);
        if (cz_model_forward(m, &b, &l, err) != 0) goto out;
        *n_sites = cz_model_coord_stats(m, &b, stats + (size_t)step * MAX_SITES, MAX_SITES);
        if (*n_sites < 0) {
            cz_fail(err, "coordcheck: model.arch = gpt only (the coordinate check reads the LM "
                         "head's logits), with at most 64 layers");
            goto out;
        }
        if (o->depth_axis) { /* the blocks' means */
            double *st = stats + (size_t)step * MAX_SITES, a = 0, f = 0;
            for (int l = 0; l < c.layers; l++) {
                a += st[1 + 2 * l] / c.layers;
                f += st[2 + 2 * l] / c.layers;
            }
            st[3] = st[*n_sites - 1];
            st[1] = a;
            st[2] = f;
            *n_sites = 4;
        }
        if (step == o->steps) break;
        cz_model_backward(m, &b, 1.0f);
        /* AdamW with bias correction, each tensor at its µP multipliers */
        double t = step + 1;
        for (int r = 0; r < nt; r++) {
            cz_adam_coef k = {(float)(o->optim.lr * lr_mult[r]),
                              (float)o->optim.beta1,
                              (float)o->optim.beta2,
                              (float)o->optim.eps,
                              (float)(o->optim.weight_decay * wd_mult[r]),
                              (float)(1 - pow(o->optim.beta1, t)),
                              (float)(1 - pow(o->optim.beta2, t)),
                              1.0f};
            size_t a = ranges[r].offset, e = a + ranges[r].numel;
            cz_adamw_update(&k, &ranges[r], 1, cz_model_params(m), cz_model_grads(m), mo + a,
                            vo + a, a, e);
        }
    }
    rc = 0;
out:
    free(tok);
    free(tgt);
    cz_free(mo);
    cz_free(vo);
    free(lr_mult);
    free(wd_mult);
    free(ranges);
    cz_model_free(m);
    cz_gemm_free(gemm);
    return rc;
}

/* Runs gnuplot on `script` inside dir (messages to gnuplot.log); missing
 * gnuplot is said, not an error. */
static void plot(const char *gnuplot, const char *dir, const char *script, FILE *log) {
    const char *g = gnuplot ? gnuplot : "gnuplot";
    pid_t pid = fork();
    if (pid < 0) return;
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        int fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execlp(g, g, script, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (log && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
        fprintf(log, "coordcheck: no figures: %s failed or is missing (exit %d; %s/gnuplot.log)\n",
                g, WIFEXITED(st) ? WEXITSTATUS(st) : -1, dir);
}

static int write_files(const cz_coordcheck_options *o, const double *fin, int n_sites,
                       cz_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/coordcheck.csv", o->out_dir);
    FILE *f = fopen(path, "w");
    if (!f) return cz_fail(err, "%s: %s", path, strerror(errno));
    fprintf(f, "parametrization,%s,site,mean_abs\n", o->depth_axis ? "layers" : "width");
    char name[64];
    for (int p = 0; p < 2; p++)
        for (int w = 0; w < o->n_widths; w++)
            for (int s = 0; s < n_sites; s++) {
                site_name(s, o->depth_axis ? 0 : o->model.layers, name, sizeof name);
                fprintf(f, "%s,%d,%s,%.6g\n", p ? "mup" : "standard", o->widths[w], name,
                        fin[((size_t)p * o->n_widths + w) * MAX_SITES + s]);
            }
    if (fclose(f) != 0) return cz_fail(err, "%s: write failed", path);
    /* the figure: one panel per parametrization, one line per site */
    snprintf(path, sizeof path, "%s/coordcheck.dat", o->out_dir);
    f = fopen(path, "w");
    if (!f) return cz_fail(err, "%s: %s", path, strerror(errno));
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < n_sites; s++) {
            site_name(s, o->depth_axis ? 0 : o->model.layers, name, sizeof name);
            fprintf(f, "# %s %s\n", p ? "mup" : "standard", name);
            for (int w = 0; w < o->n_widths; w++)
                fprintf(f, "%d %.6g\n", o->widths[w],
                        fin[((size_t)p * o->n_widths + w) * MAX_SITES + s]);
            fprintf(f, "\n\n");
        }
    fclose(f);
    snprintf(path, sizeof path, "%s/coordcheck.gp", o->out_dir);
    f = fopen(path, "w");
    if (!f) return cz_fail(err, "%s: %s", path, strerror(errno));
    for (int term = 0; term < 2; term++) {
        fprintf(f, "set terminal %s size 1200,500 noenhanced font \"DejaVu Sans,10\"\n",
                term ? "svg" : "pngcairo");
        fprintf(f, "set output \"coordcheck.%s\"\nset multiplot layout 1,2\n",
                term ? "svg" : "png");
        fprintf(f,
                "set logscale xy 2\nset xlabel \"%s\"\n"
                "set ylabel \"mean |activation| after %d steps\"\nset key outside right\n",
                o->depth_axis ? "depth (model.layers)" : "width (model.hidden)", o->steps);
        for (int p = 0; p < 2; p++) {
            fprintf(f, "set title \"%s\"\nplot ", p ? "µP (mup)" : "standard");
            for (int s = 0; s < n_sites; s++) {
                site_name(s, o->depth_axis ? 0 : o->model.layers, name, sizeof name);
                fprintf(f, "%s'coordcheck.dat' index %d using 1:2 with linespoints title \"%s\"",
                        s ? ", \\\n     " : "", p * n_sites + s, name);
            }
            fprintf(f, "\n");
        }
        fprintf(f, "unset multiplot\nunset output\n");
    }
    fclose(f);
    return 0;
}

int cz_sweep_coordcheck(const cz_coordcheck_options *o, cz_coordcheck_verdict *v, FILE *log,
                        cz_error *err) {
    memset(v, 0, sizeof *v);
    if (o->n_widths < 2 || o->n_widths > CZ_COORDCHECK_MAX_WIDTHS)
        return cz_fail(err, "coordcheck: --widths: 2 to %d widths", CZ_COORDCHECK_MAX_WIDTHS);
    if (o->model.layers > 64) return cz_fail(err, "coordcheck: model.layers: at most 64");
    size_t per = (size_t)(o->steps + 1) * MAX_SITES;
    double *stats = calloc(per, sizeof *stats);
    double *fin = calloc((size_t)2 * o->n_widths * MAX_SITES, sizeof *fin);
    if (!stats || !fin) {
        free(stats);
        free(fin);
        return cz_fail(err, "coordcheck: out of memory");
    }
    int n_sites = 0, rc = 0;
    char name[64];
    for (int p = 0; p < 2 && rc == 0; p++)
        for (int w = 0; w < o->n_widths && rc == 0; w++) {
            /* the mean over seeds (initial values and batches) */
            double *f = fin + ((size_t)p * o->n_widths + w) * MAX_SITES;
            int seeds = o->seeds > 0 ? o->seeds : 1;
            for (int k = 0; k < seeds && rc == 0; k++) {
                rc = run_width(o, p ? CZ_PARAM_MUP : CZ_PARAM_STANDARD, o->widths[w],
                               o->seed + (uint64_t)k, stats, &n_sites, err);
                for (int i = 0; rc == 0 && i < n_sites; i++)
                    f[i] += stats[(size_t)o->steps * MAX_SITES + i] / seeds;
            }
            if (rc) break;
            if (log) {
                fprintf(log, "%-8s %s %4d:", p ? "mup" : "standard",
                        o->depth_axis ? "layers" : "width", o->widths[w]);
                for (int s = 0; s < n_sites; s++) {
                    site_name(s, o->depth_axis ? 0 : o->model.layers, name, sizeof name);
                    fprintf(log, " %s %.3g", name, f[s]);
                }
                fprintf(log, "\n");
            }
        }
    if (rc == 0) {
        /* the verdict: µP's spread across widths (max / min of each site),
         * the standard parametrization's logits growth, last width over first */
        v->n_sites = n_sites;
        v->mup_worst = 1;
        for (int s = 0; s < n_sites; s++) {
            double lo = INFINITY, hi = 0;
            for (int w = 0; w < o->n_widths; w++) {
                double x = fin[((size_t)o->n_widths + w) * MAX_SITES + s];
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
            double ratio = lo > 0 ? hi / lo : INFINITY;
            if (ratio > v->mup_worst) {
                v->mup_worst = ratio;
                site_name(s, o->depth_axis ? 0 : o->model.layers, v->mup_worst_site,
                          sizeof v->mup_worst_site);
            }
        }
        int lg = n_sites - 1;
        v->standard_logits_growth = fin[(size_t)(o->n_widths - 1) * MAX_SITES + lg] / fin[lg];
        v->mup_logits_growth = fin[((size_t)2 * o->n_widths - 1) * MAX_SITES + lg] /
                               fin[(size_t)o->n_widths * MAX_SITES + lg];
        if (o->out_dir) {
            rc = write_files(o, fin, n_sites, err);
            if (rc == 0) plot(o->gnuplot, o->out_dir, "coordcheck.gp", log);
        }
    }
    free(stats);
    free(fin);
    return rc;
}
