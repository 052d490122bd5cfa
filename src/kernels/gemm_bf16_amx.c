/* The AMX kernel of the bf16 GEMM on the tile unit (gemm_bf16_amx.h, the
 * one source of its loops). This file alone is compiled with -mamx-tile
 * -mamx-bf16 (CMakeLists.txt); nothing here runs unless core chose AMX
 * (cz_cpu_choose: CPUID, XCR0, Linux's permission and the kernel's
 * check of itself, gemm_bf16.c). */
#include "gemm_bf16.h"

/* GCC spells the macros __AMX_TILE__ and __AMX_BF16__, Clang __AMXTILE__
 * and __AMXBF16__ */
#if CZ_HAVE_X86_ISAS && (defined(__AMX_TILE__) || defined(__AMXTILE__)) &&                         \
    (defined(__AMX_BF16__) || defined(__AMXBF16__))
#include <immintrin.h>

#define AMX_FN(x) amx_##x
#define AMX_DESC cz_bf16_kernel_amx
/* preferred wherever it runs; its file also carries AVX-512 (packing) */
#define AMX_CHOICE                                                                                 \
    { "amx", CZ_NEEDS_X86 | CZ_NEEDS_AVX512 | CZ_NEEDS_AMX_BF16, 2 }
#define AMX_STATE_BYTES 0
#define AMX_STATE(state) (void)(state)
/* GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes of the
 * configuration (an "m" operand of a pointer's size), so the stores of the
 * rows and bytes per row were removed as dead (seen in the object code:
 * ldtilecfg of a palette with no tiles). The empty asm takes the
 * configuration's address with a memory clobber: every store to it is
 * made first. */
#define TILE_LOADCONFIG(cfg)                                                                       \
    do {                                                                                           \
        __asm__ volatile("" ::"r"(cfg) : "memory");                                                \
        _tile_loadconfig(cfg);                                                                     \
    } while (0)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)

#include "gemm_bf16_amx.h"

#elif CZ_HAVE_X86_ISAS
#error "gemm_bf16_amx.c needs -mamx-tile -mamx-bf16 (CMakeLists.txt sets them for this file)"
#else
typedef int cz_gemm_bf16_amx_unused; /* (ISO C: no empty translation unit) */
#endif
