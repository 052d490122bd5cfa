/* Portable short vectors for the kernels that are compiled once per
 * instruction set (nn_vec.c), private to src/kernels.
 *
 * The build compiles each such source several times with a different
 * CZ_VBYTES and target flags (CMakeLists.txt): 64 bytes with AVX-512, 32 with
 * AVX2 + FMA, 16 for the baseline (SSE2 on x86-64, NEON on aarch64). GCC's
 * vector extensions (GCC manual, "Using Vector Instructions through Built-in
 * Functions") turn `vf` arithmetic into instructions of that width. `vd`
 * holds as many doubles as `vf` has floats, as two vectors of the hardware
 * width (a struct: GCC keeps a generic vector wider than the hardware in
 * memory, which put a store and a load on every accumulation); its
 * arithmetic is spelled vd_add, vd_mul, ...
 *
 * The kernels name no instruction, so one definition is what runs on every
 * CPU, and the code is read once. A few helpers below do name instructions,
 * each because GCC does not find it from the portable form: max and min
 * (from `a > b ? a : b` it emits a compare and a blend), the fused
 * multiply-add of an error term (a * b - p with p = a * b cannot be left to
 * contraction: p is already rounded), AVX-512's vscalefps for 2^n, and the
 * 32 x 32 -> 64-bit multiply of even lanes (pmuludq; from 64-bit lanes GCC
 * emits a full 64-bit multiply). Each has the portable form beside it, used
 * where the target lacks the instruction, with the same result.
 *
 * CZ_ISA_SUFFIX (avx512, avx2, baseline) names the functions of one copy:
 * CZ_ISA_FN(layernorm) is cz_layernorm_avx512 in the AVX-512 object. */
#ifndef CLOZE_VEC_H
#define CLOZE_VEC_H

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#ifndef CZ_VBYTES
#error "vec.h: compile with -DCZ_VBYTES=16|32|64 -DCZ_ISA_SUFFIX=name (see CMakeLists.txt)"
#endif

#define CZ_CAT2(a, b) a##b
#define CZ_CAT(a, b) CZ_CAT2(a, b)
#define CZ_ISA_FN(name) CZ_CAT(CZ_CAT(name, _), CZ_ISA_SUFFIX)

#define VL (CZ_VBYTES / 4) /* float lanes */

typedef float vf __attribute__((vector_size(CZ_VBYTES)));
typedef int32_t vi __attribute__((vector_size(CZ_VBYTES)));
typedef uint32_t vu __attribute__((vector_size(CZ_VBYTES)));
typedef double vdh __attribute__((vector_size(CZ_VBYTES))); /* VL / 2 doubles */
typedef int64_t vlh __attribute__((vector_size(CZ_VBYTES)));
typedef uint64_t vq __attribute__((vector_size(CZ_VBYTES)));   /* VL / 2 words of 64 bits */
typedef float vfh __attribute__((vector_size(CZ_VBYTES / 2))); /* VL / 2 floats */
typedef struct vd {
    vdh lo, hi; /* lanes 0 .. VL/2-1 and VL/2 .. VL-1 */
} vd;

/* memcpy: unaligned loads and stores without aliasing questions; GCC turns
 * a fixed-size copy into one vector move */
static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vstore(float *p, vf v) {
    memcpy(p, &v, sizeof v);
}
/* k lanes from p, the others 0 (k >= VL: all); for tails, lane by lane */
static inline vf vload_n(const float *p, int k) {
    if (k >= VL) return vload(p);
    vf v = {0};
    for (int l = 0; l < k; l++) v[l] = p[l];
    return v;
}
static inline void vstore_n(float *p, vf v, int k) {
    if (k >= VL) {
        vstore(p, v);
        return;
    }
    for (int l = 0; l < k; l++) p[l] = v[l];
}

/* The loop over [0, n) in vectors: the body runs with the constant k = VL
 * for every whole vector and once more with k = n - j < VL for the tail,
 * so the loads and stores of the main loop are plain vector moves with no
 * branch (the body is written once and compiled twice). Inside, j is the
 * first index and k the lane count. */
#define VLOOP(j, k, n, ...)                                                                        \
    do {                                                                                           \
        const int n_ = (n);                                                                        \
        int j = 0;                                                                                 \
        for (; j + VL <= n_; j += VL) {                                                            \
            const int k = VL;                                                                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
        if (j < n_) {                                                                              \
            const int k = n_ - j;                                                                  \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)

static inline vf vsplat(float x) {
    return (vf){0} + x;
}
static inline vi viota(void) {
    vi v;
    for (int l = 0; l < VL; l++) v[l] = l;
    return v;
}
/* all-ones in lanes [0, k) */
static inline vi vmask_n(int k) {
    return viota() < k;
}
/* m ? a : b lane by lane (m: all ones or all zeros per lane, from a compare) */
static inline vf vsel(vi m, vf a, vf b) {
    return (vf)(((vi)a & m) | ((vi)b & ~m));
}
static inline vi vseli(vi m, vi a, vi b) {
    return (a & m) | (b & ~m);
}
/* The target's width and instruction set, for the helpers that name
 * instructions */
#if CZ_VBYTES == 64 && defined(__AVX512F__)
#define CZ_X86_512 1
#else
#define CZ_X86_512 0
#endif
#if CZ_VBYTES == 32 && defined(__AVX2__)
#define CZ_X86_256 1
#else
#define CZ_X86_256 0
#endif
#if CZ_VBYTES == 16 && defined(__SSE2__)
#define CZ_X86_128 1
#else
#define CZ_X86_128 0
#endif
#if CZ_VBYTES == 16 && defined(__ARM_NEON)
#define CZ_NEON 1
#else
#define CZ_NEON 0
#endif

/* max and min lane by lane with b where either is NaN: x86's maxps/minps
 * (one instruction; a > b ? a : b on the vector types compiles to a compare
 * and a blend). vexp relies on the NaN rule: it sends NaN to its lower
 * clamp. */
static inline vf vmax(vf a, vf b) {
#if CZ_X86_512
    return (vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif CZ_X86_256
    return (vf)_mm256_max_ps((__m256)a, (__m256)b);
#elif CZ_X86_128
    return (vf)_mm_max_ps((__m128)a, (__m128)b);
#else
    return vsel(a > b, a, b);
#endif
}
static inline vf vmin(vf a, vf b) {
#if CZ_X86_512
    return (vf)_mm512_min_ps((__m512)a, (__m512)b);
#elif CZ_X86_256
    return (vf)_mm256_min_ps((__m256)a, (__m256)b);
#elif CZ_X86_128
    return (vf)_mm_min_ps((__m128)a, (__m128)b);
#else
    return vsel(a < b, a, b);
#endif
}

/* CZ_HAVE_FMA: the target has a fused multiply-add (x86 FMA3 in the avx2
 * and avx512 copies, every aarch64), so vfma(a, b, c) = a b + c with one
 * rounding. The kernels' other a * b + c are contracted by the compiler
 * (-ffp-contract=fast, GCC's default for GNU C); vfma is for the error terms,
 * where the product must not be rounded first. */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define CZ_HAVE_FMA 1
static inline vf vfma(vf a, vf b, vf c) {
#if CZ_X86_512
    return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif CZ_X86_256
    return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif CZ_NEON
    return (vf)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
#else
    for (int l = 0; l < VL; l++) c[l] = __builtin_fmaf(a[l], b[l], c[l]);
    return c;
#endif
}
#else
#define CZ_HAVE_FMA 0
#endif

/* a b - p exactly, for p = fl(a b) (no overflow or underflow): with FMA one
 * instruction; otherwise Dekker's product (Dekker 1971; Knuth TAOCP 4.2.2):
 * a = ah + al with ah the top 12 significant bits (Veltkamp splitting, here
 * by masking the low 12 bits), likewise b, so that every partial product is
 * exact in float and the sum below has no rounding. */
static inline vf vmul_err(vf a, vf b, vf p) {
#if CZ_HAVE_FMA
    return vfma(a, b, -p);
#else
    vf ah = (vf)((vi)a & (int32_t)0xfffff000), al = a - ah;
    vf bh = (vf)((vi)b & (int32_t)0xfffff000), bl = b - bh;
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl;
#endif
}

/* The low 32 bits of each 64-bit lane of a times m, as full 64-bit
 * products (pmuludq: the high halves of a are ignored). */
static inline vq vmul_wide_u32(vq a, uint32_t m) {
#if CZ_X86_512
    return (vq)_mm512_mul_epu32((__m512i)a, _mm512_set1_epi64(m));
#elif CZ_X86_256
    return (vq)_mm256_mul_epu32((__m256i)a, _mm256_set1_epi64x(m));
#elif CZ_X86_128
    return (vq)_mm_mul_epu32((__m128i)a, _mm_set1_epi64x(m));
#elif CZ_NEON
    return (vq)vmull_u32(vmovn_u64((uint64x2_t)a), vdup_n_u32(m));
#else
    return (a & 0xffffffffu) * m;
#endif
}
static inline vf vabs(vf a) {
    return (vf)((vi)a & 0x7fffffff);
}

/* ---- double lanes ---- */
static inline vd vd_zero(void) {
    return (vd){{0}, {0}};
}
/* lane indices of the low and high halves and of the whole (GCC >= 12's
 * __builtin_shufflevector takes them as constants) */
#if CZ_VBYTES == 64
#define CZ_LO 0, 1, 2, 3, 4, 5, 6, 7
#define CZ_HI 8, 9, 10, 11, 12, 13, 14, 15
#elif CZ_VBYTES == 32
#define CZ_LO 0, 1, 2, 3
#define CZ_HI 4, 5, 6, 7
#else
#define CZ_LO 0, 1
#define CZ_HI 2, 3
#endif
typedef double vdw __attribute__((vector_size(2 * CZ_VBYTES)));
static inline vd vwiden(vf v) {
    vdw w = __builtin_convertvector(v, vdw);
    return (vd){__builtin_shufflevector(w, w, CZ_LO), __builtin_shufflevector(w, w, CZ_HI)};
}
static inline vf vnarrow(vd d) {
    vfh a = __builtin_convertvector(d.lo, vfh), b = __builtin_convertvector(d.hi, vfh);
    return __builtin_shufflevector(a, b, CZ_LO, CZ_HI);
}
static inline vd vd_add(vd a, vd b) {
    return (vd){a.lo + b.lo, a.hi + b.hi};
}
static inline vd vd_mul(vd a, vd b) {
    return (vd){a.lo * b.lo, a.hi * b.hi};
}
static inline vd vd_sub_s(vd a, double s) {
    return (vd){a.lo - s, a.hi - s};
}
/* d in lanes [0, k), 0 elsewhere */
static inline vd vd_keep(vd d, int k) {
    vlh iota;
    for (int l = 0; l < VL / 2; l++) iota[l] = l;
    return (vd){(vdh)((vlh)d.lo & (iota < k)), (vdh)((vlh)d.hi & (iota + VL / 2 < k))};
}
/* lane sums in lane order 0, 1, ..., VL-1 (a fixed order per build) */
static inline double vsum_d(vd v) {
    double s = 0;
    for (int l = 0; l < VL / 2; l++) s += v.lo[l];
    for (int l = 0; l < VL / 2; l++) s += v.hi[l];
    return s;
}
/* Horizontal sum and maximum by halving: lane l meets lane l ^ 2^i, every
 * lane ends with the result (a fixed order per build). */
#if VL == 16
#define CZ_R1 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7
#define CZ_R2 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11
#define CZ_R3 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13
#define CZ_R4 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14
#define CZ_REDUCE(v, op)                                                                           \
    (v = op(v, __builtin_shufflevector(v, v, CZ_R1)),                                              \
     v = op(v, __builtin_shufflevector(v, v, CZ_R2)),                                              \
     v = op(v, __builtin_shufflevector(v, v, CZ_R3)),                                              \
     v = op(v, __builtin_shufflevector(v, v, CZ_R4)), v[0])
#elif VL == 8
#define CZ_R1 4, 5, 6, 7, 0, 1, 2, 3
#define CZ_R2 2, 3, 0, 1, 6, 7, 4, 5
#define CZ_R3 1, 0, 3, 2, 5, 4, 7, 6
#define CZ_REDUCE(v, op)                                                                           \
    (v = op(v, __builtin_shufflevector(v, v, CZ_R1)),                                              \
     v = op(v, __builtin_shufflevector(v, v, CZ_R2)),                                              \
     v = op(v, __builtin_shufflevector(v, v, CZ_R3)), v[0])
#else
#define CZ_R1 2, 3, 0, 1
#define CZ_R2 1, 0, 3, 2
#define CZ_REDUCE(v, op)                                                                           \
    (v = op(v, __builtin_shufflevector(v, v, CZ_R1)),                                              \
     v = op(v, __builtin_shufflevector(v, v, CZ_R2)), v[0])
#endif
static inline vf vadd_(vf a, vf b) {
    return a + b;
}
static inline float vsum(vf v) {
    return CZ_REDUCE(v, vadd_);
}
static inline float vhmax(vf v) {
    return CZ_REDUCE(v, vmax);
}

/* exp(x) in float (Cody-Waite reduction, then a polynomial and 2^n), in
 * three steps so that a caller whose argument comes in parts can reduce it
 * itself (nn_vec.c, phi_cdf):
 *   n = vexp_n(x): round(x log2 e) as an integer-valued float, by the
 *       1.5 * 2^23 trick (valid for |x log2 e| < 2^22);
 *   r = x - n ln2, with ln2 = CZ_LN2_HI + CZ_LN2_LO split so that n * hi is
 *       exact for |n| < 2^8, so |r| <= ln2/2 plus rounding;
 *   vexp_finish(r, n) = e^r 2^n: Taylor polynomial of degree 7 for e^r
 *       (truncation r^8/8! < 6e-9 relative), then 2^n.
 * Within ~2 ulp of expf. 2^n: the avx512 copy scales by vscalefps, which
 * rounds once and so also gives expf's subnormal results (vexp clamps x at
 * -104, where the result is 0); the other copies build 2^n from exponent
 * bits, which holds n in [-126, 127], and return 0 below (n <= -127, x
 * below about -87.7, where expf is subnormal: < 1.2e-38 in absolute terms).
 * Callers keep x <= 88 (every argument in nn_vec.c is <= 0 or clamped), so
 * no upper clamp is spent. */
#define CZ_LN2_HI 0.693145751953125f
#define CZ_LN2_LO 1.428606765330187e-06f
static inline vf vexp_n(vf x) {
    const float shift = 12582912.0f; /* 1.5 * 2^23 */
    return (x * 1.44269504088896341f + shift) - shift;
}
static inline vf vexp_finish(vf r, vf n) {
    vf p = vsplat(1.0f / 5040.0f);
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
#if CZ_X86_512
    return (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
    vi ni = __builtin_convertvector(n, vi);
    vf two_n = (vf)(((vu)ni + 127u) << 23);
    return vsel(n > -127.0f, p * two_n, (vf){0}); /* also 0 for NaN */
#endif
}
/* x in [-104, 88]: no clamp */
static inline vf vexp_in_range(vf x) {
    vf n = vexp_n(x);
    vf r = x - n * CZ_LN2_HI;
    r = r - n * CZ_LN2_LO;
    return vexp_finish(r, n);
}
static inline vf vexp(vf x) {
#if CZ_X86_512
    x = vmax(x, vsplat(-104.0f)); /* NaN and -inf too: scalef needs a finite p */
#endif
    return vexp_in_range(x);
}

/* ---- bf16 ----
 * cz_bf16_bits (gemm_bf16.h) on every lane, in the upper half of each lane
 * (the lower half zero): round to nearest even, subnormals to signed zero,
 * NaN a quiet NaN. */
static inline vu vbf16_upper(vf x) {
    vu u = (vu)x;
    vi zero = (vi)((u & 0x7f800000u) == 0);         /* zero or subnormal: signed zero */
    vi nan = (vi)((u & 0x7fffffffu) > 0x7f800000u); /* NaN: stays a quiet NaN */
    vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    vu quiet = (u | 0x00400000u) & 0xffff0000u;
    vu r = (vu)vseli(nan, (vi)quiet, (vi)rounded);
    return (vu)vseli(zero, (vi)(u & 0x80000000u), (vi)r);
}
typedef uint16_t vh __attribute__((vector_size(CZ_VBYTES / 2))); /* VL halves */
/* k lanes of x to p as bf16 (2 bytes each): what the bf16 products read
 * (cz_mat_bf16) */
static inline void vstore_bf16_n(uint16_t *p, vf x, int k) {
    vh h = __builtin_convertvector(vbf16_upper(x) >> 16, vh);
    if (k >= VL) {
        memcpy(p, &h, sizeof h);
        return;
    }
    for (int l = 0; l < k; l++) p[l] = h[l];
}

#endif
