/* core: Philox known-answer vectors (Random123's kat_vectors), the
 * statistical sanity of the derived draws, atomic file writes, SHA-256
 * (FIPS 180-4 examples, split updates, a file against sha256sum), parallel
 * arrays grown together (cz_grow), and the rule that chooses a kernel from
 * a table (cz_cpu_choose) with its fault guard (cz_cpu_guard). */
#include "cloze/core.h"
#include "cloze/cpu.h"
#include "cloze/rng.h"
#include "cloze/sha256.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static void kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                const uint32_t expect[4]) {
    cz_rng_stream s = {{k0, k1}, ((uint64_t)c3 << 32) | c2};
    uint32_t out[4];
    cz_philox4x32(&s, ((uint64_t)c1 << 32) | c0, out);
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == expect[i], "philox word %d: got %08x want %08x", i, out[i], expect[i]);
}

static void test_philox_kat(void) {
    const uint32_t e0[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    kat(0, 0, 0, 0, 0, 0, e0);
    const uint32_t e1[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, e1);
    const uint32_t e2[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, e2);
}

static void test_distributions(void) {
    cz_rng_stream s = cz_rng_stream_make(1234, CZ_RNG_TEST, 1, 2, 3);
    const int n = 200000;
    double sum = 0, sumsq = 0, nsum = 0, nsumsq = 0;
    long below_counts[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = cz_rng_uniform(&s, (uint64_t)i);
        CHECK(u >= 0 && u < 1, "uniform out of range: %g", u);
        sum += u;
        sumsq += u * u;
        double z = cz_rng_normal(&s, (uint64_t)i);
        nsum += z;
        nsumsq += z * z;
        below_counts[cz_rng_below(&s, (uint64_t)(2 * i), 10)]++;
    }
    double mean = sum / n, var = sumsq / n - mean * mean;
    CHECK(fabs(mean - 0.5) < 0.005, "uniform mean %g", mean);
    CHECK(fabs(var - 1.0 / 12) < 0.002, "uniform variance %g", var);
    CHECK(fabs(nsum / n) < 0.01, "normal mean %g", nsum / n);
    CHECK(fabs(nsumsq / n - 1) < 0.02, "normal variance %g", nsumsq / n);
    for (int b = 0; b < 10; b++)
        CHECK(labs(below_counts[b] - n / 10) < n / 100, "below(10) bucket %d has %ld", b,
              below_counts[b]);
    /* different stream names give different numbers; same names the same */
    cz_rng_stream s2 = cz_rng_stream_make(1234, CZ_RNG_TEST, 1, 2, 4);
    cz_rng_stream s3 = cz_rng_stream_make(1234, CZ_RNG_TEST, 1, 2, 3);
    CHECK(cz_rng_u32(&s, 7) != cz_rng_u32(&s2, 7), "streams (..,3) and (..,4) collide");
    CHECK(cz_rng_u32(&s, 7) == cz_rng_u32(&s3, 7), "same stream, different numbers");
}

static void test_atomic_write(void) {
    char dir[] = "/tmp/cloze-core-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/file.bin", dir);
    cz_error err;
    CHECK(cz_write_file_atomic(path, "first", 5, &err) == 0, "%s", err.msg);
    /* a write into a directory that does not exist fails and says where */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/file.bin", dir);
    CHECK(cz_write_file_atomic(bad, "x", 1, &err) != 0, "write into missing dir succeeded");
    CHECK(strstr(err.msg, "missing/file.bin") != NULL, "error does not name file: %s", err.msg);
    void *data;
    size_t len;
    CHECK(cz_read_file(path, &data, &len, &err) == 0 && len == 5 && !memcmp(data, "first", 5),
          "read back");
    cz_free(data);
    unlink(path);
    rmdir(dir);
}

static void hex_of(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha_case(const char *msg, size_t len, size_t repeat, const char *want) {
    cz_sha256 s;
    cz_sha256_init(&s);
    for (size_t r = 0; r < repeat; r++) cz_sha256_update(&s, msg, len);
    uint8_t d[32];
    char hex[65];
    cz_sha256_final(&s, d);
    hex_of(d, hex);
    CHECK(strcmp(hex, want) == 0, "sha256 of %zu x [%.20s]: %s, want %s", repeat, msg, hex, want);
}

static void test_sha256(void) {
    /* FIPS 180-4 / NIST CSRC examples */
    sha_case("", 0, 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_case("abc", 3, 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_case(m448, strlen(m448), 1,
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    sha_case("a", 1, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* every split of messages around the block and padding boundaries gives
     * the digest of the one-shot update */
    uint8_t msg[200];
    for (int i = 0; i < 200; i++) msg[i] = (uint8_t)(i * 37 + 11);
    for (size_t len = 50; len <= 130; len++) {
        uint8_t one[32], split[32];
        cz_sha256 s;
        cz_sha256_init(&s);
        cz_sha256_update(&s, msg, len);
        cz_sha256_final(&s, one);
        for (size_t cut = 0; cut <= len; cut += 7) {
            cz_sha256_init(&s);
            cz_sha256_update(&s, msg, cut);
            cz_sha256_update(&s, msg + cut, len - cut);
            cz_sha256_final(&s, split);
            CHECK(memcmp(one, split, 32) == 0, "sha256 of %zu bytes split at %zu differs", len,
                  cut);
        }
    }
    /* a file of 3 blocks and a bit, against the sha256sum command */
    char dir[] = "/tmp/cloze-core-sha-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], cmd[512], want[65] = "", got[65];
    snprintf(path, sizeof path, "%s/f", dir);
    cz_error err;
    CHECK(cz_write_file_atomic(path, msg, 200, &err) == 0, "%s", err.msg);
    CHECK(cz_sha256_file(path, got, &err) == 0, "%s", err.msg);
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    if (p && fscanf(p, "%64s", want) == 1)
        CHECK(strcmp(got, want) == 0, "cz_sha256_file %s, sha256sum %s", got, want);
    if (p) pclose(p);
    snprintf(path, sizeof path, "%s/missing", dir);
    CHECK(cz_sha256_file(path, got, &err) != 0 && strstr(err.msg, "missing"), "missing file: %s",
          err.msg);
    snprintf(path, sizeof path, "%s/f", dir);
    unlink(path);
    rmdir(dir);
}

/* Threads per rank from the ranks' allowed sets: shared sets are divided,
 * disjoint ones are not; demand against the union says when to warn. */
static cz_cpu_set cpus(int first, int n) {
    cz_cpu_set s;
    memset(&s, 0, sizeof s);
    for (int c = first; c < first + n; c++) s.bits[c / 64] |= 1ULL << (c % 64);
    return s;
}

static void test_thread_plan(void) {
    cz_thread_plan p;
    cz_cpu_set one[1] = {cpus(0, 1)};
    cz_cpu_plan_threads(one, 1, 0, 0, 0, &p);
    CHECK(p.threads == 1 && p.cpus == 1 && p.demand == 1, "taskset -c 0: %d threads", p.threads);
    cz_cpu_set shared[2] = {cpus(0, 8), cpus(0, 8)};
    cz_cpu_plan_threads(shared, 2, 1, 0, 0, &p);
    CHECK(p.threads == 4 && p.sharers == 2 && p.demand == 8 && p.cpus == 8,
          "2 ranks on 8 shared CPUs: %d threads, %d sharers, demand %d", p.threads, p.sharers,
          p.demand);
    cz_cpu_set bound[2] = {cpus(0, 4), cpus(64, 4)}; /* --bind-to: disjoint, across words */
    cz_cpu_plan_threads(bound, 2, 0, 0, 0, &p);
    CHECK(p.threads == 4 && p.sharers == 1 && p.demand == 8 && p.cpus == 8,
          "2 ranks bound to 4 CPUs each: %d threads", p.threads);
    cz_cpu_set crowded[3] = {cpus(0, 1), cpus(0, 1), cpus(0, 1)};
    cz_cpu_plan_threads(crowded, 3, 2, 0, 0, &p);
    CHECK(p.threads == 1 && p.demand == 3 && p.cpus == 1, "3 ranks on 1 CPU: demand %d", p.demand);
    cz_cpu_plan_threads(one, 1, 0, 2, 0, &p);
    CHECK(p.threads == 2 && p.demand == 2 && p.cpus == 1, "fixed 2 threads on 1 CPU");
    /* a cgroup quota (cpu.max) caps the node's ranks together */
    cz_cpu_set wide[1] = {cpus(0, 16)};
    cz_cpu_plan_threads(wide, 1, 0, 0, 4.0, &p);
    CHECK(p.threads == 4 && p.cpus == 4 && p.demand == 4, "16 CPUs, quota 4: %d threads, cpus %d",
          p.threads, p.cpus);
    cz_cpu_plan_threads(wide, 1, 0, 0, 2.5, &p);
    CHECK(p.threads == 2 && p.cpus == 2, "quota 2.5: %d threads (floor)", p.threads);
    cz_cpu_plan_threads(shared, 2, 0, 0, 2.5, &p);
    CHECK(p.threads == 1 && p.cpus == 2 && p.demand == 2, "2 ranks, quota 2.5: %d threads, cpus %d",
          p.threads, p.cpus);
    cz_cpu_plan_threads(shared, 2, 0, 0, 0.5, &p);
    CHECK(p.threads == 1 && p.cpus == 1 && p.demand == 2,
          "2 ranks, quota 0.5: at least 1 thread, "
          "cpus %d, demand %d (the caller warns)",
          p.cpus, p.demand);
    cz_cpu_plan_threads(wide, 1, 0, 0, 64.0, &p);
    CHECK(p.threads == 16 && p.cpus == 16, "a quota above the mask: %d threads", p.threads);
    cz_cpu_set mine;
    int n = cz_cpu_allowed(&mine);
    CHECK(n >= 1 && n == cz_cpu_set_count(&mine) && n <= sysconf(_SC_NPROCESSORS_ONLN),
          "allowed CPUs %d", n);
}

/* cgroup v2 cpu.max: the text, and the tightest quota from the process's
 * cgroup up to the root, in a tree of sample files */
static void put(const char *dir, const char *name, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_cpu_quota(void) {
    CHECK(cz_cpu_parse_cpu_max("max 100000\n") == 0, "max: no limit");
    CHECK(cz_cpu_parse_cpu_max("150000 100000\n") == 1.5, "1.5 CPUs");
    CHECK(cz_cpu_parse_cpu_max("50000 100000") == 0.5, "0.5 CPUs");
    CHECK(cz_cpu_parse_cpu_max("") == 0 && cz_cpu_parse_cpu_max("150000") == 0 &&
              cz_cpu_parse_cpu_max("x 100000") == 0 && cz_cpu_parse_cpu_max("100 0") == 0 &&
              cz_cpu_parse_cpu_max("-5 100000") == 0,
          "malformed cpu.max texts are no quota");
    char root[] = "/tmp/cloze-test-cgroup-XXXXXX", job[600], step[700], proc[600];
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    snprintf(job, sizeof job, "%s/job", root);
    snprintf(step, sizeof step, "%s/step", job);
    mkdir(job, 0755);
    mkdir(step, 0755);
    snprintf(proc, sizeof proc, "%s/proc-cgroup", root);
    put(root, "cpu.max", "max 100000\n");
    put(job, "cpu.max", "250000 100000\n");
    put(step, "cpu.max", "max 100000\n");
    /* each step rewrites one file, then reads the quota */
    struct {
        const char *dir, *name, *text;
        double want;
        const char *what;
    } steps[] = {
        {root, "proc-cgroup", "4:memory:/elsewhere\n0::/job/step\n", 2.5,
         "the parent's quota binds its children"},
        {step, "cpu.max", "120000 100000\n", 1.2, "the tightest of the chain"},
        {root, "proc-cgroup", "0::/\n", 0, "a root of 'max'"},
        {root, "cpu.max", "50000 100000\n", 0.5, "a container's own root (cgroup namespace)"},
        {root, "proc-cgroup", "4:cpu,cpuacct:/job\n", 0, "cgroup v1 only: no quota read"},
    };
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        put(steps[k].dir, steps[k].name, steps[k].text);
        double q = cz_cpu_quota_at(root, proc);
        CHECK(q == steps[k].want, "%s: %g, want %g", steps[k].what, q, steps[k].want);
    }
    CHECK(cz_cpu_quota_at(root, "/nonexistent/cgroup") == 0, "no /proc/self/cgroup: no quota");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0, "cleanup");
}

/* Three columns of different widths grown together from 0 by doubling
 * (first 4): capacity 4, 8, 16, ... exactly when n reaches it, and every
 * value written before a growth still there after it. */
static void test_grow(void) {
    uint8_t *a = NULL;
    uint32_t *b = NULL;
    double *c = NULL;
    uint32_t cap = 0, grew = 0;
    cz_error err;
    for (uint32_t n = 0; n < 100; n++) {
        const cz_grow_item cols[] = {CZ_GROW_ITEM(a), CZ_GROW_ITEM(b), CZ_GROW_ITEM(c)};
        uint32_t before = cap;
        CHECK(cz_grow(cols, 3, n, &cap, 4, "test", "rows", &err) == 0, "grow at %u: %s", n,
              err.msg);
        if (cap != before) {
            grew++;
            CHECK(n == before && cap == (before ? 2 * before : 4), "at n=%u: cap %u -> %u", n,
                  before, cap);
        }
        a[n] = (uint8_t)n, b[n] = 1000 + n, c[n] = 0.5 * n;
    }
    CHECK(grew == 6 && cap == 128, "grew %u times to %u, want 6 to 128", grew, cap);
    int bad = 0;
    for (uint32_t n = 0; n < 100; n++)
        bad += a[n] != (uint8_t)n || b[n] != 1000 + n || c[n] != 0.5 * n;
    CHECK(bad == 0, "%d rows lost their values across the growths", bad);
    free(a), free(b), free(c);
}

/* cz_cpu_guard: a trap or a segfault in the guarded call is a failed
 * call naming the signal, the process lives, and the handlers it found are
 * put back. */
static int guard_ok(int i, char *why, int len) {
    return i;
}
static int guard_trap(int i, char *why, int len) {
    if (i == 1) __builtin_trap();
    raise(SIGSEGV);
    return 0;
}
static void mine(int sig) {
    (void)sig;
}
static void test_guard(void) {
    struct sigaction on, now;
    memset(&on, 0, sizeof on);
    on.sa_handler = mine;
    sigaction(SIGSEGV, &on, NULL);
    char why[128] = "";
    CHECK(cz_cpu_guard(guard_ok, 0, why, sizeof why) == 0, "a call that returns 0");
    CHECK(cz_cpu_guard(guard_ok, 7, why, sizeof why) == 7, "the call's own result");
    CHECK(cz_cpu_guard(guard_trap, 1, why, sizeof why) == -1 && strstr(why, "faulted"),
          "a trap: %s", why);
    printf("guard, trap: %s\n", why);
    CHECK(cz_cpu_guard(guard_trap, 2, why, sizeof why) == -1 && strstr(why, "faulted"),
          "a segfault: %s", why);
    printf("guard, segfault: %s\n", why);
    sigaction(SIGSEGV, NULL, &now);
    CHECK(now.sa_handler == mine, "the SIGSEGV handler found before is not put back");
    signal(SIGSEGV, SIG_DFL);
}

/* cz_cpu_choose on a made-up table and CPU (AVX2 only): by rank among
 * what the CPU runs, rank 0 only when forced, a forced name the CPU cannot
 * run refused, an unknown name as auto, and a failing check passed over
 * for the next by rank. */
static int check_fails_for = -1;
static int choice_check(int i, char *why, int len) {
    if (i != check_fails_for) return 0;
    snprintf(why, (size_t)len, "planted");
    return -1;
}
static void test_choose(void) {
    static const cz_cpu_choice t[] = {{"plain", 0, 1},
                                      {"wide", CZ_NEEDS_X86 | CZ_NEEDS_AVX512, 3},
                                      {"mid", CZ_NEEDS_X86 | CZ_NEEDS_AVX2, 2},
                                      {"test", 0, 0}};
    const cz_cpu_choice *table[4] = {&t[0], &t[1], &t[2], &t[3]};
    cz_cpu cpu;
    memset(&cpu, 0, sizeof cpu);
    cpu.avx2 = cpu.fma = 1;
    int x86 = CZ_HAVE_X86_ISAS;
    CHECK(cz_cpu_best_choice(&cpu, table, 4) == (x86 ? 2 : 0), "best: %d",
          cz_cpu_best_choice(&cpu, table, 4));
    struct {
        const char *env;
        int fails, want, refused, failed;
    } cases[] = {
        {NULL, -1, x86 ? 2 : 0, 0, 0},   /* auto: the highest rank it runs */
        {"test", -1, 3, 0, 0},           /* rank 0, forced */
        {"plain", -1, 0, 0, 0},          /* forced below the best */
        {"wide", -1, x86 ? 2 : 0, 1, 0}, /* the CPU cannot: refused, as auto */
        {"bogus", -1, x86 ? 2 : 0, 0, 0},
        {NULL, 2, 0, 0, 1},             /* mid fails its check: plain */
        {"test", 3, x86 ? 2 : 0, 0, 1}, /* the forced one fails: as auto */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (!x86 && cases[k].fails == 2) continue; /* mid is not a candidate there */
        if (cases[k].env)
            setenv("CLOZE_TEST_CHOICE", cases[k].env, 1);
        else
            unsetenv("CLOZE_TEST_CHOICE");
        check_fails_for = cases[k].fails;
        cz_cpu_chosen c;
        cz_cpu_choose(&cpu, table, 4, "CLOZE_TEST_CHOICE", choice_check, &c);
        CHECK(c.index == cases[k].want && c.refused == cases[k].refused &&
                  c.failed == cases[k].failed,
              "case %zu: chose %d refused %d failed %d (%s), want %d %d %d", k, c.index, c.refused,
              c.failed, c.note, cases[k].want, cases[k].refused, cases[k].failed);
    }
    unsetenv("CLOZE_TEST_CHOICE");
}

int main(void) {
    test_grow();
    test_guard();
    test_choose();
    test_thread_plan();
    test_cpu_quota();
    test_philox_kat();
    test_sha256();
    test_distributions();
    test_atomic_write();
    char buf[32];
    CHECK(strcmp(cz_format_duration(3723, buf, sizeof buf), "1h02m03s") == 0, "%s", buf);
    printf("%s\n", failures ? "test_core: FAILED" : "test_core: ok");
    return failures ? 1 : 0;
}
