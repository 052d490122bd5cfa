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
 * This file alone is compiled for AVX512_BF16 (CMakeLists.txt,
 * cloze_compile_for): the library still runs on any x86-64, and nothing
 * here runs unless core's rule chose this kernel (cz_cpu_choose). */
#include "gemm_bf16.h"

#if CZ_HAVE_X86_ISAS && defined(__AVX512BF16__)
#include <immintrin.h>

#define MR 8
#define NV 3 /* zmm vectors of 16 columns per micro-tile row (8 x 48) */
#define NR (16 * NV)
#define NV_NARROW 2 /* the 8 x 32 variant */
#define NR_NARROW (16 * NV_NARROW)

/* the first `count` lanes (count clipped to [0, 16]) */
static inline __mmask16 lanes(int count) {
    return count >= 16 ? (__mmask16)0xffff : count <= 0 ? 0 : (__mmask16)((1u << count) - 1);
}

/* 16 bf16 of row 2p then 16 of row 2p+1 (x16: already bf16, else floats
 * rounded by one vcvtne2ps2bf16), lanes past count zero */
static inline __m512i two_rows16(int x16, const void *r0, const void *r1, int count) {
    if (x16) {
        __mmask16 in = lanes(count);
        __m256i lo = _mm256_maskz_loadu_epi16(in, r0);
        __m256i hi = r1 ? _mm256_maskz_loadu_epi16(in, r1) : _mm256_setzero_si256();
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    __mmask16 in = lanes(count);
    __m512 lo = _mm512_maskz_loadu_ps(in, r0);
    __m512 hi = r1 ? _mm512_maskz_loadu_ps(in, r1) : _mm512_setzero_ps();
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* The same for 8 values of each row */
static inline __m256i two_rows8(int x16, const void *r0, const void *r1, int count) {
    __mmask8 in = (__mmask8)lanes(count);
    if (x16) {
        __m128i lo = _mm_maskz_loadu_epi16(in, r0);
        __m128i hi = r1 ? _mm_maskz_loadu_epi16(in, r1) : _mm_setzero_si128();
        return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    }
    __m256 lo = _mm256_maskz_loadu_ps(in, r0);
    __m256 hi = r1 ? _mm256_maskz_loadu_ps(in, r1) : _mm256_setzero_ps();
    return (__m256i)_mm256_cvtne2ps_pbh(hi, lo);
}

/* A panel of R words per pair from op(X)[p][r] = x[p * ld + r] (r runs along
 * memory: B not transposed, A transposed): rows 2p and 2p+1 interleaved.
 * Per 16 values of r (8 for an A panel, R = 8) both rows become 32 bf16,
 * row 2p's low (one vcvtne2ps2bf16 from floats, or loaded as they are from
 * bf16, x16), and one vpermw interleaves them into pairs. That replaced two
 * conversions, two widenings, a shift and an or per 16 words, on zmm even
 * for 8 (log, "bf16: the cut that packs less"). */
static inline __attribute__((always_inline)) void
pack_r_contiguous(uint32_t *dst, int R, int x16, const void *x, int ld, int rv, int kc) {
    const __m512i inter =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m256i inter8 = _mm256_set_epi16(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    const size_t es = x16 ? 2 : 4;
    for (int p = 0; p < (kc + 1) / 2; p++) {
        const char *r0 = (const char *)x + (size_t)(2 * p) * ld * es;
        const char *r1 = 2 * p + 1 < kc ? r0 + (size_t)ld * es : NULL;
        if (R == 8) {
            __m256i w = two_rows8(x16, r0, r1, rv);
            _mm256_storeu_si256((__m256i *)(dst + (size_t)p * 8),
                                _mm256_permutexvar_epi16(inter8, w));
            continue;
        }
        for (int r = 0; r < R; r += 16) {
            __m512i w = two_rows16(x16, r0 + r * es, r1 ? r1 + r * es : NULL, rv - r);
            _mm512_mask_storeu_epi32(dst + (size_t)p * R + r, lanes(R - r),
                                     _mm512_permutexvar_epi16(inter, w));
        }
    }
}

/* A panel of R words per pair from op(X)[r][p] = x[r * ld + p] (p runs along
 * memory: A not transposed, B transposed). R is a multiple of 8. For each
 * 8 rows and 32 values of k: every row's 32 floats convert to 16 pairs in
 * one zmm (vcvtne2ps2bf16), and the 8 x 16 words are transposed in
 * registers to the panel's order (pair-major, 8 rows a pair): two rounds of
 * unpacks and two of 128-bit lane shuffles, instead of a scalar store per
 * word. Rows past rv are zeros; pairs past kp are not written (the caller's
 * kp covers exactly the pairs of kc). */
static inline __attribute__((always_inline)) void
pack_k_contiguous(uint32_t *dst, int R, int x16, const void *x, int ld, int rv, int kc) {
    int kp = (kc + 1) / 2;
    for (int r0 = 0; r0 < R; r0 += 8) {
        for (int q = 0; q < kc; q += 32) {
            __m512i v[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                if (r0 + r >= rv) {
                    v[r] = _mm512_setzero_si512();
                    continue;
                }
                if (x16) { /* 32 bf16 as they are: already the 16 pairs */
                    const uint16_t *row = (const uint16_t *)x + (size_t)(r0 + r) * ld + q;
                    int n = kc - q;
                    __mmask32 in = n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << n) - 1);
                    v[r] = _mm512_maskz_loadu_epi16(in, row);
                    continue;
                }
                const float *row = (const float *)x + (size_t)(r0 + r) * ld + q;
                __m512 lo = _mm512_maskz_loadu_ps(lanes(kc - q), row);
                __m512 hi = _mm512_maskz_loadu_ps(lanes(kc - q - 16), row + 16);
                v[r] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* word t: pair q/2 + t */
            }
            /* per 128-bit lane l (pairs 4l..4l+3): u[s] holds rows 0-3 of pair
             * 4l+s in lane l, w[s] rows 4-7 */
            __m512i u[4], w[4];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i *o = h ? w : u;
                const __m512i *r4 = v + 4 * h;
                __m512i a0 = _mm512_unpacklo_epi32(r4[0], r4[1]);
                __m512i a1 = _mm512_unpackhi_epi32(r4[0], r4[1]);
                __m512i b0 = _mm512_unpacklo_epi32(r4[2], r4[3]);
                __m512i b1 = _mm512_unpackhi_epi32(r4[2], r4[3]);
                o[0] = _mm512_unpacklo_epi64(a0, b0);
                o[1] = _mm512_unpackhi_epi64(a0, b0);
                o[2] = _mm512_unpacklo_epi64(a1, b1);
                o[3] = _mm512_unpackhi_epi64(a1, b1);
            }
            /* lo[s] = (u[s] lanes 0, 1; w[s] lanes 0, 1), hi[s] lanes 2, 3 */
            __m512i lo[4], hi[4];
#pragma GCC unroll 4
            for (int s2 = 0; s2 < 4; s2++) {
                lo[s2] = _mm512_shuffle_i32x4(u[s2], w[s2], 0x44);
                hi[s2] = _mm512_shuffle_i32x4(u[s2], w[s2], 0xEE);
            }
            /* out j = 2l + h: pairs 2j and 2j+1, 8 rows each */
            __m512i out[8];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                out[0 + h] = _mm512_shuffle_i32x4(lo[2 * h], lo[2 * h + 1], 0x88);
                out[2 + h] = _mm512_shuffle_i32x4(lo[2 * h], lo[2 * h + 1], 0xDD);
                out[4 + h] = _mm512_shuffle_i32x4(hi[2 * h], hi[2 * h + 1], 0x88);
                out[6 + h] = _mm512_shuffle_i32x4(hi[2 * h], hi[2 * h + 1], 0xDD);
            }
            int p0 = q / 2, np = kp - p0 < 16 ? kp - p0 : 16;
#pragma GCC unroll 8
            for (int jo = 0; jo < 8; jo++) {
                int t = 2 * jo;
                if (t >= np) break;
                uint32_t *d = dst + (size_t)(p0 + t) * R + r0;
                if (R == 8) { /* the two pairs are adjacent in the panel */
                    _mm512_mask_storeu_epi32(d, lanes(8 * (np - t)), out[jo]);
                } else {
                    _mm256_storeu_si256((__m256i *)d, _mm512_castsi512_si256(out[jo]));
                    if (t + 1 < np)
                        _mm256_storeu_si256((__m256i *)(d + R),
                                            _mm512_extracti64x4_epi64(out[jo], 1));
                }
            }
        }
    }
}

/* One panel by the routine its layout needs (r_contig: the panel's rows or
 * columns run along memory), compiled for float and for bf16 input (the
 * inlined bodies with a constant x16). kp_align is 1: kp = (kc + 1) / 2,
 * no padding pairs to write. */
static inline __attribute__((always_inline)) void
pack_panel(uint32_t *dst, int R, int r_contig, int x16, const void *x, int ld, int v, int kc) {
    if (x16) {
        if (r_contig)
            pack_r_contiguous(dst, R, 1, x, ld, v, kc);
        else
            pack_k_contiguous(dst, R, 1, x, ld, v, kc);
    } else if (r_contig) {
        pack_r_contiguous(dst, R, 0, x, ld, v, kc);
    } else {
        pack_k_contiguous(dst, R, 0, x, ld, v, kc);
    }
}

static void pack_a(uint32_t *dst, int ta, int a16, const void *a, int lda, int rv, int kc, int kp) {
    (void)kp;
    pack_panel(dst, MR, ta, a16, a, lda, rv, kc);
}

/* A B micro-panel of R columns (48 or 32) */
static inline __attribute__((always_inline)) void
pack_b_cols(uint32_t *dst, int R, int tb, int b16, const void *b, int ldb, int cv, int kc) {
    pack_panel(dst, R, !tb, b16, b, ldb, cv, kc);
}

static void pack_b(uint32_t *dst, int tb, int b16, const void *b, int ldb, int cv, int kc, int kp) {
    (void)kp;
    pack_b_cols(dst, NR, tb, b16, b, ldb, cv, kc);
}

static void pack_b_narrow(uint32_t *dst, int tb, int b16, const void *b, int ldb, int cv, int kc,
                          int kp) {
    (void)kp;
    pack_b_cols(dst, NR_NARROW, tb, b16, b, ldb, cv, kc);
}

/* Accumulators stay in registers: every loop over MR and nv has a constant
 * trip count in each of the two instances below (always inlined) and is
 * unrolled. Each element of C is one fp32 lane that adds its k pairs in
 * order, whatever nv: the 8 x 48 and 8 x 32 tiles give the same bits. */
static inline __attribute__((always_inline)) void
micro_kernel_nv(const int nv, int kp, const uint32_t *ap, const uint32_t *bp, float *c, int ldc,
                int mr, int nr, float alpha, float beta) {
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[i][v] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++) {
        __m512bh bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            bv[v] = (__m512bh)_mm512_load_si512(bp + (size_t)p * 16 * nv + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[(size_t)p * MR + i]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
        }
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __mmask16 cols[NV];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) cols[v] = lanes(nr - 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
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

static void micro_kernel(void *state, int kp, const uint32_t *ap, const uint32_t *bp, float *c,
                         int ldc, int mr, int nr, float alpha, float beta) {
    (void)state;
    micro_kernel_nv(NV, kp, ap, bp, c, ldc, mr, nr, alpha, beta);
}

static void micro_kernel_narrow(void *state, int kp, const uint32_t *ap, const uint32_t *bp,
                                float *c, int ldc, int mr, int nr, float alpha, float beta) {
    (void)state;
    micro_kernel_nv(NV_NARROW, kp, ap, bp, c, ldc, mr, nr, alpha, beta);
}

/* What the two tiles share: the A panels (MR rows), the cache blocks and
 * one k block up to 768 (gemm_bf16.c, kc_for). */
#define VDPBF16PS_COMMON                                                                           \
    .choice = {"vdpbf16ps", CZ_NEEDS_X86 | CZ_NEEDS_AVX512_BF16, 1}, .mr = MR, .kc = 256,          \
    .kc_max = 768, .mc = 192, .nc = 3072, .kp_align = 1, .state_bytes = 0, .pack_a = pack_a,       \
    .begin = NULL, .end = NULL

/* The 8 x 32 tile, for products whose n the 48-column tile pads by over
 * 5 % more (BERT-mini's 256: 288; a head's 64 and 128); same bits
 * (micro_kernel_nv). The loops choose it per product (gemm_bf16.c,
 * tile_for). */
static const cz_bf16_kernel vdpbf16ps_narrow = {
    VDPBF16PS_COMMON,
    .detail = "8x32 micro-tile, KC 256 (k <= 768: one block) MC 192 NC 3072",
    .nr = NR_NARROW,
    .pack_b = pack_b_narrow,
    .kernel = micro_kernel_narrow,
    .narrow = NULL,
};

/* B micro-panels of 48 (or 32) columns x KC pairs are loaded with aligned
 * loads: cz_alloc's 64-byte alignment and NR * 4 bytes = 192 (128) per
 * pair keep them aligned. */
const cz_bf16_kernel cz_bf16_kernel_vdpbf16ps = {
    VDPBF16PS_COMMON,
    .detail = "8x48 micro-tile (8x32 where n fits it better), KC 256 (k <= 768: one block) MC 192 "
              "NC 3072",
    .nr = NR,
    .pack_b = pack_b,
    .kernel = micro_kernel,
    .narrow = &vdpbf16ps_narrow,
};

#elif CZ_HAVE_X86_ISAS
#error "gemm_bf16_avx512.c needs AVX512_BF16's flags (CMakeLists.txt sets them for this file)"
#else
typedef int cz_gemm_bf16_avx512_unused; /* (ISO C: no empty translation unit) */
#endif
