/* The optimizer step alone on a BERT-base-sized parameter buffer (1 rank):
 * seconds per cz_optimizer_step (gradient norm, clipping, update) and the
 * memory rate that implies, next to a memcpy of the same size measured in
 * the same run with the same threads.
 *
 *   mpirun -np 1 bench-optim_bench [--threads N] [--steps N] [--opt adamw|lamb]
 *       [--placement sharded|replicated|coordinator] [--micro-batches N]
 *
 * The tensor table is BERT-base's (L12 H768 I3072, V 30522, T 512, with the
 * pooler, MLM transform, decoder bias and NSP head: 110.1M parameters), so
 * segments, blocks and no-decay ranges are those of the real model.
 * Traffic per parameter: norm pass reads g (4 B); AdamW reads g, w, m, v and
 * writes w, m, v (28 B); 32 B in all ("bytes/param" below). The step before
 * the fast path also wrote the averaged g back (36 B). The first step is a
 * warm-up (page faults) and not counted; the median of the others is
 * printed. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/optim.h"

enum { MAX_T = 256 };

static int add(cz_param_range *r, int *n, size_t *off, size_t numel, int no_decay) {
    if (*n == MAX_T) return -1;
    r[*n] = (cz_param_range){*off, numel, no_decay};
    *off += numel;
    (*n)++;
    return 0;
}

/* BERT-base's tensors in cloze's order does not matter for the rate; sizes
 * and the decay rule do. */
static size_t bert_base(cz_param_range *r, int *n) {
    const size_t H = 768, I = 3072, V = 30522, T = 512;
    size_t off = 0;
    *n = 0;
    add(r, n, &off, V * H, 0), add(r, n, &off, T * H, 0), add(r, n, &off, 2 * H, 0);
    add(r, n, &off, H, 1), add(r, n, &off, H, 1); /* embedding LayerNorm */
    for (int l = 0; l < 12; l++) {
        for (int q = 0; q < 4; q++) add(r, n, &off, H * H, 0), add(r, n, &off, H, 1);
        add(r, n, &off, H, 1), add(r, n, &off, H, 1);
        add(r, n, &off, H * I, 0), add(r, n, &off, I, 1);
        add(r, n, &off, I * H, 0), add(r, n, &off, H, 1);
        add(r, n, &off, H, 1), add(r, n, &off, H, 1);
    }
    add(r, n, &off, H * H, 0), add(r, n, &off, H, 1);                    /* pooler */
    add(r, n, &off, H * H, 0), add(r, n, &off, H, 1);                    /* MLM transform */
    add(r, n, &off, H, 1), add(r, n, &off, H, 1), add(r, n, &off, V, 1); /* LN, decoder bias */
    add(r, n, &off, 2 * H, 0), add(r, n, &off, 2, 1);                    /* NSP */
    return off;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* memcpy of n floats, split in `threads` contiguous parts */
static double copy_seconds(float *dst, const float *src, size_t n) {
    double t0 = cz_now();
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t a = n * (size_t)t / (size_t)nt, b = n * (size_t)(t + 1) / (size_t)nt;
        memcpy(dst + a, src + a, (b - a) * sizeof(float));
    }
    return cz_now() - t0;
}

/* y = 0.5 y + x, a plain OpenMP loop (simd: gcc -O2 leaves it scalar
 * otherwise, and a scalar loop is not bandwidth-bound): reads 8 B, writes
 * 4 B per element */
static double stream_seconds(float *restrict y, const float *restrict x, size_t n) {
    double t0 = cz_now();
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = 0.5f * y[i] + x[i];
    return cz_now() - t0;
}

int main(int argc, char **argv) {
    int threads = 1, steps = 5, mb = 1;
    const char *opt = "adamw", *place = "sharded";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--micro-batches"))
            mb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--opt"))
            opt = argv[i + 1];
        else if (!strcmp(argv[i], "--placement"))
            place = argv[i + 1];
        else {
            fprintf(stderr, "optim_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (steps < 2) steps = 2;
    cz_comm d;
    cz_error err;
    if (cz_comm_init(&d, &argc, &argv, &err) != 0) {
        fprintf(stderr, "optim_bench: %s\n", err.msg);
        return 1;
    }
    omp_set_num_threads(threads);
    cz_param_range ranges[MAX_T];
    int nr;
    size_t n = bert_base(ranges, &nr);
    cz_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = strcmp(opt, "lamb") == 0 ? CZ_OPT_LAMB : CZ_OPT_ADAMW;
    c.lr = 1e-4, c.beta1 = 0.9, c.beta2 = 0.999, c.eps = 1e-6, c.weight_decay = 0.01;
    c.clip_norm = 1.0;
    c.placement = !strcmp(place, "coordinator") ? CZ_PLACE_COORDINATOR
                  : !strcmp(place, "sharded")   ? CZ_PLACE_SHARDED
                                                : CZ_PLACE_REPLICATED;
    cz_comm_config dc;
    memset(&dc, 0, sizeof dc);
    dc.allreduce = CZ_ALLREDUCE_RING;
    dc.bucket_mb = 25;
    dc.overlap = 1;
    cz_optimizer *o;
    cz_grad_sync *gs;
    float *w = cz_alloc(n * sizeof(float), &err), *g = w ? cz_alloc(n * sizeof(float), &err) : NULL;
    if (!g ||
        cz_grad_sync_create(&gs, &d, &dc, n, cz_placement_sync_mode(c.placement), CZ_GRAD_ASCENDING,
                            &err) != 0 ||
        cz_optimizer_create(&o, &d, &c, gs, ranges, nr, &err) != 0) {
        fprintf(stderr, "optim_bench: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < n; i++) w[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    double *dt = calloc((size_t)steps, sizeof(double)), *ct = calloc((size_t)steps, sizeof(double));
    double *st = calloc((size_t)steps, sizeof(double));
    double last_norm = 0;
    for (int s = 0; s < steps; s++) {
        /* fresh gradients each step (the step may overwrite them) */
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            g[i] = (float)((i * 40503u + (size_t)s) % 977) * 2e-6f - 1e-3f;
        cz_grad_sync_begin(gs, g);
        for (int k = 0; k < nr; k++) cz_grad_sync_ready(gs, ranges[k].offset, ranges[k].numel);
        cz_step_report rep;
        double t0 = cz_now();
        if (cz_grad_sync_finish(gs, &err) != 0 ||
            cz_optimizer_step(o, w, g, mb, c.lr, &rep, &err) != 0) {
            fprintf(stderr, "optim_bench: %s\n", err.msg);
            return 1;
        }
        dt[s] = cz_now() - t0;
        last_norm = rep.grad_norm;
        ct[s] = copy_seconds(g, w, n); /* g is scratch after the step */
        st[s] = stream_seconds(g, w, n);
    }
    double step = median(dt + 1, steps - 1), copy = median(ct + 1, steps - 1);
    double stream = median(st + 1, steps - 1);
    double gb = 1e-9 * (double)n;
    printf("%s %s: %.1fM params, %d thread(s), %d steps: step %.4f s (%.1f GB/s at 32 B/param, "
           "%.1f at 36); memcpy of %.0f MB %.4f s (%.1f GB/s read+write); y = 0.5 y + x "
           "%.4f s (%.1f GB/s at 12 B/elem); norm %.6g\n",
           opt, place, (double)n / 1e6, threads, steps - 1, step, 32 * gb / step, 36 * gb / step,
           4 * gb * 1e3, copy, 8 * gb / copy, stream, 12 * gb / stream, last_norm);
    cz_optimizer_free(o);
    cz_grad_sync_free(gs);
    cz_free(w);
    cz_free(g);
    free(dt);
    free(ct);
    free(st);
    cz_comm_finalize(&d);
    return 0;
}
