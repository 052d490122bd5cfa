/* bf16 matrix products with fp32 accumulation (the bf16 mode of cz_gemm).
 *
 * What is computed: cz_gemm's C = alpha op(A) op(B) + beta C, except that
 * every element of op(A) and op(B) is first rounded to bfloat16 (fp32's
 * exponent, 8-bit significand; round to nearest even, vcvtneps2bf16).
 * A product of two bf16 values is exact in fp32 (8 x 8 significand bits), and
 * vdpbf16ps adds two such products per lane into an fp32 accumulator (Intel
 * SDM vol. 2, VDPBF16PS). So the only roundings are the input roundings
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
 *     pc over k in steps of KC      pack op(B) block, KC x NC (shared, L3)
 *       ic over m in steps of MC    pack op(A) block, MC x KC (per thread, L2)
 *         jr in steps of NR         B micro-panel KC x NR stays in L1
 *           ir in steps of MR       micro-kernel: MR x NR fp32 accumulators
 * Packed format (what vdpbf16ps wants): a 32-bit word holds a k-pair of bf16,
 * element 2p in the low half and 2p+1 in the high half. A B micro-panel is,
 * for each pair p, NR words (B[2p][j], B[2p+1][j]) for its NR columns; an A
 * micro-panel is, for each pair p, MR words (A[i][2p], A[i][2p+1]) that the
 * kernel broadcasts. An odd k is padded with a zero; rows and columns past
 * the edge of m and n are packed as zeros and never stored.
 *
 * The micro-kernel is 8 x 48 (24 zmm accumulators, 3 zmm of B, one
 * broadcast of A): 24 independent vdpbf16ps chains cover its latency (6
 * cycles on Zen 4) at one zmm instruction per cycle. 8 x 48 measured faster
 * than 12 x 32 on Zen 4; 14 x 32 (28 accumulators) spills registers; KC 384
 * was no faster than 256, and 256 keeps the B micro-panel (256 x 48 bf16 =
 * 24 KiB) inside the 32 KiB L1 (docs/performance.md, "Design decisions").
 *
 * Threads: OpenMP, each thread one rectangle of C (the rows or the columns
 * cut into equal ranges) computed by the loops above with its own packing
 * buffers; k is never split and KC blocks always start at k = 0, so every
 * element of C sees the same operations in the same order whatever the
 * thread count: results are bitwise independent of it. */
#include "gemm_bf16.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "cloze/kernels.h"

/* Cache blocking (k must block at an even KC so pairs never straddle) */
#define MR 8
#define NV 3 /* zmm vectors of 16 columns per micro-tile row */
#define NR (16 * NV)
#define KC 256
#define MC 192  /* multiple of MR */
#define NC 3072 /* multiple of NR */
#define KP (KC / 2)
#define SMALL_MACS (4.0 * 1024 * 1024)

_Static_assert(KC % 2 == 0 && MC % MR == 0 && NC % NR == 0, "blocking constants");

/* ---- the definition ---- */

float cz_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0) /* zero or subnormal: signed zero, as the instruction (DAZ) */
        u &= 0x80000000u;
    else if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: stays a (quiet) NaN */
        u = (u | 0x00400000u) & 0xffff0000u;
    else /* round to nearest, ties to even; overflow carries into infinity */
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
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

/* ---- packing buffers ---- */

cz_gemm_bf16_work *cz_gemm_bf16_work_create(int threads, cz_error *err) {
    cz_gemm_bf16_work *w = cz_alloc(sizeof *w, err);
    if (!w) return NULL;
    w->threads = threads > 0 ? threads : 1;
    w->b_pack = cz_alloc((size_t)w->threads * KP * NC * sizeof(uint32_t), err);
    w->a_pack = cz_alloc((size_t)w->threads * MC * KP * sizeof(uint32_t), err);
    if (!w->b_pack || !w->a_pack) {
        cz_gemm_bf16_work_free(w);
        return NULL;
    }
    return w;
}

void cz_gemm_bf16_work_free(cz_gemm_bf16_work *w) {
    if (!w) return;
    cz_free(w->b_pack);
    cz_free(w->a_pack);
    cz_free(w);
}

const char *cz_gemm_bf16_kernel_name(void) {
    return "vdpbf16ps micro-kernel 8x48, KC 256 MC 192 NC 3072";
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

int cz_gemm_bf16_compiled(void) {
    return 1;
}

/* the first `count` lanes (count clipped to [0, 16]) */
static inline __mmask16 lanes(int count) {
    return count >= 16 ? (__mmask16)0xffff : count <= 0 ? 0 : (__mmask16)((1u << count) - 1);
}

/* 16 words (lo[t], hi[t]) rounded to bf16, lo in the low half */
BF16 static inline __m512i pair_rows(__m512 lo, __m512 hi) {
    __m512i l = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(lo));
    __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(hi));
    return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}

/* A panel of R words per pair from op(X)[p][r] = x[p * ld + r] (r runs along
 * memory: B not transposed, A transposed): rows 2p and 2p+1 interleaved. */
BF16 static void pack_r_contiguous(uint32_t *dst, int R, const float *x, int ld, int rv, int kc) {
    for (int p = 0; p < (kc + 1) / 2; p++) {
        const float *r0 = x + (size_t)(2 * p) * ld;
        int has_r1 = 2 * p + 1 < kc;
        for (int r = 0; r < R; r += 16) {
            __mmask16 in = lanes(rv - r);
            __m512 lo = _mm512_maskz_loadu_ps(in, r0 + r);
            __m512 hi = has_r1 ? _mm512_maskz_loadu_ps(in, r0 + ld + r) : _mm512_setzero_ps();
            _mm512_mask_storeu_epi32(dst + (size_t)p * R + r, lanes(R - r), pair_rows(lo, hi));
        }
    }
}

/* A panel of R words per pair from op(X)[r][p] = x[r * ld + p] (p runs along
 * memory: A not transposed, B transposed): 32 floats of a row convert to 16
 * pairs at once, which are then spread to their places in the panel. */
BF16 static void pack_k_contiguous(uint32_t *dst, int R, const float *x, int ld, int rv, int kc) {
    int kp = (kc + 1) / 2;
    uint32_t pairs[16] __attribute__((aligned(64)));
    for (int r = 0; r < R; r++) {
        if (r >= rv) {
            for (int p = 0; p < kp; p++) dst[(size_t)p * R + r] = 0;
            continue;
        }
        const float *row = x + (size_t)r * ld;
        for (int q = 0; q < kc; q += 32) {
            __m512 lo = _mm512_maskz_loadu_ps(lanes(kc - q), row + q);
            __m512 hi = _mm512_maskz_loadu_ps(lanes(kc - q - 16), row + q + 16);
            _mm512_store_si512(pairs, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
            int np = kp - q / 2 < 16 ? kp - q / 2 : 16;
            for (int t = 0; t < np; t++) dst[(size_t)(q / 2 + t) * R + r] = pairs[t];
        }
    }
}

/* C[0:mr, 0:nr] = alpha * acc + beta * C (beta 0: C not read), acc = the
 * kp pairs of the A and B micro-panels. Accumulators stay in registers: every
 * loop over MR and NV has a constant trip count and is unrolled. */
BF16 static void micro_kernel(int kp, const uint32_t *ap, const uint32_t *bp, float *c, int ldc,
                              int mr, int nr, float alpha, float beta) {
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++) {
        __m512bh bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            bv[v] = (__m512bh)_mm512_load_si512(bp + (size_t)p * NR + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[(size_t)p * MR + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
        }
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 cols[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) cols[v] = lanes(nr - 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            float *ci = c + (size_t)i * ldc + 16 * v;
            __m512 r;
            if (beta == 0.0f) {
                r = _mm512_mul_ps(va, acc[i][v]);
            } else {
                __m512 old = _mm512_maskz_loadu_ps(cols[v], ci);
                if (beta != 1.0f) old = _mm512_mul_ps(vb, old);
                r = _mm512_fmadd_ps(va, acc[i][v], old);
            }
            _mm512_mask_storeu_ps(ci, cols[v], r);
        }
    }
}

/* op(A)[ic:ic+mc, pc:pc+kc] into MR-row micro-panels */
BF16 static void pack_a(uint32_t *dst, int ta, const float *a, int lda, int ic, int pc, int mc,
                        int kc) {
    int kp = (kc + 1) / 2;
    for (int i = 0; i < mc; i += MR) {
        int rv = mc - i < MR ? mc - i : MR;
        uint32_t *panel = dst + (size_t)(i / MR) * kp * MR;
        if (ta)
            pack_r_contiguous(panel, MR, a + (size_t)pc * lda + ic + i, lda, rv, kc);
        else
            pack_k_contiguous(panel, MR, a + (size_t)(ic + i) * lda + pc, lda, rv, kc);
    }
}

/* op(B)[pc:pc+kc, jc + jp*NR : +NR] into one NR-column micro-panel */
BF16 static void pack_b_panel(uint32_t *dst, int tb, const float *b, int ldb, int pc, int j0,
                              int nv, int kc) {
    if (tb)
        pack_k_contiguous(dst, NR, b + (size_t)j0 * ldb + pc, ldb, nv, kc);
    else
        pack_r_contiguous(dst, NR, b + (size_t)pc * ldb + j0, ldb, nv, kc);
}

/* C = beta C for k == 0 (no products; beta 0 writes zeros, C not read) */
static void scale_c(int m, int n, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float *cij = &c[(size_t)i * ldc + j];
            *cij = beta == 0.0f ? 0.0f : beta * *cij;
        }
}

/* One thread's part: C[0:m, 0:n] of a sub-problem, the five loops with its
 * own packing buffers a_pack (MC x KC/2 pairs) and b_pack (KC/2 x NC). */
BF16 static void gemm_block(uint32_t *a_pack, uint32_t *b_pack, int ta, int tb, int m, int n, int k,
                            float alpha, const float *a, int lda, const float *b, int ldb,
                            float beta, float *c, int ldc) {
    for (int jc = 0; jc < n; jc += NC) {
        int nc = n - jc < NC ? n - jc : NC;
        for (int pc = 0; pc < k; pc += KC) {
            int kc = k - pc < KC ? k - pc : KC, kp = (kc + 1) / 2;
            float beta_pc = pc == 0 ? beta : 1.0f; /* later k blocks add to C */
            for (int j = 0; j < nc; j += NR) {
                int nv = nc - j < NR ? nc - j : NR;
                pack_b_panel(b_pack + (size_t)(j / NR) * kp * NR, tb, b, ldb, pc, jc + j, nv, kc);
            }
            for (int ic = 0; ic < m; ic += MC) {
                int mc = m - ic < MC ? m - ic : MC;
                pack_a(a_pack, ta, a, lda, ic, pc, mc, kc);
                for (int j = 0; j < nc; j += NR) {
                    int nr = nc - j < NR ? nc - j : NR;
                    const uint32_t *bp = b_pack + (size_t)(j / NR) * kp * NR;
                    for (int i = 0; i < mc; i += MR) {
                        int mr = mc - i < MR ? mc - i : MR;
                        micro_kernel(kp, a_pack + (size_t)(i / MR) * kp * MR, bp,
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
 * into nt ranges, whichever leaves the largest part smaller (columns on a
 * tie). E.g. 128 x 64 (attention): 64 rows each, not 48 and 16 columns. */
static void thread_rect(int t, int nt, int m, int n, int *m0, int *mt, int *n0, int *nc) {
    int per_m = ((m + MR - 1) / MR + nt - 1) / nt * MR; /* rows per part */
    int per_n = ((n + NR - 1) / NR + nt - 1) / nt * NR; /* columns per part */
    int big_m = per_m < m ? per_m : m, big_n = per_n < n ? per_n : n;
    /* largest part relative to the whole: big_n / n against big_m / m */
    int split_n = (long)big_n * m <= (long)big_m * n;
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

BF16 void cz_gemm_bf16_run(cz_gemm_bf16_work *w, int ta, int tb, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
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
        thread_rect(t, team, m, n, &m0, &mt, &n0, &nc);
        if (mt > 0 && nc > 0)
            gemm_block(w->a_pack + (size_t)t * MC * KP, w->b_pack + (size_t)t * KP * NC, ta, tb, mt,
                       nc, k, alpha, ta ? a + m0 : a + (size_t)m0 * lda, lda,
                       tb ? b + (size_t)n0 * ldb : b + n0, ldb, beta, c + (size_t)m0 * ldc + n0,
                       ldc);
    }
}

#else /* no AVX512_BF16 code in this build */

int cz_gemm_bf16_compiled(void) {
    return 0;
}

void cz_gemm_bf16_run(cz_gemm_bf16_work *w, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc) {
    (void)w;
    cz_gemm_bf16_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#endif
