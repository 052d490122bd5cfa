/* Portable short vectors for the kernels that are compiled once per
 * instruction set (nn_vec.c, ../optim/adamw_vec.c), private to src/.
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
 * Nothing here names an instruction, so the same definition is what runs on
 * every CPU, and the code is read once.
 *
 * CZ_ISA_SUFFIX (avx512, avx2, baseline) names the functions of one copy:
 * CZ_ISA_FN(layernorm) is cz_layernorm_avx512 in the AVX-512 object. */
#ifndef CLOZE_VEC_H
#define CLOZE_VEC_H

#include <stdint.h>
#include <string.h>

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
/* max lane by lane, b where either is NaN; as a lane loop so that the
 * vectoriser emits the max instruction (a compare and select on the vector
 * types stays three instructions) */
static inline vf vmax(vf a, vf b) {
    float x[VL], y[VL];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
#pragma omp simd
    for (int l = 0; l < VL; l++) x[l] = x[l] > y[l] ? x[l] : y[l];
    memcpy(&a, x, sizeof a);
    return a;
}
static inline vf vmin(vf a, vf b) {
    float x[VL], y[VL];
    memcpy(x, &a, sizeof x);
    memcpy(y, &b, sizeof y);
#pragma omp simd
    for (int l = 0; l < VL; l++) x[l] = x[l] < y[l] ? x[l] : y[l];
    memcpy(&a, x, sizeof a);
    return a;
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

/* 2^n for integer-valued float n in [-252, 254] as two factors 2^h * 2^l
 * (h + l = n, each a normal float): x * 2^h * 2^l, multiplied in that
 * order, is exact up to one final rounding, also when the result is
 * subnormal or near the largest float */
static inline vf vexp2i(vf n, vf *lo) {
    vi ni = __builtin_convertvector(n, vi);
    vi h = ni >> 1, l = ni - h;
    *lo = (vf)((l + 127) << 23);
    return (vf)((h + 127) << 23);
}

/* exp(x) in float: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2 (ln2
 * split so that n * hi is exact for |n| < 2^8), Taylor polynomial of degree
 * 7 for e^r (truncation r^8/8! < 6e-9 relative), 2^n by exponent bits:
 * within ~2 ulp of expf. x below -104 is raised to -104 (the result
 * underflows to 0 there, as expf's); callers keep x <= 88.7 (every argument
 * in nn_vec.c is <= 0 or clamped), so no upper clamp is spent. n is rounded
 * with the 1.5 * 2^23 trick (valid for |x log2 e| < 2^22). */
static inline vf vexp(vf x) {
    x = vmax(x, vsplat(-104.0f));    /* callers keep x <= 88.7 (exp finite) */
    const float shift = 12582912.0f; /* 1.5 * 2^23 */
    vf n = (x * 1.44269504088896341f + shift) - shift;
    vf r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    vf p = vsplat(1.0f / 5040.0f);
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    vf lo, hi = vexp2i(n, &lo);
    return (p * hi) * lo;
}

#endif
