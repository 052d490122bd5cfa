/* The AMX kernel of the bf16 GEMM with the tile instructions emulated in
 * scalar C ("amx-emulated"): the loops, packing and blocking of
 * gemm_bf16_amx.h, on every CPU. It exists so that the tests check on any
 * machine, in CI and under the sanitizers, the code that runs on a Xeon
 * with AMX; it is never chosen by itself (CLOZE_BF16_KERNEL=amx-emulated).
 *
 * Semantics from Intel's SDM (vol. 2, TILELOADD, TILESTORED, TILEZERO,
 * TDPBF16PS; vol. 1, "Intel AMX"):
 * - the tile configuration gives each tile its rows and bytes per row;
 *   loading it zeroes every tile;
 * - tileloadd reads rows x colsb bytes, row r from base + r * stride, and
 *   zeroes the rest of the tile; tilestored writes the same part back;
 * - tdpbf16ps, for each row m of C, pair k of A's row and column n:
 *     C[m][n] += fp32(A[m][2k]) * fp32(B[k][2n])
 *     C[m][n] += fp32(A[m][2k+1]) * fp32(B[k][2n+1])
 *   in that order (k ascending), each += one fp32 addition rounded to
 *   nearest even, whatever MXCSR says; bf16 inputs that are subnormal are
 *   read as zero (DAZ) and subnormal results written as zero (FTZ). A
 *   product of two bf16 values (8-bit significands) is exact in fp32.
 * The hardware may round inside a pair differently from this sequence; the
 * tests compare both kernels against cz_gemm_bf16_ref within the fp32
 * accumulation bound, not against each other (tests/test_gemm_bf16.c).
 *
 * Compiled with -ffp-contract=off (CMakeLists.txt): a*b+c fused into one
 * FMA would round once where the instruction rounds twice. */
#include "gemm_bf16.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

/* The 8 tile registers of one thread, in the kernel's per-thread state */
typedef struct {
    uint8_t rows[8];
    uint16_t colsb[8];
    unsigned char data[8][16 * 64];
} emu_tiles;

/* CLOZE_BF16_PLANT (a test hook, tests/kernels.cmake): "error" makes every
 * stored tile's first element wrong by one unit in the last place, "fault"
 * makes loading a tile configuration trap (SIGILL on x86-64), as a wrong
 * result or a refused tile instruction would on real tiles. The test sees
 * the kernel's check of itself catch either and the choice fall back. */
static int emu_plant(void) {
    const char *p = getenv("CLOZE_BF16_PLANT");
    return !p ? 0 : !strcmp(p, "error") ? 1 : !strcmp(p, "fault") ? 2 : 0;
}

static void emu_loadconfig(emu_tiles *st, const void *cfg) {
    if (emu_plant() == 2) __builtin_trap();
    cz_amx_tile_config c;
    memcpy(&c, cfg, sizeof c);
    for (int t = 0; t < 8; t++) {
        st->rows[t] = c.rows[t] <= 16 ? c.rows[t] : 16;
        st->colsb[t] = c.colsb[t] <= 64 ? c.colsb[t] : 64;
    }
    memset(st->data, 0, sizeof st->data);
}

static void emu_release(emu_tiles *st) {
    memset(st, 0, sizeof *st);
}

static void emu_zero(emu_tiles *st, int t) {
    memset(st->data[t], 0, sizeof st->data[t]);
}

static void emu_load(emu_tiles *st, int t, const void *base, size_t stride) {
    emu_zero(st, t);
    for (int r = 0; r < st->rows[t]; r++)
        memcpy(st->data[t] + r * 64, (const unsigned char *)base + r * stride, st->colsb[t]);
}

static void emu_store(const emu_tiles *st, int t, void *base, size_t stride) {
    for (int r = 0; r < st->rows[t]; r++)
        memcpy((unsigned char *)base + r * stride, st->data[t] + r * 64, st->colsb[t]);
    if (emu_plant() == 1) {
        uint32_t u;
        memcpy(&u, base, 4);
        u ^= 1;
        memcpy(base, &u, 4);
    }
}

/* bf16 (the upper half of an fp32) as fp32, subnormals read as zero */
static inline float emu_bf16(uint32_t h) {
    uint32_t u = (h & 0x7f80u) ? h << 16 : (h & 0x8000u) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* x with a subnormal flushed to a zero of its sign (0 * x keeps the sign).
 * A macro, and B's values converted once per instruction, because the
 * tests also run this under the sanitizers without optimisation. */
#define EMU_FTZ(x) (fabsf(x) < FLT_MIN ? 0.0f * (x) : (x))

static void emu_dpbf16ps(emu_tiles *st, int tc, int ta, int tb) {
    int rows = st->rows[tc], cols = st->colsb[tc] / 4;
    int pairs = st->colsb[ta] / 4 < st->rows[tb] ? st->colsb[ta] / 4 : st->rows[tb];
    float bv[16][32];
    for (int k = 0; k < pairs; k++)
        for (int n = 0; n < cols; n++) {
            uint32_t w;
            memcpy(&w, st->data[tb] + k * 64 + n * 4, 4);
            bv[k][2 * n] = emu_bf16(w & 0xffffu);
            bv[k][2 * n + 1] = emu_bf16(w >> 16);
        }
    for (int m = 0; m < rows; m++) {
        float acc[16], av[32];
        memcpy(acc, st->data[tc] + m * 64, sizeof(float) * cols);
        for (int k = 0; k < pairs; k++) {
            uint32_t w;
            memcpy(&w, st->data[ta] + m * 64 + k * 4, 4);
            av[2 * k] = emu_bf16(w & 0xffffu);
            av[2 * k + 1] = emu_bf16(w >> 16);
        }
        for (int k = 0; k < pairs; k++) {
            const float a0 = av[2 * k], a1 = av[2 * k + 1], *b = bv[k];
            for (int n = 0; n < cols; n++) {
                float p0 = a0 * b[2 * n], s0, p1, s1;
                p0 = EMU_FTZ(p0);
                s0 = acc[n] + p0; /* element 2k first, then 2k+1 (SDM) */
                s0 = EMU_FTZ(s0);
                p1 = a1 * b[2 * n + 1];
                p1 = EMU_FTZ(p1);
                s1 = s0 + p1;
                acc[n] = EMU_FTZ(s1);
            }
        }
        memcpy(st->data[tc] + m * 64, acc, sizeof(float) * cols);
    }
}

#define AMX_FN(x) amx_emulated_##x
#define AMX_DESC cz_bf16_kernel_amx_emulated
/* runs everywhere; rank 0: only when forced (tests) */
#define AMX_CHOICE                                                                                 \
    { "amx-emulated", 0, 0 }
#define AMX_STATE_BYTES sizeof(emu_tiles)
#define AMX_STATE(state) emu_tiles *st = (emu_tiles *)(state)
#define TILE_LOADCONFIG(cfg) emu_loadconfig(st, cfg)
#define TILE_RELEASE() emu_release(st)
#define TILE_ZERO(t) emu_zero(st, t)
#define TILE_LOAD(t, base, stride) emu_load(st, t, base, stride)
#define TILE_STORE(t, base, stride) emu_store(st, t, base, stride)
#define TILE_DP(c, a, b) emu_dpbf16ps(st, c, a, b)

#include "gemm_bf16_amx.h"
