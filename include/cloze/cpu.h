/* cpu: what the processor and the operating system let us run.
 *
 * Read once at start-up (CPUID, XGETBV) and passed to whoever picks a code
 * path, today the GEMM micro-kernel (kernels.h, cz_gemm_setup). An ISA
 * extension counts as usable only when the CPU reports it AND the OS saves
 * its registers on a context switch (XCR0 bits, read with XGETBV): a CPU with
 * AVX-512 under a kernel that does not enable the ZMM state faults on the
 * first AVX-512 instruction. Sources: Intel SDM vol. 1, 13.3 ("Enabling the
 * XSAVE feature set") and vol. 2A, CPUID leaf 7; AMD APM vol. 3, CPUID. */
#ifndef CLOZE_CPU_H
#define CLOZE_CPU_H

typedef struct cz_cpu {
    char vendor[13]; /* "GenuineIntel", "AuthenticAMD", ... */
    int family;      /* display family: base + extended when base == 0xF */
    int model;       /* display model: (extended << 4) + base for family 6/0xF+ */
    int stepping;
    /* usable = reported by CPUID and enabled by the OS (XCR0) */
    int avx2, fma;
    int avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16;
} cz_cpu;

/* Fills *cpu for the processor this runs on (all zero on non-x86 builds). */
void cz_cpu_detect(cz_cpu *cpu);

/* One line such as "AuthenticAMD family 0x19 model 0x11: avx2 fma avx512f ...". */
const char *cz_cpu_describe(const cz_cpu *cpu, char *buf, int len);

#endif
