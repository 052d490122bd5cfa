/* CPUID / XGETBV feature detection (see cloze/cpu.h for the rules). */
#include "cloze/cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 through XGETBV(0); only valid when CPUID.1:ECX.OSXSAVE[27] is set.
 * Inline asm rather than _xgetbv() so that no -mxsave flag is needed. */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

void cz_cpu_detect(cz_cpu *cpu) {
    memset(cpu, 0, sizeof *cpu);
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned max_leaf = a;
    memcpy(cpu->vendor + 0, &b, 4); /* vendor string order: EBX, EDX, ECX */
    memcpy(cpu->vendor + 4, &d, 4);
    memcpy(cpu->vendor + 8, &c, 4);
    cpu->vendor[12] = 0;

    __get_cpuid(1, &a, &b, &c, &d);
    int base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
    int ext_family = (a >> 20) & 0xFF, ext_model = (a >> 16) & 0xF;
    cpu->stepping = a & 0xF;
    cpu->family = base_family == 0xF ? base_family + ext_family : base_family;
    cpu->model =
        (base_family == 0x6 || base_family == 0xF) ? (ext_model << 4) + base_model : base_model;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;

    /* XCR0 bits: 1 SSE, 2 AVX (YMM upper halves), 5-7 AVX-512 (opmask,
     * ZMM0-15 upper halves, ZMM16-31). */
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    int os_ymm = (xcr0 & 0x6) == 0x6;
    int os_zmm = os_ymm && (xcr0 & 0xE0) == 0xE0;

    unsigned b7 = 0, eax71 = 0;
    if (max_leaf >= 7) {
        __get_cpuid_count(7, 0, &a, &b7, &c, &d);
        __get_cpuid_count(7, 1, &eax71, &b, &c, &d);
    }
    cpu->fma = avx && fma && os_ymm;
    cpu->avx2 = avx && os_ymm && ((b7 >> 5) & 1);
    cpu->avx512f = os_zmm && ((b7 >> 16) & 1);
    cpu->avx512dq = cpu->avx512f && ((b7 >> 17) & 1);
    cpu->avx512bw = cpu->avx512f && ((b7 >> 30) & 1);
    cpu->avx512vl = cpu->avx512f && ((b7 >> 31) & 1);
    cpu->avx512_bf16 = cpu->avx512f && ((eax71 >> 5) & 1); /* CPUID.(7,1):EAX[5] */
}
#else
void cz_cpu_detect(cz_cpu *cpu) {
    memset(cpu, 0, sizeof *cpu);
}
#endif

const char *cz_cpu_describe(const cz_cpu *cpu, char *buf, int len) {
    snprintf(buf, (size_t)len, "%s family 0x%x model 0x%x stepping %d:%s%s%s%s%s%s%s",
             cpu->vendor[0] ? cpu->vendor : "unknown", cpu->family, cpu->model, cpu->stepping,
             cpu->avx2 ? " avx2" : "", cpu->fma ? " fma" : "", cpu->avx512f ? " avx512f" : "",
             cpu->avx512dq ? " avx512dq" : "", cpu->avx512bw ? " avx512bw" : "",
             cpu->avx512vl ? " avx512vl" : "", cpu->avx512_bf16 ? " avx512_bf16" : "");
    return buf;
}
