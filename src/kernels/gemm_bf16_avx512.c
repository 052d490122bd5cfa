/* The vdpbf16ps kernel of the bf16 GEMM (AVX512_BF16; the contract:
 * gemm_bf16.h).
 *
 * Packed format (what vdpbf16ps wants): a 32-bit word holds a k-pair of
 * bf16, element 2p in the low half and 2p+1 in the high half. A B
 * micro-panel is, for each pair p, NR words (B[2p][j], B[2p+1][j]) for its
 * NR columns; an A micro-panel is, for each pair p, MR words (A[i][2p],
 * A[i][2p+1]) that the kernel broadcasts. vdpbf16ps adds the two products
 * of a word pair to an fp32 lane (Intel SDM vol. 2, VDPBF16PS).
 *
 * The micro-kernel is 8 x 48 (24 zmm accumulators, 3 zmm of B, one
 * broadcast of A): 24 independent vdpbf16ps chains cover its latency (6
 * cycles on Zen 4) at one zmm instruction per cycle. 8 x 48 measured faster
 * than 12 x 32 on Zen 4; 14 x 32 (28 accumulators) spills registers; KC 384
 * was no faster than 256, and 256 keeps the B micro-panel (256 x 48 bf16 =
 * 24 KiB) inside the 32 KiB L1 (docs/performance.md, "Design decisions").
 *
 * Only these functions carry the AVX-512 target (attributes, not file
 * flags): the library still runs on any x86-64, and core decides whether
 * this kernel is taken (cz_cpu_bf16_kernel). */
#include "gemm_bf16.h"

#if CZ_HAVE_X86_ISAS
#include <immintrin.h>

#define MR 8
#define NV 3 /* zmm vectors of 16 columns per micro-tile row */
#define NR (16 * NV)

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

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

/* (kp_align is 1: kp = (kc + 1) / 2, no padding pairs to write) */
BF16 static void pack_a(uint32_t *dst, int ta, const float *a, int lda, int rv, int kc, int kp) {
    (void)kp;
    if (ta)
        pack_r_contiguous(dst, MR, a, lda, rv, kc);
    else
        pack_k_contiguous(dst, MR, a, lda, rv, kc);
}

BF16 static void pack_b(uint32_t *dst, int tb, const float *b, int ldb, int cv, int kc, int kp) {
    (void)kp;
    if (tb)
        pack_k_contiguous(dst, NR, b, ldb, cv, kc);
    else
        pack_r_contiguous(dst, NR, b, ldb, cv, kc);
}

/* Accumulators stay in registers: every loop over MR and NV has a constant
 * trip count and is unrolled. */
BF16 static void micro_kernel(void *state, int kp, const uint32_t *ap, const uint32_t *bp, float *c,
                              int ldc, int mr, int nr, float alpha, float beta) {
    (void)state;
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

/* B micro-panels of 48 columns x KC pairs are loaded with aligned loads:
 * cz_alloc's 64-byte alignment and NR * 4 bytes = 192 per pair keep them
 * aligned. */
const cz_bf16_kernel cz_bf16_kernel_vdpbf16ps = {
    .id = CZ_BF16_VDPBF16PS,
    .name = "vdpbf16ps",
    .detail = "8x48 micro-tile, KC 256 MC 192 NC 3072",
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = 192,
    .nc = 3072,
    .kp_align = 1,
    .state_bytes = 0,
    .pack_a = pack_a,
    .pack_b = pack_b,
    .begin = NULL,
    .end = NULL,
    .kernel = micro_kernel,
};

#else
typedef int cz_gemm_bf16_avx512_unused; /* (ISO C: no empty translation unit) */
#endif
