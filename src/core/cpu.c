/* CPUID / XGETBV feature detection, the instruction set of every kernel
 * family (nn and optimizer, fp32 GEMM, bf16 GEMM) and the peak rate (see
 * cloze/cpu.h for the rules). */
#define _GNU_SOURCE /* sched_getaffinity, cpu_set_t */
#include "cloze/cpu.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cloze/core.h"

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

    unsigned b7 = 0, d7 = 0, eax71 = 0;
    if (max_leaf >= 7) {
        __get_cpuid_count(7, 0, &a, &b7, &c, &d7);
        __get_cpuid_count(7, 1, &eax71, &b, &c, &d);
    }
    cpu->fma = avx && fma && os_ymm;
    cpu->avx2 = avx && os_ymm && ((b7 >> 5) & 1);
    cpu->avx512f = os_zmm && ((b7 >> 16) & 1);
    cpu->avx512dq = cpu->avx512f && ((b7 >> 17) & 1);
    cpu->avx512bw = cpu->avx512f && ((b7 >> 30) & 1);
    cpu->avx512vl = cpu->avx512f && ((b7 >> 31) & 1);
    cpu->avx512_bf16 = cpu->avx512f && ((eax71 >> 5) & 1); /* CPUID.(7,1):EAX[5] */
    /* AMX: CPUID.(7,0):EDX[24] AMX-TILE, [22] AMX-BF16; XCR0[17] XTILECFG
     * and [18] XTILEDATA (Intel SDM vol. 1, 13.2 and 18.2) */
    int os_tiles = (xcr0 & 0x60000) == 0x60000;
    cpu->amx_tile = os_tiles && ((d7 >> 24) & 1);
    cpu->amx_bf16 = cpu->amx_tile && ((d7 >> 22) & 1);
}
#else
void cz_cpu_detect(cz_cpu *cpu) {
    memset(cpu, 0, sizeof *cpu);
}
#endif

const char *cz_cpu_describe(const cz_cpu *cpu, char *buf, int len) {
    snprintf(buf, (size_t)len, "%s family 0x%x model 0x%x stepping %d:%s%s%s%s%s%s%s%s%s",
             cpu->vendor[0] ? cpu->vendor : "unknown", cpu->family, cpu->model, cpu->stepping,
             cpu->avx2 ? " avx2" : "", cpu->fma ? " fma" : "", cpu->avx512f ? " avx512f" : "",
             cpu->avx512dq ? " avx512dq" : "", cpu->avx512bw ? " avx512bw" : "",
             cpu->avx512vl ? " avx512vl" : "", cpu->avx512_bf16 ? " avx512_bf16" : "",
             cpu->amx_tile ? " amx_tile" : "", cpu->amx_bf16 ? " amx_bf16" : "");
    return buf;
}

/* ---- the kernels' instruction set ----
 * A table for core's rule (cz_cpu_choose, below), as the bf16 kernels'
 * is: scalar only when forced, then by width. */

static const cz_cpu_choice isa_table[] = {
    {"scalar", 0, 0},
    {"baseline", 0, 1},
    {"avx2", CZ_NEEDS_X86 | CZ_NEEDS_AVX2, 2},
    {"avx512", CZ_NEEDS_X86 | CZ_NEEDS_AVX512, 3},
};
#define N_ISAS ((int)(sizeof isa_table / sizeof isa_table[0]))

static void isa_choices(const cz_cpu_choice *choices[N_ISAS]) {
    for (int i = 0; i < N_ISAS; i++) choices[i] = &isa_table[i];
}

const char *cz_isa_name(cz_isa isa) {
    return isa >= CZ_ISA_SCALAR && isa <= CZ_ISA_AVX512 ? isa_table[isa].name : "unknown";
}

int cz_isa_parse(const char *name) {
    if (!strcmp(name, "auto")) return -1;
    for (int i = 0; i < N_ISAS; i++)
        if (!strcmp(name, isa_table[i].name)) return i;
    return -2;
}

cz_isa cz_cpu_best_isa(const cz_cpu *cpu) {
    const cz_cpu_choice *choices[N_ISAS];
    isa_choices(choices);
    int best = cz_cpu_best_choice(cpu, choices, N_ISAS);
    return best < 0 ? CZ_ISA_BASELINE : (cz_isa)best;
}

static struct {
    pthread_once_t once;
    cz_cpu_chosen chosen;
} kernel_isa = {PTHREAD_ONCE_INIT, {CZ_ISA_SCALAR, 0, 0, ""}};

static void decide_kernel_isa(void) {
    cz_cpu cpu;
    cz_cpu_detect(&cpu);
    const cz_cpu_choice *choices[N_ISAS];
    isa_choices(choices);
    cz_cpu_choose(&cpu, choices, N_ISAS, "CLOZE_KERNELS", NULL, &kernel_isa.chosen);
    if (kernel_isa.chosen.index < 0)
        kernel_isa.chosen.index = CZ_ISA_BASELINE; /* (needs nothing) */
}

cz_isa cz_cpu_kernel_isa(void) {
    pthread_once(&kernel_isa.once, decide_kernel_isa);
    return (cz_isa)kernel_isa.chosen.index;
}

const char *cz_cpu_kernel_isa_note(void) {
    pthread_once(&kernel_isa.once, decide_kernel_isa);
    return kernel_isa.chosen.note;
}

int cz_cpu_kernel_isa_refused(void) {
    pthread_once(&kernel_isa.once, decide_kernel_isa);
    return kernel_isa.chosen.refused;
}

/* ---- the fp32 GEMM's BLIS configuration ---- */

static int has_avx512(const cz_cpu *cpu) {
    return cpu->avx512f && cpu->avx512dq && cpu->avx512bw && cpu->avx512vl && cpu->avx2 && cpu->fma;
}

const char *cz_cpu_blis_config(const cz_cpu *cpu, int force_avx512, char *why, int len) {
    const char *env = getenv("BLIS_ARCH_TYPE");
    int amd = strcmp(cpu->vendor, "AuthenticAMD") == 0;
    const char *config = NULL;
    if (has_avx512(cpu) && (force_avx512 || !(amd && cpu->family == 0x19)))
        config = "skx";
    else if (cpu->avx2 && cpu->fma)
        config = !amd                  ? "haswell"
                 : cpu->family >= 0x19 ? "zen3"
                 : cpu->family == 0x17 ? "zen2"
                                       : "haswell";
    if (env && *env)
        snprintf(why, (size_t)len, "BLIS_ARCH_TYPE=%s set by the user", env);
    else if (config)
        snprintf(why, (size_t)len, "chosen from CPUID");
    else
        snprintf(why, (size_t)len, "no better kernel known for this CPU");
    return config;
}

const char *cz_cpu_blis_isa(const char *config) {
    if (!config) return "other";
    if (!strcmp(config, "skx")) return "AVX-512";
    if (!strcmp(config, "haswell") || !strncmp(config, "zen", 3)) return "AVX2/FMA";
    if (!strcmp(config, "generic")) return "portable C";
    return "other";
}

/* ---- choosing a kernel from a table ---- */

unsigned cz_cpu_features(const cz_cpu *cpu) {
    unsigned f = 0;
    if (!CZ_HAVE_X86_ISAS) return 0; /* no x86 kernel is built to use them */
    f |= CZ_NEEDS_X86;
    if (cpu->avx2 && cpu->fma) f |= CZ_NEEDS_AVX2;
    if (has_avx512(cpu)) f |= CZ_NEEDS_AVX512;
    if (has_avx512(cpu) && cpu->avx512_bf16) f |= CZ_NEEDS_AVX512_BF16;
    if (cpu->amx_tile && cpu->amx_bf16) f |= CZ_NEEDS_AMX_BF16;
    return f;
}

static int runs_on(const cz_cpu_choice *c, unsigned have) {
    return (c->needs & ~have) == 0;
}

int cz_cpu_best_choice(const cz_cpu *cpu, const cz_cpu_choice *const *table, int n) {
    unsigned have = cz_cpu_features(cpu);
    int best = -1;
    for (int i = 0; i < n; i++)
        if (table[i]->rank > 0 && runs_on(table[i], have) &&
            (best < 0 || table[i]->rank > table[best]->rank))
            best = i;
    return best;
}

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
/* Linux (5.16+) keeps the 8 KiB of tile data out of a process's signal
 * frames and context switches until it asks for them once
 * (Documentation/arch/x86/xstate.rst); a tile instruction before that
 * faults. 0x1023 = ARCH_REQ_XCOMP_PERM, 18 = XFEATURE_XTILEDATA. */
static int amx_permission(char *why, int len) {
    long rc = syscall(SYS_arch_prctl, 0x1023, 18);
    if (rc == 0) return 1;
    snprintf(why, (size_t)len, "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) refused");
    return 0;
}
#else
static int amx_permission(char *why, int len) {
    snprintf(why, (size_t)len, "no AMX permission request on this system");
    return 0;
}
#endif

/* ---- the fault guard ----
 * One guarded call at a time (the mutex): the handlers are process-wide,
 * and the jump buffer is the guarded thread's. A fault on another thread
 * meanwhile would also jump here; the callers run in a pthread_once at
 * start-up, when nothing else computes. */
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static sigjmp_buf guard_jump;
static const int guard_signals[] = {SIGILL, SIGSEGV, SIGBUS, SIGTRAP};
#define GUARD_N ((int)(sizeof guard_signals / sizeof guard_signals[0]))

static void guard_handler(int sig) {
    siglongjmp(guard_jump, sig);
}

int cz_cpu_guard(cz_cpu_check_fn fn, int index, char *why, int len) {
    pthread_mutex_lock(&guard_lock);
    struct sigaction on, old[GUARD_N];
    memset(&on, 0, sizeof on);
    on.sa_handler = guard_handler;
    sigemptyset(&on.sa_mask);
    for (int i = 0; i < GUARD_N; i++) sigaction(guard_signals[i], &on, &old[i]);
    volatile int rc;
    /* savemask 1: the jump restores the signal mask the kernel blocked the
     * faulting signal in */
    int sig = sigsetjmp(guard_jump, 1);
    if (sig == 0)
        rc = fn(index, why, len);
    else {
        rc = -1;
        snprintf(why, (size_t)len, "it faulted (%s)", strsignal(sig));
    }
    for (int i = 0; i < GUARD_N; i++) sigaction(guard_signals[i], &old[i], NULL);
    pthread_mutex_unlock(&guard_lock);
    return rc;
}

/* Permission and check of table[i]: 1 when it may run, else 0 with why */
static int usable(const cz_cpu_choice *c, int i, cz_cpu_check_fn check, char *why, int len) {
    if ((c->needs & CZ_NEEDS_AMX_BF16) && !amx_permission(why, len)) return 0;
    if (check && cz_cpu_guard(check, i, why, len) != 0) return 0;
    return 1;
}

void cz_cpu_choose(const cz_cpu *cpu, const cz_cpu_choice *const *table, int n, const char *env,
                   cz_cpu_check_fn check, cz_cpu_chosen *out) {
    memset(out, 0, sizeof *out);
    out->index = -1;
    if (n > 64) n = 64; /* (tables hold a handful) */
    unsigned have = cz_cpu_features(cpu);
    const char *want_name = getenv(env);
    int want = -1;
    if (want_name && *want_name && strcmp(want_name, "auto") != 0) {
        for (int i = 0; i < n && want < 0; i++)
            if (!strcmp(want_name, table[i]->name)) want = i;
        if (want < 0) {
            char names[160] = "";
            for (int i = 0; i < n; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ",
                         table[i]->name);
            cz_warn("%s=%s is not one of %sauto: choosing as for auto", env, want_name, names);
        } else if (!runs_on(table[want], have)) {
            cz_warn("%s=%s: this CPU cannot run it; choosing as for auto", env, want_name);
            out->refused = 1;
            want = -1;
        }
    }
    /* the candidates in order: the forced one, then by rank */
    int tried[64] = {0};
    char why[160] = "", passed[200] = "";
    for (int step = 0; step <= n && out->index < 0; step++) {
        int i = -1;
        if (step == 0)
            i = want;
        else
            for (int j = 0; j < n; j++)
                if (!tried[j] && table[j]->rank > 0 && runs_on(table[j], have) &&
                    (i < 0 || table[j]->rank > table[i]->rank))
                    i = j;
        if (i < 0) continue;
        tried[i] = 1;
        if (usable(table[i], i, check, why, sizeof why)) {
            out->index = i;
            break;
        }
        /* the one line that says a kernel was passed over */
        out->failed = 1;
        cz_warn("%s: kernel %s not used: %s; trying the next one", env, table[i]->name, why);
        snprintf(passed + strlen(passed), sizeof passed - strlen(passed), "; %s not used: %s",
                 table[i]->name, why);
    }
    const char *name = out->index >= 0 ? table[out->index]->name : "none";
    int best = cz_cpu_best_choice(cpu, table, n);
    if (want >= 0 && out->index == want)
        snprintf(out->note, sizeof out->note, "%s (forced by %s=%s; the CPU has %s)", name, env,
                 want_name, best >= 0 ? table[best]->name : "none");
    else if (out->refused)
        snprintf(out->note, sizeof out->note, "%s (%s=%s asked for more than this CPU has%s)", name,
                 env, want_name, passed);
    else
        snprintf(out->note, sizeof out->note, "%s (the best this CPU has%s)", name, passed);
}

/* ---- allowed CPUs and threads per rank ---- */

int cz_cpu_set_count(const cz_cpu_set *set) {
    int n = 0;
    for (int w = 0; w < CZ_CPU_SET_WORDS; w++) n += __builtin_popcountll(set->bits[w]);
    return n;
}

int cz_cpu_allowed(cz_cpu_set *set) {
    memset(set, 0, sizeof *set);
    int n = 0;
#ifdef __linux__
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, &mask)) continue;
            if (c >= 64 * CZ_CPU_SET_WORDS) {
                n = 0;
                break;
            } /* past our set: fall back */
            set->bits[c / 64] |= 1ULL << (c % 64);
            n++;
        }
    }
#endif
    if (n > 0) return n;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online < 1 ? 1 : online > 64 * CZ_CPU_SET_WORDS ? 64 * CZ_CPU_SET_WORDS : (int)online;
    memset(set, 0, sizeof *set);
    for (int c = 0; c < n; c++) set->bits[c / 64] |= 1ULL << (c % 64);
    return n;
}

static int sets_overlap(const cz_cpu_set *a, const cz_cpu_set *b) {
    for (int w = 0; w < CZ_CPU_SET_WORDS; w++)
        if (a->bits[w] & b->bits[w]) return 1;
    return 0;
}

/* cap: CPUs the quota leaves the node's n ranks together (0 = no quota) */
static int threads_of(const cz_cpu_set *masks, int n, int r, int fixed, int cap, int *sharers) {
    int k = 0;
    for (int j = 0; j < n; j++) k += sets_overlap(&masks[r], &masks[j]);
    if (k < 1) k = 1; /* an empty set overlaps nothing, not even itself */
    if (sharers) *sharers = k;
    if (fixed > 0) return fixed;
    int t = cz_cpu_set_count(&masks[r]) / k;
    if (cap > 0 && t > cap / n) t = cap / n;
    return t < 1 ? 1 : t;
}

void cz_cpu_plan_threads(const cz_cpu_set *masks, int n, int me, int fixed, double quota,
                         cz_thread_plan *plan) {
    /* floor, not round: a thread past the quota is throttled each period */
    int cap = quota > 0 ? (quota < 1 ? 1 : quota > 1 << 20 ? 1 << 20 : (int)quota) : 0;
    cz_cpu_set all;
    memset(&all, 0, sizeof all);
    plan->demand = 0;
    for (int r = 0; r < n; r++) {
        plan->demand += threads_of(masks, n, r, fixed, cap, NULL);
        for (int w = 0; w < CZ_CPU_SET_WORDS; w++) all.bits[w] |= masks[r].bits[w];
    }
    plan->threads = threads_of(masks, n, me, fixed, cap, &plan->sharers);
    plan->cpus = cz_cpu_set_count(&all);
    if (cap > 0 && plan->cpus > cap) plan->cpus = cap;
}

double cz_cpu_parse_cpu_max(const char *text) {
    char q[32];
    double period;
    if (sscanf(text, "%31s %lf", q, &period) != 2 || !(period > 0)) return 0;
    char *end;
    double quota = strtod(q, &end); /* "max": end == q */
    return end != q && *end == 0 && quota > 0 ? quota / period : 0;
}

double cz_cpu_quota_at(const char *root, const char *proc_cgroup) {
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return 0;
    char line[4096], dir[8192] = "";
    int v2 = 0;
    while (!v2 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) != 0) continue;
        line[strcspn(line, "\n")] = 0;
        v2 = snprintf(dir, sizeof dir, "%s%s", root, line + 3) < (int)sizeof dir;
    }
    fclose(f);
    if (!v2) return 0;
    size_t root_len = strlen(root);
    double best = 0;
    for (;;) { /* this cgroup, then each ancestor up to the root */
        size_t len = strlen(dir);
        while (len > root_len && dir[len - 1] == '/') dir[--len] = 0;
        char path[8300], text[128];
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        FILE *m = fopen(path, "r");
        if (m) {
            double q = fgets(text, sizeof text, m) ? cz_cpu_parse_cpu_max(text) : 0;
            fclose(m);
            if (q > 0 && (best == 0 || q < best)) best = q;
        }
        char *slash = strrchr(dir, '/');
        if (len <= root_len || !slash || (size_t)(slash - dir) < root_len) break;
        *slash = 0;
    }
    return best;
}

double cz_cpu_quota(void) {
    const char *root = getenv("CLOZE_CGROUP_ROOT"), *proc = getenv("CLOZE_PROC_CGROUP");
    return cz_cpu_quota_at(root ? root : "/sys/fs/cgroup", proc ? proc : "/proc/self/cgroup");
}

/* ---- peak rate ---- */

/* FMA lanes (fp32) and FMA pipes per core of a known core, 0 if unknown */
static int fma_shape(const cz_cpu *cpu, int *lanes, int *pipes) {
    int amd = !strcmp(cpu->vendor, "AuthenticAMD"), intel = !strcmp(cpu->vendor, "GenuineIntel");
    *pipes = 2;
    if (amd && cpu->family == 0x17) /* Zen 1: 2 x 128-bit FMA; Zen 2: 2 x 256 */
        *lanes = cpu->model < 0x30 ? 4 : 8;
    else if (amd && cpu->family == 0x19) /* Zen 3, Zen 4 (AVX-512 on 256-bit pipes) */
        *lanes = 8;
    else if (amd && cpu->family == 0x1A) /* Zen 5 */
        *lanes = cpu->avx512f ? 16 : 8;
    else if (intel && cpu->family == 6)
        *lanes = cpu->avx512f ? 16 : cpu->fma ? 8 : 0;
    else
        *lanes = 0;
    return *lanes > 0;
}

double cz_cpu_peak_gflops_per_core(const cz_cpu *cpu, char *how, int len) {
    int lanes, pipes;
    if (!fma_shape(cpu, &lanes, &pipes)) {
        snprintf(how, (size_t)len, "no FMA width table entry for %s family 0x%x",
                 cpu->vendor[0] ? cpu->vendor : "this CPU", cpu->family);
        return 0;
    }
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (f) {
        if (fscanf(f, "%ld", &khz) != 1) khz = 0;
        fclose(f);
    }
    if (khz <= 0) {
        snprintf(how, (size_t)len, "the maximum clock is not readable (no cpufreq)");
        return 0;
    }
    double ghz = (double)khz / 1e6;
    snprintf(how, (size_t)len, "%d fp32 lanes x 2 (FMA) x %d pipes x %.2f GHz", lanes, pipes, ghz);
    return lanes * 2.0 * pipes * ghz;
}

const char *cz_format_mfu(double mfu, const char *source, int measured, char *buf, int len) {
    if (!(mfu > 1.0))
        snprintf(buf, (size_t)len, "MFU %.1f%%", 100 * mfu);
    else
        snprintf(buf, (size_t)len,
                 "MFU %.1f%% (over 100%%: this step ran faster than the denominator, %s%s)",
                 100 * mfu, source,
                 measured ? ", which was probed while the machine was busy; set "
                            "train.peak_gflops for a fixed one"
                          : "");
    return buf;
}
