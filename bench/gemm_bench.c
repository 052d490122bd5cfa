/* GEMM throughput for every matrix-product shape of a BERT step, cloze's
 * path (cz_gemm) side by side with OpenBLAS (dlopen'ed, so that its BLAS
 * symbols cannot collide with BLIS's), alternating per measurement.
 *
 * Shapes (--model): BERT-base (d = 768, FFN 3072, 12 heads of 64) at sequence
 * length 128, micro-batch of 8 sequences = 1024 tokens; or BERT-mini (d = 256,
 * FFN 1024, 4 heads of 64), 32 sequences = 4096 tokens, the micro-batch of
 * bench/e2e_vs_torch.sh at 1 rank. Linear weights are stored as PyTorch does
 * ([out, in], model.h), so the forward is Y = X W^T (NT), the input gradient
 * dX = dY W (NN), the weight gradient dW = dY^T X (TN). Attention runs one
 * product per (sequence, head) on head slices of [tokens x d] buffers (row
 * stride d). --decoder adds the MLM decoder's three products (20 masked
 * positions per sequence against the 30522-word embedding table).
 *
 * Usage: bench-gemm_bench [--choice auto|default|avx512] [--threads 1,2]
 *        [--rounds 3] [--min-time 0.2] [--openblas PATH] [--quick] [--bf16]
 *        [--bf16-kernel vdpbf16ps|amx|amx-emulated] [--model base|mini] [--decoder]
 * --bf16 adds cloze's bf16 mode (cz_gemm_set_bf16, "cloze-bf16:KERNEL") to
 * every measurement, rotated with the fp32 path and OpenBLAS, on the kernel
 * core chooses; --bf16-kernel NAME (implies --bf16) forces the kernel, as
 * CLOZE_BF16_KERNEL does (one kernel per process: run once per kernel and
 * put the sample lines together for a table that compares them; a kernel
 * this CPU cannot run is an error). (Debian's OpenBLAS
 * 0.3.21 is built without bfloat16: no cblas_sbgemm to compare with.)
 * Prints one line per measurement: "sample <path> <shape> <threads> <GFLOP/s>"
 * (bench/gemm_vs_openblas.sh turns them into a table of medians). */
#include "cloze/core.h"
#include "cloze/cpu.h"
#include "cloze/kernels.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta,
                               float *c, int ldc);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef struct {
    const char *name;
    int ta, tb, m, n, k;
    int batch;         /* independent products per micro-batch (attention: B x heads) */
    int lda, ldb, ldc; /* 0: dense */
} shape;

/* Model dimensions: tokens per micro-batch, hidden, FFN, sequence, head size,
 * heads, and the MLM decoder (masked positions x vocabulary). */
typedef struct {
    const char *name;
    int tokens, d, f, seq, dh, heads, pred_rows, vocab;
} dims;

static const dims models[] = {
    /* BERT-base, 8 sequences of 128, 20 predictions each */
    {"base", 1024, 768, 3072, 128, 64, 12, 160, 30522},
    /* BERT-mini (L4 H256 A4), 32 sequences of 128, as bench/e2e_vs_torch.sh */
    {"mini", 4096, 256, 1024, 128, 64, 4, 640, 30522},
};

#define MAX_SHAPES 16
static shape shapes[MAX_SHAPES];
static int NSHAPES;
static dims M; /* the model being measured */

static void add(const char *name, int ta, int tb, int m, int n, int k, int batch, int lda, int ldb,
                int ldc) {
    shapes[NSHAPES++] = (shape){name, ta, tb, m, n, k, batch, lda, ldb, ldc};
}

static void make_shapes(int with_decoder) {
    int T = M.tokens, D = M.d, F = M.f, S = M.seq, DH = M.dh, BH = T / S * M.heads;
    int P = M.pred_rows, V = M.vocab;
    NSHAPES = 0;
    add("fwd qkv/out  X.W^T", 0, 1, T, D, D, 1, 0, 0, 0);
    add("fwd ffn-up   X.W^T", 0, 1, T, F, D, 1, 0, 0, 0);
    add("fwd ffn-down X.W^T", 0, 1, T, D, F, 1, 0, 0, 0);
    add("bwd qkv/out  dY.W", 0, 0, T, D, D, 1, 0, 0, 0);
    add("bwd ffn-up   dY.W", 0, 0, T, D, F, 1, 0, 0, 0);
    add("bwd ffn-down dY.W", 0, 0, T, F, D, 1, 0, 0, 0);
    add("bwd qkv/out  dY^T.X", 1, 0, D, D, T, 1, 0, 0, 0);
    add("bwd ffn-up   dY^T.X", 1, 0, F, D, T, 1, 0, 0, 0);
    add("bwd ffn-down dY^T.X", 1, 0, D, F, T, 1, 0, 0, 0);
    add("attn Q.K^T, dC.V^T", 0, 1, S, S, DH, BH, D, D, S);
    add("attn P.V, dS.K", 0, 0, S, DH, S, BH, S, D, D);
    add("attn P^T.dC, dS^T.Q", 1, 0, S, DH, S, BH, S, D, D);
    if (!with_decoder) return;
    add("mlm decoder  H.E^T", 0, 1, P, V, D, 1, 0, 0, 0);
    add("mlm decoder  dZ.E", 0, 0, P, D, V, 1, 0, 0, 0);
    add("mlm decoder  dZ^T.H", 1, 0, V, D, P, 1, 0, 0, 0);
}

typedef struct {
    float *a, *b, *c;
    size_t a_step, b_step, c_step; /* offset between the batch's products */
    int lda, ldb, ldc;
} operands;

/* Attention products address head h of sequence s inside a [tokens x d]
 * buffer: rows s*seq.., columns h*dh..; scores are dense [seq x seq]. */
static operands make_operands(const shape *sh) {
    operands o;
    int a_rows = sh->ta ? sh->k : sh->m, a_cols = sh->ta ? sh->m : sh->k;
    int b_rows = sh->tb ? sh->n : sh->k, b_cols = sh->tb ? sh->k : sh->n;
    o.lda = sh->lda ? sh->lda : a_cols;
    o.ldb = sh->ldb ? sh->ldb : b_cols;
    o.ldc = sh->ldc ? sh->ldc : sh->n;
    size_t a_len = (size_t)a_rows * o.lda, b_len = (size_t)b_rows * o.ldb;
    size_t c_len = (size_t)sh->m * o.ldc;
    /* batch: sequences x heads; a head slice of a [tokens x d] buffer is
     * dh columns to the right, the next sequence seq rows down */
    int D = M.d;
    size_t TD = (size_t)M.tokens * D;
    o.a_step = o.lda == D ? 0 : a_len;
    o.b_step = o.ldb == D ? 0 : b_len;
    o.c_step = o.ldc == D ? 0 : c_len;
    size_t a_total = sh->batch > 1 ? (o.lda == D ? TD : a_len * sh->batch) : a_len;
    size_t b_total = sh->batch > 1 ? (o.ldb == D ? TD : b_len * sh->batch) : b_len;
    size_t c_total = sh->batch > 1 ? (o.ldc == D ? TD : c_len * sh->batch) : c_len;
    o.a = cz_alloc(a_total * sizeof(float), NULL);
    o.b = cz_alloc(b_total * sizeof(float), NULL);
    o.c = cz_alloc(c_total * sizeof(float), NULL);
    for (size_t i = 0; i < a_total; i++) o.a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < b_total; i++) o.b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    return o;
}

/* offset of product j in a buffer: its own block, or head/sequence slice */
static size_t offset(size_t step, int ld, int j, int rows) {
    if (step) return step * (size_t)j;
    int seq = j / M.heads, head = j % M.heads;
    return (size_t)seq * rows * ld + (size_t)head * M.dh;
}

static void run_once(const shape *sh, const operands *o, const cz_gemm_ctx *g, cblas_sgemm_fn ob) {
    int a_rows = sh->ta ? sh->k : sh->m, b_rows = sh->tb ? sh->n : sh->k;
    for (int j = 0; j < sh->batch; j++) {
        const float *a = o->a + offset(o->a_step, o->lda, j, a_rows);
        const float *b = o->b + offset(o->b_step, o->ldb, j, b_rows);
        float *c = o->c + offset(o->c_step, o->ldc, j, sh->m);
        if (g)
            cz_gemm(g, sh->ta, sh->tb, sh->m, sh->n, sh->k, 1.0f, a, o->lda, b, o->ldb, 0.0f, c,
                    o->ldc);
        else
            ob(CBLAS_ROW_MAJOR, sh->ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
               sh->tb ? CBLAS_TRANS : CBLAS_NO_TRANS, sh->m, sh->n, sh->k, 1.0f, a, o->lda, b,
               o->ldb, 0.0f, c, o->ldc);
    }
}

/* GFLOP/s over repeated runs lasting at least min_time (after one warm-up) */
static double measure(const shape *sh, const operands *o, const cz_gemm_ctx *g, cblas_sgemm_fn ob,
                      double min_time) {
    run_once(sh, o, g, ob);
    int iters = 0;
    double t0 = cz_now(), t;
    do {
        run_once(sh, o, g, ob);
        iters++;
        t = cz_now() - t0;
    } while (t < min_time);
    return 2.0 * sh->m * sh->n * sh->k * sh->batch * iters / t * 1e-9;
}

int main(int argc, char **argv) {
    const char *choice_name = "auto", *threads_list = "1,2";
    const char *openblas_path = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0";
    const char *model_name = "base";
    const char *bf16_kernel = NULL;
    int rounds = 3, quick = 0, bf16 = 0, decoder = 0;
    double min_time = 0.2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--choice") && i + 1 < argc)
            choice_name = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads_list = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--openblas") && i + 1 < argc)
            openblas_path = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_name = argv[++i];
        else if (!strcmp(argv[i], "--decoder"))
            decoder = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--bf16"))
            bf16 = 1;
        else if (!strcmp(argv[i], "--bf16-kernel") && i + 1 < argc) {
            bf16_kernel = argv[++i];
            bf16 = 1;
        } else {
            fprintf(stderr,
                    "usage: %s [--choice auto|default|avx512] [--threads 1,2] [--rounds N] "
                    "[--min-time S] [--openblas PATH] [--quick] [--bf16] "
                    "[--bf16-kernel vdpbf16ps|amx|amx-emulated] [--model base|mini] "
                    "[--decoder]\n",
                    argv[0]);
            return 2;
        }
    }
    M.name = NULL;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(models[i].name, model_name)) M = models[i];
    if (!M.name) {
        fprintf(stderr, "--model %s: expected base or mini\n", model_name);
        return 2;
    }
    make_shapes(decoder);
    if (bf16_kernel) {
        if (cz_bf16_kernel_parse(bf16_kernel) < 0) {
            fprintf(stderr, "--bf16-kernel %s: expected vdpbf16ps, amx or amx-emulated\n",
                    bf16_kernel);
            return 2;
        }
        /* read once, at the first bf16 context */
        setenv("CLOZE_BF16_KERNEL", bf16_kernel, 1);
        if (cz_bf16_kernel_refused() ||
            cz_bf16_kernel_chosen() != cz_bf16_kernel_parse(bf16_kernel)) {
            fprintf(stderr, "--bf16-kernel %s: not run here: %s\n", bf16_kernel,
                    cz_bf16_kernel_note());
            return 1;
        }
    }
    cz_gemm_choice choice = !strcmp(choice_name, "default")  ? CZ_GEMM_BLIS_DEFAULT
                            : !strcmp(choice_name, "avx512") ? CZ_GEMM_AVX512
                                                             : CZ_GEMM_AUTO;

    /* RTLD_DEEPBIND: OpenBLAS resolves its own sgemm_ etc. before BLIS's. */
    void *lib = dlopen(openblas_path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    cblas_sgemm_fn ob = (cblas_sgemm_fn)dlsym(lib, "cblas_sgemm");
    void (*ob_threads)(int) = (void (*)(int))dlsym(lib, "openblas_set_num_threads");
    char *(*ob_core)(void) = (char *(*)(void))dlsym(lib, "openblas_get_corename");
    if (!ob || !ob_threads || !ob_core) {
        fprintf(stderr, "%s: missing cblas_sgemm/openblas_set_num_threads\n", openblas_path);
        return 1;
    }

    int threads[8], nthreads = 0;
    for (const char *p = threads_list; *p && nthreads < 8;) {
        threads[nthreads++] = atoi(p);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    cz_error err;
    cz_gemm_ctx *ctx[8], *ctx_bf16[8] = {0};
    for (int t = 0; t < nthreads; t++) {
        if (!(ctx[t] = cz_gemm_setup(choice, threads[t], &err))) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        if (bf16 && (!(ctx_bf16[t] = cz_gemm_setup(choice, threads[t], &err)) ||
                     cz_gemm_set_bf16(ctx_bf16[t], 1, &err))) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    char cloze_name[64], ob_name[64], bf16_name[64] = "";
    if (bf16) snprintf(bf16_name, sizeof bf16_name, "cloze-bf16:%s", cz_gemm_kernel(ctx_bf16[0]));
    snprintf(cloze_name, sizeof cloze_name, "%s:blis-%s",
             choice == CZ_GEMM_AUTO     ? "cloze-auto"
             : choice == CZ_GEMM_AVX512 ? "cloze-avx512"
                                        : "blis-default",
             cz_gemm_kernel(ctx[0]));
    snprintf(ob_name, sizeof ob_name, "openblas:%s", ob_core());
    printf("# model: BERT-%s, %d tokens per micro-batch\n", M.name, M.tokens);
    printf("# cloze path: %s\n# openblas: %s (%s)\n", cz_gemm_describe(ctx[0]), ob_core(),
           openblas_path);
    if (bf16) printf("# cloze bf16 path: %s\n", cz_gemm_describe(ctx_bf16[0]));

    operands ops[MAX_SHAPES];
    for (int s = 0; s < NSHAPES; s++) ops[s] = make_operands(&shapes[s]);
    for (int r = 0; r < rounds; r++)
        for (int t = 0; t < nthreads; t++) {
            ob_threads(threads[t]);
            for (int s = 0; s < NSHAPES; s++) {
                if (quick && s % 3) continue;
                /* alternate which library goes first; after OpenBLAS with
                 * threads, let its spinning workers fall asleep (~0.1 s) so
                 * that they do not steal the cores from BLIS's */
                int npaths = bf16 ? 3 : 2; /* 0 cloze fp32, 1 OpenBLAS, 2 cloze bf16 */
                for (int turn = 0; turn < npaths; turn++) {
                    int path = (turn + r + s) % npaths, use_ob = path == 1;
                    const cz_gemm_ctx *g = path == 0 ? ctx[t] : path == 2 ? ctx_bf16[t] : NULL;
                    double gf = measure(&shapes[s], &ops[s], g, ob, min_time);
                    if (use_ob && threads[t] > 1) usleep(150000);
                    const shape *sh = &shapes[s];
                    char times[16] = "";
                    if (sh->batch > 1) snprintf(times, sizeof times, " x%d", sh->batch);
                    printf("sample\t%s\t%s %c%c %dx%dx%d%s\t%d\t%.1f\n",
                           path == 1   ? ob_name
                           : path == 2 ? bf16_name
                                       : cloze_name,
                           sh->name, sh->ta ? 'T' : 'N', sh->tb ? 'T' : 'N', sh->m, sh->n, sh->k,
                           times, threads[t], gf);
                    fflush(stdout);
                }
            }
        }
    for (int s = 0; s < NSHAPES; s++) {
        cz_free(ops[s].a);
        cz_free(ops[s].b);
        cz_free(ops[s].c);
    }
    for (int t = 0; t < nthreads; t++) {
        cz_gemm_free(ctx[t]);
        cz_gemm_free(ctx_bf16[t]);
    }
    dlclose(lib);
    return 0;
}
