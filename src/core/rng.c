#include "cloze/rng.h"

#include <math.h>

/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11), the generator behind cuRAND and PyTorch's
 * dropout: ten rounds of multiply-xor on a 128-bit counter under a 64-bit
 * key. Constants from the paper. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

cz_rng_stream cz_rng_stream_make(uint64_t seed, cz_rng_purpose purpose, uint64_t a, uint64_t b,
                                 uint64_t c) {
    cz_rng_stream s;
    s.key[0] = (uint32_t)seed;
    s.key[1] = (uint32_t)(seed >> 32);
    uint64_t h = splitmix64((uint64_t)purpose);
    h = splitmix64(h ^ a);
    h = splitmix64(h ^ b);
    h = splitmix64(h ^ c);
    s.stream = h;
    return s;
}

void cz_philox4x32(const cz_rng_stream *s, uint64_t block, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32);
    uint32_t c2 = (uint32_t)s->stream, c3 = (uint32_t)(s->stream >> 32);
    uint32_t k0 = s->key[0], k1 = s->key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint32_t cz_rng_u32(const cz_rng_stream *s, uint64_t i) {
    uint32_t out[4];
    cz_philox4x32(s, i >> 2, out);
    return out[i & 3];
}

float cz_rng_uniform(const cz_rng_stream *s, uint64_t i) {
    return (float)(cz_rng_u32(s, i) >> 8) * (1.0f / 16777216.0f);
}

double cz_rng_uniform_double(const cz_rng_stream *s, uint64_t i) {
    uint64_t hi = cz_rng_u32(s, i), lo = cz_rng_u32(s, i + 1);
    uint64_t bits = ((hi << 32) | lo) >> 11;
    return (double)bits * (1.0 / 9007199254740992.0);
}

uint64_t cz_rng_below(const cz_rng_stream *s, uint64_t i, uint64_t n) {
    uint64_t hi = cz_rng_u32(s, i), lo = cz_rng_u32(s, i + 1);
    uint64_t r = (hi << 32) | lo;
    return (uint64_t)(((unsigned __int128)r * n) >> 64);
}

double cz_rng_normal(const cz_rng_stream *s, uint64_t i) {
    double u1 = cz_rng_uniform_double(s, 4 * i);
    double u2 = cz_rng_uniform_double(s, 4 * i + 2);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
