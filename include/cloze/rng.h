/* rng: counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
 *
 * Every random choice in cloze is a pure function of indices, never of the
 * order in which threads or ranks happen to ask: a stream is named by
 * (seed, purpose, a, b, c) and an element by a 64-bit index inside it. This is
 * what makes a run independent of how samples are spread over ranks and
 * threads, and what makes resume exact.
 *
 * The key layout lives here and only here:
 *   key      = seed (64 bits)
 *   counter  = [ hash(purpose, a, b, c) (64 bits) | index (64 bits) ]
 * Purposes and what a, b, c mean for each are listed in cz_rng_purpose. */
#ifndef CLOZE_RNG_H
#define CLOZE_RNG_H

#include <stdint.h>

typedef enum {
    CZ_RNG_INIT = 1,     /* a = tensor index                                  */
    CZ_RNG_DROPOUT = 2,  /* a = step, b = global sample index, c = layer<<8|site */
    CZ_RNG_INSTANCE = 3, /* a = epoch, b = global sample index (data building) */
    CZ_RNG_SHUFFLE = 4,  /* a = epoch                                         */
    CZ_RNG_GENERATE = 5, /* a = sequence of a generated batch (infer.h)       */
    CZ_RNG_TEST = 99,
} cz_rng_purpose;

typedef struct cz_rng_stream {
    uint32_t key[2];
    uint64_t stream; /* high 64 bits of the counter */
} cz_rng_stream;

cz_rng_stream cz_rng_stream_make(uint64_t seed, cz_rng_purpose purpose, uint64_t a, uint64_t b,
                                 uint64_t c);

/* The raw block: four 32-bit words for counter (stream, block). */
void cz_philox4x32(const cz_rng_stream *s, uint64_t block, uint32_t out[4]);

/* Element i of the stream: word i%4 of block i/4. */
uint32_t cz_rng_u32(const cz_rng_stream *s, uint64_t i);
/* Uniform in [0,1) with 24 random bits (exactly representable in float). */
float cz_rng_uniform(const cz_rng_stream *s, uint64_t i);
double cz_rng_uniform_double(const cz_rng_stream *s, uint64_t i); /* 53 bits, [0,1) */
/* Uniform integer in [0, n), n > 0 (multiply-shift on 64 bits: bias < 2^-32). */
uint64_t cz_rng_below(const cz_rng_stream *s, uint64_t i, uint64_t n);
/* Standard normal by Box-Muller on elements 2i and 2i+1. */
double cz_rng_normal(const cz_rng_stream *s, uint64_t i);

/* A small sequential cursor over a stream for code that draws many numbers
 * in a data-dependent order (instance building): still a pure function of
 * the stream and of how many numbers were drawn before. */
typedef struct cz_rng_cursor {
    cz_rng_stream s;
    uint64_t next;
} cz_rng_cursor;

static inline cz_rng_cursor cz_rng_cursor_make(cz_rng_stream s) {
    cz_rng_cursor c = {s, 0};
    return c;
}
static inline double cz_cursor_uniform(cz_rng_cursor *c) {
    double u = cz_rng_uniform_double(&c->s, c->next);
    c->next += 2;
    return u;
}
static inline uint64_t cz_cursor_below(cz_rng_cursor *c, uint64_t n) {
    uint64_t r = cz_rng_below(&c->s, c->next, n);
    c->next += 2;
    return r;
}

#endif
