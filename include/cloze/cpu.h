/* cpu: what the processor and the operating system let us run, and the one
 * place that decides which instruction set each kernel family runs.
 *
 * Read at start-up (CPUID, XGETBV). Three families, each decided here from
 * CPUID and one environment variable (below): the nn kernels and the
 * optimizer (cz_cpu_kernel_isa, CLOZE_KERNELS), the fp32 GEMM's BLIS
 * configuration (cz_cpu_blis_config, BLIS_ARCH_TYPE) and the bf16 GEMM's
 * kernel (cz_cpu_choose over the table of src/kernels/gemm_bf16.c,
 * CLOZE_BF16_KERNEL). The kernels module only runs what was decided. An ISA
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
    /* AMX (CPUID.(7,0):EDX[24] tile, [22] bf16) with XCR0 bits 17
     * (XTILECFG) and 18 (XTILEDATA) enabled by the OS. Linux additionally
     * wants a per-process permission request before the first tile
     * instruction (cz_cpu_choose makes it). */
    int amx_tile, amx_bf16;
} cz_cpu;

/* Fills *cpu for the processor this runs on (all zero on non-x86 builds). */
void cz_cpu_detect(cz_cpu *cpu);

/* One line such as "AuthenticAMD family 0x19 model 0x11: avx2 fma avx512f ...". */
const char *cz_cpu_describe(const cz_cpu *cpu, char *buf, int len);

/* ---- the instruction set of the non-GEMM kernels and the optimizer ----
 * src/kernels/nn_vec.c and src/optim/adamw_vec.c are compiled once per set
 * (CMakeLists.txt); this picks the copy that runs. SCALAR is the plain
 * reference loops of nn.c (for the optimizer: the baseline copy, which has
 * the same bits); BASELINE the portable copy (SSE2 on x86-64, NEON on
 * aarch64); AVX2 needs AVX2 + FMA; AVX512 needs AVX-512 F, BW, VL, DQ. */
typedef enum { CZ_ISA_SCALAR = 0, CZ_ISA_BASELINE, CZ_ISA_AVX2, CZ_ISA_AVX512 } cz_isa;

/* 1 where the build has the AVX2 and AVX-512 copies (x86-64, GCC/Clang) */
#if defined(__x86_64__) && defined(__GNUC__)
#define CZ_HAVE_X86_ISAS 1
#else
#define CZ_HAVE_X86_ISAS 0
#endif

/* The widest set this CPU and build can run. */
cz_isa cz_cpu_best_isa(const cz_cpu *cpu);
/* "scalar", "baseline", "avx2", "avx512" */
const char *cz_isa_name(cz_isa isa);
/* Parses a name above ("auto" = -1); -2 for anything else. */
int cz_isa_parse(const char *name);

/* The set the kernels run, decided once per process (the CPU does not
 * change under it, so this is the one cached answer in core besides the
 * log settings) by core's rule (cz_cpu_choose) over the four sets (scalar
 * rank 0: only when forced; then baseline, avx2, avx512 by width), with the
 * environment's CLOZE_KERNELS=scalar|baseline|avx2|avx512|auto. A forced
 * set the CPU cannot run is not taken: the best one is, with a warning,
 * and cz_cpu_kernel_isa_refused says so (tests skip on it). */
cz_isa cz_cpu_kernel_isa(void);
/* How the choice was made, e.g. "avx2 (forced by CLOZE_KERNELS=avx2; the CPU
 * has avx512)" or "avx512 (the best this CPU has)". */
const char *cz_cpu_kernel_isa_note(void);
/* 1 when CLOZE_KERNELS asked for a set this CPU cannot run. */
int cz_cpu_kernel_isa_refused(void);

/* ---- the fp32 GEMM: BLIS's configuration ----
 * The BLIS 0.9.0 configuration (sub-configuration name, as
 * bli_arch_string spells it) that runs cz_gemm's fp32 products on this CPU:
 * "skx" (AVX-512 F, DQ, BW, VL + AVX2/FMA, what BLIS's own skx check asks)
 * except on AMD family 0x19 (Zen 3/Zen 4: 256-bit units, skx measured no
 * faster on large products and slower on attention-sized ones,
 * docs/performance.md, "Design decisions") unless force_avx512; else the
 * AVX2/FMA kernels ("zen3" on AMD family >= 0x19, "zen2" on 0x17,
 * "haswell" otherwise); NULL where nothing better than BLIS's own table is
 * known. BLIS's own environment variable BLIS_ARCH_TYPE (an arch_t number)
 * overrides it: *why says which applied ("chosen from CPUID",
 * "BLIS_ARCH_TYPE=5 set by the user"). Pure: BLIS itself fixes one
 * configuration per process (cz_gemm_setup). */
const char *cz_cpu_blis_config(const cz_cpu *cpu, int force_avx512, char *why, int len);
/* "AVX-512", "AVX2/FMA", "portable C" or "other" for a configuration name */
const char *cz_cpu_blis_isa(const char *config);

/* ---- choosing a kernel from a table: the one rule ----
 * A kernel family whose kernels are descriptors in a table (the bf16 GEMM's:
 * src/kernels/gemm_bf16.c) hands core each one's name, the CPU features it
 * needs and its preference rank, and core decides which runs
 * (cz_cpu_choose). The table stays with its functions in the family's
 * module; the rule stays here. */

/* What a kernel needs, as bits; each is usable (CPUID and the OS's XCR0)
 * or not (cz_cpu_features). */
enum {
    CZ_NEEDS_X86 = 1u << 0,    /* an x86-64 build with GCC/Clang (CZ_HAVE_X86_ISAS) */
    CZ_NEEDS_AVX2 = 1u << 1,   /* AVX2 + FMA */
    CZ_NEEDS_AVX512 = 1u << 2, /* AVX-512 F, DQ, BW, VL + AVX2/FMA */
    CZ_NEEDS_AVX512_BF16 = 1u << 3,
    /* AMX-TILE + AMX-BF16. Linux also wants a per-process permission
     * request before the first tile instruction (arch_prctl
     * ARCH_REQ_XCOMP_PERM for XTILEDATA): cz_cpu_choose makes it for a
     * kernel that needs this bit, once it is about to be chosen. */
    CZ_NEEDS_AMX_BF16 = 1u << 4,
};
/* The CZ_NEEDS_ bits this CPU and build have (the permission not asked). */
unsigned cz_cpu_features(const cz_cpu *cpu);

typedef struct cz_cpu_choice {
    const char *name; /* as the family's environment variable spells it */
    unsigned needs;   /* CZ_NEEDS_ bits */
    int rank;         /* higher is preferred; 0: runs only when forced */
} cz_cpu_choice;

/* The first time a kernel is about to be chosen, its family checks it
 * (runs a small product against the reference): 0 when it is right, else
 * -1 with why. It runs inside cz_cpu_guard, so a fault in it is a failed
 * check, not a crash. */
typedef int (*cz_cpu_check_fn)(int index, char *why, int len);

typedef struct cz_cpu_chosen {
    int index;   /* into the table; -1: none of it runs here */
    int refused; /* the environment forced a kernel this CPU cannot run */
    int failed;  /* a kernel was passed over: its check failed or faulted,
                  * or the OS refused its permission (said in one line) */
    char note[256];
} cz_cpu_chosen;

/* The one decision. Candidates are the kernels whose needs this CPU has:
 * with `env` (the family's variable) unset, empty or "auto", those of rank
 * > 0 from the highest rank down; with env naming a kernel, that one
 * first. The first candidate whose OS permission is granted (AMX) and whose
 * check passes is chosen; each one passed over is logged in one line and
 * the next is tried: a kernel that fails its check or faults never runs
 * the process's products. A name that is not in the table, or a kernel
 * the CPU cannot run, is warned about once and the choice is as for
 * "auto" (refused then says so). check may be NULL; n <= 64. */
void cz_cpu_choose(const cz_cpu *cpu, const cz_cpu_choice *const *table, int n, const char *env,
                   cz_cpu_check_fn check, cz_cpu_chosen *out);
/* The index cz_cpu_choose takes with no environment variable, before any
 * permission or check: the highest rank > 0 whose needs cpu has; -1 if
 * none. Pure: for tests of the rule on made-up CPUs. */
int cz_cpu_best_choice(const cz_cpu *cpu, const cz_cpu_choice *const *table, int n);

/* Runs fn(index, why, len) on this thread so that a fault it causes
 * (SIGILL: an instruction the CPU or OS does not allow; SIGSEGV, SIGBUS;
 * SIGTRAP: a compiler's trap) returns -1 with the signal named in why
 * instead of killing the process: the handlers are installed for the call
 * and the previous ones put back (the OpenSSL way of probing an
 * instruction set). fn must run on the calling thread alone (no OpenMP
 * region: a jump out of one is undefined) and own no lock. Returns fn's
 * result otherwise. */
int cz_cpu_guard(cz_cpu_check_fn fn, int index, char *why, int len);

/* ---- the CPUs this process may run on ----
 * Threads per rank come from the CPUs the process is allowed (its affinity
 * mask, sched_getaffinity: what taskset, a Slurm cgroup cpuset or mpirun
 * --bind-to leave it), not from the CPUs the machine has online: a rank
 * that starts more threads than it has CPUs waits in BLIS's and OpenMP's
 * spinning barriers for a thread that is not running (docs/performance.md,
 * "Threads per rank"). */
#define CZ_CPU_SET_WORDS 16 /* CPUs 0..1023 */
typedef struct cz_cpu_set {
    unsigned long long bits[CZ_CPU_SET_WORDS];
} cz_cpu_set;

/* Fills *set with this process's allowed CPUs and returns how many there
 * are; where the mask cannot be read (or on CPUs past 1023) it falls back to
 * the online CPUs, set = 0..n-1. Always >= 1. */
int cz_cpu_allowed(cz_cpu_set *set);
int cz_cpu_set_count(const cz_cpu_set *set);

/* The thread plan of the ranks of one node, from their allowed sets
 * (masks[0..n), this rank's at index me). A rank shares its CPUs with every
 * rank whose set overlaps its own (itself included): it gets
 * max(1, |own set| / sharers) threads, or `fixed` when fixed > 0 (the
 * configured train.threads). `quota` > 0 (cz_cpu_quota, in CPUs) caps
 * the node's ranks, taken to share one cgroup as the ranks of one job do,
 * at max(1, floor(quota)) CPUs together: a rank then gets at most that / n
 * threads. `demand` is the sum of every rank's threads, `cpus` the size of
 * the union of the sets (capped by the quota): demand > cpus means the node
 * is oversubscribed (the caller warns). */
/* ---- a CPU-time quota (cgroup v2 cpu.max) ----
 * A cgroup v2 `cpu.max` of "QUOTA PERIOD" (docker --cpus, systemd
 * CPUQuota=, a Kubernetes CPU limit, Slurm's cgroup plugin) lets the
 * cgroup's processes run QUOTA / PERIOD CPUs' worth of time per period
 * however many CPUs their affinity masks hold: threads beyond it are
 * throttled for the rest of each period, and the others wait for them in
 * BLIS's and OpenMP's spinning barriers, as with too few CPUs. */
/* QUOTA / PERIOD of a cpu.max text; 0 for "max PERIOD" (no limit) or text
 * that is not a quota. */
double cz_cpu_parse_cpu_max(const char *text);
/* The tightest quota of this process's cgroup and its ancestors, in CPUs
 * (0 = none, or no cgroup v2): the "0::PATH" line of proc_cgroup (normally
 * /proc/self/cgroup) names the cgroup below root (the cgroup2 mount,
 * normally /sys/fs/cgroup); each directory from it up to root may hold a
 * cpu.max. */
double cz_cpu_quota_at(const char *root, const char *proc_cgroup);
/* cz_cpu_quota_at of /sys/fs/cgroup and /proc/self/cgroup, or of
 * $CLOZE_CGROUP_ROOT and $CLOZE_PROC_CGROUP where set (tests). */
double cz_cpu_quota(void);

typedef struct cz_thread_plan {
    int threads; /* this rank's */
    int sharers; /* ranks whose sets overlap this rank's, itself included */
    int demand;  /* threads of all the node's ranks together */
    int cpus;    /* CPUs the node's ranks may use together */
} cz_thread_plan;
void cz_cpu_plan_threads(const cz_cpu_set *masks, int n, int me, int fixed, double quota,
                         cz_thread_plan *plan);

/* ---- peak arithmetic rate, the MFU denominator ----
 * fp32 peak of one core = FMA lanes x 2 flops x FMA pipes x clock. The
 * lanes come from CPUID (the widest usable FMA set); the pipes from a
 * table of known cores (Intel Skylake-SP and later with AVX-512: 2 x 512
 * bits; AMD Zen 1-4 and Intel AVX2 cores: 2 x 256 bits; Zen 4 runs AVX-512
 * on its 256-bit pipes, so 16 lanes per cycle either way); the clock from
 * cpufreq's cpuinfo_max_freq (the boost ceiling). Returns 0 (unknown) and
 * says why in `how` when the clock cannot be read (virtual machines often
 * have no cpufreq) or the core is not in the table. */
double cz_cpu_peak_gflops_per_core(const cz_cpu *cpu, char *how, int len);

/* "MFU 87.3%", or for mfu > 1 "MFU 112.0% (over 100%: ...)" saying why:
 * the denominator (`source`, e.g. "train.peak_gflops") is below what the
 * step reached, and when it was measured (`measured` = 1), that the probe
 * ran on a busy machine. */
const char *cz_format_mfu(double mfu, const char *source, int measured, char *buf, int len);

#endif
