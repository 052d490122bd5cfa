/* bf16 matrix products with fp32 accumulation (the bf16 mode of cz_gemm).
 *
 * What is computed: cz_gemm's C = alpha op(A) op(B) + beta C, except that
 * every element of op(A) and op(B) is first rounded to bfloat16 (fp32's
 * exponent, 8-bit significand; round to nearest even, vcvtneps2bf16).
 * A product of two bf16 values is exact in fp32 (8 x 8 significand bits), and
 * vdpbf16ps and AMX's tdpbf16ps add such products into fp32 accumulators
 * (Intel SDM vol. 2, VDPBF16PS, TDPBF16PS), each kernel in its own order.
 * So the only roundings are the input roundings
 * (relative 2^-9 each) and fp32 accumulation, as in mixed-precision training
 * with fp32 master weights (Kalamkar et al. 2019, "A Study of BFLOAT16 for
 * Deep Learning Training"; Micikevicius et al. 2018 for fp16). The
 * definition is cz_gemm_bf16_ref (inputs rounded the same way, sum in
 * double).
 *
 * Structure: BLIS's five loops around a register-blocked micro-kernel (Van
 * Zee & van de Geijn 2015, "BLIS: A Framework for Rapidly Instantiating BLAS
 * Functionality", Fig. 2; Goto & van de Geijn 2008):
 *   jc over n in steps of NC
 *     pc over k in steps of KC      pack op(B) block, KC x NC (L3)
 *       ic over m in steps of MC    pack op(A) block, MC x KC (per thread, L2)
 *         jr in steps of NR         B micro-panel KC x NR stays in L1
 *           ir in steps of MR       micro-kernel: MR x NR fp32 accumulators
 * The blocking, the packing and the micro-kernel come from the kernel's
 * descriptor (gemm_bf16.h: the contract; the kernels: gemm_bf16_avx512.c,
 * the vdpbf16ps 8 x 48 register tile; gemm_bf16_amx.h, AMX tiles, real and
 * emulated), listed in one table (below). Which kernel runs is core's rule
 * (cz_cpu_choose), applied to the table once per process
 * (cz_bf16_kernel_chosen).
 *
 * Threads: OpenMP, each thread one rectangle of C (the rows or the columns
 * cut into equal ranges) computed by the loops above with its own packing
 * buffers; k is never split and KC blocks always start at k = 0, so every
 * element of C sees the same operations in the same order whatever the
 * thread count: results are bitwise independent of it. */
#include "gemm_bf16.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cloze/kernels.h"

/* products of at most this many multiply-adds run on one thread */
#define SMALL_MACS (4.0 * 1024 * 1024)

/* ---- the definition ---- */

float cz_bf16_round(float x) {
    uint32_t u = cz_bf16_bits(x) << 16;
    memcpy(&x, &u, 4);
    return x;
}

void cz_gemm_bf16_ref(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++) {
                double av = cz_bf16_round(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
                double bv = cz_bf16_round(tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
                acc += av * bv;
            }
            float *cij = &c[(size_t)i * ldc + j];
            *cij = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *cij));
        }
    }
}

/* ---- the table ---- */

#define CZ_BF16_ENTRY(v) &cz_bf16_kernel_##v,
static const cz_bf16_kernel *const table[] = {CZ_BF16_KERNELS(CZ_BF16_ENTRY)};
#undef CZ_BF16_ENTRY
#define N_KERNELS ((int)(sizeof table / sizeof table[0]))

/* the entries as core's rule reads them */
static void choices_of(const cz_cpu_choice *choices[N_KERNELS]) {
    for (int i = 0; i < N_KERNELS; i++) choices[i] = &table[i]->choice;
}

int cz_bf16_kernel_count(void) {
    return N_KERNELS;
}

const cz_bf16_kernel *cz_bf16_kernel_at(int i) {
    return i >= 0 && i < N_KERNELS ? table[i] : NULL;
}

const char *cz_bf16_kernel_name(int i) {
    return i >= 0 && i < N_KERNELS ? table[i]->choice.name : NULL;
}

int cz_bf16_kernel_parse(const char *name) {
    if (!strcmp(name, "auto")) return -1;
    for (int i = 0; i < N_KERNELS; i++)
        if (!strcmp(name, table[i]->choice.name)) return i;
    return -2;
}

int cz_bf16_kernel_best(const cz_cpu *cpu) {
    const cz_cpu_choice *choices[N_KERNELS];
    choices_of(choices);
    return cz_cpu_best_choice(cpu, choices, N_KERNELS);
}

/* pairs of a kc-long block, padded to the kernel's multiple */
static int packed_pairs(const cz_bf16_kernel *kern, int kc) {
    int kp = (kc + 1) / 2;
    return (kp + kern->kp_align - 1) / kern->kp_align * kern->kp_align;
}

/* The tile of kern for a product with n columns: its narrow variant when
 * the wide one pads n by more than 5 % beyond what the narrow one pads
 * (256 is 8 x 32 columns, but 6 x 48 = 288: 12.5 %; 1024 pads to 1056,
 * 3 %, where the wide tile's fewer passes over A measured faster: log,
 * "bf16: the 8 x 32 tile"). The variants give the same bits (gemm_bf16.h),
 * and the choice depends on n alone: never on the thread count or the
 * rank layout. */
static const cz_bf16_kernel *tile_for(const cz_bf16_kernel *kern, int n) {
    const cz_bf16_kernel *nar = kern->narrow;
    if (!nar) return kern;
    long wide = (long)(n + kern->nr - 1) / kern->nr * kern->nr;
    long thin = (long)(n + nar->nr - 1) / nar->nr * nar->nr;
    return 20 * wide > 21 * thin ? nar : kern;
}

/* The k block of a product: all of k (rounded up to a pair) when k <=
 * kern->kc_max, else kern->kc. Every KC block ends in a pass over C (read,
 * add, write); BERT-mini's MLM weight gradient (C 30522 x 256, k 640) made
 * three of them (log, "bf16: one k block up to 768"). Depends on k alone,
 * so the bits still do not depend on the thread count or rank layout. */
static int kc_for(const cz_bf16_kernel *kern, int k) {
    return kern->kc_max && k <= kern->kc_max ? (k + 1) / 2 * 2 : kern->kc;
}

/* ---- packing buffers ---- */

cz_gemm_bf16_work *cz_gemm_bf16_work_create(const cz_bf16_kernel *kern, int threads,
                                            cz_error *err) {
    cz_gemm_bf16_work *w = cz_alloc(sizeof *w, err);
    if (!w) return NULL;
    w->kern = kern;
    w->threads = threads > 0 ? threads : 1;
    int kp = packed_pairs(kern, kern->kc_max > kern->kc ? kern->kc_max : kern->kc);
    w->a_words = (size_t)kern->mc * kp;
    w->b_words = (size_t)kern->nc * kp;
    w->b_pack = cz_alloc((size_t)w->threads * w->b_words * sizeof(uint32_t), err);
    w->a_pack = cz_alloc((size_t)w->threads * w->a_words * sizeof(uint32_t), err);
    w->state_stride = (kern->state_bytes + 63) / 64 * 64;
    if (w->state_stride && !(w->state = cz_alloc((size_t)w->threads * w->state_stride, err))) {
        cz_gemm_bf16_work_free(w);
        return NULL;
    }
    if (!w->b_pack || !w->a_pack) {
        cz_gemm_bf16_work_free(w);
        return NULL;
    }
    return w;
}

void cz_gemm_bf16_work_free(cz_gemm_bf16_work *w) {
    if (!w) return;
    for (int i = 0; i < w->n_weights; i++) cz_free(w->weights[i].words);
    cz_free(w->weights);
    cz_free(w->b_pack);
    cz_free(w->a_pack);
    cz_free(w->state);
    cz_free(w);
}

/* C = beta C for k == 0 (no products; beta 0 writes zeros, C not read) */
static void scale_c(int m, int n, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = &c[(size_t)i * ldc + j];
            *cij = beta == 0.0f ? 0.0f : beta * *cij;
        }
}

/* op(B) already packed whole (a weight in its scope): its words, the
 * words of one full KC block, and the micro-panel of column 0 of the part */
typedef struct {
    const uint32_t *words;
    size_t block_words;
    int panel0;
} prepacked_b;

/* the element i places after p, of floats or of bf16 */
static const void *elt(const void *p, int is16, size_t i) {
    return (const char *)p + i * (is16 ? 2 : 4);
}

/* One thread's part: C[0:m, 0:n] of a sub-problem, the five loops with its
 * own packing buffers a_pack (MC x KP words) and b_pack (KP x NC), or B's
 * micro-panels read from pre (not NULL) instead of packed here. */
static void gemm_block(const cz_bf16_kernel *kern, void *state, uint32_t *a_pack, uint32_t *b_pack,
                       const prepacked_b *pre, int ta, int tb, int m, int n, int k, float alpha,
                       cz_mat a, cz_mat b, float beta, float *c, int ldc) {
    const int MR = kern->mr, NR = kern->nr, KC = kc_for(kern, k), MC = kern->mc, NC = kern->nc;
    const int lda = a.ld, ldb = b.ld;
    for (int jc = 0; jc < n; jc += NC) {
        int nc = n - jc < NC ? n - jc : NC;
        for (int pc = 0; pc < k; pc += KC) {
            int kc = k - pc < KC ? k - pc : KC, kp = packed_pairs(kern, kc);
            float beta_pc = pc == 0 ? beta : 1.0f; /* later k blocks add to C */
            if (pre)                               /* this block's first micro-panel of the part */
                b_pack = (uint32_t *)pre->words + (size_t)(pc / KC) * pre->block_words +
                         (size_t)(pre->panel0 + jc / NR) * kp * NR;
            for (int j = 0; j < nc && !pre; j += NR) {
                int cv = nc - j < NR ? nc - j : NR, j0 = jc + j;
                size_t at = tb ? (size_t)j0 * ldb + pc : (size_t)pc * ldb + j0;
                kern->pack_b(b_pack + (size_t)(j / NR) * kp * NR, tb, b.bf16, elt(b.p, b.bf16, at),
                             ldb, cv, kc, kp);
            }
            for (int ic = 0; ic < m; ic += MC) {
                int mc = m - ic < MC ? m - ic : MC;
                for (int i = 0; i < mc; i += MR) {
                    int rv = mc - i < MR ? mc - i : MR, i0 = ic + i;
                    size_t at = ta ? (size_t)pc * lda + i0 : (size_t)i0 * lda + pc;
                    kern->pack_a(a_pack + (size_t)(i / MR) * kp * MR, ta, a.bf16,
                                 elt(a.p, a.bf16, at), lda, rv, kc, kp);
                }
                for (int j = 0; j < nc; j += NR) {
                    int nr = nc - j < NR ? nc - j : NR;
                    const uint32_t *bp = b_pack + (size_t)(j / NR) * kp * NR;
                    for (int i = 0; i < mc; i += MR) {
                        int mr = mc - i < MR ? mc - i : MR;
                        kern->kernel(state, kp, a_pack + (size_t)(i / MR) * kp * MR, bp,
                                     c + (size_t)(ic + i) * ldc + jc + j, ldc, mr, nr, alpha,
                                     beta_pc);
                    }
                }
            }
        }
    }
}

/* Thread t of nt gets C[*m0 : *m0 + *mt, *n0 : *n0 + *nc]: the rows (in
 * whole MR micro-panels) or the columns (in whole NR micro-panels) are cut
 * into nt ranges, whichever leaves the largest part smaller by over 3 %.
 * E.g. 128 x 64 (attention) on the 8 x 48 kernel: 64 rows each, not 48
 * and 16 columns. Otherwise (the model's shapes mostly divide evenly, or
 * nearly: 30522 rows), the cut that packs less twice: cutting the columns
 * has every thread pack all of op(A) (a_words: m x k), cutting the rows
 * all of op(B) (b_words: n x k, or 0 when B is a weight packed once for
 * the scope). BERT-mini's FFN-down product (4096 x 256 x 1024) tied, and
 * cutting its columns had both threads pack all 4M elements of A (log,
 * "bf16: the cut that packs less"). Every element of C then sees the same
 * operations in the same order whatever nt or the cut: the bits do not
 * depend on them. */
static void thread_rect(int MR, int NR, int t, int nt, int m, int n, double a_words, double b_words,
                        int *m0, int *mt, int *n0, int *nc) {
    int per_m = ((m + MR - 1) / MR + nt - 1) / nt * MR; /* rows per part */
    int per_n = ((n + NR - 1) / NR + nt - 1) / nt * NR; /* columns per part */
    int big_m = per_m < m ? per_m : m, big_n = per_n < n ? per_n : n;
    /* largest part relative to the whole: big_n / n against big_m / m */
    double by_n = (double)big_n * m, by_m = (double)big_m * n;
    int split_n = 100 * by_n < 97 * by_m || (100 * by_m >= 97 * by_n && a_words <= b_words);
    *m0 = 0, *mt = m, *n0 = 0, *nc = n;
    if (split_n) {
        int lo = t * per_n, hi = lo + per_n;
        *n0 = lo < n ? lo : n;
        *nc = (hi < n ? hi : n) - *n0;
    } else {
        int lo = t * per_m, hi = lo + per_m;
        *m0 = lo < m ? lo : m;
        *mt = (hi < m ? hi : m) - *m0;
    }
}

/* The product on w's threads; B from pre when not NULL (then tb and b are
 * unused). */
static void run(cz_gemm_bf16_work *w, const cz_bf16_weight *pre, int ta, int tb, int m, int n,
                int k, float alpha, cz_mat a, cz_mat b, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    const cz_bf16_kernel *kern = tile_for(w->kern, n);
    size_t panels = (size_t)(n + kern->nr - 1) / kern->nr;
    size_t block_words = (size_t)packed_pairs(kern, kc_for(kern, k)) * kern->nr * panels;
    /* one parallel region per product and no barrier inside it: each thread
     * packs what its rectangle needs (B twice when the rows are split, A
     * twice when the columns are), which costs far less than the
     * synchronisation did under OMP_WAIT_POLICY=PASSIVE (measured,
     * docs/performance.md, "Design decisions") */
    /* Attention-sized products (<= 4M multiply-adds: one head's 128 x 128
     * x 64) run on one thread, as on cz_gemm's fp32 path: under
     * OMP_WAIT_POLICY=PASSIVE waking the second thread for each of the
     * ~7000 per-head products of a BERT-base step measured costly, and with
     * the default policy two threads per product measured no faster
     * (docs/performance.md, "Design decisions"). The model runs these products side
     * by side instead, one per thread (cz_gemm_single_thread). */
    int nt = (double)m * n * k <= SMALL_MACS ? 1 : w->threads;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num(), team = omp_get_num_threads();
        int m0, mt, n0, nc;
        thread_rect(kern->mr, kern->nr, t, team, m, n, (double)m * k, pre ? 0.0 : (double)n * k,
                    &m0, &mt, &n0, &nc);
        void *state = w->state ? w->state + (size_t)t * w->state_stride : NULL;
        /* n0 is a whole number of micro-panels (thread_rect) */
        prepacked_b part = {pre ? pre->words : NULL, block_words, n0 / kern->nr};
        if (mt > 0 && nc > 0) {
            if (kern->begin) kern->begin(state);
            cz_mat ap = a, bp = b;
            ap.p = elt(a.p, a.bf16, ta ? (size_t)m0 : (size_t)m0 * a.ld);
            bp.p = elt(b.p, b.bf16, tb ? (size_t)n0 * b.ld : (size_t)n0);
            gemm_block(kern, state, w->a_pack + (size_t)t * w->a_words,
                       w->b_pack + (size_t)t * w->b_words, pre ? &part : NULL, ta, tb, mt, nc, k,
                       alpha, ap, bp, beta, c + (size_t)m0 * ldc + n0, ldc);
            if (kern->end) kern->end(state);
        }
    }
}

/* ---- weights: packed once per scope ----
 * A weight is op(B) of several products while it stays the same: in a
 * training step its forward product (x W^T) on every micro-batch, again
 * under recompute, and its input-gradient product (dY W) in the other
 * orientation. Packing it whole once per scope and per orientation,
 * shared by the threads, replaces one packing per product and per thread.
 * The packed words are the ones gemm_block would pack: same bits. */

void cz_gemm_bf16_weights_scope(cz_gemm_bf16_work *w, int open) {
    if (open) w->epoch++; /* what was packed before may have changed since */
    w->scope_open = open;
}

/* The entry of op(B), packed in this scope; NULL when it cannot be made. */
static const cz_bf16_weight *packed_weight(cz_gemm_bf16_work *w, int tb, int n, int k, cz_mat bm) {
    const void *b = bm.p;
    int ldb = bm.ld, b16 = bm.bf16;
    const cz_bf16_kernel *kern = tile_for(w->kern, n); /* as run() will */
    cz_bf16_weight *e = NULL;
    for (int i = 0; i < w->n_weights && !e; i++) {
        cz_bf16_weight *x = &w->weights[i];
        if (x->b == b && x->tb == tb && x->b16 == b16 && x->k == k && x->n == n && x->ldb == ldb)
            e = x;
    }
    if (e && e->epoch == w->epoch) return e;
    const int KC = kc_for(kern, k); /* as gemm_block will */
    int panels = (n + kern->nr - 1) / kern->nr, blocks = (k + KC - 1) / KC;
    size_t block_words = (size_t)packed_pairs(kern, KC) * kern->nr * panels;
    size_t need = block_words * (size_t)blocks;
    cz_error err;
    if (!e) {
        if (w->n_weights == w->cap_weights) {
            int cap = w->cap_weights ? 2 * w->cap_weights : 64;
            cz_bf16_weight *grown = cz_alloc((size_t)cap * sizeof *grown, &err);
            if (!grown) return NULL;
            if (w->n_weights) memcpy(grown, w->weights, (size_t)w->n_weights * sizeof *grown);
            cz_free(w->weights);
            w->weights = grown;
            w->cap_weights = cap;
        }
        e = &w->weights[w->n_weights++];
        *e = (cz_bf16_weight){b, tb, b16, k, n, ldb, 0, NULL, 0};
    }
    if (e->cap_words < need) {
        uint32_t *words = cz_alloc(need * sizeof *words, &err);
        if (!words) return NULL;
        cz_free(e->words);
        e->words = words;
        e->cap_words = need;
    }
    int jobs = blocks * panels;
#pragma omp parallel for schedule(static) num_threads(w->threads) if (w->threads > 1)
    for (int job = 0; job < jobs; job++) {
        int pc = job / panels * KC, j0 = job % panels * kern->nr;
        int kc = k - pc < KC ? k - pc : KC, kp = packed_pairs(kern, kc);
        int cv = n - j0 < kern->nr ? n - j0 : kern->nr;
        size_t at = tb ? (size_t)j0 * ldb + pc : (size_t)pc * ldb + j0;
        kern->pack_b(e->words + (size_t)(pc / KC) * block_words +
                         (size_t)(j0 / kern->nr) * kp * kern->nr,
                     tb, b16, elt(b, b16, at), ldb, cv, kc, kp);
    }
    e->epoch = w->epoch;
    return e;
}

void cz_gemm_bf16_run(cz_gemm_bf16_work *w, int ta, int tb, int m, int n, int k, float alpha,
                      cz_mat a, cz_mat b, int b_weight, float beta, float *c, int ldc) {
    const cz_bf16_weight *pre = NULL;
    if (b_weight && w->scope_open && m > 0 && n > 0 && k > 0) pre = packed_weight(w, tb, n, k, b);
    run(w, pre, ta, tb, m, n, k, alpha, a, b, beta, c, ldc);
}

/* ---- the check a kernel passes before it is chosen ----
 * Two products of small integers (|a|, |b| <= 4, k = 67: every partial sum
 * is an integer below 2^24, so exact in fp32 whatever the order of the
 * additions): any right kernel gives cz_gemm_bf16_ref's bits. The shapes
 * cross both kernels' micro-tiles (8 x 48 and 8 x 32, 32 x 32), an odd k
 * (a half pair) and more than one 16-pair tile step; one product
 * transposed with alpha 0.5 and beta 1 (the epilogue). It runs on this
 * thread through gemm_block, outside any OpenMP region, inside core's
 * fault guard (cz_cpu_guard): a tile instruction the CPU or OS refuses is a
 * failed check. Its buffers are static (it runs once, under core's lock),
 * so a fault leaks nothing. */
#define CHECK_M 37
#define CHECK_N 50
#define CHECK_K 67
#define CHECK_WORDS 16384 /* packed words of one operand; checked below */
static uint32_t check_a_pack[CHECK_WORDS] __attribute__((aligned(64)));
static uint32_t check_b_pack[CHECK_WORDS] __attribute__((aligned(64)));
static unsigned char check_state[16384] __attribute__((aligned(64)));
static float check_a[CHECK_M * CHECK_K], check_b[CHECK_K * CHECK_N];
static float check_c[CHECK_M * CHECK_N], check_ref[CHECK_M * CHECK_N];

static int self_check(int index, char *why, int len) {
    const cz_bf16_kernel *kern = table[index];
    uint32_t x = 12345;
    for (int i = 0; i < CHECK_M * CHECK_K; i++) /* LCG (Numerical Recipes), values -4..4 */
        check_a[i] = (float)((int)((x = x * 1664525u + 1013904223u) >> 28) % 9 - 4);
    for (int i = 0; i < CHECK_K * CHECK_N; i++)
        check_b[i] = (float)((int)((x = x * 1664525u + 1013904223u) >> 28) % 9 - 4);
    for (int t = 0; t < 2; t++) {
        /* t = 1: op(A) = A^T with A stored k x m, op(B) = B^T with B n x k */
        int ta = t, tb = t, lda = ta ? CHECK_M : CHECK_K, ldb = tb ? CHECK_K : CHECK_N;
        float alpha = t ? 0.5f : 1.0f, beta = t ? 1.0f : 0.0f;
        const cz_bf16_kernel *k = tile_for(kern, CHECK_N);
        int kp = packed_pairs(k, kc_for(k, CHECK_K) < CHECK_K ? kc_for(k, CHECK_K) : CHECK_K);
        size_t a_words = (size_t)(CHECK_M + k->mr - 1) / k->mr * k->mr * kp;
        size_t b_words = (size_t)(CHECK_N + k->nr - 1) / k->nr * k->nr * kp;
        if (a_words > CHECK_WORDS || b_words > CHECK_WORDS || k->state_bytes > sizeof check_state) {
            snprintf(why, (size_t)len, "its blocking is too large for the check's buffers");
            return -1;
        }
        for (int i = 0; i < CHECK_M * CHECK_N; i++) check_c[i] = check_ref[i] = (float)(i % 7);
        if (k->begin) k->begin(check_state);
        gemm_block(k, check_state, check_a_pack, check_b_pack, NULL, ta, tb, CHECK_M, CHECK_N,
                   CHECK_K, alpha, cz_mat_f32(check_a, lda), cz_mat_f32(check_b, ldb), beta,
                   check_c, CHECK_N);
        if (k->end) k->end(check_state);
        cz_gemm_bf16_ref(ta, tb, CHECK_M, CHECK_N, CHECK_K, alpha, check_a, lda, check_b, ldb, beta,
                         check_ref, CHECK_N);
        for (int i = 0; i < CHECK_M * CHECK_N; i++)
            if (memcmp(&check_c[i], &check_ref[i], 4) != 0) {
                snprintf(why, (size_t)len,
                         "its check product (%dx%dx%d, ta=tb=%d) gives C[%d,%d] = %.9g, the "
                         "reference %.9g",
                         CHECK_M, CHECK_N, CHECK_K, t, i / CHECK_N, i % CHECK_N, check_c[i],
                         check_ref[i]);
                return -1;
            }
    }
    return 0;
}

/* ---- the one choice per process ---- */

static struct {
    pthread_once_t once;
    cz_cpu_chosen chosen;
} choice = {PTHREAD_ONCE_INIT, {-1, 0, 0, ""}};

static void decide(void) {
    cz_cpu cpu;
    cz_cpu_detect(&cpu);
    const cz_cpu_choice *choices[N_KERNELS];
    choices_of(choices);
    cz_cpu_choose(&cpu, choices, N_KERNELS, "CLOZE_BF16_KERNEL", self_check, &choice.chosen);
}

int cz_bf16_kernel_chosen(void) {
    pthread_once(&choice.once, decide);
    return choice.chosen.index;
}

const char *cz_bf16_kernel_note(void) {
    pthread_once(&choice.once, decide);
    return choice.chosen.note;
}

int cz_bf16_kernel_refused(void) {
    pthread_once(&choice.once, decide);
    return choice.chosen.refused;
}

int cz_bf16_kernel_failed(void) {
    pthread_once(&choice.once, decide);
    return choice.chosen.failed;
}
