/* GEMM: fp32 through BLIS, with the configuration core chose from CPUID
 * (cz_cpu_blis_config); bf16 mode through gemm_bf16.c, with the kernel
 * core chose (cz_bf16_kernel_chosen).
 *
 * Row-major buffers are passed to BLIS with explicit strides (row stride =
 * ld, column stride = 1), so no copies or transposes are made here; BLIS packs
 * panels for its micro-kernel itself.
 *
 * Why we choose the kernel ourselves: BLIS 0.9.0 (Debian 12) maps the CPU to
 * one of its sub-configurations by CPUID family/model tables. CPUs newer than
 * the tables land on an older configuration (any AMD family 0x19, Zen 4 with
 * AVX-512 included, gets "zen3", AVX2 kernels) or on "generic" (plain C; AMD
 * family 0x1A, Zen 5). The same
 * library also contains the AVX-512 "skx" configuration (sgemm micro-kernel
 * 32x12), which only needs the instruction set, not a particular model.
 *
 * On AMD family 0x19 model 0x11 (Zen 4) BLIS picks zen3, and skx measured
 * no faster on the large products (Zen 4 runs AVX-512 on 256-bit units) and
 * slower on attention-sized ones (skx has no "sup" small-matrix kernels;
 * docs/performance.md, "Design decisions"). So AUTO keeps zen3 on that family and takes
 * skx on other AVX-512 CPUs (Intel, AMD family 0x1A Zen 5 with 512-bit
 * units, which BLIS 0.9.0 does not know and would run on "generic"); the
 * rule is core's (cz_cpu_blis_config), with every other family's ISA.
 *
 * How: BLIS reads the environment variable BLIS_ARCH_TYPE (an arch_t number)
 * once, the first time it asks which configuration to use. In 0.9.0 that
 * check looks the requested context up in the global kernel structure, which
 * only exists after bli_init(); asking before bli_init() aborts. So
 * cz_gemm_setup sets the variable, calls bli_init(), queries the id (this
 * fixes it for the process), restores the environment and then verifies
 * which configuration BLIS actually runs: the description reports that, not
 * what we wished for. The choice is per process: BLIS keeps one active
 * configuration, so the first setup decides. */
#include "cloze/cpu.h"
#include "cloze/kernels.h"
#include "gemm_bf16.h"

#include <blis.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 128x128x128 = 2M; the attention products are 1M (see cz_gemm_ctx) */
#define SMALL_PRODUCT_MACS (4.0 * 1024 * 1024)

/* Weight gradients dW = dY^T X are A^T B products whose k (the tokens of a
 * micro-batch) can be long next to m and n. BLIS's packed path splits only
 * m and n across threads, and on such shapes its threads spend much of the
 * time packing and waiting (BERT-mini's 256 x 256 x 4096 measured slower
 * than OpenBLAS on 2 threads). So A^T B products with k >=
 * KSPLIT_MIN_K and k^2 >= 4 m n (C small next to the operands) are cut at
 * k/2: the first half accumulates into C (with beta), the second goes into
 * a scratch panel which is then added to C, the two halves side by side on
 * the threads. The cut depends on the shape only, so any thread count gives
 * the same bits (one thread runs the halves in turn). Measured faster on
 * those products and on a whole BERT-mini step; BERT-base's 768 x 768 x
 * 1024 products, where the rule does not cut, were not faster as a whole
 * step (docs/performance.md, "Design decisions"). C is done in column panels of at
 * most KSPLIT_SCRATCH floats; panels do not change the bits (BLIS's packed
 * path sums each element the same way whatever n). */
#define KSPLIT_MIN_K 1024
#define KSPLIT_SCRATCH (1 << 18)

struct cz_gemm_ctx {
    cz_gemm_choice choice;
    int threads;
    rntm_t rntm;
    /* AUTO and AVX512 pick the path per product, from its shape only, so
     * that the result never depends on the thread count (kernels.h rule):
     * - large products: BLIS's packed path (`packed_only`: the active
     *   context with the "sup" thresholds at 1) with all threads; it splits
     *   only m and n across threads, at micro-tile multiples, so 1 and 2
     *   threads give the same bits. zen3's sup path does not (2 threads move
     *   tile edges: 58 elements differ in test_gemm's products).
     * - small products (below the context's sup thresholds and at most
     *   SMALL_PRODUCT_MACS multiply-adds, i.e. attention per head): one
     *   thread, with sup kernels (`with_sup`) except for A.B^T, where zen3's
     *   sup kernel measured slower than its packed path on 128x128x64
     *   (docs/performance.md, "Design decisions"). One thread because a 1M-MAC product
     *   gains little from a second one and the model parallelises over
     *   heads instead. */
    cntx_t packed_only, with_sup;
    int per_shape;
    char kernel[32]; /* BLIS configuration that runs ("skx"), or "reference" */
    char description[320];
    float *ksplit; /* KSPLIT_SCRATCH floats: the second half's panel */
    /* bf16 mode (cz_gemm_set_bf16): packing buffers, NULL = fp32 */
    cz_gemm_bf16_work *bf16;
    int bf16_ref; /* bf16 mode on a CZ_GEMM_REFERENCE context: the loops */
    char fp32_description[320];
};

/* The arch_t of a BLIS configuration named as bli_arch_string spells it;
 * -1 for NULL or a name this BLIS does not know. */
static int blis_arch_of(const char *config) {
    for (int id = 0; config && id < BLIS_NUM_ARCHS; id++)
        if (!strcmp(bli_arch_string((arch_t)id), config)) return id;
    return -1;
}

/* Initialises BLIS, asking for configuration `want` (-1: BLIS's choice),
 * and returns the configuration that BLIS runs. */
static int blis_start(int want) {
    char value[16];
    int set_env = want >= 0 && getenv("BLIS_ARCH_TYPE") == NULL;
    if (set_env) {
        snprintf(value, sizeof value, "%d", want);
        setenv("BLIS_ARCH_TYPE", value, 1);
    }
    bli_init();
    int running = (int)bli_arch_query_id(); /* fixes the choice for the process */
    if (set_env) unsetenv("BLIS_ARCH_TYPE");
    return running;
}

cz_gemm_ctx *cz_gemm_setup(cz_gemm_choice choice, int threads, cz_error *err) {
    cz_gemm_ctx *g = cz_alloc(sizeof *g, err);
    if (!g) return NULL;
    g->choice = choice;
    g->threads = threads > 0 ? threads : 1;
    if (!(g->ksplit = cz_alloc(sizeof(float) * KSPLIT_SCRATCH, err))) {
        cz_free(g);
        return NULL;
    }
    /* an rntm_t without a thread count runs single-threaded whatever
     * BLIS_NUM_THREADS says: set it explicitly */
    bli_rntm_init(&g->rntm);
    bli_rntm_set_num_threads(g->threads, &g->rntm);

    if (choice == CZ_GEMM_REFERENCE) {
        snprintf(g->kernel, sizeof g->kernel, "reference");
        snprintf(g->description, sizeof g->description, "reference loops (double accumulation)");
        cz_info("gemm: %s", g->description);
        return g;
    }
    /* which configuration: core's decision (cz_cpu_blis_config) */
    cz_cpu cpu;
    char why[96];
    cz_cpu_detect(&cpu);
    const char *config = cz_cpu_blis_config(&cpu, choice == CZ_GEMM_AVX512, why, sizeof why);
    int want = choice == CZ_GEMM_BLIS_DEFAULT ? -1 : blis_arch_of(config);
    int running = blis_start(want);
    snprintf(g->kernel, sizeof g->kernel, "%s", bli_arch_string((arch_t)running));
    g->with_sup = *bli_gks_query_cntx();
    g->packed_only = g->with_sup;
    blksz_t one;
    bli_blksz_init_easy(&one, 1, 1, 1, 1);
    bli_cntx_set_l3_sup_thresh(3, BLIS_MT, &one, BLIS_NT, &one, BLIS_KT, &one, &g->packed_only);
    g->per_shape = choice != CZ_GEMM_BLIS_DEFAULT;
    const char *how = choice == CZ_GEMM_BLIS_DEFAULT ? "BLIS's own choice"
                      : want < 0 || running == want  ? why
                      : getenv("BLIS_ARCH_TYPE")     ? why
                                                     : "BLIS was initialised before cz_gemm_setup";
    snprintf(g->description, sizeof g->description, "blis %s (%s, %s%s), %d thread(s)", g->kernel,
             cz_cpu_blis_isa(g->kernel), how, g->per_shape ? "; path per shape" : "", g->threads);
    if (want >= 0 && running != want)
        cz_warn("gemm: wanted blis %s, running %s: %s", bli_arch_string((arch_t)want), g->kernel,
                how);
    cz_info("gemm: %s", g->description);
    return g;
}

void cz_gemm_free(cz_gemm_ctx *g) {
    if (!g) return;
    cz_gemm_bf16_work_free(g->bf16);
    cz_free(g->ksplit);
    cz_free(g);
}

int cz_gemm_set_bf16(cz_gemm_ctx *g, int on, cz_error *err) {
    if (!g->bf16 && !g->bf16_ref)
        memcpy(g->fp32_description, g->description, sizeof g->description);
    cz_gemm_bf16_work_free(g->bf16);
    g->bf16 = NULL;
    g->bf16_ref = 0;
    memcpy(g->description, g->fp32_description, sizeof g->description);
    if (!on) return 0;
    if (g->choice == CZ_GEMM_REFERENCE) {
        g->bf16_ref = 1;
        snprintf(g->description, sizeof g->description,
                 "bf16 reference loops (inputs rounded to bf16, double accumulation)");
        cz_info("gemm: %s", g->description);
        return 0;
    }
    /* which kernel: core's rule over the table (cz_bf16_kernel_chosen) */
    const cz_bf16_kernel *kern = cz_bf16_kernel_at(cz_bf16_kernel_chosen());
    if (!kern) {
        cz_cpu cpu;
        char line[256];
        cz_cpu_detect(&cpu);
        if (cz_bf16_kernel_failed())
            return cz_fail(err,
                           "gemm: no bf16 kernel passed its check on this CPU (%s); use "
                           "model.matmul_precision = \"fp32\"",
                           cz_bf16_kernel_note());
        return cz_fail(err,
                       "gemm: bf16 matrix products need AVX512_BF16 (vdpbf16ps) or AMX, which "
                       "this CPU lacks (%s); use model.matmul_precision = \"fp32\"",
                       cz_cpu_describe(&cpu, line, sizeof line));
    }
    if (!(g->bf16 = cz_gemm_bf16_work_create(kern, g->threads, err))) return -1;
    snprintf(g->description, sizeof g->description, "bf16 %s, %s, fp32 accumulation, %d thread(s)",
             cz_bf16_kernel_note(), kern->detail, g->threads);
    cz_info("gemm: %s", g->description);
    return 0;
}

cz_gemm_ctx *cz_gemm_single_thread(const cz_gemm_ctx *g, cz_error *err) {
    cz_gemm_ctx *one = cz_alloc(sizeof *one, err);
    if (!one) return NULL;
    *one = *g; /* BLIS contexts are plain values: copied with it */
    one->threads = 1;
    bli_rntm_set_num_threads(1, &one->rntm);
    one->bf16 = NULL;
    one->ksplit = cz_alloc(sizeof(float) * KSPLIT_SCRATCH, err); /* its own */
    if (!one->ksplit ||
        (g->bf16 && !(one->bf16 = cz_gemm_bf16_work_create(g->bf16->kern, 1, err)))) {
        cz_free(one->ksplit);
        cz_free(one);
        return NULL;
    }
    return one;
}

int cz_gemm_is_bf16(const cz_gemm_ctx *g) {
    return g->bf16 != NULL || g->bf16_ref;
}

const char *cz_gemm_describe(const cz_gemm_ctx *g) {
    return g->description;
}

const char *cz_gemm_kernel(const cz_gemm_ctx *g) {
    return g->bf16 ? g->bf16->kern->choice.name : g->bf16_ref ? "bf16 reference" : g->kernel;
}

void cz_gemm_ref(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                acc += av * bv;
            }
            float *cij = &c[(size_t)i * ldc + j];
            *cij = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *cij));
        }
    }
}

static int use_ksplit(const cz_gemm_ctx *g, int ta, int tb, int m, int n, int k) {
    return g->per_shape && ta && !tb && k >= KSPLIT_MIN_K && (double)k * k >= 4.0 * m * n &&
           m <= KSPLIT_SCRATCH / 16 && (double)m * n * k > SMALL_PRODUCT_MACS;
}

static void blis_sgemm(const cz_gemm_ctx *g, const rntm_t *rntm, int ta, int tb, int m, int n,
                       int k, float alpha, const float *a, int lda, const float *b, int ldb,
                       float beta, float *c, int ldc) {
    rntm_t r = *rntm; /* BLIS may write to it */
    bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 m, n, k, &alpha, (float *)a, lda, 1, (float *)b, ldb, 1, &beta, c, ldc, 1,
                 (cntx_t *)&g->packed_only, &r);
}

/* C = beta C + alpha A^T B as two halves of k (see KSPLIT_MIN_K). A is
 * [k x m] (row stride lda), B [k x n]. */
static void gemm_ksplit(const cz_gemm_ctx *g, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    int h = k / 2, w = KSPLIT_SCRATCH / m / 16 * 16;
    if (w > n) w = n;
    rntm_t half = g->rntm; /* each half on half the threads */
    bli_rntm_set_num_threads(g->threads >= 2 ? g->threads / 2 : 1, &half);
    const float *a2 = a + (size_t)h * lda, *b2 = b + (size_t)h * ldb;
    float *t = g->ksplit;
    for (int j0 = 0; j0 < n; j0 += w) {
        int nw = n - j0 < w ? n - j0 : w;
#pragma omp parallel num_threads(2) if (g->threads >= 2)
        {
            int id = omp_get_thread_num(), nt = omp_get_num_threads();
            if (id == 0)
                blis_sgemm(g, &half, 1, 0, m, nw, h, alpha, a, lda, b + j0, ldb, beta, c + j0, ldc);
            if (id == 1 || nt == 1)
                blis_sgemm(g, &half, 1, 0, m, nw, k - h, alpha, a2, lda, b2 + j0, ldb, 0.0f, t, nw);
#pragma omp barrier
#pragma omp for schedule(static)
            for (int i = 0; i < m; i++) {
                float *restrict ci = c + (size_t)i * ldc + j0;
                const float *restrict ti = t + (size_t)i * nw;
#pragma omp simd
                for (int j = 0; j < nw; j++) ci[j] += ti[j];
            }
        }
    }
}

void cz_gemm_weights_begin(cz_gemm_ctx *g) {
    if (g && g->bf16) cz_gemm_bf16_weights_scope(g->bf16, 1);
}

void cz_gemm_weights_end(cz_gemm_ctx *g) {
    if (g && g->bf16) cz_gemm_bf16_weights_scope(g->bf16, 0);
}

void cz_gemm_weight(const cz_gemm_ctx *g, int ta, int tb, int m, int n, int k, float alpha,
                    const float *a, int lda, const float *b, int ldb, float beta, float *c,
                    int ldc) {
    cz_gemm_mat(g, ta, tb, m, n, k, alpha, cz_mat_f32(a, lda), cz_mat_f32(b, ldb), 1, beta, c, ldc);
}

/* A bf16 operand of rows x cols elements (as stored) widened to floats
 * (exact), for the paths that take floats only. The model hands bf16
 * operands only to a context in bf16 mode, so this is the odd caller's
 * path; without the memory for it the product cannot run at all. */
static float *widen(cz_mat x, int rows, int cols) {
    float *w = cz_alloc((size_t)rows * cols * sizeof *w, NULL);
    if (!w) {
        fprintf(stderr, "cz_gemm_mat: out of memory widening a %d x %d bf16 operand\n", rows, cols);
        abort();
    }
    for (int r = 0; r < rows; r++)
        cz_bf16_load_n(w + (size_t)r * cols, (const uint16_t *)x.p + (size_t)r * x.ld,
                       (size_t)cols);
    return w;
}

void cz_gemm_mat(const cz_gemm_ctx *g, int ta, int tb, int m, int n, int k, float alpha, cz_mat a,
                 cz_mat b, int b_weight, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (g && g->bf16) {
        cz_gemm_bf16_run(g->bf16, ta, tb, m, n, k, alpha, a, b, b_weight, beta, c, ldc);
        return;
    }
    /* fp32 paths: floats only; as stored, op(A) is k x m when ta, else m x k */
    float *wa = a.bf16 && k > 0 ? widen(a, ta ? k : m, ta ? m : k) : NULL;
    float *wb = b.bf16 && k > 0 ? widen(b, tb ? n : k, tb ? k : n) : NULL;
    cz_gemm(g, ta, tb, m, n, k, alpha, wa ? wa : (const float *)a.p, wa ? (ta ? m : k) : a.ld,
            wb ? wb : (const float *)b.p, wb ? (tb ? k : n) : b.ld, beta, c, ldc);
    cz_free(wa);
    cz_free(wb);
}

void cz_gemm(const cz_gemm_ctx *g, int ta, int tb, int m, int n, int k, float alpha, const float *a,
             int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (m == 0 || n == 0) return;
    if (g && g->bf16) {
        cz_gemm_bf16_run(g->bf16, ta, tb, m, n, k, alpha, cz_mat_f32(a, lda), cz_mat_f32(b, ldb), 0,
                         beta, c, ldc);
        return;
    }
    if (g && g->bf16_ref) {
        cz_gemm_bf16_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (!g || g->choice == CZ_GEMM_REFERENCE) {
        cz_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    /* op(A) is m x k: stored row-major as [m x k] (rs=lda, cs=1) or, when
     * transposed, as [k x m] which BLIS reads through the transpose flag.
     * NULL context: the configuration fixed in cz_gemm_setup. */
    if (use_ksplit(g, ta, tb, m, n, k)) {
        gemm_ksplit(g, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    rntm_t rntm = g->rntm;
    cntx_t *cntx = NULL; /* BLIS_DEFAULT: the active context, BLIS decides */
    if (g->per_shape) {
        cntx = (cntx_t *)&g->packed_only;
        if ((double)m * n * k <= SMALL_PRODUCT_MACS &&
            bli_cntx_l3_sup_thresh_is_met(BLIS_FLOAT, m, n, k, (cntx_t *)&g->with_sup)) {
            bli_rntm_set_num_threads(1, &rntm);
            if (ta || !tb) cntx = (cntx_t *)&g->with_sup;
        }
    }
    bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 m, n, k, &alpha, (float *)a, lda, 1, (float *)b, ldb, 1, &beta, c, ldc, 1, cntx,
                 &rntm);
}

/* ---- the MFU denominator (kernels.h) ---- */

static double probe_best_gflops(const cz_gemm_ctx *g, double *probe, cz_error *err) {
    const int n = 1024;
    float *a = cz_alloc(sizeof(float) * n * n * 3, err);
    if (!a) return -1;
    for (long i = 0; i < 2L * n * n; i++) a[i] = (float)((i * 7) % 13) * 0.01f;
    double best = 0;
    for (int rep = 0; rep < CZ_PEAK_PROBES; rep++) {
        double t0 = cz_now();
        cz_gemm(g, 0, 0, n, n, n, 1.0f, a, n, a + (size_t)n * n, n, 0.0f, a + 2 * (size_t)n * n, n);
        double rate = 2.0 * n * n * n / (cz_now() - t0) / 1e9;
        probe[rep] = rate;
        if (rate > best) best = rate;
    }
    cz_free(a);
    return best;
}

int cz_gemm_peak(const cz_gemm_ctx *g, double given, cz_peak *out, cz_error *err) {
    memset(out, 0, sizeof *out);
    if (given > 0) {
        out->gflops = given;
        snprintf(out->source, sizeof out->source, "train.peak_gflops = %g", given);
        return 0;
    }
    char how[128];
    cz_cpu cpu;
    cz_cpu_detect(&cpu);
    double core = cz_gemm_is_bf16(g) ? 0 : cz_cpu_peak_gflops_per_core(&cpu, how, sizeof how);
    if (core > 0) {
        out->gflops = core * g->threads;
        snprintf(out->source, sizeof out->source, "theoretical peak %.0f GFLOP/s (%s x %d threads)",
                 out->gflops, how, g->threads);
        return 0;
    }
    double best = probe_best_gflops(g, out->probe, err);
    if (best < 0) return -1;
    out->gflops = best;
    out->measured = 1;
    snprintf(out->source, sizeof out->source,
             "best of %d %s 1024^3 products at start-up, %.0f GFLOP/s (no theoretical peak: %s)",
             CZ_PEAK_PROBES, cz_gemm_is_bf16(g) ? "bf16" : "sgemm", best,
             cz_gemm_is_bf16(g) ? "bf16 mode" : how);
    return 0;
}
