/* bf16 GEMM (gemm_bf16.c), private to src/kernels: gemm.c owns the context
 * and routes products here when cz_gemm_set_bf16 turned the mode on.
 *
 * The micro-kernel contract. The five loops of gemm_bf16.c (BLIS's: jc over
 * n by NC, pc over k by KC, ic over m by MC, jr by NR, ir by MR) know no
 * instruction: they read a cz_bf16_kernel, which names the blocking, packs
 * op(A) into MR-row micro-panels and op(B) into NR-column micro-panels in
 * the layout its micro-kernel wants, and runs the micro-kernel on one MR x
 * NR block of C. Every kernel packs k in pairs (a 32-bit word holds
 * (x[2p], x[2p+1]) as bf16, element 2p in the low half), kp pairs per
 * panel with kp = (kc + 1) / 2 rounded up to kp_align; everything past the
 * edge of m, n or k is packed as zero and never stored. A panel of a
 * kernel takes mr * kp words, a B panel nr * kp words.
 *
 * The table (CZ_BF16_KERNELS below, one line a kernel): vdpbf16ps
 * (gemm_bf16_avx512.c), amx (gemm_bf16_amx.c) and amx-emulated
 * (gemm_bf16_amx_emul.c), the last two one source (gemm_bf16_amx.h). Which
 * one runs is core's rule (cz_cpu_choose over the descriptors' `choice`,
 * CLOZE_BF16_KERNEL), applied once per process by gemm_bf16.c
 * (cz_bf16_kernel_chosen). */
#ifndef CLOZE_GEMM_BF16_H
#define CLOZE_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cloze/core.h"
#include "cloze/cpu.h"
#include "cloze/kernels.h"

typedef struct cz_bf16_kernel {
    /* name (as CLOZE_BF16_KERNEL spells it, the one spelling), the
     * CZ_NEEDS_ features it runs on, preference rank (0: only when forced):
     * what core's rule reads (cz_cpu_choose) */
    cz_cpu_choice choice;
    const char *detail; /* blocking, e.g. "8x48 micro-tile, KC 256 MC 192 NC 3072" */
    int mr, nr;         /* micro-tile */
    int kc, mc, nc;     /* cache blocks: kc even, mc % mr == 0, nc % nr == 0 */
    int kc_max;         /* a product with k <= kc_max runs k as one block (even,
                         * >= kc; 0: always kc): C is read and written once */
    int kp_align;       /* packed k pairs per panel: a multiple of this */
    size_t state_bytes; /* per-thread state the kernel keeps (emulated tiles) */
    /* One A micro-panel: op(A)[0:rv, 0:kc] from `a`, which points at the
     * panel's first element (ta: op(A)[r][p] = a[p * lda + r], else
     * a[r * lda + p]); rows rv..mr-1 and pairs past kc are zeros; kp pairs.
     * The elements are floats, rounded here (cz_bf16_bits), or with a16
     * already bf16 (uint16_t, cz_bf16_store_n), copied as they are: the
     * same words either way. */
    void (*pack_a)(uint32_t *dst, int ta, int a16, const void *a, int lda, int rv, int kc, int kp);
    /* One B micro-panel: op(B)[0:kc, 0:cv] (tb: op(B)[p][j] = b[j * ldb + p],
     * else b[p * ldb + j]); columns cv..nr-1 and pairs past kc are zeros;
     * b16 as a16. */
    void (*pack_b)(uint32_t *dst, int tb, int b16, const void *b, int ldb, int cv, int kc, int kp);
    /* Around one thread's part of a product (tile configuration), or NULL */
    void (*begin)(void *state);
    void (*end)(void *state);
    /* C[0:mr, 0:nr] = alpha * acc + beta * C (beta 0: C not read), acc the
     * kp pairs of the packed panels, summed in fp32. */
    void (*kernel)(void *state, int kp, const uint32_t *ap, const uint32_t *bp, float *c, int ldc,
                   int mr, int nr, float alpha, float beta);
    /* A narrower tile of the same kernel (same mr, A packing, kc, mc and
     * nc; a smaller nr) giving the same bits, for products whose n it pads
     * less; or NULL. The loops choose per product. */
    const struct cz_bf16_kernel *narrow;
} cz_bf16_kernel;

/* The table: every bf16 kernel this build has, X(v) per kernel for its
 * descriptor `const cz_bf16_kernel cz_bf16_kernel_<v>` (its file defines
 * it). Adding a kernel is its file and one line here. The order does not
 * matter: rank decides. vdpbf16ps and amx exist on x86-64 with GCC or
 * Clang (CZ_HAVE_X86_ISAS). */
#if CZ_HAVE_X86_ISAS
#define CZ_BF16_X86_KERNELS(X)                                                                     \
    X(vdpbf16ps)                                                                                   \
    X(amx)
#else
#define CZ_BF16_X86_KERNELS(X)
#endif
#define CZ_BF16_KERNELS(X)                                                                         \
    CZ_BF16_X86_KERNELS(X)                                                                         \
    X(amx_emulated)

#define CZ_BF16_DECLARE(v) extern const cz_bf16_kernel cz_bf16_kernel_##v;
CZ_BF16_KERNELS(CZ_BF16_DECLARE)
#undef CZ_BF16_DECLARE

/* The descriptor of entry i of the table (cz_bf16_kernel_count entries) */
const cz_bf16_kernel *cz_bf16_kernel_at(int i);

/* LDTILECFG's 64-byte operand (Intel SDM vol. 1, 3.2, "Tile
 * configuration"): the AMX kernel writes it, its emulation reads it. */
typedef struct {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) cz_amx_tile_config;
_Static_assert(sizeof(cz_amx_tile_config) == 64, "LDTILECFG takes 64 bytes");

/* The upper 16 bits of cz_bf16_round(x): x as bf16, round to nearest even,
 * subnormals to signed zero (DAZ, as vcvtneps2bf16), NaN stays quiet NaN.
 * Selects rather than branches, so that packing loops vectorise. */
static inline uint32_t cz_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* overflow carries to inf */
    uint32_t quiet = (u | 0x00400000u) >> 16;
    uint32_t zero = (u >> 16) & 0x8000u;
    uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    return (u & 0x7f800000u) == 0 ? zero : r;
}

/* A weight's op(B) packed whole, for every product of one weights scope
 * (cz_gemm_weights_begin): k in KC blocks, each block the NR-column
 * micro-panels of all n columns (kern->pack_b's layout), block i at word
 * i * packed_pairs(KC) * NR * panels. Keyed by what defines op(B). */
typedef struct cz_bf16_weight {
    const void *b;
    int tb, b16, k, n, ldb;
    unsigned long epoch; /* the scope it was packed in */
    uint32_t *words;
    size_t cap_words;
} cz_bf16_weight;

/* Packing buffers and kernel state of one context, one set per thread
 * (each thread packs what its part of C needs), sized for the kernel's
 * blocking, allocated once (cz_gemm_bf16_work_create); and the weights
 * packed in the open scope. */
typedef struct cz_gemm_bf16_work {
    const cz_bf16_kernel *kern;
    int threads;
    size_t a_words, b_words; /* per thread: MC x KP and KP x NC words */
    uint32_t *b_pack;
    uint32_t *a_pack;
    unsigned char *state; /* state_bytes (rounded to 64) per thread, or NULL */
    size_t state_stride;
    cz_bf16_weight *weights; /* n_weights used of cap_weights; kept across scopes */
    int n_weights, cap_weights;
    unsigned long epoch; /* scopes opened so far */
    int scope_open;
} cz_gemm_bf16_work;

cz_gemm_bf16_work *cz_gemm_bf16_work_create(const cz_bf16_kernel *kern, int threads, cz_error *err);
void cz_gemm_bf16_work_free(cz_gemm_bf16_work *w);
/* cz_gemm_mat's contract with bf16-rounded inputs and fp32 accumulation,
 * on w's kernel (the CPU must run it: core decided). b_weight: B is
 * declared a weight (constant while a scope is open): inside a scope its
 * packed form is made by its first product and reused by the later ones
 * (the same bits); outside one, or when the packed copy cannot be
 * allocated, it is packed per product. */
void cz_gemm_bf16_run(cz_gemm_bf16_work *w, int ta, int tb, int m, int n, int k, float alpha,
                      cz_mat a, cz_mat b, int b_weight, float beta, float *c, int ldc);
/* open = 1 opens a scope (every weight packed before is stale), 0 closes
 * it (the packed copies' memory is kept for the next scope). */
void cz_gemm_bf16_weights_scope(cz_gemm_bf16_work *w, int open);

#endif
