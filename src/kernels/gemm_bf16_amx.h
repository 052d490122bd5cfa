/* The AMX kernel of the bf16 GEMM, written once and compiled twice:
 * gemm_bf16_amx.c with the tile instructions (-mamx-tile -mamx-bf16, that
 * file only), gemm_bf16_amx_emul.c with each tile instruction emulated in
 * scalar C as Intel's SDM defines it. Same packing, same blocking, same
 * loops, so the tests exercise on every CPU (and in CI) what runs on a Xeon
 * with AMX; only the six tile operations differ.
 *
 * Why a header of macros rather than a struct of function pointers: the
 * tile intrinsics name their tile register as a compile-time immediate
 * (_tile_loadd(4, ...)), so an ops struct would need one function per tile
 * number and an indirect call per tile instruction in the innermost loop;
 * macros keep the real kernel's instructions with constant tile operands
 * and no calls.
 *
 * The includer defines, before including:
 *   AMX_FN(x)               the name of this copy's function x
 *   AMX_DESC, AMX_CHOICE    its descriptor's variable and its table
 *                           entry's name, needs and rank (cz_cpu_choice)
 *   AMX_STATE_BYTES         per-thread state (the emulated tile registers)
 *   AMX_STATE(state)        declares `st` from the kernel's state pointer
 *   TILE_LOADCONFIG(cfg)  TILE_RELEASE()  TILE_ZERO(t)
 *   TILE_LOAD(t, base, stride)  TILE_STORE(t, base, stride)  TILE_DP(c, a, b)
 * (the tile operations may use `st`).
 *
 * Blocking (OpenBLAS's Sapphire Rapids sbgemm idea): the 8 tile registers
 * are 4 of C (a 32 x 32 block in fp32, tiles 0-3), 2 of A (16 rows x 32
 * bf16 each, tiles 4-5) and 2 of B (16 k-pairs x 16 columns each, tiles
 * 6-7); each step over 32 values of k loads 4 tiles and runs 4 tdpbf16ps,
 * each A and B tile used twice. The 32 x 32 accumulators stay in the tiles
 * for the whole KC block. KC 512, MC 256, NC 3072 were chosen for the cache
 * sizes (A panel 32 x 512 bf16 = 32 KiB, B panel the same, the A block 256
 * KiB in L2), not yet measured on a Xeon with AMX (docs/performance.md).
 *
 * Packed layouts (gemm_bf16.h's pairs; kp a multiple of 16):
 * - A micro-panel (32 rows): for each block of 16 pairs, the 32 rows one
 *   after the other, each its 16 words (A[r][2p], A[r][2p+1]): two tiles of
 *   16 rows x 64 bytes, tile rows 64 bytes apart.
 * - B micro-panel (32 columns): for each pair p, 32 words (B[2p][j],
 *   B[2p+1][j]), j = 0..31 (the VNNI layout: row p of a B tile holds the
 *   pair p of its 16 columns); the two B tiles are its two halves, rows
 *   128 bytes apart.
 * Rows past m, columns past n and pairs past k are zeros, which add
 * nothing: edges in m, n and odd k need no other code. */
/* (no include guard: a template, included once by each of its two files) */

#define AMX_MR 32
#define AMX_NR 32
#define AMX_KP 16 /* pairs per tile row: 32 bf16 = 64 bytes */

/* palette 1, every tile 16 rows of 64 bytes (cz_amx_tile_config) */
static void AMX_FN(begin)(void *state) {
    AMX_STATE(state);
    cz_amx_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    TILE_LOADCONFIG(&cfg);
}

static void AMX_FN(end)(void *state) {
    AMX_STATE(state);
    TILE_RELEASE();
}

/* element i of x as bf16 bits: floats rounded (cz_bf16_bits), bf16 as
 * they are (x16) */
static inline uint32_t AMX_FN(bits)(int x16, const void *x, size_t i) {
    return x16 ? ((const uint16_t *)x)[i] : cz_bf16_bits(((const float *)x)[i]);
}

/* word (x[i0], x[i1]): element i0 in the low half; an index < 0 reads 0 */
static inline uint32_t AMX_FN(pair)(int x16, const void *x, long i0, long i1) {
    uint32_t lo = i0 < 0 ? 0 : AMX_FN(bits)(x16, x, (size_t)i0);
    uint32_t hi = i1 < 0 ? 0 : AMX_FN(bits)(x16, x, (size_t)i1);
    return lo | hi << 16;
}

/* The packers read along memory and write whole panels, zeros included;
 * their inner loops over full rows have no edge tests (they vectorise).
 * The inlined bodies are compiled once for floats and once for bf16. */
static inline __attribute__((always_inline)) void AMX_FN(pack_a_body)(uint32_t *dst, int ta,
                                                                      int a16, const void *a,
                                                                      int lda, int rv, int kc,
                                                                      int kp) {
    int full = kc / 2; /* pairs with both values inside k */
    if (!ta) {         /* row r of op(A) along memory: 16 pairs of a row at a time */
        for (int r = 0; r < AMX_MR; r++) {
            long x = (long)r * lda;
            for (int p = 0; p < kp; p += AMX_KP) {
                uint32_t *row = dst + (size_t)p * AMX_MR + (size_t)r * AMX_KP;
                if (r < rv && p + AMX_KP <= full) {
                    for (int q = 0; q < AMX_KP; q++)
                        row[q] = AMX_FN(pair)(a16, a, x + 2 * (p + q), x + 2 * (p + q) + 1);
                    continue;
                }
                for (int q = 0; q < AMX_KP; q++) {
                    int k0 = 2 * (p + q), k1 = k0 + 1;
                    row[q] = AMX_FN(pair)(a16, a, r < rv && k0 < kc ? x + k0 : -1,
                                          r < rv && k1 < kc ? x + k1 : -1);
                }
            }
        }
        return;
    }
    /* transposed: rows 2p and 2p+1 of memory hold pair p of every row */
    for (int p = 0; p < kp; p++) {
        uint32_t *col = dst + (size_t)(p / AMX_KP) * AMX_MR * AMX_KP + p % AMX_KP;
        long x0 = (long)(2 * p) * lda, x1 = x0 + lda;
        if (rv == AMX_MR && p < full) {
            for (int r = 0; r < AMX_MR; r++)
                col[(size_t)r * AMX_KP] = AMX_FN(pair)(a16, a, x0 + r, x1 + r);
            continue;
        }
        for (int r = 0; r < AMX_MR; r++)
            col[(size_t)r * AMX_KP] = AMX_FN(pair)(a16, a, r < rv && 2 * p < kc ? x0 + r : -1,
                                                   r < rv && 2 * p + 1 < kc ? x1 + r : -1);
    }
}

static void AMX_FN(pack_a)(uint32_t *dst, int ta, int a16, const void *a, int lda, int rv, int kc,
                           int kp) {
    if (a16)
        AMX_FN(pack_a_body)(dst, ta, 1, a, lda, rv, kc, kp);
    else
        AMX_FN(pack_a_body)(dst, ta, 0, a, lda, rv, kc, kp);
}

static inline __attribute__((always_inline)) void AMX_FN(pack_b_body)(uint32_t *dst, int tb,
                                                                      int b16, const void *b,
                                                                      int ldb, int cv, int kc,
                                                                      int kp) {
    int full = kc / 2;
    if (!tb) { /* rows 2p and 2p+1 of memory hold pair p of every column */
        for (int p = 0; p < kp; p++) {
            uint32_t *row = dst + (size_t)p * AMX_NR;
            long x0 = (long)(2 * p) * ldb, x1 = x0 + ldb;
            if (cv == AMX_NR && p < full) {
                for (int j = 0; j < AMX_NR; j++) row[j] = AMX_FN(pair)(b16, b, x0 + j, x1 + j);
                continue;
            }
            for (int j = 0; j < AMX_NR; j++)
                row[j] = AMX_FN(pair)(b16, b, j < cv && 2 * p < kc ? x0 + j : -1,
                                      j < cv && 2 * p + 1 < kc ? x1 + j : -1);
        }
        return;
    }
    /* transposed: column j of op(B) along memory */
    for (int j = 0; j < AMX_NR; j++) {
        long x = (long)j * ldb;
        int p = 0;
        if (j < cv)
            for (; p < full; p++)
                dst[(size_t)p * AMX_NR + j] = AMX_FN(pair)(b16, b, x + 2 * p, x + 2 * p + 1);
        for (; p < kp; p++) {
            int k0 = 2 * p, k1 = k0 + 1;
            dst[(size_t)p * AMX_NR + j] = AMX_FN(pair)(b16, b, j < cv && k0 < kc ? x + k0 : -1,
                                                       j < cv && k1 < kc ? x + k1 : -1);
        }
    }
}

static void AMX_FN(pack_b)(uint32_t *dst, int tb, int b16, const void *b, int ldb, int cv, int kc,
                           int kp) {
    if (b16)
        AMX_FN(pack_b_body)(dst, tb, 1, b, ldb, cv, kc, kp);
    else
        AMX_FN(pack_b_body)(dst, tb, 0, b, ldb, cv, kc, kp);
}

static void AMX_FN(kernel)(void *state, int kp, const uint32_t *ap, const uint32_t *bp, float *c,
                           int ldc, int mr, int nr, float alpha, float beta) {
    AMX_STATE(state);
    float acc[AMX_MR * AMX_NR] __attribute__((aligned(64)));
    TILE_ZERO(0);
    TILE_ZERO(1);
    TILE_ZERO(2);
    TILE_ZERO(3);
    for (int p0 = 0; p0 < kp; p0 += AMX_KP) {
        const uint32_t *a0 = ap + (size_t)p0 * AMX_MR, *b0 = bp + (size_t)p0 * AMX_NR;
        TILE_LOAD(4, a0, AMX_KP * 4);               /* A rows 0-15 */
        TILE_LOAD(5, a0 + 16 * AMX_KP, AMX_KP * 4); /* A rows 16-31 */
        TILE_LOAD(6, b0, AMX_NR * 4);               /* B columns 0-15 */
        TILE_LOAD(7, b0 + 16, AMX_NR * 4);          /* B columns 16-31 */
        TILE_DP(0, 4, 6);
        TILE_DP(1, 4, 7);
        TILE_DP(2, 5, 6);
        TILE_DP(3, 5, 7);
    }
    TILE_STORE(0, acc, AMX_NR * 4);
    TILE_STORE(1, acc + 16, AMX_NR * 4);
    TILE_STORE(2, acc + 16 * AMX_NR, AMX_NR * 4);
    TILE_STORE(3, acc + 16 * AMX_NR + 16, AMX_NR * 4);
    /* (both files compile with -ffp-contract=off: the same bits here) */
    for (int i = 0; i < mr; i++) {
        float *ci = c + (size_t)i * ldc;
        const float *ai = acc + (size_t)i * AMX_NR;
        if (beta == 0.0f)
            for (int j = 0; j < nr; j++) ci[j] = alpha * ai[j];
        else if (beta == 1.0f)
            for (int j = 0; j < nr; j++) ci[j] = alpha * ai[j] + ci[j];
        else
            for (int j = 0; j < nr; j++) ci[j] = alpha * ai[j] + beta * ci[j];
    }
}

const cz_bf16_kernel AMX_DESC = {
    .choice = AMX_CHOICE,
    .detail = "32x32 C in 4 tiles, 2 A + 2 B tiles, KC 512 MC 256 NC 3072",
    .mr = AMX_MR,
    .nr = AMX_NR,
    .kc = 512,
    .mc = 256,
    .nc = 3072,
    .kp_align = AMX_KP,
    .state_bytes = AMX_STATE_BYTES,
    .pack_a = AMX_FN(pack_a),
    .pack_b = AMX_FN(pack_b),
    .begin = AMX_FN(begin),
    .end = AMX_FN(end),
    .kernel = AMX_FN(kernel),
};
