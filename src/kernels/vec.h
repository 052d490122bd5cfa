/* Portable short vectors for the kernels that are compiled once per
 * instruction set (nn_vec.c, ../optim/adamw_vec.c), private to src/.
 *
 * The build compiles each such source several times with a different
 * CZ_VBYTES and target flags (CMakeLists.txt): 64 bytes with AVX-512, 32 with
 * AVX2 + FMA, 16 for the baseline (SSE2 on x86-64, NEON on aarch64). GCC's
 * vector extensions (GCC manual, "Using Vector Instructions through Built-in
 * Functions") turn `vf` arithmetic into instructions of that width; vectors
 * of doubles (`vd`) hold as many lanes as `vf` and take two registers.
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
typedef double vd __attribute__((vector_size(2 * CZ_VBYTES)));
typedef uint64_t vu64 __attribute__((vector_size(2 * CZ_VBYTES)));
typedef int64_t vl64 __attribute__((vector_size(2 * CZ_VBYTES)));

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
/* the first k lanes from p (k < VL), the others 0 */
static inline vf vload_part(const float *p, int k) {
    vf v = {0};
    memcpy(&v, p, (size_t)k * sizeof(float));
    return v;
}
static inline void vstore_part(float *p, vf v, int k) {
    memcpy(p, &v, (size_t)k * sizeof(float));
}
/* k lanes, k >= VL meaning all */
static inline vf vload_n(const float *p, int k) {
    return k >= VL ? vload(p) : vload_part(p, k);
}
static inline void vstore_n(float *p, vf v, int k) {
    if (k >= VL)
        vstore(p, v);
    else
        vstore_part(p, v, k);
}

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
/* the same for double lanes: d in lanes [0, k), 0 elsewhere */
static inline vd vkeep_d(vd d, int k) {
    vl64 iota;
    for (int l = 0; l < VL; l++) iota[l] = l;
    return (vd)((vl64)d & (iota < k));
}
static inline vf vmax(vf a, vf b) {
    return vsel(a > b, a, b);
}
static inline vf vabs(vf a) {
    return (vf)((vi)a & 0x7fffffff);
}

static inline vd vwiden(vf v) {
    return __builtin_convertvector(v, vd);
}
static inline vf vnarrow(vd v) {
    return __builtin_convertvector(v, vf);
}
/* lane sums in lane order 0, 1, ..., VL-1 (a fixed order per build) */
static inline double vsum_d(vd v) {
    double s = 0;
    for (int l = 0; l < VL; l++) s += v[l];
    return s;
}
static inline float vsum(vf v) {
    float s = 0;
    for (int l = 0; l < VL; l++) s += v[l];
    return s;
}
static inline float vhmax(vf v) {
    float m = v[0];
    for (int l = 1; l < VL; l++) m = v[l] > m ? v[l] : m;
    return m;
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
 * within ~2 ulp of expf. x is clamped to [-104, 88.7] (0 and the largest
 * finite powers beyond). n is rounded with the 1.5 * 2^23 trick (valid for
 * |x log2 e| < 2^22). */
static inline vf vexp(vf x) {
    x = vmax(x, vsplat(-104.0f));
    x = vsel(x > 88.7f, vsplat(88.7f), x);
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
