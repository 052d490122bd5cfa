/* gemm_bf16: the bf16 mode of cz_gemm against its definition
 * cz_gemm_bf16_ref and against the fp32 loops cz_gemm_ref, for every
 * transpose combination, odd m/n/k, leading dimensions wider than the
 * matrices, alpha/beta; 1 and 2 threads bit for bit; operands given in
 * bf16 (cz_mat_bf16) bit for bit with the same operands rounded while
 * packing; cz_bf16_round on values whose rounding is known by hand.
 *
 * One process checks one kernel, the one chosen (cz_bf16_kernel_chosen).
 * `test_gemm_bf16 table` iterates the kernels' table: it runs this program
 * once per entry with CLOZE_BF16_KERNEL set to the entry's name, and
 * checks that the names are unique and parse back. A kernel this CPU
 * cannot run exits 77 (skipped); amx-emulated runs everywhere, so the AMX
 * kernel's packing, blocking and loops are checked on every CPU.
 * `test_gemm_bf16 fallback` (with CLOZE_BF16_PLANT) checks that a kernel
 * failing its check of itself, by a wrong element or a fault, is passed
 * over with one log line and the next kernel's products are right. Shapes
 * cross both kernels' micro-tiles (8 x 48, 32 x 32), k-pair and 32-value
 * tile edges, and their KC, MC and NC blocks.
 *
 * What is compared: vdpbf16ps, AMX's tdpbf16ps and its emulation all add
 * exact bf16 products into fp32, but in different orders and groupings
 * (vdpbf16ps per lane over pairs; tdpbf16ps per tile over 16 pairs), so
 * they differ from each other in the last bits; each is compared with the
 * definition within the fp32 accumulation bound below, not bit for bit
 * with another kernel. The emulation is also checked exactly on sums whose
 * rounding depends on the order the SDM gives (check_emulated_order).
 *
 * Tolerances (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd
 * ed., sec. 3.1; u = 2^-24 for fp32, u_b = 2^-8 for bf16, whose significand
 * has 8 bits with the implicit one):
 * - vs cz_gemm_bf16_ref (same rounded inputs, double sum): the products of
 *   two bf16 values are exact in fp32, so only the fp32 additions round. An
 *   element sees at most k additions inside the micro-kernel, one fused
 *   alpha*acc + C per k block (blocks of >= 2), one beta*C and one alpha
 *   scaling: at most 2(k + 3) roundings, |error| <= 2 (k + 3) u S with
 *   S = |alpha| sum_p |a^_ip b^_pj| + |beta c|. An input rounded the wrong
 *   way (truncation, ties away) or a wrong index gives errors near u_b S.
 * - vs cz_gemm_ref (fp32 inputs): |a b - a^ b^| <= (2 u_b + u_b^2) |a b|,
 *   so |error| <= (2 u_b + u_b^2 + 2 (k + 3) u) S with S from the fp32
 *   values (first order; values in [-1, 1) stay far from under/overflow). */
#include "cloze/core.h"
#include "cloze/cpu.h"
#include "cloze/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float uniform(void) { /* xorshift64*, values in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545F4914F6CDD1DULL) >> 40) / (float)(1 << 23) - 1.0f;
}

/* ties = 1: every value lies exactly halfway between two bf16 values (low
 * 16 bits 0x8000), so round-to-nearest-even decides each one */
static float *random_matrix(size_t count, int ties) {
    float *x = cz_alloc(count * sizeof *x, NULL);
    for (size_t i = 0; i < count; i++) {
        x[i] = uniform();
        if (ties) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            u = (u & 0xffff0000u) | 0x8000u;
            memcpy(&x[i], &u, 4);
        }
    }
    return x;
}

static float bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Values whose bf16 rounding is known by hand (bf16 keeps the top 16 bits). */
static void check_round(void) {
    static const struct {
        uint32_t in, out;
    } cases[] = {
        {0x3f800000, 0x3f800000}, /* 1 */
        {0x3f808000, 0x3f800000}, /* 1 + 2^-8: tie, down to the even 1 */
        {0x3f818000, 0x3f820000}, /* 1 + 3 2^-8: tie, up to the even 1 + 2^-6 */
        {0x3f808001, 0x3f810000}, /* just above the tie: up */
        {0x3f807fff, 0x3f800000}, /* just below: down */
        {0xbf818000, 0xbf820000}, /* negative tie, magnitude to even */
        {0x7f7fffff, 0x7f800000}, /* FLT_MAX: beyond the largest bf16 + half ulp: inf */
        {0x7f800000, 0x7f800000}, /* inf */
        {0x00000001, 0x00000000}, /* subnormal: zero (the instruction's DAZ) */
        {0x807fffff, 0x80000000}, /* negative subnormal: -0 */
        {0x00800000, 0x00800000}, /* FLT_MIN stays */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = bits_of(cz_bf16_round(bits(cases[i].in)));
        CHECK(got == cases[i].out, "cz_bf16_round(0x%08x) = 0x%08x, want 0x%08x", cases[i].in, got,
              cases[i].out);
    }
    CHECK(isnan(cz_bf16_round(bits(0x7fc00001))), "NaN must stay NaN");
    CHECK(isnan(cz_bf16_round(bits(0x7f800001))), "signalling NaN must stay NaN");
}

static int cases_run = 0;

static void check_case(cz_gemm_ctx *g1, cz_gemm_ctx *g2, int ta, int tb, int m, int n, int k,
                       int pad, float alpha, float beta, int ties) {
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t a_rows = ta ? k : m, b_rows = tb ? n : k;
    float *a = random_matrix(a_rows * lda + 1, ties), *b = random_matrix(b_rows * ldb + 1, ties);
    float *c0 = random_matrix((size_t)m * ldc + 1, 0);
    if (beta == 0.0f) /* BLAS rule: C is not read when beta is 0 */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) c0[(size_t)i * ldc + j] = NAN;
    size_t c_bytes = ((size_t)m * ldc + 1) * sizeof(float);
    float *c1 = cz_alloc(c_bytes, NULL), *c2 = cz_alloc(c_bytes, NULL);
    float *ref = cz_alloc(c_bytes, NULL), *ref32 = cz_alloc(c_bytes, NULL);
    memcpy(c1, c0, c_bytes);
    memcpy(c2, c0, c_bytes);
    memcpy(ref, c0, c_bytes);
    memcpy(ref32, c0, c_bytes);

    cz_gemm(g1, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c1, ldc);
    cz_gemm(g2, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c2, ldc);
    cz_gemm_bf16_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, ref, ldc);
    cz_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, ref32, ldc);
    /* B as a weight (cz_gemm_weight in a scope): packed whole once, then
     * read by each thread's part; on each context it must give cz_gemm's
     * bits. In the calls with odd padding (two of a shape's four: beta 1
     * and 0.75), which keeps the emulated kernel's run under qemu short;
     * reuse within a scope: check_weights_scope. */
    if (pad % 2 == 1) {
        float *w[2];
        cz_gemm_weights_begin(g1);
        cz_gemm_weights_begin(g2);
        for (int r = 0; r < 2; r++) {
            w[r] = cz_alloc(c_bytes, NULL);
            memcpy(w[r], c0, c_bytes);
            cz_gemm_weight(r ? g2 : g1, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, w[r], ldc);
        }
        cz_gemm_weights_end(g1);
        cz_gemm_weights_end(g2);
        for (int r = 0; r < 2; r++) {
            CHECK(memcmp(w[r], r ? c2 : c1, c_bytes) == 0,
                  "ta=%d tb=%d m=%d n=%d k=%d pad=%d: B as a weight on %d thread(s) differs from "
                  "cz_gemm",
                  ta, tb, m, n, k, pad, r + 1);
            cz_free(w[r]);
        }
    }

    /* The operands handed over already in bf16 (cz_mat_bf16, as a kernel
     * that wrote them rounded would): the same bits as rounding them while
     * packing, A, B or both, B also as a weight; in the calls without
     * padding (one of a shape's four) */
    if (pad == 0) {
        size_t a_n = a_rows * lda + 1, b_n = b_rows * ldb + 1;
        uint16_t *a16 = cz_alloc(a_n * sizeof *a16, NULL), *b16 = cz_alloc(b_n * sizeof *b16, NULL);
        cz_bf16_store_n(a16, a, a_n);
        cz_bf16_store_n(b16, b, b_n);
        float *w = cz_alloc(c_bytes, NULL);
        for (int form = 0; form < 3; form++) {
            cz_mat am = form == 1 ? cz_mat_f32(a, lda) : cz_mat_bf16(a16, lda);
            cz_mat bm = form == 0 ? cz_mat_f32(b, ldb) : cz_mat_bf16(b16, ldb);
            memcpy(w, c0, c_bytes);
            if (form == 2) cz_gemm_weights_begin(g2);
            cz_gemm_mat(g2, ta, tb, m, n, k, alpha, am, bm, form == 2, beta, w, ldc);
            if (form == 2) cz_gemm_weights_end(g2);
            static const char *what[3] = {"A", "B", "A and B (B a weight)"};
            CHECK(
                memcmp(w, c2, c_bytes) == 0,
                "ta=%d tb=%d m=%d n=%d k=%d: %s given in bf16 differs from rounding while packing",
                ta, tb, m, n, k, what[form]);
        }
        cz_free(w);
        cz_free(a16);
        cz_free(b16);
    }

    const double u = ldexp(1.0, -24), ub = ldexp(1.0, -8);
    int bad = 0;
    long thread_diff = 0;
    for (int i = 0; i < m && bad < 3; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            if (j >= n) { /* row padding: never written */
                if (memcmp(&c1[at], &c0[at], 4) != 0 || memcmp(&c2[at], &c0[at], 4) != 0) {
                    CHECK(0, "ta=%d tb=%d m=%d n=%d k=%d: row padding C[%d,%d] written", ta, tb, m,
                          n, k, i, j);
                    bad++;
                }
                continue;
            }
            double dot_b = 0, dot_32 = 0;
            for (int p = 0; p < k; p++) {
                float av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                float bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                dot_b += fabs((double)cz_bf16_round(av) * cz_bf16_round(bv));
                dot_32 += fabs((double)av * bv);
            }
            double cterm = beta == 0.0f ? 0.0 : fabs(beta * c0[at]);
            double tol_b = 2.0 * (k + 3) * u * (fabs(alpha) * dot_b + cterm) + 1e-30;
            double tol_32 =
                (2 * ub + ub * ub + 2.0 * (k + 3) * u) * (fabs(alpha) * dot_32 + cterm) + 1e-30;
            double e1 = fabs((double)c1[at] - ref[at]), e32 = fabs((double)c1[at] - ref32[at]);
            if (!(e1 <= tol_b && e32 <= tol_32)) {
                CHECK(0,
                      "ta=%d tb=%d m=%d n=%d k=%d pad=%d alpha=%g beta=%g ties=%d: C[%d,%d] = "
                      "%.9g, bf16 ref %.9g (tol %.3g), fp32 ref %.9g (tol %.3g)",
                      ta, tb, m, n, k, pad, alpha, beta, ties, i, j, c1[at], ref[at], tol_b,
                      ref32[at], tol_32);
                bad++;
            }
            if (memcmp(&c1[at], &c2[at], 4) != 0) thread_diff++;
        }
    }
    CHECK(thread_diff == 0,
          "ta=%d tb=%d m=%d n=%d k=%d: %ld elements differ between 1 and 2 threads", ta, tb, m, n,
          k, thread_diff);
    cases_run++;
    cz_free(a);
    cz_free(b);
    cz_free(c0);
    cz_free(c1);
    cz_free(c2);
    cz_free(ref);
    cz_free(ref32);
}

/* core's rule over the bf16 kernels' table (cz_bf16_kernel_best) on
 * made-up CPUs, whatever CPU runs the test. */
static void check_bf16_rule(void) {
    struct {
        int avx512, bf16, amx;
        const char *want; /* NULL: none */
    } cases[] = {
        {1, 1, 1, "amx"}, {1, 1, 0, "vdpbf16ps"},
        {1, 0, 0, NULL},  {0, 0, 1, NULL}, /* AMX without AVX-512: the AMX file needs both */
        {0, 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cz_cpu cpu;
        memset(&cpu, 0, sizeof cpu);
        cpu.avx2 = cpu.fma = 1;
        cpu.avx512f = cpu.avx512dq = cpu.avx512bw = cpu.avx512vl = cases[i].avx512;
        cpu.avx512_bf16 = cases[i].bf16;
        cpu.amx_tile = cpu.amx_bf16 = cases[i].amx;
        const char *got = cz_bf16_kernel_name(cz_bf16_kernel_best(&cpu));
        /* a build for another architecture (aarch64) has no x86 kernel to
         * choose, whatever the CPU record says */
        const char *want = CZ_HAVE_X86_ISAS ? cases[i].want : NULL;
        CHECK(got == want || (got && want && !strcmp(got, want)),
              "bf16 rule, case %zu: %s, want %s", i, got ? got : "none", want ? want : "none");
    }
}

/* The table: every entry has a name, unique, that CLOZE_BF16_KERNEL can
 * spell (lower-case letters, digits, '-'; not "auto") and that parses back
 * to its entry; a rank >= 0; amx-emulated (which runs everywhere) is in it. */
static void check_table(void) {
    int n = cz_bf16_kernel_count(), emulated = 0;
    CHECK(n >= 1, "the bf16 table is empty");
    for (int i = 0; i < n; i++) {
        const char *name = cz_bf16_kernel_name(i);
        CHECK(name && *name, "entry %d has no name", i);
        if (!name || !*name) continue;
        CHECK(strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(name) &&
                  strcmp(name, "auto") != 0,
              "entry %d's name \"%s\" is not one CLOZE_BF16_KERNEL can spell", i, name);
        CHECK(cz_bf16_kernel_parse(name) == i, "name %s parses to %d, not its entry %d", name,
              cz_bf16_kernel_parse(name), i);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(name, cz_bf16_kernel_name(j)) != 0, "name %s twice (%d, %d)", name, j, i);
        emulated += !strcmp(name, "amx-emulated");
    }
    CHECK(emulated == 1, "amx-emulated is not in the table");
    CHECK(cz_bf16_kernel_name(-1) == NULL && cz_bf16_kernel_name(n) == NULL, "names outside");
    CHECK(cz_bf16_kernel_parse("auto") == -1 && cz_bf16_kernel_parse("AMX") == -2 &&
              cz_bf16_kernel_parse("none") == -2,
          "CLOZE_BF16_KERNEL names");
}

/* amx-emulated: tdpbf16ps adds each product to the fp32 accumulator in k
 * order, element 2p of a pair before 2p+1, rounding after each addition
 * (SDM). With e = 2^-24 and 1 x 1 x 4 products (B all ones, beta 0):
 * - 1, e, e, 0: 1 + e is a tie and rounds to the even 1, twice: 1. A sum
 *   in double (or fused, or with more bits) gives 1 + 2e.
 * - e, 0, e, 1: e, then 2e, then 1 + 2e (exact). Adding a pair's two
 *   products first (e + 1 -> 1), or 2p+1 before 2p, gives 1. */
static void check_emulated_order(const cz_gemm_ctx *g) {
    const float e = ldexpf(1.0f, -24);
    const float cases[2][4] = {{1.0f, e, e, 0.0f}, {e, 0.0f, e, 1.0f}};
    const float want[2] = {1.0f, 1.0f + 2 * e};
    const float b[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    for (int t = 0; t < 2; t++) {
        float c = NAN;
        cz_gemm(g, 0, 0, 1, 1, 4, 1.0f, cases[t], 4, b, 1, 0.0f, &c, 1);
        CHECK(bits_of(c) == bits_of(want[t]),
              "amx-emulated, case %d: %.9g, want %.9g (fp32 additions in k order)", t, c, want[t]);
    }
}

/* The weights scope: a weight is packed at its first product in a scope
 * and read from there by the later ones (so a change inside a scope is not
 * seen: that is the caller's promise, and how this test sees the reuse);
 * the next scope packs it again and sees the change; the same weight in
 * its other orientation is its own entry. 2 threads, a product large
 * enough to split. */
static void check_weights_scope(cz_gemm_ctx *g) {
    const int m = 100, n = 200, k = 330; /* 6.6M multiply-adds: 2 threads split it */
    float *a = random_matrix((size_t)m * k, 0), *b = random_matrix((size_t)k * n, 0);
    float *b_old = cz_alloc((size_t)k * n * sizeof(float), NULL);
    memcpy(b_old, b, (size_t)k * n * sizeof(float));
    size_t c_bytes = (size_t)m * n * sizeof(float);
    /* room for m x k too (the B^T products; k > n) */
    float *c = cz_alloc((size_t)m * k * sizeof(float), NULL);
    float *want = cz_alloc((size_t)m * k * sizeof(float), NULL);
    cz_gemm_weights_begin(g);
    cz_gemm_weight(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);    /* B, n x k as tb=0 */
    cz_gemm_weight(g, 0, 1, m, k, n, 1.0f, a, n, b, n, 0.0f, want, k); /* B^T: another entry */
    for (size_t i = 0; i < (size_t)k * n; i++) b[i] = -b[i] * 0.5f;    /* against the promise */
    cz_gemm_weight(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    cz_gemm(g, 0, 0, m, n, k, 1.0f, a, k, b_old, n, 0.0f, want, n);
    CHECK(memcmp(c, want, c_bytes) == 0, "inside a scope the weight's first packing is reused");
    cz_gemm_weights_end(g);
    cz_gemm_weight(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n); /* no scope: as it is now */
    cz_gemm(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, want, n);
    CHECK(memcmp(c, want, c_bytes) == 0, "outside a scope cz_gemm_weight is cz_gemm");
    cz_gemm_weights_begin(g);
    cz_gemm_weight(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    CHECK(memcmp(c, want, c_bytes) == 0, "a new scope packs the weight again (the change seen)");
    cz_gemm_weight(g, 0, 1, m, k, n, 1.0f, a, n, b, n, 0.0f, c, k);
    cz_gemm(g, 0, 1, m, k, n, 1.0f, a, n, b, n, 0.0f, want, k);
    CHECK(memcmp(c, want, (size_t)m * k * sizeof(float)) == 0,
          "the other orientation, re-packed in the new scope");
    cz_gemm_weights_end(g);
    cases_run += 6;
    cz_free(a);
    cz_free(b);
    cz_free(b_old);
    cz_free(c);
    cz_free(want);
}

/* Two threads cut a product by rows or by columns; where both cuts are
 * as even, by which one packs less twice, and a weight packed for the
 * scope counts as nothing to pack: 96 x 192 cuts its columns through
 * cz_gemm (A is the smaller operand) and its rows as a weight. The cut
 * must not change a bit. */
static void check_cut_independent(cz_gemm_ctx *g) {
    const int m = 96, n = 192, k = 330; /* 6.1M multiply-adds: 2 threads */
    float *a = random_matrix((size_t)m * k, 0), *b = random_matrix((size_t)k * n, 0);
    float *c = cz_alloc((size_t)m * n * sizeof(float), NULL);
    float *want = cz_alloc((size_t)m * n * sizeof(float), NULL);
    cz_gemm(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, want, n);
    cz_gemm_weights_begin(g);
    cz_gemm_weight(g, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    cz_gemm_weights_end(g);
    CHECK(memcmp(c, want, (size_t)m * n * sizeof(float)) == 0,
          "a weight's product cut by rows differs from the same product cut by columns");
    cases_run++;
    cz_free(a);
    cz_free(b);
    cz_free(c);
    cz_free(want);
}

/* A context in fp32 mode takes bf16 operands too: widened (exactly) to the
 * floats they stand for, then BLIS, as cz_gemm on those floats. */
static void check_fp32_mode_bf16_operands(const cz_gemm_ctx *g) {
    const int m = 70, n = 90, k = 130;
    float *a = random_matrix((size_t)k * m, 0), *b = random_matrix((size_t)k * n, 0);
    uint16_t *a16 = cz_alloc((size_t)k * m * sizeof *a16, NULL);
    uint16_t *b16 = cz_alloc((size_t)k * n * sizeof *b16, NULL);
    cz_bf16_store_n(a16, a, (size_t)k * m);
    cz_bf16_store_n(b16, b, (size_t)k * n);
    cz_bf16_round_n(a, a, (size_t)k * m);
    cz_bf16_round_n(b, b, (size_t)k * n);
    float *c = cz_alloc((size_t)m * n * sizeof(float), NULL);
    float *want = cz_alloc((size_t)m * n * sizeof(float), NULL);
    /* op(A) = A^T (stored k x m), op(B) = B (k x n) */
    cz_gemm(g, 1, 0, m, n, k, 1.0f, a, m, b, n, 0.0f, want, n);
    cz_gemm_mat(g, 1, 0, m, n, k, 1.0f, cz_mat_bf16(a16, m), cz_mat_bf16(b16, n), 0, 0.0f, c, n);
    CHECK(memcmp(c, want, (size_t)m * n * sizeof(float)) == 0,
          "fp32 mode: bf16 operands differ from the floats they stand for");
    cases_run++;
    cz_free(a);
    cz_free(b);
    cz_free(a16);
    cz_free(b16);
    cz_free(c);
    cz_free(want);
}

/* An element of C depends on its row of op(A) and column of op(B) only, in
 * the same order whatever n: the first 240 columns of a product with
 * n = 256 (vdpbf16ps runs it on its 8 x 32 tile) are the bits of the same
 * product with n = 240 (on its 8 x 48 tile); likewise at n = 1024 / 960. */
static void check_columns_independent_of_n(const cz_gemm_ctx *g) {
    static const int cases[][3] = {{40, 256, 240}, {17, 1024, 960}, {30, 64, 48}};
    for (int t = 0; t < 3; t++) {
        int m = cases[t][0], n = cases[t][1], n2 = cases[t][2], k = 300;
        float *a = random_matrix((size_t)m * k, 0), *b = random_matrix((size_t)n * k, 0);
        float *c = cz_alloc((size_t)m * n * sizeof(float), NULL);
        float *c2 = cz_alloc((size_t)m * n * sizeof(float), NULL);
        for (int tb = 0; tb < 2; tb++) {
            int ldb = tb ? k : n;
            cz_gemm(g, 0, tb, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n);
            cz_gemm(g, 0, tb, m, n2, k, 1.0f, a, k, b, ldb, 0.0f, c2, n);
            long diff = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n2; j++)
                    diff += memcmp(&c[(size_t)i * n + j], &c2[(size_t)i * n + j], 4) != 0;
            CHECK(diff == 0, "tb=%d: %ld of the first %d columns differ between n = %d and n = %d",
                  tb, diff, n2, n, n2);
            cases_run += 2;
        }
        cz_free(a);
        cz_free(b);
        cz_free(c);
        cz_free(c2);
    }
}

/* Runs this program again: under user emulation (tests/aarch64/run.sh) the
 * host cannot exec an emulated program itself, so ctest hands the emulator's
 * command line (CMAKE_CROSSCOMPILING_EMULATOR, words apart by spaces) in
 * CLOZE_TEST_EMULATOR and it goes first. */
static void exec_self(const char *self) {
    static char words[1024];
    char *argv[32];
    int n = 0;
    const char *emu = getenv("CLOZE_TEST_EMULATOR");
    snprintf(words, sizeof words, "%s", emu ? emu : "");
    for (char *w = strtok(words, " "); w && n < 30; w = strtok(NULL, " ")) argv[n++] = w;
    argv[n++] = (char *)self;
    argv[n] = NULL;
    execvp(argv[0], argv);
}

/* Every kernel of the table, each in its own process (the choice is made
 * once per process): this program again with CLOZE_BF16_KERNEL set to the
 * kernel's name. 0: passed; 77: this CPU cannot run it (skipped). */
static void run_table(const char *self) {
    int n = cz_bf16_kernel_count(), passed = 0;
    for (int i = 0; i < n; i++) {
        const char *name = cz_bf16_kernel_name(i);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("CLOZE_BF16_KERNEL", name, 1);
            exec_self(self);
            _exit(127);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "could not run %s for %s", self, name);
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        printf("table: %s: %s\n", name,
               rc == 0    ? "passed"
               : rc == 77 ? "skipped (this CPU cannot run it)"
                          : "FAILED");
        CHECK(rc == 0 || rc == 77, "kernel %s: exit status %d", name, rc);
        CHECK(rc == 0 || strcmp(name, "amx-emulated") != 0, "amx-emulated runs everywhere");
        passed += rc == 0;
    }
    CHECK(passed >= 1, "no kernel of the table ran");
}

/* CLOZE_BF16_KERNEL=amx-emulated with CLOZE_BF16_PLANT set: the kernel
 * computes a wrong element (error) or traps (fault) on every product, so
 * its check of itself must fail, the choice fall back to the next kernel
 * with one log line that names it, and the process live. The choice is
 * made here, with stderr captured to count the lines. */
static int check_fallback(void) {
    const char *forced = getenv("CLOZE_BF16_KERNEL"), *planted = getenv("CLOZE_BF16_PLANT");
    CHECK(forced && planted, "the fallback test needs CLOZE_BF16_KERNEL and CLOZE_BF16_PLANT");
    FILE *log = tmpfile();
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(log), 2);
    int kernel = cz_bf16_kernel_chosen();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(log);
    char line[1024];
    int lines = 0, naming = 0;
    while (fgets(line, sizeof line, log)) {
        printf("log: %s", line);
        lines++;
        naming += forced && strstr(line, forced) && strstr(line, "not used") != NULL;
    }
    fclose(log);
    printf("bf16 kernel: %s\n", cz_bf16_kernel_note());
    CHECK(lines == 1 && naming == 1, "%d log line(s), %d naming %s not used: want one", lines,
          naming, forced ? forced : "?");
    CHECK(cz_bf16_kernel_failed() && !cz_bf16_kernel_refused(), "failed %d refused %d",
          cz_bf16_kernel_failed(), cz_bf16_kernel_refused());
    CHECK(forced && kernel != cz_bf16_kernel_parse(forced), "the planted %s was chosen", forced);
    CHECK(strstr(cz_bf16_kernel_note(), "not used") != NULL, "the note does not say: %s",
          cz_bf16_kernel_note());
    return kernel;
}

int main(int argc, char **argv) {
    check_round();
    check_bf16_rule();
    check_table();
    if (argc > 1 && !strcmp(argv[1], "table")) {
        run_table(argv[0]);
        return check_finish(NULL);
    }
    int fallback = argc > 1 && !strcmp(argv[1], "fallback");
    int kernel = fallback ? check_fallback() : cz_bf16_kernel_chosen();
    cz_cpu cpu;
    char line[256];
    cz_cpu_detect(&cpu);
    printf("cpu: %s\n", cz_cpu_describe(&cpu, line, sizeof line));
    cz_error err;
    cz_gemm_ctx *g1 = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    cz_gemm_ctx *g2 = cz_gemm_setup(CZ_GEMM_AUTO, 2, &err);
    if (!g1 || !g2) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return 1;
    }
    printf("bf16 kernel: %s\n", cz_bf16_kernel_note());
    if (cz_bf16_kernel_refused()) {
        printf("SKIP: %s cannot run here\n", getenv("CLOZE_BF16_KERNEL"));
        return 77;
    }
    if (kernel < 0) {
        /* the mode must refuse with a message that says why */
        int set = cz_gemm_set_bf16(g1, 1, &err);
        if (fallback) {
            CHECK(set == -1 && strstr(err.msg, "passed its check"),
                  "bf16 with no kernel left must fail clearly: %s", err.msg);
            printf("no kernel to fall back to on this CPU (refusal checked)\n");
            return check_finish(NULL);
        }
        CHECK(set == -1 && strstr(err.msg, "AVX512_BF16"),
              "bf16 on a CPU without AVX512_BF16 must fail clearly");
        printf("SKIP: no AVX512_BF16 or AMX on this CPU (refusal checked)\n");
        return failures ? 1 : 77;
    }
    if (cz_gemm_set_bf16(g1, 1, &err) || cz_gemm_set_bf16(g2, 1, &err)) {
        fprintf(stderr, "cz_gemm_set_bf16: %s\n", err.msg);
        return 1;
    }
    CHECK(cz_gemm_is_bf16(g1) && strstr(cz_gemm_describe(g1), "bf16"), "describe: %s",
          cz_gemm_describe(g1));
    printf("gemm: %s\n", cz_gemm_describe(g2));
    /* the context runs the choice and says so */
    const char *name = cz_bf16_kernel_name(kernel);
    CHECK(!strcmp(cz_gemm_kernel(g1), name) && !strcmp(cz_gemm_kernel(g2), name),
          "cz_gemm_kernel %s, the choice was %s", cz_gemm_kernel(g1), name);
    const char *forced = getenv("CLOZE_BF16_KERNEL");
    if (!fallback && forced && *forced && strcmp(forced, "auto") != 0)
        CHECK(!strcmp(name, forced), "CLOZE_BF16_KERNEL=%s ran %s (%s)", forced, name,
              cz_bf16_kernel_note());
    if (!strcmp(name, "amx-emulated")) check_emulated_order(g1);

    /* odd sizes straddle the micro-tiles (8 x 48; 32 x 32) and k-pair and
     * 32-value tile edges; 600 and 400 cross the MC (192; 256) blocks and
     * k = 600 AMX's KC (512; vdpbf16ps runs k <= 768 as one block); n = 3100
     * crosses NC (3072); 1025 crosses KC (256; 512) with one value left,
     * on every kernel; 2 threads (products over 4M multiply-adds) split the
     * rows of 400 x 70 and 200 x 97 and the columns of 36 x 500 */
    static const int shapes[][3] = {{1, 1, 1},    {7, 5, 3},      {13, 33, 2},   {33, 17, 65},
                                    {64, 64, 64}, {129, 67, 200}, {37, 300, 13}, {50, 40, 401},
                                    {3, 129, 1},  {400, 70, 600}, {5, 3100, 40}, {200, 97, 257},
                                    {31, 32, 31}, {33, 65, 1025}, {36, 500, 240}};
    int nshapes = sizeof shapes / sizeof shapes[0];
    /* (the fallback test, for time: a third of the shapes, A and B in the
     * same orientation; the full set runs on each kernel in the table
     * test) */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int s = 0; s < nshapes && !(fallback && ta != tb); s += fallback ? 3 : 1) {
                int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                check_case(g1, g2, ta, tb, m, n, k, 0, 1.0f, 0.0f, 0);
                check_case(g1, g2, ta, tb, m, n, k, 3, 1.0f, 1.0f, 0);
                check_case(g1, g2, ta, tb, m, n, k, 5, -0.5f, 0.0f, s % 2);
                check_case(g1, g2, ta, tb, m, n, k, 1, 1.5f, 0.75f, 1);
            }
    if (!fallback) {
        check_weights_scope(g2);
        check_cut_independent(g2);
        check_columns_independent_of_n(g2);
    }
    /* k = 0: C = beta C, nothing else */
    check_case(g1, g2, 0, 0, 9, 7, 0, 2, 1.0f, 1.0f, 0);
    check_case(g1, g2, 1, 1, 9, 7, 0, 2, 1.0f, 0.0f, 0);

    /* the mode switches off again, and the context says BLIS runs */
    CHECK(cz_gemm_set_bf16(g1, 0, &err) == 0 && !cz_gemm_is_bf16(g1), "bf16 off");
    CHECK(strcmp(cz_gemm_kernel(g1), name) != 0 && !strstr(cz_gemm_describe(g1), "bf16"),
          "fp32 again, still says %s / %s", cz_gemm_kernel(g1), cz_gemm_describe(g1));
    check_fp32_mode_bf16_operands(g1);
    printf("%d products checked\n", cases_run);
    cz_gemm_free(g1);
    cz_gemm_free(g2);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
